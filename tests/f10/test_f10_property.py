"""F10 properties of the AB FatTree versus the standard FatTree (seed 002 sections 4 and 5.1).

Checked over every downward switch-to-switch link for k = 4, 6, 8 (and L = 3
for k = 4, 6):

* AB FatTree: a Scheme-1 detour (+2 hops) exists at the failure's parent,
  treating the whole child as failed (F10's rule), for every link whose child
  roots a subtree with other roots (every link above the edge tier);
* standard FatTree: no Scheme-1 detour exists for those links and the shortest
  local detour is +4 hops (Scheme 2);
* aggregation-to-edge links: the edge switch is its hosts' only root, so the
  whole-node assumption leaves no detour in either topology; avoiding only the
  link, both have the +2 detour through a sibling edge switch.

Plus the structural claims of section 4: at most k ports per switch, exactly
one downward path from each core to each edge switch, and the same number of
shortest paths between every host pair as in the standard FatTree.
"""
import doctest

import pytest

from testbed.errors import ParameterError
from testbed.topologies.f10 import detours, paths
from testbed.topologies.ab_fattree import ABFatTree
from testbed.topologies.fattree import FatTree
from testbed.topologies.registry import make_topology

SIZES = [(4, 2), (6, 2), (8, 2), (4, 3), (6, 3)]


@pytest.fixture(scope="module", params=SIZES, ids=lambda s: f"k{s[0]}-L{s[1]}")
def pair(request):
    """(standard graph, AB graph, k) for one size."""
    k, levels = request.param
    return FatTree(k=k, levels=levels).graph(), ABFatTree(k=k, levels=levels).graph(), k


def split_links(graph):
    """Downward switch links split into (above the edge tier, into edge switches)."""
    upper, edge = [], []
    for link in detours.downward_links(graph):
        (edge if graph.nodes[link[1]]["role"] == "edge" else upper).append(link)
    return upper, edge


def test_ab_fattree_has_scheme1_detour_for_every_downward_link(pair):
    _, ab, _ = pair
    host_sets = detours.downward_host_sets(ab)
    upper, _ = split_links(ab)
    assert upper
    for link in upper:
        path = detours.scheme1_detour(ab, link, host_sets=host_sets)
        assert path is not None, f"no Scheme-1 detour for failed {link}"
        u, v, _ = link
        x, u2, w = path[1:]
        assert path[0] == u and len(path) == 4
        assert x != v and w != v and u2 != u
        assert ab.has_edge(u, x) and ab.has_edge(x, u2) and ab.has_edge(u2, w)
        assert u2 not in detours.failure_group(ab, v)
        assert host_sets[w] == host_sets[v]
        # F10 detours through a child of the other subtree type
        assert ab.nodes[x]["subtree_type"] != ab.nodes[v]["subtree_type"]
        assert detours.shortest_local_detour_hops(ab, link, host_sets=host_sets) == 2


def test_standard_fattree_has_no_scheme1_detour_and_needs_four_extra_hops(pair):
    plain, _, _ = pair
    host_sets = detours.downward_host_sets(plain)
    upper, _ = split_links(plain)
    for link in upper:
        assert detours.scheme1_detour(plain, link, host_sets=host_sets) is None, link
        assert detours.shortest_local_detour_hops(plain, link, host_sets=host_sets) == 4, link


def test_scheme2_detour_has_four_extra_hops_wherever_the_parent_has_another_child_of_the_type(pair):
    # Scheme 2 goes through a child of v's type (seed 002, 5.1); an AB FatTree parent whose only
    # other child has the other type (the top of k=4, L=3) has none, and Scheme 1 serves there
    for graph in pair[:2]:
        host_sets = detours.downward_host_sets(graph)
        upper, edge = split_links(graph)
        for link in upper:
            u, v, _ = link
            path = detours.scheme2_detour(graph, link, host_sets=host_sets)
            if not detours.scheme2_candidates(graph, u, v):
                assert graph is pair[1] and path is None, link
                assert detours.scheme1_detour(graph, link, host_sets=host_sets) is not None, link
                continue
            assert path is not None and len(path) == 6, link
            assert path[0] == u and v not in path
            assert all(graph.has_edge(a, b) for a, b in zip(path, path[1:]))
            assert path[4] not in detours.failure_group(graph, v)
            assert host_sets[path[-1]] == host_sets[v]
        for link in edge:
            assert detours.scheme2_detour(graph, link, host_sets=host_sets) is None


