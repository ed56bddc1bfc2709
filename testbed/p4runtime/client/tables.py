"""The client's table part: table entries and default actions by name, and entries as read."""
import dataclasses
import queue
from typing import Dict, Optional, Tuple

from p4.v1 import p4runtime_pb2

from testbed.errors import ParameterError
from testbed.p4runtime.convert import decode, encode
from testbed.p4runtime.p4info import MATCH_KIND_NAMES
from testbed.p4runtime.values import match_from_spec, parse_value


@dataclasses.dataclass
class TableEntryView:
    """A table entry as read, with names.

    Attributes:
        table: table name.
        match: {field name: int (exact/optional), (value, prefix_len), (value, mask) or
            (low, high)}; wildcard fields are absent.
        action: action name (direct action or default entry), or None.
        params: {param name: int}.
        priority: int or None.
        member_id / group_id: action profile reference, or None.
        is_default: True for the default entry.
        counter: (packets, bytes) when read with ``counter_data=True``.
        is_const: True for const entries.
    """

    table: str
    match: Dict[str, object]
    action: Optional[str] = None
    params: Dict[str, int] = dataclasses.field(default_factory=dict)
    priority: Optional[int] = None
    member_id: Optional[int] = None
    group_id: Optional[int] = None
    is_default: bool = False
    counter: Optional[Tuple[int, int]] = None
    is_const: bool = False
    metadata: bytes = b""


