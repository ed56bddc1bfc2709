"""Mininet switch classes for P4 targets: the embedded target and BMv2.

Both start one switch process per Mininet switch with a P4Runtime server,
attach its ports to the Mininet interfaces (the Mininet port number is the P4
port number), write a log per switch (and optional pcaps per port), and wait
until the P4Runtime server is listening before the network is declared up.
The pipeline is pushed afterwards by a controller over P4Runtime
(SetForwardingPipelineConfig), as with ``simple_switch_grpc --no-p4``.
"""
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

from mininet.node import Switch

from testbed.embedded_switch.port_control import (check_impairment, port_status, read_dsf_history,
                                                  record_dsf_history, set_packet_generator, set_port_impairment,
                                                  switch_status)
from testbed.emulation.bmv2_runtime import THRIFT_PORT, BMv2Runtime
from testbed.emulation.interfaces import disable_ipv6, disable_offloads
from testbed.emulation.links import ip_batch
from testbed.emulation.logs import log_tail
from testbed.emulation.namespaces import in_namespace, namespace_socket
from testbed.errors import EmulationError

SWITCH_NICENESS = -10  # switches are the network's hardware: hosts' processes must not starve them
#: the embedded switches' P4Runtime ports are GRPC_BASE_PORT + device id (9559 is P4Runtime's IANA port). They
#: stay below the kernel's ephemeral range (32768-60999 by default): a port inside it can be taken by any
#: outgoing connection's source port, or by the readiness probe's own connect (a TCP self-connect), just as
#: the switch binds it
GRPC_BASE_PORT = 9559
DEFAULT_CPU_PORT = 255  # the CPU_PORT_ID of p4src/include/headers.p4
READY_TIMEOUT_S = 60.0
STOP_WAIT_S = 5.0  # SIGTERM, then SIGKILL
KILL_WAIT_S = 30.0
UNIX_PATH_MAX = 107  # sun_path holds 108 bytes with the terminating NUL
SWITCHD_MODULE = "testbed.embedded_switch.switchd"


def _signal_process_group(process, signum):
    """Send ``signum`` to the switch process's group (its pid: it leads its own session), or to the process alone.

    A process that has not become its group's leader yet still gets the signal.
    """
    try:
        os.killpg(process.pid, signum)
    except ProcessLookupError:
        try:
            os.kill(process.pid, signum)
        except ProcessLookupError:
            pass


def _raise_priority():
    """In the switch process before it runs: a higher CPU priority than the hosts' processes.

    An emulated switch stands for hardware: when traffic generators and receivers
    (and anything else on the machine) compete for the cores, the switches must
    not be the ones starved, or they drop and delay frames no real switch would
    (and F10's failure detector, which expects a frame every probe period, would
    see links fail).  Best effort: without the privilege the priority stays.
    """
    try:
        os.setpriority(os.PRIO_PROCESS, 0, SWITCH_NICENESS)
    except OSError:
        pass


def ephemeral_ports():
    """Return the kernel's ephemeral port range as a ``range`` (``net.ipv4.ip_local_port_range``)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as sysctl:
            low, high = (int(word) for word in sysctl.read().split())
    except (OSError, ValueError):
        low, high = 32768, 60999  # the kernel's default
    return range(low, high + 1)


def accepts_connections(address):
    """True when a gRPC address (``host:port`` or ``unix:path``) accepts a connection now."""
    try:
        if address.startswith("unix:"):
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(0.2)
                sock.connect(address[len("unix:"):])
            return True
        host, port = address.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=0.2):
            return True
    except OSError:
        return False


def wait_listening(address, timeout=60.0):
    """True once a gRPC address accepts connections, False after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if accepts_connections(address):
            return True
        time.sleep(0.05)
    return False


