"""The embedded v1model switch with the native backend: the same :class:`Device`, C pipeline stages.

:class:`NativeDevice` keeps everything of :class:`~testbed.p4.v1model.device.Device` around the
pipeline (ports, traffic manager, packet generator, PRE lookups, loop guards, the order of
outputs) and replaces the pipeline stages: parse / ingress / egress / deparse run in the
program's compiled C (:mod:`testbed.p4.native.build`), on packets held in native memory, with
the tables, selectors, registers and counters in native memory (:mod:`testbed.p4.native.state`).
:meth:`NativeDevice.process` runs a plain unicast packet through the whole pipeline in one C
call (``tb_process``) and takes the general path for the rest.
"""
import os
from collections import deque

from testbed.errors import NativeBackendError, ParameterError
from testbed.p4.compiler.target_externs import TARGET_EXTERNS
from testbed.p4.native.build import build
from testbed.p4.native.dsf import NativeDSFTrafficManager
from testbed.p4.native.state import NativeState
from testbed.p4.v1model import runtime as RT
from testbed.p4.v1model.device import MAX_PASSES, Device, _EgressJob

#: names the DSF traffic manager native devices use (``native``, the default, or ``python``): a measurement knob
DSF_ENGINE_ENV = "TESTBED_DSF_ENGINE"
DSF_ENGINES = ("native", "python")
_MASK32 = (1 << 32) - 1
_MASK48 = (1 << 48) - 1
_OUT_SPACE = 65536 + 8192  # largest frame plus every header a program may add
_MAX_REQUESTS = 8  # TB_MAX_EXTERN_REQUESTS
_MAX_EXTERN_ARGS = 12  # TB_MAX_EXTERN_ARGS
_MAX_EVENTS = 16  # TB_MAX_EVENTS
_MAX_EVENT_VALUES = 16  # TB_MAX_EVENT_VALUES
_REQUEST_SPACE = 64  # a tb_request_t after the packet, 8-byte aligned (tb_packet_size is)

# tb_pipeline.h
TB_OK, TB_DROPPED, TB_HALT, TB_NEED_SPACE, TB_DROP, TB_CONTINUE = 0, 1, 2, 3, 4, 5
STAGES = {0x10: "ingress", 0x20: "ingress", 0x30: "egress", 0x40: "deparser"}
_STD_FIELDS = ("ingress_port", "egress_spec", "egress_port", "instance_type", "packet_length", "enq_timestamp",
               "enq_qdepth", "deq_timedelta", "deq_qdepth", "ingress_global_timestamp", "egress_global_timestamp",
               "mcast_grp", "egress_rid", "checksum_error", "parser_error", "priority")


class NativePacket:
    """One packet's headers and metadata in native memory (a ``tb_packet_t``) and its last TM request,
    with its frame kept alive."""

    __slots__ = ("ptr", "sm", "req", "frame", "_buffer")

    def __init__(self, library):
        ffi = library.ffi
        self._buffer = buffer = ffi.new("char[]", library.packet_size + _REQUEST_SPACE)
        self.ptr = ffi.cast("tb_packet_t *", buffer)
        self.req = ffi.cast("tb_request_t *", buffer + library.packet_size)
        self.sm = library.lib.tb_packet_std(self.ptr)
        self.frame = None


class _StdView:
    """``standard_metadata`` of a native packet with the attribute names of the Python target (``f_<name>``)."""

    __slots__ = ("_sm",)

    def __init__(self, sm):
        self._sm = sm


def _std_property(name):
    def get(view):
        return getattr(view._sm, name)

    def put(view, value):
        setattr(view._sm, name, value)
    return property(get, put)


for _name in _STD_FIELDS:
    setattr(_StdView, "f_" + _name, _std_property(_name))


