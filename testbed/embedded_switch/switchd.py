"""The embedded P4 switch process: raw-socket ports, the v1model device and a P4Runtime server.

One process per switch, started by :class:`testbed.emulation.p4switch.EmbeddedP4Switch`
(or by hand)::

    python -m testbed.embedded_switch.switchd --name s1 --device-id 1 --grpc-addr 127.0.0.1:9560 \\
        --port 1=s1-eth1 --port 2=s1-eth2 --cpu-port 255 [--program p4src/l3_ecmp.p4] \\
        [--pcap-dir DIR] [--ready-file FILE] [--control-socket PATH]

Like BMv2's ``simple_switch_grpc --no-p4`` it starts without a pipeline unless
``--program`` is given, and forwards nothing until a controller sends
SetForwardingPipelineConfig.  Frames are read from AF_PACKET sockets bound to
the port interfaces, pushed through the device's ingress and traffic manager,
and sent when the egress queues release them (so configured port rates and
queue depths are real).  SIGTERM/SIGINT stop it cleanly.

With ``--control-socket PATH`` the process also listens on a Unix datagram
socket for per-port link impairments (see :mod:`testbed.embedded_switch.port_control`):
frames leaving an impaired port are dropped with a probability (from a
random generator seeded by ``--seed`` and the port number, so runs repeat)
and/or held back a fixed delay.  This emulates lossy and slow links where
the kernel has no netem.  The socket file is removed on exit.
"""
import argparse
import collections
import errno
import gc
import importlib
import logging
import os
import random
import select
import signal
import socket
import sys
import threading
import time

from testbed.embedded_switch.p4runtime_target import EmbeddedTarget, preload_program
from testbed.embedded_switch.port_control import MAX_MESSAGE, ControlRequestError, ControlSocket, parse_request
from testbed.errors import ParameterError, TestbedError
from testbed.p4.native import BACKENDS, DEFAULT_BACKEND, default_backend
from testbed.log_format import configure_process_logging
from testbed.p4.v1model.pfc import PfcConfig
from testbed.packet_sockets import (PACKET_IGNORE_OUTGOING, SOL_PACKET, ReceiveLag, SocketDrops, enable_timestamps,
                                    enable_vlan_tags, open_packet_socket, receive_frame, receive_stamped)
from testbed.p4runtime.server import P4RuntimeServer

MAX_FRAME = 65535
RX_BATCH = 64  # frames read from one socket before looking at the others


class PortSocket:
    """A raw socket bound to one switch port's interface."""

    def __init__(self, port, interface):
        self.port = port
        self.interface = interface
        self.sock = open_packet_socket()
        self.socket_drops = SocketDrops(self.sock)  # frames the kernel dropped: this process was too slow
        try:
            self.sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
            self.filters_outgoing = True
        except OSError:
            self.filters_outgoing = False
        self.sock.bind((interface, 0))
        self.sock.setblocking(False)
        enable_timestamps(self.sock)
        enable_vlan_tags(self.sock)  # frames keep their VLAN tags, as through BMv2's libpcap
        self.receive_lag = ReceiveLag()  # how long the oldest frame of each batch waited to be read
        self.tx_errors = 0

    def receive_batch(self):
        """Return up to RX_BATCH frames that arrived on the port (never blocks).

        The first frame of a batch, the one that waited longest, is read with its
        kernel timestamp: its wait goes into :attr:`receive_lag`.
        """
        frames = []
        sock = self.sock
        for index in range(RX_BATCH):
            try:
                if index == 0:
                    frame, address, queued_ns = receive_stamped(sock, MAX_FRAME)
                    if queued_ns is not None:
                        self.receive_lag.record(max(0, time.time_ns() - queued_ns))
                else:
                    frame, address = receive_frame(sock, MAX_FRAME)
            except BlockingIOError:
                break
            except OSError as error:
                if error.errno in (errno.ENETDOWN, errno.ENXIO):
                    break
                raise
            if not self.filters_outgoing and address[2] == socket.PACKET_OUTGOING:
                continue
            frames.append(frame)
        return frames

    def send(self, frame):
        """Send a frame; a down link or a full device queue drops it (counted)."""
        try:
            self.sock.send(frame)
        except OSError:
            self.tx_errors += 1

    def close(self):
        """Close the socket."""
        self.sock.close()


