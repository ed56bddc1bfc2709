"""The calling convention of the generated code: actions, functions, sub-controls, sub-parsers.

A mixin of :class:`testbed.p4.compiler.codegen.CodeGenerator`.

P4_16 (1.2.4, "Calling convention") passes arguments by copy-in/copy-out: arguments are
evaluated left to right (``out``/``inout`` ones as l-values, which are fixed before the call),
``in``/``inout`` values are copied in, the callee runs, and ``out``/``inout`` values are copied
back left to right, also when the callee leaves through ``return`` or ``exit``.

Scalars are always passed by value.  Headers, structs and stacks are passed by reference
when that cannot be told apart from a copy: the callee cannot reach the argument's storage
another way (an action can read and write its control's variables and parameters; functions,
sub-controls and sub-parsers only see their parameters) and no two arguments overlap with one
of them written.  Otherwise the callee gets a copy that is copied back (``inout``).  An ``out``
composite always starts fresh (headers invalid) and is copied back.
"""
from testbed.p4.compiler.pycode import Emitter, Frame, FunctionContext, is_literal
from testbed.p4.frontend import types as T
from testbed.p4.frontend.ast import walk_nodes, walk_statements

COMPOSITE = (T.HeaderType, T.StructType, T.StackType)


def lvalue_path(node):
    """(root name node, path) of an l-value: member names and constant indexes (None: unknown index)."""
    path = []
    while node is not None:
        kind = node.kind
        if kind == "member":
            path.append(node.member)
            node = node.expr
        elif kind == "index":
            value = getattr(node, "const_index", None)
            path.append(value)
            node = node.expr
        elif kind == "slice":
            node = node.expr
        elif kind == "name":
            return node, tuple(reversed(path))
        else:
            return None, ()
    return None, ()


def paths_overlap(first, second):
    """True if two l-value paths (same root) may share storage (one is a prefix of the other)."""
    for a, b in zip(first, second):
        if a is None or b is None:
            continue
        if a != b:
            return False
    return True


