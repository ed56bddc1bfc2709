"""F10's epoch rescheduler: greedy flow placement and weighted-ECMP weights (seed 002, sections 5.3, 6.1, 6.2).

Pure functions on the topology multigraph (``topo.graph()``: host nodes have
role ``"host"``; links carry ``a``, ``a_port``, ``b``, ``b_port`` and
``capacity_mbps``).  The os-ken app (:mod:`testbed.controllers.f10.rescheduler_app`)
measures the flows of the last epoch, places them (:func:`place_flows_greedy`,
then :func:`improve_placement`), pins the placed flows and writes the weights of
:func:`ecmp_weights` as P4Runtime action-selector member weights;
:func:`schedule_epoch` is the same epoch as one function.

What the paper fixes, and how it is read here:

* **Placement** (6.2): flows sorted from largest to smallest, each placed on
  the path of least cost ``sum over e in P of 1 / R(e)``, ``R(e)`` the
  remaining capacity of link ``e`` in the direction the flow uses it (links
  are full duplex) before this flow is placed; placing it subtracts its rate.
* **Improvement** (not in the paper, which leaves the algorithm open: "the
  exact choice of algorithm is orthogonal to our work"; 5.3 states the aim,
  to "minimize the maximum traffic across any link"): after the greedy pass,
  :func:`improve_placement` moves single flows to a cheaper path while one
  exists, so a flow the greedy order left sharing a link it need not share
  moves off it.
* **Only shortest paths** (5.3): a flow's candidates are the paths of the
  failure-free shortest length that use no failed link and no link held down
  after recovery.  A flow with no such path is left *unplaced*: it keeps its
  locally rerouted path, as the text says.
* **R(e) <= 0** (not covered by the paper: ``1/R`` is undefined there): such a
  link costs more than any sum of finite terms, as ``1/R -> infinity`` when
  ``R -> 0+``.  Paths compare by (number of links with ``R <= 0``, total
  overdraft ``-R`` on them, ``sum 1/R`` over the other links), so a flow goes
  over saturated links only when every candidate does, and then where the
  overdraft is smallest.  Residuals may go negative (overcommitment is shown,
  not hidden).
* **Ties** go to the first candidate in the deterministic order of
  :func:`testbed.controllers.te.shortest_paths` (by egress ports).
* **Recovered links** (5.3, 6.1): a link held down is never a placement
  candidate and its residual capacity is 0, as "new links have an initial
  residual capacity of zero".
* **Weighted ECMP** (6.1): for every switch and destination host, the
  shortest-path next hops over working links (held-down ones included) get
  integer weights proportional to the residual capacity of the link to them,
  the largest scaled to ``max_weight``, each positive residual rounded to at
  least 1.  A next hop with ``R <= 0`` gets no weight (it is left out of the
  group: P4Runtime has no weight 0, an unset weight means 1).  If no next hop
  has positive residual, all next hops that are not held down get weight 1
  ("placed across some non-failed link with equal probability"); if every
  next hop is held down, they all get weight 1 (connectivity before stability).
"""
import math
from dataclasses import dataclass, field
from typing import Dict, List

from testbed.controllers.routing import hop_distances
from testbed.controllers.te import Flow, shortest_paths
from testbed.errors import ParameterError
from testbed.topologies.graph import is_host, link_id, port_toward, usable_links

DEFAULT_MAX_WEIGHT = 16
DEFAULT_IMPROVE_ROUNDS = 4  # passes of improve_placement; each moves every flow at most once


@dataclass
class Schedule:
    """The result of :func:`schedule_epoch`.

    Attributes:
        paths: ``{flow name: [Hop, ...]}`` (see :class:`testbed.controllers.te.Hop`)
            for every placed flow, source host to destination host.
        order: flow names in placement order (largest first).
        unplaced: names of flows with no usable shortest path.
        residual: ``{(link id, from node): Mbit/s}`` remaining capacity of every
            working link in each direction (0 for held-down links; negative when
            overcommitted).
        weights: ``{switch: {destination host: {egress port: weight}}}``.
    """

    paths: Dict[str, list] = field(default_factory=dict)
    order: List[str] = field(default_factory=list)
    unplaced: List[str] = field(default_factory=list)
    residual: Dict[tuple, float] = field(default_factory=dict)
    weights: Dict[str, Dict[str, Dict[int, int]]] = field(default_factory=dict)


