"""Throughput of a routing's path set under a traffic matrix (seed 001, IV and V-A).

The throughput ``theta(T)`` of a path set for a traffic matrix ``T`` is the
largest ``theta`` such that ``theta * T`` can be routed over the given paths
(any split among a pair's paths) without exceeding any link's capacity: a
path-based multi-commodity flow linear programme, solved with scipy's HiGHS
(:func:`path_throughput`).  Links are full duplex with capacity 1 per
direction, the rate of a server's link, so ``theta`` is the fraction of its
line rate every server gets; host links are not modelled.

Traffic matrices are between ToRs, in units of a server's line rate, every
ToR holding ``h`` servers (``graph.graph["h"]``, or the node's own ``servers``
where it has one: a Clos's leaves, and its spines with none, :mod:`.clos`):

* all-to-all (:func:`all_to_all_traffic`): every server sends its line rate
  spread evenly over all other servers; ToR ``u`` sends ``h * h / (N h - 1)`` to
  every other ToR (traffic inside a ToR needs no fabric link);
* uniform random (:func:`uniform_random_traffic`): every ToR picks 12.5% of the
  ToRs at random (seeded) and its servers spread their rate evenly over them;
* near-worst case (:func:`near_worst_case_traffic`): the longest-matching
  permutation of Jyothi et al. (the near-worst-case traffic FC and FC+
  evaluate with): every ToR sends ``h`` to one partner, the partners chosen by a
  maximum-weight perfect matching with shortest-path hop counts as weights,
  so as many long pairs as possible.

:func:`throughput_upper_bound` is Eq. (6) (Namyar et al.).
"""
import random
import time

from testbed.errors import ParameterError, TestbedError
from testbed.topologies.base import check_int

#: traffic pattern names of :func:`traffic_matrix`
TRAFFIC_PATTERNS = ("all-to-all", "uniform", "worst")
#: share of the ToRs a ToR sends to under uniform random traffic (V-A)
UNIFORM_FRACTION = 0.125


def _servers(graph, servers_per_tor):
    """``{tor: servers}`` of the ToRs with servers: ``servers_per_tor`` each, else each node's ``servers``
    (a Clos's spines have none), else the graph's ``h`` (or 1)."""
    if servers_per_tor is not None and (isinstance(servers_per_tor, bool) or
                                        not isinstance(servers_per_tor, (int, float)) or servers_per_tor <= 0):
        raise ParameterError("servers_per_tor", servers_per_tor, "a number > 0")
    default = graph.graph.get("h") or 1
    counts = {tor: servers_per_tor if servers_per_tor is not None else graph.nodes[tor].get("servers", default)
              for tor in sorted(graph.nodes, key=lambda name: graph.nodes[name].get("index", name))}
    return {tor: count for tor, count in counts.items() if count > 0}


# ---------------------------------------------------------------- traffic
def all_to_all_traffic(graph, servers_per_tor=None):
    """Every server sends its line rate evenly to all other servers; demands between ToRs.

    Args:
        graph: a ToR graph.
        servers_per_tor: servers per ToR (default: the graph's ``h``, or 1).

    Returns:
        dict: ``(u, w) -> demand`` for every ordered pair of distinct ToRs.

    >>> from testbed.topologies.fcplus.topology import fc_graph
    >>> traffic = all_to_all_traffic(fc_graph(4, 4, 2, seed=1))  # h = 2 servers per ToR
    >>> len(traffic), round(traffic[("tor0", "tor1")], 4)  # 2 * 2 / (4 * 2 - 1)
    (12, 0.5714)
    """
    servers = _servers(graph, servers_per_tor)
    total = sum(servers.values())
    return {(u, w): servers[u] * servers[w] / (total - 1) for u in servers for w in servers if u != w}


