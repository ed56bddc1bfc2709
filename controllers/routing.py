"""Shortest-path routes with every equal-cost next hop, computed on a topology graph.

Pure functions on the networkx multigraph that every topology returns
(``topo.graph()``: node attribute ``role`` (``"host"`` for hosts), host
attribute ``ip``; edge attributes ``a``, ``a_port``, ``b``, ``b_port``).
Controllers turn the result into table entries and ECMP groups; failures are
handled by recomputing without the failed links.
"""
from collections import deque


def _host_ip(graph, host):
    return graph.nodes[host]["ip"].split("/")[0]


def is_host(graph, node):
    """True when ``node`` is a host (role ``"host"``)."""
    return graph.nodes[node].get("role") == "host"


def port_toward(edge_data, node):
    """Return the port number on ``node``'s side of a link (edge attribute dict).

    Raises:
        ValueError: ``node`` is not an end of the link.
    """
    if edge_data["a"] == node:
        return edge_data["a_port"]
    if edge_data["b"] == node:
        return edge_data["b_port"]
    raise ValueError(f"{node} is not an end of link {edge_data['a']}-{edge_data['b']}")


def link_id(edge_data):
    """A hashable identity of one link: ``(a, a_port, b, b_port)`` with ends sorted."""
    ends = sorted([(edge_data["a"], edge_data["a_port"]), (edge_data["b"], edge_data["b_port"])])
    return (ends[0][0], ends[0][1], ends[1][0], ends[1][1])


def usable_links(graph, failed_links=()):
    """Yield ``(u, v, data)`` for every link not in ``failed_links``.

    Args:
        graph: the topology multigraph.
        failed_links: link ids (see :func:`link_id`) or ``(u, v)`` node pairs
            (all parallel links between them) that are down.
    """
    failed_ids = set()
    failed_pairs = set()
    for item in failed_links:
        if len(item) == 4:
            failed_ids.add(tuple(item))
        else:
            failed_pairs.add(frozenset(item))
    for u, v, data in graph.edges(data=True):
        if frozenset((u, v)) in failed_pairs or link_id(data) in failed_ids:
            continue
        yield u, v, data


def hop_distances(graph, target, failed_links=()):
    """Return ``{node: hops to target}`` over usable links (hosts do not forward).

    Args:
        graph: the topology multigraph.
        target: the destination node (usually a host).
        failed_links: see :func:`usable_links`.

    Returns:
        dict: distance in links from every node that can reach ``target``.
    """
    neighbors = {}
    for u, v, _ in usable_links(graph, failed_links):
        neighbors.setdefault(u, set()).add(v)
        neighbors.setdefault(v, set()).add(u)
    distances = {target: 0}
    queue = deque([target])
    while queue:
        node = queue.popleft()
        if node != target and is_host(graph, node):
            continue  # hosts are endpoints, never transit
        for neighbor in neighbors.get(node, ()):
            if neighbor not in distances:
                distances[neighbor] = distances[node] + 1
                queue.append(neighbor)
    return distances


def next_hop_ports(graph, switch, distances, failed_links=()):
    """Return the sorted ports of ``switch`` that lie on a shortest path.

    Every parallel link to a closer neighbour is its own next hop, so bundles
    spread traffic too.

    Args:
        graph: the topology multigraph.
        switch: the switch making the decision.
        distances: :func:`hop_distances` toward the destination.
        failed_links: see :func:`usable_links`.
    """
    here = distances.get(switch)
    if here is None:
        return []
    ports = []
    for u, v, data in usable_links(graph, failed_links):
        if switch not in (u, v):
            continue
        neighbor = v if u == switch else u
        if distances.get(neighbor) == here - 1:
            ports.append(port_toward(data, switch))
    return sorted(ports)


def compute_host_routes(graph, failed_links=()):
    """Compute, for every switch, the equal-cost egress ports toward every host.

    Args:
        graph: the topology multigraph.
        failed_links: links that are down (see :func:`usable_links`).

    Returns:
        dict: ``{switch: {host_ip: [ports]}}``; a host a switch cannot reach
        has no entry for that switch.
    """
    switches = [n for n in graph.nodes if not is_host(graph, n)]
    routes = {switch: {} for switch in switches}
    for host in sorted(n for n in graph.nodes if is_host(graph, n)):
        distances = hop_distances(graph, host, failed_links)
        ip = _host_ip(graph, host)
        for switch in switches:
            ports = next_hop_ports(graph, switch, distances, failed_links)
            if ports:
                routes[switch][ip] = ports
    return routes


def host_attachments(graph):
    """Return ``{host: (switch, switch port)}`` for every host's first link."""
    attachments = {}
    for node in graph.nodes:
        if not is_host(graph, node):
            continue
        for _, neighbor, data in graph.edges(node, data=True):
            attachments[node] = (neighbor, port_toward(data, neighbor))
            break
    return attachments
