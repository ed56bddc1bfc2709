"""Parse preprocessed P4 source into the AST of :mod:`testbed.p4.frontend.ast`.

Uses lark's LALR parser over the grammar in ``p4.lark`` with the token stream
of :mod:`testbed.p4.frontend.lexer`, then a transformer that builds
:class:`~testbed.p4.frontend.ast.Node` objects.
"""
import functools
import hashlib
import os

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import UnexpectedInput, UnexpectedToken, VisitError
from lark.lexer import Lexer as LarkLexer

from testbed.errors import P4LoadError
from testbed.p4.frontend.ast import Annotation, Node
from testbed.p4.frontend.lexer import Lexer, LiteralError, RawToken, parse_integer

GRAMMAR_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "p4.lark")


class _TokenListLexer(LarkLexer):
    """Lark 'lexer' that hands over an already built token list."""

    def __init__(self, lexer_conf):
        pass

    def lex(self, data):
        return iter(data)


def _grammar_cache_path(grammar):
    """Where lark keeps its analysis of ``grammar`` (about 1 s saved per process).

    A per-user cache named by the grammar's hash, like the p4c cache, so nothing
    accumulates in /tmp; lark itself re-checks the hash stored in the file.
    """
    folder = os.environ.get("TESTBED_CACHE_DIR", os.path.expanduser("~/.cache/testbed"))
    digest = hashlib.sha256(grammar.encode()).hexdigest()[:16]
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError:
        return False  # no writable cache: analyse the grammar every time
    return os.path.join(folder, f"p4-grammar-{digest}.lark-cache")


@functools.lru_cache(maxsize=1)
def _lark_parser():
    with open(GRAMMAR_PATH, encoding="utf-8") as handle:
        grammar = handle.read()
    parser = Lark(grammar, parser="lalr", lexer=_TokenListLexer, propagate_positions=True, maybe_placeholders=False,
                  cache=_grammar_cache_path(grammar))
    literal_to_terminal = {}
    for terminal in parser.terminals:
        pattern = terminal.pattern
        if pattern.type == "str":
            literal_to_terminal[pattern.value] = terminal.name
    return parser, literal_to_terminal


_DECLARED = {"IDENT", "TYPE_IDENT", "INTEGER", "STRING_LITERAL", "ANNOTATION", "TLT", "TGT", "DLT", "PRIORITY"}


def _to_lark_tokens(raw_tokens, literal_to_terminal, lexer, annotation_bodies):
    tokens = []
    for raw in raw_tokens:
        if raw.kind in _DECLARED:
            name = raw.kind
        else:
            name = literal_to_terminal.get(raw.kind)
            if name is None:
                raise lexer.error(f"unsupported construct: {raw.value!r} is not accepted by the embedded target",
                                  raw.line)
        value = raw.value if raw.kind != "ANNOTATION" else raw.value[0]
        token = Token(name, value, line=raw.line, column=raw.column, end_line=raw.line, end_column=raw.column)
        if raw.kind == "ANNOTATION":
            token = Token(name, "@" + raw.value[0], line=raw.line, column=raw.column, end_line=raw.line,
                          end_column=raw.column)
            annotation_bodies[id(token)] = (token, raw.value)
        tokens.append(token)
    return tokens


_UNSUPPORTED_KEYWORDS = {
    "value_set": "value_set", "abstract": "abstract methods", "list": "list types",
}


