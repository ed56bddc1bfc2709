"""Unit tests of the embedded target's runtime state (testbed.p4.state).

ProgramInfo objects are built by hand here: they are test data describing small
programs with the table/extern shapes under test.
"""
import contextlib

import pytest

from testbed.p4.program import (
    Action, ActionCall, ActionParam, ActionProfile, ActionRef, ConstEntry, Counter,
    DirectCounter, DirectMeter, KeyMatch, MatchField, Meter, ProgramInfo, Register, Table,
)
from testbed.p4.state import (
    GREEN, RED, YELLOW, MeterConfig, StateError, SwitchState, TableEntry,
)

FWD = "MyIngress.forward"
DROP = "MyIngress.drop"
SET_NH = "MyIngress.set_nhop"
DEF_ONLY = "MyIngress.punt"


def actions():
    """The actions every test program has."""
    return {
        "NoAction": Action("NoAction"),
        FWD: Action(FWD, [ActionParam("port", 9)]),
        DROP: Action(DROP),
        SET_NH: Action(SET_NH, [ActionParam("dmac", 48), ActionParam("port", 9)]),
        DEF_ONLY: Action(DEF_ONLY),
    }


def refs(*names, default_only=()):
    """Action refs of a table (plus @defaultonly ones)."""
    out = [ActionRef(n) for n in names]
    out += [ActionRef(n, "DEFAULT_ONLY") for n in default_only]
    out.append(ActionRef("NoAction"))
    return out


def make_program(**tables_and_more):
    """A ProgramInfo with the standard actions and the given objects."""
    program = ProgramInfo(name="test", actions=actions())
    for name, table in tables_and_more.get("tables", {}).items():
        program.tables[name] = table
    for attr in ("action_profiles", "registers", "counters", "direct_counters", "meters",
                 "direct_meters"):
        getattr(program, attr).update(tables_and_more.get(attr, {}))
    return program


def exact_table(name="MyIngress.dmac", size=1024, **kw):
    return Table(name, [MatchField("hdr.ethernet.dstAddr", 48, "exact")],
                 refs(FWD, DROP), size=size, **kw)


def lpm_table(name="MyIngress.ipv4_lpm", size=1024, **kw):
    return Table(name, [MatchField("hdr.ipv4.dstAddr", 32, "lpm")],
                 refs(FWD, DROP), size=size, **kw)


def ternary_table(name="MyIngress.acl", size=1024, fields=None, **kw):
    fields = fields or [MatchField("hdr.ipv4.srcAddr", 32, "ternary")]
    return Table(name, fields, refs(FWD, DROP, default_only=[DEF_ONLY]), size=size, **kw)


def ip(text):
    a, b, c, d = (int(x) for x in text.split("."))
    return (a << 24) | (b << 16) | (c << 8) | d


def lpm(prefix):
    addr, plen = prefix.split("/")
    return KeyMatch("lpm", ip(addr), prefix_len=int(plen))


def fwd(port):
    return ActionCall(FWD, (port,))


def state_with(*tables, **more):
    return SwitchState(make_program(tables={t.name: t for t in tables}, **more))


@contextlib.contextmanager
def raises_state_error(code, message=""):
    """Like ``pytest.raises(StateError)``, and the error's code must be ``code`` (its message hold
    ``message``); yields the ExceptionInfo."""
    with pytest.raises(StateError) as excinfo:
        yield excinfo
    assert excinfo.value.code == code
    assert message in str(excinfo.value)


# --- exact ------------------------------------------------------------------------


def test_exact_hit_miss_and_default_noaction():
    table = state_with(exact_table()).tables["MyIngress.dmac"]
    table.insert(TableEntry([KeyMatch("exact", 0xAABBCCDDEEFF)], fwd(3)))
    hit = table.lookup((0xAABBCCDDEEFF,))
    assert (hit.hit, hit.action, hit.args) == (True, FWD, (3,))
    assert hit.entry is table.entries()[0]
    miss = table.lookup((1,))
    assert (miss.hit, miss.action, miss.args, miss.entry) == (False, "NoAction", (), None)


def test_exact_modify_delete_and_errors():
    table = state_with(exact_table(size=2)).tables["MyIngress.dmac"]
    key = [KeyMatch("exact", 5)]
    stored = table.insert(TableEntry(key, fwd(1)))
    with raises_state_error("ALREADY_EXISTS"):
        table.insert(TableEntry(key, fwd(2)))
    assert table.modify(TableEntry(key, fwd(7))) is stored
    assert table.lookup((5,)).args == (7,)
    table.insert(TableEntry([KeyMatch("exact", 6)], ActionCall(DROP)))
    with raises_state_error("RESOURCE_EXHAUSTED"):
        table.insert(TableEntry([KeyMatch("exact", 8)], ActionCall(DROP)))
    table.delete(TableEntry(key, None))
    assert table.lookup((5,)).hit is False
    for op in (table.delete, table.modify):
        with raises_state_error("NOT_FOUND"):
            op(TableEntry(key, fwd(1)))
    assert [e.matches[0].value for e in table.entries()] == [6]


@pytest.mark.parametrize("entry, fragment", [
    (TableEntry([KeyMatch("exact", 1 << 48)], fwd(1)), "does not fit in 48 bits"),
    (TableEntry([KeyMatch("exact", 1)], ActionCall(FWD, (1 << 9,))), "param port"),
    (TableEntry([KeyMatch("exact", 1)], ActionCall(FWD, ())), "takes 1 argument"),
    (TableEntry([KeyMatch("exact", 1)], ActionCall(FWD, (1, 2))), "takes 1 argument"),
    (TableEntry([KeyMatch("exact", 1)], ActionCall(SET_NH, (1, 2))), "not one of its actions"),
    (TableEntry([KeyMatch("exact", 1), KeyMatch("exact", 2)], fwd(1)), "match key"),
    (TableEntry([KeyMatch("lpm", 1, prefix_len=48)], fwd(1)), "the key is exact"),
    (TableEntry([KeyMatch("exact", 1)], fwd(1), priority=5), "takes no priority"),
    (TableEntry([KeyMatch("exact", 1)], None), "exactly one of"),
    (TableEntry([KeyMatch("exact", 1)], fwd(1), member_id=1), "exactly one of"),
    (TableEntry([KeyMatch("exact", 1)], None, member_id=1), "has no action profile"),
])
def test_exact_invalid_arguments(entry, fragment):
    table = state_with(exact_table()).tables["MyIngress.dmac"]
    with raises_state_error("INVALID_ARGUMENT") as e:
        table.insert(entry)
    assert fragment in e.value.message
    assert "MyIngress.dmac" in e.value.message
    assert len(table) == 0


