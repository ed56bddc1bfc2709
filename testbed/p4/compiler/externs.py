"""Code for v1model and core externs: packet_in/out, checksums, hashes, registers, counters, meters, clone, digest.

A mixin of :class:`testbed.p4.compiler.codegen.CodeGenerator`; it uses the generator's
``model`` (checker), ``info`` (ProgramInfo) and helper methods.
"""
from testbed.p4.compiler.pycode import attr, varbit_length_attr
from testbed.p4.compiler.target_externs import TARGET_EXTERNS, emit_target_extern
from testbed.p4.frontend import types as T
from testbed.p4.v1model import hashes
from testbed.p4.v1model import runtime as RT


class ExternsMixin:
    """Code for v1model and core externs: packet_in/out, checksums, hashes, registers, counters, meters, clone,
    digest."""

    def _field_list(self, node, scope, fn):
        """(value code, width) pairs of a list expression, header or struct (checksums, hashes).

        A varbit field's width is the code of its current length (the packing is then done at run time).
        """
        items = []
        if node.kind == "list":
            for item in node.items:
                items.extend(self._field_list(item, scope, fn))
            return items
        type_ = self.model.type_of(node, scope)
        if isinstance(type_, (T.HeaderType, T.StructType)):
            base = self.expr(node, scope, fn)
            return self._composite_fields(base, type_, node)
        if isinstance(type_, T.VarbitType):
            code = self.lvalue(node, scope, fn)
            return [(code, self._varbit_length_code(code, node))]
        width = T.scalar_width(type_)
        if width is None:
            raise self.error(node, f"{type_.name_text()} cannot be part of a field list")
        return [(self._to_unsigned(self.expr(node, scope, fn), type_), width)]

    def _varbit_length_code(self, code, node):
        head, _, name = code.rpartition(".")
        if not name.startswith("f_"):
            raise self.error(node, "a varbit value must be a field of a header")
        return f"{head}.{varbit_length_attr(name[2:])}"

    def _composite_fields(self, base, type_, node):
        if isinstance(type_, T.HeaderType):
            return [(self._to_unsigned(code, leaf) if not isinstance(leaf, T.VarbitType) else code, width)
                    for code, leaf, width in self.header_leaves(type_, base)]
        items = []
        for field in type_.fields:
            code = f"{base}.{attr(field.name)}"
            if isinstance(field.type, (T.HeaderType, T.StructType)):
                items.extend(self._composite_fields(code, field.type, node))
            else:
                width = T.scalar_width(field.type)
                if width is None:
                    raise self.error(node, f"{field.type.name_text()} cannot be part of a field list")
                items.append((self._to_unsigned(code, field.type), width))
        return items

    @staticmethod
    def _packed(items):
        """(int expression of the fields packed MSB first and zero-padded to bytes, byte count expression)."""
        if any(isinstance(width, str) for _, width in items):
            listed = "(" + "".join(f"({code}, {width}), " for code, width in items) + ")"
            return f"_pack_int({listed})", f"_pack_len({listed})"
        total = sum(width for _, width in items)
        parts = []
        shift = total
        for code, width in items:
            shift -= width
            parts.append(f"({code} << {shift})" if shift else f"{code}")
        pad = -total % 8
        expression = " | ".join(parts) or "0"
        expression = f"(({expression}) << {pad})" if pad else f"({expression})"
        return expression, (total + pad) // 8

    def _algorithm(self, node, scope):
        if node.kind != "type_member" or node.type_name != "HashAlgorithm":
            raise self.error(node, "the hash algorithm must be HashAlgorithm.<name>")
        if node.member not in hashes.ALGORITHMS:
            raise self.error(node, f"unknown hash algorithm {node.member}")
        return node.member

    def _type_arguments(self, args, scope):
        """Type-check the arguments of an extern call (list and ``_`` arguments are typed where used)."""
        for arg in args:
            if arg.kind not in ("list", "dontcare"):
                self.model.type_of(arg, scope)

    def _need_args(self, name, call, count):
        """Raise a P4LoadError unless ``call`` has exactly ``count`` arguments."""
        if len(call.args) != count:
            raise self.error(call, f"{name} needs {count} argument(s), got {len(call.args)}")

    def _clone_type(self, node):
        """The ``CloneType`` member (``I2E`` or ``E2E``) an argument names."""
        if node.kind != "type_member" or node.type_name != "CloneType":
            raise self.error(node, "clone type must be CloneType.I2E or CloneType.E2E")
        return node.member

    # Each _call_* method emits one extern function call: (self, name, call, scope, fn).
    def _call_mark_to_drop(self, name, call, scope, fn):
        args = call.args
        target = self.expr(args[0], scope, fn) if args else "P.sm"
        fn.out.line(f"{target}.f_egress_spec = {RT.DROP_PORT}")
        fn.out.line(f"{target}.f_mcast_grp = 0")

    def _call_checksum(self, name, call, scope, fn):
        """verify_checksum / update_checksum, and their ``_with_payload`` forms."""
        out = fn.out
        args = call.args
        self._need_args(name, call, 4)
        algorithm = self._algorithm(args[3], scope)
        cond = self.expr(args[0], scope, fn)
        packed, nbytes = self._packed(self._field_list(args[1], scope, fn))
        target_type = self.model.type_of(args[2], scope)
        if not isinstance(target_type, T.BitType):
            raise self.error(args[2], "checksum field must be bit<W>")
        data = f"{packed}.to_bytes({nbytes}, 'big')"
        if name.endswith("_with_payload"):
            data = f"({data} + P.payload)"
            if algorithm == "csum16":
                value = f"HASHES.csum16({data})"
            else:
                value = f"(_compute_bytes({algorithm!r}, {data}) & {target_type.mask})"
        elif algorithm == "csum16":
            value = f"_csum_int({packed}, {nbytes})"
        else:
            value = f"(_compute_bytes({algorithm!r}, {data}) & {target_type.mask})"
        out.line(f"if {cond}:")
        out.indent()
        if name.startswith("verify"):
            out.line(f"if {value} != {self.expr(args[2], scope, fn)}:")
            out.line("    P.sm.f_checksum_error = 1")
        else:
            self.store(args[2], value, scope, fn)
        out.dedent()

    def _call_hash(self, name, call, scope, fn):
        args = call.args
        self._need_args(name, call, 5)
        result_type = self.model.type_of(args[0], scope)
        if not isinstance(result_type, T.BitType):
            raise self.error(args[0], "hash result must be bit<W>")
        algorithm = self._algorithm(args[1], scope)
        base = self.expr(args[2], scope, fn, want=result_type)
        packed, nbytes = self._packed(self._field_list(args[3], scope, fn))
        maximum = self.expr(args[4], scope, fn, want=T.BitType(64))
        data = f"{packed}.to_bytes({nbytes}, 'big')"
        self.store(args[0], f"_hash_ext({algorithm!r}, {base}, {data}, {maximum}, {result_type.width})",
                   scope, fn)

    def _call_random(self, name, call, scope, fn):
        args = call.args
        self._need_args(name, call, 3)
        result_type = self.model.type_of(args[0], scope)
        low = self.expr(args[1], scope, fn, want=result_type)
        high = self.expr(args[2], scope, fn, want=result_type)
        self.store(args[0], f"_random({low}, {high})", scope, fn)

    def _call_digest(self, name, call, scope, fn):
        self._need_args(name, call, 2)
        digest_type = getattr(call, "digest_type", None)
        if digest_type is None:
            raise self.error(call, "digest data must have a named struct type")
        data = call.args[1]
        if data.kind == "list":
            if len(data.items) != len(digest_type.fields):
                raise self.error(data, f"digest {digest_type.name}: {len(digest_type.fields)} fields expected")
            values = [self._to_unsigned(self.expr(item, scope, fn, want=f.type), f.type)
                      for item, f in zip(data.items, digest_type.fields)]
        else:
            base = self.expr(data, scope, fn)
            values = [self._to_unsigned(f"{base}.{attr(f.name)}", f.type) for f in digest_type.fields]
        fn.out.line(f"P.digests.append(({digest_type.name!r}, ({''.join(v + ', ' for v in values)})))")

    def _call_clone(self, name, call, scope, fn):
        """clone / clone_preserving_field_list."""
        args = call.args
        self._need_args(name, call, 2 if name == "clone" else 3)
        clone_type = self._clone_type(args[0])
        if fn.kind == "control" and self._role_of(fn) not in (None, "ingress", "egress"):
            raise self.error(call, f"{name} is only allowed in ingress or egress")
        session = self.expr(args[1], scope, fn, want=T.BitType(32))
        field_list = str(self.model.const_value(args[2], scope)) if name != "clone" else "None"
        fn.out.line(f"P.clone_session = {session}")
        fn.out.line(f"P.clone_field_list = {field_list}")
        call.clone_type = clone_type

    def _call_clone3(self, name, call, scope, fn):
        """The deprecated clone3: its data argument lists the metadata fields to preserve."""
        args = call.args
        self._need_args(name, call, 3)
        self._clone_type(args[0])
        session = self.expr(args[1], scope, fn, want=T.BitType(32))
        fn.out.line(f"P.clone_session = {session}")
        fn.out.line(f"P.clone_field_list = {self._synthetic_field_list(args[2], scope)}")

    def _call_preserving_field_list(self, name, call, scope, fn):
        """resubmit_preserving_field_list / recirculate_preserving_field_list."""
        self._need_args(name, call, 1)
        index = self.model.const_value(call.args[0], scope)
        attribute = "resubmit_field_list" if name.startswith("resubmit") else "recirculate_field_list"
        fn.out.line(f"P.{attribute} = {index}")

    def _call_resubmit_or_recirculate(self, name, call, scope, fn):
        """The deprecated resubmit / recirculate with a data argument."""
        self._need_args(name, call, 1)
        attribute = "resubmit_field_list" if name == "resubmit" else "recirculate_field_list"
        fn.out.line(f"P.{attribute} = {self._synthetic_field_list(call.args[0], scope)}")

    def _call_truncate(self, name, call, scope, fn):
        self._need_args(name, call, 1)
        fn.out.line(f"P.truncate_length = {self.expr(call.args[0], scope, fn, want=T.BitType(32))}")

    def _call_assert(self, name, call, scope, fn):
        """assert / assume: a failing condition stops the packet with a P4AssertionError."""
        self._need_args(name, call, 1)
        filename, line = self.model.location(call)
        fn.out.line(f"if not {self.expr(call.args[0], scope, fn)}:")
        fn.out.line(f"    raise RT.P4AssertionError({name + ' failed at ' + str(filename) + ':' + str(line)!r})")

    def _call_log_msg(self, name, call, scope, fn):
        args = call.args
        if not args or args[0].kind != "string":
            raise self.error(call, "log_msg needs a string literal first")
        values = []
        if len(args) > 1:
            data = args[1]
            items = data.items if data.kind == "list" else [data]
            for item in items:
                self.model.type_of(item, scope)
                values.append(self.expr(item, scope, fn))
        fn.out.line("if P.log is not None:")
        fn.out.line(f"    P.log(RT.format_log_message({args[0].value!r}, ({''.join(v + ', ' for v in values)})))")

    def _call_verify(self, name, call, scope, fn):
        args = call.args
        self._need_args(name, call, 2)
        if fn.kind != "parser":
            raise self.error(call, "verify is only allowed in a parser")
        fn.out.line(f"if not {self.expr(args[0], scope, fn)}:")
        fn.out.line(f"    err = {self.expr(args[1], scope, fn)}")
        fn.out.line("    break")

    EXTERN_FUNCTIONS = {
        "mark_to_drop": _call_mark_to_drop,
        "verify_checksum": _call_checksum,
        "update_checksum": _call_checksum,
        "verify_checksum_with_payload": _call_checksum,
        "update_checksum_with_payload": _call_checksum,
        "hash": _call_hash,
        "random": _call_random,
        "digest": _call_digest,
        "clone": _call_clone,
        "clone_preserving_field_list": _call_clone,
        "clone3": _call_clone3,
        "resubmit_preserving_field_list": _call_preserving_field_list,
        "recirculate_preserving_field_list": _call_preserving_field_list,
        "resubmit": _call_resubmit_or_recirculate,
        "recirculate": _call_resubmit_or_recirculate,
        "truncate": _call_truncate,
        "assert": _call_assert,
        "assume": _call_assert,
        "log_msg": _call_log_msg,
        "verify": _call_verify,
    }
    """v1model and core extern function name -> the method emitting its call."""

    def extern_function(self, name, call, scope, fn):
        """Emit a v1model/core extern function call, or one of the embedded target's own externs.

        Args:
            name: the extern function's name.
            call: the call node.
            scope: the scope the call is in.
            fn: the :class:`~testbed.p4.compiler.pycode.FunctionContext` being generated.

        Raises:
            P4LoadError: a wrong argument, or an extern function the target does not have.
        """
        self._type_arguments(call.args, scope)
        emit = self.EXTERN_FUNCTIONS.get(name)
        if emit is not None:
            emit(self, name, call, scope, fn)
        elif name in TARGET_EXTERNS:
            emit_target_extern(self, name, call, scope, fn)  # the embedded target's own externs (DSF)
        else:
            raise self.error(call, f"unsupported construct: extern function {name}")

    def _role_of(self, fn):
        control = getattr(fn, "control", None)
        for role, candidate in self.pipeline.controls.items():
            if candidate is control:
                return role
        return None

    def extern_method(self, base, base_type, method, call, scope, fn):
        """Emit a method call on an extern instance (packet_in/out, counter, register, meter, ...)."""
        out = fn.out
        args = call.args
        model = self.model
        self._type_arguments(args, scope)
        extern = base_type.name
        if extern == "packet_in":
            if fn.kind != "parser":
                raise self.error(call, "packet_in methods are only available in a parser")
            if method == "extract":
                if len(args) not in (1, 2):
                    raise self.error(call, f"extract takes 1 or 2 arguments, got {len(args)}")
                if args[0].kind == "dontcare":
                    self._extract_dontcare(call, scope, fn)
                    return
                self._extract(args[0], scope, fn, args[1] if len(args) == 2 else None)
                return
            if method == "lookahead":
                # a lookahead whose value is not used still fails with PacketTooShort (P4_16 1.2.4)
                call.type = self.model.type_of(call, scope)
                self._lookahead(call, fn)
                return
            if method == "advance":
                amount = model.try_const(args[0], scope)
                if amount is not None:
                    bits = int(amount[0])
                    if bits % 8:
                        raise self.error(call, "advance by a number of bits that is not a multiple of 8")
                    out.line(f"if off + {bits // 8} > n:")
                    out.line("    err = _PacketTooShort")
                    out.line("    break")
                    out.line(f"off += {bits // 8}")
                else:
                    temp = fn.temp("adv")
                    out.line(f"{temp} = {self.expr(args[0], scope, fn)}")
                    out.line(f"if off + ({temp} >> 3) > n:")
                    out.line("    err = _PacketTooShort")
                    out.line("    break")
                    out.line(f"off += {temp} >> 3")
                return
            raise self.error(call, f"unsupported construct: packet_in.{method} as a statement")
        if extern == "packet_out":
            if method != "emit":
                raise self.error(call, f"packet_out has no method {method}")
            if fn.kind != "deparser":
                raise self.error(call, "emit is only allowed in the deparser")
            arg = args[0]
            arg_type = arg.type
            code = self.expr(arg, scope, fn)
            self._emit(code, arg_type, fn, arg)
            return
        symbol = getattr(base, "symbol", None)
        if symbol is None or symbol.kind != "instance":
            raise self.error(call, f"unsupported construct: method {method} of {extern}")
        state = None
        if extern in ("counter", "meter", "register", "direct_counter", "direct_meter"):
            state = self.instance_global(symbol)
        if extern == "counter" and method == "count":
            index = self.expr(args[0], scope, fn)
            out.line(f"{state}.count({index}, P.sm.f_packet_length)")
        elif extern == "direct_counter" and method == "count":
            out.line("pass  # direct_counter.count(): counted on table hit")
        elif extern == "register" and method == "read":
            element = base_type.type_args[0] if base_type.type_args else None
            size = self.info.registers[symbol.qualified].size
            index = fn.temp("i")
            out.line(f"{index} = {self.expr(args[1], scope, fn)}")
            value = f"{state}.values[{index}] if {index} < {size} else 0"
            if isinstance(element, T.BitType) and element.signed:
                value = self._from_unsigned(f"({value})", element)
            self.store(args[0], f"({value})", scope, fn)
        elif extern == "register" and method == "write":
            element = base_type.type_args[0] if base_type.type_args else T.BitType(32)
            size = self.info.registers[symbol.qualified].size
            index = fn.temp("i")
            out.line(f"{index} = {self.expr(args[0], scope, fn)}")
            out.line(f"if {index} < {size}:")
            value = self.expr(args[1], scope, fn, want=element)
            out.line(f"    {state}.values[{index}] = ({value}) & {element.mask}")
        elif extern == "meter" and method == "execute_meter":
            unit = self.info.meters[symbol.qualified].unit
            size = "P.sm.f_packet_length" if unit == "BYTES" else "1"
            index = self.expr(args[0], scope, fn)
            self.store(args[1], f"{state}.execute({index}, {size}, P.now_ns)", scope, fn)
        elif extern == "direct_meter" and method == "read":
            self.store(args[0], "P.meter_color", scope, fn)
        else:
            raise self.error(call, f"unsupported construct: {extern}.{method}")

    def _extract(self, target, scope, fn, size_node=None):
        """``pkt.extract(h)`` / ``pkt.extract(h, bits)`` into a header, a stack's ``next`` or a union member.

        Errors as BMv2's parser raises them (src/bm_sim/parser.cpp): a full stack
        StackOutOfBounds; for a varbit header a size that is not a multiple of 8
        ParserInvalidArgument, too few bytes PacketTooShort, more than the header's maximum
        HeaderTooShort.
        """
        out = fn.out
        type_ = self.model.type_of(target, scope)
        stack_code = None
        union = None
        if target.kind == "member" and target.member == "next" and isinstance(target.expr.type, T.StackType):
            stack_type = target.expr.type
            stack_code = fn.temp("s")
            out.line(f"{stack_code} = {self.expr(target.expr, scope, fn)}")
            code = f"{stack_code}.items[{stack_code}.next_index]"
        elif target.kind == "member" and target.expr.kind == "member" and target.expr.member == "next" and \
                isinstance(target.expr.expr.type, T.StackType):
            stack_type = target.expr.expr.type  # a stack of header unions: us.next.member
            stack_code = fn.temp("s")
            out.line(f"{stack_code} = {self.expr(target.expr.expr, scope, fn)}")
            union = (f"{stack_code}.items[{stack_code}.next_index]", stack_type.element, target.member)
            code = f"{union[0]}.{attr(target.member)}"
        else:
            code = self.lvalue(target, scope, fn)
        if not isinstance(type_, T.HeaderType):
            raise self.error(target, f"extract needs a header, got {type_.name_text()}")
        if stack_code is not None:
            out.line(f"if {stack_code}.next_index >= {stack_type.size}:")
            out.line(f"    err = {self.model.errors['StackOutOfBounds']}")
            out.line("    break")
        if type_.varbit is None:
            if size_node is not None:
                raise self.error(target, f"extract with a size needs a header with a varbit field; "
                                         f"{type_.name} has none")
            size = str(type_.byte_size)
            out.line(f"if off + {size} > n:")
            out.line("    err = _PacketTooShort")
            out.line("    break")
            extract_args = "buf, off"
        else:
            if size_node is None:
                raise self.error(target, f"header {type_.name} has a varbit field: extract it with "
                                         f"extract(h, sizeInBits)")
            if type_.width % 8:
                raise self.error(target, f"unsupported construct: header {type_.name}'s fixed fields are not a "
                                         f"whole number of bytes")
            self.model.type_of(size_node, scope)
            bits = fn.temp("vb")
            size = fn.temp("nb")
            out.line(f"{bits} = {self.expr(size_node, scope, fn, want=T.BitType(32))}")
            out.line(f"if {bits} & 7:")
            out.line(f"    err = {self.model.errors.get('ParserInvalidArgument', 6)}")
            out.line("    break")
            out.line(f"{size} = {type_.width >> 3} + ({bits} >> 3)")
            out.line(f"if off + {size} > n:")
            out.line("    err = _PacketTooShort")
            out.line("    break")
            out.line(f"if {size} > {(type_.max_width + 7) >> 3}:")
            out.line(f"    err = {self.model.errors.get('HeaderTooShort', 4)}")
            out.line("    break")
            extract_args = f"buf, off, {bits}"
        if union is not None:
            for field in union[1].fields:
                if field.name != union[2]:
                    out.line(f"{union[0]}.{attr(field.name)}.valid = False")
        else:
            self._invalidate_union_siblings(target, scope, fn)
        out.line(f"{code}.extract({extract_args})")
        if stack_code is not None:
            out.line(f"{stack_code}.next_index += 1")
        out.line(f"off += {size}")

    def _extract_dontcare(self, call, scope, fn):
        """``pkt.extract<T>(_)``: the header's bytes are checked and skipped."""
        if len(call.type_args) != 1:
            raise self.error(call, "extract(_) needs the header type: extract<T>(_)")
        type_ = self.model.resolve_type(call.type_args[0])
        if not isinstance(type_, T.HeaderType) or type_.varbit is not None:
            raise self.error(call, f"extract<{type_.name_text()}>(_) needs a fixed-size header type")
        out = fn.out
        out.line(f"if off + {type_.byte_size} > n:")
        out.line("    err = _PacketTooShort")
        out.line("    break")
        out.line(f"off += {type_.byte_size}")

    def _emit(self, code, type_, fn, node):
        out = fn.out
        if isinstance(type_, T.HeaderType):
            out.line(f"if {code}.valid:")
            out.line(f"    _out.append({code}.emit())")
        elif isinstance(type_, T.StackType):
            out.line(f"{code}.emit(_out)")
        elif isinstance(type_, T.StructType):
            for field in type_.fields:
                self._emit(f"{code}.{attr(field.name)}", field.type, fn, node)
        else:
            raise self.error(node, f"emit of a {type_.name_text()} (only headers, stacks and structs of them)")