def parse_source(lines):
    """Parse preprocessed ``lines`` into a ``program`` Node.

    Args:
        lines: list of SourceLine from the preprocessor (macros expanded).

    Returns:
        Node of kind ``program`` with attribute ``declarations``.

    Raises:
        P4LoadError: syntax errors and unsupported constructs, with file:line.
    """
    lexer = Lexer(lines)
    raw_tokens = lexer.tokenize()
    for raw in raw_tokens:
        if raw.kind in _UNSUPPORTED_KEYWORDS:
            raise lexer.error(f"unsupported construct: {_UNSUPPORTED_KEYWORDS[raw.kind]}", raw.line)
    parser, literal_to_terminal = _lark_parser()
    annotation_bodies = {}  # per parse, so that parses in several threads do not interfere
    tokens = _to_lark_tokens(raw_tokens, literal_to_terminal, lexer, annotation_bodies)
    try:
        tree = parser.parse(tokens)
    except UnexpectedToken as error:
        token = error.token
        if token.type == "$END":
            last = raw_tokens[-1] if raw_tokens else None
            raise lexer.error("syntax error: unexpected end of input", last.line if last else 0) from None
        shown = str(token.value)
        shown = shown if len(shown) <= 40 else shown[:37] + "..."
        message = f"syntax error: unexpected {shown!r}"
        position = _token_position(tokens, token)
        if position > 0 and tokens[position - 1].type == "IDENT" and token.type in ("IDENT", "TYPE_IDENT"):
            message += f" ({tokens[position - 1]!s} is not a known type)"
        elif token.type == "IDENT" and position + 1 < len(tokens) and tokens[position + 1].type in (
                "IDENT", "TYPE_IDENT"):
            message += f" ({shown} is not a known type)"
        raise P4LoadError(message, lines[token.line].filename, lines[token.line].line, token.column) from None
    except UnexpectedInput as error:
        line = getattr(error, "line", 0) or 0
        line = line if 0 <= line < len(lines) else 0
        raise P4LoadError(f"syntax error ({type(error).__name__})", lines[line].filename, lines[line].line) from None
    _check_depth(tree, lines)
    builder = _AstBuilder(annotation_bodies)
    try:
        program = builder.transform(tree)
    except VisitError as error:
        meta = getattr(error.obj, "meta", None)
        line = getattr(meta, "line", 0) if meta is not None and not getattr(meta, "empty", True) else 0
        line = line if 0 <= line < len(lines) else 0
        original = error.orig_exc
        if isinstance(original, P4LoadError):
            if original.filename is None:
                raise P4LoadError(original.message, lines[line].filename, lines[line].line) from None
            raise original from None
        raise P4LoadError(f"internal error of the embedded target while reading this construct "
                          f"({type(original).__name__})", lines[line].filename, lines[line].line) from None
    return program


MAX_SYNTAX_DEPTH = 200  # nesting of the syntax tree (expressions, statements, blocks)


def _check_depth(tree, lines):
    """Refuse syntax trees nested deeper than MAX_SYNTAX_DEPTH, naming where (no RecursionError later)."""
    stack = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_SYNTAX_DEPTH:
            line = _first_line(node)
            line = line if 0 <= line < len(lines) else 0
            raise P4LoadError(f"unsupported construct: nesting deeper than {MAX_SYNTAX_DEPTH} levels "
                              f"(expressions, statements or blocks)", lines[line].filename, lines[line].line)
        for child in getattr(node, "children", ()):
            if hasattr(child, "children"):
                stack.append((child, depth + 1))


def _first_line(node):
    meta = getattr(node, "meta", None)
    if meta is not None and not getattr(meta, "empty", True):
        return meta.line
    for child in getattr(node, "children", ()):
        line = getattr(child, "line", None)
        if isinstance(line, int):
            return line
        if hasattr(child, "children"):
            return _first_line(child)
    return 0


def _token_position(tokens, token):
    for index, candidate in enumerate(tokens):
        if candidate is token:
            return index
    return -1


def _loc(meta, children=()):
    if not getattr(meta, "empty", True):
        return meta.line
    for child in children:
        if isinstance(child, Node):
            return child.loc
        if isinstance(child, Token):
            return child.line
    return 0


def _name(value):
    return str(value.name) if isinstance(value, Node) else str(value)