class PcapRecorder:
    """Optional per-port pcap files (``<dir>/<switch>-p<port>-{in,out}.pcap``)."""

    def __init__(self, directory, switch_name, ports):
        from scapy.utils import RawPcapWriter

        os.makedirs(directory, exist_ok=True)
        self.writers = {}
        for port in ports:
            for direction in ("in", "out"):
                path = os.path.join(directory, f"{switch_name}-p{port}-{direction}.pcap")
                self.writers[(port, direction)] = RawPcapWriter(path, linktype=1, sync=True)

    def record(self, port, direction, frame):
        """Append a frame to the port's pcap in ``direction`` ("in" or "out")."""
        writer = self.writers.get((port, direction))
        if writer is not None:
            writer.write(frame)

    def close(self):
        """Flush and close every file."""
        for writer in self.writers.values():
            writer.close()


class PortImpairment:
    """Loss and added delay of the frames leaving one port.

    Args:
        port: the port number.
        seed: the switch's seed; the generator is seeded with ``(seed, port)``.
    """

    def __init__(self, port, seed):
        self.port = port
        self.random = random.Random(f"{seed}:{port}")
        self.loss = 0.0
        self.delay_ns = 0
        self.drops = 0

    @property
    def active(self):
        """True when the port drops or delays frames."""
        return self.loss > 0.0 or self.delay_ns > 0

    def describe(self):
        """JSON-able state: ``loss``, ``delay_ms``, ``drops``."""
        return {"loss": self.loss, "delay_ms": self.delay_ns / 1e6, "drops": self.drops}


def _freeze_long_lived():
    """Put every object alive now (the program, its state, gRPC's) out of the cyclic collector's reach.

    A full collection walks every tracked object: with a program loaded that
    takes 20-50 ms, during which the switch forwards nothing (flows then show
    gaps no hardware switch makes, and F10's detector may miss probes).  The
    packet path allocates short-lived, acyclic objects that reference counting
    frees, so after a pipeline is loaded the long-lived objects are frozen
    (:func:`gc.freeze`) and collections only walk what is new.
    """
    gc.collect()
    gc.freeze()


