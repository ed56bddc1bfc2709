"""Write run-time parameters into a program's parameter tables over P4Runtime.

Parameters are described in :data:`testbed.modes.PARAMETERS`.  Each lives in a
parameter table (a keyless table) as an argument of the table's default action,
so setting them is a MODIFY of the default entry: every P4Runtime server
implements that, BMv2's included.  Every parameter table the program has is
written, with all its parameters together (a default entry carries every
argument of its action): a value the caller does not give keeps what the
controller wrote before, else its default in :data:`~testbed.modes.PARAMETERS`
(the one home of the defaults: a program's own default action only holds
until a controller starts).

A parameter action may also take per-switch arguments, which are not user
parameters: :data:`PER_SWITCH_ARGUMENTS` says how each is computed from the
switch's name (``switch_salt``: every switch hashes flows with its own salt, so
the tiers of a multi-tier fabric do not polarize; p4src/include/flow_hash.p4).
"""
import zlib

from testbed.modes import PARAMETERS
from testbed.p4.program import ActionCall


def switch_salt(switch):
    """A switch's own hash salt: the CRC-32 of its name (stable across runs and machines).

    >>> switch_salt("leaf0")
    3396548602
    """
    return zlib.crc32(str(switch).encode())


#: per-switch action arguments of parameter tables -> their value for a switch name
PER_SWITCH_ARGUMENTS = {"switch_salt": switch_salt}


def _action_params(p4info, action):
    for info in p4info.actions:
        if info.preamble.name == action:
            return [param.name for param in info.params]
    return []


def parameter_tables(p4info):
    """Parameter tables the program has: ``{table name: [Parameter]}`` in table order.

    Args:
        p4info: the program's P4Info message.

    Returns:
        dict: only tables of :data:`~testbed.modes.PARAMETERS` present in the P4Info.
    """
    present = {table.preamble.name for table in p4info.tables}
    tables = {}
    for parameter in PARAMETERS.values():
        if parameter.table in present:
            tables.setdefault(parameter.table, []).append(parameter)
    return tables


def write_parameters(clients, p4info, values, current=None):
    """Write parameter values on every switch.

    Args:
        clients: ``{switch: P4RuntimeClient}`` (primary sessions).
        p4info: the program's P4Info.
        values: ``{name: int}`` already checked (:func:`testbed.modes.check_parameters`).
        current: ``{name: int}`` written earlier (kept for the names ``values`` does not give).

    Returns:
        tuple: ``(written {name: int}, notes [str])``: every parameter of each table written
        (including defaults filled in), and one note per given value the program has no table for
        (parameters no P4 table carries, which controllers read themselves, are neither).
    """
    current = dict(current or {})
    tables = parameter_tables(p4info)
    carried = {parameter.name for parameters in tables.values() for parameter in parameters}
    notes = [f"mode_params.{name}={value}: the program has no table {PARAMETERS[name].table}; not written"
             for name, value in sorted(values.items()) if name not in carried and PARAMETERS[name].in_program]
    written = {}
    for table, parameters in tables.items():
        action = parameters[0].action
        per_switch = [name for name in _action_params(p4info, action) if name in PER_SWITCH_ARGUMENTS]
        arguments = {}
        for parameter in parameters:
            value = values.get(parameter.name, current.get(parameter.name, parameter.default))
            arguments[parameter.action_param] = value
            written[parameter.name] = value
        for switch, client in clients.items():
            own = {name: PER_SWITCH_ARGUMENTS[name](switch) for name in per_switch}
            client.set_default_action(table, action, dict(arguments, **own))
    return written, notes


def set_parameters_in_state(state, values, switch=None):
    """Set run-time parameters directly in an in-process switch's state (no P4Runtime).

    What :func:`write_parameters` does over P4Runtime, for a
    :class:`~testbed.p4.state.SwitchState` used without a server (placement
    predictions, unit tests): each parameter table's default action gets the given
    values; its other arguments keep their current values.

    Args:
        state: the SwitchState of a loaded program.
        values: ``{name: int}`` (checked).
        switch: the switch's name, for the per-switch arguments (None: leave them).

    Returns:
        list: the names set (parameters whose table the program lacks are skipped).
    """
    done = []
    for name, value in values.items():
        parameter = PARAMETERS[name]
        table = state.tables.get(parameter.table) if parameter.in_program else None
        if table is None:
            continue
        params = [param.name for param in state.program.actions[parameter.action].params]
        args = list(table.default_action.args)
        args[params.index(parameter.action_param)] = value
        if switch is not None:
            for argument, compute in PER_SWITCH_ARGUMENTS.items():
                if argument in params:
                    args[params.index(argument)] = compute(switch)
        table.set_default(ActionCall(parameter.action, tuple(args)))
        done.append(name)
    return done
