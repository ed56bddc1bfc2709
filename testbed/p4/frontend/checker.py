"""Name resolution, constant folding and type checking of a parsed P4 program.

:class:`ProgramModel` takes the AST of a whole program (includes already
inlined) and resolves every top-level declaration: types (with widths),
constants, errors, match kinds, externs, actions, functions, parsers,
controls and the ``main`` package instance.  It offers :meth:`type_of`
(types an expression within a :class:`Scope`, annotating ``node.type``) and
:meth:`const_value` (folds a compile-time constant), which the code
generator and the ProgramInfo builder use.  Every problem is raised as
:class:`testbed.errors.P4LoadError` with the original file and line.
"""
from testbed.errors import P4LoadError
from testbed.p4.frontend import types as T
from testbed.p4.frontend.ast import Node

V1SWITCH_ROLES = ("parser", "verify_checksum", "ingress", "egress", "compute_checksum", "deparser")
SIZE_METHODS = ("minSizeInBits", "minSizeInBytes", "maxSizeInBits", "maxSizeInBytes")


class Symbol:
    """Something a name refers to.

    ``kind`` is one of: const, var, param, instance, action, table, extern_function, function,
    block (parser/control type), error_namespace.
    """

    def __init__(self, kind, name, type_=None, **attributes):
        self.kind = kind
        self.name = name
        self.type = type_
        self.__dict__.update(attributes)

    def __repr__(self):
        return f"Symbol({self.kind}, {self.name})"


class Scope:
    """A chain of name tables (block -> action -> control -> global)."""

    def __init__(self, parent=None, owner=None):
        self.parent = parent
        self.names = {}
        self.owner = owner if owner is not None else (parent.owner if parent is not None else None)

    def lookup(self, name):
        """Return the Symbol for ``name`` or None."""
        scope = self
        while scope is not None:
            symbol = scope.names.get(name)
            if symbol is not None:
                return symbol
            scope = scope.parent
        return None

    def define(self, name, symbol):
        """Bind ``name`` in this scope."""
        self.names[name] = symbol
        return symbol

    def child(self):
        """A nested scope."""
        return Scope(self)


