"""Run a spec's traffic entries on a running fabric, each in its own thread, at its start time.

A :class:`TrafficJob` runs the entry so that it starts at ``t0 + start_s``
with the traffic package (:func:`testbed.traffic.streams.run_streams` for
``stream``, :func:`testbed.traffic.collectives.run_collective` for
collectives), keeping the raw reports in ``<out>/traffic/entry-<i>/``.

Time zero is not fixed in advance: starting the receivers and senders of
many streams takes seconds on a busy machine.  A stream's processes start at
once; when all of them are ready the job arrives at the run's
:class:`TimeZero`, and when every stream entry has arrived, time zero is set
(:data:`READY_MARGIN_S` later) and the senders are told to send from
``t0 + start_s`` on.  The failure schedule is keyed to the same ``t0``, so
failures hit flowing traffic however long the start took.  A collective
starts its agents at ``t0 + start_s``.

Every process a job starts inside a host goes through a
:class:`~testbed.traffic.hosts.ProcessRegistry`, so an aborted run (error, Ctrl-C, SIGTERM) can kill
them all before the network is torn down, and none is left behind.
"""
import json
import os
import threading
import time

from testbed.traffic.hosts import from_mininet
from testbed.traffic.json_report import DEFAULT_BIN_MS

READY_MARGIN_S = 0.3  # time zero this long after the last traffic process is ready (telling them takes a moment)
READY_TIMEOUT_S = 180.0  # traffic processes not all ready after this long: the run fails
GAP_MS = 5.0
STREAM_LINGER_S = 0.5
MIN_STREAM_S = 0.2


def host_handles(fabric, registry):
    """``{host name: HostHandle}`` of a running fabric, launching through ``registry``."""
    return {host.name: registry.wrap(from_mininet(host)) for host in fabric.hosts}



def on_off_options(entry):
    """StreamOptions' on/off fields of a traffic entry: medians in ms and spreads (none: always on)."""
    if entry.on_s is None:
        return {}
    return {"on_ms": entry.on_s.median * 1000.0, "on_sigma": entry.on_s.sigma,
            "off_ms": entry.off_s.median * 1000.0, "off_sigma": entry.off_s.sigma}

class TimeZero:
    """A run's time zero, set once every stream entry's processes are ready to send.

    Args:
        parties: how many jobs arrive (the stream entries); with none, time zero is set at once.
        margin_s: time zero is this long after the last arrival.
    """

    def __init__(self, parties, margin_s=READY_MARGIN_S):
        self.created_ns = time.time_ns()
        self.margin_s = margin_s
        self.t0_ns = None
        self._waiting = parties
        self._aborted = None
        self._condition = threading.Condition()
        if parties == 0:
            with self._condition:
                self._set()

    def _set(self):
        self.t0_ns = time.time_ns() + int(self.margin_s * 1e9)
        self._condition.notify_all()

    def arrive(self):
        """A job is ready: block until time zero is set and return it (ns).

        Raises:
            RuntimeError: the run was aborted before time zero.
        """
        with self._condition:
            self._waiting -= 1
            if self._waiting == 0 and self.t0_ns is None:
                self._set()
            return self._wait()

    def _wait(self, timeout=None):
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.t0_ns is None and self._aborted is None:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return None
            self._condition.wait(remaining)
        if self.t0_ns is None:
            raise RuntimeError(f"no time zero: {self._aborted}")
        return self.t0_ns

    def wait(self, timeout):
        """Time zero (ns), or None if not set within ``timeout`` seconds.

        Raises:
            RuntimeError: aborted.
        """
        with self._condition:
            return self._wait(timeout)

    def abort(self, reason):
        """Release every waiter with an error (a job failed, or the run is stopping)."""
        with self._condition:
            if self.t0_ns is None:
                self._aborted = reason
            self._condition.notify_all()


