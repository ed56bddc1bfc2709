"""F10 routing properties on a topology graph (seed 002, section 5.1), networkx based.

These functions work on any ``topo.graph()`` whose nodes carry ``role`` and
``level`` (hosts level 0, tiers counted upwards), so the same checks run on a
standard FatTree and an AB FatTree.

Terms:

* a *downward link* joins a parent ``u`` (higher level) to a child switch ``v``;
* the *subtree* of ``v`` is the set of hosts reachable from ``v`` going strictly
  down; its *roots* are the switches at ``v``'s level with the same host set;
* the *failure group* of ``v`` is the set of ``v``'s parents (F10's ``(t, j)``:
  every parent of root ``j`` of a type-``t`` subtree).

F10 reroutes at the parent ``u`` of a failed downward link assuming the whole
child ``v`` may have failed (``assume_node_failure=True``), so a detour must
reach another root of ``v``'s subtree without touching ``v``:

* **Scheme 1** (:func:`scheme1_detour`): ``u -> x -> u' -> w``: down to a child
  ``x != v``, up to a parent ``u' != u`` of ``x`` outside ``v``'s failure group,
  down to a root ``w != v`` of ``v``'s subtree; two hops more than ``u -> v``.
  It exists for every such link of an AB FatTree and for none of a standard
  FatTree.
* **Scheme 2** (:func:`scheme2_detour`): the +4-hop detour through a
  same-type child and its child; :func:`shortest_local_detour_hops` measures
  the shortest detour of any shape (+4 in a standard FatTree).

Edge (ToR) switches are the only root of their subtree, so under the
whole-node assumption no detour can exist for an aggregation-to-edge link; with
``assume_node_failure=False`` only the link is avoided and ``v`` itself is a
valid target (there both FatTree variants have +2 detours through a sibling).
"""
from collections import deque

from testbed.errors import ParameterError


def _level(graph, node):
    """Level attribute of ``node``."""
    return graph.nodes[node]["level"]


def _is_host(graph, node):
    """True when ``node`` is a host."""
    return graph.nodes[node].get("role") == "host"


def downward_host_sets(graph):
    """For every node, the frozenset of hosts reachable by strictly descending levels.

    Hosts map to themselves.  Computed bottom-up once, O(nodes + links).

    Returns:
        dict: node -> frozenset of host names.
    """
    sets = {}
    for node in sorted(graph.nodes, key=lambda n: _level(graph, n)):
        if _is_host(graph, node):
            sets[node] = frozenset([node])
            continue
        hosts = set()
        for neighbour in graph.neighbors(node):
            if _level(graph, neighbour) < _level(graph, node):
                hosts |= sets[neighbour]
        sets[node] = frozenset(hosts)
    return sets


def orient_link(graph, link):
    """Return ``(parent, child, key)`` for a link given as ``(a, b)`` or ``(a, b, key)``.

    Raises:
        ParameterError: if the link does not exist or joins nodes of equal level.
    """
    a, b = link[0], link[1]
    key = link[2] if len(link) > 2 else None
    if not graph.has_edge(a, b) or (key is not None and not graph.has_edge(a, b, key)):
        raise ParameterError("failed_link", link, "a link of the topology")
    if key is None:
        key = min(graph[a][b])
    if _level(graph, a) == _level(graph, b):
        raise ParameterError("failed_link", link, "a link between different levels")
    return (a, b, key) if _level(graph, a) > _level(graph, b) else (b, a, key)


def downward_links(graph, include_host_links=False):
    """Every downward link as ``(parent, child, key)``, sorted; host links only when asked."""
    links = []
    for a, b, key in graph.edges(keys=True):
        parent, child, key = orient_link(graph, (a, b, key))
        if include_host_links or not _is_host(graph, child):
            links.append((parent, child, key))
    return sorted(links, key=lambda item: (str(item[0]), str(item[1]), item[2]))


def subtree_roots(graph, node, host_sets=None):
    """Switches at ``node``'s level whose downward host set equals ``node``'s (``node`` included)."""
    host_sets = host_sets if host_sets is not None else downward_host_sets(graph)
    level = _level(graph, node)
    return sorted(n for n in graph.nodes
                  if _level(graph, n) == level and not _is_host(graph, n) and host_sets[n] == host_sets[node])


