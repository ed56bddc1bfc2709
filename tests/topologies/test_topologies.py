"""Topology generators: structure, ports, addressing, graph/dict export and parameter errors."""
import ipaddress
import json
from collections import Counter

import networkx as nx
import pytest

from testbed.errors import ParameterError
from testbed.topologies.ab_fattree import ABFatTree
from testbed.topologies.base import FabricTopo, mac_from_ip
from testbed.topologies.clos import Clos3Topo, ClosTopo, spread_uplinks
from testbed.topologies.fattree import FatTree
from testbed.topologies.registry import TOPOLOGY_KINDS, describe_kinds, make_topology, parse_value

ALL_KINDS_SMALL = [("clos", {}), ("clos3", {}), ("fattree", {"k": 4}), ("abfattree", {"k": 4}), ("dsf", {})]


def roles(topo):
    """Count nodes per role."""
    return Counter(attrs["role"] for _, attrs in topo.graph().nodes(data=True))


def core_neighbours(graph, agg):
    """Sorted core indices an aggregation switch links to."""
    return sorted(graph.nodes[n]["index"] for n in graph[agg] if graph.nodes[n]["role"] == "core")


# ------------------------------------------------------------------- common conventions
@pytest.mark.parametrize("kind,params", ALL_KINDS_SMALL)
def test_every_kind_follows_the_node_and_link_conventions(kind, params):
    topo = make_topology(kind, **params)
    assert isinstance(topo, FabricTopo) and topo.kind == kind
    graph = topo.graph()
    assert isinstance(graph, nx.MultiGraph)
    dpids = set()
    for name, attrs in graph.nodes(data=True):
        assert len(name) <= 8
        assert "role" in attrs and "level" in attrs
        if attrs["role"] == "host":
            assert attrs["level"] == 0
            address = ipaddress.IPv4Interface(attrs["ip"])
            assert address.network == ipaddress.IPv4Network("10.0.0.0/8")
            assert attrs["mac"] == mac_from_ip(address.ip)
            assert graph.has_edge(name, attrs["switch"]) and graph.degree(name) == 1
        else:
            assert attrs["level"] >= 1
            assert len(attrs["dpid"]) == 16 and int(attrs["dpid"], 16) > 0
            dpids.add(attrs["dpid"])
    assert len(dpids) == len(topo.switches())
    ips = [attrs["ip"] for _, attrs in graph.nodes(data=True) if attrs["role"] == "host"]
    assert len(set(ips)) == len(ips)
    ports = Counter()
    for a, b, key, data in graph.edges(keys=True, data=True):
        assert {data["a"], data["b"]} == {a, b}
        assert data["capacity_mbps"] > 0
        for node, port in ((data["a"], data["a_port"]), (data["b"], data["b_port"])):
            ports[(node, port)] += 1
            assert len(f"{node}-eth{port}") <= 15
            if graph.nodes[node]["role"] == "host":
                assert port == 0
            else:
                assert port >= 1
        assert graph.nodes[data["a"]]["level"] < graph.nodes[data["b"]]["level"]
    assert max(ports.values()) == 1, "a port is used by two links"
    # the Mininet view agrees with the graph
    assert sorted(topo.hosts()) == sorted(n for n, a in graph.nodes(data=True) if a["role"] == "host")
    assert len(topo.links()) == graph.number_of_edges()


@pytest.mark.parametrize("kind,params", ALL_KINDS_SMALL)
def test_to_dict_is_json_with_the_stable_keys(kind, params):
    topo = make_topology(kind, **params)
    data = json.loads(json.dumps(topo.to_dict()))
    assert list(data) == ["kind", "params", "nodes", "links"]
    assert data["kind"] == kind
    for node in data["nodes"]:
        assert list(node)[:3] == ["name", "role", "level"]
    for link in data["links"]:
        assert list(link) == ["a", "a_port", "b", "b_port", "capacity_mbps"]
    assert len(data["nodes"]) == topo.graph().number_of_nodes()
    assert len(data["links"]) == topo.graph().number_of_edges()
    # deterministic
    assert json.dumps(make_topology(kind, **params).to_dict()) == json.dumps(topo.to_dict())


