"""FC+ routing (seed 001, III-B..E): T_du, KSP, DF-KSP, FC+ (1L/2L), FC's edge-disjoint paths, priorities, CDG."""
import itertools
from collections import Counter

import networkx as nx
import pytest

from testbed.errors import ParameterError
from testbed.topologies.fcplus.deadlock import (channel_dependency_graph, cycles_by_priority, deadlock_cycles,
                                                is_deadlock_free)
from testbed.topologies.fcplus.routing import (ROUTINGS, count_simple_up_down_paths, dfksp_paths,
                                               down_up_port_pairs, down_up_turns, fc_edge_disjoint_paths,
                                               fc_smallest_k, fcplus_1l_paths, hop_priorities, is_up_down,
                                               k_shortest_paths, path_nodes, path_ports, priority_transition_table,
                                               routing_paths, routing_priorities, up_down_graph,
                                               up_down_path_counts)
from testbed.topologies.fcplus.topology import fc_graph, fcplus_graph, tor_graph_from_links


def toy_example():
    """The toy example of III-B on Figure 2(a) (v = 4, k = 6): S_1, S_2 and S_5 (tor0, tor1, tor4).

    Blue S_1^2 -> S_5^1 (L2 -> L1), red S_1^4 -> S_2^3 -> S_5^4 (L6 -> L5 -> L6), green S_1^3 -> S_2^3 -> S_5^3
    (L4 -> L5 -> L4).  S_3 and S_4 take no part.
    """
    layers = [[1, 2, 4, 6], [1, 3, 5, 6], [1, 2, 4, 6], [1, 3, 5, 6], [1, 2, 4, 6]]
    links = [((0, 2), (4, 1)),                    # blue
             ((0, 4), (1, 3)), ((1, 3), (4, 4)),  # red
             ((0, 3), (1, 3)), ((1, 3), (4, 3))]  # green
    return tor_graph_from_links(layers, links)


BLUE = (("tor0", "tor4", 0),)
RED = (("tor0", "tor1", 1), ("tor1", "tor4", 2))
GREEN = (("tor0", "tor1", 3), ("tor1", "tor4", 4))


def check_path(graph, path, source, target):
    """A path is a connected, loop-free sequence of existing links from source to target."""
    nodes = path_nodes(path)
    assert nodes[0] == source and nodes[-1] == target and len(set(nodes)) == len(nodes)
    for u, w, key in path:
        assert graph.has_edge(u, w, key)


def all_simple_paths(graph, source, target, cutoff):
    return [tuple(tuple(hop) for hop in path)
            for path in nx.all_simple_edge_paths(graph, source, target, cutoff=cutoff)]


# ---------------------------------------------------------------- the toy example
def test_toy_example_of_dfksp():
    graph = toy_example()
    assert [down_up_turns(graph, path) for path in (BLUE, RED, GREEN)] == [0, 1, 0]
    # the two links S_1 - S_2^3 and S_2^3 - S_5 also combine into L4 -> L5 -> L6 and L6 -> L5 -> L4
    mixed = [(RED[0], GREEN[1]), (GREEN[0], RED[1])]
    assert [down_up_turns(graph, path) for path in mixed] == [0, 0]
    assert sorted(k_shortest_paths(graph, "tor0", "tor4", 9)) == sorted([BLUE, RED, GREEN] + mixed)
    assert k_shortest_paths(graph, "tor0", "tor4", 1) == [BLUE]
    for find in (lambda k: dfksp_paths(graph, "tor0", "tor4", k, n_lp=1),
                 lambda k: fcplus_1l_paths(graph, "tor0", "tor4", k)):
        first_two = find(2)
        assert first_two[0] == BLUE and first_two[1] in [GREEN] + mixed  # red dropped
        assert sorted(find(9)) == sorted([BLUE, GREEN] + mixed)
    assert sorted(dfksp_paths(graph, "tor0", "tor4", 9, n_lp=2)) == sorted([BLUE, RED, GREEN] + mixed)
    # 2 lossless priorities: the red path turns down-up at S_2 and goes on on priority 2
    assert hop_priorities(graph, RED) == [1, 2] and hop_priorities(graph, GREEN) == [1, 1]
    in_port = graph["tor0"]["tor1"][1]["port"]["tor1"]
    out_port = graph["tor1"]["tor4"][2]["port"]["tor1"]
    assert priority_transition_table(graph, [BLUE, RED, GREEN]) == {("tor1", in_port, out_port): 2}
    assert priority_transition_table(graph, [RED], match_priority=True) == {("tor1", in_port, out_port, 1): 2}
    assert ("tor1", in_port, out_port) in down_up_port_pairs(graph)
    assert path_ports(graph, RED) == [("tor0", None, graph["tor0"]["tor1"][1]["port"]["tor0"]),
                                      ("tor1", in_port, out_port),
                                      ("tor4", graph["tor1"]["tor4"][2]["port"]["tor4"], None)]


