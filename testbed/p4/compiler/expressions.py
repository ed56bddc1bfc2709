"""Python expressions for P4 expressions: width-correct arithmetic, casts, slices, calls.

A mixin of :class:`testbed.p4.compiler.codegen.CodeGenerator`; it uses the generator's
``model`` (checker), ``info`` (ProgramInfo) and helper methods.
"""
from testbed.p4.compiler.pycode import FOLDABLE, attr, literal, wrap
from testbed.p4.frontend import types as T
from testbed.p4.frontend.checker import convert_int


class ExpressionsMixin:
    """Python expressions for P4 expressions: width-correct arithmetic, casts, slices, calls."""

    def expr(self, node, scope, fn, want=None):
        """Python expression code for ``node`` (already typed by ``type_of``)."""
        if node.type is None:
            self.model.type_of(node, scope)
        type_ = node.type
        if node.kind in FOLDABLE and isinstance(type_, (T.InfIntType, T.BitType, T.BoolType, T.EnumType,
                                                         T.ErrorType)):
            folded = self.model.try_const(node, scope)
            if folded is not None:
                value, folded_type = folded
                target = want if isinstance(want, (T.BitType, T.EnumType)) else folded_type
                if isinstance(value, bool):
                    return literal(value)
                if isinstance(target, (T.BitType, T.EnumType)):
                    value = convert_int(value, target)
                return literal(value)
        kind = node.kind
        if kind == "bool":
            return literal(node.value)
        if kind == "name":
            symbol = scope.lookup(node.name)
            if symbol is None:
                raise self.error(node, f"unknown name {node.name!r}")
            if symbol.kind == "const":
                value = symbol.value
                if isinstance(want, T.BitType) and not isinstance(value, bool):
                    value = convert_int(value, want)
                return literal(value)
            if symbol.kind in ("var", "param"):
                return self.py_name(symbol, fn)
            raise self.error(node, f"{node.name} ({symbol.kind}) is not a value")
        if kind == "type_member":
            return literal(self.model.const_value(node, scope))
        if kind == "error_member":
            return literal(self.model.errors[node.member])
        if kind == "member":
            return self._member_expr(node, scope, fn)
        if kind == "index":
            base = self.expr(node.expr, scope, fn)
            return f"{base}.items[{self._index_code(node, scope, fn)}]"
        if kind == "slice":
            base = self.expr(node.expr, scope, fn)
            width = node.hi_value - node.lo_value + 1
            shifted = f"({base} >> {node.lo_value})" if node.lo_value else base
            return f"({shifted} & {(1 << width) - 1})"
        if kind == "cast":
            return self._cast(node, scope, fn)
        if kind == "unop":
            inner = self.expr(node.expr, scope, fn, want=type_)
            if node.op == "!":
                return f"(not {inner})"
            if node.op == "~":
                if type_.signed:
                    return f"(~{inner})"
                return f"({inner} ^ {type_.mask})"
            if node.op == "-":
                if isinstance(type_, T.InfIntType):
                    return f"(-{inner})"
                return wrap(f"(-{inner})", type_)
        if kind == "binop":
            return self._binop(node, scope, fn)
        if kind == "conditional":
            cond = self.expr(node.cond, scope, fn)
            then = self.expr(node.then, scope, fn, want=type_)
            other = self.expr(node.otherwise, scope, fn, want=type_)
            return f"({then} if {cond} else {other})"
        if kind == "call":
            return self._call_expr(node, scope, fn)
        if kind == "list":
            raise self.error(node, "unsupported construct: list expression in this position")
        if kind == "string":
            return repr(node.value)
        raise self.error(node, f"unsupported construct: expression {kind}")

    def _member_expr(self, node, scope, fn):
        base_type = node.expr.type
        if isinstance(base_type, T.TableResultType):
            hit, action = self._table_apply(node.expr.func.expr, base_type.table.table, scope, fn)
            if node.member == "hit":
                return hit
            if node.member == "miss":
                return f"(not {hit})"
            return action
        base = self.expr(node.expr, scope, fn)
        if isinstance(base_type, T.StackType):
            member = node.member
            if member == "last":
                return f"{base}.items[{base}.next_index - 1]"
            if member == "next":
                return f"{base}.items[{base}.next_index]"
            if member == "lastIndex":
                return f"(({base}.next_index - 1) & 4294967295)"
            if member == "nextIndex":
                return f"{base}.next_index"
            if member == "size":
                return str(base_type.size)
            raise self.error(node, f"unsupported construct: stack member {member}")
        return f"{base}.{attr(node.member)}"

    def _cast(self, node, scope, fn):
        target = node.type
        source = node.expr.type
        inner = self.expr(node.expr, scope, fn, want=target if isinstance(source, T.InfIntType) else None)
        if isinstance(target, T.BoolType):
            if isinstance(source, T.BoolType):
                return inner
            if isinstance(source, T.BitType) and source.width == 1:
                return f"({inner} != 0)"
            raise self.error(node, f"cannot cast {source.name_text()} to bool")
        if isinstance(target, T.EnumType):
            if target.underlying is None:
                raise self.error(node, f"cannot cast to enum {target.name}")
            target = target.underlying
        if isinstance(target, T.BitType):
            if isinstance(source, T.BoolType):
                return f"(1 if {inner} else 0)"
            if isinstance(source, T.EnumType):
                if source.underlying is None:
                    raise self.error(node, f"cannot cast enum {source.name} to {target.name_text()}")
                source = source.underlying
            if isinstance(source, T.InfIntType):
                return f"{inner}"
            if not isinstance(source, T.BitType):
                raise self.error(node, f"cannot cast {source.name_text()} to {target.name_text()}")
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
        raise self.error(node, f"unsupported construct: cast to {target.name_text()}")

    def _binop(self, node, scope, fn):
        op = node.op
        type_ = node.type
        left_type = node.left.type
        right_type = node.right.type
        if op in ("land", "lor"):
            left = self.expr(node.left, scope, fn)
            right = self.expr(node.right, scope, fn)
            return f"({left} {'and' if op == 'land' else 'or'} {right})"
        if op in ("eq", "ne", "lt", "gt", "le", "ge"):
            operand_type = left_type if not isinstance(left_type, T.InfIntType) else right_type
            left = self.expr(node.left, scope, fn, want=operand_type)
            right = self.expr(node.right, scope, fn, want=operand_type)
            symbol = {"eq": "==", "ne": "!=", "lt": "<", "gt": ">", "le": "<=", "ge": ">="}[op]
            return f"({left} {symbol} {right})"
        if op == "concat":
            left = self.expr(node.left, scope, fn)
            right = self.expr(node.right, scope, fn)
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
            left = self.expr(node.left, scope, fn, want=type_)
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
                return wrap(f"({left} << {right} if {right} < {type_.width} else 0)", type_)
            return f"_shl({left}, {right}, {type_.width}, {type_.mask})"
        left = self.expr(node.left, scope, fn, want=type_)
        right = self.expr(node.right, scope, fn, want=type_)
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

    def _call_expr(self, node, scope, fn):
        func = node.func
        if func.kind == "member":
            base_type = func.expr.type
            method = func.member
            if isinstance(base_type, T.HeaderType) and method == "isValid":
                return f"{self.expr(func.expr, scope, fn)}.valid"
            if isinstance(base_type, T.UnionType) and method == "isValid":
                union = self.expr(func.expr, scope, fn)
                return "(" + " or ".join(f"{union}.{attr(f.name)}.valid" for f in base_type.fields) + ")"
            if isinstance(base_type, (T.HeaderType, T.StructType)) and method in ("minSizeInBits", "minSizeInBytes"):
                width = T.flatten_width(base_type)
                return str(width if method == "minSizeInBits" else (width + 7) // 8)
            if isinstance(base_type, T.ExternType) and base_type.name == "packet_in":
                if fn.kind != "parser":
                    raise self.error(node, "packet_in methods are only available in a parser")
                if method == "lookahead":
                    return self._lookahead(node, fn)
                if method == "length":
                    return "n"
            symbol = getattr(func.expr, "symbol", None)
            if symbol is not None and symbol.kind == "table":
                raise self.error(node, "use t.apply().hit, .miss or .action_run")
        if func.kind == "name":
            symbol = scope.lookup(func.name)
            if symbol is not None and symbol.kind == "function":
                return self.function_call(symbol, node, scope, fn)
        raise self.error(node, "unsupported construct: this call in an expression")

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
        raise self.error(node, f"unsupported construct: lookahead<{type_.name_text()}>")

    def _index_code(self, node, scope, fn):
        stack_type = node.expr.type
        folded = self.model.try_const(node.index, scope)
        if folded is not None:
            index = int(folded[0])
            if not 0 <= index < stack_type.size:
                raise self.error(node, f"header stack index {index} out of bounds (size {stack_type.size})")
            return str(index)
        return self.expr(node.index, scope, fn)
