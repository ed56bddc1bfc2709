"""The native backend of the embedded target: P4 programs compiled to C, state in native memory.

:func:`make_device` is where a switch chooses its backend:

* ``python``: the reference :class:`~testbed.p4.v1model.device.Device` (generated Python);
* ``native``: :class:`~testbed.p4.native.device.NativeDevice` (generated C, built with gcc
  and loaded through cffi); a program it cannot compile is an error (file:line);
* ``auto``: native when it can, else Python with one warning line.

The default is ``auto`` (native when a C compiler and cffi are present) unless the environment
variable ``TESTBED_BACKEND`` names another: ``TESTBED_BACKEND=python`` runs everything on the
reference backend.
"""
import os

from testbed.errors import NativeBackendError, ParameterError

#: the backends a switch accepts
BACKENDS = ("python", "native", "auto")
DEFAULT_BACKEND = None  # :func:`default_backend`
BACKEND_ENV = "TESTBED_BACKEND"


def default_backend():
    """``$TESTBED_BACKEND`` if set, else ``auto``.

    Raises:
        ParameterError: the variable names no backend.
    """
    return check_backend(os.environ.get(BACKEND_ENV) or "auto", BACKEND_ENV)


def check_backend(backend, field="backend"):
    """Return ``backend`` if it is one of :data:`BACKENDS`.

    >>> check_backend("native")
    'native'

    Raises:
        ParameterError: naming the field and the allowed values.
    """
    if backend not in BACKENDS:
        raise ParameterError(field, backend, " / ".join(BACKENDS))
    return backend


def machine_backend(backend=DEFAULT_BACKEND):
    """The backend switches on this machine run for ``backend`` (None: :func:`default_backend`):
    ``auto`` is ``native`` where a C compiler and cffi are present, else ``python`` (a program the
    C backend cannot compile still falls back to Python, switch by switch).

    >>> machine_backend("python")
    'python'
    """
    backend = default_backend() if backend is None else check_backend(backend)
    if backend != "auto":
        return backend
    from testbed.p4.native.build import unavailable

    return "python" if unavailable() else "native"


def make_device(program, state, backend=DEFAULT_BACKEND, warn=None, **kwargs):
    """The switch's device for ``program`` with the chosen backend.

    Args:
        program: a LoadedProgram.
        state: its SwitchState.
        backend: ``python``, ``native`` or ``auto``; None: :func:`default_backend`.
        warn: callable(str) for the fallback warning of ``auto`` (default: print to stderr).
        **kwargs: the :class:`~testbed.p4.v1model.device.Device` arguments.

    Returns:
        Device or NativeDevice (``device.backend`` says which).

    Raises:
        ParameterError: an unknown backend.
        NativeBackendError: backend ``native`` and the program cannot be compiled to C.
    """
    from testbed.p4.v1model.device import Device

    backend = default_backend() if backend is None else check_backend(backend)
    if backend == "python":
        return Device(program, state, **kwargs)
    from testbed.p4.native.device import NativeDevice
    try:
        return NativeDevice(program, state, **kwargs)
    except NativeBackendError as error:
        if backend == "native":
            raise
        message = f"warning: backend auto: the native backend cannot run this program, using python: {error}"
        if warn is None:
            import sys
            print(message, file=sys.stderr, flush=True)
        else:
            warn(message)
        return Device(program, state, **kwargs)
