"""Packets per second through an RDSW-FDSW-RDSW path of embedded devices, against the L3 program on a path
of the same length; cells per packet.

Not a timed test: a measurement.  Both paths run in this process on a simulated clock with links of
no rate limit (:class:`testbed.p4.v1model.wiring.WiredDevices`), so what is measured is the
pipelines' and the DSF traffic manager's work per packet, not link speed:

* DSF: ``rdsw0 - fdsw0 - rdsw1`` (one cluster, one fabric node), p4src/dsf_rdsw.p4 and
  p4src/dsf_fabric.p4 programmed by the DSF control plane (testbed.controllers.dsf);
  credits on, so each packet costs its VOQ enqueue, its share of credit requests and
  grants, its cells (one ingress and egress pass at every node each), reassembly and
  the delivery pass;
* L3: ``s1 - s2 - s3`` running p4src/l3_ecmp.p4 with one route per host.

The devices' backend is ``$TESTBED_BACKEND`` (python by default).  On the native backend the DSF
path runs twice, with the DSF traffic manager in C (``dsf_engine = "native"``) and with the Python
reference (``"python"``), and their ratio is printed.

Run: ``python benchmarks/bench_dsf_path.py [--packets N] [--size BYTES] [--cell-bytes B] [--json]``.
Prints packets/s for both, their ratio, data cells per packet and the credit requests and grants
per packet, and the load average (other jobs on the machine slow both paths alike; compare the
ratio).
"""
import argparse
import json
import os
import time

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from testbed.controllers.dsf.inprocess import build_inprocess_fabric
from testbed.modes import P4SRC_DIR
from testbed.p4.loader import load_program
from testbed.p4.program import ActionCall, KeyMatch
from testbed.p4.state import SwitchState, TableEntry
from testbed.p4.native import default_backend, make_device
from testbed.p4.v1model.dsf.cells import cell_count
from testbed.p4.v1model.wiring import SimClock, WiredDevices
from testbed.topologies.registry import make_topology

SPACING_NS = 1_000_000  # packets enter 1 ms apart (simulated): no queueing anywhere


def frame(src_ip, dst_ip, size):
    """A UDP frame of ``size`` bytes in all."""
    return bytes(Ether(src="00:00:0a:00:00:01", dst="02:00:00:00:00:01") / IP(src=src_ip, dst=dst_ip)
                 / UDP(sport=1234, dport=4791) / (b"x" * max(0, size - 42)))


def bench_dsf(packets, size, cell_bytes, engine=None):
    """Packets/s and cells per packet through rdsw0-fdsw0-rdsw1 (``engine``: the native devices'
    ``dsf_engine``, None: their default)."""
    topo = make_topology("dsf", clusters=1, rdsw_per_cluster=2, fdsw_per_cluster=1, sdsw=0, hosts_per_rdsw=1)
    fabric = build_inprocess_fabric(topo, mode_params={"dsf_cell_bytes": cell_bytes}, shape=False)
    if engine is not None:
        for device in fabric.wired.devices.values():
            device.dsf_engine = engine
    graph = fabric.graph
    src, dst = graph.nodes["h1"]["ip"].split("/")[0], graph.nodes["h2"]["ip"].split("/")[0]
    data = frame(src, dst, size)
    rdsw, port = fabric.host_port("h1")
    start = fabric.clock.now_ns
    for index in range(packets):
        fabric.wired.schedule(start + index * SPACING_NS, rdsw, port, data)
    began = time.perf_counter()
    fabric.wired.run(until_ns=start + packets * SPACING_NS + 1_000_000_000)
    elapsed = time.perf_counter() - began
    delivered = len(fabric.wired.delivered["h2"])
    frames = sum(link.sent_frames for (name, _port), link in fabric.wired.links.items() if name == "rdsw0")
    data_cells = cell_count(len(data), cell_bytes) * sum(fabric.states["rdsw0"].counters["dsf_voq_dequeued"].packets)
    grants = sum(fabric.states["rdsw1"].counters["dsf_credit_granted"].packets)
    per_packet = max(1, delivered)
    return {"delivered": delivered, "seconds": elapsed, "packets_per_s": delivered / elapsed,
            "cells_per_packet": data_cells / per_packet,
            "credit_requests_per_packet": (frames - data_cells) / per_packet,
            "credit_grants_per_packet": grants / per_packet}