@v_args(meta=True)
class _AstBuilder(Transformer):
    """Builds AST nodes from the lark parse tree."""

    def __init__(self, annotation_bodies):
        super().__init__()
        self.annotation_bodies = annotation_bodies
        self._direct_applies = []  # instances of Type.apply(...) calls not yet given to their control/parser

    # ------------------------------------------------------------ generic helpers
    def start(self, meta, children):
        return Node("program", 0, declarations=[c for c in children if isinstance(c, Node) and c.kind != "empty"])

    def empty(self, meta, children):
        return Node("empty", _loc(meta, children))

    def annotations(self, meta, children):
        result = []
        for token in children:
            _token, value = self.annotation_bodies[id(token)]
            result.append(Annotation(value[0], value[1]))
        return result

    def name(self, meta, children):
        child = children[0]
        if isinstance(child, Node):
            return child
        return Node("id", child.line, name=str(child))

    def _keyword_name(word):  # noqa: N805 - factory used in the class body
        def build(self, meta, children):
            return Node("id", _loc(meta, children), name=word)
        return build

    for _word in ("type", "key", "actions", "entries", "state", "apply"):
        locals()["kw_" + _word] = _keyword_name(_word)
    del _word

    def member(self, meta, children):
        return str(children[0])

    def name_list(self, meta, children):
        return [c.name for c in children]

    # ------------------------------------------------------------ types
    def named_type(self, meta, children):
        return Node("named_type", children[0].line, name=str(children[0]))

    def specialized_type(self, meta, children):
        return Node("specialized_type", children[0].line, name=str(children[0]), args=children[2])

    def stack_type(self, meta, children):
        return Node("stack_type", _loc(meta, children), element=children[0], size=children[1])

    def tuple_type(self, meta, children):
        return Node("tuple_type", _loc(meta, children), args=children[1])

    def type_args(self, meta, children):
        return list(children)

    def dontcare_type(self, meta, children):
        return Node("dontcare_type", _loc(meta, children))

    def bool_type(self, meta, children):
        return Node("bool_type", _loc(meta, children))

    def error_type(self, meta, children):
        return Node("error_type", _loc(meta, children))

    def string_type(self, meta, children):
        return Node("string_type", _loc(meta, children))

    def infint_type(self, meta, children):
        return Node("infint_type", _loc(meta, children))

    def bit1_type(self, meta, children):
        return Node("bit_type", _loc(meta, children), width=Node("int", _loc(meta, children), value=1, width=None,
                                                                 signed=False, text="1"), signed=False)

    def bit_type(self, meta, children):
        return Node("bit_type", _loc(meta, children), width=children[1], signed=False)

    def int_type(self, meta, children):
        return Node("bit_type", _loc(meta, children), width=children[1], signed=True)

    def varbit_type(self, meta, children):
        return Node("varbit_type", _loc(meta, children), width=children[1])

    def width(self, meta, children):
        child = children[0]
        if isinstance(child, Token):
            return self.integer(meta, [child])
        return child

    def void_type(self, meta, children):
        return Node("void_type", _loc(meta, children))

    def type_or_void(self, meta, children):
        return children[0]

    def type_params(self, meta, children):
        return [c.name for c in children if isinstance(c, Node)]

    # ------------------------------------------------------------ declarations
    def const_decl(self, meta, children):
        annotations, type_ref, name, value = children
        return Node("const", name.loc, name=name.name, type_ref=type_ref, value=value, annotations=annotations)

    def typedef_decl(self, meta, children):
        annotations, type_ref, name = children
        return Node("typedef", name.loc, name=name.name, type_ref=type_ref, annotations=annotations)

    def newtype_decl(self, meta, children):
        node = self.typedef_decl(meta, children)
        node.kind = "typedef"
        return node

    def _composite(self, kind, children):
        annotations, name = children[0], children[1]
        return Node(kind, name.loc, name=name.name, fields=list(children[2:]), annotations=annotations)

    def header_decl(self, meta, children):
        return self._composite("header", children)

    def struct_decl(self, meta, children):
        return self._composite("struct", children)

    def union_decl(self, meta, children):
        return self._composite("header_union", children)

    def field(self, meta, children):
        annotations, type_ref, name = children
        return Node("field", name.loc, name=name.name, type_ref=type_ref, annotations=annotations)

    def enum_decl(self, meta, children):
        annotations, name, members = children
        return Node("enum", name.loc, name=name.name, members=members, type_ref=None, annotations=annotations)

    def ser_enum_decl(self, meta, children):
        annotations, type_ref, name = children[0], children[1], children[2]
        members = [(m.name, m.value) for m in children[3:]]
        return Node("enum", name.loc, name=name.name, members=members, type_ref=type_ref, annotations=annotations)

    def enum_member(self, meta, children):
        return Node("enum_member", children[0].loc, name=children[0].name, value=children[1])

    def error_decl(self, meta, children):
        return Node("error_decl", _loc(meta, children), members=children[-1])

    def match_kind_decl(self, meta, children):
        return Node("match_kind_decl", _loc(meta, children), members=children[-1])

    def _split_generic(self, children):
        type_params = []
        rest = []
        for child in children:
            if isinstance(child, list) and child and isinstance(child[0], str):
                type_params = child
            else:
                rest.append(child)
        return type_params, rest

    def extern_object_decl(self, meta, children):
        annotations, name = children[0], children[1]
        type_params, rest = self._split_generic(children[2:])
        return Node("extern_object", name.loc, name=name.name, type_params=type_params,
                    methods=[m for m in rest if isinstance(m, Node)], annotations=annotations)

    def method_proto(self, meta, children):
        annotations, return_type, name = children[0], children[1], children[2]
        type_params, rest = self._split_generic(children[3:])
        return Node("method", name.loc, name=name.name, return_type=return_type, type_params=type_params,
                    params=rest[0], annotations=annotations)

    def constructor_proto(self, meta, children):
        annotations, name, params = children
        return Node("constructor", name.line, name=str(name), params=params, annotations=annotations)

    def extern_function_decl(self, meta, children):
        annotations, return_type, name = children[0], children[1], children[2]
        type_params, rest = self._split_generic(children[3:])
        return Node("extern_function", name.loc, name=name.name, return_type=return_type,
                    type_params=type_params, params=rest[0], annotations=annotations)

    def function_decl(self, meta, children):
        annotations, return_type, name = children[0], children[1], children[2]
        self._take_direct_applies(f"function {name.name}", False)
        type_params, rest = self._split_generic(children[3:])
        return Node("function", name.loc, name=name.name, return_type=return_type, type_params=type_params,
                    params=rest[0], body=rest[1], annotations=annotations)

    def parameters(self, meta, children):
        return list(children)

    def parameter(self, meta, children):
        annotations, direction, type_ref, name = children[:4]
        default = children[4] if len(children) > 4 else None
        return Node("param", name.loc, name=name.name, direction=direction, type_ref=type_ref, default=default,
                    annotations=annotations)

    def direction(self, meta, children):
        return str(children[0]) if children else ""

    def _type_declaration(self, kind, children):
        """A parser/control/package type declaration: ``annotations name [<type params>] (params)``."""
        annotations, name = children[0], children[1]
        type_params, rest = self._split_generic(children[2:])
        return Node(kind, name.loc, name=name.name, type_params=type_params, params=rest[0],
                    annotations=annotations)

    def parser_type_decl(self, meta, children):
        return self._type_declaration("parser_type", children)

    def parser_decl(self, meta, children):
        annotations, name = children[0], children[1]
        type_params, rest = self._split_generic(children[2:])
        params, ctor_params = rest[0], rest[1]
        locals_ = [c for c in rest[2:] if c.kind != "state"] + self._take_direct_applies("", True)
        states = [c for c in rest[2:] if c.kind == "state"]
        return Node("parser", name.loc, name=name.name, type_params=type_params, params=params, locals=locals_,
                    states=states, annotations=annotations, ctor_params=ctor_params.params)

    def ctor_params(self, meta, children):
        return Node("ctor_params", _loc(meta, children), params=children[0] if children else [])

    def parser_state(self, meta, children):
        annotations, name = children[0], children[1]
        statements = [c for c in children[2:] if not c.kind.startswith("transition")]
        transitions = [c for c in children[2:] if c.kind.startswith("transition")]
        transition = transitions[0] if transitions else None
        return Node("state", name.loc, name=name.name, statements=statements, transition=transition,
                    annotations=annotations)

    def transition_direct(self, meta, children):
        return Node("transition_direct", children[0].loc, target=children[0].name)

    def transition_select(self, meta, children):
        return Node("transition_select", _loc(meta, children), exprs=children[0], cases=list(children[1:]))

    def select_case(self, meta, children):
        return Node("select_case", children[1].loc, keyset=children[0], target=children[1].name)

    def tuple_keyset(self, meta, children):
        return Node("tuple_keyset", _loc(meta, children), items=list(children))

    def mask_keyset(self, meta, children):
        return Node("mask", _loc(meta, children), value=children[0], mask=children[1])

    def range_keyset(self, meta, children):
        return Node("range", _loc(meta, children), low=children[0], high=children[1])

    def default_keyset(self, meta, children):
        return Node("default", _loc(meta, children))

    def dontcare_keyset(self, meta, children):
        return Node("dontcare", _loc(meta, children))

    def control_type_decl(self, meta, children):
        return self._type_declaration("control_type", children)

    def control_decl(self, meta, children):
        annotations, name = children[0], children[1]
        type_params, rest = self._split_generic(children[2:])
        params, ctor_params = rest[0], rest[1]
        body = rest[-1]
        return Node("control", name.loc, name=name.name, type_params=type_params, params=params,
                    locals=list(rest[2:-1]) + self._take_direct_applies("", True), body=body,
                    annotations=annotations, ctor_params=ctor_params.params)

    def package_decl(self, meta, children):
        return self._type_declaration("package", children)

    def action_decl(self, meta, children):
        annotations, name, params, body = children
        self._take_direct_applies(f"action {name.name}", False)
        return Node("action", name.loc, name=name.name, params=params, body=body, annotations=annotations)

    def instantiation(self, meta, children):
        annotations, type_ref, args, name = children
        return Node("instance", name.loc, name=name.name, type_ref=type_ref, args=args, annotations=annotations)

    def variable_decl(self, meta, children):
        annotations, type_ref, name = children[:3]
        init = children[3] if len(children) > 3 else None
        return Node("variable", name.loc, name=name.name, type_ref=type_ref, init=init, annotations=annotations)

    # ------------------------------------------------------------ tables
    def table_decl(self, meta, children):
        annotations, name = children[0], children[1]
        return Node("table", name.loc, name=name.name, properties=list(children[2:]), annotations=annotations)

    def key_property(self, meta, children):
        return Node("key_property", _loc(meta, children), elements=list(children))

    def actions_property(self, meta, children):
        return Node("actions_property", _loc(meta, children), refs=list(children))

    def entries_property(self, meta, children):
        annotations, const_flag = children[0], children[1]
        return Node("entries_property", _loc(meta, children), const=const_flag, entries=list(children[2:]),
                    annotations=annotations)

    def simple_property(self, meta, children):
        annotations, const_flag, name, value = children
        return Node("simple_property", name.line, name=str(name), const=const_flag, value=value,
                    annotations=annotations)

    def const_flag(self, meta, children):
        return bool(children)

    def key_element(self, meta, children):
        expr, match_kind, annotations = children
        return Node("key_element", expr.loc, expr=expr, match_kind=match_kind.name, annotations=annotations)

    def action_ref(self, meta, children):
        annotations, name = children[0], children[1]
        args = children[2] if len(children) > 2 else None
        return Node("action_ref", name.loc, name=name.name, args=args, annotations=annotations)

    def table_entry(self, meta, children):
        annotations, const_flag, priority, keyset, action, annotations2 = children
        return Node("table_entry", keyset.loc if isinstance(keyset, Node) else action.loc, keyset=keyset,
                    action=action, annotations=list(annotations) + list(annotations2), const=const_flag,
                    priority=priority)

    def entry_priority(self, meta, children):
        expressions = [c for c in children if isinstance(c, Node)]
        return expressions[0] if expressions else None

    def integer_literal(self, meta, children):
        return self.integer(meta, children)

    def entry_action(self, meta, children):
        name = children[0]
        args = children[1] if len(children) > 1 else []
        return Node("entry_action", name.loc, name=name.name, args=args)

    # ------------------------------------------------------------ statements
    def block(self, meta, children):
        return Node("block", _loc(meta, children), statements=list(children))

    def annotated_block(self, meta, children):
        # statement annotations such as @atomic do not change the semantics here:
        # a packet's pipeline runs under the device lock, so blocks are atomic anyway
        return children[-1]

    def exit_statement(self, meta, children):
        return Node("exit", _loc(meta, children))

    def return_statement(self, meta, children):
        return Node("return", _loc(meta, children), expr=children[0] if children else None)

    def empty_statement(self, meta, children):
        return Node("block", _loc(meta, children), statements=[])

    def assignment(self, meta, children):
        return Node("assign", children[0].loc, target=children[0], value=children[1])

    def compound_assignment(self, meta, children):
        target, op, value = children
        return Node("compound_assign", target.loc, target=target, op=op, value=value)

    def assign_op(self, meta, children):
        return "".join(str(c) for c in children)

    def break_statement(self, meta, children):
        return Node("break", _loc(meta, children))

    def continue_statement(self, meta, children):
        return Node("continue", _loc(meta, children))

    def for_statement(self, meta, children):
        annotations, init = children[0], children[1]
        rest = children[2:]
        cond = rest[0] if len(rest) == 3 else None
        updates, body = rest[-2], rest[-1]
        return Node("for", _loc(meta, children), init=init, cond=cond, updates=updates, body=body,
                    annotations=annotations)

    def for_parts(self, meta, children):
        return list(children)

    def for_variable(self, meta, children):
        node = self.variable_decl(meta, children)
        return node

    def for_assignment(self, meta, children):
        return self.assignment(meta, children)

    def for_compound(self, meta, children):
        return self.compound_assignment(meta, children)

    def for_call(self, meta, children):
        return self.call_statement(meta, children)

    def for_generic_call(self, meta, children):
        return self.generic_call_statement(meta, children)

    def for_in_statement(self, meta, children):
        annotations, _inner, type_ref, name, _in, collection, body = children
        return Node("for_in", name.loc, type_ref=type_ref, name=name.name, collection=collection, body=body,
                    annotations=annotations)

    def range_collection(self, meta, children):
        return Node("range", children[0].loc, low=children[0], high=children[1])

    def call_statement(self, meta, children):
        func, args = children
        return Node("call_statement", func.loc, call=Node("call", func.loc, func=func, args=args, type_args=[]))

    def direct_apply_statement(self, meta, children):
        """``MyControl.apply(args);`` (P4_16 "direct type invocation"): an instance of the type, declared in the
        enclosing control or parser (by :meth:`_take_direct_applies`), applied here."""
        _annotations, type_token, method, args = children
        line = type_token.line
        if method != "apply":
            raise P4LoadError(f"syntax error: unexpected {method!r} (a type can only be applied: "
                              f"{type_token}.apply(...))")
        # p4c's InstantiateDirectCalls: a hidden instance per call, named for the control plane as the type
        hidden = f"{type_token}_inst_{len(self._direct_applies)}" if self._direct_applies else f"{type_token}_inst"
        name_annotation = Annotation("name", [RawToken("STRING_LITERAL", f'"{type_token}"', line, 0)])
        self._direct_applies.append(Node("instance", line, name=hidden,
                                         type_ref=Node("named_type", line, name=str(type_token)), args=[],
                                         annotations=[name_annotation]))
        func = Node("member", line, expr=Node("name", line, name=hidden), member="apply")
        return Node("call_statement", line, call=Node("call", line, func=func, args=args, type_args=[]))

    def _take_direct_applies(self, where, allowed):
        """The instances of the direct type invocations since the last declaration; refused where not ``allowed``."""
        instances, self._direct_applies = self._direct_applies, []
        if instances and not allowed:
            raise P4LoadError(f"unsupported construct: a control or parser can only be applied directly "
                              f"(Type.apply(...)) in a control's apply block or a parser state, not in {where}")
        return instances

    def generic_call_statement(self, meta, children):
        func, _lt, type_args, _gt, args = children
        return Node("call_statement", func.loc, call=Node("call", func.loc, func=func, args=args,
                                                          type_args=type_args))

    def lv_name(self, meta, children):
        return Node("name", children[0].line, name=str(children[0]))

    def lv_this(self, meta, children):
        raise P4LoadError("unsupported construct: this")

    def lv_member(self, meta, children):
        return Node("member", children[0].loc, expr=children[0], member=children[1])

    def lv_index(self, meta, children):
        return Node("index", children[0].loc, expr=children[0], index=children[1])

    def lv_slice(self, meta, children):
        return Node("slice", children[0].loc, expr=children[0], hi=children[1], lo=children[2])

    def if_statement(self, meta, children):
        cond, then = children[0], children[1]
        otherwise = children[2] if len(children) > 2 else None
        return Node("if", cond.loc, cond=cond, then=then, otherwise=otherwise)

    def switch_statement(self, meta, children):
        return Node("switch", children[0].loc, expr=children[0], cases=list(children[1:]))

    def switch_case(self, meta, children):
        label = children[0]
        body = children[1] if len(children) > 1 else None
        label_name = label.name if label.kind == "name" else None
        value = None if label.kind in ("default", "name") else label
        if label.kind == "name":
            value = label
        return Node("switch_case", label.loc, label=label_name, value=value, body=body,
                    is_default=label.kind == "default")

    def default_label(self, meta, children):
        return Node("default", _loc(meta, children))

    # ------------------------------------------------------------ expressions
    def expression_list(self, meta, children):
        return list(children)

    def arguments(self, meta, children):
        return list(children)

    def dontcare_arg(self, meta, children):
        return Node("dontcare", _loc(meta, children))

    def conditional(self, meta, children):
        return Node("conditional", children[0].loc, cond=children[0], then=children[1], otherwise=children[2])

    def _binary(op):  # noqa: N805 - factory used in the class body
        def build(self, meta, children):
            return Node("binop", children[0].loc, op=op, left=children[0], right=children[1])
        return build

    for _op in ("lor", "land", "eq", "ne", "lt", "gt", "le", "ge", "bor", "bxor", "band", "shl", "shr", "add",
                "sub", "sadd", "ssub", "concat", "mul", "div", "mod"):
        locals()[_op] = _binary(_op)
    del _op

    def lnot(self, meta, children):
        return Node("unop", children[0].loc, op="!", expr=children[0])

    def bnot(self, meta, children):
        return Node("unop", children[0].loc, op="~", expr=children[0])

    def neg(self, meta, children):
        return Node("unop", children[0].loc, op="-", expr=children[0])

    def pos(self, meta, children):
        return children[0]

    def cast(self, meta, children):
        return Node("cast", children[1].loc, type_ref=children[0], expr=children[1], type_text=_type_text(children[0]))

    def member_access(self, meta, children):
        return Node("member", children[0].loc, expr=children[0], member=children[1])

    def index(self, meta, children):
        return Node("index", children[0].loc, expr=children[0], index=children[1])

    def slice(self, meta, children):
        return Node("slice", children[0].loc, expr=children[0], hi=children[1], lo=children[2])

    def call(self, meta, children):
        return Node("call", children[0].loc, func=children[0], args=children[1], type_args=[])

    def generic_call(self, meta, children):
        func, _lt, type_args, _gt, args = children
        return Node("call", func.loc, func=func, args=args, type_args=type_args)

    def integer(self, meta, children):
        token = children[0]
        try:
            value, width, signed = parse_integer(str(token))
        except LiteralError as error:
            raise P4LoadError(f"unsupported construct: {error}") from None
        text = str(token)
        return Node("int", token.line, value=value, width=width, signed=signed,
                    text=text if len(text) <= 64 else text[:61] + "...")

    def true(self, meta, children):
        return Node("bool", _loc(meta, children), value=True)

    def false(self, meta, children):
        return Node("bool", _loc(meta, children), value=False)

    def string(self, meta, children):
        token = children[0]
        return Node("string", token.line, value=str(token)[1:-1])

    def name_ref(self, meta, children):
        return Node("name", children[0].line, name=str(children[0]))

    def this_ref(self, meta, children):
        raise P4LoadError("unsupported construct: this")

    def list_expression(self, meta, children):
        items = children[0] if children else []
        return Node("list", _loc(meta, children), items=items)

    def list_expression_dots(self, meta, children):
        return Node("list", _loc(meta, children), items=children[0], dots=True)

    def struct_expression(self, meta, children):
        return Node("struct_expr", _loc(meta, children), fields=list(children), dots=False)

    def struct_expression_dots(self, meta, children):
        return Node("struct_expr", _loc(meta, children), fields=list(children), dots=True)

    def kv_pair(self, meta, children):
        return (str(children[0]), children[1])

    def invalid_header(self, meta, children):
        return Node("invalid_header", _loc(meta, children))

    def type_member(self, meta, children):
        return Node("type_member", children[0].line, type_name=str(children[0]), member=children[1])

    def error_member(self, meta, children):
        return Node("error_member", _loc(meta, children), member=children[-1])

    def constructor_call(self, meta, children):
        return Node("constructor_call", children[0].line,
                    type_ref=Node("named_type", children[0].line, name=str(children[0])), args=children[1])

    def named_type_call(self, meta, children):
        return Node("constructor_call", children[0].loc, type_ref=children[0], args=children[1])


def _type_text(type_node):
    kind = type_node.kind
    if kind == "bit_type":
        width = type_node.width
        text = width.text if width.kind == "int" else "..."
        return f"{'int' if type_node.signed else 'bit'}<{text}>"
    if kind == "named_type":
        return type_node.name
    if kind == "bool_type":
        return "bool"
    return kind