def link_ids(graph, links, field_name="failed_links"):
    """Link ids (:func:`testbed.topologies.graph.link_id`) of links given as ``(a, b)``, ``(a, b, key)`` or ids.

    ``(a, b)`` means every parallel link between ``a`` and ``b``.

    Args:
        graph: the topology multigraph.
        links: iterable of link descriptions.
        field_name: name used in errors.

    Returns:
        set: link ids.

    Raises:
        ParameterError: a link that is not in the graph.

    >>> from testbed.topologies.registry import make_topology
    >>> g = make_topology("clos", leaves=2, spines=2, hosts_per_leaf=1).graph()
    >>> sorted(link_ids(g, [("spine0", "leaf0")]))
    [Link(a='leaf0', a_port=2, b='spine0', b_port=1)]
    """
    result = set()
    for link in links:
        link = tuple(link)
        if len(link) == 4:
            data = [d for _, _, d in graph.edges([link[0]], data=True) if link_id(d) == link] \
                if link[0] in graph else []
        elif len(link) in (2, 3) and link[0] in graph and link[1] in graph and graph.has_edge(link[0], link[1]):
            edges = graph[link[0]][link[1]]
            data = [edges[link[2]]] if len(link) == 3 and link[2] in edges else \
                list(edges.values()) if len(link) == 2 else []
        else:
            data = []
        if not data:
            raise ParameterError(field_name, link, "links of the topology as (a, b), (a, b, key) or link ids")
        result.update(link_id(d) for d in data)
    return result


def directed_capacities(graph, held_down=frozenset(), failed=frozenset()):
    """Capacity each working link offers per direction; held-down links offer 0.

    Args:
        graph: the topology multigraph.
        held_down: link ids held down after recovery.
        failed: link ids that are down (left out).

    Returns:
        dict: ``{(link id, from node): Mbit/s}``.

    Raises:
        ParameterError: a link without a positive ``capacity_mbps``.
    """
    capacities = {}
    for u, v, data in graph.edges(data=True):
        ident = link_id(data)
        if ident in failed:
            continue
        capacity = data.get("capacity_mbps")
        if isinstance(capacity, bool) or not isinstance(capacity, (int, float)) or not capacity > 0:
            raise ParameterError("capacity_mbps", capacity, "a number > 0 on every link", f"link {u}-{v}")
        for end in (u, v):
            capacities[(ident, end)] = 0.0 if ident in held_down else float(capacity)
    return capacities


def path_cost(path, residual):
    """F10's cost of a path, with the documented rule for ``R(e) <= 0``.

    Args:
        path: list of :class:`testbed.controllers.te.Hop`.
        residual: ``{(link id, from node): Mbit/s}``.

    Returns:
        tuple: ``(links with R <= 0, their total overdraft, sum of 1/R(e) over the others)``;
        smaller is better.

    >>> from testbed.controllers.te import Hop
    >>> hops = [Hop("x", 1, "y", "xy"), Hop("y", 2, "z", "yz")]
    >>> path_cost(hops, {("xy", "x"): 50.0, ("yz", "y"): 25.0})
    (0, 0.0, 0.06)
    >>> path_cost(hops, {("xy", "x"): 50.0, ("yz", "y"): -10.0})
    (1, 10.0, 0.02)
    """
    saturated = [residual[(hop.link, hop.node)] for hop in path if residual[(hop.link, hop.node)] <= 0]
    inverse = [1.0 / residual[(hop.link, hop.node)] for hop in path if residual[(hop.link, hop.node)] > 0]
    return len(saturated), math.fsum(-r for r in saturated), math.fsum(inverse)


def _checked_flows(graph, flows):
    """Flows as :class:`Flow`, refusing duplicate names and endpoints that are not hosts."""
    flows = [flow if isinstance(flow, Flow) else Flow.from_dict(flow) for flow in flows]
    seen = set()
    for flow in flows:
        if flow.name in seen:
            raise ParameterError("flow.name", flow.name, "unique flow names")
        seen.add(flow.name)
        for field_name, node in (("flow.src", flow.src), ("flow.dst", flow.dst)):
            if node not in graph or not is_host(graph, node):
                raise ParameterError(field_name, node, "a host of the topology", f"flow {flow.name}")
        if isinstance(flow.rate, bool) or not isinstance(flow.rate, (int, float)) or not flow.rate > 0:
            raise ParameterError("flow.rate", flow.rate, "a number > 0 (Mbit/s)", f"flow {flow.name}")
    return flows


