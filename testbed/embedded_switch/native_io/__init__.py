"""The embedded switch's packet loop in native code: AF_XDP ports, the v1model traffic manager, batched send.

The C library (``tbio.c``, ``pktgen.c``, ``tbio.h``, ``xsk.h`` beside this file) is built with the system C
compiler at first use and cached by the content hash of its sources (:func:`build`), then loaded
through cffi.  A frame never passes through Python on its way through the switch: the loop
receives on every port's AF_XDP socket, runs the compiled pipeline (the functions of
tb_pipeline.h, looked up in the program's shared object), queues in the traffic manager and sends.
It blocks in ``ppoll`` when there is nothing to do, so an idle switch costs no CPU.  Python stays
in control: :meth:`NativeLoop.run` returns when frames for the CPU port wait (PacketIn), when
:meth:`NativeLoop.wake` was called, when the program halted the switch, or at the caller's
timeout; every other call takes the loop's lock, which the loop gives up between batches.  A switch
runs the loop in a native thread of its own instead (:meth:`NativeLoop.start`), which never returns
to Python: it goes on forwarding and firing its timers while the process's Python threads wait for
the GIL, and notes what ``run`` would have returned for, which Python takes with :meth:`NativeLoop.wait`.

The I/O method, AF_XDP in copy mode behind a five-instruction XDP program loaded with ``bpf()``
(no libbpf), was chosen by measurement: see benchmarks/bench_io_methods.py and benchmarks/README.md.
A port whose device takes no XDP program (a VXLAN cross-server link) receives and sends through
AF_PACKET sockets instead (:attr:`NativeLoop.without_xdp` says which and why).

:class:`NativeTrafficManager` is the traffic manager alone, with the interface of
:class:`testbed.p4.v1model.traffic_manager.TrafficManager` (tests compare the two), priority flow
control included (that module's PFC contract); :attr:`NativeLoop.tm` is the loop's own, for settings
and counters.  With PFC on, the loop consumes the PAUSE frames arriving on its ports and sends the
ones its traffic manager asks for, ahead of the departures (:class:`~testbed.p4.v1model.device.Device`'s
queued mode); the frames are :func:`testbed.p4.v1model.pfc.build_pause`'s, given to the loop per port.

:class:`NativePacketGenerator` is the packet generator's timers in C (``pktgen.c``), with
:class:`testbed.p4.v1model.packet_generator.PacketGenerator`'s semantics (tests compare the two);
:attr:`NativeLoop.packet_generator` is the loop's own, which the switch attaches its
``PacketGenerator`` to: the loop injects the frames on its own timer, without Python.
"""
import hashlib
import json
import os
import subprocess
import tempfile
import threading

from testbed.errors import ParameterError, TestbedError
from testbed.p4.native.build import COMPILER_ENV, SANITIZE_ENV, SANITIZE_FLAGS, header_cdef, preparse_types
from testbed.p4.v1model import pfc
from testbed.p4.v1model.pfc import DEFAULT_QUANTUM_NS, PRIORITIES

__all__ = ["build", "ports_with_qdisc", "NativeLoop", "NativeTrafficManager", "NativeDeparture",
           "NativePacketGenerator", "STOPPED", "WOKEN",
           "PUNTED", "HALTED", "UNSUPPORTED", "NOTED"]

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCES = ("tbio.c", "pktgen.c", "tbio.h", "tbio_dsf.h", "xsk.h")
#: tb_pipeline.h, the C ABI of the native backend's compiled programs (testbed/p4/native)
PIPELINE_HEADER = os.path.join(os.path.dirname(os.path.dirname(HERE)), "p4", "native", "include", "tb_pipeline.h")

#: the C type strings this module hands to the library's ffi, parsed by :func:`load`
#: (see :func:`~testbed.p4.native.build.preparse_types`)
LOOP_TYPES = ("char[]", "uint8_t[]", "uint32_t[]", "uint64_t[16]", "int32_t *", "int64_t *", "uint32_t *",
              "uint64_t *", "void *", "tbio_departure_t[]", "tbio_pause_t[]", "tbio_pfc_config_t *",
              "tbio_pfc_stats_t *", "tbio_pktgen_app_t *", "tbio_port_stats_t *", "tbio_queue_stats_t *")

