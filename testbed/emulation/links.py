"""Links of emulated fabrics: veth pairs made and removed in batches, and set up or down at a known instant.

Mininet makes a link with three shell commands (``ip link add`` and one
``ifconfig up`` per end), 1,150 round trips for the 384 links of a k=8
FatTree.  Here :class:`FabricLink` objects only describe their veth pair
while the network is built; :class:`LinkBatch` then creates every pair with
one ``ip -batch`` (each end placed straight into its node's namespace, the
root-namespace ends tagged with the network's interface group), turns IPv6
and offloads off on the root-namespace (switch) ends with system calls
(:mod:`testbed.emulation.interfaces`), and sets them up with a second batch.
Teardown removes every pair with one ``ip link del group N``, which the kernel
does as a single batch (a namespace end goes with its peer).  Namespace
(host) ends are configured and set up by their host
(:class:`testbed.emulation.hosts.FabricHost`).

**Wires.**  A switch whose ports must never be set down (``cut_in_wire``:
BMv2, which reads every port in one thread with blocking libpcap handles, so
that one interface set down stops the whole switch until it is up again) gets
each of its links as a *wire*: each end is a veth pair of its own, whose
other side lies in the root namespace, and the kernel copies every frame
between those two sides (a tc ``mirred`` redirect on each side's ingress).  A
link failure then cuts the wire (:func:`set_link_ends` sets its two root-side
interfaces down): both switch ports lose their carrier, as on a cable pulled
out, and stay administratively up.
"""
import subprocess

from mininet.link import Intf, Link, TCIntf

from testbed.emulation.cleanup import OWNER_GROUP_SLOTS, mark_owner, owner_interface_group
from testbed.emulation.interfaces import disable_ipv6, disable_offloads
from testbed.emulation.namespaces import set_interface_up
from testbed.emulation.parallel import for_each
from testbed.errors import EmulationError

# Mininet's htb shaping accepts at most this many Mbit/s.
MAX_SHAPED_MBPS = 1000
# shaped interfaces configured at once (each runs tc in its node's shell)
SHAPING_WORKERS = 16


def tc_batch(lines):
    """Run ``tc -batch -`` in this process's namespace with ``lines``.

    Raises:
        EmulationError: a line failed (tc's message).
    """
    result = subprocess.run(["tc", "-batch", "-"], input="\n".join(lines) + "\n", capture_output=True, text=True,
                            check=False)
    if result.returncode != 0:
        raise EmulationError(f"tc -batch: {result.stderr.strip()}")
    return result


def ip_batch(lines, force=False):
    """Run ``ip -batch -`` in this process's namespace with ``lines``.

    Args:
        lines: ``ip`` commands without the leading ``ip``.
        force: go on after a failed line (``ip -force``).

    Raises:
        EmulationError: a line failed (ip's message, with the line number).
    """
    argv = ["ip"] + (["-force"] if force else []) + ["-batch", "-"]
    result = subprocess.run(argv, input="\n".join(lines) + "\n", capture_output=True, text=True, check=False)
    if result.returncode != 0 and not force:
        raise EmulationError(f"ip -batch: {result.stderr.strip()}")
    return result


class _CreatedLater:
    """Mixin of interface classes whose veth pair :class:`LinkBatch` creates after the object.

    Mininet configures an interface in its constructor; here that waits until
    the pair exists (:meth:`configure`).
    """

    created = False
    pending_config = None

    def config(self, **params):
        """Keep ``params`` until the interface exists; then configure as the base class does."""
        if self.created:
            return super().config(**params)
        self.pending_config = params
        return {}

    def configure(self):
        """Apply the configuration kept by :meth:`config` (the pair now exists)."""
        self.created = True
        return self.config(**(self.pending_config or {}))


#: the most frames a shaped link end may queue (``queue_frames``)
MAX_QUEUE_FRAMES = 100_000


def queue_command(interface, frames):
    """The ``tc`` command giving a shaped interface (Mininet's htb class 5:1) a tail-drop queue of ``frames``.

    Without it the class queues ``txqueuelen`` frames (1,000 on a veth): seconds of traffic at the
    few Mbit/s links run at here, far deeper than a switch port's buffer.

    >>> queue_command("s1-eth1", 64)
    'tc qdisc replace dev s1-eth1 parent 5:1 handle 10: pfifo limit 64'
    """
    return f"tc qdisc replace dev {interface} parent 5:1 handle 10: pfifo limit {int(frames)}"


