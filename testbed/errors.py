"""Exceptions shared by the whole testbed.

Every error a user can cause names what was wrong: the parameter or spec
field, the value given, and what is allowed.  The CLI prints these without a
traceback.

Values are shown with :func:`short_repr`, so an error message stays short
whatever was given (a list of a million items, a string of a megabyte, a
value nested a thousand levels deep, an integer of thousands of digits).
"""
import reprlib

MAX_VALUE_TEXT = 200  # characters of a value shown in an error message


class _ShortRepr(reprlib.Repr):
    """``reprlib.Repr`` with small limits, and integers too large to print named by their size."""

    def __init__(self):
        super().__init__()
        self.maxlevel = 4
        self.maxlist = self.maxtuple = self.maxset = self.maxfrozenset = self.maxdeque = 16
        self.maxarray = 16
        self.maxdict = 12
        self.maxstring = 120
        self.maxother = 120
        self.maxlong = 60

    def repr_int(self, x, level):
        if x.bit_length() > 4 * self.maxlong:  # repr() would take long, or refuse (> 4300 digits)
            return f"<an integer of about {int(x.bit_length() * 0.30103) + 1} digits>"
        return super().repr_int(x, level)


_SHORT_REPR = _ShortRepr()


def short_repr(value, limit=MAX_VALUE_TEXT):
    """``repr(value)`` for an error message: at most ``limit`` characters, in bounded time.

    Containers show their first items and ``...``, long strings their start
    and end, deep nesting ``[...]``.

    >>> short_repr(list(range(100)))
    '[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, ...]'
    """
    text = _SHORT_REPR.repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


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
        message = f"invalid {field}={short_repr(value)}: allowed values are {allowed}"
        if reason:
            message += f" ({reason})"
        super().__init__(message)


class SpecError(ParameterError):
    """An experiment spec field with a value that is not allowed; the message starts with the field path.

    Args:
        path: the field path (``"traffic[1].rate_mbps"``; ``"spec"`` for the file as a whole).
        value: the value given.
        problem: what is wrong (``"must be > 0"``).
        show_value: append ``(got VALUE)`` (:func:`short_repr`) to the message.
    """

    def __init__(self, path, value, problem, show_value=True):
        super().__init__(path, value, problem)
        self.problem = problem
        self.message = f"{path}: {problem}" + (f" (got {short_repr(value)})" if show_value else "")
        self.args = (self.message,)

    def __str__(self):
        return self.message


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


class NativeBackendError(P4LoadError):
    """A P4 program (construct at file:line) the native backend cannot compile, or its C build failed.

    The Python backend may still run the program; the switch falls back to it only when
    the backend ``auto`` was asked for.
    """


class EmulationError(TestbedError):
    """The emulated network could not be built, or a part of it died."""
