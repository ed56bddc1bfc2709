"""Conversions between P4Runtime messages and the embedded target's runtime state.

Byte strings follow the P4Runtime specification ("Bytestrings"): a ``bit<W>`` value
is a big-endian byte string; the canonical form is the shortest one (at least one
byte), which is what we send.  Received values may be padded with leading zero
bytes, but a value that does not fit in ``W`` bits (or an empty string) is rejected
with INVALID_ARGUMENT, naming the field.

Match fields (spec "TableEntry"): a don't-care match must be *omitted* (a ternary
mask of 0, an lpm prefix length of 0 or a full range given explicitly is
INVALID_ARGUMENT); an omitted exact field is INVALID_ARGUMENT; masked-off bits of a
ternary or lpm value must be zero.
"""
from testbed.p4.program import PRIORITY_MATCH_KINDS, ActionCall, KeyMatch
from testbed.p4runtime.errors import P4RuntimeError
from testbed.p4runtime.p4info import MATCH_KIND_NAMES, MATCH_TYPES


def _invalid(message):
    return P4RuntimeError("INVALID_ARGUMENT", message)


def encode(value, bitwidth=None):
    """The canonical P4Runtime byte string of a non-negative integer.

    Args:
        value: the integer.
        bitwidth: if given, the value must fit in it.

    Returns:
        bytes: shortest big-endian form, ``b"\\x00"`` for zero.

    Raises:
        P4RuntimeError: INVALID_ARGUMENT for a negative value or one wider than ``bitwidth``.
    """
    value = int(value)
    if value < 0:
        raise _invalid(f"value {value} is negative")
    if bitwidth is not None and value >> bitwidth:
        raise _invalid(f"value {value:#x} does not fit in {bitwidth} bits")
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


def decode(data, bitwidth, what):
    """The integer of a received P4Runtime byte string.

    Args:
        data: the bytes.
        bitwidth: the width of the field.
        what: the field's description for error messages ("table T: field F").

    Returns:
        int

    Raises:
        P4RuntimeError: INVALID_ARGUMENT for an empty string or a value wider than ``bitwidth``.
    """
    if not data:
        raise _invalid(f"{what}: empty byte string")
    value = int.from_bytes(data, "big")
    if value >> bitwidth:
        raise _invalid(f"{what}: value 0x{data.hex()} does not fit in {bitwidth} bits")
    return value


def _full_mask(bitwidth):
    return (1 << bitwidth) - 1


def _prefix_mask(bitwidth, prefix_len):
    return _full_mask(bitwidth) ^ _full_mask(bitwidth - prefix_len)


def matches_from_proto(table_info, field_matches):
    """KeyMatch list (in P4Info match-field order) from a TableEntry's FieldMatch list.

    Args:
        table_info: the P4Info ``Table`` message.
        field_matches: the ``FieldMatch`` messages of the entry.

    Returns:
        list[KeyMatch]

    Raises:
        P4RuntimeError: INVALID_ARGUMENT (unknown or repeated field id, wrong match
            kind, bad value, explicit don't-care, missing exact field).
    """
    table_name = table_info.preamble.name
    fields = {f.id: f for f in table_info.match_fields}
    given = {}
    for fm in field_matches:
        if fm.field_id not in fields:
            raise _invalid(f"table {table_name}: unknown match field id {fm.field_id}")
        if fm.field_id in given:
            raise _invalid(f"table {table_name}: match field {fields[fm.field_id].name} given twice")
        given[fm.field_id] = fm
    result = []
    for field in table_info.match_fields:
        kind = MATCH_KIND_NAMES.get(field.match_type)
        what = f"table {table_name}: match field {field.name}"
        width = field.bitwidth
        fm = given.get(field.id)
        if kind is None:
            raise P4RuntimeError("UNIMPLEMENTED", f"{what}: match type {field.other_match_type!r}")
        if fm is None:
            if kind == "exact":
                raise _invalid(f"{what}: exact match field missing")
            result.append(wildcard(kind, width))
            continue
        which = fm.WhichOneof("field_match_type")
        if which != kind:
            raise _invalid(f"{what}: is a {kind} field but a {which} match was given")
        if kind == "exact":
            result.append(KeyMatch("exact", decode(fm.exact.value, width, what)))
        elif kind == "optional":
            result.append(KeyMatch("optional", decode(fm.optional.value, width, what), mask=_full_mask(width)))
        elif kind == "lpm":
            prefix_len = fm.lpm.prefix_len
            if prefix_len < 0 or prefix_len > width:
                raise _invalid(f"{what}: prefix_len {prefix_len} outside 1..{width}")
            if prefix_len == 0:
                raise _invalid(f"{what}: a don't-care lpm match (prefix_len 0) must be omitted")
            value = decode(fm.lpm.value, width, what)
            if value & ~_prefix_mask(width, prefix_len):
                raise _invalid(f"{what}: lpm value 0x{fm.lpm.value.hex()} has bits set beyond "
                               f"prefix_len {prefix_len}")
            result.append(KeyMatch("lpm", value, prefix_len=prefix_len))
        elif kind == "ternary":
            value = decode(fm.ternary.value, width, what + " value")
            mask = decode(fm.ternary.mask, width, what + " mask")
            if mask == 0:
                raise _invalid(f"{what}: a don't-care ternary match (mask 0) must be omitted")
            if value & ~mask:
                raise _invalid(f"{what}: ternary value 0x{fm.ternary.value.hex()} has bits set "
                               f"outside mask 0x{fm.ternary.mask.hex()}")
            result.append(KeyMatch("ternary", value, mask=mask))
        else:  # range
            low = decode(fm.range.low, width, what + " low")
            high = decode(fm.range.high, width, what + " high")
            if low > high:
                raise _invalid(f"{what}: range low {low} > high {high}")
            if low == 0 and high == _full_mask(width):
                raise _invalid(f"{what}: a don't-care range match must be omitted")
            result.append(KeyMatch("range", low, high=high))
    return result


