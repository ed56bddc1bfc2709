"""Path counts and path dilation of F10's fabrics (seed 002, sections 4 and 5.1), networkx based.

Pure functions on any ``topo.graph()`` (:mod:`testbed.topologies.graph`):
how many shortest paths join hosts (the AB FatTree keeps the standard
FatTree's), how many switches a packet crosses with and without a failed link
and F10's detour (:mod:`testbed.topologies.f10.detours`), the extra hops an
IPv4 TTL shows, and the paper's drawing of a fabric without its doubled
subtrees.

Failed links are given as :func:`testbed.topologies.graph.usable_links` takes
them: node pairs (every parallel link between the two nodes) or
:class:`~testbed.topologies.graph.Link` (one of them).
"""
from collections import Counter, deque

from testbed.errors import ParameterError
from testbed.topologies.f10.detours import downward_host_sets, local_detour, orient_link
from testbed.topologies.graph import child_switches, hosts, is_host, level, node_pair, usable_links


def downward_path_count(graph, top, bottom):
    """Number of strictly descending paths from switch ``top`` to switch ``bottom``."""
    target_level = level(graph, bottom)
    counts = {top: 1}
    frontier = {top}
    total = 0
    while frontier:
        next_frontier = {}
        for node in frontier:
            if node == bottom:
                total += counts[node]
                continue
            if level(graph, node) <= target_level:
                continue
            for child in child_switches(graph, node):
                next_frontier[child] = next_frontier.get(child, 0) + counts[node] * graph.number_of_edges(node, child)
        counts = next_frontier
        frontier = set(next_frontier)
    return total


def shortest_path_counts(graph, source, failed_links=()):
    """Number of shortest paths (hosts never transit) from ``source`` to every reachable node.

    Parallel links count as distinct paths.

    Args:
        graph: topology multigraph.
        source: the node the paths start at.
        failed_links: links that are down: node pairs or :class:`~testbed.topologies.graph.Link`.

    Returns:
        dict: node -> ``(distance in links, number of shortest paths)``.
    """
    up = Counter(node_pair(u, v) for u, v, _ in usable_links(graph, failed_links))
    distance = {source: 0}
    count = {source: 1}
    queue = deque([source])
    while queue:
        node = queue.popleft()
        if node != source and is_host(graph, node):
            continue
        for neighbour in graph.neighbors(node):
            multiplicity = up[node_pair(node, neighbour)]
            if not multiplicity:
                continue
            if neighbour not in distance:
                distance[neighbour] = distance[node] + 1
                count[neighbour] = count[node] * multiplicity
                queue.append(neighbour)
            elif distance[neighbour] == distance[node] + 1:
                count[neighbour] += count[node] * multiplicity
    return {node: (distance[node], count[node]) for node in distance}


def _distance(graph, source, target, failed_links=()):
    """Links on a shortest path from ``source`` to ``target`` (hosts never transit), or None."""
    return shortest_path_counts(graph, source, failed_links).get(target, (None, 0))[0]


def host_pair_path_counts(graph):
    """``{(h1, h2): (distance, shortest path count)}`` for every ordered pair of distinct hosts."""
    every_host = hosts(graph)
    result = {}
    for source in every_host:
        reach = shortest_path_counts(graph, source)
        for target in every_host:
            if target != source and target in reach:
                result[(source, target)] = reach[target]
    return result


# ------------------------------------------------------------ path dilation
def switch_hops(graph, src, dst, failed_links=()):
    """Switches a packet crosses on a shortest path from host ``src`` to host ``dst``.

    This is what an IPv4 TTL counts when every switch decrements it once.

    Args:
        graph: topology multigraph.
        src: source host.
        dst: destination host.
        failed_links: links that are down: node pairs or :class:`~testbed.topologies.graph.Link`.

    Returns:
        int or None: the number of switches, or None when ``dst`` is unreachable.

    Raises:
        ParameterError: if ``src`` or ``dst`` is not a host of the graph.

    >>> from testbed.topologies.ab_fattree import ABFatTree
    >>> g = ABFatTree(k=4).graph()
    >>> switch_hops(g, "h1", "h2"), switch_hops(g, "h1", "h3"), switch_hops(g, "h1", "h5")
    (1, 3, 5)
    """
    for field, host in (("src", src), ("dst", dst)):
        if host not in graph or not is_host(graph, host):
            raise ParameterError(field, host, "a host of the topology")
    if src == dst:
        return 0
    distance = _distance(graph, src, dst, failed_links)
    return None if distance is None else distance - 1


def host_switch_hops(graph, failed_links=()):
    """:func:`switch_hops` for every ordered pair of distinct hosts.

    Returns:
        dict: ``{(src, dst): switches crossed}`` for the pairs that can reach each other.
    """
    every_host = hosts(graph)
    result = {}
    for src in every_host:
        for dst in every_host:
            if src != dst:
                hops = switch_hops(graph, src, dst, failed_links)
                if hops is not None:
                    result[(src, dst)] = hops
    return result


