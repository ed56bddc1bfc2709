"""Differential test of the native backend against the Python backend, in process (no Mininet).

For every program of p4src/ and tests/p4lang/programs/ that the native backend compiles, one seeded script
of the BMv2 differential harness (:class:`diff_harness.ScriptBuilder`: table entries, action
profile members and weighted groups, default actions, invalid writes, state changes between
batches, at least :data:`FRAMES` frames of many kinds, PacketOuts) drives two devices of the
same program, one per backend, with registers seeded at random and a clock that advances by a
seeded random step per frame.  Every frame must give byte-identical outputs on the same ports in
the same order, every write the same outcome, and after every batch every register and counter
cell must be equal.  A program the native backend refuses is skipped with the construct and
file:line it names (and that refusal is itself checked to name a location).

``TESTBED_NATIVE_DIFF_FRAMES`` / ``TESTBED_NATIVE_DIFF_SEED`` change the frame count / seed;
``TESTBED_NATIVE_SANITIZE=1`` builds the pipelines with ASan and UBSan (see
test_native_sanitized_run, which runs this file so in a child process).
"""
import glob
import os
import random
import struct
import subprocess
import sys

import pytest

from diff_harness import Batch, PacketOuts, ScriptBuilder, Write
from testbed.errors import NativeBackendError, TestbedError
from testbed.p4.loader import load_program
from testbed.p4.native import make_device
from testbed.p4.native.build import build, compiler, sanitizer_preload
from testbed.p4.program import ActionCall, KeyMatch
from testbed.p4.state import SwitchState, TableEntry
from testbed.p4runtime.values import match_from_spec, parse_value

from repo_paths import REPO
FRAMES = int(os.environ.get("TESTBED_NATIVE_DIFF_FRAMES", "10000"))
SEED = int(os.environ.get("TESTBED_NATIVE_DIFF_SEED", "1"))
CPU_PORT = 255
PROGRAMS = sorted(os.path.relpath(p, REPO) for p in glob.glob(os.path.join(REPO, "p4src", "*.p4"))
                  + glob.glob(os.path.join(REPO, "tests", "p4lang", "programs", "*.p4")))

pytestmark = pytest.mark.skipif(compiler() is None, reason="no C compiler")


