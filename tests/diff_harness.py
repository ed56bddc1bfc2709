"""Differential testing of the embedded P4 target against BMv2 ``simple_switch_grpc``.

One harness drives both targets the same way: the real switch process (the embedded
``testbed.embedded_switch.switchd`` or BMv2's ``simple_switch_grpc --no-p4``) runs in a
network namespace of its own (``tbd<pid>n<N>``) whose veth pairs ``tbd-s<N>`` (the switch's
port N) / ``tbd-h<N>`` (the harness's end) carry the frames; its P4Runtime server listens on
a Unix socket in a private temporary folder.  The harness pushes the program (each target
with its own P4Info: p4c's for BMv2, the embedded target's for itself), applies one seeded
:class:`Script` of P4Runtime writes (by names) and frame batches, and records what comes out:
the frames of every port in order, the PacketIns in order, every counter and direct
counter read over P4Runtime at the end, and the registers (:func:`read_registers`).
:func:`compare_runs` lists every difference.

Pacing and completion: the frames of a batch (at most :data:`BATCH` frames) all enter on
one port and are followed by a marker frame on the same port whose output is known (a
PacketIn, or a frame on a known port).  Both targets run their ingress pipeline in arrival
order per port, so once the marker came out every frame of the batch has passed ingress
and the next batch (maybe on another port) cannot overtake it in stateful ingress
externs (registers).  Then the harness waits until no output arrived for
:data:`QUIET_S`, so that no egress queue ever holds more than two batches (BMv2's queues
hold 64 frames).  A frame that comes out later than that is still compared in its place:
outputs are compared as per-port sequences over the whole run, never by timing.  After the
last batch the harness waits until every port (and the CPU port) sent as many frames as the
program's egress counter counted for it, so that a slow switch loses nothing at the end.
"""
import contextlib
import ctypes
import dataclasses
import ipaddress
import itertools
import os
import random
import select
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import zlib

from testbed.packet_sockets import (PACKET_IGNORE_OUTGOING, SOL_PACKET, enable_vlan_tags, open_packet_socket,
                                    receive_frame)

PORTS = (1, 2, 3, 4)
CPU_PORT = 255
BATCH = 24  # frames per batch: two batches stay below BMv2's 64-frame queues
QUIET_S = 0.03  # no output for this long after the marker: the batch is out
MARKER_TIMEOUT_S = 15.0
READY_TIMEOUT_S = 60.0
MARKER_ETHERTYPE = 0x88B8  # no program parses it: IPv4 programs send it to the CPU port
MARKER_TAG = b"TBD-MARK"
MARKER_MEMBER = 5000  # dsf_fabric: the member that sends the marker cells out of port 1
MARKER_ADDRESS = 0xCB007107  # 203.0.113.7: programs without a CPU path route the marker there
CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


class HarnessError(Exception):
    """The harness itself failed (a switch did not start, a marker never came out)."""


# ------------------------------------------------------------------------------------ namespace
class Namespace:
    """A network namespace ``tbd<pid>n<N>`` with one veth pair per switch port, removed by :meth:`close`.

    Args:
        ports: the switch port numbers (veth ``tbd-s<N>`` for the switch, ``tbd-h<N>`` for the harness).

    Raises:
        HarnessError: ``ip`` failed (its message).
    """

    _created = itertools.count()

    def __init__(self, ports=PORTS):
        self.name = f"tbd{os.getpid()}n{next(self._created)}"
        self.path = f"/var/run/netns/{self.name}"
        self.ports = tuple(ports)
        _run(["ip", "netns", "add", self.name])
        try:
            lines = []
            for port in self.ports:
                lines += [f"link add tbd-s{port} type veth peer name tbd-h{port}",
                          f"link set dev tbd-s{port} up", f"link set dev tbd-h{port} up"]
            lines.append("link set dev lo up")
            # no IPv6: the kernel would send its own frames (router and neighbour solicitations) into the switch
            self.run(_disable_ipv6)
            _run(["ip", "-netns", self.name, "-batch", "-"], stdin="\n".join(lines) + "\n")
            for port in self.ports:
                for end in (f"tbd-s{port}", f"tbd-h{port}"):
                    # no GRO/offloads: frames must reach the switch and the harness exactly as sent
                    _run(["ip", "netns", "exec", self.name, "ethtool", "-K", end, "rx", "off", "tx", "off",
                          "sg", "off", "tso", "off", "gso", "off", "gro", "off"], check=False)
        except BaseException:
            self.close()
            raise

    def run(self, work):
        """Run ``work()`` in a thread that joined the namespace; return its result (sockets made there stay in it)."""
        outcome = {}

        def target():
            try:
                fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
                try:
                    if _libc.setns(fd, CLONE_NEWNET) != 0:
                        error = ctypes.get_errno()
                        raise OSError(error, f"setns {self.path}: {os.strerror(error)}")
                finally:
                    os.close(fd)
                outcome["value"] = work()
            except BaseException as error:  # noqa: BLE001 - handed to the caller
                outcome["error"] = error

        thread = threading.Thread(target=target, daemon=True)
        thread.start()
        thread.join()
        if "error" in outcome:
            raise outcome["error"]
        return outcome["value"]

    def close(self):
        """Delete the namespace (its veths go with it); idempotent."""
        subprocess.run(["ip", "netns", "delete", self.name], capture_output=True, check=False)


def _disable_ipv6():
    """In a thread inside the namespace: no IPv6 on its present and future interfaces."""
    for which in ("all", "default"):
        with open(f"/proc/sys/net/ipv6/conf/{which}/disable_ipv6", "w") as handle:
            handle.write("1")


def _run(argv, stdin=None, check=True):
    result = subprocess.run(argv, input=stdin, capture_output=True, text=True, check=False)
    if check and result.returncode != 0:
        raise HarnessError(f"{' '.join(argv)} failed: {result.stderr.strip()}")
    return result


def leftovers():
    """The namespaces (``tbd...``) and root-namespace interfaces (``tbd-...``) named like the harness's that exist now.

    The switch processes are the harness's children, stopped (and waited for) after each run.
    """
    found = [name for name in os.listdir("/var/run/netns")] if os.path.isdir("/var/run/netns") else []
    found = [f"netns {name}" for name in found if name.startswith("tbd")]
    found += [f"interface {name}" for name in os.listdir("/sys/class/net") if name.startswith("tbd-")]
    return found


