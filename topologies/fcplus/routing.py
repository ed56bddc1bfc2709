"""Routing on FC+/FC ToR graphs (seed 001, III-B, III-D, III-E): KSP, up-down paths, DF-KSP, FC's routing.

Every function takes a ToR graph from :func:`~.topology.fcplus_graph` or
:func:`~.topology.fc_graph` (a networkx ``MultiGraph``: ToRs as nodes, one edge
per link, key = link id, ``data["layer"][node]`` the virtual layer of the
link's end at ``node``, ``data["port"][node]`` its switch port).

A *path* is a tuple of hops ``(u, w, key)``: the link ``key`` crossed from ToR
``u`` to ToR ``w``.  Paths never visit a ToR twice.

Up and down: a hop goes *up* when it lands on a higher virtual layer than it
left.  Inside a ToR a packet may move between the ToR's virtual switches
without using a link; that move goes up or down too (from the layer it arrived
on to the layer of the link it leaves on).  The *down-up turns* ``T_du`` of a
path count the places where the sequence of layer changes goes down and then
up again (III-B); they happen at ToRs, at most one per ToR.  An *up-down path*
has ``T_du = 0``: its layers never go down and then up, which is what makes up-down
routing deadlock-free on one priority.

Lossless priorities (III-D): a packet starts on priority 1 and moves to the
next priority at every down-up turn, so a path with ``T_du <= N_lp - 1`` needs
``N_lp`` lossless priorities; the switch decides by the in-port and out-port
(:func:`priority_transition_table`, :func:`down_up_port_pairs`), as Tagger does.

Routings (:data:`ROUTINGS`, :func:`routing_paths`):

* ``ksp``: K shortest simple paths by hop count (Yen's algorithm,
  ``networkx.shortest_simple_paths``), blind to layers: may deadlock;
* ``dfksp``: DF-KSP, the shortest paths in KSP order keeping those with
  ``T_du <= N_lp - 1`` until K are kept;
* ``fcplus1l``: FC+ (1L-K), K shortest paths of the directed up-down graph
  (:func:`up_down_graph`), whose paths are exactly the up-down paths;
* ``fcplus2l``: FC+ (2L-K), DF-KSP with ``N_lp = 2``;
* ``fc``: FC's routing, edge-disjoint up-down paths: the shortest up-down path,
  then the shortest one avoiding the links already used, and so on.
"""
import itertools
from collections import deque

import networkx as nx

from testbed.errors import ParameterError
from testbed.topologies.base import check_int

#: routing names of :func:`routing_paths`
ROUTINGS = ("ksp", "dfksp", "fcplus1l", "fcplus2l", "fc")
#: lossless priorities a RoCE fabric offers at most
MAX_LOSSLESS_PRIORITIES = 3
#: default cap on the candidate paths DF-KSP and FC+ (1L) examine, per path asked for
CANDIDATES_PER_PATH = 32

_UP, _DOWN = "up", "down"


# ------------------------------------------------------------------ checks
def check_k(k):
    """Validate the number of paths K (an integer >= 1); return it."""
    return check_int("k", k, minimum=1, allowed="an integer >= 1")


def check_n_lp(n_lp):
    """Validate the number of lossless priorities N_lp (1, 2 or 3); return it."""
    return check_int("n_lp", n_lp, minimum=1, maximum=MAX_LOSSLESS_PRIORITIES,
                     allowed="1, 2 or 3 (RoCE fabrics have 2 or 3 lossless priorities)")


def _check_pair(graph, source, target):
    for field, node in (("source", source), ("target", target)):
        if node not in graph:
            raise ParameterError(field, node, "a ToR of the graph (tor0 ..)")
    if source == target:
        raise ParameterError("target", target, "a ToR other than the source")


def _check_candidates(max_candidates, k):
    if max_candidates is None:
        return CANDIDATES_PER_PATH * k
    return check_int("max_candidates", max_candidates, minimum=1)


