"""Semantics of the embedded P4 target, without Mininet.

Each test writes a small v1model program, loads it with the embedded target,
sends frames built with scapy through ``Device.process`` and checks the frames
that come out (and the switch state).
"""
import struct
import zlib

import pytest
from scapy.all import IP, TCP, Ether, Raw

from testbed.errors import P4LoadError
from testbed.p4.loader import load_program_from_sources
from testbed.p4.program import ActionCall, KeyMatch
from testbed.p4.state import SwitchState, TableEntry
from testbed.p4.v1model import hashes

from backend_helpers import backend_device

# A data header of 8 bytes after Ethernet (etherType 0x88b5): fields a, b (8 bits), c (16), d (32).
PRELUDE = """
#include <core.p4>
#include <v1model.p4>
header eth_t { bit<48> dst; bit<48> src; bit<16> type; }
header data_t { bit<8> a; bit<8> b; bit<16> c; bit<32> d; }
struct headers_t { eth_t eth; data_t data; }
"""

DEFAULT_PARSER = """
parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.type) { 0x88b5: parse_data; default: accept; }
    }
    state parse_data { pkt.extract(hdr.data); transition accept; }
}
"""

DEFAULT_DEPARSER = """
control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.eth); pkt.emit(hdr.data); }
}
"""


def make_program(ingress="", ingress_locals="", egress="", egress_locals="", meta="", parser=DEFAULT_PARSER,
                 deparser=DEFAULT_DEPARSER, declarations="", headers=None, compute=""):
    """Return the source of a v1model program assembled from the given pieces."""
    return (
        (headers if headers is not None else PRELUDE)
        + f"struct meta_t {{ {meta} }}\n"
        + declarations
        + parser
        + "control MyVerify(inout headers_t hdr, inout meta_t meta) { apply { } }\n"
        + "control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {\n"
        + ingress_locals + "\n apply {\n" + ingress + "\n }\n}\n"
        + "control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {\n"
        + egress_locals + "\n apply {\n" + egress + "\n }\n}\n"
        + "control MyCompute(inout headers_t hdr, inout meta_t meta) { apply { " + compute + " } }\n"
        + deparser
        + "V1Switch(MyParser(), MyVerify(), MyIngress(), MyEgress(), MyCompute(), MyDeparser()) main;\n"
    )


def load(source):
    """Load a program from source text (file name test.p4)."""
    return load_program_from_sources("test.p4", {"test.p4": source})


def device_for(source, **kwargs):
    """(program, state, device) for a program source."""
    program = load(source)
    state = SwitchState(program.info)
    kwargs.setdefault("raise_errors", True)
    return program, state, backend_device(program, state, **kwargs)


def data_frame(a=0, b=0, c=0, d=0, payload=b""):
    """Ethernet + data header frame."""
    return bytes(Ether(dst="00:00:00:00:00:01", src="00:00:00:00:00:02", type=0x88B5)) + struct.pack(
        "!BBHI", a, b, c, d) + payload


def data_fields(frame):
    """(a, b, c, d) of an output frame."""
    return struct.unpack("!BBHI", frame[14:22])


def run_one(device, frame, port=1):
    """Process one frame; return the list of outputs."""
    return device.process(port, frame)


# ---------------------------------------------------------------------------------- arithmetic
def test_bit_arithmetic_wraps_around():
    _, _, device = device_for(make_program(ingress="""
        sm.egress_spec = 2;
        hdr.data.a = hdr.data.a + 8w10;
        hdr.data.b = hdr.data.b - 5;
        hdr.data.c = hdr.data.c * 16w300;
        hdr.data.d = ~hdr.data.d;
    """))
    [(port, frame)] = run_one(device, data_frame(250, 3, 1000, 0x0F0F0F0F))
    assert port == 2
    assert data_fields(frame) == ((250 + 10) % 256, (3 - 5) % 256, (1000 * 300) % 65536, 0xF0F0F0F0)


def test_signed_int_two_complement_and_saturation():
    _, _, device = device_for(make_program(ingress="""
        sm.egress_spec = 2;
        int<8> x = (int<8>)hdr.data.a;
        int<8> y = x + 1;
        hdr.data.a = (bit<8>)y;
        hdr.data.b = (bit<8>)(x |+| 8s100);
        hdr.data.c = (bit<16>)((int<16>)x);
        int<8> z = (int<8>)hdr.data.b;
        hdr.data.d = (bit<32>)(((int<32>)(-8s100)) |-| 32s100);
    """))
    [(_, frame)] = run_one(device, data_frame(127, 0, 0, 0))
    a, b, c, d = data_fields(frame)
    assert a == 0x80  # 127 + 1 wraps to -128
    assert b == 127  # 127 |+| 100 saturates at 127
    assert c == 127
    assert d == ((-200) & 0xFFFFFFFF)  # no saturation in 32 bits
    [(_, frame)] = run_one(device, data_frame(0xFF, 0, 0, 0))
    a, b, c, d = data_fields(frame)
    assert a == 0  # -1 + 1
    assert b == 99  # -1 |+| 100
    assert c == 0xFFFF  # sign extension of -1


def test_unsigned_saturating_ops():
    _, _, device = device_for(make_program(ingress="""
        sm.egress_spec = 2;
        hdr.data.a = hdr.data.a |+| 8w10;
        hdr.data.b = hdr.data.b |-| 8w5;
    """))
    [(_, frame)] = run_one(device, data_frame(250, 3))
    assert data_fields(frame)[:2] == (255, 0)
    [(_, frame)] = run_one(device, data_frame(100, 30))
    assert data_fields(frame)[:2] == (110, 25)


