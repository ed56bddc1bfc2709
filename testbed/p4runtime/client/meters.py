"""The client's meter part: indexed meters and the direct meters of table entries."""
from p4.v1 import p4runtime_pb2


class MetersMixin:
    """Configuring, resetting and reading meter cells and direct meters."""

    def set_meter(self, name, index, cir, cburst, pir, pburst):
        """Configure a meter cell (rates in units/s, bursts in units)."""
        info = self._lookup("meters", name)

        def fill(entity):
            entity.meter_entry.meter_id = info.preamble.id
            if index is not None:
                entity.meter_entry.index.index = index
            entity.meter_entry.config.cir, entity.meter_entry.config.cburst = cir, cburst
            entity.meter_entry.config.pir, entity.meter_entry.config.pburst = pir, pburst
        self._write_one("MODIFY", fill)

    def reset_meter(self, name, index):
        """Unconfigure a meter cell (every packet GREEN)."""
        info = self._lookup("meters", name)

        def fill(entity):
            entity.meter_entry.meter_id = info.preamble.id
            if index is not None:
                entity.meter_entry.index.index = index
        self._write_one("MODIFY", fill)

    def read_meter(self, name, index):
        """(cir, cburst, pir, pburst) of a meter cell, or None when unconfigured."""
        info = self._lookup("meters", name)
        entity = p4runtime_pb2.Entity()
        entity.meter_entry.meter_id = info.preamble.id
        entity.meter_entry.index.index = index
        for e in self.read([entity]):
            if e.meter_entry.HasField("config"):
                c = e.meter_entry.config
                return c.cir, c.cburst, c.pir, c.pburst
        return None

    def set_direct_meter(self, table, match, cir, cburst, pir, pburst, priority=None):
        """Configure the direct meter of one entry."""
        entry = self.table_entry_message(table, match, priority=priority)

        def fill(entity):
            entity.direct_meter_entry.table_entry.CopyFrom(entry)
            config = entity.direct_meter_entry.config
            config.cir, config.cburst, config.pir, config.pburst = cir, cburst, pir, pburst
        self._write_one("MODIFY", fill)

    def read_direct_meter(self, table, match, priority=None):
        """(cir, cburst, pir, pburst) of an entry's direct meter, or None when unconfigured."""
        entity = p4runtime_pb2.Entity()
        entity.direct_meter_entry.table_entry.CopyFrom(self.table_entry_message(table, match,
                                                                                priority=priority))
        for e in self.read([entity]):
            if e.direct_meter_entry.HasField("config"):
                c = e.direct_meter_entry.config
                return c.cir, c.cburst, c.pir, c.pburst
        return None
