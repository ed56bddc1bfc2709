"""F10's epoch rescheduler (controllers/f10/scheduler.py) against the paper's definitions (seed 002, 5.3, 6.1, 6.2).

Placement: largest flow first, each on the shortest path of least
``sum 1/R(e)`` (R = remaining capacity); only shortest paths; failed and
held-down links never used; held-down links have residual 0.  Weighted ECMP:
integer weights proportional to the residual of each next hop; all zero ->
equal weights.
"""
import doctest

import pytest

from testbed.controllers.f10 import scheduler as sched
from testbed.controllers.te import Flow, path_nodes
from testbed.errors import ParameterError
from testbed.topologies.graph import link_id
from testbed.topologies.registry import make_topology


def test_doctests():
    assert doctest.testmod(sched).failed == 0


def two_paths():
    """h1 and h2 on two leaves joined by spine0 and spine1 (100 Mbit/s links): two shortest paths."""
    return make_topology("clos", leaves=2, spines=2, hosts_per_leaf=1).graph()


def link_of(graph, a, b):
    return link_id(next(iter(graph[a][b].values())))


def spine(path):
    return path_nodes(path)[2]


def test_two_paths_by_hand():
    """Costs by hand: every link starts at 100, so each flow's cost is sum 1/R over its 4 links."""
    graph = two_paths()
    flows = [Flow("a", "h1", "h2", 70.0), Flow("b", "h1", "h2", 20.0), Flow("c", "h1", "h2", 20.0)]
    placed = sched.place_flows_greedy(graph, flows)
    # a: tie (4/100 both) -> first path, spine0.  Host links now 30 both ways of the path.
    # b: spine0 1/30+1/30+1/30+1/30 = 0.133 vs spine1 1/30+1/100+1/100+1/30 = 0.087 -> spine1
    # c: spine0 1/10+1/30+1/30+1/10 = 0.267 vs spine1 1/10+1/80+1/80+1/10 = 0.225 -> spine1
    assert {name: spine(path) for name, path in placed.paths.items()} == {"a": "spine0", "b": "spine1",
                                                                          "c": "spine1"}
    residual = placed.residual
    assert residual[(link_of(graph, "leaf0", "spine0"), "leaf0")] == 30.0
    assert residual[(link_of(graph, "leaf0", "spine1"), "leaf0")] == 60.0
    assert residual[(link_of(graph, "leaf0", "spine1"), "spine1")] == 100.0   # the other direction
    assert residual[(link_of(graph, "leaf0", "h1"), "h1")] == -10.0          # 110 Mbit/s on a 100 link
    # the cost the function reports is the hand sum
    cost = sched.path_cost(placed.paths["a"], {key: 100.0 for key in residual})
    assert cost == (0, 0.0, pytest.approx(0.04))


def test_sum_of_inverse_residuals_is_not_the_bottleneck_rule():
    """spine0's links have 30 and 30 left (1/30+1/30 = 0.067), spine1's 25 and 100 (0.05).

    Both paths share the host links.  F10's cost picks spine1, although its
    bottleneck (25) is narrower than spine0's (30), where a widest-path rule
    would go.
    """
    graph = two_paths()
    residual = sched.directed_capacities(graph)
    residual[(link_of(graph, "leaf0", "spine0"), "leaf0")] = 30.0
    residual[(link_of(graph, "leaf1", "spine0"), "spine0")] = 30.0
    residual[(link_of(graph, "leaf0", "spine1"), "leaf0")] = 25.0
    placed = sched.place_flows_greedy(graph, [Flow("f", "h1", "h2", 1.0)], residual=residual)
    assert spine(placed.paths["f"]) == "spine1"
    assert placed.residual[(link_of(graph, "leaf0", "spine1"), "leaf0")] == 24.0
    assert residual[(link_of(graph, "leaf0", "spine1"), "leaf0")] == 25.0  # the input is not modified


def test_largest_flow_is_placed_first():
    graph = two_paths()
    flows = [Flow("f10", "h1", "h2", 10.0), Flow("f90", "h1", "h2", 90.0), Flow("f50", "h1", "h2", 50.0)]
    placed = sched.place_flows_greedy(graph, flows)
    assert placed.order == ["f90", "f50", "f10"]
    assert spine(placed.paths["f90"]) == "spine0" and spine(placed.paths["f50"]) == "spine1"
    # f10: spine0 spine links have 10 left, spine1's 50: spine1
    assert spine(placed.paths["f10"]) == "spine1"


def test_saturated_links_are_used_only_when_every_path_has_one():
    graph = two_paths()
    flows = [Flow("x", "h1", "h2", 150.0), Flow("y", "h1", "h2", 60.0), Flow("z", "h1", "h2", 60.0)]
    placed = sched.place_flows_greedy(graph, flows)
    # x overdraws spine0's links by 50; y avoids them; z: every path crosses the saturated host links
    # (-110 after x and y); spine0's path adds two more saturated links, spine1's (40 left) none
    assert [spine(placed.paths[n]) for n in ("x", "y", "z")] == ["spine0", "spine1", "spine1"]
    assert placed.residual[(link_of(graph, "leaf0", "spine1"), "leaf0")] == -20.0