# ------------------------------------------------------------ path basics
def path_nodes(path):
    """The ToRs a path visits, source first.

    >>> path_nodes((("tor0", "tor3", 7), ("tor3", "tor5", 2)))
    ['tor0', 'tor3', 'tor5']
    """
    if not path:
        return []
    return [path[0][0]] + [hop[1] for hop in path]


def _hop_layers(graph, hop):
    """(layer left, layer reached) of a hop."""
    u, w, key = hop
    layer = graph[u][w][key]["layer"]
    return layer[u], layer[w]


def _turn_is_down_up(arrive, leave):
    """Whether the layer moves of arriving hop ``arrive`` and leaving hop ``leave`` go down then up.

    ``arrive`` and ``leave`` are (layer left, layer reached) pairs; the move
    inside the ToR goes from ``arrive[1]`` to ``leave[0]``.  Three moves can
    hold at most one down-up turn.
    """
    moves = [move for move in (arrive[1] - arrive[0], leave[0] - arrive[1], leave[1] - leave[0]) if move]
    return any(first < 0 < second for first, second in zip(moves, moves[1:]))


def down_up_turns(graph, path):
    """``T_du``: how often the path's layers go down and then up again (III-B).

    Args:
        graph: a ToR graph.
        path: a tuple of hops ``(u, w, key)``.

    Returns:
        int: the number of down-up turns (0 for an up-down path).

    >>> from testbed.topologies.fcplus.topology import tor_graph_from_links
    >>> graph = tor_graph_from_links([[1, 2, 3]] * 4, [((0, 3), (1, 2)), ((1, 2), (2, 3)),
    ...                                                ((0, 1), (3, 2)), ((3, 2), (2, 1))])
    >>> down_up_turns(graph, (("tor0", "tor1", 0), ("tor1", "tor2", 1)))  # 3 -> 2, then 2 -> 3
    1
    >>> down_up_turns(graph, (("tor0", "tor3", 2), ("tor3", "tor2", 3)))  # 1 -> 2, then 2 -> 1
    0
    """
    layers = [_hop_layers(graph, hop) for hop in path]
    return sum(_turn_is_down_up(a, b) for a, b in zip(layers, layers[1:]))


def is_up_down(graph, path):
    """True when ``path`` has no down-up turn (``T_du == 0``).

    >>> from testbed.topologies.fcplus.topology import tor_graph_from_links
    >>> graph = tor_graph_from_links([[1, 2, 3]] * 4, [((0, 3), (1, 2)), ((1, 2), (2, 3)),
    ...                                                ((0, 1), (3, 2)), ((3, 2), (2, 1))])
    >>> is_up_down(graph, (("tor0", "tor3", 2), ("tor3", "tor2", 3)))
    True
    """
    return down_up_turns(graph, path) == 0


def hop_priorities(graph, path):
    """The lossless priority (1-based) of every hop: +1 after each down-up turn.

    >>> from testbed.topologies.fcplus.topology import tor_graph_from_links
    >>> graph = tor_graph_from_links([[1, 2, 3]] * 4, [((0, 3), (1, 2)), ((1, 2), (2, 3)),
    ...                                                ((0, 1), (3, 2)), ((3, 2), (2, 1))])
    >>> hop_priorities(graph, (("tor0", "tor1", 0), ("tor1", "tor2", 1)))
    [1, 2]
    """
    if not path:
        return []
    layers = [_hop_layers(graph, hop) for hop in path]
    priorities = [1]
    for a, b in zip(layers, layers[1:]):
        priorities.append(priorities[-1] + _turn_is_down_up(a, b))
    return priorities


def path_ports(graph, path):
    """Per ToR on the path: ``(switch, in_port, out_port)``; in_port None at the source, out_port None at the end.

    >>> from testbed.topologies.fcplus.topology import tor_graph_from_links
    >>> graph = tor_graph_from_links([[1, 2, 3]] * 4, [((0, 3), (1, 2)), ((1, 2), (2, 3)),
    ...                                                ((0, 1), (3, 2)), ((3, 2), (2, 1))])
    >>> path_ports(graph, (("tor0", "tor1", 0), ("tor1", "tor2", 1)))
    [('tor0', None, 2), ('tor1', 1, 2), ('tor2', 2, None)]
    """
    rows = []
    in_port = None
    for u, w, key in path:
        port = graph[u][w][key]["port"]
        rows.append((u, in_port, port[u]))
        in_port = port[w]
    if path:
        rows.append((path[-1][1], in_port, None))
    return rows