class CallsMixin:
    """Actions (inlined), functions, sub-controls and sub-parsers with copy-in/copy-out arguments."""

    # ------------------------------------------------------------------ analysis
    def action_calls_exit(self, symbol):
        """True if the action, or an action it calls, executes ``exit``."""
        decl = symbol.decl
        cached = getattr(decl, "calls_exit", None)
        if cached is not None:
            return cached
        decl.calls_exit = False  # recursion guard (actions cannot recurse in P4)
        result = False
        for statement in walk_statements(decl.body):
            if statement.kind == "exit":
                result = True
                break
            if statement.kind == "call_statement" and statement.call.func.kind == "name":
                called = symbol.scope.lookup(statement.call.func.name)
                if called is not None and called.kind == "action" and self.action_calls_exit(called):
                    result = True
                    break
        decl.calls_exit = result
        return result

    def action_roots(self, symbol):
        """ids of the control-level variables and parameters an action (and what it calls) names."""
        decl = symbol.decl
        cached = getattr(decl, "control_roots", None)
        if cached is not None:
            return cached
        decl.control_roots = frozenset()
        control = getattr(symbol, "control", None)
        roots = set()
        if control is not None:
            level = {id(s) for s in control.params} | {id(s) for s in control.variables}
            for node in walk_nodes(decl.body):
                if node.kind == "name":
                    found = symbol.scope.lookup(node.name)
                    if found is not None and id(found) in level:
                        roots.add(id(found))
                elif node.kind == "call_statement" and node.call.func.kind == "name":
                    called = symbol.scope.lookup(node.call.func.name)
                    if called is not None and called.kind == "action":
                        roots |= self.action_roots(called)
        decl.control_roots = frozenset(roots)
        return decl.control_roots

    @staticmethod
    def _return_in_loop(body):
        for statement in walk_statements(body):
            if statement.kind in ("for", "for_in"):
                if any(inner.kind == "return" for inner in walk_statements(statement.body)):
                    return True
        return False

    def _copy_decisions(self, pairs, scope, callee_roots):
        """For each (argument node, parameter symbol): True if a composite argument must be copied."""
        decisions = []
        paths = []
        for arg, param in pairs:
            if not isinstance(param.type, COMPOSITE) or arg.kind == "dontcare":
                decisions.append(False)
                paths.append(None)
                continue
            root, path = lvalue_path(arg)
            copy = False
            if root is None:
                paths.append(None)
            else:
                found = scope.lookup(root.name)
                paths.append((id(found), path, param.direction in ("out", "inout")))
                if found is not None and callee_roots:
                    copy = id(found) in callee_roots or bool(getattr(found, "action_param", False))
            decisions.append(copy)
        for i, first in enumerate(paths):
            for j in range(i + 1, len(paths)):
                second = paths[j]
                if first is None or second is None or first[0] != second[0]:
                    continue
                if (first[2] or second[2]) and paths_overlap(first[1], second[1]):
                    decisions[i] = decisions[j] = True
        return decisions

    # ------------------------------------------------------------------ passing arguments
    def pass_arguments(self, pairs, scope, fn, callee_roots=frozenset(), names=None):
        """Evaluate arguments left to right for parameters; return (codes, copy_backs).

        Args:
            pairs: (argument node, parameter Symbol) in order.
            callee_roots: what the callee can reach besides its parameters (see module docstring).
            names: Python variables to bind the parameters to (inlined actions); by default the
                values are left in temporaries (calls of generated functions).

        Returns:
            ``codes``: the Python values of the parameters; ``copy_backs``: (frozen l-value, code,
            kind) to apply after the call, in order: kind "scalar" stores the value, "composite"
            copies an object back into the argument.
        """
        decisions = self._copy_decisions(pairs, scope, callee_roots)
        complex_index = max((i for i, (arg, _) in enumerate(pairs)
                             if arg.kind != "dontcare" and self.is_complex(arg, scope)), default=-1)
        codes = []
        copy_backs = []
        out = fn.out

        def bind(index, value, prefix):
            variable = names[index] if names is not None else fn.temp(prefix)
            out.line(f"{variable} = {value}")
            return variable

        for index, ((arg, param), copy) in enumerate(zip(pairs, decisions)):
            direction = param.direction
            type_ = param.type
            later_effects = index < complex_index
            if arg.kind == "dontcare":
                codes.append(bind(index, self._initial_value(type_), "d"))
                continue
            if arg.kind not in ("list", "struct_expr", "invalid_header"):
                self.model.type_of(arg, scope)
            if isinstance(type_, COMPOSITE):
                if direction in ("out", "inout"):
                    target = self.resolve_lvalue(arg, scope, fn, freeze=True)
                    self._check_assignable(arg, type_, target.type)
                    if direction == "out":
                        variable = bind(index, self._initial_value(type_), "o")
                        copy_backs.append((target, variable, "composite"))
                    elif copy:
                        variable = bind(index, f"{target.code}.copy()", "c")
                        copy_backs.append((target, variable, "composite"))
                    else:
                        variable = bind(index, target.code, "r") if names is not None else target.code
                    codes.append(variable)
                    continue
                value = self.composite_value(arg, type_, scope, fn)
                fresh = arg.kind in ("list", "struct_expr", "invalid_header")
                if (copy or later_effects) and not fresh:
                    value = f"{value}.copy()"
                codes.append(bind(index, value, "c") if names is not None else value)
                continue
            if direction in ("out", "inout"):
                target = self.resolve_lvalue(arg, scope, fn, freeze=True)
                if direction == "inout":
                    self._check_assignable(arg, type_, arg.type)
                    variable = bind(index, self.read_lvalue(target), "a")
                else:
                    variable = bind(index, self._initial_value(type_), "a")
                codes.append(variable)
                copy_backs.append((target, variable, "scalar"))
                continue
            self._check_assignable(arg, type_, arg.type)
            value = self.expr(arg, scope, fn, want=type_)
            if names is not None or (later_effects and not is_literal(value)):
                value = bind(index, value, "a")
            codes.append(value)
        return codes, copy_backs

    def copy_back(self, copy_backs, fn):
        """Emit the copy-out of ``pass_arguments``' results, left to right."""
        for target, code, kind in copy_backs:
            if kind == "composite":
                fn.out.line(f"{target.code}.copy_from({code})")
                self.after_composite_store(target, fn)
            else:
                self.write_lvalue(target, code, fn)

    # ------------------------------------------------------------------ actions
    def _named_pairs(self, decl, pairs, scope):
        """The (argument, parameter) pairs of a direct action call without the ``in``/``inout`` ones whose
        parameter the body never names and whose argument has no call in it.

        p4c inlines a direct call and then removes such a copy (a dead copy-in; the copy-out of an
        unchanged value is a self-assignment), so BMv2 never evaluates the argument: a run-time stack
        index out of range there does not stop simple_switch.  An unused ``out`` parameter keeps its
        copy-out (of an undefined value) in p4c's output, so its argument is evaluated as usual.
        """
        named = {node.name for node in walk_nodes(decl.body) if node.kind == "name"}
        kept = []
        for arg, param in pairs:
            if param.direction in ("in", "inout") and param.name not in named and arg.kind != "dontcare" \
                    and not any(inner.kind == "call" for inner in walk_nodes(arg)):
                if arg.kind not in ("list", "struct_expr", "invalid_header"):
                    self.model.type_of(arg, scope)  # still type-checked, as p4c's front end does first
                continue
            kept.append((arg, param))
        return kept

    def inline_action(self, symbol, args, scope, fn, node, from_table=None, bound=()):
        """Emit an action's body in place.

        Args:
            symbol: the action's Symbol.
            args: argument nodes of a direct call (None when a table runs the action).
            from_table: the lookup-result variable whose ``args`` hold the directionless values.
            bound: argument nodes bound in the table's ``actions`` list (directional parameters).
        """
        decl = symbol.decl
        out = fn.out
        params = decl.param_symbols
        symbol.inlined = True
        pairs = self.action_pairs(symbol, args, node, bound)
        if from_table is None:
            pairs = self._named_pairs(decl, pairs, scope)
        names = [self.py_name(param, fn) for _, param in pairs]
        _, copy_backs = self.pass_arguments(pairs, scope, fn, self.action_roots(symbol), names)
        if from_table is not None:
            data = [p for p in params if not p.direction]
            for p in data:
                self.py_name(p, fn)
            if data:
                names = ", ".join(p.py for p in data)
                out.line(f"{names}, = {from_table}.args")
                for p in data:
                    if isinstance(p.type, T.BitType) and p.type.signed:
                        out.line(f"{p.py} = {self._from_unsigned(p.py, p.type)}")
                    elif isinstance(p.type, T.BoolType):
                        out.line(f"{p.py} = {p.py} != 0")
        barrier = bool(copy_backs) and self.action_calls_exit(symbol)
        has_return = any(s.kind == "return" for s in walk_statements(decl.body))
        frame = Frame("action", barrier=barrier, looped=barrier or has_return)
        if barrier:
            frame.exit_flag = fn.temp("ex")
            out.line(f"{frame.exit_flag} = False")
        if has_return and self._return_in_loop(decl.body):
            frame.return_flag = fn.temp("rt")
            out.line(f"{frame.return_flag} = False")
        fn.frames.append(frame)
        if frame.looped:
            out.line("while True:")
            out.indent()
        self.block(decl.body, symbol.scope, fn)
        if frame.looped:
            out.line("break")
            out.dedent()
        fn.frames.pop()
        self.copy_back(copy_backs, fn)
        if barrier:
            out.line(f"if {frame.exit_flag}:")
            out.indent()
            self.emit_exit(fn)
            out.dedent()

    def emit_exit(self, fn):
        """Emit ``exit``: leave the control, passing through the copy-outs of the actions it is in."""
        index = len(fn.frames) - 1
        while index >= 0 and not (fn.frames[index].kind == "action" and fn.frames[index].barrier):
            index -= 1
        if index < 0:
            fn.out.line(fn.exit_code)
            return
        frame = fn.frames[index]
        fn.out.line(f"{frame.exit_flag} = True")
        self._break_to(fn, index, frame.exit_flag)

    def emit_action_return(self, fn, node):
        """Emit ``return`` inside an inlined action."""
        index = fn.innermost("action")
        frame = fn.frames[index]
        if index == len(fn.frames) - 1:
            fn.out.line("break")
            return
        if frame.return_flag is None:
            raise self.error(node, "internal error: return in a loop of an action without a flag")
        fn.out.line(f"{frame.return_flag} = True")
        self._break_to(fn, index, frame.return_flag)

    @staticmethod
    def _break_to(fn, index, flag):
        for frame in fn.frames[index + 1:]:
            if flag not in frame.passing:
                frame.passing.append(flag)
        fn.out.line("break")

    # ------------------------------------------------------------------ functions
    def function_call(self, symbol, call, scope, fn):
        """Code calling a P4 function; emits the call and copy-outs, returns the result's code."""
        decl = symbol.decl
        if not hasattr(decl, "py_function"):
            self._gen_function(symbol)
        self.check_arguments(call, decl.name, decl.params, call.args)
        codes, copy_backs = self.pass_arguments(list(zip(call.args, decl.param_symbols)), scope, fn)
        temp = fn.temp("f")
        fn.out.line(f"{temp} = {decl.py_function}(P, {', '.join(codes)})")
        self.copy_back(self._outs_from_tuple(copy_backs, temp), fn)
        return f"{temp}[0]" if not isinstance(symbol.return_type, T.VoidType) else "None"

    @staticmethod
    def _outs_from_tuple(copy_backs, result, index=1):
        """Scalar copy-backs read from a returned tuple ``(..., out1, out2, ...)`` from ``index``; composites
        unchanged."""
        resolved = []
        for target, code, kind in copy_backs:
            if kind == "scalar":
                resolved.append((target, f"{result}[{index}]", kind))
                index += 1
            else:
                resolved.append((target, code, kind))
        return resolved

    def _gen_function(self, symbol):
        decl = symbol.decl
        emitter = Emitter()
        emitter.origin = decl.loc
        fn = FunctionContext("function", emitter)
        scope = self.function_scope(decl)
        names = [self.py_name(param, fn) for param in decl.param_symbols]
        fn.function_outs = [p.py for p in decl.param_symbols
                            if p.direction in ("out", "inout") and not isinstance(p.type, COMPOSITE)]
        fn.return_type = symbol.return_type
        decl.py_function = self.global_name("fn_" + decl.name)
        emitter.line(f"def {decl.py_function}(P, {', '.join(names)}):")
        emitter.indent()
        self.block(decl.body, scope, fn)
        emitter.line(f"return (None,{''.join(' ' + o + ',' for o in fn.function_outs)})")
        emitter.dedent()
        emitter.line("")
        self.globals_init.extend(emitter)

    # ------------------------------------------------------------------ sub-controls
    def subcontrol_call(self, symbol, call, scope, fn):
        """Emit ``c.apply(...)`` of a control instance: the sub-control's function, copy-out, exit."""
        sub = symbol.control
        codes, copy_backs = self.pass_arguments(list(zip(call.args, sub.params)), scope, fn)
        out = fn.out
        scalars = [cb for cb in copy_backs if cb[2] == "scalar"]
        if not scalars:
            if copy_backs:
                flag = fn.temp("x")
                out.line(f"{flag} = {sub.py_function}(P, {', '.join(codes)})")
                self.copy_back(copy_backs, fn)
                out.line(f"if {flag}:")
            else:
                out.line(f"if {sub.py_function}(P, {', '.join(codes)}):")
            out.indent()
            self.emit_exit(fn)
            out.dedent()
            return
        result = fn.temp("x")
        out.line(f"{result} = {sub.py_function}(P, {', '.join(codes)})")
        self.copy_back(self._outs_from_tuple(copy_backs, result), fn)
        out.line(f"if {result}[0]:")
        out.indent()
        self.emit_exit(fn)
        out.dedent()

    # ------------------------------------------------------------------ sub-parsers
    def subparser_call(self, symbol, call, scope, fn):
        """Emit ``p.apply(packet, ...)`` of a parser instance inside a parser state.

        The sub-parser continues at the current offset; when it rejects (explicitly or by
        an error) the applying parser rejects with the same error, as if its states were
        inlined (P4_16 1.2.4, "Invoking a parser from another parser").
        """
        sub = symbol.parser
        codes, copy_backs = self.pass_arguments(list(zip(call.args[1:], sub.params[1:])), scope, fn)
        out = fn.out
        result = fn.temp("x")
        out.line(f"{result} = {sub.py_function}(P, buf, off, n{''.join(', ' + c for c in codes)})")
        out.line(f"off = {result}[1]")
        self.copy_back(self._outs_from_tuple(copy_backs, result, 2), fn)
        out.line(f"if {result}[0] is not None:")
        out.line(f"    err = {result}[0]")
        if getattr(fn, "subparser", False):
            out.line("    rej = True")
        out.line("    break")