def uniform_random_traffic(graph, servers_per_tor=None, fraction=UNIFORM_FRACTION, seed=1):
    """Every ToR sends to ``round(fraction * N)`` (at least 1) other ToRs drawn at random.

    Args:
        graph: a ToR graph.
        servers_per_tor: servers per ToR (default: the graph's ``h``, or 1).
        fraction: share of the ToRs each ToR sends to, in (0, 1].
        seed: seed of the draw.

    Returns:
        dict: ``(u, w) -> h / m`` for the ``m`` destinations of every ToR ``u``.

    Raises:
        ParameterError: ``fraction`` outside (0, 1].

    >>> from testbed.topologies.fcplus.topology import fc_graph
    >>> traffic = uniform_random_traffic(fc_graph(16, 8, 6, seed=1), seed=4)  # 2 destinations each
    >>> len(traffic), sorted(set(traffic.values()))
    (32, [1.0])
    """
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 < fraction <= 1:
        raise ParameterError("fraction", fraction, "a number in (0, 1]")
    check_int("seed", seed, allowed="an integer")
    servers = _servers(graph, servers_per_tor)
    tors = list(servers)
    count = min(len(tors) - 1, max(1, round(fraction * len(tors))))
    rng = random.Random(seed)
    traffic = {}
    for u in tors:
        for w in rng.sample([t for t in tors if t != u], count):
            traffic[(u, w)] = servers[u] / count
    return traffic


def hop_distances(graph):
    """Shortest-path hop counts between all ToRs: ``{u: {w: hops}}``.

    >>> from testbed.topologies.fcplus.topology import tor_graph_from_links
    >>> hop_distances(tor_graph_from_links([[1, 2]] * 3, [((0, 1), (1, 2)), ((1, 1), (2, 2))]))["tor0"]["tor2"]
    2
    """
    import networkx as nx

    return dict(nx.all_pairs_shortest_path_length(nx.Graph(graph)))


def near_worst_case_traffic(graph, servers_per_tor=None):
    """The longest-matching permutation: every ToR sends ``h`` to a far-away partner.

    Partners come from a maximum-weight perfect matching of sources to
    destinations (``scipy.optimize.linear_sum_assignment``) with the hop
    distance as weight and a ToR never its own partner.

    Returns:
        dict: ``(u, partner) -> h``, one entry per ToR.

    >>> from testbed.topologies.fcplus.topology import tor_graph_from_links
    >>> line = tor_graph_from_links([[1, 2]] * 4, [((0, 1), (1, 2)), ((1, 1), (2, 2)), ((2, 1), (3, 2))])
    >>> traffic = near_worst_case_traffic(line)
    >>> sorted(u for u, _ in traffic) == sorted(w for _, w in traffic) == ["tor0", "tor1", "tor2", "tor3"]
    True
    >>> distances = hop_distances(line)
    >>> sum(distances[u][w] for u, w in traffic)  # 3 + 3 + 1 + 1 or 3 + 2 + 2 + 1: no permutation does better
    8
    """
    import numpy as np
    from scipy.optimize import linear_sum_assignment

    servers = _servers(graph, servers_per_tor)
    tors = list(servers)
    distances = hop_distances(graph)
    n = len(tors)
    weights = np.full((n, n), -float(n * n))  # unreachable pairs and self-pairs lose against any reachable one
    for i, u in enumerate(tors):
        for j, w in enumerate(tors):
            if i != j and w in distances[u]:
                weights[i, j] = distances[u][w]
    rows, cols = linear_sum_assignment(weights, maximize=True)
    return {(tors[i], tors[j]): servers[tors[i]] for i, j in zip(rows, cols)}


def traffic_matrix(graph, pattern, servers_per_tor=None, seed=1):
    """The traffic of ``pattern`` (one of :data:`TRAFFIC_PATTERNS`); ``seed`` is used by ``uniform``.

    Raises:
        ParameterError: unknown pattern.
    """
    if pattern == "all-to-all":
        return all_to_all_traffic(graph, servers_per_tor)
    if pattern == "uniform":
        return uniform_random_traffic(graph, servers_per_tor, seed=seed)
    if pattern == "worst":
        return near_worst_case_traffic(graph, servers_per_tor)
    raise ParameterError("traffic", pattern, "one of: " + ", ".join(TRAFFIC_PATTERNS))