class SwitchDaemon:
    """Runs a device between its port sockets and the P4Runtime server.

    Args:
        target: a :class:`testbed.embedded_switch.p4runtime_target.EmbeddedTarget` (holds the
            current program, state and device; replaced on SetForwardingPipelineConfig).
        ports: ``{port number: interface name}``.
        pcap_dir: directory for per-port pcaps, or None.
        name: the switch name (for pcap file names and logs).
        seed: seeds the per-port impairment generators.
        control_path: Unix datagram socket for impairment requests, or None.
    """

    def __init__(self, target, ports, pcap_dir=None, name="switch", seed=0, control_path=None):
        self.target = target
        self.name = name
        self.log = switch_logger(name)
        self.sockets = {}
        self.control = None
        try:
            for port, interface in sorted(ports.items()):
                self.sockets[port] = PortSocket(port, interface)
            if control_path:
                self.control = ControlSocket(control_path)
        except BaseException:
            self.close()
            raise
        self.by_fd = {s.sock.fileno(): s for s in self.sockets.values()}
        self.pcap = PcapRecorder(pcap_dir, name, ports) if pcap_dir else None
        self.impairment_state = {port: PortImpairment(port, seed) for port in self.sockets}
        self.impaired = {}  # port -> PortImpairment, only the active ones (the hot path looks here)
        self.delayed = {}  # port -> deque of (release ns, frame), only non-empty ones
        self.running = True
        # stop() writes here so the loop, which may block without a timeout, wakes up
        self._stop_read, self._stop_write = os.pipe()
        os.set_blocking(self._stop_read, False)
        os.set_blocking(self._stop_write, False)

    def wait_forwarding(self):
        """Return once the switch forwards with its current pipeline (the Python loop: at once, as the
        port sockets queue what comes before it reads them)."""

    def stop(self, *_args):
        """Ask the loop to finish (signal handler; safe from any thread)."""
        self.running = False
        if self._stop_write is None:
            return  # already closed
        try:
            os.write(self._stop_write, b"\0")
        except OSError:
            pass  # the pipe is full: a wake-up is already pending

    def _transmit(self, device, now_ns):
        sockets = self.sockets
        pcap = self.pcap
        impaired = self.impaired
        for port, frame in device.transmit_ready(now_ns):
            sock = sockets.get(port)
            if sock is None:
                continue  # the CPU port and unknown ports are the target's business
            if impaired:
                impairment = impaired.get(port)
                if impairment is not None:
                    if impairment.loss and impairment.random.random() < impairment.loss:
                        impairment.drops += 1
                        continue
                    if impairment.delay_ns:
                        queue = self.delayed.get(port)
                        if queue is None:
                            queue = self.delayed[port] = collections.deque()
                        queue.append((now_ns + impairment.delay_ns, frame))
                        continue
            if pcap is not None:
                pcap.record(port, "out", frame)
            sock.send(frame)

    def _release_delayed(self, now_ns):
        """Send the delayed frames whose time has come."""
        pcap = self.pcap
        for port in list(self.delayed):
            queue = self.delayed[port]
            sock = self.sockets[port]
            while queue and queue[0][0] <= now_ns:
                frame = queue.popleft()[1]
                if pcap is not None:
                    pcap.record(port, "out", frame)
                sock.send(frame)
            if not queue:
                del self.delayed[port]

    def _next_release_ns(self):
        return min(queue[0][0] for queue in self.delayed.values())

    def set_impairment(self, port, loss, delay_ms):
        """Set the loss probability and added delay of frames leaving ``port``.

        Raises:
            KeyError: not a data port of this switch.
        """
        impairment = self.impairment_state[port]
        impairment.loss = float(loss)
        impairment.delay_ns = int(round(delay_ms * 1e6))
        if impairment.active:
            self.impaired[port] = impairment
        else:
            self.impaired.pop(port, None)
        self.log.info("port %d loss %g delay %g ms", port, impairment.loss, delay_ms)

    def handle_control(self, data):
        """Answer one control request (see :mod:`testbed.embedded_switch.port_control`)."""
        try:
            request = parse_request(data, self.sockets)
        except ControlRequestError as error:
            return error.answer()
        generator = self.target.packet_generator
        if request["command"] == "status":
            ports = {}
            for port, state in sorted(self.impairment_state.items()):
                ports[str(port)] = dict(state.describe(), tx_errors=self.sockets[port].tx_errors,
                                        socket_drops=self.sockets[port].socket_drops.read(),
                                        receive_lag=self.sockets[port].receive_lag.describe())
            device = self.target.device
            return {"ok": True, "ports": ports,
                    "packet_generator": {str(app): state for app, state in generator.status().items()},
                    # CLOCK_MONOTONIC ns at which the pipeline's timestamps are 0 (None: no pipeline)
                    "clock_origin_ns": device.clock_origin_ns if device is not None else None}
        if request["command"] in ("queue", "pfc", "pfc_status"):
            return self.handle_pfc_control(request)
        if request["command"] == "dsf_history":
            return self.handle_dsf_history(request)
        if request["command"] == "pktgen":
            if request["stop"]:
                generator.stop(request["app"])
            else:
                generator.configure(request["app"], request["port"], request["period_ns"], request["template"])
            self.target.wake()  # the forwarding loop recomputes its next timer
            return {"ok": True}
        self.set_impairment(request["port"], request["loss"], request["delay_ms"])
        return {"ok": True}

    def handle_pfc_control(self, request):
        """Answer a ``queue``, ``pfc`` or ``pfc_status`` request (see port_control)."""
        settings = {k: v for k, v in request.items() if k not in ("command", "port", "off")}
        try:
            if request["command"] == "queue":
                self.set_queue(request["port"], **settings)
            elif request["command"] == "pfc":
                self.set_pfc(None if request.get("off") else PfcConfig.checked(**settings))
            else:
                return self.pfc_status()
        except ParameterError as error:
            return {"error": str(error), "field": error.field, "allowed": error.allowed}
        except TypeError as error:  # a missing required field
            return {"error": str(error), "field": "lossless", "allowed": "a list of priorities in [0, 7]"}
        self.target.wake()
        return {"ok": True}

    def handle_dsf_history(self, request):
        """Start the DSF traffic manager's counter notes, or read them (see port_control)."""
        device = self.target.device
        if not hasattr(device, "record_dsf_history"):
            return {"error": "command: this switch has no DSF traffic manager (no Python pipeline loaded)",
                    "field": "command", "allowed": "dsf_history on a switch running a DSF program"}
        if not request["read"]:
            # start_ns is CLOCK_MONOTONIC; the device clock is CLOCK_MONOTONIC too (Device's default)
            device.record_dsf_history(request["names"], request["start_ns"], request["period_ns"],
                                      request["capacity"])
            return {"ok": True}
        budget = MAX_MESSAGE - 1024  # room for the rest of the answer
        notes, overflows, more = device.dsf_history(budget)
        return {"ok": True, "notes": notes, "more": more, "overflows": overflows}

    def set_queue(self, port, **settings):
        """Configure ``port``'s egress queues (TrafficManager.set_queue keywords; ParameterError when bad)."""
        self.target.set_queue(port, **settings)

    def set_pfc(self, config):
        """Turn PFC on with ``config`` (a PfcConfig; None: off); ParameterError while packets are queued."""
        self.target.set_pfc(config)

    def forwarding_state(self, device):
        """``(traffic manager, pipeline drops of a port)`` of the forwarding path: the device's here."""
        return device.tm, lambda port: device.port_stats(port)["drops"]

    def pfc_status(self):
        """The PFC settings and every port's PFC counters and pause state, at one instant."""
        device = self.target.device
        now = time.monotonic_ns()
        config = self.target.pfc
        ports = {}
        if device is not None:
            tm, pipeline_drops = self.forwarding_state(device)
            for port in self.sockets:
                ports[str(port)] = dict(tm.pfc_stats(port, now), queue=tm.stats(port),
                                        pipeline_drops=pipeline_drops(port))
        return {"ok": True, "now_ns": now, "ports": ports,
                "pfc": None if config is None else dict(vars(config), lossless=sorted(config.lossless))}

    def _poll_timeout_ms(self, device):
        """How long the loop may block: until the next departure or delayed frame, else for ever (None).

        Everything else that needs the loop (frames, PacketOuts, control requests,
        :meth:`stop`) makes one of its file descriptors readable.
        """
        deadline = device.next_departure_ns() if device is not None else None
        if self.delayed:
            release = self._next_release_ns()
            deadline = release if deadline is None else min(deadline, release)
        if deadline is None:
            return None
        return max(0.0, (deadline - time.monotonic_ns()) / 1e6)

    def run(self):
        """Forward until :meth:`stop`; returns when stopped.

        The loop blocks in ``poll`` on the port sockets, the PacketOut wake-up
        pipe, the control socket and the stop pipe, with a timeout only while
        frames wait for their departure time: an idle switch uses no CPU.
        """
        poller = select.poll()
        for fd in self.by_fd:
            poller.register(fd, select.POLLIN)
        wakeup_fd = self.target.wakeup_fd  # readable when a PacketOut waits for injection
        poller.register(wakeup_fd, select.POLLIN)
        control_fd = None
        if self.control is not None:
            control_fd = self.control.fileno()
            poller.register(control_fd, select.POLLIN)
        poller.register(self._stop_read, select.POLLIN)
        pcap = self.pcap
        frozen_for = None
        while self.running:
            events = poller.poll(self._poll_timeout_ms(self.target.device))
            device = self.target.device  # a pipeline may have been set while we waited
            if device is not frozen_for:
                _freeze_long_lived()
                frozen_for = device
                if device is not None:
                    self.log.info("pipeline on backend %s", device.backend)
            for fd, _event in events:
                if fd == wakeup_fd:
                    self.target.clear_wakeup()
                    continue
                if fd == self._stop_read:
                    continue  # self.running is already False
                if fd == control_fd:
                    self.control.serve(self.handle_control)
                    continue
                port_socket = self.by_fd[fd]
                frames = port_socket.receive_batch()
                if device is None:
                    continue  # no pipeline yet: drop, as BMv2 --no-p4 does
                port = port_socket.port
                for frame in frames:
                    if pcap is not None:
                        pcap.record(port, "in", frame)
                    device.receive(port, frame)
            if device is not None:
                self._transmit(device, time.monotonic_ns())
            if self.delayed:
                self._release_delayed(time.monotonic_ns())

    def close(self):
        """Close sockets and pcaps; remove the control socket's file."""
        for sock in self.sockets.values():
            sock.close()
        if self.control is not None:
            self.control.close()
            self.control = None
        if getattr(self, "pcap", None) is not None:
            self.pcap.close()
        for fd in (getattr(self, "_stop_read", None), getattr(self, "_stop_write", None)):
            if fd is not None:
                os.close(fd)
        self._stop_read = self._stop_write = None
        drops = {port: state.drops for port, state in getattr(self, "impairment_state", {}).items()
                 if state.drops}
        if drops:
            self.log.info("impairment drops per port %s", drops)