def test_slices_concatenation_shifts_and_casts():
    _, _, device = device_for(make_program(ingress="""
        sm.egress_spec = 2;
        bit<8> hi = hdr.data.a[7:4] ++ 4w0;
        hdr.data.c = hdr.data.a ++ hdr.data.b;
        hdr.data.b[3:0] = 4w0xF;
        hdr.data.a = hi;
        hdr.data.d = ((bit<32>)hdr.data.c << 4) | (bit<32>)((bit<4>)hdr.data.c);
        hdr.data.d[31:28] = hdr.data.d[3:0];
    """))
    [(_, frame)] = run_one(device, data_frame(0xAB, 0xC0))
    a, b, c, d = data_fields(frame)
    assert a == 0xA0
    assert b == 0xCF
    assert c == 0xABC0
    expected = ((0xABC0 << 4) | 0x0) & 0xFFFFFFFF
    expected = (expected & 0x0FFFFFFF) | ((expected & 0xF) << 28)
    assert d == expected


def test_shift_by_width_or_more_gives_zero_and_signed_shift_right_is_arithmetic():
    _, _, device = device_for(make_program(ingress="""
        sm.egress_spec = 2;
        bit<8> amount = hdr.data.b;
        hdr.data.a = hdr.data.a << amount;
        int<16> s = (int<16>)hdr.data.c;
        hdr.data.c = (bit<16>)(s >> 4);
        hdr.data.b = 8w1 << 8;
    """))
    [(_, frame)] = run_one(device, data_frame(0xFF, 9, 0x8000))
    a, b, c, _ = data_fields(frame)
    assert a == 0
    assert b == 0
    assert c == 0xF800
    [(_, frame)] = run_one(device, data_frame(0x0F, 4, 0x0100))
    a, _, c, _ = data_fields(frame)
    assert a == 0xF0
    assert c == 0x0010


def test_bool_casts_enums_typedefs_constants_and_conditional():
    source = make_program(declarations="""
        typedef bit<8> byte_t;
        const byte_t MAGIC = 8w42;
        enum bit<8> Kind { SMALL = 1, BIG = 2 }
        enum Color { RED, GREEN }
    """, ingress="""
        sm.egress_spec = 2;
        bool big = hdr.data.a > 100;
        Kind k = big ? Kind.BIG : Kind.SMALL;
        hdr.data.b = (bit<8>)k;
        hdr.data.c = (bit<16>)((bit<1>)big) + (bit<16>)MAGIC;
        Color col = Color.GREEN;
        if (col == Color.GREEN && (bool)1w1) { hdr.data.d = 7; } else { hdr.data.d = 9; }
    """)
    _, _, device = device_for(source)
    [(_, frame)] = run_one(device, data_frame(200))
    assert data_fields(frame)[1:] == (2, 43, 7)
    [(_, frame)] = run_one(device, data_frame(5))
    assert data_fields(frame)[1:] == (1, 42, 7)


# ---------------------------------------------------------------------------------- parser
SELECT_PARSER = """
parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        pkt.extract(hdr.data);
        transition select(hdr.data.a, hdr.data.b) {
            (0x10 &&& 0xF0, _): masked;
            (0x20 .. 0x2F, 1): ranged;
            (0x30, default): exact;
            default: other;
        }
    }
    state masked { meta.which = 1; transition accept; }
    state ranged { meta.which = 2; transition accept; }
    state exact { meta.which = 3; transition accept; }
    state other { meta.which = 4; transition accept; }
}
"""


def test_parser_select_masks_ranges_tuples_and_default():
    _, _, device = device_for(make_program(meta="bit<8> which;", parser=SELECT_PARSER, ingress="""
        sm.egress_spec = 2; hdr.data.d = (bit<32>)meta.which;
    """))
    cases = [((0x1A, 7), 1), ((0x25, 1), 2), ((0x25, 2), 4), ((0x30, 9), 3), ((0x40, 0), 4), ((0x2F, 1), 2)]
    for (a, b), which in cases:
        [(_, frame)] = run_one(device, data_frame(a, b))
        assert data_fields(frame)[3] == which, (a, b)


def test_parser_no_match_and_short_packet_set_parser_error_and_ingress_still_runs():
    parser = """
    parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
        state start {
            pkt.extract(hdr.eth);
            transition select(hdr.eth.type) { 0x88b5: parse_data; }
        }
        state parse_data { pkt.extract(hdr.data); transition accept; }
    }
    """
    _, _, device = device_for(make_program(parser=parser, ingress="""
        sm.egress_spec = 2;
        if (sm.parser_error == error.NoMatch) { hdr.eth.dst = 1; }
        else if (sm.parser_error == error.PacketTooShort) { hdr.eth.dst = 2; }
        else { hdr.eth.dst = 3; }
    """))
    [(_, frame)] = run_one(device, bytes(Ether(type=0x0800)) + b"x" * 30)
    assert frame[:6] == b"\x00\x00\x00\x00\x00\x01"
    [(_, frame)] = run_one(device, data_frame()[:18])
    assert frame[:6] == b"\x00\x00\x00\x00\x00\x02"
    assert len(frame) == 18  # the partial data header stays payload
    [(_, frame)] = run_one(device, data_frame())
    assert frame[:6] == b"\x00\x00\x00\x00\x00\x03"


STACK_PROGRAM_HEADERS = """
#include <core.p4>
#include <v1model.p4>
header eth_t { bit<48> dst; bit<48> src; bit<16> type; }
header label_t { bit<20> label; bit<3> tc; bit<1> bos; bit<8> ttl; }
struct headers_t { eth_t eth; label_t[3] labels; }
"""

STACK_PARSER = """
parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.type) { 0x8847: parse_label; default: accept; }
    }
    state parse_label {
        pkt.extract(hdr.labels.next);
        transition select(hdr.labels.last.bos) { 1: accept; default: parse_label; }
    }
}
"""

