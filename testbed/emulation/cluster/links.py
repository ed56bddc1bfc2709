"""Links of a fabric over several servers: veth pairs within a server, VXLAN or SSH tunnels across.

Both kinds are cluster edition ``RemoteLink`` subclasses (a veth pair made on the
server when both ends are on one server), with its defects worked around:

* :class:`VxlanLink` (the default): each end is a VXLAN device on its own server
  (``ip link add <port> type vxlan id <vni> local <this server> remote <other server>``),
  its VNI unique in the run and tied to the owner; ``tunnel`` stays None, so
  ``RemoteLink.status()`` (which calls ``tunnel.poll()``) never meets a non-process;
* :class:`SshTunnelLink`: ``ssh -o Tunnel=ethernet -w N:N`` between tap devices whose
  number N is the link's VXLAN identifier (unique in the run and tied to its owner: the
  cluster edition always makes ``tap9``, so two tunnels or two runs collide), renamed to
  the switch port's name on both ends.  The remote command carries the run's marks and
  lives as long as its ssh connection (it reads the stdin the run holds): a tunnel ends
  with its run, even a killed one, on both servers (the cluster edition's ``echo @`` with
  ``-n`` leaves nothing to end it).

A link of a switch whose ports must never be set down (BMv2) is a *wire* on any servers
(:func:`make_wire`): its ports' veth pairs end in their servers' root namespaces, joined by
the kernel there (directly, or through a tunnel end of the run's kind), and a failure
sets those ends down.
"""
import itertools
import shlex
import threading

from mininet.examples.cluster import RemoteLink
from mininet.link import TCIntf

from testbed.emulation.cleanup import OWNER_ENV, SERVER_ENV
from testbed.emulation.cluster.servers import local_address_towards
from testbed.emulation.hosts import port_setup_commands
from testbed.emulation.links import MAX_SHAPED_MBPS
from testbed.emulation.namespaces import set_interface_up
from testbed.errors import EmulationError

VXLAN_PORT = 4789


def vni(owner, index):
    """The VXLAN network identifier of the run's ``index``-th cross-server link (24 bits).

    >>> vni(12345, 7) == ((12345 & 0xFFF) << 12) | 7
    True
    """
    return ((int(owner) & 0xFFF) << 12) | (int(index) & 0xFFF)


def _server_address(node, peer):
    """The address ``node``'s server sends tunnel traffic from, towards ``peer``'s server."""
    server = node.cluster_server
    if server.local:
        return local_address_towards(peer.cluster_server)
    return server.address


def _move_into(node, name):
    """Move a tunnel end made in the server's root namespace into a node with a namespace of its own."""
    if node.inNamespace:
        output = node.rcmd(f"ip link set {name} netns {node.pid}")
        if output.strip():
            raise EmulationError(f"{node.name}: moving {name} into its namespace: {output.strip()}")


def _check(node, output, what):
    if output.strip():
        raise EmulationError(f"{what} on server {node.cluster_server.name} for {node.name}: {output.strip()}")


def link_class(kind, owner, groups, tunnels, shape=False):
    """The Mininet link class of a run's links: ``"vxlan"`` or ``"ssh"`` across servers; its root-namespace
    ends go into ``groups[server name]``, its tunnel processes into the list ``tunnels`` (ended at teardown,
    see :func:`stop_tunnels`); with ``shape`` both ends of a link with a capacity are shaped to it (tc htb,
    as :class:`~testbed.emulation.links.FabricLink`)."""
    counter = itertools.count(1)
    lock = threading.Lock()

    def next_index():
        with lock:
            return next(counter)

    base = VxlanLink if kind == "vxlan" else SshTunnelLink

    class RunLink(base):
        """A link of this run (its tunnel numbers are unique in the run)."""

        run_owner = owner
        run_groups = groups
        run_tunnels = tunnels
        run_shape = shape
        run_index = staticmethod(next_index)

    return RunLink