def test_down_up_turns_count_moves_inside_a_tor():
    # tor1's virtual switches sit on layers 1, 2, 3; it is entered and left through different ones
    graph = tor_graph_from_links([[1, 2, 3]] * 3, [((0, 2), (1, 3)), ((1, 1), (2, 2)),  # 2->3, 1->2
                                                   ((0, 3), (1, 2)), ((1, 2), (2, 3)),  # 3->2, 2->3
                                                   ((1, 3), (2, 2))])                   # tor1 L3 -> tor2 L2
    up_then_jump_down_up = (("tor0", "tor1", 0), ("tor1", "tor2", 1))  # 2->3, inside 3->1, 1->2
    down_then_up = (("tor0", "tor1", 2), ("tor1", "tor2", 3))           # 3->2, 2->3
    up_then_down = (("tor0", "tor1", 0), ("tor1", "tor2", 4))           # 2->3, 3->2
    assert down_up_turns(graph, up_then_jump_down_up) == 1
    assert down_up_turns(graph, down_then_up) == 1
    assert down_up_turns(graph, up_then_down) == 0 and is_up_down(graph, up_then_down)


# ----------------------------------------------------- properties on random FC+
@pytest.fixture(scope="module")
def small():
    """FC+ with 20 ToRs, s = 10, v = 4 (k = 6, N_gl = 2): small enough for brute force."""
    return fcplus_graph(20, 12, 10, v=4, seed=11)


def test_fcplus_1l_is_the_k_shortest_up_down_paths(small):
    for source, target in [("tor0", "tor1"), ("tor3", "tor17"), ("tor19", "tor8")]:
        every = all_simple_paths(small, source, target, cutoff=4)
        up_down = sorted((p for p in every if down_up_turns(small, p) == 0), key=len)
        found = fcplus_1l_paths(small, source, target, 12)
        assert len(found) == 12 and len(set(found)) == 12
        for path in found:
            check_path(small, path, source, target)
            assert path in up_down
        # the lengths are those of the 12 shortest up-down paths
        assert [len(p) for p in found] == [len(p) for p in up_down[:12]]


@pytest.mark.parametrize("n_lp", [1, 2, 3])
def test_dfksp_keeps_the_shortest_paths_with_few_turns(small, n_lp):
    source, target = "tor2", "tor9"
    every = all_simple_paths(small, source, target, cutoff=4)
    allowed = sorted((p for p in every if down_up_turns(small, p) <= n_lp - 1), key=len)
    found = dfksp_paths(small, source, target, 16, n_lp=n_lp)
    assert len(found) == 16
    assert all(down_up_turns(small, p) <= n_lp - 1 and p in allowed for p in found)
    assert [len(p) for p in found] == [len(p) for p in allowed[:16]]
    assert max(max(hop_priorities(small, p)) for p in found) <= n_lp


def test_ksp_is_yen_in_hop_order(small):
    found = k_shortest_paths(small, "tor5", "tor6", 20)
    every = sorted(all_simple_paths(small, "tor5", "tor6", cutoff=4), key=len)
    assert [len(p) for p in found] == [len(p) for p in every[:20]] and len(set(found)) == 20
    assert all(path in every for path in found)


def test_parallel_links_give_distinct_paths():
    graph = tor_graph_from_links([[1, 2], [1, 2]], [((0, 1), (1, 2)), ((1, 1), (0, 2))])
    assert sorted(k_shortest_paths(graph, "tor0", "tor1", 5)) == [(("tor0", "tor1", 0),), (("tor0", "tor1", 1),)]
    assert len(fcplus_1l_paths(graph, "tor0", "tor1", 5)) == 2


