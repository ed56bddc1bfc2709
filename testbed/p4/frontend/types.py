"""P4 types as the checker and the code generator see them.

Widths are resolved to Python ints at load time.  Headers know their field
layout (bit offsets) so the code generator can emit extract/emit code.
"""


class P4Type:
    """Base class of every P4 type."""

    kind = "type"

    def __repr__(self):
        return self.name_text()

    def name_text(self):
        """The type as P4 source text (for error messages)."""
        return self.kind


class BitType(P4Type):
    """``bit<W>`` (``signed`` False) or ``int<W>`` (``signed`` True)."""

    kind = "bit"

    def __init__(self, width, signed=False):
        self.width = width
        self.signed = signed
        self.mask = (1 << width) - 1

    def name_text(self):
        return f"{'int' if self.signed else 'bit'}<{self.width}>"

    def __eq__(self, other):
        return isinstance(other, BitType) and other.width == self.width and other.signed == self.signed

    def __hash__(self):
        return hash((self.width, self.signed))


class InfIntType(P4Type):
    """The type of an integer literal without a width (arbitrary precision)."""

    kind = "infint"

    def name_text(self):
        return "int"


class BoolType(P4Type):
    """``bool``."""

    kind = "bool"


class ErrorType(P4Type):
    """``error``."""

    kind = "error"


class StringType(P4Type):
    """``string`` (only as a log_msg argument)."""

    kind = "string"


class VoidType(P4Type):
    """``void``."""

    kind = "void"


class MatchKindType(P4Type):
    """``match_kind``."""

    kind = "match_kind"


class DontCareType(P4Type):
    """``_`` in type arguments."""

    kind = "dontcare"


class FieldInfo:
    """A member of a header or struct."""

    def __init__(self, name, type_, annotations):
        self.name = name
        self.type = type_
        self.annotations = annotations
        self.offset = 0  # bit offset from the start of a header


class NamedType(P4Type):
    """A type declared with a name (``self.name``, set by the subclass), which is also its source text."""

    def name_text(self):
        return self.name


class StructLikeType(NamedType):
    """Headers and structs: named members."""

    def __init__(self, name, fields, annotations):
        self.name = name
        self.fields = fields
        self.field_map = {f.name: f for f in fields}
        self.annotations = annotations


class HeaderType(StructLikeType):
    """``header``: fields are bit/int/bool/serializable enums, structs of them, at most one varbit.

    ``width`` is the fixed part in bits (a varbit field counts 0), ``max_width`` the largest
    size (a varbit at its maximum); ``varbit`` is the varbit field or None.
    """

    kind = "header"

    def __init__(self, name, fields, annotations):
        super().__init__(name, fields, annotations)
        offset = 0
        self.varbit = None
        for f in fields:
            f.offset = offset
            if isinstance(f.type, VarbitType):
                self.varbit = f
                continue
            offset += field_width(f.type)
        self.width = offset
        self.max_width = offset + (self.varbit.type.max_width if self.varbit is not None else 0)

    @property
    def byte_size(self):
        """Size in bytes (of the fixed part when there is a varbit field)."""
        return self.width // 8


class VarbitType(P4Type):
    """``varbit<W>``: a bit string of up to ``max_width`` bits whose length is set when it is extracted."""

    kind = "varbit"

    def __init__(self, max_width):
        self.max_width = max_width

    def name_text(self):
        return f"varbit<{self.max_width}>"


class StructExprType(P4Type):
    """The type of a structure-valued expression ``{a = x, b = y}`` before it meets its target type."""

    kind = "struct_expr"

    def __init__(self, fields):
        self.fields = fields

    def name_text(self):
        return "{" + ", ".join(f"{name} = {type_.name_text()}" for name, type_ in self.fields) + "}"


class InvalidHeaderType(P4Type):
    """The type of ``{#}``, the invalid header (or header union) of the type it is assigned to."""

    kind = "invalid_header"

    def name_text(self):
        return "{#}"


