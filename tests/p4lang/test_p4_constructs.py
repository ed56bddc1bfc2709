"""P4_16 constructs that p4c + BMv2 accept and the embedded target used to refuse (issue 11).

Each test loads a small v1model program using the construct and checks the bytes or state
that come out of ``Device.process``; expected values follow the P4_16 specification (1.2.4)
and BMv2's documented behaviour.
"""
import struct

import pytest

from test_p4_semantics import (
    DEFAULT_DEPARSER, PRELUDE, data_fields, data_frame, device_for, load, make_program, run_one,
)
from testbed.p4.program import ActionCall


def _ones_complement_sum(data):
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


# ------------------------------------------------------------------------------------ varbit
VARBIT_HEADERS = PRELUDE.replace("struct headers_t { eth_t eth; data_t data; }",
                                 "header vh_t { varbit<64> v; }\nstruct headers_t { eth_t eth; data_t data; vh_t vh; }")
VARBIT_PARSER = """
parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        pkt.extract(hdr.data);
        pkt.extract(hdr.vh, (bit<32>)hdr.data.a);
        transition accept;
    }
}
"""
VARBIT_DEPARSER = """
control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.eth); pkt.emit(hdr.data); pkt.emit(hdr.vh); }
}
"""


def test_varbit_extract_emit_sizes_errors_and_checksum():
    ingress = """
        sm.egress_spec = 2;
        hdr.data.b = (bit<8>)hdr.vh.minSizeInBits() + (bit<8>)hdr.vh.maxSizeInBytes();   // 0 + 8
        if (sm.parser_error == error.HeaderTooShort) { hdr.data.d = 1; }
        else if (sm.parser_error == error.ParserInvalidArgument) { hdr.data.d = 2; }
        else if (sm.parser_error == error.PacketTooShort) { hdr.data.d = 3; }
    """
    compute = "update_checksum(hdr.vh.isValid(), { hdr.vh.v }, hdr.data.c, HashAlgorithm.csum16);"
    _, _, device = device_for(make_program(headers=VARBIT_HEADERS, parser=VARBIT_PARSER, deparser=VARBIT_DEPARSER,
                                           ingress=ingress, compute=compute))
    # 24 bits: three bytes go into the varbit, emitted back with the same length; the rest is payload
    frame = data_frame(a=24, payload=b"\x11\x22\x33rest")
    [(_, out)] = run_one(device, frame)
    assert out[22:] == b"\x11\x22\x33rest"
    assert data_fields(out) == (24, 8, _ones_complement_sum(b"\x11\x22\x33"), 0)
    # BMv2 extract_VL (src/bm_sim/parser.cpp): not a multiple of 8 -> ParserInvalidArgument; more bytes
    # than the packet has -> PacketTooShort; more than the header's maximum -> HeaderTooShort
    assert data_fields(run_one(device, data_frame(a=12, payload=b"\x00" * 20))[0][1])[3] == 2
    assert data_fields(run_one(device, data_frame(a=40, payload=b"\x00\x01"))[0][1])[3] == 3
    assert data_fields(run_one(device, data_frame(a=72, payload=b"\x00" * 20))[0][1])[3] == 1


# ------------------------------------------------------------------------------------ list and struct expressions
def test_list_and_structure_expressions_in_every_position():
    declarations = """
    struct pair_t { bit<8> x; bit<8> y; }
    pair_t make_pair(in bit<8> a) { return { x = a, y = a + 1 }; }
    bit<8> sum_pair(in pair_t p) { return p.x + p.y; }
    """
    ingress = """
        sm.egress_spec = 2;
        pair_t p = { y = 6, x = 5 };                    // structure expression, fields in any order
        data_t copy = { 1, 2, 16w3, 32w4 };             // list expression: a valid header
        bool same = hdr.data == copy;                   // header equality: valid and equal fields
        pair_t q = make_pair(10);                       // returned structure expression
        hdr.data.a = sum_pair({ x = 7, y = 8 });        // structure expression as an argument
        hdr.data.b = (p == { x = 5, y = 6 }) ? 8w1 : 8w0;
        hdr.data.c = same ? 16w1 : 16w0;
        if ({ q.x, q.y } == { 8w10, 8w11 }) { hdr.data.d = 1; }
        data_t gone = {#};                              // the invalid header
        if (!gone.isValid() && copy.isValid()) { hdr.data.d = hdr.data.d + 2; }
    """
    _, _, device = device_for(make_program(declarations=declarations, ingress=ingress))
    assert data_fields(run_one(device, data_frame(1, 2, 3, 4))[0][1]) == (15, 1, 1, 3)
    assert data_fields(run_one(device, data_frame(1, 2, 3, 5))[0][1]) == (15, 1, 0, 3)