# --- lpm --------------------------------------------------------------------------


def test_lpm_longest_prefix_with_default_route_and_overlaps():
    table = state_with(lpm_table()).tables["MyIngress.ipv4_lpm"]
    for prefix, port in (("0.0.0.0/0", 1), ("10.0.0.0/8", 2), ("10.1.0.0/16", 3),
                         ("10.1.2.0/24", 4), ("10.1.2.3/32", 5), ("10.1.128.0/17", 6)):
        table.insert(TableEntry([lpm(prefix)], fwd(port)))
    cases = {"10.1.2.3": 5, "10.1.2.4": 4, "10.1.3.1": 3, "10.1.200.1": 6, "10.2.0.1": 2,
             "11.0.0.1": 1, "255.255.255.255": 1}
    for addr, port in cases.items():
        result = table.lookup((ip(addr),))
        assert result.hit and result.args == (port,), addr
    table.delete(TableEntry([lpm("10.1.2.0/24")], None))
    assert table.lookup((ip("10.1.2.4"),)).args == (3,)
    table.delete(TableEntry([lpm("0.0.0.0/0")], None))
    assert table.lookup((ip("11.0.0.1"),)).hit is False


def test_lpm_validation():
    table = state_with(lpm_table()).tables["MyIngress.ipv4_lpm"]
    with raises_state_error("INVALID_ARGUMENT") as e:
        table.insert(TableEntry([KeyMatch("lpm", 0, prefix_len=33)], fwd(1)))
    assert e.value.message == ("table MyIngress.ipv4_lpm: key hdr.ipv4.dstAddr: "
                               "prefix_len 33 exceeds bitwidth 32")
    with raises_state_error("INVALID_ARGUMENT") as e:
        table.insert(TableEntry([KeyMatch("lpm", ip("10.1.2.3"), prefix_len=16)], fwd(1)))
    assert "beyond prefix_len 16" in e.value.message
    # same prefix value with different lengths are different entries
    table.insert(TableEntry([lpm("10.0.0.0/8")], fwd(1)))
    table.insert(TableEntry([lpm("10.0.0.0/16")], fwd(2)))
    with raises_state_error("ALREADY_EXISTS"):
        table.insert(TableEntry([lpm("10.0.0.0/16")], fwd(3)))


def test_lpm_with_exact_key():
    table = Table("MyIngress.vrf_lpm", [MatchField("meta.vrf", 8, "exact"),
                                        MatchField("hdr.ipv4.dstAddr", 32, "lpm")],
                  refs(FWD))
    t = state_with(table).tables["MyIngress.vrf_lpm"]
    t.insert(TableEntry([KeyMatch("exact", 1), lpm("10.0.0.0/8")], fwd(1)))
    t.insert(TableEntry([KeyMatch("exact", 2), lpm("10.1.0.0/16")], fwd(2)))
    t.insert(TableEntry([KeyMatch("exact", 2), lpm("0.0.0.0/0")], fwd(3)))
    assert t.lookup((1, ip("10.1.1.1"))).args == (1,)
    assert t.lookup((2, ip("10.1.1.1"))).args == (2,)
    assert t.lookup((2, ip("10.2.1.1"))).args == (3,)
    assert t.lookup((1, ip("11.2.1.1"))).hit is False


# --- ternary / range / optional ----------------------------------------------------------


def tern(value, mask):
    return KeyMatch("ternary", value, mask=mask)


def test_ternary_priority_higher_wins_and_ties():
    table = state_with(ternary_table()).tables["MyIngress.acl"]
    table.insert(TableEntry([tern(ip("10.0.0.0"), 0xFF000000)], fwd(1), priority=10))
    table.insert(TableEntry([tern(ip("10.1.0.0"), 0xFFFF0000)], fwd(2), priority=5))
    table.insert(TableEntry([tern(0, 0)], fwd(3), priority=1))
    # higher priority wins even though the other one is more specific
    assert table.lookup((ip("10.1.2.3"),)).args == (1,)
    assert table.lookup((ip("11.1.2.3"),)).args == (3,)
    table.insert(TableEntry([tern(ip("10.1.0.0"), 0xFFFF0000)], fwd(4), priority=20))
    assert table.lookup((ip("10.1.2.3"),)).args == (4,)
    # equal priority, both match: the entry inserted first wins
    table.insert(TableEntry([tern(ip("0.0.0.3"), 0x000000FF)], fwd(5), priority=20))
    assert table.lookup((ip("10.1.2.3"),)).args == (4,)
    assert table.lookup((ip("99.1.2.3"),)).args == (5,)
    # same value/mask but another priority is another entry
    table.insert(TableEntry([tern(0, 0)], fwd(6), priority=2))
    assert table.lookup((ip("11.1.2.4"),)).args == (6,)
    table.delete(TableEntry([tern(0, 0)], None, priority=2))
    assert table.lookup((ip("11.1.2.4"),)).args == (3,)
    table.delete(TableEntry([tern(ip("10.1.0.0"), 0xFFFF0000)], None, priority=20))
    assert table.lookup((ip("10.1.2.3"),)).args == (5,)
    assert table.lookup((ip("10.1.2.4"),)).args == (1,)


