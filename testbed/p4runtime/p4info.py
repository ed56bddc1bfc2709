"""P4Info generation from a :class:`testbed.p4.program.ProgramInfo`, with the ids p4c gives.

How p4c assigns ids (``control-plane/p4RuntimeSymbolTable.cpp``; P4Runtime spec,
"ID allocation"):

* An id is 32 bits: the resource type (``p4.config.v1.P4Ids.Prefix``: ACTION 0x01,
  TABLE 0x02, CONTROLLER_HEADER 0x04, ACTION_PROFILE 0x11, COUNTER 0x12,
  DIRECT_COUNTER 0x13, METER 0x14, DIRECT_METER 0x15, REGISTER 0x16, DIGEST 0x17)
  in the top 8 bits, and the low 24 bits of the Jenkins one-at-a-time hash (32-bit
  arithmetic) of the object's fully qualified name.
* ``@id(N)`` annotations are honoured first; a value without a type prefix gets it.
* The remaining names of each type are processed in sorted (byte-wise) order; on a
  collision the *hash value* is incremented (linear probing) until the id is free.
* Match fields, action parameters and controller-header fields are numbered 1, 2, ...
  in declaration order (selector keys of a table consume a number but are not listed),
  again with ``@id`` overriding.
* The alias of an object is the shortest dot-separated suffix of its name that is
  unique among all names of the program.

Controller headers are hashed by their *type* name (p4c uses the header type's
control-plane name), while the P4Info name is the ``@controller_header`` string.
:class:`~testbed.p4.program.ControllerPacketMetadata` carries only the latter, so we
use an optional ``type_name`` attribute when the compiler sets one and fall back to
the annotation name otherwise (the ids then differ from p4c's for that one object).
"""
import re

from p4.config.v1 import p4info_pb2

PREFIX = {
    "action": p4info_pb2.P4Ids.ACTION,
    "table": p4info_pb2.P4Ids.TABLE,
    "controller_header": p4info_pb2.P4Ids.CONTROLLER_HEADER,
    "action_profile": p4info_pb2.P4Ids.ACTION_PROFILE,
    "counter": p4info_pb2.P4Ids.COUNTER,
    "direct_counter": p4info_pb2.P4Ids.DIRECT_COUNTER,
    "meter": p4info_pb2.P4Ids.METER,
    "direct_meter": p4info_pb2.P4Ids.DIRECT_METER,
    "register": p4info_pb2.P4Ids.REGISTER,
    "digest": p4info_pb2.P4Ids.DIGEST,
}

MATCH_TYPES = {
    "exact": p4info_pb2.MatchField.EXACT,
    "lpm": p4info_pb2.MatchField.LPM,
    "ternary": p4info_pb2.MatchField.TERNARY,
    "range": p4info_pb2.MatchField.RANGE,
    "optional": p4info_pb2.MatchField.OPTIONAL,
}
"""P4 match kind -> P4Info ``MatchField.MatchType``; any other kind goes in ``other_match_type``."""
MATCH_KIND_NAMES = {match_type: kind for kind, match_type in MATCH_TYPES.items()}
"""P4Info ``MatchField.MatchType`` -> P4 match kind (the inverse of :data:`MATCH_TYPES`)."""
_SCOPES = {
    "TABLE_AND_DEFAULT": p4info_pb2.ActionRef.TABLE_AND_DEFAULT,
    "TABLE_ONLY": p4info_pb2.ActionRef.TABLE_ONLY,
    "DEFAULT_ONLY": p4info_pb2.ActionRef.DEFAULT_ONLY,
}
_SCOPE_ANNOTATION = {"TABLE_ONLY": "@tableonly", "DEFAULT_ONLY": "@defaultonly"}
_COUNTER_UNITS = {"BYTES": p4info_pb2.CounterSpec.BYTES, "PACKETS": p4info_pb2.CounterSpec.PACKETS,
                  "BOTH": p4info_pb2.CounterSpec.BOTH}
_METER_UNITS = {"BYTES": p4info_pb2.MeterSpec.BYTES, "PACKETS": p4info_pb2.MeterSpec.PACKETS}
# Annotations p4c consumes itself and does not copy into P4Info.
_CONSUMED_ANNOTATIONS = {"name", "id", "hidden", "tableonly", "defaultonly", "max_group_size"}
_ID_RE = re.compile(r"^@?\s*id\s*\(\s*(0[xX][0-9a-fA-F]+|\d+)\s*\)\s*$")
_ANNOTATION_NAME_RE = re.compile(r"^@?\s*([A-Za-z_][A-Za-z0-9_]*)")


