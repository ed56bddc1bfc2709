"""Fabric capacity: all-pairs traffic on a FatTree raised until loss appears, per switch backend.

For each backend (``--backend``, default python and native) it starts a k-ary FatTree
(:class:`~testbed.fabrics.Fabric`, ``l3_ecmp.p4``, static controller, embedded switches) and runs
the ``alltoall`` collective (:meth:`~testbed.fabrics.Fabric.collective`: one agent per host sending
to every other host, paced at ``rate`` Mbit/s per host, no retransmission, so losses stay losses)
at rising rates (x ``--step`` each time) until more than ``--loss`` of the packets are lost.  Per
rate it prints the packets/s offered and carried (packets sent / received over the sending window:
the release instant to the last rank's end of sending), the loss, the CPU time the switch
processes and everything else spent per carried packet, and the frames the switches themselves lost
(their receive sockets, and frames they could not hand to a port).  The backend's capacity is the highest
carried packets/s of a step within the loss bound (the knee); the summary gives each backend's and
their ratio, with the machine's load.

On a 2-core machine the hosts' agents (Python senders and receivers) share the cores with the
switches: when the offered rate stops following the requested one, the hosts are the limit, not the
fabric (the rows say so).  The switches' CPU per carried packet is then the fabric's cost.

Needs root and Mininet; run it under the machine-wide Mininet lock::

    flock /tmp/testbed-mininet.lock /opt/testbed-venv/bin/python benchmarks/bench_fabric_capacity.py
        [--k 4] [--backend python --backend native] [--rate 0.5] [--step 1.5] [--seconds 2] [--mtu 256]
"""
import argparse
import os
import sys
import tempfile

import testbed.p4src
from testbed.fabrics import Fabric
from testbed.p4.native import BACKENDS
from testbed.traffic import roce

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # the benchmarks folder, also when run elsewhere
from bench_bringup import load  # noqa: E402 - after the path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """User + system CPU seconds of a process and its waited-for children (``/proc/<pid>/stat``)."""
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return sum(int(value) for value in fields[11:15]) / CLOCK_TICKS


def machine_cpu_seconds():
    """Busy CPU seconds of the whole machine (``/proc/stat``: all but idle and iowait)."""
    with open("/proc/stat") as handle:
        values = [int(value) for value in handle.readline().split()[1:]]
    return (sum(values) - values[3] - values[4]) / CLOCK_TICKS


def one_rate(fabric, hosts, rate_mbps, seconds, mtu, seed):
    """Run the alltoall collective at ``rate_mbps`` per host; return the step's figures.

    Returns:
        dict: ``rate_mbps``, ``offered_pps``, ``carried_pps``, ``loss``, ``window_s``,
        ``switch_us``/``other_us`` (switch processes' / the rest of the machine's CPU microseconds
        per carried packet), ``socket_drops``/``tx_errors`` (:func:`switch_drops` during the step).
    """
    ranks = len(hosts)
    # every rank sends (ranks - 1) shares of size / ranks: size so that sending takes ``seconds``
    size = int(rate_mbps * 1e6 / 8 * seconds * ranks / (ranks - 1))
    pids = [switch.process.pid for switch in fabric.switches]
    drops_before = switch_drops(fabric)
    switch_before, machine_before = sum(cpu_seconds(pid) for pid in pids), machine_cpu_seconds()
    report = fabric.collective("alltoall", hosts, size, rate_mbps=rate_mbps, mtu=mtu, retransmit=False,
                               seed=seed, step_timeout=1.0)
    switch_cpu = sum(cpu_seconds(pid) for pid in pids) - switch_before
    machine_cpu = machine_cpu_seconds() - machine_before
    drops = {kind: count - drops_before[kind] for kind, count in switch_drops(fabric).items()}
    sent_end = max(step.get("sent_ns", rank["end_ns"]) for rank in report["ranks_report"] for step in rank["steps"])
    window_s = max(1e-3, (sent_end - report["start_ns"]) / 1e9)
    sent, received = report["sent_packets"], report["received_packets"]
    return {"rate_mbps": rate_mbps, "offered_pps": sent / window_s, "carried_pps": received / window_s,
            "loss": report["lost_packets"] / max(1, sent), "window_s": window_s,
            "switch_us": switch_cpu * 1e6 / max(1, received),
            "other_us": (machine_cpu - switch_cpu) * 1e6 / max(1, received), **drops}