def test_ternary_same_value_different_masks_and_bucket_ordering():
    table = state_with(ternary_table()).tables["MyIngress.acl"]
    table.insert(TableEntry([tern(0x0A000000, 0xFF000000)], fwd(1), priority=3))
    table.insert(TableEntry([tern(0x0A000000, 0xFFFF0000)], fwd(2), priority=7))
    table.insert(TableEntry([tern(0x0A000000, 0xFFFF0000)], fwd(3), priority=9))
    assert table.lookup((0x0A000001,)).args == (3,)
    assert table.lookup((0x0A010001,)).args == (1,)


def test_ternary_validation_and_priority_required():
    table = state_with(ternary_table()).tables["MyIngress.acl"]
    with raises_state_error("INVALID_ARGUMENT") as e:
        table.insert(TableEntry([tern(0x0A000001, 0xFF000000)], fwd(1), priority=1))
    assert "outside mask" in e.value.message
    for priority in (None, 0, -1):
        with raises_state_error("INVALID_ARGUMENT") as e:
            table.insert(TableEntry([tern(0, 0)], fwd(1), priority=priority))
        assert "priority" in e.value.message
    with raises_state_error("INVALID_ARGUMENT"):
        table.insert(TableEntry([tern(0, 1 << 32)], fwd(1), priority=1))
    with raises_state_error("INVALID_ARGUMENT") as e:  # @defaultonly action in an entry
        table.insert(TableEntry([tern(0, 0)], ActionCall(DEF_ONLY), priority=1))
    assert "DEFAULT_ONLY" in e.value.message
    assert table.find([tern(0, 0)], 1) is None


def test_range_and_optional_and_mixed_keys():
    fields = [MatchField("hdr.ipv4.dstAddr", 32, "lpm"),
              MatchField("hdr.tcp.dstPort", 16, "range"),
              MatchField("hdr.ipv4.protocol", 8, "optional"),
              MatchField("meta.flags", 4, "ternary"),
              MatchField("meta.vrf", 8, "exact")]
    table = state_with(ternary_table(fields=fields)).tables["MyIngress.acl"]
    wild_opt = KeyMatch("optional", 0, mask=None)
    table.insert(TableEntry([lpm("10.0.0.0/8"), KeyMatch("range", 1000, high=2000),
                             KeyMatch("optional", 6, mask=0xFF), tern(0, 0),
                             KeyMatch("exact", 1)], fwd(1), priority=50))
    table.insert(TableEntry([lpm("10.0.0.0/8"), KeyMatch("range", 0, high=0xFFFF),
                             wild_opt, tern(0x1, 0x1), KeyMatch("exact", 1)],
                            fwd(2), priority=40))
    table.insert(TableEntry([lpm("0.0.0.0/0"), KeyMatch("range", 80, high=80),
                             wild_opt, tern(0, 0), KeyMatch("exact", 1)], fwd(3), priority=60))
    table.insert(TableEntry([lpm("0.0.0.0/0"), KeyMatch("range", 0, high=0xFFFF),
                             wild_opt, tern(0, 0), KeyMatch("exact", 1)], fwd(4), priority=1))
    ten = ip("10.9.9.9")
    assert table.lookup((ten, 1500, 6, 0, 1)).args == (1,)
    assert table.lookup((ten, 1000, 6, 0, 1)).args == (1,)   # range bounds are inclusive
    assert table.lookup((ten, 2000, 6, 0, 1)).args == (1,)
    assert table.lookup((ten, 2001, 6, 0, 1)).args == (4,)
    assert table.lookup((ten, 1500, 17, 0, 1)).args == (4,)  # optional value differs
    assert table.lookup((ten, 1500, 17, 1, 1)).args == (2,)
    assert table.lookup((ten, 1500, 6, 1, 1)).args == (1,)   # 50 beats 40
    assert table.lookup((ip("11.0.0.1"), 80, 6, 1, 1)).args == (3,)
    assert table.lookup((ten, 80, 6, 1, 1)).args == (3,)     # 60 beats all
    assert table.lookup((ten, 1500, 6, 0, 2)).hit is False   # exact key differs
    with raises_state_error("INVALID_ARGUMENT") as e:
        table.insert(TableEntry([lpm("0.0.0.0/0"), KeyMatch("range", 9, high=8), wild_opt,
                                 tern(0, 0), KeyMatch("exact", 1)], fwd(1), priority=2))
    assert "low 9 > high 8" in e.value.message
    with raises_state_error("INVALID_ARGUMENT"):
        table.insert(TableEntry([lpm("0.0.0.0/0"), KeyMatch("range", 0, high=1),
                                 KeyMatch("optional", 6, mask=0x0F), tern(0, 0),
                                 KeyMatch("exact", 1)], fwd(1), priority=2))
    # delete a range entry and a maskable entry
    table.delete(TableEntry([lpm("10.0.0.0/8"), KeyMatch("range", 1000, high=2000),
                             KeyMatch("optional", 6, mask=0xFF), tern(0, 0),
                             KeyMatch("exact", 1)], None, priority=50))
    assert table.lookup((ten, 1500, 6, 0, 1)).args == (4,)
    table.delete(TableEntry([lpm("0.0.0.0/0"), KeyMatch("range", 80, high=80), wild_opt,
                             tern(0, 0), KeyMatch("exact", 1)], None, priority=60))
    assert table.lookup((ten, 80, 6, 1, 1)).args == (2,)


