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
