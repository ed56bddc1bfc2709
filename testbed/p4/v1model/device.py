"""The embedded v1model switch: a compiled P4 program run like BMv2 simple_switch.

A packet goes through parser -> verifyChecksum -> ingress -> packet replication
engine / traffic manager -> egress -> computeChecksum -> deparser.  At the end
of ingress and egress the device does what simple_switch's pseudocode says
(docs/simple_switch.md of p4lang/behavioral-model):

end of ingress: I2E clone (one copy per replica of the clone session: the original
bytes parsed again with reset metadata plus the @field_list fields, instance_type 1);
digests; resubmit (the original packet
again, instance_type 6, preserving the @field_list fields) and nothing else;
else multicast (mcast_grp != 0: one copy per replica with egress_rid, instance_type 5);
else drop when egress_spec == 511 (mark_to_drop); else unicast to egress_spec.

end of egress: E2E clone (copy of the packet as egress left it, instance_type 2);
drop when egress_spec == 511; deparse; truncate; recirculate (the deparsed
packet back to ingress, instance_type 4) or transmit.

Two modes: :meth:`Device.process` runs a frame through the whole pipeline
synchronously; :meth:`Device.receive` / :meth:`Device.transmit_ready` put the
traffic manager's per-port queues (rate, depth, priorities) between ingress and
egress so queue depths and delays are real.

Target extensions: a program calling the embedded target's own externs
(``@embedded_only``: the DSF traffic manager of p4src/include/dsf.p4) has
them carried out at the end of ingress by :attr:`Device.dsf` (created on the
first call); the frames it makes enter ingress again on its internal ports,
in :meth:`Device.transmit_ready` (queued mode) or :meth:`Device.process`.

Priority flow control (queued mode, when the traffic manager has PFC on, see
:mod:`testbed.p4.v1model.traffic_manager`): a PFC PAUSE frame arriving on a
port is consumed there (a MAC control frame never enters the parser) and
pauses that port's egress queues; the PAUSE frames the traffic manager asks
for leave on their port ahead of the queues, from the port's MAC address
:func:`pause_source_mac`.  With PFC off, such frames go through the pipeline
as on BMv2.  The program reads the PFC counters over P4Runtime when it
declares them (:data:`PFC_COUNTERS`).
"""
import random
import threading
import time
from collections import deque

from testbed.p4.v1model import runtime as RT
from testbed.p4.v1model.dsf.engine import DSFTrafficManager
from testbed.p4.v1model.packet_generator import PacketGenerator
from testbed.p4.v1model.pfc import PFC_ETHERTYPE, PRIORITIES, build_pause, parse_pause
from testbed.p4.v1model.traffic_manager import DEFAULT_DEPTH_PACKETS, TrafficManager

MAX_PASSES = 32  # resubmits + recirculations of one packet before it is dropped (loop guard)
_MASK32 = (1 << 32) - 1
_MASK48 = (1 << 48) - 1
_PFC_ETHERTYPE_BYTES = PFC_ETHERTYPE.to_bytes(2, "big")

#: Indexed counters a program may declare (``counter(N * 8, CounterType.packets_and_bytes)``,
#: any control, matched by the name's last component) that the device keeps equal to the
#: traffic manager's PFC counters of port ``index // 8``, priority ``index % 8``, within
#: :data:`PFC_COUNTER_PERIOD_NS` (packets column; bytes column: the frames' bytes, or 0):
#: PAUSE frames with quanta > 0 sent and received, resumes (quanta 0) sent, and the time
#: the port's egress queue of that priority was paused, in microseconds.
PFC_COUNTERS = {"pfc_pause_sent": "pause_sent", "pfc_pause_received": "pause_received",
                "pfc_resume_sent": "resume_sent", "pfc_paused_us": "paused_ns"}
PFC_COUNTER_PERIOD_NS = 10_000_000
_PAUSE_FRAME_BYTES = 60
# packets counted against their ingress port under PFC: the received ones and their multicast copies
_INGRESS_ACCOUNTED = (RT.PKT_INSTANCE_TYPE_NORMAL, RT.PKT_INSTANCE_TYPE_REPLICATION)


def pause_source_mac(port):
    """The source MAC address of PAUSE frames the switch sends on ``port`` (locally administered).

    >>> pause_source_mac(3).hex()
    '02fc00000003'
    """
    return b"\x02\xfc" + port.to_bytes(4, "big")


