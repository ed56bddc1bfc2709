"""F10's local rerouting around a failed downward link (seed 002, section 5.1), on a topology graph.

Pure functions on any ``topo.graph()`` whose nodes carry ``role`` and
``level`` (:mod:`testbed.topologies.graph`), so the same rules hold on a
standard FatTree and an AB FatTree.  This is the one detour algorithm: the
controller installs :func:`detour_candidates` (controllers/f10/routes.py), and
:func:`scheme1_detour`, :func:`scheme2_detour` and :func:`local_detour` follow
those candidates to the path a packet takes.

Terms:

* a *downward link* joins a parent ``u`` (one level higher) to a child ``v``;
* the *subtree* of ``v`` is the set of hosts reachable from ``v`` going strictly
  down; its *roots* are the switches at ``v``'s level with the same host set;
* the *failure group* of ``v`` is the set of ``v``'s parents (F10's ``(t, j)``:
  every parent of root ``j`` of a type-``t`` subtree).

F10 reroutes at the parent ``u`` of a failed downward link assuming the whole
child ``v`` may have failed, so a detour must reach another root ``w`` of
``v``'s subtree without touching ``v``:

* **Scheme 1** (+2 hops, ``u -> x -> u' -> w``): down to a child ``x != v`` of
  the other subtree type that has a parent ``u' != u`` outside ``v``'s failure
  group, up to ``u'``, down to ``w``.  It exists for every such link of an AB
  FatTree and for none of a standard FatTree.
* **Scheme 2** (+4 hops, ``u -> y -> z -> y' -> u' -> w``): down to a child
  ``y != v`` of ``v``'s subtree type, down to a child ``z`` of ``y``, up to
  another parent ``y'`` of ``z``, up to a parent ``u'`` of ``y'`` outside the
  failure group, down to ``w``.  F10 uses it when Scheme 1 has no candidate.
* ``v`` an edge switch (the only root of its subtree) or a host: no detour
  (pushback's job).

>>> from testbed.topologies.ab_fattree import ABFatTree
>>> from testbed.topologies.fattree import FatTree
>>> detour_candidates(ABFatTree(k=4).graph(), "c0", "a0_0")
(1, ['a1_0', 'a3_0'])
>>> detour_candidates(FatTree(k=4).graph(), "c0", "a0_0")
(2, ['a1_0', 'a2_0', 'a3_0'])
>>> detour_candidates(FatTree(k=4).graph(), "a0_0", "e0_0")
(0, [])
"""
from collections import deque

from testbed.errors import ParameterError
from testbed.topologies.graph import child_switches, is_host, level, parents

SCHEME_NONE, SCHEME_1, SCHEME_2 = 0, 1, 2


def downward_host_sets(graph):
    """For every node, the frozenset of hosts reachable by strictly descending levels.

    Hosts map to themselves.  Computed bottom-up once, O(nodes + links).

    Returns:
        dict: node -> frozenset of host names.

    >>> from testbed.topologies.fattree import FatTree
    >>> sorted(downward_host_sets(FatTree(k=4).graph())["a0_0"])
    ['h1', 'h2', 'h3', 'h4']
    """
    sets = {}
    for node in sorted(graph.nodes, key=lambda n: level(graph, n)):
        if is_host(graph, node):
            sets[node] = frozenset([node])
            continue
        below = set()
        for neighbour in graph.neighbors(node):
            if level(graph, neighbour) < level(graph, node):
                below |= sets[neighbour]
        sets[node] = frozenset(below)
    return sets


def orient_link(graph, link):
    """Return ``(parent, child, key)`` for a link given as ``(a, b)`` or ``(a, b, key)``, in either order.

    Without a key the lowest key between the two nodes is meant.

    Raises:
        ParameterError: if the link does not exist or joins nodes of equal level.

    >>> from testbed.topologies.fattree import FatTree
    >>> orient_link(FatTree(k=4).graph(), ("e0_0", "a0_0"))
    ('a0_0', 'e0_0', 1)
    """
    a, b = link[0], link[1]
    key = link[2] if len(link) > 2 else None
    if not graph.has_edge(a, b) or (key is not None and not graph.has_edge(a, b, key)):
        raise ParameterError("failed_link", link, "a link of the topology")
    if key is None:
        key = min(graph[a][b])
    if level(graph, a) == level(graph, b):
        raise ParameterError("failed_link", link, "a link between different levels")
    return (a, b, key) if level(graph, a) > level(graph, b) else (b, a, key)


def downward_links(graph, include_host_links=False):
    """Every downward link as ``(parent, child, key)``, sorted; host links only when asked."""
    links = []
    for a, b, key in graph.edges(keys=True):
        parent, child, key = orient_link(graph, (a, b, key))
        if include_host_links or not is_host(graph, child):
            links.append((parent, child, key))
    return sorted(links, key=lambda item: (str(item[0]), str(item[1]), item[2]))


