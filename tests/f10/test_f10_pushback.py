"""F10 pushback (topologies/f10/pushback.py) against the paper (seed 002, section 5.2) and the topology.

Two kinds of checks:

* the paper's Figure 4 counts, on the figure's link: a 6-port, 3-level AB
  FatTree drawn, as the paper draws its figures (footnote 2), without the
  doubled subtrees below the cores; ``u`` is an aggregation switch of a
  type-A pod (stack {A}), ``w`` the same-index switch of the other type-A pod
  (stack {A}), the ``x`` are the type-B pod's switches (stack {B}), ``v`` an
  edge switch below ``u`` with ``u``'s two siblings as its other parents;
* routing truth, independent of the rules: every switch that receives a
  notification installs state exactly when it still has a direct route (the
  paper's "precisely if"), and after pushback no switch that has a direct
  route can send a packet into a dead end, for every single link and switch
  failure of the k=4 fabrics and for pairs of failures.
"""
import doctest
import ipaddress
import itertools
import random

import pytest

from testbed.errors import ParameterError
from testbed.topologies.f10 import pushback as pb
from testbed.topologies.ab_fattree import ABFatTree
from testbed.topologies.f10.detours import downward_host_sets
from testbed.topologies.f10.paths import omit_doubled_subtrees
from testbed.topologies.fattree import FatTree
from testbed.topologies.registry import make_topology


def test_doctests():
    assert doctest.testmod(pb).failed == 0


# ------------------------------------------------------------------ routing truth
class Routes:
    """F10's routing policy on a graph with failures and, optionally, pushback state.

    A destination inside a switch's subtree is routed down through children
    holding it, one outside up through any parent; failed links and switches
    are skipped, and so are neighbours the pushback state says to avoid.
    """

    def __init__(self, graph, state):
        self.graph = graph
        self.state = state
        self.host_sets = downward_host_sets(graph)
        self.hosts = sorted(n for n, a in graph.nodes(data=True) if a["role"] == "host")
        self.ip = {h: ipaddress.ip_address(graph.nodes[h]["ip"].split("/")[0]) for h in self.hosts}

    def _avoids(self, switch, neighbour, host, use_state):
        if not use_state:
            return False
        for prefix, neighbours in self.state.avoid.get(switch, {}).items():
            if neighbour in neighbours and self.ip[host] in ipaddress.ip_network(prefix):
                return True
        allowed = self.state.avoid_except.get(switch, {}).get(neighbour)
        return allowed is not None and self.ip[host] not in ipaddress.ip_network(allowed)

    def next_hops(self, node, host, use_state):
        graph, state = self.graph, self.state
        level = graph.nodes[node]["level"]
        inside = host in self.host_sets[node]
        hops = []
        for neighbour in graph[node]:
            if neighbour in state.failed_switches:
                continue
            ends = tuple(sorted((node, neighbour)))
            if all(ends + (key,) in state.failed_links for key in graph[node][neighbour]):
                continue
            if graph.nodes[neighbour]["role"] == "host":
                if neighbour == host:
                    hops.append(neighbour)
                continue
            down = graph.nodes[neighbour]["level"] < level
            if (inside and not (down and host in self.host_sets[neighbour])) or (not inside and down):
                continue
            if not self._avoids(node, neighbour, host, use_state):
                hops.append(neighbour)
        return hops

    def outcome(self, switch, host, use_state):
        """``(some route reaches host, every route reaches host)`` from ``switch``."""
        memo = {}

        def walk(node):
            if node == host:
                return True, True
            if node not in memo:
                results = [walk(n) for n in self.next_hops(node, host, use_state)]
                memo[node] = (any(r[0] for r in results), bool(results) and all(r[1] for r in results))
            return memo[node]

        return walk(switch)

    def has_direct_route(self, switch, hosts):
        """True when ``switch`` reaches every host of ``hosts`` without pushback state."""
        return all(self.outcome(switch, host, False)[0] for host in hosts)

    def blackholes(self):
        """``(switch, host)`` pairs with a direct route where some route under pushback state dead-ends."""
        bad = []
        for switch, attrs in self.graph.nodes(data=True):
            if attrs["role"] == "host" or switch in self.state.failed_switches:
                continue
            for host in self.hosts:
                if self.outcome(switch, host, False)[0] and not self.outcome(switch, host, True)[1]:
                    bad.append((switch, host))
        return bad