class P4Switch(Switch):
    """Common part of the P4 switch classes: process, ports, log, readiness.

    Args:
        name: switch name.
        log_dir: directory for ``<name>.log`` (and pcaps); required.
        device_id: P4Runtime device id (default: the switch's dpid as an int).
        grpc_port: TCP port of the P4Runtime server (default :data:`GRPC_BASE_PORT` + device id).
        cpu_port: port number of the CPU port (PacketIn/PacketOut).
        pcap: write per-port pcaps into ``log_dir``.
        program: the P4 program the controller will push (recorded for describe()).
        **params: Mininet node options (dpid, role, level ...).
    """

    target_name = None

    def __init__(self, name, log_dir=None, device_id=None, grpc_port=None, cpu_port=DEFAULT_CPU_PORT,
                 pcap=False, program=None, **params):
        super().__init__(name, **params)
        if log_dir is None:
            raise EmulationError(f"switch {name}: log_dir is required for P4 switches")
        self.log_dir = log_dir
        self.device_id = device_id if device_id is not None else int(self.dpid, 16)
        self.grpc_port = grpc_port if grpc_port is not None else GRPC_BASE_PORT + self.device_id
        self.cpu_port = cpu_port
        self.pcap = pcap
        self.program = program
        self.log_path = os.path.join(log_dir, f"{name}.log")
        self.process = None

    @property
    def grpc_address(self):
        """``host:port`` of this switch's P4Runtime server."""
        return f"127.0.0.1:{self.grpc_port}"

    def port_interfaces(self):
        """Return ``{port number: interface name}`` of the data ports."""
        return {port: intf.name for port, intf in sorted(self.intfs.items()) if intf.name != "lo"}

    def command(self):
        """Return the argv that starts the switch process (subclasses)."""
        raise NotImplementedError

    def start(self, _controllers):
        """Start the switch process (after its ports exist and are up: :class:`~testbed.emulation.links.LinkBatch`).

        Raises:
            EmulationError: the switch's gRPC port lies in the kernel's ephemeral range, another process
                already listens on it (readiness could not be told apart from it), or the process could
                not start.
        """
        ephemeral = ephemeral_ports()
        if self.grpc_port in ephemeral:
            raise EmulationError(f"switch {self.name}: P4Runtime port {self.grpc_port} (device id {self.device_id}) "
                                 f"lies in the kernel's ephemeral port range {ephemeral.start}-{ephemeral.stop - 1}, "
                                 "where outgoing connections can take it: give it a grpc_port outside that range")
        if self._listening():
            raise EmulationError(f"switch {self.name}: TCP port {self.grpc_port} is already in use "
                                 "(another fabric or a leftover switch: run `testbed cleanup`)")
        os.makedirs(self.log_dir, exist_ok=True)
        self.process = self.launch()

    def launch(self):
        """Start the switch process with :meth:`command`, output appended to the log; return its handle."""
        log = open(self.log_path, "ab")
        try:
            return subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True, preexec_fn=_raise_priority)
        finally:
            log.close()

    def alive(self):
        """True while the switch process runs."""
        return self.process is not None and self.process.poll() is None

    def check_alive(self):
        """Raise EmulationError (with the log's tail) if the process has died."""
        if self.process is not None and self.process.poll() is not None:
            raise EmulationError(
                f"switch {self.name} ({self.target_name}) exited with status {self.process.returncode}; "
                f"log {self.log_path}:\n{log_tail(self.log_path)}")

    def _listening(self):
        return accepts_connections(f"127.0.0.1:{self.grpc_port}")

    def is_ready(self):
        """True once the P4Runtime server accepts connections.

        Raises:
            EmulationError: the process died (with the log's tail).
        """
        self.check_alive()
        return self._listening()

    def wait_ready(self, timeout=READY_TIMEOUT_S):
        """Block until the P4Runtime server accepts connections.

        Raises:
            EmulationError: the process died or did not listen within ``timeout``.
        """
        deadline = time.monotonic() + timeout
        while True:
            if self.is_ready():
                return
            if time.monotonic() >= deadline:
                break
            time.sleep(0.05)
        raise EmulationError(f"switch {self.name}: P4Runtime server not listening on {self.grpc_address} "
                             f"after {timeout:.0f} s; log {self.log_path}:\n{log_tail(self.log_path)}")

    def request_stop(self):
        """Ask the switch process to stop (SIGTERM to its process group) without waiting; see :meth:`stop`."""
        process = self.process
        if process is not None and process.poll() is None:
            _signal_process_group(process, signal.SIGTERM)

    def stop(self, deleteIntfs=True):
        """Stop the process (SIGTERM, then SIGKILL after 5 s) and, with ``deleteIntfs``, remove the interfaces.

        Raises:
            EmulationError: the process outlived SIGKILL by ``KILL_WAIT_S`` (a teardown never hangs).
        """
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            _signal_process_group(process, signal.SIGTERM)
            try:
                process.wait(timeout=STOP_WAIT_S)
            except subprocess.TimeoutExpired:
                _signal_process_group(process, signal.SIGKILL)
                try:
                    process.wait(timeout=KILL_WAIT_S)
                except subprocess.TimeoutExpired:
                    raise EmulationError(f"switch {self.name}: process {process.pid} still running "
                                         f"{KILL_WAIT_S:.0f} s after SIGKILL") from None
        super().stop(deleteIntfs)

    def describe(self):
        """Return the switch's entry for the network state file."""
        return {"target": self.target_name, "grpc": self.grpc_address, "device_id": self.device_id,
                "cpu_port": self.cpu_port, "log": self.log_path, "program": self.program,
                "process_pid": self.process.pid if self.process else None}

    def set_packet_generator(self, app, port, period_us, template):
        """Start (or change) a periodic frame into ingress on ``port`` every ``period_us`` (subclasses).

        Args:
            app: the generator application (0..7).
            port: the internal port the frames enter on.
            period_us: the period in microseconds.
            template: the frame (bytes, Ethernet header first).
        """
        raise NotImplementedError

    def clock_origin_ns(self):
        """CLOCK_MONOTONIC ns at which the pipeline's timestamps are 0, or None if unknown.

        BMv2's timestamps count from its own start, which it does not tell; the
        embedded target answers on its control socket.
        """
        return None

    def read_register(self, name, index=None, client=None):
        """A register's cells (list) or one cell (int) (subclasses).

        Args:
            name: the register's P4Info name.
            index: one cell, or None for all.
            client: a P4Runtime session to this switch (targets that serve register reads use it).
        """
        raise NotImplementedError

    def set_port_impairment(self, port, loss=0.0, delay_ms=0.0):
        """Drop (probability ``loss``) and delay (``delay_ms``) frames leaving ``port``.

        Raises:
            EmulationError: this target cannot impair its ports (subclasses that can override it).
        """
        raise EmulationError(f"switch {self.name} ({self.target_name}): its ports cannot drop or delay "
                             f"frames; link loss/delay on {self.target_name} links needs the kernel's netem qdisc")


