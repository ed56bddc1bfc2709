"""Link class for emulated fabrics."""
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
