"""The embedded target as the P4Runtime server sees it: program, state, device and packet I/O.

This module joins the two layers below it: the P4 target (:mod:`testbed.p4`),
which knows nothing of P4Runtime, and the P4Runtime server
(:mod:`testbed.p4runtime`), which serves any object with this class's interface.  The device
config it accepts is the program's sources (:mod:`testbed.p4.device_config`).

Packet I/O through the CPU port works like BMv2: a PacketOut becomes the frame
``packet_out header + payload`` received on the CPU port; a frame the pipeline sends
to the CPU port starts with the ``packet_in`` header, which is stripped into the
PacketIn metadata.  :attr:`EmbeddedTarget.device` is a thin wrapper of the real
``Device`` that does this on the forwarding thread: PacketOuts are queued and
injected at the next ``transmit_ready``/``process``/:meth:`EmbeddedTarget.pump`
call, and CPU-port output is taken out of what those return.
"""
import collections
import hashlib
import os
import threading
import time

from p4.config.v1 import p4info_pb2

from testbed.errors import NativeBackendError, P4LoadError, TestbedError
from testbed.p4.device_config import DeviceConfigError, device_config_for, parse_device_config
from testbed.p4.loader import load_program, load_program_from_sources
from testbed.p4.state import SwitchState
from testbed.p4.native import DEFAULT_BACKEND, check_backend, default_backend, make_device
from testbed.p4.native.build import build as build_native
from testbed.p4.v1model.packet_generator import PacketGenerator
from testbed.p4runtime import limits
from testbed.p4runtime.errors import P4RuntimeError
from testbed.p4runtime.p4info import build_p4info
from testbed.p4runtime.p4info_index import P4InfoIndex, p4info_problems

