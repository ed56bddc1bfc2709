"""Runtime state of the embedded P4 target (see helper-notes STATE_API.md).

The data plane reads it on every packet (``TableState.lookup``,
``RegisterState.values``, ``CounterState.count``, ``MeterState.execute``,
``MulticastGroups.replicas``, ``CloneSessions.get``); the P4Runtime server
writes and reads it by P4Info names.  Errors are :class:`StateError` carrying a
gRPC status name.
"""
from testbed.p4.program import ActionCall, KeyMatch
from testbed.p4.state.action_profiles import ActionProfileState, Group, Member
from testbed.p4.state.errors import StateError
from testbed.p4.state.replication import CloneSession, CloneSessions, MulticastGroups
from testbed.p4.state.stateful import (
    GREEN, RED, YELLOW, CounterState, DirectCounterState, DirectMeterState, MeterConfig,
    MeterState, RegisterState, TrTcmMeter,
)
from testbed.p4.state.switch_state import SwitchState
from testbed.p4.state.tables import LookupResult, TableEntry, TableState

__all__ = [
    "ActionCall", "ActionProfileState", "CloneSession", "CloneSessions", "CounterState",
    "DirectCounterState", "DirectMeterState", "GREEN", "Group", "KeyMatch", "LookupResult",
    "Member", "MeterConfig", "MeterState", "MulticastGroups", "RED", "RegisterState",
    "StateError", "SwitchState", "TableEntry", "TableState", "TrTcmMeter", "YELLOW",
]