STACK_DEPARSER = """
control MyDeparser(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.eth); pkt.emit(hdr.labels); } }
"""


def _labels(*labels):
    out = b""
    for index, label in enumerate(labels):
        bos = 1 if index == len(labels) - 1 else 0
        out += struct.pack("!I", (label << 12) | (bos << 8) | 64)
    return out


def test_header_stack_parse_index_push_pop_and_overflow():
    source = make_program(headers=STACK_PROGRAM_HEADERS, parser=STACK_PARSER, deparser=STACK_DEPARSER, ingress="""
        sm.egress_spec = 2;
        if (sm.parser_error == error.StackOutOfBounds) { sm.egress_spec = 3; }
        else if (hdr.labels[0].label == 100) {
            hdr.labels.pop_front(1);
        } else if (hdr.labels[0].label == 200) {
            hdr.labels.push_front(1);
            hdr.labels[0].setValid();
            hdr.labels[0].label = 7;
            hdr.labels[0].bos = 0;
            hdr.labels[0].ttl = (bit<8>)hdr.labels.lastIndex;
        }
    """)
    _, _, device = device_for(source)
    eth = bytes(Ether(type=0x8847))
    [(port, frame)] = run_one(device, eth + _labels(100, 5) + b"payload")
    assert port == 2
    assert frame[14:] == _labels(5) + b"payload"
    [(port, frame)] = run_one(device, eth + _labels(200, 6) + b"p")
    assert frame[14:18] == struct.pack("!I", (7 << 12) | 2)  # lastIndex was 2 after the push
    assert frame[18:] == _labels(200, 6) + b"p"
    [(port, frame)] = run_one(device, eth + _labels(1, 2, 3, 4))
    assert port == 3


def test_lookahead_advance_and_verify():
    parser = """
    parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
        state start {
            pkt.extract(hdr.eth);
            meta.peek = pkt.lookahead<bit<16>>();
            pkt.advance(16);
            verify(meta.peek != 0xdead, error.HeaderTooShort);
            pkt.extract(hdr.data);
            transition accept;
        }
    }
    """
    _, _, device = device_for(make_program(meta="bit<16> peek;", parser=parser, ingress="""
        sm.egress_spec = 2;
        if (sm.parser_error == error.HeaderTooShort) { sm.egress_spec = 5; }
        hdr.data.c = meta.peek;
    """))
    frame = bytes(Ether(type=0x88B5)) + b"\x12\x34" + struct.pack("!BBHI", 1, 2, 3, 4)
    [(port, out)] = run_one(device, frame)
    assert port == 2
    assert out[14:22] == struct.pack("!BBHI", 1, 2, 0x1234, 4)  # the 2 skipped bytes are gone
    [(port, _)] = run_one(device, bytes(Ether(type=0x88B5)) + b"\xde\xad" + b"\0" * 8)
    assert port == 5


# ---------------------------------------------------------------------------------- tables
TABLE_LOCALS = """
    action set_port(bit<9> port) { sm.egress_spec = port; }
    action mark(bit<8> value) { hdr.data.b = value; sm.egress_spec = 9; }
    action drop() { mark_to_drop(sm); }
"""


def test_lpm_longest_prefix_wins_and_default_action():
    locals_ = TABLE_LOCALS + """
    table route {
        key = { hdr.data.d: lpm; }
        actions = { set_port; drop; }
        default_action = set_port(63);
    }
    """
    program, state, device = device_for(make_program(ingress_locals=locals_, ingress="route.apply();"))
    table = state.tables["MyIngress.route"]
    table.insert(TableEntry([KeyMatch("lpm", 0x0A000000, prefix_len=8)], ActionCall("MyIngress.set_port", (1,)),
                            None, None))
    table.insert(TableEntry([KeyMatch("lpm", 0x0A010000, prefix_len=16)], ActionCall("MyIngress.set_port", (2,)),
                            None, None))
    table.insert(TableEntry([KeyMatch("lpm", 0x0A010100, prefix_len=24)], ActionCall("MyIngress.set_port", (3,)),
                            None, None))
    assert run_one(device, data_frame(d=0x0A010105))[0][0] == 3
    assert run_one(device, data_frame(d=0x0A010205))[0][0] == 2
    assert run_one(device, data_frame(d=0x0A020205))[0][0] == 1
    assert run_one(device, data_frame(d=0x0B000000))[0][0] == 63
    assert program.info.tables["MyIngress.route"].default_action == ActionCall("MyIngress.set_port", (63,))


def test_ternary_priority_and_hit_miss_and_switch_on_action_run():
    locals_ = TABLE_LOCALS + """
    table classify {
        key = { hdr.data.a: ternary; hdr.data.c: exact; }
        actions = { mark; set_port; NoAction; }
    }
    """
    ingress = """
        sm.egress_spec = 1;
        switch (classify.apply().action_run) {
            mark: { hdr.data.c = 0xAAAA; }
            set_port: { hdr.data.c = 0xBBBB; }
            default: { hdr.data.c = 0xCCCC; }
        }
    """
    _, state, device = device_for(make_program(ingress_locals=locals_, ingress=ingress))
    table = state.tables["MyIngress.classify"]
    table.insert(TableEntry([KeyMatch("ternary", 0x10, mask=0xF0), KeyMatch("exact", 5)],
                            ActionCall("MyIngress.mark", (1,)), None, None, priority=10))
    table.insert(TableEntry([KeyMatch("ternary", 0x12, mask=0xFF), KeyMatch("exact", 5)],
                            ActionCall("MyIngress.mark", (2,)), None, None, priority=20))
    table.insert(TableEntry([KeyMatch("ternary", 0x00, mask=0x00), KeyMatch("exact", 6)],
                            ActionCall("MyIngress.set_port", (4,)), None, None, priority=1))
    [(port, frame)] = run_one(device, data_frame(0x12, 0, 5))
    assert (port, data_fields(frame)[1:3]) == (9, (2, 0xAAAA))  # the higher priority entry wins
    [(port, frame)] = run_one(device, data_frame(0x15, 0, 5))
    assert (port, data_fields(frame)[1:3]) == (9, (1, 0xAAAA))
    [(port, frame)] = run_one(device, data_frame(0x99, 0, 6))
    assert (port, data_fields(frame)[2]) == (4, 0xBBBB)
    [(port, frame)] = run_one(device, data_frame(0x99, 0, 7))
    assert (port, data_fields(frame)[2]) == (1, 0xCCCC)


