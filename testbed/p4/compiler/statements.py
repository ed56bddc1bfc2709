"""Python code for P4 statements: assignments (also compound), if/switch/for, return/exit, call statements.

A mixin of :class:`testbed.p4.compiler.codegen.CodeGenerator`; it uses the generator's
``model`` (checker), ``info`` (ProgramInfo) and helper methods.  Which statement a node is,
and the checks on it, are :class:`testbed.p4.compiler.walk.Walk`'s; this emits the Python.

Order of evaluation (P4_16 1.2.4, "Expression evaluation order" and "Assignment"): the
left-hand side of an assignment is evaluated to an l-value before the right-hand side, so
when the right-hand side can have effects (calls), the run-time parts of the target
(stack indexes) are fixed into temporaries first.
"""
from testbed.p4.compiler.pycode import attr, literal
from testbed.p4.frontend import types as T
from testbed.p4.frontend.ast import Node

COMPOUND_OPERATORS = {
    "+=": "add", "-=": "sub", "*=": "mul", "/=": "div", "%=": "mod", "<<=": "shl", ">>=": "shr",
    "&=": "band", "|=": "bor", "^=": "bxor", "|+|=": "sadd", "|-|=": "ssub",
}


class LValue:
    """An assignment target.

    Attributes:
        code: Python target expression of the storage (a variable, attribute or stack element).
        type: the P4 type stored there (the slice's type for slices).
        lo, width: the bit slice of ``code`` that is the target (None: the whole value).
        base_type: the type of ``code`` when sliced.
        union: (union code, union type, member name) when the target is a header in a header_union.
    """

    def __init__(self, code, type_, lo=None, width=None, base_type=None, union=None):
        self.code = code
        self.type = type_
        self.lo = lo
        self.width = width
        self.base_type = base_type
        self.union = union


