"""The client's register part: reading and writing register cells."""
from p4.v1 import p4runtime_pb2

from testbed.p4runtime.convert import decode, encode
from testbed.p4runtime.values import parse_value


class RegistersMixin:
    """Register cells by register name and index."""

    def read_register(self, name, index=None):
        """The value of one cell, or the list of all cells."""
        info = self._lookup("registers", name)
        entity = p4runtime_pb2.Entity()
        entity.register_entry.register_id = info.preamble.id
        if index is not None:
            entity.register_entry.index.index = index
        width = info.type_spec.bitstring.bit.bitwidth
        cells = {e.register_entry.index.index: decode(e.register_entry.data.bitstring, width, name)
                 for e in self.read([entity])}
        return cells[index] if index is not None else [cells[i] for i in sorted(cells)]

    def write_register(self, name, index, value):
        """Set one register cell (``index`` None: every cell)."""
        info = self._lookup("registers", name)
        width = info.type_spec.bitstring.bit.bitwidth
        number = parse_value(value, width, f"{name}[{index}]")

        def fill(entity):
            entity.register_entry.register_id = info.preamble.id
            if index is not None:
                entity.register_entry.index.index = index
            entity.register_entry.data.bitstring = encode(number)
        self._write_one("MODIFY", fill)
