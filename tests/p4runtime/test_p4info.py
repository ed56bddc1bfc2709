"""P4Info generation: ids as p4c assigns them, names, aliases and every object kind."""
import os

import pytest
from p4.config.v1 import p4info_pb2

from testbed.p4.program import (
    Action, ActionCall, ActionParam, ActionProfile, ActionRef, ConstEntry, ControllerPacketMetadata,
    Counter, Digest, DigestField, DirectCounter, DirectMeter, KeyMatch, MatchField, Meter,
    PacketMetadataField, ProgramInfo, Register, Table,
)
from testbed.p4runtime.p4info import (
    IdAllocator, build_p4info, jenkins_one_at_a_time, p4info_from_text, p4info_to_text,
)
from testbed.p4runtime.p4info_index import P4InfoIndex

from repo_paths import REPO



def basic_info():
    """The p4lang tutorials' basic.p4 control plane (its P4Info ids are published)."""
    info = ProgramInfo(name="basic")
    info.actions["NoAction"] = Action("NoAction")
    info.actions["MyIngress.drop"] = Action("MyIngress.drop")
    info.actions["MyIngress.ipv4_forward"] = Action(
        "MyIngress.ipv4_forward", [ActionParam("dstAddr", 48), ActionParam("port", 9)])
    info.tables["MyIngress.ipv4_lpm"] = Table(
        "MyIngress.ipv4_lpm", [MatchField("hdr.ipv4.dstAddr", 32, "lpm")],
        [ActionRef("MyIngress.ipv4_forward"), ActionRef("MyIngress.drop"), ActionRef("NoAction")],
        default_action=ActionCall("MyIngress.drop"))
    return info


def rich_info():
    """A program using every kind of P4Info object."""
    info = basic_info()
    info.actions["MyIngress.set_port"] = Action("MyIngress.set_port", [ActionParam("port", 9)])
    info.tables["MyIngress.ecmp"] = Table(
        "MyIngress.ecmp",
        [MatchField("meta.hash_src", 32, "selector"), MatchField("hdr.ipv4.dstAddr", 32, "exact"),
         MatchField("meta.hash_dst", 32, "selector")],
        [ActionRef("MyIngress.set_port")], implementation="MyIngress.ecmp_selector", size=64)
    info.action_profiles["MyIngress.ecmp_selector"] = ActionProfile(
        "MyIngress.ecmp_selector", ["MyIngress.ecmp"], 128, with_selector=True, algorithm="crc16",
        output_width=14, max_group_size=16)
    info.tables["MyIngress.acl"] = Table(
        "MyIngress.acl",
        [MatchField("hdr.ipv4.srcAddr", 32, "ternary"), MatchField("hdr.tcp.dstPort", 16, "range"),
         MatchField("hdr.ipv4.protocol", 8, "optional")],
        [ActionRef("MyIngress.drop", "TABLE_ONLY"), ActionRef("NoAction", "DEFAULT_ONLY")],
        default_action=ActionCall("NoAction"), const_default_action=True,
        direct_counter="MyIngress.acl_counter", direct_meter="MyIngress.acl_meter", idle_timeout=True,
        annotations=['@id(0x42)'])
    info.tables["MyEgress.fixed"] = Table(
        "MyEgress.fixed", [MatchField("standard_metadata.egress_port", 9, "exact")],
        [ActionRef("MyIngress.drop"), ActionRef("NoAction")],
        const_entries=[ConstEntry([KeyMatch("exact", 1)], ActionCall("MyIngress.drop"))],
        entries_are_const=True)
    info.direct_counters["MyIngress.acl_counter"] = DirectCounter("MyIngress.acl_counter", "MyIngress.acl",
                                                                  "PACKETS")
    info.direct_meters["MyIngress.acl_meter"] = DirectMeter("MyIngress.acl_meter", "MyIngress.acl", "BYTES")
    info.counters["MyIngress.port_counter"] = Counter("MyIngress.port_counter", 512, "BOTH")
    info.counters["MyEgress.port_counter"] = Counter("MyEgress.port_counter", 512, "BYTES")
    info.meters["MyIngress.port_meter"] = Meter("MyIngress.port_meter", 8, "PACKETS")
    info.registers["MyIngress.last_seen"] = Register("MyIngress.last_seen", 48, 1024)
    info.digests["mac_learn_digest_t"] = Digest(
        "mac_learn_digest_t", [DigestField("srcAddr", 48), DigestField("ingress_port", 9)])
    info.controller_packet_metadata["packet_in"] = ControllerPacketMetadata(
        "packet_in", [PacketMetadataField("ingress_port", 9), PacketMetadataField("_pad", 7)])
    info.controller_packet_metadata["packet_out"] = ControllerPacketMetadata(
        "packet_out", [PacketMetadataField("egress_port", 9), PacketMetadataField("_pad", 7)])
    return info


