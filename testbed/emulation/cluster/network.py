"""A fabric over several servers: :class:`ClusterFabricNetwork`, a FabricNetwork whose nodes are placed.

Every node is a cluster edition node (:mod:`testbed.emulation.cluster.nodes`) on the server
the placement (:mod:`testbed.emulation.cluster.placement`) gives it; links within a server
are veth pairs made there, links between servers are VXLAN (default) or SSH-tunnel links
(:mod:`testbed.emulation.cluster.links`).  The controller, traffic and tests run where the
run started and reach remote switches' P4Runtime servers over the servers' network.

Ownership on every server: remote processes carry ``TESTBED_OWNER`` and ``TESTBED_SERVER``;
the run's root-namespace interfaces on each server are in its owner's interface group
(slot :data:`~testbed.emulation.cleanup.SERVER_GROUP_SLOT` on remote servers).  At stop,
and by ``testbed cleanup --servers``, each server removes exactly those.
"""
import contextlib
import json
import os
import re
import shlex
import subprocess
import time

from mininet.net import Mininet

from testbed.emulation.cleanup import OWNER_ENV, SERVER_ENV, SERVER_GROUP_SLOT, mark_owner, owner_interface_group
from testbed.emulation.cluster import links as cluster_links
from testbed.emulation.cluster.nodes import ClusterBMv2Switch, ClusterEmbeddedSwitch, ClusterHost
from testbed.emulation.cluster.placement import crossing_links, place
from testbed.emulation.cluster.servers import WATCH_TIMEOUT_S, check_servers, resolve_all, watch
from testbed.emulation.hosts import port_setup_commands
from testbed.emulation.links import ip_batch, unused_interface_group
from testbed.emulation.namespaces import set_interface_up
from testbed.emulation.network import QDISC_COMMAND, FabricNetwork, parse_qdisc_drops, qdisc_drops
from testbed.errors import EmulationError, ParameterError
from testbed.p4.native import default_backend, machine_backend

LINK_KINDS = ("vxlan", "ssh")
SWITCH_KINDS = {"embedded": ClusterEmbeddedSwitch, "bmv2": ClusterBMv2Switch}
#: hosts' MTU: room for the VXLAN header (50 bytes) within the servers' 1500
HOST_MTU = 1450
#: the cross-link probe: two namespaces (names no topology uses), their addresses (a /30 of their own,
#: reachable from nothing else), pings and seconds of TCP (see ClusterFabricNetwork.measure_cross_link)
PROBE_NAMES = ("tbprobe0", "tbprobe1")
PROBE_ADDRESSES = ("10.255.255.253/30", "10.255.255.254/30")
PROBE_PINGS = 20
PROBE_SECONDS = 2.0


