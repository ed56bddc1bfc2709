"""The error the P4Runtime side raises for a request it rejects."""


class P4RuntimeError(Exception):
    """A P4Runtime request (or part of one) that cannot be carried out.

    Args:
        code: the gRPC status *name* ("INVALID_ARGUMENT", "NOT_FOUND", ...), as in
            ``grpc.StatusCode[code]`` - the same convention as ``testbed.p4.state.StateError``.
        message: what was wrong, naming the object and field.
    """

    def __init__(self, code, message):
        self.code = code
        self.message = message
        super().__init__(message)

    def __str__(self):
        return self.message


def require(condition, code, message):
    """Raise ``P4RuntimeError(code, message)`` unless ``condition`` holds."""
    if not condition:
        raise P4RuntimeError(code, message)


def error_code(exc):
    """The gRPC status name an exception maps to (``code`` attribute, else UNKNOWN/INTERNAL)."""
    code = getattr(exc, "code", None)
    if isinstance(code, str):
        return code
    return "INTERNAL"


def error_message(exc):
    """The message of an exception (``message`` attribute or ``str``)."""
    message = getattr(exc, "message", None)
    return message if isinstance(message, str) else str(exc)