def test_edge_links_have_link_only_detours_in_both(pair):
    plain, ab, _ = pair
    for graph in (plain, ab):
        host_sets = detours.downward_host_sets(graph)
        _, edge = split_links(graph)
        assert edge
        for link in edge:
            assert detours.scheme1_detour(graph, link, host_sets=host_sets) is None
            assert detours.local_detour(graph, link, host_sets=host_sets) is None
            assert detours.shortest_local_detour_hops(graph, link, host_sets=host_sets) is None
            assert detours.shortest_local_detour_hops(graph, link, assume_node_failure=False,
                                                  host_sets=host_sets) == 2


def test_no_switch_uses_more_than_k_ports(pair):
    plain, ab, k = pair
    for graph in (plain, ab):
        assert max(graph.degree(n) for n, a in graph.nodes(data=True) if a["role"] != "host") <= k


def test_exactly_one_downward_path_from_each_core_to_each_edge(pair):
    _, ab, _ = pair
    cores = [n for n, a in ab.nodes(data=True) if a["role"] == "core"]
    edges = [n for n, a in ab.nodes(data=True) if a["role"] == "edge"]
    for core in cores:
        for edge in edges:
            assert paths.downward_path_count(ab, core, edge) == 1, (core, edge)


def test_every_host_pair_has_as_many_shortest_paths_as_in_the_standard_fattree(pair):
    plain, ab, _ = pair
    expected = paths.host_pair_path_counts(plain)
    actual = paths.host_pair_path_counts(ab)
    assert expected.keys() == actual.keys()
    assert actual == expected


def test_scheme1_detour_rejects_unknown_links():
    graph = ABFatTree(k=4).graph()
    from testbed.errors import ParameterError
    with pytest.raises(ParameterError):
        detours.scheme1_detour(graph, ("c0", "e0_0"))
    assert detours.scheme1_detour(graph, ("h1", "e0_0")) is None


def test_failure_group_matches_the_topology_view():
    topo = ABFatTree(k=6)
    graph = topo.graph()
    for name in topo.switches():
        if graph.nodes[name]["role"] != "core":
            assert detours.failure_group(graph, name) == frozenset(topo.failure_group_members(name))


# ------------------------------------------------------------ detours and path dilation
def agg_core_links(graph):
    return [link for link in detours.downward_links(graph) if graph.nodes[link[0]]["role"] == "core"]


@pytest.mark.parametrize("module", [detours, paths])
def test_f10_module_doctests(module):
    assert doctest.testmod(module).failed == 0


@pytest.mark.parametrize("cls,scheme,extra", [(ABFatTree, 1, 2), (FatTree, 2, 4)])
def test_agg_core_failure_detour_is_scheme1_on_ab_and_scheme2_on_standard(cls, scheme, extra):
    graph = cls(k=4).graph()
    host_sets = detours.downward_host_sets(graph)
    links = agg_core_links(graph)
    assert len(links) == 16
    for link in links:
        got_scheme, path, got_extra = detours.local_detour(graph, link, host_sets)
        u, v, _ = link
        assert (got_scheme, got_extra) == (scheme, extra), link
        assert path[0] == u and v not in path and len(path) == extra + 2
        assert all(graph.has_edge(a, b) for a, b in zip(path, path[1:]))
        assert host_sets[path[-1]] == host_sets[v]


def test_local_detour_is_none_above_an_edge_switch():
    graph = ABFatTree(k=4).graph()
    assert detours.local_detour(graph, ("a0_0", "e0_0")) is None


