"""Unit tests of the greedy TE placement (controllers/te.py); no networking."""
import pytest

from testbed.controllers.te import Flow, path_nodes, place_flows, shortest_paths, spine_link_loads
from testbed.errors import ParameterError
from testbed.topologies.graph import link_id
from testbed.topologies.registry import make_topology


def clos(spines=4, links_per_pair=1, hosts_per_leaf=4):
    return make_topology("clos", leaves=2, spines=spines, hosts_per_leaf=hosts_per_leaf,
                         links_per_pair=links_per_pair).graph()


def hosts_of(graph, leaf):
    return sorted(n for n, d in graph.nodes(data=True) if d.get("role") == "host" and d.get("leaf") == leaf)


def spine_of(path):
    return [node for node in path_nodes(path) if node.startswith("spine")]


def test_shortest_paths_cross_every_spine():
    graph = clos(spines=4)
    src, dst = hosts_of(graph, "leaf0")[0], hosts_of(graph, "leaf1")[0]
    paths = shortest_paths(graph, src, dst)
    assert len(paths) == 4
    assert sorted(spine_of(p)[0] for p in paths) == ["spine0", "spine1", "spine2", "spine3"]
    for path in paths:
        assert path_nodes(path)[0] == src and path_nodes(path)[-1] == dst
        assert len(path) == 4  # host-leaf-spine-leaf-host


def test_parallel_links_are_distinct_paths():
    graph = clos(spines=2, links_per_pair=2)
    src, dst = hosts_of(graph, "leaf0")[0], hosts_of(graph, "leaf1")[0]
    assert len(shortest_paths(graph, src, dst)) == 2 * 2 * 2  # 2 spines x 2 up x 2 down


def test_same_leaf_path_stays_on_the_leaf():
    graph = clos()
    a, b = hosts_of(graph, "leaf0")[:2]
    paths = shortest_paths(graph, a, b)
    assert [path_nodes(p) for p in paths] == [[a, "leaf0", b]]


def test_equal_flows_spread_one_per_spine():
    graph = clos(spines=4)
    srcs, dsts = hosts_of(graph, "leaf0"), hosts_of(graph, "leaf1")
    flows = [Flow(f"f{i}", srcs[i], dsts[i], 20.0) for i in range(4)]
    placement = place_flows(graph, flows)
    assert sorted(spine_of(placement.paths[f.name])[0] for f in flows) == ["spine0", "spine1", "spine2", "spine3"]
    loads = spine_link_loads(placement, graph)
    used = [v for v in loads.values() if v > 0]
    assert used and max(used) == pytest.approx(0.2)  # 20 Mb/s on 100 Mb/s links, never stacked


def test_largest_first_and_least_loaded():
    # two spines; flows 60, 50, 40, 30: greedy largest first gives 60+30 / 50+40
    graph = clos(spines=2)
    s, d = hosts_of(graph, "leaf0"), hosts_of(graph, "leaf1")
    flows = [Flow("small", s[0], d[0], 30.0), Flow("big", s[1], d[1], 60.0),
             Flow("mid", s[2], d[2], 50.0), Flow("mid2", s[3], d[3], 40.0)]
    placement = place_flows(graph, flows)
    spine = {f.name: spine_of(placement.paths[f.name])[0] for f in flows}
    assert spine["big"] != spine["mid"]
    assert spine["mid2"] == spine["mid"]  # 40 goes next to 50 (90) rather than next to 60 (100)
    assert spine["small"] == spine["big"]
    assert placement.max_load() == pytest.approx(0.9)


def test_greedy_beats_worst_case_hashing_on_balance():
    graph = clos(spines=4, hosts_per_leaf=8)
    s, d = hosts_of(graph, "leaf0"), hosts_of(graph, "leaf1")
    flows = [Flow(f"f{i}", s[i], d[i], 10.0 + i) for i in range(8)]
    placement = place_flows(graph, flows)
    per_spine = {}
    for flow in flows:
        spine = spine_of(placement.paths[flow.name])[0]
        per_spine[spine] = per_spine.get(spine, 0.0) + flow.rate
    assert len(per_spine) == 4
    total = sum(f.rate for f in flows)
    # greedy LPT bound: max <= 4/3 of the optimum, and the optimum >= mean
    assert max(per_spine.values()) <= (4 / 3) * total / 4 + 1e-9


