"""The switch process's forwarding with the native packet loop, for pipelines of the native backend.

:class:`NativeSwitchDaemon` is :class:`~testbed.embedded_switch.switchd.SwitchDaemon` (same
arguments, control requests, impairments, stop) whose packet path is a
:class:`~testbed.embedded_switch.native_io.NativeLoop` while the target's pipeline is the native
backend's; with a Python pipeline it is the Python loop unchanged.  Python does only what the
loop hands back or what control asks:

* PacketIn: frames the loop punts to the CPU port go to the target's listeners;
* PacketOut: a watcher thread injects the target's pending frames into the loop's ingress;
* the loop runs in a native thread of its own (:meth:`NativeLoop.start`): frames, queues, timers and
  the packet generator never wait for Python; the main thread waits for what the loop notes
  (:meth:`NativeLoop.wait`) and does the rest;
* P4Runtime writes change the Python state; the native state's watchers mark what changed and
  wake the main thread, which reads it and copies it into native memory (``NativeState.sync``), the
  copy under the loop's lock, between two batches; multicast groups and clone sessions are copied
  when they differ;
* port loss and delay (``port_control``) are the loop's; so is the packet generator's timer: the
  target's ``PacketGenerator`` is attached to the loop's (``pktgen.c``), which injects the frames
  when due without Python (configuration and status stay the target's); a port shaped with tc
  sends through an AF_PACKET socket (AF_XDP's transmit would bypass the shaping); a port whose
  device takes no XDP program (VXLAN) receives and sends through AF_PACKET sockets, with one
  warning line naming it and why;
* port queues and priority flow control (``queue``, ``pfc``, ``pfc_status``) are the loop's traffic
  manager's: it consumes the PAUSE frames arriving on the ports and sends its own
  (:func:`~testbed.p4.v1model.pfc.build_pause` from :func:`~testbed.p4.v1model.device.pause_source_mac`);
  the program's PFC counters (:data:`~testbed.p4.v1model.device.PFC_COUNTERS`) are copied from it
  every ``PFC_COUNTER_PERIOD_NS``;
* a new pipeline (SetForwardingPipelineConfig) replaces the loop's pipeline (queued packets are
  dropped with the old program, as they are when a Python switch changes program).

Not carried: pcaps of the ports (``--pcap-dir`` keeps the Python loop), the embedded target's own
externs (DSF: a program that calls one keeps the Python loop, whose DSF traffic manager serves them;
should the loop still meet one, it drops that packet and the switch goes back to the Python loop for
that pipeline), frames over 2,048 bytes.  Digests and log_msg lines come back
from the loop as events and go to the device's callbacks.
"""
import os
import select
import sys
import threading
import time

from testbed.embedded_switch import native_io
from testbed.embedded_switch.switchd import SwitchDaemon
from testbed.p4.v1model import runtime as RT
from testbed.p4.v1model.device import PFC_COUNTER_PERIOD_NS, pause_source_mac
from testbed.p4.v1model.pfc import build_pause

__all__ = ["NativeSwitchDaemon", "native_loop_applies", "native_loop_refused", "deliver_events"]

IDLE_TIMEOUT_MS = 100  # how often an idle loop looks at the replication engine
#: AF_XDP ring size per port: a burst the kernel can queue while the loop waits for a core (as many
#: frames as a Python switch's default socket buffer holds at 64 bytes); each receive frame is 2 KiB
#: of resident memory per port
RING_SIZE = int(os.environ.get("TESTBED_NATIVE_RING", "256"))
#: how long a Write or pipeline RPC waits at most for the loop to forward with it (normally one wake-up)
CATCH_UP_S = 5.0
#: how long a Write or pipeline RPC waits at most for the ports to be opened (the kernel attaches XDP
#: programs one at a time, 5-13 ms each: a k=8 FatTree's 640 ports take seconds)
OPEN_WAIT_S = 60.0
#: the switch process's GIL switch interval (Python's default: 5 ms).  The main thread copies a write
#: into native memory under the loop's lock, and returning from each C call there it waits for the GIL,
#: which the P4Runtime server's thread holds while it decodes the next Write: up to this long each time,
#: with the loop stopped
GIL_SWITCH_INTERVAL_S = 0.0005