# ------------------------------------------------------------------------------------ bound action arguments
def test_action_arguments_bound_in_the_actions_list():
    # P4_16 "Actions": directional parameters are bound in the table's actions list and evaluated when
    # the action runs; the directionless ones come from the entry.
    locals_ = """
    action set_into(inout bit<8> x, bit<8> v) { x = v; }
    table t {
        key = { hdr.data.b: exact; }
        actions = { set_into(hdr.data.a); set_into2; }
        const entries = { 1: set_into(9); 2: set_into2(5); }
    }
    action set_into2(bit<8> v) { hdr.data.c = (bit<16>)v; }
    """
    locals_ = locals_.replace("    action set_into2(bit<8> v) { hdr.data.c = (bit<16>)v; }\n", "")
    locals_ = "    action set_into2(bit<8> v) { hdr.data.c = (bit<16>)v; }\n" + locals_
    program, _, device = device_for(make_program(ingress_locals=locals_, ingress="sm.egress_spec = 2; t.apply();"))
    assert data_fields(run_one(device, data_frame(a=1, b=1))[0][1])[:3] == (9, 1, 0)
    assert data_fields(run_one(device, data_frame(a=1, b=2))[0][1])[:3] == (1, 2, 5)
    assert [p.name for p in program.info.actions["MyIngress.set_into"].params] == ["v"]
    assert program.info.tables["MyIngress.t"].const_entries[0].action == ActionCall("MyIngress.set_into", (9,))


# ------------------------------------------------------------------------------------ header unions
UNION_HEADERS = PRELUDE.replace("struct headers_t { eth_t eth; data_t data; }", """
header v4_t { bit<8> x; }
header v6_t { bit<16> y; }
header_union ip_u { v4_t v4; v6_t v6; }
struct headers_t { eth_t eth; data_t data; ip_u u; ip_u[2] us; }
""")
UNION_PARSER = """
parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        pkt.extract(hdr.data);
        transition select(hdr.data.a) { 4: v4; 6: v6; default: accept; }
    }
    state v4 { pkt.extract(hdr.u.v4); pkt.extract(hdr.us.next.v4); pkt.extract(hdr.us.next.v6); transition accept; }
    state v6 { pkt.extract(hdr.u.v6); transition accept; }
}
"""
UNION_DEPARSER = """
control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.eth); pkt.emit(hdr.data); pkt.emit(hdr.u); pkt.emit(hdr.us); }
}
"""


def test_header_unions_and_stacks_of_header_unions():
    ingress = """
        sm.egress_spec = 2;
        hdr.data.b = hdr.u.isValid() ? 8w1 : 8w0;
        hdr.data.c = (bit<16>)hdr.us.nextIndex;
        if (hdr.data.a == 4) {
            hdr.us[0].v6.setValid();      // a union member becoming valid invalidates the others
            hdr.us[0].v6.y = 0xBEEF;
            hdr.data.d = hdr.us[0].v4.isValid() ? 32w1 : 32w0;
        }
    """
    _, _, device = device_for(make_program(headers=UNION_HEADERS, parser=UNION_PARSER, deparser=UNION_DEPARSER,
                                           ingress=ingress))
    # v4 path: u.v4 = 0x41, us[0].v4 = 0x42, us[1].v6 = 0x4344, then payload
    [(_, out)] = run_one(device, data_frame(a=4, payload=b"\x41\x42\x43\x44tail"))
    assert data_fields(out) == (4, 1, 2, 0)
    assert out[22:] == b"\x41" + b"\xbe\xef" + b"\x43\x44" + b"tail"
    [(_, out)] = run_one(device, data_frame(a=6, payload=b"\x61\x62tail"))
    assert data_fields(out)[:3] == (6, 1, 0) and out[22:] == b"\x61\x62tail"
    [(_, out)] = run_one(device, data_frame(a=7, payload=b"tail"))
    assert data_fields(out)[:3] == (7, 0, 0) and out[22:] == b"tail"


