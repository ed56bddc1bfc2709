"""The one exception the runtime state raises: :class:`StateError`.

Its ``code`` is the *name* of a gRPC status code so the P4Runtime server can
map it with ``grpc.StatusCode[error.code]`` and keep the message.
"""
from testbed.errors import TestbedError

STATUS_CODES = (
    "INVALID_ARGUMENT",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "OUT_OF_RANGE",
    "RESOURCE_EXHAUSTED",
    "PERMISSION_DENIED",
    "FAILED_PRECONDITION",
)


class StateError(TestbedError):
    """A control-plane write or read the switch state rejects.

    Args:
        code: gRPC status name, one of :data:`STATUS_CODES`.
        message: what was wrong, naming the object and field
            (``"table MyIngress.ipv4_lpm: key hdr.ipv4.dstAddr: ..."``).

    Attributes:
        code: the status name given.
        message: the message given.
    """

    def __init__(self, code, message):
        if code not in STATUS_CODES:
            raise ValueError(f"unknown status code {code!r}; allowed: {', '.join(STATUS_CODES)}")
        self.code = code
        self.message = message
        super().__init__(f"{code}: {message}")


def check_uint(value, bitwidth, what):
    """Check that ``value`` is an unsigned int that fits ``bitwidth`` bits.

    Args:
        value: the value to check.
        bitwidth: the width in bits.
        what: the object/field named in the error message.

    Raises:
        StateError: INVALID_ARGUMENT when it is not an int or does not fit.
    """
    if not isinstance(value, int) or isinstance(value, bool):
        raise StateError("INVALID_ARGUMENT", f"{what}: value {value!r} is not an integer")
    if value < 0 or value >> bitwidth:
        raise StateError("INVALID_ARGUMENT",
                         f"{what}: value {value} does not fit in {bitwidth} bits")