@pytest.mark.parametrize("kind,params", ALL_KINDS_SMALL + [
    ("clos", {"leaves": 2, "spines": 2, "hosts_per_leaf": [1, 2], "oversubscription": 2}),
    ("dsf", {"clusters": 1, "sdsw": 0, "planes": 2, "rail_optimized": True, "gpus_per_server": 2}),
])
def test_params_rebuild_the_same_topology(kind, params):
    first = make_topology(kind, **params).to_dict()
    again = make_topology(kind, **json.loads(json.dumps(first["params"]))).to_dict()
    assert again == first


def test_summary_rows_count_roles_links_and_ports():
    rows = dict(FatTree(k=4).summary())
    assert rows["kind"] == "fattree"
    assert rows["host nodes"] == 16 and rows["edge nodes"] == 8
    assert rows["agg nodes"] == 8 and rows["core nodes"] == 4
    assert rows["links"] == 48
    assert rows["max ports used per core"] == 4
    assert rows["agg-core capacity (Mbps)"] == "1600"


# ------------------------------------------------------------------------- FatTree / AB
@pytest.mark.parametrize("cls", [FatTree, ABFatTree])
def test_k4_fattree_counts(cls):
    topo = cls(k=4, levels=2)
    assert roles(topo) == {"host": 16, "edge": 8, "agg": 8, "core": 4}
    assert topo.graph().number_of_edges() == 16 * 3


@pytest.mark.parametrize("k", [4, 6, 8])
@pytest.mark.parametrize("cls", [FatTree, ABFatTree])
def test_fattree_sizes_and_ports(cls, k):
    topo = cls(k=k)
    p = k // 2
    graph = topo.graph()
    assert roles(topo) == {"host": 2 * p ** 3, "edge": 2 * p * p, "agg": 2 * p * p, "core": p * p}
    for name in topo.switches():
        assert graph.degree(name) == k
        assert topo.ports_used(name) == k
        used = sorted(port for _, _, d in graph.edges(name, data=True)
                      for node, port in ((d["a"], d["a_port"]), (d["b"], d["b_port"])) if node == name)
        assert used == list(range(1, k + 1))


def test_ab_fattree_k4_pod_core_wiring():
    graph = ABFatTree(k=4).graph()
    # pods 0 and 2 are type A, pods 1 and 3 type B
    for pod in (0, 2):
        assert graph.nodes[f"a{pod}_0"]["subtree_type"] == "A"
        assert core_neighbours(graph, f"a{pod}_0") == [0, 1]
        assert core_neighbours(graph, f"a{pod}_1") == [2, 3]
    for pod in (1, 3):
        assert graph.nodes[f"a{pod}_0"]["subtree_type"] == "B"
        assert core_neighbours(graph, f"a{pod}_0") == [0, 2]
        assert core_neighbours(graph, f"a{pod}_1") == [1, 3]


def test_standard_fattree_k4_every_pod_is_type_a():
    graph = FatTree(k=4).graph()
    for pod in range(4):
        assert core_neighbours(graph, f"a{pod}_0") == [0, 1]
        assert core_neighbours(graph, f"a{pod}_1") == [2, 3]
        assert graph.nodes[f"a{pod}_0"]["type_stack"] == ("A",)


def test_fattree_and_ab_fattree_share_hosts_addresses_and_host_ports():
    plain, ab = FatTree(k=6).to_dict(), ABFatTree(k=6).to_dict()
    hosts = lambda d: [(n["name"], n["ip"], n["mac"], n["edge"]) for n in d["nodes"] if n["role"] == "host"]
    assert hosts(plain) == hosts(ab)
    host_links = lambda d: [link for link in d["links"] if link["a"].startswith("h")]
    assert host_links(plain) == host_links(ab)
    assert [n["name"] for n in plain["nodes"]] == [n["name"] for n in ab["nodes"]]


