"""Behaviour of the embedded target where it used to differ from p4c + BMv2 simple_switch.

Each test runs a small v1model program through ``Device.process`` and checks the bytes or the
state that come out.  The expected values come from the P4_16 specification (1.2.4) and from
p4c's and BMv2's sources and documentation, cited next to each test, not from this target.
"""
import pytest

from test_p4_semantics import (DEFAULT_DEPARSER, PRELUDE, data_fields, data_frame, device_for, load, make_program,
                               run_one)
from testbed.errors import P4LoadError


# ------------------------------------------------------------------------------------ constant folding
def test_negative_literal_is_cast_to_the_fixed_width_operand_before_folding():
    # P4_16 1.2.4 "Implicit casts": in 8w255 == -1 the literal is cast to bit<8> (255) first.
    _, _, device = device_for(make_program(declarations="""
        const bool FOLDED_EQ = 8w255 == -1;
        const bool FOLDED_LT = 8w1 < -1;
    """, ingress="""
        sm.egress_spec = 2;
        if (8w255 == -1) { hdr.data.a = 1; } else { hdr.data.a = 2; }
        if (FOLDED_EQ && FOLDED_LT) { hdr.data.b = 1; } else { hdr.data.b = 2; }
        if (hdr.data.c[7:0] == -1) { hdr.data.c = 3; } else { hdr.data.c = 4; }
        if (16w0xfffe != -2) { hdr.data.d = 5; } else { hdr.data.d = 6; }
    """))
    [(_, frame)] = run_one(device, data_frame(0, 0, 0x00FF, 0))
    assert data_fields(frame) == (1, 1, 3, 6)


# ------------------------------------------------------------------------------------ entry priorities
PORT_ACTIONS = """
    action set_port(bit<9> port) { sm.egress_spec = port; }
"""


def _ternary_table(entries, properties="", const=True):
    return PORT_ACTIONS + f"""
    table t {{
        key = {{ hdr.data.c: ternary; }}
        actions = {{ set_port; }}
        default_action = set_port(50);
        {properties}
        {'const ' if const else ''}entries = {{
{entries}
        }}
    }}
    """


def _port_for(device, c):
    return run_one(device, data_frame(0, 0, c))[0][0]


def test_priority_annotations_on_const_entries_use_bmv2s_smaller_wins_order():
    # p4c's BMv2 backend (backends/bmv2/common/control.h, convertTableEntries) writes @priority(N) as the
    # entry's priority and a counter 1, 2, 3... for unannotated entries; BMv2 matches the smallest number
    # first (behavioral-model issue #581).  So here: entry 1 has 4, entry 2 has 2 (the counter), entry 3 has 1.
    entries = """
            0x2222 &&& 0x00F0: set_port(1) @priority(4);
            0x2222           : set_port(2);
            0x2222 &&& 0xF0F0: set_port(3) @priority(1);
    """
    program, _, device = device_for(make_program(ingress_locals=_ternary_table(entries), ingress="t.apply();"))
    assert _port_for(device, 0x0020) == 1  # only entry 1 matches
    assert _port_for(device, 0x2020) == 3  # entries 1 and 3 match: priority 1 beats 4
    assert _port_for(device, 0x2222) == 3  # all three match: 1 beats 2 and 4
    assert _port_for(device, 0x3333) == 50
    # P4Runtime view (larger wins) keeps the same order
    priorities = [e.priority for e in program.info.tables["MyIngress.t"].const_entries]
    assert priorities[2] > priorities[1] > priorities[0] >= 1


def test_unannotated_const_entries_match_in_program_order():
    entries = """
            0x0000 &&& 0x000F: set_port(1);
            0x0001 &&& 0x0001: set_port(2);
    """
    program, _, device = device_for(make_program(ingress_locals=_ternary_table(entries), ingress="t.apply();"))
    assert _port_for(device, 0x0010) == 1
    assert _port_for(device, 0x0011) == 2
    assert [e.priority for e in program.info.tables["MyIngress.t"].const_entries] == [2, 1]