#: tbio_run's answers
STOPPED, WOKEN, PUNTED, HALTED, UNSUPPORTED = 0, 1, 2, 3, 4
#: what :meth:`NativeLoop.wait` can answer with (any of them together)
NOTED = (WOKEN, PUNTED, HALTED, UNSUPPORTED)

_lock = threading.Lock()
_loaded = {}


class NativeBuildError(TestbedError):
    """The C compiler failed or is missing."""


def pipeline_header():
    """The tb_pipeline.h the library is built against (the native backend's)."""
    return PIPELINE_HEADER


def cache_dir():
    """Where built libraries are kept: ``native_io`` in ``$TESTBED_CACHE_DIR`` (default ``~/.cache/testbed``)."""
    return os.path.join(os.environ.get("TESTBED_CACHE_DIR", os.path.expanduser("~/.cache/testbed")), "native_io")


def sanitizing():
    """True when ``TESTBED_NATIVE_SANITIZE`` asks for AddressSanitizer + UndefinedBehaviorSanitizer builds
    (the process must then preload libasan: ``LD_PRELOAD=$(gcc -print-file-name=libasan.so)``)."""
    return os.environ.get(SANITIZE_ENV, "") not in ("", "0")


def compiler():
    """The C compiler: ``$TESTBED_CC``, else gcc."""
    return os.environ.get(COMPILER_ENV) or "gcc"


def build(extra_flags=()):
    """Compile the loop's library if it is not cached yet; return the shared object's path.

    Args:
        extra_flags: more compiler flags; part of the hash.  With :func:`sanitizing`, the
            sanitizer flags come first.

    Returns:
        path of ``tbio-<hash>.so`` in :func:`cache_dir`; the hash covers the sources, the pipeline
        header and the flags, so a changed source is rebuilt.

    Raises:
        NativeBuildError: no ``gcc``, or it failed (its message is included).
    """
    header = pipeline_header()
    digest = hashlib.sha256()
    for path in [os.path.join(HERE, name) for name in SOURCES] + [header]:
        with open(path, "rb") as handle:
            digest.update(handle.read())
    flags = ["-O2", "-g", "-fPIC", "-shared", "-Wall", "-Wextra", "-Wno-unused-function",
             *(f"-D{name}={value}" for name, value in pfc.c_layout().items()),
             *(SANITIZE_FLAGS if sanitizing() else ()), *extra_flags]
    digest.update(" ".join(flags).encode())
    directory = cache_dir()
    target = os.path.join(directory, f"tbio-{digest.hexdigest()[:20]}.so")
    if os.path.exists(target):
        return target
    os.makedirs(directory, exist_ok=True)
    fd, partial = tempfile.mkstemp(dir=directory, suffix=".so.tmp")
    os.close(fd)
    command = [compiler(), *flags, f'-DTB_PIPELINE_HEADER="{header}"', "-o", partial, os.path.join(HERE, "tbio.c"),
               os.path.join(HERE, "pktgen.c"),
               "-ldl", "-lpthread"]
    try:
        result = subprocess.run(command, capture_output=True, text=True)
    except FileNotFoundError:
        os.unlink(partial)
        raise NativeBuildError(f"no C compiler ({compiler()}) found: install gcc (scripts/install.sh) to use the "
                               "native loop")
    if result.returncode:
        os.unlink(partial)
        raise NativeBuildError(f"building the native packet loop failed: {' '.join(command)}\n{result.stderr}")
    os.replace(partial, target)  # atomic: concurrent builders agree
    return target


def load(extra_flags=()):
    """Return ``(ffi, lib)`` of the built library (built and opened once per process and flags)."""
    key = (tuple(extra_flags), sanitizing())
    with _lock:
        if key not in _loaded:
            import cffi

            ffi = cffi.FFI()
            ffi.cdef(header_cdef(os.path.join(HERE, "tbio.h")))
            lib = ffi.dlopen(build(extra_flags))
            preparse_types(ffi, LOOP_TYPES)
            _loaded[key] = (ffi, lib)
        return _loaded[key]


def _rate(field, value):
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0 \
            or (isinstance(value, float) and not value.is_integer()) or value >= 2 ** 64:
        raise ParameterError(field, value, "a positive whole number below 2**64, or None for no limit")
    return int(value)


def _positive(field, value, most):
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
        raise ParameterError(field, value, f"an integer from 1 to {most}")
    return value