def test_range_optional_and_const_entries_with_priorities():
    locals_ = TABLE_LOCALS + """
    table ranges {
        key = { hdr.data.c: range; hdr.data.a: optional; }
        actions = { set_port; NoAction; }
        const default_action = set_port(50);
        const entries = {
            (100 .. 199, 7): set_port(1);
            (100 .. 199, _): set_port(2);
            (_, _): set_port(3);
        }
    }
    """
    program, _, device = device_for(make_program(ingress_locals=locals_, ingress="ranges.apply();"))
    assert run_one(device, data_frame(7, 0, 150))[0][0] == 1
    assert run_one(device, data_frame(8, 0, 150))[0][0] == 2
    assert run_one(device, data_frame(7, 0, 250))[0][0] == 3
    table = program.info.tables["MyIngress.ranges"]
    assert table.const_default_action and table.entries_are_const
    assert [e.priority for e in table.const_entries] == [3, 2, 1]


def test_exact_const_entries_and_miss():
    locals_ = TABLE_LOCALS + """
    table exact_t {
        key = { hdr.data.a: exact; }
        actions = { set_port; drop; }
        default_action = drop();
        const entries = { 1: set_port(11); 2: set_port(12); }
    }
    """
    _, _, device = device_for(make_program(ingress_locals=locals_, ingress="""
        if (exact_t.apply().hit) { hdr.data.b = 1; }
    """))
    [(port, frame)] = run_one(device, data_frame(2))
    assert port == 12 and data_fields(frame)[1] == 1
    assert run_one(device, data_frame(3)) == []


def test_action_selector_member_choice_follows_the_hash():
    locals_ = TABLE_LOCALS + """
    action_selector(HashAlgorithm.crc16, 32w64, 32w16) sel;
    table ecmp {
        key = { hdr.data.a: exact; hdr.data.c: selector; hdr.data.d: selector; }
        actions = { set_port; }
        implementation = sel;
    }
    """
    program, state, device = device_for(make_program(ingress_locals=locals_, ingress="ecmp.apply();"))
    profile = state.action_profiles["MyIngress.sel"]
    for member in (3, 1, 2):
        profile.insert_member(member, ActionCall("MyIngress.set_port", (member * 10,)))
    profile.insert_group(7, [(1, 1), (2, 1), (3, 1)])
    state.tables["MyIngress.ecmp"].insert(TableEntry([KeyMatch("exact", 5)], None, None, 7))
    seen = set()
    for flow in range(60):
        c, d = flow * 7, 0x0A000000 + flow
        [(port, _)] = run_one(device, data_frame(5, 0, c, d))
        selector_hash = hashes.compute("crc16", [(c, 16), (d, 32)]) & 0xFFFF
        expected = [30, 10, 20][selector_hash % 3]  # members in BMv2's handle order: creation order here
        assert port == expected
        seen.add(port)
    assert seen == {10, 20, 30}


# ---------------------------------------------------------------------------------- externs
def test_registers_counters_and_direct_counters():
    locals_ = """
    register<bit<32>>(16) seen;
    counter(16, CounterType.packets_and_bytes) per_a;
    direct_counter(CounterType.packets_and_bytes) dc;
    action fwd(bit<9> port) { sm.egress_spec = port; }
    table t { key = { hdr.data.a: exact; } actions = { fwd; NoAction; } counters = dc; }
    """
    ingress = """
        bit<32> value;
        seen.read(value, (bit<32>)hdr.data.a);
        value = value + 1;
        seen.write((bit<32>)hdr.data.a, value);
        hdr.data.d = value;
        per_a.count((bit<32>)hdr.data.a);
        sm.egress_spec = 2;
        t.apply();
    """
    program, state, device = device_for(make_program(ingress_locals=locals_, ingress=ingress))
    entry = TableEntry([KeyMatch("exact", 3)], ActionCall("MyIngress.fwd", (4,)), None, None)
    state.tables["MyIngress.t"].insert(entry)
    for expected in (1, 2, 3):
        [(port, frame)] = run_one(device, data_frame(3))
        assert data_fields(frame)[3] == expected and port == 4
    run_one(device, data_frame(5))
    assert state.registers["MyIngress.seen"].read(3) == 3
    assert state.counters["MyIngress.per_a"].read(3) == (3, 3 * len(data_frame(3)))
    stored = state.tables["MyIngress.t"].find([KeyMatch("exact", 3)])
    assert state.direct_counters["MyIngress.dc"].read(stored) == (3, 3 * len(data_frame(3)))
    assert program.info.direct_counters["MyIngress.dc"].table_name == "MyIngress.t"


