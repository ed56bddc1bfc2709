"""Build, run and tear down an emulated fabric in Mininet.

:class:`FabricNetwork` wraps a Mininet network built from one of the
topologies of :mod:`testbed.topologies`::

    from testbed.topologies.registry import make_topology
    from testbed.emulation.network import FabricNetwork

    with FabricNetwork(make_topology("fattree", k=4), switch="bridge") as fabric:
        fabric.host("h1").cmd("ping -c1", fabric.host("h2").IP())

Whatever happens inside the ``with`` block (an error, Ctrl-C, SIGTERM), the
network is stopped and nothing is left behind.  While it runs, a state file
(:mod:`testbed.emulation.state`) tells other ``testbed`` commands how to
reach it.
"""
import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time

from mininet.log import setLogLevel
from mininet.net import Mininet
from mininet.node import Switch

from testbed.embedded_switch.port_control import check_impairment
from testbed.emulation.cleanup import LOCAL_SERVER, SHORT_TEMP_ROOT, mark_owner
from testbed.emulation.forkserver import ForkServer
from testbed.emulation.hosts import FabricHost
from testbed.emulation.links import MAX_QUEUE_FRAMES, FabricLink, LinkBatch, set_link_ends
from testbed.emulation.netem import netem_available
from testbed.emulation.parallel import for_each
from testbed.emulation.progress import Progress
from testbed.emulation.signals import signals_deferred
from testbed.emulation.state import DEFAULT_STATE_FILE, state_owner, write_state
from testbed.emulation.switches import BridgeSwitch
from testbed.errors import EmulationError, ParameterError
from testbed.topologies.graph import node_pair

#: the longest temporary directory that sockets go in: room for "/testbed-p4rt-<pid>-<id>/<switch>.p4rt"
#: within a Unix socket path's 107 bytes
SOCKET_ROOT_MAX = 50
#: node shells started, hosts configured and switch processes started or stopped at once
BRINGUP_WORKERS = 16
#: how often the switches' P4Runtime servers are probed while waiting for them
READY_POLL_S = 0.05


def switch_classes():
    """Return the switch kinds ``FabricNetwork`` accepts, by name.

    ``bridge`` is a Linux bridge with spanning tree (no P4); the P4 kinds are
    added by :mod:`testbed.emulation.p4switch` when it is importable.
    """
    kinds = {"bridge": BridgeSwitch}
    try:
        from testbed.emulation import p4switch
    except ImportError:
        return kinds
    kinds.update(p4switch.SWITCH_KINDS)
    return kinds


def qdisc_drops(interfaces=None):
    """Packets the root qdisc of each interface dropped, from one ``tc -s -j qdisc show``.

    Only the root counts: a classful root (htb) adds its children's drops to its own, so a
    leaf under it (netem for a link delay, the pfifo of a DSF fabric link) would count each
    drop twice.

    Args:
        interfaces: names to report (default: every interface ``tc`` shows in this namespace).

    Returns:
        dict: ``{interface: drops}``; 0 for an interface without a root qdisc or not shown.
    """
    result = subprocess.run(QDISC_COMMAND, capture_output=True, text=True, check=False)
    drops = parse_qdisc_drops(result.stdout)
    if interfaces is None:
        return drops
    return {name: drops.get(name, 0) for name in interfaces}


#: what :func:`qdisc_drops` runs (also on other servers)
QDISC_COMMAND = ("tc", "-s", "-j", "qdisc", "show")


def parse_qdisc_drops(text):
    """``{interface: drops}`` of the root qdiscs in the output of :data:`QDISC_COMMAND` (none if unreadable).

    >>> parse_qdisc_drops('[{"kind":"htb","handle":"5:","dev":"s1-eth1","root":true,"drops":7},'
    ...                   '{"kind":"pfifo","handle":"10:","dev":"s1-eth1","parent":"5:1","drops":7}]')
    {'s1-eth1': 7}
    """
    try:
        qdiscs = json.loads(text or "[]")
    except ValueError:
        return {}
    return {qdisc.get("dev"): int(qdisc.get("drops") or 0) for qdisc in qdiscs
            if isinstance(qdisc, dict) and qdisc.get("root")}