def _candidates(graph, flow, blocked):
    """The failure-free shortest paths of a flow that use no blocked link (5.3: only shortest paths)."""
    shortest = hop_distances(graph, flow.dst).get(flow.src)
    return [path for path in shortest_paths(graph, flow.src, flow.dst, blocked) if len(path) == shortest]


def place_flows_greedy(graph, flows, failed_links=(), held_down=(), residual=None):
    """Place flows largest first, each on the shortest path of least ``sum 1/R(e)``.

    Args:
        graph: the topology multigraph.
        flows: :class:`testbed.controllers.te.Flow` objects (or dicts for
            :meth:`Flow.from_dict`): source host, destination host, rate in
            Mbit/s measured over the last epoch.
        failed_links: links that are down (``(a, b)``, ``(a, b, key)`` or link ids).
        held_down: links up again but held down after recovery (same forms).
        residual: starting ``{(link id, from node): Mbit/s}`` (default: the
            capacities of :func:`directed_capacities`); not modified.

    Returns:
        Schedule: paths, order, unplaced flows and the residual capacities
        (weights left empty; see :func:`ecmp_weights`).

    Raises:
        ParameterError: duplicate flow names, endpoints that are not hosts,
            non-positive rates, unknown links, links without capacity.

    Two paths from h1 to h3 (through spine0 or spine1), 100 Mbit/s links.  The
    60 Mbit/s flow goes first and takes spine0 (a tie, first path); the 50 then
    sees residual 40 on spine0's links and takes spine1; the 30 compares
    1/40+1/40+1/40+1/50 (spine0) with 1/40+1/50+1/50+1/50 (spine1):

    >>> from testbed.topologies.registry import make_topology
    >>> from testbed.controllers.te import Flow, path_nodes
    >>> g = make_topology("clos", leaves=2, spines=2, hosts_per_leaf=2).graph()
    >>> flows = [Flow("small", "h1", "h4", 30.0), Flow("big", "h1", "h3", 60.0),
    ...          Flow("mid", "h2", "h4", 50.0)]
    >>> placed = place_flows_greedy(g, flows)
    >>> placed.order
    ['big', 'mid', 'small']
    >>> {name: path_nodes(path)[2] for name, path in placed.paths.items()}
    {'big': 'spine0', 'mid': 'spine1', 'small': 'spine1'}
    """
    flows = _checked_flows(graph, flows)
    failed = link_ids(graph, failed_links)
    held = link_ids(graph, held_down, "held_down")
    schedule = Schedule()
    schedule.residual = dict(residual) if residual is not None else directed_capacities(graph, held, failed)
    blocked = sorted(failed | held)
    for flow in sorted(flows, key=lambda f: (-f.rate, f.name)):
        schedule.order.append(flow.name)
        candidates = _candidates(graph, flow, blocked)
        if not candidates:
            schedule.unplaced.append(flow.name)
            continue
        best = min(candidates, key=lambda path: path_cost(path, schedule.residual))
        for hop in best:
            schedule.residual[(hop.link, hop.node)] -= flow.rate
        schedule.paths[flow.name] = best
    return schedule