def jenkins_one_at_a_time(name):
    """The 32-bit Jenkins one-at-a-time hash of a name, as p4c computes it.

    Args:
        name: the fully qualified name (str) or bytes.

    Returns:
        int: the hash, 0 <= value < 2**32.
    """
    data = name.encode() if isinstance(name, str) else bytes(name)
    value = 0
    for byte in data:
        value = (value + byte) & 0xFFFFFFFF
        value = (value + (value << 10)) & 0xFFFFFFFF
        value ^= value >> 6
    value = (value + (value << 3)) & 0xFFFFFFFF
    value ^= value >> 11
    value = (value + (value << 15)) & 0xFFFFFFFF
    return value


def annotation_id(annotations):
    """The value of an ``@id(N)`` annotation among annotation strings, or None."""
    for text in annotations or ():
        match = _ID_RE.match(str(text))
        if match:
            return int(match.group(1), 0)
    return None


def _forwarded_annotations(annotations):
    """Annotations p4c copies into P4Info, each written with a leading ``@``."""
    result = []
    for text in annotations or ():
        text = str(text).strip()
        match = _ANNOTATION_NAME_RE.match(text)
        if not match or match.group(1) in _CONSUMED_ANNOTATIONS:
            continue
        result.append(text if text.startswith("@") else "@" + text)
    return result


class IdAllocator:
    """Assigns P4Info ids to named objects of every resource type, exactly as p4c does.

    Usage: :meth:`add` every (kind, name, annotations) first, then :meth:`compute`,
    then :meth:`id_of` and :meth:`alias_of`.
    """

    def __init__(self):
        self._symbols = {}  # kind -> {name: id or None}
        self._assigned = set()
        self._ids = {}
        self._all_names = []

    def add(self, kind, name, annotations=None):
        """Register one object.

        Args:
            kind: a key of :data:`PREFIX` ("table", "action", ...).
            name: the fully qualified name (the hash input).
            annotations: the object's annotation strings (for ``@id``).

        Raises:
            ValueError: an ``@id`` with the wrong type prefix, or used twice.
        """
        table = self._symbols.setdefault(kind, {})
        if name in table:
            return
        self._all_names.append(name)
        explicit = annotation_id(annotations)
        if explicit is None:
            table[name] = None
            return
        prefix = PREFIX[kind] << 24
        if explicit & 0xFF000000 and explicit & 0xFF000000 != prefix:
            raise ValueError(f"{name}: @id {explicit:#x} has the wrong 8-bit prefix for a {kind}")
        explicit |= prefix
        if explicit in self._assigned:
            raise ValueError(f"@id {explicit} is assigned to multiple declarations ({name})")
        self._assigned.add(explicit)
        table[name] = explicit

    def compute(self):
        """Assign ids to every object without an ``@id`` (sorted names, linear probing)."""
        for kind in sorted(self._symbols, key=lambda k: PREFIX[k]):
            table = self._symbols[kind]
            prefix = PREFIX[kind] << 24
            for name in sorted((n for n, i in table.items() if i is None), key=lambda n: n.encode()):
                value = jenkins_one_at_a_time(name)
                start = value
                while (prefix | (value & 0xFFFFFF)) in self._assigned:
                    value = (value + 1) & 0xFFFFFFFF
                    if value == start:
                        raise ValueError(f"no available id for {name}")
                table[name] = prefix | (value & 0xFFFFFF)
                self._assigned.add(table[name])
        self._suffix_counts = {}
        for name in set(self._all_names):
            parts = name.split(".")
            for i in range(len(parts)):
                suffix = tuple(parts[i:])
                self._suffix_counts[suffix] = self._suffix_counts.get(suffix, 0) + 1

    def id_of(self, kind, name):
        """The id assigned to ``name`` of ``kind`` (after :meth:`compute`)."""
        return self._symbols[kind][name]

    def alias_of(self, name):
        """The shortest dot-separated suffix of ``name`` unique among all registered names."""
        parts = name.split(".")
        for count in range(1, len(parts) + 1):
            if self._suffix_counts.get(tuple(parts[-count:]), 0) < 2:
                return ".".join(parts[-count:])
        return name


def _sequential_ids(items):
    """Ids for fields numbered from 1 in order, ``@id`` annotations first (p4c's FieldIdAllocator)."""
    explicit = [annotation_id(getattr(item, "annotations", None)) for item in items]
    used = {value for value in explicit if value is not None}
    ids = []
    index = 1
    for value in explicit:
        if value is not None:
            ids.append(value)
            index += 1
            continue
        while index in used:
            index += 1
        ids.append(index)
        used.add(index)
    return ids


def _controller_header_type_name(header):
    return getattr(header, "type_name", None) or header.name