def subtree_roots(graph, node, host_sets=None):
    """Switches at ``node``'s level whose downward host set equals ``node``'s (``node`` included), sorted."""
    host_sets = host_sets if host_sets is not None else downward_host_sets(graph)
    tier = level(graph, node)
    return sorted(n for n in graph.nodes
                  if level(graph, n) == tier and not is_host(graph, n) and host_sets[n] == host_sets[node])


def failure_group(graph, node):
    """The failure group of ``node``: the set of its parents (frozenset)."""
    return frozenset(parents(graph, node))


def _other_children(graph, switch, child):
    """``switch``'s child switches but ``child``, and ``child``'s subtree type.

    Raises:
        ParameterError: ``child`` is not a child switch of ``switch``.
    """
    siblings = child_switches(graph, switch)
    if child not in siblings:
        raise ParameterError("child", child, f"a child switch of {switch}")
    return [other for other in siblings if other != child], graph.nodes[child].get("subtree_type")


def scheme1_candidates(graph, switch, child):
    """Scheme 1's first hops: children of ``switch`` of another subtree type than ``child``
    with a parent outside ``child``'s failure group (and other than ``switch``), sorted.

    Raises:
        ParameterError: ``child`` is not a child switch of ``switch``.
    """
    others, child_type = _other_children(graph, switch, child)
    if not child_switches(graph, child):
        return []
    blocked = failure_group(graph, child) | {switch}
    return [other for other in others if graph.nodes[other].get("subtree_type") != child_type
            and set(parents(graph, other)) - blocked]


def scheme2_candidates(graph, switch, child):
    """Scheme 2's first hops: children of ``switch`` of ``child``'s subtree type that have children, sorted.

    Raises:
        ParameterError: ``child`` is not a child switch of ``switch``.
    """
    others, child_type = _other_children(graph, switch, child)
    if not child_switches(graph, child):
        return []
    return [other for other in others if graph.nodes[other].get("subtree_type") == child_type
            and child_switches(graph, other)]


def detour_candidates(graph, switch, child):
    """The detour next hops of ``switch`` when its downward link to ``child`` (a switch) is down.

    Args:
        graph: the topology multigraph.
        switch: the parent.
        child: the child switch whose subtree is to be reached.

    Returns:
        tuple: ``(scheme, [candidate child switches])``: Scheme 1 candidates when there
        are any, else Scheme 2 candidates, else ``(SCHEME_NONE, [])`` (``child`` is an
        edge switch, the only root of its subtree).

    Raises:
        ParameterError: ``child`` is not a child switch of ``switch``.
    """
    candidates = scheme1_candidates(graph, switch, child)
    if candidates:
        return SCHEME_1, candidates
    candidates = scheme2_candidates(graph, switch, child)
    if candidates:
        return SCHEME_2, candidates
    return SCHEME_NONE, []


def _detour_ends(graph, failed_link, host_sets):
    """``(u, v, targets)`` of a failed downward link ``u -> v``, or None when ``v`` is a host.

    ``targets`` are the roots of ``v``'s subtree but ``v``: where a detour may end.

    Raises:
        ParameterError: if the link does not exist or is not between levels.
    """
    u, v, _key = orient_link(graph, failed_link)
    if is_host(graph, v):
        return None
    host_sets = host_sets if host_sets is not None else downward_host_sets(graph)
    return u, v, set(subtree_roots(graph, v, host_sets)) - {v}


def _down_to_target(graph, u2, u, v, targets):
    """A root of ``v``'s subtree that ``u2`` (outside ``v``'s failure group, not ``u``) reaches down, or None."""
    if u2 == u or u2 in failure_group(graph, v):
        return None
    return next((w for w in sorted(targets) if graph.has_edge(u2, w)), None)


def _scheme1_climbs(graph, x):
    """Scheme 1 from its first hop ``x``: ``([x], u')`` for every parent ``u'`` of ``x``."""
    for u2 in parents(graph, x):
        yield [x], u2


def _scheme2_climbs(graph, y):
    """Scheme 2 from its first hop ``y``: ``([y, z, y'], u')`` down to a child ``z``, up to its other
    parents ``y'`` and their parents ``u'``."""
    for z in child_switches(graph, y):
        for y2 in parents(graph, z):
            if y2 != y:
                for u2 in parents(graph, y2):
                    yield [y, z, y2], u2


def _first_detour(graph, failed_link, host_sets, candidates, climbs):
    """The first path ``[u, hops..., u', w]`` of one scheme: its ``candidates`` in order, each one's
    ``climbs`` in order, the first ``u'`` that reaches a root ``w`` of the child's subtree."""
    ends = _detour_ends(graph, failed_link, host_sets)
    if ends is None:
        return None
    u, v, targets = ends
    for first in candidates(graph, u, v):
        for hops, u2 in climbs(graph, first):
            w = _down_to_target(graph, u2, u, v, targets)
            if w is not None:
                return [u, *hops, u2, w]
    return None