def test_explicit_priorities_with_largest_priority_wins():
    # P4_16 1.2.4 "Entry priorities": missing values continue from the previous one minus priority_delta;
    # the largest wins.  Priorities here: 10, 9, 20 -> the third entry beats the first two.
    entries = """
            priority = 10: 0x0000 &&& 0x0000: set_port(1);
                           0x0005           : set_port(2);
            priority = 20: 0x0005 &&& 0x000F: set_port(3);
    """
    program, _, device = device_for(make_program(ingress_locals=_ternary_table(entries, const=False),
                                                 ingress="t.apply();"))
    assert _port_for(device, 0x0005) == 3
    assert _port_for(device, 0x0105) == 3
    assert _port_for(device, 0x0104) == 1
    assert [e.priority for e in program.info.tables["MyIngress.t"].const_entries] == [10, 9, 20]


def test_smallest_priority_wins_and_priority_delta():
    # largest_priority_wins = false: priorities 10, 20 (10 + delta), 5 -> the third entry (5) wins over both,
    # the first (10) over the second (20).
    entries = """
            priority = 10: 0x0000 &&& 0x00FF: set_port(1);
                           0x0000 &&& 0x0F00: set_port(2);
            priority = 5 : 0x0000 &&& 0xF000: set_port(3);
    """
    properties = "largest_priority_wins = false; priority_delta = 10;"
    program, _, device = device_for(make_program(ingress_locals=_ternary_table(entries, properties, const=False),
                                                 ingress="t.apply();"))
    assert _port_for(device, 0x0000) == 3
    assert _port_for(device, 0x1000) == 1  # entries 1 and 2 match: 10 beats 20
    assert _port_for(device, 0x1001) == 2  # only entry 2 matches
    assert _port_for(device, 0x1111) == 50


def test_priority_delta_without_explicit_priorities_numbers_from_the_last_entry():
    entries = """
            0x0000 &&& 0x0000: set_port(1);
            0x0001 &&& 0x000F: set_port(2);
            0x0002 &&& 0x000F: set_port(3);
    """
    program, _, device = device_for(make_program(ingress_locals=_ternary_table(entries, "priority_delta = 100;",
                                                                                const=False),
                                                 ingress="t.apply();"))
    assert [e.priority for e in program.info.tables["MyIngress.t"].const_entries] == [201, 101, 1]
    assert _port_for(device, 0x0001) == 1  # the first entry wins, as written


def test_priority_in_const_entries_is_an_error_with_its_line():
    entries = """
            priority = 10: 0x0000 &&& 0x0000: set_port(1);
    """
    source = make_program(ingress_locals=_ternary_table(entries), ingress="t.apply();")
    with pytest.raises(P4LoadError) as caught:
        load(source)
    assert caught.value.line == source[:source.index("priority = 10")].count("\n") + 1
    assert "cannot have priorities" in str(caught.value)


# ------------------------------------------------------------------------------------ evaluation order
BUMP = """
    bit<8> bump(inout bit<8> x) { x = x + 1; return x; }
    bit<16> pair(in bit<8> a, in bit<8> b) { return a ++ b; }
"""


def test_operands_and_arguments_are_evaluated_left_to_right():
    # P4_16 1.2.4 "Expression evaluation order": left to right; arguments in order (calling convention).
    _, _, device = device_for(make_program(declarations=BUMP, ingress="""
        sm.egress_spec = 2;
        bit<8> v = 1;
        hdr.data.a = v + bump(v);          // 1 + 2: v is read before bump runs
        hdr.data.b = bump(v) + v;          // 3 + 3
        hdr.data.c = pair(bump(v), bump(v));  // 4 then 5
        hdr.data.d = (bit<32>)(v ++ bump(v) ++ v ++ bump(v));  // 5, 6, 6, 7
    """))
    [(_, frame)] = run_one(device, data_frame())
    assert data_fields(frame) == (3, 6, 0x0405, 0x05060607)