class ProgramModel:
    """The resolved top-level view of a program.

    Args:
        program: the ``program`` AST node.
        lines: the preprocessed SourceLine list (for error locations).
        name: program name (main file base name).
    """

    def __init__(self, program, lines, name):
        self.program = program
        self.lines = lines
        self.name = name
        self.types = {}
        self.errors = {}
        self.match_kinds = set()
        self.global_scope = Scope()
        self.extern_objects = {}
        self.extern_functions = {}
        self.actions = {}
        self.functions = {}
        self.parsers = {}
        self.controls = {}
        self.packages = {}
        self.global_instances = {}
        self.main = None
        self.pipeline = {}
        self.pipeline_args = {}
        self.current = None  # line index of the construct being checked or compiled (for internal errors)
        self._resolve_declarations()

    # ------------------------------------------------------------------ errors
    def location(self, node_or_loc):
        """(filename, line) of an AST node or line index."""
        loc = node_or_loc.loc if isinstance(node_or_loc, Node) else node_or_loc
        if loc is None or not self.lines or loc >= len(self.lines):
            return (None, None)
        source = self.lines[loc]
        return source.filename, source.line

    def error(self, node, message):
        """Return a P4LoadError located at ``node``."""
        filename, line = self.location(node)
        return P4LoadError(message, filename, line)

    # ------------------------------------------------------------------ declarations
    def _resolve_declarations(self):
        for decl in self.program.declarations:
            self.current = decl.loc
            handler = getattr(self, "_declare_" + decl.kind, None)
            if handler is None:
                raise self.error(decl, f"unsupported construct: top-level {decl.kind}")
            handler(decl)
        if self.main is None:
            main_lines = [s for s in self.lines if s.filename == self.lines[0].filename] if self.lines else []
            last = main_lines[-1] if main_lines else None
            raise P4LoadError("no 'main' package instance (V1Switch(...) main;) in the program",
                              last.filename if last else None, last.line if last else None)

    def _define_global(self, node, name, symbol):
        existing = self.global_scope.names.get(name)
        if existing is not None and not (existing.kind == "extern_function" and symbol.kind == "extern_function"):
            raise self.error(node, f"duplicate declaration of {name!r}")
        self.global_scope.define(name, symbol)

    def _declare_const(self, decl, scope=None):
        scope = scope or self.global_scope
        type_ = self.resolve_type(decl.type_ref)
        value = self.const_value(decl.value, scope, type_)
        symbol = Symbol("const", decl.name, type_, value=value, decl=decl)
        if scope is self.global_scope:
            self._define_global(decl, decl.name, symbol)
        else:
            scope.define(decl.name, symbol)
        return symbol

    def _declare_typedef(self, decl):
        self._add_type(decl, decl.name, self.resolve_type(decl.type_ref))

    def _add_type(self, decl, name, type_):
        if name in self.types:
            raise self.error(decl, f"duplicate type name {name!r}")
        self.types[name] = type_

    def _fields(self, decl):
        fields = []
        seen = set()
        for field in decl.fields:
            if field.name in seen:
                raise self.error(field, f"duplicate field {field.name!r} in {decl.name}")
            seen.add(field.name)
            fields.append(T.FieldInfo(field.name, self.resolve_type(field.type_ref), field.annotations))
        return fields

    def _declare_header(self, decl):
        fields = self._fields(decl)
        varbits = 0
        for field, field_decl in zip(fields, decl.fields):
            if isinstance(field.type, T.VarbitType):
                varbits += 1
                if varbits > 1:
                    raise self.error(field_decl, f"header {decl.name}: at most one varbit field (P4_16)")
                continue
            if isinstance(field.type, T.StructType) and not isinstance(field.type, T.UnionType) and \
                    T.is_flat_bit_struct(field.type):
                continue  # P4_16 1.2.4: a header field may be a struct of bit-string fields
            if not (isinstance(field.type, (T.BitType, T.BoolType)) or
                    (isinstance(field.type, T.EnumType) and field.type.underlying is not None)):
                raise self.error(field_decl, f"unsupported construct: header field {decl.name}.{field.name} of type "
                                             f"{field.type.name_text()} (bit<W>, int<W>, bool, varbit<W>, "
                                             f"serializable enums and structs of them)")
        header = T.HeaderType(decl.name, fields, decl.annotations)
        if header.width % 8:
            raise self.error(decl, f"header {decl.name} is {header.width} bits, not a whole number of bytes")
        self._add_type(decl, decl.name, header)

    def _declare_header_union(self, decl):
        fields = self._fields(decl)
        for field, field_decl in zip(fields, decl.fields):
            if not isinstance(field.type, T.HeaderType):
                raise self.error(field_decl, f"header_union {decl.name}.{field.name} must be a header")
        self._add_type(decl, decl.name, T.UnionType(decl.name, fields, decl.annotations))

    def _declare_struct(self, decl):
        fields = self._fields(decl)
        for field, field_decl in zip(fields, decl.fields):
            if isinstance(field.type, T.VarbitType):
                raise self.error(field_decl, f"unsupported construct: varbit field {decl.name}.{field.name} in a "
                                             f"struct (varbit fields are supported in headers)")
            if isinstance(field.type, (T.ExternType, T.BlockType, T.InfIntType, T.VoidType)):
                raise self.error(field_decl, f"struct {decl.name}.{field.name}: type {field.type.name_text()} "
                                             f"not allowed in a struct")
        self._add_type(decl, decl.name, T.StructType(decl.name, fields, decl.annotations))

    def _declare_enum(self, decl):
        if decl.type_ref is None:
            members = {name: index for index, name in enumerate(decl.members)}
            self._add_type(decl, decl.name, T.EnumType(decl.name, members, None))
            return
        underlying = self.resolve_type(decl.type_ref)
        if not isinstance(underlying, T.BitType):
            raise self.error(decl, f"enum {decl.name}: underlying type must be bit<W> or int<W>")
        members = {}
        for name, expr in decl.members:
            members[name] = self.const_value(expr, self.global_scope, underlying)
        self._add_type(decl, decl.name, T.EnumType(decl.name, members, underlying))

    def _declare_error_decl(self, decl):
        for name in decl.members:
            if name not in self.errors:
                self.errors[name] = len(self.errors)

    def _declare_match_kind_decl(self, decl):
        self.match_kinds.update(decl.members)

    def _declare_extern_object(self, decl):
        self.extern_objects[decl.name] = decl
        self._add_type(decl, decl.name, T.ExternType(decl.name, decl))

    def _declare_extern_function(self, decl):
        self.extern_functions.setdefault(decl.name, []).append(decl)
        self._define_global(decl, decl.name, Symbol("extern_function", decl.name, decl=decl))

    def _declare_function(self, decl):
        self.functions[decl.name] = decl
        self._define_global(decl, decl.name, Symbol("function", decl.name, decl=decl,
                                                    return_type=self.resolve_type(decl.return_type)))

    def _declare_action(self, decl):
        self.actions[decl.name] = decl
        self._define_global(decl, decl.name, Symbol("action", decl.name, decl=decl, qualified=decl.name,
                                                    control=None))

    def _declare_parser_type(self, decl):
        self._add_type(decl, decl.name, T.BlockType(decl.name, decl, "parser_type"))

    def _declare_control_type(self, decl):
        self._add_type(decl, decl.name, T.BlockType(decl.name, decl, "control_type"))

    def _declare_package(self, decl):
        self.packages[decl.name] = decl
        self._add_type(decl, decl.name, T.BlockType(decl.name, decl, "package"))

    def _declare_parser(self, decl):
        self.parsers[decl.name] = decl
        self._add_type(decl, decl.name, T.BlockType(decl.name, decl, "parser"))

    def _declare_control(self, decl):
        self.controls[decl.name] = decl
        self._add_type(decl, decl.name, T.BlockType(decl.name, decl, "control"))

    def _declare_instance(self, decl):
        type_ = self.resolve_type(decl.type_ref)
        if isinstance(type_, T.BlockType) and type_.block_kind == "package":
            if decl.name != "main":
                raise self.error(decl, "unsupported construct: a package instance not named 'main'")
            if type_.name != "V1Switch":
                raise self.error(decl, f"unsupported package {type_.name} (the embedded target runs V1Switch)")
            self._set_main(decl)
            return
        if isinstance(type_, T.ExternType):
            self.global_instances[decl.name] = decl
            self._define_global(decl, decl.name, Symbol("instance", decl.name, type_, decl=decl, qualified=decl.name))
            return
        raise self.error(decl, f"unsupported construct: top-level instance of {type_.name_text()}")

    def _set_main(self, decl):
        if len(decl.args) != len(V1SWITCH_ROLES):
            raise self.error(decl, f"V1Switch needs {len(V1SWITCH_ROLES)} arguments, got {len(decl.args)}")
        for role, arg in zip(V1SWITCH_ROLES, decl.args):
            if arg.kind != "constructor_call":
                raise self.error(arg, f"V1Switch argument for {role}: expected Name(...) of a parser or control")
            self.pipeline_args[role] = list(arg.args)
            block_name = arg.type_ref.name
            wanted = self.parsers if role == "parser" else self.controls
            if block_name not in wanted:
                raise self.error(arg, f"V1Switch {role}: {block_name} is not a "
                                      f"{'parser' if role == 'parser' else 'control'}")
            self.pipeline[role] = block_name
        self.main = decl

    # ------------------------------------------------------------------ types
    def resolve_type(self, node):
        """Resolve a type AST node to a :class:`testbed.p4.frontend.types.P4Type`."""
        kind = node.kind
        if kind == "bit_type":
            width = self.const_value(node.width, self.global_scope)
            if not isinstance(width, int) or width <= 0 or width > 4096:
                raise self.error(node, f"bad width {width!r} in {'int' if node.signed else 'bit'}<...>")
            return T.BitType(width, node.signed)
        if kind == "bool_type":
            return T.BoolType()
        if kind == "error_type":
            return T.ErrorType()
        if kind == "string_type":
            return T.StringType()
        if kind == "infint_type":
            return T.InfIntType()
        if kind == "void_type":
            return T.VoidType()
        if kind == "dontcare_type":
            return T.DontCareType()
        if kind == "named_type":
            if node.name == "match_kind":
                return T.MatchKindType()
            type_ = self.types.get(node.name)
            if type_ is None:
                return T.ExternType(node.name, None)  # a generic type parameter (T, H, ...)
            return type_
        if kind == "specialized_type":
            base = self.types.get(node.name)
            args = [self.resolve_type(a) for a in node.args]
            if isinstance(base, T.ExternType):
                return T.ExternType(base.name, base.decl, args)
            if isinstance(base, T.BlockType):
                return base
            raise self.error(node, f"unsupported construct: generic type {node.name}<...>")
        if kind == "stack_type":
            element = self.resolve_type(node.element)
            size = self.const_value(node.size, self.global_scope)
            if not isinstance(element, (T.HeaderType, T.UnionType)):
                raise self.error(node, f"unsupported construct: stack of {element.name_text()} (stacks hold headers "
                                       f"or header unions)")
            if isinstance(size, bool) or not isinstance(size, int) or not 0 < size <= 4096:
                raise self.error(node, "header stack size must be a constant in 1..4096")
            return T.StackType(element, size)
        if kind == "varbit_type":
            width = self.const_value(node.width, self.global_scope)
            if isinstance(width, bool) or not isinstance(width, int) or not 0 < width <= 4096:
                raise self.error(node, f"bad width {width!r} in varbit<...>")
            return T.VarbitType(width)
        if kind == "tuple_type":
            return T.TupleType([self.resolve_type(a) for a in node.args])
        raise self.error(node, f"unsupported construct: type {kind}")

    # ------------------------------------------------------------------ constants
    def const_value(self, expr, scope, target_type=None):
        """Fold a compile-time constant expression.

        Returns:
            int (for bit/int/enum/error/infint values) or bool.

        Raises:
            P4LoadError: the expression is not constant.
        """
        value, type_ = self._fold(expr, scope)
        if target_type is not None and isinstance(value, int) and not isinstance(value, bool):
            value = convert_int(value, target_type)
        return value

    def try_const(self, expr, scope):
        """Return (value, type) if ``expr`` is a compile-time constant, else None."""
        try:
            return self._fold(expr, scope)
        except _NotConstant:
            return None
        except P4LoadError:
            return None

    def _fold(self, expr, scope):
        try:
            return self._fold_inner(expr, scope)
        except _NotConstant:
            raise self.error(expr, "expected a compile-time constant") from None

    def _fold_inner(self, expr, scope):
        kind = expr.kind
        if kind == "int":
            if expr.width is None:
                return expr.value, T.InfIntType()
            type_ = T.BitType(expr.width, expr.signed)
            return convert_int(expr.value, type_), type_
        if kind == "bool":
            return expr.value, T.BoolType()
        if kind == "name":
            symbol = scope.lookup(expr.name) if scope else self.global_scope.lookup(expr.name)
            if symbol is None or symbol.kind != "const":
                if symbol is None and scope is not None and scope is not self.global_scope:
                    pass
                raise _NotConstant()
            return symbol.value, symbol.type
        if kind == "type_member":
            type_ = self.types.get(expr.type_name)
            if isinstance(type_, T.EnumType):
                if expr.member not in type_.members:
                    raise self.error(expr, f"{expr.type_name} has no member {expr.member}")
                return type_.members[expr.member], type_
            raise _NotConstant()
        if kind == "error_member":
            if expr.member not in self.errors:
                raise self.error(expr, f"unknown error error.{expr.member}")
            return self.errors[expr.member], T.ErrorType()
        if kind == "cast":
            value, _type = self._fold_inner(expr.expr, scope)
            target = self.resolve_type(expr.type_ref)
            if isinstance(target, T.BoolType):
                return bool(value), target
            if isinstance(target, T.BitType):
                return convert_int(int(value), target), target
            if isinstance(target, T.EnumType) and target.underlying is not None:
                return convert_int(int(value), target.underlying), target
            raise _NotConstant()
        if kind == "unop":
            value, type_ = self._fold_inner(expr.expr, scope)
            if expr.op == "!":
                return (not value), T.BoolType()
            if expr.op == "-":
                return self._wrap(-value, type_), type_
            if expr.op == "~":
                if isinstance(type_, T.BitType):
                    return self._wrap(~value, type_), type_
                raise self.error(expr, "~ needs an operand with a width")
        if kind == "binop":
            left, left_type = self._fold_inner(expr.left, scope)
            right, right_type = self._fold_inner(expr.right, scope)
            return self._fold_binop(expr, left, left_type, right, right_type)
        if kind == "slice":
            value, type_ = self._fold_inner(expr.expr, scope)
            hi = self.const_value(expr.hi, scope)
            lo = self.const_value(expr.lo, scope)
            width = hi - lo + 1
            return (value >> lo) & ((1 << width) - 1), T.BitType(width)
        if kind == "conditional":
            cond, _ = self._fold_inner(expr.cond, scope)
            return self._fold_inner(expr.then if cond else expr.otherwise, scope)
        raise _NotConstant()

    @staticmethod
    def _wrap(value, type_):
        if isinstance(type_, T.BitType):
            return convert_int(value, type_)
        return value

    def _fold_binop(self, expr, left, left_type, right, right_type):
        op = expr.op
        if op in ("land", "lor"):
            return (left and right) if op == "land" else (left or right), T.BoolType()
        if op in ("eq", "ne", "lt", "gt", "le", "ge"):
            # P4_16 spec 1.2.4, "Implicit casts": an arbitrary-precision integer operand is cast to the
            # fixed-width type of the other operand first, so 8w255 == -1 compares 255 with 255 (p4c's
            # constant folding does the same).
            if isinstance(left_type, T.InfIntType) and not isinstance(right_type, T.InfIntType):
                left = convert_int(left, right_type)
            elif isinstance(right_type, T.InfIntType) and not isinstance(left_type, T.InfIntType):
                right = convert_int(right, left_type)
            result = {"eq": left == right, "ne": left != right, "lt": left < right, "gt": left > right,
                      "le": left <= right, "ge": left >= right}[op]
            return result, T.BoolType()
        if op == "concat":
            if not isinstance(left_type, T.BitType) or not isinstance(right_type, T.BitType):
                raise self.error(expr, "++ needs operands with a width")
            type_ = T.BitType(left_type.width + right_type.width, left_type.signed)
            return convert_int(((left & left_type.mask) << right_type.width) | (right & right_type.mask), type_), type_
        type_ = left_type if isinstance(left_type, T.BitType) else right_type
        if op in ("shl", "shr"):
            type_ = left_type
        if op == "add":
            value = left + right
        elif op == "sub":
            value = left - right
        elif op == "mul":
            value = left * right
        elif op == "div":
            if right == 0:
                raise self.error(expr, "division by zero")
            value = left // right
        elif op == "mod":
            if right == 0:
                raise self.error(expr, "modulo by zero")
            value = left % right
        elif op == "shl":
            if right < 0:
                raise self.error(expr, "negative shift amount")
            if right > 8192:
                if isinstance(type_, T.BitType):
                    return 0, type_
                raise self.error(expr, f"shift amount {right} too large for a width-less integer")
            value = left << right
        elif op == "shr":
            value = left >> right
        elif op == "band":
            value = left & right
        elif op == "bor":
            value = left | right
        elif op == "bxor":
            value = left ^ right
        elif op in ("sadd", "ssub"):
            value = left + right if op == "sadd" else left - right
            if isinstance(type_, T.BitType):
                low, high = int_range(type_)
                return max(low, min(high, value)), type_
            return value, type_
        else:
            raise _NotConstant()
        return self._wrap(value, type_), type_

    # ------------------------------------------------------------------ expression types
    def type_of(self, expr, scope):
        """Type ``expr`` in ``scope``; sets and returns ``expr.type``.

        Raises:
            P4LoadError: unknown names, width mismatches, unsupported expressions.
        """
        self.current = expr.loc
        type_ = self._type_of(expr, scope)
        expr.type = type_
        return type_

    def _type_of(self, expr, scope):
        kind = expr.kind
        if kind == "int":
            return T.InfIntType() if expr.width is None else T.BitType(expr.width, expr.signed)
        if kind == "bool":
            return T.BoolType()
        if kind == "string":
            return T.StringType()
        if kind == "name":
            symbol = scope.lookup(expr.name)
            if symbol is None:
                raise self.error(expr, f"unknown name {expr.name!r}")
            expr.symbol = symbol
            if symbol.kind in ("const", "var", "param", "instance"):
                return symbol.type
            return T.VoidType()
        if kind == "type_member":
            type_ = self.types.get(expr.type_name)
            if isinstance(type_, T.EnumType):
                if expr.member not in type_.members:
                    raise self.error(expr, f"{expr.type_name} has no member {expr.member}")
                return type_
            raise self.error(expr, f"unsupported construct: {expr.type_name}.{expr.member}")
        if kind == "error_member":
            if expr.member not in self.errors:
                raise self.error(expr, f"unknown error error.{expr.member}")
            return T.ErrorType()
        if kind == "member":
            return self._member_type(expr, scope)
        if kind == "index":
            base = self.type_of(expr.expr, scope)
            index_type = self.type_of(expr.index, scope)
            if not isinstance(base, T.StackType):
                raise self.error(expr, f"indexing a {base.name_text()} (only header stacks can be indexed)")
            if not isinstance(index_type, (T.BitType, T.InfIntType)):
                raise self.error(expr, "header stack index must be an integer")
            return base.element
        if kind == "slice":
            base = self.type_of(expr.expr, scope)
            if not isinstance(base, (T.BitType, T.InfIntType)):
                raise self.error(expr, f"slice of a {base.name_text()} (only bit<W>/int<W>)")
            hi = self.const_value(expr.hi, scope)
            lo = self.const_value(expr.lo, scope)
            if not (isinstance(hi, int) and isinstance(lo, int)) or lo < 0 or hi < lo or (
                    isinstance(base, T.BitType) and hi >= base.width):
                raise self.error(expr, f"bad slice [{hi}:{lo}] of {base.name_text()}")
            expr.hi_value, expr.lo_value = hi, lo
            return T.BitType(hi - lo + 1)
        if kind == "cast":
            self.type_of(expr.expr, scope)
            return self.resolve_type(expr.type_ref)
        if kind == "unop":
            operand = self.type_of(expr.expr, scope)
            if expr.op == "!":
                if not isinstance(operand, T.BoolType):
                    raise self.error(expr, "! needs a bool operand")
                return T.BoolType()
            if not isinstance(operand, (T.BitType, T.InfIntType)):
                raise self.error(expr, f"{expr.op} needs an integer operand, got {operand.name_text()}")
            if expr.op == "~" and isinstance(operand, T.InfIntType):
                raise self.error(expr, "~ needs an operand with a width")
            return operand
        if kind == "binop":
            return self._binop_type(expr, scope)
        if kind == "conditional":
            cond = self.type_of(expr.cond, scope)
            if not isinstance(cond, T.BoolType):
                raise self.error(expr, "condition of ?: must be bool")
            then = self.type_of(expr.then, scope)
            other = self.type_of(expr.otherwise, scope)
            if isinstance(then, T.InfIntType):
                if isinstance(other, T.InfIntType):
                    raise self.error(expr, "?: with two width-less integers: give one a width")
                return other
            return then
        if kind == "list":
            return T.TupleType([self.type_of(item, scope) for item in expr.items])
        if kind == "struct_expr":
            return T.StructExprType([(name, self.type_of(value, scope)) for name, value in expr.fields])
        if kind == "invalid_header":
            return T.InvalidHeaderType()
        if kind == "pycode":
            return expr.type
        if kind == "call":
            return self._call_type(expr, scope)
        if kind == "dontcare":
            return T.DontCareType()
        raise self.error(expr, f"unsupported construct: expression {kind}")

    def _member_type(self, expr, scope):
        inner = expr.expr
        if inner.kind == "name" and scope.lookup(inner.name) is None and inner.name in self.types:
            raise self.error(expr, f"unsupported construct: {inner.name}.{expr.member}")
        base = self.type_of(inner, scope)
        member = expr.member
        if isinstance(base, T.StructLikeType):
            field = base.field_map.get(member)
            if field is not None:
                return field.type
            if isinstance(base, T.HeaderType) and member in ("isValid", "setValid", "setInvalid") + SIZE_METHODS:
                return T.VoidType()
            if isinstance(base, T.UnionType) and member == "isValid":
                return T.VoidType()
            if isinstance(base, T.StructType) and member in SIZE_METHODS:
                return T.VoidType()
            raise self.error(expr, f"{base.name_text()} has no field {member!r}")
        if isinstance(base, T.StackType):
            if member in ("next", "last"):
                return base.element
            if member in ("lastIndex", "size", "nextIndex"):
                return T.BitType(32)
            if member in ("push_front", "pop_front"):
                return T.VoidType()
            raise self.error(expr, f"header stack has no member {member!r}")
        if isinstance(base, T.TableResultType):
            if member in ("hit", "miss"):
                return T.BoolType()
            if member == "action_run":
                return T.ActionEnumType(base.table)
            raise self.error(expr, f"table apply result has no member {member!r}")
        if isinstance(base, (T.ExternType, T.VoidType)):
            return T.VoidType()  # a method, typed by the call
        raise self.error(expr, f"{base.name_text()} has no member {member!r}")

    def _binop_type(self, expr, scope):
        op = expr.op
        left = self.type_of(expr.left, scope)
        right = self.type_of(expr.right, scope)
        if op in ("land", "lor"):
            if not (isinstance(left, T.BoolType) and isinstance(right, T.BoolType)):
                raise self.error(expr, f"{'&&' if op == 'land' else '||'} needs bool operands")
            return T.BoolType()
        if op in ("eq", "ne"):
            composite = (T.StructLikeType, T.StackType, T.TupleType, T.StructExprType, T.InvalidHeaderType)
            if isinstance(left, composite) or isinstance(right, composite):
                named = [t for t in (left, right) if isinstance(t, (T.StructLikeType, T.StackType))]
                if len(named) == 2 and named[0].name_text() != named[1].name_text():
                    raise self.error(expr, f"cannot compare {left.name_text()} with {right.name_text()}")
                if not named and not (isinstance(left, T.TupleType) and isinstance(right, T.TupleType)):
                    raise self.error(expr, f"cannot compare {left.name_text()} with {right.name_text()}")
                return T.BoolType()
            if isinstance(left, T.VarbitType) or isinstance(right, T.VarbitType):
                if not (isinstance(left, T.VarbitType) and isinstance(right, T.VarbitType)):
                    raise self.error(expr, f"cannot compare {left.name_text()} with {right.name_text()}")
                return T.BoolType()
            self._unify(expr, left, right)
            return T.BoolType()
        if op in ("lt", "gt", "le", "ge"):
            self._unify(expr, left, right)
            return T.BoolType()
        if op in ("shl", "shr"):
            if not isinstance(left, (T.BitType, T.InfIntType)) or not isinstance(right, (T.BitType, T.InfIntType)):
                raise self.error(expr, "shift needs integer operands")
            if isinstance(right, T.BitType) and right.signed:
                raise self.error(expr, "shift amount must be unsigned")
            if isinstance(left, T.InfIntType) and not isinstance(right, T.InfIntType):
                raise self.error(expr, "shift of a width-less integer by a non-constant amount")
            return left
        if op == "concat":
            if not isinstance(left, T.BitType) or not isinstance(right, T.BitType):
                raise self.error(expr, "++ needs operands with a width (bit<W> or int<W>)")
            return T.BitType(left.width + right.width, left.signed)
        for side in (left, right):
            if not isinstance(side, (T.BitType, T.InfIntType)):
                raise self.error(expr, f"arithmetic on a {side.name_text()}")
        result = self._unify(expr, left, right)
        if op in ("div", "mod") and isinstance(result, T.BitType) and result.signed:
            raise self.error(expr, "unsupported construct: / and % on int<W> (signed)")
        return result

    def _unify(self, expr, left, right):
        if isinstance(left, T.InfIntType):
            return right
        if isinstance(right, T.InfIntType):
            return left
        if isinstance(left, T.BitType) and isinstance(right, T.BitType):
            if left != right:
                raise self.error(expr, f"operands of different types {left.name_text()} and {right.name_text()} "
                                       f"(cast one of them)")
            return left
        if type(left) is not type(right):
            if isinstance(left, T.EnumType) and isinstance(right, T.BitType) and left.underlying == right:
                return right
            if isinstance(right, T.EnumType) and isinstance(left, T.BitType) and right.underlying == left:
                return left
            raise self.error(expr, f"cannot compare {left.name_text()} with {right.name_text()}")
        if isinstance(left, T.EnumType) and left.name != right.name:
            raise self.error(expr, f"cannot compare {left.name_text()} with {right.name_text()}")
        return left

    def _call_type(self, expr, scope):
        func = expr.func
        for arg in expr.args:
            if arg.kind != "dontcare":
                self.type_of(arg, scope)
        if func.kind == "member":
            base_type = self.type_of(func.expr, scope)
            method = func.member
            if isinstance(base_type, T.HeaderType):
                if method == "isValid":
                    return T.BoolType()
                if method in ("setValid", "setInvalid"):
                    return T.VoidType()
                if method in SIZE_METHODS:
                    return T.InfIntType()
            if isinstance(base_type, T.StackType) and method in ("push_front", "pop_front"):
                return T.VoidType()
            if isinstance(base_type, T.UnionType) and method == "isValid":
                return T.BoolType()
            if isinstance(base_type, T.StructType) and method in SIZE_METHODS:
                return T.InfIntType()
            symbol = getattr(func.expr, "symbol", None)
            if symbol is not None and symbol.kind == "table" and method == "apply":
                return T.TableResultType(symbol)
            if symbol is not None and symbol.kind == "instance" and isinstance(symbol.type, T.BlockType):
                return T.VoidType()
            if isinstance(base_type, T.ExternType):
                if base_type.name == "packet_in" and method == "lookahead":
                    if len(expr.type_args) != 1:
                        raise self.error(expr, "lookahead needs one type argument: lookahead<T>()")
                    return self.resolve_type(expr.type_args[0])
                if base_type.name == "packet_in" and method == "length":
                    return T.BitType(32)
                return T.VoidType()
            raise self.error(expr, f"unsupported construct: method {method} on {base_type.name_text()}")
        if func.kind == "name":
            symbol = scope.lookup(func.name)
            if symbol is None:
                raise self.error(func, f"unknown function or action {func.name!r}")
            func.symbol = symbol
            if symbol.kind == "function":
                return symbol.return_type
            return T.VoidType()
        raise self.error(expr, "unsupported construct: call of a computed expression")


class _NotConstant(Exception):
    pass


def int_range(type_):
    """(min, max) of a bit<W>/int<W> type."""
    if type_.signed:
        return -(1 << (type_.width - 1)), (1 << (type_.width - 1)) - 1
    return 0, type_.mask


def convert_int(value, type_):
    """Wrap a Python int to ``type_`` (bit<W>: unsigned, int<W>: two's complement signed)."""
    if isinstance(type_, T.EnumType) and type_.underlying is not None:
        type_ = type_.underlying
    if not isinstance(type_, T.BitType):
        return value
    value &= type_.mask
    if type_.signed and value >> (type_.width - 1):
        value -= 1 << type_.width
    return value
