"""Centralized traffic engineering: greedy placement of known flows on shortest paths.

The TE engine of seed 004 section 4.3, reduced to its core: given the
topology and the known flows with their rates, place every flow on one of
its equal-cost shortest paths, largest flow first, each time choosing the
path whose most loaded link would be least loaded once the flow is added.
A link's load is the sum of the rates placed on it divided by its capacity,
per direction (links are full duplex).  The result is a set of pinned
entries per switch (flow -> egress port) that a controller writes into an
exact-match table; traffic of flows without an entry falls back to ECMP.

Pure functions on the topology multigraph (see
:mod:`testbed.controllers.routing`); no networking, so it is unit-testable::

    placement = place_flows(topo.graph(), [Flow("f1", "h1", "h3", 40.0)])
    placement.entries["leaf0"]   # [PinnedEntry(flow=Flow(...), switch="leaf0", port=3)]
"""
from dataclasses import dataclass, field
from typing import Dict, List, Tuple

from testbed.controllers.routing import hop_distances
from testbed.errors import ParameterError
from testbed.topologies.graph import is_host, link_id, port_toward, usable_links

DEFAULT_CAPACITY_MBPS = 1000.0


@dataclass(frozen=True)
class Flow:
    """A known flow to place.

    Attributes:
        name: unique name of the flow (used in logs and results).
        src: source host (a node of the topology).
        dst: destination host.
        rate: demand, in the unit of the links' ``capacity_mbps`` (Mbit/s).
        match: extra exact-match values that identify the flow in the data
            plane beyond its addresses, as ``((logical name, value), ...)``
            (e.g. ``(("udp_sport", 49152),)``); the controller maps the
            logical names to P4 field names.
    """

    name: str
    src: str
    dst: str
    rate: float
    match: Tuple[Tuple[str, object], ...] = ()

    @classmethod
    def from_dict(cls, data):
        """Build a flow from a JSON-like dict.

        Args:
            data: ``{"name", "src", "dst", "rate", optional "match": {name: value}}``.

        Raises:
            ParameterError: a required key is missing or the rate is not a positive number.
        """
        for key in ("name", "src", "dst", "rate"):
            if key not in data:
                raise ParameterError(f"flow.{key}", None, "a value", "every flow needs name, src, dst, rate")
        try:
            rate = float(data["rate"])
        except (TypeError, ValueError):
            raise ParameterError("flow.rate", data["rate"], "a positive number") from None
        if rate <= 0:
            raise ParameterError("flow.rate", data["rate"], "a positive number")
        match = tuple(sorted((data.get("match") or {}).items()))
        return cls(str(data["name"]), str(data["src"]), str(data["dst"]), rate, match)


@dataclass(frozen=True)
class Hop:
    """One hop of a path: leave ``node`` by ``port`` over link ``link`` to ``next_node``."""

    node: str
    port: int
    next_node: str
    link: tuple  # graph.link_id of the link


@dataclass(frozen=True)
class PinnedEntry:
    """An exact-match entry: on ``switch``, send ``flow`` out of ``port``."""

    flow: Flow
    switch: str
    port: int


@dataclass
class Placement:
    """The result of :func:`place_flows`.

    Attributes:
        paths: ``{flow name: [Hop, ...]}`` from the source host to the destination host.
        entries: ``{switch: [PinnedEntry, ...]}`` in placement order.
        link_load: ``{(link id, from node): utilization}`` (placed rate / capacity).
        unplaced: names of flows with no path (unknown hosts or disconnected).
    """

    paths: Dict[str, List[Hop]] = field(default_factory=dict)
    entries: Dict[str, List[PinnedEntry]] = field(default_factory=dict)
    link_load: Dict[tuple, float] = field(default_factory=dict)
    unplaced: List[str] = field(default_factory=list)

    def max_load(self):
        """The highest link utilization (0.0 when nothing is placed)."""
        return max(self.link_load.values(), default=0.0)


def _capacity(data):
    capacity = data.get("capacity_mbps") or DEFAULT_CAPACITY_MBPS
    return float(capacity)