def allocate_ids(info):
    """Register every object of a program and compute its ids.

    Args:
        info: the :class:`~testbed.p4.program.ProgramInfo`.

    Returns:
        IdAllocator: with ids and aliases computed.
    """
    alloc = IdAllocator()
    for action in info.actions.values():
        alloc.add("action", action.name, action.annotations)
    for table in info.tables.values():
        alloc.add("table", table.name, table.annotations)
    for profile in info.action_profiles.values():
        alloc.add("action_profile", profile.name, getattr(profile, "annotations", None))
    for kind, objects in (("counter", info.counters), ("direct_counter", info.direct_counters),
                          ("meter", info.meters), ("direct_meter", info.direct_meters),
                          ("register", info.registers), ("digest", info.digests)):
        for obj in objects.values():
            alloc.add(kind, obj.name, getattr(obj, "annotations", None))
    for header in info.controller_packet_metadata.values():
        alloc.add("controller_header", _controller_header_type_name(header),
                  getattr(header, "annotations", None))
    alloc.compute()
    return alloc


def _preamble(preamble, alloc, kind, name, annotations=None, p4info_name=None, alias=None):
    preamble.id = alloc.id_of(kind, name)
    preamble.name = p4info_name or name
    preamble.alias = alias or alloc.alias_of(name)
    preamble.annotations.extend(_forwarded_annotations(annotations))


def _bitstring(type_spec, bitwidth):
    type_spec.bitstring.bit.bitwidth = bitwidth


def build_p4info(info, arch="v1model"):
    """The P4Info message of a program, as p4c would produce it for the v1model architecture.

    Args:
        info: the :class:`~testbed.p4.program.ProgramInfo`.
        arch: the ``pkg_info.arch`` string.

    Returns:
        p4.config.v1.p4info_pb2.P4Info

    Raises:
        ValueError: conflicting ``@id`` annotations, or a reference to an unknown object
            (action of a table, table of a direct resource, ...), naming both.
    """
    alloc = allocate_ids(info)
    p4info = p4info_pb2.P4Info()
    p4info.pkg_info.arch = arch
    _add_tables(p4info, info, alloc)
    _add_actions(p4info, info, alloc)
    _add_action_profiles(p4info, info, alloc)
    _add_counters_and_meters(p4info, info, alloc)
    _add_controller_headers(p4info, info, alloc)
    _add_registers(p4info, info, alloc)
    _add_digests(p4info, info, alloc)
    if _p4c_writes_type_info(info):
        p4info.type_info.SetInParent()
    return p4info


def _action_id(info, alloc, table_name, action_name):
    """The id of an action a table refers to; ValueError naming both when the program lacks it."""
    if action_name not in info.actions:
        raise ValueError(f"table {table_name}: action {action_name} is not in the program's actions")
    return alloc.id_of("action", action_name)


def _add_tables(p4info, info, alloc):
    for table in info.tables.values():
        message = p4info.tables.add()
        _preamble(message.preamble, alloc, "table", table.name, table.annotations)
        _add_match_fields(message, table)
        for ref in table.action_refs:
            action_ref = message.action_refs.add()
            action_ref.id = _action_id(info, alloc, table.name, ref.name)
            if ref.scope in _SCOPE_ANNOTATION:
                action_ref.annotations.append(_SCOPE_ANNOTATION[ref.scope])
            action_ref.scope = _SCOPES[ref.scope]
        if table.default_action is not None and table.const_default_action:
            message.const_default_action_id = _action_id(info, alloc, table.name, table.default_action.action)
        if table.implementation:
            if table.implementation not in info.action_profiles:
                raise ValueError(f"table {table.name}: implementation {table.implementation} is unknown")
            message.implementation_id = alloc.id_of("action_profile", table.implementation)
        if table.direct_counter:
            message.direct_resource_ids.append(alloc.id_of("direct_counter", table.direct_counter))
        if table.direct_meter:
            message.direct_resource_ids.append(alloc.id_of("direct_meter", table.direct_meter))
        message.size = table.size
        message.idle_timeout_behavior = (p4info_pb2.Table.NOTIFY_CONTROL if table.idle_timeout
                                         else p4info_pb2.Table.NO_TIMEOUT)
        if table.entries_are_const:
            message.is_const_table = True


def _add_match_fields(message, table):
    """The match fields of a P4Info table; selector keys take an id but are not listed."""
    for field, field_id in zip(table.match_fields, _sequential_ids(table.match_fields)):
        if field.match_type == "selector":
            continue
        match_field = message.match_fields.add()
        match_field.id = field_id
        match_field.name = field.name
        match_field.annotations.extend(_forwarded_annotations(field.annotations))
        match_field.bitwidth = field.bitwidth
        if field.match_type in MATCH_TYPES:
            match_field.match_type = MATCH_TYPES[field.match_type]
        else:
            match_field.other_match_type = field.match_type


