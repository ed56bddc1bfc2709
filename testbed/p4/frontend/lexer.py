"""Tokenizer for preprocessed P4 lines, with the context the LALR grammar needs.

P4's grammar is not context-free without knowing which names are types (as in
C).  The lexer therefore makes two passes: it first collects every declared
type name (headers, structs, enums, typedefs, externs, parsers, controls,
packages and generic type parameters), then emits ``TYPE_IDENT`` for those
names and ``IDENT`` for the rest (a name after ``.`` is always ``IDENT``).
It also tells generic angle brackets (``bit<8>``, ``register<bit<32>>``)
from the relational operators: they become ``TLT``/``TGT`` and a ``>>``
that closes two generic lists is split.  Annotations ``@name(...)`` become
one ``ANNOTATION`` token whose value is ``(name, body tokens)``.

Tokens carry ``line`` = index into the list of :class:`SourceLine` so the
original file and line of any token can be recovered.
"""
import re

from testbed.errors import P4LoadError

KEYWORDS = {
    "action", "actions", "apply", "bool", "bit", "const", "control", "default", "else", "entries",
    "enum", "error", "exit", "extern", "false", "header", "header_union", "if", "in", "inout", "int",
    "key", "match_kind", "out", "package", "parser", "return", "select", "state", "string", "struct",
    "switch", "table", "this", "transition", "true", "tuple", "type", "typedef", "varbit", "void",
    "value_set", "abstract", "list", "_", "for", "break", "continue",
}

# Longest first so that "&&&" wins over "&&" and "|+|" over "|".
PUNCTUATION = [
    "|+|=", "|-|=", "<<=", ">>=", "...",
    "&&&", "|+|", "|-|", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "++", "..",
    "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "#",
    "+", "-", "*", "/", "%", "&", "|", "^", "~", "!", "?", ":", ";", ",", ".", "(", ")",
    "{", "}", "[", "]", "<", ">", "=", "@",
]

_TOKEN_RE = re.compile(
    r"(?P<ws>\s+)"
    r"|(?P<number>(?:\d+[ws])?(?:0[xX][0-9a-fA-F_]+|0[bB][01_]+|0[oO][0-7_]+|0[dD][0-9_]+|\d[\d_]*))"
    r"|(?P<ident>[A-Za-z_]\w*)"
    r'|(?P<string>"(?:[^"\\]|\\.)*")'
    r"|(?P<punct>" + "|".join(re.escape(p) for p in PUNCTUATION) + r")"
)

_TYPE_DECL_KEYWORDS = {"header", "struct", "header_union", "extern", "parser", "control", "package", "enum"}
_TYPE_START = {"bit", "int", "varbit", "bool", "TYPE_IDENT", "tuple", "string", "error", "void"}


class RawToken:
    """A token before lark sees it: ``kind`` is the grammar terminal-ish class."""

    __slots__ = ("kind", "value", "line", "column")

    def __init__(self, kind, value, line, column):
        self.kind = kind
        self.value = value
        self.line = line
        self.column = column

    def __repr__(self):
        return f"RawToken({self.kind}, {self.value!r})"


MAX_LITERAL_BITS = 8192  # integer literals; type widths are at most 4096 bits
MAX_LITERAL_WIDTH = 4096
MAX_PROGRAM_TOKENS = 100_000  # after preprocessing; p4src/f10.p4 has 5,600


class LiteralError(ValueError):
    """An integer literal the target cannot take (too large, or a bad width)."""


_BITS_PER_DIGIT = {16: 4, 2: 1, 8: 3, 10: 3.33}


def parse_integer(text):
    """Parse a P4 integer literal.

    Returns:
        (value, width or None, signed): ``8w5`` -> (5, 8, False); ``5`` -> (5, None, False).

    Raises:
        LiteralError: a value of more than MAX_LITERAL_BITS bits or a width beyond
            MAX_LITERAL_WIDTH (checked before any conversion, so a literal of thousands of
            digits costs nothing).
    """
    width = None
    signed = False
    match = re.match(r"(\d+)([ws])(.*)$", text)
    if match:
        if len(match.group(1)) > 5 or not 0 < int(match.group(1)) <= MAX_LITERAL_WIDTH:
            raise LiteralError(f"integer literal width {match.group(1)[:10]} out of range "
                               f"(1..{MAX_LITERAL_WIDTH})")
        width = int(match.group(1))
        signed = match.group(2) == "s"
        text = match.group(3)
    text = text.replace("_", "")
    lowered = text.lower()
    base = {"0x": 16, "0b": 2, "0o": 8, "0d": 10}.get(lowered[:2])
    digits = lowered[2:] if base else lowered
    base = base or 10
    if not digits:
        raise LiteralError(f"integer literal {text[:20]!r} has no digits")
    if len(digits.lstrip("0")) * _BITS_PER_DIGIT[base] > MAX_LITERAL_BITS:
        raise LiteralError(f"integer literal of more than {MAX_LITERAL_BITS} bits")
    try:
        value = int(digits, base)
    except ValueError:
        raise LiteralError(f"malformed integer literal {text[:20]!r}") from None
    return value, width, signed