class _ClusterLink(RemoteLink):
    """Accepts the topology's link options (capacity) like the local FabricLink; made as a wire when one of its
    nodes' ports must never be set down (BMv2, see :func:`make_wire`)."""

    run_owner = 0
    #: ``{server name: interface group}`` of the run (its interfaces are tagged as soon as they exist)
    run_groups = {}
    #: the run's tunnel processes, registered as soon as they start (a link that fails half-made included)
    run_tunnels = []
    run_shape = False

    def __init__(self, node1, node2, capacity_mbps=None, **params):
        self.capacity_mbps = capacity_mbps
        self.wire = None
        if self.run_shape and capacity_mbps:
            params.update(intf=TCIntf, bw=min(float(capacity_mbps), MAX_SHAPED_MBPS))
        super().__init__(node1, node2, **params)
        for intf in (self.intf1, self.intf2):
            node = intf.node
            if not node.inNamespace and not self.wire:  # an end in a namespace goes with it or its peer
                group = self.run_groups[node.cluster_server.name]
                _check(node, node.cmd(f"ip link set {intf.name} group {group}"), f"tagging {intf.name}")

    def makeIntfPair(self, intfname1, intfname2, addr1=None, addr2=None, node1=None, node2=None,
                     deleteIntfs=True):
        """As the cluster edition's (a veth pair on one server, a tunnel across), or a wire (:func:`make_wire`)."""
        node1, node2 = node1 or self.node1, node2 or self.node2
        if cut_in_wire(node1, node2):
            self.wire = make_wire(self, (node1, intfname1, addr1), (node2, intfname2, addr2))
            return None
        return super().makeIntfPair(intfname1, intfname2, addr1, addr2, node1, node2, deleteIntfs)

    def set_wire(self, up):
        """Cut (or mend) the wire: its sides down (up) on their servers, this machine's first (the instant)."""
        for server, side in sorted(self.wire, key=lambda end: not end[0].local):
            if server.local:
                set_interface_up(side, up)
                continue
            result = server.run_kept(f"ip link set dev {side} {'up' if up else 'down'}")
            if result.returncode != 0:
                raise EmulationError(f"wire side {side} on server {server.name}: {result.stdout.strip()}")


def cut_in_wire(*nodes):
    """True when a link between ``nodes`` is made as a wire: one of them must never have a port set down."""
    return any(getattr(node, "cut_in_wire", False) for node in nodes)


def make_wire(link, end1, end2):
    """Make ``link`` as a wire, as on one server (:mod:`testbed.emulation.links`), on any servers.

    Each end ``(node, port name, address)`` is a veth pair on its node's server: the port in the
    node, its *side* in the server's root namespace (in the run's interface group there).  The kernel
    copies frames between the two sides (tc ``mirred``) on one server; across servers, between each
    side and its end of a tunnel of the run's kind (also in the root namespace).  A failure sets the
    sides down: the ports lose their carrier and stay up.

    Returns:
        tuple: ``((server, side name), (server, side name))``.
    """
    number = vni(link.run_owner, link.run_index())
    ends = []
    for (node, name, addr), letter in ((end1, "a"), (end2, "b")):
        server, side = node.cluster_server, f"w{number:06x}{letter}"
        group = link.run_groups[server.name]
        port = f"name {name}" + (f" address {addr}" if addr else "") + (
            f" netns {node.pid}" if node.inNamespace else f" group {group}")
        _check(node, node.rcmd(f"ip link add {port} type veth peer name {side} group {group}"), f"wire end {name}")
        ends.append((node, server, side, group))
    (node1, server1, side1, group1), (node2, server2, side2, group2) = ends
    if server1.name == server2.name:
        pairs = {server1: [(side1, side2), (side2, side1)]}
        devices = {server1: [side1, side2]}
    else:
        middle1, middle2 = f"x{number:06x}a", f"x{number:06x}b"
        link.makeTunnel(node1, node2, middle1, middle2, into_nodes=False)
        for node, middle, group in ((node1, middle1, group1), (node2, middle2, group2)):
            _check(node, node.rcmd(f"ip link set {middle} group {group}"), f"tagging {middle}")
        pairs = {server1: [(side1, middle1), (middle1, side1)], server2: [(side2, middle2), (middle2, side2)]}
        devices = {server1: [side1, middle1], server2: [side2, middle2]}
    for server, mirrors in pairs.items():
        script = "; ".join([port_setup_commands(devices[server], up=True)] + [
            f"tc qdisc add dev {source} ingress && tc filter add dev {source} parent ffff: protocol all u32 "
            f"match u32 0 0 action mirred egress redirect dev {destination}" for source, destination in mirrors])
        result = server.run_kept(script)
        output = result.stdout.strip()
        if result.returncode != 0 or output:
            raise EmulationError(f"wire {side1} -- {side2} on server {server.name}: {output or 'failed'}")
    return (server1, side1), (server2, side2)


