"""F10's epoch rescheduler (controllers/f10/rescheduler_app.py) against real P4Runtime servers.

Expected behaviour comes from the F10 paper (seed 002): section 6.1 (weighted
ECMP on the residual capacity left after scheduling; a new or recovered link
has residual capacity 0; a failed link carries nothing), 6.2 (greedy
placement, largest first, on the path of least sum 1/R(e)) and 5.3 (a
recovered link must stay up for a while before it gets traffic again); from
the P4Runtime spec ("Action Profile Group Programming": a weight is > 0, and
selects the member in proportion to it).

Without Mininet: one embedded target with its P4Runtime server per switch, in
this process, programmed with p4src/f10.p4 and the routes by the
FabricProgrammer; load is set by writing the egress port counters over
P4Runtime (CounterEntry MODIFY), time by a clock the test moves.  With Mininet
(marked ``mininet``): a k=4 AB FatTree in F10 mode with the rescheduler on.
"""
import contextlib
import doctest
import ipaddress
import time

import pytest

import testbed.p4src
from testbed.controllers.f10 import load_estimate, rescheduler_options, scheduled_flows, weighted_groups
from testbed.controllers.f10.controller import F10Controller
from testbed.controllers.f10.rescheduler_app import EGRESS_COUNTER, start_rescheduler
from testbed.controllers.f10.scheduled_flows import DST_FIELD, FLOWS_TABLE, SCHEDULED_ACTION, SRC_FIELD
from testbed.controllers.f10.weighted_groups import GroupTable, plan_groups
from testbed.controllers.contract import Failure
from testbed.controllers.fabric_programmer import FabricProgrammer
from testbed.errors import ParameterError, TestbedError
from testbed.mechanisms import make_controller
from testbed.targets import pipeline_config
from testbed.topologies.graph import host_ip, is_host, port_toward
from testbed.topologies.registry import make_topology

from p4runtime_helpers import running_server

CAPACITY_MBPS = 100.0  # every link of the clos topology below


class Clock:
    """Monotonic seconds that move only when the test says."""

    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


@pytest.fixture(scope="module")
def pipeline():
    return pipeline_config(testbed.p4src.program_path("f10"), "embedded")


@pytest.fixture
def clos(pipeline):
    """leaf0..leaf2 (one host each: h1..h3) under spine0 and spine1, programmed with f10.p4 and the routes."""
    graph = make_topology("clos", leaves=3, spines=2, hosts_per_leaf=1).graph()
    names = sorted(n for n in graph.nodes if not is_host(graph, n))
    with contextlib.ExitStack() as stack:
        switches = {}
        for device_id, name in enumerate(names, start=1):
            _, _, address = stack.enter_context(running_server(device_id=device_id))
            switches[name] = {"grpc": address, "device_id": device_id}
        programmer = FabricProgrammer(graph, switches, pipeline)
        stack.callback(programmer.close)
        programmer.connect()
        programmer.program()
        yield programmer


@contextlib.contextmanager
def rescheduler(programmer, **options):
    options.setdefault("epoch_ms", 3_600_000)  # epochs run when the test says (run_epoch)
    context = start_rescheduler(programmer, **options)
    try:
        yield context
    finally:
        context.stop()


def port(graph, switch, neighbor):
    return next(port_toward(d, switch) for _, other, d in graph.edges(switch, data=True) if other == neighbor)


def weights_toward(programmer, switch, host):
    """``{neighbour: weight}`` of ``switch``'s route to ``host``, read over P4Runtime.

    The route names a group, or one member when a single next hop is left (the controller writes
    that as a member: weight 1).
    """
    client, graph = programmer.clients[switch], programmer.graph
    ip = graph.nodes[host]["ip"].split("/")[0]
    (entry,) = client.read_table_entries("MyIngress.ipv4_lpm", {"hdr.ipv4.dstAddr": (ip, 32)})
    members = client.read_members("MyIngress.ecmp_selector")
    neighbors = {port_toward(d, switch): other for _, other, d in graph.edges(switch, data=True)}
    if entry.group_id is None:
        assert entry.member_id is not None, entry
        weighted = [(entry.member_id, 1)]
    else:
        weighted = client.read_groups("MyIngress.ecmp_selector")[entry.group_id]
    return {neighbors[members[member][1]["port"]]: weight for member, weight in weighted}


