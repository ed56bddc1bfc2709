"""Collective traffic patterns over a set of hosts, and their orchestration.

A pattern becomes a *plan*: for each rank an ordered list of steps; a step
lists the bytes the rank sends to peers and the bytes it must receive from
peers.  Steps are dependent: a rank starts step ``k + 1`` only once all data
of step ``k`` has really arrived (the agent watches its receiver), as in a
ring AllReduce where the reduced chunk of one step is the input of the next.

Patterns (``size`` is the per-rank buffer in bytes, ``n`` ranks):

* ``allreduce``: ring, ``2(n-1)`` steps; each sends ``size/n`` to the right
  neighbour and receives ``size/n`` from the left (reduce-scatter then all-gather).
* ``allgather`` / ``reducescatter``: ring, ``n-1`` steps of ``size/n``.
* ``alltoall``: one step; ``size/n`` to and from every other rank.
* ``alltoallv``: one step; per-pair sizes drawn from ``[0.5, 1.5] * size/n`` (seeded).
* ``incast``: ranks ``1..n-1`` send ``size`` to rank 0 (N:1).
* ``permutation``: each rank sends ``size`` to a random other rank, every
  rank receiving exactly once (a seeded derangement).

:func:`run_collective` runs a plan on hosts (:mod:`testbed.traffic.hosts`):
it starts one agent per host (``python -m testbed.traffic.agent``; its plan on
its stdin, its report on its stdout, so an agent on another server needs no
file of this one), waits until every agent's receiver is open, releases them
at a common instant (hosts share the clock) and gathers their reports.  The completion time is
from that instant to the last rank finishing its last step.  With
``admission=True`` every chunk waits for a clear-to-send from its receiver
(seed 004 5.2.2).
"""
import dataclasses
import json
import os
import random
import subprocess
import sys
import time
from typing import Optional

from testbed.errors import EmulationError, ParameterError
from testbed.traffic import hosts as host_module
from testbed.traffic import metrics
from testbed.traffic import qp as qp_module
from testbed.traffic import roce

PATTERNS = ("allreduce", "allgather", "reducescatter", "alltoall", "alltoallv", "incast", "permutation")
"""Collective pattern names."""

STEP_SHIFT = 16
"""Stream id of a chunk: ``step << STEP_SHIFT | chunk``."""