def test_ternary_matches_linear_reference():
    """Randomized: the indexed lookup equals a brute-force scan over the entries."""
    import random

    rng = random.Random(7)
    fields = [MatchField("a", 8, "ternary"), MatchField("b", 8, "range")]
    table = state_with(ternary_table(fields=fields, size=10000)).tables["MyIngress.acl"]
    masks = [0, 0xF0, 0x0F, 0xFF, 0x81]
    live = []
    for i in range(300):
        mask = rng.choice(masks)
        value = rng.randrange(256) & mask
        low = rng.choice([0, rng.randrange(256)])
        high = rng.choice([255, low, min(255, low + rng.randrange(40))])
        priority = rng.randrange(1, 30)
        entry = TableEntry([tern(value, mask), KeyMatch("range", low, high=high)], fwd(i % 512),
                           priority=priority)
        try:
            live.append(table.insert(entry))
        except StateError as err:
            assert err.code == "ALREADY_EXISTS"
        if live and rng.random() < 0.2:
            victim = live.pop(rng.randrange(len(live)))
            table.delete(victim)
    for _ in range(2000):
        a, b = rng.randrange(256), rng.randrange(256)
        matching = [e for e in live
                    if a & e.matches[0].mask == e.matches[0].value
                    and e.matches[1].value <= b <= e.matches[1].high]
        expected = None
        if matching:
            top = max(e.priority for e in matching)
            expected = [e for e in table.entries() if e in matching and e.priority == top][0]
        assert table.lookup((a, b)).entry is expected


# --- default actions and const entries ---------------------------------------------------


def test_default_action_set_reset_and_scope():
    table = state_with(ternary_table(default_action=ActionCall(DROP))).tables["MyIngress.acl"]
    assert table.lookup((1,)).action == DROP
    table.set_default(fwd(9))
    assert (table.lookup((1,)).action, table.lookup((1,)).args) == (FWD, (9,))
    table.set_default(ActionCall(DEF_ONLY))
    assert table.lookup((1,)).action == DEF_ONLY
    table.reset_default()
    assert table.lookup((1,)).action == DROP
    with raises_state_error("INVALID_ARGUMENT"):
        table.set_default(ActionCall(SET_NH, (1, 2)))
    with raises_state_error("INVALID_ARGUMENT"):
        table.set_default(ActionCall(FWD, (1 << 9,)))


def test_table_only_action_cannot_be_default():
    table = Table("MyIngress.t", [MatchField("k", 8, "exact")],
                  [ActionRef(FWD, "TABLE_ONLY"), ActionRef("NoAction")])
    t = state_with(table).tables["MyIngress.t"]
    with raises_state_error("INVALID_ARGUMENT") as e:
        t.set_default(fwd(1))
    assert "TABLE_ONLY" in e.value.message
    t.insert(TableEntry([KeyMatch("exact", 1)], fwd(1)))


def test_const_default_action_is_permission_denied():
    table = exact_table(default_action=ActionCall(DROP), const_default_action=True)
    t = state_with(table).tables["MyIngress.dmac"]
    for op in (lambda: t.set_default(fwd(1)), t.reset_default):
        with raises_state_error("PERMISSION_DENIED"):
            op()
    assert t.lookup((1,)).action == DROP


def test_const_entries_installed_and_not_writable():
    const = [
        ConstEntry([tern(0x0A000000, 0xFF000000)], fwd(1)),
        ConstEntry([tern(0, 0)], fwd(2)),
    ]
    table = ternary_table(const_entries=const, entries_are_const=True)
    t = state_with(table).tables["MyIngress.acl"]
    assert len(t.entries()) == 2 and all(e.is_const for e in t.entries())
    # without explicit priorities the first listed entry wins
    assert t.lookup((ip("10.0.0.1"),)).args == (1,)
    assert t.lookup((ip("11.0.0.1"),)).args == (2,)
    for op in (t.insert, t.modify, t.delete):
        with raises_state_error("PERMISSION_DENIED"):
            op(TableEntry([tern(0, 0)], fwd(3), priority=1))


def test_non_const_initial_entries_are_writable_and_reset_restores_them():
    const = [ConstEntry([KeyMatch("exact", 1)], fwd(1))]
    state = state_with(exact_table(const_entries=const))
    t = state.tables["MyIngress.dmac"]
    t.modify(TableEntry([KeyMatch("exact", 1)], fwd(5)))
    t.insert(TableEntry([KeyMatch("exact", 2)], fwd(2)))
    t.set_default(ActionCall(DROP))
    state.reset()
    assert [(e.matches[0].value, e.action.args) for e in t.entries()] == [(1, (1,))]
    assert t.lookup((9,)).action == "NoAction"


def test_keyless_table_only_default():
    table = Table("MyIngress.always", [], refs(FWD), default_action=fwd(4))
    t = state_with(table).tables["MyIngress.always"]
    assert t.lookup(()).args == (4,) and t.lookup(()).hit is False
    with raises_state_error("INVALID_ARGUMENT"):
        t.insert(TableEntry([], fwd(1)))


# --- action profiles and selectors ------------------------------------------------------


def selector_program(max_group_size=0, size=128):
    table = Table("MyIngress.ecmp", [MatchField("hdr.ipv4.dstAddr", 32, "lpm"),
                                     MatchField("hdr.ipv4.srcAddr", 32, "selector")],
                  refs(SET_NH, DROP), implementation="MyIngress.ecmp_selector")
    profile = ActionProfile("MyIngress.ecmp_selector", ["MyIngress.ecmp"], size=size,
                            with_selector=True, algorithm="crc16", output_width=14,
                            max_group_size=max_group_size)
    return SwitchState(make_program(tables={table.name: table},
                                    action_profiles={profile.name: profile}))


def nh(port):
    return ActionCall(SET_NH, (0x000000000100 + port, port))


