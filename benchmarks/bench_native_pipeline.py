"""Packets/s of the embedded target's pipeline in process: Python backend against native backend.

For p4src/l3_ecmp.p4 and p4src/ecmp.p4 (an LPM route to a 4-member ECMP group, a new flow every
frame so the selector hash changes), 64- and 1500-byte UDP frames go through

* ``python``: ``Device.process`` of the Python backend (generated Python);
* ``native``: ``NativeDevice.process`` (one cffi call of the generated C per frame, Python around it);
* ``native-c``: the same C entry point (``tb_process``) called in a C loop, no Python per frame
  (a tiny loop compiled with the same compiler; what a native packet loop gets);
* ``queued``: 64-byte frames through the traffic manager (``receive`` + ``transmit_ready`` per frame, the switch
  daemon's path today), Python and native backends.

All in one run, so the ratios are comparable on a loaded machine; the machine's load is printed.

Usage: /opt/testbed-venv/bin/python benchmarks/bench_native_pipeline.py [--packets N] [--json]
"""
import argparse
import json
import os
import shutil
import subprocess
import tempfile
import time

from scapy.all import IP, UDP, Ether, Raw

from testbed.p4.loader import load_program
from testbed.p4.native import make_device
from testbed.p4.native.build import compiler
from testbed.p4.program import ActionCall, KeyMatch
from testbed.p4.state import SwitchState, TableEntry
from testbed.p4src import program_path

LOOP_C = r"""
#include <stdint.h>
#include <time.h>
typedef int (*process_fn)(void *, void *, const uint8_t *, uint32_t, uint32_t, uint64_t, uint64_t, uint8_t *,
                          uint32_t, int32_t *, void *);
double bench_loop(process_fn fn, void *pl, void *pkt, const uint8_t *frames, uint32_t size, uint32_t nframes,
                  uint64_t count, uint8_t *out, uint32_t cap, void *req, uint64_t *sent) {
    struct timespec a, b;
    int32_t len = 0;
    uint64_t ok = 0;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (uint64_t i = 0; i < count; i++) {
        const uint8_t *frame = frames + (i % nframes) * size;
        if (fn(pl, pkt, frame, size, 1, i * 1000, i, out, cap, &len, req) == 0) ok++;
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    *sent = ok;
    return (b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9;
}
"""


def build_device(name, backend):
    """Load a program and program a /8 route to a 4-member ECMP group on the given backend."""
    program = load_program(program_path(name))
    state = SwitchState(program.info)
    profile = state.action_profiles["MyIngress.ecmp_selector"]
    for member in range(1, 5):
        profile.insert_member(member, ActionCall("MyIngress.set_nhop", (0x020000000000 + member, 0x020000000099,
                                                                         member)))
    profile.insert_group(1, [(member, 1) for member in range(1, 5)])
    state.tables["MyIngress.ipv4_lpm"].insert(TableEntry([KeyMatch("lpm", 0x0A000000, prefix_len=8)], None, None, 1))
    return make_device(program, state, backend=backend, cpu_port=255)


def frames(size, count):
    """``count`` UDP frames of ``size`` bytes, each of a different flow."""
    result = []
    for index in range(count):
        packet = Ether() / IP(src="10.1.0.1", dst="10.2.0.1") / UDP(sport=1024 + index % 60000, dport=4791)
        packet = packet / Raw(b"\0" * max(0, size - len(packet)))
        result.append(bytes(packet))
    return result


def measure(device, batch, count):
    """Packets per second of ``device.process`` over ``count`` frames taken from ``batch``."""
    process = device.process
    for frame in batch[:500]:  # warm up (caches, first-call costs)
        process(1, frame)
    sent = 0
    forwarded = 0
    started = time.perf_counter()
    while sent < count:
        for frame in batch:
            forwarded += len(process(1, frame))
        sent += len(batch)
    elapsed = time.perf_counter() - started
    assert forwarded == sent, "every frame must be forwarded"
    return sent / elapsed


