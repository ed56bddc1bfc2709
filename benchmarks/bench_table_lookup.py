"""Lookups per second of the embedded target's tables (a script, not a test).

Builds exact, lpm and ternary tables of 1k and 10k entries with
``testbed.p4.state`` and times ``TableState.lookup`` on keys that mostly hit.

Usage::

    /opt/testbed-venv/bin/python benchmarks/bench_table_lookup.py [--seconds 0.5]
"""
import argparse
import random
import time

from testbed.p4.program import (
    Action, ActionCall, ActionParam, ActionRef, KeyMatch, MatchField, ProgramInfo, Table,
)
from testbed.p4.state import SwitchState, TableEntry

FWD = "MyIngress.forward"


def _program(kind, size):
    """A program with one table of the given match kind on a 32-bit key."""
    table = Table(f"MyIngress.{kind}", [MatchField("hdr.ipv4.dstAddr", 32, kind)],
                  [ActionRef(FWD), ActionRef("NoAction")], size=size)
    return ProgramInfo("bench", tables={table.name: table},
                       actions={"NoAction": Action("NoAction"),
                                FWD: Action(FWD, [ActionParam("port", 9)])})


def _fill(kind, size, rng):
    """Build a table with ``size`` entries; return it and a list of lookup keys."""
    table = SwitchState(_program(kind, size)).tables[f"MyIngress.{kind}"]
    keys = []
    if kind == "exact":
        for value in rng.sample(range(1 << 32), size):
            table.insert(TableEntry([KeyMatch("exact", value)], ActionCall(FWD, (value % 512,))))
            keys.append(value)
    elif kind == "lpm":
        seen = set()
        while len(seen) < size:
            plen = rng.choice((8, 16, 20, 24, 24, 24, 28, 32))
            value = rng.getrandbits(32) & (((1 << plen) - 1) << (32 - plen))
            if (value, plen) in seen:
                continue
            seen.add((value, plen))
            table.insert(TableEntry([KeyMatch("lpm", value, prefix_len=plen)],
                                    ActionCall(FWD, (plen,))))
            keys.append(value | rng.getrandbits(32 - plen) if plen < 32 else value)
    else:
        # ACL-like: a handful of distinct masks, many values, distinct priorities
        masks = [0xFFFFFFFF, 0xFFFFFF00, 0xFFFF0000, 0xFF000000, 0xFFFFFFF0]
        seen = set()
        while len(seen) < size:
            mask = rng.choice(masks)
            value = rng.getrandbits(32) & mask
            if (value, mask) in seen:
                continue
            seen.add((value, mask))
            table.insert(TableEntry([KeyMatch("ternary", value, mask=mask)],
                                    ActionCall(FWD, (1,)), priority=rng.randrange(1, 1 << 16)))
            keys.append(value | (rng.getrandbits(32) & ~mask & 0xFFFFFFFF))
    rng.shuffle(keys)
    return table, keys[:4096]


def _rate(table, keys, seconds):
    """Lookups per second over ``seconds`` of repeated passes over ``keys``."""
    lookup = table.lookup
    tuples = [(k,) for k in keys]
    count, hits = 0, 0
    start = time.perf_counter()
    deadline = start + seconds
    while time.perf_counter() < deadline:
        for key in tuples:
            if lookup(key).hit:
                hits += 1
        count += len(tuples)
    elapsed = time.perf_counter() - start
    return count / elapsed, hits / count


def main(argv=None):
    """Print lookups per second for each table kind and size."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=0.5, help="time per measurement")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    print(f"{'kind':8} {'entries':>8} {'lookups/s':>12} {'hit rate':>9} {'insert/s':>10}")
    for kind in ("exact", "lpm", "ternary"):
        for size in (1000, 10000):
            start = time.perf_counter()
            table, keys = _fill(kind, size, rng)
            insert_rate = size / (time.perf_counter() - start)
            rate, hit_rate = _rate(table, keys, args.seconds)
            print(f"{kind:8} {size:8d} {rate:12,.0f} {hit_rate:9.2f} {insert_rate:10,.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