def wildcard(kind, bitwidth):
    """The KeyMatch that matches everything for a key of this kind and width."""
    if kind == "lpm":
        return KeyMatch("lpm", 0, prefix_len=0)
    if kind == "ternary":
        return KeyMatch("ternary", 0, mask=0)
    if kind == "range":
        return KeyMatch("range", 0, high=_full_mask(bitwidth))
    if kind == "optional":
        return KeyMatch("optional", 0, mask=None)
    raise _invalid("an exact match has no wildcard")


def is_wildcard(match, bitwidth):
    """True for a KeyMatch that matches every value (omitted in P4Runtime messages)."""
    if match.kind == "lpm":
        return not match.prefix_len
    if match.kind == "ternary":
        return not match.mask
    if match.kind == "range":
        return match.value == 0 and match.high == _full_mask(bitwidth)
    if match.kind == "optional":
        return match.mask is None
    return False


def matches_to_proto(table_info, matches, out):
    """Append the FieldMatch messages of ``matches`` (P4Info field order) to ``out``.

    Wildcards are omitted, as the specification requires.
    """
    for field, match in zip(table_info.match_fields, matches):
        if is_wildcard(match, field.bitwidth):
            continue
        fm = out.add()
        fm.field_id = field.id
        if match.kind == "exact":
            fm.exact.value = encode(match.value)
        elif match.kind == "optional":
            fm.optional.value = encode(match.value)
        elif match.kind == "lpm":
            fm.lpm.value = encode(match.value)
            fm.lpm.prefix_len = match.prefix_len
        elif match.kind == "ternary":
            fm.ternary.value = encode(match.value)
            fm.ternary.mask = encode(match.mask)
        elif match.kind == "range":
            fm.range.low = encode(match.value)
            fm.range.high = encode(match.high)


def action_from_proto(index, action_msg, where):
    """ActionCall of a P4Runtime ``Action`` message.

    Args:
        index: the :class:`~testbed.p4runtime.p4info_index.P4InfoIndex`.
        action_msg: the ``p4.v1.Action``.
        where: context for error messages ("table T").

    Raises:
        P4RuntimeError: INVALID_ARGUMENT for an action id that is not an action of
            the P4Info (spec "Action Specification": the action_id must be one of the
            table's actions, else INVALID_ARGUMENT) and for a missing, repeated,
            unknown or too wide parameter.
    """
    try:
        action_info = index.by_id("actions", action_msg.action_id)
    except KeyError as exc:
        raise _invalid(f"{where}: {exc}") from None
    name = action_info.preamble.name
    values = {}
    params = {p.id: p for p in action_info.params}
    for param in action_msg.params:
        info = params.get(param.param_id)
        if info is None:
            raise _invalid(f"{where}: action {name}: unknown parameter id {param.param_id}")
        if param.param_id in values:
            raise _invalid(f"{where}: action {name}: parameter {info.name} given twice")
        values[param.param_id] = decode(param.value, info.bitwidth,
                                        f"{where}: action {name}: parameter {info.name}")
    missing = [p.name for p in action_info.params if p.id not in values]
    if missing:
        raise _invalid(f"{where}: action {name}: missing parameter(s) {', '.join(missing)}")
    return ActionCall(name, tuple(values[p.id] for p in action_info.params))


def action_to_proto(index, call, out):
    """Fill a ``p4.v1.Action`` message from an ActionCall."""
    action_info = index.by_name("actions", call.action)
    out.action_id = action_info.preamble.id
    for param, value in zip(action_info.params, call.args):
        p = out.params.add()
        p.param_id = param.id
        p.value = encode(value)