def test_meter_colours_packets_and_direct_meter():
    locals_ = """
    meter(4, MeterType.packets) m;
    direct_meter<bit<2>>(MeterType.packets) dm;
    action fwd() { sm.egress_spec = 2; dm.read(meta.dcolor); }
    table t { key = { hdr.data.a: exact; } actions = { fwd; } meters = dm; }
    """
    ingress = """
        m.execute_meter((bit<32>)0, meta.color);
        t.apply();
        hdr.data.b = (bit<8>)meta.color;
        hdr.data.c = (bit<16>)meta.dcolor;
    """
    now = [0]
    _, state, device = device_for(make_program(meta="bit<2> color; bit<2> dcolor;", ingress_locals=locals_,
                                               ingress=ingress), clock_ns=lambda: now[0])
    state.meters["MyIngress.m"].set_config(0, 1, 1, 2, 1)  # 1 pkt/s committed, 2 pkts/s peak, bursts 1
    entry = TableEntry([KeyMatch("exact", 1)], ActionCall("MyIngress.fwd", ()), None, None)
    state.tables["MyIngress.t"].insert(entry)
    stored = state.tables["MyIngress.t"].find([KeyMatch("exact", 1)])
    state.direct_meters["MyIngress.dm"].set_config(stored, 1, 1, 2, 1)
    colours = []
    direct = []
    for _ in range(3):
        [(_, frame)] = run_one(device, data_frame(1))
        colours.append(data_fields(frame)[1])
        direct.append(data_fields(frame)[2])
    assert colours[0] == 0 and colours[-1] == 2  # green first, red once both buckets are empty
    assert direct == colours


def test_hash_extern_equals_the_hashes_module():
    locals_ = ""
    ingress = """
        sm.egress_spec = 2;
        bit<16> h1; bit<32> h2; bit<16> h3; bit<8> h4;
        hash(h1, HashAlgorithm.crc16, 16w0, { hdr.data.a, hdr.data.c }, 32w65536);
        hash(h2, HashAlgorithm.crc32, 32w0, { hdr.data.a, hdr.data.c, hdr.data.d }, 64w4294967296);
        hash(h3, HashAlgorithm.csum16, 16w0, { hdr.data.c, hdr.data.d }, 32w65536);
        hash(h4, HashAlgorithm.identity, 8w3, { hdr.data.b }, 16w10);
        hdr.data.c = h1; hdr.data.d = h2; hdr.eth.type = h3; hdr.data.b = h4;
    """
    _, _, device = device_for(make_program(ingress_locals=locals_, ingress=ingress))
    [(_, frame)] = run_one(device, data_frame(0x12, 47, 0x3456, 0x789ABCDE))
    a, b, c, d = data_fields(frame)
    assert c == hashes.compute("crc16", [(0x12, 8), (0x3456, 16)])
    assert d == zlib.crc32(bytes([0x12, 0x34, 0x56, 0x78, 0x9A, 0xBC, 0xDE]))
    assert d == hashes.compute("crc32", [(0x12, 8), (0x3456, 16), (0x789ABCDE, 32)])
    assert struct.unpack("!H", frame[12:14])[0] == hashes.compute("csum16", [(0x3456, 16), (0x789ABCDE, 32)])
    assert b == 3 + 47 % 10
    assert hashes.compute("crc16", [(ord(ch), 8) for ch in "123456789"]) == 0xBB3D  # CRC-16/ARC check value


def test_digest_is_delivered_with_values_and_named_after_struct():
    declarations = "struct learn_t { bit<48> src; bit<9> port; }\n"
    ingress = """
        sm.egress_spec = 2;
        digest<learn_t>(1, { hdr.eth.src, sm.ingress_port });
    """
    received = []
    program, _, device = device_for(make_program(declarations=declarations, ingress=ingress),
                                    on_digest=lambda name, values: received.append((name, values)))
    run_one(device, data_frame(), port=6)
    assert received == [("learn_t", (2, 6))]
    digest = program.info.digests["learn_t"]
    assert [(f.name, f.bitwidth) for f in digest.fields] == [("src", 48), ("port", 9)]


def test_log_msg_formats_values():
    logs = []
    _, _, device = device_for(make_program(ingress='sm.egress_spec = 2; '
                                                   'log_msg("a={} c={}", {hdr.data.a, hdr.data.c});'),
                              on_log=logs.append)
    run_one(device, data_frame(5, 0, 300))
    assert logs == ["a=5 c=300"]


# ---------------------------------------------------------------------------------- PRE
def test_mark_to_drop_drops_and_exit_stops_ingress():
    _, _, device = device_for(make_program(ingress="""
        sm.egress_spec = 2;
        if (hdr.data.a == 1) { mark_to_drop(sm); }
        if (hdr.data.a == 2) { exit; }
        hdr.data.b = 99;
    """))
    assert run_one(device, data_frame(1)) == []
    [(_, frame)] = run_one(device, data_frame(2))
    assert data_fields(frame)[1] == 0
    [(_, frame)] = run_one(device, data_frame(3))
    assert data_fields(frame)[1] == 99


def test_mark_to_drop_in_egress_drops():
    _, _, device = device_for(make_program(ingress="sm.egress_spec = 2;", egress="""
        if (hdr.data.a == 1) { mark_to_drop(sm); }
    """))
    assert run_one(device, data_frame(1)) == []
    assert len(run_one(device, data_frame(0))) == 1


def test_multicast_replicates_with_egress_rid_and_instance_type():
    _, state, device = device_for(make_program(ingress="sm.mcast_grp = 5;", egress="""
        hdr.data.b = (bit<8>)sm.instance_type;
        hdr.data.c = sm.egress_rid;
        hdr.data.d = (bit<32>)sm.egress_port;
    """))
    state.multicast_groups.insert(5, [(1, 10), (2, 20), (3, 30)])
    outputs = run_one(device, data_frame())
    assert sorted(outputs) == sorted(outputs)
    assert {(port, data_fields(frame)[1:]) for port, frame in outputs} == {
        (1, (5, 10, 1)), (2, (5, 20, 2)), (3, (5, 30, 3))}


