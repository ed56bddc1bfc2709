"""Point-to-point RoCEv2 streams between host pairs, for failure experiments.

:func:`run_streams` starts a receiver (``python -m testbed.traffic.receiver``)
in every destination host, waits until each has its socket open, then starts
the senders (``python -m testbed.traffic.sender``) for a fixed duration, and
combines both sides' JSON reports: per-QP loss (PSN gaps and sender-vs-receiver
counts, so tail loss is included), out-of-sequence counts, throughput
timeline, latency, and delivery gaps from which
:func:`testbed.traffic.metrics.time_to_recover` tells when delivery resumed
after a failure.  Each process announces itself and hands its report back on
its stdout, so a host on another server needs no file of this one.
"""
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from typing import Optional

from testbed.errors import EmulationError, ParameterError
from testbed.traffic import hosts as host_module
from testbed.traffic import metrics
from testbed.traffic import qp as qp_module
from testbed.traffic import roce
from testbed.traffic.json_report import DEFAULT_BIN_MS
from testbed.traffic.receiver import DEFAULT_FLOW_GAP_MS, reconcile
from testbed.traffic.sender import PACING_RULES


#: how long the receivers (then the senders) of a run may take to start and announce themselves
START_TIMEOUT_S = 120


def pair_hosts(hosts):
    """Pair hosts as (h1 -> h2), (h3 -> h4), ...

    Raises:
        ParameterError: odd number of hosts or fewer than two.
    """
    if len(hosts) < 2 or len(hosts) % 2:
        raise ParameterError("--hosts", [h.name for h in hosts], "an even number (>= 2) of hosts: sender,receiver,...")
    return [(hosts[i], hosts[i + 1]) for i in range(0, len(hosts), 2)]


def _expect_line(process, deadline, what, expected):
    """Read a traffic process's announcement (``ready``, ``sending``) before ``deadline``.

    Raises:
        EmulationError: it said something else, did not answer in time or exited first.
    """
    line = host_module.read_line(process, deadline, what)
    if line != expected:
        raise EmulationError(f"{what} said {line!r} instead of {expected!r}")


def packet_spacing_ms(rate_mbps, qps, mtu):
    """Time between two packets of one QP at its paced rate (``rate_mbps`` shared by ``qps`` QPs).

    >>> round(packet_spacing_ms(1.0, 2, 512), 2)
    9.12
    """
    return (mtu + roce.FRAME_OVERHEAD) * 8 / (rate_mbps * 1e6 / qps) * 1000


def flow_gap_threshold_ms(rate_mbps, qps, mtu):
    """The shortest delivery gap of one QP that counts as an interruption (``qp_gaps``).

    Three times a QP's packet spacing at its paced rate (``rate_mbps`` shared by
    ``qps`` QPs, packets of ``mtu`` payload bytes), and at least the receivers'
    default: a slow flow's ordinary spacing must not look like an outage.

    >>> round(flow_gap_threshold_ms(1.0, 4, 1024), 1)
    103.9
    >>> flow_gap_threshold_ms(100.0, 1, 1024)
    20.0
    """
    if not rate_mbps:
        return DEFAULT_FLOW_GAP_MS
    return max(DEFAULT_FLOW_GAP_MS, 3 * packet_spacing_ms(rate_mbps, qps, mtu))


