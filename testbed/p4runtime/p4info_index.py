"""Name and id lookups over a P4Info message (ours or one p4c wrote).

Used by the server (ids in requests -> names in the state) and by the client
(names from the user -> ids in requests).  Lookups by name accept the full name
or the alias, as p4runtime-shell does.
"""


class P4InfoLookupError(KeyError):
    """A name or id not in the P4Info.

    Attributes:
        code: the gRPC status name the server reports ("NOT_FOUND").
    """

    code = "NOT_FOUND"

    def __str__(self):
        return str(self.args[0]) if self.args else "not found"


_KINDS = ("tables", "actions", "action_profiles", "counters", "direct_counters", "meters",
          "direct_meters", "controller_packet_metadata", "registers", "digests", "value_sets")


class P4InfoIndex:
    """Index of one P4Info message.

    Args:
        p4info: a ``p4.config.v1.p4info_pb2.P4Info``.

    Each kind in ``tables, actions, action_profiles, counters, direct_counters,
    meters, direct_meters, controller_packet_metadata, registers, digests`` has a
    by-id dict and a by-name dict (names and aliases) of the P4Info messages.
    """

    def __init__(self, p4info):
        self.p4info = p4info
        self._by_id = {}
        self._by_name = {}
        for kind in _KINDS:
            by_id, by_name = {}, {}
            for message in getattr(p4info, kind):
                by_id[message.preamble.id] = message
                by_name[message.preamble.name] = message
            for message in getattr(p4info, kind):
                alias = message.preamble.alias
                if alias and alias not in by_name:
                    by_name[alias] = message
            self._by_id[kind] = by_id
            self._by_name[kind] = by_name

    def by_id(self, kind, object_id):
        """The P4Info message of ``kind`` with this id.

        Raises:
            P4InfoLookupError: no such id (its message names the kind and id).
        """
        try:
            return self._by_id[kind][object_id]
        except KeyError:
            raise P4InfoLookupError(f"{_singular(kind)} id {object_id} not found in the P4Info") from None

    def by_name(self, kind, name):
        """The P4Info message of ``kind`` with this name or alias.

        Raises:
            P4InfoLookupError: no such name.
        """
        try:
            return self._by_name[kind][name]
        except KeyError:
            known = ", ".join(sorted(m.preamble.name for m in getattr(self.p4info, kind))) or "none"
            raise P4InfoLookupError(f"{_singular(kind)} {name!r} not found in the P4Info "
                                    f"(known: {known})") from None

    def all(self, kind):
        """Every P4Info message of ``kind`` in file order."""
        return list(getattr(self.p4info, kind))

    def id_of(self, kind, name):
        """The id of the object of ``kind`` with this name or alias."""
        return self.by_name(kind, name).preamble.id

    def name_of(self, kind, object_id):
        """The full name of the object of ``kind`` with this id."""
        return self.by_id(kind, object_id).preamble.name

    @staticmethod
    def match_field(table, key):
        """The MatchField of a P4Info table by id (int) or name (str).

        Raises:
            P4InfoLookupError: no such field in the table.
        """
        for field in table.match_fields:
            if (isinstance(key, int) and field.id == key) or field.name == key:
                return field
        raise P4InfoLookupError(f"table {table.preamble.name}: match field {key!r} not found "
                                f"(fields: {', '.join(f.name for f in table.match_fields) or 'none'})")

    @staticmethod
    def param(action, key):
        """The Param of a P4Info action by id (int) or name (str).

        Raises:
            P4InfoLookupError: no such parameter.
        """
        for param in action.params:
            if (isinstance(key, int) and param.id == key) or param.name == key:
                return param
        raise P4InfoLookupError(f"action {action.preamble.name}: parameter {key!r} not found "
                                f"(parameters: {', '.join(p.name for p in action.params) or 'none'})")

    def packet_metadata(self, which):
        """The ControllerPacketMetadata named ``which`` ("packet_in"/"packet_out"), or None."""
        return self._by_name["controller_packet_metadata"].get(which)


def p4info_problems(p4info):
    """What makes a P4Info message invalid, per the spec's "ID Allocation for P4Info Objects".

    Ids are "globally unique in the scope of the P4Info message" (one number space
    for all objects) and 0 means "invalid id"; a name (or alias) is unique among the
    objects of its kind; a table's action references name actions of the P4Info.

    Args:
        p4info: a ``p4.config.v1.p4info_pb2.P4Info``.

    Returns:
        list[str]: one message per problem (empty for a valid P4Info).
    """
    problems = []
    owners = {}
    for kind in _KINDS:
        names = set()
        for message in getattr(p4info, kind):
            preamble = message.preamble
            what = f"{_singular(kind)} {preamble.name or '<unnamed>'}"
            if preamble.id == 0 and kind != "controller_packet_metadata":
                problems.append(f"{what}: id 0 is reserved (invalid id)")
            elif preamble.id in owners:
                problems.append(f"{what}: id {preamble.id:#x} is also the id of {owners[preamble.id]}")
            elif preamble.id:
                owners[preamble.id] = what
            if preamble.name in names:
                problems.append(f"{what}: a second {_singular(kind)} has this name")
            names.add(preamble.name)
    actions = {message.preamble.id for message in p4info.actions}
    for table in p4info.tables:
        for ref in table.action_refs:
            if ref.id not in actions:
                problems.append(f"table {table.preamble.name}: action reference {ref.id:#x} is not an action "
                                f"of the P4Info")
    return problems


def _singular(kind):
    return {"controller_packet_metadata": "controller packet metadata",
            "action_profiles": "action profile", "direct_counters": "direct counter",
            "direct_meters": "direct meter", "value_sets": "value set"}.get(kind, kind[:-1])