class Twin:
    """One device of a program with its state, and the writes of the harness's scripts applied to it."""

    def __init__(self, program, backend, clock):
        self.state = SwitchState(program.info)
        self.info = program.info
        self.digests = []
        self.logs = []
        self.device = make_device(program, self.state, backend=backend, cpu_port=CPU_PORT, seed=SEED,
                                  clock_ns=clock, raise_errors=backend == "python",
                                  on_digest=lambda name, values: self.digests.append((name, values)),
                                  on_log=self.logs.append)

    def _call(self, action, params):
        info = self.info.actions[action]
        return ActionCall(action, tuple(parse_value(params[p.name], p.bitwidth, p.name) for p in info.params))

    def _matches(self, table, match):
        matches = []
        for key in table.info.match_keys:
            spec = match_from_spec(key.match_type, match.get(key.name), key.bitwidth, key.name)
            kind = key.match_type
            if spec is None:
                matches.append(KeyMatch("lpm", 0, prefix_len=0) if kind == "lpm" else
                               KeyMatch("range", 0, high=(1 << key.bitwidth) - 1) if kind == "range" else
                               KeyMatch(kind, 0, mask=0 if kind == "ternary" else None))
            elif kind == "lpm":
                matches.append(KeyMatch("lpm", spec["value"], prefix_len=spec["prefix_len"]))
            elif kind == "ternary":
                matches.append(KeyMatch("ternary", spec["value"], mask=spec["mask"]))
            elif kind == "range":
                matches.append(KeyMatch("range", spec["low"], high=spec["high"]))
            elif kind == "optional":
                matches.append(KeyMatch("optional", spec["value"], mask=(1 << key.bitwidth) - 1))
            else:
                matches.append(KeyMatch("exact", spec["value"]))
        return matches

    def write(self, step):
        """Apply one script write; return its outcome (None, or the error's class and status)."""
        kw = dict(step.kwargs)
        try:
            method = step.method
            if method.endswith("table_entry"):
                table = self.state.tables[kw["table"]]
                call = self._call(kw["action"], kw.get("params") or {}) if kw.get("action") else None
                entry = TableEntry(self._matches(table, kw.get("match") or {}), action=call,
                                   member_id=kw.get("member_id"), group_id=kw.get("group_id"),
                                   priority=kw.get("priority"))
                getattr(table, method.split("_")[0])(entry)
            elif method == "set_default_action":
                self.state.tables[kw["table"]].set_default(self._call(kw["action"], kw.get("params") or {}))
            else:
                profile = self.state.action_profiles[kw["profile"]]
                if method in ("insert_member", "modify_member"):
                    getattr(profile, method)(kw["member_id"], self._call(kw["action"], kw.get("params") or {}))
                elif method == "delete_member":
                    profile.delete_member(kw["member_id"])
                elif method in ("insert_group", "modify_group"):
                    members = [m if isinstance(m, tuple) else (m, 1) for m in kw["members"]]
                    getattr(profile, method)(kw["group_id"], members)
                elif method == "delete_group":
                    profile.delete_group(kw["group_id"])
                else:
                    raise AssertionError(f"unknown write {method}")
        except (TestbedError, KeyError) as error:
            return type(error).__name__, getattr(error, "code", None)
        return None

    def snapshot(self):
        """Every register and counter cell, and the port statistics."""
        cells = {name: list(r.values) for name, r in self.state.registers.items()}
        cells.update({name: (list(c.packets), list(c.bytes)) for name, c in self.state.counters.items()})
        cells.update({name: [(e.counter_packets, e.counter_bytes) for e in c.table.entries()]
                      for name, c in self.state.direct_counters.items()})
        ports = {port: self.device.port_stats(port) for port in (0, 1, 2, 3, 4, 7, CPU_PORT, 511)}
        return cells, ports, self.device.errors, self.device.halted, self.digests


def _packet_out(metadata, payload):
    return struct.pack("!H", (metadata["egress_port"] << 7) | metadata["_pad"]) + payload


def run_differential(path, frames=FRAMES, seed=SEED):
    """Run one program's script on both backends; return the number of frames compared."""
    program = load_program(os.path.join(REPO, path))
    script = ScriptBuilder(os.path.join(REPO, path), seed, frames=frames).build()
    rng = random.Random(f"native-diff:{path}:{seed}")
    now = [10 ** 9]
    clock = lambda: now[0]  # noqa: E731 - the same time for both devices during a frame
    python, native = Twin(program, "python", clock), Twin(program, "native", clock)
    assert native.device.backend == "native"
    for name, register in python.state.registers.items():
        values = [rng.randrange(1 << register.info.bitwidth) for _ in range(register.info.size)]
        for twin in (python, native):
            for index, value in enumerate(values):
                twin.state.registers[name].write(index, value)
    compared = 0
    for number, step in enumerate(script.steps):
        if isinstance(step, Write):
            assert python.write(step) == native.write(step), (path, number, step)
            continue
        if isinstance(step, Batch):
            items = [(step.port, frame) for _, frame in step.frames]
        else:
            assert isinstance(step, PacketOuts)
            items = [(CPU_PORT, _packet_out(metadata, payload)) for metadata, payload in step.packets]
        for port, frame in items:
            now[0] += rng.choice([0, 1000, 40_000, 3_000_000, rng.randrange(1 << 30)])
            expected = python.device.process(port, frame)
            got = native.device.process(port, frame)
            assert got == expected, (path, number, port, frame.hex(), expected, got)
            compared += 1
        assert native.snapshot() == python.snapshot(), (path, number)
    return compared


@pytest.mark.parametrize("path", PROGRAMS)
def test_native_backend_equals_python_backend(path):
    try:
        program = load_program(os.path.join(REPO, path))
    except TestbedError as error:
        pytest.skip(f"not a loadable program: {error}")
    try:
        build(program)
    except NativeBackendError as error:
        assert error.filename and error.line, error  # a refusal names the construct and file:line
        pytest.skip(str(error))
    assert run_differential(path) >= FRAMES