# ------------------------------------------------------------------------------------ wire
class Wire:
    """Raw sockets on the harness ends of the veths: send into a switch port, collect what each port sends.

    Args:
        namespace: the :class:`Namespace`.
    """

    def __init__(self, namespace):
        self.sockets = {}

        def open_all():
            for port in namespace.ports:
                sock = open_packet_socket()
                sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
                enable_vlan_tags(sock)  # the kernel takes VLAN tags out of received frames: put them back
                sock.bind((f"tbd-h{port}", 0))
                sock.setblocking(False)
                self.sockets[port] = sock
        try:
            namespace.run(open_all)
        except BaseException:
            self.close()
            raise
        self.by_fd = {sock.fileno(): port for port, sock in self.sockets.items()}

    def send(self, port, frame):
        """Send ``frame`` into switch port ``port``."""
        self.sockets[port].send(frame)

    def drain(self, timeout):
        """Frames that came out of the switch within ``timeout`` seconds (at least one poll): [(port, frame)]."""
        received = []
        ready, _, _ = select.select(list(self.sockets.values()), [], [], timeout)
        for sock in ready:
            port = self.by_fd[sock.fileno()]
            while True:
                try:
                    received.append((port, receive_frame(sock, 65535)[0]))
                except BlockingIOError:
                    break
        return received

    def flush(self):
        """Drop whatever waits on the sockets (frames of a previous switch)."""
        while self.drain(0.0):
            pass

    def close(self):
        """Close the sockets."""
        for sock in self.sockets.values():
            sock.close()
        self.sockets = {}


# ------------------------------------------------------------------------------------ switches
@dataclasses.dataclass
class SwitchProcess:
    """A running switch process: ``target``, its Popen, the P4Runtime address and its log file."""

    target: str
    process: subprocess.Popen
    address: str
    log_path: str

    def log_tail(self, lines=30):
        """The last lines of the switch's log."""
        try:
            with open(self.log_path, errors="replace") as handle:
                return "".join(handle.readlines()[-lines:])
        except OSError:
            return ""

    def stop(self):
        """SIGTERM, then SIGKILL after 5 s; waits for the process."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def _accepts(path):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        try:
            sock.connect(path)
            return True
        except OSError:
            return False


def start_switch(target, namespace, workdir, ports=PORTS):
    """Start ``target``'s switch process in ``namespace`` with ``ports``, no pipeline; wait until it listens.

    Args:
        target: "embedded" or "bmv2".
        namespace: the :class:`Namespace`.
        workdir: a private folder for the Unix socket and the log.
        ports: the switch ports (each on ``tbd-s<N>``).

    Returns:
        SwitchProcess

    Raises:
        HarnessError: the process died or did not listen within :data:`READY_TIMEOUT_S` (log tail included).
    """
    socket_path = os.path.join(workdir, f"{target}.sock")
    if os.path.exists(socket_path):
        os.remove(socket_path)
    log_path = os.path.join(workdir, f"{target}.log")
    if target == "embedded":
        argv = [sys.executable, "-m", "testbed.embedded_switch.switchd", "--name", "tbd", "--device-id", "1",
                "--grpc-addr", f"unix:{socket_path}", "--cpu-port", str(CPU_PORT), "--seed", "0"]
        for port in ports:
            argv += ["--port", f"{port}=tbd-s{port}"]
    else:
        argv = ["simple_switch_grpc", "--device-id", "1", "--thrift-port", "9090"]
        for port in ports:
            argv += ["-i", f"{port}@tbd-s{port}"]
        argv += ["--no-p4", "--", "--grpc-server-addr", f"unix:{socket_path}", "--cpu-port", str(CPU_PORT)]
    with open(log_path, "ab") as log:
        process = subprocess.Popen(["ip", "netns", "exec", namespace.name] + argv, stdout=log,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    switch = SwitchProcess(target, process, f"unix:{socket_path}", log_path)
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not _accepts(socket_path):
        if process.poll() is not None or time.monotonic() > deadline:
            switch.stop()
            raise HarnessError(f"{target} switch did not start (status {process.poll()}):\n{switch.log_tail()}")
        time.sleep(0.05)
    return switch


# ------------------------------------------------------------------------------------ script
@dataclasses.dataclass
class Write:
    """One P4Runtime write by names: ``method`` of :class:`~testbed.p4runtime.client.P4RuntimeClient` and its kwargs."""

    method: str
    kwargs: dict


@dataclasses.dataclass
class Batch:
    """Frames sent into one port, each with the name of its kind, followed by the marker."""

    port: int
    frames: list  # [(kind, bytes)]


@dataclasses.dataclass
class PacketOuts:
    """PacketOuts sent over P4Runtime: [(metadata {name: value}, payload)], followed by a marker PacketOut
    to port ``PACKET_OUT_MARKER_PORT``."""

    packets: list

    @property
    def frames(self):
        """The packets, as (kind, payload), like a :class:`Batch`'s frames."""
        return [(f"packet_out to {metadata['egress_port']}", payload) for metadata, payload in self.packets]


PACKET_OUT_MARKER_PORT = 1


@dataclasses.dataclass
class Script:
    """What both targets get, in order: :class:`Write`, :class:`Batch` and :class:`PacketOuts` steps."""

    program: str
    seed: int
    steps: list
    marker: "Marker"

    @property
    def frames(self):
        """The number of frames the batches and PacketOut steps send (markers not included)."""
        return sum(len(step.frames) for step in self.steps if isinstance(step, (Batch, PacketOuts)))


@dataclasses.dataclass
class Marker:
    """The frame that closes a batch and where it comes out: ``port`` (CPU_PORT: a PacketIn).

    ``frame(n)`` is the marker of batch ``n``; ``matches(port, payload)`` tells a marker's output.
    """

    port: int
    ethertype: int = MARKER_ETHERTYPE
    prefix: bytes = b""

    def frame(self, number):
        """The marker frame of step ``number`` (bytes)."""
        return (b"\x02\x00\x00\x00\x00\x01" + b"\x02\x00\x00\x00\x00\x02" + struct.pack("!H", self.ethertype)
                + self.prefix + MARKER_TAG + struct.pack("!I", number) + bytes(32))

    def matches(self, port, payload, number):
        """True when ``payload`` out of ``port`` (CPU_PORT: a PacketIn's payload) is step ``number``'s marker."""
        return port == self.port and (MARKER_TAG + struct.pack("!I", number)) in payload


