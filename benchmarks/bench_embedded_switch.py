"""Packets per second of the embedded P4 target (Device.process) running p4src/l3_ecmp.p4.

Programs an LPM route to an ECMP group of 4 next hops, then pushes 64-byte and
1500-byte UDP frames (a new flow every packet, so the selector hash changes)
through ``Device.process`` in one thread and prints packets/s and the mean time
per packet, then the same for 64-byte frames through the traffic manager
(``Device.receive`` + ``Device.transmit_ready``, the switch daemon's path).  This measures the
pipeline alone; the switch daemon over veths adds socket I/O on top (the lead measures that separately).

Usage: /opt/testbed-venv/bin/python benchmarks/bench_embedded_switch.py [--packets N] [--json]
"""
import argparse
import json
import time

from scapy.all import IP, UDP, Ether, Raw

from testbed.p4.loader import load_program
from testbed.p4.program import ActionCall, KeyMatch
from testbed.p4.state import SwitchState, TableEntry
from testbed.p4.v1model.device import Device
from testbed.p4src import program_path


def build_device():
    """Load l3_ecmp and program a /8 route to a 4-member ECMP group; return (load seconds, device)."""
    started = time.perf_counter()
    program = load_program(program_path("l3_ecmp"))
    load_seconds = time.perf_counter() - started
    state = SwitchState(program.info)
    profile = state.action_profiles["MyIngress.ecmp_selector"]
    for member in range(1, 5):
        profile.insert_member(member, ActionCall("MyIngress.set_nhop", (0x020000000000 + member, 0x020000000099,
                                                                         member)))
    profile.insert_group(1, [(member, 1) for member in range(1, 5)])
    state.tables["MyIngress.ipv4_lpm"].insert(TableEntry([KeyMatch("lpm", 0x0A000000, prefix_len=8)], None, None, 1))
    return load_seconds, Device(program, state, cpu_port=255)


def frames(size, count):
    """``count`` UDP frames of ``size`` bytes, each of a different flow."""
    result = []
    for index in range(count):
        packet = Ether() / IP(src="10.1.0.1", dst="10.2.0.1") / UDP(sport=1024 + index % 60000, dport=4791)
        packet = packet / Raw(b"\0" * max(0, size - len(packet)))
        result.append(bytes(packet))
    return result


def measure(device, size, count):
    """Run ``count`` frames of ``size`` bytes; return packets per second."""
    batch = frames(size, min(count, 2000))
    process = device.process
    started = time.perf_counter()
    sent = 0
    while sent < count:
        for frame in batch:
            process(1, frame)
        sent += len(batch)
    elapsed = time.perf_counter() - started
    return sent / elapsed


def measure_queued(device, size, count):
    """Like :func:`measure` through the traffic manager (receive + transmit_ready per frame)."""
    batch = frames(size, min(count, 2000))
    receive, transmit = device.receive, device.transmit_ready
    started = time.perf_counter()
    sent = 0
    while sent < count:
        for frame in batch:
            receive(1, frame)
            transmit()
        sent += len(batch)
    return sent / (time.perf_counter() - started)


def main():
    """Print the packets/s of the embedded switch for 64- and 1500-byte frames."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--packets", type=int, default=50000, help="packets per frame size (default 50000)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args()
    load_seconds, device = build_device()
    measure(device, 64, 2000)  # warm up
    results = {"program": "l3_ecmp", "load_seconds": round(load_seconds, 3)}
    for size in (64, 1500):
        results[f"pps_{size}B"] = round(measure(device, size, args.packets))
    results["pps_64B_queued"] = round(measure_queued(device, 64, args.packets))
    if args.json:
        print(json.dumps(results))
        return
    print(f"l3_ecmp loaded and compiled in {results['load_seconds']:.3f} s")
    for size in (64, 1500):
        pps = results[f"pps_{size}B"]
        print(f"{size:5d}-byte frames: {pps:10,.0f} packets/s  ({1e6 / pps:6.1f} us/packet)")
    pps = results["pps_64B_queued"]
    print(f"   64-byte frames through the traffic manager (receive + transmit_ready): {pps:10,.0f} packets/s")


if __name__ == "__main__":
    main()