REFUSED_SOURCE = """#include <core.p4>
#include <v1model.p4>
header eth_t { bit<48> dst; bit<48> src; bit<16> type; }
struct headers_t { eth_t eth; }
struct meta_t { }
parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        transition select(pkt.lookahead<bit<128>>()) { 0: accept; default: accept; }
    }
}
control V(inout headers_t hdr, inout meta_t meta) { apply { } }
control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control C(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.eth); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""


def test_refusal_names_the_construct_and_location():
    from testbed.p4.loader import load_program_from_sources

    program = load_program_from_sources("refused.p4", {"refused.p4": REFUSED_SOURCE})
    with pytest.raises(NativeBackendError) as caught:
        make_device(program, SwitchState(program.info), backend="native")
    assert "refused.p4:9:" in str(caught.value) and "unsupported construct: bit<128> value" in str(caught.value)
    warnings = []
    device = make_device(program, SwitchState(program.info), backend="auto", warn=warnings.append)
    assert device.backend == "python" and len(warnings) == 1 and "refused.p4:9" in warnings[0]


@pytest.mark.skipif(os.environ.get("TESTBED_NATIVE_SANITIZE") not in (None, "", "0"), reason="already sanitized")
def test_native_sanitized_run():
    """The differential test, and the tables patched in place (test_native_state.py), once more with pipelines
    built with -fsanitize=address,undefined: no report."""
    preload = sanitizer_preload()
    if preload is None:
        pytest.skip("no libasan for the C compiler")
    env = dict(os.environ, TESTBED_NATIVE_SANITIZE="1", LD_PRELOAD=preload,
               ASAN_OPTIONS="detect_leaks=0:abort_on_error=0:halt_on_error=1",
               UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1",
               TESTBED_NATIVE_DIFF_FRAMES=os.environ.get("TESTBED_NATIVE_SANITIZE_FRAMES", "2000"))
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x",
                             os.path.abspath(__file__), os.path.join(os.path.dirname(__file__), "test_native_state.py"),
                             "-k", "not sanitized_run"], cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=3000)
    report = result.stdout + result.stderr
    assert result.returncode == 0, report[-4000:]
    assert "ERROR: AddressSanitizer" not in report and "runtime error:" not in report, report[-4000:]


METER_SOURCE = """#include <core.p4>
#include <v1model.p4>
header eth_t { bit<48> dst; bit<48> src; bit<16> type; }
header data_t { bit<8> a; bit<8> b; bit<16> c; bit<32> d; }
struct headers_t { eth_t eth; data_t data; }
struct meta_t { bit<2> color; bit<2> dcolor; bit<32> seen; }
parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.eth); transition select(hdr.eth.type) { 0x88b5: data; default: accept; } }
    state data { pkt.extract(hdr.data); transition accept; }
}
control V(inout headers_t hdr, inout meta_t meta) { apply { } }
control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    meter(8, MeterType.bytes) m;
    direct_meter<bit<2>>(MeterType.packets) dm;
    direct_counter(CounterType.packets_and_bytes) dc;
    register<bit<32>>(16) seen;
    action fwd(bit<9> port) { sm.egress_spec = port; dm.read(meta.dcolor); dc.count(); }
    action drop() { mark_to_drop(sm); dc.count(); }
    table t {
        key = { hdr.data.a: ternary; hdr.data.c: range; }
        actions = { fwd; drop; }
        meters = dm;
        counters = dc;
        default_action = drop();
    }
    apply {
        if (!hdr.data.isValid()) { mark_to_drop(sm); exit; }
        m.execute_meter((bit<32>)hdr.data.b, meta.color);
        t.apply();
        seen.read(meta.seen, (bit<32>)hdr.data.b);
        seen.write((bit<32>)hdr.data.b, meta.seen + (bit<32>)meta.color + 1);
        hdr.data.b = (bit<8>)meta.color;
        hdr.data.c = (bit<16>)meta.dcolor;
        hdr.data.d = meta.seen;
    }
}
control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control C(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.eth); pkt.emit(hdr.data); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""