# ------------------------------------------------------------------------------------ runs
@dataclasses.dataclass
class Run:
    """What one target did with a script.

    ``outputs``: {port: [(batch, frame)]}; ``packet_ins``: [(batch, metadata, payload)];
    ``writes``: [(method, "OK" or the error code)]; ``counters``: {name: {index: (packets, bytes)}}
    (non-zero cells); ``direct_counters``: {table: [(match, (packets, bytes))]}; ``seconds``: wall time
    of the script (frames and writes); ``markers``: markers seen; ``registers``: {name: {index: value}}
    (non-zero cells of the registers that hold neither times nor queue depths: :data:`CLOCK_REGISTERS`).
    """

    target: str
    outputs: dict
    packet_ins: list
    writes: list
    counters: dict
    direct_counters: dict
    seconds: float
    markers: int
    registers: dict


def run_script(target, script, namespace, wire, workdir):
    """Start ``target``'s switch, push ``script.program``, play the script, read the counters, stop the switch.

    Args:
        target: "embedded" or "bmv2".
        script: the :class:`Script`.
        namespace, wire: the harness's :class:`Namespace` and :class:`Wire`.
        workdir: a private folder (socket, log).

    Returns:
        Run

    Raises:
        HarnessError: the switch failed, or a marker did not come out within :data:`MARKER_TIMEOUT_S`.
    """
    from testbed.p4runtime.client import P4RuntimeClient, P4RuntimeClientError
    from testbed.targets import pipeline_config

    config = pipeline_config(script.program, target)
    switch = start_switch(target, namespace, workdir)
    client = None
    try:
        client = P4RuntimeClient(switch.address, device_id=1, election_id=(0, 1))
        client.set_pipeline((config.p4info, config.device_config), target=target)
        wire.flush()
        outputs = {port: [] for port in namespace.ports}
        packet_ins, writes = [], []
        markers = 0
        started = time.monotonic()
        for number, step in enumerate(script.steps):
            if isinstance(step, Write):
                try:
                    getattr(client, step.method)(**step.kwargs)
                    writes.append((step.method, "OK"))
                except P4RuntimeClientError as error:
                    writes.append((step.method, error.code))
                continue
            if isinstance(step, PacketOuts):
                # through the CPU port: the marker is a PacketOut too, out of a known port
                marker = Marker(PACKET_OUT_MARKER_PORT)
                for metadata, payload in step.packets:
                    client.packet_out(payload, **metadata)
                client.packet_out(marker.frame(number), egress_port=PACKET_OUT_MARKER_PORT, _pad=0)
            else:
                marker = script.marker
                for _kind, frame in step.frames:
                    wire.send(step.port, frame)
                wire.send(step.port, marker.frame(number))
            markers += _collect_batch(number, marker, client, wire, outputs, packet_ins, switch)
        _settle(client, wire, outputs, packet_ins, len(script.steps))
        seconds = time.monotonic() - started
        counters, direct_counters = read_counters(client)
        registers = read_registers(target, client, switch)
        return Run(target, outputs, packet_ins, writes, counters, direct_counters, seconds, markers, registers)
    finally:
        if client is not None:
            client.close()
        switch.stop()


def _collect_batch(number, marker, client, wire, outputs, packet_ins, switch):
    """Collect outputs until batch ``number``'s marker came out and then nothing for QUIET_S; return 1."""
    deadline = time.monotonic() + MARKER_TIMEOUT_S
    seen = False
    quiet_since = None
    while True:
        got = _poll(number, client, wire, outputs, packet_ins, 0.005)
        if not seen:
            seen = any(marker.matches(port, payload, number) for port, payload in got)
            if not seen and time.monotonic() > deadline:
                status = switch.process.poll()
                raise HarnessError(f"{switch.target}: the marker of step {number} never came out "
                                   f"(switch status {status}):\n{switch.log_tail()}")
            quiet_since = time.monotonic()
            continue
        now = time.monotonic()
        if got:
            quiet_since = now
        elif now - quiet_since >= QUIET_S:
            return 1


def _poll(number, client, wire, outputs, packet_ins, timeout):
    """Record what came out within ``timeout``; return [(port, payload)] of it (CPU_PORT: PacketIns)."""
    got = []
    for port, frame in wire.drain(timeout):
        outputs[port].append((number, frame))
        got.append((port, frame))
    while True:
        packet = client.get_packet_in(timeout=0)
        if packet is None:
            break
        packet_ins.append((number, dict(packet.metadata), packet.payload))
        got.append((CPU_PORT, packet.payload))
    return got


EGRESS_COUNTER = "MyEgress.egress_port_counter"  # every p4src program counts each frame egress handles
SETTLE_TIMEOUT_S = 20.0


def _settle(client, wire, outputs, packet_ins, number, quiet=0.3):
    """After the last batch: collect until every frame the switch counted in egress for a harness port
    (or the CPU port) has come out, then until nothing came out for ``quiet`` seconds.

    The egress counter tells how many frames each port must still send, whatever the machine's load;
    without it (or if the counts never match: the comparison then shows what is missing) the quiet
    period alone decides.
    """
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    counted_here = any(c.preamble.name == EGRESS_COUNTER for c in client.index.all("counters"))
    while counted_here and time.monotonic() < deadline:
        counted = client.read_counter(EGRESS_COUNTER)
        if all(counted.get(port, (0, 0))[0] == len(outputs[port]) for port in outputs) \
                and counted.get(CPU_PORT, (0, 0))[0] == len(packet_ins):
            break
        _poll(number, client, wire, outputs, packet_ins, 0.05)
    quiet_since = time.monotonic()
    while time.monotonic() - quiet_since < quiet:
        if _poll(number, client, wire, outputs, packet_ins, 0.02):
            quiet_since = time.monotonic()