def ports_with_qdisc(ports):
    """The ports of ``{port: interface}`` whose interface has a configured root qdisc (tc shaping).

    Their frames must leave through a socket that passes the qdisc: AF_XDP's transmit hands frames
    to the driver directly.  A default qdisc (``noqueue`` on a veth, handle ``0:``) needs none.

    Returns:
        set of port numbers (empty when ``tc`` cannot be asked).
    """
    try:
        shown = subprocess.run(["tc", "-j", "qdisc", "show"], capture_output=True, text=True, timeout=30).stdout
        qdiscs = json.loads(shown or "[]")
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return set()
    shaped = {qdisc.get("dev") for qdisc in qdiscs if qdisc.get("root") and qdisc.get("handle") != "0:"}
    return {port for port, interface in ports.items() if interface in shaped}


class NativeDeparture:
    """A packet leaving its egress queue: the fields of :class:`testbed.p4.v1model.traffic_manager.Departure`."""

    __slots__ = ("port", "item", "nbytes", "priority", "enq_timestamp_ns", "deq_timestamp_ns",
                 "deq_timedelta_ns", "enq_qdepth", "deq_qdepth")

    def __init__(self, d, item):
        self.port = d.port
        self.item = item
        self.nbytes = d.nbytes
        self.priority = d.priority
        self.enq_timestamp_ns = d.enq_timestamp_ns
        self.deq_timestamp_ns = d.deq_timestamp_ns
        self.deq_timedelta_ns = d.deq_timestamp_ns - d.enq_timestamp_ns
        self.enq_qdepth = d.enq_qdepth
        self.deq_qdepth = d.deq_qdepth


_QUEUE_COUNTERS = ("enqueued", "dequeued", "dropped", "dropped_full", "dropped_priority", "dropped_headroom",
                   "depth", "max_depth")
_PFC_COUNTERS = ("pause_sent", "resume_sent", "pause_received", "resume_received", "paused_ns", "paused",
                 "queued", "dequeued", "held")


def _pfc_config(ffi, config):
    """``tbio_pfc_config_t *`` of a :class:`~testbed.p4.v1model.pfc.PfcConfig`, NULL for None."""
    if config is None:
        return ffi.NULL
    return ffi.new("tbio_pfc_config_t *", {
        "lossless": sum(1 << p for p in config.lossless), "buffer_packets": config.buffer_packets,
        "xoff_packets": config.xoff_packets, "xon_packets": config.xon_packets,
        "pause_quanta": config.pause_quanta, "default_quantum_ns": DEFAULT_QUANTUM_NS})


def _ports_of(words, priority):
    """``[[port, priority], ...]`` of the bits set in a bitmap of 64-bit words (port 64 w + bit), sorted.

    >>> _ports_of([0b101, 1, 0], 3)
    [[0, 3], [2, 3], [64, 3]]
    """
    found = []
    for word, bits in enumerate(words):
        while bits:
            low = bits & -bits
            found.append([64 * word + low.bit_length() - 1, priority])
            bits ^= low
    return found


