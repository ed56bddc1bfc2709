"""Macro expansion and ``#if`` arithmetic of the P4 preprocessor, as the C preprocessor does them.

p4c runs the C preprocessor, so a P4 source may use object-like and function-like macros
(``#define SQ(x) ((x) * (x))``), ``#`` stringification and ``##`` token pasting, and ``#if``
conditions with C's integer arithmetic.  This module provides:

* :func:`tokenize` - preprocessing tokens of a line of text (strings kept whole);
* :class:`MacroExpander` - expands the macros of a token list (a macro is not expanded
  again inside its own expansion), with a bound on the work so that no input can stall;
* :func:`evaluate_condition` - the value of an ``#if`` expression in 64-bit signed
  arithmetic (C's ``intmax_t``), so ``#if 9**9**8`` is a syntax error, not minutes of work.

Every problem raises :class:`MacroError` with a message; the preprocessor adds file and line.
"""
import re
from dataclasses import dataclass, field
from typing import List, Optional

MAX_EXPANSION_TOKENS = 200_000  # tokens produced by the expansion of one line
MAX_EXPANSION_DEPTH = 64  # nested macro expansions
MAX_CONDITION_LENGTH = 10_000  # characters of one #if expression
MAX_CONDITION_DEPTH = 100  # parentheses / operators nested in one #if expression

_TOKEN = re.compile(
    r"(?P<space>\s+)"
    r'|(?P<string>"(?:[^"\\\n]|\\.)*"?)'
    r"|(?P<ident>[A-Za-z_]\w*)"
    r"|(?P<number>\.?\d(?:[eEpP][+-]|[\w.])*)"
    r"|(?P<punct>##|&&&|\|\+\||\|-\||<<=|>>=|\.\.\.|\+\+|--|<<|>>|<=|>=|==|!=|&&|\|\||->|\.\.|[-+*/%&|^~!<>=?:;,.()\[\]{}#@])"
    r"|(?P<other>.)",
    re.DOTALL,
)


class MacroError(Exception):
    """A macro or ``#if`` problem; the message names the construct."""


@dataclass
class Macro:
    """A macro: object-like (``params`` None) or function-like; ``body`` is its replacement text."""

    name: str
    body: str
    filename: str
    line: int
    params: Optional[List[str]] = None
    variadic: bool = False
    tokens: List[str] = field(default_factory=list)

    def __post_init__(self):
        self.tokens = tokenize(self.body)


def tokenize(text):
    """Preprocessing tokens of ``text``, whitespace runs included (as single spaces)."""
    tokens = []
    for match in _TOKEN.finditer(text):
        kind = match.lastgroup
        tokens.append(" " if kind == "space" else match.group(0))
    return tokens


def _is_ident(token):
    return token[:1].isalpha() or token[:1] == "_"


