"""Bring-up and teardown time of emulated FatTrees (Mininet, embedded P4 switches), per phase.

For each FatTree size (default k=4 and k=8: 20 switches/16 hosts and 80 switches/128 hosts) it
starts a :class:`~testbed.fabrics.Fabric` running ``l3_ecmp.p4`` with the static controller,
checks all-pairs reachability (one ping per ordered host pair, sent in parallel), and tears it down,
then prints how long each step took (from the fabric's own progress events: node shells, veth
pairs, hosts, switch processes, pipelines, route entries; then teardown's steps), the reachability
check, the totals, and the machine's load average and core count before and after (the machine is
shared: the figures are only comparable at similar load).  ``--backend`` (repeatable) runs each
size with the embedded switches' python and/or native backend.

``--memory`` reads, after the reachability check (so every port has carried frames), the
proportional set size (PSS, ``/proc/<pid>/smaps_rollup``) of every switch process and prints its
median and maximum, and, for the median switch, where it goes (``/proc/<pid>/smaps`` mappings
grouped: Python heap, anonymous memory such as malloc arenas and AF_XDP UMEMs, thread stacks, the
interpreter, gRPC and the other shared libraries, the compiled P4 program).  PSS divides a page
shared by n processes by n, so pages every switch inherits from the fork server count 1/20th each.

Needs root and Mininet; run it under the machine-wide Mininet lock::

    flock /tmp/testbed-mininet.lock /opt/testbed-venv/bin/python benchmarks/bench_bringup.py [--k 4 --k 8]
        [--backend python --backend native] [--no-reachability] [--memory] [--program l3_ecmp]
"""
import argparse
import os
import statistics
import re
import sys
import tempfile
import time

import testbed.p4src
from testbed.emulation.cleanup import leftovers, mark_owner
from testbed.fabrics import Fabric
from testbed.p4.native import BACKENDS

# what ends a step's name in a progress line: "switches started 20/20 (1.3 s)", "links created: 48 veth pairs"
STEP_END = re.compile(r" \d+/\d+|:| \(")


class EventClock:
    """Progress callback keeping, per step, when its last line came (the step's end).

    Attributes:
        origin: ``time.monotonic()`` the times count from (set by the caller).
        ends: ``{step: seconds since origin}``, in the order the steps began.
    """

    def __init__(self):
        self.origin = time.monotonic()
        self.ends = {}

    def __call__(self, line):
        self.ends[STEP_END.split(line, 1)[0][:40]] = time.monotonic() - self.origin


def load():
    one, five, _fifteen = os.getloadavg()
    return f"load average {one:.2f} (1 min) {five:.2f} (5 min) on {os.cpu_count()} cores"


def pss_kib(pid):
    """The process's proportional set size in KiB (``/proc/<pid>/smaps_rollup``)."""
    with open(f"/proc/{pid}/smaps_rollup") as handle:
        for line in handle:
            if line.startswith("Pss:"):
                return int(line.split()[1])
    raise RuntimeError(f"no Pss line for process {pid}")


def mapping_group(name):
    """The group a ``/proc/<pid>/smaps`` mapping's name falls in (see the module docstring)."""
    if name == "[heap]":
        return "heap (brk: Python objects, small mallocs)"
    if name.startswith("[stack"):
        return "main stack"
    if not name or name.startswith("[anon") or name == "/dev/zero (deleted)":
        return "anonymous (malloc arenas, thread stacks, mmap, UMEM)"
    if "xdp" in name or name.startswith("anon_inode") or name.startswith("socket:"):
        return "AF_XDP rings"
    base = os.path.basename(name)
    if "libpython" in base or base.startswith("python"):
        return "interpreter"
    if "grpc" in base or "cygrpc" in base:
        return "gRPC"
    if "/native/" in name or "/cache/testbed" in name or base.startswith(("tbio-", "tb_")):
        return "compiled P4 program and packet loop"
    if base.endswith(".so") or ".so." in base:
        return "other shared libraries (protobuf, numpy, ...)"
    return "other files"


def pss_breakdown(pid):
    """``{group: PSS KiB}`` of a process, mappings grouped by :func:`mapping_group`."""
    groups, name = {}, ""
    with open(f"/proc/{pid}/smaps") as handle:
        for line in handle:
            first = line.split(None, 1)[0]
            if "-" in first and not first.endswith(":"):
                parts = line.split(None, 5)
                name = parts[5].strip() if len(parts) > 5 else ""
            elif first == "Pss:":
                group = mapping_group(name)
                groups[group] = groups.get(group, 0) + int(line.split()[1])
    return groups