class _TrafficManagerView:
    """The observation and settings of a C traffic manager (``self._tm``), as TrafficManager names them.

    Subclasses give ``_ffi``, ``_lib``, ``_tm``, ``_clock_ns`` and ``_locked()`` (a context manager).
    """

    _pfc = None

    def set_queue(self, port, rate_pps=None, rate_bps=None, depth_packets=64, priorities=1):
        """Configure the egress queues of ``port`` (see TrafficManager.set_queue).

        Raises:
            ParameterError: bad values, or a change of priorities while packets are queued.
        """
        pps, bps = _rate("rate_pps", rate_pps), _rate("rate_bps", rate_bps)
        _positive("depth_packets", depth_packets, 2 ** 32 - 1)
        _positive("priorities", priorities, 64)
        _positive("port", port + 1, 512)
        with self._locked():
            status = self._lib.tbio_tm_set_queue(self._tm, port, pps, bps, depth_packets, priorities,
                                                 self._clock_ns())
        if status == -1:
            raise ParameterError("priorities", priorities, "unchanged", reason=f"port {port} has packets queued")
        if status:
            raise MemoryError("native traffic manager")

    def set_pfc(self, config):
        """Turn priority flow control on with ``config`` (a PfcConfig; None: off); see TrafficManager.set_pfc.

        Raises:
            ParameterError: when packets are queued (the accounting starts empty).
        """
        with self._locked():
            failed = self._lib.tbio_tm_set_pfc(self._tm, _pfc_config(self._ffi, config))
        if failed:
            raise ParameterError("pfc", config, "a change while no packets are queued",
                                 reason="packets are queued")
        self._pfc = config

    @property
    def pfc(self):
        """The PFC settings, None when PFC is off."""
        return self._pfc

    def depth(self, port, now_ns=None):
        """Packets queued on ``port`` at now."""
        with self._locked():
            return self._lib.tbio_tm_depth(self._tm, port, self._clock_ns() if now_ns is None else now_ns)

    def stats(self, port):
        """Counters of ``port`` (see TrafficManager.stats)."""
        out = self._ffi.new("tbio_queue_stats_t *")
        with self._locked():
            self._lib.tbio_tm_stats(self._tm, port, self._clock_ns(), out)
        return {name: getattr(out, name) for name in _QUEUE_COUNTERS}

    def pfc_stats(self, port, now_ns=None):
        """``port``'s PFC counters, each a list by priority 0..7 (see TrafficManager.pfc_stats)."""
        out = self._ffi.new("tbio_pfc_stats_t *")
        with self._locked():
            self._lib.tbio_tm_pfc_stats(self._tm, port, self._clock_ns() if now_ns is None else now_ns, out)
        stats = {name: list(getattr(out, name)) for name in _PFC_COUNTERS}
        stats["holders"] = [_ports_of(out.holders[p], p) for p in range(PRIORITIES)]
        stats["dropped_headroom"] = out.dropped_headroom
        return stats

    def queue_config(self, port):
        """``port``'s configuration: rate_pps, rate_bps, depth_packets, priorities (see TrafficManager)."""
        pps, bps = self._ffi.new("uint64_t *"), self._ffi.new("uint64_t *")
        depth, priorities = self._ffi.new("uint32_t *"), self._ffi.new("uint32_t *")
        with self._locked():
            self._lib.tbio_tm_queue_config(self._tm, port, pps, bps, depth, priorities)
        return {"rate_pps": pps[0] or None, "rate_bps": bps[0] or None, "depth_packets": depth[0],
                "priorities": priorities[0]}

    def ports(self):
        """The ports that have queues (configured or used), sorted."""
        out = self._ffi.new("uint32_t[]", 512)
        with self._locked():
            n = self._lib.tbio_tm_ports(self._tm, out, 512)
        return list(out[0:n])