def parents(graph, node):
    """Neighbours one level above ``node`` (sorted)."""
    level = _level(graph, node)
    return sorted({n for n in graph.neighbors(node) if _level(graph, n) == level + 1})


def children(graph, node):
    """Switch neighbours one level below ``node`` (sorted)."""
    level = _level(graph, node)
    return sorted({n for n in graph.neighbors(node) if _level(graph, n) == level - 1 and not _is_host(graph, n)})


def failure_group(graph, node):
    """The failure group of ``node``: the set of its parents (frozenset)."""
    return frozenset(parents(graph, node))


def _targets(graph, child, assume_node_failure, host_sets):
    """Roots of ``child``'s subtree a detour may end at."""
    roots = subtree_roots(graph, child, host_sets)
    if assume_node_failure:
        roots = [root for root in roots if root != child]
    return set(roots)


def _detour_ends(graph, failed_link, assume_node_failure, host_sets):
    """``(u, v, targets)`` of a failed downward link ``u -> v``, or None when no detour can exist.

    ``targets`` are the roots of ``v``'s subtree a detour may end at; there is no
    detour when ``v`` is a host or no such root is left.

    Raises:
        ParameterError: if the link does not exist or is not between levels.
    """
    u, v, _key = orient_link(graph, failed_link)
    if _is_host(graph, v):
        return None
    host_sets = host_sets if host_sets is not None else downward_host_sets(graph)
    targets = _targets(graph, v, assume_node_failure, host_sets)
    if not targets:
        return None
    return u, v, targets


def scheme1_detour(graph, failed_link, assume_node_failure=True, host_sets=None):
    """F10 Scheme 1: a +2-hop detour ``[u, x, u', w]`` at the parent ``u`` of a failed downward link.

    ``x`` is a child of ``u`` other than the failed child ``v``; ``u'`` a parent
    of ``x`` other than ``u`` and (under the whole-node assumption) outside
    ``v``'s failure group; ``w`` a root of ``v``'s subtree reached from ``u'``
    (``w != v`` under the whole-node assumption).  Children whose subtree type
    differs from ``v``'s are tried first, as F10 picks a type-B child for a
    type-A failure.

    Args:
        graph: topology multigraph (``topo.graph()``).
        failed_link: ``(a, b)`` or ``(a, b, key)``, in either order.
        assume_node_failure: treat the whole child ``v`` as failed (F10's rule).
        host_sets: optional precomputed :func:`downward_host_sets`.

    Returns:
        list[str] or None: the path from ``u`` to ``w`` (3 hops replacing the
        1-hop ``u -> v``), or None when no Scheme-1 detour exists.

    Raises:
        ParameterError: if the link does not exist or is not between levels.
    """
    ends = _detour_ends(graph, failed_link, assume_node_failure, host_sets)
    if ends is None:
        return None
    u, v, targets = ends
    group = failure_group(graph, v) if assume_node_failure else frozenset()
    v_type = graph.nodes[v].get("subtree_type")
    candidates = [x for x in children(graph, u) if x != v]
    candidates.sort(key=lambda x: (graph.nodes[x].get("subtree_type") == v_type, x))
    for x in candidates:
        for u2 in parents(graph, x):
            if u2 == u or u2 in group:
                continue
            for w in sorted(targets):
                if graph.has_edge(u2, w):
                    return [u, x, u2, w]
    return None