class StructType(StructLikeType):
    """``struct``."""

    kind = "struct"


class UnionType(StructType):
    """``header_union``: header members, at most one of them valid."""

    kind = "union"


class StackType(P4Type):
    """A header stack ``H[N]``."""

    kind = "stack"

    def __init__(self, element, size):
        self.element = element
        self.size = size

    def name_text(self):
        return f"{self.element.name_text()}[{self.size}]"


class EnumType(NamedType):
    """``enum`` (``underlying`` None) or serializable ``enum bit<W>``."""

    kind = "enum"

    def __init__(self, name, members, underlying):
        self.name = name
        self.members = members  # name -> int value
        self.underlying = underlying


class TupleType(P4Type):
    """A tuple / list expression's type."""

    kind = "tuple"

    def __init__(self, elements):
        self.elements = elements

    def name_text(self):
        return "tuple<" + ", ".join(e.name_text() for e in self.elements) + ">"


class ExternType(NamedType):
    """An extern object type, possibly specialized (``register<bit<32>>``)."""

    kind = "extern"

    def __init__(self, name, decl, type_args=()):
        self.name = name
        self.decl = decl
        self.type_args = list(type_args)


class BlockType(NamedType):
    """A parser, control or package type (declaration ``decl``)."""

    kind = "block"

    def __init__(self, name, decl, block_kind):
        self.name = name
        self.decl = decl
        self.block_kind = block_kind


class TableApplyType(P4Type):
    """Base of the types of a table's apply results; ``table`` is the table they come from."""

    def __init__(self, table):
        self.table = table


class TableResultType(TableApplyType):
    """What ``t.apply()`` returns: ``.hit``, ``.miss``, ``.action_run``."""

    kind = "table_result"


class ActionEnumType(TableApplyType):
    """The type of ``t.apply().action_run``."""

    kind = "action_enum"


def field_width(type_):
    """Width in bits of a fixed-size header field type (bit/int, bool = 1, serializable enum, struct of them)."""
    if isinstance(type_, StructType) and not isinstance(type_, UnionType):
        return sum(field_width(f.type) for f in type_.fields)
    width = None if isinstance(type_, ErrorType) else scalar_width(type_)
    if width is None:
        raise TypeError(f"not a fixed-width field type: {type_.name_text()}")
    return width


def is_flat_bit_struct(type_):
    """True for a struct whose fields are all bit-strings (or such structs): allowed inside headers."""
    for f in type_.fields:
        if isinstance(f.type, StructType) and not isinstance(f.type, UnionType):
            if not is_flat_bit_struct(f.type):
                return False
        elif not (isinstance(f.type, (BitType, BoolType)) or
                  (isinstance(f.type, EnumType) and f.type.underlying is not None)):
            return False
    return True


def scalar_width(type_):
    """Width of a value that can be a table key, hash input or digest field, else None."""
    if isinstance(type_, BitType):
        return type_.width
    if isinstance(type_, BoolType):
        return 1
    if isinstance(type_, EnumType) and type_.underlying is not None:
        return type_.underlying.width
    if isinstance(type_, ErrorType):
        return 32
    return None


def flatten_width(type_):
    """Total width of a struct/header/tuple, field by field (for digests, hashes; a varbit counts 0)."""
    if isinstance(type_, VarbitType):
        return 0
    if isinstance(type_, (StructType, HeaderType)):
        return sum(flatten_width(f.type) for f in type_.fields)
    if isinstance(type_, TupleType):
        return sum(flatten_width(e) for e in type_.elements)
    width = scalar_width(type_)
    if width is None:
        raise TypeError(type_.name_text())
    return width


def max_width(type_):
    """Largest total width of a struct/header, field by field (a varbit at its maximum)."""
    if isinstance(type_, VarbitType):
        return type_.max_width
    if isinstance(type_, (StructType, HeaderType)):
        return sum(max_width(f.type) for f in type_.fields)
    return flatten_width(type_)