def native_loop_refused(device, pcap):
    """True when the switch must forward with the Python loop: ``device`` (None before a pipeline) is
    not one :func:`native_loop_applies` to, or there are pcaps.

    >>> native_loop_refused(None, None)
    False
    """
    return pcap is not None or (device is not None and not native_loop_applies(device, pcap))


def native_loop_applies(device, pcap):
    """True when ``device`` (the target's real device) can run in the native loop.

    >>> native_loop_applies(None, None)
    False
    """
    native = getattr(device, "native", None)
    library = getattr(device, "library", None)
    if native is None or library is None or pcap is not None:
        return False
    if getattr(device, "needs_python_loop", False):
        return False
    # the DSF externs run in the loop with the device's native DSF traffic manager (tbio_dsf.h)
    return not library.layout.get("uses_target_externs") or getattr(device, "dsf_engine", None) == "native"


class _Injector:
    """What ``EmbeddedTarget.inject_pending`` feeds PacketOuts to: the loop's ingress."""

    def __init__(self, loop):
        self.loop = loop

    def receive(self, port, frame):
        self.loop.inject(port, frame)


class NativeSwitchDaemon(SwitchDaemon):
    """A :class:`SwitchDaemon` forwarding in native code when the pipeline allows (see the module)."""

    def __init__(self, target, ports, pcap_dir=None, name="switch", seed=0, control_path=None):
        super().__init__(target, ports, pcap_dir=pcap_dir, name=name, seed=seed, control_path=control_path)
        self.seed = seed
        self.loop = None
        self._device = None
        self._pre = (None, None)
        self._watched = []
        self._stopped = False
        self._read_natively = set()  # ports the native loop read through AF_PACKET (no XDP there)
        # a Write RPC or a new pipeline is answered once the loop forwards with it (see _wait_until_current)
        self._caught_up = threading.Condition()
        self._changes_seen = 0     # write batches and pipelines the P4Runtime server reported
        self._changes_current = 0  # of those, the ones the loop forwards with
        # the ports are opened in a thread of their own from now on: the switch says it is ready at once and
        # builds a pipeline pushed meanwhile, while the kernel attaches the ports' XDP programs (one port of
        # one switch at a time); a pipeline or Write RPC is answered once the loop forwards with it
        self._loop_started = threading.Event()  # the native loop ran (or will not): RPCs stop waiting for it
        self._opening = None
        if native_loop_refused(self._real_device(), pcap_dir):
            self._loop_started.set()
        else:
            self._opening = _Opening(self._open_loop)
        self.target.add_pipeline_listener(self._pipeline_changed)
        self.target.add_write_listener(self._wait_until_current)

    def set_impairment(self, port, loss, delay_ms):
        """As :meth:`SwitchDaemon.set_impairment`, on the native loop too."""
        super().set_impairment(port, loss, delay_ms)
        loop = self.loop
        if loop is not None:
            loop.set_impairment(port, loss, delay_ms)

    def set_queue(self, port, **settings):
        """As :meth:`SwitchDaemon.set_queue`, on the native loop's traffic manager too."""
        loop = self.loop
        if loop is not None:
            loop.set_queue(port, **settings)
        super().set_queue(port, **settings)

    def set_pfc(self, config):
        """As :meth:`SwitchDaemon.set_pfc`, on the native loop's traffic manager too (refused while it queues)."""
        loop = self.loop
        if loop is not None:
            loop.set_pfc(config)
        super().set_pfc(config)

    def forwarding_state(self, device):
        """The native loop's traffic manager and drop counts while it forwards."""
        loop = self.loop
        if loop is None:
            return super().forwarding_state(device)
        return loop.tm, lambda port: loop.port_stats(port)["drops"]

    def handle_control(self, data):
        """As :meth:`SwitchDaemon.handle_control`; ``status`` counts what the native loop did."""
        answer = super().handle_control(data)
        loop = self.loop
        if loop is not None and answer.get("ok") and "ports" in answer:
            for port, described in answer["ports"].items():
                stats = loop.port_stats(int(port))
                described.update(tx_errors=stats["tx_errors"], socket_drops=stats["kernel_drops"],
                                 drops=stats["impairment_drops"])
        return answer

    def stop(self, *_args):
        """Ask the loop to finish (signal handler; safe from any thread)."""
        self._stopped = True
        self._loop_started.set()
        super().stop()
        loop = self.loop
        if loop is not None:
            loop.wake()

    def run(self):
        """Forward until :meth:`stop`: natively while the pipeline allows (also before there is one:
        frames are dropped as the Python loop drops them), else with the Python loop."""
        while not self._stopped:
            if not native_loop_refused(self._real_device(), self.pcap):
                self._native_run()
            else:
                self._close_opened()
                self._loop_started.set()
                self._discard_read_natively()
                self.running = not self._stopped
                super().run()  # returns on stop, or when _pipeline_changed brings a native pipeline
                self._drain_stop_pipe()

    def close(self):
        """As :meth:`SwitchDaemon.close`, and the ports' native loop if it never ran."""
        self._close_opened()
        super().close()

    def _close_opened(self):
        opening, self._opening = getattr(self, "_opening", None), None
        if opening is not None:
            opening.discard()

    def _discard_read_natively(self):
        """Empty the port sockets of the ports the native loop read without XDP: the frames waiting
        there reached the loop's own socket too, and it forwarded them."""
        for port in self._read_natively:
            sock = self.sockets[port].sock
            try:
                while sock.recv(65535):
                    pass
            except OSError:  # BlockingIOError: empty
                pass
        self._read_natively = set()

    def _real_device(self):
        device = self.target.device
        return getattr(device, "real", device)

    def _pipeline_changed(self):
        """A new pipeline was committed (P4Runtime thread): the running loop must look at it."""
        self._loop_started.wait(OPEN_WAIT_S)
        if self.loop is not None:
            self._wait_until_current()
        elif not native_loop_refused(self._real_device(), self.pcap):
            self.running = False  # the Python loop returns; run() starts the native one
            try:
                os.write(self._stop_write, b"\0")
            except (OSError, TypeError):
                pass

    def _wait_until_current(self):
        """The state or the pipeline changed (P4Runtime thread): return once the running loop forwards
        with the change, so that a frame sent after the RPC's answer sees it, as on BMv2."""
        self._loop_started.wait(OPEN_WAIT_S)
        loop = self.loop
        if loop is None:
            return  # the Python loop reads the state itself
        with self._caught_up:
            self._changes_seen += 1
            wanted = self._changes_seen
        loop.wake()
        with self._caught_up:
            # bounded: a loop that stops meanwhile (shutdown, back to Python) must not hold the writer
            self._caught_up.wait_for(lambda: self._changes_current >= wanted or self.loop is not loop,
                                     timeout=CATCH_UP_S)

    def wait_forwarding(self):
        """Return once the loop forwards with the current pipeline (its ports opened first), or it stopped."""
        self._wait_until_current()

    def _drain_stop_pipe(self):
        try:
            while os.read(self._stop_read, 4096):
                pass
        except (BlockingIOError, OSError, TypeError):
            pass

    def _open_loop(self):
        ports = {port: sock.interface for port, sock in self.sockets.items()}
        # the port sockets stay open (the Python loop may come back) but see nothing: XDP takes the frames
        loop = native_io.NativeLoop(ports, cpu_port=self.target.cpu_port, seed=self.seed, ring_size=RING_SIZE,
                                    via_qdisc=native_io.ports_with_qdisc(ports))
        self._read_natively |= set(loop.without_xdp)
        for port, why in sorted(loop.without_xdp.items()):
            self.log.warning("port %d (%s) receives and sends through AF_PACKET: %s", port, ports[port], why)
        loop.set_pause_frames({port: build_pause(pause_source_mac(port), []) for port in ports})
        return loop

    def _native_run(self):
        opening, self._opening = self._opening, None
        try:
            loop = opening.result() if opening is not None else self._open_loop()
        except BaseException:
            self._loop_started.set()
            raise
        sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
        for port, impairment in self.impaired.items():
            loop.set_impairment(port, impairment.loss, impairment.delay_ns / 1e6)
        self.loop = loop
        self._loop_started.set()
        self.target.packet_generator.attach(loop.packet_generator)
        watcher = threading.Thread(target=self._watch, name="native-io-control", daemon=True)
        watcher.start()
        synced = 0  # when the program's PFC counters were last copied
        loop.start()
        try:
            while not self._stopped:
                with self._caught_up:
                    changes = self._changes_seen  # read before the state is copied: those are in the copy
                device = self._real_device()
                if device is None:  # no pipeline yet: the loop drops what comes
                    self._caught_up_with(changes)
                    loop.wait(IDLE_TIMEOUT_MS)
                    continue
                if device is not self._device:
                    if not native_loop_applies(device, self.pcap):
                        break  # back to Python (a program the loop cannot run)
                    self._install(device)
                native = device.native
                if native.dirty:
                    native.sync(hold=loop.locked)
                self._sync_replication(device.state)
                self._caught_up_with(changes)
                timeout = IDLE_TIMEOUT_MS
                if loop.pfc is not None and device.has_pfc_counters:
                    now = time.monotonic_ns()
                    if now - synced >= PFC_COUNTER_PERIOD_NS:
                        device.sync_pfc_counters(now, tm=loop.tm)
                        synced = now
                    timeout = min(timeout, PFC_COUNTER_PERIOD_NS // 1_000_000)
                noted = loop.wait(timeout)
                if native_io.PUNTED in noted:
                    for frame in loop.punted():
                        self.target.deliver_cpu_frame(frame)
                    deliver_events(device, loop.events())
                if native_io.UNSUPPORTED in noted:
                    # the program calls the target's own externs: their traffic manager is Python's
                    self.log.warning("the program calls the embedded target's own externs: forwarding in Python "
                                     "(one packet was dropped finding out)")
                    device.needs_python_loop = True
                    break
                if native_io.HALTED in noted and device.halted is None:
                    device.halted = loop.halt_reason()
                    self.log.error("switch halted: %s", device.halted)
        finally:
            loop.stop()
            self.loop = None
            self._caught_up_with(self._changes_seen)  # the Python loop reads the state itself
            self._unwatch()
            watcher.join(5)
            self.target.packet_generator.detach()
            loop.close()
            self._device = None

    def _caught_up_with(self, changes):
        with self._caught_up:
            if changes > self._changes_current:
                self._changes_current = changes
                self._caught_up.notify_all()

    def _unwatch(self):
        """Take this daemon's wakers off the native state's objects."""
        for objects, waker in self._watched:
            if waker in objects:
                objects.remove(waker)
        self._watched = []

    def _install(self, device):
        """Use ``device``'s compiled program and native state in the loop."""
        self._unwatch()
        native = device.native
        native.sync(hold=self.loop.locked)
        self.loop.set_pipeline(device.library.path, native.pl, device.clock_origin_ns)
        if device.library.layout.get("uses_target_externs"):
            self.loop.set_dsf(device.dsf_handle())
        for port in device.tm.ports():  # queue settings made on the device before it came here
            self.loop.set_queue(port, **device.tm.queue_config(port))
        self.loop.set_pfc(self.target.pfc)
        waker = _Waker(self.loop)
        for collection in (native.tables, native.profiles, native.meters):
            for _, obj in collection.values():
                obj.watchers.append(waker)
                self._watched.append((obj.watchers, waker))
        self._device = device
        self._pre = (None, None)
        self.log.info("native packet loop on ports %s", sorted(self.sockets))

    def _sync_replication(self, state):
        groups = tuple(sorted((group, tuple(tuple(r) for r in replicas))
                              for group, replicas in state.multicast_groups.entries()))
        sessions = tuple(sorted((s.session_id, tuple(tuple(r) for r in s.replicas), s.packet_length_bytes or 0)
                                for s in state.clone_sessions.entries()))
        old_groups, old_sessions = self._pre
        if groups != old_groups:
            for group, _ in old_groups or ():
                self.loop.set_multicast_group(group, [])
            for group, replicas in groups:
                self.loop.set_multicast_group(group, list(replicas))
        if sessions != old_sessions:
            for sid, _, _ in old_sessions or ():
                self.loop.set_clone_session(sid, [])
            for sid, replicas, length in sessions:
                self.loop.set_clone_session(sid, list(replicas), length)
        self._pre = (groups, sessions)

    def _watch(self):
        """Serve control requests and PacketOuts while the main thread is in the loop."""
        poller = select.poll()
        poller.register(self.target.wakeup_fd, select.POLLIN)
        poller.register(self._stop_read, select.POLLIN)
        control_fd = self.control.fileno() if self.control is not None else None
        if control_fd is not None:
            poller.register(control_fd, select.POLLIN)
        injector = None
        while not self._stopped and self.loop is not None:
            for fd, _ in poller.poll(200):
                loop = self.loop
                if loop is None:
                    return
                if fd == self.target.wakeup_fd:
                    self.target.clear_wakeup()
                    injector = injector if injector is not None and injector.loop is loop else _Injector(loop)
                    self.target.inject_pending(injector)
                elif fd == control_fd:
                    self.control.serve(self.handle_control)
                    loop.wake()  # a setting may concern the loop's Python side
                else:
                    loop.wake()
                    return


class _Opening:
    """``open_loop()`` run in a thread of its own: :meth:`result` waits for its loop (or raises its error)."""

    def __init__(self, open_loop):
        self._loop = self._error = None
        self._thread = threading.Thread(target=self._open, args=(open_loop,), name="native-io-open", daemon=True)
        self._thread.start()

    def _open(self, open_loop):
        try:
            self._loop = open_loop()
        except BaseException as error:  # noqa: BLE001 - raised by result() in the thread that asks
            self._error = error

    def result(self):
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._loop

    def discard(self):
        """Close the loop once it is open (it never ran)."""
        self._thread.join()
        if self._loop is not None:
            self._loop.close()


def deliver_events(device, events):
    """Hand the loop's events to ``device``'s digest and log callbacks, as the native device does.

    Args:
        device: the native device (its layout's "events" name the sites).
        events: ``[(site id, valid, values)]`` from :meth:`NativeLoop.events`.
    """
    sites = device.library.layout.get("events") or []
    for site_id, valid, values in events:
        site = sites[site_id]
        if site["kind"] == "digest":
            if valid and device.on_digest is not None:
                device.on_digest(site["name"], tuple(values[:site["count"]]))
        elif device.on_log is not None:
            shown = []
            for (kind, width), value in zip(site["values"], values):
                if kind == "bool":
                    value = bool(value)
                elif kind == "int" and value >> (width - 1):
                    value -= 1 << width
                shown.append(value)
            device.on_log(RT.format_log_message(site["message"], tuple(shown)))


class _Waker:
    """A state watcher that wakes the loop (the native state marks the change itself)."""

    def __init__(self, loop):
        self.loop = loop

    def __call__(self, _changed, *_rest):
        self.loop.wake()