def _add_actions(p4info, info, alloc):
    for action in info.actions.values():
        message = p4info.actions.add()
        _preamble(message.preamble, alloc, "action", action.name, action.annotations)
        for param, param_id in zip(action.params, _sequential_ids(action.params)):
            p = message.params.add()
            p.id = param_id
            p.name = param.name
            p.annotations.extend(_forwarded_annotations(getattr(param, "annotations", None)))
            p.bitwidth = param.bitwidth


def _add_action_profiles(p4info, info, alloc):
    for profile in info.action_profiles.values():
        message = p4info.action_profiles.add()
        _preamble(message.preamble, alloc, "action_profile", profile.name,
                  getattr(profile, "annotations", None))
        for table_name in profile.table_names:
            message.table_ids.append(alloc.id_of("table", table_name))
        message.with_selector = profile.with_selector
        message.size = profile.size
        if profile.with_selector and profile.max_group_size:
            message.max_group_size = profile.max_group_size


def _add_counters_and_meters(p4info, info, alloc):
    """Indexed and direct counters and meters (a direct one names its table instead of a size)."""
    for kind, resources, messages, units in (
            ("counter", info.counters, p4info.counters, _COUNTER_UNITS),
            ("direct_counter", info.direct_counters, p4info.direct_counters, _COUNTER_UNITS),
            ("meter", info.meters, p4info.meters, _METER_UNITS),
            ("direct_meter", info.direct_meters, p4info.direct_meters, _METER_UNITS)):
        for resource in resources.values():
            message = messages.add()
            _preamble(message.preamble, alloc, kind, resource.name)
            message.spec.unit = units[resource.unit]
            if kind.startswith("direct_"):
                message.direct_table_id = alloc.id_of("table", resource.table_name)
            else:
                message.size = resource.size


def _add_controller_headers(p4info, info, alloc):
    for header in info.controller_packet_metadata.values():
        message = p4info.controller_packet_metadata.add()
        type_name = _controller_header_type_name(header)
        annotations = list(getattr(header, "annotations", None) or [])
        if not any("controller_header" in str(a) for a in annotations):
            annotations.insert(0, f'@controller_header("{header.name}")')
        _preamble(message.preamble, alloc, "controller_header", type_name,
                  annotations, p4info_name=header.name, alias=header.name)
        for field, field_id in zip(header.fields, _sequential_ids(header.fields)):
            metadata = message.metadata.add()
            metadata.id = field_id
            metadata.name = field.name
            metadata.bitwidth = field.bitwidth


def _add_registers(p4info, info, alloc):
    for register in info.registers.values():
        message = p4info.registers.add()
        _preamble(message.preamble, alloc, "register", register.name)
        _bitstring(message.type_spec, register.bitwidth)
        message.size = register.size


def _add_digests(p4info, info, alloc):
    """Digests, each with its struct type in ``type_info``."""
    for digest in info.digests.values():
        message = p4info.digests.add()
        _preamble(message.preamble, alloc, "digest", digest.name)
        message.type_spec.struct.name = digest.name
        struct = p4info.type_info.structs[digest.name]
        for field in digest.fields:
            member = struct.members.add()
            member.name = field.name
            _bitstring(member.type_spec, field.bitwidth)


def _p4c_writes_type_info(info):
    """True when p4c's P4Info has a ``type_info`` (empty or not) for this program.

    p4c's serializer asks for the message (``mutable_type_info``) for every table (its
    match fields), extern instance, action parameter, controller header field and extern
    function call (the v1model handler looks for ``digest`` calls), so the field is
    present, if only empty, as soon as the program has one of them.
    """
    return bool(info.tables or info.registers or info.digests or info.counters or info.meters
                or info.direct_counters or info.direct_meters or info.action_profiles
                or getattr(info, "extern_function_calls", None)
                or any(action.params for action in info.actions.values())
                or any(header.fields for header in info.controller_packet_metadata.values()))


def p4info_to_text(p4info):
    """The protobuf text form of a P4Info message (what ``p4c --p4runtime-files x.txt`` writes)."""
    from google.protobuf import text_format

    return text_format.MessageToString(p4info)


def p4info_from_text(text):
    """Parse a P4Info text file's content (unknown fields, e.g. from a newer p4c, are ignored)."""
    from google.protobuf import text_format

    message = p4info_pb2.P4Info()
    text_format.Merge(text, message, allow_unknown_field=True)
    return message


__all__ = [
    "MATCH_KIND_NAMES", "MATCH_TYPES", "PREFIX", "IdAllocator", "allocate_ids", "annotation_id", "build_p4info",
    "jenkins_one_at_a_time", "p4info_from_text", "p4info_to_text",
]