def test_fc_paths_are_edge_disjoint_up_down_and_maximal_for_greedy():
    graph = fc_graph(30, 12, 10, k=4, seed=5)
    for source, target in [("tor0", "tor1"), ("tor7", "tor29")]:
        paths = fc_edge_disjoint_paths(graph, source, target)
        assert paths
        keys = [key for path in paths for _, _, key in path]
        assert len(keys) == len(set(keys))
        for path in paths:
            check_path(graph, path, source, target)
            assert is_up_down(graph, path)
        assert [len(p) for p in paths] == sorted(len(p) for p in paths)
        # no up-down path is left on the unused links
        rest = graph.copy()
        rest.remove_edges_from([(u, w, key) for path in paths for u, w, key in path])
        assert fcplus_1l_paths(rest, source, target, 1) == []


def test_up_down_graph_has_2v_minus_1_states_per_tor(small):
    updown = up_down_graph(small)
    assert updown.number_of_nodes() == (2 * 4 - 1) * 20
    assert all("link" in data for _, _, data in updown.edges(data=True))


def test_simple_path_counts_match_enumeration():
    tiny = fcplus_graph(8, 8, 6, seed=4)  # k = 4: up-down paths of up to 6 hops
    counts = count_simple_up_down_paths(tiny, "tor4")
    for target in tiny.nodes:
        if target != "tor4":
            every = all_simple_paths(tiny, "tor4", target, cutoff=6)
            by_length = Counter(len(p) for p in every if down_up_turns(tiny, p) == 0)
            assert counts.get(target, [0] * 7) == [by_length[h] for h in range(7)]
    assert any(row[5] for row in counts.values())  # long ones are there to count
    names, walks = up_down_path_counts(tiny)
    row = names.index("tor4")
    # walks may pass a ToR twice, so there are at least as many; within 2 hops there is no room for that
    assert all(walks[row][names.index(t)] >= sum(c) for t, c in counts.items())
    _, two_hops = up_down_path_counts(tiny, max_hops=2)
    assert all(two_hops[row][names.index(t)] == sum(c[:3]) for t, c in counts.items())


def test_fc_smallest_k():
    k = fc_smallest_k(40, 12, 10, seed=2)
    _, counts = up_down_path_counts(fc_graph(40, 12, 10, k=k, seed=2))
    assert (counts > 0).sum() == 40 * 39
    _, counts = up_down_path_counts(fc_graph(40, 12, 10, k=k - 1, seed=2))
    assert (counts > 0).sum() < 40 * 39


# --------------------------------------------------------------- priorities
def ring():
    """Four ToRs in a ring, link i joins tor<i> (layer 1) and tor<i+1> (layer 2): clockwise every ToR turns down-up."""
    return tor_graph_from_links([[1, 2]] * 4, [((0, 1), (1, 2)), ((1, 1), (2, 2)), ((2, 1), (3, 2)),
                                               ((3, 1), (0, 2))])


def clockwise(start, hops):
    return tuple((f"tor{i % 4}", f"tor{(i + 1) % 4}", i % 4) for i in range(start, start + hops))


def test_transition_table_needs_the_priority_when_a_turn_is_first_on_one_path_and_second_on_another():
    graph = ring()
    three = clockwise(0, 3)   # turns at tor1 (-> 2) and tor2 (-> 3)
    two = clockwise(1, 2)     # turns at tor2 (-> 2)
    assert hop_priorities(graph, three) == [1, 2, 3] and hop_priorities(graph, two) == [1, 2]
    with pytest.raises(ParameterError) as caught:
        priority_transition_table(graph, [three, two])
    assert caught.value.field == "match_priority"
    table = priority_transition_table(graph, [three, two], match_priority=True)
    in_port, out_port = graph["tor1"]["tor2"][1]["port"]["tor2"], graph["tor2"]["tor3"][2]["port"]["tor2"]
    assert table[("tor2", in_port, out_port, 2)] == 3 and table[("tor2", in_port, out_port, 1)] == 2
    assert {key[:3] for key in table} <= down_up_port_pairs(graph)