def test_meters_direct_counters_and_meters_equal():
    """Indexed and direct meters, direct counters and ternary/range priorities under seeded writes and time."""
    from testbed.p4.loader import load_program_from_sources

    program = load_program_from_sources("meters.p4", {"meters.p4": METER_SOURCE})
    rng = random.Random(f"native-meters:{SEED}")
    now = [0]
    twins = [Twin(program, backend, lambda: now[0]) for backend in ("python", "native")]
    entries = []

    def on_both(action):
        outcomes = []
        for twin in twins:
            try:
                outcomes.append((action(twin), None))
            except TestbedError as error:
                outcomes.append((None, type(error).__name__))
        assert outcomes[0][1] == outcomes[1][1], outcomes
        return outcomes

    for step in range(FRAMES):
        if rng.random() < 0.02:
            index, rates = rng.randrange(8), sorted(rng.randrange(1, 20000) for _ in range(2))
            bursts = (rng.randrange(0, 3000), rng.randrange(0, 3000))
            if rng.random() < 0.9:
                on_both(lambda twin: twin.state.meters["I.m"].set_config(index, rates[0], bursts[0], rates[1],
                                                                         bursts[1]))
            else:
                on_both(lambda twin: twin.state.meters["I.m"].reset_config(index))
        if rng.random() < 0.02:
            low = rng.randrange(1 << 16)
            match = [KeyMatch("ternary", rng.randrange(256) & (mask := rng.choice([0, 0xF0, 0xFF])), mask=mask),
                     KeyMatch("range", low, high=min(low + rng.randrange(1 << 15), (1 << 16) - 1))]
            call = ActionCall("I.fwd", (rng.randrange(1, 5),)) if rng.random() < 0.8 else ActionCall("I.drop", ())
            priority = rng.randrange(1, 6)
            entry = TableEntry(match, call, priority=priority)
            on_both(lambda twin: twin.state.tables["I.t"].insert(entry))
            entries.append(entry)
        if entries and rng.random() < 0.01:
            entry = rng.choice(entries)
            rates = sorted(rng.randrange(1, 50) for _ in range(2))
            on_both(lambda twin: twin.state.direct_meters["I.dm"].set_config(entry, rates[0], 2, rates[1], 3))
        if entries and rng.random() < 0.005:
            entry = rng.choice(entries)
            on_both(lambda twin: twin.state.direct_counters["I.dc"].write(entry, 7, 700))
        if entries and rng.random() < 0.005:
            entry = entries.pop(rng.randrange(len(entries)))
            on_both(lambda twin: twin.state.tables["I.t"].delete(entry))
        now[0] += rng.choice([0, 1000, 50_000, 2_000_000, rng.randrange(1 << 32)])
        frame = (bytes(6) + bytes(6) + (b"\x88\xb5" if rng.random() < 0.95 else b"\x08\x00")
                 + struct.pack("!BBHI", rng.randrange(256), rng.randrange(8), rng.randrange(1 << 16), 0)
                 + bytes(rng.randrange(0, 200)))
        expected = twins[0].device.process(1, frame)
        assert twins[1].device.process(1, frame) == expected, (step, frame.hex())
        if step % 500 == 0:
            assert twins[1].snapshot() == twins[0].snapshot(), step
    assert twins[1].snapshot() == twins[0].snapshot()