class _EgressJob:
    """A packet between ingress and egress."""

    __slots__ = ("hdr", "meta", "sm", "payload", "truncate", "passes")

    def __init__(self, hdr, meta, sm, payload, truncate, passes):
        self.hdr = hdr
        self.meta = meta
        self.sm = sm
        self.payload = payload
        self.truncate = truncate
        self.passes = passes


class _PortStats:
    __slots__ = ("rx_packets", "rx_bytes", "tx_packets", "tx_bytes", "drops")

    def __init__(self):
        self.rx_packets = 0
        self.rx_bytes = 0
        self.tx_packets = 0
        self.tx_bytes = 0
        self.drops = 0


class Device:
    """One embedded P4 switch.

    Args:
        program: a LoadedProgram (``testbed.p4.loader.load_program``).
        state: the switch's :class:`testbed.p4.state.SwitchState` (tables, externs, PRE).
        cpu_port: the CPU port number (an ordinary port to the pipeline), or None.
        seed: seed of the random() extern.
        on_digest: callable(name, values tuple) called for each digest, or None.
        on_log: callable(str) for log_msg and pipeline problems, or None.
        clock_ns: monotonic clock in nanoseconds (timestamps, meters, queues).
        raise_errors: re-raise unexpected exceptions of the generated code (tests); by default
            they are logged through ``on_log`` and the packet is dropped, so one bad packet
            cannot stop a switch.
        packet_generator: the switch's :class:`~testbed.p4.v1model.packet_generator.PacketGenerator`
            (kept across pipeline changes by its owner), or None for a new one on ``clock_ns``.
            In queued mode its frames enter ingress when due (:meth:`transmit_ready`).
    """

    backend = "python"

    def __init__(self, program, state, cpu_port=None, seed=0, on_digest=None, on_log=None,
                 clock_ns=time.monotonic_ns, raise_errors=False, packet_generator=None):
        if program.compiled is None:
            raise ValueError("program was loaded without code generation")
        self.program = program
        self.state = state
        self.cpu_port = cpu_port
        self.on_digest = on_digest
        self.on_log = on_log
        self.clock_ns = clock_ns
        self.rng = random.Random(seed)
        namespace = program.compiled.instantiate(state, self.rng, on_log)
        self._parser = namespace["parser"]
        self._verify = namespace["verify_checksum"]
        self._ingress = namespace["ingress"]
        self._egress = namespace["egress"]
        self._compute = namespace["compute_checksum"]
        self._deparser = namespace["deparser"]
        self._new_headers = namespace["new_headers"]
        self._new_metadata = namespace["new_metadata"]
        self._new_sm = namespace["new_standard_metadata"]
        self._preserve = namespace["preserve_fields"]
        self._start_ns = clock_ns()  # time zero of the pipeline's timestamps (as BMv2: since start)
        self.tm = TrafficManager(clock_ns=clock_ns)
        self._pfc_counters = {}
        for name, counter in state.counters.items():
            column = PFC_COUNTERS.get(name.rsplit(".", 1)[-1])
            if column is not None:
                self._pfc_counters[column] = counter
        self._pfc_counters_synced = 0
        self.packet_generator = packet_generator or PacketGenerator(clock_ns)
        self.dsf = None  # the DSF traffic manager, once the program calls its externs
        self._dsf_history = None  # record_dsf_history's arguments, for a DSF traffic manager made later
        self._stats = {}
        self._lock = threading.RLock()
        self.raise_errors = raise_errors
        self.errors = 0
        self.halted = None  # why the switch stopped, as simple_switch would (RT.TargetAbort), else None

    # ------------------------------------------------------------------ public API

    @property
    def clock_origin_ns(self):
        """The ``clock_ns`` value at which the pipeline's timestamps (``*_global_timestamp``, in us) are 0."""
        return self._start_ns

    def process(self, ingress_port, frame):
        """Run ``frame`` through the whole pipeline without queueing.

        Returns:
            list of (egress_port, frame bytes) in the order produced.
        """
        with self._lock:
            outputs = []
            if self.halted is not None:
                self._port(ingress_port).drops += 1
                return outputs
            pending = deque([(ingress_port, bytes(frame), RT.PKT_INSTANCE_TYPE_NORMAL, None, 0)])
            self._drain(pending, outputs)
            return outputs

    def _drain(self, pending, outputs, egress_queue=None):
        """Run packets to their end without queueing: ``egress_queue``'s jobs first, then each pending packet.

        Frames the DSF traffic manager makes meanwhile are run too (they enter ingress).
        """
        while self.halted is None:
            if egress_queue is None:
                if not pending:
                    break
                egress_queue = deque(self._run_ingress(pending.popleft(), pending))
            while egress_queue and self.halted is None:
                job = egress_queue.popleft()
                self._run_egress(job, outputs, pending, egress_queue, None)
            egress_queue = None
            if not pending and self.dsf is not None:
                pending.extend((port, made, RT.PKT_INSTANCE_TYPE_NORMAL, None, 0)
                               for port, made in self.dsf.due(self.clock_ns()))

    def receive(self, ingress_port, frame):
        """Queued mode: run parser..ingress and enqueue the result on its egress queue(s).

        With PFC on, a PFC PAUSE frame is honoured by the port's egress queues instead.
        """
        with self._lock:
            if frame[12:14] == _PFC_ETHERTYPE_BYTES and self.tm.pfc is not None:
                quanta = parse_pause(frame)
                if quanta is not None:
                    stats = self._port(ingress_port)
                    stats.rx_packets += 1
                    stats.rx_bytes += len(frame)
                    self.tm.receive_pause(ingress_port, quanta)
                    return
            if self.halted is not None:
                self._port(ingress_port).drops += 1
                return
            pending = deque([(ingress_port, bytes(frame), RT.PKT_INSTANCE_TYPE_NORMAL, None, 0)])
            while pending:
                for job in self._run_ingress(pending.popleft(), pending):
                    self._enqueue(job)

    def transmit_ready(self, now_ns=None):
        """Queued mode: inject due generator frames, dequeue what the port rates allow, run egress.

        Returns:
            list of (egress_port, frame bytes).
        """
        with self._lock:
            for port, frame in self.packet_generator.due(now_ns):
                self.receive(port, frame)
            self._receive_extension_frames(now_ns)
            outputs = []
            if self.halted is not None:
                return outputs
            pending = deque()
            for departure in self.tm.dequeue_ready(now_ns):
                job = departure.item
                sm = job.sm
                sm.f_enq_timestamp = ((departure.enq_timestamp_ns - self._start_ns) // 1000) & _MASK32
                sm.f_enq_qdepth = departure.enq_qdepth & 0x7FFFF
                sm.f_deq_timedelta = (departure.deq_timedelta_ns // 1000) & _MASK32
                sm.f_deq_qdepth = departure.deq_qdepth & 0x7FFFF
                clones = deque()
                self._run_egress(job, outputs, pending, clones, departure.deq_timestamp_ns)
                for clone in clones:
                    self._enqueue(clone)
            while pending:
                for job in self._run_ingress(pending.popleft(), pending):
                    self._enqueue(job)
            if self.tm.pfc is not None:
                self._send_pauses(outputs, now_ns)
            return outputs

    def _send_pauses(self, outputs, now_ns):
        """Put the PAUSE frames the traffic manager asks for first in ``outputs``; keep the counters."""
        frames = self.tm.pause_frames(now_ns)
        if frames:
            pauses = [(port, build_pause(pause_source_mac(port), [(priority, quanta)]))
                      for _ns, port, priority, quanta in frames]
            for port, frame in pauses:
                stats = self._port(port)
                stats.tx_packets += 1
                stats.tx_bytes += len(frame)
            outputs[:0] = pauses
        if self._pfc_counters:
            now = self.clock_ns() if now_ns is None else now_ns
            if frames or now - self._pfc_counters_synced >= PFC_COUNTER_PERIOD_NS:
                self._pfc_counters_synced = now
                self.sync_pfc_counters(now)

    @property
    def has_pfc_counters(self):
        """True when the program declares some of :data:`PFC_COUNTERS`."""
        return bool(self._pfc_counters)

    def sync_pfc_counters(self, now_ns=None, tm=None):
        """Copy the traffic manager's PFC counters into the program's :data:`PFC_COUNTERS`.

        Args:
            now_ns: the time the paused times run to; None reads the clock.
            tm: the traffic manager to read (default: the device's; a native packet loop has its own).
        """
        tm = self.tm if tm is None else tm
        for port in tm.ports():
            stats = tm.pfc_stats(port, now_ns)
            for column, counter in self._pfc_counters.items():
                values = stats[column]
                for priority in range(PRIORITIES):
                    index = port * PRIORITIES + priority
                    if index < counter.info.size:
                        value = values[priority]
                        if column == "paused_ns":
                            counter.packets[index], counter.bytes[index] = value // 1000, 0
                        else:
                            counter.packets[index] = value
                            counter.bytes[index] = value * _PAUSE_FRAME_BYTES

    def next_departure_ns(self):
        """When :meth:`transmit_ready` will next have work (None: queues empty and no generator frame due)."""
        times = [t for t in (self.tm.next_departure_ns(), self.packet_generator.next_due_ns(),
                             self.tm.next_pause_ns() if self.tm.pfc is not None else None) if t is not None]
        if self.dsf is not None:
            due = self.dsf.next_event_ns()
            if due is not None:
                times.append(due)
        return min(times) if times else None

    def _receive_extension_frames(self, now_ns):
        """Queued mode: run the DSF traffic manager's timers and feed the frames it made to ingress."""
        if self.dsf is None:
            return
        now = self.clock_ns() if now_ns is None else now_ns
        for _ in range(MAX_PASSES):  # cells may trigger more (a grant releases data cells)
            frames = self.dsf.due(now)
            if not frames:
                return
            for port, frame in frames:
                self.receive(port, frame)

    def _dsf_manager(self):
        """The DSF traffic manager, made when the program first calls one of its externs (every backend)."""
        if self.dsf is None:
            self.dsf = DSFTrafficManager(self.state, self.on_log)
            if self._dsf_history is not None:
                self.dsf.record_history(*self._dsf_history)
        return self.dsf

    def _extension_takes(self, P, hdr, meta):
        """Carry out the packet's calls of the target's own externs; True when one took the packet."""
        def packet_bytes():
            self._compute(P, hdr, meta)
            out = []
            self._deparser(P, out, hdr)
            return b"".join(out) + P.payload
        return self._dsf_manager().handle(P.extern_requests, packet_bytes, P.payload, P.now_ns)

    def record_dsf_history(self, names, start_ns, period_ns, capacity):
        """Have the DSF traffic manager note counters ``names`` at ``start_ns + k * period_ns`` (device clock),
        holding at most ``capacity`` notes between reads (:mod:`testbed.p4.v1model.dsf.history`)."""
        with self._lock:
            self._dsf_history = (tuple(names), start_ns, period_ns, capacity)
            if self.dsf is not None:
                self.dsf.record_history(*self._dsf_history)

    def dsf_history(self, max_bytes):
        """``(notes, overflows, more)``: the DSF counter notes taken so far (removed; as many as fit in
        ``max_bytes`` of JSON), how many were dropped for want of reading, and whether more are left;
        ``([], 0, False)`` before the first DSF packet."""
        with self._lock:
            history = self.dsf.history if self.dsf is not None else None
            if history is None:
                return [], 0, False
            history.before(self.clock_ns())
            return history.drain(max_bytes=max_bytes), history.overflows, bool(history.notes)

    def set_pfc(self, config):
        """Turn PFC on with a :class:`~testbed.p4.v1model.pfc.PfcConfig` (None: off); see TrafficManager.set_pfc."""
        self.tm.set_pfc(config)

    def set_queue(self, port, rate_pps=None, rate_bps=None, depth_packets=DEFAULT_DEPTH_PACKETS, priorities=1):
        """Configure the egress queue of ``port`` (see TrafficManager.set_queue)."""
        self.tm.set_queue(port, rate_pps=rate_pps, rate_bps=rate_bps, depth_packets=depth_packets,
                          priorities=priorities)

    def port_stats(self, port):
        """Counters of ``port``: rx/tx packets and bytes, pipeline drops, queue depth and queue stats."""
        stats = self._stats.get(port) or _PortStats()
        result = {
            "rx_packets": stats.rx_packets, "rx_bytes": stats.rx_bytes,
            "tx_packets": stats.tx_packets, "tx_bytes": stats.tx_bytes,
            "drops": stats.drops, "queue_depth": self.tm.depth(port),
        }
        try:
            result["queue"] = self.tm.stats(port)
        except Exception:  # a port that never had a queue
            result["queue"] = {}
        return result

    # ------------------------------------------------------------------ internals
    def _port(self, port):
        stats = self._stats.get(port)
        if stats is None:
            stats = self._stats[port] = _PortStats()
        return stats

    def _log(self, message):
        if self.on_log is not None:
            self.on_log(message)

    def _halt(self, where, port, error):
        """The program did what stops simple_switch (RT.TargetAbort): stop forwarding for good."""
        self.halted = f"{where} port {port}: {error}"
        self._port(port).drops += 1
        self._log(f"switch halted: {self.halted}")

    def _internal_error(self, where, port, error):
        self.errors += 1
        self._port(port).drops += 1
        self._log(f"{where} port {port}: internal error, packet dropped: {type(error).__name__}: {error}")
        if self.raise_errors:
            raise error

    def _parse(self, P, frame, hdr, meta, sm):
        error = self._parser(P, frame, hdr, meta, sm)
        sm.f_parser_error = error
        P.payload = frame[P.parser_offset:]

    def _run_ingress(self, item, pending):
        """Parser, verifyChecksum, ingress and the end-of-ingress decisions; return egress jobs."""
        port, frame, instance_type, preserved, passes = item
        now = self.clock_ns()
        if instance_type == RT.PKT_INSTANCE_TYPE_NORMAL:
            stats = self._port(port)
            stats.rx_packets += 1
            stats.rx_bytes += len(frame)
        sm = self._new_sm()
        sm.f_ingress_port = port
        sm.f_packet_length = len(frame)
        sm.f_instance_type = instance_type
        sm.f_ingress_global_timestamp = ((now - self._start_ns) // 1000) & _MASK48
        hdr = self._new_headers()
        meta = self._new_metadata()
        P = RT.PacketContext(sm, now, self.on_log)
        try:
            self._parse(P, frame, hdr, meta, sm)
            if preserved is not None:
                self._preserve(preserved[1], preserved[0], meta)
            self._verify(P, hdr, meta)
            self._ingress(P, hdr, meta, sm)
        except RT.TargetAbort as error:
            self._halt("ingress", port, error)
            return []
        except (RT.P4AssertionError, IndexError) as error:
            self._log(f"ingress port {port}: packet dropped: {error}")
            self._port(port).drops += 1
            return []
        except Exception as error:  # a fault of the generated code must not stop the switch
            self._internal_error("ingress", port, error)
            return []
        if P.extern_requests is not None:
            try:
                if self._extension_takes(P, hdr, meta):
                    return []
            except Exception as error:  # a fault of the extension must not stop the switch
                self._internal_error("target extension", port, error)
                return []
        jobs = []
        if P.clone_session is not None:
            jobs.extend(self._i2e_clones(P, frame, meta, port, passes))
        for name, values in P.digests:
            if self.on_digest is not None:
                self.on_digest(name, values)
        if P.resubmit_field_list is not None:
            if passes + 1 >= MAX_PASSES:
                self._log(f"ingress port {port}: resubmitted {MAX_PASSES} times, dropped")
                return jobs
            pending.append((port, frame, RT.PKT_INSTANCE_TYPE_RESUBMIT, (meta, P.resubmit_field_list), passes + 1))
            return jobs
        group = sm.f_mcast_grp
        if group:
            replicas = self.state.multicast_groups.replicas(group)
            if not replicas:
                self._port(port).drops += 1  # an unknown or empty group: nothing to send
            for egress_port, rid in replicas:
                sm_copy = self._copy_sm(sm)
                sm_copy.f_egress_port = egress_port
                sm_copy.f_egress_rid = rid
                sm_copy.f_instance_type = RT.PKT_INSTANCE_TYPE_REPLICATION
                jobs.append(_EgressJob(hdr.copy(), meta.copy(), sm_copy, P.payload, P.truncate_length, passes))
            return jobs
        if sm.f_egress_spec == RT.DROP_PORT:
            self._port(port).drops += 1
            return jobs
        sm.f_egress_port = sm.f_egress_spec
        jobs.append(_EgressJob(hdr, meta, sm, P.payload, P.truncate_length, passes))
        return jobs

    def _copy_sm(self, sm):
        copy = self._new_sm()
        copy.copy_from(sm)
        return copy

    def _i2e_clones(self, P, frame, meta, port, passes):
        """Copies of the packet as it entered ingress, one per replica of the clone session.

        As simple_switch does: the copy's metadata are reset (ingress_port is 0), the
        @field_list fields are copied from the original, instance_type is set, and then
        the original bytes are parsed again.
        """
        session = self.state.clone_sessions.get(P.clone_session)
        if session is None:
            return []
        jobs = []
        for egress_port, rid in session.replicas:
            sm = self._new_sm()
            hdr = self._new_headers()
            clone_meta = self._new_metadata()
            if P.clone_field_list is not None:
                self._preserve(P.clone_field_list, meta, clone_meta)
            sm.f_packet_length = len(frame)
            sm.f_instance_type = RT.PKT_INSTANCE_TYPE_INGRESS_CLONE
            P2 = RT.PacketContext(sm, P.now_ns, self.on_log)
            try:
                self._parse(P2, frame, hdr, clone_meta, sm)
            except RT.TargetAbort as error:
                self._halt("clone parser", port, error)
                return []
            except Exception as error:
                self._internal_error("clone parser", port, error)
                continue
            sm.f_egress_port = egress_port
            sm.f_egress_rid = rid
            truncate = session.packet_length_bytes or None
            jobs.append(_EgressJob(hdr, clone_meta, sm, P2.payload, truncate, passes))
        return jobs

    def _enqueue(self, job):
        sm = job.sm
        port = sm.f_egress_port
        nbytes = sm.f_packet_length
        ingress = sm.f_ingress_port if sm.f_instance_type in _INGRESS_ACCOUNTED else None
        depth = self.tm.enqueue(port, job, nbytes, sm.f_priority, ingress_port=ingress)
        if depth is None:
            self._port(port).drops += 1

    def _run_egress(self, job, outputs, pending, egress_queue, deq_ns):
        hdr, meta, sm = job.hdr, job.meta, job.sm
        port = sm.f_egress_port
        now = self.clock_ns() if deq_ns is None else deq_ns
        sm.f_egress_spec = 0
        sm.f_egress_global_timestamp = ((now - self._start_ns) // 1000) & _MASK48
        P = RT.PacketContext(sm, now, self.on_log)
        P.payload = job.payload
        P.truncate_length = job.truncate
        try:
            self._egress(P, hdr, meta, sm)
        except RT.TargetAbort as error:
            self._halt("egress", port, error)
            return
        except (RT.P4AssertionError, IndexError) as error:
            self._log(f"egress port {port}: packet dropped: {error}")
            self._port(port).drops += 1
            return
        except Exception as error:
            self._internal_error("egress", port, error)
            return
        if P.clone_session is not None:
            session = self.state.clone_sessions.get(P.clone_session)
            if session is not None:
                for clone_port, rid in session.replicas:
                    clone_sm = self._new_sm()  # metadata reset, as simple_switch does
                    clone_sm.f_packet_length = sm.f_packet_length
                    clone_sm.f_instance_type = RT.PKT_INSTANCE_TYPE_EGRESS_CLONE
                    clone_sm.f_egress_port = clone_port
                    clone_sm.f_egress_rid = rid
                    clone_meta = self._new_metadata()
                    if P.clone_field_list is not None:
                        self._preserve(P.clone_field_list, meta, clone_meta)
                    egress_queue.append(_EgressJob(hdr.copy(), clone_meta, clone_sm, P.payload,
                                                   session.packet_length_bytes or P.truncate_length, job.passes))
        if sm.f_egress_spec == RT.DROP_PORT:
            self._port(port).drops += 1
            return
        try:
            self._compute(P, hdr, meta)
            out = []
            self._deparser(P, out, hdr)
        except RT.TargetAbort as error:
            self._halt("deparser", port, error)
            return
        except (RT.P4AssertionError, IndexError) as error:
            self._log(f"egress port {port}: packet dropped: {error}")
            self._port(port).drops += 1
            return
        except Exception as error:
            self._internal_error("deparser", port, error)
            return
        recirculation = None if P.recirculate_field_list is None else (meta, P.recirculate_field_list)
        self._egress_end(job, port, b"".join(out) + P.payload, P.truncate_length, recirculation, sm.f_ingress_port,
                         pending, outputs)

    def _egress_end(self, job, port, data, truncate, recirculation, ingress_port, pending, outputs):
        """The deparsed frame ``data`` of ``job`` leaves egress: cut to ``truncate`` bytes (None: whole),
        then back into ingress on ``ingress_port`` when ``recirculation`` (what the recirculated packet
        keeps: (metadata, field list)) is given, at most MAX_PASSES times, else out of ``port``."""
        if truncate is not None and truncate < len(data):
            data = data[:truncate]
        if recirculation is not None:
            if job.passes + 1 >= MAX_PASSES:
                self._log(f"egress port {port}: recirculated {MAX_PASSES} times, dropped")
                return
            pending.append((ingress_port, data, RT.PKT_INSTANCE_TYPE_RECIRC, recirculation, job.passes + 1))
            return
        stats = self._port(port)
        stats.tx_packets += 1
        stats.tx_bytes += len(data)
        outputs.append((port, data))