def add_flow_bytes(programmer, src, dst, nbytes):
    """Make the counting entry of ``src -> dst`` at ``src``'s ToR count ``nbytes`` more (DirectCounterEntry MODIFY)."""
    graph = programmer.graph
    tor = next(iter(graph.neighbors(src)))
    match = {SRC_FIELD: host_ip(graph, src), DST_FIELD: host_ip(graph, dst)}
    packets, current = programmer.clients[tor].read_direct_counter(FLOWS_TABLE, match)
    programmer.clients[tor].write_direct_counter(FLOWS_TABLE, match, packets=packets + 1, nbytes=current + nbytes)


def pins(programmer, switch):
    """``{(src, dst): neighbour}`` of the flows pinned on ``switch`` (its ``f10_flows`` entries that forward)."""
    graph = programmer.graph
    by_ip = {host_ip(graph, host): host for host in graph.nodes if is_host(graph, host)}
    neighbors = {port_toward(d, switch): other for _, other, d in graph.edges(switch, data=True)}
    return {(by_ip[str(ipaddress.IPv4Address(view.match[SRC_FIELD]))],
             by_ip[str(ipaddress.IPv4Address(view.match[DST_FIELD]))]): neighbors[view.params["port"]]
            for view in programmer.clients[switch].read_table_entries(FLOWS_TABLE)
            if view.action == SCHEDULED_ACTION}


def add_sent_bytes(programmer, switch, neighbor, nbytes):
    """Make ``switch``'s egress counter toward ``neighbor`` count ``nbytes`` more (P4Runtime MODIFY)."""
    client = programmer.clients[switch]
    index = port(programmer.graph, switch, neighbor)
    packets, current = client.read_counter(EGRESS_COUNTER, index)
    client.write_counter(EGRESS_COUNTER, index, packets=packets + 1, nbytes=current + nbytes)


@pytest.mark.parametrize("module", [load_estimate, scheduled_flows, weighted_groups, rescheduler_options])
def test_module_doctests(module):
    assert doctest.testmod(module).failed == 0


def test_group_plans_keep_the_majority_move_the_others_and_write_nothing_when_nothing_changes():
    table = GroupTable(routes={"a": 1, "b": 1, "c": 1}, groups={1: {4: 1, 5: 1}, 7: {4: 1}}, next_id=8)
    # b and c need member 5 only: group 1 keeps them; a moves to group 7 (unused, rewritten first)
    plan = plan_groups(table, {"a": {4: 1, 5: 1}, "b": {5: 1}, "c": {5: 1}})
    assert (plan.fresh, plan.moves, plan.reweighted) == ([(7, {4: 1, 5: 1}, False)], [("a", 7)], [(1, {5: 1})])
    assert plan.updates() == 3 and plan.table.next_id == 8
    # the same weights again: nothing to write
    again = plan_groups(plan.table, {"a": {4: 1, 5: 1}, "b": {5: 1}, "c": {5: 1}})
    assert again.updates() == 0 and again.table.routes == plan.table.routes
    # equal weights for all: group 1 is rewritten in place, nobody moves
    back = plan_groups(plan.table, {"a": {4: 1, 5: 1}, "b": {4: 1, 5: 1}, "c": {4: 1, 5: 1}})
    assert (back.fresh, back.moves, back.reweighted) == ([], [], [(1, {4: 1, 5: 1})])
    # a destination moves only to a group whose weights are already its own when it moves:
    # c joins group 7 (unchanged), not group 1 (rewritten after the moves)
    table = GroupTable(routes={"a": 1, "b": 1, "c": 2, "d": 7}, groups={1: {4: 1}, 2: {4: 1}, 7: {5: 1}},
                       next_id=8)
    plan = plan_groups(table, {"a": {5: 1}, "b": {5: 1}, "c": {5: 1}, "d": {5: 1}})
    assert (plan.fresh, plan.moves, plan.reweighted) == ([], [], [(1, {5: 1}), (2, {5: 1})])
    plan = plan_groups(table, {"a": {5: 1}, "b": {5: 1}, "c": {4: 1, 5: 1}, "d": {4: 1}})
    assert plan.moves == [] and plan.reweighted == [(1, {5: 1}), (2, {4: 1, 5: 1}), (7, {4: 1})]
    table.routes["e"] = 2
    plan = plan_groups(table, {"a": {5: 1}, "b": {5: 1}, "c": {4: 1}, "d": {5: 1}, "e": {5: 1}})
    assert plan.moves == [("e", 7)] and plan.reweighted == [(1, {5: 1})] and plan.fresh == []


