"""The Clos FC+ is compared with (topologies/fcplus/clos.py): same switches, ports and hosts, two tiers."""
import networkx as nx
import pytest

from testbed.errors import ParameterError
from testbed.topologies.fcplus.clos import equal_switch_clos
from testbed.topologies.fcplus.deadlock import is_deadlock_free
from testbed.topologies.fcplus.routing import routing_paths
from testbed.topologies.fcplus.throughput import all_to_all_traffic, routing_throughput
from testbed.topologies.registry import make_topology


@pytest.mark.parametrize("switches, ports, hosts", [(8, 6, 16), (8, 8, 16), (12, 8, 36), (20, 12, 100)])
def test_the_clos_uses_the_switches_and_ports_it_is_given(switches, ports, hosts):
    clos = equal_switch_clos(switches, ports, hosts)
    assert clos.number_of_nodes() == switches
    assert sum(clos.nodes[n]["servers"] for n in clos.nodes) == hosts
    for node in clos.nodes:
        assert clos.nodes[node]["servers"] + clos.degree(node) <= ports
        used = list(range(1, clos.nodes[node]["servers"] + 1)) + clos.nodes[node]["ports"][0]
        assert len(set(used)) == len(used) and max(used) <= ports
    leaves = [n for n in clos.nodes if clos.nodes[n]["servers"]]
    # every leaf has an uplink; the worst leaf's uplinks per host is the graph's figure
    ratios = [clos.degree(leaf) / clos.nodes[leaf]["servers"] for leaf in leaves]
    assert min(ratios) == pytest.approx(clos.graph["uplinks_per_host"])


def test_no_split_beats_the_chosen_one():
    # brute force over the leaf/spine splits of 8 switches of 6 ports: nothing serves 16 hosts better than 2/3
    assert equal_switch_clos(8, 6, 16).graph["uplinks_per_host"] == pytest.approx(2 / 3)
    assert equal_switch_clos(8, 8, 16).graph["uplinks_per_host"] == pytest.approx(1.0)


def test_too_few_switches_are_refused_naming_n():
    with pytest.raises(ParameterError) as error:
        equal_switch_clos(2, 4, 40)
    assert error.value.field == "N"


def test_the_topology_takes_the_fcplus_parameters_and_builds_the_clos():
    topo = make_topology("fcplus_clos", N=8, p=6, s=4, hosts_per_tor=2)
    graph = topo.graph()
    hosts = [n for n in graph.nodes if graph.nodes[n].get("role") == "host"]
    switches = [n for n in graph.nodes if graph.nodes[n].get("role") != "host"]
    assert len(hosts) == 16 and len(switches) == 8
    assert nx.is_connected(nx.Graph(graph))
    with pytest.raises(ParameterError) as error:   # the FC+ parameters are checked as FC+ checks them
        make_topology("fcplus_clos", N=8, p=6, s=6)
    assert error.value.field == "s"


def test_up_down_paths_on_the_clos_are_leaf_spine_leaf_and_deadlock_free():
    clos = equal_switch_clos(8, 6, 16)
    leaves = [n for n in clos.nodes if clos.nodes[n]["servers"]]
    pairs = [(a, b) for a in leaves for b in leaves if a != b]
    paths = [p for found in routing_paths(clos, pairs, "fcplus1l", k=4).values() for p in found]
    assert paths and all(len(path) == 2 for path in paths)
    assert is_deadlock_free(clos, paths)


def test_the_lp_gives_spines_no_traffic_and_bounds_the_clos_by_its_uplinks():
    clos = equal_switch_clos(8, 6, 16)
    demands = all_to_all_traffic(clos)
    assert not any(clos.nodes[u]["servers"] == 0 or clos.nodes[w]["servers"] == 0 for u, w in demands)
    theta = routing_throughput(clos, "fcplus1l", "all-to-all", k=4)["theta"]
    # a 3-host leaf sends 3 * 13 / 15 over its 2 uplinks
    assert theta == pytest.approx(2 / (3 * 13 / 15), rel=1e-6)


def test_each_run_gets_the_lp_of_its_topology_and_routing_and_compare_draws_it(tmp_path):
    from testbed.experiment.compare import comparison_row
    from testbed.mechanisms import hooks_for
    from testbed.mechanisms.fcplus.run import lp_section

    runs = {}
    for kind, routing in (("fcplus", "fcplus2l"), ("fcplus_clos", "fcplus1l")):
        topo = make_topology(kind, N=8, p=6, s=4, hosts_per_tor=2)
        section = lp_section(topo, {"routing": routing, "k": 4, "n_lp": 2}, seed=21)
        runs[kind] = {"mechanisms": ["fcplus"], "fcplus_lp": section, "summary": {"goodput_mbps": 5.0},
                      "traffic": [{"pattern": "alltoall", "completion_time_s": 3.5}]}
    # the Clos's 3-host leaves bound it below FC+ (2L) under all-to-all, as the LP of each says
    assert runs["fcplus_clos"]["fcplus_lp"]["theta"]["all-to-all"] < runs["fcplus"]["fcplus_lp"]["theta"]["all-to-all"]
    [hooks] = [each for each in hooks_for() if each.mechanism.name == "fcplus"]
    rows = [comparison_row(kind, results) for kind, results in runs.items()]
    assert rows[0]["completion_alltoall_s"] == 3.5 and rows[1]["lp_all_to_all"] == pytest.approx(2 / (3 * 13 / 15))
    files = hooks.comparison_plots(rows, {kind: [results] for kind, results in runs.items()}, str(tmp_path), "t")
    assert files == ["fcplus_comparison.png"] and (tmp_path / files[0]).stat().st_size > 0
