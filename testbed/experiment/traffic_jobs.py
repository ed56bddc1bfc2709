"""Run a spec's traffic entries on a running fabric, each in its own thread, at its start time.

A :class:`TrafficJob` runs the entry so that it starts at ``t0 + start_s``
with the traffic package (:func:`testbed.traffic.streams.run_streams` for
``stream``, :func:`testbed.traffic.collectives.run_collective` for
collectives), keeping the raw reports in ``<out>/traffic/entry-<i>/``.  A
stream's processes start at once and send from ``t0 + start_s`` on, so the
failure schedule (keyed to the same ``t0``) hits flowing traffic however long
the processes took to start; a collective starts its agents at ``t0 + start_s``.

Every process a job starts inside a host goes through a
:class:`~testbed.traffic.hosts.ProcessRegistry`, so an aborted run (error, Ctrl-C, SIGTERM) can kill
them all before the network is torn down, and none is left behind.
"""
import json
import os
import threading
import time

from testbed.traffic.hosts import from_mininet

DEFAULT_BIN_MS = 10.0
GAP_MS = 5.0
STREAM_LINGER_S = 0.5
MIN_STREAM_S = 0.2


def host_handles(fabric, registry):
    """``{host name: HostHandle}`` of a running fabric, launching through ``registry``."""
    return {host.name: registry.wrap(from_mininet(host)) for host in fabric.hosts}


class TrafficJob(threading.Thread):
    """One traffic entry of a spec, run in a thread.

    Args:
        index: the entry's position in the spec.
        entry: the :class:`~testbed.experiment.spec.TrafficSpec`.
        handles: ``{host name: HostHandle}``.
        t0_ns: the run's time zero (wall clock).
        run_duration_s: the spec's ``duration_s`` (bounds entries without their own duration).
        workdir: folder for the entry's raw reports (created).
        bin_ms: receiver timeline bin width.

    Attributes:
        report: the traffic report (None until finished or on error).
        error: error text, or None.
    """

    def __init__(self, index, entry, handles, t0_ns, run_duration_s, workdir, bin_ms=DEFAULT_BIN_MS):
        super().__init__(name=f"traffic-{index}", daemon=True)
        self.index = index
        self.entry = entry
        self.hosts = [handles[name] for name in entry.hosts]
        self.t0_ns = t0_ns
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
        from testbed.traffic.collectives import run_collective
        from testbed.traffic.streams import run_streams

        os.makedirs(self.workdir, exist_ok=True)
        entry = self.entry
        start_ns = self.t0_ns + int(entry.start_s * 1e9)
        # streams start their processes now and send from start_ns on; collectives start at start_ns
        wait_s = 0.0 if entry.pattern == "stream" else (start_ns - time.time_ns()) / 1e9
        if wait_s > 0 and self._cancel.wait(wait_s):
            self.error = "cancelled before it started"
            return
        if self._cancel.is_set():
            self.error = "cancelled before it started"
            return
        try:
            if entry.pattern == "stream":
                self.report = run_streams(self.hosts, duration=self._stream_duration(), size=entry.size_bytes,
                                          qps=entry.qps, qp_scaling=entry.qp_scaling, rate_mbps=entry.rate_mbps,
                                          mtu=entry.mtu, bin_ms=self.bin_ms, gap_ms=GAP_MS,
                                          linger=STREAM_LINGER_S, workdir=self.workdir, job=entry.job,
                                          udp_sport=entry.udp_sport, start_at_ns=start_ns)
            else:
                timeout = entry.duration_s or max(5.0, self.run_duration_s - entry.start_s)
                self.report = run_collective(self.hosts, entry.pattern, entry.size_bytes, qps=entry.qps,
                                             qp_scaling=entry.qp_scaling, rate_mbps=entry.rate_mbps, mtu=entry.mtu,
                                             seed=entry.seed, bin_ms=self.bin_ms, timeout=timeout + 30.0,
                                             workdir=self.workdir, job=entry.job, udp_sport=entry.udp_sport)
        except BaseException as error:  # noqa: BLE001 - reported to the runner, which decides
            self.error = f"{type(error).__name__}: {error}"
            return
        with open(os.path.join(self.workdir, "report.json"), "w") as handle:
            json.dump(self.report, handle, indent=1)