def read_counters(client):
    """Every counter's non-zero cells and every direct counter's entries, read over P4Runtime.

    Returns:
        tuple: ({counter name: {index: (packets, bytes)}}, {table name: sorted [(match text, (packets, bytes))]}).
    """
    index = client.index
    counters = {}
    for counter in index.all("counters"):
        cells = client.read_counter(counter.preamble.name)
        counters[counter.preamble.name] = {i: value for i, value in sorted(cells.items()) if value != (0, 0)}
    direct = {}
    for counter in index.all("direct_counters"):
        table = index.name_of("tables", counter.direct_table_id)
        direct[table] = sorted((repr(sorted(view.match.items())), value)
                               for view, value in client.read_direct_counter(table))
    return counters, direct


#: registers whose cells are times or queue depths: what they hold depends on when frames were
#: processed, not on the program's semantics
CLOCK_REGISTERS = {
    "port_qdepth": "deq_qdepth of the last frame each port sent",
    "MyIngress.flowlet_last_seen": "ingress timestamps",
    "last_tx_us": "egress timestamps",
    "last_trigger_us": "egress timestamps of F10's triggers",
}


def read_registers(target, client, switch):
    """Every register's non-zero cells but :data:`CLOCK_REGISTERS`': {name: {index: value}}.

    The embedded target serves RegisterEntry reads over P4Runtime; BMv2's P4Runtime server does
    not (UNIMPLEMENTED), so BMv2's are read over its Thrift server, inside the switch's namespace.
    """
    names = [r.preamble.name for r in client.index.all("registers") if r.preamble.name not in CLOCK_REGISTERS]
    if not names:
        return {}
    if target == "embedded":
        cells = {name: client.read_register(name) for name in names}
    else:
        from testbed.emulation.bmv2_runtime import BMv2Runtime

        runtime = BMv2Runtime(switch.process.pid, 9090, "tbd")
        try:
            cells = {name: runtime.register_read(name) for name in names}
        finally:
            runtime.close()
    return {name: {i: v for i, v in enumerate(values) if v} for name, values in cells.items()}


# ------------------------------------------------------------------------------------ comparison
def compare_runs(embedded, bmv2, script, limit=12):
    """Every difference between two runs of one script, as readable lines (at most ``limit`` per kind).

    Args:
        embedded, bmv2: the :class:`Run` of each target.
        script: the :class:`Script` (to show the input frames of a batch that differs).

    Returns:
        list of str: empty when the runs agree.
    """
    lines = []
    writes = [step for step in script.steps if isinstance(step, Write)]
    for step, (_method, code_a), (_m, code_b) in zip(writes, embedded.writes, bmv2.writes):
        if (code_a == "OK") != (code_b == "OK"):
            lines.append(f"write {step.method} {step.kwargs}: embedded {code_a}, BMv2 {code_b}")
    for port in sorted(set(embedded.outputs) | set(bmv2.outputs)):
        lines += _sequence_differences(f"port {port}", embedded.outputs.get(port, []),
                                       bmv2.outputs.get(port, []), script, limit)
    lines += _sequence_differences("PacketIn", [(n, (meta, payload)) for n, meta, payload in embedded.packet_ins],
                                   [(n, (meta, payload)) for n, meta, payload in bmv2.packet_ins], script, limit)
    for name in sorted(set(embedded.counters) | set(bmv2.counters)):
        a, b = embedded.counters.get(name, {}), bmv2.counters.get(name, {})
        for index in sorted(set(a) | set(b)):
            if a.get(index) != b.get(index):
                lines.append(f"counter {name}[{index}]: embedded {a.get(index)}, BMv2 {b.get(index)}")
    for name in sorted(set(embedded.registers) | set(bmv2.registers)):
        a, b = embedded.registers.get(name, {}), bmv2.registers.get(name, {})
        wrong = [index for index in sorted(set(a) | set(b)) if a.get(index) != b.get(index)]
        for index in wrong[:limit]:
            lines.append(f"register {name}[{index}]: embedded {a.get(index)}, BMv2 {b.get(index)}")
    for table in sorted(set(embedded.direct_counters) | set(bmv2.direct_counters)):
        if embedded.direct_counters.get(table) != bmv2.direct_counters.get(table):
            lines.append(f"direct counter of {table}: embedded {embedded.direct_counters.get(table)}, "
                         f"BMv2 {bmv2.direct_counters.get(table)}")
    return lines


def status_differences(embedded, bmv2, script):
    """The writes both targets refused with different status codes: {(method, embedded code, BMv2 code): count}.

    The embedded P4Runtime server answers with the codes the P4Runtime specification gives;
    PI's server in front of BMv2 differs in places (e.g. UNKNOWN when the target refuses to
    delete a member a group uses), which is not the data plane this harness compares.
    """
    writes = [step for step in script.steps if isinstance(step, Write)]
    found = {}
    for step, (_method, code_a), (_m, code_b) in zip(writes, embedded.writes, bmv2.writes):
        if code_a != code_b and "OK" not in (code_a, code_b):
            key = (step.method, code_a, code_b)
            found[key] = found.get(key, 0) + 1
    return found


def _sequence_differences(where, a, b, script, limit):
    lines = []
    for position in range(max(len(a), len(b))):
        item_a = a[position] if position < len(a) else None
        item_b = b[position] if position < len(b) else None
        if item_a is not None and item_b is not None and item_a[1] == item_b[1]:
            continue
        batch = (item_a or item_b)[0]
        step = script.steps[batch] if batch < len(script.steps) else None
        kinds = sorted({kind for kind, _frame in step.frames}) if isinstance(step, (Batch, PacketOuts)) else []
        lines.append(f"{where} output #{position} (batch {batch}, into port "
                     f"{getattr(step, 'port', '?')}, kinds {kinds}): embedded {_show(item_a)}, BMv2 {_show(item_b)}")
        if len(lines) >= limit:
            lines.append(f"{where}: ... (embedded {len(a)} outputs, BMv2 {len(b)})")
            break
    return lines


def _show(item):
    if item is None:
        return "nothing"
    value = item[1]
    if isinstance(value, tuple):
        return f"metadata {value[0]} payload {value[1].hex()}"
    return value.hex()