# --------------------------------------------------- priority transitions
def priority_transition_table(graph, paths, match_priority=False):
    """Where a path set changes lossless priority, as switch table entries.

    A packet leaving a switch through a down-up turn moves to the next
    priority; the turn is decided by the in-port and out-port alone, so a P4
    table can match on them (as Tagger's).

    Args:
        graph: a ToR graph.
        paths: an iterable of paths.
        match_priority: key the table on the packet's current priority too.

    Returns:
        dict: ``(switch, in_port, out_port) -> new priority`` (with
        ``match_priority``: ``(switch, in_port, out_port, priority) -> new
        priority``).  Ports not in the table keep the priority.

    Raises:
        ParameterError: naming ``match_priority`` when one (switch, in_port,
            out_port) would need two new priorities (paths with two turns, N_lp = 3).

    >>> from testbed.topologies.fcplus.topology import tor_graph_from_links
    >>> graph = tor_graph_from_links([[1, 2, 3]] * 4, [((0, 3), (1, 2)), ((1, 2), (2, 3)),
    ...                                                ((0, 1), (3, 2)), ((3, 2), (2, 1))])
    >>> priority_transition_table(graph, k_shortest_paths(graph, "tor0", "tor2", 2))
    {('tor1', 1, 2): 2}
    """
    table = {}
    for path in paths:
        priorities = hop_priorities(graph, path)
        for index in range(1, len(path)):
            if priorities[index] == priorities[index - 1]:
                continue
            (u, w, key), (_, _, next_key) = path[index - 1], path[index]
            switch = w
            in_port = graph[u][w][key]["port"][w]
            out_port = graph[w][path[index][1]][next_key]["port"][w]
            entry = (switch, in_port, out_port)
            if match_priority:
                entry += (priorities[index - 1],)
            if table.get(entry, priorities[index]) != priorities[index]:
                raise ParameterError("match_priority", match_priority,
                                     "True for path sets with more than one down-up turn per path",
                                     f"{entry} is a first turn on one path and a second on another")
            table[entry] = priorities[index]
    return table


def down_up_port_pairs(graph):
    """Every ``(switch, in_port, out_port)`` at which a packet makes a down-up turn.

    Independent of any path set: these are the port pairs at which a packet
    must move to the next lossless priority (or that up-down routing never uses).

    Returns:
        set of (switch, in_port, out_port).

    >>> from testbed.topologies.fcplus.topology import tor_graph_from_links
    >>> graph = tor_graph_from_links([[1, 2, 3]] * 4, [((0, 3), (1, 2)), ((1, 2), (2, 3)),
    ...                                                ((0, 1), (3, 2)), ((3, 2), (2, 1))])
    >>> sorted(turn for turn in down_up_port_pairs(graph) if turn[0] == "tor1")  # L3 -> L2 -> L3 both ways
    [('tor1', 1, 2), ('tor1', 2, 1)]
    """
    pairs = set()
    for tor in graph.nodes:
        incident = [(peer, key, data) for _, peer, key, data in graph.edges(tor, keys=True, data=True)]
        for peer_in, key_in, data_in in incident:
            arrive = (data_in["layer"][peer_in], data_in["layer"][tor])
            for peer_out, key_out, data_out in incident:
                if key_out == key_in:
                    continue
                leave = (data_out["layer"][tor], data_out["layer"][peer_out])
                if _turn_is_down_up(arrive, leave):
                    pairs.add((tor, data_in["port"][tor], data_out["port"][tor]))
    return pairs


