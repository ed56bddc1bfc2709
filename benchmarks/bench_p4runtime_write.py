"""P4Runtime encoding time and Write throughput against one embedded switch (a script, not a test).

Starts one portless ``python -m testbed.embedded_switch.switchd`` with
p4src/l3_ecmp.p4, opens a primary session, and measures:

* the encoding of one Write of ``--entries`` table entries (default 320): the
  client building the Update messages, and ``SerializeToString`` of the request;
* entries per second written one entry per Write, and in batches of ``--batch``
  updates per Write (insert, then delete, so every round starts empty).

It prints the protobuf backend (``upb``/``cpp`` are compiled, ``python`` is not)
and version first.

Usage::

    /opt/testbed-venv/bin/python benchmarks/bench_p4runtime_write.py [--entries 320] [--batch 320] [--rounds 5]
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


def write_rate(client, entries, batch):
    """Entries per second of inserting and deleting ``entries``, ``batch`` updates per Write."""
    started = time.perf_counter()
    for start in range(0, len(entries), batch):
        with client.batch():
            for i, match in enumerate(entries[start:start + batch], start):
                client.insert_table_entry(TABLE, match, member_id=1 + i % 4)
    inserted = time.perf_counter()
    for start in range(0, len(entries), batch):
        with client.batch():
            for match in entries[start:start + batch]:
                client.delete_table_entry(TABLE, match)
    deleted = time.perf_counter()
    return len(entries) / (inserted - started), len(entries) / (deleted - inserted)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=320, help="table entries per round")
    parser.add_argument("--batch", type=int, default=320, help="updates per Write when batched")
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
            for batch in (1, args.batch):
                rates = [write_rate(client, entries, batch) for _ in range(args.rounds)]
                print(f"{batch:4d} update(s) per Write: insert {statistics.median(r[0] for r in rates):8.0f} "
                      f"entries/s, delete {statistics.median(r[1] for r in rates):8.0f} entries/s")


if __name__ == "__main__":
    main()