def parse_ports(items):
    """Parse ``["1=s1-eth1", ...]`` into ``{1: "s1-eth1"}``.

    Raises:
        TestbedError: an item is not PORT=INTERFACE with an integer port.
    """
    ports = {}
    for item in items:
        number, sep, interface = item.partition("=")
        if not sep or not number.isdigit() or not interface:
            raise TestbedError(f"invalid --port {item!r}: expected PORT=INTERFACE, e.g. 1=s1-eth1")
        ports[int(number)] = interface
    return ports


def build_arg_parser():
    """Return the argument parser of the switch process."""
    parser = argparse.ArgumentParser(prog="python -m testbed.embedded_switch.switchd",
                                     description="Embedded P4 (v1model) switch with a P4Runtime server.")
    parser.add_argument("--name", default="switch", help="switch name (logs, pcaps)")
    parser.add_argument("--device-id", type=int, default=1, help="P4Runtime device id")
    parser.add_argument("--grpc-addr", default="127.0.0.1:9559", help="P4Runtime server address")
    parser.add_argument("--port", action="append", default=[], metavar="N=IFACE",
                        help="a switch port and its interface (repeat)")
    parser.add_argument("--cpu-port", type=int, default=None, help="port number of the CPU port")
    parser.add_argument("--program", help="P4 program to load at start (else wait for a controller)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the target's random() extern")
    parser.add_argument("--backend", choices=BACKENDS, default=DEFAULT_BACKEND,
                        help="pipeline backend: python (reference), native (generated C), "
                             "auto (native, else python with a warning); default $TESTBED_BACKEND or auto")
    parser.add_argument("--pcap-dir", help="write per-port pcaps here")
    parser.add_argument("--ready-file", help="create this file once the P4Runtime server listens")
    parser.add_argument("--control-socket", metavar="PATH",
                        help="Unix datagram socket for per-port loss/delay requests "
                             "(testbed.embedded_switch.port_control)")
    return parser


