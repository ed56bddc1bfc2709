"""Devices of the backend a test run asks for (``TESTBED_BACKEND``: auto by default, python or native)."""
import pytest

from testbed.errors import NativeBackendError
from testbed.p4.native import make_device


def backend_device(program, state, **kwargs):
    """A device of ``program`` with the run's default backend; a program the native backend refuses skips the test.

    Args:
        program: a LoadedProgram.
        state: its SwitchState.
        **kwargs: the Device arguments.
    """
    try:
        return make_device(program, state, **kwargs)
    except NativeBackendError as error:
        pytest.skip(str(error))
