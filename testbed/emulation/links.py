"""Link class for emulated fabrics, and setting a link's ends up or down at a known instant."""
import fcntl
import socket
import struct

from mininet.link import Link, TCIntf

# Mininet's htb shaping accepts at most this many Mbit/s.
MAX_SHAPED_MBPS = 1000


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
        **params: passed to :class:`mininet.link.Link`.
    """

    def __init__(self, node1, node2, port1=None, port2=None, capacity_mbps=None, shape=False, **params):
        self.capacity_mbps = capacity_mbps
        if shape and capacity_mbps:
            params["intf"] = TCIntf
            params["bw"] = min(float(capacity_mbps), MAX_SHAPED_MBPS)
        super().__init__(node1, node2, port1=port1, port2=port2, **params)


_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1


def set_interface_up(name, up):
    """Set the UP flag of interface ``name`` of this process's network namespace, at once.

    One ioctl (what ``ip link set dev NAME up|down`` does over netlink) instead of
    a shell command: the link fails within microseconds of the call, so a
    failure's recorded instant is the instant it happened.

    Raises:
        OSError: no such interface, or no privilege.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH", name.encode()[:15], 0)
        flags = struct.unpack("16sH", fcntl.ioctl(sock, _SIOCGIFFLAGS, request)[:18])[1]
        flags = flags | _IFF_UP if up else flags & ~_IFF_UP
        fcntl.ioctl(sock, _SIOCSIFFLAGS, struct.pack("16sH", name.encode()[:15], flags))


def set_link_ends(link, up):
    """Bring both ends of a Mininet link up or down, a switch end (in this namespace) first.

    A veth pair stops carrying frames as soon as one end is down, so the first
    end sets the instant; a switch's interfaces live in the root namespace and
    are set directly (:func:`set_interface_up`), a host's through its shell.
    """
    ends = sorted((link.intf1, link.intf2), key=lambda intf: intf.node.inNamespace)
    for intf in ends:
        if intf.node.inNamespace:
            intf.ifconfig("up" if up else "down")
        else:
            set_interface_up(intf.name, up)