# ----------------------------------------------------- K shortest paths
def _physical_view(graph):
    """A simple graph for Yen's algorithm and a function turning its node paths into hop paths.

    Without parallel links the ToR graph itself (as ``nx.Graph``) serves;
    with them every link becomes a node of its own, so that two parallel links
    give two paths.
    """
    if not any(len(keys) > 1 for _, _, keys in _adjacent_keys(graph)):
        simple = nx.Graph()
        simple.add_nodes_from(graph.nodes)
        keys = {}
        for u, w, key in graph.edges(keys=True):
            simple.add_edge(u, w)
            keys[(u, w)] = keys[(w, u)] = key

        def to_hops(nodes):
            return tuple((u, w, keys[(u, w)]) for u, w in zip(nodes, nodes[1:]))

        return simple, to_hops
    split = nx.Graph()
    split.add_nodes_from(graph.nodes)
    for u, w, key in graph.edges(keys=True):
        split.add_edge(u, ("link", key))
        split.add_edge(("link", key), w)

    def to_hops_split(nodes):
        return tuple((nodes[i], nodes[i + 2], nodes[i + 1][1]) for i in range(0, len(nodes) - 2, 2))

    return split, to_hops_split


def _adjacent_keys(graph):
    for u, neighbours in graph.adjacency():
        for w, keys in neighbours.items():
            yield u, w, keys


def _shortest_simple_paths(graph, source, target, view=None):
    """Simple paths from ``source`` to ``target`` in order of hop count (Yen's algorithm), as hop tuples."""
    simple, to_hops = view or _physical_view(graph)
    try:
        for nodes in nx.shortest_simple_paths(simple, source, target):
            yield to_hops(nodes)
    except nx.NetworkXNoPath:
        return


def k_shortest_paths(graph, source, target, k, view=None):
    """The K shortest simple paths by hop count (Yen's algorithm), ignoring virtual layers.

    Args:
        graph: a ToR graph (any networkx MultiGraph whose edges have keys works).
        source, target: ToR names.
        k: number of paths, >= 1.
        view: internal, a precomputed :func:`_physical_view` (speeds up many calls).

    Returns:
        list of paths (fewer than K when fewer simple paths exist), shortest first.

    Raises:
        ParameterError: ``k < 1`` or unknown/equal ToRs.

    >>> from testbed.topologies.fcplus.topology import tor_graph_from_links
    >>> graph = tor_graph_from_links([[1, 2, 3]] * 4, [((0, 3), (1, 2)), ((1, 2), (2, 3)),
    ...                                                ((0, 1), (3, 2)), ((3, 2), (2, 1))])
    >>> sorted(k_shortest_paths(graph, "tor0", "tor2", 5))
    [(('tor0', 'tor1', 0), ('tor1', 'tor2', 1)), (('tor0', 'tor3', 2), ('tor3', 'tor2', 3))]
    """
    check_k(k)
    _check_pair(graph, source, target)
    return list(itertools.islice(_shortest_simple_paths(graph, source, target, view), k))


def dfksp_paths(graph, source, target, k, n_lp, max_candidates=None, view=None):
    """DF-KSP (III-B, III-D): the K shortest simple paths with ``T_du <= n_lp - 1``.

    Takes the paths in KSP order and keeps those with at most ``n_lp - 1``
    down-up turns, until K are kept or ``max_candidates`` paths were examined.

    Args:
        graph: a ToR graph.
        source, target: ToR names.
        k: paths wanted (>= 1).
        n_lp: lossless priorities (1..3).
        max_candidates: KSP paths examined at most (default ``32 * k``).
        view: internal, a precomputed :func:`_physical_view`.

    Returns:
        list of paths, shortest first (fewer than K if the candidates ran out).

    Raises:
        ParameterError: ``k < 1``, ``n_lp`` outside 1..3, unknown ToRs.

    >>> from testbed.topologies.fcplus.topology import tor_graph_from_links
    >>> graph = tor_graph_from_links([[1, 2, 3]] * 4, [((0, 3), (1, 2)), ((1, 2), (2, 3)),
    ...                                                ((0, 1), (3, 2)), ((3, 2), (2, 1))])
    >>> dfksp_paths(graph, "tor0", "tor2", 2, n_lp=1)
    [(('tor0', 'tor3', 2), ('tor3', 'tor2', 3))]
    >>> len(dfksp_paths(graph, "tor0", "tor2", 2, n_lp=2))
    2
    """
    check_k(k)
    check_n_lp(n_lp)
    _check_pair(graph, source, target)
    limit = _check_candidates(max_candidates, k)
    kept = []
    for path in itertools.islice(_shortest_simple_paths(graph, source, target, view), limit):
        if down_up_turns(graph, path) <= n_lp - 1:
            kept.append(path)
            if len(kept) == k:
                break
    return kept