def prefix_hosts(graph, prefixes):
    networks = [ipaddress.ip_network(p) for p in prefixes]
    return [h for h, a in graph.nodes(data=True) if a["role"] == "host"
            and any(ipaddress.ip_address(a["ip"].split("/")[0]) in n for n in networks)]


def switch_links(graph):
    return sorted({tuple(sorted((a, b))) for a, b in graph.edges()
                   if graph.nodes[a]["role"] != "host" and graph.nodes[b]["role"] != "host"})


def switches(graph):
    return sorted(n for n, a in graph.nodes(data=True) if a["role"] != "host")


def check_against_routes(graph, result):
    """Terminators have a direct route, forwarders none; no switch with a route can dead-end."""
    routes = Routes(graph, result.state)
    for message in result.messages:
        if message.notification.cause[0] != "link" or message.outcome == pb.ABSORBED:
            continue
        hosts = prefix_hosts(graph, message.prefixes)
        direct = routes.has_direct_route(message.receiver, hosts)
        assert direct == (message.outcome == pb.INSTALLED), message
    assert routes.blackholes() == []


K4 = [ABFatTree(k=4).graph(), FatTree(k=4).graph()]


@pytest.mark.parametrize("graph", K4, ids=["ab", "standard"])
def test_every_single_link_failure_restores_direct_routes(graph):
    for link in switch_links(graph):
        check_against_routes(graph, pb.simulate_pushback(graph, link))


@pytest.mark.parametrize("graph", K4, ids=["ab", "standard"])
def test_every_single_switch_failure_restores_direct_routes(graph):
    for switch in switches(graph):
        result = pb.simulate_pushback(graph, switch)
        assert Routes(graph, result.state).blackholes() == [], switch


@pytest.mark.parametrize("graph", K4, ids=["ab", "standard"])
def test_pairs_of_failures_leave_no_blackhole(graph):
    failures = switch_links(graph) + switches(graph)
    pairs = list(itertools.combinations(failures, 2))
    for first, second in random.Random(7).sample(pairs, 60):
        if isinstance(first, str) and isinstance(second, tuple) and first in second:
            continue  # the link died with the switch
        state = pb.simulate_pushback(graph, first).state
        result = pb.simulate_pushback(graph, second, state=state)
        assert Routes(graph, result.state).blackholes() == [], (first, second)


def test_three_level_fabric_single_failures_restore_direct_routes():
    graph = ABFatTree(k=4, levels=3).graph()
    for link in [("b0_0", "a0_0"), ("b0_0", "a1_0"), ("c0", "b0_0"), ("a0_0", "e0_0")]:
        check_against_routes(graph, pb.simulate_pushback(graph, link))
    for switch in ["a1_0", "b2_1", "c3"]:
        assert Routes(graph, pb.simulate_pushback(graph, switch).state).blackholes() == []


# ------------------------------------------------------------------ Figure 4
@pytest.fixture(scope="module")
def figure4():
    """The figure's fabric: k=6, three levels, drawn without the doubled subtrees."""
    return omit_doubled_subtrees(make_topology("abfattree", k=6, levels=2).graph())


def test_figure4_roles_match_the_text(figure4):
    graph = figure4
    stack = {n: graph.nodes[n]["type_stack"] for n in ("a0_0", "a2_0", "a1_0")}
    assert stack == {"a0_0": ("A",), "a2_0": ("A",), "a1_0": ("B",)}  # u, w, x
    assert sorted(n for n in graph["e0_0"] if graph.nodes[n]["role"] == "agg") == ["a0_0", "a0_1", "a0_2"]
    cores = {n: {c for c in graph[n] if graph.nodes[c]["role"] == "core"} for n in ("a0_0", "a2_0", "a1_0")}
    assert cores["a0_0"] == cores["a2_0"]            # w shares all of u's parents
    assert len(cores["a0_0"] & cores["a1_0"]) == 1   # x shares one: it has a way around