def pack_header(fields, values, what):
    """Bytes of a controller header: field values concatenated big-endian.

    Args:
        fields: list of (name, bitwidth).
        values: {name: int}; missing fields are 0.
        what: header name for messages.

    Raises:
        P4RuntimeError: INVALID_ARGUMENT for an unknown field or a value too wide.
    """
    known = {name for name, _ in fields}
    for name in values:
        if name not in known:
            raise P4RuntimeError("INVALID_ARGUMENT", f"{what}: unknown metadata field {name!r} "
                                                     f"(fields: {', '.join(sorted(known))})")
    total, width = 0, 0
    for name, bitwidth in fields:
        value = int(values.get(name, 0))
        if value < 0 or value >> bitwidth:
            raise P4RuntimeError("INVALID_ARGUMENT", f"{what}: {name}={value} does not fit in {bitwidth} bits")
        total = (total << bitwidth) | value
        width += bitwidth
    if width % 8:
        raise P4RuntimeError("FAILED_PRECONDITION", f"{what}: header is {width} bits, not whole bytes")
    return total.to_bytes(width // 8, "big")


def unpack_header(fields, data):
    """({name: int}, rest) of a frame starting with a controller header.

    Raises:
        ValueError: the frame is shorter than the header.
    """
    width = sum(bitwidth for _, bitwidth in fields)
    size = width // 8
    if len(data) < size:
        raise ValueError(f"frame of {len(data)} bytes is shorter than the {size}-byte header")
    total = int.from_bytes(data[:size], "big")
    values = {}
    shift = width
    for name, bitwidth in fields:
        shift -= bitwidth
        values[name] = (total >> shift) & ((1 << bitwidth) - 1)
    return values, bytes(data[size:])


class _InfoOnlyProgram:
    """A program known only by its ProgramInfo (no compiled data plane)."""

    def __init__(self, info):
        self.info = info
        self.main_file = None
        self.sources = {}


class TargetDevice:
    """The device as the forwarding loop uses it, with the CPU port handled by the target.

    Delegates everything to the real ``Device``; ``transmit_ready`` and ``process``
    first inject queued PacketOuts and then divert CPU-port output to PacketIn.
    """

    def __init__(self, target, device):
        self._target = target
        self._device = device
        # bound once: the forwarding loop calls these per frame
        self.receive = device.receive

    def __getattr__(self, name):
        return getattr(self._device, name)

    @property
    def real(self):
        """The wrapped ``Device``."""
        return self._device

    def _split(self, outputs):
        cpu_port = self._target.cpu_port
        if cpu_port is None or not outputs:
            return outputs
        kept = []
        for port, frame in outputs:
            if port == cpu_port:
                self._target.deliver_cpu_frame(frame)
            else:
                kept.append((port, frame))
        return kept

    def transmit_ready(self, now_ns=None):
        """Inject pending PacketOuts, then the device's ``transmit_ready`` minus CPU-port frames."""
        self._target.inject_pending(self._device)
        return self._split(self._device.transmit_ready(now_ns))

    def next_departure_ns(self):
        """As the device's, but 0 ("now") while PacketOuts wait for injection."""
        if self._target.has_pending():
            return 0
        return self._device.next_departure_ns()

    def process(self, ingress_port, frame):
        """Synchronous whole-pipeline run; CPU-port output becomes PacketIn."""
        return self._split(self._device.process(ingress_port, frame))


#: the programs loaded before a fork server forked the switches, by the SHA-256 of their device config
_PRELOADED = {}


def preload_program(path, backend=DEFAULT_BACKEND):
    """Load ``path`` as a controller's device config would bring it, for the switches forked later.

    A fork server calls this once before forking: a switch that is then sent the same device
    config takes this program instead of parsing and compiling it again, so its pages (syntax
    tree, generated code, with a native backend the compiled library and its cffi declarations)
    are shared by every switch of the fabric rather than copied into each.

    Args:
        path: a P4 file.
        backend: the backend the switches will use (None: :func:`~testbed.p4.native.default_backend`);
            unless ``python``, the native library is built too (a program it refuses is left to the
            switch, which reports it when the program is pushed).

    Returns:
        the LoadedProgram.

    Raises:
        P4LoadError: the program does not load (file:line).
    """
    config = device_config_for(load_program(path))
    program = load_program_from_sources(*parse_device_config(config))
    _PRELOADED[hashlib.sha256(config).digest()] = program
    if (default_backend() if backend is None else check_backend(backend)) != "python":
        try:
            build_native(program)
        except NativeBackendError:
            pass
    return program


class EmbeddedTarget:
    """Holds the loaded program, its SwitchState and Device, and the P4Runtime view of it.

    Args:
        cpu_port: the CPU port number (PacketIn/PacketOut), or None for no CPU port.
        seed: seed of the device's ``random`` extern.
        on_log: callable(str) for the device's ``log_msg`` output, or None.
        backend: the device's backend, ``python``, ``native`` or ``auto`` (:mod:`testbed.p4.native`);
            None: ``$TESTBED_BACKEND`` or auto.

    Attributes:
        program: the loaded program, or None before the first pipeline.
        state: its ``SwitchState``.
        device: a :class:`TargetDevice` (or None); re-read it after a pipeline change.
        p4info: the P4Info generated from the program (ids as p4c gives them).
        client_p4info: the P4Info the controller sent (returned by Get...Config).
        device_config: the device config bytes.
        cookie: the ForwardingPipelineConfig cookie (int) or None.
        lock: a re-entrant lock the server holds while changing the pipeline.
        wakeup_fd: readable while PacketOuts wait (register it in a poll loop, then
            call :meth:`clear_wakeup`).
    """

    def __init__(self, cpu_port=None, seed=0, on_log=None, backend=DEFAULT_BACKEND):
        self.cpu_port = cpu_port
        self.backend = default_backend() if backend is None else check_backend(backend)
        self.seed = seed
        self.on_log = on_log
        self.program = None
        self.state = None
        self.device = None
        self.p4info = None
        self.index = None
        self.client_p4info = None
        self.device_config = None
        self.cookie = None
        self.saved = None
        self.lock = threading.RLock()
        # the architecture's packet generator outlives pipelines, as on Tofino
        self.packet_generator = PacketGenerator(time.monotonic_ns)
        # port queue and PFC settings outlive pipelines too: each new device gets them
        self.queue_settings = {}   # port -> TrafficManager.set_queue keywords
        self.pfc = None            # PfcConfig or None
        self._pending = collections.deque()
        self._packet_in_listeners = []
        self._digest_listeners = []
        self._pipeline_listeners = []
        self._write_listeners = []
        self._wake_read, self._wake_write = os.pipe()
        os.set_blocking(self._wake_read, False)
        os.set_blocking(self._wake_write, False)
        self.wakeup_fd = self._wake_read

    # ---- pipeline -------------------------------------------------------------------------
    def load_program_file(self, path, include_dirs=None):
        """Load a P4 file and make it the pipeline (P4Info generated from it).

        Raises:
            P4LoadError: the program cannot be loaded (file:line), or the target cannot
                realize it (extern arrays over the limits of :mod:`testbed.p4runtime.limits`).
        """
        program = load_program(path, include_dirs=include_dirs)
        try:
            prepared = self.prepare_program(program)
        except P4RuntimeError as exc:
            raise P4LoadError(exc.message, path) from None
        self.commit(prepared)

    def load_program_info(self, info):
        """Install a control-plane-only pipeline: P4Info and SwitchState, no data plane.

        For tools and tests that exercise P4Runtime against a hand-made
        :class:`~testbed.p4.program.ProgramInfo`; :attr:`device` stays None, so
        PacketOut fails with FAILED_PRECONDITION.
        """
        program = _InfoOnlyProgram(info)
        self.commit(self.prepare_program(program, device_config=b""))

    def prepare_program(self, program, client_p4info=None, device_config=None):
        """Check a loaded program (and a controller's P4Info for it) without installing it.

        Returns:
            dict: the prepared pipeline for :meth:`commit`.

        Raises:
            P4RuntimeError: INVALID_ARGUMENT when the program's extern arrays are larger
                than the target's limits, or the controller's P4Info is invalid or does
                not match.
        """
        check_extern_sizes(program.info)
        if self.backend == "native" and not isinstance(program, _InfoOnlyProgram):
            try:
                build_native(program)
            except NativeBackendError as exc:
                raise P4RuntimeError("INVALID_ARGUMENT", f"the native backend cannot run the program: {exc}") from None
        try:
            p4info = build_p4info(program.info)
        except ValueError as exc:
            raise P4RuntimeError("INVALID_ARGUMENT", f"cannot build P4Info: {exc}") from None
        if client_p4info is not None and (client_p4info.tables or client_p4info.actions):
            problems = p4info_problems(client_p4info)
            if problems:
                raise P4RuntimeError("INVALID_ARGUMENT", "the P4Info is not valid: " + "; ".join(problems[:5]))
            problems = p4info_mismatches(client_p4info, p4info)
            if problems:
                raise P4RuntimeError("INVALID_ARGUMENT", "the P4Info does not match the program: "
                                     + "; ".join(problems[:5]))
        else:
            client_p4info = p4info
        return {"program": program, "p4info": p4info, "index": P4InfoIndex(p4info),
                "client_p4info": client_p4info,
                "device_config": device_config if device_config is not None else device_config_for(program)}

    def prepare(self, p4info, device_config):
        """Load the program of a device config and check the P4Info against it.

        Args:
            p4info: the controller's ``P4Info`` message (may be empty: then ours is used).
            device_config: the embedded target's device config bytes.

        Returns:
            dict: the prepared pipeline for :meth:`commit`.

        Raises:
            P4RuntimeError: INVALID_ARGUMENT for a bad device config, a program that
                does not load (the message has file:line) or a P4Info mismatch.
        """
        program = _PRELOADED.get(hashlib.sha256(device_config).digest())
        if program is not None:
            return self.prepare_program(program, p4info, bytes(device_config))
        try:
            main, sources = parse_device_config(device_config)
        except DeviceConfigError as exc:
            raise P4RuntimeError("INVALID_ARGUMENT", str(exc)) from None
        try:
            program = load_program_from_sources(main, sources)
        except P4LoadError as exc:
            raise P4RuntimeError("INVALID_ARGUMENT", f"the program does not load: {exc}") from None
        except TestbedError as exc:
            raise P4RuntimeError("INVALID_ARGUMENT", f"the program does not load: {exc}") from None
        return self.prepare_program(program, p4info, bytes(device_config))

    def commit(self, prepared, cookie=None):
        """Install a prepared pipeline: new SwitchState and Device; forwarding state is cleared."""
        program = prepared["program"]
        with self.lock:
            state = SwitchState(program.info)
            device = None
            if not isinstance(program, _InfoOnlyProgram):
                device = make_device(program, state, backend=self.backend, warn=self.on_log,
                                     cpu_port=self.cpu_port, seed=self.seed,
                                     on_digest=self._on_digest, on_log=self.on_log,
                                     packet_generator=self.packet_generator)
                for port, settings in self.queue_settings.items():
                    device.set_queue(port, **settings)
                device.set_pfc(self.pfc)
            self.program = program
            self.state = state
            self.p4info = prepared["p4info"]
            self.index = prepared["index"]
            self.client_p4info = prepared["client_p4info"]
            self.device_config = prepared["device_config"]
            self.cookie = cookie
            self._pending.clear()
            self.device = TargetDevice(self, device) if device is not None else None
        for listener in list(self._pipeline_listeners):
            listener()

    def set_queue(self, port, **settings):
        """Configure ``port``'s egress queues (TrafficManager.set_queue keywords), now and for later pipelines.

        Raises:
            ParameterError: a bad setting (named).
        """
        with self.lock:
            if self.device is not None:
                self.device.set_queue(port, **settings)
            self.queue_settings[port] = settings

    def set_pfc(self, config):
        """Turn PFC on with ``config`` (a PfcConfig; None: off), now and for later pipelines.

        Raises:
            ParameterError: packets are queued.
        """
        with self.lock:
            if self.device is not None:
                self.device.set_pfc(config)
            self.pfc = config

    def set_pipeline(self, p4info, device_config, cookie=None):
        """Verify and commit a pipeline (SetForwardingPipelineConfig VERIFY_AND_COMMIT).

        Args:
            p4info: a ``P4Info`` message or its serialized bytes.
            device_config: the device config bytes.
            cookie: optional int.
        """
        if isinstance(p4info, (bytes, bytearray)):
            message = p4info_pb2.P4Info()
            message.ParseFromString(bytes(p4info))
            p4info = message
        self.commit(self.prepare(p4info, device_config), cookie)

    def add_pipeline_listener(self, callback):
        """Call ``callback()`` after every pipeline change."""
        self._pipeline_listeners.append(callback)

    def add_write_listener(self, callback):
        """Call ``callback()`` after every batch of writes, before the writer is answered: a data plane
        with its own copy of the state (the native packet loop) makes the writes current there, so a
        packet sent after a Write RPC returned sees them, as on BMv2."""
        self._write_listeners.append(callback)

    def writes_applied(self):
        """A batch of writes is in the state (P4Runtime server, after Write; without the target lock)."""
        for listener in list(self._write_listeners):
            listener()

    # ---- packet I/O -----------------------------------------------------------------------
    def _header_fields(self, which):
        if self.program is None:
            return None
        header = self.program.info.controller_packet_metadata.get(which)
        if header is None:
            return None
        return [(f.name, f.bitwidth) for f in header.fields]

    def packet_out(self, payload, metadata=None):
        """Queue a PacketOut: ``packet_out`` header + payload, received on the CPU port.

        Args:
            payload: the frame bytes after the header.
            metadata: {field name: int} of the ``packet_out`` header (missing -> 0).

        Raises:
            P4RuntimeError: FAILED_PRECONDITION without a pipeline or CPU port;
                INVALID_ARGUMENT for bad metadata.
        """
        if self.device is None:
            raise P4RuntimeError("FAILED_PRECONDITION", "no forwarding pipeline is set")
        if self.cpu_port is None:
            raise P4RuntimeError("FAILED_PRECONDITION", "the switch has no CPU port")
        fields = self._header_fields("packet_out")
        header = b""
        if fields is not None:
            header = pack_header(fields, metadata or {}, "packet_out")
        elif metadata:
            raise P4RuntimeError("INVALID_ARGUMENT", "the program has no packet_out controller header")
        self._pending.append(header + bytes(payload))
        self.wake()

    def wake(self):
        """Make :attr:`wakeup_fd` readable: the forwarding loop looks at its timers again."""
        try:
            os.write(self._wake_write, b"\0")
        except BlockingIOError:
            pass

    def has_pending(self):
        """True while PacketOuts wait for injection."""
        return bool(self._pending)

    def clear_wakeup(self):
        """Drain :attr:`wakeup_fd` (call after poll reported it readable)."""
        try:
            while os.read(self._wake_read, 4096):
                pass
        except BlockingIOError:
            pass

    def inject_pending(self, device):
        """Receive the queued PacketOut frames on the CPU port of ``device`` (forwarding thread)."""
        pending = self._pending
        while pending:
            try:
                frame = pending.popleft()
            except IndexError:
                break
            device.receive(self.cpu_port, frame)

    def pump(self, now_ns=None):
        """Inject PacketOuts and run ``transmit_ready`` once; returns the non-CPU output.

        For callers without a forwarding loop (tests, tools).
        """
        device = self.device
        if device is None:
            return []
        return device.transmit_ready(now_ns)

    def deliver_cpu_frame(self, frame):
        """Turn a frame sent to the CPU port into a PacketIn for the listeners."""
        fields = self._header_fields("packet_in")
        if fields is None:
            metadata, payload = {}, bytes(frame)
        else:
            try:
                metadata, payload = unpack_header(fields, frame)
            except ValueError:
                return  # a runt frame cannot carry the header: dropped, as BMv2 would misparse it
        for listener in list(self._packet_in_listeners):
            listener(payload, metadata)

    def add_packet_in_listener(self, callback):
        """Call ``callback(payload, {field: int})`` for every PacketIn."""
        self._packet_in_listeners.append(callback)

    def remove_packet_in_listener(self, callback):
        """Stop calling ``callback``."""
        if callback in self._packet_in_listeners:
            self._packet_in_listeners.remove(callback)

    def _on_digest(self, name, values):
        for listener in list(self._digest_listeners):
            listener(name, tuple(values))

    def add_digest_listener(self, callback):
        """Call ``callback(digest_name, values_tuple)`` for every digest the pipeline sends."""
        self._digest_listeners.append(callback)

    def remove_digest_listener(self, callback):
        """Stop calling ``callback``."""
        if callback in self._digest_listeners:
            self._digest_listeners.remove(callback)

    def close(self):
        """Release the wakeup pipe."""
        for fd in (self._wake_read, self._wake_write):
            try:
                os.close(fd)
            except OSError:
                pass


def check_extern_sizes(info):
    """Refuse a program whose counter, meter and register arrays exceed the target's limits.

    The cells are allocated when the pipeline is committed, so the sizes the program
    declares are checked before (see :mod:`testbed.p4runtime.limits`).

    Args:
        info: the program's :class:`~testbed.p4.program.ProgramInfo`.

    Raises:
        P4RuntimeError: INVALID_ARGUMENT naming the array, its size and the limit.
    """
    total = 0
    for kind, arrays in (("counter", info.counters), ("meter", info.meters), ("register", info.registers)):
        for name, array in arrays.items():
            if array.size > limits.MAX_EXTERN_CELLS:
                raise P4RuntimeError("INVALID_ARGUMENT",
                                     f"{kind} {name} has {array.size} cells, more than this target's limit "
                                     f"of {limits.MAX_EXTERN_CELLS} per array (MAX_EXTERN_CELLS)")
            total += array.size
    if total > limits.MAX_TOTAL_EXTERN_CELLS:
        raise P4RuntimeError("INVALID_ARGUMENT",
                             f"the program's counter, meter and register arrays have {total} cells in all, more "
                             f"than this target's limit of {limits.MAX_TOTAL_EXTERN_CELLS} "
                             f"(MAX_TOTAL_EXTERN_CELLS)")


def p4info_mismatches(client, ours):
    """Differences between a controller's P4Info and ours that would break id translation.

    Objects only one side has are tolerated (writes naming them fail with NOT_FOUND);
    an object both have must agree on its id, and tables, actions and controller
    headers on their fields.  Controller headers are compared by their fields only
    (their preamble id never appears in P4Runtime messages).

    Returns:
        list[str]: one message per object that differs.
    """
    problems = []
    for kind in ("tables", "actions", "action_profiles", "counters", "direct_counters", "meters",
                 "direct_meters", "registers", "digests", "controller_packet_metadata"):
        mine = {m.preamble.name: m for m in getattr(ours, kind)}
        for message in getattr(client, kind):
            name = message.preamble.name
            other = mine.get(name)
            if other is None:
                continue
            if kind != "controller_packet_metadata" and other.preamble.id != message.preamble.id:
                problems.append(f"{kind[:-1]} {name}: id {message.preamble.id} != {other.preamble.id}")
            if kind == "tables":
                a = [(f.id, f.name, f.bitwidth, f.match_type) for f in message.match_fields]
                b = [(f.id, f.name, f.bitwidth, f.match_type) for f in other.match_fields]
                if a != b:
                    problems.append(f"table {name}: match fields differ")
            elif kind == "actions":
                a = [(p.id, p.name, p.bitwidth) for p in message.params]
                b = [(p.id, p.name, p.bitwidth) for p in other.params]
                if a != b:
                    problems.append(f"action {name}: parameters differ")
            elif kind == "controller_packet_metadata":
                a = [(m.id, m.name, m.bitwidth) for m in message.metadata]
                b = [(m.id, m.name, m.bitwidth) for m in other.metadata]
                if a != b:
                    problems.append(f"controller header {name}: fields differ")
    return problems