# ------------------------------------------------------------------------------------ generation
def _mac(rng):
    return ":".join(f"{b:02x}" for b in [rng.randrange(256) & 0xFE | 0x02] + [rng.randrange(256) for _ in range(5)])


def _ipv4_checksum(header):
    total = sum(struct.unpack(f"!{len(header) // 2}H", header))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


class Pools:
    """Values the table entries use, so that frames can be built to hit them (and others to miss)."""

    def __init__(self, rng):
        self.rng = rng
        bases = [ipaddress.IPv4Address(rng.choice([10, 172, 192]) << 24 | rng.randrange(1 << 24)) for _ in range(3)]
        self.prefixes = set()
        for base in bases:
            for length in (8, 16, 24, 32):
                self.prefixes.add(ipaddress.IPv4Network((int(base) >> (32 - length) << (32 - length), length)))
        for _ in range(8):
            length = rng.choice([12, 20, 28, 31, 32])
            self.prefixes.add(ipaddress.IPv4Network((rng.randrange(1 << 32) >> (32 - length) << (32 - length),
                                                     length)))
        if rng.random() < 0.5:
            self.prefixes.add(ipaddress.IPv4Network("0.0.0.0/0"))
        self.prefixes = sorted(self.prefixes, key=lambda net: (int(net.network_address), net.prefixlen))
        self.hosts = [rng.randrange(1 << 32) for _ in range(6)]
        self.pairs = [(rng.choice(self.hosts), self.address_in(rng.choice(self.prefixes))) for _ in range(10)]
        self.nodes = rng.sample(range(1, 60), 10)
        self.phases = [1, 2, 3, 0, 7]

    def address_in(self, net):
        """A random address inside ``net``."""
        size = net.num_addresses
        return int(net.network_address) + self.rng.randrange(size)

    def dst_address(self):
        """A destination: inside an installed prefix mostly, sometimes anywhere."""
        if self.rng.random() < 0.85:
            return self.address_in(self.rng.choice(self.prefixes))
        return self.rng.randrange(1 << 32)

    def port_value(self):
        """An egress port for an action: the data ports mostly, sometimes the CPU port, the drop port
        (511), a port that does not exist (7) or 0."""
        return self.rng.choices([*PORTS, CPU_PORT, 511, 7, 0], weights=[20] * len(PORTS) + [6, 3, 3, 2])[0]