def test_and_or_and_conditional_short_circuit():
    # P4_16 1.2.4: && and || evaluate their right operand only when needed; e1 ? e2 : e3 evaluates one branch.
    _, _, device = device_for(make_program(declarations=BUMP, ingress="""
        sm.egress_spec = 2;
        bit<8> v = 0;
        bool f = hdr.data.a == 1;
        if (f && bump(v) == 1) { hdr.data.b = 1; }
        if (!f || bump(v) == 9) { hdr.data.b = hdr.data.b + 2; }
        hdr.data.c = (bit<16>)(f ? bump(v) : 8w100);
        hdr.data.a = v;
    """))
    [(_, frame)] = run_one(device, data_frame(a=0))
    assert data_fields(frame)[:3] == (0, 2, 100)  # v never bumped
    [(_, frame)] = run_one(device, data_frame(a=1))
    assert data_fields(frame)[:3] == (3, 1, 3)  # bumped by &&, by ||, by ?:


def test_a_table_in_a_condition_is_applied_only_when_the_condition_gets_there():
    locals_ = """
    action tag() { hdr.data.d = hdr.data.d + 1; }
    table t { key = { hdr.data.b: exact; } actions = { tag; } default_action = tag(); }
    """
    _, _, device = device_for(make_program(ingress_locals=locals_, ingress="""
        sm.egress_spec = 2;
        if (hdr.data.a == 1 && t.apply().hit) { hdr.data.c = 1; }
        if (hdr.data.a == 1 || t.apply().miss) { hdr.data.c = hdr.data.c + 2; }
    """))
    [(_, frame)] = run_one(device, data_frame(a=0))
    assert data_fields(frame)[2:] == (2, 1)  # only the || applied the table (a miss: default action)
    [(_, frame)] = run_one(device, data_frame(a=1))
    assert data_fields(frame)[2:] == (2, 1)  # && applied it (a miss: no +1), || stopped at a == 1


SMALL_STACK = """
header small_t { bit<8> x; }
"""


def test_the_left_hand_side_is_evaluated_before_the_right_hand_side():
    # P4_16 1.2.4 "Assignment": the l-value (with its index) is evaluated first, then the value.
    _, _, device = device_for(make_program(declarations=SMALL_STACK + BUMP, ingress="""
        sm.egress_spec = 2;
        small_t[3] s;
        s[0].setValid(); s[1].setValid(); s[2].setValid();
        s[0].x = 0; s[1].x = 0; s[2].x = 0;
        bit<8> i = 0;
        s[i].x = bump(i);       // element 0 gets 1
        s[i].x = bump(i) + 10;  // element 1 gets 12
        hdr.data.a = s[0].x;
        hdr.data.b = s[1].x;
        hdr.data.c = (bit<16>)s[2].x;
    """))
    [(_, frame)] = run_one(device, data_frame())
    assert data_fields(frame)[:3] == (1, 12, 0)


# ------------------------------------------------------------------------------------ exit and copy-out
def test_exit_in_an_action_still_copies_out_its_inout_arguments():
    # P4_16 1.2.4 "Exit statement": "Any copy-out behavior due to direction out or inout parameters of
    # the enclosing action or control, and all of its callers, are still performed after the execution
    # of the exit statement."
    locals_ = """
    action stop(inout bit<8> x, out bit<16> y) { x = 42; y = 7; exit; }
    action outer(inout bit<8> z) { z = z + 1; stop(z, hdr.data.c); z = 99; }
    """
    _, _, device = device_for(make_program(ingress_locals=locals_, ingress="""
        sm.egress_spec = 2;
        if (hdr.data.b == 0) { stop(hdr.data.a, hdr.data.c); } else { outer(hdr.data.a); }
        hdr.data.d = 1;
    """))
    [(_, frame)] = run_one(device, data_frame(a=5, b=0))
    assert data_fields(frame) == (42, 0, 7, 0)
    [(_, frame)] = run_one(device, data_frame(a=5, b=1))
    assert data_fields(frame) == (42, 1, 7, 0)  # stop's copy-out, then outer's: z = 42, not 99