def test_location_addresses_follow_f10():
    topo = ABFatTree(k=4)  # p=2, b=1, L=2: locations of L*b+1 = 3 bits
    assert topo.location_bits == 3 and topo.host_location_bits == 4
    # pod 3 (fourth subtree below the cores) has location 0b11 then 1 zero bit
    assert topo.location("a3_0") == 0b110
    assert topo.location("e3_1") == 0b111
    assert topo.location("h16") == 0b1111
    assert topo.nodeInfo("h16")["ip"] == "10.0.0.31/8"
    assert topo.nodeInfo("h1")["ip"] == "10.0.0.1/8"
    # every host lies in the prefixes of all its ancestors' subtrees, and only those
    graph = topo.graph()
    for host, attrs in graph.nodes(data=True):
        if attrs["role"] != "host":
            continue
        address = ipaddress.IPv4Interface(attrs["ip"]).ip
        edge = attrs["edge"]
        assert address in ipaddress.IPv4Network(topo.subtree_prefix(edge))
        pod_aggs = [n for n in graph[edge] if graph.nodes[n]["role"] == "agg"]
        for agg in pod_aggs:
            assert address in ipaddress.IPv4Network(topo.subtree_prefix(agg))
        other_pod = f"a{(attrs['pod'] + 1) % 4}_0"
        assert address not in ipaddress.IPv4Network(topo.subtree_prefix(other_pod))
        assert address in ipaddress.IPv4Network(topo.subtree_prefix("c0"))


def test_location_addresses_with_p_not_a_power_of_two():
    topo = FatTree(k=6)  # p=3, b=2
    prefixes = {}
    for name in topo.switches():
        if topo.nodeInfo(name)["role"] == "agg":
            prefixes.setdefault(topo.nodeInfo(name)["pod"], set()).add(topo.subtree_prefix(name))
    assert all(len(p) == 1 for p in prefixes.values())
    networks = [ipaddress.IPv4Network(p.pop()) for p in prefixes.values()]
    for i, a in enumerate(networks):
        for b in networks[i + 1:]:
            assert not a.overlaps(b)


def test_type_stacks_failure_groups_and_levels():
    topo = ABFatTree(k=4, levels=3)
    graph = topo.graph()
    assert roles(topo) == {"host": 32, "edge": 16, "agg": 32, "core": 8}
    for name in topo.switches():
        attrs = graph.nodes[name]
        if attrs["role"] == "core":
            assert topo.type_stack(name) == ()
            continue
        assert len(topo.type_stack(name)) == topo.L - attrs["f10_level"]
        assert topo.type_stack(name)[-1] == topo.subtree_type(name)
        t, j = topo.failure_group(name)
        assert t == topo.subtree_type(name) and j == attrs["index"]
        members = topo.failure_group_members(name)
        assert sorted(members) == sorted(n for n in graph[name] if graph.nodes[n]["level"] == attrs["level"] + 1)
    # the parents of root j of type-t subtrees are the same switches in every such subtree
    assert topo.failure_group_members("b0_1") == topo.failure_group_members("b2_1")
    assert topo.failure_group_members("b0_1") != topo.failure_group_members("b1_1")
    with pytest.raises(ParameterError):
        topo.failure_group("c0")


# --------------------------------------------------------------------------------- Clos
def test_clos_two_tier_with_parallel_links():
    topo = ClosTopo(leaves=4, spines=2, hosts_per_leaf=3, links_per_pair=2)
    graph = topo.graph()
    assert roles(topo) == {"host": 12, "leaf": 4, "spine": 2}
    assert graph.number_of_edges("leaf0", "spine1") == 2
    assert topo.ports_used("leaf0") == 3 + 4
    assert topo.ports_used("spine0") == 8
    assert graph.nodes["h4"]["ip"] == "10.0.1.1/8"