def test_figure4_link_failure_sends_14_messages_and_installs_state_at_8_switches(figure4):
    result = pb.simulate_pushback(figure4, ("a0_0", "e0_0"))
    assert result.message_count == 14
    assert result.installed == {"e0_1", "e0_2", "a1_0", "a1_1", "a1_2", "e2_0", "e2_1", "e2_2"}
    assert result.forwarders == {"c0", "c1", "c2", "a2_0"}
    assert result.starters == ["a0_0"]
    assert {m.kind for m in result.messages} == {pb.PB_ONLY}
    assert {m.prefixes for m in result.messages} == {(figure4.nodes["e0_0"]["prefix"],)}
    # w hears it from its three parents in the same round and sends only down
    assert sorted(m.receiver for m in result.messages if m.sender == "a2_0") == ["e2_0", "e2_1", "e2_2"]
    assert result.state.avoid["a1_0"] == {figure4.nodes["e0_0"]["prefix"]: {"c0"}}
    check_against_routes(figure4, result)


def test_figure4_link_counts_hold_for_the_four_level_drawing_too():
    graph = omit_doubled_subtrees(ABFatTree(k=6, levels=3).graph())
    for link in [("b0_0", "a0_0"), ("b0_0", "a1_0")]:
        result = pb.simulate_pushback(graph, link)
        assert (result.message_count, len(result.installed)) == (14, 8), link


def test_figure4_switch_failure_counts(figure4):
    """Paper: v failing adds 32 messages and 12 switches; the text's rules give 37 and 3 here.

    u's two siblings each send the same 14 messages u sends (28), and the
    type-B switches x, each hearing from all three of its cores, have lost
    every uplink to v's prefix, so each tells its three children (scenario 3,
    9 messages).  State lands on the x's children (3 new switches); all other
    endpoints already held state from u's notification.
    """
    link = pb.simulate_pushback(figure4, ("a0_0", "e0_0"))
    node = pb.simulate_pushback(figure4, "e0_0")
    assert node.starters == ["a0_0", "a0_1", "a0_2"]
    by_cause = {}
    for message in node.messages:
        by_cause.setdefault(message.notification.cause[:2], []).append(message)
    assert [len(by_cause[("link", s)]) for s in ("a0_0", "a0_1", "a0_2")] == [14, 14, 14]
    assert sorted(s for (kind, s) in by_cause if kind == "uplinks") == ["a1_0", "a1_1", "a1_2"]
    assert node.message_count - link.message_count == 37
    assert node.installed - link.installed == {"e1_0", "e1_1", "e1_2"}
    assert Routes(figure4, node.state).blackholes() == []


@pytest.mark.parametrize("kind,k,levels,link,expected", [
    ("abfattree", 6, 2, ("a0_0", "e0_0"), (26, 17, 5)),
    ("fattree", 6, 2, ("a0_0", "e0_0"), (35, 17, 8)),
    ("abfattree", 4, 2, ("a0_0", "e0_0"), (11, 7, 3)),
    ("fattree", 4, 2, ("a0_0", "e0_0"), (15, 7, 5)),
    ("abfattree", 4, 2, ("c0", "a0_0"), (3, 3, 0)),
    ("fattree", 4, 2, ("c0", "a0_0"), (3, 3, 0)),
])
def test_counts_on_whole_fabrics(kind, k, levels, link, expected):
    """Full fabrics (2p pods): the AB FatTree stops pushback earlier than the standard one."""
    result = pb.simulate_pushback(make_topology(kind, k=k, levels=levels).graph(), link)
    assert (result.message_count, len(result.installed), len(result.forwarders)) == expected


def test_standard_fattree_pushes_further_and_installs_lower(figure4):
    standard = omit_doubled_subtrees(FatTree(k=6, levels=2).graph())
    ab = pb.simulate_pushback(figure4, ("a0_0", "e0_0"))
    plain = pb.simulate_pushback(standard, ("a0_0", "e0_0"))
    assert plain.message_count == 17 > ab.message_count
    levels = lambda graph, names: sorted(graph.nodes[n]["level"] for n in names)  # noqa: E731
    assert levels(standard, plain.installed) == [1] * 8       # every terminator is an edge switch
    assert levels(figure4, ab.installed).count(2) == 3          # AB: the x's, one level up


def test_core_link_failure_terminates_one_hop_below():
    graph = ABFatTree(k=4).graph()
    result = pb.simulate_pushback(graph, ("c0", "a0_0"))
    assert result.forwarders == frozenset()
    assert sorted((m.sender, m.receiver) for m in result.messages) == [("c0", "a1_0"), ("c0", "a2_0"),
                                                                        ("c0", "a3_0")]