def scheme2_detour(graph, failed_link, host_sets=None):
    """F10 Scheme 2: a +4-hop detour ``[u, y, z, y', u', w]`` at the parent ``u`` of a failed downward link.

    ``u`` goes down to a child ``y != v``, down again to a child ``z`` of ``y``,
    up to another parent ``y'`` of ``z`` (a sibling of ``y``), up to a parent
    ``u'`` of ``y'`` outside ``v``'s failure group, and down to a root
    ``w != v`` of ``v``'s subtree.  This works in a standard FatTree too; F10
    uses it when Scheme 1 has no working first hop.  Children of the same
    subtree type as ``v`` are tried first, as in the paper.

    Args:
        graph: topology multigraph.
        failed_link: ``(a, b)`` or ``(a, b, key)``.
        host_sets: optional precomputed :func:`downward_host_sets`.

    Returns:
        list[str] or None: the 5-hop path from ``u`` to ``w``, or None.
    """
    ends = _detour_ends(graph, failed_link, True, host_sets)
    if ends is None:
        return None
    u, v, targets = ends
    group = failure_group(graph, v)
    v_type = graph.nodes[v].get("subtree_type")
    candidates = [y for y in children(graph, u) if y != v]
    candidates.sort(key=lambda y: (graph.nodes[y].get("subtree_type") != v_type, y))
    for y in candidates:
        for z in children(graph, y):
            for y2 in parents(graph, z):
                if y2 == y:
                    continue
                for u2 in parents(graph, y2):
                    if u2 == u or u2 in group:
                        continue
                    for w in sorted(targets):
                        if graph.has_edge(u2, w):
                            return [u, y, z, y2, u2, w]
    return None


def shortest_local_detour_hops(graph, failed_link, assume_node_failure=True, host_sets=None):
    """Extra hops of the shortest detour from the failure's parent ``u`` back into ``v``'s subtree.

    The detour runs over switches only, avoids the failed link (and ``v`` under
    the whole-node assumption) and ends at a root of ``v``'s subtree; the result
    is its length minus the one hop ``u -> v`` it replaces.

    Args:
        graph: topology multigraph.
        failed_link: ``(a, b)`` or ``(a, b, key)``.
        assume_node_failure: avoid the whole child ``v``, not only the link.
        host_sets: optional precomputed :func:`downward_host_sets`.

    Returns:
        int or None: extra hops (2 for a Scheme-1 detour, 4 for Scheme 2), or
        None when no detour exists.
    """
    ends = _detour_ends(graph, failed_link, assume_node_failure, host_sets)
    if ends is None:
        return None
    u, v, targets = ends
    parallel = len(graph[u][v])
    distance = {u: 0}
    queue = deque([u])
    while queue:
        node = queue.popleft()
        if node in targets:
            return distance[node] - 1
        for neighbour in graph.neighbors(node):
            if neighbour in distance or _is_host(graph, neighbour):
                continue
            if assume_node_failure and neighbour == v:
                continue
            if {node, neighbour} == {u, v} and parallel == 1:
                continue  # the failed link (parallel links would still work)
            distance[neighbour] = distance[node] + 1
            queue.append(neighbour)
    return None


def downward_path_count(graph, top, bottom):
    """Number of strictly descending paths from switch ``top`` to switch ``bottom``."""
    target_level = _level(graph, bottom)
    counts = {top: 1}
    frontier = {top}
    total = 0
    while frontier:
        next_frontier = {}
        for node in frontier:
            if node == bottom:
                total += counts[node]
                continue
            if _level(graph, node) <= target_level:
                continue
            for neighbour in graph.neighbors(node):
                if _level(graph, neighbour) == _level(graph, node) - 1 and not _is_host(graph, neighbour):
                    next_frontier[neighbour] = next_frontier.get(neighbour, 0) + \
                        counts[node] * graph.number_of_edges(node, neighbour)
        counts = next_frontier
        frontier = set(next_frontier)
    return total


def shortest_path_counts(graph, source, failed_links=()):
    """Number of shortest paths (hosts never transit) from ``source`` to every reachable node.

    Parallel links count as distinct paths.

    Args:
        graph: topology multigraph.
        source: the node the paths start at.
        failed_links: links that are down, as ``(a, b)`` pairs (every parallel
            link between them) or ``(a, b, key)``.

    Returns:
        dict: node -> ``(distance in links, number of shortest paths)``.
    """
    down = _failed_pairs(graph, failed_links)
    distance = {source: 0}
    count = {source: 1}
    queue = deque([source])
    while queue:
        node = queue.popleft()
        if node != source and _is_host(graph, node):
            continue
        for neighbour in graph.neighbors(node):
            multiplicity = _links_up(graph, node, neighbour, down)
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
    hosts = sorted(n for n in graph.nodes if _is_host(graph, n))
    result = {}
    for source in hosts:
        reach = shortest_path_counts(graph, source)
        for target in hosts:
            if target != source and target in reach:
                result[(source, target)] = reach[target]
    return result