def test_clos_hosts_per_leaf_list_and_bundle_matrix():
    topo = ClosTopo(leaves=3, spines=2, hosts_per_leaf=[1, 2, 3], bundle_matrix=[[1, 2], [2, 1], [0, 3]])
    graph = topo.graph()
    assert [graph.degree(f"leaf{i}") for i in range(3)] == [4, 5, 6]
    assert graph.number_of_edges("leaf2", "spine0") == 0
    assert graph.number_of_edges("leaf2", "spine1") == 3
    assert topo.ports_used("spine1") == 6


def test_clos_uplinks_and_oversubscription():
    topo = ClosTopo(leaves=4, spines=4, hosts_per_leaf=6, uplinks_per_leaf=6)
    assert all(topo.ports_used(f"leaf{i}") == 12 for i in range(4))
    assert sorted(topo.ports_used(f"spine{j}") for j in range(4)) == [6, 6, 6, 6]
    assert spread_uplinks(5, 4, 0) == [2, 1, 1, 1]
    over = ClosTopo(leaves=2, spines=2, hosts_per_leaf=8, oversubscription=2)
    assert over.oversubscription_per_leaf() == [2.0, 2.0]
    assert dict(over.summary())["oversubscription (min..max)"] == "2.00..2.00"


def test_clos3_pods_and_planes():
    topo = Clos3Topo(pods=2, leaves_per_pod=2, spines_per_pod=2, cores=4, hosts_per_leaf=2)
    graph = topo.graph()
    assert roles(topo) == {"host": 8, "leaf": 4, "spine": 4, "core": 4}
    # spine 0 of each pod -> cores 0,1 (plane 0); spine 1 -> cores 2,3
    assert sorted(n for n in graph["spine0"] if n.startswith("core")) == ["core0", "core1"]
    assert sorted(n for n in graph["spine3"] if n.startswith("core")) == ["core2", "core3"]
    assert graph.nodes["leaf2"]["pod"] == 1
    mesh = Clos3Topo(cores=3, core_wiring="mesh").graph()
    assert sorted(n for n in mesh["spine1"] if n.startswith("core")) == ["core0", "core1", "core2"]


# --------------------------------------------------------------------- bad parameters
@pytest.mark.parametrize("kind,params,field", [
    ("fattree", {"k": 5}, "k"),
    ("fattree", {"k": 0}, "k"),
    ("abfattree", {"k": -2}, "k"),
    ("fattree", {"k": "four"}, "k"),
    ("fattree", {"levels": 0}, "levels"),
    ("abfattree", {"k": 512}, "k"),            # p = 256 needs 3*8+1 = 25 location bits
    ("abfattree", {"k": 64, "levels": 4}, "k"),  # 5*5+1 = 26 bits
    ("clos", {"hosts_per_leaf": 0}, "hosts_per_leaf"),
    ("clos", {"leaves": -1}, "leaves"),
    ("clos", {"leaves": 2, "hosts_per_leaf": [1, 2, 3]}, "hosts_per_leaf"),
    ("clos", {"leaf_ports": 3}, "leaf_ports"),      # 2 hosts + 2 uplinks
    ("clos", {"spine_ports": 3}, "spine_ports"),    # 4 leaves
    ("clos", {"links_per_pair": 0}, "links_per_pair"),
    ("clos", {"uplinks_per_leaf": 2, "oversubscription": 1}, "oversubscription"),
    ("clos", {"leaves": 2, "spines": 2, "bundle_matrix": [[1, 0]]}, "bundle_matrix"),
    ("clos", {"hosts_link_mbps": 0}, "hosts_link_mbps"),
    ("clos", {"leaves": 2, "spines": 3, "oversubscription": 2}, "oversubscription"),  # 1 uplink cannot reach 3 spines
    ("clos", {"leaves": 1, "spines": 3, "uplinks_per_leaf": 2}, "uplinks_per_leaf"),
    ("clos3", {"cores": 3}, "cores"),
    ("clos3", {"core_wiring": "ring"}, "core_wiring"),
    ("clos3", {"spine_ports": 2}, "spine_ports"),
    ("dsf", {"clusters": 2, "sdsw": 0}, "sdsw"),
    ("dsf", {"hosts_per_rdsw": 0}, "hosts_per_rdsw"),
    ("dsf", {"fdsw_ports": 7}, "fdsw_ports"),
    ("dsf", {"rail_optimized": True}, "gpus_per_server"),
    ("dsf", {"rail_optimized": True, "gpus_per_server": 3}, "rdsw_per_cluster"),
    ("dsf", {"planes": 2, "rail_optimized": True, "gpus_per_server": 3}, "gpus_per_server"),
])
def test_bad_parameters_name_the_field_and_allowed_values(kind, params, field):
    with pytest.raises(ParameterError) as caught:
        make_topology(kind, **params)
    assert caught.value.field == field
    assert caught.value.allowed
    assert field in str(caught.value) and "allowed" in str(caught.value)


