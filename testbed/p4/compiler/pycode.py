"""Small building blocks of the generated Python code.

:class:`Emitter` collects indented source lines, :class:`FunctionContext` holds
what one generated function needs (temporaries, what ``return`` means), and the
helpers name attributes, print literals and wrap values to a P4 width.
"""
from testbed.p4.frontend import types as T

HASH_ALGORITHMS = ("crc32", "crc32_custom", "crc16", "crc16_custom", "random", "identity", "csum16", "xor16")


class Emitter:
    """Indented Python source lines of one generated module or function."""

    def __init__(self):
        self.lines = []
        self.level = 0

    def line(self, text):
        """Append one line at the current indentation."""
        self.lines.append("    " * self.level + text)

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


def literal(value):
    """Python literal of a folded constant."""
    if isinstance(value, bool):
        return "True" if value else "False"
    return str(int(value))


class FunctionContext:
    """One generated function: its emitter, temporaries, and what return/exit mean there."""
    """Per generated function: emitter, temp names, what 'return' and 'exit' mean."""

    def __init__(self, kind, emitter):
        self.kind = kind  # parser, control, function, deparser
        self.out = emitter
        self.counter = 0
        self.return_stack = []  # for actions inlined in a while-loop: 'break'
        self.function_outs = None

    def temp(self, prefix="t"):
        """A new temporary variable name."""
        self.counter += 1
        return f"_{prefix}{self.counter}"


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


def contains_return(node):
    """True if a statement contains a ``return`` (an inlined action then needs a loop to break)."""
    if node is None:
        return False
    kind = node.kind
    if kind == "return":
        return True
    if kind == "block":
        return any(contains_return(s) for s in node.statements)
    if kind == "if":
        return contains_return(node.then) or contains_return(node.otherwise)
    if kind == "switch":
        return any(contains_return(c.body) for c in node.cases)
    return False