# ----------------------------------------------------- up-down digraph
def up_down_graph(graph):
    """The directed up-down graph (III-E): its paths are exactly the up-down paths.

    States are ``(tor, "up", layer)`` (the packet climbs and arrived on
    ``layer``) and ``(tor, "down", layer)`` (it descends); a ToR has ``2v - 1``
    of them.  ``(tor, "up", 1)`` is where a path starts (every link may be
    taken from there).  Each edge is one link crossing, with attribute ``link``
    = the hop ``(u, w, key)``; a climbing packet may take any link up from a
    virtual switch at or above its layer or any link down, a descending one only
    links down from a virtual switch at or below its layer.

    Returns:
        networkx.DiGraph: simple (parallel links give distinct state pairs).

    >>> from testbed.topologies.fcplus.topology import tor_graph_from_links
    >>> graph = tor_graph_from_links([[1, 2, 3]] * 4, [((0, 3), (1, 2)), ((1, 2), (2, 3)),
    ...                                                ((0, 1), (3, 2)), ((3, 2), (2, 1))])
    >>> updown = up_down_graph(graph)
    >>> updown.number_of_nodes()  # 2v - 1 = 5 states for each of 4 ToRs
    20
    >>> sorted(updown[("tor0", "up", 1)])  # from tor0: up to tor3, or down to tor1
    [('tor1', 'down', 2), ('tor3', 'up', 2)]
    """
    updown = nx.DiGraph()
    top = graph.graph["k"]  # nothing arrives on the top layer going down
    for tor, data in graph.nodes(data=True):
        layers = data["layers"]
        updown.add_nodes_from((tor, _UP, layer) for layer in layers)
        updown.add_nodes_from((tor, _DOWN, layer) for layer in layers if layer < top)
    for u, w, key, data in graph.edges(keys=True, data=True):
        low = data["lower"]
        high = w if low == u else u
        low_layer, high_layer = data["layer"][low], data["layer"][high]
        climbing_to = (high, _UP, high_layer)
        for layer in graph.nodes[low]["layers"]:
            if layer <= low_layer:
                _add_state_edge(updown, (low, _UP, layer), climbing_to, (low, high, key))
        descending_to = (low, _DOWN, low_layer)
        high_layers = graph.nodes[high]["layers"]
        for layer in high_layers:
            _add_state_edge(updown, (high, _UP, layer), descending_to, (high, low, key))
        for layer in high_layers:
            if high_layer <= layer < top:
                _add_state_edge(updown, (high, _DOWN, layer), descending_to, (high, low, key))
    return updown


def _add_state_edge(updown, state, to_state, hop):
    if updown.has_edge(state, to_state):  # pragma: no cover - see the docstring of up_down_graph
        raise AssertionError(f"two links from {state} to {to_state}")
    updown.add_edge(state, to_state, link=hop)


def _start_state(graph, source):
    """The state a path starts in: climbing from below the ToR's lowest virtual switch."""
    return (source, _UP, min(graph.nodes[source]["layers"]))


