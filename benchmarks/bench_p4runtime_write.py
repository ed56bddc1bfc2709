"""Table-entry Write throughput of one embedded switch over P4Runtime (a script, not a test).

Starts one embedded switch with a one-table program (an exact 32-bit key, one
action), makes this script its primary controller, and times inserting table
entries: one update per Write (unbatched), then batches of 100 and 1,000 updates
per Write (``--batch-sizes``), into a table that already holds ``--prefill`` entries
(the cost of a write to a large table); then deleting the unbatched run's entries, one
per Write.  Every run inserts fresh keys into the same table;
the Update messages are built before the clock starts, so the figures are those of
the RPCs: client serialization, gRPC on localhost, the server's checks and the
state change.

By default the switch is a separate process (``python -m
testbed.embedded_switch.switchd``, as in the testbed); ``--in-process`` runs the
server in this process instead (then client and server share one interpreter).
The load average of the machine is printed with the figures, since other work on
the cores changes them.

Usage::

    /opt/testbed-venv/bin/python benchmarks/bench_p4runtime_write.py [--entries 5000] [--prefill 10000] [--json]
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from testbed.p4.device_config import DEVICE_CONFIG_FORMAT
from testbed.p4runtime.client import P4RuntimeClient

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TABLE = "I.hosts"
PROGRAM = """
#include <core.p4>
#include <v1model.p4>
header h_t { bit<32> addr; }
struct headers_t { h_t h; }
struct meta_t { bit<8> unused; }
parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }
control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action fwd(bit<9> port) { sm.egress_spec = port; }
    table hosts { key = { hdr.h.addr : exact; } actions = { fwd; NoAction; } size = 1048576; }
    apply { hosts.apply(); }
}
control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.h); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class SwitchProcess:
    """An embedded switch in its own process (no ports, no program until one is set), with its control
    socket at ``control_path``."""

    def __init__(self):
        self.address = f"127.0.0.1:{_free_port()}"
        self._dir = tempfile.TemporaryDirectory(prefix="bench-p4rt-")
        ready = os.path.join(self._dir.name, "ready")
        self.control_path = os.path.join(self._dir.name, "control")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "testbed.embedded_switch.switchd", "--name", "bench", "--device-id", "1",
             "--grpc-addr", self.address, "--ready-file", ready, "--control-socket", self.control_path], cwd=REPO,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while not os.path.exists(ready):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the switch did not start: {self.process.stderr.read().decode()}")
            time.sleep(0.05)

    def close(self):
        self.process.terminate()
        self.process.wait(10)
        self._dir.cleanup()


class SwitchInProcess:
    """An embedded switch whose P4Runtime server runs in this process."""

    def __init__(self):
        from testbed.embedded_switch.p4runtime_target import EmbeddedTarget
        from testbed.p4runtime.server import P4RuntimeServer

        self.target = EmbeddedTarget()
        self.server = P4RuntimeServer(self.target, device_id=1, address="127.0.0.1:0")
        self.address = f"127.0.0.1:{self.server.start()}"

    def close(self):
        self.server.stop()
        self.target.close()


def set_bench_program(client):
    """Make :data:`PROGRAM` the switch's pipeline, through ``client`` (its primary controller)."""
    config = json.dumps({"format": DEVICE_CONFIG_FORMAT, "main": "bench.p4", "sources": {"bench.p4": PROGRAM}}).encode()
    client.set_pipeline(p4info=p4info_pb2.P4Info(), device_config=config)
    client.load_p4info()


def insert_updates(client, first_key, count, kind=p4runtime_pb2.Update.INSERT):
    """``count`` INSERT (or ``kind``: DELETE) updates of the hosts table for keys ``first_key`` ... (built in
    advance)."""
    table_id = client.index.id_of("tables", TABLE)
    action_id = client.index.id_of("actions", "I.fwd")
    updates = []
    for key in range(first_key, first_key + count):
        update = p4runtime_pb2.Update(type=kind)
        entry = update.entity.table_entry
        entry.table_id = table_id
        entry.match.add(field_id=1).exact.value = key.to_bytes(4, "big")
        if kind != p4runtime_pb2.Update.DELETE:
            action = entry.action.action
            action.action_id = action_id
            action.params.add(param_id=1, value=bytes([1 + key % 250]))
        updates.append(update)
    return updates


def measure(client, updates, batch_size):
    """Entries per second inserting ``updates`` in Writes of ``batch_size`` updates."""
    started = time.perf_counter()
    for start in range(0, len(updates), batch_size):
        client.write(updates[start:start + batch_size])
    return len(updates) / (time.perf_counter() - started)


def main(argv=None):
    """Print (or with --json, dump) table entries per second per batch size."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=5000, help="entries inserted per batch size (default 5000)")
    parser.add_argument("--unbatched-entries", type=int, default=2000,
                        help="entries inserted one per Write (default 2000)")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[100, 1000],
                        help="updates per Write of the batched runs (default 100 1000)")
    parser.add_argument("--prefill", type=int, default=0,
                        help="entries the table holds before the runs (inserted 1,000 per Write, not timed)")
    parser.add_argument("--in-process", action="store_true", help="run the server in this process")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    switch = SwitchInProcess() if args.in_process else SwitchProcess()
    load_before = os.getloadavg()
    try:
        with P4RuntimeClient(switch.address, device_id=1, election_id=(0, 1), timeout=600) as client:
            set_bench_program(client)
            measure(client, insert_updates(client, 10_000_000, 200), 1)  # warm up
            measure(client, insert_updates(client, 20_000_000, args.prefill), 1000)
            runs = [("unbatched", 1, args.unbatched_entries)]
            runs += [(f"batch_{size}", size, args.entries) for size in args.batch_sizes]
            results = {"server": "in-process" if args.in_process else "switchd process",
                       "cpus": os.cpu_count(), "loadavg_before": [round(x, 2) for x in load_before],
                       "prefill": args.prefill}
            first_key = 0
            for name, batch_size, count in runs:
                updates = insert_updates(client, first_key, count)
                first_key += count
                results[f"{name}_entries_per_s"] = round(measure(client, updates, batch_size))
            deletes = insert_updates(client, 0, args.unbatched_entries, p4runtime_pb2.Update.DELETE)
            results["unbatched_delete_entries_per_s"] = round(measure(client, deletes, 1))
            results["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
    finally:
        switch.close()
    if args.json:
        print(json.dumps(results))
        return 0
    print(f"P4Runtime table-entry Writes to one embedded switch ({results['server']}), "
          f"{results['cpus']} CPUs, load average {results['loadavg_before'][0]:.2f} before, "
          f"{results['loadavg_after'][0]:.2f} after; the table held {200 + args.prefill:,} entries at the start")
    for name, batch_size, count in runs:
        rate = results[f"{name}_entries_per_s"]
        label = "1 update per Write" if batch_size == 1 else f"{batch_size} updates per Write"
        print(f"  {label:24} {count:7d} entries: {rate:10,.0f} entries/s")
    print(f"  {'deleted, 1 per Write':24} {args.unbatched_entries:7d} entries: "
          f"{results['unbatched_delete_entries_per_s']:10,.0f} entries/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
