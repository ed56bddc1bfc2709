"""AST nodes of the P4 frontend.

One small generic class, :class:`Node`, with a ``kind`` string, a ``loc``
(index of the source line, see :class:`testbed.p4.frontend.preprocessor.SourceLine`)
and keyword attributes.  Expressions additionally get a ``type`` attribute
from the checker.
"""


class Node:
    """An AST node: ``kind``, ``loc`` and arbitrary attributes."""

    def __init__(self, kind, loc, **attributes):
        self.kind = kind
        self.loc = loc
        self.type = None
        self.__dict__.update(attributes)

    def __repr__(self):
        fields = ", ".join(f"{k}={v!r}" for k, v in self.__dict__.items() if k not in ("kind", "loc", "type"))
        return f"{self.kind}({fields})"


def annotation_value(annotations, name):
    """Return the body text of annotation ``@name(...)`` (a string literal's contents), or None."""
    for annotation in annotations or ():
        if annotation.name == name:
            return annotation.text
    return None


def has_annotation(annotations, name):
    """True if ``@name`` is among ``annotations``."""
    return any(a.name == name for a in annotations or ())


class Annotation:
    """``@name(body)``: ``text`` is the body as source text (string quotes removed if it is one string)."""

    def __init__(self, name, body_tokens):
        self.name = name
        self.tokens = body_tokens
        if len(body_tokens) == 1 and body_tokens[0].kind == "STRING_LITERAL":
            self.text = body_tokens[0].value[1:-1]
        else:
            self.text = " ".join(str(t.value) for t in body_tokens)

    def source(self):
        """The annotation as P4 source text (for P4Info annotation lists)."""
        if not self.tokens:
            return f"@{self.name}"
        return f"@{self.name}(" + "".join(str(t.value) for t in self.tokens) + ")"

    def __repr__(self):
        return f"@{self.name}({self.text})"


_BINARY_SYMBOLS = {
    "lor": "||", "land": "&&", "eq": "==", "ne": "!=", "lt": "<", "gt": ">", "le": "<=", "ge": ">=",
    "bor": "|", "bxor": "^", "band": "&", "shl": "<<", "shr": ">>", "add": "+", "sub": "-",
    "sadd": "|+|", "ssub": "|-|", "concat": "++", "mul": "*", "div": "/", "mod": "%",
}


def expression_text(node):
    """Return P4 source text of an expression, the way p4c names table keys."""
    kind = node.kind
    if kind == "name":
        return node.name
    if kind == "member":
        return f"{expression_text(node.expr)}.{node.member}"
    if kind == "index":
        return f"{expression_text(node.expr)}[{expression_text(node.index)}]"
    if kind == "slice":
        return f"{expression_text(node.expr)}[{expression_text(node.hi)}:{expression_text(node.lo)}]"
    if kind == "int":
        return node.text
    if kind == "bool":
        return "true" if node.value else "false"
    if kind == "call":
        args = ", ".join(expression_text(a) for a in node.args)
        return f"{expression_text(node.func)}({args})"
    if kind == "binop":
        return f"{expression_text(node.left)} {_BINARY_SYMBOLS[node.op]} {expression_text(node.right)}"
    if kind == "unop":
        return f"{node.op}{expression_text(node.expr)}"
    if kind == "type_member":
        return f"{node.type_name}.{node.member}"
    if kind == "error_member":
        return f"error.{node.member}"
    if kind == "cast":
        return f"({node.type_text}){expression_text(node.expr)}"
    return kind


def nested_statements(statement):
    """The statements directly nested in ``statement`` (block members, branches, loop parts)."""
    kind = statement.kind
    if kind == "block":
        return list(statement.statements)
    if kind == "if":
        return [s for s in (statement.then, statement.otherwise) if s is not None]
    if kind == "switch":
        return [case.body for case in statement.cases if case.body is not None]
    if kind == "for":
        return list(statement.init) + list(statement.updates) + [statement.body]
    if kind == "for_in":
        return [statement.body]
    return []


def walk_statements(statement):
    """Yield ``statement`` and every statement nested in it, depth first, in source order."""
    stack = [statement]
    while stack:
        current = stack.pop()
        if current is None:
            continue
        yield current
        stack.extend(reversed(nested_statements(current)))


def walk_nodes(node):
    """Yield ``node`` and every :class:`Node` reachable from its attributes (expressions included)."""
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, Node):
            yield current
            for key, value in current.__dict__.items():
                if key in ("type", "symbol") or key.startswith("_"):
                    continue
                if isinstance(value, (Node, list, tuple)):
                    stack.append(value)
        elif isinstance(current, (list, tuple)):
            stack.extend(reversed(current))
