"""Channel dependency graphs and deadlock checks for path sets with lossless priorities (seed 001, III-D).

A *channel* is a directed link on one lossless priority: ``((u, w, key),
priority)``, the buffer a PFC-paused packet waits in.  A path makes each of its
channels depend on the next one: a packet holding the buffer of hop ``i``
waits for the buffer of hop ``i + 1`` (on the priority it has after any
down-up turn, :func:`~.routing.hop_priorities`).  PFC deadlock needs a cycle of
such dependencies; a path set whose channel dependency graph (CDG) has no cycle
cannot deadlock.

Priorities only grow along a path, so every cycle lies inside one priority:
:func:`deadlock_cycles` looks for cycles priority by priority.
"""
import networkx as nx

from testbed.errors import ParameterError
from testbed.topologies.fcplus.routing import hop_priorities


def channel_dependency_graph(graph, paths, priorities=True):
    """The channel dependency graph of a path set.

    Args:
        graph: a ToR graph (gives the virtual layers for the priorities).
        paths: an iterable of paths (tuples of hops ``(u, w, key)``).
        priorities: True: hops take the priority of :func:`hop_priorities`
            (+1 at each down-up turn); False: every hop on priority 1 (one
            lossless priority, no transitions, as plain KSP would run).

    Returns:
        networkx.DiGraph: nodes are channels ``((u, w, key), priority)``, an
        edge ``c1 -> c2`` when some path uses ``c2`` right after ``c1``; edge
        attribute ``paths`` counts those paths.

    >>> from testbed.topologies.fcplus.topology import tor_graph_from_links
    >>> graph = tor_graph_from_links([[1, 2, 3]] * 4, [((0, 3), (1, 2)), ((1, 2), (2, 3)),
    ...                                                ((0, 1), (3, 2)), ((3, 2), (2, 1))])
    >>> cdg = channel_dependency_graph(graph, [(("tor0", "tor1", 0), ("tor1", "tor2", 1))])
    >>> list(cdg.edges)
    [((('tor0', 'tor1', 0), 1), (('tor1', 'tor2', 1), 2))]
    """
    cdg = nx.DiGraph()
    for path in paths:
        levels = hop_priorities(graph, path) if priorities else [1] * len(path)
        channels = [(tuple(hop), level) for hop, level in zip(path, levels)]
        cdg.add_nodes_from(channels)
        for first, second in zip(channels, channels[1:]):
            if cdg.has_edge(first, second):
                cdg[first][second]["paths"] += 1
            else:
                cdg.add_edge(first, second, paths=1)
    return cdg


def deadlock_cycles(cdg, max_cycles=10):
    """Cycles of a channel dependency graph, at most one per strongly connected part.

    Args:
        cdg: from :func:`channel_dependency_graph`.
        max_cycles: stop after this many (>= 1).

    Returns:
        list: cycles, each a list of channels ``((u, w, key), priority)`` in
        dependency order (the last depends on the first); empty when the graph
        is acyclic, i.e. the path set is deadlock-free.

    Raises:
        ParameterError: ``max_cycles`` < 1.
    """
    if isinstance(max_cycles, bool) or not isinstance(max_cycles, int) or max_cycles < 1:
        raise ParameterError("max_cycles", max_cycles, "an integer >= 1")
    cycles = []
    components = sorted((sorted(part) for part in nx.strongly_connected_components(cdg) if len(part) > 1),
                        key=lambda part: part[0])
    for part in components:
        edges = nx.find_cycle(cdg.subgraph(part))
        cycles.append([edge[0] for edge in edges])
        if len(cycles) == max_cycles:
            break
    return cycles


def cycles_by_priority(graph, paths, priorities=True, max_cycles=10):
    """Check a path set priority by priority.

    Returns:
        dict: priority -> list of cycles (see :func:`deadlock_cycles`) for every
        priority the paths use; all lists empty means deadlock-free.

    Four ToRs in a ring (link ``i`` joins ``tor<i>`` and ``tor<i+1>``), each
    sending two hops clockwise: the classic cyclic buffer dependency.

    >>> from testbed.topologies.fcplus.topology import tor_graph_from_links
    >>> ring = tor_graph_from_links([[1, 2]] * 4, [((0, 1), (1, 2)), ((1, 1), (2, 2)),
    ...                                           ((2, 1), (3, 2)), ((3, 1), (0, 2))])
    >>> hop = lambda i: (f"tor{i % 4}", f"tor{(i + 1) % 4}", i % 4)
    >>> paths = [(hop(i), hop(i + 1)) for i in range(4)]
    >>> cycles_by_priority(ring, paths, priorities=False)  # doctest: +NORMALIZE_WHITESPACE
    {1: [[(('tor0', 'tor1', 0), 1), (('tor1', 'tor2', 1), 1), (('tor2', 'tor3', 2), 1), (('tor3', 'tor0', 3), 1)]]}

    With lossless priorities the down-up turn in the middle of every path
    (arriving on layer 2, leaving from layer 1 upwards) moves the packet to
    priority 2 and breaks the cycle:

    >>> cycles_by_priority(ring, paths)
    {1: [], 2: []}
    """
    cdg = channel_dependency_graph(graph, paths, priorities)
    levels = sorted({level for _, level in cdg.nodes})
    return {level: deadlock_cycles(cdg.subgraph([c for c in cdg.nodes if c[1] == level]), max_cycles)
            if cdg.number_of_edges() else []
            for level in levels}


def is_deadlock_free(graph, paths, priorities=True):
    """True when the channel dependency graph of ``paths`` has no cycle.

    >>> from testbed.topologies.fcplus.topology import tor_graph_from_links
    >>> line = tor_graph_from_links([[1, 2]] * 3, [((0, 1), (1, 2)), ((1, 1), (2, 2))])
    >>> is_deadlock_free(line, [(("tor0", "tor1", 0), ("tor1", "tor2", 1))])
    True
    """
    return nx.is_directed_acyclic_graph(channel_dependency_graph(graph, paths, priorities))