# ---------------------------------------------------------- throughput
def path_throughput(graph, paths, demands, capacity=1.0, return_flows=False):
    """The largest ``theta`` such that ``theta * demands`` fits the links over the given paths.

    Linear programme: variables ``x_p >= 0`` (flow on path ``p``) and
    ``theta``; maximise ``theta`` subject to ``sum_{p of pair} x_p = theta *
    demand(pair)`` for every pair and ``sum_{p over link direction} x_p <=
    capacity`` for every link direction.  Solved by HiGHS's interior point
    method (``scipy.optimize.linprog(method="highs-ipm")``): on these LPs
    (N = 400, 12,800 paths) it takes seconds where ``"highs"``, which picks the
    dual simplex, takes minutes, for the same optimum.

    Args:
        graph: the ToR graph the paths run on.
        paths: ``(u, w) -> list of paths`` (as from :func:`~.routing.routing_paths`).
        demands: ``(u, w) -> demand``; pairs with demand 0 are ignored.
        capacity: capacity of every link direction (> 0).
        return_flows: also return the flows.

    Returns:
        float ``theta`` (0.0 when a pair with demand has no path); with
        ``return_flows``: ``(theta, {(u, w): [flow of each path]})``.

    Raises:
        ParameterError: no positive demand, a non-positive capacity, a demand
            pair missing from ``paths``.
        TestbedError: the solver failed.

    Two paths of one hop each in parallel carry a demand of 1 twice over:

    >>> from testbed.topologies.fcplus.topology import tor_graph_from_links
    >>> pair = tor_graph_from_links([[1, 2], [1, 2]], [((0, 1), (1, 2)), ((1, 1), (0, 2))])
    >>> paths = {("tor0", "tor1"): [(("tor0", "tor1", 0),), (("tor0", "tor1", 1),)]}
    >>> round(path_throughput(pair, paths, {("tor0", "tor1"): 1.0}), 6)
    2.0
    """
    import numpy as np
    from scipy.optimize import linprog
    from scipy.sparse import coo_matrix

    if isinstance(capacity, bool) or not isinstance(capacity, (int, float)) or not capacity > 0:
        raise ParameterError("capacity", capacity, "a number > 0")
    commodities = [(pair, demand) for pair, demand in demands.items() if demand > 0]
    if not commodities:
        raise ParameterError("demands", demands, "at least one pair with a positive demand")
    for pair, _ in commodities:
        if pair not in paths:
            raise ParameterError("paths", pair, "paths for every pair with a demand")
    if any(not paths[pair] for pair, _ in commodities):
        return (0.0, {pair: [0.0] * len(paths[pair]) for pair, _ in commodities}) if return_flows else 0.0
    link_row = {}
    ub_rows, ub_cols, eq_rows, eq_cols, eq_vals = [], [], [], [], []
    column = 0
    for index, (pair, demand) in enumerate(commodities):
        for path in paths[pair]:
            for u, w, key in path:
                row = link_row.setdefault((key, graph[u][w][key]["lower"] == u), len(link_row))
                ub_rows.append(row)
                ub_cols.append(column)
            eq_rows.append(index)
            eq_cols.append(column)
            eq_vals.append(1.0)
            column += 1
    theta = column
    for index, (_, demand) in enumerate(commodities):
        eq_rows.append(index)
        eq_cols.append(theta)
        eq_vals.append(-float(demand))
    width = column + 1
    a_ub = coo_matrix((np.ones(len(ub_rows)), (ub_rows, ub_cols)), shape=(len(link_row), width)).tocsr()
    a_eq = coo_matrix((eq_vals, (eq_rows, eq_cols)), shape=(len(commodities), width)).tocsr()
    objective = np.zeros(width)
    objective[theta] = -1.0
    result = linprog(objective, A_ub=a_ub, b_ub=np.full(len(link_row), float(capacity)), A_eq=a_eq,
                     b_eq=np.zeros(len(commodities)), bounds=(0, None), method="highs-ipm")
    if result.status != 0:
        raise TestbedError(f"the throughput LP failed: {result.message}")
    value = float(result.x[theta])
    if not return_flows:
        return value
    flows, column = {}, 0
    for pair, _ in commodities:
        flows[pair] = [float(x) for x in result.x[column:column + len(paths[pair])]]
        column += len(paths[pair])
    return value, flows


