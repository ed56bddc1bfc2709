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

from testbed.emulation.logs import log_tail
from testbed.errors import EmulationError

GRPC_BASE_PORT = 50000
DEFAULT_CPU_PORT = 255  # the CPU_PORT_ID of p4src/include/headers.p4
READY_TIMEOUT_S = 60.0
UNIX_PATH_MAX = 107  # sun_path holds 108 bytes with the terminating NUL


class P4Switch(Switch):
    """Common part of the P4 switch classes: process, ports, log, readiness.

    Args:
        name: switch name.
        log_dir: directory for ``<name>.log`` (and pcaps); required.
        device_id: P4Runtime device id (default: the switch's dpid as an int).
        grpc_port: TCP port of the P4Runtime server (default 50000 + device id).
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
        """Start the switch process (Mininet calls this after links exist).

        Raises:
            EmulationError: another process already listens on this switch's gRPC
                port (readiness could not be told apart from it).
        """
        if self._listening():
            raise EmulationError(f"switch {self.name}: TCP port {self.grpc_port} is already in use "
                                 "(another fabric or a leftover switch: run `testbed cleanup`)")
        os.makedirs(self.log_dir, exist_ok=True)
        for intf in self.intfList():
            if intf.name != "lo":
                self.cmd(f"ip link set {intf.name} up")
                self.cmd(f"ethtool -K {intf.name} rx off tx off sg off tso off gso off gro off lro off "
                         ">/dev/null 2>&1")
                self.cmd(f"sysctl -qw net.ipv6.conf.{intf.name}.disable_ipv6=1")
        log = open(self.log_path, "ab")
        try:
            self.process = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True)
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
        try:
            with socket.create_connection(("127.0.0.1", self.grpc_port), timeout=0.2):
                return True
        except OSError:
            return False

    def wait_ready(self, timeout=READY_TIMEOUT_S):
        """Block until the P4Runtime server accepts connections.

        Raises:
            EmulationError: the process died or did not listen within ``timeout``.
        """
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.check_alive()
            if self._listening():
                return
            time.sleep(0.05)
        raise EmulationError(f"switch {self.name}: P4Runtime server not listening on {self.grpc_address} "
                             f"after {timeout:.0f} s; log {self.log_path}:\n{log_tail(self.log_path)}")

    def stop(self, deleteIntfs=True):
        """Stop the process (SIGTERM, then SIGKILL) and remove the interfaces."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGTERM)
                process.wait(timeout=5)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                process.wait()
        super().stop(deleteIntfs)

    def describe(self):
        """Return the switch's entry for the network state file."""
        return {"target": self.target_name, "grpc": self.grpc_address, "device_id": self.device_id,
                "cpu_port": self.cpu_port, "log": self.log_path, "program": self.program,
                "process_pid": self.process.pid if self.process else None}

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

    Its control socket (``control_path``: ``<log_dir>/<name>.ctl``, or a short path in the
    temporary directory when that is too long for a Unix socket) sets per-port loss/delay.
    """

    target_name = "embedded"

    def __init__(self, name, log_dir=None, seed=0, **params):
        super().__init__(name, log_dir=log_dir, **params)
        self.seed = int(seed)  # the run's seed: the target's random() and per-port loss draws
        path = os.path.join(self.log_dir, f"{name}.ctl")
        if len(os.fsencode(path)) > UNIX_PATH_MAX:  # too long for a Unix socket address
            path = os.path.join(tempfile.gettempdir(), f"testbed-{os.getpid()}-{name}.ctl")
        self.control_path = path

    @classmethod
    def available(cls):
        """The embedded target is always available."""
        return True

    def command(self):
        """argv of ``python -m testbed.embedded_switch.switchd`` for this switch."""
        argv = [sys.executable, "-m", "testbed.embedded_switch.switchd", "--name", self.name,
                "--device-id", str(self.device_id), "--grpc-addr", self.grpc_address,
                "--cpu-port", str(self.cpu_port), "--seed", str(self.seed)]
        for port, interface in self.port_interfaces().items():
            argv += ["--port", f"{port}={interface}"]
        if self.pcap:
            argv += ["--pcap-dir", self.log_dir]
        argv += ["--control-socket", self.control_path]
        return argv

    def describe(self):
        """The state file entry, with the impairment control socket (``control_path``)."""
        entry = super().describe()
        entry["control_path"] = self.control_path
        return entry

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
        from testbed.embedded_switch.port_control import check_impairment, set_port_impairment

        check_impairment(loss, delay_ms)
        self.check_alive()
        if self.process is None:
            raise EmulationError(f"switch {self.name}: not started")
        set_port_impairment(self.control_path, port, loss=loss, delay_ms=delay_ms)

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
    """A switch running BMv2 ``simple_switch_grpc --no-p4`` (needs BMv2 installed)."""

    target_name = "bmv2"
    binary = "simple_switch_grpc"

    @classmethod
    def available(cls):
        """True when ``simple_switch_grpc`` and ``p4c`` are on PATH."""
        return shutil.which(cls.binary) is not None and shutil.which("p4c") is not None

    def command(self):
        """argv of ``simple_switch_grpc`` for this switch."""
        argv = [self.binary, "--device-id", str(self.device_id), "--log-file",
                os.path.join(self.log_dir, f"{self.name}.bmv2"), "--log-flush"]
        for port, interface in self.port_interfaces().items():
            argv += ["-i", f"{port}@{interface}"]
        if self.pcap:
            argv += ["--pcap", self.log_dir]
        argv += ["--no-p4", "--", "--grpc-server-addr", f"0.0.0.0:{self.grpc_port}",
                 "--cpu-port", str(self.cpu_port)]
        return argv


SWITCH_KINDS = {"embedded": EmbeddedP4Switch, "bmv2": BMv2Switch}