class FabricNetwork:
    """A Mininet network built from a fabric topology, started and stopped as one.

    Bring-up: node shells started in parallel; every veth pair created by one
    ``ip -batch`` (:class:`~testbed.emulation.links.LinkBatch`); each host
    configured by one shell command, static neighbour entries for every other
    host included (no ARP, no ``arp -s`` per host pair); switch processes
    started at once (embedded switches forked from one
    :class:`~testbed.emulation.forkserver.ForkServer`) and their P4Runtime
    servers awaited together.  Teardown: every switch process asked to stop at
    once, every veth pair removed by one ``ip link del group``, every node
    shell hung up at once.  The steps run in worker threads
    (:func:`testbed.emulation.parallel.for_each`), so a signal lands between
    steps, never inside one, and teardown finds a consistent state.

    Args:
        topo: a :class:`testbed.topologies.base.FabricTopo`.
        switch: switch kind, one of :func:`switch_classes` (``"bridge"``,
            ``"embedded"``, ``"bmv2"``).
        switch_params: extra keyword options for every switch (for P4
            switches: ``program``, ``log_dir``, ``pcap``...).
        shape_links: shape every link to its ``capacity_mbps`` with tc htb.
        queue_frames: with ``shape_links``, the frames each link end may queue (tail drop; None:
            the veth's 1,000).
        state_file: where to write the running network's description
            (``None`` to write none).
        publish_on_start: write the state file as soon as the network runs;
            with False the caller calls :meth:`publish_state` when the fabric
            is ready for others (for example after routes are programmed).
        log_dir: where P4 switches write their logs (and pcaps); by default a
            temporary directory removed at stop.
        log_level: Mininet's log level (``"warning"``, ``"info"``...).
        progress: a :class:`~testbed.emulation.progress.Progress` told about every
            step (default: silent).
        fork_switches: start embedded switches from a fork server (one Python
            start-up for all); False starts each with its own interpreter.

    Raises:
        ParameterError: unknown switch kind.
    """

    def __init__(self, topo, switch="bridge", switch_params=None, shape_links=False,
                 state_file=DEFAULT_STATE_FILE, log_dir=None, log_level="warning", publish_on_start=True,
                 progress=None, fork_switches=True, queue_frames=None):
        kinds = switch_classes()
        if switch not in kinds:
            raise ParameterError("switch", switch, "one of: " + ", ".join(sorted(kinds)))
        if queue_frames is not None:
            if not shape_links:
                raise ParameterError("queue_frames", queue_frames,
                                     "only with shape_links (unshaped veths do not queue)")
            if isinstance(queue_frames, bool) or not isinstance(queue_frames, int) \
                    or not 1 <= queue_frames <= MAX_QUEUE_FRAMES:
                raise ParameterError("queue_frames", queue_frames, f"an integer in [1, {MAX_QUEUE_FRAMES}]")
        self.queue_frames = queue_frames
        self.topo = topo
        self.switch_kind = switch
        self.switch_class = kinds[switch]
        self.switch_params = dict(switch_params or {})
        self.shape_links = shape_links
        self.state_file = state_file
        self.publish_on_start = publish_on_start
        self.log_level = log_level
        self.log_dir = log_dir
        self.progress = progress or Progress()
        self.fork_switches = fork_switches
        self._temporary_dirs = []  # removed at stop
        self.net = None
        self._nodes = []  # every node whose shell was started, registered in the net or not
        self._nodes_lock = threading.Lock()
        self._links = None
        self._launcher = None
        self._cancel = threading.Event()

    # -- lifecycle -----------------------------------------------------------------
    def start(self):
        """Build and start the network; on any failure (or signal) tear down what was built.

        Returns:
            FabricNetwork: ``self``.

        Raises:
            EmulationError: Mininet could not build or start the network.
            KeyboardInterrupt: interrupted (what was built is torn down).
        """
        setLogLevel(self.log_level)
        mark_owner()  # every process started for this network inherits the mark (cleanup, leftover checks)
        self._cancel = threading.Event()
        try:
            self._build()
            self._start_switches()
            if self.publish_on_start:
                self.publish_state()
        except BaseException as error:
            with signals_deferred():
                self.progress.begin("down")
                cause = "a signal" if isinstance(error, KeyboardInterrupt) else "an error"
                self.progress.event(f"stopped by {cause} while starting: tearing down")
                self.stop()
            if isinstance(error, Exception) and not isinstance(error, EmulationError):
                raise EmulationError(f"could not start the network: {error}") from error
            raise
        return self

    def _switch_factory(self):
        """The switch class with this network's options (log dir, fork server...)."""
        params = dict(self.switch_params)
        if self.switch_kind != "bridge":
            params.setdefault("log_dir", self.log_dir or self._temporary_dir("logs"))
            os.makedirs(params["log_dir"], exist_ok=True)
        if self.switch_kind == "bmv2":
            params.setdefault("socket_dir", self._temporary_dir("p4rt", short=True))  # Unix socket paths
        if self.switch_kind == "embedded" and self.fork_switches:
            from testbed.emulation.p4switch import SWITCHD_MODULE
            from testbed.p4.native import BACKEND_ENV

            program = params.get("program")
            warm = program if program and os.path.isfile(program) else None
            # the server warms for the switches' backend (a native library is built once, shared)
            backend = {BACKEND_ENV: params["backend"]} if params.get("backend") else None
            self._launcher = ForkServer(SWITCHD_MODULE, log_path=os.path.join(params["log_dir"], "forkserver.log"),
                                        warm=warm, env=backend)
            for_each([self._launcher], ForkServer.start, 1, name="forkserver")
            params["launcher"] = self._launcher

        def make(name, position, **node_params):
            if self.switch_kind == "bridge":
                node_params.setdefault("prio", BridgeSwitch.FIRST_PRIORITY + position)  # as in topology order
            return self.switch_class(name, **params, **node_params)

        return make

    def _temporary_dir(self, purpose, short=False):
        """A new private directory in the temporary directory, removed at stop whenever a signal comes.

        Its name is recorded before it exists, so an interrupt cannot leave it unknown.  With ``short``
        it holds Unix sockets: when ``$TMPDIR`` is too long for their paths (108 bytes with the switch
        names), it goes to :data:`~testbed.emulation.cleanup.SHORT_TEMP_ROOT`, which cleanup searches too.
        """
        root = tempfile.gettempdir()
        if short and len(os.fsencode(root)) > SOCKET_ROOT_MAX:
            root = SHORT_TEMP_ROOT
        path = os.path.join(root, f"testbed-{purpose}-{os.getpid()}-{id(self):x}")
        self._temporary_dirs.append(path)
        os.makedirs(path, mode=0o700, exist_ok=True)
        return path

    def _created(self, node):
        with self._nodes_lock:
            self._nodes.append(node)
        return node

    def _add_nodes(self, hosts, switches, start_shell):
        """Start every node's shell in parallel (``start_shell(name) -> node``) and add the nodes to the network."""
        shells = self.progress.count("node shells started", len(hosts) + len(switches))
        nodes = dict(zip(hosts + switches, for_each(hosts + switches, start_shell, BRINGUP_WORKERS,
                                                    done=lambda *_: shells.add(), cancel=self._cancel,
                                                    name="shell")))
        for name in hosts:
            self.net.addHost(name, cls=lambda _name, **_params: nodes[_name])
        for name in switches:
            self.net.addSwitch(name, cls=lambda _name, **_params: nodes[_name])

    def _build(self):
        """Node shells, links, host configuration (addresses and static neighbours)."""
        topo, progress = self.topo, self.progress
        make_switch = self._switch_factory()
        self._links = LinkBatch()
        self.net = Mininet(topo=topo, switch=self.switch_class, host=FabricHost, controller=None, build=False,
                           autoSetMacs=False, waitConnected=False,
                           link=lambda *args, **kwargs: FabricLink(*args, shape=self.shape_links, batch=self._links,
                                                                   queue_frames=self.queue_frames, **kwargs))
        hosts, switches = list(topo.hosts()), list(topo.switches())
        index = {name: i for i, name in enumerate(switches)}

        def start_shell(name):
            info = topo.nodeInfo(name)
            if name in index:
                # the defaults Mininet.addSwitch gives (switches live in the root namespace)
                params = dict({"listenPort": self.net.listenPort, "inNamespace": self.net.inNamespace}, **info)
                return self._created(make_switch(name, index[name], **params))
            return self._created(FabricHost(name, **info))

        self._add_nodes(hosts, switches, start_shell)
        for _src, _dst, params in topo.links(sort=True, withInfo=True):
            self.net.addLink(**params)
        for_each([self._links], LinkBatch.create, 1, name="links")
        progress.event(f"links created: {len(self._links.links)} veth pairs")
        self._configure_hosts()
        self.net.built = True

    def _configure_hosts(self):
        """Addresses, IPv6 and offloads off, and a permanent neighbour entry for every other host."""
        addresses = {}
        for host in self.net.hosts:
            ip, mac = host.params.get("ip"), host.params.get("mac")
            if ip and mac:
                addresses[host.name] = (ip.split("/")[0], mac)
        batch_dir = self._temporary_dir("hosts")

        def configure(host):
            neighbours = [address for name, address in addresses.items() if name != host.name]
            host.config(**host.params, neighbours=neighbours, batch_dir=batch_dir)

        count = self.progress.count("hosts configured", len(self.net.hosts),
                                    f"({max(0, len(addresses) - 1)} static neighbours each)")
        for_each(self.net.hosts, configure, BRINGUP_WORKERS, done=lambda *_: count.add(), cancel=self._cancel,
                 name="host")

    def _start_switches(self):
        """Start every switch, then wait until every P4 switch's P4Runtime server listens."""
        switches = list(self.net.switches)
        for_each(switches, lambda switch: switch.start([]), BRINGUP_WORKERS, cancel=self._cancel, name="switch")
        self._wait_switches_ready(switches)

    def _wait_switches_ready(self, switches, timeout=None):
        """Wait for the switches that report readiness (P4 switches); raise if one died or is late."""
        from testbed.emulation.p4switch import READY_TIMEOUT_S

        waiting = [switch for switch in switches if hasattr(switch, "is_ready")]
        count = self.progress.count("switches started", len(switches))
        if len(waiting) < len(switches):
            count.add(len(switches) - len(waiting))
        deadline = time.monotonic() + (timeout or READY_TIMEOUT_S)
        while waiting:
            ready = [switch for switch in waiting if switch.is_ready()]
            if ready:
                count.add(len(ready))
                waiting = [switch for switch in waiting if switch not in ready]
            if waiting and time.monotonic() > deadline:
                waiting[0].wait_ready(timeout=0)  # raises with the switch's log
            if waiting:
                time.sleep(READY_POLL_S)

    def check_reachable(self):
        """Raise EmulationError naming a server of the fabric that became unreachable (one server: none can)."""

    @contextlib.contextmanager
    def naming_a_lost_server(self):
        """Run the block; a server lost before or during it is what it raises (:meth:`check_reachable`), not the
        block's own error (one server: the block as it is)."""
        yield

    def check_switches(self):
        """Raise EmulationError naming a server that became unreachable, else the first switch whose process died."""
        self.check_reachable()
        for switch in self.net.switches:
            check = getattr(switch, "check_alive", None)
            if check is not None:
                check()

    def stop(self):
        """Stop the network, remove its state file and temporary logs; safe to call twice.

        Switch processes are asked to stop all at once, the links removed in one
        kernel batch, the node shells hung up all at once; SIGINT/SIGTERM wait
        until this is done.
        """
        with signals_deferred():
            self.net = None
            try:
                self._teardown()
            finally:
                self._remove_files()

    def _teardown(self):
        self._cancel.set()
        with self._nodes_lock:
            nodes, self._nodes = list(self._nodes), []
        switches = [node for node in nodes if isinstance(node, Switch)]
        errors = []
        if switches:
            for switch in switches:
                request = getattr(switch, "request_stop", None)
                if request is not None:
                    request()
            count = self.progress.count("switches stopped", len(switches))
            self._for_all(switches, lambda switch: switch.stop(deleteIntfs=False), count, errors)
        links, self._links = self._links, None
        if links is not None and links.created:
            left = links.remove()
            self.progress.event(f"links removed: {len(links.links)} veth pairs"
                                + (f" ({len(left)} removed one by one)" if left else ""))
        for node in nodes:
            shell = node.shell
            if shell is not None and shell.poll() is None:
                try:
                    os.killpg(shell.pid, signal.SIGHUP)
                except ProcessLookupError:
                    pass
        if nodes:
            self._for_all(nodes, lambda node: node.terminate(), self.progress.count("node shells stopped",
                                                                                    len(nodes)), errors)
        launcher, self._launcher = self._launcher, None
        if launcher is not None:
            launcher.stop()
        if errors:
            raise EmulationError(f"teardown: {errors[0]}")

    @staticmethod
    def _for_all(nodes, work, count, errors):
        """Run ``work`` on every node in parallel; errors are collected, not raised (the rest goes on)."""
        def guarded(node):
            try:
                work(node)
            except Exception as error:  # noqa: BLE001 - teardown goes on; the first error is raised at the end
                errors.append(f"{node.name}: {type(error).__name__}: {error}")

        for_each(nodes, guarded, BRINGUP_WORKERS, done=lambda *_: count.add(), name="teardown")

    def _remove_files(self):
        while self._temporary_dirs:
            shutil.rmtree(self._temporary_dirs.pop(), ignore_errors=True)
        if self.state_file and os.path.exists(self.state_file):
            if state_owner(self.state_file) in (None, os.getpid()):  # not another run's file
                os.remove(self.state_file)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc_info):
        self.stop()
        return False

    # -- access --------------------------------------------------------------------
    def host(self, name):
        """Return the Mininet host called ``name``.

        Raises:
            ParameterError: no such host.
        """
        names = [h.name for h in self.net.hosts]
        if name not in names:
            raise ParameterError("host", name, "one of: " + ", ".join(names))
        return self.net.get(name)

    @property
    def hosts(self):
        """The Mininet host objects, in topology order."""
        return list(self.net.hosts)

    @property
    def switches(self):
        """The Mininet switch objects, in topology order."""
        return list(self.net.switches)

    def link_status(self, a, b, status):
        """Bring every link between nodes ``a`` and ``b`` ``"up"`` or ``"down"``.

        Raises:
            ParameterError: bad status, or no link between the nodes.
        """
        if status not in ("up", "down"):
            raise ParameterError("status", status, "up or down")
        for link in self._links_between(a, b):
            set_link_ends(link, status == "up")

    def impair_link(self, a, b, loss, delay_ms=0.0):
        """Make every link between nodes ``a`` and ``b`` lossy (and slow) inside the switches' ports.

        Each switch end drops frames leaving the port with probability ``loss``
        and delays them ``delay_ms``, so both directions are impaired; a host
        end has no switch port, so that link is impaired in the switch's
        direction only.  Needs a switch that can impair its ports (the embedded
        P4 target); ``loss=0, delay_ms=0`` clears the impairment.

        Returns:
            list: ``(switch name, port)`` of every impaired port.

        Raises:
            ParameterError: bad loss/delay, or no link between the nodes.
            EmulationError: a switch end cannot impair its ports (BMv2, bridge: netem is needed).
        """
        check_impairment(loss, delay_ms)
        links = self._links_between(a, b)
        switches = set(self.net.switches)
        ends = []
        for link in links:
            for intf in (link.intf1, link.intf2):
                if intf.node in switches:
                    ends.append((intf.node, intf.node.ports[intf]))
        for switch, _port in ends:
            if not hasattr(switch, "set_port_impairment"):
                raise EmulationError(f"switch {switch.name} ({self.switch_kind}) cannot drop or delay frames "
                                     "in its ports; link loss/delay needs the kernel's netem qdisc")
        for switch, port in ends:
            switch.set_port_impairment(port, loss=loss, delay_ms=delay_ms)
        return [(switch.name, port) for switch, port in ends]

    def set_link_loss(self, a, b, loss, delay_ms=0.0):
        """Make every link between ``a`` and ``b`` lossy (and slow) in both directions.

        Uses the kernel's ``netem`` qdisc on both interfaces where the kernel has it,
        else the embedded switches' ports (:meth:`impair_link`).

        Args:
            a, b: directly linked node names.
            loss: drop probability in [0, 1] (0 with ``delay_ms=0`` clears the impairment).
            delay_ms: added one-way delay in milliseconds.

        Returns:
            str: the mechanism used, ``"netem"`` or ``"embedded-port"``.

        Raises:
            ParameterError: bad values or no such link.
            EmulationError: neither netem nor the switch ports can impair this link (BMv2 without netem).
        """
        check_impairment(loss, delay_ms)
        links = self._links_between(a, b)
        if not netem_available():
            self.impair_link(a, b, loss, delay_ms)
            return "embedded-port"
        for link in links:
            for intf in (link.intf1, link.intf2):
                if loss == 0 and delay_ms == 0:
                    intf.node.cmd(f"tc qdisc del dev {intf.name} root")
                    continue
                result = intf.node.cmd(f"tc qdisc replace dev {intf.name} root netem "
                                       f"loss {loss * 100:.4f}% delay {delay_ms:.3f}ms")
                if result.strip():
                    raise EmulationError(f"netem on {intf.name}: {result.strip()}")
        return "netem"

    def crash_switch(self, name):
        """Kill a P4 switch's process (SIGKILL), as a crash would.

        Returns:
            list: the links (frozensets of node names) that died with it.

        Raises:
            ParameterError: no such switch.
            EmulationError: the switch has no running process.
        """
        switches = {switch.name: switch for switch in self.net.switches}
        if name not in switches:
            raise ParameterError("switch", name, "one of: " + ", ".join(sorted(switches)))
        process = getattr(switches[name], "process", None)
        if process is None or process.poll() is not None:
            raise EmulationError(f"switch {name} has no running process to crash")
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
        return [node_pair(a, b) for a, b in self.topo.graph().edges(name)]

    def switch_interfaces(self, in_namespace=None):
        """Names of every switch port (the switches' interfaces, loopback left out); with ``in_namespace``
        True or False, only those of switches in a namespace of their own (BMv2) or not."""
        return [intf.name for switch in self.net.switches for intf in switch.intfs.values()
                if intf.name != "lo" and in_namespace in (None, switch.inNamespace)]

    def queue_drops(self):
        """``{switch port: drops}`` of the root qdiscs of the switch ports in the root namespace (one ``tc``).

        The ports of switches in namespaces of their own (BMv2) are not read: their queues are in
        those namespaces (``switch_interfaces(in_namespace=True)`` names them).
        """
        return qdisc_drops(self.switch_interfaces(in_namespace=False))

    def _running_switches(self):
        return [switch for switch in self.net.switches
                if getattr(switch, "process", None) is not None and switch.process.poll() is None]

    def port_statuses(self):
        """``{switch: {port: {...}}}``: the control-socket port status of every running switch that has one,
        asked of all at once (a switch on another server is an ssh command away)."""
        switches = [switch for switch in self._running_switches() if hasattr(switch, "port_status")]
        statuses = for_each(switches, lambda switch: switch.port_status(), BRINGUP_WORKERS, name="status")
        return {switch.name: status for switch, status in zip(switches, statuses)}

    def drop_counters(self):
        """Frames each switch port lost, by cause: ``{switch: {port: {"tx_errors", "queue_drops", "socket_drops"}}}``.

        ``tx_errors``: frames the switch could not send because the port's link was down
        (lost connectivity; the embedded target counts them, read over its control socket).
        ``queue_drops``: frames the port's tc qdisc dropped (congestion), when links are
        shaped (``shape_links``); 0 otherwise, since unshaped veths do not queue.
        ``socket_drops``: frames the kernel dropped at the embedded switch's socket because
        the switch process fell behind (the emulator's loss, not the network's).
        Ports of a crashed switch are left out.
        """
        counters = {}
        queued = self.queue_drops() if self.shape_links else {}
        statuses = self.port_statuses()
        for switch in self._running_switches():
            ports = {}
            status = statuses.get(switch.name, {})
            for port, intf in switch.intfs.items():
                if intf.name == "lo":
                    continue
                ports[port] = {"tx_errors": int(status.get(port, {}).get("tx_errors", 0)),
                               "queue_drops": queued.get(intf.name, 0),
                               "socket_drops": int(status.get(port, {}).get("socket_drops", 0))}
            counters[switch.name] = ports
        return counters

    def load_averages(self):
        """``{server: [1, 5, 15 minute load average]}`` of the machines the network runs on (here: this one)."""
        return {LOCAL_SERVER: [round(value, 2) for value in os.getloadavg()]}

    def receive_lag(self):
        """``{switch: {port: {"samples", "at_least_ms": {...}}}}``: how long frames waited in the
        embedded switches' sockets (cumulative; testbed.packet_sockets.ReceiveLag).  Switches
        that do not measure it (BMv2) and crashed ones are left out."""
        return {name: {port: entry["receive_lag"] for port, entry in status.items() if "receive_lag" in entry}
                for name, status in self.port_statuses().items()}

    def _links_between(self, a, b):
        names = {node.name for node in self.net.hosts + self.net.switches}
        for name in (a, b):
            if name not in names:
                raise ParameterError("link", f"{a}-{b}", "a pair of directly linked nodes", f"no node {name}")
        links = self.net.linksBetween(self.net.get(a), self.net.get(b))
        if not links:
            raise ParameterError("link", f"{a}-{b}", "a pair of directly linked nodes")
        return links

    def describe(self):
        """Return the JSON-able description written to the state file."""
        hosts = {}
        for host in self.net.hosts:
            intf = host.defaultIntf()
            hosts[host.name] = {"pid": host.pid, "ip": host.IP(), "mac": host.MAC(),
                                "intf": intf.name if intf else None}
        switches = {}
        for switch in self.net.switches:
            entry = {"pid": switch.pid, "role": switch.params.get("role"),
                     "ports": {str(port): intf.name for port, intf in switch.intfs.items()
                               if intf.name != "lo"}}
            describe = getattr(switch, "describe", None)
            if describe is not None:
                entry.update(describe())
            switches[switch.name] = entry
        return {"pid": os.getpid(), "kind": getattr(self.topo, "kind", None),
                "params": getattr(self.topo, "params", None), "switch": self.switch_kind,
                "hosts": hosts, "switches": switches}

    def publish_state(self):
        """Write the state file, telling other commands the fabric is ready to use."""
        if self.state_file:
            write_state(self.describe(), self.state_file)