def test_unknown_kind_and_parameter_list_the_allowed_ones():
    with pytest.raises(ParameterError) as caught:
        make_topology("torus")
    assert caught.value.field == "kind"
    assert all(kind in caught.value.allowed for kind in TOPOLOGY_KINDS)
    with pytest.raises(ParameterError) as caught:
        make_topology("fattree", radix=4)
    assert caught.value.field == "radix"
    assert "k" in caught.value.allowed and "levels" in caught.value.allowed


@pytest.mark.parametrize("cls", [ClosTopo, Clos3Topo, FatTree, ABFatTree])
def test_direct_construction_rejects_unknown_parameters(cls):
    with pytest.raises(ParameterError) as caught:
        cls(radix=4)
    assert caught.value.field == "radix" and "unknown" in str(caught.value)


def test_odd_k_message():
    with pytest.raises(ParameterError, match=r"invalid k=3: allowed values are an even integer from 2 to 254"):
        FatTree(k=3)


def test_make_topology_parses_cli_strings():
    assert parse_value("4") == 4 and parse_value("2.5") == 2.5 and parse_value("true") is True
    assert parse_value("1,2,3") == [1, 2, 3]
    assert parse_value("1,2;2,1") == [[1, 2], [2, 1]]
    assert parse_value("[[1,2],[2,1]]") == [[1, 2], [2, 1]]
    assert parse_value("mesh") == "mesh"
    topo = make_topology("clos", leaves="2", spines="2", hosts_per_leaf="1,2", bundle_matrix="1,2;2,1")
    assert topo.params["bundle_matrix"] == [[1, 2], [2, 1]]
    assert make_topology("fattree", k="6").params["k"] == 6
    kinds = [row[0] for row in describe_kinds()]
    assert kinds == list(TOPOLOGY_KINDS)


def test_designer_style_construction():
    """The designer builds ClosTopo(leaves=E, spines=C, hosts_per_leaf=[...], bundle_matrix=[...])."""
    topo = ClosTopo(leaves=5, spines=2, hosts_per_leaf=[18, 18, 18, 18, 18],
                    bundle_matrix=[[3, 2], [2, 3], [3, 2], [2, 3], [3, 2]], leaf_ports=24, spine_ports=24,
                    hosts_link_mbps=100, fabric_link_mbps=100)
    assert roles(topo)["host"] == 90
    assert topo.ports_used("spine0") == 13 and topo.ports_used("leaf0") == 23


def test_package_reexports_the_public_classes():
    import testbed.topologies as package

    assert package.FatTree is FatTree and package.ABFatTree is ABFatTree and package.ClosTopo is ClosTopo
    assert package.make_topology is make_topology and package.TOPOLOGY_KINDS is TOPOLOGY_KINDS
    with pytest.raises(AttributeError):
        package.NoSuchTopology  # noqa: B018