def test_exit_in_a_sub_control_copies_out_its_scalar_arguments():
    declarations = """
    control Sub(inout bit<8> v, out bit<16> w) { apply { v = 7; w = 8; exit; } }
    """
    _, _, device = device_for(make_program(declarations=declarations, ingress_locals="Sub() sub;", ingress="""
        sm.egress_spec = 2;
        sub.apply(hdr.data.a, hdr.data.c);
        hdr.data.b = 1;
    """))
    [(_, frame)] = run_one(device, data_frame(a=1, b=0))
    assert data_fields(frame)[:3] == (7, 0, 8)


# ------------------------------------------------------------------------------------ copy-in/copy-out
def test_an_action_s_header_argument_is_a_copy_not_an_alias_of_the_global():
    # P4_16 1.2.4 "Calling convention": inout arguments are copied in and out; writes the action makes
    # to the control's header directly are overwritten by the copy-out, and reads of the parameter do
    # not see them.
    locals_ = """
    action touch(inout data_t d) { hdr.data.a = 9; d.b = hdr.data.a; d.c = (bit<16>)d.a; }
    """
    _, _, device = device_for(make_program(ingress_locals=locals_, ingress="""
        sm.egress_spec = 2;
        touch(hdr.data);
    """))
    [(_, frame)] = run_one(device, data_frame(a=3, b=4, c=5, d=6))
    assert data_fields(frame) == (3, 9, 3, 6)


def test_two_overlapping_arguments_are_separate_copies():
    declarations = """
    void two(inout data_t x, inout data_t y) { x.a = 1; y.a = 2; x.b = y.a; x.c = (bit<16>)x.a; }
    control Twice(inout data_t x, in data_t y) { apply { x.a = y.a + 1; x.c = (bit<16>)y.a; } }
    """
    _, _, device = device_for(make_program(declarations=declarations, ingress_locals="Twice() twice;", ingress="""
        sm.egress_spec = 2;
        if (hdr.data.d == 0) { two(hdr.data, hdr.data); } else { twice.apply(hdr.data, hdr.data); }
    """))
    [(_, frame)] = run_one(device, data_frame(a=5, b=6, c=7, d=0))
    assert data_fields(frame) == (2, 6, 7, 0)  # y copied out last: a = 2, b and c as copied in
    [(_, frame)] = run_one(device, data_frame(a=5, b=6, c=7, d=1))
    assert data_fields(frame) == (6, 6, 5, 1)  # y is the value before the call


def test_an_out_header_parameter_starts_invalid():
    # out parameters are uninitialized; a header that is not written valid stays invalid after copy-out,
    # so the deparser does not emit it.
    locals_ = """
    action make(out data_t d) { d.a = 5; }
    """
    _, _, device = device_for(make_program(ingress_locals=locals_, ingress="""
        sm.egress_spec = 2;
        make(hdr.data);
    """))
    frame = data_frame(a=1, b=2, c=3, d=4, payload=b"xyz")
    [(_, out)] = run_one(device, frame)
    assert out == frame[:14] + b"xyz"