class EmbeddedP4Switch(P4Switch):
    """A switch running the project's embedded v1model target (``testbed.embedded_switch.switchd``).

    Args (besides :class:`P4Switch`'s):
        seed: passed as ``--seed`` (the target's random() extern and the per-port loss draws).
        backend: passed as ``--backend`` (``python``, ``native`` or ``auto``; None: the switch's default,
            ``$TESTBED_BACKEND`` or auto).
        launcher: a started :class:`~testbed.emulation.forkserver.ForkServer` of
            :data:`SWITCHD_MODULE` that forks the process (one Python start-up for the whole
            fabric), or None to start it with its own interpreter.

    Its control socket (``control_path``: ``<log_dir>/<name>.ctl``, or a short path in the
    temporary directory when that is too long for a Unix socket) sets per-port loss/delay.
    """

    target_name = "embedded"
    #: how control requests reach a socket on another server (``via`` of
    #: :func:`testbed.embedded_switch.port_control.request`); None: the socket is on this machine
    control_via = None

    def __init__(self, name, log_dir=None, seed=0, launcher=None, backend=None, **params):
        super().__init__(name, log_dir=log_dir, **params)
        self.seed = int(seed)  # the run's seed: the target's random() and per-port loss draws
        self.backend = backend
        self.launcher = launcher
        path = os.path.join(self.log_dir, f"{name}.ctl")
        if len(os.fsencode(path)) > UNIX_PATH_MAX:  # too long for a Unix socket address
            path = os.path.join(tempfile.gettempdir(), f"testbed-{os.getpid()}-{name}.ctl")
        self.control_path = path

    @classmethod
    def available(cls):
        """The embedded target is always available."""
        return True

    def switchd_args(self):
        """The arguments of ``testbed.embedded_switch.switchd`` for this switch."""
        argv = ["--name", self.name, "--device-id", str(self.device_id), "--grpc-addr", self.grpc_address,
                "--cpu-port", str(self.cpu_port), "--seed", str(self.seed)]
        for port, interface in self.port_interfaces().items():
            argv += ["--port", f"{port}={interface}"]
        if self.pcap:
            argv += ["--pcap-dir", self.log_dir]
        argv += ["--control-socket", self.control_path]
        if self.backend is not None:
            argv += ["--backend", self.backend]
        return argv

    def command(self):
        """argv of ``python -m testbed.embedded_switch.switchd`` for this switch."""
        return [sys.executable, "-m", SWITCHD_MODULE] + self.switchd_args()

    def launch(self):
        """Fork the process from the launcher when there is one, else start it as its own interpreter."""
        if self.launcher is None:
            return super().launch()
        return self.launcher.spawn(self.switchd_args(), self.log_path, niceness=SWITCH_NICENESS, name=self.name)

    def describe(self):
        """The state file entry, with the impairment control socket (``control_path``)."""
        entry = super().describe()
        entry["control_path"] = self.control_path
        return entry

    def set_packet_generator(self, app, port, period_us, template):
        """Configure the embedded target's packet generator over the control socket.

        Raises:
            ParameterError: a value the switch refused (named).
            EmulationError: the switch is not running or does not answer.
        """
        self.check_alive()
        if self.process is None:
            raise EmulationError(f"switch {self.name}: not started")
        set_packet_generator(self.control_path, app, port=port, period_us=period_us, template=template,
                             via=self.control_via)

    def port_status(self):
        """``{port: {"loss", "delay_ms", "drops", "tx_errors"}}`` from the control socket."""
        return port_status(self.control_path, via=self.control_via)

    def clock_origin_ns(self):
        """CLOCK_MONOTONIC ns at which the pipeline's timestamps are 0 (from the control socket)."""
        return switch_status(self.control_path, via=self.control_via)["clock_origin_ns"]

    def packet_generator_status(self):
        """``{app: {"generated", "skipped", "late_max_us", ...}}`` of the packet generator."""
        status = switch_status(self.control_path, via=self.control_via)
        return {int(app): state for app, state in status["packet_generator"].items()}

    def record_dsf_history(self, names, start_ns, period_us, capacity):
        """Have the DSF traffic manager note counters ``names`` every ``period_us`` from ``start_ns``
        (CLOCK_MONOTONIC), keeping at most ``capacity`` notes unread (:mod:`testbed.p4.v1model.dsf.history`)."""
        record_dsf_history(self.control_path, names, start_ns, period_us, capacity, via=self.control_via)

    def read_dsf_history(self):
        """``(notes, overflows)``: the DSF counter notes since the last read (see port_control.read_dsf_history)."""
        return read_dsf_history(self.control_path, via=self.control_via)

    def read_register(self, name, index=None, client=None):
        """Read a register over P4Runtime (the embedded server implements RegisterEntry reads).

        Raises:
            EmulationError: no P4Runtime session was given.
        """
        if client is None:
            raise EmulationError(f"switch {self.name}: reading a register needs a P4Runtime session")
        return client.read_register(name, index)

    def set_port_impairment(self, port, loss=0.0, delay_ms=0.0):
        """Drop (probability ``loss``) and delay (``delay_ms``) the frames leaving ``port``.

        Args:
            port: the switch port number (the Mininet port number).
            loss: drop probability in [0, 1].
            delay_ms: fixed added delay in milliseconds.

        Raises:
            ParameterError: a bad value (named).
            EmulationError: the switch process is not running or does not answer.
        """
        check_impairment(loss, delay_ms)
        self.check_alive()
        if self.process is None:
            raise EmulationError(f"switch {self.name}: not started")
        set_port_impairment(self.control_path, port, loss=loss, delay_ms=delay_ms, via=self.control_via)

    def stop(self, deleteIntfs=True):
        """Stop the process and remove its control socket (left behind when it was killed)."""
        try:
            super().stop(deleteIntfs)
        finally:
            try:
                os.remove(self.control_path)
            except OSError:
                pass