class MacroExpander:
    """Expands the macros of one logical line.

    Args:
        macros: dict name -> :class:`Macro` (the macros defined at that point of the source).
    """

    def __init__(self, macros):
        self.macros = macros
        self.produced = 0

    def expand_text(self, text):
        """``text`` with its macros expanded.

        Raises:
            MacroError: a malformed invocation, or an expansion beyond the bounds.
        """
        if not any(_is_ident(t) and t in self.macros for t in tokenize(text)):
            return text
        self.produced = 0
        return "".join(self.expand(tokenize(text), frozenset(), 0))

    def open_invocation(self, text):
        """True if ``text`` ends inside the argument list of a function-like macro (it continues on the next line)."""
        tokens = [t for t in tokenize(text) if t != " "]
        for index, token in enumerate(tokens):
            macro = self.macros.get(token)
            if macro is None or macro.params is None:
                continue
            if index + 1 == len(tokens):
                return True  # the '(' may come on the next line
            if tokens[index + 1] != "(":
                continue
            depth = 0
            for inner in tokens[index + 1:]:
                if inner == "(":
                    depth += 1
                elif inner == ")":
                    depth -= 1
                    if depth == 0:
                        break
            if depth > 0:
                return True
        return False

    def expand(self, tokens, hidden, depth):
        """Expand ``tokens``; ``hidden`` are the macros being expanded (not expanded again)."""
        if depth > MAX_EXPANSION_DEPTH:
            raise MacroError(f"macro expansion nested more than {MAX_EXPANSION_DEPTH} levels deep")
        out = []
        index = 0
        count = len(tokens)
        while index < count:
            token = tokens[index]
            macro = self.macros.get(token) if _is_ident(token) and token not in hidden else None
            if macro is None:
                out.append(token)
                index += 1
                self._count(1)
                continue
            if macro.params is None:
                replacement = self._substitute(macro, {}, hidden, depth)
                index += 1
            else:
                following = index + 1
                while following < count and tokens[following] == " ":
                    following += 1
                if following >= count or tokens[following] != "(":
                    out.append(token)  # a function-like macro's name without arguments is just a name
                    index += 1
                    continue
                args, index = self._arguments(macro, tokens, following)
                replacement = self._substitute(macro, args, hidden, depth)
            self._count(len(replacement))
            out.extend(self.expand(replacement, hidden | {macro.name}, depth + 1))
        return out

    def _count(self, tokens):
        """Account for work done; every level counts, so a growing expansion stops early."""
        self.produced += tokens
        if self.produced > MAX_EXPANSION_TOKENS:
            raise MacroError(f"macro expansion produces more than {MAX_EXPANSION_TOKENS} tokens")

    @staticmethod
    def _arguments(macro, tokens, start):
        """Split the argument list starting at tokens[start] == '('; return (args by name, index after ')')."""
        args = []
        current = []
        depth = 0
        index = start
        while index < len(tokens):
            token = tokens[index]
            index += 1
            if token == "(":
                depth += 1
                if depth == 1:
                    continue
            elif token == ")":
                depth -= 1
                if depth == 0:
                    args.append(current)
                    break
            elif token == "," and depth == 1 and not (macro.variadic and len(args) >= len(macro.params) - 1):
                args.append(current)
                current = []
                continue
            current.append(token)
        else:
            raise MacroError(f"unterminated argument list of macro {macro.name}")
        args = [_strip(a) for a in args]
        if args == [[]] and not macro.params:
            args = []
        if len(args) != len(macro.params):
            if macro.variadic and len(args) == len(macro.params) - 1:
                args.append([])
            else:
                raise MacroError(f"macro {macro.name} takes {len(macro.params)} argument(s), {len(args)} given")
        return dict(zip(macro.params, args)), index

    def _substitute(self, macro, args, hidden, depth):
        """The body of ``macro`` with its parameters replaced (``#`` stringifies, ``##`` pastes)."""
        body = macro.tokens
        out = []
        index = 0
        while index < len(body):
            token = body[index]
            if token == "#" and args:
                following = _next_word(body, index + 1)
                if following is not None and body[following] in args:
                    text = "".join(args[body[following]]).replace("\\", "\\\\").replace('"', '\\"')
                    out.append(f'"{text}"')
                    index = following + 1
                    continue
            if token in args:
                pasted = _neighbour(body, index, -1) == "##" or _neighbour(body, index, 1) == "##"
                value = args[token] if pasted else self.expand(args[token], hidden, depth + 1)
                out.extend(value)
                index += 1
                continue
            out.append(token)
            index += 1
        return _paste(out)


def _strip(tokens):
    while tokens and tokens[0] == " ":
        tokens = tokens[1:]
    while tokens and tokens[-1] == " ":
        tokens = tokens[:-1]
    return tokens


def _next_word(tokens, index):
    while index < len(tokens) and tokens[index] == " ":
        index += 1
    return index if index < len(tokens) else None


def _neighbour(tokens, index, step):
    index += step
    while 0 <= index < len(tokens) and tokens[index] == " ":
        index += step
    return tokens[index] if 0 <= index < len(tokens) else None


def _paste(tokens):
    """Apply ``##``: join the tokens on both sides (spaces around ``##`` are dropped)."""
    if "##" not in tokens:
        return tokens
    out = []
    index = 0
    while index < len(tokens):
        token = tokens[index]
        if token == "##":
            while out and out[-1] == " ":
                out.pop()
            following = _next_word(tokens, index + 1)
            if not out or following is None:
                raise MacroError("'##' at the edge of a macro body")
            out[-1] = out[-1] + tokens[following]
            index = following + 1
            continue
        out.append(token)
        index += 1
    return out


# ---------------------------------------------------------------------------- #if conditions
def evaluate_condition(text, macros):
    """Evaluate an ``#if``/``#elif`` expression with the C preprocessor's rules.

    ``defined(X)``/``defined X`` test macros, other macros are expanded, remaining names
    are 0, and the arithmetic is 64-bit signed (C's ``intmax_t``) with wrap-around.

    Returns:
        bool.

    Raises:
        MacroError: a malformed expression, division by zero, or a bound exceeded.
    """
    if len(text) > MAX_CONDITION_LENGTH:
        raise MacroError(f"#if condition longer than {MAX_CONDITION_LENGTH} characters")
    tokens = [t for t in tokenize(text) if t != " "]
    resolved = []
    index = 0
    while index < len(tokens):
        token = tokens[index]
        if token == "defined":
            if index + 1 < len(tokens) and tokens[index + 1] == "(":
                if index + 3 >= len(tokens) or tokens[index + 3] != ")" or not _is_ident(tokens[index + 2]):
                    raise MacroError("defined(...) needs one macro name")
                name, index = tokens[index + 2], index + 4
            elif index + 1 < len(tokens) and _is_ident(tokens[index + 1]):
                name, index = tokens[index + 1], index + 2
            else:
                raise MacroError("defined needs a macro name")
            resolved.append("1" if name in macros else "0")
            continue
        resolved.append(token)
        index += 1
    expanded = [t for t in MacroExpander(macros).expand(tokenize(" ".join(resolved)), frozenset(), 0) if t != " "]
    if len(expanded) > MAX_CONDITION_LENGTH:
        raise MacroError(f"#if condition expands to more than {MAX_CONDITION_LENGTH} tokens")
    parser = _ConditionParser(expanded)
    value = parser.conditional(0)
    if parser.position != len(expanded):
        raise MacroError(f"unexpected {expanded[parser.position]!r} in #if condition")
    return value != 0