def test_selector_member_choice_by_hash():
    state = selector_program()
    profile = state.action_profiles["MyIngress.ecmp_selector"]
    table = state.tables["MyIngress.ecmp"]
    for member_id in (30, 10, 20):  # created out of order on purpose
        profile.insert_member(member_id, nh(member_id))
    profile.insert_group(1, [(20, 1), (10, 1), (30, 1)])
    table.insert(TableEntry([lpm("10.0.0.0/8")], None, group_id=1))
    ports = [table.lookup((ip("10.0.0.1"),), selector_hash=h).args[1] for h in range(6)]
    # members in BMv2's handle order (creation order here), chosen by hash % 3: every member reachable
    assert ports == [30, 10, 20, 30, 10, 20]
    assert table.lookup((ip("10.0.0.1"),), selector_hash=12345).args[1] == [30, 10, 20][12345 % 3]
    # member entries resolve to the member's action; modify_member is seen at once
    table.insert(TableEntry([lpm("11.0.0.0/8")], None, member_id=20))
    assert table.lookup((ip("11.1.1.1"),)).args[1] == 20
    profile.modify_member(20, nh(99))
    assert table.lookup((ip("11.1.1.1"),)).args[1] == 99
    assert table.lookup((ip("10.0.0.1"),), selector_hash=2).args[1] == 99
    # a group used by an entry cannot become empty (BMv2 refuses empty groups in entries)
    with raises_state_error("FAILED_PRECONDITION"):
        profile.modify_group(1, [])
    # group changes apply to lookups
    profile.modify_group(1, [(10, 1), (30, 1)])
    assert [table.lookup((ip("10.0.0.1"),), selector_hash=h).args[1] for h in range(4)] == \
        [30, 10, 30, 10]


def test_selector_weighted_members():
    state = selector_program()
    profile = state.action_profiles["MyIngress.ecmp_selector"]
    table = state.tables["MyIngress.ecmp"]
    profile.insert_member(1, nh(1))
    profile.insert_member(2, nh(2))
    profile.insert_group(7, [(2, 3), (1, 1)])
    table.insert(TableEntry([lpm("0.0.0.0/0")], None, group_id=7))
    ports = [table.lookup((5,), selector_hash=h).args[1] for h in range(8)]
    assert ports == [1, 2, 2, 2, 1, 2, 2, 2]
    assert profile.get_group(7).selection == (1, 2, 2, 2)
    for weight in (0, -1):
        with raises_state_error("INVALID_ARGUMENT"):
            profile.modify_group(7, [(1, weight)])


def test_selector_orders_members_by_bmv2_handle_not_by_member_id():
    # BMv2 picks the (hash % size)-th member handle of a group in handle order; handles are
    # allocated lowest-free (bm_sim HandleMgr::get_handle) when PI creates a member, and PI
    # (proto/frontend/src/action_prof_mgr.cpp) creates a weighted member's extra copies, in
    # member id order, when a group first needs them and deletes them when no group does.
    state = selector_program()
    profile = state.action_profiles["MyIngress.ecmp_selector"]
    for member_id in (30, 10, 20):  # handles 0, 1, 2
        profile.insert_member(member_id, nh(member_id))
    profile.insert_group(1, [(10, 1), (20, 1), (30, 1)])
    assert profile.get_group(1).selection == (30, 10, 20)
    profile.insert_member(40, nh(40))  # handle 3
    profile.delete_member(40)  # handle 3 free again
    profile.insert_member(5, nh(5))  # handle 3
    profile.modify_group(1, [(5, 1), (20, 2)])  # 20's copy: handle 4
    assert profile.get_group(1).selection == (20, 5, 20)
    profile.insert_group(2, [(30, 3)])  # 30's copies: handles 5 and 6 (1 is still member 10's)
    assert profile.get_group(2).selection == (30, 30, 30)
    profile.delete_member(10)  # handle 1 free
    profile.insert_member(11, nh(11))  # handle 1
    profile.modify_group(1, [(5, 1), (20, 1), (11, 1), (30, 1)])  # 20's copy (handle 4) goes
    assert profile.get_group(1).selection == (30, 11, 20, 5)
    profile.delete_group(2)  # 30's copies (handles 5, 6) go
    profile.insert_member(12, nh(12))  # lowest free handle: 4
    profile.modify_group(1, [(12, 1), (20, 1)])
    assert profile.get_group(1).selection == (20, 12)


def test_selector_group_size_limits():
    state = selector_program(max_group_size=4, size=3)
    profile = state.action_profiles["MyIngress.ecmp_selector"]
    for member_id in (1, 2, 3):
        profile.insert_member(member_id, nh(member_id))
    with raises_state_error("RESOURCE_EXHAUSTED"):
        profile.insert_member(4, nh(4))
    with raises_state_error("INVALID_ARGUMENT"):
        profile.insert_group(1, [(1, 1)], max_size=5)
    with raises_state_error("RESOURCE_EXHAUSTED"):
        profile.insert_group(1, [(1, 3), (2, 2)])
    with raises_state_error("RESOURCE_EXHAUSTED"):
        profile.insert_group(1, [(1, 1), (2, 1)], max_size=1)
    with raises_state_error("INVALID_ARGUMENT"):
        profile.insert_group(1, [(1, 1), (1, 1)])
    with raises_state_error("NOT_FOUND"):
        profile.insert_group(1, [(9, 1)])
    profile.insert_group(1, [(1, 2), (2, 1)])
    with raises_state_error("ALREADY_EXISTS"):
        profile.insert_group(1, [(3, 1)])


def test_selector_size_bounds_the_weights_of_all_groups():
    """P4Info ActionProfile without selector_size_semantics (as p4c writes it): ``size`` is the largest sum
    of member weights over all groups of the selector, ``max_group_size`` that of one group."""
    state = selector_program(size=8)
    profile = state.action_profiles["MyIngress.ecmp_selector"]
    for member_id in (1, 2, 3):
        profile.insert_member(member_id, nh(member_id))
    with raises_state_error("RESOURCE_EXHAUSTED", "sum to 10, over the profile's size 8"):
        profile.insert_group(1, [(1, 5), (2, 5)])
    profile.insert_group(1, [(1, 5), (2, 3)])
    with raises_state_error("RESOURCE_EXHAUSTED", "sum to 9"):
        profile.insert_group(2, [(3, 1)])
    profile.modify_group(1, [(1, 4)])  # the group's old weights no longer count
    profile.insert_group(2, [(2, 2), (3, 2)])
    with raises_state_error("RESOURCE_EXHAUSTED", "sum to 9"):
        profile.modify_group(2, [(2, 2), (3, 3)])
    profile.delete_group(1)
    profile.modify_group(2, [(2, 4), (3, 4)])
    assert [(group.group_id, group.members) for group in profile.groups()] == [(2, [(2, 4), (3, 4)])]


