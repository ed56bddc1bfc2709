"""A running, programmed fabric: start it, use it, stop it, as one object.

The one way the testbed starts a fabric of P4 switches and programs it: the
experiment runner, ``testbed net up``, the pytest plugin and the project's own
tests all go through :class:`Fabric`.  In the spirit of Mininet's
``Mininet(topo).start()/stop()``::

    import testbed

    with testbed.fabric("fattree", k=4, program="ecmp", target="auto", controller="static") as net:
        print(net["h1"].cmd("ping -c1", net["h16"].IP()))
        net.link_down("e0_0", "a0_0")                 # the controller reroutes after its detection delay
        assert net.unreachable_pairs() == []
        report = net.stream([("h1", "h16")], duration=1.0, qps=4, rate_mbps=5)
        print(net.read_counter("e0_0", "MyEgress.egress_port_counter"))

Starting: the topology is built in Mininet (real namespaces and veths) with
one switch process per switch (the embedded target or BMv2), the program is
pushed over P4Runtime with the routes and the run-time parameters
(:data:`testbed.modes.PARAMETERS`) by the chosen controller
(:mod:`testbed.controllers.kinds`), and only then is the fabric published in
its state file (if it has one).  Stopping happens in reverse order, always:
on an exception inside the ``with`` block, on Ctrl-C, on SIGTERM/SIGHUP
(turned into KeyboardInterrupt in the main thread), and a second Ctrl-C
during teardown does not interrupt it.  Nothing is left behind.
"""
import functools
import os
import subprocess
import sys
import threading
import time

from testbed.controllers.contract import DEFAULT_DETECTION_DELAY_MS, FAILURE_ACTIONS, Failure
from testbed.mechanisms import controller_kind, default_controller_kind, make_controller
from testbed.emulation.network import FabricNetwork
from testbed.emulation.progress import Progress
from testbed.emulation.signals import signals_deferred, termination_as_interrupt
from testbed.errors import EmulationError, ParameterError
from testbed.modes import MODES, check_parameters, resolve_program
from testbed.p4.native import check_backend, default_backend
from testbed.p4runtime.client import P4RuntimeClient
from testbed.targets import TARGETS, embedded_only_needs, pipeline_config, resolve_target
from testbed.topologies.base import FabricTopo
from testbed.topologies.registry import make_topology
from testbed.traffic.collectives import run_collective
from testbed.traffic.hosts import ProcessRegistry, from_mininet
from testbed.traffic.streams import run_streams

PRIVATE_STATE_DIR = "/run/testbed"
FABRIC_LOG = "fabric.log"  # in log_dir: the bring-up and teardown events
PING_BATCH_HOSTS = 8  # source hosts probing at once in unreachable_pairs (each pings all its peers at once)
PING_LINE_DESTINATIONS = 200  # destinations per shell line in unreachable_pairs (a line's IPs fit in 4 KiB)

_SEND_FRAMES = ("import socket,sys\n"
                "s=socket.socket(socket.AF_PACKET,socket.SOCK_RAW)\n"
                "s.bind((sys.argv[1],0))\n"
                "[s.send(bytes.fromhex(line)) for line in sys.stdin.read().split()]\n")


def _names_a_lost_server(method):
    """Decorate a :class:`Fabric` method that acts on the network: when a server of the fabric is lost
    before or during it, it raises EmulationError naming that server (and what to clean once it is back),
    not its own failure.  Nested calls (a method calling another) leave it to the outermost."""
    @functools.wraps(method)
    def acting(self, *args, **kwargs):
        if getattr(self._acting, "depth", 0):
            return method(self, *args, **kwargs)
        self._acting.depth = 1
        try:
            with self._running().naming_a_lost_server():
                return method(self, *args, **kwargs)
        finally:
            self._acting.depth = 0
    return acting


