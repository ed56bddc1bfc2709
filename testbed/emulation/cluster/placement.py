"""Placement of a fabric's nodes on servers, so that few links cross servers.

Fabrics with pods (a FatTree's ``pod`` node attribute) are split by pods: whole pods
in contiguous bins, one bin per server, and the switches without a pod (cores) spread
evenly, so only pod-to-core links cross servers.  Other fabrics fall back to Mininet's
cluster edition ``SwitchBinPlacer`` (switches in even bins, each host beside its switch).
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


def pod_placement(graph, servers):
    """``{node: server}`` placing whole pods per server, the pod-less switches evenly, hosts by their edge.

    Args:
        graph: the fabric's networkx graph; nodes carry ``role`` and, for pod members, ``pod``.
        servers: server names, in order.

    Returns:
        dict, or None when no node has a pod.

    >>> import networkx as nx
    >>> g = nx.MultiGraph()
    >>> for n, pod in (("e0", 0), ("e1", 1)): g.add_node(n, role="edge", pod=pod)
    >>> g.add_node("c0", role="core"); g.add_node("c1", role="core"); g.add_node("h1", role="host", pod=0)
    >>> sorted(pod_placement(g, ["a", "b"]).items())
    [('c0', 'a'), ('c1', 'b'), ('e0', 'a'), ('e1', 'b'), ('h1', 'a')]
    """
    pods = sorted({data["pod"] for _node, data in graph.nodes(data=True) if data.get("pod") is not None})
    if not pods:
        return None
    server_of_pod = {pod: server for server, run in zip(servers, even_bins(pods, len(servers))) for pod in run}
    placement = {}
    loose = []
    for node, data in graph.nodes(data=True):
        if data.get("pod") is not None:
            placement[node] = server_of_pod[data["pod"]]
        elif data.get("role") != "host":
            loose.append(node)
    for server, run in zip(servers, even_bins(loose, len(servers))):
        for node in run:
            placement[node] = server
    return placement


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
    placement = pod_placement(topo.graph(), servers) or bin_placement(topo, servers)
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