def test_member_and_group_in_use_cannot_be_deleted():
    state = selector_program()
    profile = state.action_profiles["MyIngress.ecmp_selector"]
    table = state.tables["MyIngress.ecmp"]
    profile.insert_member(1, nh(1))
    profile.insert_member(2, nh(2))
    profile.insert_group(5, [(1, 1)])
    with raises_state_error("FAILED_PRECONDITION"):
        profile.delete_member(1)
    table.insert(TableEntry([lpm("10.0.0.0/8")], None, member_id=2))
    table.insert(TableEntry([lpm("11.0.0.0/8")], None, group_id=5))
    for op in (lambda: profile.delete_member(2), lambda: profile.delete_group(5)):
        with raises_state_error("FAILED_PRECONDITION"):
            op()
    # moving the entry releases the old reference
    table.modify(TableEntry([lpm("10.0.0.0/8")], None, member_id=1))
    profile.delete_member(2)
    table.delete(TableEntry([lpm("11.0.0.0/8")], None))
    profile.delete_group(5)
    table.delete(TableEntry([lpm("10.0.0.0/8")], None))
    profile.delete_member(1)
    assert profile.members() == [] and profile.groups() == []
    for op in (lambda: profile.delete_member(1), lambda: profile.delete_group(5),
               lambda: profile.modify_member(1, nh(1)), lambda: profile.modify_group(5, [])):
        with raises_state_error("NOT_FOUND"):
            op()


def test_indirect_table_entry_errors():
    state = selector_program()
    profile = state.action_profiles["MyIngress.ecmp_selector"]
    table = state.tables["MyIngress.ecmp"]
    cases = [
        (TableEntry([lpm("1.0.0.0/8")], nh(1)), "INVALID_ARGUMENT"),
        (TableEntry([lpm("1.0.0.0/8")], None, member_id=42), "NOT_FOUND"),
        (TableEntry([lpm("1.0.0.0/8")], None, group_id=42), "NOT_FOUND"),
    ]
    profile.insert_group(3, [])
    cases.append((TableEntry([lpm("1.0.0.0/8")], None, group_id=3), "FAILED_PRECONDITION"))
    for entry, code in cases:
        with raises_state_error(code):
            table.insert(entry)
    with raises_state_error("INVALID_ARGUMENT"):
        profile.insert_member(1, ActionCall(FWD, (1,)))  # not an action of the table


def test_action_profile_without_selector_has_no_groups():
    table = Table("MyIngress.t", [MatchField("k", 8, "exact")], refs(FWD),
                  implementation="MyIngress.prof")
    profile = ActionProfile("MyIngress.prof", ["MyIngress.t"], size=16)
    state = SwitchState(make_program(tables={table.name: table},
                                     action_profiles={profile.name: profile}))
    with raises_state_error("INVALID_ARGUMENT"):
        state.action_profiles["MyIngress.prof"].insert_group(1, [])
    state.action_profiles["MyIngress.prof"].insert_member(1, fwd(3))
    state.tables["MyIngress.t"].insert(TableEntry([KeyMatch("exact", 1)], None, member_id=1))
    assert state.tables["MyIngress.t"].lookup((1,)).args == (3,)


# --- registers, counters, direct counters ----------------------------------------------------


def test_registers_read_write_bounds():
    state = SwitchState(make_program(registers={"MyIngress.r": Register("MyIngress.r", 16, 4)}))
    reg = state.registers["MyIngress.r"]
    assert reg.values == [0, 0, 0, 0]
    reg.write(3, 0xFFFF)
    assert reg.read(3) == 0xFFFF and reg.values[3] == 0xFFFF
    reg.values[0] = 7  # the data plane writes directly
    assert reg.read(0) == 7
    for index, code in ((4, "OUT_OF_RANGE"), (-1, "INVALID_ARGUMENT")):
        with raises_state_error(code):
            reg.read(index)
        with raises_state_error(code):
            reg.write(index, 1)
    for value in (0x10000, -1):
        with raises_state_error("INVALID_ARGUMENT"):
            reg.write(1, value)
    state.reset()
    assert reg.values == [0, 0, 0, 0]


def test_every_indexed_extern_gives_p4runtime_codes_for_bad_indexes():
    """P4Runtime CounterEntry / MeterEntry / RegisterEntry: INVALID_ARGUMENT for a negative index,
    OUT_OF_RANGE for one past the end, whichever way the state is reached."""
    state = SwitchState(make_program(registers={"r": Register("r", 8, 2)}, counters={"c": Counter("c", 2)},
                                     meters={"m": Meter("m", 2, "PACKETS")}))
    calls = [state.registers["r"].read, lambda i: state.registers["r"].write(i, 1), state.counters["c"].read,
             lambda i: state.counters["c"].write(i, 1, 1), state.meters["m"].get_config,
             state.meters["m"].reset_config, lambda i: state.meters["m"].set_config(i, 1, 1, 1, 1)]
    for call in calls:
        for index, code in ((-1, "INVALID_ARGUMENT"), (2, "OUT_OF_RANGE"), (1 << 70, "OUT_OF_RANGE")):
            with raises_state_error(code, f"index {index}"):
                call(index)


def test_counters():
    state = SwitchState(make_program(counters={"MyIngress.c": Counter("MyIngress.c", 3)}))
    counter = state.counters["MyIngress.c"]
    counter.count(1, 100)
    counter.count(1, 64)
    counter.count(7, 64)  # past the end: ignored
    assert counter.read(1) == (2, 164) and counter.read(0) == (0, 0)
    counter.write(2, 5, 500)
    assert counter.read(2) == (5, 500)
    with raises_state_error("OUT_OF_RANGE"):
        counter.read(3)
    with raises_state_error("INVALID_ARGUMENT"):
        counter.write(0, -1, 0)
    counter.reset()
    assert counter.read(1) == (0, 0)


