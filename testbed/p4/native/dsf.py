"""The DSF traffic manager in native code (csrc/tb_dsf.c), with the interface of the Python one.

:class:`NativeDSFTrafficManager` offers what :class:`~testbed.p4.v1model.device.Device` uses of
:class:`~testbed.p4.v1model.dsf.engine.DSFTrafficManager` (``handle``, ``due``, ``next_event_ns``,
``record_history`` and ``history``) and does the work in C: VOQs, credit schedulers, cells,
reassembly, counting and the counter history.  It counts into the switch's counters of dsf.p4 in
native memory (the cells the P4Runtime server reads).  The Python manager stays the reference
(tests/native/test_native_dsf.py compares the two on the same requests and clock).

The native packet loop uses the same C object (``tbio_set_dsf``) while it forwards, under the
pipeline's lock: the history's methods, which the control thread calls meanwhile, take that lock.
"""
import json
from collections import deque
from contextlib import contextmanager

from testbed.p4.native.state import NativeArray
from testbed.p4.v1model.dsf.constants import COUNTERS, EXTERNS

_EXTERN_IDS = {name: ident for ident, name in enumerate(EXTERNS)}  # TB_DSF_* ids (TARGET_EXTERNS order)
_ENQUEUE = _EXTERN_IDS["dsf_voq_enqueue"]
_ARGS = 12  # TB_DSF_ARGS
_FRAME_SPACE = 65536 + 8192
_HISTORY_CELLS = 4096


def native_counter_cells(ffi, counter, owner):
    """``(packets, bytes)`` cffi pointers of a counter's cells, moving them into native memory when they
    are still Python lists (the counter then reads and writes the native cells).

    Args:
        ffi: the cffi FFI.
        counter: a :class:`~testbed.p4.state.stateful.CounterState`.
        owner: the object that keeps new native memory alive.

    Returns:
        tuple: two ``uint64_t *``.
    """
    arrays = []
    for column in ("packets", "bytes"):
        cells = getattr(counter, column)
        if not isinstance(cells, NativeArray):
            native = ffi.new("uint64_t[]", max(1, counter.info.size))
            array = NativeArray(native, counter.info.size, owner)
            array[:] = list(cells)
            setattr(counter, column, array)
            cells = array
        arrays.append(cells._cells)
    return tuple(arrays)


class NativeCounterHistory:
    """The counter history kept by tb_dsf.c, read as :class:`~testbed.p4.v1model.dsf.history.CounterHistory`."""

    def __init__(self, manager, names):
        self._manager = manager
        self.names = names
        self._notes = deque()
        lib, ffi = manager.lib, manager.ffi
        self._at = ffi.new("int64_t *")
        self._which = ffi.new("uint32_t[]", _HISTORY_CELLS)
        self._indexes = ffi.new("uint64_t[]", _HISTORY_CELLS)
        self._packets = ffi.new("uint64_t[]", _HISTORY_CELLS)
        self._bytes = ffi.new("uint64_t[]", _HISTORY_CELLS)
        self._lib = lib

    @property
    def overflows(self):
        """Notes dropped because the reader did not drain them in time."""
        with self._manager.locked():
            return self._lib.tb_dsf_history_overflows(self._manager.dsf)

    @property
    def notes(self):
        """The notes not read yet (``deque`` of ``(time_ns, {name: {index: [packets, bytes]}})``)."""
        with self._manager.locked():
            self._pull()
        return self._notes

    def before(self, now_ns):
        """An event at ``now_ns``: note what changed before the last grid point."""
        with self._manager.locked():
            self._lib.tb_dsf_history_before(self._manager.dsf, now_ns)

    def _pull(self):
        ffi = self._manager.ffi
        room = _HISTORY_CELLS
        while True:
            n = self._lib.tb_dsf_history_take(self._manager.dsf, self._at, self._which, self._indexes,
                                              self._packets, self._bytes, room)
            if n < 0:
                break
            if n > room:
                room = n
                self._which, self._indexes = ffi.new("uint32_t[]", n), ffi.new("uint64_t[]", n)
                self._packets, self._bytes = ffi.new("uint64_t[]", n), ffi.new("uint64_t[]", n)
                continue
            cells = {name: {} for name in self.names}
            for k in range(n):
                cells[COUNTERS[self._which[k]]][self._indexes[k]] = [self._packets[k], self._bytes[k]]
            self._notes.append((self._at[0], cells))
        self._lib.tb_dsf_history_held(self._manager.dsf, len(self._notes))

    def drain(self, max_bytes=None):
        """As :meth:`CounterHistory.drain <testbed.p4.v1model.dsf.history.CounterHistory.drain>`."""
        notes = self.notes
        drained, size = [], 2
        while notes:
            if max_bytes is not None:
                size += len(json.dumps(notes[0])) + 1
                if drained and size > max_bytes:
                    break
            drained.append(notes.popleft())
        with self._manager.locked():
            self._lib.tb_dsf_history_held(self._manager.dsf, len(notes))
        return drained