class Lexer:
    """Turns preprocessed lines (macros already expanded) into tokens for the grammar.

    Args:
        lines: list of :class:`testbed.p4.frontend.preprocessor.SourceLine`.
    """

    def __init__(self, lines):
        self.lines = lines

    def error(self, message, line_index):
        """Return a P4LoadError located at line ``line_index``."""
        source = self.lines[line_index]
        return P4LoadError(message, source.filename, source.line)

    def _scan_line(self, text, line_index):
        tokens = []
        pos = 0
        while pos < len(text):
            match = _TOKEN_RE.match(text, pos)
            if not match:
                raise self.error(f"unexpected character {text[pos]!r}", line_index)
            kind = match.lastgroup
            value = match.group(0)
            column = pos + 1
            pos = match.end()
            if kind == "ws":
                continue
            if kind == "ident":
                kind = value if value in KEYWORDS else "IDENT"
            elif kind == "number":
                kind = "INTEGER"
            elif kind == "string":
                kind = "STRING_LITERAL"
            else:
                kind = value
            tokens.append(RawToken(kind, value, line_index, column))
        return tokens

    def tokenize(self):
        """Return the list of :class:`RawToken` ready for the parser.

        Raises:
            P4LoadError: an unknown character or malformed annotation.
        """
        raw = []
        for index, source in enumerate(self.lines):
            if source.text.strip():
                raw.extend(self._scan_line(source.text, index))
                if len(raw) > MAX_PROGRAM_TOKENS:  # the parser's time and memory grow with the tokens
                    raise self.error(f"unsupported construct: the program has more than {MAX_PROGRAM_TOKENS} "
                                     f"tokens (MAX_PROGRAM_TOKENS)", index)
        raw = self._fold_annotations(raw)
        type_names = self._collect_type_names(raw)
        self._classify(raw, type_names)
        self._mark_entry_priorities(raw)
        return raw

    @staticmethod
    def _mark_entry_priorities(tokens):
        """Inside ``entries = { ... }``, ``priority =`` at the start of an entry becomes one PRIORITY token.

        ``priority`` is not a keyword of P4_16 (a variable may have that name); the
        grammar's ``entryPriority`` (P4_16 1.2.4) only exists at the start of a table entry.
        """
        depth = 0
        for i, token in enumerate(tokens):
            if depth == 0:
                if token.kind == "entries" and i + 2 < len(tokens) and tokens[i + 1].kind == "=" and \
                        tokens[i + 2].kind == "{":
                    depth = -1  # armed: the next '{' opens the list
                continue
            if token.kind == "{":
                depth = 1 if depth < 0 else depth + 1
            elif token.kind == "}":
                depth -= 1
            elif depth == 1 and token.kind == "IDENT" and token.value == "priority" and i + 1 < len(tokens) \
                    and tokens[i + 1].kind == "=" and tokens[i - 1].kind in ("{", ";", "const", "ANNOTATION"):
                token.kind = "PRIORITY"

    def _fold_annotations(self, tokens):
        """Replace ``@name`` and ``@name(...)`` / ``@name[...]`` by one ANNOTATION token."""
        out = []
        i = 0
        while i < len(tokens):
            token = tokens[i]
            if token.kind != "@":
                out.append(token)
                i += 1
                continue
            if i + 1 >= len(tokens) or not re.match(r"[A-Za-z_]\w*$", tokens[i + 1].value):
                raise self.error("malformed annotation after '@'", token.line)
            name = tokens[i + 1].value
            i += 2
            body = []
            if name == "pragma":
                line = token.line
                while i < len(tokens) and tokens[i].line == line:
                    body.append(tokens[i])
                    i += 1
            elif i < len(tokens) and tokens[i].kind in ("(", "[") and tokens[i].line == tokens[i - 1].line:
                opening = tokens[i].kind
                closing = ")" if opening == "(" else "]"
                depth = 0
                while i < len(tokens):
                    if tokens[i].kind == opening:
                        depth += 1
                    elif tokens[i].kind == closing:
                        depth -= 1
                    body.append(tokens[i])
                    i += 1
                    if depth == 0:
                        break
                if depth:
                    raise self.error(f"unterminated annotation @{name}", token.line)
                body = body[1:-1]
            out.append(RawToken("ANNOTATION", (name, body), token.line, token.column))
        return out

    @staticmethod
    def _collect_type_names(tokens):
        names = set()
        n = len(tokens)
        for i, token in enumerate(tokens):
            kind = token.kind
            if i > 0 and tokens[i - 1].kind == ".":
                continue  # a member name, even if it is spelled like a keyword
            if kind in _TYPE_DECL_KEYWORDS:
                j = i + 1
                if kind == "enum" and j < n and tokens[j].kind in ("bit", "int"):
                    # serializable enum: skip the underlying type bit<W>
                    j += 1
                    if j < n and tokens[j].kind == "<":
                        while j < n and tokens[j].kind != ">":
                            j += 1
                        j += 1
                if kind == "extern" and j < n and tokens[j].kind == "IDENT" and j + 1 < n \
                        and tokens[j + 1].kind in ("{", "<"):
                    names.add(tokens[j].value)
                elif kind != "extern" and j < n and tokens[j].kind == "IDENT":
                    names.add(tokens[j].value)
            elif kind in ("typedef", "type") and (i == 0 or tokens[i - 1].kind in (";", "}", "{", "ANNOTATION")):
                j = i + 1
                depth = 0
                while j < n and not (tokens[j].kind == ";" and depth == 0):
                    if tokens[j].kind in ("(", "[", "{"):
                        depth += 1
                    elif tokens[j].kind in (")", "]", "}"):
                        depth -= 1
                        if depth < 0:
                            break
                    j += 1
                if j < n and tokens[j - 1].kind == "IDENT":
                    names.add(tokens[j - 1].value)
            elif kind == "<" and i > 0 and tokens[i - 1].kind == "IDENT":
                # generic parameter list of a declaration: name<A, B>( or name<A> {
                j = i + 1
                params = []
                while j + 1 < n and tokens[j].kind == "IDENT" and tokens[j + 1].kind in (",", ">"):
                    params.append(tokens[j].value)
                    if tokens[j + 1].kind == ">":
                        break
                    j += 2
                if params and j + 2 < n and tokens[j + 1].kind == ">" and tokens[j + 2].kind in ("(", "{"):
                    # only declarations: the token before the name is a type, 'extern', 'parser', etc.
                    before = tokens[i - 2].kind if i >= 2 else ""
                    if before in _TYPE_DECL_KEYWORDS or before in (
                            "extern", "parser", "control", "package", "IDENT", "void", ">", "bool", "bit", "int"):
                        names.update(params)
                        token.kind = "DLT"
                        tokens[j + 1].kind = "DGT"
        return names

    @staticmethod
    def _closes_before_call(tokens, start):
        """True if the '<' at ``start`` closes with '>' right before '(' (a generic call f<T>(...))."""
        depth = 0
        for j in range(start, min(len(tokens), start + 64)):
            kind = tokens[j].kind
            if kind == "<":
                depth += 1
            elif kind in (">", ">>"):
                depth -= 1 if kind == ">" else 2
                if depth <= 0:
                    return depth == 0 and j + 1 < len(tokens) and tokens[j + 1].kind == "("
            elif kind in (";", "{", "}", ")", "&&", "||", "==", "!="):
                return False
        return False

    def _classify(self, tokens, type_names):
        """Mark type names, generic angle brackets and split '>>' in generic context."""
        generic_depth = 0
        i = 0
        while i < len(tokens):
            token = tokens[i]
            previous = tokens[i - 1] if i > 0 else None
            if previous is not None and previous.kind == "." and token.kind in KEYWORDS:
                token.kind = "IDENT"
            elif token.kind == "IDENT" and token.value in type_names \
                    and not (previous is not None and previous.kind == "."):
                token.kind = "TYPE_IDENT"
            elif token.kind == "<" and previous is not None:
                following = tokens[i + 1] if i + 1 < len(tokens) else None
                following_kind = following.kind if following is not None else ""
                if following is not None and following_kind == "IDENT" and following.value in type_names:
                    following_kind = "TYPE_IDENT"
                if previous.kind in ("bit", "int", "varbit", "TYPE_IDENT", "tuple") or (
                        previous.kind == "IDENT" and following_kind in _TYPE_START
                        and self._closes_before_call(tokens, i)):
                    token.kind = "TLT"
                    generic_depth += 1
            elif token.kind == ">" and generic_depth > 0:
                token.kind = "TGT"
                generic_depth -= 1
            elif token.kind == ">>" and generic_depth > 0:
                token.kind = "TGT"
                token.value = ">"
                generic_depth -= 1
                second = RawToken(">", ">", token.line, token.column + 1)
                tokens.insert(i + 1, second)
                if generic_depth > 0:
                    second.kind = "TGT"
                    generic_depth -= 1
                i += 2
                continue
            elif token.kind == "DGT":
                token.kind = "TGT"
            elif token.kind in (";", "{", "}") and generic_depth:
                raise self.error("unbalanced '<' in a type", token.line)
            i += 1