# ------------------------------------------------------------------------------------ compound assignment, loops
def test_compound_assignments():
    ingress = """
        sm.egress_spec = 2;
        hdr.data.a += 5;
        hdr.data.a *= 2;
        hdr.data.b |-|= 8w200;
        hdr.data.c <<= 4;
        hdr.data.c |= 0x000F;
        hdr.data.d ^= 0xFFFF0000;
        hdr.data.d >>= 8;
    """
    _, _, device = device_for(make_program(ingress=ingress))
    assert data_fields(run_one(device, data_frame(1, 50, 0x0123, 0x00FF00FF))[0][1]) == (
        12, 0, 0x123F, 0xFF0000)


def test_for_loops_with_break_and_continue():
    declarations = "header small_t { bit<8> x; }\n"
    ingress = """
        sm.egress_spec = 2;
        bit<8> sum = 0;
        for (bit<8> i = 0, bit<8> j = 10; i < hdr.data.a; i = i + 1, j = j - 1) {
            if (i == 2) { continue; }
            if (i == 6) { break; }
            sum = sum + i + j;
        }
        hdr.data.b = sum;
        bit<16> acc = 0;
        for (bit<16> k in 1 .. 4) { acc = acc * 10 + k; }
        hdr.data.c = acc;
        small_t[3] s;
        s[0].setValid(); s[2].setValid(); s[0].x = 3; s[2].x = 4;
        bit<32> valid = 0;
        for (small_t e in s) { if (e.isValid()) { valid = valid + (bit<32>)e.x; } }
        hdr.data.d = valid;
    """
    headers = PRELUDE + declarations
    _, _, device = device_for(make_program(headers=headers, ingress=ingress))
    # i = 0, 1, 3, 4, 5 with j = 10 - i: sum of (i + j) = 5 * 10
    assert data_fields(run_one(device, data_frame(a=8))[0][1]) == (8, 50, 1234, 7)
    assert data_fields(run_one(device, data_frame(a=2))[0][1])[1] == 20  # i = 0, 1


# ------------------------------------------------------------------------------------ macros
def test_function_like_macros():
    source = """#define SET(field, value) hdr.data.field = value;
#define SQUARE(x) ((x) * (x))
#define PASTE(a, b) a ## b
#define PORT 2
""" + make_program(ingress="""
        sm.egress_spec = PORT;
        SET(a, SQUARE(hdr.data.a + 1))
        SET(b,
            SQUARE(3))
        bit<8> PASTE(my, var) = 7;
        hdr.data.c = (bit<16>)myvar;
    """)
    _, _, device = device_for(source)
    assert data_fields(run_one(device, data_frame(a=2))[0][1])[:3] == (9, 9, 7)


# ------------------------------------------------------------------------------------ constructor parameters
def test_control_and_parser_constructor_parameters_and_sub_parsers():
    headers = PRELUDE.replace("struct headers_t { eth_t eth; data_t data; }",
                              "header small_t { bit<8> x; }\nstruct headers_t { eth_t eth; data_t data; small_t s; }")
    declarations = """
    control Add(inout bit<8> x)(bit<8> amount) { apply { x = x + amount; } }
    parser Tagged(packet_in p, out small_t s, inout bit<8> seen)(bit<8> tag) {
        state start { p.extract(s); transition select(s.x) { tag: ok; } }
        state ok { seen = seen + 1; transition accept; }
    }
    """
    parser = """
parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    Tagged(0x55) tagged;
    state start {
        pkt.extract(hdr.eth);
        pkt.extract(hdr.data);
        tagged.apply(pkt, hdr.s, meta.seen);
        transition accept;
    }
}
"""
    deparser = DEFAULT_DEPARSER.replace("pkt.emit(hdr.data);", "pkt.emit(hdr.data); pkt.emit(hdr.s);")
    ingress = """
        sm.egress_spec = 2;
        add5.apply(hdr.data.a);
        add7.apply(hdr.data.b);
        hdr.data.c = (bit<16>)meta.seen;
        hdr.data.d = sm.parser_error == error.NoError ? 32w0 : 32w1;
    """
    source = make_program(headers=headers, meta="bit<8> seen;", declarations=declarations, parser=parser,
                          deparser=deparser, ingress_locals="Add(5) add5; Add(7) add7;", ingress=ingress)
    _, _, device = device_for(source)
    [(_, out)] = run_one(device, data_frame(a=1, b=1, payload=b"\x55rest"))
    assert data_fields(out) == (6, 8, 1, 0) and out[22:] == b"\x55rest"
    [(_, out)] = run_one(device, data_frame(a=1, b=1, payload=b"\x66rest"))
    assert data_fields(out) == (6, 8, 0, 1)  # the sub-parser rejected (NoMatch): so did the parser