def table_entry_from_proto(index, proto, entry_factory, key_only=False):
    """The state TableEntry of a (non-default) P4Runtime TableEntry.

    Args:
        index: the P4InfoIndex.
        proto: the ``p4.v1.TableEntry``.
        entry_factory: the state's TableEntry class (``testbed.p4.state.TableEntry``).
        key_only: only the match and priority matter (DELETE, reads, direct resources):
            the action is not required.

    Returns:
        (table_info, TableEntry)

    Raises:
        P4RuntimeError: NOT_FOUND for an unknown table, INVALID_ARGUMENT for an
            unknown action and for malformed matches, actions or priority.
    """
    try:
        table_info = index.by_id("tables", proto.table_id)
    except KeyError as exc:
        raise P4RuntimeError("NOT_FOUND", str(exc)) from None
    table_name = table_info.preamble.name
    matches = matches_from_proto(table_info, proto.match)
    needs_priority = table_needs_priority(table_info)
    if needs_priority and proto.priority <= 0:
        raise _invalid(f"table {table_name}: entries need a priority > 0 (table has ternary, "
                       f"range or optional keys), got {proto.priority}")
    if not needs_priority and proto.priority != 0:
        raise _invalid(f"table {table_name}: priority must be 0 for a table without ternary, "
                       f"range or optional keys, got {proto.priority}")
    if key_only:
        action, member_id, group_id = None, None, None
    else:
        action, member_id, group_id = table_action_from_proto(index, table_info, proto)
    entry = entry_factory(matches=matches, action=action, member_id=member_id, group_id=group_id,
                          priority=proto.priority if needs_priority else None,
                          idle_timeout_ns=proto.idle_timeout_ns,
                          controller_metadata=proto.controller_metadata, metadata=proto.metadata)
    return table_info, entry


def table_needs_priority(table_info):
    """True when a P4Info table has a ternary, range or optional match field."""
    return any(f.match_type in _PRIORITY_KINDS for f in table_info.match_fields)


_PRIORITY_KINDS = tuple(MATCH_TYPES[kind] for kind in PRIORITY_MATCH_KINDS)


def table_action_from_proto(index, table_info, proto):
    """(ActionCall | None, member_id | None, group_id | None) of a TableEntry's action.

    Raises:
        P4RuntimeError: INVALID_ARGUMENT when the action is missing or of the wrong
            kind for the table; UNIMPLEMENTED for one-shot action sets.
    """
    table_name = table_info.preamble.name
    which = proto.action.WhichOneof("type") if proto.HasField("action") else None
    indirect = bool(table_info.implementation_id)
    if which is None:
        raise _invalid(f"table {table_name}: entry has no action")
    if which == "action":
        if indirect:
            raise _invalid(f"table {table_name}: table uses an action profile; give a member or group id")
        return action_from_proto(index, proto.action.action, f"table {table_name}"), None, None
    if which == "action_profile_action_set":
        raise P4RuntimeError("UNIMPLEMENTED", f"table {table_name}: one-shot action profile "
                                              "action sets are not supported; use members and groups")
    if not indirect:
        raise _invalid(f"table {table_name}: table has no action profile; give a direct action")
    if which == "action_profile_member_id":
        return None, proto.action.action_profile_member_id, None
    profile = index.by_id("action_profiles", table_info.implementation_id)
    if not profile.with_selector:
        raise _invalid(f"table {table_name}: action profile {profile.preamble.name} has no "
                       f"selector; groups are not allowed")
    return None, None, proto.action.action_profile_group_id


def table_entry_to_proto(index, table_info, entry, out):
    """Fill a ``p4.v1.TableEntry`` with the key, priority and action of a state TableEntry."""
    out.table_id = table_info.preamble.id
    matches_to_proto(table_info, entry.matches, out.match)
    if entry.priority:
        out.priority = entry.priority
    if entry.action is not None:
        action_to_proto(index, entry.action, out.action.action)
    elif entry.member_id is not None:
        out.action.action_profile_member_id = entry.member_id
    elif entry.group_id is not None:
        out.action.action_profile_group_id = entry.group_id


def port_from_replica(replica):
    """The egress port of a P4Runtime Replica (``port`` bytes or the deprecated ``egress_port``)."""
    if replica.WhichOneof("port_kind") == "port":
        return decode(replica.port, 32, "replica port")
    return replica.egress_port


def p4data_bits(data, bitwidth, what):
    """The integer of a ``p4.v1.P4Data`` holding a bitstring."""
    if data.WhichOneof("data") != "bitstring":
        raise _invalid(f"{what}: expected a bitstring P4Data, got {data.WhichOneof('data')}")
    return decode(data.bitstring, bitwidth, what)


def p4data_struct(values, out):
    """Fill a ``p4.v1.P4Data`` with a struct of bitstrings (digest data)."""
    for value in values:
        member = out.struct.members.add()
        member.bitstring = encode(value)


__all__ = [
    "encode", "decode", "matches_from_proto", "matches_to_proto", "wildcard", "is_wildcard",
    "action_from_proto", "action_to_proto", "table_entry_from_proto", "table_entry_to_proto",
    "table_action_from_proto", "port_from_replica", "p4data_bits", "p4data_struct", "table_needs_priority",
]