# ------------------------------------------------------------------------------------ header stack index
def test_a_run_time_stack_index_out_of_range_stops_the_switch_like_simple_switch():
    # BMv2's Stack::at uses std::vector::at, which throws std::out_of_range; simple_switch does not catch
    # it and terminates (p4c issue #3423, behavioral-model issue #849).  The embedded switch halts too:
    # no output for that packet nor any later one.
    program = make_program(headers=PRELUDE + SMALL_STACK, meta="small_t[2] s;", ingress="""
        sm.egress_spec = 2;
        meta.s[0].setValid(); meta.s[1].setValid();
        meta.s[hdr.data.a].x = 1;
        hdr.data.b = meta.s[0].x + meta.s[1].x;
    """)
    _, _, device = device_for(program)
    [(_, frame)] = run_one(device, data_frame(a=1))
    assert data_fields(frame)[:2] == (1, 1)
    assert device.halted is None
    assert run_one(device, data_frame(a=2)) == []
    assert device.halted is not None and "out of range" in device.halted
    assert run_one(device, data_frame(a=0)) == []  # the switch stays down


# ------------------------------------------------------------------------------------ v1model declarations
def test_a_program_may_declare_its_own_port_id_type_as_with_p4cs_v1model():
    # p4c's v1model.p4 defaults V1MODEL_VERSION to 20180101 and declares PortId_t only
    # "#if V1MODEL_VERSION >= 20200408", so programs written for the older version declare it themselves.
    source = make_program(declarations="typedef bit<9> PortId_t;\n", ingress="""
        PortId_t out_port = 3;
        sm.egress_spec = out_port;
    """)
    _, _, device = device_for(source)
    assert run_one(device, data_frame())[0][0] == 3


def test_port_id_type_comes_with_v1model_version_20200408():
    source = "#define V1MODEL_VERSION 20200408\n" + make_program(ingress="""
        PortId_t out_port = 4;
        sm.egress_spec = out_port;
    """)
    _, _, device = device_for(source)
    assert run_one(device, data_frame())[0][0] == 4


def test_field_list_annotation_may_name_a_constant():
    headers = PRELUDE + "const bit<8> KEEP = 3;\n"
    meta = "@field_list(KEEP) bit<8> passes; bit<8> scratch;"
    ingress = """
        sm.egress_spec = 2;
        if (sm.instance_type == 0) {
            meta.passes = 5; meta.scratch = 9;
            resubmit_preserving_field_list(KEEP);
        } else {
            hdr.data.b = meta.passes + meta.scratch;
        }
    """
    _, _, device = device_for(make_program(headers=headers, meta=meta, ingress=ingress))
    [(_, frame)] = run_one(device, data_frame(1))
    assert data_fields(frame)[1] == 5  # passes kept, scratch reset


def test_field_list_annotation_with_an_unknown_name_is_a_load_error():
    meta = "@field_list(NOT_DECLARED) bit<8> passes;"
    with pytest.raises(P4LoadError, match="NOT_DECLARED"):
        load(make_program(meta=meta, ingress="sm.egress_spec = 2;"))


def test_an_unused_in_or_inout_argument_of_a_direct_action_call_is_not_evaluated():
    # p4c inlines a direct action call and removes the copy of a parameter the body never names (a dead
    # copy-in, and the copy-out of an unchanged value), so BMv2 never evaluates the argument's stack index
    # and forwards the packet; an unused out parameter keeps its copy-out and simple_switch aborts
    # (checked on simple_switch 1.15.5 with p4c 1.2.4.2).
    program = make_program(headers=PRELUDE + SMALL_STACK, meta="small_t[2] s;", ingress_locals="""
        action keep(inout bit<8> v) { }
        action look(in bit<8> v) { }
        action fill(out bit<8> v) { }
    """, ingress="""
        sm.egress_spec = 2;
        meta.s[0].setValid(); meta.s[1].setValid();
        keep(meta.s[hdr.data.a].x);
        look(meta.s[hdr.data.a].x);
        if (hdr.data.b == 1) { fill(meta.s[hdr.data.a].x); }
        hdr.data.c = 7;
    """)
    _, _, device = device_for(program)
    [(_, frame)] = run_one(device, data_frame(a=5))
    assert data_fields(frame)[:3] == (5, 0, 7) and device.halted is None
    assert run_one(device, data_frame(a=5, b=1)) == []
    assert device.halted is not None and "out of range" in device.halted


