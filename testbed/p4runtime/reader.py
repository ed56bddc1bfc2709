"""Read requests of the P4Runtime server: what a request selects, copied, then rendered.

A Read runs in two steps so that it never holds the lock writes need for longer
than it takes to copy values (P4Runtime spec, "Read RPC" / "Parallelism of Read
and Write Requests": a Read returns a state in which each Write has either
completed or not begun):

1. :meth:`Reader.snapshot`, with the target lock held, checks one request entity
   and copies what it selects (cell values, entry fields, references to the
   member/group/session objects, which writers replace rather than change);
2. the returned parts are rendered into ``p4.v1.Entity`` messages afterwards,
   without the lock, while the server streams them in chunks.

Request checks follow the specification: an empty ``Entity`` is INVALID_ARGUMENT
("Wildcard Reads": the entity oneof must be set); a table entry read with
``table_id`` 0 (all tables) admits no other filter, so match fields, a priority,
an action, metadata or ``is_default_action`` with it are INVALID_ARGUMENT
(TableEntry "Wildcard Reads"); a negative index is INVALID_ARGUMENT and one past
the end OUT_OF_RANGE (CounterEntry, MeterEntry, RegisterEntry); a direct counter
or meter read naming an entry that does not exist is NOT_FOUND
(DirectCounterEntry, DirectMeterEntry).  Reading by ``action`` filters direct
actions only; filtering indirect entries by member or group is UNIMPLEMENTED, as
the specification allows.
"""
import collections
import time

from p4.v1 import p4runtime_pb2

from testbed.p4.program import ActionCall
from testbed.p4.state import TableEntry
from testbed.p4runtime import convert
from testbed.p4runtime.errors import P4RuntimeError, require

# Entity field of an indexed (non-direct) resource -> (P4Info/SwitchState collection, id field, label)
INDEXED = {
    "counter_entry": ("counters", "counter_id", "counter"),
    "meter_entry": ("meters", "meter_id", "meter"),
    "register_entry": ("registers", "register_id", "register"),
}

# The fields of a stored table entry a read reports, copied under the lock.  The
# attribute names are the ones convert.table_entry_to_proto reads.
EntryCopy = collections.namedtuple("EntryCopy", (
    "matches", "priority", "action", "member_id", "group_id", "controller_metadata", "metadata",
    "idle_timeout_ns", "elapsed_ns", "is_const", "counter", "meter"))

_NOT_REQUESTED = object()  # EntryCopy.meter when the request did not ask for the meter config


def index_list(proto, size, what):
    """Cells addressed by the optional ``index`` of a counter/meter/register entry.

    Args:
        proto: the CounterEntry, MeterEntry or RegisterEntry.
        size: the size of the array.
        what: the array named in messages ("counter c").

    Returns:
        range | list[int]: every cell when ``index`` is unset, else that one.

    Raises:
        P4RuntimeError: INVALID_ARGUMENT for a negative index, OUT_OF_RANGE past the end.
    """
    if not proto.HasField("index"):
        return range(size)
    value = proto.index.index
    require(value >= 0, "INVALID_ARGUMENT", f"{what}: index {value} is negative")
    require(value < size, "OUT_OF_RANGE", f"{what}: index {value} outside 0..{size - 1}")
    return [value]


def new_entity(field):
    """A new Entity and its ``field`` message (``"counter_entry"``, ...), which selects that oneof once set."""
    entity = p4runtime_pb2.Entity()
    return entity, getattr(entity, field)


def meter_config_to_proto(config, out):
    """Copy a MeterConfig into a p4.v1.MeterConfig message (leave it unset for None: unconfigured)."""
    if config is None:
        return
    out.cir = config.cir
    out.cburst = config.cburst
    out.pir = config.pir
    out.pburst = config.pburst