def fcplus_1l_paths(graph, source, target, k, max_candidates=None, updown=None):
    """FC+ (1L-K) (III-E): the K shortest up-down paths, from the directed up-down graph.

    Yen's algorithm on :func:`up_down_graph` with a sink joined to every state
    of ``target``; a state path that visits a ToR twice is skipped (its
    shortcut is an up-down path too, and shorter).

    Args:
        graph: a ToR graph.
        source, target: ToR names.
        k: paths wanted (>= 1).
        max_candidates: state paths examined at most (default ``32 * k``).
        updown: a precomputed :func:`up_down_graph` of ``graph`` (modified
            during the call, restored before it returns).

    Returns:
        list of up-down paths, shortest first.

    Raises:
        ParameterError: ``k < 1`` or unknown/equal ToRs.

    >>> from testbed.topologies.fcplus.topology import tor_graph_from_links
    >>> graph = tor_graph_from_links([[1, 2, 3]] * 4, [((0, 3), (1, 2)), ((1, 2), (2, 3)),
    ...                                                ((0, 1), (3, 2)), ((3, 2), (2, 1))])
    >>> fcplus_1l_paths(graph, "tor0", "tor2", 2)
    [(('tor0', 'tor3', 2), ('tor3', 'tor2', 3))]
    >>> fcplus_1l_paths(graph, "tor1", "tor3", 2)  # every route turns down-up
    []
    """
    check_k(k)
    _check_pair(graph, source, target)
    limit = _check_candidates(max_candidates, k)
    updown = up_down_graph(graph) if updown is None else updown
    sink = ("sink", target)
    ends = [state for state in updown.nodes if state[0] == target]
    updown.add_edges_from((state, sink) for state in ends)
    kept = []
    try:
        states = nx.shortest_simple_paths(updown, _start_state(graph, source), sink)
        for state_path in itertools.islice(states, limit):
            hops = tuple(updown[a][b]["link"] for a, b in zip(state_path[:-2], state_path[1:-1]))
            tors = path_nodes(hops)
            if len(set(tors)) == len(tors):
                kept.append(hops)
                if len(kept) == k:
                    break
    except nx.NetworkXNoPath:
        pass
    finally:
        updown.remove_node(sink)
    return kept


def fc_edge_disjoint_paths(graph, source, target, updown=None):
    """FC's routing: edge-disjoint up-down paths, shortest first.

    Repeatedly takes a shortest up-down path (breadth-first search of the
    up-down graph) that uses none of the links taken so far (in either
    direction), until none is left.

    Returns:
        list of up-down paths sharing no link.

    >>> from testbed.topologies.fcplus.topology import fc_graph
    >>> graph = fc_graph(8, 8, 6, seed=2)
    >>> paths = fc_edge_disjoint_paths(graph, "tor0", "tor1")
    >>> keys = [key for path in paths for _, _, key in path]
    >>> len(keys) == len(set(keys)) and all(is_up_down(graph, path) for path in paths)
    True
    """
    _check_pair(graph, source, target)
    updown = up_down_graph(graph) if updown is None else updown
    used = set()
    paths = []
    start = _start_state(graph, source)
    while True:
        hops = _bfs_up_down(updown, start, target, used)
        if hops is None:
            return paths
        paths.append(hops)
        used.update(key for _, _, key in hops)


def _bfs_up_down(updown, start, target, used):
    """Shortest state path from ``start`` to any state of ``target`` avoiding links in ``used``; hops or None."""
    parent = {start: None}
    queue = deque([start])
    while queue:
        state = queue.popleft()
        for nxt, data in updown[state].items():
            if nxt in parent or data["link"][2] in used:
                continue
            parent[nxt] = state
            if nxt[0] == target:
                hops = []
                while parent[nxt] is not None:
                    hops.append(updown[parent[nxt]][nxt]["link"])
                    nxt = parent[nxt]
                return tuple(reversed(hops))
            queue.append(nxt)
    return None


# ------------------------------------------------------------- dispatch
def routing_priorities(routing, n_lp=2):
    """Lossless priorities a routing's paths use (KSP: 1, but it may deadlock).

    Raises:
        ParameterError: unknown routing or ``n_lp`` outside 1..3.

    >>> routing_priorities("fcplus2l"), routing_priorities("dfksp", n_lp=3)
    (2, 3)
    """
    _check_routing(routing)
    return {"ksp": 1, "dfksp": check_n_lp(n_lp), "fcplus1l": 1, "fcplus2l": 2, "fc": 1}[routing]