class ClusterFabricNetwork(FabricNetwork):
    """A :class:`~testbed.emulation.network.FabricNetwork` over several servers.

    Args (besides FabricNetwork's):
        servers: ``servers`` entries (:func:`testbed.emulation.cluster.servers.resolve`); localhost is added first.
        placement: ``{node: server name}`` fixing some nodes; the rest placed by the fabric's structure.
        link: cross-server link kind, ``"vxlan"`` or ``"ssh"``.
        check: check every server before anything starts (:func:`~testbed.emulation.cluster.servers.check_servers`).

    Raises:
        ParameterError: an unknown server or link kind, a placement naming a node or server that
            does not exist, a switch kind not available over servers.
    """

    def __init__(self, topo, switch="embedded", servers=("localhost",), placement=None, link="vxlan",
                 check=True, **options):
        if switch not in SWITCH_KINDS:
            raise ParameterError("switch", switch, "over several servers: " + ", ".join(SWITCH_KINDS))
        if link not in LINK_KINDS:
            raise ParameterError("link", link, "one of: " + ", ".join(LINK_KINDS))
        options.setdefault("fork_switches", True)
        super().__init__(topo, switch=switch, **options)
        self.backend = None
        if switch == "embedded":
            # named to every switch: $TESTBED_BACKEND does not travel over ssh; what auto chooses here
            # (native where it can) the other servers must be able to run too
            self.switch_params.setdefault("backend", default_backend())
            self.backend = machine_backend(self.switch_params["backend"])
        self.switch_class = SWITCH_KINDS[switch]
        self.servers = resolve_all(servers)
        self.server_by_name = {server.name: server for server in self.servers}
        self.placement = place(topo, [server.name for server in self.servers], placement)
        self.link_kind = link
        self.check = check
        self.crossing = crossing_links(topo, self.placement)
        self._groups = {}
        self._tunnels = []  # the run's tunnel processes (SSH tunnels)
        self._watches = {}  # {server name: its watch connection} (see check_reachable)
        self._link_class = None
        self.cross_link_measured = None  # see measure_cross_link
        self._checked = False  # nothing runs on the other servers before their check passed

    def start(self):
        """Check the servers (before anything starts), then build and start as FabricNetwork does."""
        if self.check:
            check_servers(self.servers, self.switch_kind, self.link_kind, self.backend)
        self._checked = True
        return super().start()

    def _build(self):
        """Node shells on their servers, links (veth within a server, tunnels across), hosts configured."""
        topo, progress = self.topo, self.progress
        owner = mark_owner()
        for server in self.servers:
            if not server.local:
                self._watches[server.name] = watch(server, [f"{OWNER_ENV}={owner}", f"{SERVER_ENV}={server.name}"])
        make_switch = self._switch_factory()
        self._groups = {server.name: (unused_interface_group() if server.local
                                      else owner_interface_group(owner, SERVER_GROUP_SLOT))
                        for server in self.servers}
        link_class = cluster_links.link_class(self.link_kind, owner, self._groups, self._tunnels,
                                              shape=self.shape_links)
        self._link_class = link_class
        self.net = Mininet(topo=None, switch=self.switch_class, host=ClusterHost, controller=None, build=False,
                           autoSetMacs=False, waitConnected=False, link=link_class)
        hosts, switches = list(topo.hosts()), list(topo.switches())
        index = {name: i for i, name in enumerate(switches)}

        def start_shell(name):
            info = dict(topo.nodeInfo(name))
            server = self.server_by_name[self.placement[name]]
            if name in index:
                params = dict({"listenPort": self.net.listenPort, "inNamespace": False}, **info)
                return self._created(make_switch(name, index[name], server=server, owner=owner, **params))
            return self._created(ClusterHost(name, server=server, owner=owner, **info))

        self._add_nodes(hosts, switches, start_shell)
        links = progress.count("links created", len(topo.links()), f"({len(self.crossing)} across servers, "
                               f"{self.link_kind})")
        for _src, _dst, params in topo.links(sort=True, withInfo=True):
            self.net.addLink(**params)
            links.add()
        self._prepare_switch_ports()
        self._configure_hosts()
        self.net.built = True

    def check_reachable(self):
        """Raise EmulationError naming the first server whose watch connection ended (no answer for
        :data:`~testbed.emulation.cluster.servers.WATCH_TIMEOUT_S`); it is then lost to the run:
        teardown tries nothing more there and says how to clean it once it is back."""
        for name, connection in self._watches.items():
            if connection.poll() is None:
                continue
            server = self.server_by_name[name]
            if server.lost is None:
                server.lost = f"no answer over ssh for {WATCH_TIMEOUT_S} s, status {connection.returncode}"
            lost = sorted(node for node, where in self.placement.items() if where == name)
            raise EmulationError(f"server {name} ({server.address}) became unreachable while the fabric ran "
                                 f"({server.lost}); lost with it: {len(lost)} nodes ({', '.join(lost[:6])}"
                                 f"{', ...' if len(lost) > 6 else ''}); once it is back, "
                                 f"`testbed cleanup --servers {name}` removes what the run left there")

    @contextlib.contextmanager
    def naming_a_lost_server(self):
        """Run the block after :meth:`check_reachable`; when the block fails (asking a node on another server:
        an ssh command, a gRPC call), wait for the servers' watch connections to decide, so that a lost server
        is reported as such (naming it and what to clean) rather than as the block's failure; the block's
        error if every server still answers.  Bad input (ParameterError) is raised at once."""
        self.check_reachable()
        try:
            yield
        except ParameterError:
            raise
        except Exception:
            deadline = time.monotonic() + WATCH_TIMEOUT_S + 1
            while time.monotonic() < deadline:
                self.check_reachable()
                time.sleep(0.5)
            raise

    def port_statuses(self):
        """As on one server, a lost server named (:meth:`naming_a_lost_server`)."""
        with self.naming_a_lost_server():
            return super().port_statuses()

    def queue_drops(self):
        """As on one server, each server's switch ports read there: this machine's with ``tc``, another's
        through a shell kept there for it (:meth:`~testbed.emulation.cluster.servers.Server.shell`).

        Raises:
            EmulationError: a server's connection ended (the server is lost).
        """
        by_server = {}
        for switch in self.net.switches:
            if not switch.inNamespace:
                by_server.setdefault(switch.cluster_server.name, []).extend(
                    intf.name for intf in switch.intfList() if intf.name != "lo")
        drops = {}
        for name, interfaces in by_server.items():
            server = self.server_by_name[name]
            if server.local:
                drops.update(qdisc_drops(interfaces))
                continue
            # a shell of its own: the samples never wait behind failures or set-up
            found = parse_qdisc_drops(server.shell("queue drops").run(shlex.join(QDISC_COMMAND)).stdout)
            drops.update({interface: found.get(interface, 0) for interface in interfaces})
        return drops

    def _prepare_switch_ports(self):
        """On every server: the root-namespace switch ports IPv6 and offloads off, and up (a switch in a
        namespace of its own, BMv2, sets up its ports itself)."""
        by_server = {}
        for switch in self.net.switches:
            if switch.inNamespace:
                continue
            for intf in switch.intfList():
                if intf.name != "lo":
                    by_server.setdefault(switch.cluster_server.name, []).append(intf.name)
        for name, interfaces in by_server.items():
            server = self.server_by_name[name]
            result = server.run_kept(port_setup_commands(interfaces, up=True))
            output = result.stdout.strip()
            if result.returncode != 0 or output:
                raise EmulationError(f"server {name}: preparing switch ports failed: {output or 'ssh failed'}")

    def _configure_hosts(self):
        super()._configure_hosts()
        for host in self.net.hosts:
            output = host.cmd(f"ip link set dev {host.defaultIntf().name} mtu {HOST_MTU}")
            if output.strip():
                raise EmulationError(f"host {host.name}: MTU {HOST_MTU}: {output.strip()}")

    def _teardown(self):
        """FabricNetwork's teardown, the tunnels, then on every server whatever of the run is left."""
        errors = []
        try:
            super()._teardown()
        except EmulationError as error:
            errors.append(str(error))
        cluster_links.stop_tunnels(self._tunnels)
        for server in self.servers:
            server.close_kept()
        watches, self._watches = self._watches, {}
        cluster_links.stop_tunnels(list(watches.values()))
        for server in self.servers:
            if server.local:
                group = self._groups.get(server.name)
                if group is not None:
                    ip_batch([f"link del group {group}"], force=True)
                continue
            if server.lost:
                errors.append(f"server {server.name} ({server.address}) unreachable ({server.lost}): what the "
                              f"run left there stays until `testbed cleanup --servers {server.name}`")
                continue
            if self._checked:
                remote_cleanup(server, [os.environ.get(OWNER_ENV, os.getpid())], errors)
        if errors:
            raise EmulationError("teardown: " + "; ".join(errors))

    def link_status(self, a, b, status):
        """Bring every link between ``a`` and ``b`` up or down, each end (or wire side) on its own server."""
        if status not in ("up", "down"):
            raise ParameterError("status", status, "up or down")
        for link in self._links_between(a, b):
            if link.wire:
                link.set_wire(status == "up")
                continue
            for intf in (link.intf1, link.intf2):
                node = intf.node
                if getattr(node, "isRemote", False) or node.inNamespace:
                    node.cmd(f"ip link set dev {intf.name} {status}")
                else:
                    set_interface_up(intf.name, status == "up")

    def describe(self):
        """FabricNetwork's description with the servers, the placement and the cross-server links."""
        entry = super().describe()
        entry["cluster"] = self.cluster_summary()
        return entry

    def cluster_summary(self):
        """``{"servers", "placement", "link", "crossing_links", "cross_link_measured"}`` (recorded in
        results.json; the last is None until :meth:`measure_cross_link` ran)."""
        return {"servers": [server.describe() for server in self.servers], "placement": dict(self.placement),
                "link": self.link_kind, "crossing_links": [list(pair) for pair in self.crossing],
                "cross_link_measured": self.cross_link_measured}

    def load_averages(self):
        """``{server: [1, 5, 15 minute load average]}`` of every server (None for one that did not answer)."""
        loads = super().load_averages()
        for server in self.servers:
            if not server.local:
                fields = server.run("cat /proc/loadavg").stdout.split()[:3]
                loads[server.name] = [float(value) for value in fields] if len(fields) == 3 else None
        return loads

    def measure_cross_link(self, seconds=PROBE_SECONDS):
        """Round trip and TCP rate of one link of the run's kind between this machine and the first other
        server: two probe namespaces, one on each, joined by such a link (the fabric's own cross links
        carry its switches' traffic, which the switches, not the link, limit).  Idle until teardown.

        Returns:
            dict: ``between``, ``link``, ``rtt_ms_min``, ``rtt_ms_avg`` (ping, 20 x 50 ms), ``rate_mbps``
            (iperf3, TCP, ``seconds``), ``how``; also kept in :meth:`cluster_summary`.

        Raises:
            EmulationError: a probe could not be made or measured (named).
        """
        remote = next(server for server in self.servers if not server.local)
        owner = os.environ.get(OWNER_ENV, str(os.getpid()))
        probes = [self._created(ClusterHost(name, server=server, owner=owner))
                  for name, server in zip(PROBE_NAMES, (self.servers[0], remote))]
        link = self._link_class(probes[0], probes[1])
        for probe, intf, address in zip(probes, (link.intf1, link.intf2), PROBE_ADDRESSES):
            output = probe.cmd(f"ip addr add {address} dev {intf.name} && ip link set dev {intf.name} mtu "
                               f"{HOST_MTU} up")
            if output.strip():
                raise EmulationError(f"cross-link probe {probe.name} on {probe.cluster_server.name}: {output.strip()}")
        peer = PROBE_ADDRESSES[1].split("/")[0]
        pinged = probes[0].cmd(f"ping -c {PROBE_PINGS} -i 0.05 -q -W 2 {peer}")
        rtt = re.search(r"= ([\d.]+)/([\d.]+)/", pinged)
        if rtt is None:
            raise EmulationError(f"cross-link probe to {remote.name}: ping failed: {pinged.strip()[-300:]}")
        listener = probes[1].popen(["iperf3", "-s", "-1", "-B", peer], stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
        try:
            report = None
            for _attempt in range(20):  # until the listener on the other server accepts
                output = probes[0].cmd(f"iperf3 -c {peer} -t {seconds:g} -J 2>&1")
                try:
                    report = json.loads(output[output.index("{"):])
                except ValueError:
                    report = None
                if report and "error" not in report:
                    break
                time.sleep(0.25)
            if not report or "error" in report:
                raise EmulationError(f"cross-link probe to {remote.name}: iperf3 failed: {output.strip()[-300:]}")
        finally:
            if listener.poll() is None:
                listener.kill()
            listener.wait()
        try:
            rate_mbps = round(float(report["end"]["sum_received"]["bits_per_second"]) / 1e6, 1)
        except (KeyError, TypeError, ValueError):
            raise EmulationError(f"cross-link probe to {remote.name}: iperf3 reported no received rate") from None
        self.cross_link_measured = {
            "between": [self.servers[0].name, remote.name], "link": self.link_kind,
            "rtt_ms_min": float(rtt.group(1)), "rtt_ms_avg": float(rtt.group(2)), "rate_mbps": rate_mbps,
            "how": f"ping {PROBE_PINGS} x 50 ms and iperf3 TCP {seconds:g} s between two probe namespaces "
                   f"joined by a {self.link_kind} link, while the fabric was up and idle"}
        return self.cross_link_measured


def remote_cleanup(server, owners, errors=None, include_running=True):
    """Run ``testbed cleanup --server-marks`` on ``server`` for ``owners``; errors appended (or raised)."""
    command = (f"{shlex.quote(server.interpreter)} -m testbed.cli cleanup --server-marks {shlex.quote(server.name)} "
               f"--owners {','.join(str(owner) for owner in owners)}")
    result = server.run(command, timeout=60)
    if result.returncode != 0:
        message = (f"server {server.name} ({server.address}): cleanup failed: "
                   f"{(result.stderr or result.stdout).strip() or 'ssh failed'} (`testbed cleanup --servers "
                   f"{server.name}` once it answers)")
        if errors is None:
            raise EmulationError(message)
        errors.append(message)
    return result.stdout
