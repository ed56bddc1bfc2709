"""Shortest-path routes with every equal-cost next hop, computed on a topology graph.

Works on the networkx multigraph that every topology returns (``topo.graph()``:
node attribute ``role`` (``"host"`` for hosts), host attribute ``ip``; edge
attributes ``a``, ``a_port``, ``b``, ``b_port``).  Controllers turn the result
into table entries and ECMP groups.

Definition: a switch's next hops toward a host are the ports of its usable links
that start a shortest path to the host; hosts are endpoints and never forward;
each of several parallel links is its own next hop.

Algorithm (:class:`HostRoutes`): hosts attached to the same switches share one
breadth-first search over the switch-only graph, started from those switches
(a k=8 FatTree needs 32 searches of 80 switches, not one scan of every link per
switch and host).  A switch's next hops are its usable links to neighbours one
hop closer.  Each search remembers the links its next hops use (its shortest-path
DAG); after a link fails only the searches whose DAG used it run again, and after
a link comes back only those where its two ends were at different distances.
"""
from collections import deque

from testbed.topologies.graph import (host_ip, hosts, is_host, link_id, node_pair, port_toward, split_failed,
                                      usable_links)


def hop_distances(graph, target, failed_links=()):
    """Return ``{node: hops to target}`` over usable links (hosts do not forward).

    Args:
        graph: the topology multigraph.
        target: the destination node (usually a host).
        failed_links: see :func:`testbed.topologies.graph.usable_links`.

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


class _Sink:
    """Shortest paths of every switch toward one set of switches (where some hosts attach).

    Attributes:
        distance: ``{switch: hops to the nearest sink switch}`` (sink switches 0).
        next_ports: ``{switch: sorted ports}`` toward a closer switch (sink switches
            and switches that cannot reach the sink have none).
        dag: link ids the next hops use.
    """

    __slots__ = ("distance", "next_ports", "dag")

    def __init__(self, distance, next_ports, dag):
        self.distance = distance
        self.next_ports = next_ports
        self.dag = dag

    def touched_by_restored(self, u, v):
        """True when a restored link ``u``-``v`` would shorten a path or add an equal-cost hop."""
        return self.distance.get(u) != self.distance.get(v)


class HostRoutes:
    """Equal-cost routes of every switch toward every host, updated as links fail and return.

    Args:
        graph: the topology multigraph (see the module docstring); it must not
            change while this object is used.
        failed_links: links that are down (see :func:`testbed.topologies.graph.usable_links`).

    Attributes:
        routes: ``{switch: {host_ip: [ports]}}``; a host a switch cannot reach
            has no entry for that switch.  Updated in place by :meth:`update`.
        failed: the link ids treated as down.
    """

    def __init__(self, graph, failed_links=()):
        self.graph = graph
        self.switches = [node for node in graph.nodes if not is_host(graph, node)]
        self.hosts = hosts(graph)
        self._ip = {host: host_ip(graph, host) for host in self.hosts}
        self._switch_links = {switch: [] for switch in self.switches}  # switch -> [(neighbor, port, id)]
        self._host_links = {host: [] for host in self.hosts}  # host -> [(switch, switch port, id)]
        self._host_of_link = {}  # link id -> host it attaches
        self._link_ends = {}  # link id -> (u, v)
        self._links_between = {}  # frozenset pair -> [link ids]
        self._index_links()
        self.failed = set()
        self._sinks = {}  # frozenset of switches -> _Sink
        self._attachment = {}  # host -> ({switch: [ports]}, frozenset of switches)
        self.routes = {switch: {} for switch in self.switches}
        self._set_failed(failed_links)
        for host in self.hosts:
            self._route_host(host)

    def _index_links(self):
        graph = self.graph
        for u, v, data in graph.edges(data=True):
            lid = link_id(data)
            self._link_ends[lid] = (u, v)
            self._links_between.setdefault(node_pair(u, v), []).append(lid)
            u_host, v_host = is_host(graph, u), is_host(graph, v)
            if not u_host and not v_host:
                self._switch_links[u].append((v, port_toward(data, u), lid))
                self._switch_links[v].append((u, port_toward(data, v), lid))
            elif u_host != v_host:
                host, switch = (u, v) if u_host else (v, u)
                self._host_links[host].append((switch, port_toward(data, switch), lid))
                self._host_of_link[lid] = host

    def _resolve(self, failed_links):
        """The set of existing link ids named by ``failed_links`` (ids or node pairs)."""
        failed_ids, failed_pairs = split_failed(failed_links)
        resolved = {lid for lid in failed_ids if lid in self._link_ends}
        for pair in failed_pairs:
            resolved.update(self._links_between.get(pair, ()))
        return resolved

    def _set_failed(self, failed_links):
        """Replace the failed set; returns ``(newly failed, restored)`` link ids."""
        new = self._resolve(failed_links)
        added, removed = new - self.failed, self.failed - new
        self.failed = new
        return added, removed

    # -- computation --------------------------------------------------------------------------
    def _search(self, sink_switches):
        """Breadth-first search from ``sink_switches`` over usable switch links."""
        failed = self.failed
        links = self._switch_links
        distance = dict.fromkeys(sink_switches, 0)
        queue = deque(sink_switches)
        while queue:
            node = queue.popleft()
            next_distance = distance[node] + 1
            for neighbor, _, lid in links[node]:
                if neighbor not in distance and lid not in failed:
                    distance[neighbor] = next_distance
                    queue.append(neighbor)
        next_ports, dag = {}, set()
        for node, hops in distance.items():
            if hops == 0:
                continue
            ports = []
            for neighbor, port, lid in links[node]:
                if distance.get(neighbor) == hops - 1 and lid not in failed:
                    ports.append(port)
                    dag.add(lid)
            next_ports[node] = sorted(ports)
        return _Sink(distance, next_ports, dag)

    def _sink(self, key):
        sink = self._sinks.get(key)
        if sink is None:
            sink = self._sinks[key] = self._search(list(key))
        return sink

    def _attach(self, host):
        """``({switch: [ports]}, frozenset of switches)`` of ``host``'s usable links."""
        ports = {}
        for switch, port, lid in self._host_links[host]:
            if lid not in self.failed:
                ports.setdefault(switch, []).append(port)
        for switch_ports in ports.values():
            switch_ports.sort()
        return ports, frozenset(ports)

    def _route_host(self, host):
        """(Re)write every switch's route toward ``host`` in :attr:`routes`."""
        ip = self._ip[host]
        ports, key = self._attachment[host] = self._attach(host)
        next_ports = self._sink(key).next_ports if key else {}
        for switch in self.switches:
            hops = ports.get(switch) or next_ports.get(switch)
            if hops:
                self.routes[switch][ip] = list(hops)
            else:
                self.routes[switch].pop(ip, None)

    def update(self, failed_links):
        """Make :attr:`routes` those of the topology without ``failed_links``.

        Only the searches a changed link can affect run again.

        Args:
            failed_links: the complete set of links now down (see :func:`testbed.topologies.graph.usable_links`).

        Returns:
            set: IPs of the hosts whose routes were recomputed (the others are unchanged).
        """
        added, removed = self._set_failed(failed_links)
        stale = set()
        for key, sink in self._sinks.items():
            if any(lid in sink.dag for lid in added) or any(
                    lid not in self._host_of_link and sink.touched_by_restored(*self._link_ends[lid])
                    for lid in removed):
                stale.add(key)
        for key in stale:
            del self._sinks[key]
        hosts = {self._host_of_link[lid] for lid in added | removed if lid in self._host_of_link}
        hosts.update(host for host in self.hosts if self._attachment[host][1] in stale)
        for host in sorted(hosts):
            self._route_host(host)
        in_use = {attachment[1] for attachment in self._attachment.values()}
        for key in set(self._sinks) - in_use:
            del self._sinks[key]
        return {self._ip[host] for host in hosts}


def compute_host_routes(graph, failed_links=()):
    """Compute, for every switch, the equal-cost egress ports toward every host.

    Args:
        graph: the topology multigraph.
        failed_links: links that are down (see :func:`testbed.topologies.graph.usable_links`).

    Returns:
        dict: ``{switch: {host_ip: [ports]}}``; a host a switch cannot reach
        has no entry for that switch.
    """
    return HostRoutes(graph, failed_links).routes