# ------------------------------------------------------------ local detours and path dilation
def local_detour(graph, failed_link, host_sets=None):
    """The detour F10 takes at the parent of a failed downward link: Scheme 1 if it exists, else Scheme 2.

    F10 (section 5.1) tries the +2-hop Scheme 1 first and falls back to the
    +4-hop Scheme 2 when Scheme 1 is blocked; on a standard FatTree Scheme 1
    never exists, so every such detour is a Scheme 2 detour.  The whole child
    is assumed failed, as F10's parent must.

    Args:
        graph: topology multigraph.
        failed_link: ``(a, b)`` or ``(a, b, key)``, in either order.
        host_sets: optional precomputed :func:`downward_host_sets`.

    Returns:
        tuple or None: ``(scheme, path, extra_hops)`` with ``scheme`` 1 or 2,
        ``path`` the switches from the parent ``u`` to the root ``w`` of the
        child's subtree where normal routing resumes, and ``extra_hops`` its
        length minus the one hop ``u -> v`` it replaces; None when neither
        scheme has a detour (for example an aggregation-to-edge link).

    Raises:
        ParameterError: if the link does not exist or is not between levels.

    >>> from testbed.topologies.ab_fattree import ABFatTree
    >>> from testbed.topologies.fattree import FatTree
    >>> local_detour(ABFatTree(k=4).graph(), ("c0", "a0_0"))
    (1, ['c0', 'a1_0', 'c2', 'a0_1'], 2)
    >>> local_detour(FatTree(k=4).graph(), ("c0", "a0_0"))
    (2, ['c0', 'a1_0', 'e1_0', 'a1_1', 'c2', 'a0_1'], 4)
    """
    host_sets = host_sets if host_sets is not None else downward_host_sets(graph)
    path = scheme1_detour(graph, failed_link, host_sets=host_sets)
    if path is not None:
        return 1, path, len(path) - 2
    path = scheme2_detour(graph, failed_link, host_sets=host_sets)
    if path is not None:
        return 2, path, len(path) - 2
    return None


def switch_hops(graph, src, dst, failed_links=()):
    """Switches a packet crosses on a shortest path from host ``src`` to host ``dst``.

    This is what an IPv4 TTL counts when every switch decrements it once.

    Args:
        graph: topology multigraph.
        src: source host.
        dst: destination host.
        failed_links: links that are down, as ``(a, b)`` pairs (every parallel
            link between them) or ``(a, b, key)``.

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
        if host not in graph or not _is_host(graph, host):
            raise ParameterError(field, host, "a host of the topology")
    if src == dst:
        return 0
    distance = _distance(graph, src, dst, failed_links)
    return None if distance is None else distance - 1


def _failed_pairs(graph, failed_links):
    """``{frozenset pair: set of failed keys or None (all)}`` from ``(a, b)`` / ``(a, b, key)`` links."""
    down = {}
    for link in failed_links:
        pair = frozenset(link[:2])
        if len(link) > 2:
            keys = down.setdefault(pair, set())
            if keys is not None:
                keys.add(link[2])
        else:
            down[pair] = None
    return down


def _links_up(graph, a, b, down):
    """How many of the parallel links between ``a`` and ``b`` are up (``down`` as :func:`_failed_pairs`)."""
    keys = down.get(frozenset((a, b)), set())
    if keys is None:
        return 0
    return sum(1 for key in graph[a][b] if key not in keys)


def host_switch_hops(graph, failed_links=()):
    """:func:`switch_hops` for every ordered pair of distinct hosts.

    Returns:
        dict: ``{(src, dst): switches crossed}`` for the pairs that can reach each other.
    """
    hosts = sorted(n for n in graph.nodes if _is_host(graph, n))
    result = {}
    for src in hosts:
        for dst in hosts:
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
    levels = [attrs.get("f10_level") for node, attrs in graph.nodes(data=True) if not _is_host(graph, node)]
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