class VxlanLink(_ClusterLink):
    """A link whose ends on different servers are joined by VXLAN."""

    def makeTunnel(self, node1, node2, intfname1, intfname2, addr1=None, addr2=None, into_nodes=True):
        """Make a VXLAN device on each end's server (moved into the node when it has a namespace and
        ``into_nodes``; else left in the server's root namespace, as a wire's middle)."""
        identifier = vni(self.run_owner, self.run_index())
        for node, name, addr, peer in ((node1, intfname1, addr1, node2), (node2, intfname2, addr2, node1)):
            local, remote = _server_address(node, peer), _server_address(peer, node)
            command = (f"ip link add {name}" + (f" address {addr}" if addr else "")
                       + f" type vxlan id {identifier} local {local} remote {remote} dstport {VXLAN_PORT} nolearning")
            _check(node, node.rcmd(command), f"VXLAN {name}")
            if into_nodes:
                _move_into(node, name)
        self.vni = identifier
        return None  # no tunnel process: RemoteLink.status() and stop() see None


class SshTunnelLink(_ClusterLink):
    """A link whose ends on different servers are joined by an SSH Ethernet tunnel (``ssh -w``)."""

    def makeTunnel(self, node1, node2, intfname1, intfname2, addr1=None, addr2=None, into_nodes=True):
        """tap<N> on both servers, ``ssh -w N:N`` from node1's server, then each renamed to its port (and
        moved into its node as VxlanLink's)."""
        if not node1.cluster_server.local and node2.cluster_server.local:
            return self.makeTunnel(node2, node1, intfname2, intfname1, addr2, addr1, into_nodes)
        number = vni(self.run_owner, self.run_index())
        tap = f"tap{number}"
        made = []
        try:
            for node in (node1, node2):
                _check(node, node.rcmd(f"ip tuntap add dev {tap} mode tap"), f"tap {tap}")
                made.append(node)
            server = node2.cluster_server
            marks = shlex.join(["env", f"{OWNER_ENV}={self.run_owner}", f"{SERVER_ENV}={server.name}",
                                "sh", "-c", "echo @; exec cat >/dev/null"])
            argv = server.ssh_argv()
            argv[-1:] = ["-o", "Tunnel=ethernet", "-w", f"{number}:{number}", argv[-1], marks]
            tunnel = node1.rpopen(argv, sudo=False)  # stdin a pipe this run holds: its end ends the tunnel
            self.run_tunnels.append(tunnel)
            ready = tunnel.stdout.read(1)
            if ready != b"@":
                stop_tunnels([tunnel])
                raise EmulationError(f"SSH tunnel {tap} to server {server.name} ({server.address}) did not come "
                                     f"up: {(ready + tunnel.stdout.read()).decode(errors='replace').strip()}")
            for node, name, addr in ((node1, intfname1, addr1), (node2, intfname2, addr2)):
                command = f"ip link set {tap} name {name}" + (f" address {addr}" if addr else "")
                _check(node, node.rcmd(command), f"renaming {tap} to {name}")
                made.remove(node)
                if into_nodes:
                    _move_into(node, name)
        except BaseException:
            for node in made:
                node.rcmd(f"ip link del {tap}")
            raise
        self.cmd = argv
        return tunnel


def stop_tunnels(tunnels):
    """End the ssh processes of a run's tunnels or server watches, emptying the list (the tunnels' tap
    devices, in the run's interface groups, go with the groups)."""
    while tunnels:
        tunnel = tunnels.pop()
        if tunnel.poll() is None:
            tunnel.terminate()
            try:
                tunnel.wait(timeout=5)
            except Exception:  # noqa: BLE001 - a tunnel that does not end is killed
                tunnel.kill()
                tunnel.wait()
        for stream in (tunnel.stdin, tunnel.stdout, tunnel.stderr):
            if stream is not None:
                stream.close()