class NativeDevice(Device):
    """A :class:`Device` whose pipeline stages run the program's generated C.

    Args: as :class:`Device`.

    Raises:
        NativeBackendError: the program has a construct the C backend cannot compile (file:line),
            or there is no C compiler / cffi.
    """

    backend = "native"
    #: where the DSF traffic manager runs: ``native`` (csrc/tb_dsf.c) or ``python`` (the reference, and
    #: then the switch forwards in the Python loop); read when the program first calls a DSF extern.
    #: ``$TESTBED_DSF_ENGINE`` sets it for every device made
    dsf_engine = "native"

    def __init__(self, program, state, **kwargs):
        engine = os.environ.get(DSF_ENGINE_ENV)
        if engine:
            if engine not in DSF_ENGINES:
                raise ParameterError(DSF_ENGINE_ENV, engine, " / ".join(DSF_ENGINES))
            self.dsf_engine = engine
        self.library = build(program)
        super().__init__(program, state, **kwargs)
        self.native = NativeState(self.library, state)
        lib, ffi = self.library.lib, self.library.ffi
        self._lib = lib
        self._ffi = ffi
        self._pl = self.native.pl
        self._seed_random(kwargs.get("seed", 0))
        # not cleared, so its pages stay out of memory until a frame larger than the ones before is deparsed
        self._out = ffi.new_allocator(should_clear_after_alloc=False)("uint8_t[]", _OUT_SPACE)
        self._out_len = ffi.new("int32_t *")
        self._scratch = NativePacket(self.library)
        self._extern_names = self.library.layout["target_externs"]
        self._uses_target_externs = self.library.layout["uses_target_externs"]
        self._request_nargs = [len(TARGET_EXTERNS[name]) for name in self._extern_names]
        self._request_ids = ffi.new("int32_t[]", _MAX_REQUESTS)
        self._request_args = ffi.new("uint64_t[]", _MAX_REQUESTS * _MAX_EXTERN_ARGS)
        self._event_sites = ffi.new("int32_t[]", _MAX_EVENTS)
        self._event_values = ffi.new("uint64_t[]", _MAX_EVENTS * _MAX_EVENT_VALUES)
        self._sites = self.library.layout["events"]

    # ------------------------------------------------------------------ public API
    def process(self, ingress_port, frame):
        """As :meth:`Device.process`; a plain unicast packet takes one C call."""
        with self._lock:
            if self.native.dirty:
                self.native.sync()
            if self.halted is not None:
                return super().process(ingress_port, frame)
            frame = bytes(frame)
            stats = self._port(ingress_port)
            stats.rx_packets += 1
            stats.rx_bytes += len(frame)
            now = self.clock_ns()
            pkt = self._scratch
            pkt.frame = frame
            status = self._lib.tb_process(self._pl, pkt.ptr, frame, len(frame), ingress_port, now,
                                          (now - self._start_ns) // 1000, self._out, _OUT_SPACE, self._out_len,
                                          pkt.req)
            if status == TB_OK:
                port = pkt.sm.egress_port
                data = self._ffi.buffer(self._out, self._out_len[0])[:]
                stats = self._port(port)
                stats.tx_packets += 1
                stats.tx_bytes += len(data)
                outputs = [(port, data)]
                if self.dsf is not None:  # what the DSF traffic manager made meanwhile, as Device.process runs it
                    pending = deque((port, made, RT.PKT_INSTANCE_TYPE_NORMAL, None, 0)
                                    for port, made in self.dsf.due(self.clock_ns()))
                    self._drain(pending, outputs)
                return outputs
            self._scratch = NativePacket(self.library)  # the packet goes on: keep its state
            stage, what = status & 0xF0, status & 0x0F
            outputs = []
            pending = deque()
            egress_queue = deque()
            if what == TB_DROP:
                self._port(pkt.sm.egress_port if stage == 0x30 else ingress_port).drops += 1
            elif what != TB_CONTINUE:
                self._stage_failed(STAGES.get(stage, "pipeline"), pkt.sm.egress_port if stage >= 0x30
                                   else ingress_port, what, pkt)
            elif stage == 0x40:
                self._events(pkt)  # log_msg lines of computeChecksum / the deparser: the frame is out
                data = self._ffi.buffer(self._out, self._out_len[0])[:]
                port = pkt.sm.egress_port
                stats = self._port(port)
                stats.tx_packets += 1
                stats.tx_bytes += len(data)
                outputs.append((port, data))
            elif stage == 0x20:
                egress_queue.extend(self._ingress_decisions(
                    pkt, (ingress_port, frame, RT.PKT_INSTANCE_TYPE_NORMAL, None, 0), pkt.req, pending, now))
            else:
                self._events(pkt)
                req = pkt.req
                truncate = req.truncate_length if req.truncate_length >= 0 else None
                job = _EgressJob(pkt, None, _StdView(pkt.sm), None, truncate, 0)
                self._egress_decisions(job, req, outputs, pending, egress_queue)
            self._drain(pending, outputs, egress_queue)
            return outputs

    def receive(self, ingress_port, frame):
        """As :meth:`Device.receive` (with the native state brought up to date first)."""
        with self._lock:
            if self.native.dirty:
                self.native.sync()
            super().receive(ingress_port, frame)

    def close(self):
        """Stop following the switch state (the native memory is freed with this object)."""
        self.native.close()

    def _seed_random(self, seed):
        """Seed the random() extern's generator as ``random.Random(seed)`` is seeded (the Python target's)."""
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise NativeBackendError(f"native backend: seed {seed!r}: only integer seeds (random.Random(int))")
        value = abs(seed)
        words = []
        while value:
            words.append(value & 0xFFFFFFFF)
            value >>= 32
        words = words or [0]
        self._lib.tb_random_seed(self._pl, self._ffi.new("uint32_t[]", words), len(words))

    # ------------------------------------------------------------------ stages
    def _events(self, pkt):
        """Deliver the log_msg lines of the last stage(s); return their digests ``[(name, values)]``."""
        if not self._sites:
            return []
        count = self._lib.tb_packet_events(pkt.ptr, self._event_sites, self._event_values, _MAX_EVENTS)
        digests = []
        for i in range(count):
            site = self._sites[self._event_sites[i]]
            start = i * _MAX_EVENT_VALUES
            if site["kind"] == "digest":
                digests.append((site["name"], tuple(self._event_values[start:start + site["count"]])))
            elif self.on_log is not None:
                values = []
                for (kind, width), value in zip(site["values"], self._event_values[start:start + len(site["values"])]):
                    if kind == "bool":
                        value = bool(value)
                    elif kind == "int" and value >> (width - 1):
                        value -= 1 << width
                    values.append(value)
                self.on_log(RT.format_log_message(site["message"], tuple(values)))
        return digests

    def _stage_failed(self, where, port, what, pkt):
        self._events(pkt)
        reason = self._ffi.string(self._lib.tb_packet_failure(pkt.ptr)).decode()
        if what == TB_HALT:
            self._halt(where, port, f"{reason}: simple_switch stops with std::out_of_range")
        elif what == TB_NEED_SPACE:
            self._internal_error(where, port, RuntimeError("deparsed frame larger than the output buffer"))
        else:
            self._log(f"{where} port {port}: packet dropped: {reason}")
            self._port(port).drops += 1

    def _new_packet(self):
        pkt = NativePacket(self.library)
        self._lib.tb_packet_reset(self._pl, pkt.ptr)
        return pkt

    def _run_ingress(self, item, pending):
        if self.native.dirty:
            self.native.sync()
        port, frame, instance_type, preserved, passes = item
        now = self.clock_ns()
        if instance_type == RT.PKT_INSTANCE_TYPE_NORMAL:
            stats = self._port(port)
            stats.rx_packets += 1
            stats.rx_bytes += len(frame)
        pkt = NativePacket(self.library)
        frame = bytes(frame)
        pkt.frame = frame
        status = self._lib.tb_run_ingress(
            self._pl, pkt.ptr, frame, len(frame), port, instance_type, now, (now - self._start_ns) // 1000,
            preserved[0].ptr if preserved is not None else self._ffi.NULL,
            preserved[1] if preserved is not None else -1, pkt.req)
        if status != TB_OK:
            self._stage_failed("ingress", port, status & 0x0F, pkt)
            return []
        return self._ingress_decisions(pkt, item, pkt.req, pending, now)

    def _ingress_decisions(self, pkt, item, req, pending, now):
        """End of ingress as simple_switch does it (see :class:`Device`); return egress jobs."""
        port, frame, _, _, passes = item
        sm = pkt.sm
        digests = self._events(pkt)
        requests = self._extern_requests(pkt)
        if requests:
            try:
                if self._native_extension_takes(pkt, requests, now):
                    return []
            except Exception as error:  # a fault of the extension must not stop the switch
                self._internal_error("target extension", port, error)
                return []
        truncate = req.truncate_length if req.truncate_length >= 0 else None
        jobs = []
        if req.clone_session >= 0:
            jobs.extend(self._native_i2e_clones(pkt, req, frame, port, passes))
        for name, values in digests:
            if self.on_digest is not None:
                self.on_digest(name, values)
        if req.resubmit_field_list >= 0:
            if passes + 1 >= MAX_PASSES:
                self._log(f"ingress port {port}: resubmitted {MAX_PASSES} times, dropped")
                return jobs
            pending.append((port, frame, RT.PKT_INSTANCE_TYPE_RESUBMIT, (pkt, req.resubmit_field_list), passes + 1))
            return jobs
        group = sm.mcast_grp
        if group:
            replicas = self.state.multicast_groups.replicas(group)
            if not replicas:
                self._port(port).drops += 1
            for egress_port, rid in replicas:
                copy = NativePacket(self.library)
                self._lib.tb_packet_copy(copy.ptr, pkt.ptr)
                copy.frame = pkt.frame
                copy.sm.egress_port = egress_port
                copy.sm.egress_rid = rid
                copy.sm.instance_type = RT.PKT_INSTANCE_TYPE_REPLICATION
                jobs.append(_EgressJob(copy, None, _StdView(copy.sm), None, truncate, passes))
            return jobs
        if sm.egress_spec == RT.DROP_PORT:
            self._port(port).drops += 1
            return jobs
        sm.egress_port = sm.egress_spec
        jobs.append(_EgressJob(pkt, None, _StdView(sm), None, truncate, passes))
        return jobs

    def _extern_requests(self, pkt):
        """The packet's calls of the target's own externs: ``((name, args), ...)`` in call order."""
        if not self._uses_target_externs:
            return ()
        count = self._lib.tb_packet_extern_requests(pkt.ptr, self._request_ids, self._request_args, _MAX_REQUESTS)
        requests = []
        for i in range(count):
            ident = self._request_ids[i]
            start = i * _MAX_EXTERN_ARGS
            requests.append((self._extern_names[ident],
                             tuple(self._request_args[start:start + self._request_nargs[ident]])))
        return tuple(requests)

    def _native_extension_takes(self, pkt, requests, now):
        """Hand the requests to the DSF traffic manager, as :meth:`Device._extension_takes` does."""
        def packet_bytes():
            n = self._lib.tb_deparse(self._pl, pkt.ptr, self._out, _OUT_SPACE)
            if n < 0:
                raise RuntimeError(f"deparser failed ({-n})")
            return self._ffi.buffer(self._out, n)[:]
        payload = pkt.frame[self._lib.tb_packet_payload_offset(pkt.ptr):]
        manager = self._dsf_manager()
        if isinstance(manager, NativeDSFTrafficManager):
            count = self._lib.tb_packet_extern_requests(pkt.ptr, self._request_ids, self._request_args,
                                                        _MAX_REQUESTS)
            return manager.handle_native(count, self._request_ids, self._request_args, packet_bytes, payload, now)
        return manager.handle(requests, packet_bytes, payload, now)

    def dsf_handle(self):
        """The native DSF traffic manager's ``tb_dsf_t *`` (made now if need be), for the native loop.

        Raises:
            NativeBackendError: :attr:`dsf_engine` is not ``native``.
        """
        with self._lock:
            manager = self._dsf_manager()
        if not isinstance(manager, NativeDSFTrafficManager):
            raise NativeBackendError(f"dsf_engine {self.dsf_engine!r}: the native loop needs 'native'")
        return manager.dsf

    def _dsf_manager(self):
        """The DSF traffic manager (:attr:`dsf_engine` says which), made at the first DSF extern call."""
        if self.dsf is None and self.dsf_engine == "native":
            self.dsf = NativeDSFTrafficManager(self.library, self.state, self.on_log, self._pl)
            if self._dsf_history is not None:
                self.dsf.record_history(*self._dsf_history)
        return super()._dsf_manager()

    def _native_i2e_clones(self, pkt, req, frame, port, passes):
        session = self.state.clone_sessions.get(req.clone_session)
        if session is None:
            return []
        jobs = []
        for egress_port, rid in session.replicas:
            clone = self._new_packet()
            if req.clone_field_list >= 0:
                self._lib.tb_preserve_fields(req.clone_field_list, pkt.ptr, clone.ptr)
            clone.sm.packet_length = len(frame)
            clone.sm.instance_type = RT.PKT_INSTANCE_TYPE_INGRESS_CLONE
            clone.frame = frame
            status = self._lib.tb_parse(self._pl, clone.ptr, frame, len(frame))
            if status == TB_HALT:
                self._stage_failed("clone parser", port, status, clone)
                return []
            if status != TB_OK:
                self._stage_failed("clone parser", port, status, clone)
                continue
            clone.sm.egress_port = egress_port
            clone.sm.egress_rid = rid
            jobs.append(_EgressJob(clone, None, _StdView(clone.sm), None, session.packet_length_bytes or None,
                                   passes))
        return jobs

    def _run_egress(self, job, outputs, pending, egress_queue, deq_ns):
        if self.native.dirty:
            self.native.sync()
        pkt = job.hdr
        sm = pkt.sm
        port = sm.egress_port
        now = self.clock_ns() if deq_ns is None else deq_ns
        sm.egress_spec = 0
        sm.egress_global_timestamp = ((now - self._start_ns) // 1000) & _MASK48
        status = self._lib.tb_egress(self._pl, pkt.ptr, now, pkt.req)
        if status != TB_OK:
            self._stage_failed("egress", port, status, pkt)
            return
        self._events(pkt)
        req = pkt.req
        if req.truncate_length < 0:
            req.truncate_length = -1 if job.truncate is None else job.truncate
        self._egress_decisions(job, req, outputs, pending, egress_queue)

    def _egress_decisions(self, job, req, outputs, pending, egress_queue):
        """End of egress as simple_switch does it (see :class:`Device`)."""
        pkt = job.hdr
        sm = pkt.sm
        port = sm.egress_port
        truncate = req.truncate_length if req.truncate_length >= 0 else None
        if req.clone_session >= 0:
            session = self.state.clone_sessions.get(req.clone_session)
            if session is not None:
                for clone_port, rid in session.replicas:
                    clone = self._new_packet()
                    self._lib.tb_packet_copy_headers(clone.ptr, pkt.ptr)
                    clone.frame = pkt.frame
                    clone.sm.packet_length = sm.packet_length
                    clone.sm.instance_type = RT.PKT_INSTANCE_TYPE_EGRESS_CLONE
                    clone.sm.egress_port = clone_port
                    clone.sm.egress_rid = rid
                    if req.clone_field_list >= 0:
                        self._lib.tb_preserve_fields(req.clone_field_list, pkt.ptr, clone.ptr)
                    egress_queue.append(_EgressJob(clone, None, _StdView(clone.sm), None,
                                                   session.packet_length_bytes or truncate, job.passes))
        if sm.egress_spec == RT.DROP_PORT:
            self._port(port).drops += 1
            return
        n = self._lib.tb_deparse(self._pl, pkt.ptr, self._out, _OUT_SPACE)
        if n < 0:
            self._stage_failed("deparser", port, -n, pkt)
            return
        self._events(pkt)
        recirculation = (pkt, req.recirculate_field_list) if req.recirculate_field_list >= 0 else None
        self._egress_end(job, port, self._ffi.buffer(self._out, n)[:], truncate, recirculation, sm.ingress_port,
                         pending, outputs)