# ------------------------------------------------------------------------------------ direct type invocation
def test_a_control_or_parser_type_applied_directly_is_an_instance_of_its_own():
    # P4_16 1.2.4 "Direct type invocation": T.apply(...) on a control or parser type without constructor
    # parameters instantiates it in place; p4c (InstantiateDirectCalls) names the instance like the type.
    program = make_program(declarations="""
        control Bump(inout data_t d) { apply { d.c = d.c + 1; } }
        control Once(inout data_t d) {
            counter(4, CounterType.packets) seen;
            apply { seen.count(0); }
        }
        parser Inner(packet_in pkt, inout headers_t hdr) { state start { pkt.extract(hdr.data); transition accept; } }
    """, parser="""
parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.eth); transition select(hdr.eth.type) { 0x88b5: parse_data; default: accept; } }
    state parse_data { Inner.apply(pkt, hdr); transition accept; }
}
""", ingress="sm.egress_spec = 2; Bump.apply(hdr.data); Bump.apply(hdr.data); Once.apply(hdr.data);")
    loaded, state, device = device_for(program)
    [(_, frame)] = run_one(device, data_frame(c=40))
    assert data_fields(frame)[2] == 42  # two instances, each applied once
    assert "MyIngress.Once.seen" in loaded.info.counters


def test_a_type_applied_directly_twice_with_a_table_is_refused_like_p4c():
    # p4c: "Name 'I.Inc.t' is used for multiple table objects in the P4Info message".
    source = make_program(declarations="""
        control Inc(inout data_t d) {
            action up() { d.c = d.c + 1; }
            table t { key = { d.a: exact; } actions = { up; } default_action = up(); }
            apply { t.apply(); }
        }
    """, ingress="Inc.apply(hdr.data); Inc.apply(hdr.data);")
    with pytest.raises(P4LoadError, match="MyIngress.Inc.t is used for two tables"):
        load(source)
    with pytest.raises(P4LoadError, match=r":\d+: unsupported construct: a control or parser can only be applied"):
        load(make_program(declarations="control N(inout data_t d) { apply { } }",
                          ingress_locals="action a() { N.apply(hdr.data); }", ingress="a();"))


# ------------------------------------------------------------------------------------ bound action arguments
def test_default_action_and_entries_may_repeat_the_arguments_bound_in_the_actions_list():
    # P4_16 1.2.4 "Default action" / "Entries": all arguments may be given, the directional ones as bound in
    # the actions list; p4c accepts this program and BMv2 drops a=0 (default) and sends a=1 to port 3.
    table = """
        action my_drop(inout standard_metadata_t smeta) { mark_to_drop(smeta); }
        action fwd(inout standard_metadata_t smeta, bit<9> port) { smeta.egress_spec = port; }
        table t {
            key = { hdr.data.a: exact; }
            actions = { my_drop(sm); fwd(sm); }
            default_action = my_drop(sm);
            const entries = { 1: fwd(sm, 3); 2: fwd(4); }
        }
    """
    _, _, device = device_for(make_program(ingress_locals=table, ingress="sm.egress_spec = 2; t.apply();"))
    assert run_one(device, data_frame(a=0)) == []
    assert [port for port, _ in run_one(device, data_frame(a=1))] == [3]
    assert [port for port, _ in run_one(device, data_frame(a=2))] == [4]
    other = "standard_metadata_t copy;" + table.replace("default_action = my_drop(sm);",
                                                        "default_action = my_drop(copy);")
    with pytest.raises(P4LoadError, match=r"test.p4:\d+: .*directional argument\(s\) copy differ from those bound"):
        load(make_program(ingress_locals=other, ingress="t.apply();"))