def check_table_read_filters(request):
    """Refuse filters the spec does not allow with ``table_id`` 0 (all tables).

    Raises:
        P4RuntimeError: INVALID_ARGUMENT naming the filter.
    """
    if request.table_id:
        return
    given = [name for name, present in (
        ("match", bool(request.match)), ("priority", request.priority != 0),
        ("action", request.HasField("action")), ("controller_metadata", request.controller_metadata != 0),
        ("metadata", bool(request.metadata)), ("is_default_action", request.is_default_action)) if present]
    require(not given, "INVALID_ARGUMENT",
            f"table entry read with table_id 0 (all tables) allows no other filter, got "
            f"{', '.join(given)}; name the table")


class Reader:
    """Snapshots of the entities Read requests select, for one pipeline.

    Args:
        target: the EmbeddedTarget (its ``index`` and ``state`` are captured now).
        digests: the server's :class:`~testbed.p4runtime.digests.DigestEngine`.
    """

    def __init__(self, target, digests):
        self.index = target.index
        self.state = target.state
        self.digests = digests

    def snapshot(self, entity):
        """Check one request entity and copy what it selects (call with the target lock held).

        Returns:
            list of callables: each returns an iterator of ``p4.v1.Entity`` messages
            rendered from the copied values (call them without the lock).

        Raises:
            P4RuntimeError: INVALID_ARGUMENT, NOT_FOUND, OUT_OF_RANGE, UNIMPLEMENTED
                for a request that cannot be read (see the module docstring).
        """
        which = entity.WhichOneof("entity")
        require(which is not None, "INVALID_ARGUMENT",
                "empty Entity in a ReadRequest: set one of its fields (table_entry, counter_entry, ...)")
        handler = getattr(self, "_" + which, None)
        if handler is None:
            raise P4RuntimeError("UNIMPLEMENTED", f"reading {which} entities is not supported")
        return handler(getattr(entity, which))

    def _infos(self, collection, object_id):
        """P4Info entries a read selects: every one of ``collection`` for id 0 (wildcard), else that id's."""
        if object_id == 0:
            return self.index.all(collection)
        return [self.index.by_id(collection, object_id)]

    # ---- table entries --------------------------------------------------------------------
    def _entry_copy(self, table, stored, request):
        """An EntryCopy of a stored entry with the direct resources ``request`` asks for."""
        elapsed = None
        if request.HasField("time_since_last_hit") and table.info.idle_timeout:
            last = stored.last_hit_ns
            elapsed = 0 if last is None else max(0, time.monotonic_ns() - last)
        counter = None
        if request.HasField("counter_data") and table.direct_counter is not None:
            counter = (stored.counter_packets, stored.counter_bytes)
        meter = _NOT_REQUESTED
        if request.HasField("meter_config") and table.direct_meter is not None:
            meter = stored.meter.config if stored.meter is not None else None
        return EntryCopy(stored.matches, stored.priority, stored.action, stored.member_id, stored.group_id,
                         stored.controller_metadata, stored.metadata, stored.idle_timeout_ns, elapsed,
                         stored.is_const or bool(table.info.entries_are_const), counter, meter)

    def _selected_entries(self, table_info, request, must_exist=False):
        """The stored entries of a table that a request's key and filters select.

        Args:
            table_info: the P4Info table.
            request: the TableEntry of the read.
            must_exist: a request with match fields that selects nothing is NOT_FOUND.
        """
        table = self.state.tables[table_info.preamble.name]
        if request.match:
            _, key = convert.table_entry_from_proto(self.index, request, TableEntry, key_only=True)
            stored = table.find(key.matches, key.priority)
            require(stored is not None or not must_exist, "NOT_FOUND",
                    f"table {table_info.preamble.name}: no entry with this match and priority")
            entries = [stored] if stored is not None else []
        else:
            entries = table.entries()
        keep = self._entry_filter(table_info, request)
        return table, [stored for stored in entries if keep(stored)]

    def _entry_filter(self, table_info, request):
        """A predicate for the priority, action and metadata filters of a table entry read."""
        action_name = None
        if request.HasField("action"):
            which = request.action.WhichOneof("type")
            if which != "action":
                raise P4RuntimeError("UNIMPLEMENTED", f"table {table_info.preamble.name}: reads filter by "
                                                      f"direct action only, not by {which}")
            try:
                action_name = self.index.by_id("actions", request.action.action.action_id).preamble.name
            except KeyError:
                raise P4RuntimeError("INVALID_ARGUMENT", f"table {table_info.preamble.name}: read filter "
                                                         f"names unknown action id "
                                                         f"{request.action.action.action_id}") from None
        priority, cookie, metadata = request.priority, request.controller_metadata, request.metadata

        def keep(stored):
            return ((not priority or stored.priority == priority)
                    and (action_name is None or (stored.action is not None and stored.action.action == action_name))
                    and (not cookie or stored.controller_metadata == cookie)
                    and (not metadata or stored.metadata == metadata))
        return keep

    def _table_entry(self, request):
        check_table_read_filters(request)
        index = self.index
        parts = []
        for table_info in self._infos("tables", request.table_id):
            table = self.state.tables[table_info.preamble.name]
            if request.is_default_action:
                parts.append(_render_default_entry(index, table_info, table.default_action,
                                                   bool(table_info.const_default_action_id)))
                continue
            _, entries = self._selected_entries(table_info, request)
            copies = [self._entry_copy(table, stored, request) for stored in entries]
            parts.append(_render_table_entries(index, table_info, copies))
        return parts

    def _direct_entries(self, attribute, table_entry):
        """(table_info, [EntryCopy]) per table of a direct counter/meter read (tables without one skipped).

        Raises:
            P4RuntimeError: INVALID_ARGUMENT when the named table has no such resource,
                NOT_FOUND when the named entry does not exist.
        """
        check_table_read_filters(table_entry)
        request = p4runtime_pb2.TableEntry()
        request.CopyFrom(table_entry)
        request.ClearField("counter_data")
        request.ClearField("meter_config")
        getattr(request, "counter_data" if attribute == "direct_counter" else "meter_config").SetInParent()
        selected = []
        for table_info in self._infos("tables", table_entry.table_id):
            table = self.state.tables[table_info.preamble.name]
            if getattr(table, attribute) is None:
                require(not table_entry.table_id, "INVALID_ARGUMENT",
                        f"table {table_info.preamble.name} has no {attribute.replace('_', ' ')}")
                continue
            _, entries = self._selected_entries(table_info, request, must_exist=True)
            selected.append((table_info, [self._entry_copy(table, stored, request) for stored in entries]))
        return selected

    def _direct_counter_entry(self, request):
        return [_render_direct(self.index, "direct_counter_entry", table_info, copies)
                for table_info, copies in self._direct_entries("direct_counter", request.table_entry)]

    def _direct_meter_entry(self, request):
        return [_render_direct(self.index, "direct_meter_entry", table_info, copies)
                for table_info, copies in self._direct_entries("direct_meter", request.table_entry)]

    # ---- action profiles ------------------------------------------------------------------
    def _profile_items(self, request, items, id_field):
        """[(profile id, [member or group objects])] a read selects (``id_field`` 0: all)."""
        wanted = getattr(request, id_field)
        selected = []
        for info in self._infos("action_profiles", request.action_profile_id):
            profile = self.state.action_profiles[info.preamble.name]
            objects = [item for item in getattr(profile, items)()
                       if not wanted or getattr(item, id_field) == wanted]
            selected.append((info.preamble.id, objects))
        return selected

    def _action_profile_member(self, request):
        index = self.index
        return [_render_members(index, profile_id, members)
                for profile_id, members in self._profile_items(request, "members", "member_id")]

    def _action_profile_group(self, request):
        return [_render_groups(profile_id, groups)
                for profile_id, groups in self._profile_items(request, "groups", "group_id")]

    # ---- counters, meters, registers ------------------------------------------------------
    def _indexed(self, entity_field, request):
        """[(P4Info entry, state object, cells)] of a counter/meter/register read."""
        collection, id_field, label = INDEXED[entity_field]
        selected = []
        for info in self._infos(collection, getattr(request, id_field)):
            name = info.preamble.name
            cells = index_list(request, info.size, f"{label} {name}")
            selected.append((info, getattr(self.state, collection)[name], cells))
        return selected

    def _counter_entry(self, request):
        parts = []
        for info, counter, cells in self._indexed("counter_entry", request):
            if isinstance(cells, range):
                packets, nbytes = counter.packets[:], counter.bytes[:]
            else:
                packets, nbytes = [counter.packets[cells[0]]], [counter.bytes[cells[0]]]
            parts.append(_render_cells("counter_entry", "counter_id", info.preamble.id, cells,
                                       zip(packets, nbytes), _fill_counter))
        return parts

    def _meter_entry(self, request):
        parts = []
        for info, meter, cells in self._indexed("meter_entry", request):
            configs = [meter.get_config(i) for i in cells]
            parts.append(_render_cells("meter_entry", "meter_id", info.preamble.id, cells, configs, _fill_meter))
        return parts

    def _register_entry(self, request):
        parts = []
        for info, register, cells in self._indexed("register_entry", request):
            values = register.values[:] if isinstance(cells, range) else [register.values[cells[0]]]
            parts.append(_render_cells("register_entry", "register_id", info.preamble.id, cells, values,
                                       _fill_register))
        return parts

    # ---- packet replication engine, digests -----------------------------------------------
    def _packet_replication_engine_entry(self, request):
        which = request.WhichOneof("type")
        if which == "multicast_group_entry":
            wanted = request.multicast_group_entry.multicast_group_id
            groups = [(group_id, replicas) for group_id, replicas in self.state.multicast_groups.entries()
                      if not wanted or group_id == wanted]
            return [_render_multicast_groups(groups)]
        if which == "clone_session_entry":
            wanted = request.clone_session_entry.session_id
            sessions = [s for s in self.state.clone_sessions.entries() if not wanted or s.session_id == wanted]
            return [_render_clone_sessions(sessions)]
        raise P4RuntimeError("INVALID_ARGUMENT", "packet replication engine entry without a type")

    def _digest_entry(self, request):
        configs = []
        for info in self.index.all("digests"):
            digest_id = info.preamble.id
            if request.digest_id and digest_id != request.digest_id:
                continue
            config = self.digests.configs.get(digest_id)
            if config is not None:
                configs.append((digest_id, config.max_timeout_ns, config.max_list_size, config.ack_timeout_ns))
        if request.digest_id and not configs:
            self.index.by_id("digests", request.digest_id)  # NOT_FOUND for an unknown id
        return [_render_digests(configs)]