def test_clone_i2e_and_e2e_with_instance_types_and_truncation():
    meta = "@field_list(1) bit<8> tag;"
    ingress = """
        sm.egress_spec = 2;
        meta.tag = 77;
        hdr.data.a = 1;  /* not seen by the I2E clone: it gets the packet as it entered ingress */
        if (hdr.data.b == 1) { clone_preserving_field_list(CloneType.I2E, 100, 1); }
    """
    egress = """
        hdr.data.c = (bit<16>)sm.instance_type;
        hdr.data.d = (bit<32>)meta.tag;
        if (hdr.data.b == 2 && sm.instance_type == 0) { clone(CloneType.E2E, 101); }
    """
    _, state, device = device_for(make_program(meta=meta, ingress=ingress, egress=egress))
    state.clone_sessions.insert(100, [(7, 0)])
    state.clone_sessions.insert(101, [(8, 0)], packet_length_bytes=16)
    outputs = dict(run_one(device, data_frame(0, 1, payload=b"abcdef")))
    assert set(outputs) == {2, 7}
    assert data_fields(outputs[2]) == (1, 1, 0, 77)
    assert data_fields(outputs[7]) == (0, 1, 1, 77)  # instance_type 1, original a, preserved tag
    outputs = dict(run_one(device, data_frame(0, 2, payload=b"abcdef")))
    assert set(outputs) == {2, 8}
    assert data_fields(outputs[2])[2] == 0
    assert len(outputs[8]) == 16  # truncated by the clone session
    assert outputs[8] == outputs[2][:16]  # E2E: the packet as egress left it (instance_type written later)


def test_resubmit_and_recirculate_instance_types_and_preserved_fields():
    meta = "@field_list(1) bit<8> passes; bit<8> scratch;"
    ingress = """
        sm.egress_spec = 2;
        if (sm.instance_type == 0 && hdr.data.a == 1) {
            meta.passes = 5; meta.scratch = 9;
            resubmit_preserving_field_list(1);
        }
        if (sm.instance_type == 6) { hdr.data.b = meta.passes + meta.scratch; hdr.data.c = 6; }
        if (sm.instance_type == 4) { hdr.data.c = 4; hdr.data.d = (bit<32>)meta.passes; }
    """
    egress = """
        if (sm.instance_type == 0 && hdr.data.a == 2) {
            meta.passes = 3;
            hdr.data.b = 42;
            recirculate_preserving_field_list(1);
        }
    """
    _, _, device = device_for(make_program(meta=meta, ingress=ingress, egress=egress))
    [(port, frame)] = run_one(device, data_frame(1))
    assert port == 2 and data_fields(frame) == (1, 5, 6, 0)  # scratch not preserved
    [(port, frame)] = run_one(device, data_frame(2))
    assert port == 2 and data_fields(frame) == (2, 42, 4, 3)  # the recirculated packet kept egress' changes


def test_truncate_shortens_the_output():
    _, _, device = device_for(make_program(ingress="sm.egress_spec = 2; truncate(20);"))
    [(_, frame)] = run_one(device, data_frame(payload=b"x" * 100))
    assert len(frame) == 20


def test_ipv4_checksum_is_correct_on_the_wire():
    headers = """
#include <core.p4>
#include <v1model.p4>
header eth_t { bit<48> dst; bit<48> src; bit<16> type; }
header ipv4_t { bit<4> version; bit<4> ihl; bit<8> tos; bit<16> len; bit<16> id; bit<3> flags;
                bit<13> frag; bit<8> ttl; bit<8> proto; bit<16> csum; bit<32> src; bit<32> dst; }
struct headers_t { eth_t eth; ipv4_t ipv4; }
"""
    parser = """
parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.eth); transition select(hdr.eth.type) { 0x800: ip; default: accept; } }
    state ip { pkt.extract(hdr.ipv4); transition accept; }
}
"""
    fields = "{ hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.tos, hdr.ipv4.len, hdr.ipv4.id, hdr.ipv4.flags, " \
             "hdr.ipv4.frag, hdr.ipv4.ttl, hdr.ipv4.proto, hdr.ipv4.src, hdr.ipv4.dst }"
    compute = f"update_checksum(hdr.ipv4.isValid(), {fields}, hdr.ipv4.csum, HashAlgorithm.csum16);"
    deparser = "control MyDeparser(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr); } }\n"
    ingress = "sm.egress_spec = 2; hdr.ipv4.ttl = hdr.ipv4.ttl - 1; hdr.ipv4.dst = hdr.ipv4.dst + 1;"
    _, _, device = device_for(make_program(headers=headers, parser=parser, deparser=deparser, compute=compute,
                                           ingress=ingress))
    packet = Ether() / IP(src="10.0.0.1", dst="10.0.0.2", ttl=20, id=777) / TCP(sport=1, dport=2) / Raw(b"data")
    [(_, frame)] = run_one(device, bytes(packet))
    received = Ether(frame)
    assert received[IP].ttl == 19 and received[IP].dst == "10.0.0.3"
    checksum = received[IP].chksum
    del received[IP].chksum
    assert Ether(bytes(received))[IP].chksum == checksum


def test_verify_checksum_sets_checksum_error():
    headers = """
#include <core.p4>
#include <v1model.p4>
header eth_t { bit<48> dst; bit<48> src; bit<16> type; }
header data_t { bit<8> a; bit<8> b; bit<16> c; bit<32> d; }
struct headers_t { eth_t eth; data_t data; }
"""
    verify = "control MyVerify2(inout headers_t hdr, inout meta_t meta) { apply { " \
             "verify_checksum(true, { hdr.data.a, hdr.data.b, hdr.data.d }, hdr.data.c, HashAlgorithm.csum16); } }\n"
    source = make_program(headers=headers, declarations=verify, ingress="""
        sm.egress_spec = 2; hdr.data.a = (bit<8>)sm.checksum_error;
    """).replace("MyVerify(),", "MyVerify2(),")
    _, _, device = device_for(source)
    good = hashes.checksum16([(9, 8), (8, 8), (12345, 32)])
    assert data_fields(run_one(device, data_frame(9, 8, good, 12345))[0][1])[0] == 0
    assert data_fields(run_one(device, data_frame(9, 8, good ^ 1, 12345))[0][1])[0] == 1


