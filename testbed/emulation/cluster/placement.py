"""Placement of a fabric's nodes on servers, so that few links cross servers.

Fabrics with structure are split by it: whole groups of switches in contiguous bins, one
bin per server, and the switches outside the groups spread evenly.  A FatTree's pods (only
pod-to-core links cross servers), a DSF fabric's planes (disjoint fabrics: no link crosses)
or a DSF plane's clusters (only FDSW-to-SDSW links cross); of those a fabric has, the one
with the fewest links across servers.  Other fabrics fall back to Mininet's cluster edition
``SwitchBinPlacer`` (switches in even bins, each host beside its switch).
An explicit placement (``{node: server}``) may fix any node; the rest are placed as above.
"""
from testbed.errors import ParameterError


def even_bins(items, bins):
    """Split ``items`` into ``bins`` contiguous, near-equal runs (the first ones one longer).

    >>> even_bins([0, 1, 2, 3, 4], 2)
    [[0, 1, 2], [3, 4]]
    >>> even_bins(["c0"], 3)
    [['c0'], [], []]
    """
    items = list(items)
    size, extra = divmod(len(items), bins)
    runs, start = [], 0
    for index in range(bins):
        end = start + size + (1 if index < extra else 0)
        runs.append(items[start:end])
        start = end
    return runs


#: node attributes whose groups a placement may keep whole on one server: a DSF fabric's planes (disjoint
#: copies of the fabric), pods (FatTree, 3-tier Clos), a DSF plane's clusters
GROUPINGS = (("plane",), ("pod",), ("plane", "cluster"))


def group_placement(graph, servers, attributes):
    """``{node: server}`` placing whole groups per server, the other switches evenly, hosts by their edge.

    A group is the nodes with the same values of ``attributes`` (every one of them set); groups go
    in contiguous bins, one bin per server.  Switches outside every group (a FatTree's cores, a DSF
    plane's SDSWs when grouping by cluster) are spread evenly.

    Args:
        graph: the fabric's networkx graph; nodes carry ``role`` and the grouping attributes.
        servers: server names, in order.
        attributes: node attribute names, for example ``("pod",)``.

    Returns:
        dict, or None when there are fewer groups than servers (or than two).

    >>> import networkx as nx
    >>> g = nx.MultiGraph()
    >>> for n, pod in (("e0", 0), ("e1", 1)): g.add_node(n, role="edge", pod=pod)
    >>> g.add_node("c0", role="core"); g.add_node("c1", role="core"); g.add_node("h1", role="host", pod=0)
    >>> sorted(group_placement(g, ["a", "b"], ("pod",)).items())
    [('c0', 'a'), ('c1', 'b'), ('e0', 'a'), ('e1', 'b'), ('h1', 'a')]
    >>> group_placement(g, ["a", "b", "c"], ("pod",)) is None
    True
    """
    def group(data):
        values = tuple(data.get(name) for name in attributes)
        return None if None in values else values
    groups = sorted({group(data) for _node, data in graph.nodes(data=True)} - {None})
    if len(groups) < max(2, len(servers)):
        return None
    server_of_group = {key: server for server, run in zip(servers, even_bins(groups, len(servers))) for key in run}
    placement = {}
    loose = []
    for node, data in graph.nodes(data=True):
        if group(data) is not None:
            placement[node] = server_of_group[group(data)]
        elif data.get("role") != "host":
            loose.append(node)
    for server, run in zip(servers, even_bins(loose, len(servers))):
        for node in run:
            placement[node] = server
    return placement


def structural_placement(graph, servers):
    """Of the placements by :data:`GROUPINGS` that give every server a group, the one with the fewest
    switch-to-switch links across servers (hosts go beside their switch), or None (no such grouping)."""
    best = None
    for attributes in GROUPINGS:
        placement = group_placement(graph, servers, attributes)
        if placement is None:
            continue
        crossing = sum(1 for a, b in graph.edges() if graph.nodes[a].get("role") != "host"
                       and graph.nodes[b].get("role") != "host" and placement[a] != placement[b])
        if best is None or crossing < best[0]:
            best = (crossing, placement)
    return None if best is None else best[1]


def bin_placement(topo, servers):
    """Mininet's ``SwitchBinPlacer`` placement as ``{node: server}`` (switches in even bins, hosts by their switch)."""
    from mininet.examples.cluster import SwitchBinPlacer

    placer = SwitchBinPlacer(servers=list(servers), nodes=topo.nodes(), hosts=topo.hosts(),
                             switches=topo.switches(), links=topo.links())
    return {node: placer.place(node) for node in topo.nodes()}


def place(topo, servers, fixed=None):
    """``{node: server}`` for every node of ``topo`` over ``servers`` (names, in order).

    Args:
        topo: a :class:`testbed.topologies.base.FabricTopo`.
        servers: server names; the first is where the run starts.
        fixed: ``{node: server}`` the user fixed (checked), the rest placed by structure.

    Raises:
        ParameterError: ``fixed`` names a node the fabric does not have, or a server not in ``servers``.
    """
    nodes = set(topo.nodes())
    fixed = dict(fixed or {})
    for node, server in sorted(fixed.items()):
        if node not in nodes:
            raise ParameterError("placement", node, "nodes of the fabric (for example "
                                 + ", ".join(sorted(nodes)[:6]) + ", ...)", f"no node {node}")
        if server not in servers:
            raise ParameterError("placement", f"{node}: {server}", "one of the servers: " + ", ".join(servers))
    placement = structural_placement(topo.graph(), servers) or bin_placement(topo, servers)
    placement.update(fixed)
    for node in topo.hosts():
        if node not in fixed:
            edge = next(iter(topo.graph().neighbors(node)), None)
            if edge is not None:
                placement[node] = placement[edge]
    return placement


def crossing_links(topo, placement):
    """The links whose ends are on different servers: ``[(a, b)]`` in topology order.

    >>> class T:
    ...     def links(self): return [("h1", "e0"), ("e0", "c0")]
    >>> crossing_links(T(), {"h1": "a", "e0": "a", "c0": "b"})
    [('e0', 'c0')]
    """
    return [(a, b) for a, b in topo.links() if placement[a] != placement[b]]
