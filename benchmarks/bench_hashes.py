"""Benchmark: v1model hash computations per second over an IPv4 5-tuple, per algorithm.

Run: /opt/testbed-venv/bin/python benchmarks/bench_hashes.py [--seconds S]
Prints one line per algorithm: hashes/s for ``compute`` (pack + hash), for the
hash alone on a prepacked buffer, and for ``hash_extern`` (pack + hash + base/max).
"""

import argparse
import random
import time

from testbed.p4.v1model.hashes import ALGORITHMS, compute, compute_bytes, hash_extern, pack_fields

FIVE_TUPLE = [(0x0A000001, 32), (0x0A000102, 32), (6, 8), (12345, 16), (80, 16)]


def rate(function, seconds: float) -> float:
    """Return calls per second of ``function`` measured for about ``seconds``."""
    calls = 0
    batch = 1000
    start = time.perf_counter()
    deadline = start + seconds
    while True:
        for _ in range(batch):
            function()
        calls += batch
        now = time.perf_counter()
        if now >= deadline:
            return calls / (now - start)


def main(argv=None) -> int:
    """Measure and print the rates; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=0.5, help="measuring time per case")
    args = parser.parse_args(argv)
    packed = pack_fields(FIVE_TUPLE)
    rng = random.Random(0)
    print(f"{'algorithm':14} {'compute/s':>12} {'bytes-only/s':>13} {'hash_extern/s':>14}")
    for algorithm in ALGORITHMS:
        full = rate(lambda: compute(algorithm, FIVE_TUPLE, rng=rng), args.seconds)
        raw = rate(lambda: compute_bytes(algorithm, packed, rng=rng), args.seconds)
        ext = rate(lambda: hash_extern(algorithm, 0, FIVE_TUPLE, 4, 16, rng=rng), args.seconds)
        print(f"{algorithm:14} {full:12,.0f} {raw:13,.0f} {ext:14,.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
