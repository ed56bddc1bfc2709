"""Link loads and ToR-to-ToR flows of one rescheduling epoch, from per-port byte counters.

p4src/f10.p4 counts the data frames every port sends (``MyEgress.egress_port_counter``,
packets and bytes; probes and triggers are not counted).  It has no per-flow
counter: ``ipv4_lpm`` has no direct counter and its entries are per destination,
not per flow, so the rescheduler works from the per-port counters:

* **Link load**: what a switch sent on a fabric port (a port toward another
  switch) during the epoch, over the epoch's length, is the load of that link in
  that direction, in Mbit/s.
* **ToR-to-ToR flows**: F10 schedules the predictable ToR-to-ToR traffic
  (seed 002, section 6.2, after MicroTE).  A ToR (a switch with hosts) sends into
  the fabric what its fabric ports sent, and receives from it what its
  neighbours sent to it; the traffic matrix between ToRs is estimated with the
  gravity model: ToR ``s`` sends to ``d`` in proportion to what ``d`` receives,
  among the ToRs other than ``s``::

      rate(s, d) = sent(s) * received(d) / sum(received(x) for every ToR x != s)

  This is exact for uniform all-to-all traffic and an estimate otherwise.
  Detour traffic that passes through a ToR (F10's Scheme 2) counts as that ToR's.
  Traffic between two hosts of one ToR never reaches a fabric port and is not
  part of any flow.

A ToR-to-ToR flow is placed as a flow between the first host (by name) of each
ToR: the scheduler places host-to-host paths, and every host of a ToR shares
the ToR's fabric paths.
"""
from testbed.controllers.te import Flow
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


def tors(graph):
    """``{ToR: its first host by name}`` for every switch with hosts."""
    first = {}
    for host in sorted(n for n in graph.nodes if is_host(graph, n)):
        for tor in graph.neighbors(host):
            first.setdefault(tor, host)
    return first


def tor_flows(graph, loads):
    """ToR-to-ToR flows estimated from directed link loads (gravity model, see the module text).

    Args:
        graph: the topology multigraph.
        loads: ``{(link id, sending switch): Mbit/s}`` (:func:`link_loads`).

    Returns:
        list: :class:`testbed.controllers.te.Flow` named ``"<ToR>-><ToR>"`` between the
        ToRs' first hosts, rate in Mbit/s (pairs of rate 0 are left out).

    >>> from testbed.topologies.registry import make_topology
    >>> g = make_topology("clos", leaves=3, spines=1, hosts_per_leaf=1).graph()
    >>> up = {(link, sender): 0.0 for (link, sender) in [((f"leaf{i}", 2, "spine0", i + 1), s)
    ...       for i in range(3) for s in (f"leaf{i}", "spine0")]}
    >>> up[(("leaf0", 2, "spine0", 1), "leaf0")] = 30.0           # leaf0 sends 30
    >>> up[(("leaf1", 2, "spine0", 2), "spine0")] = 10.0          # leaf1 receives 10
    >>> up[(("leaf2", 2, "spine0", 3), "spine0")] = 20.0          # leaf2 receives 20
    >>> [(f.name, f.src, f.dst, f.rate) for f in tor_flows(g, up)]
    [('leaf0->leaf1', 'h1', 'h2', 10.0), ('leaf0->leaf2', 'h1', 'h3', 20.0)]
    """
    first = tors(graph)
    sent = dict.fromkeys(first, 0.0)
    received = dict.fromkeys(first, 0.0)
    receiver_of = {(ident, here): there for here, ports in fabric_ports(graph).items()
                   for ident, there in ports.values()}
    for (ident, sender), mbps in loads.items():
        receiver = receiver_of[(ident, sender)]
        if sender in sent:
            sent[sender] += mbps
        if receiver in received:
            received[receiver] += mbps
    flows = []
    for src in sorted(first):
        others = sum(received[dst] for dst in first if dst != src)
        for dst in sorted(first):
            rate = sent[src] * received[dst] / others if dst != src and others > 0 else 0.0
            if rate > 0:
                flows.append(Flow(f"{src}->{dst}", first[src], first[dst], rate))
    return flows