def warm(path):
    """Prepare a fork server before it forks switches: they share what it loads instead of each loading
    its own copy (a page a switch only reads stays shared; see the module :mod:`testbed.emulation.forkserver`).

    Loads the P4 program ``path`` (:func:`preload_program`), the modules of the devices
    :func:`~testbed.p4.native.make_device` makes for the backend, the native packet loop's module and
    library, and the modules gRPC imports when a server is made and serves (no device, gRPC server or
    thread is made here).
    """
    preload_program(path)
    modules = ["testbed.p4.v1model.device", "concurrent.futures.thread", "grpc._server", "grpc._utilities"]
    if default_backend() != "python":
        from testbed.embedded_switch import native_io
        from testbed.embedded_switch.native_io import daemon  # noqa: F401 - imported to be shared

        modules.append("testbed.p4.native.device")
        try:
            native_io.load()
        except Exception as error:  # noqa: BLE001 - the switch reports it when it opens its loop
            logging.getLogger("testbed.switchd").warning("warming the native loop failed: %s", error)
    for name in modules:
        importlib.import_module(name)


def switch_logger(name):
    """The logger of switch ``name``: ``testbed.switchd.<name>``."""
    return logging.getLogger(f"testbed.switchd.{name}")


def main(argv=None):
    """Run the switch until SIGTERM/SIGINT; returns the exit status.

    Log lines go to stderr in :mod:`testbed.log_format`'s format (timestamped).
    """
    args = build_arg_parser().parse_args(argv)
    configure_process_logging()
    try:
        ports = parse_ports(args.port)
        target = EmbeddedTarget(cpu_port=args.cpu_port, seed=args.seed, backend=args.backend)
        if args.program:
            target.load_program_file(args.program)
        daemon_class = SwitchDaemon
        # the backend may come from TESTBED_BACKEND, so ask the target, not the arguments; with auto the
        # native daemon keeps the Python loop for a pipeline that fell back to the Python backend
        if target.backend != "python" and not args.pcap_dir and os.environ.get("TESTBED_NATIVE_LOOP", "1") != "0":
            from testbed.embedded_switch.native_io.daemon import NativeSwitchDaemon as daemon_class
        daemon = daemon_class(target, ports, pcap_dir=args.pcap_dir, name=args.name, seed=args.seed,
                              control_path=args.control_socket)
    except (TestbedError, OSError) as error:
        switch_logger(args.name).error("%s", error)
        return 2
    server = P4RuntimeServer(target, device_id=args.device_id, address=args.grpc_addr)
    signal.signal(signal.SIGTERM, daemon.stop)
    signal.signal(signal.SIGINT, daemon.stop)
    announced = threading.Lock()
    ended = threading.Event()  # set at the end: no ready file after it

    def announce_ready():
        with announced:
            if ended.is_set():
                return
            if args.ready_file:
                with open(args.ready_file, "w") as handle:
                    handle.write(f"{os.getpid()}\n")
            switch_logger(args.name).info("ports %s, P4Runtime on %s", ports, args.grpc_addr)
    try:
        server.start()
        if args.program:
            # ready once it forwards with the program it was given (the native loop opens its ports first);
            # without one, a pipeline pushed later is answered once the switch forwards with it
            threading.Thread(target=lambda: (daemon.wait_forwarding(), announce_ready()), name="ready",
                             daemon=True).start()
        else:
            announce_ready()
        daemon.run()
    except (TestbedError, OSError) as error:  # the native loop's ports could not be opened
        switch_logger(args.name).error("%s", error)
        return 2
    finally:
        with announced:
            ended.set()
        server.stop()
        daemon.close()
        if args.ready_file and os.path.exists(args.ready_file):
            os.remove(args.ready_file)
    return 0


if __name__ == "__main__":
    sys.exit(main())
