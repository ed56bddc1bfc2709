"""The walk over a checked program that both code generators share.

The Python generator (:class:`testbed.p4.compiler.codegen.CodeGenerator`) and the C one
(:class:`testbed.p4.native.cgen.CGenerator`) visit the same program in the same order and
refuse the same mistakes; they differ only in the text they emit.  :class:`Walk` holds the
visit: which statement, call or parser construct a node is, the symbol lookups and checks
(and the errors they raise, with file:line), how switch cases and select cases are grouped.
A generator supplies the emitting methods it calls (named below each section).

Errors: ``self.error(node, message)`` for a mistake in the program, ``self.unsupported(node,
construct)`` for a construct the generator cannot compile; both name ``node``'s file:line.
"""
from testbed.p4.compiler.pycode import FOLDABLE, Frame
from testbed.p4.frontend import types as T
from testbed.p4.frontend.checker import SIZE_METHODS, Scope, Symbol, convert_int
from testbed.p4.frontend.lexer import parse_integer

#: the argument kinds that are built from their parts (typed against the parameter, not on their own)
BUILT = ("list", "struct_expr", "invalid_header")


class Walk:
    """Traversal and dispatch of statements, calls, parser states and constant expressions.

    Expects of the generator: ``model`` (the checker), ``error``, ``unsupported``, the
    emitting methods each section names, and :attr:`SYNTAX`.
    """

    #: the generator's text of the small forms, :meth:`str.format` templates: "true", "false", "not"
    #: (code), "land"/"lor" (left, right), "choice" (cond, then, otherwise), "jump" (kind: break or
    #: continue), "keyset_mask" (name, mask, value), "keyset_range" (name, low, high), "keyset_equal"
    #: (name, value), "bit_to_bool" and "bool_to_bit" (code); numbers in them come from ``int_literal``
    SYNTAX = {}

    def form(self, which, /, **parts):
        """The generator's text of the small form ``which`` with ``parts`` filled in."""
        return self.SYNTAX[which].format(**parts)

    def bool_literal(self, value):
        return self.form("true" if value else "false")

    def not_code(self, code):
        return self.form("not", code=code)

    # ------------------------------------------------------------------ field lists
    def _collect_field_lists(self, struct, path):
        """Record in ``field_lists`` (number -> [field path]) the ``@field_list`` annotations of user metadata."""
        for f in struct.fields:
            for annotation in f.annotations or ():
                if annotation.name == "field_list":
                    for index in self._field_list_indexes(annotation, f.name):
                        self.field_lists.setdefault(index, []).append(path + [f.name])
            if isinstance(f.type, T.StructType):
                self._collect_field_lists(f.type, path + [f.name])

    def _field_list_indexes(self, annotation, field_name):
        """The field list numbers of ``@field_list(a, b, ...)``: integers or names of constants (as p4c takes them)."""
        where = annotation.tokens[0].line if annotation.tokens else None
        indexes = []
        for token in annotation.tokens:
            if token.kind == ",":
                continue
            if token.kind == "INTEGER":
                try:
                    value = parse_integer(token.value)[0]
                except ValueError:
                    value = None
            else:
                symbol = self.model.global_scope.lookup(str(token.value))
                value = symbol.value if symbol is not None and symbol.kind == "const" else None
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 256:
                raise self.error(where if where is not None else 0,
                                 f"@field_list of field {field_name}: {token.value!r} is not a field list number "
                                 f"(an integer 0..255 or the name of such a constant)")
            indexes.append(value)
        return indexes

    def _synthetic_field_list(self, data, scope):
        """Register the user-metadata fields named by a deprecated ``clone3``/``resubmit``/``recirculate``
        data argument as a field list; return its number."""
        items = data.items if data.kind == "list" else [data]
        paths = []
        for item in items:
            type_ = self.model.type_of(item, scope)
            path = []
            node = item
            while node.kind == "member":
                path.insert(0, node.member)
                node = node.expr
            symbol = scope.lookup(node.name) if node.kind == "name" else None
            if symbol is None or symbol.type is not self.meta_type:
                raise self.unsupported(item, "only fields of the user metadata can be preserved")
            paths.extend(self._leaf_paths(path, type_, item))
        index = 1000 + len([i for i in self.field_lists if i >= 1000])
        self.field_lists[index] = paths
        return index

    def _leaf_paths(self, path, type_, node):
        if isinstance(type_, (T.HeaderType, T.StackType)):
            raise self.unsupported(node, "preserving a header of the metadata")
        if isinstance(type_, T.StructType):
            return [leaf for f in type_.fields for leaf in self._leaf_paths(path + [f.name], f.type, node)]
        return [path]

    # ------------------------------------------------------------------ statements
    def statement(self, node, scope, fn):
        """Emit one statement.

        Emitters: block, variable_declaration, assignment, compound_assignment, if_statement,
        switch (its emitters), for_statement, for_in_statement, emit_exit,
        emit_function_return, emit_action_return.
        """
        kind = node.kind
        fn.out.origin = node.loc
        self.model.current = node.loc
        if kind == "block":
            self.block(node, scope, fn)
        elif kind == "variable":
            type_ = self.model.resolve_type(node.type_ref)
            symbol = Symbol("var", node.name, type_, decl=node)
            self.variable_declaration(symbol, node, scope, fn)
            scope.define(node.name, symbol)
        elif kind == "const":
            self.model._declare_const(node, scope)
        elif kind == "assign":
            self.assignment(node, scope, fn)
        elif kind == "compound_assign":
            target_type = self.model.type_of(node.target, scope)
            if not isinstance(target_type, T.BitType):
                raise self.error(node, f"{node.op} needs a bit<W> or int<W> target, got {target_type.name_text()}")
            self.compound_assignment(node, target_type, scope, fn)
        elif kind == "call_statement":
            self.call_statement(node.call, scope, fn)
        elif kind == "if":
            self.if_statement(node, scope, fn)
        elif kind == "switch":
            self.switch(node, scope, fn)
        elif kind == "exit":
            if fn.kind == "parser":
                raise self.error(node, "exit is not allowed in a parser")
            if fn.kind == "function":
                raise self.error(node, "exit is not allowed in a function (P4_16: only in actions and controls)")
            self.exit_statement(node, fn)
        elif kind == "return":
            self.return_statement(node, scope, fn)
        elif kind == "for":
            if fn.kind == "parser":
                raise self.unsupported(node, "for loop in a parser")
            self.for_statement(node, scope, fn)
        elif kind == "for_in":
            if fn.kind == "parser":
                raise self.unsupported(node, "for loop in a parser")
            self.for_in_statement(node, scope, fn)
        elif kind in ("break", "continue"):
            self.loop_jump(node, fn)
        else:
            raise self.unsupported(node, f"statement {kind}")

    def exit_statement(self, node, fn):
        """``exit`` in a control or an action."""
        self.emit_exit(fn)

    def condition(self, node, cond, scope, what):
        """Type-check the condition of an ``if`` or ``for``: it must be bool."""
        if not isinstance(self.model.type_of(cond, scope), T.BoolType):
            raise self.error(node, f"{what} condition must be bool")

    def return_statement(self, node, scope, fn):
        """``return``: a function's result, the end of an inlined action, or the end of a control."""
        if fn.kind == "function":
            self.emit_function_return(node, scope, fn)
            return
        if node.expr is not None:
            raise self.error(node, "return with a value outside a function")
        if fn.kind == "parser":
            raise self.error(node, "return is not allowed in a parser")
        if fn.innermost("action") >= 0:
            self.emit_action_return(fn, node)
        else:
            fn.out.line(fn.return_code)

    def for_in_statement(self, node, scope, fn):
        """``for (T x in lo .. hi)``, ``for (T x in stack)`` and over a list of values (P4_16 1.2.4).

        Emitters: loop_variable (returns what the loop_over_* get), loop_over_range, loop_over_stack,
        loop_over_values, body, end_loop.
        """
        inner = scope.child()
        type_ = self.model.resolve_type(node.type_ref)
        symbol = Symbol("var", node.name, type_, decl=node)
        variable = self.loop_variable(symbol, node, fn)
        inner.define(node.name, symbol)
        collection = node.collection
        if collection.kind == "range":
            if not isinstance(type_, T.BitType):
                raise self.error(node, "the variable of a for loop over a range must be bit<W> or int<W>")
            self.loop_over_range(variable, symbol, collection, scope, fn)
        else:
            collection_type = self.model.type_of(collection, scope)
            if isinstance(collection_type, T.StackType):
                if collection_type.element.name != getattr(type_, "name", None):
                    raise self.error(node, f"for loop variable of type {type_.name_text()} over a stack of "
                                           f"{collection_type.element.name_text()}")
                self.loop_over_stack(variable, symbol, collection, collection_type, scope, fn)
            elif isinstance(collection_type, T.TupleType) and collection.kind == "list":
                self.loop_over_values(variable, symbol, collection.items, scope, fn)
            else:
                raise self.unsupported(node, f"for loop over a {collection_type.name_text()}")
        frame = self.loop_frame(fn)
        self.body(node.body, inner, fn)
        fn.frames.pop()
        self.end_loop(frame, fn)

    @staticmethod
    def loop_frame(fn, updates=None, scope=None):
        """Enter a P4 loop (``continue`` runs ``updates`` in ``scope`` first); return its frame."""
        frame = Frame("loop")
        frame.updates = updates
        frame.scope = scope
        fn.frames.append(frame)
        return frame

    def loop_jump(self, node, fn):
        """``break`` / ``continue`` of the innermost P4 loop."""
        if not fn.frames or fn.frames[-1].kind != "loop":
            raise self.error(node, f"{node.kind} outside a loop")
        frame = fn.frames[-1]
        if node.kind == "continue" and frame.updates:
            for statement in frame.updates:
                self.statement(statement, frame.scope, fn)
        fn.out.line(self.form("jump", kind=node.kind))

    # ------------------------------------------------------------------ switch
    def switch(self, node, scope, fn):
        """A switch on ``t.apply().action_run`` or on a bit/enum/error value.

        Cases without a body fall through to the next body: they are grouped with it.
        Emitters: _table_apply, switch_value (the value into a temporary), switch_action_label,
        switch_constant, switch_case (the head of a group: values, or None for default), body.
        """
        switch_type = self.model.type_of(node.expr, scope)
        if isinstance(switch_type, T.ActionEnumType):
            table = switch_type.table.table
            value = self._table_apply(node.expr.expr.func.expr, table, scope, fn)[1]
            labels = {ref.symbol.name: ref.symbol.qualified for ref in table.action_refs}

            def case_value(case):
                return self.switch_action_label(labels[case.label])
        elif isinstance(switch_type, (T.BitType, T.EnumType, T.ErrorType)):
            value = self.switch_value(node.expr, scope, fn)

            def case_value(case):
                return self.switch_constant(self._const_for(case.value, scope, switch_type))
        else:
            raise self.unsupported(node, "switch on this expression type")
        pending = []
        first = True
        for case in node.cases:
            if isinstance(switch_type, T.ActionEnumType) and not case.is_default and \
                    (case.label is None or case.label not in labels):
                raise self.error(case, f"switch label is not an action of table {table.name}")
            pending.append(case)
            if case.body is None:
                continue
            default = any(c.is_default for c in pending)
            self.switch_case(fn, first, value, None if default else [case_value(c) for c in pending])
            first = False
            self.body(case.body, scope, fn)
            pending = []

    # ------------------------------------------------------------------ call statements
    def call_statement(self, call, scope, fn):
        """A call statement: action, function, extern, method, table or sub-control/sub-parser apply.

        Emitters: inline_action, extern_function, function_call, _table_apply, subparser_call,
        subcontrol_call, header_validity, stack_shift, extern_method.
        """
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
                self.function_call(symbol, call, scope, fn)
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
                self._block_apply(symbol, call, scope, fn)
                return
            if isinstance(base_type, T.HeaderType):
                if method not in ("setValid", "setInvalid", "isValid"):
                    raise self.unsupported(call, f"header method {method}")
                self.header_validity(base, method, scope, fn)
                return
            if isinstance(base_type, T.StackType) and method in ("push_front", "pop_front"):
                count = model.const_value(call.args[0], scope)
                if isinstance(count, bool) or not isinstance(count, int) or count < 0:
                    raise self.error(call, f"{method} needs a non-negative constant count")
                self.stack_shift(base, base_type, method, count, scope, fn)
                return
            if isinstance(base_type, T.ExternType):
                self.extern_method(base, base_type, method, call, scope, fn)
                return
        raise self.unsupported(call, "this call")

    def function_scope(self, decl):
        """The scope of a P4 function's body: its parameters (also listed in ``decl.param_symbols``)."""
        scope = Scope(self.model.global_scope)
        decl.param_symbols = []
        for param in decl.params:
            type_ = self.model.resolve_type(param.type_ref)
            symbol = Symbol("param", param.name, type_, direction=param.direction, decl=param)
            scope.define(param.name, symbol)
            decl.param_symbols.append(symbol)
        return scope

    def _block_apply(self, symbol, call, scope, fn):
        """``c.apply(...)`` of a control instance, ``p.apply(packet, ...)`` of a parser instance (in a state)."""
        method = call.func.member
        if symbol.type.block_kind == "parser":
            sub = symbol.parser
            if method != "apply":
                raise self.error(call, f"parser instance {symbol.name} has no method {method}")
            if fn.kind != "parser":
                raise self.error(call, "a parser can only be applied in a parser state")
            self.check_arguments(call, f"{symbol.name}.apply", sub.params, call.args)
            packet_type = self.model.type_of(call.args[0], scope)
            if not (isinstance(packet_type, T.ExternType) and packet_type.name == "packet_in"):
                raise self.error(call, f"{symbol.name}.apply: the first argument must be the packet_in")
            self.subparser_call(symbol, call, scope, fn)
            return
        if method != "apply":
            raise self.error(call, f"control instance {symbol.name} has no method {method}")
        self.check_arguments(call, f"{symbol.name}.apply", symbol.control.params, call.args)
        self.subcontrol_call(symbol, call, scope, fn)

    def check_arguments(self, call, callee, params, args):
        """Refuse a call with another number of arguments than ``params``."""
        if len(args) != len(params):
            raise self.error(call, f"{callee} needs {len(params)} argument(s), got {len(args)}")

    def action_pairs(self, symbol, args, node, bound=()):
        """(argument, parameter) pairs of an action run: a direct call's ``args``, or (``args`` None) the
        arguments ``bound`` to its directional parameters in a table's actions list."""
        params = symbol.decl.param_symbols
        if args is not None:
            self.check_arguments(node, f"action {symbol.name}", params, args)
            return list(zip(args, params))
        directional = [p for p in params if p.direction]
        if len(bound) != len(directional):
            raise self.error(node, f"action {symbol.name}: its directional parameters must be bound in the "
                                   f"table's actions list ({len(directional)} needed, {len(bound)} given)")
        return list(zip(bound, directional))

    def _invalidate_union_siblings(self, header_node, scope, fn):
        """A header of a header_union becomes valid: the union's other members become invalid.

        Emitters: union_code, invalidate_member.
        """
        if header_node.kind != "member":
            return
        parent_type = header_node.expr.type or self.model.type_of(header_node.expr, scope)
        if not isinstance(parent_type, T.UnionType):
            return
        parent = self.union_code(header_node.expr, scope, fn)
        for field in parent_type.fields:
            if field.name != header_node.member:
                self.invalidate_member(fn, parent, field.name)

    # ------------------------------------------------------------------ parsers
    def gen_parser(self, parser, out, sub=False):
        """A parser's function: a loop over its states; sub-parsers (parser instances it applies) first.

        Emitters: new_function, parser_prologue (returns the function's name), _local_variable,
        parser_loop, parser_state, parser_state_end, parser_epilogue, and those of transitions.
        """
        fn = self.new_function("parser", out)
        fn.subparser = sub
        params = parser.params
        if not sub and len(params) != 4:
            raise self.error(parser.decl, "a v1model parser has 4 parameters (packet_in, headers, metadata, "
                                          "standard_metadata)")
        if not params or not (isinstance(params[0].type, T.ExternType) and params[0].type.name == "packet_in"):
            raise self.error(parser.decl, f"parser {parser.decl.name}: the first parameter must be a packet_in")
        for subparser in parser.subparsers.values():
            self.gen_parser(subparser, out, sub=True)
        function = self.parser_prologue(parser, fn, sub)
        for variable in parser.variables:
            self._local_variable(variable, parser.scope, fn)
        ordered = ["start"] + [s for s in parser.states if s != "start"]
        self.state_ids = {name: index for index, name in enumerate(ordered)}
        self.parser_loop(fn)
        for position, name in enumerate(ordered):
            state = parser.states[name]
            if name in ("accept", "reject"):
                raise self.error(state, f"a state may not be named {name}")
            self.current_state_id = self.state_ids[name]
            self.parser_state(fn, self.current_state_id, position == 0)
            scope = parser.scope.child()
            for statement in state.statements:
                self.statement(statement, scope, fn)
            self._transition(state, scope, fn)
            self.parser_state_end(fn)
        self.parser_epilogue(parser, fn, sub)
        return function

    def _goto(self, target, node, fn):
        """Leave the state for ``target``: accept, reject or another state.

        Emitters: goto_end (accept or reject), goto_state (``backward``: it may loop, so it counts).
        """
        if target in ("accept", "reject"):
            self.goto_end(fn, target == "reject")
        elif target in self.state_ids:
            self.goto_state(fn, self.state_ids[target], self.state_ids[target] <= self.current_state_id)
        else:
            raise self.error(node, f"transition to unknown state {target!r}")

    def _transition(self, state, scope, fn):
        """A state's transition: direct, or a select over its cases in order (no match: error NoMatch).

        Emitters: no_transition, select_key (a key into a temporary), select_case (the head of a case
        with conditions; None for the default), select_case_end, select_no_match, and keyset_* for
        the conditions.
        """
        transition = state.transition
        if transition is None:
            self.no_transition(fn)
            return
        if transition.kind == "transition_direct":
            self._goto(transition.target, transition, fn)
            return
        keys = []
        for expr in transition.exprs:
            key_type = self.model.type_of(expr, scope)
            keys.append((self.select_key(expr, scope, fn), key_type))
        first = True
        for case in transition.cases:
            keyset = case.keyset
            items = keyset.items if keyset.kind == "tuple_keyset" else [keyset]
            if len(items) == 1 and items[0].kind in ("default", "dontcare"):
                conditions = []
            else:
                if len(items) != len(keys):
                    raise self.error(case, f"select has {len(keys)} key(s), the case has {len(items)} value(s)")
                conditions = [c for c in (self._keyset_condition(item, key, scope) for item, key in zip(items, keys))
                              if c]
            self.select_case(fn, first, conditions or None)
            self._goto(case.target, case, fn)
            self.select_case_end(fn, first, conditions or None)
            if not conditions:
                return
            first = False
        self.select_no_match(fn)

    def _keyset_condition(self, item, key, scope):
        """The condition code of one keyset item on one select key (None: matches anything).

        Forms: keyset_mask, keyset_range, keyset_equal.
        """
        name, key_type = key
        if item.kind in ("default", "dontcare"):
            return None
        if item.kind == "mask":
            value = self._const_for(item.value, scope, key_type)
            mask = self._const_for(item.mask, scope, key_type)
            return self.form("keyset_mask", name=name, mask=self.int_literal(mask),
                             value=self.int_literal(value & mask))
        if item.kind == "range":
            low = self._const_for(item.low, scope, key_type)
            high = self._const_for(item.high, scope, key_type)
            return self.form("keyset_range", name=name, low=self.int_literal(low), high=self.int_literal(high))
        return self.form("keyset_equal", name=name, value=self.int_literal(self._const_for(item, scope, key_type)))

    def _const_for(self, expr, scope, type_):
        """The value of a constant expression as a value of ``type_`` (bit<W>: below 2**W)."""
        value = self.model.const_value(expr, scope)
        if isinstance(value, bool):
            return value
        if isinstance(type_, (T.BitType, T.EnumType)):
            value = convert_int(value, type_)
        if isinstance(type_, T.BitType) and not type_.signed:
            value &= type_.mask
        return value

    # ------------------------------------------------------------------ expressions
    def expr(self, node, scope, fn, want=None):
        """Code of an expression (typed by ``type_of`` first); constant ones are folded.

        Emitters: bool_literal, folded_constant (an int of ``type_``), expression (the others).
        """
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
                    return self.bool_literal(value)
                if isinstance(target, (T.BitType, T.EnumType)):
                    value = convert_int(value, target)
                return self.folded_constant(value, target, node)
        return self.expression(node, scope, fn, want)

    def expression(self, node, scope, fn, want=None):
        """Code of an expression that is not a folded constant: dispatch by kind.

        Emitters: bool_literal, int_literal, constant_name, variable_code, stack_member, field_expr,
        index_expr, not_code, unop, _cast, arithmetic, composite_equality's, _lookahead,
        other_expression (the kinds only one generator knows).
        """
        kind = node.kind
        type_ = node.type
        if kind == "bool":
            return self.bool_literal(node.value)
        if kind == "name":
            symbol = self.value_symbol(node, scope)
            if symbol.kind == "const":
                return self.constant_name(node, symbol.value, want)
            return self.variable_code(symbol, node, scope, fn)
        if kind == "type_member":
            return self.int_literal(self.model.const_value(node, scope))
        if kind == "error_member":
            return self.int_literal(self.model.errors[node.member])
        if kind == "member":
            return self._member_expr(node, scope, fn)
        if kind == "index":
            return self.index_expr(node, scope, fn)
        if kind == "slice":
            base = self.expr(node.expr, scope, fn)
            width = node.hi_value - node.lo_value + 1
            shifted = f"({base} >> {node.lo_value})" if node.lo_value else base
            return f"({shifted} & {self.int_literal((1 << width) - 1)})"
        if kind == "cast":
            return self._cast(node, scope, fn)
        if kind == "unop":
            inner = self.expr(node.expr, scope, fn, want=type_)
            if node.op == "!":
                return self.not_code(inner)
            return self.unop(node, inner, type_)
        if kind == "binop":
            return self._binop(node, scope, fn)
        if kind == "conditional":
            return self._conditional(node, scope, fn, type_)
        if kind == "call":
            return self._call_expr(node, scope, fn)
        return self.other_expression(node, scope, fn, want)

    def other_expression(self, node, scope, fn, want):
        raise self.unsupported(node, f"expression {node.kind}")

    def value_symbol(self, node, scope):
        """The symbol a name expression reads: a constant, variable or parameter."""
        symbol = scope.lookup(node.name)
        if symbol is None:
            raise self.error(node, f"unknown name {node.name!r}")
        if symbol.kind not in ("const", "var", "param"):
            raise self.error(node, f"{node.name} ({symbol.kind}) is not a value")
        return symbol

    def _cast(self, node, scope, fn):
        """A cast: which conversion it is, and the casts P4 refuses.  Emitter: cast_bits (bits to bits)."""
        target = node.type
        source = node.expr.type
        inner = self.expr(node.expr, scope, fn, want=target if isinstance(source, T.InfIntType) else None)
        if isinstance(target, T.BoolType):
            if isinstance(source, T.BoolType):
                return inner
            if isinstance(source, T.BitType) and source.width == 1:
                return self.form("bit_to_bool", code=inner)
            raise self.error(node, f"cannot cast {source.name_text()} to bool")
        if isinstance(target, T.EnumType):
            if target.underlying is None:
                raise self.error(node, f"cannot cast to enum {target.name}")
            target = target.underlying
        if isinstance(target, T.BitType):
            if isinstance(source, T.BoolType):
                return self.form("bool_to_bit", code=inner)
            if isinstance(source, T.EnumType):
                if source.underlying is None:
                    raise self.error(node, f"cannot cast enum {source.name} to {target.name_text()}")
                source = source.underlying
            if isinstance(source, T.InfIntType):
                return inner
            if not isinstance(source, T.BitType):
                raise self.error(node, f"cannot cast {source.name_text()} to {target.name_text()}")
            return self.cast_bits(inner, source, target)
        raise self.unsupported(node, f"cast to {target.name_text()}")

    def _member_expr(self, node, scope, fn):
        """``t.apply().hit`` / ``.miss`` / ``.action_run``, a stack's members, or a field."""
        base_type = node.expr.type
        if isinstance(base_type, T.TableResultType):
            hit, action = self._table_apply(node.expr.func.expr, base_type.table.table, scope, fn)
            if node.member == "hit":
                return hit
            if node.member == "miss":
                return self.not_code(hit)
            return action
        if isinstance(base_type, T.StackType):
            return self.stack_member(node, base_type, scope, fn)
        return self.field_expr(node, scope, fn)

    def _conditional(self, node, scope, fn, type_):
        """``c ? a : b``: an if statement into a temporary when a branch needs statements."""
        cond = self.expr(node.cond, scope, fn)
        if self.is_complex(node.then, scope) or self.is_complex(node.otherwise, scope):
            temp = fn.temp("q")
            self.declare_temp(fn, temp)
            self.begin_if(fn, cond)
            self.set_temp(fn, temp, self.expr(node.then, scope, fn, want=type_))
            self.begin_else(fn)
            self.set_temp(fn, temp, self.expr(node.otherwise, scope, fn, want=type_))
            self.end_if(fn)
            return temp
        then = self.expr(node.then, scope, fn, want=type_)
        return self.form("choice", cond=cond, then=then, otherwise=self.expr(node.otherwise, scope, fn, want=type_))

    def saved(self, code, later, scope, fn):
        """``code`` of an operand, in a temporary when the ``later`` operand needs statements (it may have
        effects)."""
        if not self.is_literal(code) and self.is_complex(later, scope):
            temp = fn.temp("l")
            self.set_temp(fn, temp, code, declare=True)
            return temp
        return code

    def _operands(self, left_node, right_node, scope, fn, want=None):
        """Codes of two operands, left evaluated first even when the right one has effects."""
        left = self.saved(self.expr(left_node, scope, fn, want=want), right_node, scope, fn)
        return left, self.expr(right_node, scope, fn, want=want)

    def _short_circuit(self, node, scope, fn):
        """``&&`` / ``||``: the right operand in an if statement when it needs statements."""
        op = node.op
        left = self.expr(node.left, scope, fn)
        if not self.is_complex(node.right, scope):
            return self.form(op, left=left, right=self.expr(node.right, scope, fn))
        temp = fn.temp("b")
        self.set_temp(fn, temp, left, declare=True)
        self.begin_if(fn, temp, negate=op == "lor")
        self.set_temp(fn, temp, self.expr(node.right, scope, fn))
        self.end_if(fn)
        return temp

    def _binop(self, node, scope, fn):
        """Binary operators: short-circuit ones, equality of composites here, the others the generator's."""
        if node.op in ("land", "lor"):
            return self._short_circuit(node, scope, fn)
        if node.op in ("eq", "ne") and (self.is_composite_type(node.left.type) or
                                        self.is_composite_type(node.right.type)):
            return self._composite_equality(node, scope, fn)
        return self.arithmetic(node, scope, fn)

    @staticmethod
    def is_composite_type(type_):
        """Headers, structs (unions), stacks and tuples: compared and assigned member by member."""
        return isinstance(type_, (T.HeaderType, T.StructType, T.StackType, T.TupleType))

    def field_values(self, node, type_):
        """[(value node, field)] of a list ``{a, b}`` or structure expression ``{x = a, ...}`` of a header or
        struct type, in field order (``...`` leaves the other fields at their defaults)."""
        fields = type_.fields
        if node.kind == "list":
            if len(node.items) != len(fields):
                raise self.error(node, f"{type_.name}: {len(fields)} field(s), {len(node.items)} value(s)")
            return list(zip(node.items, fields))
        by_name = {}
        for name, value in node.fields:
            if name not in type_.field_map:
                raise self.error(value, f"{type_.name} has no field {name!r}")
            if name in by_name:
                raise self.error(value, f"field {name!r} given twice")
            by_name[name] = value
        missing = [f.name for f in fields if f.name not in by_name]
        if missing and not getattr(node, "dots", False):
            raise self.error(node, f"{type_.name}: no value for field(s) {', '.join(missing)}")
        return [(by_name[f.name], f) for f in fields if f.name in by_name]

    @staticmethod
    def same_type(first, second):
        """True if two header/struct/stack types are the same type."""
        if isinstance(first, T.StackType) and isinstance(second, T.StackType):
            return first.size == second.size and Walk.same_type(first.element, second.element)
        return type(first) is type(second) and getattr(first, "name", None) == getattr(second, "name", None)

    def _composite_equality(self, node, scope, fn):
        """``==``/``!=`` on headers, structs, stacks and tuples (P4_16 1.2.4, "Operations on ...").

        Two headers are equal when both are invalid, or both are valid with equal fields;
        structs, stacks and tuples are equal member by member.
        Emitters: composite_operand, save_composite (a copy of the left operand), _equal_code, not_code.
        """
        left_type = node.left.type
        right_type = node.right.type
        named = [t for t in (left_type, right_type) if self.is_composite_type(t) and not isinstance(t, T.TupleType)]
        if len(named) == 2 and not self.same_type(*named):
            raise self.error(node, f"cannot compare {left_type.name_text()} with {right_type.name_text()}")
        type_ = named[0] if named else left_type
        if not self.is_composite_type(type_) or (not named and not isinstance(right_type, T.TupleType)):
            raise self.error(node, f"cannot compare {left_type.name_text()} with {right_type.name_text()}")
        left = self.composite_operand(node.left, type_, scope, fn)
        if self.is_complex(node.right, scope):
            left = self.save_composite(fn, left, type_, node)
        right = self.composite_operand(node.right, type_, scope, fn)
        code = self._equal_code(left, right, type_)
        return code if node.op == "eq" else self.not_code(code)

    def _call_expr(self, node, scope, fn):
        """A call in an expression: validity, sizes, ``lookahead``/``length``, or a function.

        Emitters: header_valid_code, union_valid_code, packet_length_code, _lookahead, function_call.
        """
        func = node.func
        if func.kind == "member":
            base_type = func.expr.type
            method = func.member
            if isinstance(base_type, T.HeaderType) and method == "isValid":
                return self.header_valid_code(func.expr, scope, fn)
            if isinstance(base_type, T.UnionType) and method == "isValid":
                return self.union_valid_code(func.expr, base_type, scope, fn)
            if isinstance(base_type, (T.HeaderType, T.StructType)) and method in SIZE_METHODS:
                width = T.flatten_width(base_type) if method.startswith("min") else T.max_width(base_type)
                return str(width if method.endswith("Bits") else (width + 7) // 8)
            if isinstance(base_type, T.ExternType) and base_type.name == "packet_in":
                if fn.kind != "parser":
                    raise self.error(node, "packet_in methods are only available in a parser")
                if method == "lookahead":
                    return self._lookahead(node, fn)
                if method == "length":
                    return self.packet_length_code(node)
            symbol = getattr(func.expr, "symbol", None)
            if symbol is not None and symbol.kind == "table":
                raise self.error(node, "use t.apply().hit, .miss or .action_run")
        if func.kind == "name":
            symbol = scope.lookup(func.name)
            if symbol is not None and symbol.kind == "function":
                return self.function_call(symbol, node, scope, fn)
        raise self.unsupported(node, "this call in an expression")

    def is_complex(self, node, scope):
        """True if the code of ``node`` needs statements (calls, table applies, lookahead).

        Such expressions may have effects or stop the pipeline, so the operands around them
        are ordered explicitly (P4_16 1.2.4, "Expression evaluation order": left to right,
        ``&&``/``||``/``?:`` short-circuit): an operand to the left of a complex one is saved
        into a temporary first, and the right operand of ``&&``/``||`` or the branches of ``?:``
        become conditional statements.
        """
        cached = getattr(node, "_complex", None)
        if cached is not None:
            return cached
        result = self._complex_uncached(node, scope)
        node._complex = result
        return result

    def _complex_uncached(self, node, scope):
        kind = node.kind
        if kind in BUILT:
            return True  # builds an object with statements
        if kind == "call":
            func = node.func
            if func.kind == "member":
                if func.member in ("isValid", "length") + tuple(SIZE_METHODS):
                    return self.is_complex(func.expr, scope)
                return True
            return True
        if kind == "member" and node.expr.kind == "call":
            return True
        for child in self._expression_children(node):
            if self.is_complex(child, scope):
                return True
        return False

    @staticmethod
    def _expression_children(node):
        kind = node.kind
        if kind == "binop":
            return (node.left, node.right)
        if kind in ("unop", "cast", "member", "slice"):
            return (node.expr,)
        if kind == "index":
            return (node.expr, node.index)
        if kind == "conditional":
            return (node.cond, node.then, node.otherwise)
        if kind == "list":
            return tuple(node.items)
        if kind == "struct_expr":
            return tuple(value for _, value in node.fields)
        return ()

