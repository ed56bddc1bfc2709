"""Bring-up and teardown time of emulated FatTrees (Mininet, embedded P4 switches), per phase.

For each FatTree size (default k=4 and k=8: 20 switches/16 hosts and 80 switches/128 hosts) it
starts a :class:`~testbed.fabrics.Fabric` running ``l3_ecmp.p4`` with the static controller,
checks all-pairs reachability (one ping per ordered host pair, sent in parallel), and tears it down,
then prints how long each step took (from the fabric's own progress events: node shells, veth
pairs, hosts, switch processes, pipelines, route entries; then teardown's steps), the reachability
check, the totals, and the machine's load average and core count before and after (the machine is
shared: the figures are only comparable at similar load).

Needs root and Mininet; run it under the machine-wide Mininet lock::

    flock /tmp/testbed-mininet.lock /opt/testbed-venv/bin/python benchmarks/bench_bringup.py [--k 4 --k 8]
        [--no-reachability] [--program l3_ecmp]
"""
import argparse
import os
import re
import sys
import tempfile
import time

import testbed.p4src
from testbed.emulation.cleanup import leftovers, mark_owner
from testbed.fabrics import Fabric

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


def run(k, program, reachability):
    """Bring a k-ary FatTree up and down once; print per-step and total times.

    Returns:
        dict: ``{"up_s", "reachability_s", "down_s", "unreachable"}``.
    """
    before = leftovers(owner=mark_owner())
    up_events, down_events = EventClock(), EventClock()
    recorder = {"up": up_events}
    with tempfile.TemporaryDirectory(prefix="bench-bringup-") as log_dir:
        fabric = Fabric("fattree", program=program, target="embedded", controller="static", log_dir=log_dir,
                        progress=lambda line: recorder["up"](line), k=k)
        print(f"\nFatTree k={k}: {len(fabric.topo.switches())} switches, {len(fabric.topo.hosts())} hosts, "
              f"{len(fabric.topo.links())} links; {load()}")
        started = up_events.origin = time.monotonic()
        fabric.start()
        up_s = time.monotonic() - started
        entries = fabric.controller.entries_written
        unreachable, reach_s = None, None
        try:
            if reachability:
                probe_started = time.monotonic()
                unreachable = fabric.unreachable_pairs(timeout_s=2)
                reach_s = time.monotonic() - probe_started
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
    return {"up_s": up_s, "reachability_s": reach_s, "down_s": down_s, "unreachable": unreachable}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, action="append", help="FatTree arity (repeatable; default 4 and 8)")
    parser.add_argument("--program", default="l3_ecmp", help="program in p4src/ (default l3_ecmp)")
    parser.add_argument("--no-reachability", action="store_true", help="skip the all-pairs ping check")
    args = parser.parse_args()
    program = testbed.p4src.program_path(args.program)
    try:
        results = {k: run(k, program, not args.no_reachability) for k in (args.k or [4, 8])}
    except KeyboardInterrupt:
        print("interrupted (the fabric was torn down)")
        return 130
    print("\nsummary:")
    for k, result in results.items():
        reach = f", reachability {result['reachability_s']:.2f} s" if result["reachability_s"] is not None else ""
        print(f"  k={k}: up {result['up_s']:.2f} s{reach}, down {result['down_s']:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