def test_random_stays_in_range():
    _, _, device = device_for(make_program(ingress="""
        sm.egress_spec = 2; bit<8> r; random(r, 8w10, 8w20); hdr.data.a = r;
    """), seed=3)
    values = {data_fields(run_one(device, data_frame())[0][1])[0] for _ in range(200)}
    assert values <= set(range(10, 21)) and len(values) > 5


# ---------------------------------------------------------------------------------- errors
def test_unsupported_construct_fails_at_load_with_file_and_line():
    source = make_program(declarations="struct opts_t { bit<8> len; varbit<320> options; }\n")
    with pytest.raises(P4LoadError) as caught:
        load(source)
    line = source[:source.index("varbit")].count("\n") + 1
    assert caught.value.filename == "test.p4" and caught.value.line == line
    assert "unsupported construct: varbit field" in str(caught.value)
    assert str(caught.value).startswith(f"test.p4:{line}")


def test_type_error_reports_file_and_line():
    source = make_program(ingress="sm.egress_spec = 2;\n hdr.data.a = hdr.data.a + 16w1;")
    with pytest.raises(P4LoadError) as caught:
        load(source)
    assert caught.value.line == source[:source.index("16w1")].count("\n") + 1
    assert "bit<8>" in str(caught.value) and "bit<16>" in str(caught.value)


def test_syntax_error_reports_file_and_line():
    source = make_program(ingress="sm.egress_spec = = 2;")
    with pytest.raises(P4LoadError) as caught:
        load(source)
    assert caught.value.line == source[:source.index("= = 2")].count("\n") + 1
    assert "syntax error" in str(caught.value)


def test_unknown_extern_function_is_rejected():
    source = make_program(ingress="sm.egress_spec = 2; no_such_function(1);")
    with pytest.raises(P4LoadError, match="no_such_function"):
        load(source)


# ---------------------------------------------------------------------------------- more language
def test_functions_subcontrols_switch_on_values_and_action_return():
    declarations = """
    bit<8> max8(in bit<8> a, in bit<8> b) { if (a > b) { return a; } return b; }
    void swap(inout bit<8> a, inout bit<8> b) { bit<8> t = a; a = b; b = t; }
    control Stamp(inout headers_t hdr, inout meta_t meta) {
        action mark(bit<16> v) { hdr.data.c = v; }
        apply { mark(0x5151); if (hdr.data.a == 99) { exit; } hdr.data.c = hdr.data.c + 1; }
    }
    """
    locals_ = """
    Stamp() stamp;
    action early(inout bit<8> x) { x = x + 1; if (x > 10) { return; } x = 100; }
    """
    ingress = """
        sm.egress_spec = 2;
        hdr.data.b = max8(hdr.data.a, hdr.data.b);
        bit<8> p = 1; bit<8> q = 2;
        swap(p, q);
        early(p);
        switch (hdr.data.a) {
            1: { hdr.data.d = (bit<32>)(p ++ q); }
            2:
            3: { hdr.data.d = 23; }
            default: { hdr.data.d = 0; }
        }
        stamp.apply(hdr, meta);
        hdr.data.a = hdr.data.a + 1;
    """
    _, _, device = device_for(make_program(declarations=declarations, ingress_locals=locals_, ingress=ingress))
    [(_, frame)] = run_one(device, data_frame(1, 7))
    # p: swap -> 2, early: 3 (not > 10) then 100; q = 1; d = 100 ++ 1
    assert data_fields(frame) == (2, 7, 0x5152, (100 << 8) | 1)
    [(_, frame)] = run_one(device, data_frame(3, 9))
    assert data_fields(frame) == (4, 9, 0x5152, 23)
    [(_, frame)] = run_one(device, data_frame(99, 1))
    assert data_fields(frame) == (99, 99, 0x5151, 0)  # exit in the sub-control ends ingress


def test_keyless_table_and_isvalid_key():
    locals_ = TABLE_LOCALS + """
    table always { actions = { set_port; } default_action = set_port(21); }
    table by_validity {
        key = { hdr.data.isValid(): exact; }
        actions = { mark; NoAction; }
        const entries = { true: mark(1); false: mark(2); }
    }
    """
    program, _, device = device_for(make_program(ingress_locals=locals_,
                                                 ingress="always.apply(); by_validity.apply();"))
    [(port, frame)] = run_one(device, data_frame())
    assert port == 9 and data_fields(frame)[1] == 1
    [(port, frame)] = run_one(device, bytes(Ether(type=0x1234)) + b"\0" * 10)
    assert port == 9
    key = program.info.tables["MyIngress.by_validity"].match_fields[0]
    assert (key.name, key.bitwidth) == ("hdr.data.isValid()", 1)


def test_assert_failure_drops_the_packet_and_logs():
    logs = []
    _, _, device = device_for(make_program(ingress="sm.egress_spec = 2; assert(hdr.data.a != 13);"),
                              on_log=logs.append)
    assert run_one(device, data_frame(13)) == []
    assert logs and "assert failed at test.p4:" in logs[0]
    assert len(run_one(device, data_frame(12))) == 1


