"""The client's counter part: indexed counters and the direct counters of table entries."""
from p4.v1 import p4runtime_pb2

from testbed.p4runtime.client.errors import P4RuntimeClientError


class CountersMixin:
    """Reading and setting counter cells and direct counters."""

    def read_counter(self, name, index=None):
        """(packets, bytes) of one cell, or {index: (packets, bytes)} of all cells."""
        info = self._lookup("counters", name)
        entity = p4runtime_pb2.Entity()
        entity.counter_entry.counter_id = info.preamble.id
        if index is not None:
            entity.counter_entry.index.index = index
        cells = {e.counter_entry.index.index: (e.counter_entry.data.packet_count,
                                               e.counter_entry.data.byte_count)
                 for e in self.read([entity])}
        return cells[index] if index is not None else cells

    def write_counter(self, name, index, packets=0, nbytes=0):
        """Set one counter cell (``index`` None: every cell)."""
        info = self._lookup("counters", name)

        def fill(entity):
            entity.counter_entry.counter_id = info.preamble.id
            if index is not None:
                entity.counter_entry.index.index = index
            entity.counter_entry.data.packet_count = packets
            entity.counter_entry.data.byte_count = nbytes
        self._write_one("MODIFY", fill)

    def read_direct_counter(self, table, match=None, priority=None):
        """(packets, bytes) of one entry, or [(TableEntryView, (packets, bytes))] of all entries."""
        entity = p4runtime_pb2.Entity()
        if match is not None:
            entity.direct_counter_entry.table_entry.CopyFrom(self.table_entry_message(table, match,
                                                                                      priority=priority))
        else:
            entity.direct_counter_entry.table_entry.table_id = self._lookup("tables", table).preamble.id
        results = [(self._view(e.direct_counter_entry.table_entry),
                    (e.direct_counter_entry.data.packet_count, e.direct_counter_entry.data.byte_count))
                   for e in self.read([entity])]
        if match is not None:
            if not results:
                raise P4RuntimeClientError("NOT_FOUND", f"table {table}: no entry with this match")
            return results[0][1]
        return results

    def write_direct_counter(self, table, match, packets=0, nbytes=0, priority=None):
        """Set the direct counter of one entry."""
        entry = self.table_entry_message(table, match, priority=priority)

        def fill(entity):
            entity.direct_counter_entry.table_entry.CopyFrom(entry)
            entity.direct_counter_entry.data.packet_count = packets
            entity.direct_counter_entry.data.byte_count = nbytes
        self._write_one("MODIFY", fill)
