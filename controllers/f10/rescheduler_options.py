"""The options of F10's epoch rescheduler, checked (without importing os-ken, which runs it).

:func:`rescheduler_options` is what the F10 controller checks when it is built;
:mod:`testbed.controllers.f10.rescheduler_app` runs the rescheduler.
"""
import math

from testbed.errors import ParameterError

DEFAULT_RECOVERED_HOLDDOWN_MS = 2000.0
"""How long a recovered link gets no weight when nothing else is said (seed 002, 5.3: it must prove stable)."""


def _milliseconds(name, value, positive):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not (value > 0 if positive else value >= 0):
        raise ParameterError(name, value, f"a number of milliseconds {'> 0' if positive else '>= 0'}")
    return float(value)


def rescheduler_options(epoch_ms, recovered_holddown_ms=DEFAULT_RECOVERED_HOLDDOWN_MS):
    """The rescheduler's checked options, or None when ``epoch_ms`` is None (no rescheduler).

    Args:
        epoch_ms: the epoch, in ms (> 0).
        recovered_holddown_ms: how long a recovered link gets no weight, in ms (>= 0).

    Returns:
        dict: ``{"epoch_ms": float, "recovered_holddown_ms": float}``, or None.

    Raises:
        ParameterError: a value out of range (named).

    >>> rescheduler_options(500)
    {'epoch_ms': 500.0, 'recovered_holddown_ms': 2000.0}
    >>> rescheduler_options(0)
    Traceback (most recent call last):
    ...
    testbed.errors.ParameterError: invalid epoch_ms=0: allowed values are a number of milliseconds > 0
    """
    if epoch_ms is None:
        return None
    return {"epoch_ms": _milliseconds("epoch_ms", epoch_ms, True),
            "recovered_holddown_ms": _milliseconds("recovered_holddown_ms", recovered_holddown_ms, False)}