def _wrap64(value):
    value &= (1 << 64) - 1
    return value - (1 << 64) if value >> 63 else value


def _integer(token):
    text = token.rstrip("uUlL")
    try:
        if text[:2] in ("0x", "0X"):
            value = int(text[2:], 16)
        elif text[:2] in ("0b", "0B"):
            value = int(text[2:], 2)
        elif len(text) > 1 and text[0] == "0":
            value = int(text, 8)
        else:
            if len(text) > 20:
                raise MacroError(f"integer constant {token[:30]} is too large for #if (64 bits)")
            value = int(text, 10)
    except ValueError:
        raise MacroError(f"{token!r} is not an integer the preprocessor understands") from None
    if value >> 64:
        raise MacroError(f"integer constant {token[:30]} is too large for #if (64 bits)")
    return _wrap64(value)


_BINARY_LEVELS = [
    ("||",), ("&&",), ("|",), ("^",), ("&",), ("==", "!="), ("<", ">", "<=", ">="), ("<<", ">>"), ("+", "-"),
    ("*", "/", "%"),
]


class _ConditionParser:
    """Recursive descent over the tokens of an #if expression (bounded depth)."""

    def __init__(self, tokens):
        self.tokens = tokens
        self.position = 0
        self.depth = 0

    def _peek(self):
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def _take(self, expected=None):
        token = self._peek()
        if token is None or (expected is not None and token != expected):
            raise MacroError(f"#if condition: expected {expected or 'more'}, got {token!r}")
        self.position += 1
        return token

    def _enter(self):
        self.depth += 1
        if self.depth > MAX_CONDITION_DEPTH:
            raise MacroError(f"#if condition nested more than {MAX_CONDITION_DEPTH} levels deep")

    def conditional(self, _):
        self._enter()
        value = self.binary(0)
        if self._peek() == "?":
            self._take("?")
            then = self.conditional(0)
            self._take(":")
            other = self.conditional(0)
            value = then if value else other
        self.depth -= 1
        return value

    def binary(self, level):
        if level == len(_BINARY_LEVELS):
            return self.unary()
        value = self.binary(level + 1)
        while self._peek() in _BINARY_LEVELS[level]:
            op = self._take()
            right = self.binary(level + 1)
            value = _apply(op, value, right)
        return value

    def unary(self):
        token = self._peek()
        if token in ("-", "+", "~", "!"):
            self._take()
            self._enter()
            value = self.unary()
            self.depth -= 1
            return _wrap64({"-": -value, "+": value, "~": ~value, "!": int(not value)}[token])
        if token == "(":
            self._take("(")
            value = self.conditional(0)
            self._take(")")
            return value
        if token is None:
            raise MacroError("#if condition ends too early")
        self._take()
        if token[:1].isdigit():
            return _integer(token)
        if _is_ident(token):
            return 0  # names that are not macros are 0, as in C
        raise MacroError(f"unexpected {token!r} in #if condition")


def _apply(op, left, right):
    if op == "||":
        return int(bool(left) or bool(right))
    if op == "&&":
        return int(bool(left) and bool(right))
    if op in ("/", "%"):
        if right == 0:
            raise MacroError("division by zero in #if condition")
        quotient = abs(left) // abs(right) * (1 if (left >= 0) == (right >= 0) else -1)
        return _wrap64(quotient if op == "/" else left - quotient * right)
    if op in ("<<", ">>"):
        amount = right & 63
        return _wrap64(left << amount) if op == "<<" else left >> amount
    result = {
        "|": lambda: left | right, "^": lambda: left ^ right, "&": lambda: left & right,
        "==": lambda: int(left == right), "!=": lambda: int(left != right), "<": lambda: int(left < right),
        ">": lambda: int(left > right), "<=": lambda: int(left <= right), ">=": lambda: int(left >= right),
        "+": lambda: left + right, "-": lambda: left - right, "*": lambda: left * right,
    }[op]()
    return _wrap64(result)

