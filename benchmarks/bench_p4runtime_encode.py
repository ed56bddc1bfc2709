"""P4Runtime message encoding time with the installed protobuf backend (a script, not a test).

Starts one portless ``python -m testbed.embedded_switch.switchd`` with
p4src/l3_ecmp.p4, opens a primary session (for the program's P4Info), and
measures, for one Write of ``--entries`` route entries (default 320, the routes
of a k=4 FatTree): the client building the Update messages,
``SerializeToString`` and ``FromString`` of the WriteRequest, and the whole
Write RPC of those entries in one batch (insert, then delete again).

It prints the protobuf backend (``upb``/``cpp`` are compiled, ``python`` is not)
and version first.  Write throughput over many batch sizes is
benchmarks/bench_p4runtime_write.py's job.

Usage::

    /opt/testbed-venv/bin/python benchmarks/bench_p4runtime_encode.py [--entries 320] [--rounds 5]
"""
import argparse
import ipaddress
import os
import statistics
import time

import google.protobuf
from google.protobuf.internal import api_implementation
from p4.v1 import p4runtime_pb2
import testbed.p4src
from testbed.p4runtime.client import P4RuntimeClient

from portless_switches import portless_switches  # benchmarks/ helper module

TABLE = "MyIngress.ipv4_lpm"
SELECTOR = "MyIngress.ecmp_selector"


def matches(count):
    base = int(ipaddress.ip_address("10.0.0.0"))
    return [{"hdr.ipv4.dstAddr": (str(ipaddress.ip_address(base + i)), 32)} for i in range(count)]


def encode_once(client, entries):
    """Seconds to build ``entries`` insert updates and to serialize the WriteRequest."""
    started = time.perf_counter()
    updates = []
    for match in entries:
        update = p4runtime_pb2.Update(type=p4runtime_pb2.Update.INSERT)
        update.entity.table_entry.CopyFrom(client.table_entry_message(TABLE, match, member_id=1 + len(updates) % 4))
        updates.append(update)
    request = p4runtime_pb2.WriteRequest(device_id=client.device_id)
    request.updates.extend(updates)
    built = time.perf_counter()
    data = request.SerializeToString()
    serialized = time.perf_counter()
    p4runtime_pb2.WriteRequest.FromString(data)
    parsed = time.perf_counter()
    return built - started, serialized - built, parsed - serialized, len(data)


def write_once(client, entries):
    """Seconds of one Write RPC inserting ``entries`` (deleted again afterwards, untimed)."""
    started = time.perf_counter()
    with client.batch():
        for i, match in enumerate(entries):
            client.insert_table_entry(TABLE, match, member_id=1 + i % 4)
    seconds = time.perf_counter() - started
    with client.batch():
        for match in entries:
            client.delete_table_entry(TABLE, match)
    return seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=320, help="table entries per round")
    parser.add_argument("--rounds", type=int, default=5, help="repetitions (median reported)")
    args = parser.parse_args()
    print(f"protobuf {google.protobuf.__version__}, backend {api_implementation.Type()}; "
          f"load average {os.getloadavg()[0]:.2f}")
    with portless_switches(1, testbed.p4src.program_path("l3_ecmp")) as switches:
        address = switches[0][1]
        with P4RuntimeClient(address, device_id=1, election_id=(0, 1)) as client:
            with client.batch():
                for port in range(1, 5):
                    client.insert_member(SELECTOR, port, "MyIngress.set_nhop",
                                         {"dmac": "00:00:00:00:00:01", "smac": "02:00:00:00:00:01", "port": port})
            entries = matches(args.entries)
            timings = [encode_once(client, entries) for _ in range(args.rounds)]
            build, serialize, parse = (statistics.median(t[i] for t in timings) for i in range(3))
            print(f"one Write of {args.entries} entries ({timings[0][3]} bytes): build updates "
                  f"{build * 1000:.1f} ms, SerializeToString {serialize * 1000:.2f} ms, parse "
                  f"{parse * 1000:.2f} ms")
            write = statistics.median(write_once(client, entries) for _ in range(args.rounds))
            print(f"the same entries in one Write RPC (build, encode, send, switch applies): "
                  f"{write * 1000:.1f} ms")


if __name__ == "__main__":
    main()