def test_jenkins_hash_gives_the_ids_of_the_p4_tutorials_basic_program():
    # Published in p4lang/tutorials' basic.p4info.txt (p4c output).
    p4info = build_p4info(basic_info())
    index = P4InfoIndex(p4info)
    assert index.id_of("tables", "MyIngress.ipv4_lpm") == 37375156
    assert index.id_of("actions", "MyIngress.ipv4_forward") == 28792405
    assert index.id_of("actions", "MyIngress.drop") == 25652968
    assert index.id_of("actions", "NoAction") == 21257015
    assert jenkins_one_at_a_time("") == 0
    table = p4info.tables[0]
    assert [ref.id for ref in table.action_refs] == [28792405, 25652968, 21257015]
    assert p4info.pkg_info.arch == "v1model"
    assert table.size == 1024 and table.const_default_action_id == 0


def test_every_object_kind_gets_its_resource_type_prefix():
    p4info = build_p4info(rich_info())
    prefixes = {
        "tables": p4info_pb2.P4Ids.TABLE, "actions": p4info_pb2.P4Ids.ACTION,
        "action_profiles": p4info_pb2.P4Ids.ACTION_PROFILE, "counters": p4info_pb2.P4Ids.COUNTER,
        "direct_counters": p4info_pb2.P4Ids.DIRECT_COUNTER, "meters": p4info_pb2.P4Ids.METER,
        "direct_meters": p4info_pb2.P4Ids.DIRECT_METER, "registers": p4info_pb2.P4Ids.REGISTER,
        "digests": p4info_pb2.P4Ids.DIGEST,
        "controller_packet_metadata": p4info_pb2.P4Ids.CONTROLLER_HEADER,
    }
    for kind, prefix in prefixes.items():
        messages = list(getattr(p4info, kind))
        assert messages, kind
        for message in messages:
            assert message.preamble.id >> 24 == prefix, (kind, message.preamble.name)
            if message.preamble.id & 0xFFFFFF != 0x42:
                # controller headers hash their type name; without one it is the name
                expected = jenkins_one_at_a_time(message.preamble.name) & 0xFFFFFF
                assert message.preamble.id & 0xFFFFFF == expected, message.preamble.name


def test_id_annotation_overrides_the_hash_and_gets_the_prefix():
    index = P4InfoIndex(build_p4info(rich_info()))
    assert index.id_of("tables", "MyIngress.acl") == (p4info_pb2.P4Ids.TABLE << 24) | 0x42
    alloc = IdAllocator()
    with pytest.raises(ValueError, match="wrong 8-bit prefix"):
        alloc.add("table", "t", ["@id(0x01000001)"])
    alloc.add("action", "a", ["@id(0x01000007)"])
    with pytest.raises(ValueError, match="multiple declarations"):
        alloc.add("action", "b", ["@id(7)"])


def test_hash_collisions_are_resolved_by_linear_probing_in_sorted_name_order():
    seen = {}
    pair = None
    for number in range(200000):
        name = f"c.t{number}"
        low = jenkins_one_at_a_time(name) & 0xFFFFFF
        if low in seen:
            pair = (seen[low], name)
            break
        seen[low] = name
    assert pair is not None
    first, second = sorted(pair, key=str.encode)
    alloc = IdAllocator()
    alloc.add("table", second)
    alloc.add("table", first)
    alloc.compute()
    base = (p4info_pb2.P4Ids.TABLE << 24) | (jenkins_one_at_a_time(first) & 0xFFFFFF)
    assert alloc.id_of("table", first) == base
    assert alloc.id_of("table", second) == (p4info_pb2.P4Ids.TABLE << 24) | ((base + 1) & 0xFFFFFF)


