"""Python expressions for P4 expressions: width-correct arithmetic, casts, slices, calls.

A mixin of :class:`testbed.p4.compiler.codegen.CodeGenerator`; it uses the generator's
``model`` (checker), ``info`` (ProgramInfo) and helper methods.

Most P4 expressions become one Python expression.  Calls of functions, table applies
and ``lookahead`` need statements, which are emitted before the statement that uses the
expression; to keep the order of evaluation of P4_16 1.2.4 ("Expression evaluation
order": left to right, ``&&``/``||``/``?:`` short-circuit) an operand to the left of
such a "complex" operand is saved into a temporary first, and the right operand of
``&&``/``||`` or the branches of ``?:`` become ``if`` statements when they are complex.
"""
from testbed.p4.compiler.pycode import attr, is_literal, literal, varbit_length_attr, wrap
from testbed.p4.frontend import types as T
from testbed.p4.frontend.checker import convert_int


class ExpressionsMixin:
    """Python expressions for P4 expressions: width-correct arithmetic, casts, slices, calls."""

    #: the Python text of the walk's small forms (see :attr:`testbed.p4.compiler.walk.Walk.SYNTAX`)
    SYNTAX = {
        "true": "True",
        "false": "False",
        "not": "(not {code})",
        "land": "({left} and {right})",
        "lor": "({left} or {right})",
        "choice": "({then} if {cond} else {otherwise})",
        "jump": "{kind}",
        "keyset_mask": "({name} & {mask}) == {value}",
        "keyset_range": "{low} <= {name} <= {high}",
        "keyset_equal": "{name} == {value}",
        "bit_to_bool": "({code} != 0)",
        "bool_to_bit": "(1 if {code} else 0)",
    }

    @staticmethod
    def folded_constant(value, type_, node):
        return literal(value)

    @staticmethod
    def int_literal(value):
        return literal(value)

    @staticmethod
    def constant_name(node, value, want):
        if isinstance(want, T.BitType) and not isinstance(value, bool):
            value = convert_int(value, want)
        return literal(value)

    def variable_code(self, symbol, node, scope, fn):
        return self.py_name(symbol, fn)

    def index_expr(self, node, scope, fn):
        base = self.expr(node.expr, scope, fn)
        if isinstance(node.expr.type, T.TupleType):
            return f"{base}[{self.model.const_value(node.index, scope)}]"
        index = self._index_code(node, scope, fn)
        # a run-time index out of range stops simple_switch (std::out_of_range from Stack::at,
        # p4c issue #3423); _stk raises RT.TargetAbort, which halts the device the same way
        return f"{base}.items[{index}]" if index.isdigit() else f"_stk({base}, {index})"

    def unop(self, node, inner, type_):
        if node.op == "~":
            if type_.signed:
                return f"(~{inner})"
            return f"({inner} ^ {type_.mask})"
        if node.op == "-":
            if isinstance(type_, T.InfIntType):
                return f"(-{inner})"
            return wrap(f"(-{inner})", type_)
        raise self.unsupported(node, f"operator {node.op} on {type_.name_text()}")

    def other_expression(self, node, scope, fn, want):
        """Generated code in a node (``pycode``), list and structure expressions, strings."""
        kind = node.kind
        if kind == "pycode":
            return node.code
        if kind in ("list", "struct_expr", "invalid_header"):
            if isinstance(want, (T.HeaderType, T.StructType, T.StackType, T.TupleType)):
                return self.composite_value(node, want, scope, fn)
            if isinstance(node.type, T.TupleType):
                return self.composite_value(node, node.type, scope, fn)
            raise self.error(node, "a list or structure expression needs a known type here (assign it to a "
                                   "variable of a header, struct or tuple type first)")
        if kind == "string":
            return repr(node.value)
        raise self.unsupported(node, f"expression {kind}")

    def stack_member(self, node, base_type, scope, fn):
        base = self.expr(node.expr, scope, fn)
        member = node.member
        if member == "last":
            return f"_stk({base}, {base}.next_index - 1)"
        if member == "next":
            return f"_stk({base}, {base}.next_index)"
        if member == "lastIndex":
            return f"(({base}.next_index - 1) & 4294967295)"
        if member == "nextIndex":
            return f"{base}.next_index"
        if member == "size":
            return str(base_type.size)
        raise self.unsupported(node, f"stack member {member}")

    def field_expr(self, node, scope, fn):
        return f"{self.expr(node.expr, scope, fn)}.{attr(node.member)}"

    @staticmethod
    def cast_bits(inner, source, target):
        """A bit<W>/int<W> value as another bit<W>/int<W>."""
        if not target.signed:
            if source.signed or source.width > target.width:
                return f"({inner} & {target.mask})"
            return inner
        # to int<W>
        if not source.signed and source.width < target.width:
            return inner
        if source.signed and source.width <= target.width:
            return inner
        half = 1 << (target.width - 1)
        return f"((({inner} & {target.mask}) ^ {half}) - {half})"

    # ------------------------------------------------------------------ statements inside expressions
    @staticmethod
    def declare_temp(fn, temp):
        pass  # a Python variable needs no declaration

    @staticmethod
    def set_temp(fn, temp, code, declare=False):
        fn.out.line(f"{temp} = {code}")

    @staticmethod
    def begin_if(fn, cond, negate=False):
        fn.out.line(f"if not {cond}:" if negate else f"if {cond}:")
        fn.out.indent()

    @staticmethod
    def begin_else(fn):
        fn.out.dedent()
        fn.out.line("else:")
        fn.out.indent()

    @staticmethod
    def end_if(fn):
        fn.out.dedent()

    @staticmethod
    def is_literal(code):
        return is_literal(code)

    def arithmetic(self, node, scope, fn):
        """The binary operators but ``&&``, ``||`` and equality of composites."""
        op = node.op
        type_ = node.type
        left_type = node.left.type
        right_type = node.right.type
        if op in ("eq", "ne") and isinstance(left_type, T.VarbitType):
            left = self.lvalue(node.left, scope, fn)
            right = self.lvalue(node.right, scope, fn)
            code = (f"({left} == {right} and {self._varbit_length_code(left, node.left)} == "
                    f"{self._varbit_length_code(right, node.right)})")
            return code if op == "eq" else f"(not {code})"
        if op in ("eq", "ne", "lt", "gt", "le", "ge"):
            operand_type = left_type if not isinstance(left_type, T.InfIntType) else right_type
            left, right = self._operands(node.left, node.right, scope, fn, want=operand_type)
            symbol = {"eq": "==", "ne": "!=", "lt": "<", "gt": ">", "le": "<=", "ge": ">="}[op]
            return f"({left} {symbol} {right})"
        if op == "concat":
            left, right = self._operands(node.left, node.right, scope, fn)
            if left_type.signed:
                left = f"({left} & {left_type.mask})"
            if right_type.signed:
                right = f"({right} & {right_type.mask})"
            code = f"(({left} << {right_type.width}) | {right})"
            if type_.signed:
                half = 1 << (type_.width - 1)
                code = f"(({code} ^ {half}) - {half})"
            return code
        if op in ("shl", "shr"):
            left = self.saved(self.expr(node.left, scope, fn, want=type_), node.right, scope, fn)
            amount = self.model.try_const(node.right, scope)
            if op == "shr":
                if amount is not None:
                    return f"({left} >> {int(amount[0])})"
                return f"({left} >> {self.expr(node.right, scope, fn)})"
            if isinstance(type_, T.InfIntType):
                return f"({left} << {self.expr(node.right, scope, fn)})"
            if amount is not None:
                count = int(amount[0])
                if count >= type_.width:
                    return "0"
                return wrap(f"({left} << {count})", type_)
            right = self.expr(node.right, scope, fn)
            if type_.signed:
                return wrap(f"_shl({left}, {right}, {type_.width}, -1)", type_)
            return f"_shl({left}, {right}, {type_.width}, {type_.mask})"
        left, right = self._operands(node.left, node.right, scope, fn, want=type_)
        if isinstance(type_, T.InfIntType):
            symbol = {"add": "+", "sub": "-", "mul": "*", "div": "//", "mod": "%", "band": "&", "bor": "|",
                      "bxor": "^"}.get(op)
            if symbol is None:
                raise self.error(node, "saturating operation on width-less integers")
            return f"({left} {symbol} {right})"
        if op in ("band", "bor", "bxor"):
            symbol = {"band": "&", "bor": "|", "bxor": "^"}[op]
            return f"({left} {symbol} {right})"
        if op in ("add", "sub", "mul"):
            symbol = {"add": "+", "sub": "-", "mul": "*"}[op]
            return wrap(f"({left} {symbol} {right})", type_)
        if op == "div":
            return f"_udiv({left}, {right})"
        if op == "mod":
            return f"_umod({left}, {right})"
        if op in ("sadd", "ssub"):
            symbol = "+" if op == "sadd" else "-"
            if type_.signed:
                low, high = -(1 << (type_.width - 1)), (1 << (type_.width - 1)) - 1
                return f"min(max({left} {symbol} {right}, {low}), {high})"
            if op == "sadd":
                return f"min({left} + {right}, {type_.mask})"
            return f"max({left} - {right}, 0)"
        raise self.error(node, f"unsupported construct: operator {op}")

    def header_valid_code(self, header, scope, fn):
        return f"{self.expr(header, scope, fn)}.valid"

    def union_valid_code(self, union_node, union_type, scope, fn):
        union = self.expr(union_node, scope, fn)
        return "(" + " or ".join(f"{union}.{attr(f.name)}.valid" for f in union_type.fields) + ")"

    @staticmethod
    def packet_length_code(node):
        return "n"

    def _lookahead(self, node, fn):
        type_ = node.type
        out = fn.out
        if isinstance(type_, T.BitType):
            width = type_.width
            nbytes = (width + 7) // 8
            pad = nbytes * 8 - width
            temp = fn.temp("la")
            out.line(f"if off + {nbytes} > n:")
            out.line("    err = _PacketTooShort")
            out.line("    break")
            value = f"(int.from_bytes(buf[off:off + {nbytes}], 'big') >> {pad})"
            out.line(f"{temp} = {self._from_unsigned(value, type_)}")
            return temp
        if isinstance(type_, T.HeaderType):
            temp = fn.temp("la")
            out.line(f"if off + {type_.byte_size} > n:")
            out.line("    err = _PacketTooShort")
            out.line("    break")
            out.line(f"{temp} = {self.class_for(type_)}()")
            out.line(f"{temp}.extract(buf, off)")
            return temp
        leaves = self._lookahead_leaves(type_, "") if isinstance(type_, T.StructType) and \
            not isinstance(type_, T.UnionType) else None
        if leaves:
            # a struct of fixed-width fields, read in declaration order as a header would be (no validity)
            width = sum(T.scalar_width(leaf) for _, leaf in leaves)
            nbytes = (width + 7) // 8
            temp, bits = fn.temp("la"), fn.temp("lb")
            out.line(f"if off + {nbytes} > n:")
            out.line("    err = _PacketTooShort")
            out.line("    break")
            out.line(f"{bits} = int.from_bytes(buf[off:off + {nbytes}], 'big') >> {nbytes * 8 - width}")
            out.line(f"{temp} = {self.class_for(type_)}()")
            shift = width
            for path, leaf in leaves:
                leaf_width = T.scalar_width(leaf)
                shift -= leaf_width
                value = f"(({bits} >> {shift}) & {(1 << leaf_width) - 1})"
                if isinstance(leaf, T.BoolType):
                    value = f"{value} != 0"
                elif isinstance(leaf, T.BitType) and leaf.signed:
                    value = self._from_unsigned(value, leaf)
                out.line(f"{temp}{path} = {value}")
            return temp
        raise self.error(node, f"unsupported construct: lookahead<{type_.name_text()}>")

    def _lookahead_leaves(self, type_, prefix):
        """[(attribute path, type)] of a struct's bit/int/bool fields in order, or None if it has others."""
        leaves = []
        for f in type_.fields:
            if isinstance(f.type, T.StructType) and not isinstance(f.type, T.UnionType):
                inner = self._lookahead_leaves(f.type, f"{prefix}.{attr(f.name)}")
                if inner is None:
                    return None
                leaves += inner
            elif isinstance(f.type, (T.BitType, T.BoolType)):
                leaves.append((f"{prefix}.{attr(f.name)}", f.type))
            else:
                return None
        return leaves

    def _index_code(self, node, scope, fn):
        """Code of a stack index: a checked constant, or a run-time value (used through ``_stk``)."""
        stack_type = node.expr.type
        folded = self.model.try_const(node.index, scope)
        if folded is not None:
            index = int(folded[0])
            if not 0 <= index < stack_type.size:
                # p4c: "index out of bounds" is a compile-time error for a constant index
                raise self.error(node, f"header stack index {index} out of bounds (size {stack_type.size})")
            node.const_index = index
            return str(index)
        return self.expr(node.index, scope, fn)

    # ------------------------------------------------------------------ composite values
    def composite_value(self, node, type_, scope, fn):
        """Code of a header/struct/stack/tuple value of ``type_``.

        List expressions ``{a, b}``, structure expressions ``{x = a, y = b}`` and the invalid
        header ``{#}`` build a new object (P4_16 1.2.4, "Structure-valued expressions");
        any other expression is returned as it is (a reference, copy it to keep it).
        """
        kind = node.kind
        if kind not in ("list", "struct_expr", "invalid_header"):
            if node.type is None:
                self.model.type_of(node, scope)
            if isinstance(node.type, T.TupleType) and not isinstance(type_, T.TupleType):
                raise self.error(node, f"cannot use a {node.type.name_text()} as a {type_.name_text()}")
            return self.expr(node, scope, fn)
        out = fn.out
        if kind == "invalid_header":
            if not isinstance(type_, (T.HeaderType, T.UnionType)):
                raise self.error(node, f"{{#}} is an invalid header; {type_.name_text()} is not a header")
            temp = fn.temp("v")
            out.line(f"{temp} = {self._initial_value(type_)}")
            return temp
        if isinstance(type_, T.TupleType):
            if kind != "list" or len(node.items) != len(type_.elements):
                raise self.error(node, f"{type_.name_text()} needs {len(type_.elements)} value(s)")
            codes = self.ordered_values([(item, element) for item, element in zip(node.items, type_.elements)],
                                        scope, fn)
            return "[" + ", ".join(codes) + "]"
        if isinstance(type_, T.StackType):
            if kind != "list" or len(node.items) != type_.size:
                raise self.error(node, f"{type_.name_text()} needs {type_.size} element(s)")
            codes = self.ordered_values([(item, type_.element) for item in node.items], scope, fn)
            temp = fn.temp("v")
            out.line(f"{temp} = {self._initial_value(type_)}")
            for index, code in enumerate(codes):
                out.line(f"{temp}.items[{index}].copy_from({code})")
            return temp
        if not isinstance(type_, (T.HeaderType, T.StructType)):
            raise self.error(node, f"a list or structure expression cannot be a {type_.name_text()}")
        pairs = self.field_values(node, type_)
        codes = self.ordered_values([(value, field.type) for value, field in pairs], scope, fn)
        temp = fn.temp("v")
        out.line(f"{temp} = {self._initial_value(type_)}")
        for (value, field), code in zip(pairs, codes):
            if self.is_composite_type(field.type):
                out.line(f"{temp}.{attr(field.name)}.copy_from({code})")
            else:
                if value.type is not None:
                    self._check_assignable(value, field.type, value.type)
                out.line(f"{temp}.{attr(field.name)} = {code}")
        if isinstance(type_, T.HeaderType):
            out.line(f"{temp}.valid = True")
        return temp

    def ordered_values(self, pairs, scope, fn):
        """Codes of (node, wanted type) values evaluated left to right (earlier ones saved when later ones have
        effects)."""
        last_complex = max((i for i, (node, _) in enumerate(pairs) if self.is_complex(node, scope)), default=-1)
        codes = []
        for index, (node, want) in enumerate(pairs):
            if node.kind not in ("list", "struct_expr", "invalid_header"):
                self.model.type_of(node, scope)
            if self.is_composite_type(want):
                code = self.composite_value(node, want, scope, fn)
                if index < last_complex and node.kind not in ("list", "struct_expr", "invalid_header"):
                    temp = fn.temp("v")
                    fn.out.line(f"{temp} = {code}.copy()")
                    code = temp
            else:
                code = self.expr(node, scope, fn, want=want)
                if index < last_complex and not is_literal(code):
                    temp = fn.temp("v")
                    fn.out.line(f"{temp} = {code}")
                    code = temp
            codes.append(code)
        return codes

    def composite_operand(self, node, type_, scope, fn):
        return self.composite_value(node, type_, scope, fn)

    @staticmethod
    def save_composite(fn, code, type_, node):
        temp = fn.temp("l")
        fn.out.line(f"{temp} = {code}.copy()" if not isinstance(type_, T.TupleType) else f"{temp} = {code}")
        return temp

    def _equal_code(self, left, right, type_):
        if isinstance(type_, T.HeaderType):
            parts = []
            for f in type_.fields:
                left_field, right_field = f"{left}.{attr(f.name)}", f"{right}.{attr(f.name)}"
                parts.append(self._equal_code(left_field, right_field, f.type)
                             if isinstance(f.type, T.StructType) else f"{left_field} == {right_field}")
                if isinstance(f.type, T.VarbitType):
                    length = varbit_length_attr(f.name)
                    parts.append(f"{left}.{length} == {right}.{length}")
            fields = " and ".join(parts)
            return f"({left}.valid == {right}.valid and (not {left}.valid or ({fields or 'True'})))"
        if isinstance(type_, T.StructType):
            parts = [self._equal_code(f"{left}.{attr(f.name)}", f"{right}.{attr(f.name)}", f.type)
                     for f in type_.fields]
            return "(" + (" and ".join(parts) or "True") + ")"
        if isinstance(type_, T.StackType):
            parts = [self._equal_code(f"{left}.items[{i}]", f"{right}.items[{i}]", type_.element)
                     for i in range(type_.size)]
            return "(" + " and ".join(parts) + ")"
        if isinstance(type_, T.TupleType):
            parts = [self._equal_code(f"{left}[{i}]", f"{right}[{i}]", element)
                     for i, element in enumerate(type_.elements)]
            return "(" + (" and ".join(parts) or "True") + ")"
        return f"({left} == {right})"