class BMv2Switch(P4Switch):
    """A switch running BMv2 ``simple_switch_grpc --no-p4`` (needs BMv2 installed), in a network namespace of its own.

    Args (besides :class:`P4Switch`'s):
        socket_dir: where the P4Runtime server's Unix socket is made (``<socket_dir>/<name>.p4rt``;
            default: ``log_dir``); a short private folder keeps the path within the Unix socket limit.
        packet_log: write BMv2's per-packet log to ``<log_dir>/<name>.bmv2.txt`` (BMv2 adds the
            ``.txt``; flushed per line; it slows BMv2 down several times, so it is off unless asked for).
        pktgen_port: give the switch a packet-generator port with this number: a veth pair
            ``<name>-eth<N>`` (attached to BMv2 as port N) / ``<name>-pg<N>``, into which
            :mod:`testbed.emulation.pktgen_injector` writes the periodic frames
            (:meth:`set_packet_generator`); None: no such port.

    Control servers: BMv2's Thrift runtime server listens on every address of the
    namespace it runs in, and PI's P4Runtime server on the address it is given.  So the
    switch runs in its own network namespace (a Mininet node with ``inNamespace``),
    which holds only its loopback and its ports (which carry no addresses): the Thrift
    server (port :data:`~testbed.emulation.bmv2_runtime.THRIFT_PORT`) is reachable
    only from inside it, and P4Runtime is served on a Unix socket (``grpc_address``
    ``unix:...``), which only local processes with the right to the folder reach.
    ``simple_switch_CLI`` works from the switch's shell (Mininet CLI: ``s1
    simple_switch_CLI``).

    Ports are never set down (``cut_in_wire``): BMv2 reads every port in one thread
    (``run_select`` in ``src/BMI/bmi_port.c``) with blocking libpcap handles, and when
    one interface is down libpcap's next read waits until it is up again, so the
    whole switch stops receiving on *every* port.  Taking the port out of BMv2 first
    (``bm_dev_mgr_remove_port`` over Thrift) is no way out either: its removal
    deadlocks against that thread when frames arrive at the same time (the thread
    waits for the port manager's lock that the removal holds while it waits for
    the thread).  So each link of a BMv2 switch is a wire
    (:mod:`testbed.emulation.links`) that a failure cuts: the ports lose their
    carrier and stay up, as on a cable pulled out.  Registers are read over
    Thrift: BMv2's P4Runtime server (p4lang/PI ``proto/frontend/src/device_mgr.cpp``)
    answers UNIMPLEMENTED to RegisterEntry reads and writes.
    """

    target_name = "bmv2"
    binary = "simple_switch_grpc"
    cut_in_wire = True  # its links are wires: a failure must never set a BMv2 port down

    def __init__(self, name, log_dir=None, socket_dir=None, packet_log=False, pktgen_port=None, **params):
        params["inNamespace"] = True
        super().__init__(name, log_dir=log_dir, **params)
        self.socket_path = os.path.join(socket_dir or self.log_dir, f"{name}.p4rt")
        if len(os.fsencode(self.socket_path)) > UNIX_PATH_MAX:
            raise EmulationError(f"switch {name}: P4Runtime socket path {self.socket_path} is longer than "
                                 f"{UNIX_PATH_MAX} bytes: give a shorter socket_dir")
        self.thrift_port = THRIFT_PORT
        self.packet_log = packet_log
        self.pktgen_port = pktgen_port
        self.injectors = {}  # app -> injector process
        self._namespace_socket = None
        self._runtime = None

    @property
    def grpc_address(self):
        """``unix:<path>`` of this switch's P4Runtime server."""
        return f"unix:{self.socket_path}"

    def _listening(self):
        return accepts_connections(self.grpc_address)

    def _pktgen_interfaces(self):
        return f"{self.name}-eth{self.pktgen_port}", f"{self.name}-pg{self.pktgen_port}"

    def _in_namespace(self, work):
        return in_namespace(self.pid, work)

    def start(self, controllers):
        """Set the ports up in the switch's namespace (IPv6 and offloads off), add the generator port, start BMv2."""
        if os.path.exists(self.socket_path):
            os.remove(self.socket_path)  # a leftover of a killed switch: BMv2 would not bind over it
        ports = list(self.port_interfaces().values())
        if self.pktgen_port is not None:
            switch_end, injector_end = self._pktgen_interfaces()
            self._in_namespace(lambda: ip_batch([f"link add {switch_end} type veth peer name {injector_end}"]))
            ports += [switch_end, injector_end]

        def configure():
            for name in ports:
                disable_ipv6(name)
                disable_offloads(name)
            ip_batch([f"link set dev {name} up" for name in ports + ["lo"]])  # lo: the Thrift server
        self._in_namespace(configure)
        self._namespace_socket = namespace_socket(self.pid)
        super().start(controllers)

    def launch(self):
        """Start BMv2 inside the switch's namespace, output appended to the log."""
        return self.spawn_in_namespace(self.command(), self.log_path)

    def spawn_in_namespace(self, argv, log_path):
        """Start ``argv`` inside the switch's namespace (``mnexec -a``: Mininet's way into a node), output
        appended to ``log_path``; return its handle."""
        log = open(log_path, "ab")
        try:
            return subprocess.Popen(["mnexec", "-a", str(self.pid)] + argv, stdout=log,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                                    preexec_fn=_raise_priority)
        finally:
            log.close()

    def runtime(self):
        """The Thrift session to this BMv2 (opened on first use).

        Raises:
            EmulationError: the switch is not running, or Thrift does not answer.
        """
        self.check_alive()
        if self.process is None:
            raise EmulationError(f"switch {self.name}: not started")
        if self._runtime is None:
            self._runtime = BMv2Runtime(self.pid, self.thrift_port, self.name)
        return self._runtime

    def set_packet_generator(self, app, port, period_us, template):
        """(Re)start the injector process of application ``app`` on the generator port.

        Raises:
            EmulationError: the switch has no generator port, or ``port`` is not it.
        """
        if self.pktgen_port is None or port != self.pktgen_port:
            raise EmulationError(f"switch {self.name}: BMv2 has no packet generator; its frames come from "
                                 f"an injector on the generator port ({self.pktgen_port}), not port {port}")
        self._stop_injector(app)
        self.injectors[app] = self.spawn_in_namespace(
            [sys.executable, "-m", "testbed.emulation.pktgen_injector", "--intf", self._pktgen_interfaces()[1],
             "--period-us", str(period_us), "--template", bytes(template).hex()],
            os.path.join(self.log_dir, f"{self.name}.pktgen{app}.log"))

    def _stop_injector(self, app):
        process = self.injectors.pop(app, None)
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def stop(self, deleteIntfs=True):
        """Stop the injectors and BMv2, close the sessions; the namespace goes with the node's shell."""
        try:
            for app in list(self.injectors):
                self._stop_injector(app)
            runtime, self._runtime = self._runtime, None
            if runtime is not None:
                runtime.close()
            super().stop(deleteIntfs)
        finally:
            if self._namespace_socket is not None:
                self._namespace_socket.close()
                self._namespace_socket = None
            if os.path.exists(self.socket_path):
                os.remove(self.socket_path)

    @classmethod
    def available(cls):
        """True when ``simple_switch_grpc`` and ``p4c`` are on PATH."""
        return shutil.which(cls.binary) is not None and shutil.which("p4c") is not None

    def command(self):
        """argv of ``simple_switch_grpc`` for this switch (run inside its namespace)."""
        argv = [self.binary, "--device-id", str(self.device_id), "--thrift-port", str(self.thrift_port)]
        if self.packet_log:
            argv += ["--log-file", os.path.join(self.output_dir(), f"{self.name}.bmv2"), "--log-flush"]
        for port, interface in self.port_interfaces().items():
            argv += ["-i", f"{port}@{interface}"]
        if self.pktgen_port is not None:
            argv += ["-i", f"{self.pktgen_port}@{self._pktgen_interfaces()[0]}"]
        if self.pcap:
            argv += ["--pcap", self.output_dir()]
        argv += ["--no-p4", "--", "--grpc-server-addr", self.serve_address(), "--cpu-port", str(self.cpu_port)]
        return argv

    def output_dir(self):
        """Where BMv2 writes its packet log and pcaps: the log folder."""
        return self.log_dir

    def serve_address(self):
        """Where BMv2 serves P4Runtime, on the machine it runs on: :attr:`grpc_address`."""
        return self.grpc_address

    def describe(self):
        """The state file entry, with the Thrift port (inside the namespace of ``netns_pid``)."""
        entry = super().describe()
        entry.update(thrift_port=self.thrift_port, netns_pid=self.pid)
        return entry

    def read_register(self, name, index=None, client=None):
        """Read a register over BMv2's Thrift runtime interface.

        Raises:
            EmulationError: the switch is not running, or BMv2 refused the read (its message).
        """
        return self.runtime().register_read(name, index)


SWITCH_KINDS = {"embedded": EmbeddedP4Switch, "bmv2": BMv2Switch}