def test_direct_counters_per_entry():
    table = exact_table(direct_counter="MyIngress.dmac_counter")
    dc = DirectCounter("MyIngress.dmac_counter", "MyIngress.dmac")
    state = state_with(table, direct_counters={dc.name: dc})
    t = state.tables["MyIngress.dmac"]
    assert state.direct_counters[dc.name] is t.direct_counter
    t.insert(TableEntry([KeyMatch("exact", 1)], fwd(1)))
    t.insert(TableEntry([KeyMatch("exact", 2)], fwd(2)))
    for key, size in ((1, 100), (1, 50), (2, 60), (3, 70)):
        result = t.lookup((key,))
        if result.hit:  # counted on hit only, as BMv2
            t.direct_counter.count(result.entry, size)
    assert t.direct_counter.read(TableEntry([KeyMatch("exact", 1)], None)) == (2, 150)
    assert t.direct_counter.read(TableEntry([KeyMatch("exact", 2)], None)) == (1, 60)
    t.direct_counter.write(TableEntry([KeyMatch("exact", 2)], None), 10, 1000)
    # modify keeps the counter data
    t.modify(TableEntry([KeyMatch("exact", 2)], fwd(9)))
    assert t.direct_counter.read(t.find([KeyMatch("exact", 2)])) == (10, 1000)
    with raises_state_error("NOT_FOUND"):
        t.direct_counter.read(TableEntry([KeyMatch("exact", 3)], None))
    # a re-inserted entry starts from zero
    t.delete(TableEntry([KeyMatch("exact", 1)], None))
    t.insert(TableEntry([KeyMatch("exact", 1)], fwd(1)))
    assert t.direct_counter.read(TableEntry([KeyMatch("exact", 1)], None)) == (0, 0)


def test_program_inconsistencies_are_reported():
    table = exact_table(implementation="MyIngress.nope")
    with pytest.raises(StateError) as e:
        state_with(table)
    assert "MyIngress.nope" in e.value.message
    dc = DirectCounter("MyIngress.dc", "MyIngress.missing")
    with pytest.raises(StateError):
        SwitchState(make_program(direct_counters={dc.name: dc}))


# --- meters ---------------------------------------------------------------------------------

MS = 1_000_000  # ns per millisecond


def meter_state(unit="BYTES", size=2):
    meter = Meter("MyIngress.m", size, unit)
    return SwitchState(make_program(meters={meter.name: meter})).meters["MyIngress.m"]


def test_unconfigured_meter_is_green():
    meter = meter_state()
    assert meter.get_config(0) is None
    assert [meter.execute(0, 9000, t * MS) for t in range(5)] == [GREEN] * 5


def test_meter_trtcm_transitions_rfc2698():
    """cir 1000 B/s cbs 1500, pir 2000 B/s pbs 3000; buckets start full (Tp=3000, Tc=1500)."""
    meter = meter_state()
    meter.set_config(0, 1000, 1500, 2000, 3000)
    cell = meter._cells[0]
    # t = 0: Tp 3000 -> 2000, Tc 1500 -> 500
    assert meter.execute(0, 1000, 0) == GREEN and cell.tokens() == (2000, 500)
    # Tc 500 < 1000: YELLOW, only Tp is charged
    assert meter.execute(0, 1000, 0) == YELLOW and cell.tokens() == (1000, 500)
    assert meter.execute(0, 1000, 0) == YELLOW and cell.tokens() == (0, 500)
    # Tp 0 < 1: RED, nothing charged
    assert meter.execute(0, 1, 0) == RED and cell.tokens() == (0, 500)
    # 250 ms later: Tp += 500, Tc += 250
    assert meter.execute(0, 600, 250 * MS) == RED and cell.tokens() == (500, 500)
    # the committed bucket was not visited for the RED packet, its credit still arrives
    assert meter.execute(0, 500, 250 * MS) == GREEN and cell.tokens() == (0, 250)
    # buckets never exceed their burst size
    assert meter.execute(0, 1500, 10_000 * MS) == GREEN and cell.tokens() == (1500, 0)
    # other index untouched and unconfigured
    assert meter.execute(1, 10**6, 0) == GREEN