class NativeDSFTrafficManager:
    """The DSF traffic manager of one switch in native code.

    Args:
        library: a :class:`~testbed.p4.native.build.NativeLibrary` (any program's: all carry tb_dsf.c).
        state: the switch's SwitchState (its dsf.p4 counters are counted into, in native memory).
        log: ``log(text)`` for parameter problems, or None.
        pipeline: the switch's ``tb_pipeline_t *`` whose lock guards the manager while a native loop
            runs it, or None.

    Raises:
        MemoryError: no native memory.
    """

    def __init__(self, library, state, log=None, pipeline=None):
        self.lib, self.ffi = lib, ffi = library.lib, library.ffi
        self._pipeline = pipeline
        self.dsf = ffi.gc(lib.tb_dsf_new(), lib.tb_dsf_free)
        if self.dsf == ffi.NULL:
            raise MemoryError("native DSF traffic manager")
        self._log = log
        self._counters = {}
        for which, name in enumerate(COUNTERS):
            counter = state.counters.get(name)
            if counter is not None:
                packets, nbytes = native_counter_cells(ffi, counter, self)
                lib.tb_dsf_set_counter(self.dsf, which, packets, nbytes, counter.info.size)
                self._counters[name] = counter
        self._ids = ffi.new("int32_t[]", 8)
        self._args = ffi.new("uint64_t[]", 8 * _ARGS)
        self._port = ffi.new("uint32_t *")
        self._frame = ffi.new("uint8_t[]", _FRAME_SPACE)
        self._when = ffi.new("int64_t *")
        self._line = ffi.new("char[]", 512)
        self.history = None

    @contextmanager
    def locked(self):
        """Hold the pipeline's lock (no native loop runs the manager meanwhile)."""
        if self._pipeline is None:
            yield
            return
        self.lib.tb_pipeline_lock(self._pipeline)
        try:
            yield
        finally:
            self.lib.tb_pipeline_unlock(self._pipeline)

    def record_history(self, names, start_ns, period_ns, capacity):
        """As :meth:`DSFTrafficManager.record_history <testbed.p4.v1model.dsf.engine.DSFTrafficManager.record_history>`.

        Raises:
            ValueError: ``period_ns`` or ``capacity`` not positive.
        """
        kept = [name for name in names if name in self._counters]
        mask = 0
        for name in kept:
            mask |= 1 << COUNTERS.index(name)
        if period_ns <= 0 or capacity <= 0:
            raise ValueError("period_ns and capacity must be positive")
        with self.locked():
            if self.lib.tb_dsf_history_start(self.dsf, mask, start_ns, period_ns, capacity) != 0:
                raise MemoryError("native DSF traffic manager: out of memory")
        self.history = NativeCounterHistory(self, kept)

    def handle(self, requests, packet_bytes, payload, now_ns):
        """As :meth:`DSFTrafficManager.handle <testbed.p4.v1model.dsf.engine.DSFTrafficManager.handle>`."""
        for i, (name, args) in enumerate(requests[:8]):
            self._ids[i] = _EXTERN_IDS[name]
            for k, value in enumerate(args):
                self._args[i * _ARGS + k] = value
        return self.handle_native(min(len(requests), 8), self._ids, self._args, packet_bytes, payload, now_ns)

    def handle_native(self, count, ids, args, packet_bytes, payload, now_ns):
        """:meth:`handle` with the requests as the pipeline reports them (``int32_t`` ids, rows of
        ``TB_MAX_EXTERN_ARGS`` ``uint64_t`` arguments); ``packet_bytes()`` is called only when needed."""
        packet = b""
        for i in range(count):
            ident = ids[i]
            if ident == _ENQUEUE:
                packet = packet_bytes()
            if ident == _ENQUEUE or ident == _EXTERN_IDS["dsf_reassemble"]:
                break  # the first request that takes the packet decides
        taken = self.lib.tb_dsf_handle(self.dsf, now_ns, count, ids, args, packet, len(packet), payload, len(payload))
        self._flush_log()
        if taken < 0:
            raise MemoryError("native DSF traffic manager: out of memory")
        return bool(taken)

    def _flush_log(self):
        while self.lib.tb_dsf_take_log(self.dsf, self._line, 512):
            if self._log is not None:
                self._log(self.ffi.string(self._line).decode())

    def due(self, now_ns):
        """Run the timers due by ``now_ns`` and return the frames for ingress: ``[(port, frame)]``."""
        lib, dsf = self.lib, self.dsf
        lib.tb_dsf_due(dsf, now_ns)
        frames = []
        while True:
            n = lib.tb_dsf_take(dsf, self._port, self._frame, len(self._frame))
            if n < 0:
                break
            if n > len(self._frame):
                self._frame = self.ffi.new("uint8_t[]", n)
                continue
            frames.append((self._port[0], self.ffi.buffer(self._frame, n)[:]))
        return frames

    def next_event_ns(self):
        """When :meth:`due` next has work: 0 while frames are pending, else the next timer (None: none)."""
        return self._when[0] if self.lib.tb_dsf_next_event(self.dsf, self._when) else None