def set_queue_frames(ends, frames):
    """Give each shaped ``(node, interface name)`` of ``ends`` a tail-drop queue of ``frames`` frames.

    Raises:
        EmulationError: tc refused (its message, with the interface).
    """
    for node, name in ends:
        output = node.cmd(queue_command(name, frames))
        if output.strip():
            raise EmulationError(f"tc on {name}: {output.strip()}")


class BatchedIntf(_CreatedLater, Intf):
    """A plain interface made by :class:`LinkBatch` (set up by the batch or its host; nothing else to do)."""


class BatchedTCIntf(_CreatedLater, TCIntf):
    """A tc-shaped interface made by :class:`LinkBatch` (shaped once the pair exists)."""


class FabricLink(Link):
    """A veth pair carrying the topology's ``capacity_mbps``.

    With ``shape=True`` both ends are shaped to the capacity with tc htb
    (the kernel here has htb but no netem, so delay and loss are emulated
    inside the switches, not here).  Without shaping the capacity is only
    recorded; P4 switches enforce it in their egress queues.

    Args:
        node1, node2, port1, port2: as :class:`mininet.link.Link`.
        capacity_mbps: the link's capacity from the topology.
        shape: shape with htb (capacities above 1000 Mbit/s are capped).
        queue_frames: with ``shape``, the frames each end may queue (None: the veth's 1,000).
        batch: a :class:`LinkBatch` that creates the veth pair later (with the
            network's other links); None: created now, as Mininet does.
        **params: passed to :class:`mininet.link.Link`.
    """

    def __init__(self, node1, node2, port1=None, port2=None, capacity_mbps=None, shape=False, batch=None,
                 queue_frames=None, **params):
        self.capacity_mbps = capacity_mbps
        self.batch = batch
        self.wire = None  # the root-side interfaces of its wire, once made as one (LinkBatch.create)
        shaped = bool(shape and capacity_mbps)
        self.queue_frames = queue_frames if shaped else None
        if shaped:
            params["bw"] = min(float(capacity_mbps), MAX_SHAPED_MBPS)
        if batch is not None:
            params["intf"] = BatchedTCIntf if shaped else BatchedIntf
        elif shaped:
            params["intf"] = TCIntf
        super().__init__(node1, node2, port1=port1, port2=port2, **params)
        if batch is not None:
            batch.links.append(self)

    def makeIntfPair(self, intfname1, intfname2, addr1=None, addr2=None, node1=None, node2=None,
                     deleteIntfs=True):
        """Create the veth pair now, or remember it for the batch."""
        if self.batch is None:
            return Link.makeIntfPair(intfname1, intfname2, addr1, addr2, node1, node2, deleteIntfs)
        return None


def cut_in_wire(link):
    """True when the link is made as a wire: one of its nodes' ports must never be set down."""
    return any(getattr(intf.node, "cut_in_wire", False) for intf in (link.intf1, link.intf2))


def _mirror(source, destination):
    """The ``tc -batch`` lines copying every frame arriving on ``source`` to ``destination`` (a wire's half)."""
    return [f"qdisc add dev {source} ingress",
            f"filter add dev {source} parent ffff: protocol all u32 match u32 0 0 "
            f"action mirred egress redirect dev {destination}"]


def _end(intf, group):
    """The ``ip link add`` words of one end of a pair: name, address, namespace or group."""
    words = [f"name {intf.name}"]
    if intf.mac:
        words.append(f"address {intf.mac}")
    words.append(f"netns {intf.node.pid}" if intf.node.inNamespace else f"group {group}")
    return " ".join(words)


def unused_interface_group():
    """An interface group no interface uses yet, encoding this network's owner (:func:`owner_interface_group`).

    ``testbed cleanup`` tells the testbed's interfaces, and whose they are, by this group.

    Raises:
        EmulationError: the owner already has 255 networks' interfaces on the machine.
    """
    owner = mark_owner()
    for slot in range(1, OWNER_GROUP_SLOTS + 1):
        group = owner_interface_group(owner, slot)
        shown = subprocess.run(["ip", "-o", "link", "show", "group", str(group)], capture_output=True, text=True,
                               check=False)
        if shown.returncode == 0 and not shown.stdout.strip():
            return group
    raise EmulationError(f"process {owner} has {OWNER_GROUP_SLOTS} networks' interfaces already: "
                         "run `testbed cleanup`")


