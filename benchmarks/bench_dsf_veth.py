"""Benchmark: a DSF path rdsw0 -> fdsw0 -> rdsw1 of embedded switches over veths, native backend.

Run as root::

    /opt/testbed-venv/bin/python benchmarks/bench_dsf_veth.py [--seconds 5] [--sizes 1082,64] \
        [--engines python,native] [--json]

One DSF fabric (one cluster, two RDSWs, one FDSW, one host each; p4src/dsf_rdsw.p4 and dsf_fabric.p4
programmed by the DSF controller, credits on) is built per engine, on the native backend, with links
of ``--link-mbps`` nominal (default 1000) and no tc shaping: the credit loop paces the cells at that
rate (a nominal rate far above what the switches can do lets the cells overrun the next switch, and
each lost cell then blocks its reassembly context for the timeout).  h1 blasts prebuilt UDP
frames to h2 from a raw socket (benchmarks/bench_switch_veth.py's sender and counter) and h2 counts
what arrives.  Engines (``$TESTBED_DSF_ENGINE`` of the switch processes):

* ``python``: the DSF traffic manager in Python (testbed/p4/v1model/dsf), so the switches forward
  in the Python packet loop with the C pipeline (what the native backend did before tb_dsf.c);
* ``native``: the DSF traffic manager in C (testbed/p4/native/csrc/tb_dsf.c) inside the native
  packet loop (tbio_dsf.h).

Prints packets/s and Mbit/s of goodput received per engine, the switches' CPU microseconds per
packet, native / python as a ratio from this one run, and the load average (the machine is shared:
compare ratios, not absolute figures).
"""
import argparse
import json
import os
import sys
import time

from testbed.fabrics import Fabric

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_switch_veth import BLAST, COUNT, cpu_seconds  # noqa: E402  (the same sender and counter)

SWITCHES = ("rdsw0", "fdsw0", "rdsw1")


def dsf_path_rate(engine, seconds, sizes, link_mbps):
    """``{size: {sent, received, packets_per_s, mbps, cpu_us_per_packet}}`` of h1 -> h2 with ``engine``,
    links of ``link_mbps`` nominal (the credit rate follows it; no tc shaping)."""
    os.environ["TESTBED_DSF_ENGINE"] = engine
    results = {}
    try:
        with Fabric("dsf", clusters=1, rdsw_per_cluster=2, fdsw_per_cluster=1, sdsw=0, hosts_per_rdsw=1,
                    hosts_link_mbps=link_mbps, fabric_link_mbps=link_mbps, shape_links=False, program="dsf",
                    controller="dsf", target="embedded", backend="native") as fabric:
            src, dst = fabric.hosts[0], fabric.hosts[1]
            pids = [fabric.switch(name).process.pid for name in SWITCHES]
            for size in sizes:
                receiver = dst.popen([sys.executable, "-c", COUNT, dst.defaultIntf().name, str(seconds + 3)])
                time.sleep(1.0)
                cpu_before = sum(cpu_seconds(pid) for pid in pids)
                sent = int(src.cmd(f"{sys.executable} -c '{BLAST}' {src.defaultIntf().name} {src.MAC()} "
                                   f"{dst.MAC()} {src.IP()} {dst.IP()} {size} {seconds}").split()[-1])
                out, _ = receiver.communicate(timeout=seconds + 30)
                cpu = sum(cpu_seconds(pid) for pid in pids) - cpu_before
                received, span = out.split()
                received, span = int(received), float(span)
                rate = received / span if span else 0.0
                results[size] = {"sent": sent, "received": received, "packets_per_s": rate,
                                 "mbps": rate * size * 8 / 1e6, "cpu_us_per_packet": 1e6 * cpu / max(received, 1)}
    finally:
        os.environ.pop("TESTBED_DSF_ENGINE", None)
    return results


def main():
    """Measure each engine and print the figures and the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--sizes", default="1082,64", help="comma-separated frame sizes in bytes")
    parser.add_argument("--engines", default="python,native")
    parser.add_argument("--link-mbps", type=int, default=1000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    engines = [name.strip() for name in args.engines.split(",") if name.strip()]
    if not engines or set(engines) - {"python", "native"}:
        parser.error(f"--engines: {args.engines!r}; allowed: python, native")
    result = {"seconds": args.seconds, "link_mbps": args.link_mbps, "load_average_before": os.getloadavg(), "engines": {}}
    for engine in engines:
        result["engines"][engine] = dsf_path_rate(engine, args.seconds, sizes, args.link_mbps)
    result["load_average_after"] = os.getloadavg()
    if {"python", "native"} <= set(engines):
        result["ratio_native_over_python"] = {
            size: result["engines"]["native"][size]["packets_per_s"]
            / max(result["engines"]["python"][size]["packets_per_s"], 1e-9) for size in sizes}
    if args.json:
        print(json.dumps(result, indent=1))
        return
    print(f"DSF path rdsw0-fdsw0-rdsw1 over veths, native backend, links {args.link_mbps} Mbit/s, "
          f"{args.seconds:g} s per size; load average "
          f"before {' '.join(f'{x:.2f}' for x in result['load_average_before'])}, after "
          f"{' '.join(f'{x:.2f}' for x in result['load_average_after'])}")
    for engine, rows in result["engines"].items():
        for size, row in rows.items():
            print(f"  DSF TM {engine:6s} {size:5d} B: sent {row['sent']:8d}  received {row['received']:8d}  "
                  f"{row['packets_per_s']:9.0f} packets/s  {row['mbps']:8.1f} Mbit/s  "
                  f"{row['cpu_us_per_packet']:7.1f} switch CPU us/packet")
    for size, ratio in result.get("ratio_native_over_python", {}).items():
        print(f"  native / python at {size} B: {ratio:.1f}x")


if __name__ == "__main__":
    main()