def test_saturated_paths_compare_by_overdraft():
    graph = two_paths()
    residual = sched.directed_capacities(graph)
    residual[(link_of(graph, "leaf0", "spine0"), "leaf0")] = -5.0
    residual[(link_of(graph, "leaf0", "spine1"), "leaf0")] = -1.0
    placed = sched.place_flows_greedy(graph, [Flow("f", "h1", "h2", 1.0)], residual=residual)
    assert spine(placed.paths["f"]) == "spine1"


@pytest.fixture(scope="module")
def ab4():
    return make_topology("abfattree", k=4).graph()


def test_failed_and_held_down_links_are_never_used(ab4):
    hosts = sorted((n for n in ab4 if ab4.nodes[n]["role"] == "host"), key=lambda h: int(h[1:]))
    flows = [Flow(f"f{i}", src, dst, 10.0 + i) for i, (src, dst) in
             enumerate((a, b) for a in hosts for b in hosts if a != b and ab4.nodes[a]["pod"] != ab4.nodes[b]["pod"])]
    failed, held = [("c0", "a0_0")], [("a2_0", "c1")]
    schedule = sched.schedule_epoch(ab4, flows, failed_links=failed, held_down=held)
    assert not schedule.unplaced
    banned = sched.link_ids(ab4, failed) | sched.link_ids(ab4, held)
    for path in schedule.paths.values():
        assert len(path) == 6 and not {hop.link for hop in path} & banned
    held_id = next(iter(sched.link_ids(ab4, held)))
    assert schedule.residual[(held_id, "c1")] == schedule.residual[(held_id, "a2_0")] == 0.0
    assert not any(key[0] in sched.link_ids(ab4, failed) for key in schedule.residual)
    # residual = capacity - the rates placed on the link in that direction
    used = {}
    rates = {f.name: f.rate for f in flows}
    for name, path in schedule.paths.items():
        for hop in path:
            used[(hop.link, hop.node)] = used.get((hop.link, hop.node), 0.0) + rates[name]
    for key, left in schedule.residual.items():
        if key[0] != held_id:
            assert left == pytest.approx(100.0 - used.get(key, 0.0))
    # weights: the failed link is no next hop, the held-down one gets no weight
    for per_destination in schedule.weights.values():
        for weights in per_destination.values():
            assert weights and all(w >= 1 for w in weights.values())
    port_to = {n: d["b_port"] if d["b"] == "a2_0" else d["a_port"] for n, d in
               ((n, next(iter(ab4["a2_0"][n].values()))) for n in ab4["a2_0"])}
    assert ab4.nodes["h13"]["pod"] == 3
    assert list(schedule.weights["a2_0"]["h13"]) == [port_to["c0"]]   # c1 held down: no weight
    # toward pod 0, c0 lost its only link into the pod: the held-down c1 is a2_0's only next hop left
    assert schedule.weights["a2_0"]["h1"] == {port_to["c1"]: 1}


def test_only_shortest_paths_a_longer_detour_leaves_the_flow_unplaced():
    graph = make_topology("fattree", k=4).graph()
    # h1 (e0_0) to h3 (e0_1): both 2-switch-hop paths broken; longer paths through the cores remain
    failed = [("a0_0", "e0_1"), ("a0_1", "e0_0")]
    placed = sched.place_flows_greedy(graph, [Flow("f", "h1", "h3", 5.0), Flow("g", "h1", "h5", 5.0)],
                                      failed_links=failed)
    assert placed.unplaced == ["f"]
    assert list(placed.paths) == ["g"]


def test_ecmp_weights_proportional_to_residual():
    graph = two_paths()
    residual = sched.directed_capacities(graph)
    residual[(link_of(graph, "leaf0", "spine0"), "leaf0")] = 75.0
    residual[(link_of(graph, "leaf0", "spine1"), "leaf0")] = 25.0
    weights = sched.ecmp_weights(graph, residual, max_weight=12)
    assert weights["leaf0"]["h2"] == {2: 12, 3: 4}
    assert weights["leaf0"]["h1"] == {1: 12}       # the host port
    assert weights["spine0"]["h2"] == {2: 12}


