"""All control-plane-writable state of one switch, built from a ProgramInfo."""
from testbed.p4.state.action_profiles import ActionProfileState
from testbed.p4.state.errors import StateError
from testbed.p4.state.replication import CloneSessions, MulticastGroups
from testbed.p4.state.stateful import (
    CounterState, DirectCounterState, DirectMeterState, MeterState, RegisterState,
)
from testbed.p4.state.tables import TableState


class SwitchState:
    """Tables, action profiles, registers, counters, meters and the PRE of a switch.

    Everything is keyed by P4Info names.  Const entries and default actions are
    installed on construction.

    Args:
        program: the :class:`testbed.p4.program.ProgramInfo`.

    Attributes:
        program: the program.
        tables: name -> :class:`TableState`.
        action_profiles: name -> :class:`ActionProfileState`.
        registers: name -> :class:`RegisterState`.
        counters: name -> :class:`CounterState`.
        direct_counters: name -> :class:`DirectCounterState`.
        meters: name -> :class:`MeterState`.
        direct_meters: name -> :class:`DirectMeterState`.
        multicast_groups: the :class:`MulticastGroups`.
        clone_sessions: the :class:`CloneSessions`.

    Raises:
        StateError: INVALID_ARGUMENT when the program is inconsistent (a table
            naming an unknown action profile, a direct counter on an unknown
            table, a const entry that does not validate).
    """

    def __init__(self, program):
        self.program = program
        self.action_profiles = {
            name: ActionProfileState(info, program)
            for name, info in program.action_profiles.items()
        }
        self.tables = {}
        for name, info in program.tables.items():
            profile = None
            if info.implementation:
                profile = self.action_profiles.get(info.implementation)
                if profile is None:
                    raise StateError("INVALID_ARGUMENT",
                                     f"table {name}: implementation {info.implementation!r} "
                                     f"is not an action profile of the program")
            self.tables[name] = TableState(info, program, profile)
        self.registers = {name: RegisterState(info) for name, info in program.registers.items()}
        self.counters = {name: CounterState(info) for name, info in program.counters.items()}
        self.meters = {name: MeterState(info) for name, info in program.meters.items()}
        self.direct_counters = {}
        for name, info in program.direct_counters.items():
            table = self._table_of(name, info.table_name)
            self.direct_counters[name] = table.direct_counter = DirectCounterState(info, table)
        self.direct_meters = {}
        for name, info in program.direct_meters.items():
            table = self._table_of(name, info.table_name)
            self.direct_meters[name] = table.direct_meter = DirectMeterState(info, table)
        self.multicast_groups = MulticastGroups()
        self.clone_sessions = CloneSessions()

    def _table_of(self, extern_name, table_name):
        table = self.tables.get(table_name)
        if table is None:
            raise StateError("INVALID_ARGUMENT",
                             f"{extern_name}: attached to unknown table {table_name!r}")
        return table

    def reset(self):
        """Go back to the freshly loaded state (entries, members, values, PRE)."""
        for table in self.tables.values():
            table.reset()
        for profile in self.action_profiles.values():
            profile.reset()
        for group in (self.registers, self.counters, self.meters):
            for item in group.values():
                item.reset()
        self.multicast_groups.reset()
        self.clone_sessions.reset()