def _check_routing(routing):
    if routing not in ROUTINGS:
        raise ParameterError("routing", routing, "one of: " + ", ".join(ROUTINGS))


def routing_paths(graph, pairs, routing, k=32, n_lp=2, max_candidates=None):
    """Paths of a routing for every ToR pair.

    Args:
        graph: a ToR graph.
        pairs: iterable of ``(source, target)`` ToR names.
        routing: one of :data:`ROUTINGS`.
        k: paths per pair (all but ``fc``), >= 1.
        n_lp: lossless priorities for ``dfksp`` (1..3).
        max_candidates: candidate cap of ``dfksp``/``fcplus1l``/``fcplus2l``.

    Returns:
        dict: ``(source, target) -> list of paths``.

    Raises:
        ParameterError: unknown routing, ``k < 1``, ``n_lp`` outside 1..3, bad ToRs.

    >>> from testbed.topologies.fcplus.topology import tor_graph_from_links
    >>> graph = tor_graph_from_links([[1, 2, 3]] * 4, [((0, 3), (1, 2)), ((1, 2), (2, 3)),
    ...                                                ((0, 1), (3, 2)), ((3, 2), (2, 1))])
    >>> paths = routing_paths(graph, [("tor0", "tor2"), ("tor1", "tor3")], "fcplus2l", k=3)
    >>> {pair: sorted(down_up_turns(graph, path) for path in found) for pair, found in paths.items()}
    {('tor0', 'tor2'): [0, 1], ('tor1', 'tor3'): [1, 1]}
    """
    _check_routing(routing)
    check_k(k)
    check_n_lp(n_lp)
    pairs = list(pairs)
    result = {}
    if routing in ("fcplus1l", "fc"):
        updown = up_down_graph(graph)
        for source, target in pairs:
            if routing == "fc":
                result[(source, target)] = fc_edge_disjoint_paths(graph, source, target, updown=updown)
            else:
                result[(source, target)] = fcplus_1l_paths(graph, source, target, k, max_candidates,
                                                           updown=updown)
        return result
    view = _physical_view(graph)
    for source, target in pairs:
        if routing == "ksp":
            result[(source, target)] = k_shortest_paths(graph, source, target, k, view=view)
        else:
            lp = 2 if routing == "fcplus2l" else n_lp
            result[(source, target)] = dfksp_paths(graph, source, target, k, lp, max_candidates, view=view)
    return result


# ------------------------------------------------------- path counting
def up_down_path_counts(graph, max_hops=None):
    """Number of up-down routes between all ToR pairs, by dynamic programming on :func:`up_down_graph`.

    Counts every sequence of links that is an up-down route, up to
    ``max_hops`` hops (None: all; an up-down route has at most ``2(k-1)``).
    This counts walks: a route that passes a ToR twice (possible when a ToR's
    virtual switches sit several layers apart) is counted too;
    :func:`count_simple_up_down_paths` counts only simple paths.

    Returns:
        (names, counts): ToR names in index order and an ``N x N`` numpy array,
        ``counts[i][j]`` = routes from ``names[i]`` to ``names[j]`` (0 on the diagonal).

    >>> from testbed.topologies.fcplus.topology import fc_graph
    >>> names, counts = up_down_path_counts(fc_graph(8, 8, 6, seed=2), max_hops=1)
    >>> int(counts.sum()) == 2 * 8 * 6 // 2
    True
    """
    import numpy as np
    import scipy.sparse as sparse

    updown = up_down_graph(graph)
    names = sorted(graph.nodes, key=lambda name: graph.nodes[name]["index"])
    tor_index = {name: i for i, name in enumerate(names)}
    states = list(updown.nodes)
    state_index = {state: i for i, state in enumerate(states)}
    rows, cols = zip(*((state_index[a], state_index[b]) for a, b in updown.edges)) if updown.number_of_edges() \
        else ((), ())
    step = sparse.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(states), len(states)))
    owner = sparse.csr_matrix((np.ones(len(states)), (range(len(states)), [tor_index[s[0]] for s in states])),
                              shape=(len(states), len(names)))
    current = np.zeros((len(names), len(states)))
    for name in names:
        current[tor_index[name], state_index[_start_state(graph, name)]] = 1.0
    limit = 2 * (graph.graph["k"] - 1) if max_hops is None else max_hops
    total = np.zeros((len(names), len(names)))
    for _ in range(limit):
        current = (step.T @ current.T).T
        if not current.any():
            break
        total += current @ owner
    np.fill_diagonal(total, 0)
    return names, np.rint(total).astype(np.int64)