def switch_drops(fabric):
    """Frames the fabric's switches lost so far, summed by cause: ``{"socket_drops", "tx_errors"}``
    (:meth:`~testbed.emulation.network.FabricNetwork.drop_counters`: what their receive sockets dropped,
    what they could not hand to a port)."""
    totals = {"socket_drops": 0, "tx_errors": 0}
    for ports in fabric.network.drop_counters().values():
        for counts in ports.values():
            for kind in totals:
                totals[kind] += counts[kind]
    return totals


def run(k, backend, args):
    """Raise the rate on one fabric until the loss bound is passed; return the rows."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-capacity-") as log_dir:
        with Fabric("fattree", program=testbed.p4src.program_path("l3_ecmp"), target="embedded",
                    controller="static", backend=backend, log_dir=log_dir, seed=args.seed, k=k) as fabric:
            hosts = [host.name for host in fabric.hosts]
            missing = fabric.unreachable_pairs(timeout_s=2)
            print(f"\nFatTree k={k}, backend {backend}: {len(fabric.switches)} switches, {len(hosts)} hosts "
                  f"({len(missing)} unreachable pairs); {load()}")
            print(f"  {'rate/host':>10} {'offered/s':>10} {'carried/s':>10} {'loss':>7} {'switch CPU':>11} "
                  f"{'other CPU':>10} {'socket drops':>12} {'tx errors':>9}  (CPU: us per carried packet)")
            rate = args.rate
            while rate <= args.max_rate:
                row = one_rate(fabric, hosts, rate, args.seconds, args.mtu, args.seed)
                rows.append(row)
                asked = rate * 1e6 / 8 / (args.mtu + roce.FRAME_OVERHEAD) * len(hosts)
                limit = "  (hosts below the asked rate)" if row["offered_pps"] < 0.8 * asked else ""
                print(f"  {rate:8.1f} Mb {row['offered_pps']:10,.0f} {row['carried_pps']:10,.0f} "
                      f"{row['loss']:7.2%} {row['switch_us']:9.1f} us {row['other_us']:8.1f} us "
                      f"{row['socket_drops']:12,} {row['tx_errors']:9,}{limit}")
                if row["loss"] > args.loss:
                    break
                rate *= args.step
            print(f"  {load()}")
    return rows


def capacity(rows, loss):
    """The highest carried packets/s of a row within the loss bound (0 when none is).

    >>> capacity([{"carried_pps": 10, "loss": 0.0}, {"carried_pps": 30, "loss": 0.2}], 0.01)
    10
    """
    return max((row["carried_pps"] for row in rows if row["loss"] <= loss), default=0)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, default=4, help="FatTree arity (default 4: 20 switches, 16 hosts)")
    parser.add_argument("--backend", action="append", choices=BACKENDS,
                        help="embedded switch backend (repeatable; default python and native)")
    parser.add_argument("--rate", type=float, default=0.5, help="first rate per host in Mbit/s (default 0.5)")
    parser.add_argument("--step", type=float, default=1.5, help="rate factor between steps (default 1.5)")
    parser.add_argument("--max-rate", type=float, default=2000.0, help="highest rate per host (Mbit/s)")
    parser.add_argument("--seconds", type=float, default=2.0, help="sending time per step (default 2)")
    parser.add_argument("--mtu", type=int, default=256, help="RoCE payload per packet (default 256 bytes)")
    parser.add_argument("--loss", type=float, default=0.01, help="loss bound of the knee (default 0.01)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the switches and the traffic")
    args = parser.parse_args()
    results = {}
    try:
        for backend in args.backend or ["python", "native"]:
            results[backend] = run(args.k, backend, args)
    except KeyboardInterrupt:
        print("interrupted (the fabric was torn down)")
        return 130
    print("\nsummary (carried packets/s at the knee: the highest within the loss bound):")
    knees = {backend: capacity(rows, args.loss) for backend, rows in results.items()}
    for backend, knee in knees.items():
        print(f"  {backend}: {knee:,.0f} packets/s")
    if knees.get("python") and "native" in knees:
        print(f"  native / python: {knees['native'] / knees['python']:.1f}x")
    print(f"  {load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
