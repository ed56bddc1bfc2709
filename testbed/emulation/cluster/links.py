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
"""
import itertools
import shlex
import threading

from mininet.examples.cluster import RemoteLink
from mininet.link import TCIntf

from testbed.emulation.cleanup import OWNER_ENV, SERVER_ENV
from testbed.emulation.cluster.servers import local_address_towards
from testbed.emulation.links import MAX_SHAPED_MBPS
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
    """Accepts the topology's link options (capacity) like the local FabricLink."""

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
            if not node.inNamespace:  # an end in a node's namespace goes with the namespace or its peer
                group = self.run_groups[node.cluster_server.name]
                _check(node, node.cmd(f"ip link set {intf.name} group {group}"), f"tagging {intf.name}")


class VxlanLink(_ClusterLink):
    """A link whose ends on different servers are joined by VXLAN."""

    def makeTunnel(self, node1, node2, intfname1, intfname2, addr1=None, addr2=None):
        """Make a VXLAN device on each end's server (moved into the node when it has a namespace)."""
        identifier = vni(self.run_owner, self.run_index())
        for node, name, addr, peer in ((node1, intfname1, addr1, node2), (node2, intfname2, addr2, node1)):
            local, remote = _server_address(node, peer), _server_address(peer, node)
            command = (f"ip link add {name}" + (f" address {addr}" if addr else "")
                       + f" type vxlan id {identifier} local {local} remote {remote} dstport {VXLAN_PORT} nolearning")
            _check(node, node.rcmd(command), f"VXLAN {name}")
            _move_into(node, name)
        self.vni = identifier
        return None  # no tunnel process: RemoteLink.status() and stop() see None


class SshTunnelLink(_ClusterLink):
    """A link whose ends on different servers are joined by an SSH Ethernet tunnel (``ssh -w``)."""

    def makeTunnel(self, node1, node2, intfname1, intfname2, addr1=None, addr2=None):
        """tap<N> on both servers, ``ssh -w N:N`` from node1's server, then each renamed to its port."""
        if not node1.cluster_server.local and node2.cluster_server.local:
            return self.makeTunnel(node2, node1, intfname2, intfname1, addr2, addr1)
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