def test_aliases_are_the_shortest_unique_suffix_over_all_names():
    index = P4InfoIndex(build_p4info(rich_info()))
    counters = {c.preamble.name: c.preamble.alias for c in index.all("counters")}
    assert counters == {"MyIngress.port_counter": "MyIngress.port_counter",
                        "MyEgress.port_counter": "MyEgress.port_counter"}
    assert index.by_name("tables", "ipv4_lpm").preamble.alias == "ipv4_lpm"
    assert index.by_name("registers", "last_seen").preamble.name == "MyIngress.last_seen"


def test_tables_have_match_fields_actions_scopes_and_properties():
    index = P4InfoIndex(build_p4info(rich_info()))
    ecmp = index.by_name("tables", "MyIngress.ecmp")
    # selector keys are not listed but consume their position's id (p4c's FieldIdAllocator)
    assert [(f.id, f.name, f.bitwidth, f.match_type) for f in ecmp.match_fields] == [
        (2, "hdr.ipv4.dstAddr", 32, p4info_pb2.MatchField.EXACT)]
    profile = index.by_name("action_profiles", "MyIngress.ecmp_selector")
    assert ecmp.implementation_id == profile.preamble.id
    assert profile.with_selector and profile.size == 128 and profile.max_group_size == 16
    assert list(profile.table_ids) == [ecmp.preamble.id]

    acl = index.by_name("tables", "MyIngress.acl")
    assert [(f.id, f.match_type) for f in acl.match_fields] == [
        (1, p4info_pb2.MatchField.TERNARY), (2, p4info_pb2.MatchField.RANGE),
        (3, p4info_pb2.MatchField.OPTIONAL)]
    scopes = {index.name_of("actions", r.id): (r.scope, list(r.annotations)) for r in acl.action_refs}
    assert scopes == {"MyIngress.drop": (p4info_pb2.ActionRef.TABLE_ONLY, ["@tableonly"]),
                      "NoAction": (p4info_pb2.ActionRef.DEFAULT_ONLY, ["@defaultonly"])}
    assert acl.const_default_action_id == index.id_of("actions", "NoAction")
    assert list(acl.direct_resource_ids) == [index.id_of("direct_counters", "MyIngress.acl_counter"),
                                             index.id_of("direct_meters", "MyIngress.acl_meter")]
    assert acl.idle_timeout_behavior == p4info_pb2.Table.NOTIFY_CONTROL
    assert list(acl.preamble.annotations) == []  # @id is consumed, not copied

    fixed = index.by_name("tables", "MyEgress.fixed")
    # p4c 1.2.4 sets is_const_table for const entries but not has_initial_entries
    assert fixed.is_const_table and not fixed.has_initial_entries
    assert not index.by_name("tables", "MyIngress.ipv4_lpm").is_const_table


def test_actions_externs_digests_and_controller_headers():
    p4info = build_p4info(rich_info())
    index = P4InfoIndex(p4info)
    forward = index.by_name("actions", "MyIngress.ipv4_forward")
    assert [(p.id, p.name, p.bitwidth) for p in forward.params] == [(1, "dstAddr", 48), (2, "port", 9)]
    assert index.by_name("counters", "MyIngress.port_counter").spec.unit == p4info_pb2.CounterSpec.BOTH
    assert index.by_name("counters", "MyEgress.port_counter").size == 512
    direct = index.by_name("direct_counters", "MyIngress.acl_counter")
    assert direct.spec.unit == p4info_pb2.CounterSpec.PACKETS
    assert direct.direct_table_id == index.id_of("tables", "MyIngress.acl")
    assert index.by_name("meters", "MyIngress.port_meter").spec.unit == p4info_pb2.MeterSpec.PACKETS
    assert index.by_name("direct_meters", "MyIngress.acl_meter").direct_table_id == \
        index.id_of("tables", "MyIngress.acl")
    register = index.by_name("registers", "MyIngress.last_seen")
    assert register.size == 1024 and register.type_spec.bitstring.bit.bitwidth == 48
    digest = index.by_name("digests", "mac_learn_digest_t")
    assert digest.type_spec.struct.name == "mac_learn_digest_t"
    members = p4info.type_info.structs["mac_learn_digest_t"].members
    assert [(m.name, m.type_spec.bitstring.bit.bitwidth) for m in members] == [
        ("srcAddr", 48), ("ingress_port", 9)]
    packet_in = index.packet_metadata("packet_in")
    assert packet_in.preamble.name == "packet_in" and packet_in.preamble.alias == "packet_in"
    assert list(packet_in.preamble.annotations) == ['@controller_header("packet_in")']
    assert [(m.id, m.name, m.bitwidth) for m in packet_in.metadata] == [(1, "ingress_port", 9), (2, "_pad", 7)]


