"""Registers, counters, direct counters, meters and direct meters.

What we follow and where it is documented:

* Registers (v1model ``register``): ``values[i]`` is read and written by the
  data plane directly; the control plane goes through :meth:`RegisterState.read`
  / :meth:`RegisterState.write`, which check the index (INVALID_ARGUMENT when negative, OUT_OF_RANGE past
  the end) and the width (INVALID_ARGUMENT), as P4Runtime's RegisterEntry requires.
* Counters keep packets and bytes whatever their unit (P4Runtime reports the
  part the unit names).  Direct counters live on the table entry and are
  counted by the data plane on a hit only, as BMv2 does.
* Meters: BMv2 ``simple_switch`` meters are two-rate three-colour markers,
  colour-blind (RFC 2698; BMv2 ``include/bm/bm_sim/meters.h`` says so and
  ``docs/simple_switch.md`` / the v1model ``meter`` extern document the colours
  GREEN=0, YELLOW=1, RED=2).  Per RFC 2698 section 3: both buckets start full
  (Tp = PBS, Tc = CBS); they fill at PIR and CIR up to their burst size; a
  packet of size B is RED if Tp < B, else YELLOW if Tc < B (and Tp -= B), else
  GREEN (Tp -= B, Tc -= B).  Like BMv2 we refill in whole tokens computed from
  a fixed time origin with microsecond resolution:
  ``tokens_since_origin = floor(t_us * rate / 1e6)`` with rates in units per
  second (P4Runtime's MeterConfig units; BMv2's own unit is per microsecond),
  so the arithmetic is exact integer arithmetic.  The time origin is 0 of the
  clock the caller passes (``now_ns``).  PIR < CIR is rejected
  (BMv2 ``INVALID_INFO_RATE_VALUE``; INVALID_ARGUMENT here).  An unconfigured
  meter returns GREEN, as BMv2 does.  A PACKETS meter counts 1 per packet
  whatever size is passed; a BYTES meter counts the size passed.
"""
import threading
from dataclasses import dataclass

from testbed.p4.state.errors import StateError, check_uint
from testbed.p4.state.watch import notifies

GREEN, YELLOW, RED = 0, 1, 2


def _check_index(index, size, where):
    """P4Runtime's codes for an index (CounterEntry, MeterEntry, RegisterEntry): INVALID_ARGUMENT for a
    negative one (or no integer), OUT_OF_RANGE for one past the end."""
    if not isinstance(index, int) or isinstance(index, bool) or index < 0:
        raise StateError("INVALID_ARGUMENT", f"{where}: index {index!r} is not a non-negative integer")
    if index >= size:
        raise StateError("OUT_OF_RANGE", f"{where}: index {index} is not in 0..{size - 1}")


def _check_count(value, what, where):
    if not isinstance(value, int) or isinstance(value, bool) or value < 0 or value >> 64:
        raise StateError("INVALID_ARGUMENT",
                         f"{where}: {what} {value!r} must be an unsigned 64-bit integer")


def _check_counts(packets, nbytes, where):
    """Check a packet count and a byte count (unsigned 64-bit)."""
    _check_count(packets, "packet count", where)
    _check_count(nbytes, "byte count", where)


class RegisterState:
    """One register array.

    Args:
        info: the :class:`testbed.p4.program.Register`.

    Attributes:
        info: the register description.
        values: list of ``info.size`` ints; the data plane reads/writes it directly.
    """

    def __init__(self, info):
        self.info = info
        self._where = f"register {info.name}"
        self.values = [0] * info.size

    def read(self, index):
        """The value at ``index``.

        Raises:
            StateError: INVALID_ARGUMENT for a negative index, OUT_OF_RANGE past the end.
        """
        _check_index(index, self.info.size, self._where)
        return self.values[index]

    def write(self, index, value):
        """Set the value at ``index``.

        Raises:
            StateError: OUT_OF_RANGE past the end, INVALID_ARGUMENT for a negative index or a
                value wider than the register.
        """
        _check_index(index, self.info.size, self._where)
        check_uint(value, self.info.bitwidth, f"{self._where}[{index}]")
        self.values[index] = value

    def reset(self):
        """Set every cell to 0."""
        self.values[:] = [0] * self.info.size