@dataclasses.dataclass(frozen=True)
class StreamOptions:
    """What :func:`run_streams` sends and how it measures it.

    Attributes:
        duration: seconds each sender sends.
        size: message size in bytes.
        qps: queue pairs per pair.
        qp_scaling: ``roundrobin`` or ``split``.
        rate_mbps: each sender's rate.
        mtu: path MTU.
        on_ms / off_ms: on/off bursts (with ``on_sigma`` / ``off_sigma``: the medians of log-normal lengths).
        bin_ms: timeline bin width.
        gap_ms: shortest delivery gap recorded.
        loss_timeout: PSN gap timeout.
        linger: seconds receivers keep listening after the senders stop.
        job: traffic job number 1..255 (receivers keep only its packets, so runs may
            share hosts); None: a fresh one.
        udp_sport: UDP source-port rule, ``per_qp`` (default) or ``per_nic_pair``
            (:data:`testbed.traffic.qp.UDP_SPORT_RULES`).
        pacing: ``even``, ``poisson`` or ``lognormal`` (:data:`testbed.traffic.sender.PACING_RULES`).
        gap_sigma: log-scale spread of ``lognormal`` gaps.
        on_sigma / off_sigma: log-scale spreads of the on and off periods (0: fixed lengths).
        seed: seeds the drawn gaps and periods (pair ``i`` uses ``seed + i``).
    """

    duration: float = 2.0
    size: int = 1 << 20
    qps: int = 1
    qp_scaling: str = "roundrobin"
    rate_mbps: float = 100.0
    mtu: int = roce.DEFAULT_MTU
    on_ms: float = 0.0
    off_ms: float = 0.0
    bin_ms: float = DEFAULT_BIN_MS
    gap_ms: float = 5.0
    loss_timeout: float = 0.2
    linger: float = 1.0
    job: Optional[int] = None
    udp_sport: str = qp_module.UDP_SPORT_PER_QP
    pacing: str = "even"
    gap_sigma: float = 1.0
    on_sigma: float = 0.0
    off_sigma: float = 0.0
    seed: int = 0

    def draws(self):
        """True when the senders draw gaps or on/off periods (then the seed matters)."""
        return self.pacing != "even" or bool(self.on_sigma or self.off_sigma)