class LinkBatch:
    """Creates the veth pairs of a network's :class:`FabricLink` objects at once, and removes them at once.

    Args:
        group: the interface group of the network's root-namespace ends (not 0);
            default: an unused one.

    Attributes:
        links: the links to create (filled by :class:`FabricLink`).
        created: True once :meth:`create` made the pairs.
    """

    def __init__(self, group=None):
        self.group = group if group is not None else unused_interface_group()
        if not self.group:
            raise EmulationError("the links' interface group must not be 0 (every interface is in group 0)")
        self.links = []
        self.created = False

    def root_interfaces(self):
        """Names of the links' ends in the root namespace (switch ports, and the wires' sides)."""
        names = []
        for link in self.links:
            names += [intf.name for intf in (link.intf1, link.intf2) if not intf.node.inNamespace]
            names += list(getattr(link, "wire", None) or ())
        return names

    def _wire_names(self, index):
        """The two root-side interfaces of link ``index``'s wire (unique per network: its group in hex)."""
        return f"w{self.group:08x}{index:03x}a", f"w{self.group:08x}{index:03x}b"

    def create(self):
        """Create every pair, turn IPv6 and offloads off on the root ends, set them up, shape what is shaped.

        Returns:
            int: the number of links.

        Raises:
            EmulationError: ``ip`` or ``tc`` refused a pair (for example an interface name in use).
        """
        self.created = True  # from here on, teardown removes the group whatever happened
        lines, mirrors = [], []
        for index, link in enumerate(self.links):
            if not cut_in_wire(link):
                lines.append(f"link add {_end(link.intf1, self.group)} type veth peer {_end(link.intf2, self.group)}")
                continue
            link.wire = self._wire_names(index)
            for intf, side in zip((link.intf1, link.intf2), link.wire):
                lines.append(f"link add {_end(intf, self.group)} type veth peer name {side} group {self.group}")
            mirrors += _mirror(link.wire[0], link.wire[1]) + _mirror(link.wire[1], link.wire[0])
        ip_batch(lines)
        root = self.root_interfaces()
        for name in root:
            disable_ipv6(name)
            disable_offloads(name)
        ip_batch([f"link set dev {name} up" for name in root])
        if mirrors:
            tc_batch(mirrors)
        for link in self.links:
            for intf in (link.intf1, link.intf2):
                intf.created = True
        self._shape()
        return len(self.links)

    def _shape(self):
        """Configure the shaped interfaces (tc in each node's shell; a node's interfaces one after another)."""
        by_node = {}
        for link in self.links:
            for intf in (link.intf1, link.intf2):
                if isinstance(intf, BatchedTCIntf):
                    by_node.setdefault(intf.node, []).append((intf, link.queue_frames))

        def shape(node):
            for intf, queue_frames in by_node[node]:
                intf.configure()
                if queue_frames:
                    set_queue_frames([(node, intf.name)], queue_frames)

        for_each(list(by_node), shape, SHAPING_WORKERS, name="shape")

    def remove(self):
        """Remove every pair that has a root-namespace end (one kernel batch); safe to call twice.

        Returns:
            list: names of root-namespace ends still there afterwards (normally none).
        """
        if not self.created:
            return []
        subprocess.run(["ip", "link", "del", "group", str(self.group)], capture_output=True, check=False)
        left = subprocess.run(["ip", "-o", "link", "show", "group", str(self.group)], capture_output=True,
                              text=True, check=False).stdout
        names = [line.split(":", 2)[1].strip().split("@", 1)[0] for line in left.splitlines() if ":" in line]
        if names:
            ip_batch([f"link del dev {name}" for name in names], force=True)
        self.created = False
        return names


def set_link_ends(link, up):
    """Bring a Mininet link up or down: both its ends, or both sides of its wire.

    A veth pair stops carrying frames as soon as one end is down, so the first
    end sets the instant; an end in the root namespace is set with one ioctl
    (:func:`testbed.emulation.namespaces.set_interface_up`), a host's through
    its shell.  A wire's sides are both in the root namespace: the switch ports
    lose their carrier and stay up.
    """
    wire = getattr(link, "wire", None)
    if wire:
        for name in wire:
            set_interface_up(name, up)
        return
    ends = sorted((link.intf1, link.intf2), key=lambda intf: intf.node.inNamespace)
    for intf in ends:
        if intf.node.inNamespace:
            intf.ifconfig("up" if up else "down")
        else:
            set_interface_up(intf.name, up)