def measure_queued(device, batch, count):
    """Packets per second through the traffic manager (receive + transmit_ready per frame)."""
    receive, transmit = device.receive, device.transmit_ready
    for frame in batch[:500]:
        receive(1, frame)
        transmit()
    sent = forwarded = 0
    started = time.perf_counter()
    while sent < count:
        for frame in batch:
            receive(1, frame)
            forwarded += len(transmit())
        sent += len(batch)
    elapsed = time.perf_counter() - started
    assert forwarded == sent, "every frame must be forwarded"
    return sent / elapsed


def measure_c_loop(device, batch, count, loop):
    """Packets per second of ``tb_process`` called from a C loop on the native device's state."""
    ffi, lib = device.library.ffi, device.library.lib
    size = len(batch[0])
    data = ffi.new("uint8_t[]", b"".join(batch))
    pkt = ffi.new("char[]", device.library.packet_size)
    out = ffi.new("uint8_t[]", 65536)
    req = ffi.new("tb_request_t *")
    sent = loop.ffi.new("uint64_t *")
    function = ffi.cast("void *", ffi.addressof(lib, "tb_process"))
    seconds = loop.lib.bench_loop(loop.ffi.cast("void *", function), loop.ffi.cast("void *", device._pl),
                                  loop.ffi.cast("void *", pkt), loop.ffi.cast("uint8_t *", data), size, len(batch),
                                  count, loop.ffi.cast("uint8_t *", out), 65536, loop.ffi.cast("void *", req), sent)
    assert sent[0] == count, "every frame must be forwarded"
    return count / seconds


class _Loop:
    def __init__(self, folder):
        import cffi

        source = os.path.join(folder, "loop.c")
        with open(source, "w") as handle:
            handle.write(LOOP_C)
        library = os.path.join(folder, "loop.so")
        subprocess.run([compiler(), "-O2", "-shared", "-fPIC", source, "-o", library], check=True)
        self.ffi = cffi.FFI()
        self.ffi.cdef("double bench_loop(void *fn, void *pl, void *pkt, const uint8_t *frames, uint32_t size, "
                      "uint32_t nframes, uint64_t count, uint8_t *out, uint32_t cap, void *req, uint64_t *sent);")
        self.lib = self.ffi.dlopen(library)


def main():
    """Print packets/s per backend and the ratios, for l3_ecmp and ecmp at 64 and 1500 bytes."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--packets", type=int, default=20000, help="frames per Python measurement")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix=f"testbed-bench-{os.getpid()}-")
    results = {"loadavg": os.getloadavg()}
    try:
        loop = _Loop(folder)
        for name in ("l3_ecmp", "ecmp"):
            python = build_device(name, "python")
            native = build_device(name, "native")
            for size in (64, 1500):
                batch = frames(size, 2000)
                row = {
                    "python": measure(python, batch, args.packets),
                    "native": measure(native, batch, args.packets * 4),
                    "native-c": measure_c_loop(native, batch, args.packets * 100, loop),
                }
                row["native/python"] = row["native"] / row["python"]
                row["native-c/python"] = row["native-c"] / row["python"]
                results[f"{name} {size}B"] = row
            batch = frames(64, 2000)
            results[f"{name} queued 64B"] = {"python": measure_queued(python, batch, args.packets),
                                             "native": measure_queued(native, batch, args.packets)}
            row = results[f"{name} queued 64B"]
            row["native/python"] = row["native"] / row["python"]
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"load average at start: {results.pop('loadavg')}")
    print(f"{'program':<20}{'python pkt/s':>14}{'native pkt/s':>14}{'native-c pkt/s':>16}{'native/py':>11}"
          f"{'native-c/py':>13}")
    for key, row in results.items():
        if "native-c" in row:
            print(f"{key:<20}{row['python']:>14,.0f}{row['native']:>14,.0f}{row['native-c']:>16,.0f}"
                  f"{row['native/python']:>11.1f}{row['native-c/python']:>13.1f}")
        else:
            print(f"{key:<20}{row['python']:>14,.0f}{row['native']:>14,.0f}{'-':>16}{row['native/python']:>11.1f}")


if __name__ == "__main__":
    main()
