"""Code for P4 statements: assignments, if/switch, action inlining, table apply, calls.

A mixin of :class:`testbed.p4.compiler.codegen.CodeGenerator`; it uses the generator's
``model`` (checker), ``info`` (ProgramInfo) and helper methods.
"""
from testbed.p4.compiler.pycode import Emitter, FunctionContext, attr, contains_return, literal
from testbed.p4.frontend import types as T
from testbed.p4.frontend.checker import Scope, Symbol


class StatementsMixin:
    """Code for P4 statements: assignments, if/switch, action inlining, table apply, calls."""

    def block(self, block, scope, fn):
        """Emit a block statement in a nested scope."""
        inner = scope.child()
        before = len(fn.out.lines)
        for statement in block.statements:
            self.statement(statement, inner, fn)
        if len(fn.out.lines) == before:
            fn.out.line("pass")

    def body(self, statement, scope, fn):
        """Emit the indented body of an if/else/switch case."""
        fn.out.indent()
        before = len(fn.out.lines)
        if statement.kind == "block":
            self.block(statement, scope, fn)
        else:
            self.statement(statement, scope.child(), fn)
        if len(fn.out.lines) == before:
            fn.out.line("pass")
        fn.out.dedent()

    def statement(self, node, scope, fn):
        """Emit one statement."""
        kind = node.kind
        out = fn.out
        if kind == "block":
            self.block(node, scope, fn)
        elif kind == "variable":
            type_ = self.model.resolve_type(node.type_ref)
            symbol = Symbol("var", node.name, type_, decl=node)
            name = self.py_name(symbol, fn)
            if node.init is not None:
                self.model.type_of(node.init, scope)
                self._check_assignable(node, type_, node.init.type)
                value = self.expr(node.init, scope, fn, want=type_)
                if isinstance(type_, (T.HeaderType, T.StructType)):
                    out.line(f"{name} = {self._initial_value(type_)}")
                    self._assign_composite(name, type_, node.init, scope, fn)
                else:
                    out.line(f"{name} = {value}")
            else:
                out.line(f"{name} = {self._initial_value(type_)}")
            scope.define(node.name, symbol)
        elif kind == "const":
            self.model._declare_const(node, scope)
        elif kind == "assign":
            self.assignment(node, scope, fn)
        elif kind == "call_statement":
            self.call_statement(node.call, scope, fn)
        elif kind == "if":
            cond_type = self.model.type_of(node.cond, scope)
            if not isinstance(cond_type, T.BoolType):
                raise self.error(node, "if condition must be bool")
            out.line(f"if {self.expr(node.cond, scope, fn)}:")
            self.body(node.then, scope, fn)
            if node.otherwise is not None:
                out.line("else:")
                self.body(node.otherwise, scope, fn)
        elif kind == "switch":
            self.switch(node, scope, fn)
        elif kind == "exit":
            if fn.kind == "parser":
                raise self.error(node, "exit is not allowed in a parser")
            if fn.kind == "function":
                raise self.error(node, "unsupported construct: exit in a function")
            out.line("return True")
        elif kind == "return":
            self.return_statement(node, scope, fn)
        else:
            raise self.error(node, f"unsupported construct: statement {kind}")

    def return_statement(self, node, scope, fn):
        """Emit ``return`` (function result, end of an inlined action, or end of a control)."""
        out = fn.out
        if fn.kind == "function":
            outs = fn.function_outs
            if node.expr is not None:
                self.model.type_of(node.expr, scope)
                value = self.expr(node.expr, scope, fn, want=fn.return_type)
                out.line(f"return ({value},{''.join(' ' + o + ',' for o in outs)})")
            else:
                out.line(f"return (None,{''.join(' ' + o + ',' for o in outs)})")
            return
        if node.expr is not None:
            raise self.error(node, "return with a value outside a function")
        if fn.return_stack:
            out.line("break")
        elif fn.kind == "control":
            out.line("return False")
        else:
            raise self.error(node, "return is not allowed here")

    def _check_assignable(self, node, target, source):
        if isinstance(target, T.BitType) and isinstance(source, T.BitType) and target != source:
            raise self.error(node, f"cannot assign {source.name_text()} to {target.name_text()} (cast it)")
        if isinstance(target, T.BoolType) and isinstance(source, (T.BitType, T.InfIntType)):
            raise self.error(node, "cannot assign an integer to a bool")
        if isinstance(target, (T.BitType,)) and isinstance(source, T.BoolType):
            raise self.error(node, "cannot assign a bool to a bit field (cast it)")

    def assignment(self, node, scope, fn):
        """Emit an assignment (scalars, slices, headers and structs by copy)."""
        target = node.target
        target_type = self.model.type_of(target, scope)
        value_type = self.model.type_of(node.value, scope)
        self._check_assignable(node, target_type, value_type)
        out = fn.out
        if isinstance(target_type, (T.HeaderType, T.StructType)):
            target_code = self.lvalue(target, scope, fn)
            self._assign_composite(target_code, target_type, node.value, scope, fn)
            if isinstance(target_type, T.HeaderType) and target.kind == "member" and \
                    isinstance(target.expr.type, T.UnionType):
                out.line(f"if {target_code}.valid:")
                out.indent()
                self._invalidate_union_siblings(target, scope, fn)
                out.dedent()
            return
        if isinstance(target_type, T.StackType):
            out.line(f"{self.lvalue(target, scope, fn)} = {self.expr(node.value, scope, fn)}.copy()")
            return
        value = self.expr(node.value, scope, fn, want=target_type)
        self.store(target, value, scope, fn)

    def _assign_composite(self, target_code, type_, value, scope, fn):
        out = fn.out
        if value.kind == "list":
            if len(value.items) != len(type_.fields):
                raise self.error(value, f"{type_.name}: {len(type_.fields)} fields, {len(value.items)} values")
            for field, item in zip(type_.fields, value.items):
                self.model.type_of(item, scope)
                out.line(f"{target_code}.{attr(field.name)} = {self.expr(item, scope, fn, want=field.type)}")
            if isinstance(type_, T.HeaderType):
                out.line(f"{target_code}.valid = True")
            return
        if value.type is not None and (type(value.type) is not type(type_) or value.type.name != type_.name):
            raise self.error(value, f"cannot assign {value.type.name_text()} to {type_.name_text()}")
        out.line(f"{target_code}.copy_from({self.expr(value, scope, fn)})")

    def store(self, target, value, scope, fn):
        """Emit ``target = value`` where target is an lvalue expression node."""
        out = fn.out
        if target.kind == "slice":
            base_type = target.expr.type
            hi, lo = target.hi_value, target.lo_value
            mask = ((1 << (hi - lo + 1)) - 1) << lo
            base = self.lvalue(target.expr, scope, fn)
            if isinstance(base_type, T.BitType) and base_type.signed:
                full = base_type.mask
                half = 1 << (base_type.width - 1)
                out.line(f"{base} = (((({base} & {full}) & {~mask & full}) | (({value}) << {lo} & {mask})) ^ {half}) "
                         f"- {half}")
            else:
                out.line(f"{base} = ({base} & {~mask & ((1 << base_type.width) - 1)}) | ((({value}) << {lo}) & {mask})")
            return
        out.line(f"{self.lvalue(target, scope, fn)} = {value}")

    def lvalue(self, node, scope, fn):
        """Python assignment target of an l-value expression (not slices: see :meth:`store`)."""
        kind = node.kind
        if kind == "name":
            symbol = scope.lookup(node.name)
            if symbol is None:
                raise self.error(node, f"unknown name {node.name!r}")
            if symbol.kind not in ("var", "param"):
                raise self.error(node, f"cannot assign to {node.name} ({symbol.kind})")
            if symbol.kind == "param" and symbol.direction == "in":
                raise self.error(node, f"cannot assign to in parameter {node.name}")
            return self.py_name(symbol, fn)
        if kind == "member":
            base_type = node.expr.type or self.model.type_of(node.expr, scope)
            base = self.lvalue(node.expr, scope, fn)
            if isinstance(base_type, T.StackType):
                if node.member == "last":
                    return f"{base}.items[{base}.next_index - 1]"
                if node.member == "next":
                    return f"{base}.items[{base}.next_index]"
                raise self.error(node, f"cannot assign to stack member {node.member}")
            return f"{base}.{attr(node.member)}"
        if kind == "index":
            base = self.lvalue(node.expr, scope, fn)
            return f"{base}.items[{self._index_code(node, scope, fn)}]"
        raise self.error(node, f"cannot assign to this expression ({kind})")

    def switch(self, node, scope, fn):
        """Emit a switch on ``t.apply().action_run`` or on a bit/enum value."""
        out = fn.out
        switch_type = self.model.type_of(node.expr, scope)
        if isinstance(switch_type, T.ActionEnumType):
            table = switch_type.table.table
            action_var = self._table_apply(node.expr.expr.func.expr, table, scope, fn)[1]
            labels = {}
            for ref in table.action_refs:
                labels[ref.symbol.name] = ref.symbol.qualified
            pending = []
            first = True
            for case in node.cases:
                if not case.is_default and (case.label is None or case.label not in labels):
                    raise self.error(case, f"switch label is not an action of table {table.name}")
                pending.append(case)
                if case.body is None:
                    continue
                default = any(c.is_default for c in pending)
                if default:
                    out.line("else:" if not first else "if True:")
                else:
                    names = ", ".join(repr(labels[c.label]) for c in pending)
                    out.line(f"{'if' if first else 'elif'} {action_var} in ({names},):")
                first = False
                self.body(case.body, scope, fn)
                pending = []
            return
        if not isinstance(switch_type, (T.BitType, T.EnumType, T.ErrorType)):
            raise self.error(node, "unsupported construct: switch on this expression type")
        value = fn.temp("sw")
        out.line(f"{value} = {self.expr(node.expr, scope, fn)}")
        pending = []
        first = True
        for case in node.cases:
            pending.append(case)
            if case.body is None:
                continue
            if any(c.is_default for c in pending):
                out.line("else:" if not first else "if True:")
            else:
                values = ", ".join(literal(self._const_for(c.value, scope, switch_type)) for c in pending)
                out.line(f"{'if' if first else 'elif'} {value} in ({values},):")
            first = False
            self.body(case.body, scope, fn)
            pending = []

    # ------------------------------------------------------------------ calls

    def call_statement(self, call, scope, fn):
        """Emit a call statement: action, function, extern, method, table or sub-control apply."""
        func = call.func
        model = self.model
        if func.kind == "name":
            symbol = scope.lookup(func.name)
            if symbol is None:
                raise self.error(func, f"unknown function or action {func.name!r}")
            if symbol.kind == "action":
                self.inline_action(symbol, call.args, scope, fn, call)
                return
            if symbol.kind == "extern_function":
                self.extern_function(func.name, call, scope, fn)
                return
            if symbol.kind == "function":
                code = self.function_call(symbol, call, scope, fn)
                fn.out.line(code)
                return
            raise self.error(call, f"{func.name} is not callable")
        if func.kind == "member":
            base = func.expr
            base_type = model.type_of(base, scope)
            method = func.member
            symbol = getattr(base, "symbol", None)
            if symbol is not None and symbol.kind == "table":
                if method != "apply":
                    raise self.error(call, f"table {symbol.name} has no method {method}")
                self._table_apply(base, symbol.table, scope, fn)
                return
            if symbol is not None and symbol.kind == "instance" and isinstance(symbol.type, T.BlockType):
                self._subcontrol_call(symbol, call, scope, fn)
                return
            if isinstance(base_type, T.HeaderType):
                target = self.expr(base, scope, fn)
                if method == "setValid":
                    self._invalidate_union_siblings(base, scope, fn)
                    fn.out.line(f"{target}.valid = True")
                elif method == "setInvalid":
                    fn.out.line(f"{target}.valid = False")
                elif method == "isValid":
                    fn.out.line(f"{target}.valid")
                else:
                    raise self.error(call, f"unsupported construct: header method {method}")
                return
            if isinstance(base_type, T.StackType) and method in ("push_front", "pop_front"):
                count = model.const_value(call.args[0], scope)
                element = self.class_for(base_type.element)
                fn.out.line(f"{self.expr(base, scope, fn)}.{method}({count}, {element})")
                return
            if isinstance(base_type, T.ExternType):
                self.extern_method(base, base_type, method, call, scope, fn)
                return
        raise self.error(call, "unsupported construct: this call")

    def _invalidate_union_siblings(self, header_node, scope, fn):
        """A header of a header_union becomes valid: the union's other members become invalid."""
        if header_node.kind != "member":
            return
        parent_type = header_node.expr.type or self.model.type_of(header_node.expr, scope)
        if not isinstance(parent_type, T.UnionType):
            return
        parent = self.expr(header_node.expr, scope, fn)
        for field in parent_type.fields:
            if field.name != header_node.member:
                fn.out.line(f"{parent}.{attr(field.name)}.valid = False")

    def _subcontrol_call(self, symbol, call, scope, fn):
        sub = symbol.control
        if call.func.member != "apply":
            raise self.error(call, f"control instance {symbol.name} has no method {call.func.member}")
        if len(call.args) != len(sub.params):
            raise self.error(call, f"{symbol.name}.apply needs {len(sub.params)} arguments")
        args = []
        copy_back = []
        for arg, param in zip(call.args, sub.params):
            self.model.type_of(arg, scope)
            if isinstance(param.type, (T.HeaderType, T.StructType, T.StackType)):
                args.append(self.expr(arg, scope, fn))
            elif param.direction in ("out", "inout"):
                temp = fn.temp("a")
                fn.out.line(f"{temp} = {self.expr(arg, scope, fn, want=param.type)}")
                args.append(temp)
                copy_back.append((arg, temp))
            else:
                args.append(self.expr(arg, scope, fn, want=param.type))
        if copy_back:
            raise self.error(call, "unsupported construct: scalar out/inout parameters of a sub-control")
        fn.out.line(f"if {sub.py_function}(P, {', '.join(args)}):")
        fn.out.line("    return True")

    def inline_action(self, symbol, args, scope, fn, node, from_table=None):
        """Emit an action's body in place (a direct call: ``args`` are expression nodes)."""
        decl = symbol.decl
        out = fn.out
        params = decl.param_symbols
        symbol.inlined = True
        if from_table is None:
            if len(args) != len(params):
                raise self.error(node, f"action {symbol.name} needs {len(params)} argument(s), got {len(args)}")
        copy_back = []
        for index, param in enumerate(params):
            name = self.py_name(param, fn)
            if from_table is not None:
                continue
            arg = args[index]
            self.model.type_of(arg, scope)
            if isinstance(param.type, (T.HeaderType, T.StructType, T.StackType)):
                out.line(f"{name} = {self.expr(arg, scope, fn)}")
                continue
            if param.direction == "out":
                out.line(f"{name} = {self._initial_value(param.type)}")
                copy_back.append((arg, name))
            else:
                self._check_assignable(arg, param.type, arg.type)
                out.line(f"{name} = {self.expr(arg, scope, fn, want=param.type)}")
                if param.direction == "inout":
                    copy_back.append((arg, name))
        if from_table is not None:
            data = [p for p in params if not p.direction]
            if len(data) != len(params):
                raise self.error(decl, f"action {symbol.name}: directional parameters in a table action")
            if data:
                names = ", ".join(self.py_name(p, fn) for p in data)
                out.line(f"{names}, = {from_table}.args")
                for p in data:
                    if isinstance(p.type, T.BitType) and p.type.signed:
                        out.line(f"{p.py} = {self._from_unsigned(p.py, p.type)}")
                    elif isinstance(p.type, T.BoolType):
                        out.line(f"{p.py} = {p.py} != 0")
        needs_loop = contains_return(decl.body)
        if needs_loop:
            out.line("while True:")
            out.indent()
            fn.return_stack.append("action")
        self.block(decl.body, symbol.scope, fn)
        if needs_loop:
            out.line("break")
            fn.return_stack.pop()
            out.dedent()
        for arg, name in copy_back:
            self.store(arg, name, scope, fn)

    def function_call(self, symbol, call, scope, fn):
        """Code calling a P4 function (returns a tuple: (result, outs...))."""
        decl = symbol.decl
        if not hasattr(decl, "py_function"):
            self._gen_function(symbol)
        if len(call.args) != len(decl.params):
            raise self.error(call, f"{decl.name} needs {len(decl.params)} argument(s)")
        args = []
        outs = []
        for arg, param in zip(call.args, decl.param_symbols):
            self.model.type_of(arg, scope)
            args.append(self.expr(arg, scope, fn, want=param.type))
            if param.direction in ("out", "inout"):
                outs.append(arg)
        temp = fn.temp("f")
        fn.out.line(f"{temp} = {decl.py_function}(P, {', '.join(args)})")
        for index, arg in enumerate(outs):
            self.store(arg, f"{temp}[{index + 1}]", scope, fn)
        return f"{temp}[0]" if not isinstance(symbol.return_type, T.VoidType) else "pass"

    def _gen_function(self, symbol):
        decl = symbol.decl
        emitter = Emitter()
        fn = FunctionContext("function", emitter)
        scope = Scope(self.model.global_scope)
        decl.param_symbols = []
        names = []
        for param in decl.params:
            type_ = self.model.resolve_type(param.type_ref)
            param_symbol = Symbol("param", param.name, type_, direction=param.direction, decl=param)
            scope.define(param.name, param_symbol)
            decl.param_symbols.append(param_symbol)
            names.append(self.py_name(param_symbol, fn))
        fn.function_outs = [p.py for p in decl.param_symbols if p.direction in ("out", "inout")]
        fn.return_type = symbol.return_type
        decl.py_function = self.global_name("fn_" + decl.name)
        emitter.line(f"def {decl.py_function}(P, {', '.join(names)}):")
        emitter.indent()
        self.block(decl.body, scope, fn)
        emitter.line(f"return (None,{''.join(' ' + o + ',' for o in fn.function_outs)})")
        emitter.dedent()
        emitter.line("")
        self.globals_init.extend(emitter.lines)

    def _table_apply(self, node, table, scope, fn):
        """Emit the lookup and action dispatch; return (hit variable, action-name variable)."""
        if getattr(fn, "control", None) is None or fn.kind != "control":
            raise self.error(node, "tables can only be applied in a control")
        out = fn.out
        model = self.model
        tbl = self.table_global(table)
        keys = []
        for key in table.match_keys:
            key_type = model.type_of(key.expr, table.control.scope)
            code = self.expr(key.expr, table.control.scope, fn)
            keys.append(self._to_unsigned(code, key_type) if isinstance(key_type, (T.BitType, T.BoolType)) else code)
        key_tuple = "(" + "".join(k + ", " for k in keys) + ")"
        selector = "None"
        if table.selector_keys:
            profile = self.info.action_profiles[table.implementation.qualified]
            fields = []
            for key in table.selector_keys:
                key_type = model.type_of(key.expr, table.control.scope)
                code = self._to_unsigned(self.expr(key.expr, table.control.scope, fn), key_type)
                fields.append((code, key.width))
            packed, nbytes = self._packed(fields)
            selector = fn.temp("h")
            # BMv2 hashes the selector keys with the algorithm and uses the whole hash value
            # (the outputWidth constructor argument is not used by simple_switch)
            out.line(f"{selector} = _compute_bytes({profile.algorithm!r}, {packed}.to_bytes({nbytes}, 'big'))")
        result = fn.temp("r")
        hit = fn.temp("hit")
        action = fn.temp("act")
        out.line(f"{result} = {tbl}.lookup({key_tuple}, {selector})")
        out.line(f"{hit} = {result}.hit")
        out.line(f"{action} = {result}.action")
        extras = []
        if table.direct_counter is not None:
            counter = self.instance_global(table.direct_counter)
            extras.append(f"{counter}.count({result}.entry, P.sm.f_packet_length)")
        if table.direct_meter is not None:
            meter = self.instance_global(table.direct_meter)
            unit = self.info.direct_meters[table.direct_meter.qualified].unit
            size = "P.sm.f_packet_length" if unit == "BYTES" else "1"
            extras.append(f"P.meter_color = {meter}.execute({result}.entry, {size}, P.now_ns)")
        if table.idle_timeout:
            extras.append(f"{tbl}.record_hit({result}.entry, P.now_ns)")
        if extras:
            out.line(f"if {hit}:")
            out.indent()
            for line in extras:
                out.line(line)
            out.dedent()
        first = True
        for ref in table.action_refs:
            out.line(f"{'if' if first else 'elif'} {action} == {ref.symbol.qualified!r}:")
            first = False
            out.indent()
            before = len(out.lines)
            self.inline_action(ref.symbol, None, scope, fn, node, from_table=result)
            if len(out.lines) == before:
                out.line("pass")
            out.dedent()
        return hit, action
