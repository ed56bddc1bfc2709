"""The write side of :class:`testbed.p4runtime.client.P4RuntimeClient`, applied to an in-process switch state.

For tests and benchmarks that run embedded devices in one process (no switch
process, no gRPC) but program them with the same code a controller uses over
P4Runtime: :class:`StateClient` takes the client's arguments (names, match
specs, ``{param: value}`` with IP and MAC strings) and writes the
:class:`~testbed.p4.state.SwitchState` directly.  Values are parsed with the
client's own rules (:mod:`testbed.p4runtime.values`).  Only what controllers
of this project write is offered: table entries, default actions, action
profile members and groups, and counter reads.
"""
import contextlib

from testbed.errors import ParameterError
from testbed.p4.program import ActionCall, KeyMatch
from testbed.p4.state import TableEntry
from testbed.p4runtime.values import match_from_spec, parse_value


class StateClient:
    """Writes a :class:`~testbed.p4.state.SwitchState` with P4RuntimeClient's arguments.

    Args:
        state: the switch state (its ``program`` is the ProgramInfo).

    Raises (every method):
        ParameterError: an unknown table, action, field or parameter, or a bad value.
        StateError: what the state refuses (a duplicate entry, an unknown member...).
    """

    def __init__(self, state):
        self.state = state
        self.info = state.program

    @contextlib.contextmanager
    def batch(self):
        """Writes are applied at once; kept for the client's interface."""
        yield self

    def _action(self, action, params):
        info = self.info.actions.get(action)
        if info is None:
            raise ParameterError("action", action, "an action of the program")
        params = dict(params or {})
        args = []
        for param in info.params:
            if param.name not in params:
                raise ParameterError(f"{action}.{param.name}", None, "a value (every parameter is required)")
            args.append(parse_value(params.pop(param.name), param.bitwidth, f"{action}.{param.name}"))
        if params:
            raise ParameterError(f"{action}.{next(iter(params))}", None, "a parameter of the action")
        return ActionCall(action, tuple(args))

    def _table(self, table):
        found = self.state.tables.get(table)
        if found is None:
            raise ParameterError("table", table, "a table of the program")
        return found

    def _entry(self, table, match, action=None, params=None, member_id=None, group_id=None):
        state = self._table(table)
        match = dict(match or {})
        matches = []
        for key in state.info.match_keys:
            spec = match_from_spec(key.match_type, match.pop(key.name, None), key.bitwidth, key.name)
            if spec is None:
                matches.append(KeyMatch(key.match_type, value=0, prefix_len=0) if key.match_type == "lpm"
                               else KeyMatch(key.match_type, value=0, mask=0))
            elif key.match_type == "lpm":
                matches.append(KeyMatch("lpm", value=spec["value"], prefix_len=spec["prefix_len"]))
            else:
                matches.append(KeyMatch(key.match_type, value=spec["value"]))
        if match:
            raise ParameterError("match", next(iter(match)), f"a match field of {table}")
        call = self._action(action, params) if action is not None else None
        return state, TableEntry(matches=matches, action=call, member_id=member_id, group_id=group_id)

    def insert_table_entry(self, table, match=None, action=None, params=None, member_id=None, group_id=None):
        """Insert an entry (exact and lpm keys; see P4RuntimeClient.insert_table_entry)."""
        state, entry = self._entry(table, match, action, params, member_id, group_id)
        state.insert(entry)

    def modify_table_entry(self, table, match=None, action=None, params=None, member_id=None, group_id=None):
        """Change an existing entry's action."""
        state, entry = self._entry(table, match, action, params, member_id, group_id)
        state.modify(entry)

    def delete_table_entry(self, table, match=None):
        """Delete an entry."""
        state, entry = self._entry(table, match)
        state.delete(entry)

    def set_default_action(self, table, action, params=None):
        """Set a table's default action."""
        self._table(table).set_default(self._action(action, params))

    def _profile(self, profile):
        found = self.state.action_profiles.get(profile)
        if found is None:
            raise ParameterError("action profile", profile, "an action profile of the program")
        return found

    def insert_member(self, profile, member_id, action, params=None):
        """Insert an action profile member."""
        self._profile(profile).insert_member(member_id, self._action(action, params))

    def insert_group(self, profile, group_id, members, max_size=0):
        """Insert a group of ``[(member id, weight)]``."""
        self._profile(profile).insert_group(group_id, list(members), max_size)

    def modify_group(self, profile, group_id, members):
        """Replace a group's members."""
        self._profile(profile).modify_group(group_id, list(members))

    def delete_group(self, profile, group_id):
        """Delete a group."""
        self._profile(profile).delete_group(group_id)

    def read_counter(self, name, index=None):
        """``{index: (packets, bytes)}`` of a counter, or one cell's ``(packets, bytes)``."""
        counter = self.state.counters.get(name)
        if counter is None:
            raise ParameterError("counter", name, "a counter of the program")
        if index is not None:
            return counter.read(index)
        return {i: (counter.packets[i], counter.bytes[i]) for i in range(counter.info.size)}