class StatementsMixin:
    """Python code for P4 statements: assignments, if/switch/for, return/exit, calls."""

    def block(self, block, scope, fn):
        """Emit a block statement in a nested scope."""
        inner = scope.child()
        before = len(fn.out.lines)
        for statement in block.statements:
            self.statement(statement, inner, fn)
        if len(fn.out.lines) == before:
            fn.out.line("pass")

    def body(self, statement, scope, fn):
        """Emit the indented body of an if/else/switch case/loop."""
        fn.out.indent()
        before = len(fn.out.lines)
        if statement.kind == "block":
            self.block(statement, scope, fn)
        else:
            self.statement(statement, scope.child(), fn)
        if len(fn.out.lines) == before:
            fn.out.line("pass")
        fn.out.dedent()

    def if_statement(self, node, scope, fn):
        """``if``/``else``; an ``else if`` chain becomes ``elif`` (flat) when its conditions need no statements."""
        out = fn.out
        keyword = "if"
        while True:
            self.condition(node, node.cond, scope, "if")
            out.line(f"{keyword} {self.expr(node.cond, scope, fn)}:")
            self.body(node.then, scope, fn)
            following = node.otherwise
            if following is None:
                return
            if following.kind == "if" and not self.is_complex(following.cond, scope):
                node = following
                out.origin = node.loc
                keyword = "elif"
                continue
            out.line("else:")
            self.body(following, scope, fn)
            return

    # ------------------------------------------------------------------ declarations
    def variable_declaration(self, symbol, node, scope, fn):
        """A local variable, with or without initializer."""
        type_ = symbol.type
        name = self.py_name(symbol, fn)
        out = fn.out
        if isinstance(type_, T.VarbitType):
            if node.init is not None:
                self.model.type_of(node.init, scope)
                self._check_assignable(node, type_, node.init.type)
            self.declare_varbit(name, node.init, scope, fn)
        elif node.init is not None:
            if node.init.kind not in ("list", "struct_expr", "invalid_header"):
                self.model.type_of(node.init, scope)
                self._check_assignable(node, type_, node.init.type)
            if isinstance(type_, (T.HeaderType, T.StructType, T.StackType, T.TupleType)):
                value = self.composite_value(node.init, type_, scope, fn)
                fresh = node.init.kind in ("list", "struct_expr", "invalid_header")
                out.line(f"{name} = {value}" if fresh else f"{name} = {value}.copy()")
            else:
                out.line(f"{name} = {self.expr(node.init, scope, fn, want=type_)}")
        else:
            out.line(f"{name} = {self._initial_value(type_)}")

    # ------------------------------------------------------------------ return / exit / loops
    def emit_function_return(self, node, scope, fn):
        """``return`` in a function: its result and its scalar out/inout values."""
        out = fn.out
        outs = fn.function_outs
        if node.expr is not None:
            if node.expr.kind not in ("list", "struct_expr", "invalid_header"):
                self.model.type_of(node.expr, scope)
                self._check_assignable(node, fn.return_type, node.expr.type)
            if isinstance(fn.return_type, (T.HeaderType, T.StructType, T.StackType, T.TupleType)):
                value = self.composite_value(node.expr, fn.return_type, scope, fn)
                if node.expr.kind not in ("list", "struct_expr", "invalid_header"):
                    value = f"{value}.copy()"
            else:
                value = self.expr(node.expr, scope, fn, want=fn.return_type)
            out.line(f"return ({value},{''.join(' ' + o + ',' for o in outs)})")
        else:
            out.line(f"return (None,{''.join(' ' + o + ',' for o in outs)})")

    def for_statement(self, node, scope, fn):
        """``for (init; condition; updates) body`` (P4_16 1.2.4) as a Python ``while True`` loop."""
        out = fn.out
        inner = scope.child()
        for statement in node.init:
            self.statement(statement, inner, fn)
        frame = self.loop_frame(fn, node.updates, inner)
        out.line("while True:")
        out.indent()
        if node.cond is not None:
            self.condition(node, node.cond, inner, "for")
            out.line(f"if not {self.expr(node.cond, inner, fn)}:")
            out.line("    break")
        if node.body.kind == "block":
            self.block(node.body, inner, fn)
        else:
            self.statement(node.body, inner.child(), fn)
        for statement in node.updates:
            self.statement(statement, inner, fn)
        out.dedent()
        fn.frames.pop()
        self.end_loop(frame, fn)

    def loop_variable(self, symbol, node, fn):
        """The variable of a ``for (T x in ...)`` loop: its Python name."""
        self.check_variable_type(node, symbol.type)
        return self.py_name(symbol, fn)

    def loop_over_range(self, name, symbol, collection, scope, fn):
        low = self.expr(collection.low, scope, fn, want=symbol.type)
        high = self.expr(collection.high, scope, fn, want=symbol.type)
        fn.out.line(f"for {name} in range({low}, ({high}) + 1):")

    def loop_over_stack(self, name, symbol, collection, stack_type, scope, fn):
        fn.out.line(f"for {name} in {self.expr(collection, scope, fn)}.items:")

    def loop_over_values(self, name, symbol, items, scope, fn):
        values = [self.expr(item, scope, fn, want=symbol.type) for item in items]
        fn.out.line(f"for {name} in ({''.join(v + ', ' for v in values)}):")

    @staticmethod
    def end_loop(frame, fn):
        """After a loop: leave the enclosing loops too when a flag passing through it is set."""
        for flag in frame.passing:
            fn.out.line(f"if {flag}:")
            fn.out.line("    break")

    # ------------------------------------------------------------------ assignments
    def _check_assignable(self, node, target, source):
        if isinstance(target, T.BitType) and isinstance(source, T.BitType) and target != source:
            raise self.error(node, f"cannot assign {source.name_text()} to {target.name_text()} (cast it)")
        if isinstance(target, T.BoolType) and isinstance(source, (T.BitType, T.InfIntType)):
            raise self.error(node, "cannot assign an integer to a bool")
        if isinstance(target, T.BitType) and isinstance(source, T.BoolType):
            raise self.error(node, "cannot assign a bool to a bit field (cast it)")
        if isinstance(target, (T.HeaderType, T.StructType, T.StackType)) and source is not None and \
                not isinstance(source, (T.TupleType, T.DontCareType)) and not self.same_type(target, source):
            raise self.error(node, f"cannot assign {source.name_text()} to {target.name_text()}")

    def assignment(self, node, scope, fn):
        """Emit an assignment: the target is fixed first when the value can have effects."""
        target = node.target
        value = node.value
        target_type = self.model.type_of(target, scope)
        if value.kind not in ("list", "struct_expr", "invalid_header"):
            self.model.type_of(value, scope)
            self._check_assignable(node, target_type, value.type)
        complex_value = self.is_complex(value, scope)
        lv = self.resolve_lvalue(target, scope, fn, freeze=complex_value)
        if isinstance(target_type, T.VarbitType):
            if not isinstance(value.type, T.VarbitType) or value.type.max_width != target_type.max_width:
                raise self.error(node, f"cannot assign {value.type.name_text()} to {target_type.name_text()}")
            source = self.lvalue(value, scope, fn)
            fn.out.line(f"{lv.code} = {source}")
            fn.out.line(f"{self._varbit_length_code(lv.code, target)} = {self._varbit_length_code(source, value)}")
            return
        if isinstance(target_type, (T.HeaderType, T.StructType, T.StackType, T.TupleType)):
            code = self.composite_value(value, target_type, scope, fn)
            fn.out.line(f"{lv.code}.copy_from({code})")
            self.after_composite_store(lv, fn)
            return
        self.write_lvalue(lv, self.expr(value, scope, fn, want=target_type), fn)

    def compound_assignment(self, node, target_type, scope, fn):
        """``a op= b`` is ``a = a op b`` with ``a`` evaluated once (P4_16 1.2.4)."""
        lv = self.resolve_lvalue(node.target, scope, fn, freeze=True)
        current = Node("pycode", node.loc, code=self.read_lvalue(lv))
        current.type = target_type
        operation = Node("binop", node.loc, op=COMPOUND_OPERATORS[node.op], left=current, right=node.value)
        value_type = self.model.type_of(operation, scope)
        self._check_assignable(node, target_type, value_type)
        self.write_lvalue(lv, self.expr(operation, scope, fn, want=target_type), fn)

    # ------------------------------------------------------------------ l-values
    def resolve_lvalue(self, node, scope, fn, freeze=False):
        """The :class:`LValue` of an l-value expression.

        Args:
            freeze: evaluate run-time stack indexes (and ``next``/``last``) now into temporaries,
                so that later effects cannot move the target.
        """
        if node.kind == "slice":
            base_node, lo, width = node, 0, None
            while base_node.kind == "slice":
                if width is None:
                    width = base_node.hi_value - base_node.lo_value + 1
                lo += base_node.lo_value
                base_node = base_node.expr
            base = self.resolve_lvalue(base_node, scope, fn, freeze)
            base_type = base_node.type or self.model.type_of(base_node, scope)
            if base.lo is not None:
                lo += base.lo
            return LValue(base.code, T.BitType(width), lo, width, base_type)
        return LValue(self._lvalue_code(node, scope, fn, freeze), node.type or self.model.type_of(node, scope),
                      union=self._union_of(node, scope, fn))

    def _union_of(self, node, scope, fn):
        if node.kind != "member":
            return None
        parent_type = node.expr.type or self.model.type_of(node.expr, scope)
        if isinstance(parent_type, T.UnionType):
            return self._lvalue_code(node.expr, scope, fn, False), parent_type, node.member
        return None

    def _lvalue_code(self, node, scope, fn, freeze):
        kind = node.kind
        if kind == "name":
            symbol = scope.lookup(node.name)
            if symbol is None:
                raise self.error(node, f"unknown name {node.name!r}")
            if symbol.kind not in ("var", "param"):
                raise self.error(node, f"cannot assign to {node.name} ({symbol.kind})")
            if symbol.kind == "param" and symbol.direction == "in":
                raise self.error(node, f"cannot assign to in parameter {node.name}")
            if symbol.kind == "param" and not symbol.direction and getattr(symbol, "action_param", False):
                raise self.error(node, f"cannot assign to action data parameter {node.name}")
            return self.py_name(symbol, fn)
        if kind == "member":
            base_type = node.expr.type or self.model.type_of(node.expr, scope)
            base = self._lvalue_code(node.expr, scope, fn, freeze)
            if isinstance(base_type, T.StackType):
                if node.member not in ("next", "last"):
                    raise self.error(node, f"cannot assign to stack member {node.member}")
                index = f"{base}.next_index" if node.member == "next" else f"{base}.next_index - 1"
                if freeze:
                    temp = fn.temp("i")
                    fn.out.line(f"{temp} = {index}")
                    index = temp
                return f"_stk({base}, {index})"
            return f"{base}.{attr(node.member)}"
        if kind == "index":
            base = self._lvalue_code(node.expr, scope, fn, freeze)
            index = self._index_code(node, scope, fn)
            if not index.isdigit() and freeze:
                temp = fn.temp("i")
                fn.out.line(f"{temp} = {index}")
                index = temp
            return f"{base}.items[{index}]" if index.isdigit() else f"_stk({base}, {index})"
        raise self.error(node, f"cannot assign to this expression ({kind})")

    def lvalue(self, node, scope, fn):
        """Python target code of an l-value that is not a slice."""
        return self._lvalue_code(node, scope, fn, False)

    @staticmethod
    def read_lvalue(lv):
        """Code reading the current value of an l-value."""
        if lv.lo is None:
            return lv.code
        shifted = f"({lv.code} >> {lv.lo})" if lv.lo else lv.code
        return f"({shifted} & {(1 << lv.width) - 1})"

    def write_lvalue(self, lv, value, fn):
        """Emit the store of ``value`` (code of the target's type) into ``lv``."""
        out = fn.out
        if lv.lo is None:
            out.line(f"{lv.code} = {value}")
            return
        base_type = lv.base_type
        mask = ((1 << lv.width) - 1) << lv.lo
        full = (1 << base_type.width) - 1
        if base_type.signed:
            half = 1 << (base_type.width - 1)
            out.line(f"{lv.code} = (((({lv.code} & {full}) & {~mask & full}) | ((({value}) << {lv.lo}) & {mask})) "
                     f"^ {half}) - {half}")
        else:
            out.line(f"{lv.code} = ({lv.code} & {~mask & full}) | ((({value}) << {lv.lo}) & {mask})")

    def store(self, target, value, scope, fn):
        """Emit ``target = value`` where target is an l-value node (not frozen)."""
        self.write_lvalue(self.resolve_lvalue(target, scope, fn), value, fn)

    def after_composite_store(self, lv, fn):
        """A header of a header_union that became valid makes the union's other members invalid."""
        if lv.union is None or not isinstance(lv.type, T.HeaderType):
            return
        union_code, union_type, member = lv.union
        siblings = [f for f in union_type.fields if f.name != member]
        if not siblings:
            return
        fn.out.line(f"if {lv.code}.valid:")
        for field in siblings:
            fn.out.line(f"    {union_code}.{attr(field.name)}.valid = False")

    def union_code(self, node, scope, fn):
        return self.expr(node, scope, fn)

    @staticmethod
    def invalidate_member(fn, union, member):
        fn.out.line(f"{union}.{attr(member)}.valid = False")

    # ------------------------------------------------------------------ switch
    def switch_value(self, expr, scope, fn):
        value = fn.temp("sw")
        fn.out.line(f"{value} = {self.expr(expr, scope, fn)}")
        return value

    @staticmethod
    def switch_action_label(qualified):
        return repr(qualified)

    @staticmethod
    def switch_constant(value):
        return literal(value)

    @staticmethod
    def switch_case(fn, first, value, values):
        if values is None:
            fn.out.line("else:" if not first else "if True:")
        else:
            fn.out.line(f"{'if' if first else 'elif'} {value} in ({', '.join(values)},):")

    # ------------------------------------------------------------------ call statements
    def header_validity(self, base, method, scope, fn):
        """``h.setValid()``, ``h.setInvalid()`` or ``h.isValid()`` as a statement."""
        target = self.lvalue(base, scope, fn) if method != "isValid" else self.expr(base, scope, fn)
        if method == "setValid":
            self._invalidate_union_siblings(base, scope, fn)
            fn.out.line(f"{target}.valid = True")
        elif method == "setInvalid":
            fn.out.line(f"{target}.valid = False")
        else:
            fn.out.line(f"{target}.valid")

    def stack_shift(self, base, base_type, method, count, scope, fn):
        """``s.push_front(count)`` / ``s.pop_front(count)``."""
        element = self.stack_element_factory(base_type)
        fn.out.line(f"{self.lvalue(base, scope, fn)}.{method}({count}, {element})")
