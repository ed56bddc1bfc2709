"""Checks of the FC+ family's mode parameters taken together (the PFC settings' own contract)."""
from testbed.errors import ParameterError
from testbed.mechanisms.fcplus import PFC_FIELDS, PARAMETERS
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