# ------------------------------------------------------------------ PBExcept
def test_all_uplinks_failed_sends_pbexcept_to_children():
    graph = ABFatTree(k=4).graph()
    pod_prefix = graph.nodes["a0_0"]["prefix"]
    result = pb.simulate_pushback(graph, ("a0_0", "c1"), failed_links=[("a0_0", "c0")])
    excepts = [m for m in result.messages if m.kind == pb.PB_EXCEPT]
    assert sorted((m.sender, m.receiver) for m in excepts) == [("a0_0", "e0_0"), ("a0_0", "e0_1")]
    assert {m.prefixes for m in excepts} == {(pod_prefix,)}
    assert all(m.outcome == pb.INSTALLED for m in excepts)
    assert result.state.avoid_except["e0_0"] == {"a0_0": pod_prefix}
    # the core's side of the same link: c1 lost pod 0 (PBOnly to its other pods); a2_0 (type A, the
    # same parents c0 and c1, both now pushed back for pod 0) tells its children (scenario 3)
    only = [m for m in result.messages if m.kind == pb.PB_ONLY]
    assert {m.sender for m in only} == {"c1", "a2_0"}
    assert {m.notification.cause for m in only if m.sender == "a2_0"} == {("uplinks", "a2_0")}
    assert Routes(graph, result.state).blackholes() == []


def test_pbexcept_cascades_with_the_indicated_subtree():
    """Both level-2 parents of a level-1 switch lose every uplink: it can reach only their subtree."""
    graph = ABFatTree(k=4, levels=3).graph()
    parents = sorted(n for n in graph["a0_0"] if graph.nodes[n]["level"] == 3)
    uplinks = [(p, c) for p in parents for c in sorted(graph[p]) if graph.nodes[c]["role"] == "core"]
    state = pb.pushback_state(graph, failed_links=uplinks[:-1])
    result = pb.simulate_pushback(graph, uplinks[-1], state=state)
    group_prefix = graph.nodes[parents[0]]["prefix"]
    cascaded = [m for m in result.messages if m.sender == "a0_0"]
    assert cascaded and {m.kind for m in cascaded} == {pb.PB_EXCEPT}
    assert {m.prefixes for m in cascaded} == {(group_prefix,)}
    assert sorted(m.receiver for m in cascaded) == sorted(n for n in graph["a0_0"]
                                                          if graph.nodes[n]["level"] == 1)
    assert Routes(graph, result.state).blackholes() == []


# ------------------------------------------------------------------ state and API
def test_replayed_state_equals_chained_state():
    graph = ABFatTree(k=4).graph()
    first = pb.simulate_pushback(graph, ("a0_0", "e0_0"))
    chained = pb.simulate_pushback(graph, "c3", state=first.state)
    replayed = pb.simulate_pushback(graph, "c3", failed_links=[("e0_0", "a0_0")])
    assert chained.messages == replayed.messages
    assert chained.state.avoid == replayed.state.avoid
    assert first.state.failed_switches == frozenset()  # the earlier result is not modified


def test_avoid_ports_name_the_links_toward_the_avoided_neighbour():
    graph = ABFatTree(k=4).graph()
    result = pb.simulate_pushback(graph, ("a0_0", "e0_0"))
    ports = pb.avoid_ports(graph, result.state)
    for switch, per_prefix in result.state.avoid.items():
        for prefix, neighbours in per_prefix.items():
            expected = sorted(d["a_port"] if d["a"] == switch else d["b_port"]
                              for n in neighbours for d in graph[switch][n].values())
            assert ports[switch][prefix] == expected


@pytest.mark.parametrize("failure,kwargs,field", [
    (("a0_0", "e3_1"), {}, "failed_link"),
    (("h1", "e0_0"), {}, "failed_link"),
    ("h1", {}, "failure"),
    ("nope", {}, "failure"),
    (("a0_0", "e0_0"), {"failed_links": [("a0_0", "e0_0")]}, "failure"),
    ("c0", {"failed_switches": ["c0"]}, "failure"),
    (("a0_0", "e0_0"), {"failed_switches": [3]}, "failed_switches"),
])
def test_bad_input_is_refused_naming_the_field(failure, kwargs, field):
    with pytest.raises(ParameterError) as info:
        pb.simulate_pushback(ABFatTree(k=4).graph(), failure, **kwargs)
    assert info.value.field == field


def test_graph_without_f10_attributes_is_refused():
    with pytest.raises(ParameterError) as info:
        pb.simulate_pushback(make_topology("clos", leaves=2, spines=2).graph(), ("leaf0", "spine0"))
    assert info.value.field == "graph"
