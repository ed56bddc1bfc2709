"""FC+ and FC topologies (seed 001, III-A): equations, the Figure 2 examples, wiring, conventions, export."""
import ipaddress
import json
from collections import Counter

import networkx as nx
import pytest

from testbed.errors import ParameterError
from testbed.topologies.base import FabricTopo, mac_from_ip
from testbed.topologies.export import to_dot, write_png
from testbed.topologies.fcplus.topology import (FCPlusTopo, FCTopo, choose_v, fc_graph, fc_layer_links, fcplus_graph,
                                                layer_count, layers_per_group, link_table, port_virtual_switch,
                                                tor_graph_from_links, valid_v_values, virtual_layers,
                                                virtual_switch_degrees)
from testbed.topologies.registry import TOPOLOGY_KINDS, make_topology


def vswitch_degrees(graph):
    """(tor, j) -> (links down, links up) of every virtual switch."""
    degrees = Counter()
    for row in link_table(graph):
        degrees[(row["a"], row["a_vswitch"], "up")] += 1
        degrees[(row["b"], row["b_vswitch"], "down")] += 1
    return {(tor, j): (degrees[(tor, j, "down")], degrees[(tor, j, "up")])
            for tor in graph.nodes for j in range(1, graph.graph["v"] + 1)}


def check_wiring(graph):
    """Links join adjacent layers of different ToRs, never twice the same virtual switches."""
    rows = link_table(graph)
    assert all(row["a"] != row["b"] for row in rows)
    assert all(row["b_layer"] == row["a_layer"] + 1 for row in rows)
    pairs = [((row["a"], row["a_vswitch"]), (row["b"], row["b_vswitch"])) for row in rows]
    assert len(pairs) == len(set(pairs))
    for row in rows:  # the layers recorded on the link are the virtual switches' layers
        assert graph.nodes[row["a"]]["layers"][row["a_vswitch"] - 1] == row["a_layer"]
        assert graph.nodes[row["b"]]["layers"][row["b_vswitch"] - 1] == row["b_layer"]
        assert port_virtual_switch(graph, row["a"], row["a_port"]) == (row["a_vswitch"], row["a_layer"])
        assert port_virtual_switch(graph, row["b"], row["b_port"]) == (row["b_vswitch"], row["b_layer"])
    for tor, data in graph.nodes(data=True):
        ports = [port for group in data["ports"] for port in group]
        assert ports == list(range(graph.graph["h"] + 1, graph.graph["p"] + 1))
        assert graph.degree(tor) == graph.graph["s"]


# ------------------------------------------------------------------ equations
def test_equations_1_to_5():
    assert layer_count(18) == 10 and layer_count(22) == 12 and layer_count(10) == 6
    assert layers_per_group(18, 4) == 4 and layers_per_group(18, 3) == 8 and layers_per_group(22, 4) == 5
    assert virtual_switch_degrees(18, 4) == [1, 8, 8, 1]
    assert virtual_switch_degrees(18, 10) == [1] + [2] * 8 + [1]
    assert valid_v_values(18) == [3, 4, 6, 10] and valid_v_values(22) == [3, 4, 7, 12]
    # the paper's choices (IV-B, V-A): v = 4 for s = 18 (k = 10) and for s = 22 (k = 12)
    assert choose_v(18) == 4 and choose_v(22) == 4
    for s in range(4, 60, 2):
        v = choose_v(s)
        assert v >= 2 + (s - 2) / 10 and (s - 2) % (2 * (v - 2)) == 0
        assert all(w < 2 + (s - 2) / 10 for w in valid_v_values(s) if w < v)
        assert sum(virtual_switch_degrees(s, v)) == s