# ------------------------------------------------------------------------------------ lookahead and varbit
def test_lookahead_of_a_struct_reads_its_fields_in_order_also_as_a_statement():
    # P4_16 1.2.4 "Packet extraction": lookahead<T> for any fixed-width T; the values below are what
    # p4c + simple_switch 1.15.5 give for this program (0xA5: x=0xA, b=false, y=-3).
    headers = PRELUDE + "struct pair_t { bit<4> x; bool b; int<3> y; bit<8> z; }\n"
    parser = """
parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.eth); transition select(hdr.eth.type) { 0x88b5: parse_data; default: accept; } }
    state parse_data {
        meta.p = pkt.lookahead<pair_t>(); pkt.lookahead<pair_t>(); pkt.extract(hdr.data); transition accept;
    }
}
"""
    _, _, device = device_for(make_program(headers=headers, meta="pair_t p;", parser=parser, ingress="""
        sm.egress_spec = 2;
        hdr.data.c = meta.p.x ++ (meta.p.b ? 1w1 : 1w0) ++ (bit<3>)meta.p.y ++ meta.p.z;
        hdr.data.d = (bit<32>)(int<32>)meta.p.y;
    """))
    assert data_fields(run_one(device, data_frame(a=0xA5, b=7))[0][1]) == (0xA5, 7, 0xA507, 0xFFFFFFFD)
    assert data_fields(run_one(device, data_frame(a=0x18, b=7))[0][1]) == (0x18, 7, 0x1807, 0)


VARBIT_HEADERS = PRELUDE.replace("struct headers_t { eth_t eth; data_t data; }",
                                  "header vh_t { varbit<32> v; }\n"
                                  "struct headers_t { eth_t eth; data_t data; vh_t vh; vh_t copy; }")
VARBIT_PARSER = """
parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.eth); transition select(hdr.eth.type) { 0x88b5: parse_data; default: accept; } }
    state parse_data { pkt.extract(hdr.data); pkt.extract(hdr.vh, (bit<32>)hdr.data.a * 8); transition accept; }
}
"""


def test_varbit_local_variables_carry_value_and_length_as_simple_switch():
    # expected frames: what p4c 1.2.4.2 + simple_switch 1.15.5 give for this program (an uninitialised
    # varbit local is empty: length 0, equal to an empty field); data.a = bytes in vh, data.b picks the copy
    ingress = """
        sm.egress_spec = 2;
        varbit<32> tmp = hdr.vh.v;
        varbit<32> empty;
        kept = tmp;
        hdr.data.c = 0;
        if (tmp == hdr.vh.v) { hdr.data.c = hdr.data.c | 1; }
        if (kept == tmp) { hdr.data.c = hdr.data.c | 2; }
        if (empty == tmp) { hdr.data.c = hdr.data.c | 4; }
        if (hdr.data.b == 1) { hdr.copy.setValid(); hdr.copy.v = kept; }
        if (hdr.data.b == 2) { hdr.copy.setValid(); hdr.copy.v = empty; }
    """
    deparser = DEFAULT_DEPARSER.replace("pkt.emit(hdr.data);", "pkt.emit(hdr.data); pkt.emit(hdr.vh); "
                                                                "pkt.emit(hdr.copy);")
    _, _, device = device_for(make_program(headers=VARBIT_HEADERS, parser=VARBIT_PARSER, deparser=deparser,
                                           ingress_locals="varbit<32> kept;", ingress=ingress))
    payload = bytes.fromhex("1122334455667788")
    expected = {
        (0, 0): "00000007000000001122334455667788", (0, 1): "00010007000000001122334455667788",
        (1, 0): "01000003000000001122334455667788", (1, 1): "0101000300000000111122334455667788",
        (1, 2): "01020003000000001122334455667788", (2, 1): "020100030000000011221122334455667788",
        (4, 1): "0401000300000000112233441122334455667788", (4, 2): "04020003000000001122334455667788",
    }
    for (a, b), out in expected.items():
        [(port, frame)] = run_one(device, data_frame(a=a, b=b, payload=payload))
        assert (port, frame[14:].hex()) == (2, out), (a, b)