def test_deprecated_clone3_resubmit_and_recirculate_preserve_the_listed_fields():
    meta = "bit<8> tag; bit<8> other; bit<8> round;"
    ingress = """
        sm.egress_spec = 2;
        meta.tag = 77; meta.other = 5;
        if (sm.instance_type == 0) { clone3(CloneType.I2E, 100, { meta.tag }); }
        if (sm.instance_type == 0 && hdr.data.a == 1) { meta.round = 1; resubmit(meta); }
        if (sm.instance_type == 6) { hdr.data.d = (bit<32>)meta.round; }
    """
    egress = "hdr.data.b = meta.tag; hdr.data.c = (bit<16>)meta.other; hdr.data.a = (bit<8>)sm.instance_type;"
    _, state, device = device_for(make_program(meta=meta, ingress=ingress, egress=egress))
    state.clone_sessions.insert(100, [(7, 0)])
    outputs = dict(run_one(device, data_frame(0)))
    assert data_fields(outputs[7]) == (1, 77, 0, 0)  # the clone kept tag only
    assert data_fields(outputs[2]) == (0, 77, 5, 0)
    outputs = dict(run_one(device, data_frame(1)))
    assert data_fields(outputs[2]) == (6, 77, 5, 1)  # resubmitted with the whole metadata


def test_queue_depth_and_delay_are_visible_to_egress_in_queued_mode():
    now = [0]
    _, _, device = device_for(make_program(ingress="sm.egress_spec = 2;", egress="""
        hdr.data.b = (bit<8>)sm.enq_qdepth;
        hdr.data.c = (bit<16>)sm.deq_qdepth;
        hdr.data.d = sm.deq_timedelta;
    """), clock_ns=lambda: now[0])
    device.set_queue(2, rate_pps=1000, depth_packets=10)
    for _ in range(4):
        device.receive(1, data_frame())
    now[0] = 10_000_000
    sent = device.transmit_ready()
    fields = [data_fields(frame) for _, frame in sent]
    assert [f[1] for f in fields] == [0, 0, 1, 2]  # the first leaves at once; later ones found 0, 1, 2 waiting
    assert [f[3] for f in fields] == [0, 1000, 2000, 3000]  # microseconds spent in the queue
    assert fields[1][2] == 2 and fields[-1][2] == 0


def test_unused_action_is_still_checked():
    source = make_program(ingress_locals="action unused() { hdr.data.a = hdr.data.nope; }",
                          ingress="sm.egress_spec = 2;")
    with pytest.raises(P4LoadError) as caught:
        load(source)
    assert caught.value.line == source[:source.index("hdr.data.nope")].count("\n") + 1


def test_atomic_block_annotation_is_accepted():
    _, _, device = device_for(make_program(ingress="@atomic { sm.egress_spec = 2; hdr.data.b = 3; }"))
    [(port, frame)] = run_one(device, data_frame())
    assert port == 2 and data_fields(frame)[1] == 3


def test_unused_action_with_directional_parameters_loads():
    load(make_program(ingress_locals="action helper(out bit<8> x, in bit<8> y) { x = y + 1; return; }",
                      ingress="sm.egress_spec = 2;"))


def test_less_than_a_serializable_enum_member_is_a_comparison_not_a_generic():
    _, _, device = device_for(make_program(declarations="enum bit<8> Limit { LOW = 5 }\n", ingress="""
        sm.egress_spec = 2;
        if (hdr.data.a < Limit.LOW) { hdr.data.b = 1; } else { hdr.data.b = 2; }
    """))
    assert data_fields(run_one(device, data_frame(1))[0][1])[1] == 1
    assert data_fields(run_one(device, data_frame(7))[0][1])[1] == 2


UNION_HEADERS = """
#include <core.p4>
#include <v1model.p4>
header eth_t { bit<48> dst; bit<48> src; bit<16> type; }
header short_t { bit<8> kind; bit<8> value; }
header long_t { bit<8> kind; bit<24> value; }
header_union either_t { short_t s; long_t l; }
struct headers_t { eth_t eth; either_t u; }
"""

UNION_PARSER = """
parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        transition select(pkt.lookahead<bit<8>>()) { 1: short; 2: long; default: accept; }
    }
    state short { pkt.extract(hdr.u.s); transition accept; }
    state long { pkt.extract(hdr.u.l); transition accept; }
}
"""


def test_header_union_keeps_at_most_one_member_valid():
    ingress = """
        sm.egress_spec = 2;
        if (!hdr.u.isValid()) { sm.egress_spec = 3; }
        else if (hdr.u.s.isValid()) {
            hdr.u.l.setValid();               /* makes s invalid */
            hdr.u.l.kind = 2;
            hdr.u.l.value = 24w0xABCDEF;
        }
    """
    deparser = "control MyDeparser(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr); } }\n"
    _, _, device = device_for(make_program(headers=UNION_HEADERS, parser=UNION_PARSER, deparser=deparser,
                                           ingress=ingress))
    eth = bytes(Ether(type=0x1234))
    [(port, frame)] = run_one(device, eth + bytes([1, 7]) + b"rest")
    assert port == 2 and frame[14:] == bytes([2, 0xAB, 0xCD, 0xEF]) + b"rest"
    [(port, frame)] = run_one(device, eth + bytes([2, 1, 2, 3]))
    assert port == 2 and frame[14:] == bytes([2, 1, 2, 3])
    [(port, _)] = run_one(device, eth + bytes([9]))
    assert port == 3


def test_a_parser_loop_ends_with_parser_timeout():
    parser = """
    parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
        state start { pkt.extract(hdr.eth); transition spin; }
        state spin { transition select(hdr.eth.type) { 0x88b5: spin; default: accept; } }
    }
    """
    _, _, device = device_for(make_program(parser=parser, ingress="""
        sm.egress_spec = 2;
        if (sm.parser_error == error.ParserTimeout) { sm.egress_spec = 4; }
    """))
    assert run_one(device, data_frame())[0][0] == 4