def _share(size, parts):
    """``ceil(size / parts)``, at least 1."""
    return max(1, -(-size // parts))


def ring_steps(n, step_count, chunk):
    """Steps of a ring algorithm: send ``chunk`` right, receive ``chunk`` from the left."""
    plan = []
    for rank in range(n):
        right = (rank + 1) % n
        left = (rank - 1) % n
        plan.append([{"sends": [[right, chunk]], "recvs": [[left, chunk]]} for _ in range(step_count)])
    return plan


def derangement(n, rng):
    """A random permutation of ``range(n)`` with no fixed point (n >= 2)."""
    while True:
        order = list(range(n))
        rng.shuffle(order)
        if all(order[i] != i for i in range(n)):
            return order


def build_plan(pattern, n, size, seed=0):
    """Per-rank step lists of a collective pattern.

    Args:
        pattern: one of :data:`PATTERNS`.
        n: number of ranks (>= 2).
        size: per-rank buffer size in bytes (>= 1).
        seed: seed of the random patterns.

    Returns:
        list[list[dict]]: ``plan[rank][step] = {"sends": [[peer, bytes]], "recvs": [[peer, bytes]]}``.

    Raises:
        ParameterError: unknown pattern, n < 2, size < 1.
    """
    if pattern not in PATTERNS:
        raise ParameterError("pattern", pattern, "one of: " + ", ".join(PATTERNS))
    if n < 2:
        raise ParameterError("--hosts", n, "at least 2 hosts")
    if size < 1:
        raise ParameterError("--size", size, "an integer >= 1 (bytes)")
    rng = random.Random(seed)
    if pattern == "allreduce":
        return ring_steps(n, 2 * (n - 1), _share(size, n))
    if pattern in ("allgather", "reducescatter"):
        return ring_steps(n, n - 1, _share(size, n))
    if pattern in ("alltoall", "alltoallv"):
        base = _share(size, n)
        matrix = [[0] * n for _ in range(n)]
        for src in range(n):
            for dst in range(n):
                if src != dst:
                    matrix[src][dst] = base if pattern == "alltoall" else max(1, int(base * rng.uniform(0.5, 1.5)))
        return [[{"sends": [[peer, matrix[rank][peer]] for peer in range(n) if peer != rank],
                  "recvs": [[peer, matrix[peer][rank]] for peer in range(n) if peer != rank]}]
                for rank in range(n)]
    if pattern == "incast":
        plan = [[{"sends": [], "recvs": [[src, size] for src in range(1, n)]}]]
        plan += [[{"sends": [[0, size]], "recvs": []}] for _ in range(1, n)]
        return plan
    order = derangement(n, rng)
    inverse = {dst: src for src, dst in enumerate(order)}
    return [[{"sends": [[order[rank], size]], "recvs": [[inverse[rank], size]]}] for rank in range(n)]


def validate_options(pattern, size, qps, rate_mbps, qp_scaling, hosts_count=None, udp_sport=qp_module.UDP_SPORT_PER_QP):
    """Check user options of a traffic run; raise ParameterError naming the option."""
    if pattern not in PATTERNS and pattern != "stream":
        raise ParameterError("PATTERN", pattern, "one of: " + ", ".join(PATTERNS + ("stream",)))
    if not isinstance(size, int) or size < 1:
        raise ParameterError("--size", size, "an integer >= 1 (bytes)")
    if not isinstance(qps, int) or not 1 <= qps <= qp_module.MAX_QPS - 1:
        raise ParameterError("--qps", qps, f"an integer in 1..{qp_module.MAX_QPS - 1}")
    if rate_mbps is not None and not rate_mbps > 0:
        raise ParameterError("--rate-mbps", rate_mbps, "a number > 0 (Mbit/s)")
    if qp_scaling not in qp_module.QP_SCALING_STRATEGIES:
        raise ParameterError("--qp-scaling", qp_scaling, "one of: " + ", ".join(qp_module.QP_SCALING_STRATEGIES))
    if udp_sport not in qp_module.UDP_SPORT_RULES:
        raise ParameterError("--udp-sport", udp_sport, "one of: " + ", ".join(qp_module.UDP_SPORT_RULES))
    if hosts_count is not None and hosts_count < 2:
        raise ParameterError("--hosts", hosts_count, "at least 2 hosts")


@dataclasses.dataclass(frozen=True)
class CollectiveOptions:
    """How :func:`run_collective` sends a collective's data and measures it.

    Attributes:
        qps: queue pairs per NIC pair.
        qp_scaling: ``roundrobin`` or ``split``.
        rate_mbps: each host's sending rate (None: unpaced).
        mtu: path MTU.
        chunk_bytes: a step's transfer to one peer is posted as messages of this size
            (with admission, each needs a clear-to-send).
        admission: receiver-driven admission (CTS before each chunk).
        channels: CTS granted ahead per peer (outstanding chunks).
        seed: seed of random patterns.
        step_timeout: an agent gives a step up after this long without progress
            (None: 3 s, or longer than all retransmission retries when ``retransmit``).
        loss_timeout: PSN gap timeout of the receivers.
        bin_ms: timeline bins.
        retransmit: reliable connection: receivers ACK every message and NAK PSN gaps,
            senders resend NAK'd messages and those whose ACK did not come within
            ``ack_timeout`` (doubling per retry up to 4x, ``retry_count`` retries);
            without it losses stay losses.
        ack_timeout: the senders' local ACK timeout in seconds.
        retry_count: retransmissions of a message before giving it up.
        job: traffic job number 1..255 (the top byte of every QP number; receivers keep
            only their job's packets, so runs may share hosts); None: a fresh one.
        timeout: overall limit in seconds.
        udp_sport: UDP source-port rule of the data QPs, ``per_qp`` (default) or
            ``per_nic_pair`` (:data:`testbed.traffic.qp.UDP_SPORT_RULES`).
    """

    qps: int = 1
    qp_scaling: str = "roundrobin"
    rate_mbps: Optional[float] = 200.0
    mtu: int = roce.DEFAULT_MTU
    chunk_bytes: int = 64 * 1024
    admission: bool = False
    channels: int = 2
    seed: int = 0
    step_timeout: Optional[float] = None
    loss_timeout: float = 0.2
    bin_ms: float = 10.0
    retransmit: bool = True
    ack_timeout: float = 0.5
    retry_count: int = 7
    job: Optional[int] = None
    timeout: float = 180.0
    udp_sport: str = qp_module.UDP_SPORT_PER_QP

    def resolved_step_timeout(self):
        """``step_timeout``, or its default: longer than all retries with ``retransmit``, else 3 s."""
        if self.step_timeout is not None:
            return self.step_timeout
        if self.retransmit:
            return sum(self.ack_timeout * 2 ** min(retry, 2) for retry in range(self.retry_count + 1)) + 1.0
        return 3.0


def run_collective(hosts, pattern, size, options=None, *, python=None, on_start=None, workdir=None, **fields):
    """Run a collective on hosts and return its report.

    Args:
        hosts: list of :class:`testbed.traffic.hosts.HostHandle`; the rank is the position.
        pattern: one of :data:`PATTERNS`.
        size: per-rank buffer in bytes.
        options: the :class:`CollectiveOptions` (default: its defaults).
        **fields: :class:`CollectiveOptions` fields as keywords, replacing those of ``options``
            (``run_collective(hosts, "allreduce", size, qps=2)``).
        python: interpreter for the agents (default: this one).
        on_start: optional callable ``(start_ns)`` called right after the agents are released
            (e.g. to schedule a failure); if it returns an int, that is taken as the failure
            time in ns and the report's ``recovery`` says when delivery resumed after it.
        workdir: where to keep each agent's report (``report-<rank>.json``; default: nowhere).

    Returns:
        dict: ``completion_time_s``, ``complete`` (every rank got all its bytes),
        ``lost_packets``, ``missing_bytes``, per-rank reports and totals.

    Raises:
        TypeError: a keyword that is not a :class:`CollectiveOptions` field.
        ParameterError: bad options.
        EmulationError: an agent failed or did not finish in time.
    """
    options = dataclasses.replace(options if options is not None else CollectiveOptions(), **fields)
    validate_options(pattern, size, options.qps, options.rate_mbps, options.qp_scaling, len(hosts),
                     udp_sport=options.udp_sport)
    if options.chunk_bytes < 1:
        raise ParameterError("chunk_bytes", options.chunk_bytes, "an integer >= 1")
    plan = build_plan(pattern, len(hosts), size, options.seed)
    if len(hosts) > qp_module.MAX_RANKS:
        raise ParameterError("--hosts", len(hosts), f"at most {qp_module.MAX_RANKS} hosts")
    job = qp_module.allocate_job() if options.job is None else options.job
    if not 0 <= job <= qp_module.MAX_JOB:
        raise ParameterError("job", job, f"an integer in 0..{qp_module.MAX_JOB}")
    python = python or sys.executable
    processes = []
    try:
        for rank, host in enumerate(hosts):
            process = host.popen([python, "-m", "testbed.traffic.agent", "--plan", "-"],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            processes.append(process)
            process.stdin.write(json.dumps(_agent_spec(hosts, rank, plan, options, job)).encode() + b"\n")
            process.stdin.flush()
        deadline = time.monotonic() + options.timeout
        for host, process in zip(hosts, processes):
            line = host_module.read_line(process, deadline, f"agent on {host.name}")
            if line != "READY":
                raise EmulationError(f"agent on {host.name} said {line!r} instead of READY")
        start_ns = time.time_ns() + 200_000_000
        for process in processes:
            process.stdin.write(f"GO {start_ns}\n".encode())
            process.stdin.flush()
        failure_ns = on_start(start_ns) if on_start is not None else None
        for host, process in zip(hosts, processes):
            line = host_module.read_line(process, deadline, f"agent on {host.name}")
            if line != "DONE":
                raise EmulationError(f"agent on {host.name} said {line!r} instead of DONE")
        for process in processes:
            process.stdin.write(b"EXIT\n")
            process.stdin.flush()
        reports = []
        for rank, (host, process) in enumerate(zip(hosts, processes)):
            report = host_module.finish(process, 30, f"agent on {host.name}")
            reports.append(report)
            if workdir is not None:
                with open(os.path.join(workdir, f"report-{rank}.json"), "w") as handle:
                    json.dump(report, handle)
        return summarize(pattern, hosts, plan, reports, start_ns, failure_ns if isinstance(failure_ns, int) else None,
                         {"size": size, "qps": options.qps, "qp_scaling": options.qp_scaling,
                          "rate_mbps": options.rate_mbps, "mtu": options.mtu, "chunk_bytes": options.chunk_bytes,
                          "admission": options.admission, "channels": options.channels, "seed": options.seed,
                          "retransmit": options.retransmit, "ack_timeout": options.ack_timeout,
                          "retry_count": options.retry_count, "job": job, "udp_sport": options.udp_sport})
    finally:
        host_module.stop_processes(processes)


def _agent_spec(hosts, rank, plan, options, job):
    """The plan of one rank's agent (:mod:`testbed.traffic.agent`), which it reads on its stdin."""
    host = hosts[rank]
    # "mac" is the Ethernet destination this rank's frames to that peer carry
    peers = [{"rank": peer_rank, "name": peer.name, "ip": peer.ip,
              "mac": peer.mac if peer_rank == rank else host.frame_destination(peer)}
             for peer_rank, peer in enumerate(hosts)]
    return {"rank": rank, "intf": host.intf, "peers": peers, "steps": plan[rank], "qps": options.qps,
            "qp_scaling": options.qp_scaling, "rate_mbps": options.rate_mbps, "mtu": options.mtu,
            "chunk_bytes": options.chunk_bytes, "admission": options.admission, "channels": options.channels,
            "seed": options.seed, "step_timeout": options.resolved_step_timeout(),
            "loss_timeout": options.loss_timeout, "bin_ms": options.bin_ms, "retransmit": options.retransmit,
            "ack_timeout": options.ack_timeout, "retry_count": options.retry_count, "job": job,
            "udp_sport": options.udp_sport}


def summarize(pattern, hosts, plan, reports, start_ns, failure_ns, options):
    """Combine agents' reports into the collective's report.

    ``lost_packets`` counts data packets dropped on the way (sent, including
    retransmissions, minus arrived, including duplicates); ``unrecovered_packets``
    the PSNs that never arrived (the receivers' final ``lost``);
    ``out_of_sequence`` / ``late`` / ``duplicates`` sum the receivers' NIC-style
    counters; ``local_ack_timeouts`` and ``retransmitted_packets`` the senders'.
    """
    end_ns = max(report["end_ns"] for report in reports)
    expected = sum(amount for steps in plan for step in steps for _, amount in step["recvs"])
    received = sum(step["received_bytes"] for report in reports for step in report["steps"])
    totals = {}
    for report in reports:
        for name, value in report["receiver"]["totals"].items():
            totals[name] = totals.get(name, 0) + value
    sent_packets = sum(report["sender"]["packets"] for report in reports)
    gaps = sorted(gap for report in reports for gap in report["receiver"]["gaps"])
    qp_gaps = sorted(gap for report in reports for gap in report["receiver"].get("qp_gaps", []))
    return {
        "pattern": pattern, "hosts": [h.name for h in hosts], "ranks": len(hosts), "options": options,
        "steps": max(len(steps) for steps in plan),
        "start_ns": start_ns, "end_ns": end_ns, "completion_time_s": (end_ns - start_ns) / 1e9,
        "complete": all(report["complete"] for report in reports),
        "aborted": {hosts[rank].name: report["aborted"] for rank, report in enumerate(reports)
                    if report.get("aborted")},
        "expected_bytes": expected, "received_bytes": received, "missing_bytes": max(0, expected - received),
        "sent_packets": sent_packets, "received_packets": totals.get("received", 0),
        # packets the network (or a full socket buffer) dropped: everything sent, retransmissions
        # included, minus everything that arrived, duplicates included
        "lost_packets": max(0, sent_packets - totals.get("received", 0) - totals.get("duplicates", 0)),
        "unrecovered_packets": totals.get("lost", 0),
        "out_of_sequence": totals.get("out_of_sequence", 0), "duplicates": totals.get("duplicates", 0),
        "late": totals.get("late", 0),
        **{name: sum(report.get(name, 0) for report in reports)
           for name in ("cts_sent", "cts_resent", "acks_sent", "acks_received", "naks_sent", "naks_received",
                        "local_ack_timeouts", "retransmitted_packets", "retry_exhausted")},
        # active data QPs per host (sending side), the statistic of seed 004 Table 2
        "qps_per_host": sum(len(report["sender"]["per_qp"]) for report in reports) / len(reports),
        "gaps": gaps, "qp_gaps": qp_gaps, "failure_ns": failure_ns,
        # receiver-wide gaps: ranks wait on each other's steps, so a QP's own gaps include idle
        # time between dependent steps; flow_recovery only counts gaps that began at the failure
        "recovery": metrics.time_to_recover(gaps, failure_ns) if failure_ns is not None else None,
        "flow_recovery": metrics.flow_recovery(qp_gaps, failure_ns) if failure_ns is not None else None,
        "ranks_report": [{"rank": rank, "host": hosts[rank].name, "end_ns": report["end_ns"],
                          "complete": report["complete"], "steps": report["steps"],
                          "receiver_totals": report["receiver"]["totals"],
                          "sent_packets": report["sender"]["packets"],
                          "latency_ns": report["receiver"]["latency_ns"],
                          # [time_ns, nak_received | resend_nak | resend_timeout | retry_exhausted, peer, qpn, ...]
                          "events": report.get("events", [])}
                         for rank, report in enumerate(reports)],
    }
