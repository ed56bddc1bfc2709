"""The native copy of a switch's state, kept in step with its :class:`~testbed.p4.state.SwitchState`.

The P4Runtime server, controllers and tests keep writing the Python state objects as before
(one write path): each table and action profile tells its watchers (``watchers``, see
:mod:`testbed.p4.state.watch`) and the changed ones are copied into native memory before
the next packet (:meth:`NativeState.sync`).  A table's load arrays are kept here in load order and
only the written entries are encoded (the table's watchers name each write and its entry); inserts
modifies and deletes then change the native lookup structures in place (``tb_table_append``,
``tb_table_update``, ``tb_table_remove``), while a reset, or a table with per-entry resources (direct
counters, meters, idle timeout), is loaded whole from the arrays (``tb_table_load``).  So a write
to a large table costs work for the written entries only.  Registers and counters live in native memory
only: their Python objects' ``values`` / ``packets`` / ``bytes`` become :class:`NativeArray`
views of it, so reads and writes through the server reach the cells the pipeline updates.
"""
import bisect
import contextlib
import struct
import threading

from testbed.errors import NativeBackendError

#: the arrays tb_table_load takes, one value per entry (prio, kind, action, ref, is_range) or several
#: (vals and masks: one per key, args: one per action parameter), as struct formats
_ROW_FORMATS = ("i", "i", "i", "Q", "i", "Q", "Q", "Q")
#: table writes whose entry keeps its place in load order or is added at its end (others reload the table)
_PATCHED_WRITES = ("insert", "modify", "delete")


class _LoadedTable:
    """A table as loaded into native memory: its entries in load order and tb_table_load's arrays.

    Args:
        nkeys: the table's match keys; nargs: its action arguments (fix each array's row size).

    Attributes:
        in_native: how many of the entries native memory holds in this order, the first ones (the
            rest are added by tb_table_append); None: the table must be loaded whole.
        modified: positions below ``in_native`` whose action changed since (tb_table_update).
        removed: positions native memory holds that were deleted since, highest first (tb_table_remove,
            before the updates and appends: the positions above each one move down).
    """

    def __init__(self, nkeys, nargs):
        self.entries = []  # in load order; None where an entry was deleted (until compact)
        # id(entry) -> the number it was added as; its position is that less the removed numbers below it
        # (so that a delete moves the entries after it without renumbering them one by one)
        self.number = {}
        self.gone = []  # the numbers of the entries removed since the table was built, sorted
        self.sizes = tuple(struct.calcsize(f"={count}{f}") for f, count in
                           zip(_ROW_FORMATS, (1, 1, 1, 1, 1, nkeys, nkeys, nargs)))
        self.columns = [bytearray() for _ in _ROW_FORMATS]
        self.deleted = []  # (position, number) of the entries deleted since the last compact
        self.in_native = None
        self.modified = set()
        self.removed = []

    def position(self, entry):
        """``entry``'s position in load order, or None when it is not loaded."""
        number = self.number.get(id(entry))
        if number is None:
            return None
        at = number - bisect.bisect_left(self.gone, number)
        return at if at < len(self.entries) and self.entries[at] is entry else None

    def put(self, entry, row, in_order=False):
        """Write ``entry``'s row in its place, or add it at the end; False when it cannot be added there
        (inserted before the last loaded entry: the table must be reloaded).  ``in_order``: the caller
        adds the entries in insertion order."""
        at = self.position(entry)
        if at is not None:
            for column, size, values in zip(self.columns, self.sizes, row):
                column[at * size:(at + 1) * size] = values
            self.modified.add(at)
            return True
        last = None if in_order else next((e for e in reversed(self.entries) if e is not None), None)
        if last is not None and last._seq > entry._seq:
            return False  # load order must be insertion order (ties between equal priorities)
        self.number[id(entry)] = len(self.entries) + len(self.gone)  # above every removed number
        self.entries.append(entry)
        for column, values in zip(self.columns, row):
            column += values
        return True

    def delete(self, entry):
        """Mark ``entry`` deleted (nothing when it is not loaded); :meth:`compact` removes it."""
        at = self.position(entry)
        if at is not None:
            self.entries[at] = None
            self.deleted.append((at, self.number.pop(id(entry))))

    def rows(self, start, end=None):
        """The arrays' rows ``start`` to ``end`` (default: the last), as buffers tb_table_load's pointers take."""
        end = len(self.entries) if end is None else end
        return [memoryview(column)[start * size:end * size] for column, size in zip(self.columns, self.sizes)]

    def compact(self):
        """Remove the deleted entries' rows; the remaining entries keep their order.  The deleted rows
        native memory holds go to :attr:`removed`, and the positions above them move down."""
        if not self.deleted:
            return
        gone = sorted(at for at, _number in self.deleted)
        if self.in_native is not None and not self.removed:
            self.removed = [at for at in reversed(gone) if at < self.in_native]
            self.modified = {at - bisect.bisect_left(gone, at) for at in self.modified
                             if self.entries[at] is not None}
            self.in_native -= len(self.removed)
        else:
            self.in_native, self.removed = None, []  # removals not yet applied: the table loads whole
        for at in reversed(gone):
            del self.entries[at]
            for column, size in zip(self.columns, self.sizes):
                del column[at * size:(at + 1) * size]
        for _at, number in self.deleted:
            bisect.insort(self.gone, number)
        self.deleted = []
        if len(self.gone) > len(self.entries) + 1024:  # now and then numbered anew, so that gone stays short
            self.number = {id(entry): at for at, entry in enumerate(self.entries)}
            self.gone = []


