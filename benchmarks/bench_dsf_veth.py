"""Benchmark: a DSF path rdsw0 -> fdsw0 -> rdsw1 of embedded switches over veths, native backend.

Run as root::

    /opt/testbed-venv/bin/python benchmarks/bench_dsf_veth.py [--seconds 4] [--size 1082] \
        [--rates 1000,3000,6000,12000,20000] [--engines python,native] [--link-mbps 1000] [--json]

One DSF fabric (one cluster, two RDSWs, one FDSW, one host each; p4src/dsf_rdsw.p4 and dsf_fabric.p4
programmed by the DSF controller, credits on) is built per engine, on the native backend, with links
of ``--link-mbps`` nominal (default 1000) and no tc shaping: the credit loop paces the cells at that
rate.  h1 sends prebuilt UDP frames to h2 from a raw socket at each offered rate in turn (a paced
sender: a sender far beyond what the switches can do starves them of CPU on a small machine, the
fabric switches then drop cells and the rate collapses while it lasts), and h2 counts what arrives
(benchmarks/bench_switch_veth.py's counter).  Engines (``$TESTBED_DSF_ENGINE`` of the switch processes):

* ``python``: the DSF traffic manager in Python (testbed/p4/v1model/dsf), so the switches forward
  in the Python packet loop with the C pipeline (what the native backend did before tb_dsf.c);
* ``native``: the DSF traffic manager in C (testbed/p4/native/csrc/tb_dsf.c) inside the native
  packet loop (tbio_dsf.h).

Prints, per engine and offered rate, packets/s and Mbit/s received, the loss and the switches' CPU
microseconds per packet; each engine's highest received rate with loss <= 1%, native / python as a
ratio from this one run, and the load average (the machine is shared:
compare ratios, not absolute figures).
"""
import argparse
import json
import os
import sys
import time

from testbed.fabrics import Fabric

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_switch_veth import COUNT, cpu_seconds  # noqa: E402  (the same counter)

SWITCHES = ("rdsw0", "fdsw0", "rdsw1")


PACED = """
import socket, sys, time
from scapy.all import Ether, IP, UDP, Raw
intf, src_mac, dst_mac, src_ip, dst_ip, size, seconds, pps = sys.argv[1:9]
size, seconds, pps = int(size), float(seconds), float(pps)
header = Ether(src=src_mac, dst=dst_mac) / IP(src=src_ip, dst=dst_ip) / UDP(sport=1234, dport=4791)
frame = bytes(header / Raw(b"\\0" * max(0, size - len(header))))
sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
sock.bind((intf, 0))
batch = max(1, int(pps // 2000))
sent, due = 0, time.monotonic()
end = due + seconds
while due < end:
    for _ in range(batch):
        try:
            sock.send(frame)
            sent += 1
        except OSError:
            pass
    due += batch / pps
    wait = due - time.monotonic()
    if wait > 0:
        time.sleep(wait)
print(sent)
"""


def dsf_path_rate(engine, seconds, size, rates, link_mbps):
    """``[{offered_pps, sent, received, received_pps, goodput_mbps, loss, cpu_us_per_packet}]`` of h1 -> h2
    with ``engine``, one row per offered rate, links of ``link_mbps`` nominal (the credit rate follows it)."""
    os.environ["TESTBED_DSF_ENGINE"] = engine
    rows = []
    try:
        with Fabric("dsf", clusters=1, rdsw_per_cluster=2, fdsw_per_cluster=1, sdsw=0, hosts_per_rdsw=1,
                    hosts_link_mbps=link_mbps, fabric_link_mbps=link_mbps, shape_links=False, program="dsf",
                    controller="dsf", target="embedded", backend="native") as fabric:
            src, dst = fabric.hosts[0], fabric.hosts[1]
            pids = [fabric.switch(name).process.pid for name in SWITCHES]
            for pps in rates:
                receiver = dst.popen([sys.executable, "-c", COUNT, dst.defaultIntf().name, str(seconds + 3)])
                time.sleep(1.0)
                cpu_before = sum(cpu_seconds(pid) for pid in pids)
                sent = int(src.cmd(f"{sys.executable} -c '{PACED}' {src.defaultIntf().name} {src.MAC()} "
                                   f"{dst.MAC()} {src.IP()} {dst.IP()} {size} {seconds} {pps}").split()[-1])
                out, _ = receiver.communicate(timeout=seconds + 30)
                cpu = sum(cpu_seconds(pid) for pid in pids) - cpu_before
                received = int(out.split()[0])
                rows.append({"offered_pps": pps, "sent": sent, "received": received,
                             "received_pps": received / seconds, "goodput_mbps": received * size * 8 / seconds / 1e6,
                             "loss": 1 - received / max(sent, 1), "cpu_us_per_packet": 1e6 * cpu / max(received, 1)})
    finally:
        os.environ.pop("TESTBED_DSF_ENGINE", None)
    return rows


def main():
    """Measure each engine and print the figures and the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--size", type=int, default=1082, help="frame bytes (default: a 1024-byte RoCE payload)")
    parser.add_argument("--rates", default="1000,3000,6000,12000,20000",
                        help="comma-separated offered rates, packets/s")
    parser.add_argument("--engines", default="python,native")
    parser.add_argument("--link-mbps", type=int, default=1000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rates = [int(rate) for rate in args.rates.split(",")]
    engines = [name.strip() for name in args.engines.split(",") if name.strip()]
    if not engines or set(engines) - {"python", "native"}:
        parser.error(f"--engines: {args.engines!r}; allowed: python, native")
    result = {"seconds": args.seconds, "size": args.size, "link_mbps": args.link_mbps,
              "load_average_before": os.getloadavg(), "engines": {}}
    for engine in engines:
        result["engines"][engine] = dsf_path_rate(engine, args.seconds, args.size, rates, args.link_mbps)
    result["load_average_after"] = os.getloadavg()
    # an engine's rate: the most it delivered at an offered rate with loss <= 1%
    best = {engine: max([row["received_pps"] for row in rows if row["loss"] <= 0.01] or [0.0])
            for engine, rows in result["engines"].items()}
    result["lossless_pps"] = best
    if {"python", "native"} <= set(engines):
        result["ratio_native_over_python"] = best["native"] / max(best["python"], 1e-9)
    if args.json:
        print(json.dumps(result, indent=1))
        return
    print(f"DSF path rdsw0-fdsw0-rdsw1 over veths, native backend, {args.size} B frames, links {args.link_mbps} "
          f"Mbit/s, {args.seconds:g} s per rate; load average before "
          f"{' '.join(f'{x:.2f}' for x in result['load_average_before'])}, after "
          f"{' '.join(f'{x:.2f}' for x in result['load_average_after'])}")
    for engine, rows in result["engines"].items():
        for row in rows:
            print(f"  DSF TM {engine:6s} offered {row['offered_pps']:6d}/s: sent {row['sent']:7d} received "
                  f"{row['received']:7d} ({row['received_pps']:7.0f}/s, {row['goodput_mbps']:6.1f} Mbit/s, "
                  f"loss {100 * row['loss']:5.1f}%)  {row['cpu_us_per_packet']:7.1f} switch CPU us/packet")
    for engine, pps in best.items():
        print(f"  {engine}: {pps:.0f} packets/s ({pps * args.size * 8 / 1e6:.1f} Mbit/s) with loss <= 1%")
    if "ratio_native_over_python" in result:
        print(f"  native / python: {result['ratio_native_over_python']:.1f}x")


if __name__ == "__main__":
    main()
