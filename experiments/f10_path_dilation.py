"""F10's path dilation under concurrent failures (seed 002, section 7.5, Figure 10): table and plot.

Computed, not emulated: :mod:`testbed.mechanisms.f10.dilation` walks flows through
standard and AB FatTrees of the same size on the tables the F10 controller
writes (the one detour algorithm, topologies/f10/detours.py, through
controllers/f10/routes.py), for 1, 5, 10 and 15 concurrent switch (or link)
failures drawn from the seed.  The emulated check that packets take these
detours is tests/f10/test_f10_dilation_mininet.py.

Usage::

    /opt/testbed-venv/bin/python experiments/f10_path_dilation.py --k 8,16 --kind switch,link \\
        --out results/f10-path-dilation

writes ``dilation.json`` (rows, seed, machine, load average), ``dilation.csv`` and
``path_dilation_k<k>.png`` per tree size, and prints the table.
"""
import argparse
import csv
import json
import os
import platform
import time

from testbed.mechanisms.f10.dilation import dilation_table
from testbed.mechanisms.f10.plots import plot_path_dilation
from testbed.topologies.ab_fattree import ABFatTree
from testbed.topologies.fattree import FatTree


def _numbers(text):
    return [int(item) for item in text.split(",") if item]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=_numbers, default=[8, 16], help="FatTree port counts (comma separated)")
    parser.add_argument("--failures", type=_numbers, default=[1, 5, 10, 15], help="concurrent failures")
    parser.add_argument("--kind", default="switch,link", help="switch, link or both (comma separated)")
    parser.add_argument("--trials", type=int, default=5, help="failure scenarios per count")
    parser.add_argument("--max-flows", type=int, default=5000, help="host pairs walked per scenario (sampled)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--as-programmed", action="store_true",
                        help="hash over every member as p4src/f10.p4 does (default: working members only)")
    parser.add_argument("--out", default="results/f10-path-dilation")
    args = parser.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    started, load_before = time.time(), os.getloadavg()
    rows = []
    for k in args.k:
        size_rows = []
        for kind in args.kind.split(","):
            graphs = {f"fattree k={k}": FatTree(k=k).graph(), f"abfattree k={k}": ABFatTree(k=k).graph()}
            size_rows += dilation_table(graphs, args.failures, trials=args.trials, kind=kind, seed=args.seed,
                                        max_flows=args.max_flows, working_only=not args.as_programmed)
        for kind in args.kind.split(","):
            plot_path_dilation([row for row in size_rows if row["kind"] == kind],
                               os.path.join(args.out, f"path_dilation_k{k}_{kind}.png"),
                               f"F10 path dilation, k={k}, {kind} failures (seed {args.seed})")
        rows += size_rows
    record = {"seed": args.seed, "trials": args.trials, "max_flows": args.max_flows,
              "working_only": not args.as_programmed, "machine": platform.node(), "cpus": os.cpu_count(),
              "load_average_before": load_before, "load_average_after": os.getloadavg(),
              "seconds": time.time() - started, "rows": rows}
    with open(os.path.join(args.out, "dilation.json"), "w") as handle:
        json.dump(record, handle, indent=1)
    fields = ("label", "kind", "failures", "reroutes", "mean_extra_hops", "at_minimum", "minimum",
              "reroutes_dropped", "flows", "dropped", "loops")
    with open(os.path.join(args.out, "dilation.csv"), "w", newline="") as handle:
        writer = csv.DictWriter(handle, fields, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    print(f"{'topology':<16} {'kind':<6} {'fail':>4} {'reroutes':>8} {'mean+':>6} {'at min':>7} {'dropped':>8}")
    for row in rows:
        mean = f"{row['mean_extra_hops']:.2f}" if row["mean_extra_hops"] is not None else "-"
        at_min = f"{100 * row['at_minimum']:.1f}%" if row["at_minimum"] is not None else "-"
        total = row["reroutes"] + row["reroutes_dropped"]
        dropped = f"{100 * row['reroutes_dropped'] / total:.1f}%" if total else "-"
        print(f"{row['label']:<16} {row['kind']:<6} {row['failures']:>4} {row['reroutes']:>8} {mean:>6} "
              f"{at_min:>7} {dropped:>8}")
    ratios = {}
    for row in rows:
        key = (row["label"].split(" ")[1], row["kind"], row["failures"])
        ratios.setdefault(key, {})[row["label"].split(" ")[0]] = row["mean_extra_hops"]
    for (size, kind, failures), means in sorted(ratios.items()):
        if means.get("fattree") and means.get("abfattree"):
            print(f"{size} {kind} x{failures}: mean extra hops AB / standard = "
                  f"{means['abfattree'] / means['fattree']:.2f}")
    print(f"{time.time() - started:.0f} s; load average {load_before[0]:.1f} -> {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