# ---- rendering (no lock held) ----------------------------------------------------------------
# Each function returns a callable that yields the Entity messages of copied values.

def _render_default_entry(index, table_info, call, is_const):
    def render():
        entity, out = new_entity("table_entry")
        out.table_id = table_info.preamble.id
        out.is_default_action = True
        convert.action_to_proto(index, call, out.action.action)
        if is_const:
            out.is_const = True
        yield entity
    return render


def _fill_entry(index, table_info, copy, out):
    """Fill a TableEntry message from an EntryCopy (key, action, metadata, direct resources)."""
    convert.table_entry_to_proto(index, table_info, copy, out)
    if copy.controller_metadata:
        out.controller_metadata = copy.controller_metadata
    if copy.metadata:
        out.metadata = copy.metadata
    if copy.idle_timeout_ns:
        out.idle_timeout_ns = copy.idle_timeout_ns
    if copy.elapsed_ns is not None:
        out.time_since_last_hit.elapsed_ns = copy.elapsed_ns
    if copy.is_const:
        out.is_const = True
    if copy.counter is not None:
        out.counter_data.packet_count, out.counter_data.byte_count = copy.counter
    if copy.meter is not _NOT_REQUESTED:
        meter_config_to_proto(copy.meter, out.meter_config)


def _render_table_entries(index, table_info, copies):
    def render():
        for copy in copies:
            entity, out = new_entity("table_entry")
            _fill_entry(index, table_info, copy, out)
            yield entity
    return render