ARITHMETIC_SOURCE = """#include <core.p4>
#include <v1model.p4>
header eth_t { bit<48> dst; bit<48> src; bit<16> type; }
header data_t { bit<8> a; bit<8> b; bit<16> c; bit<32> d; int<8> e; int<16> f; bit<64> g; }
header out_t { bit<8> o1; bit<8> o2; bit<16> o3; bit<32> o4; int<8> o5; int<16> o6; bit<64> o7; bit<8> o8; }
struct headers_t { eth_t eth; data_t data; out_t res; }
struct meta_t { bit<8> flags; }
parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.type, pkt.lookahead<bit<8>>()) {
            (0x88b5, 0x00 &&& 0x80): data;
            (0x88b5, 0x80 .. 0xef): data;
            (0x88b6, _): data;
            default: accept;
        }
    }
    state data { pkt.extract(hdr.data); transition accept; }
}
control V(inout headers_t hdr, inout meta_t meta) { apply { } }
control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        if (!hdr.data.isValid()) { return; }
        hdr.res.setValid();
        hdr.res.o1 = hdr.data.a + hdr.data.b * 3 - (hdr.data.a |+| hdr.data.b) ^ (hdr.data.a |-| hdr.data.b);
        hdr.res.o2 = (hdr.data.a << (hdr.data.b & 15)) | (hdr.data.a >> (hdr.data.b & 15)) | ~hdr.data.b;
        hdr.res.o3 = hdr.data.c[11:4] ++ hdr.data.a;
        hdr.res.o3[3:0] = hdr.data.b[7:4];
        hdr.res.o4 = (bit<32>)hdr.data.e + (bit<32>)hdr.data.f + hdr.data.d / ((bit<32>)hdr.data.b + 1)
                     + hdr.data.d % 7;
        hdr.res.o5 = (hdr.data.e |+| (int<8>)hdr.data.a) - (hdr.data.e >> (hdr.data.b & 7)) + -hdr.data.e;
        hdr.res.o6 = (int<16>)hdr.data.e * hdr.data.f + (hdr.data.f |-| 1000) + (int<16>)hdr.data.c;
        hdr.res.o7 = hdr.data.g * 0x9E3779B97F4A7C15 + (hdr.data.g >> 3) - (bit<64>)hdr.data.d;
        bit<8> flags = 0;
        if (hdr.data.e < 0) { flags = flags | 1; }
        if (hdr.data.f >= -5) { flags = flags | 2; }
        if (hdr.data.a > hdr.data.b && hdr.data.c != 0) { flags = flags | 4; }
        if ((bool)hdr.data.d[0:0] || hdr.data.g == 0) { flags = flags | 8; }
        flags = flags | (hdr.data.e > (int<8>)hdr.data.b ? 8w16 : 8w32);
        switch (hdr.data.a & 3) {
            0: { flags = flags + 64; }
            1:
            2: { flags = flags + 128; }
            default: { }
        }
        hdr.res.o8 = flags;
        if (hdr.data.b == 0xff) { mark_to_drop(sm); }
    }
}
control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control C(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.eth); pkt.emit(hdr.data); pkt.emit(hdr.res); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""


def test_arithmetic_and_parser_selects_equal():
    """Width-correct unsigned and signed arithmetic, casts, slices, selects with masks and ranges, over random bytes."""
    from testbed.p4.loader import load_program_from_sources

    program = load_program_from_sources("arith.p4", {"arith.p4": ARITHMETIC_SOURCE})
    rng = random.Random(f"native-arith:{SEED}")
    twins = [Twin(program, backend, lambda: 0) for backend in ("python", "native")]
    for step in range(FRAMES):
        body = bytes(rng.randrange(256) for _ in range(22))
        if rng.random() < 0.3:
            body = bytes([rng.choice([0, 1, 0x7f, 0x80, 0xff])]) + bytes(rng.choice([0, 0xff]) for _ in range(21))
        frame = bytes(12) + rng.choice([b"\x88\xb5", b"\x88\xb6", b"\x08\x00"]) + body[:rng.randrange(0, 23)]
        expected = twins[0].device.process(1, frame)
        assert twins[1].device.process(1, frame) == expected, (step, frame.hex())
    assert twins[1].snapshot() == twins[0].snapshot()


@pytest.mark.parametrize("path", ["p4src/flowlet.p4", "p4src/l3_ecmp.p4", "tests/p4lang/programs/ecn.p4",
                                  "tests/p4lang/programs/multicast.p4"])
def test_queued_mode_equal(path):
    """Through the traffic manager (receive + transmit_ready on a seeded clock, rate-limited queues with
    priorities): the same departures in the same order, with the queueing metadata the egress reads."""
    program = load_program(os.path.join(REPO, path))
    script = ScriptBuilder(os.path.join(REPO, path), SEED, frames=FRAMES // 4).build()
    rng = random.Random(f"native-queued:{path}:{SEED}")
    now = [10 ** 9]
    twins = [Twin(program, backend, lambda: now[0]) for backend in ("python", "native")]
    for port in (1, 2, 3, 4, CPU_PORT):
        rate, depth, priorities = rng.choice([2000, 20000, 200000]), rng.choice([4, 16, 64]), rng.choice([1, 2, 8])
        for twin in twins:
            twin.device.set_queue(port, rate_pps=rate, depth_packets=depth, priorities=priorities)
    for number, step in enumerate(script.steps):
        if isinstance(step, Write):
            assert twins[0].write(step) == twins[1].write(step), (path, number)
            continue
        frames = ([(step.port, frame) for _, frame in step.frames] if isinstance(step, Batch) else
                  [(CPU_PORT, _packet_out(metadata, payload)) for metadata, payload in step.packets])
        for port, frame in frames:
            now[0] += rng.choice([0, 1000, 20_000, 300_000])
            for twin in twins:
                twin.device.receive(port, frame)
            if rng.random() < 0.5:
                expected = twins[0].device.transmit_ready(now[0])
                assert twins[1].device.transmit_ready(now[0]) == expected, (path, number)
        now[0] += 10 ** 9
        expected = twins[0].device.transmit_ready(now[0])
        assert twins[1].device.transmit_ready(now[0]) == expected, (path, number)
        assert twins[1].snapshot() == twins[0].snapshot(), (path, number)


EVENTS_SOURCE = """#include <core.p4>
#include <v1model.p4>
header eth_t { bit<48> dst; bit<48> src; bit<16> type; }
header data_t { bit<8> a; bit<8> b; bit<16> c; bit<32> d; }
struct headers_t { eth_t eth; data_t data; }
struct meta_t { bit<8> x; }
struct learn_t { bit<48> src; bit<9> port; bit<8> a; }
parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.eth); transition select(hdr.eth.type) { 0x88b5: data; default: accept; } }
    state data {
        pkt.extract(hdr.data);
        log_msg("parsed a={} b={}", { hdr.data.a, hdr.data.b });
        transition accept;
    }
}
control V(inout headers_t hdr, inout meta_t meta) { apply { } }
control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = (bit<9>)(hdr.eth.src[1:0]) + 1;
        if (hdr.data.isValid() && hdr.data.a[0:0] == 1) {
            digest<learn_t>(1, { hdr.eth.src, sm.ingress_port, hdr.data.a });
            log_msg("learn {} from port {}", { hdr.eth.src, sm.ingress_port });
        }
        if (hdr.data.isValid() && hdr.data.b == 7) { log_msg("seven, valid={}", { hdr.data.isValid() }); }
        if (hdr.data.isValid() && hdr.data.b == 9) { assert(hdr.data.c != 0); }
    }
}
control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply { if (hdr.data.isValid() && hdr.data.c[2:0] == 3) { log_msg("egress port {}", { sm.egress_port }); } }
}
control C(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.eth); pkt.emit(hdr.data); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""