def shortest_paths(graph, src, dst, failed_links=()):
    """Enumerate every equal-cost shortest path from host ``src`` to host ``dst``.

    Parallel links are distinct paths.  Paths are returned in a deterministic
    order (sorted by their sequence of ``(node, port)``).

    Args:
        graph: the topology multigraph.
        src: source node.
        dst: destination node.
        failed_links: links that are down (see :func:`testbed.topologies.graph.usable_links`).

    Returns:
        list: paths, each a list of :class:`Hop`; empty if ``dst`` is unreachable.
    """
    distances = hop_distances(graph, dst, failed_links)
    if src not in distances or src == dst:
        return []
    out_links = {}
    for u, v, data in usable_links(graph, failed_links):
        for here, there in ((u, v), (v, u)):
            if distances.get(here) is not None and distances.get(there) == distances[here] - 1:
                out_links.setdefault(here, []).append(
                    Hop(here, port_toward(data, here), there, link_id(data)))
    paths = []

    def extend(prefix, node):
        if node == dst:
            paths.append(list(prefix))
            return
        if prefix and is_host(graph, node):
            return  # hosts never forward
        for hop in sorted(out_links.get(node, ()), key=lambda h: (h.port, h.next_node)):
            prefix.append(hop)
            extend(prefix, hop.next_node)
            prefix.pop()

    extend([], src)
    return paths


def _link_capacities(graph):
    return {link_id(data): _capacity(data) for _, _, data in graph.edges(data=True)}


def place_flows(graph, flows, failed_links=(), initial_load=None):
    """Place flows greedily, largest first, each on its least-loaded shortest path.

    The cost of a candidate path is the utilization its busiest link would
    have with the flow added; ties go to the path whose links carry the
    least total utilization, then to the first path in
    :func:`shortest_paths` order, so the result is deterministic.

    Args:
        graph: the topology multigraph.
        flows: iterable of :class:`Flow` (or dicts accepted by :meth:`Flow.from_dict`).
        failed_links: links that are down.
        initial_load: optional ``{(link id, from node): utilization}`` of
            traffic already on the links (e.g. measured background load).

    Returns:
        Placement: paths, per-switch pinned entries, link loads, unplaced flows.

    Raises:
        ParameterError: two flows share a name.
    """
    flows = [flow if isinstance(flow, Flow) else Flow.from_dict(flow) for flow in flows]
    names = [flow.name for flow in flows]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ParameterError("flow.name", duplicates[0], "unique flow names")
    capacities = _link_capacities(graph)
    placement = Placement(link_load=dict(initial_load or {}))
    load = placement.link_load
    order = sorted(flows, key=lambda flow: (-flow.rate, flow.name))
    for flow in order:
        if flow.src not in graph or flow.dst not in graph:
            placement.unplaced.append(flow.name)
            continue
        candidates = shortest_paths(graph, flow.src, flow.dst, failed_links)
        if not candidates:
            placement.unplaced.append(flow.name)
            continue

        def cost(path):
            after = [load.get((hop.link, hop.node), 0.0) + flow.rate / capacities[hop.link] for hop in path]
            return (max(after), sum(after))

        best = min(candidates, key=cost)  # min keeps the first of equal costs
        for hop in best:
            key = (hop.link, hop.node)
            load[key] = load.get(key, 0.0) + flow.rate / capacities[hop.link]
            if not is_host(graph, hop.node):
                placement.entries.setdefault(hop.node, []).append(PinnedEntry(flow, hop.node, hop.port))
        placement.paths[flow.name] = best
    return placement


def path_nodes(path):
    """The node names along a path of :class:`Hop` (source to destination)."""
    if not path:
        return []
    return [hop.node for hop in path] + [path[-1].next_node]


def spine_link_loads(placement, graph, role_a="leaf", role_b="spine"):
    """Return the utilizations of the links between two roles (default leaf-spine), both directions.

    Args:
        placement: a :class:`Placement`.
        graph: the topology multigraph.
        role_a: role of one end.
        role_b: role of the other end.

    Returns:
        dict: ``{(link id, from node): utilization}`` including links with no load (0.0).
    """
    loads = {}
    for u, v, data in graph.edges(data=True):
        roles = {graph.nodes[u].get("role"), graph.nodes[v].get("role")}
        if roles != {role_a, role_b}:
            continue
        ident = link_id(data)
        for end in (u, v):
            loads[(ident, end)] = placement.link_load.get((ident, end), 0.0)
    return loads

