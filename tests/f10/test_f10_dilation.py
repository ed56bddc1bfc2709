"""F10's path dilation under concurrent failures, computed (seed 002 section 7.5, Figure 10).

:mod:`testbed.mechanisms.f10.dilation` walks flows over the tables the F10
controller writes (controllers/f10/routes.py, whose detours come from the one
detour algorithm in topologies/f10/detours.py).  Checked here, deterministic by
seed (pure computation, CI size: k = 4 and 8):

* one failure: every reroute takes +2 switches on the AB FatTree and +4 on the
  standard one, the length :func:`testbed.topologies.f10.paths.detoured_switch_hops`
  gives for the same failed link;
* up to 15 concurrent switch failures, and random link failures, on k = 8 trees:
  the AB FatTree's mean extra hops is half the standard FatTree's (the paper:
  "roughly half"), at least 99% of its delivered reroutes take the minimum +2,
  and it drops no more rerouted flows than the standard tree;
* the same seed gives the same table; the walk never loops.
"""
import pytest

from testbed.errors import ParameterError
from testbed.mechanisms.f10.dilation import FabricWalker, dilation_table, failure_scenario, scenario_dilation
from testbed.topologies.ab_fattree import ABFatTree
from testbed.topologies.f10.detours import downward_links
from testbed.topologies.f10.paths import detoured_switch_hops
from testbed.topologies.fattree import FatTree
from testbed.topologies.graph import hosts

EXPECTED_EXTRA = {"fattree": 4, "abfattree": 2}  # Scheme 2 / Scheme 1 (section 5.1)


def _graphs(k):
    return {"fattree": FatTree(k=k).graph(), "abfattree": ABFatTree(k=k).graph()}


@pytest.mark.parametrize("k", [4, 8])
@pytest.mark.parametrize("label", ["fattree", "abfattree"])
def test_one_failed_aggregation_switch_costs_the_schemes_extra_hops(k, label):
    graph = _graphs(k)[label]
    walker = FabricWalker(graph)
    aggregation = sorted(name for name, attrs in graph.nodes(data=True) if attrs.get("role") == "agg")
    for switch in aggregation[:: max(1, len(aggregation) // 4)]:
        result = scenario_dilation(walker, failed_switches=[switch], seed=3)
        assert result["extra_hops"] == {EXPECTED_EXTRA[label]: result["extra_hops"][EXPECTED_EXTRA[label]]}
        assert result["reroutes_dropped"] == result["dropped"] == result["loops"] == 0


@pytest.mark.parametrize("label", ["fattree", "abfattree"])
def test_a_walked_detour_is_as_long_as_the_detour_algorithms(label):
    """The walk over the controller's tables and detoured_switch_hops (paths.py) agree switch for switch."""
    graph = _graphs(4)[label]
    walker = FabricWalker(graph)
    every = hosts(graph)
    checked = 0
    for parent, child, _key in downward_links(graph):
        if graph.nodes[parent]["level"] != 3:
            continue  # below the cores the child is an edge switch: no detour (pushback's job)
        for seed in range(4):
            for src in every:
                for dst in every:
                    if src == dst:
                        continue
                    walk = walker.walk(src, dst, failed_links=[(parent, child)], seed=seed)
                    if not walk["scheme"]:
                        continue
                    assert walk["outcome"] == "delivered"
                    assert walk["switches"] == detoured_switch_hops(graph, src, dst, (parent, child))[0]
                    checked += 1
    assert checked > 100


def test_concurrent_switch_failures_halve_the_dilation_on_the_ab_fattree():
    rows = dilation_table(_graphs(8), [1, 5, 10, 15], trials=2, kind="switch", seed=5, max_flows=2500)
    by = {(row["label"], row["failures"]): row for row in rows}
    for failures in (1, 5, 10, 15):
        standard, ab = by[("fattree", failures)], by[("abfattree", failures)]
        assert standard["reroutes"] > 50 and ab["reroutes"] > 50, (standard, ab)
        assert 0.45 <= ab["mean_extra_hops"] / standard["mean_extra_hops"] <= 0.55
        assert ab["minimum"] == 2 and ab["at_minimum"] >= 0.99
        assert standard["minimum"] == 4
        assert ab["loops"] == standard["loops"] == 0
    # a second failure on a detour drops the packet (a marked packet is never detoured twice);
    # the AB FatTree's shorter detours cross fewer switches that may have failed
    dropped = {label: sum(row["reroutes_dropped"] for row in rows if row["label"] == label)
               for label in ("fattree", "abfattree")}
    assert dropped["abfattree"] <= dropped["fattree"]


def test_random_link_failures_give_the_same_comparison():
    rows = dilation_table(_graphs(8), [5, 15], trials=2, kind="link", seed=6, max_flows=2500)
    by = {(row["label"], row["failures"]): row for row in rows}
    for failures in (5, 15):
        standard, ab = by[("fattree", failures)], by[("abfattree", failures)]
        assert standard["reroutes"] > 20 and ab["reroutes"] > 20
        assert 0.45 <= ab["mean_extra_hops"] / standard["mean_extra_hops"] <= 0.55
        assert ab["at_minimum"] >= 0.99


def test_the_table_is_deterministic_by_seed():
    first = dilation_table(_graphs(4), [1, 3], trials=2, seed=9)
    assert first == dilation_table(_graphs(4), [1, 3], trials=2, seed=9)
    assert failure_scenario(FatTree(k=8).graph(), 10, seed=1) != failure_scenario(FatTree(k=8).graph(), 10, seed=2)


def test_bad_scenarios_are_refused_with_the_allowed_values():
    graph = FatTree(k=4).graph()
    with pytest.raises(ParameterError, match=r"failures.*\[0, 12\]"):
        failure_scenario(graph, 13)
    with pytest.raises(ParameterError, match="switch or link"):
        failure_scenario(graph, 1, kind="pod")