def test_text_round_trip_and_unknown_references_are_errors():
    p4info = build_p4info(rich_info())
    again = p4info_from_text(p4info_to_text(p4info))
    assert again == p4info
    info = basic_info()
    info.tables["MyIngress.ipv4_lpm"].action_refs.append(ActionRef("MyIngress.missing"))
    with pytest.raises(ValueError, match="MyIngress.missing"):
        build_p4info(info)


def test_p4info_of_the_real_l3_ecmp_program():
    from testbed.p4.loader import load_program

    program = load_program(os.path.join(REPO, "p4src", "l3_ecmp.p4"))
    p4info = build_p4info(program.info)
    index = P4InfoIndex(p4info)
    table = index.by_name("tables", "MyIngress.ipv4_lpm")
    assert [(f.id, f.name, f.bitwidth, f.match_type) for f in table.match_fields] == [
        (1, "hdr.ipv4.dstAddr", 32, p4info_pb2.MatchField.LPM)]
    selector = index.by_name("action_profiles", "MyIngress.ecmp_selector")
    assert selector.with_selector and table.implementation_id == selector.preamble.id
    assert selector.size == 1024
    set_nhop = index.by_name("actions", "MyIngress.set_nhop")
    assert [(p.name, p.bitwidth) for p in set_nhop.params] == [("dmac", 48), ("smac", 48), ("port", 9)]
    assert index.by_name("counters", "MyIngress.ingress_port_counter").size == 512
    assert index.packet_metadata("packet_in") is not None
    assert index.packet_metadata("packet_out") is not None
    for table in p4info.tables:
        assert table.preamble.id >> 24 == p4info_pb2.P4Ids.TABLE
        assert table.preamble.id & 0xFFFFFF == jenkins_one_at_a_time(table.preamble.name) & 0xFFFFFF


def _p4c_action_ids(names):
    """Action ids as p4c assigns them (control-plane/p4RuntimeSymbolTable.cpp, computeIdsForSymbols):
    names in byte order, 0x01 in the top byte and the low 24 bits of the Jenkins hash,
    linear probing on the hash value when an id is taken."""
    taken, ids = set(), {}
    for name in sorted(names, key=str.encode):
        value = jenkins_one_at_a_time(name)
        while (p4info_pb2.P4Ids.ACTION << 24) | (value & 0xFFFFFF) in taken:
            value += 1
        ids[name] = (p4info_pb2.P4Ids.ACTION << 24) | (value & 0xFFFFFF)
        taken.add(ids[name])
    return ids


@pytest.mark.parametrize("program_name, called", [
    ("l3_ecmp", "MyIngress.send_to_cpu"),
    ("flowlet", "MyIngress.keep_current_path"),
])
def test_actions_called_directly_in_an_apply_block_are_listed_with_p4cs_ids(program_name, called):
    # p4c lists the actions of each control that survive its frontend (analyzeControl adds each
    # P4Action among the control's locals), so an action only called from the apply block is listed too.
    from testbed.p4.loader import load_program

    program = load_program(os.path.join(REPO, "p4src", f"{program_name}.p4"))
    index = P4InfoIndex(build_p4info(program.info))
    names = [action.preamble.name for action in index.all("actions")]
    assert called in names
    expected = _p4c_action_ids(names)
    assert {name: index.id_of("actions", name) for name in names} == expected
    assert len(index.by_name("actions", called).params) == 0