class _Unlocked:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class NativeTrafficManager(_TrafficManagerView):
    """The C traffic manager with :class:`~testbed.p4.v1model.traffic_manager.TrafficManager`'s interface.

    Args:
        clock_ns: monotonic clock in integer nanoseconds, read where the Python one reads it.
        default_depth_packets: depth of each priority queue of a port never configured.
        default_priorities: priority queues of such a port (1 to 64).

    Raises:
        ParameterError: a depth or priority count out of range.

    Items may be any Python objects (kept in a table here, the C side holds their numbers).
    Ports are 0 to 511 (v1model's 9 bits); at most 64 priorities.  Not thread-safe by itself.
    """

    def __init__(self, clock_ns=None, default_depth_packets=64, default_priorities=1):
        import time

        _positive("default_depth_packets", default_depth_packets, 2 ** 32 - 1)
        _positive("default_priorities", default_priorities, 64)
        self._ffi, self._lib = load()
        self._clock_ns = clock_ns or time.monotonic_ns
        self._tm = self._ffi.gc(self._lib.tbio_tm_new(default_depth_packets, default_priorities),
                                self._lib.tbio_tm_free)
        self._items = {}
        self._next_item = 0
        self.batch = 256  # departures fetched per call into C
        self._out = self._ffi.new("tbio_departure_t[]", 256)
        self._pauses = self._ffi.new("tbio_pause_t[]", 64)

    def _locked(self):
        return _Unlocked()

    def enqueue(self, port, item, nbytes, priority=0, now_ns=None, ingress_port=None):
        """Queue a packet; return enq_qdepth, or None when dropped (see TrafficManager.enqueue)."""
        key = self._next_item
        self._next_item += 1
        depth = self._lib.tbio_tm_enqueue(self._tm, port, key, nbytes, priority,
                                          self._clock_ns() if now_ns is None else now_ns,
                                          -1 if ingress_port is None else ingress_port)
        if depth < 0:
            return None
        self._items[key] = item
        return depth

    def dequeue_ready(self, now_ns=None):
        """Return the departures due by now, in departure-time order."""
        now = self._clock_ns() if now_ns is None else now_ns
        result = []
        while True:
            n = self._lib.tbio_tm_dequeue_ready(self._tm, now, self._out, min(self.batch, 256))
            for i in range(n):
                d = self._out[i]
                result.append(NativeDeparture(d, self._items.pop(d.item)))
            if n < min(self.batch, 256):
                return result

    def next_departure_ns(self):
        """When dequeue_ready will next return something, or None."""
        when = self._ffi.new("int64_t *")
        return when[0] if self._lib.tbio_tm_next_departure(self._tm, when) else None

    def receive_pause(self, port, quanta, now_ns=None):
        """Honour a PFC PAUSE frame that arrived on ``port``: ``quanta`` as parse_pause gives them."""
        priorities = [p for p, _ in quanta]
        values = [q for _, q in quanta]
        self._lib.tbio_tm_receive_pause(self._tm, port, len(quanta), priorities or [0], values or [0],
                                        self._clock_ns() if now_ns is None else now_ns)

    def pause_frames(self, now_ns=None):
        """The PAUSE frames to send now, each once: ``(ns, port, priority, quanta)``."""
        self._lib.tbio_tm_pause_frames(self._tm, self._clock_ns() if now_ns is None else now_ns)
        frames = []
        while True:
            n = self._lib.tbio_tm_take_pauses(self._tm, self._pauses, 64)
            frames.extend((p.ns, p.port, p.priority, p.quanta) for p in self._pauses[0:n])
            if n < 64:
                return frames

    def next_pause_ns(self):
        """When pause_frames next has a frame to send (None: no pause in force)."""
        when = self._ffi.new("int64_t *")
        return when[0] if self._lib.tbio_tm_next_pause(self._tm, when) else None


class NativePacketGenerator:
    """The packet generator's timers in C: what :meth:`PacketGenerator.attach
    <testbed.p4.v1model.packet_generator.PacketGenerator.attach>` hands the applications to.

    Args:
        loop: the :class:`NativeLoop` whose generator this is (each call takes the loop's lock; the
            loop injects the frames), or None for a generator of its own, driven by :meth:`due`.

    The applications' values were checked by the ``PacketGenerator``.
    """

    def __init__(self, loop=None):
        if loop is None:
            self._ffi, self._lib = load()
            self._pg = self._ffi.gc(self._lib.tbio_pktgen_new(), self._lib.tbio_pktgen_free)
            self._locked = _Unlocked
        else:
            self._ffi, self._lib = loop._ffi, loop._lib
            self._pg = self._lib.tbio_packet_generator(loop._loop)
            self._locked = loop.locked
        self._state = self._ffi.new("tbio_pktgen_app_t *")

    def set_app(self, number, app):
        """Start or change application ``number`` with ``app``'s port, period, template, timer and counters
        (a :class:`~testbed.p4.v1model.packet_generator.GeneratorApp`)."""
        state = self._ffi.new("tbio_pktgen_app_t *", {
            "port": app.port, "period_ns": app.period_ns, "next_ns": app.next_ns, "generated": app.generated,
            "skipped": app.skipped, "skipped_run_max": app.skipped_run_max, "late_max_ns": app.late_max_ns})
        with self._locked():
            failed = self._lib.tbio_pktgen_set(self._pg, number, state, app.template, len(app.template))
        if failed:
            raise ParameterError("app", number, "an application of packet_generator.PacketGenerator's checks")

    def stop_app(self, number):
        """End application ``number``."""
        with self._locked():
            self._lib.tbio_pktgen_stop(self._pg, number)

    def read_app(self, number, app):
        """Copy application ``number``'s timer and counters into ``app`` (nothing when it does not run)."""
        with self._locked():
            found = self._lib.tbio_pktgen_get(self._pg, number, self._state)
        if found:
            state = self._state
            app.next_ns, app.generated, app.skipped = state.next_ns, state.generated, state.skipped
            app.skipped_run_max, app.late_max_ns = state.skipped_run_max, state.late_max_ns

    def next_due_ns(self):
        """When the next frame is due (CLOCK_MONOTONIC ns), or None when no application runs."""
        when = self._ffi.new("int64_t *")
        with self._locked():
            found = self._lib.tbio_pktgen_next_due(self._pg, when)
        return when[0] if found else None

    def due(self, now_ns):
        """The frames whose time has come: ``[(port, frame)]``, in application order (a generator of its own;
        the loop's injects them itself)."""
        cap = self._lib.TBIO_PKTGEN_APPS
        apps = self._ffi.new("uint32_t[]", cap)
        length = self._ffi.new("uint32_t *")
        frames = []
        with self._locked():
            for number in apps[0:self._lib.tbio_pktgen_due(self._pg, now_ns, apps, cap)]:
                self._lib.tbio_pktgen_get(self._pg, number, self._state)
                frame = self._lib.tbio_pktgen_frame(self._pg, number, length)
                frames.append((self._state.port, bytes(self._ffi.buffer(frame, length[0]))))
        return frames


