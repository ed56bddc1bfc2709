"""DSF-like topology (seed 000): Figure 4 link counts and the Input Balanced Mode failure examples."""
import random
from collections import Counter

import pytest

from testbed.errors import ParameterError
from testbed.topologies.dsf.reachability import (capacity_toward, input_balanced_withdrawals, links_between,
                                                 reachability_capacities)
from testbed.topologies.dsf.topology import DSFTopo

X_MINUS_1, X = 0, 1  # the seed's "Cluster X-1" and "Cluster X"


@pytest.fixture(scope="module")
def figure4():
    """The Figure 4 fabric (the DSFTopo defaults) and its graph."""
    topo = DSFTopo()
    return topo, topo.graph()


def link_count(graph, a, b):
    """Parallel links between a and b."""
    return graph.number_of_edges(a, b) if graph.has_edge(a, b) else 0


def test_figure4_counts_and_bundles(figure4):
    topo, graph = figure4
    roles = Counter(attrs["role"] for _, attrs in graph.nodes(data=True))
    assert roles == {"rdsw": 8, "fdsw": 4, "sdsw": 2, "host": 16}
    tiers = Counter(tuple(sorted((graph.nodes[a]["role"], graph.nodes[b]["role"]))) for a, b in graph.edges())
    assert tiers[("fdsw", "rdsw")] == 16 and tiers[("fdsw", "sdsw")] == 16
    for cluster in (X_MINUS_1, X):
        for f in range(2):
            fdsw = topo.device("fdsw", cluster, f)
            # input capacity 4 (RDSW0-RDSW3), output capacity 4 (2 links to each SDSW)
            assert sum(link_count(graph, fdsw, topo.device("rdsw", cluster, r)) for r in range(4)) == 4
            for s in range(2):
                assert link_count(graph, fdsw, topo.device("sdsw", 0, s)) == 2
            assert topo.ports_used(fdsw) == 8
        for r in range(4):
            rdsw = topo.device("rdsw", cluster, r)
            assert [link_count(graph, rdsw, topo.device("fdsw", cluster, f)) for f in range(2)] == [1, 1]
    for s in range(2):
        sdsw = topo.device("sdsw", 0, s)
        per_cluster = Counter(graph.nodes[n]["cluster"] for n in graph.neighbors(sdsw)
                              for _ in range(link_count(graph, sdsw, n)))
        assert per_cluster == {X_MINUS_1: 4, X: 4}
    capacities = {data["capacity_mbps"] for _, _, data in graph.edges(data=True)}
    assert capacities == {100.0}


def test_failure_free_capacity_is_balanced(figure4):
    topo, graph = figure4
    dest = topo.device("rdsw", X, 3)
    caps = reachability_capacities(graph, dest)
    for s in range(2):
        assert caps[topo.device("sdsw", 0, s)][2:] == (4, 4)
    for f in range(2):
        assert caps[topo.device("fdsw", X_MINUS_1, f)][2:] == (4, 4)
    for r in range(4):
        assert caps[topo.device("rdsw", X_MINUS_1, r)].output_links == 2


def test_rdsw_fdsw_failure_example(figure4):
    """FDSW1 of cluster X loses RDSW3: SDSW0 sees input 4 and output 2 toward RDSW3; IBM ends at 50%."""
    topo, graph = figure4
    dest = topo.device("rdsw", X, 3)
    failed = links_between(graph, topo.device("fdsw", X, 1), dest)
    assert len(failed) == 1
    for s in range(2):
        sdsw = topo.device("sdsw", 0, s)
        cap = capacity_toward(graph, sdsw, dest, failed)
        assert (cap.input_links, cap.output_links) == (4, 2)
        assert (cap.input_mbps, cap.output_mbps) == (400.0, 200.0)
    assert capacity_toward(graph, topo.device("fdsw", X, 1), dest, failed).output_links == 0
    for seed in range(20):
        withdrawn = input_balanced_withdrawals(graph, dest, failed, random.Random(seed))
        caps = reachability_capacities(graph, dest, failed, withdrawn)
        for s in range(2):
            sdsw = caps[topo.device("sdsw", 0, s)]
            assert (sdsw.input_links, sdsw.output_links) == (2, 2)
        fdsws = [caps[topo.device("fdsw", X_MINUS_1, f)] for f in range(2)]
        assert all(fdsw.input_links == fdsw.output_links for fdsw in fdsws)  # input 4 cut to the output
        assert sum(fdsw.output_links for fdsw in fdsws) == 4  # the SDSWs withdrew 4 of their 8 inputs
        remaining = sum(caps[topo.device("rdsw", X_MINUS_1, r)].output_links for r in range(4))
        assert remaining == 4  # 50% of the 8 links of cluster X-1's RDSWs
        for device, cap in caps.items():
            if graph.nodes[device]["role"] in ("sdsw",) or graph.nodes[device]["cluster"] == X_MINUS_1:
                assert cap.input_mbps <= cap.output_mbps