class Fabric:
    """An emulated fabric of P4 switches, programmed by a controller.

    Args:
        topology: a topology kind (``"clos"``, ``"fattree"``, ``"abfattree"``, ``"dsf"``...; see
            ``testbed topo kinds``) with its parameters in ``topo_params``, or a built
            :class:`~testbed.topologies.base.FabricTopo`.
        program: a mode (``"ecmp"``, ``"f10"``...: ``testbed.modes.MODES``), a P4 file, or a program
            under ``p4src/`` by name (``"l3_ecmp"``); None runs Linux bridges with spanning tree and
            no P4 (and no controller).
        target: ``"auto"`` (BMv2 when installed and the run needs nothing only the embedded target
            has, else the embedded target), ``"embedded"`` or ``"bmv2"``.
        controller: a controller kind (``testbed.mechanisms.controller_kinds()``: ``"static"`` reroutes
            ``detection_delay_ms`` after each failure it is told of, ``"none"`` never does, ``"osken"``
            runs the os-ken apps, a mechanism's own such as ``"f10"``); default: the mode's, else static.
        mode_params: run-time parameters (:data:`testbed.modes.PARAMETERS`), checked here.
        required_params: parameter names the program must carry (refused at start otherwise);
            default: those of ``mode_params`` that the program's mode takes.
        seed: the seed of the switches' random choices (``random`` extern, per-port loss draws).
        backend: the embedded switches' pipeline backend, ``python``, ``native`` or ``auto``
            (:mod:`testbed.p4.native`); None: ``$TESTBED_BACKEND`` or auto.  Not for BMv2 (``native``
            is refused there unless it is only the run's default).
        detection_delay_ms: the controller's reaction delay (default: the mode's, else 50 ms).
        controller_options: more options of the controller (those its kind declares; the os-ken
            controller's ``[fabric]`` options such as ``routing="te"``, ``port_poll_ms=20``); a mode
            with its own controller gives it its options first.
        shape_links: shape every link to its capacity with tc htb.
        queue_frames: with ``shape_links``, the frames each link end may queue (tail drop; None: the
            veth's 1,000, seconds of traffic at a few Mbit/s).
        pcap: per-port pcaps in ``log_dir``.
        packet_log: BMv2's per-packet log (slow; off by default).
        servers: run the fabric over several servers (Mininet's cluster edition): server entries
            (``"localhost"``, ``"user@host"``, a simulated server's name such as ``"tb-srv1"``, or
            ``{"host", "user", "identity", "known_hosts", "python"}``); localhost is always one of them.
            None: this machine only.  Embedded target only.
        placement: with ``servers``, ``{node: server}`` fixing where nodes run; the others are
            placed by the fabric's structure (whole FatTree pods per server).
        cross_link: with ``servers``, how links between servers are made: ``"vxlan"`` or ``"ssh"``.
        log_dir: switch logs (default: a temporary folder removed at stop).
        state_file: where to publish the running fabric (``testbed net status``, ``testbed traffic``);
            default none, except for the os-ken controller, which gets a private one.
        controller_log: the os-ken controller's log file.
        progress: callable taking one line of text per step of bring-up and teardown
            (``"switches started 12/80 (3.1 s)"``; default: silent).  The same lines go to
            ``fabric.log`` in ``log_dir`` when there is one.
        log_level: Mininet's log level (``"warning"``, ``"info"``...).
        **topo_params: the topology's parameters when ``topology`` is a kind.

    Raises:
        ParameterError: a bad topology, program, target, controller or parameter (named).
    """

    def __init__(self, topology, program=None, target="auto", controller=None, mode_params=None,
                 required_params=None, seed=0, backend=None, detection_delay_ms=None, controller_options=None,
                 shape_links=False, queue_frames=None,
                 pcap=False, packet_log=False, log_dir=None, state_file=None, controller_log=None, progress=None,
                 log_level="warning", servers=None, placement=None, cross_link="vxlan", **topo_params):
        if isinstance(topology, FabricTopo):
            if topo_params:
                raise ParameterError(next(iter(topo_params)), topo_params[next(iter(topo_params))],
                                     "no topology parameters with a built topology")
            self.topo = topology
        else:
            self.topo = make_topology(topology, **topo_params)
        if target not in TARGETS:
            raise ParameterError("target", target, "one of: " + ", ".join(TARGETS))
        self.mode, self.program = (None, None) if program is None else resolve_program(program)
        mode = MODES[self.mode] if self.mode else None
        controller = controller or (mode and mode.controller) or default_controller_kind()
        controller_kind(controller)  # a kind that exists
        self.mode_params = check_parameters(dict(mode_params or {}))
        if required_params is None:
            taken = mode.parameters if mode else ()
            required_params = [name for name in self.mode_params if name in taken]
        self.required_params = tuple(required_params)
        self.requested_target = target
        self.controller_kind = controller if program is not None else None
        self.seed = int(seed)
        self.backend = None if backend is None else check_backend(backend)
        if detection_delay_ms is None:
            detection_delay_ms = (mode and mode.detection_delay_ms) or DEFAULT_DETECTION_DELAY_MS
        self.detection_delay_ms = float(detection_delay_ms)
        options_of_mode = dict(mode.controller_options) if mode and mode.controller == controller else {}
        self.controller_options = dict(options_of_mode, **(controller_options or {}))
        self.shape_links = shape_links
        self.queue_frames = queue_frames
        self.pcap = pcap
        self.packet_log = packet_log
        self.log_dir = log_dir
        self.state_file = state_file
        self.controller_log = controller_log
        self.progress = Progress(progress, os.path.join(log_dir, FABRIC_LOG) if log_dir else None)
        self.log_level = log_level
        self.servers = list(servers) if servers else None
        self.placement = dict(placement or {})
        self.cross_link = cross_link
        if self.placement and not self.servers:
            raise ParameterError("placement", self.placement, "a placement with servers only")
        self.target = None
        self.target_note = ""  # why target auto did not pick an installed BMv2
        self.pipeline = None
        self.network = None
        self.controller = None
        self.failed_links = set()
        self.crashed = set()
        self.lossy_links = {}
        self._private_state_file = None
        self._readers = {}
        self._acting = threading.local()  # see _names_a_lost_server
        self._registry = None
        self._signals = None

    # -- lifecycle -------------------------------------------------------------------------
    def start(self):
        """Build the network, start the switches, program them; on any failure tear down what was built.

        Returns:
            Fabric: ``self``.

        Raises:
            ParameterError: the target is not available here.
            P4LoadError / TestbedError: the program does not load or compile.
            EmulationError: Mininet or a switch could not start.
            KeyboardInterrupt: interrupted (everything torn down).
        """
        if self.network is not None:
            raise EmulationError("the fabric is already started")
        progress = self.progress
        if self.log_dir:
            os.makedirs(self.log_dir, exist_ok=True)
        progress.begin("up")
        self.target, self.target_note = "bridge", ""
        if self.program:
            requested = self.requested_target
            if self.servers and requested == "auto":
                requested = "embedded"  # the target over several servers
            self.target, self.target_note = resolve_target(requested, embedded_only_needs(self.program))
            if self.target_note:
                progress.event(self.target_note)
        try:
            if self.program:
                progress.event(f"loading {os.path.basename(self.program)} for the {self.target} target")
                self.pipeline = pipeline_config(self.program, self.target)
            state_file = self.state_file
            reads_state = self.controller_kind is not None and controller_kind(self.controller_kind).reads_state_file
            if state_file is None and reads_state:
                # the controller reads the network from a state file: a private one
                state_file = self._private_state_file = os.path.join(PRIVATE_STATE_DIR,
                                                                     f"fabric-{os.getpid()}.json")
            progress.event(f"starting {self.topo.kind}: {len(self.topo.switches())} {self.target} switches, "
                           f"{len(self.topo.hosts())} hosts, {len(self.topo.links())} links")
            network_options = {}
            network_class = FabricNetwork
            if self.servers:
                from testbed.emulation.cluster.network import ClusterFabricNetwork

                network_class = ClusterFabricNetwork
                network_options = {"servers": self.servers, "placement": self.placement, "link": self.cross_link}
            self.network = network_class(self.topo, switch=self.target, switch_params=self._switch_params(),
                                         shape_links=self.shape_links, queue_frames=self.queue_frames,
                                         state_file=state_file,
                                         log_dir=self.log_dir, log_level=self.log_level, publish_on_start=False,
                                         progress=progress, **network_options)
            self._start_network()
            self._registry = ProcessRegistry()
            if self.controller_kind is not None:
                progress.event(f"controller {self.controller_kind}: pushing pipeline, routes and parameters")
                if reads_state:
                    self.network.publish_state()
                self.controller = make_controller(self.controller_kind, self.detection_delay_ms,
                                                  **self.controller_options)
                self.controller.start(self.network, self.pipeline, self.mode_params, self.required_params,
                                      state_file=state_file, log_path=self.controller_log,
                                      progress=self._programming_progress())
            self.network.publish_state()
            entries = f", {self.controller.entries_written} route entries" if self.controller is not None else ""
            progress.event(f"up: {len(self.topo.switches())} switches, {len(self.topo.hosts())} hosts{entries}")
        except BaseException as error:
            try:
                self.stop()
            except Exception as teardown:  # noqa: BLE001 - the start's own error says what went wrong
                error.add_note(f"then tearing down: {teardown}")
            raise
        return self

    def _programming_progress(self):
        """``progress(step, done, total)`` for the controller: one count per step."""
        counts, lock = {}, threading.Lock()

        def report(step, done, total):
            with lock:
                count = counts.get(step)
                if count is None:
                    count = counts[step] = self.progress.count(step, total)
            count.reach(done)
        return report

    def _switch_params(self):
        if self.target == "bridge":
            return {}
        params = {"program": self.program, "pcap": self.pcap}
        if self.target == "embedded":
            params["seed"] = self.seed
            if self.backend is not None:
                params["backend"] = self.backend
        else:
            # the run's default backend ($TESTBED_BACKEND, a spec without one) is for embedded switches only
            if self.backend not in (None, "python", "auto", default_backend()):
                raise ParameterError("backend", self.backend, "python or auto on BMv2 switches (native is a "
                                                              "backend of the embedded target)")
            params["packet_log"] = self.packet_log
            port = MODES[self.mode].packet_generator_port if self.mode else None
            if port is not None:
                params["pktgen_port"] = port  # BMv2 has no packet generator: an injector's port
        return params

    def _start_network(self):
        try:
            self.network.start()
        except EmulationError as error:
            if "File exists" in str(error) or "already in use" in str(error):
                raise EmulationError(f"{error} (another emulated network with the same node names or "
                                     "P4Runtime ports is running: see `testbed net status`)") from error
            raise

    def stop(self):
        """Stop traffic, controller sessions, switches and the network, in reverse order; safe to call twice.

        Ctrl-C and SIGTERM are held back until teardown is done.  Errors of one step do
        not stop the others; the first is raised at the end.
        """
        first_error = None
        with signals_deferred():
            running = self.network is not None
            if running and self.progress.phase != "down":
                self.progress.begin("down")
                self.progress.event("stopping traffic, controller and switches")
            steps = []
            if self._registry is not None:
                steps.append(self._registry.kill_all)
            steps.append(self._close_readers)
            if self.controller is not None:
                steps.append(self.controller.stop)
            if self.network is not None:
                steps.append(self.network.stop)
            for step in steps:
                try:
                    step()
                except Exception as error:  # noqa: BLE001 - keep tearing down the rest
                    first_error = first_error or error
            self.controller = None
            self.network = None
            self._registry = None
            if self._private_state_file and os.path.exists(self._private_state_file):
                os.remove(self._private_state_file)
            if running:
                self.progress.event("down" if first_error is None else f"down, with an error: {first_error}")
        if first_error is not None:
            raise EmulationError(f"teardown: {type(first_error).__name__}: {first_error}") from first_error

    def _close_readers(self):
        readers, self._readers = self._readers, {}
        for client in readers.values():
            client.close()

    def __enter__(self):
        """Start the fabric (or take the one already started, as ``fabric_factory`` returns it); ``with`` ends it."""
        self._signals = termination_as_interrupt()
        self._signals.__enter__()
        try:
            return self if self.network is not None else self.start()
        except BaseException:
            self._signals.__exit__(None, None, None)
            raise

    def __exit__(self, *exc_info):
        try:
            self.stop()
        finally:
            self._signals.__exit__(None, None, None)
        return False

    # -- nodes -----------------------------------------------------------------------------
    @property
    def net(self):
        """The underlying :class:`mininet.net.Mininet` (for what this class does not offer)."""
        return self._running().net

    def _running(self):
        if self.network is None or self.network.net is None:
            raise EmulationError("the fabric is not running (call start() or use it in a with block)")
        return self.network

    def __getitem__(self, name):
        """The Mininet node (host or switch) called ``name``.

        Raises:
            ParameterError: no such node.
        """
        network = self._running()
        nodes = {node.name: node for node in network.hosts + network.switches}
        if name not in nodes:
            raise ParameterError("node", name, "a host or switch of the fabric: " + ", ".join(sorted(nodes)))
        return nodes[name]

    def host(self, name):
        """The Mininet host called ``name`` (``.cmd()``, ``.IP()``, ``.MAC()``)."""
        return self._running().host(name)

    def switch(self, name):
        """The switch called ``name`` (a Mininet switch; P4 switches have ``grpc_address``, ``log_path``).

        Raises:
            ParameterError: no such switch.
        """
        switches = {switch.name: switch for switch in self._running().switches}
        if name not in switches:
            raise ParameterError("switch", name, "one of: " + ", ".join(sorted(switches)))
        return switches[name]

    @property
    def hosts(self):
        """The Mininet hosts, in topology order."""
        return self._running().hosts

    @property
    def switches(self):
        """The Mininet switches, in topology order."""
        return self._running().switches

    def describe(self):
        """The running fabric's description (what the state file holds)."""
        return self._running().describe()

    def check_switches(self):
        """Raise EmulationError naming a server that became unreachable, else the first switch whose process
        died (crashed ones excepted)."""
        self._running().check_reachable()
        for switch in self._running().switches:
            if switch.name not in self.crashed and hasattr(switch, "check_alive"):
                switch.check_alive()

    # -- P4Runtime -------------------------------------------------------------------------
    @_names_a_lost_server
    def client(self, switch):
        """A P4Runtime session to ``switch``.

        The in-process controller's primary session when there is one (writes allowed),
        else a backup session opened once (reads only).

        Raises:
            ParameterError: no such P4 switch.
        """
        node = self.switch(switch)
        if not hasattr(node, "grpc_address"):
            raise ParameterError("switch", switch, "a P4 switch (this fabric runs no P4)")
        primary = self.controller.client(switch) if self.controller is not None else None
        if primary is not None:
            return primary
        if switch not in self._readers:
            self._readers[switch] = P4RuntimeClient(node.grpc_address, device_id=node.device_id,
                                                    election_id=None)
        return self._readers[switch]

    @_names_a_lost_server
    def read_counter(self, switch, name, index=None):
        """A counter's cells (``{index: (packets, bytes)}``) or one cell, over P4Runtime."""
        return self.client(switch).read_counter(name, index)

    @_names_a_lost_server
    def read_register(self, switch, name, index=None):
        """A register's cells (list) or one cell.

        The embedded target answers over P4Runtime; BMv2's P4Runtime server does not
        implement register reads, so BMv2 is read through its own runtime interface
        (Thrift, ``simple_switch_CLI``).  For tests and inspection: controllers get
        their state from counters, digests and PacketIn, which both targets serve.
        """
        return self.switch(switch).read_register(name, index, client=self.client(switch))

    # -- failures --------------------------------------------------------------------------
    @_names_a_lost_server
    def apply_failure(self, action, link=None, switch=None, loss=None, delay_ms=0.0, index=None, notify=True):
        """Apply a failure (or repair) now and tell the controller (unless ``notify`` is False).

        Args:
            action: ``link_down``, ``link_up`` (also ends a lossy link), ``switch_crash``
                or ``lossy_link`` (netem where the kernel has it, else the embedded switches' ports).
            link: ``(a, b)`` for link actions.
            switch: the switch of ``switch_crash``.
            loss, delay_ms: of ``lossy_link``.
            index: the failure's position in a spec (recorded in the controller's reactions).
            notify: tell the controller; False leaves detection to the controller or the switches
                (a port monitor, a data-plane failure detector).

        Returns:
            Failure: with ``applied_ns`` (the failure's time), ``done_ns`` and ``mechanism``
            (how a lossy link was emulated, else None).

        Raises:
            ParameterError: unknown action, or a link/switch the fabric does not have.
            EmulationError: the failure could not be applied.
        """
        network = self._running()
        if action not in FAILURE_ACTIONS:
            raise ParameterError("action", action, "one of: " + ", ".join(FAILURE_ACTIONS))
        started_ns, started_monotonic_ns = time.time_ns(), time.monotonic_ns()
        mechanism = None
        pair = frozenset(link) if link else None
        if action == "link_down":
            network.link_status(link[0], link[1], "down")
            self.failed_links.add(pair)
        elif action == "link_up":
            network.link_status(link[0], link[1], "up")
            self.failed_links.discard(pair)
            if pair in self.lossy_links:
                mechanism = network.set_link_loss(link[0], link[1], 0.0)
                del self.lossy_links[pair]
        elif action == "switch_crash":
            # crashed before it dies: the run's liveness check (check_switches, another thread) must not
            # take the killed process for a failure while the kill is under way
            self.crashed.add(switch)
            try:
                self.failed_links.update(network.crash_switch(switch))
            except (ParameterError, EmulationError):
                self.crashed.discard(switch)  # refused before any kill: not crashed by us
                raise
            self._readers.pop(switch, None)
        else:
            mechanism = network.set_link_loss(link[0], link[1], loss, delay_ms)
            self.lossy_links[pair] = mechanism
        failure = Failure(action, tuple(link) if link else None, switch, loss, started_ns, set(self.failed_links),
                          set(self.crashed), index, done_ns=time.time_ns(), mechanism=mechanism,
                          applied_monotonic_ns=started_monotonic_ns)
        if notify and self.controller is not None:
            self.controller.notify(failure)
        return failure

    def link_down(self, a, b, notify=True):
        """Take every link between ``a`` and ``b`` down (both interfaces); the controller is told unless not
        ``notify``."""
        return self.apply_failure("link_down", link=(a, b), notify=notify)

    def link_up(self, a, b, notify=True):
        """Bring the links between ``a`` and ``b`` back up (and end a lossy link); the controller is told unless
        not ``notify``."""
        return self.apply_failure("link_up", link=(a, b), notify=notify)

    def set_link_loss(self, a, b, loss, delay_ms=0.0):
        """Make the link between ``a`` and ``b`` drop ``loss`` of its frames and delay them ``delay_ms``.

        Returns:
            str: the mechanism, ``"netem"`` or ``"embedded-port"``.
        """
        return self.apply_failure("lossy_link", link=(a, b), loss=loss, delay_ms=delay_ms).mechanism

    def crash_switch(self, name):
        """Kill a switch's process; its links count as failed; the controller is told."""
        return self.apply_failure("switch_crash", switch=name)

    # -- reachability ----------------------------------------------------------------------
    @_names_a_lost_server
    def ping(self, src, dst, count=1, timeout_s=1.0):
        """True when ``count`` pings from host ``src`` to host ``dst`` all get an answer."""
        target = self.host(dst).IP()
        output = self.host(src).cmd(f"ping -n -q -c {int(count)} -W {max(1, round(timeout_s))} {target}")
        return f"{int(count)} received" in output

    @_names_a_lost_server
    def unreachable_pairs(self, pairs=None, timeout_s=1.0):
        """The ordered host pairs that do not answer one ping.

        Every source pings all its destinations at once, and up to
        :data:`PING_BATCH_HOSTS` sources probe at the same time, so a k=4 FatTree
        (240 pairs) is checked in about a timeout per batch.

        Args:
            pairs: ``[(src, dst)]`` host names (default: every ordered pair).
            timeout_s: how long each ping waits (whole seconds, at least 1).

        Returns:
            list: ``(src, dst)`` pairs without an answer, sorted.
        """
        names = [host.name for host in self.hosts]
        pairs = [(a, b) for a in names for b in names if a != b] if pairs is None else list(pairs)
        by_source = {}
        for src, dst in pairs:
            by_source.setdefault(src, []).append(dst)
        wait = max(1, round(timeout_s))
        ips = {name: self.host(name).IP() for name in names}
        by_ip = {ip: name for name, ip in ips.items()}
        failed = []
        sources = sorted(by_source)
        for start in range(0, len(sources), PING_BATCH_HOSTS):
            batch = sources[start:start + PING_BATCH_HOSTS]
            # one shell line per chunk of destinations: a node's shell reads a terminal line (4 KiB at most)
            chunks = {src: [by_source[src][i:i + PING_LINE_DESTINATIONS]
                            for i in range(0, len(by_source[src]), PING_LINE_DESTINATIONS)] for src in batch}
            for turn in range(max(len(each) for each in chunks.values())):
                active = [src for src in batch if turn < len(chunks[src])]
                for src in active:
                    targets = " ".join(ips[dst] for dst in chunks[src][turn])
                    self.host(src).sendCmd(f"for d in {targets}; do (ping -n -q -c 1 -W {wait} $d >/dev/null 2>&1 "
                                           "|| echo UNREACHABLE $d) & done; wait")
                for src in active:
                    output = self.host(src).waitOutput()
                    failed += [(src, by_ip[line.split()[1]]) for line in output.splitlines()
                               if line.startswith("UNREACHABLE ")]
        return sorted(failed)

    # -- traffic ---------------------------------------------------------------------------
    def host_handles(self):
        """``{host name: HostHandle}`` for the traffic package; every process is killed at stop."""
        self._running()
        return {host.name: self._registry.wrap(from_mininet(host)) for host in self.hosts}

    @_names_a_lost_server
    def stream(self, pairs, duration=1.0, events=(), **options):
        """Run paced RoCEv2 streams between host pairs and return the traffic report.

        Args:
            pairs: ``[(sender, receiver)]`` host names.
            duration: seconds each sender sends.
            events: ``[(at_s, callable)]`` run at ``at_s`` after the senders start (for example
                ``(0.5, lambda: net.link_down("e0_0", "a0_0"))``); the first one's planned time is
                the failure time of the report's ``recovery``.
            **options: :func:`testbed.traffic.streams.run_streams` options (``qps``,
                ``rate_mbps``, ``size``, ``mtu``, ``udp_sport``, ``qp_scaling``...).

        Returns:
            dict: the report (``sent_packets``, ``lost_packets``, ``out_of_sequence``,
            ``goodput_mbps``, ``recovery``...).
        """
        handles = self.host_handles()
        hosts = []
        for src, dst in pairs:
            for name in (src, dst):
                if name not in handles:
                    raise ParameterError("pairs", name, "host names of the fabric: " + ", ".join(sorted(handles)))
            hosts += [handles[src], handles[dst]]
        events = sorted(events, key=lambda event: event[0])
        timers = []

        def on_start(start_ns):
            for at_s, action in events:
                timer = threading.Timer(max(0.0, at_s - (time.time_ns() - start_ns) / 1e9), action)
                timer.daemon = True
                timer.start()
                timers.append(timer)
            return start_ns + int(events[0][0] * 1e9) if events else None

        try:
            return run_streams(hosts, duration=duration, on_start=on_start, **options)
        finally:
            for timer in timers:
                timer.cancel()

    @_names_a_lost_server
    def collective(self, pattern, hosts, size, **options):
        """Run a collective (``allreduce``, ``allgather``, ``reducescatter``, ``alltoall``...) and return its report.

        Args:
            pattern: a pattern of :data:`testbed.traffic.collectives.PATTERNS`.
            hosts: host names taking part, in rank order.
            size: bytes per rank.
            **options: :func:`testbed.traffic.collectives.run_collective` options.
        """
        handles = self.host_handles()
        for name in hosts:
            if name not in handles:
                raise ParameterError("hosts", name, "host names of the fabric: " + ", ".join(sorted(handles)))
        return run_collective([handles[name] for name in hosts], pattern, size, **options)

    @_names_a_lost_server
    def send(self, host, packets):
        """Send Scapy packets (or raw frames) out of ``host``'s fabric interface, in order.

        Frames go out as they are: give them an Ethernet header (the host's MAC is
        ``net[host].MAC()``).
        """
        node = self.host(host)
        frames = "\n".join(bytes(packet).hex() for packet in packets)
        process = node.popen([sys.executable, "-c", _SEND_FRAMES, node.defaultIntf().name],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        _, error = process.communicate(frames.encode(), timeout=60)
        if process.returncode != 0:
            raise EmulationError(f"sending from {host} failed: {error.decode(errors='replace').strip()}")

    @_names_a_lost_server
    def capture(self, host, bpf_filter="", count=None):
        """Capture frames arriving at ``host`` (tcpdump); use as a context manager.

        ::

            with net.capture("h2", "udp port 4791") as capture:
                net.send("h1", frames)
            packets = capture.packets(wait_s=1.0)

        Args:
            host: host name.
            bpf_filter: a tcpdump filter expression.
            count: stop after this many frames.

        Returns:
            Capture
        """
        return Capture(self.host(host), bpf_filter, count, self._registry)


class Capture:
    """A tcpdump on a host's fabric interface, its pcap read from its stdout (see :meth:`Fabric.capture`);
    no file, so a host on another server is captured the same way."""

    def __init__(self, host, bpf_filter="", count=None, registry=None):
        self.host = host
        self.bpf_filter = bpf_filter
        self.count = count
        self._registry = registry
        self._process = None

    def __enter__(self):
        argv = ["tcpdump", "-i", self.host.defaultIntf().name, "-U", "-n", "-w", "-"]
        if self.count:
            argv += ["-c", str(int(self.count))]
        argv += self.bpf_filter.split()
        launch = self.host.popen
        if self._registry is not None:
            launch = self._registry.wrap(from_mininet(self.host)).popen
        self._process = launch(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        line = self._process.stderr.readline().decode(errors="replace")  # "listening on ..." once attached
        if "listening on" not in line:
            self._discard()
            raise EmulationError(f"tcpdump on {self.host.name} did not start: {line.strip()}")
        return self

    def packets(self, wait_s=1.0):
        """Stop capturing after ``wait_s`` more seconds (or when ``count`` frames came) and return them (Scapy)."""
        import io

        from scapy.utils import rdpcap

        process, self._process = self._process, None
        if process is None:
            return []
        try:
            pcap, _ = process.communicate(timeout=wait_s)
        except subprocess.TimeoutExpired:
            process.terminate()
            pcap, _ = process.communicate(timeout=10)
        return list(rdpcap(io.BytesIO(pcap))) if pcap else []

    def __exit__(self, *exc_info):
        if exc_info[0] is not None:
            self._discard()
        return False

    def _discard(self):
        process, self._process = self._process, None
        if process is not None:
            if process.poll() is None:
                process.kill()
            process.communicate()

    def __del__(self):
        self._discard()


def fabric(topology, **options):
    """Start a :class:`Fabric` (see there for the options); use it as a context manager.

    ``testbed.fabric("clos", leaves=2, spines=2, hosts_per_leaf=2, program="ecmp")``
    """
    return Fabric(topology, **options)


def spec_fabric(spec, target=None, **options):
    """A :class:`Fabric` for an experiment spec (topology, program, controller, parameters, seed).

    The parameters the spec gave itself must be carried by the program; those drawn from
    its seed need not be.

    Args:
        spec: an :class:`~testbed.experiment.spec.ExperimentSpec`.
        target: overrides the spec's target.
        **options: more :class:`Fabric` options (``log_dir``, ``state_file``, ``progress``...).
    """
    mode = MODES[spec.mode] if spec.mode else None
    required = [name for name in (mode.parameters if mode else ())
                if name in spec.mode_params and name not in spec.seeded_params]
    return Fabric(spec.build_topology(), program=spec.mode or spec.program, target=target or spec.target,
                  controller=spec.controller.kind, mode_params=spec.mode_params, required_params=required,
                  seed=spec.seed, backend=spec.backend, detection_delay_ms=spec.controller.detection_delay_ms,
                  controller_options=spec.controller.options_for(spec.controller.kind),
                  shape_links=spec.topology.shape_links, queue_frames=spec.topology.queue_frames,
                  **({"servers": spec.servers, "placement": spec.placement, "cross_link": spec.cross_link}
                     if spec.servers else {}), **options)


__all__ = ["Fabric", "Capture", "fabric", "spec_fabric"]
