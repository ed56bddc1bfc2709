"""Link loads of one rescheduling epoch, from per-port byte counters.

p4src/f10.p4 counts the data frames every port sends (``MyEgress.egress_port_counter``,
packets and bytes; probes and triggers are not counted).  What a switch sent on a
fabric port (a port toward another switch) during the epoch, over the epoch's
length, is the load of that link in that direction, in Mbit/s.  The rescheduler
records these loads with every epoch; the flows it places are measured per host
pair (:mod:`testbed.controllers.f10.scheduled_flows`).
"""
from testbed.errors import ParameterError
from testbed.topologies.graph import is_host, link_id, port_toward


def fabric_ports(graph):
    """The ports of every switch that face other switches.

    Args:
        graph: the topology multigraph.

    Returns:
        dict: ``{switch: {port: (link id, neighbour)}}``.
    """
    ports = {}
    for u, v, data in graph.edges(data=True):
        if is_host(graph, u) or is_host(graph, v):
            continue
        for here, there in ((u, v), (v, u)):
            ports.setdefault(here, {})[port_toward(data, here)] = (link_id(data), there)
    return ports


def link_loads(graph, before, after, seconds):
    """Load of every directed fabric link between two counter snapshots.

    Args:
        graph: the topology multigraph.
        before, after: ``{switch: {port: bytes sent}}`` (egress byte counters).
        seconds: time between the two snapshots.

    Returns:
        dict: ``{(link id, sending switch): Mbit/s}`` for the links whose sender was
        read in both snapshots; a counter that went backwards (the switch was
        reprogrammed) gives no value.

    Raises:
        ParameterError: ``seconds`` is not positive.

    >>> from testbed.topologies.registry import make_topology
    >>> g = make_topology("clos", leaves=2, spines=2, hosts_per_leaf=1).graph()
    >>> link_loads(g, {"leaf0": {2: 0}}, {"leaf0": {2: 1_250_000}}, 1.0)
    {(Link(a='leaf0', a_port=2, b='spine0', b_port=1), 'leaf0'): 10.0}
    """
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds > 0:
        raise ParameterError("seconds", seconds, "a time > 0 between two counter readings")
    loads = {}
    for switch, ports in fabric_ports(graph).items():
        old, new = before.get(switch), after.get(switch)
        if old is None or new is None:
            continue
        for port, (ident, _) in ports.items():
            if port in old and port in new and new[port] >= old[port]:
                loads[(ident, switch)] = (new[port] - old[port]) * 8 / seconds / 1e6
    return loads