def test_pinned_entries_follow_the_path():
    graph = clos(spines=2)
    s, d = hosts_of(graph, "leaf0")[0], hosts_of(graph, "leaf1")[0]
    placement = place_flows(graph, [Flow("f", s, d, 10.0)])
    path = placement.paths["f"]
    switches_on_path = [hop.node for hop in path if not hop.node.startswith("h")]
    assert sorted(placement.entries) == sorted(switches_on_path)
    for hop in path[1:]:
        (entry,) = placement.entries[hop.node]
        assert entry.port == hop.port and entry.flow.name == "f"
    # the last switch sends it to the host's port
    last = placement.entries[path[-1].node][0]
    attachment = graph.nodes[d]["leaf"]
    assert path[-1].node == attachment and path[-1].next_node == d and last.port == path[-1].port


def test_failed_link_is_avoided():
    graph = clos(spines=2)
    s, d = hosts_of(graph, "leaf0")[0], hosts_of(graph, "leaf1")[0]
    placement = place_flows(graph, [Flow(f"f{i}", s, d, 10.0) for i in range(4)],
                            failed_links=[("leaf0", "spine0")])
    for path in placement.paths.values():
        assert spine_of(path) == ["spine1"]
    # a link id works as well
    data = next(data for u, v, data in graph.edges(data=True) if {u, v} == {"leaf1", "spine1"})
    placement = place_flows(graph, [Flow("g", s, d, 10.0)], failed_links=[link_id(data)])
    assert spine_of(placement.paths["g"]) == ["spine0"]


def test_disconnected_and_unknown_flows_are_unplaced():
    graph = clos(spines=2)
    s, d = hosts_of(graph, "leaf0")[0], hosts_of(graph, "leaf1")[0]
    placement = place_flows(graph, [Flow("cut", s, d, 1.0), Flow("ghost", s, "nohost", 1.0)],
                            failed_links=[("leaf0", "spine0"), ("leaf0", "spine1")])
    assert sorted(placement.unplaced) == ["cut", "ghost"]
    assert placement.entries == {}


def test_initial_load_steers_away():
    graph = clos(spines=2)
    s, d = hosts_of(graph, "leaf0")[0], hosts_of(graph, "leaf1")[0]
    data = next(data for u, v, data in graph.edges(data=True) if {u, v} == {"leaf0", "spine0"})
    placement = place_flows(graph, [Flow("f", s, d, 10.0)], initial_load={(link_id(data), "leaf0"): 0.5})
    assert spine_of(placement.paths["f"]) == ["spine1"]


def test_deterministic():
    graph = clos(spines=4, hosts_per_leaf=8)
    s, d = hosts_of(graph, "leaf0"), hosts_of(graph, "leaf1")
    flows = [Flow(f"f{i}", s[i % 8], d[(i * 3) % 8], 5.0 + (i % 3)) for i in range(20)]
    first = place_flows(graph, flows)
    second = place_flows(graph, list(reversed(flows)))
    assert first.paths == second.paths


def test_flow_from_dict_and_bad_input():
    flow = Flow.from_dict({"name": "a", "src": "h1", "dst": "h3", "rate": "12.5", "match": {"udp_sport": 7}})
    assert flow.rate == 12.5 and flow.match == (("udp_sport", 7),)
    with pytest.raises(ParameterError, match="flow.rate"):
        Flow.from_dict({"name": "a", "src": "h1", "dst": "h3", "rate": -1})
    with pytest.raises(ParameterError, match="flow.dst"):
        Flow.from_dict({"name": "a", "src": "h1", "rate": 1})
    graph = clos(spines=2)
    with pytest.raises(ParameterError, match="flow.name"):
        place_flows(graph, [Flow("x", "h1", "h3", 1.0), Flow("x", "h2", "h4", 1.0)])