def bench_l3(packets, size):
    """Packets/s through s1-s2-s3 running l3_ecmp.p4."""
    program = load_program(os.path.join(P4SRC_DIR, "l3_ecmp.p4"))
    clock = SimClock()
    wired = WiredDevices(clock)
    dst_ip = 0x0A000101
    for name in ("s1", "s2", "s3"):
        state = SwitchState(program.info)
        out = 2 if name != "s3" else 1
        profile = state.action_profiles["MyIngress.ecmp_selector"]
        profile.insert_member(1, ActionCall("MyIngress.set_nhop", (0x020000000001, 0x020000000002, out)))
        state.tables["MyIngress.ipv4_lpm"].insert(TableEntry(
            matches=[KeyMatch("lpm", value=dst_ip, prefix_len=32)], member_id=1))
        wired.add(name, make_device(program, state, clock_ns=clock, raise_errors=True))
    wired.connect("s1", 2, "s2", 3)
    wired.connect("s2", 2, "s3", 3)
    wired.attach_host("h2", "s3", 1)
    data = frame("10.0.0.1", "10.0.1.1", size)
    start = clock.now_ns
    for index in range(packets):
        wired.schedule(start + index * SPACING_NS, "s1", 1, data)
    began = time.perf_counter()
    wired.run(until_ns=start + packets * SPACING_NS + 1_000_000_000)
    elapsed = time.perf_counter() - began
    delivered = len(wired.delivered["h2"])
    return {"delivered": delivered, "seconds": elapsed, "packets_per_s": delivered / elapsed}


def main():
    """Run both benchmarks and print (or dump as JSON) the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--packets", type=int, default=2000)
    parser.add_argument("--size", type=int, default=1082, help="frame bytes (default: a 1024-byte RoCE payload)")
    parser.add_argument("--cell-bytes", type=int, default=512)
    parser.add_argument("--repeat", type=int, default=3,
                        help="alternate the two paths this many times and keep each one's best run "
                        "(other jobs on the machine slow runs down, never up)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    backend = default_backend()
    dsf_runs, python_tm_runs, l3_runs = [], [], []
    for _ in range(max(1, args.repeat)):
        dsf_runs.append(bench_dsf(args.packets, args.size, args.cell_bytes))
        if backend != "python":
            python_tm_runs.append(bench_dsf(args.packets, args.size, args.cell_bytes, engine="python"))
        l3_runs.append(bench_l3(args.packets, args.size))
    dsf = max(dsf_runs, key=lambda run: run["packets_per_s"])
    l3 = max(l3_runs, key=lambda run: run["packets_per_s"])
    result = {"packets": args.packets, "frame_bytes": args.size, "cell_bytes": args.cell_bytes, "repeat": args.repeat,
              "backend": backend, "dsf": dsf,
              "l3": l3, "ratio_dsf_over_l3": dsf["packets_per_s"] / l3["packets_per_s"],
              "load_average": os.getloadavg()}
    if python_tm_runs:
        python_tm = max(python_tm_runs, key=lambda run: run["packets_per_s"])
        result["dsf_python_tm"] = python_tm
        result["ratio_native_tm_over_python_tm"] = dsf["packets_per_s"] / python_tm["packets_per_s"]
    if args.json:
        print(json.dumps(result, indent=1))
        return
    print(f"backend {backend}; frame {args.size} B, cells of {args.cell_bytes} B, {args.packets} packets, "
          f"best of {args.repeat}, load average {' '.join(f'{x:.2f}' for x in result['load_average'])}")
    print(f"DSF rdsw-fdsw-rdsw: {dsf['packets_per_s']:8.0f} packets/s  "
          f"({dsf['cells_per_packet']:.2f} cells per packet, "
          f"+ {dsf['credit_requests_per_packet']:.2f} credit requests and {dsf['credit_grants_per_packet']:.2f} "
          f"grants)")
    if python_tm_runs:
        print(f"DSF, Python TM:     {python_tm['packets_per_s']:8.0f} packets/s  (the DSF traffic manager in Python)")
        print(f"ratio C TM / Python TM: {result['ratio_native_tm_over_python_tm']:.3f}")
    print(f"L3  s1-s2-s3:       {l3['packets_per_s']:8.0f} packets/s")
    print(f"ratio DSF / L3:     {result['ratio_dsf_over_l3']:.3f}")


if __name__ == "__main__":
    main()