class CounterState:
    """One indexed counter array.

    Args:
        info: the :class:`testbed.p4.program.Counter`.

    Attributes:
        packets: list of packet counts.
        bytes: list of byte counts.
    """

    def __init__(self, info):
        self.info = info
        self._where = f"counter {info.name}"
        self.packets = [0] * info.size
        self.bytes = [0] * info.size

    def count(self, index, nbytes, packets=1):
        """Count one packet (or ``packets`` packets together) of ``nbytes`` at ``index`` (data plane).

        An index past the end is ignored (BMv2 does not count it either).
        """
        if index < self.info.size:
            self.packets[index] += packets
            self.bytes[index] += nbytes

    def read(self, index):
        """``(packets, bytes)`` at ``index``.

        Raises:
            StateError: INVALID_ARGUMENT for a negative index, OUT_OF_RANGE past the end.
        """
        _check_index(index, self.info.size, self._where)
        return self.packets[index], self.bytes[index]

    def write(self, index, packets, nbytes):
        """Set the counts at ``index``.

        Raises:
            StateError: OUT_OF_RANGE past the end, INVALID_ARGUMENT for a negative index or counts.
        """
        _check_index(index, self.info.size, self._where)
        _check_counts(packets, nbytes, self._where)
        self.packets[index] = packets
        self.bytes[index] = nbytes

    def reset(self):
        """Zero every cell."""
        self.packets[:] = [0] * self.info.size
        self.bytes[:] = [0] * self.info.size


class _DirectResource:
    """A resource with one cell per entry of its table (direct counters and meters).

    Args:
        info: the program's description of the resource.
        table: the :class:`testbed.p4.state.tables.TableState` it is attached to.
    """

    def __init__(self, info, table):
        self.info = info
        self.table = table
        self.watchers = []  # called with (self, entry or None for all) after a control-plane write


class DirectCounterState(_DirectResource):
    """A direct counter: one (packets, bytes) pair per entry of its table.

    Args:
        info: the :class:`testbed.p4.program.DirectCounter`.
        table: the :class:`testbed.p4.state.tables.TableState` it is attached to.
    """

    @staticmethod
    def count(entry, nbytes):
        """Count a hit of ``entry`` (the stored entry a lookup returned)."""
        entry.counter_packets += 1
        entry.counter_bytes += nbytes

    def read(self, entry):
        """``(packets, bytes)`` of an entry of the table.

        Raises:
            StateError: NOT_FOUND when the table has no such entry.
        """
        stored = self.table.stored_entry(entry)
        return stored.counter_packets, stored.counter_bytes

    def write(self, entry, packets, nbytes):
        """Set the counts of an entry.

        Raises:
            StateError: NOT_FOUND, INVALID_ARGUMENT for negative counts.
        """
        stored = self.table.stored_entry(entry)
        _check_counts(packets, nbytes, f"direct counter {self.info.name}")
        stored.counter_packets = packets
        stored.counter_bytes = nbytes
        for watcher in self.watchers:
            watcher(self, stored)

    def reset(self):
        """Zero the counts of every entry."""
        for entry in self.table.entries():
            entry.counter_packets = 0
            entry.counter_bytes = 0
        for watcher in self.watchers:
            watcher(self, None)


@dataclass(frozen=True)
class MeterConfig:
    """Rates in units (bytes or packets) per second, bursts in units."""

    cir: int
    cburst: int
    pir: int
    pburst: int


def _check_meter_config(cir, cburst, pir, pburst, where):
    for name, value in (("cir", cir), ("cburst", cburst), ("pir", pir), ("pburst", pburst)):
        _check_count(value, name, where)
    if pir < cir:
        raise StateError("INVALID_ARGUMENT",
                         f"{where}: pir {pir} is lower than cir {cir}")
    return MeterConfig(cir, cburst, pir, pburst)


class TrTcmMeter:
    """One two-rate three-colour marker cell (RFC 2698, colour-blind).

    Args:
        config: its :class:`MeterConfig`.
        packets: True for a PACKETS meter (each packet counts 1).
    """

    __slots__ = ("config", "packets", "_lock", "_p_tokens", "_p_last", "_c_tokens", "_c_last")

    def __init__(self, config, packets):
        self.config = config
        self.packets = packets
        self._lock = threading.Lock()
        self._p_tokens = config.pburst
        self._c_tokens = config.cburst
        self._p_last = 0  # tokens credited since the time origin
        self._c_last = 0

    def execute(self, size, now_ns):
        """Colour one packet.

        Args:
            size: packet size in bytes (ignored for PACKETS meters).
            now_ns: current time in nanoseconds (any fixed origin).

        Returns:
            int: GREEN (0), YELLOW (1) or RED (2).
        """
        need = 1 if self.packets else size
        config = self.config
        micros = now_ns // 1000
        with self._lock:
            since = micros * config.pir // 1000000
            if since > self._p_last:
                self._p_tokens = min(self._p_tokens + since - self._p_last, config.pburst)
                self._p_last = since
            if self._p_tokens < need:
                return RED
            self._p_tokens -= need
            since = micros * config.cir // 1000000
            if since > self._c_last:
                self._c_tokens = min(self._c_tokens + since - self._c_last, config.cburst)
                self._c_last = since
            if self._c_tokens < need:
                return YELLOW
            self._c_tokens -= need
            return GREEN

    def tokens(self):
        """``(peak_tokens, committed_tokens)`` now held (for tests and debugging)."""
        return self._p_tokens, self._c_tokens