def test_switch_hops_on_k4_fattree():
    graph = ABFatTree(k=4).graph()
    hops = paths.host_switch_hops(graph)
    assert len(hops) == 16 * 15
    pods = {h: graph.nodes[h]["pod"] for h in graph if graph.nodes[h]["role"] == "host"}
    edges = {h: graph.nodes[h]["edge"] for h in pods}
    for (src, dst), count in hops.items():
        expected = 1 if edges[src] == edges[dst] else 3 if pods[src] == pods[dst] else 5
        assert count == expected, (src, dst)


def test_switch_hops_skip_failed_links():
    graph = ABFatTree(k=4).graph()
    assert paths.switch_hops(graph, "h1", "h3", failed_links=[("e0_0", "a0_0")]) == 3
    assert paths.switch_hops(graph, "h1", "h3", failed_links=[("e0_0", "a0_0"), ("a0_1", "e0_0")]) is None
    with pytest.raises(ParameterError) as info:
        paths.switch_hops(graph, "e0_0", "h3")
    assert info.value.field == "src"


@pytest.mark.parametrize("cls,detoured", [(ABFatTree, 7), (FatTree, 9)])
def test_packets_through_a_failed_agg_core_link_cross_plus_2_or_plus_4_switches(cls, detoured):
    graph = cls(k=4).graph()
    hosts_below = {v: sorted(h for h in detours.downward_host_sets(graph)[v]) for v in graph}
    for u, v, key in agg_core_links(graph):
        dst = hosts_below[v][0]
        src = next(h for h in sorted(hosts_below[u]) if graph.nodes[h]["pod"] != graph.nodes[dst]["pod"])
        assert paths.detoured_switch_hops(graph, src, dst, (u, v, key)) == (detoured, 5)
        # the TTL a receiver sees turns back into the same dilation
        assert paths.extra_hops_from_ttl(64, 64 - detoured, 5) == detoured - 5


def test_detoured_switch_hops_refuses_a_link_off_the_path():
    graph = ABFatTree(k=4).graph()
    with pytest.raises(ParameterError) as info:
        paths.detoured_switch_hops(graph, "h5", "h9", ("c0", "a0_0"))
    assert info.value.field == "dst"
    with pytest.raises(ParameterError) as info:
        paths.detoured_switch_hops(graph, "h2", "h1", ("c0", "a0_0"))
    assert info.value.field == "failed_link"


@pytest.mark.parametrize("sent,arrived,expected,field", [
    (64, 65, 5, "arrived_ttl"), (256, 10, 5, "sent_ttl"), (64, -1, 5, "arrived_ttl"),
    (64, 62, 5, "arrived_ttl"), (64.0, 59, 5, "sent_ttl"),
])
def test_extra_hops_from_ttl_refuses_impossible_ttls(sent, arrived, expected, field):
    with pytest.raises(ParameterError) as info:
        paths.extra_hops_from_ttl(sent, arrived, expected)
    assert info.value.field == field


@pytest.mark.parametrize("k,levels", [(6, 2), (4, 3)])
def test_omit_doubled_subtrees_keeps_the_first_p_top_level_subtrees(k, levels):
    full = ABFatTree(k=k, levels=levels).graph()
    half = paths.omit_doubled_subtrees(full)
    p = k // 2
    cores = [n for n in full if full.nodes[n]["role"] == "core"]
    assert all(n in half for n in cores)
    assert all(half.degree(c) == p for c in cores)
    assert half.number_of_nodes() == len(cores) + (full.number_of_nodes() - len(cores)) // 2
    types = sorted({(half.nodes[n]["location"], half.nodes[n]["type_stack"][0]) for n in half
                    if half.nodes[n].get("f10_level") == levels - 1})
    assert [t for _, t in types] == ["A", "B", "A"][:p]
    with pytest.raises(ParameterError):
        paths.omit_doubled_subtrees(make_topology("clos", leaves=2, spines=2).graph())