def memory_report(fabric):
    """Print the switches' PSS (median, maximum) and the median switch's breakdown; return the PSS list (KiB)."""
    pids = {switch.name: switch.process.pid for switch in fabric.switches}
    sizes = {name: pss_kib(pid) for name, pid in pids.items()}
    ordered = sorted(sizes, key=sizes.get)
    median = ordered[len(ordered) // 2]
    print(f"  PSS per switch process: median {statistics.median(sizes.values()) / 1024:.1f} MiB, "
          f"max {max(sizes.values()) / 1024:.1f} MiB, min {min(sizes.values()) / 1024:.1f} MiB "
          f"({len(sizes)} switches)")
    print(f"  where the median switch's ({median}) PSS goes:")
    for group, kib in sorted(pss_breakdown(pids[median]).items(), key=lambda item: -item[1]):
        print(f"    {group:<55} {kib / 1024:6.1f} MiB")
    return sorted(sizes.values())


def run(k, program, reachability, backend=None, memory=False):
    """Bring a k-ary FatTree up and down once; print per-step and total times.

    Args:
        backend: the embedded switches' backend (None: the default).
        memory: also print the switches' PSS (:func:`memory_report`).

    Returns:
        dict: ``{"up_s", "reachability_s", "down_s", "unreachable", "pss_kib"}``.
    """
    before = leftovers(owner=mark_owner())
    up_events, down_events = EventClock(), EventClock()
    recorder = {"up": up_events}
    with tempfile.TemporaryDirectory(prefix="bench-bringup-") as log_dir:
        fabric = Fabric("fattree", program=program, target="embedded", controller="static", log_dir=log_dir,
                        backend=backend, progress=lambda line: recorder["up"](line), k=k)
        print(f"\nFatTree k={k}, backend {backend or 'default'}: {len(fabric.topo.switches())} switches, "
              f"{len(fabric.topo.hosts())} hosts, {len(fabric.topo.links())} links; {load()}")
        started = up_events.origin = time.monotonic()
        fabric.start()
        up_s = time.monotonic() - started
        entries = fabric.controller.entries_written
        unreachable, reach_s, pss = None, None, None
        try:
            if reachability:
                probe_started = time.monotonic()
                unreachable = fabric.unreachable_pairs(timeout_s=2)
                reach_s = time.monotonic() - probe_started
            if memory:
                pss = memory_report(fabric)
        finally:
            recorder["up"] = down_events
            stopped = down_events.origin = time.monotonic()
            fabric.stop()
            down_s = time.monotonic() - stopped
    after = leftovers(owner=mark_owner())
    left = {kind: sorted(set(map(str, items)) - set(map(str, before[kind]))) for kind, items in after.items()}
    for title, events in (("up", up_events), ("down", down_events)):
        previous = 0.0
        print(f"  {title}:")
        for step, end in events.ends.items():
            print(f"    {step:<40} {end - previous:6.2f} s  (at {end:6.2f} s)")
            previous = end
    pairs = len(fabric.topo.hosts()) * (len(fabric.topo.hosts()) - 1)
    print(f"  bring-up total {up_s:.2f} s ({entries} route entries written)")
    if reachability:
        print(f"  reachability: {pairs - len(unreachable)}/{pairs} ordered pairs answer one ping, "
              f"checked in {reach_s:.2f} s")
    print(f"  teardown total {down_s:.2f} s; left behind: {left if any(left.values()) else 'nothing'}")
    print(f"  {load()}")
    return {"up_s": up_s, "reachability_s": reach_s, "down_s": down_s, "unreachable": unreachable, "pss_kib": pss}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, action="append", help="FatTree arity (repeatable; default 4 and 8)")
    parser.add_argument("--program", default="l3_ecmp", help="program in p4src/ (default l3_ecmp)")
    parser.add_argument("--no-reachability", action="store_true", help="skip the all-pairs ping check")
    parser.add_argument("--backend", action="append", choices=BACKENDS,
                        help="embedded switch backend (repeatable; default: the default backend)")
    parser.add_argument("--memory", action="store_true", help="print the switches' PSS and where it goes")
    args = parser.parse_args()
    program = testbed.p4src.program_path(args.program)
    try:
        results = {(k, backend): run(k, program, not args.no_reachability, backend, args.memory)
                   for k in (args.k or [4, 8]) for backend in (args.backend or [None])}
    except KeyboardInterrupt:
        print("interrupted (the fabric was torn down)")
        return 130
    print("\nsummary:")
    for (k, backend), result in results.items():
        reach = f", reachability {result['reachability_s']:.2f} s" if result["reachability_s"] is not None else ""
        pss = (f", PSS per switch median {statistics.median(result['pss_kib']) / 1024:.1f} MiB"
               if result["pss_kib"] else "")
        print(f"  k={k} {backend or 'default'}: up {result['up_s']:.2f} s{reach}, down {result['down_s']:.2f} s{pss}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