class NativeArray:
    """A fixed-size list of unsigned 64-bit ints in native memory (a cffi ``uint64_t *``).

    Supports what the state objects do with their lists: ``len``, indexing, slices (read
    and whole-slice assignment), iteration and comparison with a list.
    """

    __slots__ = ("_cells", "_n", "_owner")

    def __init__(self, cells, n, owner):
        self._cells = cells
        self._n = n
        self._owner = owner  # keeps the native state alive

    def __len__(self):
        return self._n

    def _index(self, index):
        if index < 0:
            index += self._n
        if not 0 <= index < self._n:
            raise IndexError("native array index out of range")
        return index

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self._cells[i] for i in range(*index.indices(self._n))]
        return self._cells[self._index(index)]

    def __setitem__(self, index, value):
        if isinstance(index, slice):
            positions = range(*index.indices(self._n))
            values = list(value)
            if len(values) != len(positions):
                raise ValueError("a native array cannot change its size")
            for i, v in zip(positions, values):
                self._cells[i] = v
            return
        self._cells[self._index(index)] = value

    def __iter__(self):
        return (self._cells[i] for i in range(self._n))

    def __eq__(self, other):
        return list(self) == list(other)

    def __repr__(self):
        return f"NativeArray({list(self)!r})"


class NativeState:
    """Native memory of one switch's tables, selectors, registers and counters.

    Args:
        library: the :class:`~testbed.p4.native.build.NativeLibrary` of the program.
        state: the switch's SwitchState (its registers and counters are moved into native memory).

    Raises:
        NativeBackendError: out of native memory, or a value the native state cannot hold.
    """

    def __init__(self, library, state):
        self.library = library
        self.ffi = ffi = library.ffi
        self.lib = lib = library.lib
        self.state = state
        layout = library.layout
        pointer = lib.tb_pipeline_new()
        if pointer == ffi.NULL:
            raise NativeBackendError("native backend: out of memory for the switch state")
        self.pl = ffi.gc(pointer, lib.tb_pipeline_free)
        self.actions = layout["actions"]
        self._dirty_tables = set()
        self._loaded = {}  # table name -> the entries in native load order (direct counters)
        self._tables_loaded = {}  # table name -> its _LoadedTable
        self._journal = {}  # table name -> [(write, entry)] since the last sync; None: reload it whole
        self._meter_entries = {}  # table name -> the direct meter cells (TrTcmMeter or None) in load order
        self._written = {}  # table name -> ids of entries whose direct counts the control plane set (None: all)
        self._dirty_profiles = set()
        self._lock = threading.Lock()
        self._native_lock = threading.RLock()  # tables being replaced in native memory
        self._sync_lock = threading.Lock()  # one sync at a time: what it read is what it copies
        self.tables = {name: (index, state.tables[name]) for index, name in enumerate(layout["tables"])}
        self.profiles = {name: (index, state.action_profiles[name]) for index, name in enumerate(layout["profiles"])}
        for index, name in enumerate(layout["registers"]):
            register = state.registers[name]
            cells = NativeArray(lib.tb_register_cells(self.pl, index), register.info.size, self)
            cells[:] = list(register.values)
            register.values = cells
        for index, name in enumerate(layout["counters"]):
            counter = state.counters[name]
            packets = NativeArray(lib.tb_counter_cells(self.pl, index, 0), counter.info.size, self)
            nbytes = NativeArray(lib.tb_counter_cells(self.pl, index, 1), counter.info.size, self)
            packets[:] = list(counter.packets)
            nbytes[:] = list(counter.bytes)
            counter.packets, counter.bytes = packets, nbytes
        self.meters = {name: (index, state.meters[name]) for index, name in enumerate(layout["meters"])}
        self._meter_cells = {name: [None] * meter.info.size for name, (_, meter) in self.meters.items()}
        self._dirty_meters = set(self.meters)
        for _, meter in self.meters.values():
            meter.watchers.append(self._meter_changed)
        for name, (_, table) in self.tables.items():
            table.watchers.append(self._table_changed)
            if table.direct_counter is not None or table.info.idle_timeout:
                table.refreshers.append(self._refresh_counts)
            if table.direct_counter is not None:
                table.direct_counter.watchers.append(self._counts_written)
            if table.direct_meter is not None:
                table.direct_meter.watchers.append(self._direct_meters_written)
            self._dirty_tables.add(name)
        for name, (_, profile) in self.profiles.items():
            profile.watchers.append(self._profile_changed)
            self._dirty_profiles.add(name)
        self.sync()

    def close(self):
        """Stop following the Python state."""
        for _, table in self.tables.values():
            if self._table_changed in table.watchers:
                table.watchers.remove(self._table_changed)
            if self._refresh_counts in table.refreshers:
                table.refreshers.remove(self._refresh_counts)
            if table.direct_counter is not None and self._counts_written in table.direct_counter.watchers:
                table.direct_counter.watchers.remove(self._counts_written)
            if table.direct_meter is not None and self._direct_meters_written in table.direct_meter.watchers:
                table.direct_meter.watchers.remove(self._direct_meters_written)
        for _, meter in self.meters.values():
            if self._meter_changed in meter.watchers:
                meter.watchers.remove(self._meter_changed)
        for _, profile in self.profiles.values():
            if self._profile_changed in profile.watchers:
                profile.watchers.remove(self._profile_changed)

    def _table_changed(self, table, write, entry):
        with self._lock:
            name = table.info.name
            self._dirty_tables.add(name)
            journal = self._journal.setdefault(name, [])
            if write in _PATCHED_WRITES and journal is not None:
                journal.append((write, entry))
            elif write not in ("set_default", "reset_default"):
                self._journal[name] = None

    def _profile_changed(self, profile, *_write):
        with self._lock:
            self._dirty_profiles.add(profile.info.name)

    def _meter_changed(self, meter, *_write):
        with self._lock:
            self._dirty_meters.add(meter.info.name)

    def _direct_meters_written(self, meter, entry):
        with self._lock:
            self._dirty_tables.add(meter.table.info.name)

    def _counts_written(self, counter, entry):
        with self._lock:
            name = counter.table.info.name
            written = self._written.setdefault(name, set())
            if entry is None or written is None:
                self._written[name] = None
            else:
                written.add(id(entry))
            self._dirty_tables.add(name)

    def _refresh_counts(self, table):
        """Copy the direct counts and hit times the pipeline made into the Python entries (before they are read)."""
        name = table.info.name
        loaded = self._loaded.get(name)
        if not loaded:
            return
        ffi = self.ffi
        n = len(loaded)
        packets, nbytes = ffi.new("uint64_t[]", n), ffi.new("uint64_t[]", n)
        with self._native_lock:
            self.lib.tb_table_counts(self.pl, self.tables[name][0], n, packets, nbytes, 0)
        written = self._written.get(name, set())
        if table.info.idle_timeout:
            hits = ffi.new("uint64_t[]", n)
            with self._native_lock:
                self.lib.tb_table_hits(self.pl, self.tables[name][0], n, hits)
            for index, entry in enumerate(loaded):
                if hits[index]:
                    entry.last_hit_ns = hits[index] - 1
        if table.direct_counter is None:
            return
        for index, entry in enumerate(loaded):
            if written is None or id(entry) in written:
                continue
            entry.counter_packets = packets[index]
            entry.counter_bytes = nbytes[index]

    @property
    def dirty(self):
        """True when a table or profile changed since the last :meth:`sync`."""
        return bool(self._dirty_tables or self._dirty_profiles or self._dirty_meters)

    def sync(self, hold=None):
        """Copy what changed (tables, profiles, meter configurations) into native memory.

        The changed tables and profiles are read first, under their own locks; the copy is then made
        holding ``hold`` (a context manager, such as the packet loop's lock; None: nothing) and the
        pipeline lock.  So what forwards packets never waits for a Python writer, only for the copy.
        """
        with self._sync_lock:
            with self._lock:
                tables, self._dirty_tables = self._dirty_tables, set()
                profiles, self._dirty_profiles = self._dirty_profiles, set()
                meters, self._dirty_meters = self._dirty_meters, set()
                journals, self._journal = self._journal, {}
            loads = []
            for name in tables:
                index, table = self.tables[name]
                with table._lock:
                    loads.append((index, table, self._loaded_rows(index, table, journals.get(name, []))))
            profile_loads = []
            for name in profiles:
                index, profile = self.profiles[name]
                with profile.lock:
                    profile_loads.append((profile, self._profile_arguments(index, profile)))
            with hold() if hold is not None else contextlib.nullcontext():
                self.lib.tb_pipeline_lock(self.pl)
                try:
                    self._copy(meters, profile_loads, loads)
                finally:
                    self.lib.tb_pipeline_unlock(self.pl)

    def _copy(self, meters, profile_loads, loads):
        """The copy into native memory of :meth:`sync` (under the pipeline lock)."""
        for name in meters:
            index, meter = self.meters[name]
            loaded = self._meter_cells[name]
            for cell_index in range(meter.info.size):
                cell = meter.cell(cell_index)
                if cell is loaded[cell_index]:
                    continue  # unchanged: the native cell keeps its buckets
                loaded[cell_index] = cell
                if cell is None:
                    self.lib.tb_meter_set(self.pl, index, cell_index, 0, 0, 0, 0, 0)
                else:
                    config = cell.config
                    self.lib.tb_meter_set(self.pl, index, cell_index, 1, config.cir, config.cburst, config.pir,
                                          config.pburst)
        for profile, arguments in profile_loads:
            status = self.lib.tb_profile_load(self.pl, *arguments)
            if status:
                raise NativeBackendError(f"native backend: action profile {profile.info.name}: loading into native "
                                         f"memory failed ({status})")
        for index, table, loaded in loads:
            with self._native_lock:
                self._refresh_counts(table)
                with self._lock:
                    self._written.pop(table.info.name, None)
                self._load_table(index, table, loaded)

    def _kept_direct_meters(self, index, table):
        """{id(meter cell): (cell, its 9 native values)} of the table's entries as loaded now."""
        previous = self._meter_entries.get(table.info.name, [])
        kept = {}
        if previous:
            cells = self.ffi.new("uint64_t[]", 9 * len(previous))
            self.lib.tb_table_meters(self.pl, index, len(previous), cells, 0)
            for position, cell in enumerate(previous):
                if cell is not None:
                    kept[id(cell)] = (cell, list(cells[9 * position:9 * position + 9]))
        return kept

    def _load_direct_meters(self, index, table, entries, kept):
        """Give the entries their meter cells: kept buckets for a cell they had, full buckets for a new one."""
        ffi, lib = self.ffi, self.lib
        name = table.info.name
        values = []
        for entry in entries:
            cell = entry.meter
            if cell is None:
                values += [0] * 9
            elif id(cell) in kept and kept[id(cell)][0] is cell:
                values += kept[id(cell)][1]
            else:
                config = cell.config
                values += [1, config.cir, config.cburst, config.pir, config.pburst, config.pburst, config.cburst, 0, 0]
        lib.tb_table_meters(self.pl, index, len(entries), ffi.new("uint64_t[]", values or [0]), 1)
        self._meter_entries[name] = [entry.meter for entry in entries]

    def _action(self, name):
        return self.actions.get(name, -1)

    @staticmethod
    def _args(args, nargs, where):
        values = [int(a) for a in args]
        if any(v < 0 or v >> 64 for v in values):
            raise NativeBackendError(f"native backend: {where}: an action argument wider than 64 bits")
        return values + [0] * (nargs - len(values))

    def _profile_arguments(self, index, profile):
        """tb_profile_load's arguments after the pipeline for ``profile`` as it is now."""
        ffi = self.ffi
        members = sorted(profile.members(), key=lambda m: m.member_id)
        groups = sorted(profile.groups(), key=lambda g: g.group_id)
        nargs = max((len(m.args) for m in members), default=0)
        where = f"action profile {profile.info.name}"
        member_args = []
        for member in members:
            member_args += self._args(member.args, nargs, where)
        selection = [mid for group in groups for mid in group.selection]
        return (index, len(members), ffi.new("uint64_t[]", [m.member_id for m in members] or [0]),
                ffi.new("int32_t[]", [self._action(m.action) for m in members] or [0]),
                ffi.new("uint64_t[]", member_args or [0]), nargs,
                len(groups), ffi.new("uint64_t[]", [g.group_id for g in groups] or [0]),
                ffi.new("uint32_t[]", [len(g.selection) for g in groups] or [0]),
                ffi.new("uint64_t[]", selection or [0]))

    def _row(self, table, entry, nargs, lpm_pos, where):
        """``entry``'s values in tb_table_load's arrays (:data:`_ROW_FORMATS` order), each packed."""
        if table._mode == "lpm":
            prio = entry.matches[lpm_pos].prefix_len
        elif table._mode == "generic":
            prio = entry._prio
        else:
            prio = 0
        vals, masks = [], []
        entry_masks = table._masks_of(entry)
        if entry_masks is None:
            is_range = 1
            for low, high, mask in table._range_checks_of(entry):
                vals.append(low)
                masks.append(high if mask is None else mask)
        else:
            is_range = 0
            for match, mask in zip(entry.matches, entry_masks):
                vals.append(match.value & mask)
                masks.append(mask)
        if any(v >> 64 for v in vals + masks):
            raise NativeBackendError(f"native backend: {where}: a key wider than 64 bits")
        if entry.action is not None:
            kind, action, ref = 0, self._action(entry.action.action), 0
            args = self._args(entry.action.args, nargs, where)
        else:
            kind = 1 if entry.member_id is not None else 2
            action, ref = -1, entry.member_id if entry.member_id is not None else entry.group_id
            args = [0] * nargs
        columns = ([prio], [kind], [action], [ref], [is_range], vals, masks, args)
        return tuple(struct.pack(f"={len(values)}{f}", *values) for f, values in zip(_ROW_FORMATS, columns))

    def _loaded_rows(self, index, table, journal):
        """The table's :class:`_LoadedTable` with ``journal``'s writes applied (None: built anew)."""
        name = table.info.name
        nargs = self.library.layout["table_nargs"][index]
        lpm_pos = table._kinds.index("lpm") if table._mode == "lpm" else None
        where = f"table {name}"
        loaded = self._tables_loaded.pop(name, None)  # back once complete: an error leaves none (reload)
        if loaded is not None and journal is not None:
            for write, entry in journal:
                if write == "delete":
                    loaded.delete(entry)
                elif not loaded.put(entry, self._row(table, entry, nargs, lpm_pos, where)):
                    break
            else:
                loaded.compact()
                if len(loaded.entries) == len(table._entries):
                    self._tables_loaded[name] = loaded
                    return loaded
        # the first load, a reset, or writes seen out of order (several writers): anew, in the table's order
        loaded = _LoadedTable(len(table.info.match_keys), nargs)
        for entry in table._entries.values():
            loaded.put(entry, self._row(table, entry, nargs, lpm_pos, where), in_order=True)
        self._tables_loaded[name] = loaded
        return loaded

    def _arrays(self, rows):
        """tb_table_load's array arguments over ``rows`` (:meth:`_LoadedTable.rows`)."""
        return [self.ffi.from_buffer("int32_t[]" if f == "i" else "uint64_t[]", row if len(row) else bytes(8))
                for f, row in zip(_ROW_FORMATS, rows)]

    def _patch_table(self, index, loaded):
        """Remove the deleted entries, change the modified entries' actions in native memory and add the new
        entries; 0 or the failing call's status."""
        for at in loaded.removed:
            status = self.lib.tb_table_remove(self.pl, index, at)
            if status:
                return status
        for at in sorted(loaded.modified):
            if at >= loaded.in_native:
                continue  # added below with its latest row
            _, kind, action, ref, _, _, _, args = self._arrays(loaded.rows(at, at + 1))
            status = self.lib.tb_table_update(self.pl, index, at, kind[0], action[0], ref[0], args)
            if status:
                return status
        if len(loaded.entries) > loaded.in_native:
            return self.lib.tb_table_append(self.pl, index, len(loaded.entries) - loaded.in_native,
                                            *self._arrays(loaded.rows(loaded.in_native)))
        return 0

    def _load_table(self, index, table, loaded):
        """Load ``table`` from ``loaded`` (its :meth:`_loaded_rows`), its default action, and its entries'
        direct counts and meters."""
        ffi, lib = self.ffi, self.lib
        keys = table.info.match_keys
        where = f"table {table.info.name}"
        nargs = self.library.layout["table_nargs"][index]
        # a snapshot only where the entries' per-entry resources are read back later
        per_entry = table.direct_counter is not None or table.direct_meter is not None or table.info.idle_timeout
        entries = list(loaded.entries) if per_entry else loaded.entries
        range_key = [1 if k.match_type == "range" else 0 for k in keys]
        kept = self._kept_direct_meters(index, table) if table.direct_meter is not None else None
        # in place when the loaded entries kept their order (inserts, modifies); per-entry resources load whole
        in_place = loaded.in_native is not None and not per_entry
        if in_place:
            status = self._patch_table(index, loaded)
        else:
            status = lib.tb_table_load(self.pl, index, len(entries), *self._arrays(loaded.rows(0)),
                                       ffi.new("uint8_t[]", range_key or [0]))
        loaded.in_native, loaded.modified, loaded.removed = (len(entries) if not status else None), set(), []
        if status:
            raise NativeBackendError(f"native backend: {where}: loading into native memory failed ({status})")
        if table.direct_meter is not None:
            self._load_direct_meters(index, table, entries, kept)
        if table.direct_counter is not None or table.info.idle_timeout:
            self._loaded[table.info.name] = entries
            lib.tb_table_counts(self.pl, index, len(entries),
                                ffi.new("uint64_t[]", [e.counter_packets for e in entries] or [0]),
                                ffi.new("uint64_t[]", [e.counter_bytes for e in entries] or [0]), 1)
        default = table.default_action
        lib.tb_table_set_default(self.pl, index, self._action(default.action),
                                 ffi.new("uint64_t[]", self._args(default.args, max(nargs, 1), where)))