class TablesMixin:
    """Table entries (insert, modify, delete, read), default actions and idle-timeout notifications."""

    def _action_msg(self, action, params, out):
        info = self._lookup("actions", action)
        out.action_id = info.preamble.id
        params = dict(params or {})
        for param in info.params:
            if param.name not in params:
                raise ParameterError(f"{action}.{param.name}", None, f"a value of {param.bitwidth} bits",
                                     reason="missing action parameter")
            value = parse_value(params.pop(param.name), param.bitwidth, f"{action}.{param.name}")
            out.params.add(param_id=param.id, value=encode(value))
        if params:
            raise ParameterError(f"{action} params", sorted(params),
                                 ", ".join(p.name for p in info.params) or "no parameters")

    def table_entry_message(self, table, match=None, action=None, params=None, priority=None,
                            member_id=None, group_id=None, idle_timeout_ns=0, metadata=b""):
        """Build a ``p4.v1.TableEntry`` from names (see :meth:`insert_table_entry`)."""
        info = self._lookup("tables", table)
        entry = p4runtime_pb2.TableEntry(table_id=info.preamble.id)
        match = dict(match or {})
        for field in info.match_fields:
            kind = MATCH_KIND_NAMES.get(field.match_type, "exact")
            spec = match.pop(field.name, None)
            parsed = match_from_spec(kind, spec, field.bitwidth, f"{table}: {field.name}")
            if parsed is None:
                continue
            fm = entry.match.add(field_id=field.id)
            if kind == "exact":
                fm.exact.value = encode(parsed["value"])
            elif kind == "optional":
                fm.optional.value = encode(parsed["value"])
            elif kind == "lpm":
                fm.lpm.value = encode(parsed["value"])
                fm.lpm.prefix_len = parsed["prefix_len"]
            elif kind == "ternary":
                fm.ternary.value = encode(parsed["value"])
                fm.ternary.mask = encode(parsed["mask"])
            else:
                fm.range.low = encode(parsed["low"])
                fm.range.high = encode(parsed["high"])
        if match:
            raise ParameterError(f"{table} match", sorted(match),
                                 ", ".join(f.name for f in info.match_fields) or "no match fields")
        if priority:
            entry.priority = priority
        if action is not None:
            self._action_msg(action, params, entry.action.action)
        elif member_id is not None:
            entry.action.action_profile_member_id = member_id
        elif group_id is not None:
            entry.action.action_profile_group_id = group_id
        if idle_timeout_ns:
            entry.idle_timeout_ns = idle_timeout_ns
        if metadata:
            entry.metadata = metadata
        return entry

    def insert_table_entry(self, table, match=None, action=None, params=None, priority=None,
                           member_id=None, group_id=None, idle_timeout_ns=0, metadata=b""):
        """Insert an entry.

        Args:
            table: table name (or alias).
            match: {field name: match spec}; omitted non-exact fields are wildcards.
            action: action name, with ``params`` {param name: value}; or
            member_id / group_id: for tables with an action profile / selector.
            priority: for tables with ternary, range or optional fields (larger wins).
        """
        entry = self.table_entry_message(table, match, action, params, priority, member_id, group_id,
                                         idle_timeout_ns, metadata)
        self._write_one("INSERT", lambda e: e.table_entry.CopyFrom(entry))

    def modify_table_entry(self, table, match=None, action=None, params=None, priority=None,
                           member_id=None, group_id=None, idle_timeout_ns=0, metadata=b""):
        """Change the action of an existing entry (same arguments as insert)."""
        entry = self.table_entry_message(table, match, action, params, priority, member_id, group_id,
                                         idle_timeout_ns, metadata)
        self._write_one("MODIFY", lambda e: e.table_entry.CopyFrom(entry))

    def delete_table_entry(self, table, match=None, priority=None):
        """Delete the entry with this match (and priority)."""
        entry = self.table_entry_message(table, match, priority=priority)
        self._write_one("DELETE", lambda e: e.table_entry.CopyFrom(entry))

    def set_default_action(self, table, action, params=None):
        """Set the action a table runs on a miss."""
        info = self._lookup("tables", table)
        entry = p4runtime_pb2.TableEntry(table_id=info.preamble.id, is_default_action=True)
        self._action_msg(action, params, entry.action.action)
        self._write_one("MODIFY", lambda e: e.table_entry.CopyFrom(entry))

    def reset_default_action(self, table):
        """Restore the program's default action of a table."""
        info = self._lookup("tables", table)
        entry = p4runtime_pb2.TableEntry(table_id=info.preamble.id, is_default_action=True)
        self._write_one("MODIFY", lambda e: e.table_entry.CopyFrom(entry))

    def _view(self, proto, counter=False):
        index = self._idx()
        info = index.by_id("tables", proto.table_id)
        fields = {f.id: f for f in info.match_fields}
        match = {}
        for fm in proto.match:
            field = fields[fm.field_id]
            which = fm.WhichOneof("field_match_type")
            width = field.bitwidth
            if which == "exact":
                match[field.name] = decode(fm.exact.value, width, field.name)
            elif which == "optional":
                match[field.name] = decode(fm.optional.value, width, field.name)
            elif which == "lpm":
                match[field.name] = (decode(fm.lpm.value, width, field.name), fm.lpm.prefix_len)
            elif which == "ternary":
                match[field.name] = (decode(fm.ternary.value, width, field.name),
                                     decode(fm.ternary.mask, width, field.name))
            elif which == "range":
                match[field.name] = (decode(fm.range.low, width, field.name),
                                     decode(fm.range.high, width, field.name))
        view = TableEntryView(info.preamble.name, match, priority=proto.priority or None,
                              is_default=proto.is_default_action, is_const=proto.is_const,
                              metadata=proto.metadata)
        which = proto.action.WhichOneof("type") if proto.HasField("action") else None
        if which == "action":
            view.action, view.params = self._action_view(proto.action.action)
        elif which == "action_profile_member_id":
            view.member_id = proto.action.action_profile_member_id
        elif which == "action_profile_group_id":
            view.group_id = proto.action.action_profile_group_id
        if counter and proto.HasField("counter_data"):
            view.counter = (proto.counter_data.packet_count, proto.counter_data.byte_count)
        return view

    def _action_view(self, action_msg):
        info = self._idx().by_id("actions", action_msg.action_id)
        params = {p.id: p for p in info.params}
        return info.preamble.name, {params[p.param_id].name: decode(p.value, params[p.param_id].bitwidth,
                                                                    params[p.param_id].name)
                                    for p in action_msg.params}

    def read_table_entries(self, table=None, match=None, priority=None, counter_data=False,
                           default=False):
        """Read entries as :class:`TableEntryView` objects.

        Args:
            table: table name, or None for all tables.
            match: read only the entry with this match (and ``priority``).
            counter_data: also read direct counters (``view.counter``).
            default: read the default entry (entries) instead.
        """
        entity = p4runtime_pb2.Entity()
        if table is not None:
            entity.table_entry.CopyFrom(self.table_entry_message(table, match, priority=priority)
                                        if match else
                                        p4runtime_pb2.TableEntry(table_id=self._lookup("tables", table)
                                                                 .preamble.id))
        else:
            entity.table_entry.SetInParent()
        if counter_data:
            entity.table_entry.counter_data.SetInParent()
        if default:
            entity.table_entry.is_default_action = True
        return [self._view(e.table_entry, counter_data) for e in self.read([entity])]

    def get_idle_timeouts(self, timeout=1.0):
        """The entries of the next IdleTimeoutNotification (list of TableEntryView), or None."""
        try:
            message = self._idle_q.get(timeout=timeout)
        except queue.Empty:
            return None
        if message is None:
            self._idle_q.put(None)
            return None
        return [self._view(entry) for entry in message.table_entry]