class NativeLoop:
    """A switch's native packet loop over AF_XDP sockets on its port interfaces (root needed).

    Args:
        ports: ``{port number: interface name}`` (each interface with one receive queue).
        cpu_port: the CPU port (frames sent to it are punted to Python), or None.
        clock_origin_ns: CLOCK_MONOTONIC ns at which the pipeline's timestamps are 0.
        ring_size: AF_XDP ring size per port (a power of two): ring_size receive frames of 2 KiB per
            port, and 256 transmit frames shared by the ports, resident for as long as the loop is
            open (the kernel pins the UMEM).
        seed: seeds the per-port loss generators.
        via_qdisc: ports whose frames leave through an AF_PACKET socket instead of AF_XDP, so that
            they pass the interface's qdisc (AF_XDP's transmit bypasses it, and with it tc shaping):
            :func:`ports_with_qdisc` tells which.

    Attributes:
        without_xdp: ``{port: why}`` of the ports where AF_XDP could not be set up (a device without
            XDP, such as a VXLAN cross-server link): they receive through an AF_PACKET socket and send
            as ``via_qdisc`` ports do.

    Raises:
        TestbedError: a port cannot be opened at all (the message names the interface and the cause).
    """

    def __init__(self, ports, cpu_port=None, clock_origin_ns=0, ring_size=256, seed=0, via_qdisc=()):
        self._ffi, self._lib = load()
        ffi, lib = self._ffi, self._lib
        self._loop = lib.tbio_new(-1 if cpu_port is None else cpu_port, clock_origin_ns, ring_size, len(ports),
                                  seed)
        if self._loop == ffi.NULL:
            raise ParameterError("ring_size", ring_size, "a power of two >= 8")
        self._err = ffi.new("char[]", 512)
        self._buffer = ffi.new("uint8_t[]", 4096)
        self.pfc = None  # the PfcConfig the loop's traffic manager has (kept across pipelines)
        self._clock_origin_ns = clock_origin_ns
        self.without_xdp = {}
        try:
            for port, interface in sorted(ports.items()):
                added = lib.tbio_add_port(self._loop, port, interface.encode(), self._err, 512)
                if added == 1:
                    self.without_xdp[port] = ffi.string(self._err).decode()
                if added < 0 or (port in via_qdisc and lib.tbio_port_via_qdisc(self._loop, port, self._err, 512)):
                    raise TestbedError(f"port {port} ({interface}): {ffi.string(self._err).decode()}")
        except BaseException:
            self.close()
            raise

    def set_pipeline(self, library_path, pipeline, clock_origin_ns=None):
        """Use the compiled program at ``library_path`` with state ``pipeline`` (a ``tb_pipeline_t *``
        cdata or address); None for no pipeline (frames dropped).  Queued packets are dropped.
        ``clock_origin_ns``: where the pipeline's timestamps start (default: the loop's).

        Raises:
            TestbedError: the library cannot be opened or is not a pipeline of the expected ABI.
        """
        ffi = self._ffi
        handle = ffi.NULL if pipeline is None else ffi.cast("void *", pipeline)
        path = ffi.NULL if library_path is None else os.fsencode(library_path)
        with self.locked():
            origin = self._clock_origin_ns if clock_origin_ns is None else clock_origin_ns
            failed = self._lib.tbio_set_pipeline(self._loop, path, handle, origin, self._err, 512)
        if failed:
            raise TestbedError(f"native pipeline: {ffi.string(self._err).decode()}")

    def set_dsf(self, dsf):
        """Carry out the pipeline's DSF extern calls with ``dsf`` (a ``tb_dsf_t *``: the switch's
        :class:`~testbed.p4.native.dsf.NativeDSFTrafficManager` ``.dsf``, kept alive by the caller), None:
        none.  Call after :meth:`set_pipeline`.

        Raises:
            TestbedError: the pipeline has no DSF traffic manager functions.
        """
        ffi = self._ffi
        with self.locked():
            failed = self._lib.tbio_set_dsf(self._loop, ffi.NULL if dsf is None else ffi.cast("void *", dsf),
                                            self._err, 512)
        if failed:
            raise TestbedError(f"native DSF traffic manager: {ffi.string(self._err).decode()}")

    def locked(self):
        """Context manager holding the loop's lock (no frame is processed meanwhile)."""
        return _Locked(self._lib, self._loop)

    @property
    def tm(self):
        """The loop's traffic manager (settings and counters; each call takes the loop's lock)."""
        return _LoopTrafficManager(self)

    @property
    def packet_generator(self):
        """The loop's packet generator (:class:`NativePacketGenerator`): its frames enter ingress on the
        loop's own timer while a pipeline is set."""
        return NativePacketGenerator(self)

    def set_queue(self, port, rate_pps=None, rate_bps=None, depth_packets=64, priorities=1):
        """Configure the egress queues of ``port`` (see TrafficManager.set_queue)."""
        self.tm.set_queue(port, rate_pps=rate_pps, rate_bps=rate_bps, depth_packets=depth_packets,
                          priorities=priorities)

    def set_pfc(self, config):
        """Priority flow control on with ``config`` (a PfcConfig; None: off), for this and later pipelines.

        Raises:
            ParameterError: packets are queued.
        """
        self.tm.set_pfc(config)
        self.pfc = config

    def set_pause_frames(self, frames):
        """The PAUSE frame each port sends: ``{port: build_pause(source MAC, [])}`` (60 bytes each)."""
        with self.locked():
            for port, frame in frames.items():
                if self._lib.tbio_set_pause_frame(self._loop, port, frame, len(frame)):
                    raise ParameterError("frame", frame.hex(), "a 60-byte PAUSE frame of pfc.build_pause")

    def set_multicast_group(self, group, replicas):
        """Set multicast group ``group`` to ``[(port, rid), ...]`` (empty: delete)."""
        ports = [p for p, _ in replicas]
        rids = [r for _, r in replicas]
        with self.locked():
            self._lib.tbio_set_multicast_group(self._loop, group, len(ports), ports, rids)

    def set_clone_session(self, session, replicas, packet_length=0):
        """Set clone session ``session`` to ``[(port, rid), ...]``, truncating copies to ``packet_length`` (0: no)."""
        ports = [p for p, _ in replicas]
        rids = [r for _, r in replicas]
        with self.locked():
            self._lib.tbio_set_clone_session(self._loop, session, len(ports), ports, rids, packet_length)

    def set_impairment(self, port, loss, delay_ms):
        """Drop frames leaving ``port`` with probability ``loss``, hold the others ``delay_ms``."""
        with self.locked():
            if self._lib.tbio_set_impairment(self._loop, port, float(loss), int(round(delay_ms * 1e6))):
                raise ParameterError("port/loss/delay_ms", (port, loss, delay_ms),
                                     "a data port, a loss in [0, 1] and a delay >= 0")

    def inject(self, port, frame):
        """Run ``frame`` through ingress as if received on ``port`` (a PacketOut on the CPU port)."""
        with self.locked():
            return self._lib.tbio_inject(self._loop, port, frame, len(frame)) == 0

    def run(self, timeout_ms=-1):
        """Forward until something needs Python; return STOPPED, WOKEN, PUNTED, HALTED or UNSUPPORTED.

        Raises:
            TestbedError: the loop runs in its own thread (:meth:`start`).
        """
        answer = self._lib.tbio_run(self._loop, int(timeout_ms))
        if answer < 0:
            raise TestbedError("the native loop runs in its own thread: wait() for it, or stop() it first")
        return answer

    def start(self):
        """Run the loop in a native thread of its own until :meth:`stop` or :meth:`close`: it forwards and
        fires its timers without Python; :meth:`wait` tells what :meth:`run` would have returned for.

        Raises:
            TestbedError: it already runs, or no thread could be made.
        """
        if self._lib.tbio_start(self._loop):
            raise TestbedError("the native loop's thread cannot start (it runs already, or no thread)")

    def wait(self, timeout_ms=-1):
        """With the loop's own thread running: wait at most ``timeout_ms`` (-1: no limit) for something that
        needs Python.

        Returns:
            frozenset of the statuses noted since the last call (of :data:`NOTED`: WOKEN, PUNTED, HALTED,
            UNSUPPORTED); empty at the timeout.
        """
        bits = self._lib.tbio_wait(self._loop, int(timeout_ms))
        return frozenset(status for status in NOTED if bits & (1 << status))

    def stop(self):
        """End the loop's own thread (it finishes its batch first); nothing when none runs."""
        if self._loop is not None:
            self._lib.tbio_stop(self._loop)

    def wake(self):
        """Make a running :meth:`run` return WOKEN, or :meth:`wait` answer with it (any thread; nothing once
        closed)."""
        loop = self._loop
        if loop is not None:
            self._lib.tbio_wake(loop)

    def punted(self):
        """Take the frames sent to the CPU port, oldest first."""
        frames = []
        while True:
            n = self._lib.tbio_take_punted(self._loop, self._buffer, 4096)
            if n < 0:
                return frames
            frames.append(bytes(self._ffi.buffer(self._buffer, min(n, 4096))))

    def events(self):
        """Take the digests and log_msg calls the pipeline reported, oldest first.

        Returns:
            list of ``(site id, valid, values)``: the site in the program's layout "events", whether
            its stage was a successful ingress (only then is a digest sent), 16 values.
        """
        events = []
        site, valid, values = self._ffi.new("int32_t *"), self._ffi.new("uint32_t *"), self._ffi.new("uint64_t[16]")
        while self._lib.tbio_take_event(self._loop, site, valid, values):
            events.append((site[0], bool(valid[0]), tuple(values)))
        return events

    def halt_reason(self):
        """Why the program stopped the switch, or None."""
        reason = self._lib.tbio_halt_reason(self._loop)
        return None if reason == self._ffi.NULL else self._ffi.string(reason).decode()

    def port_stats(self, port):
        """Counters of ``port``: rx/tx packets and bytes, drops, tx_errors, kernel_drops, impairment_drops,
        and ``queue`` (the traffic manager's counters)."""
        import time

        out = self._ffi.new("tbio_port_stats_t *")
        queue = self._ffi.new("tbio_queue_stats_t *")
        with self.locked():
            self._lib.tbio_port_stats(self._loop, port, out)
            self._lib.tbio_tm_stats(self._lib.tbio_traffic_manager(self._loop), port, time.monotonic_ns(), queue)
        result = {name: getattr(out, name) for name in ("rx_packets", "rx_bytes", "tx_packets", "tx_bytes", "drops",
                                                         "tx_errors", "kernel_drops", "impairment_drops")}
        result["queue"] = {name: getattr(queue, name) for name in _QUEUE_COUNTERS}
        return result

    def errors(self):
        """Internal errors counted (out of packet slots or memory, a frame larger than the deparser's buffer,
        the CPU port's queue full: 1,024 frames not yet taken by :meth:`punted`)."""
        return self._lib.tbio_errors(self._loop)

    def close(self):
        """End the loop's thread, close the sockets (the XDP programs go with them) and free everything;
        :meth:`run` must have returned."""
        if getattr(self, "_loop", None) is not None and self._loop != self._ffi.NULL:
            self._lib.tbio_free(self._loop)
        self._loop = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class _LoopTrafficManager(_TrafficManagerView):
    """:attr:`NativeLoop.tm`: the loop's traffic manager under the loop's lock, on CLOCK_MONOTONIC."""

    def __init__(self, loop):
        import time

        self._ffi, self._lib = loop._ffi, loop._lib
        self._tm = loop._lib.tbio_traffic_manager(loop._loop)
        self._loop = loop
        self._clock_ns = time.monotonic_ns
        self._pfc = loop.pfc

    def _locked(self):
        return self._loop.locked()


class _Locked:
    def __init__(self, lib, loop):
        self._lib, self._loop = lib, loop

    def __enter__(self):
        self._lib.tbio_lock(self._loop)

    def __exit__(self, *exc):
        self._lib.tbio_unlock(self._loop)
