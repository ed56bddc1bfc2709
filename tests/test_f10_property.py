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
import pytest

from testbed.topologies import f10
from testbed.topologies.ab_fattree import ABFatTree
from testbed.topologies.fattree import FatTree

SIZES = [(4, 2), (6, 2), (8, 2), (4, 3), (6, 3)]


@pytest.fixture(scope="module", params=SIZES, ids=lambda s: f"k{s[0]}-L{s[1]}")
def pair(request):
    """(standard graph, AB graph, k) for one size."""
    k, levels = request.param
    return FatTree(k=k, levels=levels).graph(), ABFatTree(k=k, levels=levels).graph(), k


def split_links(graph):
    """Downward switch links split into (above the edge tier, into edge switches)."""
    upper, edge = [], []
    for link in f10.downward_links(graph):
        (edge if graph.nodes[link[1]]["role"] == "edge" else upper).append(link)
    return upper, edge


def test_ab_fattree_has_scheme1_detour_for_every_downward_link(pair):
    _, ab, _ = pair
    host_sets = f10.downward_host_sets(ab)
    upper, _ = split_links(ab)
    assert upper
    for link in upper:
        path = f10.scheme1_detour(ab, link, host_sets=host_sets)
        assert path is not None, f"no Scheme-1 detour for failed {link}"
        u, v, _ = link
        x, u2, w = path[1:]
        assert path[0] == u and len(path) == 4
        assert x != v and w != v and u2 != u
        assert ab.has_edge(u, x) and ab.has_edge(x, u2) and ab.has_edge(u2, w)
        assert u2 not in f10.failure_group(ab, v)
        assert host_sets[w] == host_sets[v]
        # F10 detours through a child of the other subtree type
        assert ab.nodes[x]["subtree_type"] != ab.nodes[v]["subtree_type"]
        assert f10.shortest_local_detour_hops(ab, link, host_sets=host_sets) == 2


def test_standard_fattree_has_no_scheme1_detour_and_needs_four_extra_hops(pair):
    plain, _, _ = pair
    host_sets = f10.downward_host_sets(plain)
    upper, _ = split_links(plain)
    for link in upper:
        assert f10.scheme1_detour(plain, link, host_sets=host_sets) is None, link
        assert f10.shortest_local_detour_hops(plain, link, host_sets=host_sets) == 4, link


def test_scheme2_detour_exists_in_both_with_four_extra_hops(pair):
    for graph in pair[:2]:
        host_sets = f10.downward_host_sets(graph)
        upper, edge = split_links(graph)
        for link in upper:
            path = f10.scheme2_detour(graph, link, host_sets=host_sets)
            assert path is not None and len(path) == 6, link
            u, v, _ = link
            assert path[0] == u and v not in path
            assert all(graph.has_edge(a, b) for a, b in zip(path, path[1:]))
            assert path[4] not in f10.failure_group(graph, v)
            assert host_sets[path[-1]] == host_sets[v]
        for link in edge:
            assert f10.scheme2_detour(graph, link, host_sets=host_sets) is None


def test_edge_links_have_link_only_detours_in_both(pair):
    plain, ab, _ = pair
    for graph in (plain, ab):
        host_sets = f10.downward_host_sets(graph)
        _, edge = split_links(graph)
        assert edge
        for link in edge:
            assert f10.scheme1_detour(graph, link, host_sets=host_sets) is None
            assert f10.shortest_local_detour_hops(graph, link, host_sets=host_sets) is None
            path = f10.scheme1_detour(graph, link, assume_node_failure=False, host_sets=host_sets)
            assert path is not None and path[-1] == link[1]
            assert f10.shortest_local_detour_hops(graph, link, assume_node_failure=False,
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
            assert f10.downward_path_count(ab, core, edge) == 1, (core, edge)


def test_every_host_pair_has_as_many_shortest_paths_as_in_the_standard_fattree(pair):
    plain, ab, _ = pair
    expected = f10.host_pair_path_counts(plain)
    actual = f10.host_pair_path_counts(ab)
    assert expected.keys() == actual.keys()
    assert actual == expected


def test_scheme1_detour_rejects_unknown_links():
    graph = ABFatTree(k=4).graph()
    from testbed.errors import ParameterError
    with pytest.raises(ParameterError):
        f10.scheme1_detour(graph, ("c0", "e0_0"))
    assert f10.scheme1_detour(graph, ("h1", "e0_0")) is None


def test_failure_group_matches_the_topology_view():
    topo = ABFatTree(k=6)
    graph = topo.graph()
    for name in topo.switches():
        if graph.nodes[name]["role"] != "core":
            assert f10.failure_group(graph, name) == frozenset(topo.failure_group_members(name))
