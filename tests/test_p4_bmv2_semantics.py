"""Behaviour of the embedded target where it used to differ from p4c + BMv2 simple_switch.

Each test runs a small v1model program through ``Device.process`` and checks the bytes or the
state that come out.  The expected values come from the P4_16 specification (1.2.4) and from
p4c's and BMv2's sources and documentation, cited next to each test, not from this target.
"""
import struct

import pytest

from test_p4_semantics import data_fields, data_frame, device_for, load, make_program, run_one
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