def test_meter_refill_keeps_fractions_like_bmv2():
    """Tokens are counted from a fixed origin, so fractions of a token are not lost."""
    meter = meter_state()
    meter.set_config(0, 1000, 1, 1000, 1)  # 1 byte per ms
    assert meter.execute(0, 1, 0) == GREEN      # bucket starts full (1)
    assert meter.execute(0, 1, MS // 2) == RED  # 0.5 token accrued
    assert meter.execute(0, 1, MS) == GREEN     # 1 token
    assert meter.execute(0, 1, 3 * MS // 2) == RED
    assert meter.execute(0, 1, 2 * MS + 999) == GREEN  # microsecond resolution


def test_packet_meter_counts_packets():
    meter = meter_state("PACKETS")
    meter.set_config(1, 10, 2, 20, 3)  # 10 and 20 packets per second
    colors = [meter.execute(1, 1500, 0) for _ in range(4)]
    assert colors == [GREEN, GREEN, YELLOW, RED]
    # 100 ms: Tp += 2 (capped at 3 -> 2), Tc += 1
    assert [meter.execute(1, 64, 100 * MS) for _ in range(3)] == [GREEN, YELLOW, RED]


def test_meter_config_errors_and_reset():
    meter = meter_state()
    with raises_state_error("INVALID_ARGUMENT") as e:
        meter.set_config(0, 2000, 10, 1000, 10)
    assert "pir" in e.value.message
    with raises_state_error("INVALID_ARGUMENT"):
        meter.set_config(0, -1, 10, 1000, 10)
    with raises_state_error("OUT_OF_RANGE"):
        meter.set_config(2, 1, 1, 1, 1)
    meter.set_config(0, 100, 10, 200, 20)
    assert meter.get_config(0) == MeterConfig(cir=100, cburst=10, pir=200, pburst=20)
    meter.reset_config(0)
    assert meter.get_config(0) is None
    assert meter.execute(0, 10**6, 0) == GREEN


def test_direct_meter_per_entry():
    table = exact_table(direct_meter="MyIngress.dm")
    dm = DirectMeter("MyIngress.dm", "MyIngress.dmac", "PACKETS")
    state = state_with(table, direct_meters={dm.name: dm})
    t = state.tables["MyIngress.dmac"]
    assert state.direct_meters[dm.name] is t.direct_meter
    t.insert(TableEntry([KeyMatch("exact", 1)], fwd(1)))
    t.insert(TableEntry([KeyMatch("exact", 2)], fwd(2)))
    t.direct_meter.set_config(TableEntry([KeyMatch("exact", 1)], None), 1, 1, 1, 2)
    e1, e2 = t.lookup((1,)).entry, t.lookup((2,)).entry
    assert [t.direct_meter.execute(e1, 100, 0) for _ in range(3)] == [GREEN, YELLOW, RED]
    assert [t.direct_meter.execute(e2, 100, 0) for _ in range(3)] == [GREEN] * 3
    assert t.direct_meter.get_config(e1).pburst == 2
    assert t.direct_meter.get_config(e2) is None
    t.direct_meter.reset_config(e1)
    assert t.direct_meter.execute(e1, 100, 0) == GREEN
    with raises_state_error("NOT_FOUND"):
        t.direct_meter.set_config(TableEntry([KeyMatch("exact", 3)], None), 1, 1, 1, 1)


# --- packet replication engine ----------------------------------------------------------------


def test_multicast_groups_insert_modify_delete():
    state = SwitchState(make_program())
    groups = state.multicast_groups
    assert groups.replicas(1) == []
    groups.insert(1, [(3, 0), (2, 5), (1, 0), (1, 2)])
    # sorted by instance, then port, as BMv2 replicates behind the PI server
    assert groups.replicas(1) == [(1, 0), (3, 0), (1, 2), (2, 5)]
    with raises_state_error("ALREADY_EXISTS"):
        groups.insert(1, [(1, 0)])
    groups.modify(1, [(4, 1)])
    assert groups.replicas(1) == [(4, 1)]
    groups.insert(2, [])
    assert groups.entries() == [(1, [(4, 1)]), (2, [])]
    groups.delete(1)
    assert groups.replicas(1) == []
    for op in (lambda: groups.delete(1), lambda: groups.modify(1, [(1, 0)])):
        with raises_state_error("NOT_FOUND"):
            op()
    for bad in ((0, [(1, 0)]), (65536, [(1, 0)]), (3, [(1, 0), (1, 0)]), (3, [(1, 1 << 16)]),
                (3, [(-1, 0)]), (3, [(1,)])):
        with raises_state_error("INVALID_ARGUMENT"):
            groups.insert(*bad)
    state.reset()
    assert groups.entries() == []


def test_clone_sessions_insert_modify_delete():
    sessions = SwitchState(make_program()).clone_sessions
    assert sessions.get(5) is None
    sessions.insert(5, [(9, 0)])
    session = sessions.get(5)
    assert (session.replicas, session.class_of_service, session.packet_length_bytes) == \
        (((9, 0),), 0, 0)
    with raises_state_error("ALREADY_EXISTS"):
        sessions.insert(5, [(9, 0)])
    sessions.modify(5, [(7, 1)], class_of_service=2, packet_length_bytes=128)
    assert (sessions.get(5).replicas, sessions.get(5).packet_length_bytes) == (((7, 1),), 128)
    assert [s.session_id for s in sessions.entries()] == [5]
    sessions.delete(5)
    assert sessions.get(5) is None
    with raises_state_error("NOT_FOUND"):
        sessions.delete(5)
    with raises_state_error("NOT_FOUND"):
        sessions.modify(6, [(1, 0)])
    with raises_state_error("INVALID_ARGUMENT"):
        sessions.insert(-1, [(1, 0)])


def test_switch_state_reset_clears_everything():
    state = selector_program()
    profile = state.action_profiles["MyIngress.ecmp_selector"]
    profile.insert_member(1, nh(1))
    profile.insert_group(1, [(1, 1)])
    state.tables["MyIngress.ecmp"].insert(TableEntry([lpm("10.0.0.0/8")], None, group_id=1))
    state.multicast_groups.insert(1, [(1, 0)])
    state.clone_sessions.insert(1, [(1, 0)])
    state.reset()
    assert state.tables["MyIngress.ecmp"].entries() == []
    assert profile.members() == [] and profile.groups() == []
    assert state.multicast_groups.entries() == [] and state.clone_sessions.entries() == []
    # usable again after reset
    profile.insert_member(1, nh(1))
    profile.insert_group(1, [(1, 1)])
    state.tables["MyIngress.ecmp"].insert(TableEntry([lpm("10.0.0.0/8")], None, group_id=1))
    profile.modify_group(1, [(1, 1)])


def test_find_clear_and_idle_timeout():
    t = state_with(exact_table(idle_timeout=True)).tables["MyIngress.dmac"]
    stored = t.insert(TableEntry([KeyMatch("exact", 1)], fwd(1), idle_timeout_ns=1000))
    t.insert(TableEntry([KeyMatch("exact", 2)], fwd(2)))
    assert t.find([KeyMatch("exact", 1)]) is stored
    assert t.find([KeyMatch("exact", 3)]) is None
    assert t.expired(0) == []            # starts the idle clock of never-hit entries
    t.record_hit(stored, 500)
    assert t.expired(1400) == []
    assert t.expired(1500) == [stored]
    t.clear()
    assert t.entries() == []
    no_idle = state_with(exact_table()).tables["MyIngress.dmac"]
    with raises_state_error("INVALID_ARGUMENT"):
        no_idle.insert(TableEntry([KeyMatch("exact", 1)], fwd(1), idle_timeout_ns=10))