def scheme1_detour(graph, failed_link, host_sets=None):
    """F10 Scheme 1: the +2-hop detour ``[u, x, u', w]`` at the parent ``u`` of a failed downward link.

    ``x`` is the first of :func:`scheme1_candidates` with a parent ``u'`` that
    reaches a root ``w != v`` of ``v``'s subtree.

    Args:
        graph: topology multigraph (``topo.graph()``).
        failed_link: ``(a, b)`` or ``(a, b, key)``, in either order.
        host_sets: optional precomputed :func:`downward_host_sets`.

    Returns:
        list[str] or None: the path from ``u`` to ``w`` (3 hops replacing the
        1-hop ``u -> v``), or None when no Scheme-1 detour exists.

    Raises:
        ParameterError: if the link does not exist or is not between levels.

    >>> from testbed.topologies.ab_fattree import ABFatTree
    >>> scheme1_detour(ABFatTree(k=4).graph(), ("c0", "a0_0"))
    ['c0', 'a1_0', 'c2', 'a0_1']
    """
    return _first_detour(graph, failed_link, host_sets, scheme1_candidates, _scheme1_climbs)


def scheme2_detour(graph, failed_link, host_sets=None):
    """F10 Scheme 2: the +4-hop detour ``[u, y, z, y', u', w]`` at the parent ``u`` of a failed downward link.

    ``y`` is the first of :func:`scheme2_candidates` with a child ``z``, another
    parent ``y'`` of ``z`` and a parent ``u'`` of ``y'`` that reaches a root
    ``w != v`` of ``v``'s subtree.  This works in a standard FatTree too.

    Args:
        graph: topology multigraph.
        failed_link: ``(a, b)`` or ``(a, b, key)``.
        host_sets: optional precomputed :func:`downward_host_sets`.

    Returns:
        list[str] or None: the 5-hop path from ``u`` to ``w``, or None.

    Raises:
        ParameterError: if the link does not exist or is not between levels.

    >>> from testbed.topologies.fattree import FatTree
    >>> scheme2_detour(FatTree(k=4).graph(), ("c0", "a0_0"))
    ['c0', 'a1_0', 'e1_0', 'a1_1', 'c2', 'a0_1']
    """
    return _first_detour(graph, failed_link, host_sets, scheme2_candidates, _scheme2_climbs)


def local_detour(graph, failed_link, host_sets=None):
    """The detour F10 takes at the parent of a failed downward link: Scheme 1 if it exists, else Scheme 2.

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
    >>> local_detour(FatTree(k=4).graph(), ("a0_0", "e0_0")) is None
    True
    """
    host_sets = host_sets if host_sets is not None else downward_host_sets(graph)
    for scheme, detour in ((SCHEME_1, scheme1_detour), (SCHEME_2, scheme2_detour)):
        path = detour(graph, failed_link, host_sets=host_sets)
        if path is not None:
            return scheme, path, len(path) - 2
    return None


def shortest_local_detour_hops(graph, failed_link, assume_node_failure=True, host_sets=None):
    """Extra hops of the shortest detour of any shape from the failure's parent ``u`` back into ``v``'s subtree.

    A yardstick for the schemes, not a route: the detour runs over switches
    only, avoids the failed link (and ``v`` under the whole-node assumption)
    and ends at a root of ``v``'s subtree (``v`` itself allowed when only the
    link is avoided); the result is its length minus the one hop ``u -> v``
    it replaces.

    Args:
        graph: topology multigraph.
        failed_link: ``(a, b)`` or ``(a, b, key)``.
        assume_node_failure: avoid the whole child ``v``, not only the link.
        host_sets: optional precomputed :func:`downward_host_sets`.

    Returns:
        int or None: extra hops (2 for a Scheme-1 detour, 4 for Scheme 2), or
        None when no detour exists.

    >>> from testbed.topologies.fattree import FatTree
    >>> g = FatTree(k=4).graph()
    >>> shortest_local_detour_hops(g, ("c0", "a0_0")), shortest_local_detour_hops(g, ("a0_0", "e0_0"))
    (4, None)
    >>> shortest_local_detour_hops(g, ("a0_0", "e0_0"), assume_node_failure=False)
    2
    """
    ends = _detour_ends(graph, failed_link, host_sets)
    if ends is None:
        return None
    u, v, targets = ends
    if not assume_node_failure:
        targets = targets | {v}
    if not targets:
        return None
    parallel = len(graph[u][v])
    distance = {u: 0}
    queue = deque([u])
    while queue:
        node = queue.popleft()
        if node in targets:
            return distance[node] - 1
        for neighbour in graph.neighbors(node):
            if neighbour in distance or is_host(graph, neighbour):
                continue
            if assume_node_failure and neighbour == v:
                continue
            if {node, neighbour} == {u, v} and parallel == 1:
                continue  # the failed link (parallel links would still work)
            distance[neighbour] = distance[node] + 1
            queue.append(neighbour)
    return None