def extra_hops_from_ttl(sent_ttl, arrived_ttl, expected_switches):
    """Extra switches a packet crossed, from the TTL it was sent with and the TTL that arrived.

    Every switch decrements the TTL once, so the packet crossed
    ``sent_ttl - arrived_ttl`` switches; the path dilation is that minus the
    switches of the shortest path.

    Args:
        sent_ttl: TTL the sender set (1..255).
        arrived_ttl: TTL the receiver saw (0..sent_ttl).
        expected_switches: switches on the shortest path (:func:`switch_hops`).

    Returns:
        int: the extra switches (0 on a shortest path, negative never for a
        consistent input).

    Raises:
        ParameterError: a TTL outside 0..255, an arrived TTL above the sent one,
            or fewer switches crossed than the shortest path has.

    >>> extra_hops_from_ttl(64, 59, 5)
    0
    >>> extra_hops_from_ttl(64, 57, 5)
    2
    """
    for field, value in (("sent_ttl", sent_ttl), ("arrived_ttl", arrived_ttl)):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 255:
            raise ParameterError(field, value, "an integer from 0 to 255")
    if arrived_ttl > sent_ttl:
        raise ParameterError("arrived_ttl", arrived_ttl, f"at most sent_ttl={sent_ttl}")
    crossed = sent_ttl - arrived_ttl
    if crossed < expected_switches:
        raise ParameterError("arrived_ttl", arrived_ttl,
                             f"at most {sent_ttl - expected_switches} (the shortest path crosses "
                             f"{expected_switches} switches)")
    return crossed - expected_switches


def detoured_switch_hops(graph, src, dst, failed_link, host_sets=None):
    """Switches crossed by a packet from ``src`` to ``dst`` that meets ``failed_link`` and takes F10's detour.

    The packet follows a shortest path to the failed link's parent ``u``, the
    :func:`local_detour` from ``u`` to ``w``, then a shortest path from ``w``
    down to ``dst``.

    Args:
        graph: topology multigraph.
        src: source host.
        dst: destination host below the failed link's child.
        failed_link: ``(a, b)`` or ``(a, b, key)``: the failed downward link.
        host_sets: optional precomputed :func:`downward_host_sets`.

    Returns:
        tuple: ``(switches crossed, switches on the failure-free shortest path)``.

    Raises:
        ParameterError: unknown hosts or link, ``dst`` not below the link's
            child, no shortest ``src -> dst`` path through the link, or no detour.

    >>> from testbed.topologies.ab_fattree import ABFatTree
    >>> detoured_switch_hops(ABFatTree(k=4).graph(), "h5", "h1", ("c0", "a0_0"))
    (7, 5)
    """
    host_sets = host_sets if host_sets is not None else downward_host_sets(graph)
    u, v, _key = orient_link(graph, failed_link)
    expected = switch_hops(graph, src, dst)
    if dst not in host_sets[v]:
        raise ParameterError("dst", dst, f"a host below {v}", "the failed link does not lead to it")
    to_u = _distance(graph, src, u)
    from_v = _distance(graph, v, dst)
    if to_u is None or from_v is None or to_u + 1 + from_v != expected + 1:
        raise ParameterError("failed_link", failed_link, f"a link on a shortest path from {src} to {dst}")
    detour = local_detour(graph, failed_link, host_sets)
    if detour is None:
        raise ParameterError("failed_link", failed_link, "a link F10 can detour around (above the edge tier)")
    _scheme, path, _extra = detour
    from_w = _distance(graph, path[-1], dst)
    return (to_u - 1) + len(path) + (from_w - 1), expected


def omit_doubled_subtrees(graph):
    """The graph as the F10 paper draws it: only the first ``p`` of the ``2p`` subtrees below the cores.

    Seed 002, footnote 2: "we omit from several of our figures the doubled
    subtrees generated by folding the root uplinks into downlinks".  The kept
    subtrees are those with the lowest locations (positions ``0..p-1``: types
    A, B, A, ... in an AB FatTree); the cores keep their links to them only.

    Args:
        graph: FatTree or AB FatTree multigraph (switch attributes ``f10_level``
            and ``location``).

    Returns:
        networkx.MultiGraph: a new graph (the input is not modified).

    Raises:
        ParameterError: for a graph without F10 levels.

    >>> from testbed.topologies.ab_fattree import ABFatTree
    >>> half = omit_doubled_subtrees(ABFatTree(k=6).graph())
    >>> sorted({a["pod"] for _, a in half.nodes(data=True) if "pod" in a})
    [0, 1, 2]
    >>> half.degree("c0")
    3
    """
    levels = [attrs.get("f10_level") for node, attrs in graph.nodes(data=True) if not is_host(graph, node)]
    if not levels or any(level is None for level in levels):
        raise ParameterError("graph", graph.graph.get("kind"), "a FatTree or AB FatTree graph (f10_level)")
    top = max(levels)
    host_sets = downward_host_sets(graph)
    tops = sorted({(attrs["location"], host_sets[node]) for node, attrs in graph.nodes(data=True)
                   if attrs.get("f10_level") == top - 1}, key=lambda item: item[0])
    keep_count = len(tops) // 2
    dropped = frozenset().union(*(hosts for _location, hosts in tops[keep_count:]))
    result = graph.copy()
    result.remove_nodes_from([node for node in graph.nodes
                              if graph.nodes[node].get("f10_level") != top and host_sets[node] <= dropped])
    return result