class MeterState:
    """An indexed meter array.

    Args:
        info: the :class:`testbed.p4.program.Meter`.
    """

    def __init__(self, info):
        self.info = info
        self._where = f"meter {info.name}"
        self._packets = info.unit == "PACKETS"
        self._cells = [None] * info.size
        self.watchers = []  # called after each write (testbed.p4.state.watch)

    def cell(self, index):
        """The :class:`TrTcmMeter` at ``index`` (None: unconfigured)."""
        return self._cells[index]

    @notifies
    def set_config(self, index, cir, cburst, pir, pburst):
        """Configure the cell at ``index``; its buckets start full.

        Raises:
            StateError: OUT_OF_RANGE past the end, INVALID_ARGUMENT (negative index or values, pir < cir).
        """
        _check_index(index, self.info.size, self._where)
        config = _check_meter_config(cir, cburst, pir, pburst, f"{self._where}[{index}]")
        self._cells[index] = TrTcmMeter(config, self._packets)

    def get_config(self, index):
        """The :class:`MeterConfig` of a cell, or None when unconfigured.

        Raises:
            StateError: INVALID_ARGUMENT for a negative index, OUT_OF_RANGE past the end.
        """
        _check_index(index, self.info.size, self._where)
        cell = self._cells[index]
        return None if cell is None else cell.config

    @notifies
    def reset_config(self, index):
        """Unconfigure a cell (it then marks every packet GREEN).

        Raises:
            StateError: INVALID_ARGUMENT for a negative index, OUT_OF_RANGE past the end.
        """
        _check_index(index, self.info.size, self._where)
        self._cells[index] = None

    def execute(self, index, nbytes, now_ns):
        """Colour a packet at ``index`` (data plane): 0 GREEN, 1 YELLOW, 2 RED.

        An unconfigured cell or an index past the end gives GREEN.
        """
        if index >= self.info.size:
            return GREEN
        cell = self._cells[index]
        if cell is None:
            return GREEN
        return cell.execute(nbytes, now_ns)

    @notifies
    def reset(self):
        """Unconfigure every cell."""
        self._cells = [None] * self.info.size


class DirectMeterState(_DirectResource):
    """A direct meter: one meter cell per entry of its table.

    Args:
        info: the :class:`testbed.p4.program.DirectMeter`.
        table: the :class:`testbed.p4.state.tables.TableState` it is attached to.
    """

    def __init__(self, info, table):
        super().__init__(info, table)
        self._packets = info.unit == "PACKETS"
        self._where = f"direct meter {info.name}"

    def set_config(self, entry, cir, cburst, pir, pburst):
        """Configure the meter of an entry; its buckets start full.

        Raises:
            StateError: NOT_FOUND (no such entry), INVALID_ARGUMENT.
        """
        stored = self.table.stored_entry(entry)
        config = _check_meter_config(cir, cburst, pir, pburst, self._where)
        stored.meter = TrTcmMeter(config, self._packets)
        self._written(stored)

    def get_config(self, entry):
        """The entry's :class:`MeterConfig`, or None when unconfigured.

        Raises:
            StateError: NOT_FOUND.
        """
        stored = self.table.stored_entry(entry)
        return None if stored.meter is None else stored.meter.config

    def reset_config(self, entry):
        """Unconfigure the meter of an entry.

        Raises:
            StateError: NOT_FOUND.
        """
        stored = self.table.stored_entry(entry)
        stored.meter = None
        self._written(stored)

    @staticmethod
    def execute(entry, nbytes, now_ns):
        """Colour a packet that hit ``entry`` (data plane): 0 GREEN, 1 YELLOW, 2 RED."""
        cell = entry.meter
        if cell is None:
            return GREEN
        return cell.execute(nbytes, now_ns)

    def reset(self):
        """Unconfigure the meters of every entry."""
        for entry in self.table.entries():
            entry.meter = None
        self._written(None)

    def _written(self, entry):
        for watcher in self.watchers:
            watcher(self, entry)
