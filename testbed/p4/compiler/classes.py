"""Python classes for P4 headers and structs (parse/serialise/copy), and value conversions.

A mixin of :class:`testbed.p4.compiler.codegen.CodeGenerator`; it uses the generator's
``model`` (checker), ``info`` (ProgramInfo) and helper methods.
"""
from testbed.errors import P4LoadError
from testbed.p4.compiler.pycode import attr, is_signed, varbit_length_attr
from testbed.p4.frontend import types as T


class ClassesMixin:
    """Python classes for P4 headers and structs (parse/serialise/copy), and value conversions."""

    def class_for(self, type_):
        """The generated class name of a header or struct type (generated on first use)."""
        name = self.class_names.get(id(type_))
        if name is not None:
            return name
        if isinstance(type_, T.HeaderType):
            name = "H_" + type_.name
            self.class_names[id(type_)] = name
            self._header_class(type_, name)
        elif isinstance(type_, T.StructType):
            name = "S_" + type_.name
            self.class_names[id(type_)] = name
            self._struct_class(type_, name)
        else:
            raise TypeError(type_)
        return name

    def header_leaves(self, type_, prefix="self"):
        """(code, type, width) of each bit-string leaf of a header in wire order.

        Struct-typed header fields contribute their own leaves; a varbit field is one leaf
        whose width is the code of its current length (``self.l_<name>``).
        """
        leaves = []
        for f in type_.fields:
            code = f"{prefix}.{attr(f.name)}"
            if isinstance(f.type, T.StructType):
                leaves.extend(self.header_leaves(f.type, code))
            elif isinstance(f.type, T.VarbitType):
                leaves.append((code, f.type, f"{prefix}.{varbit_length_attr(f.name)}"))
            else:
                leaves.append((code, f.type, T.field_width(f.type)))
        return leaves

    def _header_class(self, header, name):
        out = self.module
        fields = header.fields
        slot_names = ["valid"] + [attr(f.name) for f in fields]
        if header.varbit is not None:
            slot_names.append(varbit_length_attr(header.varbit.name))
        out.line(f"class {name}:")
        out.indent()
        out.line(f"__slots__ = ({', '.join(repr(n) for n in slot_names)},)")
        out.line(f"WIDTH = {header.width}")
        out.line(f"BYTES = {header.byte_size}")
        out.line("def __init__(self):")
        out.indent()
        out.line("self.valid = False")
        for f in fields:
            if isinstance(f.type, T.StructType):
                out.line(f"self.{attr(f.name)} = {self.class_for(f.type)}()")
            else:
                out.line(f"self.{attr(f.name)} = {'False' if isinstance(f.type, T.BoolType) else '0'}")
        if header.varbit is not None:
            out.line(f"self.{varbit_length_attr(header.varbit.name)} = 0")
        out.dedent()
        leaves = self.header_leaves(header)
        if header.varbit is None:
            self._fixed_extract_emit(header, leaves)
        else:
            self._varbit_extract_emit(header, leaves)
        members = [("valid", None)] + [(attr(f.name), f.type) for f in fields]
        if header.varbit is not None:
            members.append((varbit_length_attr(header.varbit.name), None))
        self._copy_methods(name, members)
        out.line("def fields(self):")
        out.indent()
        items = ", ".join(f"({self._to_unsigned(code, type_)}, {width})" for code, type_, width in leaves)
        out.line(f"return [{items}]")
        out.dedent()
        out.dedent()
        out.line("")

    def _fixed_extract_emit(self, header, leaves):
        out = self.module
        out.line("def extract(self, buf, off):")
        out.indent()
        out.line(f"v = int.from_bytes(buf[off:off + {header.byte_size}], 'big')")
        offset = 0
        for code, type_, width in leaves:
            shift = header.width - offset - width
            value = f"(v >> {shift})" if shift else "v"
            if offset != 0:
                value = f"({value} & {(1 << width) - 1})"
            out.line(f"{code} = {self._from_unsigned(value, type_)}")
            offset += width
        out.line("self.valid = True")
        out.dedent()
        out.line("def emit(self):")
        out.indent()
        parts = []
        offset = 0
        for code, type_, width in leaves:
            shift = header.width - offset - width
            value = code
            if isinstance(type_, T.BoolType):
                value = f"(1 if {value} else 0)"
            elif is_signed(type_):
                value = f"({value} & {(1 << width) - 1})"
            parts.append(f"({value} << {shift})" if shift else value)
            offset += width
        out.line(f"return ({' | '.join(parts) or '0'}).to_bytes({header.byte_size}, 'big')")
        out.dedent()

    def _varbit_extract_emit(self, header, leaves):
        """extract(buf, off, vbits) and emit() of a header with a varbit field (run-time layout)."""
        out = self.module
        out.line("def extract(self, buf, off, vbits):")
        out.indent()
        out.line(f"total = {header.width} + vbits")
        out.line("v = int.from_bytes(buf[off:off + (total >> 3)], 'big')")
        out.line("pos = total")
        for code, type_, width in leaves:
            if isinstance(type_, T.VarbitType):
                out.line("pos -= vbits")
                out.line(f"{code} = (v >> pos) & ((1 << vbits) - 1)")
                out.line(f"{width} = vbits")
            else:
                out.line(f"pos -= {width}")
                out.line(f"{code} = {self._from_unsigned(f'((v >> pos) & {(1 << width) - 1})', type_)}")
        out.line("self.valid = True")
        out.dedent()
        out.line("def emit(self):")
        out.indent()
        out.line("v = 0")
        for code, type_, width in leaves:
            value = self._to_unsigned(code, type_) if not isinstance(type_, T.VarbitType) else code
            out.line(f"v = (v << {width}) | {value}")
        varbit_length = next(width for _, type_, width in leaves if isinstance(type_, T.VarbitType))
        out.line(f"return v.to_bytes(({header.width} + {varbit_length}) >> 3, 'big')")
        out.dedent()

    def _struct_class(self, struct, name):
        out = self.module
        member_classes = {}
        for f in struct.fields:
            if isinstance(f.type, (T.HeaderType, T.StructType)):
                member_classes[f.name] = self.class_for(f.type)
            elif isinstance(f.type, T.StackType):
                member_classes[f.name] = self.class_for(f.type.element)
        slots = ", ".join(repr(attr(f.name)) for f in struct.fields)
        out.line(f"class {name}:")
        out.indent()
        out.line(f"__slots__ = ({slots}{',' if struct.fields else ''})")
        out.line("def __init__(self):")
        out.indent()
        if not struct.fields:
            out.line("pass")
        for f in struct.fields:
            out.line(f"self.{attr(f.name)} = {self._initial_value(f.type)}")
        out.dedent()
        self._copy_methods(name, [(attr(f.name), f.type) for f in struct.fields])
        if isinstance(struct, T.UnionType):
            # a header_union is valid when one of its headers is; it is emitted as that header
            members = [f"self.{attr(f.name)}" for f in struct.fields]
            out.line("@property")
            out.line("def valid(self):")
            out.line(f"    return {' or '.join(m + '.valid' for m in members) or 'False'}")
            out.line("def emit(self):")
            out.indent()
            for member in members:
                out.line(f"if {member}.valid:")
                out.line(f"    return {member}.emit()")
            out.line("return b''")
            out.dedent()
        out.dedent()
        out.line("")

    def _copy_methods(self, name, members):
        """``copy()`` and ``copy_from(o)`` of a generated class.

        ``members``: [(attribute, P4 type, or None for a scalar slot)].  Headers and structs in it are
        copied member by member, stacks and tuples replaced by copies.
        """
        out = self.module
        out.line("def copy(self):")
        out.indent()
        out.line(f"o = {name}.__new__({name})")
        for member, type_ in members:
            if isinstance(type_, (T.HeaderType, T.StructType, T.StackType)):
                out.line(f"o.{member} = self.{member}.copy()")
            else:
                out.line(f"o.{member} = self.{member}")
        out.line("return o")
        out.dedent()
        out.line("def copy_from(self, o):")
        out.indent()
        if not members:
            out.line("pass")
        for member, type_ in members:
            if isinstance(type_, (T.HeaderType, T.StructType)):
                out.line(f"self.{member}.copy_from(o.{member})")
            elif isinstance(type_, T.StackType):
                out.line(f"self.{member} = o.{member}.copy()")
            elif isinstance(type_, T.TupleType):
                out.line(f"self.{member} = list(o.{member})")
            else:
                out.line(f"self.{member} = o.{member}")
        out.dedent()

    def _initial_value(self, type_):
        """Code of a fresh value of ``type_``: zeros, invalid headers (what BMv2 starts a packet with)."""
        if isinstance(type_, (T.HeaderType, T.StructType)):
            return f"{self.class_for(type_)}()"
        if isinstance(type_, T.StackType):
            element = self.stack_element_factory(type_)
            return f"RT.HeaderStack([{element}() for _ in range({type_.size})])"
        if isinstance(type_, T.TupleType):
            return "[" + ", ".join(self._initial_value(e) for e in type_.elements) + "]"
        if isinstance(type_, T.BoolType):
            return "False"
        if isinstance(type_, (T.BitType, T.InfIntType, T.EnumType, T.ErrorType)):
            return "0"
        raise P4LoadError(f"unsupported construct: variable of type {type_.name_text()}")

    def stack_element_factory(self, stack_type):
        """The class that makes a fresh element of a header (or header_union) stack."""
        return self.class_for(stack_type.element)

    @staticmethod
    def _from_unsigned(code, type_):
        if isinstance(type_, T.BoolType):
            return f"({code} != 0)"
        if is_signed(type_):
            width = T.field_width(type_)
            half = 1 << (width - 1)
            return f"((({code}) ^ {half}) - {half})"
        return code

    @staticmethod
    def _to_unsigned(code, type_):
        if isinstance(type_, T.BoolType):
            return f"(1 if {code} else 0)"
        if is_signed(type_):
            return f"({code} & {(1 << T.field_width(type_)) - 1})"
        return code