def improve_placement(graph, flows, schedule, failed_links=(), held_down=(), max_rounds=DEFAULT_IMPROVE_ROUNDS):
    """Move placed flows, one at a time, to a path of lower cost while one is found.

    Section 6.2 places flows greedily and leaves the algorithm open ("the exact choice of algorithm
    is orthogonal to our work").  Greedy order can leave a flow sharing a link that a later flow
    made the better choice; this pass takes each placed flow in placement order off its path and puts
    it back on the candidate whose cost, with the flow on it, is lowest (:func:`path_cost`), moving
    it only when that is strictly lower than its own path's.  Passes repeat until one moves nothing
    or ``max_rounds`` passes were made.

    Args:
        graph: the topology multigraph.
        flows: the flows :func:`place_flows_greedy` placed (same names).
        schedule: its :class:`Schedule` (not modified).
        failed_links, held_down: as for :func:`place_flows_greedy`.
        max_rounds: the most passes (>= 0).

    Returns:
        Schedule: a copy with the moved flows' paths and the residual capacities they leave.

    Raises:
        ParameterError: as :func:`place_flows_greedy`; ``max_rounds`` not an int >= 0.

    Three leaves of one host, two spines, 2 Mbit/s links.  Greedy puts ``b`` (h1->h3) on spine0,
    a tie when it is placed; ``d`` (h1->h2) then also takes leaf0's uplink to spine0, a tie too.
    With ``d`` there, ``b`` costs 1/1.2 + 1/1.5 on spine0 against 1/1.5 + 1/1.5 on spine1: it moves.

    >>> from testbed.topologies.registry import make_topology
    >>> from testbed.controllers.te import Flow, path_nodes
    >>> g = make_topology("clos", leaves=3, spines=2, hosts_per_leaf=1, fabric_link_mbps=2).graph()
    >>> flows = [Flow("a", "h3", "h1", 0.8), Flow("b", "h1", "h3", 0.5), Flow("c", "h3", "h2", 0.5),
    ...          Flow("d", "h1", "h2", 0.3)]
    >>> greedy = place_flows_greedy(g, flows)
    >>> {name: path_nodes(path)[2] for name, path in sorted(greedy.paths.items())}
    {'a': 'spine0', 'b': 'spine0', 'c': 'spine1', 'd': 'spine0'}
    >>> better = improve_placement(g, flows, greedy)
    >>> {name: path_nodes(path)[2] for name, path in sorted(better.paths.items())}
    {'a': 'spine0', 'b': 'spine1', 'c': 'spine1', 'd': 'spine0'}
    """
    if isinstance(max_rounds, bool) or not isinstance(max_rounds, int) or max_rounds < 0:
        raise ParameterError("max_rounds", max_rounds, "an int >= 0")
    flows = {flow.name: flow for flow in _checked_flows(graph, flows)}
    blocked = sorted(link_ids(graph, failed_links) | link_ids(graph, held_down, "held_down"))
    improved = Schedule(paths=dict(schedule.paths), order=list(schedule.order), unplaced=list(schedule.unplaced),
                        residual=dict(schedule.residual))
    residual = improved.residual

    def cost_with(flow, path):
        for hop in path:
            residual[(hop.link, hop.node)] -= flow.rate
        cost = path_cost(path, residual)
        for hop in path:
            residual[(hop.link, hop.node)] += flow.rate
        return cost

    for _ in range(max_rounds):
        moved = 0
        for name in [name for name in improved.order if name in improved.paths]:
            flow, current = flows[name], improved.paths[name]
            for hop in current:
                residual[(hop.link, hop.node)] += flow.rate
            best = min(_candidates(graph, flow, blocked), key=lambda path: cost_with(flow, path))
            if cost_with(flow, best) < cost_with(flow, current):
                current, moved = best, moved + 1
            for hop in current:
                residual[(hop.link, hop.node)] -= flow.rate
            improved.paths[name] = current
        if not moved:
            break
    return improved


def integer_weights(residuals, max_weight=DEFAULT_MAX_WEIGHT):
    """Integer weights proportional to positive residual capacities.

    Args:
        residuals: ``{member: residual}``.
        max_weight: weight of the member with the largest residual (>= 1).

    Returns:
        dict: ``{member: weight >= 1}`` for the members with residual > 0
        (rounded to nearest, at least 1); empty when none is positive.

    Raises:
        ParameterError: ``max_weight`` not an integer >= 1.

    >>> integer_weights({"p2": 40.0, "p3": 20.0, "p4": 0.0})
    {'p2': 16, 'p3': 8}
    >>> integer_weights({"p2": 100.0, "p3": 1.0}, max_weight=10)
    {'p2': 10, 'p3': 1}
    """
    if isinstance(max_weight, bool) or not isinstance(max_weight, int) or max_weight < 1:
        raise ParameterError("max_weight", max_weight, "an integer >= 1")
    positive = {member: r for member, r in residuals.items() if r > 0}
    if not positive:
        return {}
    top = max(positive.values())
    return {member: max(1, int(math.floor(r / top * max_weight + 0.5))) for member, r in positive.items()}