@pytest.mark.parametrize("v", [4, 6])
def test_figure_2_examples(v):
    """6 switches with s = 10: k = 6; v = 4 gives 2 groups of 2 layers, v = 6 four groups of 1 (FC)."""
    graph = fcplus_graph(6, 12, 10, v=v, seed=1)
    assert graph.graph["k"] == 6 and graph.graph["v"] == v
    n_gl = {4: 2, 6: 1}[v]
    assert graph.graph["n_gl"] == n_gl
    assert graph.graph["degrees"] == {4: [1, 4, 4, 1], 6: [1, 2, 2, 2, 2, 1]}[v]
    layers = virtual_layers(graph)
    assert [len(layers[m]) for m in range(1, 7)] == [6] + [6 // n_gl] * 4 + [6]
    assert sorted(layers[1]) == [(f"tor{i}", 1) for i in range(6)]
    assert sorted(layers[6]) == [(f"tor{i}", v) for i in range(6)]
    for tor, data in graph.nodes(data=True):
        assert data["layers"][0] == 1 and data["layers"][-1] == 6
        for j in range(2, v):  # S_i^j in group G_(j-1): layers 2 + (j-2) N_gl .. 1 + (j-1) N_gl
            assert 2 + (j - 2) * n_gl <= data["layers"][j - 1] <= 1 + (j - 1) * n_gl
    check_wiring(graph)
    for (tor, j), (down, up) in vswitch_degrees(graph).items():
        assert (down, up) == ((0, 1) if j == 1 else (1, 0) if j == v else (n_gl, n_gl))
    # every layer pair holds N links
    assert Counter(row["a_layer"] for row in link_table(graph)) == {m: 6 for m in range(1, 6)}


def test_figure_2b_is_fc_with_the_largest_k():
    plus = fcplus_graph(6, 12, 10, v=6, seed=1)
    fc = fc_graph(6, 12, 10, seed=1)
    assert fc.graph["k"] == fc.graph["v"] == 6 and fc.graph["layer_links"] == [1] * 5
    for graph in (plus, fc):
        assert all(data["layers"] == [1, 2, 3, 4, 5, 6] for _, data in graph.nodes(data=True))
        assert set(vswitch_degrees(graph).values()) == {(0, 1), (1, 1), (1, 0)}


def test_paper_sized_networks_are_simple_graphs_with_n_links_per_layer_pair():
    graph = fcplus_graph(400, 32, 18, seed=7)
    assert (graph.graph["v"], graph.graph["k"], graph.graph["n_gl"]) == (4, 10, 4)
    assert graph.graph["parallel_links"] == 0 and not any(len(keys) > 1 for _, _, keys in
                                                          ((u, w, graph[u][w]) for u, w in graph.edges()))
    assert Counter(row["a_layer"] for row in link_table(graph)) == {m: 400 for m in range(1, 10)}
    assert [len(members) for _, members in sorted(virtual_layers(graph).items())] == [400] + [100] * 8 + [400]
    check_wiring(graph)
    assert nx.is_connected(nx.Graph(graph))


def test_small_networks_need_and_get_parallel_links():
    graph = fcplus_graph(6, 12, 10, v=4, seed=2)  # 10 links to 5 other ToRs
    assert graph.graph["parallel_links"] > 0
    check_wiring(graph)


def test_seed_decides_everything():
    def fingerprint(graph):
        return (sorted((u, w, key, data["port"][u], data["port"][w]) for u, w, key, data in
                       graph.edges(keys=True, data=True)),
                [graph.nodes[name]["layers"] for name in sorted(graph.nodes)])

    assert fingerprint(fcplus_graph(40, 20, 18, seed=5)) == fingerprint(fcplus_graph(40, 20, 18, seed=5))
    assert fingerprint(fcplus_graph(40, 20, 18, seed=5)) != fingerprint(fcplus_graph(40, 20, 18, seed=6))
    assert fingerprint(fc_graph(40, 20, 18, k=5, seed=5)) == fingerprint(fc_graph(40, 20, 18, k=5, seed=5))


def test_fc_layer_links_for_every_k():
    assert fc_layer_links(18, 4) == [3, 3, 3] and fc_layer_links(18, 10) == [1] * 9
    assert fc_layer_links(18, 6) == [2, 1, 3, 1, 2] and fc_layer_links(18, 8) == [1, 1, 2, 1, 2, 1, 1]
    for s in (4, 10, 18, 22, 64):
        for k in range(2, s // 2 + 2):
            links = fc_layer_links(s, k)
            assert len(links) == k - 1 and sum(links) == s // 2 and min(links) >= 1
    graph = fc_graph(30, 32, 18, k=5, seed=3)
    check_wiring(graph)
    links = graph.graph["layer_links"]
    for (tor, j), (down, up) in vswitch_degrees(graph).items():
        assert down == (links[j - 2] if j > 1 else 0) and up == (links[j - 1] if j < 5 else 0)


# ------------------------------------------------------------ bad parameters
@pytest.mark.parametrize("params,field,needle", [
    ({"N": 6, "p": 12, "s": 10, "v": 5}, "v", "one of: 3, 4, 6"),      # l_j = 8/3
    ({"N": 6, "p": 12, "s": 10, "v": 2}, "v", "2 < v <= k=6"),
    ({"N": 6, "p": 12, "s": 10, "v": 7}, "v", "one of: 3, 4, 6"),
    ({"N": 8, "p": 12, "s": 8, "v": 4}, "v", "N_gl"),                  # l_j = 3, N_gl = 1.5
    ({"N": 6, "p": 12, "s": 9}, "s", "even"),
    ({"N": 6, "p": 10, "s": 10}, "s", "below p=10"),
    ({"N": 22, "p": 12, "s": 10, "v": 3}, "N", "multiple of N_gl=4 that is >= 20"),
    ({"N": 16, "p": 12, "s": 10, "v": 3}, "N", "multiple of N_gl=4 that is >= 20"),
    ({"N": 1, "p": 12, "s": 10, "v": 6}, "N", ">= 2"),
    ({"N": 6, "p": 300, "s": 10}, "p", "254"),
    ({"N": 6, "p": 12, "s": 10, "v": 4, "hosts_per_tor": 3}, "hosts_per_tor", "1 to 2"),
    ({"N": 6, "p": 12, "s": 10, "v": 4, "seed": "x"}, "seed", "integer"),
])
def test_bad_fcplus_parameters_name_the_field_and_what_is_valid(params, field, needle):
    with pytest.raises(ParameterError) as caught:
        FCPlusTopo(**params)
    assert caught.value.field == field
    assert needle in str(caught.value) and "allowed" in str(caught.value)


@pytest.mark.parametrize("params,field", [
    ({"N": 6, "p": 12, "s": 10, "k": 7}, "k"),
    ({"N": 6, "p": 12, "s": 10, "k": 1}, "k"),
    ({"N": 6, "p": 12, "s": 9}, "s"),
    ({"N": 6, "p": 9, "s": 10}, "s"),
    ({"N": 3, "p": 12, "s": 10, "k": 2}, "N"),  # 5 links from S^1 to 5 other ToRs
])
def test_bad_fc_parameters(params, field):
    with pytest.raises(ParameterError) as caught:
        FCTopo(**params)
    assert caught.value.field == field


def test_hand_made_graphs_refuse_links_the_virtual_topology_cannot_have():
    with pytest.raises(ParameterError, match="adjacent layers"):
        tor_graph_from_links([[1, 2, 3], [1, 2, 3]], [((0, 1), (1, 3))])
    with pytest.raises(ParameterError, match="different ToRs"):
        tor_graph_from_links([[1, 2, 3]], [((0, 1), (0, 2))])
    with pytest.raises(ParameterError, match="at most one link"):
        tor_graph_from_links([[1, 2], [1, 2]], [((0, 1), (1, 2)), ((1, 2), (0, 1))])


# ---------------------------------------------------------- the Mininet topology
@pytest.mark.parametrize("kind,params", [("fcplus", {"N": 6, "p": 12, "s": 10, "v": 4}),
                                         ("fcplus", {}), ("fc", {"N": 10, "p": 10, "s": 6, "k": 3})])
def test_topology_follows_the_testbed_conventions(kind, params):
    topo = make_topology(kind, **params)
    assert isinstance(topo, FabricTopo) and kind in TOPOLOGY_KINDS and topo.kind == kind
    graph = topo.graph()
    tors = topo.tor_graph()
    dpids = set()
    for name, attrs in graph.nodes(data=True):
        assert len(name) <= 8
        if attrs["role"] == "host":
            assert attrs["level"] == 0
            address = ipaddress.IPv4Interface(attrs["ip"])
            assert attrs["mac"] == mac_from_ip(address.ip)
            assert attrs["tor"] == attrs["switch"] and graph.degree(name) == 1
            assert address.ip in ipaddress.IPv4Network(graph.nodes[attrs["tor"]]["prefix"])
        else:
            assert attrs["role"] == "tor" and attrs["level"] == 1
            dpids.add(attrs["dpid"])
            assert attrs["virtual_layers"] == tors.nodes[name]["layers"]
            assert attrs["virtual_ports"] == tors.nodes[name]["ports"]
    assert len(dpids) == len(topo.switches()) == topo.params["N"]
    assert len(topo.hosts()) == topo.params["N"] * topo.params["hosts_per_tor"]
    ports = Counter()
    for a, b, key, data in graph.edges(keys=True, data=True):
        for node, port in ((data["a"], data["a_port"]), (data["b"], data["b_port"])):
            ports[(node, port)] += 1
            assert len(f"{node}-eth{port}") <= 15
        if graph.nodes[data["a"]]["role"] == "host":
            assert data["a_port"] == 0 and 1 <= data["b_port"] <= tors.graph["h"]
        else:  # the lower end (on the lower virtual layer) comes first
            assert port_virtual_switch(tors, data["a"], data["a_port"])[1] + 1 == \
                port_virtual_switch(tors, data["b"], data["b_port"])[1]
        assert data["capacity_mbps"] > 0
    assert max(ports.values()) == 1
    tor_links = sorted((d["a"], d["a_port"], d["b"], d["b_port"]) for _, _, d in graph.edges(data=True)
                       if graph.nodes[d["a"]]["role"] == "tor")
    assert tor_links == sorted((r["a"], r["a_port"], r["b"], r["b_port"]) for r in topo.link_layers())
    data = json.loads(json.dumps(topo.to_dict()))
    assert list(data) == ["kind", "params", "nodes", "links"]
    assert data["params"]["seed"] == 1


def test_queries_and_summary():
    topo = FCPlusTopo(N=6, p=12, s=10, v=4, seed=3)
    assert topo.k == 6 and topo.v == 4
    layers = topo.virtual_layers()
    assert sum(len(members) for members in layers.values()) == 6 * 4
    row = topo.link_layers()[0]
    assert topo.port_virtual_switch(row["a"], row["a_port"]) == (row["a_vswitch"], row["a_layer"])
    with pytest.raises(ParameterError):
        topo.port_virtual_switch("tor0", 1)  # a host port
    summary = dict(topo.summary())
    assert summary["tor nodes"] == 6 and summary["host nodes"] == 12 and summary["tor-tor links"] == 30
    assert summary["l_j (links per virtual switch)"] == "1,4,4,1"
    assert summary["virtual switches per layer (L1..Lk)"] == "6,3,3,3,3,6"
    assert topo.tor_graph() is not topo.tor_graph()  # a copy each time


def test_cli_strings_and_fewer_hosts():
    topo = make_topology("fcplus", N="20", p="16", s="10", seed="4", hosts_per_tor="1")
    assert topo.params == {"N": 20, "p": 16, "s": 10, "v": 3, "seed": 4, "hosts_per_tor": 1,
                           "hosts_link_mbps": 100.0, "fabric_link_mbps": 100.0}
    assert len(topo.hosts()) == 20
    assert topo.nodeInfo("tor0")["virtual_ports"][0] == [7]  # host ports 1..6 stay reserved


# ----------------------------------------------------------------- export
def test_dot_shows_tors_virtual_layers_and_links():
    topo = FCPlusTopo(N=6, p=12, s=10, v=4, seed=3)
    text = to_dot(topo)
    assert text.startswith('graph "fcplus" {') and text.rstrip().endswith("}")
    assert text.count("rank=same") == 2 + 6  # hosts, ToRs, L1..L6
    assert text.count(" -- ") == 12 + 6 * 4 + 30  # host links, ToR-to-virtual-switch edges, links
    assert text.count("style=dashed") == 6 * 4
    row = topo.link_layers()[0]
    assert (f'"{row["a"]}/{row["a_vswitch"]}" -- "{row["b"]}/{row["b_vswitch"]}" '
            f'[taillabel="{row["a_port"]}", headlabel="{row["b_port"]}"]') in text
    assert text.count("{") == text.count("}")


def test_png_of_the_virtual_layers(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.image

    target = tmp_path / "fcplus.png"
    write_png(FCPlusTopo(N=6, p=12, s=10, v=4, seed=3), str(target))
    image = matplotlib.image.imread(str(target))
    height, width = image.shape[:2]
    assert height > width > 300  # 8 rows of 6 nodes
    assert image[..., :3].std() > 0.05


def test_the_smallest_n_allowed_always_wires():
    """N = N_gl (N_gl + 1) (FC+) and N = max d_m + 1 (FC) are refused by no wiring."""
    for s in range(4, 24, 2):
        for v in valid_v_values(s):
            n_gl = layers_per_group(s, v)
            check_wiring(fcplus_graph(n_gl * (n_gl + 1) if n_gl > 1 else 2, s + 1, s, v=v, seed=s))
        for k in range(2, s // 2 + 2):
            check_wiring(fc_graph(max(fc_layer_links(s, k)) + 1, s + 1, s, k=k, seed=s))
