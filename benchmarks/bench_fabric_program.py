"""Time to program a fabric of portless embedded switches and to reroute around a failed link.

Starts one portless switch process per switch of a topology (default FatTree
k=4: 20 switches; no Mininet), then times :class:`FabricProgrammer`: connecting,
pushing the pipeline, installing every route, and rerouting after one
aggregation-core link fails and after it comes back (with the route computation
and the P4Runtime writes reported apart when the programmer reports them).

Usage::

    /opt/testbed-venv/bin/python benchmarks/bench_fabric_program.py [--kind fattree] [--param k=4]
"""
import argparse
import os
import time

from google.protobuf.internal import api_implementation

import testbed.p4src
from testbed.controllers.fabric_programmer import FabricProgrammer
from testbed.targets import pipeline_config
from testbed.topologies.registry import make_topology

from portless_switches import portless_switches  # benchmarks/ helper module


def _ms(seconds):
    return f"{seconds * 1000:.0f} ms"


def _describe(result):
    parts = [f"{result['entries_written']} entries in {_ms(result['seconds'])}"]
    if "compute_s" in result:
        parts.append(f"(compute {_ms(result['compute_s'])}, write {_ms(result['write_s'])})")
    return " ".join(parts)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kind", default="fattree", help="topology kind (default fattree)")
    parser.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                        help="topology parameter (default k=4 for fattree)")
    args = parser.parse_args()
    params = dict(item.split("=", 1) for item in args.param) or ({"k": "4"} if args.kind == "fattree" else {})
    graph = make_topology(args.kind, **params).graph()
    names = sorted(n for n in graph.nodes if graph.nodes[n].get("role") != "host")
    pipeline = pipeline_config(testbed.p4src.program_path("l3_ecmp"), "embedded")
    print(f"{args.kind} {params}: {len(names)} switches; protobuf backend {api_implementation.Type()}; "
          f"load average {os.getloadavg()[0]:.2f}")
    with portless_switches(len(names)) as processes:
        switches = {name: {"grpc": address, "device_id": device_id}
                    for name, (_process, address, device_id) in zip(names, processes)}
        programmer = FabricProgrammer(graph, switches, pipeline)
        try:
            started = time.monotonic()
            programmer.connect()
            connected = time.monotonic()
            programmer.push_pipeline()
            pushed = time.monotonic()
            written = programmer.install_routes()
            installed = time.monotonic()
            print(f"  connect {_ms(connected - started)}, pipeline {_ms(pushed - connected)}, "
                  f"routes {written} entries in {_ms(installed - pushed)}")
            link = next((u, v) for u, v in graph.edges()
                        if {graph.nodes[u].get("role"), graph.nodes[v].get("role")} == {"agg", "core"}) \
                if args.kind == "fattree" else next(iter(graph.edges()))
            print(f"  reroute after {link[0]}-{link[1]} fails: {_describe(programmer.reroute({link}))}")
            print(f"  reroute after it comes back: {_describe(programmer.reroute(set()))}")
        finally:
            programmer.close()


if __name__ == "__main__":
    main()