def test_fdsw_sdsw_failure_example(figure4):
    """One FDSW1(X)-SDSW1 link fails: both ends see input 4 and output 3 and withdraw one link each."""
    topo, graph = figure4
    fdsw1_x, sdsw1 = topo.device("fdsw", X, 1), topo.device("sdsw", 0, 1)
    failed = links_between(graph, fdsw1_x, sdsw1)[:1]
    # traffic leaving cluster X through FDSW1 toward an RDSW of cluster X-1
    dest_x_minus_1 = topo.device("rdsw", X_MINUS_1, 0)
    cap = capacity_toward(graph, fdsw1_x, dest_x_minus_1, failed)
    assert (cap.input_links, cap.output_links) == (4, 3)
    # traffic entering cluster X through SDSW1
    dest_x = topo.device("rdsw", X, 2)
    cap = capacity_toward(graph, sdsw1, dest_x, failed)
    assert (cap.input_links, cap.output_links) == (4, 3)
    withdrawn = input_balanced_withdrawals(graph, dest_x, failed, random.Random(7))
    caps = reachability_capacities(graph, dest_x, failed, withdrawn)
    assert (caps[sdsw1].input_links, caps[sdsw1].output_links) == (3, 3)
    # the FDSW of cluster X-1 that lost an advertisement drops one RDSW link: one RDSW loses one link
    assert sum(caps[topo.device("rdsw", X_MINUS_1, r)].output_links for r in range(4)) == 7
    withdrawn = input_balanced_withdrawals(graph, dest_x_minus_1, failed, random.Random(7))
    caps = reachability_capacities(graph, dest_x_minus_1, failed, withdrawn)
    assert (caps[fdsw1_x].input_links, caps[fdsw1_x].output_links) == (3, 3)


def test_capacity_toward_rejects_non_rdsw_destination(figure4):
    topo, graph = figure4
    with pytest.raises(ParameterError):
        capacity_toward(graph, topo.device("sdsw", 0, 0), topo.device("fdsw", 0, 0))


def test_planes_are_disjoint_copies():
    topo = DSFTopo(planes=2)
    graph = topo.graph()
    roles = Counter(attrs["role"] for _, attrs in graph.nodes(data=True))
    assert roles == {"rdsw": 16, "fdsw": 8, "sdsw": 4, "host": 32}
    for a, b in graph.edges():
        assert graph.nodes[a]["plane"] == graph.nodes[b]["plane"]


def test_rail_optimized_hosts():
    topo = DSFTopo(clusters=1, sdsw=0, rdsw_per_cluster=8, hosts_per_rdsw=4, rail_optimized=True, gpus_per_server=8)
    graph = topo.graph()
    hosts = [(n, a) for n, a in graph.nodes(data=True) if a["role"] == "host"]
    assert len(hosts) == 32
    by_rail = {}
    for name, attrs in hosts:
        by_rail.setdefault(attrs["rail"], set()).add(attrs["rdsw"])
        assert attrs["rdsw"] in graph[name]
    # one RDSW per rail: NIC g of every server lands on the same RDSW
    assert all(len(rdsws) == 1 for rdsws in by_rail.values())
    assert len({next(iter(r)) for r in by_rail.values()}) == 8
    assert all(graph.nodes[n]["role"] != "sdsw" for n in graph.nodes)


def test_single_stage_dsf_and_port_limits():
    topo = DSFTopo(clusters=1, sdsw=0, rdsw_per_cluster=3, fdsw_per_cluster=3, rdsw_fdsw_links=2,
                   rdsw_ports=8, fdsw_ports=6)
    graph = topo.graph()
    assert graph.number_of_edges("rdsw0", "fdsw2") == 2
    assert topo.ports_used("fdsw0") == 6
    with pytest.raises(ParameterError) as caught:
        DSFTopo(clusters=1, sdsw=0, rdsw_per_cluster=3, fdsw_per_cluster=3, rdsw_fdsw_links=2, rdsw_ports=7)
    assert caught.value.field == "rdsw_ports"
