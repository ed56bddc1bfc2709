"""Equal-cost shortest-path routes against a reference written from the definition.

The reference (:func:`reference_routes`) knows nothing of the breadth-first
searches in :mod:`testbed.controllers.routing`: it computes all-pairs switch
distances with Floyd-Warshall over the usable switch links, the distance of a
switch to a host as one plus its distance to the nearest switch the host is
attached to, and takes as next hops every usable link that starts a path of
exactly that length (a direct link to the host, or a link to a switch one hop
closer).  Hosts never forward.
"""
import random

import pytest

from testbed.controllers.routing import HostRoutes, compute_host_routes
from testbed.topologies.graph import link_id, port_toward
from testbed.topologies.registry import make_topology

INF = float("inf")

TOPOLOGIES = [("clos", {}), ("fattree", {"k": 4}), ("abfattree", {}), ("dsf", {})]


def _usable(graph, failed):
    """Usable ``(u, v, data)``: not a failed link id, not between a failed node pair."""
    ids = {tuple(item) for item in failed if len(item) == 4}
    pairs = {frozenset(item) for item in failed if len(item) == 2}
    return [(u, v, d) for u, v, d in graph.edges(data=True)
            if link_id(d) not in ids and frozenset((u, v)) not in pairs]


def reference_routes(graph, failed=()):
    """``{switch: {ip: sorted ports}}`` from the definition of equal-cost shortest paths."""
    hosts = [n for n in graph.nodes if graph.nodes[n].get("role") == "host"]
    switches = [n for n in graph.nodes if n not in hosts]
    links = _usable(graph, failed)
    dist = {s: {t: (0 if s == t else INF) for t in switches} for s in switches}
    for u, v, _ in links:
        if u in dist and v in dist:
            dist[u][v] = dist[v][u] = 1
    for via in switches:
        for s in switches:
            for t in switches:
                if dist[s][via] + dist[via][t] < dist[s][t]:
                    dist[s][t] = dist[s][via] + dist[via][t]
    routes = {s: {} for s in switches}
    for host in hosts:
        attached = {v if u == host else u for u, v, _ in links if host in (u, v)} - set(hosts)
        to_host = {s: 1 + min((dist[s][e] for e in attached), default=INF) for s in switches}
        ip = graph.nodes[host]["ip"].split("/")[0]
        for s in switches:
            if to_host[s] == INF:
                continue
            ports = []
            for u, v, data in links:
                if s not in (u, v):
                    continue
                other = v if u == s else u
                if other == host or (other in to_host and to_host[other] == to_host[s] - 1):
                    ports.append(port_toward(data, s))
            if ports:
                routes[s][ip] = sorted(ports)
    return routes


def _failure_sets(graph, rng, count):
    """Random sets of failed link ids and node pairs (host links included), some empty."""
    ids = [link_id(d) for _, _, d in graph.edges(data=True)]
    pairs = sorted({tuple(sorted(p)) for p in graph.edges()})
    sets = [set()]
    for _ in range(count):
        sets.append(set(rng.sample(ids, rng.randint(1, 6))) | set(rng.sample(pairs, rng.randint(0, 2))))
    return sets


@pytest.mark.parametrize("kind,params", TOPOLOGIES)
def test_routes_equal_reference_with_and_without_failures(kind, params):
    graph = make_topology(kind, **params).graph()
    assert compute_host_routes(graph) == reference_routes(graph)
    for failed in _failure_sets(graph, random.Random(kind), 25):
        assert compute_host_routes(graph, failed) == reference_routes(graph, failed), failed


@pytest.mark.parametrize("kind,params", TOPOLOGIES)
def test_incremental_updates_equal_reference_after_every_change(kind, params):
    graph = make_topology(kind, **params).graph()
    routes = HostRoutes(graph)
    rng = random.Random("incremental-" + kind)
    ids = [link_id(d) for _, _, d in graph.edges(data=True)]
    failed = set()
    for _ in range(60):
        if failed and rng.random() < 0.45:
            failed.discard(rng.choice(sorted(failed)))  # a link comes back
        else:
            failed.add(rng.choice(ids))
        before = {s: dict(by_ip) for s, by_ip in routes.routes.items()}
        recomputed = routes.update(set(failed))
        expected = reference_routes(graph, failed)
        assert routes.routes == expected, sorted(failed)
        # hosts reported as not recomputed kept exactly their routes
        for switch, by_ip in expected.items():
            for ip in set(by_ip) | set(before[switch]):
                if ip not in recomputed:
                    assert before[switch].get(ip) == by_ip.get(ip)


def test_failure_recomputes_only_destinations_whose_paths_used_the_link():
    graph = make_topology("fattree", k=4).graph()
    routes = HostRoutes(graph)
    # a host's own access link: only that host's routes depend on it
    host_link = next(link_id(d) for u, v, d in graph.edges(data=True) if "h1" in (u, v))
    assert routes.update({host_link}) == {graph.nodes["h1"]["ip"].split("/")[0]}
    assert routes.routes == reference_routes(graph, {host_link})
    # the same failed set again: nothing to recompute
    assert routes.update({host_link}) == set()
    # a core-aggregation link: recomputed, and equal to the reference
    core_link = next(link_id(d) for u, v, d in graph.edges(data=True)
                     if {graph.nodes[u]["role"], graph.nodes[v]["role"]} == {"core", "agg"})
    assert routes.update({host_link, core_link})
    assert routes.routes == reference_routes(graph, {host_link, core_link})


def test_failed_links_given_as_pairs_or_ids_and_unknown_links_ignored():
    graph = make_topology("clos").graph()
    pair = next((u, v) for u, v in graph.edges() if graph.nodes[u].get("role") != "host"
                and graph.nodes[v].get("role") != "host")
    ids = {link_id(d) for u, v, d in graph.edges(data=True) if {u, v} == set(pair)}
    assert compute_host_routes(graph, {pair}) == compute_host_routes(graph, ids)
    assert compute_host_routes(graph, {("nowhere", "nothing")}) == compute_host_routes(graph)


def test_unreachable_host_has_no_route_anywhere():
    graph = make_topology("clos").graph()
    host = "h1"
    access = {tuple(sorted((u, v))) for u, v in graph.edges(host)}
    routes = compute_host_routes(graph, access)
    ip = graph.nodes[host]["ip"].split("/")[0]
    assert all(ip not in by_ip for by_ip in routes.values())
    assert any(ip in by_ip for by_ip in compute_host_routes(graph).values())