def test_ecmp_all_zero_residual_gives_equal_weights_except_held_down():
    graph = make_topology("clos", leaves=2, spines=3, hosts_per_leaf=1).graph()
    residual = {key: 0.0 for key in sched.directed_capacities(graph)}
    held = [("leaf0", "spine2")]
    assert sched.ecmp_weights(graph, residual, held_down=held)["leaf0"]["h2"] == {2: 1, 3: 1}
    # when every next hop is held down, connectivity wins: equal weights over them
    all_held = [("leaf0", "spine0"), ("leaf0", "spine1"), ("leaf0", "spine2")]
    assert sched.ecmp_weights(graph, residual, held_down=all_held)["leaf0"]["h2"] == {2: 1, 3: 1, 4: 1}
    # a failed link is no next hop at all
    assert sched.ecmp_weights(graph, residual, failed_links=[("leaf0", "spine0")])["leaf0"]["h2"] == {3: 1,
                                                                                                      4: 1}


def test_new_link_has_zero_residual_and_no_weight_while_others_have_capacity():
    graph = two_paths()
    schedule = sched.schedule_epoch(graph, [], held_down=[("leaf0", "spine1")])
    assert schedule.weights["leaf0"]["h2"] == {2: 16}


@pytest.mark.parametrize("call,field", [
    (lambda g: sched.place_flows_greedy(g, [Flow("f", "h1", "h2", 1.0), Flow("f", "h2", "h1", 1.0)]),
     "flow.name"),
    (lambda g: sched.place_flows_greedy(g, [Flow("f", "leaf0", "h2", 1.0)]), "flow.src"),
    (lambda g: sched.place_flows_greedy(g, [Flow("f", "h1", "nope", 1.0)]), "flow.dst"),
    (lambda g: sched.place_flows_greedy(g, [Flow("f", "h1", "h2", 0.0)]), "flow.rate"),
    (lambda g: sched.place_flows_greedy(g, [], failed_links=[("leaf0", "leaf1")]), "failed_links"),
    (lambda g: sched.place_flows_greedy(g, [], held_down=[("leaf0", "spine0", 99)]), "held_down"),
    (lambda g: sched.ecmp_weights(g, {}, max_weight=0), "max_weight"),
    (lambda g: sched.improve_placement(g, [], sched.Schedule(), max_rounds=-1), "max_rounds"),
    (lambda g: sched.improve_placement(g, [], sched.Schedule(), max_rounds=1.5), "max_rounds"),
    (lambda g: sched.ecmp_weights(g, {}, destinations=["leaf0"]), "destinations"),
])
def test_bad_input_is_refused_naming_the_field(call, field):
    with pytest.raises(ParameterError) as info:
        call(two_paths())
    assert info.value.field == field


def test_link_without_capacity_is_refused():
    graph = two_paths()
    next(iter(graph["leaf0"]["spine0"].values()))["capacity_mbps"] = 0
    with pytest.raises(ParameterError) as info:
        sched.place_flows_greedy(graph, [])
    assert info.value.field == "capacity_mbps"


# the permutation of experiments/f10_vs_portland_congestion.yaml: every host sends to one host of another pod
PERMUTATION = [("h1", "h5"), ("h9", "h13"), ("h2", "h10"), ("h3", "h15"), ("h11", "h7"), ("h4", "h8"),
               ("h12", "h16"), ("h6", "h14"), ("h5", "h9"), ("h13", "h1"), ("h10", "h2"), ("h15", "h11"),
               ("h7", "h3"), ("h8", "h12"), ("h16", "h4"), ("h14", "h6")]


@pytest.mark.parametrize("kind", ["fattree", "abfattree"])
def test_the_improvement_gives_every_flow_of_a_permutation_links_of_its_own(kind):
    # a k=4 tree has room for it: each ToR sends two flows over two uplinks, each aggregation switch
    # two over two core links, and the same on the way down; greedy order leaves flows sharing links
    graph = make_topology(kind, k=4, hosts_link_mbps=10, fabric_link_mbps=2).graph()
    flows = [Flow(f"{src}->{dst}", src, dst, 1.5) for src, dst in PERMUTATION]
    switches = {n for n in graph.nodes if not n.startswith("h")}

    def flows_per_link(schedule):
        counts = {}
        for path in schedule.paths.values():
            for hop in path:
                if hop.node in switches and hop.next_node in switches:
                    counts[(hop.link, hop.node)] = counts.get((hop.link, hop.node), 0) + 1
        return counts

    greedy = sched.place_flows_greedy(graph, flows)
    assert max(flows_per_link(greedy).values()) == 2
    improved = sched.improve_placement(graph, flows, greedy)
    assert max(flows_per_link(improved).values()) == 1 and improved.unplaced == []
    assert min(improved.residual.values()) == 0.5  # 2 Mbit/s less one flow, nowhere less
    assert flows_per_link(greedy) == flows_per_link(sched.place_flows_greedy(graph, flows))  # not modified
    # nothing left to move: a second improvement keeps every path
    assert sched.improve_placement(graph, flows, improved).paths == improved.paths
    assert sched.improve_placement(graph, flows, greedy, max_rounds=0).paths == greedy.paths