def test_digests_and_log_messages_equal():
    """Digests (name and values, in order) and log_msg lines (with the drop lines of failed asserts) are the same."""
    from testbed.p4.loader import load_program_from_sources

    program = load_program_from_sources("events.p4", {"events.p4": EVENTS_SOURCE})
    rng = random.Random(f"native-events:{SEED}")
    twins = [Twin(program, backend, lambda: 0) for backend in ("python", "native")]
    for step in range(FRAMES):
        frame = (bytes(rng.randrange(256) for _ in range(12)) + rng.choice([b"\x88\xb5", b"\x08\x00"])
                 + struct.pack("!BBHI", rng.randrange(256), rng.choice([7, 9, rng.randrange(256)]),
                               rng.choice([0, rng.randrange(1 << 16)]), 0))
        port = rng.randrange(1, 5)
        expected = twins[0].device.process(port, frame)
        assert twins[1].device.process(port, frame) == expected, (step, frame.hex())
    python, native = twins
    assert native.digests == python.digests and len(python.digests) > 50
    assert native.logs == python.logs and any(line.startswith("learn ") for line in python.logs)
    assert any("packet dropped: assert failed at events.p4:" in line for line in python.logs)


RANDOM_SOURCE = """#include <core.p4>
#include <v1model.p4>
header eth_t { bit<48> dst; bit<48> src; bit<16> type; }
header data_t { bit<8> a; bit<8> b; bit<16> c; bit<32> d; bit<64> e; }
struct headers_t { eth_t eth; data_t data; }
struct meta_t { }
parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.eth); pkt.extract(hdr.data); transition accept; }
}
control V(inout headers_t hdr, inout meta_t meta) { apply { } }
control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        random(hdr.data.a, hdr.data.a, hdr.data.b);
        random(hdr.data.c, 16w0, hdr.data.c);
        random(hdr.data.d, 32w1, 32w0xFFFFFFFF);
        random(hdr.data.e, 64w0, 64w0xFFFFFFFFFFFFFFFF);
    }
}
control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control C(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.eth); pkt.emit(hdr.data); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""


@pytest.mark.parametrize("seed", [0, 5, 2 ** 40 + 3, -17])
def test_random_extern_draws_what_random_random_draws(seed):
    """random() follows the Python target's random.Random(seed).randint draw for draw (widths 8 to 64 bits)."""
    from testbed.p4.loader import load_program_from_sources

    program = load_program_from_sources("rand.p4", {"rand.p4": RANDOM_SOURCE})
    rng = random.Random(f"native-random:{seed}")
    devices = [make_device(program, SwitchState(program.info), backend=backend, seed=seed)
               for backend in ("python", "native")]
    for step in range(FRAMES // 5):
        frame = bytes(14) + bytes(rng.randrange(256) for _ in range(16))
        expected = devices[0].process(1, frame)
        assert devices[1].process(1, frame) == expected, (step, frame.hex())


IDLE_SOURCE = """#include <core.p4>
#include <v1model.p4>
header eth_t { bit<48> dst; bit<48> src; bit<16> type; }
struct headers_t { eth_t eth; }
struct meta_t { }
parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.eth); transition accept; }
}
control V(inout headers_t hdr, inout meta_t meta) { apply { } }
control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action fwd(bit<9> port) { sm.egress_spec = port; }
    table t { key = { hdr.eth.dst: exact; } actions = { fwd; NoAction; } support_timeout = true; }
    apply { t.apply(); }
}
control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control C(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.eth); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""


def test_idle_timeout_hits_equal():
    """The entries an idle-timeout check finds expired are the same (hits recorded natively, read before the check)."""
    from testbed.p4.loader import load_program_from_sources

    program = load_program_from_sources("idle.p4", {"idle.p4": IDLE_SOURCE})
    rng = random.Random(f"native-idle:{SEED}")
    now = [0]
    twins = [Twin(program, backend, lambda: now[0]) for backend in ("python", "native")]
    for twin in twins:
        for dst in range(1, 9):
            twin.state.tables["I.t"].insert(TableEntry([KeyMatch("exact", dst)], ActionCall("I.fwd", (1,)),
                                                       idle_timeout_ns=5_000_000))
    for step in range(FRAMES // 5):
        now[0] += rng.randrange(0, 2_000_000)
        frame = rng.randrange(1, 12).to_bytes(6, "big") + bytes(6) + b"\x08\x00"
        assert twins[1].device.process(1, frame) == twins[0].device.process(1, frame), step
        if rng.random() < 0.05:
            expired = [[e.matches[0].value for e in twin.state.tables["I.t"].expired(now[0])] for twin in twins]
            assert expired[0] == expired[1], step
            if expired[0] and rng.random() < 0.5:
                for twin in twins:
                    twin.state.tables["I.t"].delete(TableEntry([KeyMatch("exact", expired[0][0])]))
                    twin.state.tables["I.t"].insert(TableEntry([KeyMatch("exact", expired[0][0])],
                                                               ActionCall("I.fwd", (2,)), idle_timeout_ns=5_000_000))
