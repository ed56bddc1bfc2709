"""Checks of the FC+ family's PFC settings taken together (the PFC settings' own contract): the mode
parameters, and the per-switch settings of ``controller.pfc_switches``."""
from testbed.errors import ParameterError, SpecError
from testbed.mechanisms.fcplus import PARAMETERS, PFC_FIELDS, PFC_SWITCH_FIELDS
from testbed.p4.v1model.pfc import PfcConfig


def check_parameters(values, field_path="mode_params"):
    """Refuse PFC thresholds that are each in range but wrong together (XOFF above the buffer, no headroom).

    Raises:
        ParameterError: naming ``mode_params.<field>`` and the allowed values.

    >>> check_parameters({"pfc_lossless": 1, "pfc_headroom_packets": 0})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    testbed.errors.ParameterError: invalid mode_params.pfc_headroom_packets=0: allowed values are ...
    """
    defaults = {parameter.name: parameter.default for parameter in PARAMETERS}
    merged = dict(defaults, **{name: value for name, value in values.items() if name in defaults})
    lossless = merged["pfc_lossless"]
    try:
        PfcConfig.checked(list(range(1, lossless + 1)), **{name[len("pfc_"):]: merged[name] for name in PFC_FIELDS})
    except ParameterError as error:
        raise ParameterError(f"{field_path}.pfc_{error.field}", error.value, error.allowed, error.reason) from None



def check_pfc_switches(value, field_path, switches):
    """Check ``controller.pfc_switches``: ``{switch: {pfc_lossless, pfc_buffer_packets, ...}}``.

    Each listed switch gets its whole PFC setting (all of :data:`PFC_SWITCH_FIELDS`, so it is
    checked here, before anything starts, as :func:`check_parameters` checks mode_params');
    the others keep mode_params'.

    Args:
        value: the option as the spec gives it.
        field_path: ``controller.pfc_switches``.
        switches: the topology's switch names.

    Returns:
        dict: ``{switch: {field: int}}``.

    Raises:
        SpecError: naming ``controller.pfc_switches.<switch>[.<field>]`` and the allowed values.

    >>> check_pfc_switches({"tor0": {"pfc_lossless": 1, "pfc_buffer_packets": 64, "pfc_xoff_packets": 16,
    ...                              "pfc_xon_packets": 8, "pfc_headroom_packets": 64}},
    ...                    "controller.pfc_switches", ["tor0"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    testbed.errors.SpecError: controller.pfc_switches.tor0.pfc_headroom_packets: must be an integer in [1, 63] ...
    """
    if not isinstance(value, dict) or not value:
        raise SpecError(field_path, value, "must be a mapping of switch names to PFC settings")
    parameters = {parameter.name: parameter for parameter in PARAMETERS}
    checked = {}
    for switch, settings in value.items():
        path = f"{field_path}.{switch}"
        if switch not in switches:
            shown = ", ".join(list(switches)[:12]) + (f", ... ({len(switches)} in all)" if len(switches) > 12 else "")
            raise SpecError(field_path, switch, "must name switches of the topology; switches: " + shown)
        if not isinstance(settings, dict) or set(settings) != set(PFC_SWITCH_FIELDS):
            given = sorted(settings) if isinstance(settings, dict) else settings
            raise SpecError(path, given, "must give exactly " + ", ".join(PFC_SWITCH_FIELDS))
        try:
            numbers = {name: parameters[name].check(settings[name], f"{path}.{name}") for name in PFC_SWITCH_FIELDS}
            check_parameters(numbers, path)
        except ParameterError as error:
            problem = f"must be {error.allowed}" + (f" ({error.reason})" if error.reason else "")
            raise SpecError(error.field, error.value, problem) from None
        checked[switch] = numbers
    return checked