def ecmp_weights(graph, residual, failed_links=(), held_down=(), destinations=None,
                 max_weight=DEFAULT_MAX_WEIGHT):
    """Weighted-ECMP weights per switch and destination from residual capacities (section 6.1).

    Args:
        graph: the topology multigraph.
        residual: ``{(link id, from node): Mbit/s}`` (:attr:`Schedule.residual`).
        failed_links: links that are down (never next hops).
        held_down: links held down after recovery (next hops of residual 0).
        destinations: destination hosts (default: every host).
        max_weight: weight of the next hop with the most residual capacity.

    Returns:
        dict: ``{switch: {destination: {egress port: weight}}}``; a switch
        that cannot reach a destination has no entry for it.

    Raises:
        ParameterError: unknown links or destinations, bad ``max_weight``.

    >>> from testbed.topologies.registry import make_topology
    >>> from testbed.controllers.te import Flow
    >>> g = make_topology("clos", leaves=2, spines=2, hosts_per_leaf=2).graph()
    >>> placed = place_flows_greedy(g, [Flow("big", "h1", "h3", 60.0), Flow("mid", "h2", "h4", 80.0)])
    >>> placed.residual[(("leaf0", 3, "spine0", 1), "leaf0")], placed.residual[(("leaf0", 4, "spine1", 1), "leaf0")]
    (20.0, 40.0)
    >>> ecmp_weights(g, placed.residual, destinations=["h3"])["leaf0"]   # port 3 to spine0, 4 to spine1
    {'h3': {3: 8, 4: 16}}
    """
    failed = link_ids(graph, failed_links)
    held = link_ids(graph, held_down, "held_down")
    hosts = sorted(n for n in graph.nodes if is_host(graph, n))
    destinations = hosts if destinations is None else list(destinations)
    for destination in destinations:
        if destination not in graph or not is_host(graph, destination):
            raise ParameterError("destinations", destination, "hosts of the topology")
    out_links = {}
    for u, v, data in usable_links(graph, sorted(failed)):
        for here, there in ((u, v), (v, u)):
            if not is_host(graph, here):
                out_links.setdefault(here, []).append((there, port_toward(data, here), link_id(data)))
    weights = {}
    for destination in destinations:
        distances = hop_distances(graph, destination, sorted(failed))
        for switch, links in out_links.items():
            here = distances.get(switch)
            hops = [(port, ident) for there, port, ident in links
                    if here is not None and distances.get(there) == here - 1]
            if hops:
                weights.setdefault(switch, {})[destination] = _hop_weights(switch, hops, residual, held,
                                                                           max_weight)
    return weights


def _hop_weights(switch, hops, residual, held, max_weight):
    """Weights of one switch's next hops (ports) toward one destination, by the module's rule."""
    by_port = integer_weights({port: (0.0 if ident in held else residual.get((ident, switch), 0.0))
                               for port, ident in hops}, max_weight)
    if by_port:
        return dict(sorted(by_port.items()))
    stable = [port for port, ident in hops if ident not in held]
    return {port: 1 for port in sorted(stable or [port for port, _ in hops])}


def schedule_epoch(graph, flows, failed_links=(), held_down=(), max_weight=DEFAULT_MAX_WEIGHT,
                   destinations=None):
    """One epoch of F10's rescheduler: greedy placement, its improvement, then weighted-ECMP weights.

    Args:
        graph: the topology multigraph.
        flows: flows measured over the last epoch (see :func:`place_flows_greedy`).
        failed_links: links that are down.
        held_down: links up again but held down after recovery.
        max_weight: weight of the best next hop.
        destinations: destination hosts for the weights (default: every host).

    Returns:
        Schedule: placement, residual capacities and weights.

    Raises:
        ParameterError: as :func:`place_flows_greedy` and :func:`ecmp_weights`.

    >>> from testbed.topologies.registry import make_topology
    >>> from testbed.controllers.te import Flow
    >>> g = make_topology("clos", leaves=2, spines=2, hosts_per_leaf=1).graph()
    >>> epoch = schedule_epoch(g, [Flow("f", "h1", "h2", 25.0)], held_down=[("leaf0", "spine1")])
    >>> [hop.next_node for hop in epoch.paths["f"]]
    ['leaf0', 'spine0', 'leaf1', 'h2']
    >>> epoch.weights["leaf0"]["h2"]    # port 3 (to spine1) is held down: residual 0, no weight
    {2: 16}
    """
    schedule = improve_placement(graph, flows, place_flows_greedy(graph, flows, failed_links, held_down),
                                 failed_links, held_down)
    schedule.weights = ecmp_weights(graph, schedule.residual, failed_links, held_down, destinations,
                                    max_weight)
    return schedule