def _render_direct(index, entity_field, table_info, copies):
    def render():
        for copy in copies:
            entity, out = new_entity(entity_field)
            convert.table_entry_to_proto(index, table_info, copy, out.table_entry)
            out.table_entry.ClearField("action")
            if copy.counter is not None:
                out.data.packet_count, out.data.byte_count = copy.counter
            if copy.meter is not _NOT_REQUESTED:
                meter_config_to_proto(copy.meter, out.config)
            yield entity
    return render


def _render_members(index, profile_id, members):
    def render():
        for member in members:
            entity, out = new_entity("action_profile_member")
            out.action_profile_id = profile_id
            out.member_id = member.member_id
            convert.action_to_proto(index, ActionCall(member.action, tuple(member.args)), out.action)
            yield entity
    return render


def _render_groups(profile_id, groups):
    def render():
        for group in groups:
            entity, out = new_entity("action_profile_group")
            out.action_profile_id = profile_id
            out.group_id = group.group_id
            for member_id, weight in group.members:
                out.members.add(member_id=member_id, weight=weight)
            if group.max_size:
                out.max_size = group.max_size
            yield entity
    return render


def _render_cells(entity_field, id_field, object_id, cells, values, fill):
    """Render one entity per cell of a counter, meter or register array.

    Args:
        entity_field: ``"counter_entry"``, ``"meter_entry"`` or ``"register_entry"``.
        id_field: its id field (``"counter_id"``, ...).
        object_id: the array's P4Info id.
        cells: the cell indexes.
        values: the copied value of each cell (same order).
        fill: callable(entity message, value) that sets the value.
    """
    def render():
        for i, value in zip(cells, values):
            entity, out = new_entity(entity_field)
            setattr(out, id_field, object_id)
            out.index.index = i
            fill(out, value)
            yield entity
    return render


