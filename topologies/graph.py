"""Facts of a fabric graph: hosts, levels, parents and children, ports, and the two forms of a link.

Every topology's ``topo.graph()`` is a networkx multigraph whose nodes carry
``role`` (``"host"`` for hosts) and ``level`` (hosts 0, switch tiers counted
upwards) and whose edges carry ``a``, ``a_port``, ``b``, ``b_port``.  Routing,
F10, DSF and FC+ read the graph through these functions only.

A link has two forms, one per question:

* :func:`node_pair` -- a ``frozenset`` of the two ends: *which nodes* a link
  joins, with every parallel link between them meant (a failed pair, a link
  event naming two switches);
* :class:`Link` -- ``(a, a_port, b, b_port)`` with the ends sorted
  (:func:`link_id`): *one* physical link, where ports matter (parallel links,
  counters, flow placement).

>>> from testbed.topologies.fattree import FatTree
>>> g = FatTree(k=4).graph()
>>> is_host(g, "h1"), level(g, "e0_0"), parents(g, "e0_0"), children(g, "a0_0")
(True, 1, ['a0_0', 'a0_1'], ['e0_0', 'e0_1'])
>>> host_ip(g, "h1")
'10.0.0.1'
>>> node_pair("a0_0", "e0_0") == node_pair("e0_0", "a0_0")
True
>>> data = g.edges["e0_0", "a0_0", 1]
>>> link_id(data)
Link(a='a0_0', a_port=1, b='e0_0', b_port=3)
>>> port_toward(data, "e0_0"), neighbours_by_port(g, "e0_0")[3]
(3, 'a0_0')
"""
from collections import namedtuple

Link = namedtuple("Link", "a a_port b b_port")
Link.__doc__ = """One physical link: its two ends with their ports, ends sorted (see :func:`link_id`)."""


def is_host(graph, node):
    """True when ``node`` is a host (role ``"host"``)."""
    return graph.nodes[node].get("role") == "host"


def level(graph, node):
    """The tier of ``node``: 0 for hosts, 1 for the switches hosts attach to, upwards from there."""
    return graph.nodes[node]["level"]


def switches(graph):
    """Every switch of the graph, sorted."""
    return sorted(node for node in graph.nodes if not is_host(graph, node))


def hosts(graph):
    """Every host of the graph, sorted."""
    return sorted(node for node in graph.nodes if is_host(graph, node))


def parents(graph, node):
    """Neighbours one level above ``node``, sorted."""
    above = level(graph, node) + 1
    return sorted({other for other in graph.neighbors(node) if level(graph, other) == above})


def children(graph, node):
    """Neighbours one level below ``node`` (switches and hosts), sorted."""
    below = level(graph, node) - 1
    return sorted({other for other in graph.neighbors(node) if level(graph, other) == below})


def child_switches(graph, node):
    """:func:`children` of ``node`` that are switches."""
    return [other for other in children(graph, node) if not is_host(graph, other)]


def host_ip(graph, host):
    """A host's IPv4 address without its prefix length."""
    return graph.nodes[host]["ip"].split("/")[0]


def hosts_by_ip(graph):
    """``{IPv4 address: host}`` of every host."""
    return {host_ip(graph, host): host for host in hosts(graph)}


def port_toward(edge_data, node):
    """The port on ``node``'s side of a link (its edge attribute dict).

    Raises:
        ValueError: ``node`` is not an end of the link.
    """
    if edge_data["a"] == node:
        return edge_data["a_port"]
    if edge_data["b"] == node:
        return edge_data["b_port"]
    raise ValueError(f"{node} is not an end of link {edge_data['a']}-{edge_data['b']}")


def ports_toward(graph, node, neighbours):
    """``node``'s port numbers on every link to any of ``neighbours`` (parallel links included).

    >>> from testbed.topologies.ab_fattree import ABFatTree
    >>> ports_toward(ABFatTree(k=4).graph(), "e0_1", ["a0_0", "a0_1"])
    [3, 4]
    """
    return [port_toward(data, node) for neighbour in neighbours for data in graph[node][neighbour].values()]


def neighbours_by_port(graph, node):
    """``{port: neighbour}`` of ``node``."""
    return {port_toward(data, node): other for _, other, data in graph.edges(node, data=True)}


def node_pair(a, b):
    """The undirected identity of the nodes a link joins (every parallel link between them)."""
    return frozenset((a, b))


def link_id(edge_data):
    """The :class:`Link` of one link (edge attribute dict), ends sorted so either direction gives the same."""
    ends = sorted([(edge_data["a"], edge_data["a_port"]), (edge_data["b"], edge_data["b_port"])])
    return Link(ends[0][0], ends[0][1], ends[1][0], ends[1][1])


def split_failed(failed_links):
    """``(link ids, node pairs)`` of a ``failed_links`` argument (see :func:`usable_links`)."""
    failed_ids = set()
    failed_pairs = set()
    for item in failed_links:
        if len(item) == 4:
            failed_ids.add(tuple(item))
        else:
            failed_pairs.add(node_pair(*item))
    return failed_ids, failed_pairs


def usable_links(graph, failed_links=()):
    """Yield ``(u, v, data)`` for every link not in ``failed_links``.

    Args:
        graph: the topology multigraph.
        failed_links: link ids (:func:`link_id`) or ``(u, v)`` node pairs
            (all parallel links between them) that are down.

    >>> from testbed.topologies.fattree import FatTree
    >>> g = FatTree(k=4).graph()
    >>> len(list(usable_links(g))), len(list(usable_links(g, [("e0_0", "a0_0")])))
    (48, 47)
    >>> len(list(usable_links(g, [Link("a0_0", 1, "e0_0", 3)])))
    47
    """
    failed_ids, failed_pairs = split_failed(failed_links)
    for u, v, data in graph.edges(data=True):
        if node_pair(u, v) in failed_pairs or link_id(data) in failed_ids:
            continue
        yield u, v, data