_ACTION_USES = """#include <core.p4>
#include <v1model.p4>
header eth_t { bit<48> dst; bit<48> src; bit<16> type; }
struct headers_t { eth_t eth; }
struct meta_t { bit<8> x; bit<8> y; }
action ga(bit<8> v) { }
action gb() { }
action gc(bit<8> w) { }
parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.eth); transition accept; }
}
control Sub(inout meta_t meta) {
    action s1(bit<8> q) { meta.x = q; }
    table st { key = { meta.y: exact; } actions = { s1; gc; } }
    apply { st.apply(); }
}
control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action helper(bit<8> h) { meta.x = h; }
    action outer() { helper(1); }
    action unused() { meta.x = 2; }
    action direct(bit<8> a, bit<8> b) { meta.x = a + b; }
    action both(bit<8> a) { meta.y = a; }
    Sub() sub;
    action l2(bit<8> z) { meta.y = z; }
    table t { key = { hdr.eth.dst: exact; } actions = { gb; l2; ga; both; } }
    apply { gc(4); outer(); direct(1, 2); both(3); sub.apply(meta); t.apply(); }
}
control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    table te { key = { hdr.eth.dst: exact; } actions = { gc; NoAction; } }
    apply { ga(1); te.apply(); }
}
control V(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.eth); } }
V1Switch(P(), V(), I(), E(), V(), D()) main;
"""


def _actions_of(source):
    from testbed.p4.loader import load_program_from_sources

    p4info = build_p4info(load_program_from_sources("m.p4", {"m.p4": source}).info)
    return [(a.preamble.name, [p.name for p in a.params]) for a in p4info.actions]


def test_actions_are_listed_as_p4cs_frontend_leaves_them():
    # What p4c 1.2.4 writes for this program (checked against p4c's own P4Info in
    # test_p4info_equals_p4cs below): its frontend inlines sub-controls where they are
    # instantiated and actions called from actions into their callers, copies each top-level
    # action to the start of every control using it (in the order of first use: tables, then
    # apply calls), and removes the parameters a direct call binds; the serializer keeps the
    # first copy of each name, control by control in pipeline order.
    assert _actions_of(_ACTION_USES) == [
        ("gc", ["w"]),             # first used by Sub's table st (inlined into I): parameters kept
        ("NoAction", []),          # st's implicit default action
        ("gb", []), ("ga", ["v"]),  # table t; E's direct call of ga comes later and is dropped
        ("I.outer", []),           # helper is inlined into outer: not listed
        ("I.direct", []),          # called directly: the call binds a and b
        ("I.both", ["a"]),         # table t's copy comes first
        ("I.sub.s1", ["q"]),       # where `Sub() sub;` is declared
        ("I.l2", ["z"]),
    ]


def test_an_unused_action_and_one_called_only_from_another_action_are_not_listed():
    names = [name for name, _params in _actions_of(_ACTION_USES)]
    assert "I.unused" not in names and "I.helper" not in names


def test_type_info_is_present_as_p4c_writes_it():
    # p4c asks for P4Info.type_info for tables, extern instances, action parameters, controller
    # header fields and extern function calls: present (empty) in the first program, absent in the second.
    from testbed.p4.loader import load_program_from_sources

    def p4info_of(body):
        source = _ACTION_USES.split("control Sub")[0] + """
control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action a() { BODY }
    apply { a(); }
}
control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control V(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.eth); } }
V1Switch(P(), V(), I(), E(), V(), D()) main;
""".replace("BODY", body)
        return build_p4info(load_program_from_sources("m.p4", {"m.p4": source}).info)

    assert p4info_of("mark_to_drop(sm);").HasField("type_info")
    assert not p4info_of("meta.x = 1;").HasField("type_info")


# ------------------------------------------------------------------------------------ equality with p4c
P4C_PROGRAMS = sorted(
    [os.path.join("p4src", name) for name in os.listdir(os.path.join(REPO, "p4src"))
     if name.endswith(".p4") and name != "dsf_rdsw.p4"]  # dsf_rdsw calls the embedded target's own externs
    + [os.path.join("tests", "p4lang", "programs", name)
       for name in os.listdir(os.path.join(REPO, "tests", "p4lang", "programs"))
       if name.endswith(".p4") and name != "common.p4"])  # common.p4 is an include, without main


