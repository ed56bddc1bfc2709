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
import functools
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading

from mininet.log import setLogLevel
from mininet.net import Mininet

from testbed.embedded_switch.port_control import check_impairment
from testbed.emulation.cleanup import mark_owner
from testbed.emulation.hosts import FabricHost
from testbed.emulation.links import FabricLink, set_link_ends
from testbed.emulation.netem import netem_available
from testbed.emulation.state import DEFAULT_STATE_FILE, write_state
from testbed.emulation.switches import BridgeSwitch
from testbed.errors import EmulationError, ParameterError


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


@contextlib.contextmanager
def termination_as_interrupt():
    """Turn SIGTERM and SIGHUP into KeyboardInterrupt inside the block (main thread only).

    So ``finally`` clauses (network teardown) run when a run is killed
    politely, exactly as they do on Ctrl-C.  Outside the main thread (where
    Python cannot set signal handlers) it does nothing.
    """

    def interrupt(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def signals_deferred():
    """Ignore SIGINT/SIGTERM/SIGHUP inside the block (teardown must finish), then restore them.

    Main thread only; elsewhere it does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    signals = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in signals}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def qdisc_drops(interface):
    """Packets the root qdiscs of ``interface`` dropped (``tc -s qdisc``), 0 if none or unknown."""
    result = subprocess.run(["tc", "-s", "qdisc", "show", "dev", interface], capture_output=True, text=True,
                            check=False)
    return sum(int(found) for found in re.findall(r"dropped (\d+)", result.stdout))


class FabricNetwork:
    """A Mininet network built from a fabric topology, started and stopped as one.

    Args:
        topo: a :class:`testbed.topologies.base.FabricTopo`.
        switch: switch kind, one of :func:`switch_classes` (``"bridge"``,
            ``"embedded"``, ``"bmv2"``).
        switch_params: extra keyword options for every switch (for P4
            switches: ``program``, ``log_dir``, ``pcap``...).
        shape_links: shape every link to its ``capacity_mbps`` with tc htb.
        state_file: where to write the running network's description
            (``None`` to write none).
        publish_on_start: write the state file as soon as the network runs;
            with False the caller calls :meth:`publish_state` when the fabric
            is ready for others (for example after routes are programmed).
        log_dir: where P4 switches write their logs (and pcaps); by default a
            temporary directory removed at stop.
        log_level: Mininet's log level (``"warning"``, ``"info"``...).

    Raises:
        ParameterError: unknown switch kind.
    """

    def __init__(self, topo, switch="bridge", switch_params=None, shape_links=False,
                 state_file=DEFAULT_STATE_FILE, log_dir=None, log_level="warning", publish_on_start=True):
        kinds = switch_classes()
        if switch not in kinds:
            raise ParameterError("switch", switch, "one of: " + ", ".join(sorted(kinds)))
        self.topo = topo
        self.switch_kind = switch
        self.switch_class = kinds[switch]
        self.switch_params = dict(switch_params or {})
        self.shape_links = shape_links
        self.state_file = state_file
        self.publish_on_start = publish_on_start
        self.log_level = log_level
        self.log_dir = log_dir
        self._temporary_log_dir = None
        self.net = None

    # -- lifecycle -----------------------------------------------------------------
    def start(self):
        """Build and start the network; on any failure tear down what was built.

        Returns:
            FabricNetwork: ``self``.

        Raises:
            EmulationError: Mininet could not build or start the network.
        """
        setLogLevel(self.log_level)
        mark_owner()  # every process started for this network inherits the mark (cleanup, leftover checks)
        params = dict(self.switch_params)
        if self.switch_kind != "bridge":
            if self.log_dir is None:
                self._temporary_log_dir = tempfile.mkdtemp(prefix="testbed-logs-")
            params.setdefault("log_dir", self.log_dir or self._temporary_log_dir)
        switch = functools.partial(self.switch_class, **params)
        link = functools.partial(FabricLink, shape=self.shape_links)
        self.net = Mininet(topo=self.topo, switch=switch, host=FabricHost, link=link,
                           controller=None, build=False, autoSetMacs=False, waitConnected=False)
        try:
            self.net.build()
            self.net.start()
            self.net.staticArp()
            self._wait_switches_ready()
            if self.publish_on_start:
                self.publish_state()
        except BaseException as error:
            self.stop()
            if isinstance(error, Exception) and not isinstance(error, EmulationError):
                raise EmulationError(f"could not start the network: {error}") from error
            raise
        return self

    def _wait_switches_ready(self):
        """Wait for switches that report readiness (P4 switches); raise if one died."""
        for switch in self.net.switches:
            wait = getattr(switch, "wait_ready", None)
            if wait is not None:
                wait()

    def check_switches(self):
        """Raise EmulationError naming the first switch whose process has died."""
        for switch in self.net.switches:
            check = getattr(switch, "check_alive", None)
            if check is not None:
                check()

    def stop(self):
        """Stop the network, remove its state file and temporary logs; safe to call twice."""
        net, self.net = self.net, None
        try:
            if net is not None:
                net.stop()
        finally:
            if self._temporary_log_dir is not None:
                shutil.rmtree(self._temporary_log_dir, ignore_errors=True)
                self._temporary_log_dir = None
            if self.state_file and os.path.exists(self.state_file):
                try:
                    with open(self.state_file) as handle:
                        owner = json.load(handle).get("pid")
                except (OSError, ValueError):
                    owner = os.getpid()
                if owner == os.getpid():
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
        return [frozenset((a, b)) for a, b in self.topo.graph().edges(name)]

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
        for switch in self.net.switches:
            if getattr(switch, "process", None) is None or switch.process.poll() is not None:
                continue
            ports = {}
            status = switch.port_status() if hasattr(switch, "port_status") else {}
            for port, intf in switch.intfs.items():
                if intf.name == "lo":
                    continue
                ports[port] = {"tx_errors": int(status.get(port, {}).get("tx_errors", 0)),
                               "queue_drops": qdisc_drops(intf.name) if self.shape_links else 0,
                               "socket_drops": int(status.get(port, {}).get("socket_drops", 0))}
            counters[switch.name] = ports
        return counters

    def receive_lag(self):
        """``{switch: {port: {"samples", "at_least_ms": {...}}}}``: how long frames waited in the
        embedded switches' sockets (cumulative; testbed.packet_sockets.ReceiveLag).  Switches
        that do not measure it (BMv2) and crashed ones are left out."""
        lags = {}
        for switch in self.net.switches:
            if getattr(switch, "process", None) is None or switch.process.poll() is not None:
                continue
            if not hasattr(switch, "port_status"):
                continue
            lags[switch.name] = {port: entry["receive_lag"] for port, entry in switch.port_status().items()
                                 if "receive_lag" in entry}
        return lags

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