# ------------------------------------------------------------------------------------ smaller constructs
def test_lookahead_as_a_statement_still_checks_the_length():
    parser = """
parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        pkt.lookahead<bit<128>>();
        pkt.extract(hdr.data);
        transition accept;
    }
}
"""
    ingress = "sm.egress_spec = 2; if (sm.parser_error == error.PacketTooShort) { hdr.eth.type = 0xdead; }"
    _, _, device = device_for(make_program(parser=parser, ingress=ingress))
    [(_, out)] = run_one(device, data_frame(payload=b"12345678"))  # 16 bytes after Ethernet: enough
    assert out[12:14] == b"\x88\xb5" and len(out) == 30
    [(_, out)] = run_one(device, data_frame())  # 8 bytes: lookahead fails, data not extracted
    assert out[12:14] == b"\xde\xad"


def test_struct_typed_fields_inside_headers():
    headers = PRELUDE.replace("header data_t { bit<8> a; bit<8> b; bit<16> c; bit<32> d; }", """
struct ab_t { bit<8> a; bit<8> b; }
header data_t { ab_t ab; bit<16> c; bit<32> d; }""")
    ingress = """
        sm.egress_spec = 2;
        hdr.data.ab.b = hdr.data.ab.a + 1;
        hdr.data.c = (bit<16>)hdr.data.minSizeInBytes();
    """
    _, _, device = device_for(make_program(headers=headers, ingress=ingress))
    assert data_fields(run_one(device, data_frame(a=4, d=9))[0][1]) == (4, 5, 8, 9)


def test_nested_slices_on_the_left_of_an_assignment():
    _, _, device = device_for(make_program(ingress="""
        sm.egress_spec = 2;
        hdr.data.d[15:0][7:4] = 4w0xA;
        hdr.data.c[11:4][3:0][1:0] = 2w3;
    """))
    assert data_fields(run_one(device, data_frame(c=0, d=0xFFFF0000))[0][1])[2:] == (0x0030, 0xFFFF00A0)


def test_a_table_with_an_empty_actions_list():
    locals_ = "table t { key = { hdr.data.a: exact; } actions = { } }"
    program, _, device = device_for(make_program(ingress_locals=locals_, ingress="sm.egress_spec = 2; t.apply();"))
    assert run_one(device, data_frame(a=1))[0][0] == 2
    table = program.info.tables["MyIngress.t"]
    assert table.default_action.action == "NoAction" and [r.name for r in table.action_refs] == ["NoAction"]


def test_extract_into_dont_care_skips_the_header():
    parser = """
parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.eth); pkt.extract<data_t>(_); transition accept; }
}
"""
    _, _, device = device_for(make_program(parser=parser, ingress="sm.egress_spec = 2;"))
    frame = data_frame(1, 2, 3, 4, payload=b"after")
    [(_, out)] = run_one(device, frame)
    assert out == frame[:14] + b"after"  # the skipped header's bytes were consumed by the parser


@pytest.mark.parametrize("body, message", [
    ("for (bit<8> i = 0; i < 4; i = i + 1) { }", None),
    ("bit<8> x = 1; x += 16w1;", "different types"),
])
def test_loops_and_compound_assignment_are_type_checked(body, message):
    source = make_program(ingress=body)
    if message is None:
        load(source)
    else:
        with pytest.raises(Exception, match=message):
            load(source)