class ScriptBuilder:
    """Builds the seeded :class:`Script` of one program from its P4Info (the embedded target's).

    Args:
        program: the .p4 path.
        seed: the seed of every random choice.
        frames: how many frames the batches send.
    """

    def __init__(self, program, seed, frames=1000):
        from testbed.p4.loader import load_program

        self.program = program
        self.name = os.path.splitext(os.path.basename(program))[0]
        self.seed = seed
        self.rng = random.Random(f"{self.name}:{seed}")
        self.pools = Pools(self.rng)
        self.info = load_program(program).info
        self.frame_count = frames
        self.steps = []
        self.members = {}  # profile -> {member id: action}
        self.groups = {}  # profile -> {group id: [member ids]}
        self.entries = {}  # table -> {match key (repr): kwargs}
        self.sequence = 0
        self.marker = Marker(CPU_PORT)
        self.marker_route = None
        if "MyIngress.ipv4_forward" in self.info.actions and "MyIngress.ipv4_lpm" in self.info.tables:
            # p4lang tutorials' style: nothing reaches the CPU; the marker is an IPv4 frame to a route of its
            # own, out of port 1
            self.marker_route = MARKER_ADDRESS
            self.marker = Marker(1, ethertype=0x0800, prefix=struct.pack(
                "!BBHHHBBHII", 0x45, 0, 20 + len(MARKER_TAG) + 4 + 32, 0, 0, 64, 253, 0, 0x0A000001, MARKER_ADDRESS))
        if self.name == "dsf_fabric":
            # no frame reaches the CPU there: the marker is a DSF cell to a node of its own, out of port 1
            self.marker_node = 1000
            self.marker = Marker(1, ethertype=0x88B5, prefix=struct.pack("!BBHHHIHHI", 0x10, 16, 0, 1000, 0, 0, 0,
                                                                         0, 0))

    # ---- values
    def _param(self, action, name, bitwidth):
        rng = self.rng
        if name == "port":
            return self.pools.port_value()
        if name in ("dmac", "smac"):
            return _mac(rng)
        if name == "interval_us":
            return (1 << 32) - 1  # flowlets never end within the test: the program does not depend on time
        if name == "load_aware":
            return 0
        if name == "phase":
            return rng.choice(self.pools.phases)
        return rng.randrange(1 << bitwidth)

    def _action(self, refs, default=False):
        scopes = ("TABLE_AND_DEFAULT", "DEFAULT_ONLY") if default else ("TABLE_AND_DEFAULT", "TABLE_ONLY")
        names = [ref.name for ref in refs if ref.scope in scopes]
        weights = [1 if name in ("NoAction",) or "drop" in name else 6 for name in names]
        action = self.rng.choices(names, weights=weights)[0]
        params = {p.name: self._param(action, p.name, p.bitwidth) for p in self.info.actions[action].params}
        return action, params

    def _match(self, table):
        match = {}
        for field in table.match_fields:
            if field.match_type == "selector":
                continue
            name = field.name
            if field.match_type == "lpm":
                net = self.rng.choice(self.pools.prefixes)
                match[name] = f"{net.network_address}/{net.prefixlen}"
            elif name == "hdr.ipv4.srcAddr":
                match[name] = self.rng.choice(self.pools.pairs)[0]
            elif name == "hdr.ipv4.dstAddr":
                match[name] = self.rng.choice(self.pools.pairs)[1]
            elif name.endswith("_port"):
                match[name] = self.rng.choice([*PORTS, 0, CPU_PORT])
            elif name == "hdr.f10_detour.phase":
                match[name] = self.rng.choice(self.pools.phases)
            elif name == "hdr.dsf.dst_node":
                match[name] = self.rng.choice(self.pools.nodes[:7])  # frames use the others too: misses
            else:
                match[name] = self.rng.randrange(1 << field.bitwidth)
        return match

    def _write(self, method, **kwargs):
        self.steps.append(Write(method, kwargs))

    # ---- table state
    def _profile_state(self, profile):
        members = self.members.setdefault(profile.name, {})
        groups = self.groups.setdefault(profile.name, {})
        table = self.info.tables[profile.table_names[0]]
        while len(members) < 4 or self.rng.random() < 0.6:
            member_id = self.rng.randrange(1, 1000)
            if member_id in members:
                continue
            action, params = self._action(table.action_refs)
            members[member_id] = action
            self._write("insert_member", profile=profile.name, member_id=member_id, action=action, params=params)
        while len(groups) < 2 or self.rng.random() < 0.5:
            group_id = self.rng.randrange(1, 1000)
            if group_id in groups:
                continue
            chosen = self._group_members(members)
            groups[group_id] = chosen
            self._write("insert_group", profile=profile.name, group_id=group_id, members=chosen)

    def _group_members(self, members):
        """Some members (not the marker's), in random order, a few of them weighted."""
        ordinary = sorted(m for m in members if m != MARKER_MEMBER)
        chosen = self.rng.sample(ordinary, self.rng.randint(1, len(ordinary)))
        return [(m, self.rng.choice([1, 1, 1, 2, 3])) for m in chosen]

    def _entry_target(self, table):
        if table.implementation:
            profile = table.implementation
            if self.rng.random() < 0.3:
                return {"member_id": self.rng.choice(sorted(self.members[profile]))}
            return {"group_id": self.rng.choice(sorted(self.groups[profile]))}
        action, params = self._action(table.action_refs)
        return {"action": action, "params": params}

    def _insert_entries(self, table, count):
        entries = self.entries.setdefault(table.name, {})
        for _ in range(count):
            match = self._match(table)
            key = repr(sorted(match.items()))
            if key in entries:
                continue
            kwargs = dict(table=table.name, match=match, **self._entry_target(table))
            entries[key] = kwargs
            self._write("insert_table_entry", **kwargs)

    def _default(self, table):
        if table.implementation or table.const_default_action:
            return
        action, params = self._action(table.action_refs, default=True)
        self._write("set_default_action", table=table.name, action=action, params=params)

    def initial_state(self):
        """Members, groups, entries and default actions of every table (the marker's first)."""
        if self.marker_route is not None:
            self._write("insert_table_entry", table="MyIngress.ipv4_lpm", match={"hdr.ipv4.dstAddr": "203.0.113.7/32"},
                        action="MyIngress.ipv4_forward", params={"dstAddr": "02:00:00:00:00:07", "port": 1})
        for profile in self.info.action_profiles.values():
            self._profile_state(profile)
        if self.name == "dsf_fabric":
            profile = "MyIngress.dsf_spray_selector"
            self._write("insert_member", profile=profile, member_id=MARKER_MEMBER,
                        action="MyIngress.dsf_to_link", params={"port": 1})
            self._write("insert_table_entry", table="MyIngress.dsf_reach", match={"hdr.dsf.dst_node": 1000},
                        member_id=MARKER_MEMBER)
        for table in self.info.tables.values():
            if table.match_fields and any(f.match_type != "selector" for f in table.match_fields):
                self._insert_entries(table, self.rng.randint(4, 14) if "lpm" in str(table.match_fields) else
                                     self.rng.randint(4, 10))
            self._default(table)

    def invalid_writes(self):
        """Writes both targets must refuse, with the same status: duplicates, unknown ids, members in use,
        actions a table or profile does not have."""
        rng = self.rng
        for table in self.info.tables.values():
            entries = self.entries.get(table.name)
            if not entries:
                continue
            kwargs = entries[rng.choice(sorted(entries))]
            self._write("insert_table_entry", **kwargs)  # ALREADY_EXISTS
            missing = dict(kwargs, match=self._match(table))
            if repr(sorted(missing["match"].items())) not in entries:
                self._write("modify_table_entry", **missing)
                self._write("delete_table_entry", table=table.name, match=missing["match"])
            wrong = [a for a in self.info.actions if a not in {r.name for r in table.action_refs}
                     and not self.info.actions[a].params]
            if wrong and not table.implementation:
                self._write("insert_table_entry", table=table.name, match=self._match(table), action=wrong[0])
            if table.implementation:
                self._write("insert_table_entry", table=table.name, match=self._match(table), group_id=999999)
                self._write("insert_table_entry", table=table.name, match=self._match(table), member_id=999999)
            default_only = [r.name for r in table.action_refs if r.scope == "DEFAULT_ONLY"]
            if default_only and not table.implementation:
                self._write("insert_table_entry", table=table.name, match=self._match(table),
                            action=default_only[0])
        for profile in self.info.action_profiles.values():
            groups = self.groups[profile.name]
            in_groups = sorted({m for chosen in groups.values() for m, _weight in chosen})
            if in_groups:
                self._write("delete_member", profile=profile.name, member_id=rng.choice(in_groups))
            self._write("insert_group", profile=profile.name, group_id=rng.choice(sorted(groups)), members=[])
            self._write("insert_group", profile=profile.name, group_id=999998, members=[999999])
            self._write("modify_group", profile=profile.name, group_id=999997, members=[])
            self._write("delete_group", profile=profile.name, group_id=999997)
            self._write("modify_member", profile=profile.name, member_id=999999, action="NoAction")

    def mutate(self):
        """Change the state between batches: members, groups, entries (modify, delete, insert), defaults."""
        rng = self.rng
        for profile in self.info.action_profiles.values():
            members = self.members[profile.name]
            table = self.info.tables[profile.table_names[0]]
            ordinary = sorted(m for m in members if m != MARKER_MEMBER)
            for member_id in rng.sample(ordinary, min(2, len(ordinary))):
                action, params = self._action(table.action_refs)
                members[member_id] = action
                self._write("modify_member", profile=profile.name, member_id=member_id, action=action,
                            params=params)
            groups = self.groups[profile.name]
            group_id = rng.choice(sorted(groups))
            groups[group_id] = self._group_members(members)
            self._write("modify_group", profile=profile.name, group_id=group_id, members=groups[group_id])
            # a member and a group no entry uses are deleted and new ones created: BMv2 reuses their handles
            used = {kwargs.get("member_id") for entries in self.entries.values() for kwargs in entries.values()}
            in_groups = {m for chosen in groups.values() for m, _weight in chosen}
            spare = [m for m in ordinary if m not in used and m not in in_groups]
            if spare:
                member_id = rng.choice(spare)
                del members[member_id]
                self._write("delete_member", profile=profile.name, member_id=member_id)
            referenced = {kwargs.get("group_id") for entries in self.entries.values() for kwargs in entries.values()}
            spare_groups = [g for g in sorted(groups) if g not in referenced]
            if spare_groups and len(groups) > 2:
                group_id = rng.choice(spare_groups)
                del groups[group_id]
                self._write("delete_group", profile=profile.name, group_id=group_id)
            self._profile_state(profile)
        for table in self.info.tables.values():
            entries = self.entries.get(table.name)
            if entries:
                keys = sorted(entries)
                for key in rng.sample(keys, min(2, len(keys))):
                    kwargs = dict(entries[key])
                    for name in ("action", "params", "member_id", "group_id"):
                        kwargs.pop(name, None)
                    kwargs.update(self._entry_target(table))
                    entries[key] = kwargs
                    self._write("modify_table_entry", **kwargs)
                if keys and rng.random() < 0.7:
                    key = rng.choice(keys)
                    kwargs = entries.pop(key)
                    self._write("delete_table_entry", table=kwargs["table"], match=kwargs["match"])
                self._insert_entries(table, rng.randint(1, 3))
            if rng.random() < 0.5:
                self._default(table)

    # ---- frames
    def _ipv4(self, protocol, l4, ttl=None, dst=None, src=None, options=b"", ihl=None, version=4, bad_sum=False,
              frag=0, total=None):
        rng = self.rng
        if src is None or dst is None:
            if rng.random() < 0.15 and self.pools.pairs:
                src, dst = rng.choice(self.pools.pairs)
            else:
                src = rng.choice(self.pools.hosts) if rng.random() < 0.5 else rng.randrange(1 << 32)
                dst = self.pools.dst_address()
        if ttl is None:
            ttl = rng.choice([2, 3, 64, 128, 255, rng.randrange(256)])
        length = 20 + len(options) + len(l4)
        ihl = (20 + len(options)) // 4 if ihl is None else ihl
        header = struct.pack("!BBHHHBBHII", version << 4 | ihl, rng.randrange(256), length if total is None else total,
                             rng.randrange(1 << 16), frag, ttl, protocol, 0, src, dst) + options
        checksum = _ipv4_checksum(header)
        if bad_sum:
            checksum ^= rng.randrange(1, 1 << 16)
        return header[:10] + struct.pack("!H", checksum) + header[12:]

    def _udp(self, dport=None, payload=b"", roce=False):
        rng = self.rng
        if roce:
            dport = 4791
            bth = struct.pack("!BBHI I", rng.choice([0x04, 0x0A, 0x11, 0x81, rng.randrange(256)]), rng.randrange(256),
                              0xFFFF, rng.randrange(1 << 32), rng.randrange(1 << 32))
            payload = bth + payload + struct.pack("!I", zlib.crc32(payload))
        if dport is None:
            dport = rng.choice([53, 4791, 80, rng.randrange(1 << 16)])
        return struct.pack("!HHHH", rng.randrange(1 << 16), dport, 8 + len(payload), rng.randrange(1 << 16)) + payload

    def _tcp(self, payload=b""):
        rng = self.rng
        return struct.pack("!HHIIBBHHH", rng.randrange(1 << 16), rng.randrange(1 << 16), rng.randrange(1 << 32),
                           rng.randrange(1 << 32), 0x50, rng.choice([0x02, 0x12, 0x10, 0x11, rng.randrange(256)]),
                           8192, rng.randrange(1 << 16), 0) + payload

    def _payload(self):
        self.sequence += 1
        size = self.rng.choice([0, 4, 18, 64, 200, 1000, self.rng.randrange(1400)])
        return struct.pack("!I", self.sequence) + bytes(self.rng.randrange(256) for _ in range(size))

    def _ethernet(self, ethertype, dst=None):
        rng = self.rng
        dst = dst or rng.choice([bytes.fromhex(_mac(rng).replace(":", "")), b"\xff" * 6, b"\x01\x00\x5e\x00\x00\x01"])
        return dst + bytes.fromhex(_mac(rng).replace(":", "")) + struct.pack("!H", ethertype)

    def _ip_frame(self, kind):
        rng = self.rng
        payload = self._payload()
        if kind == "roce":
            return self._ipv4(17, self._udp(roce=True, payload=payload))
        if kind == "udp":
            return self._ipv4(17, self._udp(payload=payload))
        if kind == "tcp":
            return self._ipv4(6, self._tcp(payload))
        if kind == "other_protocol":
            return self._ipv4(rng.choice([1, 47, 50, 132, rng.randrange(256)]), payload)
        if kind in ("ttl0", "ttl1", "ttl2"):
            return self._ipv4(17, self._udp(roce=rng.random() < 0.5, payload=payload), ttl=int(kind[-1]))
        if kind == "bad_checksum":
            return self._ipv4(17, self._udp(roce=rng.random() < 0.5, payload=payload), bad_sum=True)
        if kind == "options":
            options = bytes(rng.randrange(256) for _ in range(4 * rng.randint(1, 10)))
            return self._ipv4(rng.choice([6, 17]), self._udp(payload=payload), options=options)
        if kind == "bad_ihl":
            return self._ipv4(17, self._udp(payload=payload), ihl=rng.randrange(5))
        if kind == "fragment":
            return self._ipv4(17, self._udp(payload=payload), frag=rng.choice([0x2000, 0x0001, 0x20B9, 0x4000]))
        if kind == "bad_version":
            return self._ipv4(17, self._udp(payload=payload), version=rng.choice([0, 5, 6, 15]))
        if kind == "bad_length":
            return self._ipv4(17, self._udp(payload=payload), total=rng.randrange(1 << 16))
        if kind == "te_pair":
            src, dst = rng.choice(self.pools.pairs)
            return self._ipv4(17, self._udp(roce=True, payload=payload), src=src, dst=dst)
        raise ValueError(kind)

    IP_KINDS = ["udp", "roce", "roce", "tcp", "other_protocol", "ttl0", "ttl1", "ttl2", "bad_checksum", "options",
                "bad_ihl", "fragment", "bad_version", "bad_length", "te_pair"]

    def frame(self):
        """One random frame: (kind, bytes)."""
        rng = self.rng
        if self.name == "dsf_fabric":
            kinds = ["dsf"] * 8 + ["dsf_ttl", "dsf_miss", "truncated", "ipv4", "unknown_ethertype"]
        else:
            kinds = self.IP_KINDS * 2 + ["truncated"] * 5 + ["ipv6", "arp", "unknown_ethertype", "vlan", "runt"]
            if self.name == "f10":
                kinds += ["f10_detour"] * 6 + ["f10_probe", "f10_trigger"]
        kind = rng.choice(kinds)
        if kind in self.IP_KINDS:
            return kind, self._ethernet(0x0800) + self._ip_frame(kind)
        if kind == "ipv4":
            return kind, self._ethernet(0x0800) + self._ip_frame("udp")
        if kind == "truncated":
            inner_kind, frame = self.frame()
            while len(frame) <= 15:
                inner_kind, frame = self.frame()
            return f"truncated {inner_kind}", frame[:rng.randrange(14, len(frame))]
        if kind == "runt":
            return kind, self._ethernet(rng.choice([0x0800, 0x86DD, 0x88B7]))
        if kind == "ipv6":
            l4 = rng.choice([(17, self._udp(payload=self._payload())), (6, self._tcp(self._payload())),
                             (58, self._payload())])
            header = struct.pack("!IHBB", 0x60000000 | rng.randrange(1 << 20), len(l4[1]), l4[0], 64)
            header += bytes(rng.randrange(256) for _ in range(32))
            return kind, self._ethernet(0x86DD) + header + l4[1]
        if kind == "arp":
            return kind, self._ethernet(0x0806, b"\xff" * 6) + bytes.fromhex("0001080006040001") + bytes(20)
        if kind == "unknown_ethertype":
            return kind, self._ethernet(rng.choice([0x88CC, 0x9000, 0x1234, rng.randrange(0x600, 1 << 16)])) \
                + self._payload()
        if kind == "vlan":
            return kind, self._ethernet(0x8100) + struct.pack("!HH", rng.randrange(1 << 16), 0x0800) \
                + self._ip_frame("udp")
        if kind == "f10_detour":
            phase = rng.choice(self.pools.phases)
            inner = rng.choice([0x0800, 0x0800, 0x0800, 0x86DD, rng.randrange(1 << 16)])
            body = self._ip_frame(rng.choice(["udp", "roce", "ttl1", "bad_checksum"])) if inner == 0x0800 \
                else self._payload()
            return kind, self._ethernet(0x88B7) + struct.pack("!BBH", phase, rng.randrange(256), inner) + body
        if kind == "f10_probe":
            return kind, self._ethernet(0x88B5) + struct.pack("!HHI", rng.randrange(8), 0, rng.randrange(1 << 32)) \
                + bytes(2) + self._payload()
        if kind == "f10_trigger":
            return kind, self._ethernet(0x88B6) + struct.pack("!HH", rng.randrange(8), 0) + self._payload()
        if kind in ("dsf", "dsf_ttl", "dsf_miss"):
            # mostly the nodes entries use (the first seven), sometimes the others: misses
            node = rng.choice(self.pools.nodes[:7] if rng.random() < 0.85 else self.pools.nodes) \
                if kind != "dsf_miss" else rng.randrange(1 << 16)
            ttl = rng.choice([0, 1]) if kind == "dsf_ttl" else rng.choice([2, 16, rng.randrange(256)])
            first = rng.choice([1, 1, 2, 3, rng.randrange(16)]) << 4 | rng.randrange(16)
            cell = struct.pack("!BBHHHIHHI", first, ttl, rng.randrange(1 << 16), node, rng.randrange(1 << 16),
                               rng.randrange(1 << 32), rng.randrange(1 << 16), rng.randrange(1 << 16),
                               rng.randrange(1 << 32))
            return kind, self._ethernet(0x88B5) + cell + self._payload()
        raise ValueError(kind)

    def packet_out(self):
        """One PacketOut: (metadata, payload), mostly to a data port."""
        port = self.rng.choice([*PORTS, *PORTS, 0, 7, 511, CPU_PORT])
        kind, frame = self.frame()
        while kind.endswith("f10_trigger"):
            # a trigger that skips ingress runs F10's detector in egress, which stamps probes with the
            # egress time and moves links down by it: outputs of the clock, not of the semantics
            kind, frame = self.frame()
        return {"egress_port": port, "_pad": self.rng.choice([0, 0, 0, 0x55])}, frame

    # ---- the script
    def build(self, mutations=3):
        """The script: initial state, then batches of frames with ``mutations`` state changes in between."""
        self.initial_state()
        sent = 0
        next_mutation = self.frame_count // (mutations + 1)
        while sent < self.frame_count:
            count = min(self.rng.randint(BATCH // 2, BATCH), self.frame_count - sent)
            if self.rng.random() < 0.08 and "packet_out" in self.info.controller_packet_metadata:
                self.steps.append(PacketOuts([self.packet_out() for _ in range(min(count, 8))]))
                count = min(count, 8)
            else:
                self.steps.append(Batch(self.rng.choice(PORTS), [self.frame() for _ in range(count)]))
            sent += count
            if sent >= next_mutation and sent < self.frame_count:
                self.mutate()
                self.invalid_writes()
                next_mutation += self.frame_count // (mutations + 1)
        return Script(self.program, self.seed, self.steps, self.marker)


@contextlib.contextmanager
def harness():
    """A namespace with its veths, the wire and a private folder; all removed on exit (also on errors).

    Yields:
        (Namespace, Wire, folder)
    """
    folder = tempfile.mkdtemp(prefix="tbd-diff-")
    namespace = wire = None
    try:
        namespace = Namespace()
        wire = Wire(namespace)
        yield namespace, wire, folder
    finally:
        if wire is not None:
            wire.close()
        if namespace is not None:
            namespace.close()
        shutil.rmtree(folder, ignore_errors=True)
