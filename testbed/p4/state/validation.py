"""Checks shared by tables and action profiles: action calls against the program.

An :class:`~testbed.p4.program.ActionCall` names an action and gives one
unsigned int per directionless parameter.  P4Runtime (and BMv2's
``BAD_ACTION_DATA``) reject a wrong argument count or an argument wider than its
parameter; both are INVALID_ARGUMENT here.
"""
from testbed.p4.program import ActionCall
from testbed.p4.state.errors import StateError, check_uint


def normalize_call(program_actions, call, allowed, where, scope_forbidden=None, scopes=None):
    """Validate an action call and return it with ``args`` as a tuple of ints.

    Args:
        program_actions: ``ProgramInfo.actions`` (name -> Action).
        call: the :class:`ActionCall` to check.
        allowed: names of the actions allowed here (a table's or profile's actions).
        where: object named in error messages (``"table MyIngress.t"``).
        scope_forbidden: an action scope not allowed here (``"TABLE_ONLY"`` for a
            default action, ``"DEFAULT_ONLY"`` for an entry), or None.
        scopes: action name -> scope, used with ``scope_forbidden``.

    Returns:
        ActionCall: a new call with ``args`` a tuple.

    Raises:
        StateError: INVALID_ARGUMENT for an action not allowed here, an action in
            the wrong scope, a wrong argument count or an argument that does not fit.
    """
    if call is None or not hasattr(call, "action"):
        raise StateError("INVALID_ARGUMENT", f"{where}: no action given")
    name = call.action
    if name not in allowed:
        raise StateError("INVALID_ARGUMENT",
                         f"{where}: action {name!r} is not one of its actions "
                         f"({', '.join(sorted(allowed)) or 'none'})")
    if scope_forbidden is not None and scopes is not None and scopes.get(name) == scope_forbidden:
        use = "as default action" if scope_forbidden == "TABLE_ONLY" else "in a table entry"
        raise StateError("INVALID_ARGUMENT",
                         f"{where}: action {name} is {scope_forbidden} and cannot be used {use}")
    action = program_actions.get(name)
    params = action.params if action is not None else []
    args = tuple(call.args or ())
    if len(args) != len(params):
        raise StateError("INVALID_ARGUMENT",
                         f"{where}: action {name} takes {len(params)} argument(s), "
                         f"{len(args)} given")
    for param, value in zip(params, args):
        check_uint(value, param.bitwidth, f"{where}: action {name}: param {param.name}")
    return ActionCall(name, args)