class TrafficJob(threading.Thread):
    """One traffic entry of a spec, run in a thread.

    Args:
        index: the entry's position in the spec.
        entry: the :class:`~testbed.experiment.spec.TrafficSpec`.
        handles: ``{host name: HostHandle}``.
        time_zero: the run's :class:`TimeZero` (a stream entry arrives there when ready).
        run_duration_s: the spec's ``duration_s`` (bounds entries without their own duration).
        workdir: folder for the entry's raw reports (created).
        bin_ms: receiver timeline bin width.

    Attributes:
        report: the traffic report (None until finished or on error).
        error: error text, or None.
    """

    def __init__(self, index, entry, handles, time_zero, run_duration_s, workdir, bin_ms=DEFAULT_BIN_MS):
        super().__init__(name=f"traffic-{index}", daemon=True)
        self.index = index
        self.entry = entry
        self.hosts = [handles[name] for name in entry.hosts]
        self.time_zero = time_zero
        self.run_duration_s = run_duration_s
        self.workdir = workdir
        self.bin_ms = bin_ms
        self.report = None
        self.error = None
        self._cancel = threading.Event()

    def cancel(self):
        """Do not start if not started yet."""
        self._cancel.set()

    def _stream_duration(self):
        if self.entry.duration_s is not None:
            return self.entry.duration_s
        return max(MIN_STREAM_S, self.run_duration_s - self.entry.start_s - STREAM_LINGER_S - 0.5)

    def run(self):
        """Wait for the start time, run the entry, keep its report (the thread's body)."""
        from testbed.traffic.collectives import CollectiveOptions, run_collective
        from testbed.traffic.streams import StreamOptions, run_streams

        os.makedirs(self.workdir, exist_ok=True)
        entry = self.entry
        offset_ns = int(entry.start_s * 1e9)
        try:
            if entry.pattern == "stream":
                # the processes start now; once all are ready, time zero is set and they send from start_s
                def start_gate():
                    if self._cancel.is_set():
                        raise RuntimeError("cancelled before it started")
                    return self.time_zero.arrive() + offset_ns

                options = StreamOptions(duration=self._stream_duration(), size=entry.size_bytes, qps=entry.qps,
                                        qp_scaling=entry.qp_scaling, rate_mbps=entry.rate_mbps, mtu=entry.mtu,
                                        bin_ms=self.bin_ms, gap_ms=GAP_MS, linger=STREAM_LINGER_S, job=entry.job,
                                        udp_sport=entry.udp_sport, pacing=entry.pacing, gap_sigma=entry.gap_sigma,
                                        seed=entry.seed, **on_off_options(entry))
                self.report = run_streams(self.hosts, options, workdir=self.workdir, start_gate=start_gate)
            else:
                t0_ns = self.time_zero.wait(READY_TIMEOUT_S)
                wait_s = 0.0 if t0_ns is None else (t0_ns + offset_ns - time.time_ns()) / 1e9
                if t0_ns is None or (wait_s > 0 and self._cancel.wait(wait_s)) or self._cancel.is_set():
                    self.error = "cancelled before it started"
                    return
                timeout = entry.duration_s or max(5.0, self.run_duration_s - entry.start_s)
                options = CollectiveOptions(qps=entry.qps, qp_scaling=entry.qp_scaling, rate_mbps=entry.rate_mbps,
                                            mtu=entry.mtu, seed=entry.seed, bin_ms=self.bin_ms,
                                            timeout=timeout + 30.0, job=entry.job, udp_sport=entry.udp_sport)
                self.report = run_collective(self.hosts, entry.pattern, entry.size_bytes, options,
                                             workdir=self.workdir)
        except BaseException as error:  # noqa: BLE001 - reported to the runner, which decides
            self.error = f"{type(error).__name__}: {error}"
            self.time_zero.abort(f"traffic[{self.index}] failed")  # the other entries must not wait for it
            return
        with open(os.path.join(self.workdir, "report.json"), "w") as handle:
            json.dump(self.report, handle, indent=1)
