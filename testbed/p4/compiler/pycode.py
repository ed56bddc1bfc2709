"""Small building blocks of the generated Python code.

:class:`Emitter` collects indented source lines, :class:`FunctionContext` holds
what one generated function needs (temporaries, what ``return`` means), and the
helpers name attributes, print literals and wrap values to a P4 width.
"""
from testbed.p4.frontend import types as T


class Emitter:
    """Indented Python source lines of one generated module or function.

    ``origins`` holds, for each line, the P4 source line index (see
    :class:`testbed.p4.frontend.preprocessor.SourceLine`) of the statement being generated
    when the line was emitted (``origin``), so that an error Python reports in the
    generated code can be shown at the P4 source line it came from.
    """

    def __init__(self):
        self.lines = []
        self.origins = []
        self.level = 0
        self.origin = None

    def line(self, text):
        """Append one line at the current indentation."""
        self.lines.append("    " * self.level + text)
        self.origins.append(self.origin)

    def extend(self, other):
        """Append the lines of another Emitter (with their origins)."""
        self.lines.extend(other.lines)
        self.origins.extend(other.origins)

    def origin_of(self, number):
        """The P4 line index that generated line ``number`` (1-based) came from, or None."""
        for index in range(min(number, len(self.origins)) - 1, -1, -1):
            if self.origins[index] is not None:
                return self.origins[index]
        return None

    def indent(self):
        """Indent the following lines one level more."""
        self.level += 1

    def dedent(self):
        """Indent the following lines one level less."""
        self.level -= 1

    def text(self):
        """The source text."""
        return "\n".join(self.lines) + "\n"


def attr(name):
    """Python attribute of a P4 field (prefixed, so P4 names never clash with Python keywords)."""
    return "f_" + name


def varbit_length_attr(name):
    """Python attribute holding the current length in bits of varbit field ``name``."""
    return "l_" + name


def literal(value):
    """Python literal of a folded constant."""
    if isinstance(value, bool):
        return "True" if value else "False"
    return str(int(value))


class Frame:
    """An inlined action (``kind`` "action") or a P4 loop (``kind`` "loop") the generated code is inside.

    Attributes:
        barrier: an action whose copy-out must run even when ``exit`` leaves it
            (its body runs in a ``while True`` loop; ``exit`` sets ``exit_flag`` and breaks out).
        looped: the action's body runs in a ``while True`` loop (for ``return``/``exit``).
        return_flag: set by a ``return`` that has to leave loops nested in the action.
        exit_flag: set by an ``exit`` that has to reach this barrier action.
        passing: loop: flags that may be set inside it and must be checked after it.
        updates: loop: the update statements a ``continue`` runs first (C-style ``for``).
    """

    def __init__(self, kind, barrier=False, looped=False):
        self.kind = kind
        self.barrier = barrier
        self.looped = looped
        self.return_flag = None
        self.exit_flag = None
        self.passing = []
        self.updates = None
        self.scope = None


class FunctionContext:
    """Per generated function: emitter, temporaries, what ``return`` and ``exit`` mean there.

    Args:
        kind: "parser", "control", "deparser" or "function".
        emitter: the :class:`Emitter` of the function body.

    Attributes:
        frames: the inlined actions and loops the current code is in, innermost last.
        exit_code: the statement that leaves the whole control on ``exit``.
        return_code: the statement that leaves the control on ``return`` (outside actions).
        function_outs: a function's scalar out/inout parameters (returned with its result).
    """

    def __init__(self, kind, emitter):
        self.kind = kind
        self.out = emitter
        self.counter = 0
        self.frames = []
        self.exit_code = "return True"
        self.return_code = "return False"
        self.function_outs = None
        self.return_type = None
        self.control = None

    def temp(self, prefix="t"):
        """A new temporary variable name."""
        self.counter += 1
        return f"_{prefix}{self.counter}"

    def innermost(self, kind):
        """Index of the innermost frame of ``kind`` or -1."""
        for index in range(len(self.frames) - 1, -1, -1):
            if self.frames[index].kind == kind:
                return index
        return -1


# expression kinds worth trying to fold to a constant
FOLDABLE = {"int", "name", "binop", "unop", "cast", "type_member", "error_member", "slice", "conditional"}


def is_signed(type_):
    """True for int<W> (and serializable enums over int<W>)."""
    if isinstance(type_, T.BitType):
        return type_.signed
    if isinstance(type_, T.EnumType) and type_.underlying is not None:
        return type_.underlying.signed
    return False


def wrap(code, type_):
    """Code that wraps ``code`` around to ``type_``'s width (two's complement for int<W>)."""
    if isinstance(type_, T.EnumType):
        type_ = type_.underlying
    if not isinstance(type_, T.BitType):
        return code
    if type_.signed:
        half = 1 << (type_.width - 1)
        return f"((({code} + {half}) & {type_.mask}) - {half})"
    return f"({code} & {type_.mask})"


def is_literal(code):
    """True if ``code`` is a Python literal the generator printed (a number or a bool)."""
    return code in ("True", "False") or code.lstrip("-").isdigit()