def _fill_counter(out, value):
    out.data.packet_count, out.data.byte_count = value


def _fill_meter(out, config):
    meter_config_to_proto(config, out.config)


def _fill_register(out, value):
    out.data.bitstring = convert.encode(value)


def _replicas_to_proto(replicas, out):
    """Add (port, instance) pairs as the ``replicas`` of a multicast group or clone session message."""
    for port, rid in replicas:
        out.replicas.add(egress_port=port, instance=rid)


def _render_multicast_groups(groups):
    def render():
        for group_id, replicas in groups:
            entity = p4runtime_pb2.Entity()
            out = entity.packet_replication_engine_entry.multicast_group_entry
            out.multicast_group_id = group_id
            _replicas_to_proto(replicas, out)
            yield entity
    return render


def _render_clone_sessions(sessions):
    def render():
        for session in sessions:
            entity = p4runtime_pb2.Entity()
            out = entity.packet_replication_engine_entry.clone_session_entry
            out.session_id = session.session_id
            _replicas_to_proto(session.replicas, out)
            out.class_of_service = session.class_of_service
            out.packet_length_bytes = session.packet_length_bytes
            yield entity
    return render


def _render_digests(configs):
    def render():
        for digest_id, max_timeout_ns, max_list_size, ack_timeout_ns in configs:
            entity, out = new_entity("digest_entry")
            out.digest_id = digest_id
            out.config.max_timeout_ns = max_timeout_ns
            out.config.max_list_size = max_list_size
            out.config.ack_timeout_ns = ack_timeout_ns
            yield entity
    return render