def throughput_upper_bound(graph, demands):
    """Eq. (6): ``theta <= 2E / sum t_uv P_uv`` (``E`` links, ``P_uv`` shortest hop counts).

    >>> from testbed.topologies.fcplus.topology import tor_graph_from_links
    >>> line = tor_graph_from_links([[1, 2]] * 3, [((0, 1), (1, 2)), ((1, 1), (2, 2))])
    >>> throughput_upper_bound(line, {("tor0", "tor2"): 1.0})  # 2 links, 2 hops
    2.0
    """
    distances = hop_distances(graph)
    volume = sum(demand * distances[u][w] for (u, w), demand in demands.items() if demand > 0)
    if volume == 0:
        raise ParameterError("demands", demands, "at least one pair with a positive demand between connected ToRs")
    return 2 * graph.number_of_edges() / volume


# ------------------------------------------------------------ analysis
def routing_throughput(graph, routing, traffic, k=32, n_lp=2, seed=1, max_candidates=None):
    """Paths of a routing for a traffic pattern, their throughput and what they cost.

    Args:
        graph: a ToR graph.
        routing: one of :data:`~.routing.ROUTINGS`.
        traffic: a pattern of :data:`TRAFFIC_PATTERNS` or a demand dict.
        k: paths per pair (``fc`` ignores it).
        n_lp: lossless priorities of ``dfksp``.
        seed: seed of uniform random traffic.
        max_candidates: candidate cap of DF-KSP and FC+ (1L).

    Returns:
        dict: ``theta``, ``upper_bound`` (Eq. (6)), ``pairs``, ``paths``,
        ``mean_paths`` (per pair), ``mean_hops`` (over paths), ``pairs_short``
        (pairs with fewer than ``k`` paths, not counting ``fc``),
        ``priorities`` (lossless priorities the paths use), ``deadlock_free``
        (their channel dependency graph is acyclic), ``cycles`` (cycles found,
        at most 10), ``path_seconds``, ``lp_seconds``.

    A ring of four ToRs, each sending 1 to the opposite one: two 2-hop paths
    per pair, 8 link directions for 4 units of traffic over 2 hops.

    >>> from testbed.topologies.fcplus.topology import tor_graph_from_links
    >>> ring = tor_graph_from_links([[1, 2]] * 4, [((0, 1), (1, 2)), ((1, 1), (2, 2)),
    ...                                           ((2, 1), (3, 2)), ((3, 1), (0, 2))])
    >>> demands = {(f"tor{i}", f"tor{(i + 2) % 4}"): 1.0 for i in range(4)}
    >>> result = routing_throughput(ring, "ksp", demands, k=2)
    >>> round(result["theta"], 6), result["upper_bound"], result["deadlock_free"]
    (1.0, 1.0, False)
    >>> result = routing_throughput(ring, "fcplus2l", demands, k=2)
    >>> round(result["theta"], 6), result["priorities"], result["deadlock_free"]
    (1.0, 2, True)
    """
    from testbed.topologies.fcplus.deadlock import cycles_by_priority
    from testbed.topologies.fcplus.routing import hop_priorities, routing_paths, routing_priorities

    uses_priorities = routing != "ksp"
    routing_priorities(routing, n_lp)  # validates routing and n_lp
    demands = traffic if isinstance(traffic, dict) else traffic_matrix(graph, traffic, seed=seed)
    started = time.perf_counter()
    paths = routing_paths(graph, [pair for pair, demand in demands.items() if demand > 0], routing, k=k,
                          n_lp=n_lp, max_candidates=max_candidates)
    path_seconds = time.perf_counter() - started
    started = time.perf_counter()
    theta = path_throughput(graph, paths, demands)
    lp_seconds = time.perf_counter() - started
    every = [path for found in paths.values() for path in found]
    cycles = cycles_by_priority(graph, every, priorities=uses_priorities)
    used = max((max(hop_priorities(graph, path)) for path in every), default=1) if uses_priorities else 1
    return {
        "theta": theta,
        "upper_bound": throughput_upper_bound(graph, demands),
        "pairs": len(paths),
        "paths": len(every),
        "mean_paths": len(every) / len(paths) if paths else 0.0,
        "mean_hops": sum(len(path) for path in every) / len(every) if every else 0.0,
        "pairs_short": 0 if routing == "fc" else sum(1 for found in paths.values() if len(found) < k),
        "priorities": used,
        "deadlock_free": not any(cycles.values()),
        "cycles": [cycle for level in sorted(cycles) for cycle in cycles[level]][:10],
        "path_seconds": path_seconds,
        "lp_seconds": lp_seconds,
    }