def run_streams(hosts, options=None, *, python=None, on_start=None, failure_ns=None, workdir=None,
                start_at_ns=None, start_gate=None, **fields):
    """Run RoCEv2 streams between host pairs and return the combined report.

    Args:
        hosts: list of :class:`testbed.traffic.hosts.HostHandle`, paired by :func:`pair_hosts`.
        options: the :class:`StreamOptions` (default: its defaults).
        **fields: :class:`StreamOptions` fields as keywords, replacing those of ``options``
            (``run_streams(hosts, duration=1.0, qps=4)``).
        python: interpreter for the processes (default: this one).
        on_start: callable ``(start_ns)`` run once the senders start (schedule failures here);
            it may return the failure time in ns to compute the time to recover.
        failure_ns: when a failure happened (alternative to ``on_start``'s return value).
        workdir: where to keep the raw reports (``tx-<pair>.json``, ``rx-<pair>.json``; default: nowhere).
        start_at_ns: wall-clock time (ns) the senders start sending: the processes start at once
            and wait for it, so a run's schedule does not depend on how long they take to start
            (a sender ready only later starts when ready; ``start_ns`` in the report is then late).
        start_gate: instead of ``start_at_ns``, a callable run once every receiver listens and
            every sender is ready to send; it may block (an experiment waits for all its traffic
            entries) and returns the wall-clock time (ns) the senders start, which they are told
            then (on their stdin).

    Returns:
        dict with ``pairs`` (sender, receiver, reconcile per pair) and totals:
        ``sent_packets``, ``received_packets``, ``lost_packets``, ``out_of_sequence``,
        ``duplicates``, ``goodput_mbps``, ``gaps`` (receiver-wide), ``qp_gaps`` (per flow) and
        ``recovery``: the time to recover, the longer of ``host_recovery`` (receiver-wide
        gap, :func:`metrics.time_to_recover`) and ``flow_recovery`` (the longest gap of one
        QP around the failure, :func:`metrics.flow_recovery`; what an ECMP fabric shows).

    Raises:
        TypeError: a keyword that is not a :class:`StreamOptions` field.
        ParameterError: an odd number of hosts, a duration <= 0 or an unknown ``udp_sport``.
        EmulationError: a traffic process failed or did not finish in time.
    """
    options = dataclasses.replace(options if options is not None else StreamOptions(), **fields)
    pairs = pair_hosts(hosts)
    if options.duration <= 0:
        raise ParameterError("--duration", options.duration, "a number of seconds > 0")
    if options.udp_sport not in qp_module.UDP_SPORT_RULES:
        raise ParameterError("--udp-sport", options.udp_sport, "one of: " + ", ".join(qp_module.UDP_SPORT_RULES))
    if options.pacing not in PACING_RULES:
        raise ParameterError("--pacing", options.pacing, "one of: " + ", ".join(PACING_RULES))
    job = qp_module.allocate_job() if options.job is None else options.job
    python = python or sys.executable
    processes = []
    try:
        receivers = []
        for _, dst in pairs:
            process = dst.popen(_receiver_argv(python, dst, job, options), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
            processes.append(process)
            receivers.append(process)
        deadline = time.monotonic() + START_TIMEOUT_S
        for (_, dst), process in zip(pairs, receivers):
            _expect_line(process, deadline, f"receiver on {dst.name}", "ready")
        senders = []
        for index, (src, dst) in enumerate(pairs):
            argv = _sender_argv(python, src, dst, index, job, options)
            if start_gate is not None:
                argv += ["--start-at-stdin"]
            elif start_at_ns is not None:
                argv += ["--start-at-ns", str(int(start_at_ns))]
            process = src.popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            processes.append(process)
            senders.append(process)
        # time zero is when every sender is about to send (process start-up can take long)
        deadline = time.monotonic() + START_TIMEOUT_S
        for (src, _), process in zip(pairs, senders):
            _expect_line(process, deadline, f"sender on {src.name}", "sending")
        if start_gate is not None:
            start_at_ns = start_gate()
            for process in senders:
                process.stdin.write(f"{int(start_at_ns)}\n".encode())
                process.stdin.flush()  # stdin stays open: communicate() closes it (it flushes it first)
        start_ns = time.time_ns() if start_at_ns is None else max(time.time_ns(), start_at_ns)
        if on_start is not None:
            returned = on_start(start_ns)
            if failure_ns is None and isinstance(returned, int):
                failure_ns = returned
        tx_reports, rx_reports = _finish(pairs, senders, receivers, options)
        results = []
        for index, ((src, dst), tx, rx) in enumerate(zip(pairs, tx_reports, rx_reports)):
            if workdir is not None:
                for name, report in ((f"tx-{index}.json", tx), (f"rx-{index}.json", rx)):
                    with open(os.path.join(workdir, name), "w") as handle:
                        json.dump(report, handle, indent=1)
            results.append({"src": src.name, "dst": dst.name, "sender": tx, "receiver": rx,
                            "reconcile": reconcile(tx, rx)})
        return summarize_streams(results, start_ns, failure_ns,
                                 {"duration": options.duration, "size": options.size, "qps": options.qps,
                                  "qp_scaling": options.qp_scaling, "rate_mbps": options.rate_mbps,
                                  "mtu": options.mtu, "on_ms": options.on_ms, "off_ms": options.off_ms,
                                  "bin_ms": options.bin_ms, "job": job, "udp_sport": options.udp_sport,
                                  "pacing": options.pacing, "gap_sigma": options.gap_sigma,
                                  "on_sigma": options.on_sigma, "off_sigma": options.off_sigma})
    finally:
        host_module.stop_processes(processes)


def _receiver_argv(python, dst, job, options):
    """The command line of the receiver of one pair, on ``dst``."""
    flow_gap_ms = flow_gap_threshold_ms(options.rate_mbps, options.qps, options.mtu)
    return [python, "-m", "testbed.traffic.receiver", "--capture", "raw", "--intf", dst.intf,
            "--job", str(job), "--duration", str(options.duration + options.linger + 60.0),
            "--bin-ms", str(options.bin_ms), "--gap-ms", str(options.gap_ms), "--flow-gap-ms", str(flow_gap_ms),
            "--loss-timeout", str(options.loss_timeout), "--ready-file", "-"]


def _sender_argv(python, src, dst, index, job, options):
    """The command line of the sender of pair ``index`` (ranks ``2 * index`` -> ``2 * index + 1``), on ``src``."""
    return [python, "-m", "testbed.traffic.sender", "--intf", src.intf, "--src-ip", src.ip,
            "--dst-ip", dst.ip, "--dst-mac", src.frame_destination(dst), "--src-rank", str(2 * index),
            "--dst-rank", str(2 * index + 1), "--size", str(options.size), "--qps", str(options.qps),
            "--qp-scaling", options.qp_scaling, "--rate-mbps", str(options.rate_mbps),
            "--duration", str(options.duration), "--mtu", str(options.mtu), "--on-ms", str(options.on_ms),
            "--off-ms", str(options.off_ms), "--bin-ms", str(options.bin_ms),
            "--job", str(job), "--udp-sport", options.udp_sport, "--pacing", options.pacing,
            "--gap-sigma", str(options.gap_sigma), "--on-sigma", str(options.on_sigma),
            "--off-sigma", str(options.off_sigma),
            # the seed also sets the start PSNs: given only where it draws gaps or periods
            *(("--seed", str(options.seed + index)) if options.draws() else ()),
            "--ready-file", "-"]


def _finish(pairs, senders, receivers, options):
    """Wait for the senders, let the receivers linger, stop them; return the senders' and receivers' reports.

    Raises:
        EmulationError: a process did not finish in time or failed (named, its stderr's tail quoted).
    """
    tx = [host_module.finish(process, options.duration + 30, f"sender on {src.name}")
          for (src, _), process in zip(pairs, senders)]
    time.sleep(options.linger)
    for process in receivers:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    rx = [host_module.finish(process, 30, f"receiver on {dst.name}") for (_, dst), process in zip(pairs, receivers)]
    return tx, rx


def summarize_streams(results, start_ns, failure_ns, options):
    """Totals over stream pairs (see :func:`run_streams`)."""
    sent = sum(r["reconcile"]["sent"] for r in results)
    received = sum(r["reconcile"]["received"] for r in results)
    totals = {}
    for r in results:
        for name, value in r["receiver"]["totals"].items():
            totals[name] = totals.get(name, 0) + value
    gaps = sorted(tuple(gap) for r in results for gap in r["receiver"]["gaps"])
    qp_gaps = sorted(list(gap) for r in results for gap in r["receiver"].get("qp_gaps", []))
    host_recovery = flow_recovery = None
    if failure_ns is not None:
        host_recovery = metrics.time_to_recover(gaps, failure_ns)
        flow_recovery = metrics.flow_recovery(qp_gaps, failure_ns)
    recovery = host_recovery
    if flow_recovery is not None and (recovery is None or flow_recovery["seconds"] > recovery["seconds"]):
        recovery = flow_recovery
    active = [r["receiver"] for r in results if r["receiver"]["first_rx_ns"] is not None]
    goodput = sum(r["goodput_mbps"] for r in active)
    summary = {
        "pattern": "stream", "options": options, "start_ns": start_ns,
        "sent_packets": sent, "received_packets": received, "lost_packets": max(0, sent - received),
        "psn_gap_losses": totals.get("lost", 0), "out_of_sequence": totals.get("out_of_sequence", 0),
        "late": totals.get("late", 0), "duplicates": totals.get("duplicates", 0),
        "goodput_mbps": goodput, "gaps": [list(gap) for gap in gaps], "qp_gaps": qp_gaps, "failure_ns": failure_ns,
        # streams deliver continuously on every QP, so a flow's own gap is its outage: on an ECMP
        # fabric only the flows hashed onto a failed link stop, which a receiver-wide gap hides
        "recovery": recovery, "host_recovery": host_recovery, "flow_recovery": flow_recovery,
        "pairs": results,
    }
    if failure_ns is None and gaps:
        longest = max(gaps, key=lambda gap: gap[1] - gap[0])
        summary["longest_gap"] = {"seconds": (longest[1] - longest[0]) / 1e9, "stopped_ns": longest[0],
                                  "resumed_ns": longest[1]}
    return summary