def count_simple_up_down_paths(graph, source, max_hops=None, updown=None):
    """Simple up-down paths (no ToR twice) from ``source`` to every other ToR, by length, by enumeration.

    Exponential in the path length: fine for N in the hundreds with k <= 10
    (seconds per source), meant for the path-diversity figures (N_P, N_P6,
    N_P4 of seed 001 Tables III and IV) and checks.

    Args:
        graph: a ToR graph.
        source: a ToR name.
        max_hops: longest path counted (None: ``2(k-1)``, the longest up-down path).
        updown: a precomputed :func:`up_down_graph`.

    Returns:
        dict: ToR name -> list ``c`` with ``c[h]`` = paths of exactly ``h`` hops
        (ToRs without any path are left out).

    >>> from testbed.topologies.fcplus.topology import tor_graph_from_links
    >>> graph = tor_graph_from_links([[1, 2, 3]] * 4, [((0, 3), (1, 2)), ((1, 2), (2, 3)),
    ...                                                ((0, 1), (3, 2)), ((3, 2), (2, 1))])
    >>> count_simple_up_down_paths(graph, "tor0")
    {'tor1': [0, 1, 0, 0, 0], 'tor2': [0, 0, 1, 0, 0], 'tor3': [0, 1, 0, 0, 0]}
    """
    updown = up_down_graph(graph) if updown is None else updown
    limit = 2 * (graph.graph["k"] - 1) if max_hops is None else max_hops
    names = list(graph.nodes)
    tor_id = {name: i for i, name in enumerate(names)}
    state_id = {state: i for i, state in enumerate(updown.nodes)}
    # integer adjacency: the enumeration below is the hot loop
    successors = [None] * len(state_id)
    for state, i in state_id.items():
        successors[i] = [(state_id[nxt], tor_id[nxt[0]]) for nxt in updown[state]]
    counts = [[0] * (limit + 1) for _ in names]
    visited = bytearray(len(names))
    visited[tor_id[source]] = 1

    def walk(state, hops):
        hops += 1
        for nxt, tor in successors[state]:
            if visited[tor]:
                continue
            counts[tor][hops] += 1
            if hops < limit:
                visited[tor] = 1
                walk(nxt, hops)
                visited[tor] = 0

    if limit > 0:
        walk(state_id[_start_state(graph, source)], 0)
    return {names[i]: row for i, row in enumerate(counts) if any(row)}


def fc_smallest_k(N, p, s, seed=1):
    """The smallest FC ``k`` whose topology (:func:`~.topology.fc_graph`, same seed) has an up-down path
    between every two ToRs: FC's choice of ``k`` (seed 001, III-C: the smallest or second smallest such k).

    Returns:
        int: that ``k`` (at most ``s/2 + 1``, which always connects).

    >>> fc_smallest_k(52, 32, 18)
    3
    """
    from testbed.topologies.fcplus.topology import fc_graph

    largest = s // 2 + 1
    for k in range(2, largest + 1):
        _, counts = up_down_path_counts(fc_graph(N, p, s, k=k, seed=seed))
        if (counts > 0).sum() == N * (N - 1):
            return k
    return largest  # pragma: no cover - k = s/2 + 1 connects every pair