def test_transition_table_of_a_2l_routing_matches_the_hop_priorities(small):
    pairs = [(a, b) for a in ("tor0", "tor7") for b in small.nodes if a != b]
    paths = [p for found in routing_paths(small, pairs, "fcplus2l", k=8).values() for p in found]
    table = priority_transition_table(small, paths)
    assert table and set(table.values()) == {2}
    turns = down_up_port_pairs(small)
    for path in paths:  # replaying the table over the ports gives every hop's priority
        priority, replayed = 1, []
        for switch, in_port, out_port in path_ports(small, path)[:-1]:
            key = (switch, in_port, out_port)
            assert (key in turns) == (key in table)  # the table holds exactly the turns the paths make
            priority = table.get(key, priority)
            replayed.append(priority)
        assert replayed == hop_priorities(small, path)


# ----------------------------------------------------------------- deadlocks
def test_plain_ksp_deadlocks_and_returns_its_cycles():
    graph = ring()
    paths = [clockwise(i, 2) for i in range(4)]
    cycles = cycles_by_priority(graph, paths, priorities=False)
    assert cycles == {1: [[(clockwise(i, 1)[0], 1) for i in range(4)]]}
    assert not is_deadlock_free(graph, paths, priorities=False)
    assert is_deadlock_free(graph, paths)  # priority 2 after the turn breaks it


@pytest.mark.parametrize("routing,n_lp", [("fcplus1l", 1), ("fcplus2l", 2), ("dfksp", 3), ("fc", 1)])
def test_every_deadlock_free_routing_has_an_acyclic_cdg_on_every_priority(routing, n_lp):
    graph = fcplus_graph(24, 12, 10, v=4, seed=3) if routing != "fc" else fc_graph(24, 12, 10, k=4, seed=3)
    pairs = list(itertools.permutations(sorted(graph.nodes), 2))
    paths = [p for found in routing_paths(graph, pairs, routing, k=8, n_lp=n_lp).values() for p in found]
    cycles = cycles_by_priority(graph, paths)
    assert set(cycles) <= set(range(1, n_lp + 1)) and all(found == [] for found in cycles.values())
    assert routing_priorities(routing, n_lp) == n_lp


def test_ksp_on_all_pairs_has_cycles_made_of_real_dependencies():
    graph = fcplus_graph(24, 12, 10, v=4, seed=3)
    pairs = list(itertools.permutations(sorted(graph.nodes), 2))
    paths = [p for found in routing_paths(graph, pairs, "ksp", k=8).values() for p in found]
    cdg = channel_dependency_graph(graph, paths, priorities=False)
    cycles = deadlock_cycles(cdg, max_cycles=3)
    assert cycles and len(cycles) <= 3
    for cycle in cycles:
        for (hop, level), (next_hop, _) in zip(cycle, cycle[1:] + cycle[:1]):
            assert level == 1 and hop[1] == next_hop[0] and cdg.has_edge((hop, 1), (next_hop, 1))


# --------------------------------------------------------------- bad input
@pytest.mark.parametrize("call,field", [
    (lambda g: k_shortest_paths(g, "tor0", "tor1", 0), "k"),
    (lambda g: dfksp_paths(g, "tor0", "tor1", 4, n_lp=0), "n_lp"),
    (lambda g: dfksp_paths(g, "tor0", "tor1", 4, n_lp=4), "n_lp"),
    (lambda g: fcplus_1l_paths(g, "tor0", "tor1", -1), "k"),
    (lambda g: routing_paths(g, [("tor0", "tor1")], "ecmp"), "routing"),
    (lambda g: routing_paths(g, [("tor0", "tor1")], "dfksp", n_lp=5), "n_lp"),
    (lambda g: k_shortest_paths(g, "tor0", "tor0", 2), "target"),
    (lambda g: fc_edge_disjoint_paths(g, "leaf0", "tor1"), "source"),
    (lambda g: deadlock_cycles(nx.DiGraph(), max_cycles=0), "max_cycles"),
    (lambda g: routing_priorities("ecmp"), "routing"),
])
def test_bad_input_is_refused_naming_the_field(call, field):
    with pytest.raises(ParameterError) as caught:
        call(toy_example())
    assert caught.value.field == field and caught.value.allowed


def test_every_routing_name_runs(small):
    for routing in ROUTINGS:
        found = routing_paths(small, [("tor0", "tor5")], routing, k=4)[("tor0", "tor5")]
        assert found and all(path_nodes(p)[-1] == "tor5" for p in found)