def p4info_differences(expected, actual):
    """Readable differences between two P4Info messages, object by object.

    Top-level objects are matched by kind and name (so a missing, extra or changed object is
    named); their order is compared last, once every object is equal.

    Args:
        expected: the reference P4Info (p4c's).
        actual: the P4Info under test.

    Returns:
        list of str: one line per difference, empty when the messages are equal.
    """
    from google.protobuf import text_format

    lines = []
    for descriptor in p4info_pb2.P4Info.DESCRIPTOR.fields:
        kind = descriptor.name
        if hasattr(getattr(expected, kind), "ListFields"):  # a message, not a repeated field
            want = getattr(expected, kind)
            got = getattr(actual, kind)
            if want != got or expected.HasField(kind) != actual.HasField(kind):
                lines.append(f"{kind}: p4c {text_format.MessageToString(want, as_one_line=True)!r} "
                             f"(present: {expected.HasField(kind)}), embedded "
                             f"{text_format.MessageToString(got, as_one_line=True)!r} "
                             f"(present: {actual.HasField(kind)})")
            continue
        want = {item.preamble.name: item for item in getattr(expected, kind)}
        got = {item.preamble.name: item for item in getattr(actual, kind)}
        for name in sorted(set(want) | set(got)):
            if name not in got:
                lines.append(f"{kind} {name}: only in p4c's P4Info")
            elif name not in want:
                lines.append(f"{kind} {name}: only in the embedded target's P4Info")
            elif want[name] != got[name]:
                for field, _value in want[name].ListFields() + got[name].ListFields():
                    a, b = getattr(want[name], field.name), getattr(got[name], field.name)
                    if a != b:
                        show = (lambda v: text_format.MessageToString(v, as_one_line=True)
                                if hasattr(v, "ListFields") else
                                [text_format.MessageToString(x, as_one_line=True)
                                 if hasattr(x, "ListFields") else x for x in v]
                                if hasattr(v, "__len__") and not isinstance(v, (str, bytes)) else v)
                        line = f"{kind} {name}.{field.name}: p4c {show(a)!r}, embedded {show(b)!r}"
                        if line not in lines:
                            lines.append(line)
        if not lines and list(want) != list(got):
            lines.append(f"{kind} order: p4c {list(want)}, embedded {list(got)}")
    return lines


def test_p4info_differences_name_what_differs():
    p4info = build_p4info(rich_info())
    other = p4info_pb2.P4Info()
    other.CopyFrom(p4info)
    assert p4info_differences(p4info, other) == []
    [forward] = [a for a in other.actions if a.preamble.name == "MyIngress.ipv4_forward"]
    forward.params[0].bitwidth = 47
    del other.counters[0]
    lines = p4info_differences(p4info, other)
    assert any("actions MyIngress.ipv4_forward.params" in line and "bitwidth: 47" in line for line in lines)
    assert "counters MyIngress.port_counter: only in p4c's P4Info" in lines


@pytest.mark.parametrize("path", P4C_PROGRAMS)
def test_p4info_equals_p4cs(path):
    # Ids, names, aliases, match fields, action parameters, sizes, annotations, controller packet
    # metadata, digests and action profiles, and their order: all as the installed p4c writes them.
    import shutil

    if shutil.which("p4c") is None:
        pytest.skip("p4c is not installed (use the Vagrant VM): nothing to compare with")
    from testbed.p4.loader import load_program
    from testbed.targets import compile_with_p4c

    p4info_path, _json = compile_with_p4c(os.path.join(REPO, path))
    with open(p4info_path) as handle:
        expected = p4info_from_text(handle.read())
    actual = build_p4info(load_program(os.path.join(REPO, path)).info)
    differences = p4info_differences(expected, actual)
    assert not differences, f"{path}: P4Info differs from p4c's:\n" + "\n".join(differences)
    assert actual == expected


def test_the_action_rules_program_equals_p4cs(tmp_path):
    import shutil

    if shutil.which("p4c") is None:
        pytest.skip("p4c is not installed (use the Vagrant VM): nothing to compare with")
    from testbed.p4.loader import load_program
    from testbed.targets import compile_with_p4c

    path = tmp_path / "action_uses.p4"
    path.write_text(_ACTION_USES)
    p4info_path, _json = compile_with_p4c(str(path), cache_dir=str(tmp_path / "cache"))
    with open(p4info_path) as handle:
        expected = p4info_from_text(handle.read())
    actual = build_p4info(load_program(str(path)).info)
    assert p4info_differences(expected, actual) == []