def test_the_measured_flow_is_pinned_and_the_weights_follow_the_residual_capacity_it_leaves(clos):
    clock = Clock()
    with rescheduler(clos, clock=clock) as context:
        context.run_epoch()  # the first reading: no rate yet, nothing scheduled, weights as programmed
        assert weights_toward(clos, "leaf0", "h2") == {"spine0": 1, "spine1": 1}
        assert all(pins(clos, switch) == {} for switch in clos.clients)
        # over 1 s h1 sends 25 Mbit/s to h2: the counting entry at leaf0 says so; the link counters
        # say what it loads (half over each spine, as ECMP spread it)
        rate_bytes = int(0.25 * CAPACITY_MBPS * 1e6 / 8)
        add_flow_bytes(clos, "h1", "h2", rate_bytes)
        for spine in ("spine0", "spine1"):
            add_sent_bytes(clos, "leaf0", spine, rate_bytes // 2)
            add_sent_bytes(clos, spine, "leaf1", rate_bytes // 2)
        clock.now += 1.0
        context.run_epoch()
        epoch = context.epochs()[-1]
        assert epoch["errors"] == [] and epoch["flows"] == 1
        assert epoch["offered_mbps"] == pytest.approx(25.0, rel=1e-3)
        placed = epoch["paths"]["h1->h2"][1]  # the spine the flow was placed through
        other = "spine1" if placed == "spine0" else "spine0"
        # pinned at every switch of its path (6.2: the ToRs are told of scheduled flows)
        assert pins(clos, "leaf0") == {("h1", "h2"): placed}
        assert pins(clos, placed) == {("h1", "h2"): "leaf1"}
        assert pins(clos, "leaf1") == {("h1", "h2"): "h2"}
        assert pins(clos, other) == {} and pins(clos, "leaf2") == {}
        assert epoch["pins_written"] == 3
        # residual capacities on leaf0's uplinks: 75 on the placed one, 100 on the other -> 3 : 4
        for host in ("h2", "h3"):
            assert weights_toward(clos, "leaf0", host) == {placed: 3, other: 4}
        # the flow goes up from leaf0 only: the other leaves keep equal weights
        assert weights_toward(clos, "leaf1", "h1") == {"spine0": 1, "spine1": 1}
        assert weights_toward(clos, "leaf2", "h1") == {"spine0": 1, "spine1": 1}
        (action,) = [row for row in context.actions() if row["switch"] == "leaf0"]
        assert action["write"] == "modify" and action["entries_written"] == 1
        assert action["old"] == {"2:spine0": 1, "3:spine1": 1}
        assert action["new"] == {f"{port(clos.graph, 'leaf0', placed)}:{placed}": 3,
                                 f"{port(clos.graph, 'leaf0', other)}:{other}": 4}
        assert action["destinations"] == ["h2", "h3"] and action["time_ns"] >= epoch["time_ns"]
        # the same load again: the same weights and pins, nothing written
        written = len(context.actions())
        add_flow_bytes(clos, "h1", "h2", rate_bytes)
        clock.now += 1.0
        context.run_epoch()
        assert len(context.actions()) == written and context.epochs()[-1]["updates"] == 0
        # a silent epoch: the flow is no longer scheduled; its ToR keeps counting it.  The spine's
        # entries are forgotten first (as after a failed read): its pin is found and removed too
        context.app.scheduled.forget(placed)
        clock.now += 1.0
        context.run_epoch()
        assert context.epochs()[-1]["flows"] == 0 and context.epochs()[-1]["pins_written"] == 3
        assert all(pins(clos, switch) == {} for switch in clos.clients)
        assert len(clos.clients["leaf0"].read_table_entries(FLOWS_TABLE)) == 2  # h1 -> h2, h1 -> h3


def test_a_failure_unpins_the_flows_placed_over_it_at_once(clos):
    clock = Clock()
    transitions = []
    with rescheduler(clos, clock=clock, transitions=transitions) as context:
        context.run_epoch()
        add_flow_bytes(clos, "h1", "h2", 1_000_000)
        add_flow_bytes(clos, "h3", "h2", 500_000)
        clock.now += 1.0
        context.run_epoch()
        paths = context.epochs()[-1]["paths"]
        spine = paths["h1->h2"][1]
        assert paths["h3->h2"][1] != spine  # the second flow avoids the first one's links
        assert pins(clos, "leaf0") == {("h1", "h2"): spine}
        # the spine's link to leaf1 fails: h1 -> h2 is unpinned everywhere before any epoch; h3 -> h2 stays
        transitions.append({"switch": spine, "port": port(clos.graph, spine, "leaf1"), "status": "down"})
        context.links_changed()
        deadline = time.monotonic() + 10
        while pins(clos, "leaf0") and time.monotonic() < deadline:
            time.sleep(0.02)
        assert all(("h1", "h2") not in pins(clos, switch) for switch in clos.clients)
        assert pins(clos, "leaf2") == {("h3", "h2"): paths["h3->h2"][1]}
        assert len(context.epochs()) == 2


def test_a_failed_link_gets_no_weight_and_destinations_that_shared_a_group_split(clos):
    with rescheduler(clos, clock=Clock()) as context:
        failure = Failure("link_down", link=("leaf0", "spine0"), failed_links={frozenset(("leaf0", "spine0"))})
        context.notify(failure)
        context.run_epoch()
        assert context.epochs()[-1]["errors"] == []
        assert weights_toward(clos, "leaf0", "h2") == {"spine1": 1}
        assert weights_toward(clos, "leaf0", "h3") == {"spine1": 1}
        # spine0 no longer reaches h1 in two hops: leaf1 and leaf2 send h1's traffic to spine1 only,
        # and keep both spines for the other leaf (same group before: now two groups)
        for leaf, other_host in (("leaf1", "h3"), ("leaf2", "h2")):
            assert weights_toward(clos, leaf, "h1") == {"spine1": 1}
            assert weights_toward(clos, leaf, other_host) == {"spine0": 1, "spine1": 1}
        moved = [row for row in context.actions() if row["switch"] == "leaf2" and row["moved"]]
        assert [(row["write"], row["moved"], row["new"]) for row in moved] == [("insert", ["h1"], {"3:spine1": 1})]


def test_a_recovered_link_gets_weight_only_after_the_holddown(clos):
    clock = Clock()
    transitions = []  # the F10 controller's detector reports
    leaf0_port = port(clos.graph, "leaf0", "spine0")
    spine0_port = port(clos.graph, "spine0", "leaf0")
    with rescheduler(clos, clock=clock, transitions=transitions, recovered_holddown_ms=1000) as context:
        transitions.append({"switch": "spine0", "port": spine0_port, "status": "down"})
        context.run_epoch()
        assert weights_toward(clos, "leaf0", "h2") == {"spine1": 1}
        assert weights_toward(clos, "leaf2", "h1") == {"spine1": 1}
        assert context.epochs()[-1]["failed_links"] == [("leaf0", leaf0_port, "spine0", spine0_port)]
        clock.now += 5.0
        transitions.append({"switch": "spine0", "port": spine0_port, "status": "up"})
        context.run_epoch()  # up again at this epoch: held down for 1 s
        assert context.epochs()[-1]["failed_links"] == []
        assert context.epochs()[-1]["held_down"] == [("leaf0", leaf0_port, "spine0", spine0_port)]
        assert weights_toward(clos, "leaf0", "h2") == {"spine1": 1}
        assert weights_toward(clos, "leaf2", "h1") == {"spine1": 1}
        clock.now += 0.9
        context.run_epoch()
        assert weights_toward(clos, "leaf0", "h2") == {"spine1": 1}
        clock.now += 0.2
        context.run_epoch()  # 1.1 s after the recovery
        assert context.epochs()[-1]["held_down"] == []
        assert weights_toward(clos, "leaf0", "h2") == {"spine0": 1, "spine1": 1}
        assert weights_toward(clos, "leaf2", "h1") == {"spine0": 1, "spine1": 1}
        assert weights_toward(clos, "leaf2", "h2") == {"spine0": 1, "spine1": 1}


def test_epochs_run_by_themselves_every_epoch(clos):
    with rescheduler(clos, epoch_ms=100) as context:
        deadline = time.monotonic() + 30
        while len(context.epochs()) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        rows = context.epochs()
        assert len(rows) >= 3 and all(row["errors"] == [] for row in rows)
        # epoch k starts no earlier than k epochs after the timer started (the first may start late)
        assert rows[-1]["time_ns"] - rows[0]["time_ns"] >= (len(rows) - 2) * 0.1e9
    count = len(context.epochs())
    time.sleep(0.3)
    assert len(context.epochs()) == count  # stopped


@pytest.mark.parametrize("options, field", [
    ({"epoch_ms": 0}, "epoch_ms"), ({"epoch_ms": -5}, "epoch_ms"), ({"epoch_ms": float("nan")}, "epoch_ms"),
    ({"epoch_ms": True}, "epoch_ms"), ({"epoch_ms": "100"}, "epoch_ms"),
    ({"epoch_ms": 100, "recovered_holddown_ms": -1}, "recovered_holddown_ms"),
    ({"epoch_ms": 100, "recovered_holddown_ms": float("inf")}, "recovered_holddown_ms"),
])
def test_bad_options_are_refused_naming_the_field(options, field):
    with pytest.raises(ParameterError) as error:
        start_rescheduler(None, **options)  # refused before the sessions are used
    assert error.value.field == field
    with pytest.raises(ParameterError) as error:
        F10Controller(rescheduler_epoch_ms=options["epoch_ms"],
                      recovered_holddown_ms=options.get("recovered_holddown_ms", 0))
    assert error.value.field == field


def test_the_f10_controller_takes_the_rescheduler_options(clos):
    controller = make_controller("f10", rescheduler_epoch_ms=250, recovered_holddown_ms=0)
    assert controller.rescheduler_options == {"epoch_ms": 250.0, "recovered_holddown_ms": 0.0}
    assert controller.reschedules == []
    assert make_controller("f10").rescheduler_options is None
    with pytest.raises(ParameterError, match="rescheduler_epoch_ms"):
        make_controller("f10", rescheduler_epoch=250)
    with rescheduler(clos):
        with pytest.raises(TestbedError, match="already runs"):
            start_rescheduler(clos, epoch_ms=100)
    with rescheduler(clos):  # and again once the first one stopped
        pass


@pytest.mark.mininet
def test_weights_change_after_an_agg_core_failure_and_traffic_flows(fabric_factory):
    # detectors on the failed link's ends only: probes on every link cost most of a core, and a
    # starved switch is a silent neighbour, whose false failures would change the placement checked
    fabric = fabric_factory("abfattree", k=4, program="f10", target="embedded", controller="f10",
                            controller_options={"rescheduler_epoch_ms": 300, "recovered_holddown_ms": 1000,
                                                "monitored_switches": ["c0", "a0_0"]})
    controller, graph = fabric.controller, fabric.topo.graph()
    pod0 = {"h1", "h2", "h3", "h4"}
    # a0_0 (pod 0) loses its link to core c0: the aggregation switches of the other pods that reach
    # pod 0 through c0 must stop sending pod 0's traffic to c0, and keep c0 for the other pods
    remote = [a for a in ("a1_0", "a1_1", "a2_0", "a2_1", "a3_0", "a3_1") if graph.has_edge(a, "c0")]
    assert len(remote) == 3
    assert all("c0" in weights_toward(controller.programmer, a, "h1") for a in remote)
    failed_link = ("a0_0", port(graph, "a0_0", "c0"), "c0", port(graph, "c0", "a0_0"))
    failed_at = {}

    def fail():
        failed_at["ns"] = time.time_ns()
        fabric.link_down("c0", "a0_0")

    report = fabric.stream([("h5", "h1"), ("h9", "h2"), ("h13", "h3"), ("h1", "h6")], duration=3.0,
                           events=[(1.0, fail)], qps=1, rate_mbps=1.0, mtu=512)
    epochs = controller.rescheduler.epochs()
    assert all(not row["errors"] for row in epochs)
    # the four streams were measured at their ToRs and pinned (a later epoch may find a stream silent)
    assert max(row["flows"] for row in epochs) == 4
    assert {"h5->h1", "h9->h2", "h13->h3", "h1->h6"} == set().union(*(row["flow_mbps"] for row in epochs))
    assert sum(row["pins_written"] for row in epochs) > 0
    # the first epoch that knows of the failure (the detectors may report other, false, failures on a
    # loaded machine: the rows of that epoch are checked, not only the state at the end)
    first = next(row for row in epochs if failed_link in row["failed_links"])
    rows = [row for row in controller.reschedules if row["epoch"] == first["epoch"]]
    for a in remote:
        moved = [row for row in rows if row["switch"] == a and row["moved"]]
        assert [set(row["moved"]) for row in moved] == [pod0], rows
        assert not [key for key in moved[0]["new"] if key.endswith(":c0")], moved
        assert "c0" not in weights_toward(controller.programmer, a, "h1")  # still failed at the end
    (up,) = [row for row in rows if row["switch"] == "a0_0"]
    assert list(up["new"]) == [f"{port(graph, 'a0_0', 'c1')}:c1"] and not up["moved"]
    after = [row for row in controller.reschedules if row["time_ns"] > failed_at["ns"]]

    def median_ms(key):
        return 1000 * sorted(row[key] for row in epochs)[len(epochs) // 2]

    print(f"rescheduler: {len(epochs)} epochs of 300 ms, median duration {median_ms('duration_s'):.0f} ms (reading "
          f"{median_ms('read_s'):.0f}, placing {median_ms('compute_s'):.0f}, writing {median_ms('write_s'):.0f});"
          f" failure in the epoch {(first['time_ns'] - failed_at['ns']) / 1e6:.0f} ms after it;"
          f" {len(after)} group actions, {sum(r['entries_written'] for r in after)} updates after it; "
          f"stream: {report['lost_packets']} of {report['sent_packets']} packets lost, recovery {report['recovery']}")
    # traffic still flows: the streams recovered within the run, and every pair answers
    assert report["sent_packets"] > 0 and report["lost_packets"] < report["sent_packets"] * 0.2, report
    assert report["recovery"] is None or report["recovery"]["seconds"] < 1.5, report["recovery"]
    assert fabric.unreachable_pairs() == []
