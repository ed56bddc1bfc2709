"""Exceptions shared by the whole testbed.

Every error a user can cause names what was wrong: the parameter or spec
field, the value given, and what is allowed.  The CLI prints these without a
traceback.
"""


class TestbedError(Exception):
    """Base class of every error the testbed raises on purpose."""

    __test__ = False  # not a pytest test class, despite the name


class ParameterError(TestbedError, ValueError):
    """A topology parameter, CLI option or spec field has a value that is not allowed.

    Args:
        field: the parameter or field name as the user wrote it (``"k"``,
            ``"traffic[0].rate_mbps"``).
        value: the value that was given.
        allowed: a human-readable description of the allowed values
            (``"an even integer >= 2"``, ``"one of: ecmp, spray"``).
        reason: optional extra explanation.
    """

    def __init__(self, field, value, allowed, reason=None):
        self.field = field
        self.value = value
        self.allowed = allowed
        self.reason = reason
        message = f"invalid {field}={value!r}: allowed values are {allowed}"
        if reason:
            message += f" ({reason})"
        super().__init__(message)


class P4LoadError(TestbedError):
    """A P4 program the embedded target cannot accept.

    Args:
        message: what is wrong or unsupported (the construct).
        filename: source file the construct is in.
        line: 1-based line number.
        column: optional 1-based column.
    """

    def __init__(self, message, filename=None, line=None, column=None):
        self.message = message
        self.filename = filename
        self.line = line
        self.column = column
        where = ""
        if filename is not None:
            where = f"{filename}:{line if line is not None else '?'}"
            if column is not None:
                where += f":{column}"
            where += ": "
        super().__init__(f"{where}{message}")


class EmulationError(TestbedError):
    """The emulated network could not be built, or a part of it died."""
