"""F10's backup tables (controllers/f10/routes.py) never loop, and a table that would is refused.

A rerouted packet must not come back to the switch whose port failed: there
it would take the failed port again (an unmarked packet loops between the
two switches until its TTL runs out, a marked one is dropped at the failed
link).  The tables computed from the k=4 AB FatTree and standard FatTree
(Scheme 1 and Scheme 2 detours) pass; hand-made tables that loop in each way
the data plane (p4src/f10.p4) allows are refused with the switch, the
destination, the port and the loop's path named.
"""
import pytest

from testbed.controllers.f10.programming import program_fabric
from testbed.controllers.f10.routes import PHASE_DOWN, PHASE_UP, Backup, check_loop_free, plan_fabric
from testbed.controllers.fabric_programmer import FabricProgrammer
from testbed.controllers.routing import compute_host_routes
from testbed.errors import ParameterError
from testbed.topologies.f10.detours import SCHEME_1, SCHEME_2
from testbed.topologies.graph import port_toward
from testbed.topologies.registry import make_topology


def graph_of(kind, k=4):
    return make_topology(kind, k=k).graph()


def port(graph, switch, neighbor):
    """``switch``'s port toward ``neighbor``."""
    for _, other, data in graph.edges(switch, data=True):
        if other == neighbor:
            return port_toward(data, switch)
    raise AssertionError(f"no link {switch}-{neighbor}")


def refusal(graph, plans, routes=None):
    with pytest.raises(ParameterError) as caught:
        check_loop_free(graph, plans, routes)
    return caught.value


@pytest.mark.parametrize("kind, k, scheme", [("abfattree", 4, SCHEME_1), ("fattree", 4, SCHEME_2),
                                             ("abfattree", 6, SCHEME_1), ("fattree", 6, SCHEME_2)])
def test_the_computed_tables_do_not_loop(kind, k, scheme):
    graph = graph_of(kind, k)
    plans = plan_fabric(graph)
    schemes = {b.scheme for plan in plans.values() for backups in plan.backups.values() for b in backups}
    assert scheme in schemes   # the detours of this wiring are among the backups checked
    check_loop_free(graph, plans)


def test_two_switches_that_back_up_to_each_other_are_refused():
    graph = graph_of("abfattree")
    plans = plan_fabric(graph)
    # a0_0 sends h5 (pod 1) up; around its port to c0 it backs up to c1, unmarked
    assert [b.neighbor for b in plans["a0_0"].backups[("h5", port(graph, "a0_0", "c0"))]] == ["c1"]
    # hand-made: c1, around its port to a1_1, backs up to a0_0 unmarked: the two would pass h5 back and forth
    plans["c1"].backups[("h5", port(graph, "c1", "a1_1"))] = [Backup(port(graph, "c1", "a0_0"), "a0_0")]
    error = refusal(graph, plans)
    assert error.field == f"f10 backup of a0_0 for h5 around port {port(graph, 'a0_0', 'c0')}"
    assert error.value == "c1"
    assert "a0_0 -> c1 -> a0_0" in str(error)


def test_a_next_hop_that_routes_back_is_refused():
    graph = graph_of("abfattree")
    plans = plan_fabric(graph)
    down = port(graph, "a0_0", "e0_0")
    assert ("h1", down) not in plans["a0_0"].backups   # an edge switch has no detour (pushback's job)
    # hand-made: around its port to e0_0, a0_0 sends h1 up to c0, which routes it down to a0_0 again
    plans["a0_0"].backups[("h1", down)] = [Backup(port(graph, "a0_0", "c0"), "c0")]
    error = refusal(graph, plans)
    assert error.field == f"f10 backup of a0_0 for h1 around port {down}" and error.value == "c0"
    assert f"a0_0 -> c0 -> a0_0, then port {down} again" in str(error)


def test_a_scheme1_detour_that_returns_to_the_failed_link_is_refused():
    graph = graph_of("abfattree")
    plans = plan_fabric(graph)
    down = port(graph, "c0", "a0_0")
    backups = plans["c0"].backups[("h1", down)]
    assert {(b.neighbor, b.phase, b.scheme) for b in backups} == {("a1_0", PHASE_UP, SCHEME_1),
                                                                  ("a3_0", PHASE_UP, SCHEME_1)}
    # hand-made: a1_0 sends a phase-UP packet that came from c0 back up to c0
    from_c0 = port(graph, "a1_0", "c0")
    plans["a1_0"].detour_up[from_c0] = [from_c0]
    error = refusal(graph, plans)
    assert error.field == f"f10 backup of c0 for h1 around port {down}" and error.value == "a1_0"
    assert f"c0 -> a1_0 -> c0, then port {down} again" in str(error)


def test_a_scheme2_detour_whose_last_phase_routes_through_the_failed_link_is_refused():
    graph = graph_of("fattree")
    plans = plan_fabric(graph)
    down = port(graph, "c0", "a0_0")
    backups = plans["c0"].backups[("h1", down)]
    assert all(b.phase == PHASE_DOWN and b.scheme == SCHEME_2 for b in backups)
    assert "a1_0" in [b.neighbor for b in backups]
    # hand-made: e1_0 sends the packet a1_0 passed down back up to a1_0, whose routes to h1 may go through c0
    from_a1_0 = port(graph, "e1_0", "a1_0")
    plans["e1_0"].detour_up[from_a1_0] = [from_a1_0]
    error = refusal(graph, plans)
    assert error.field == f"f10 backup of c0 for h1 around port {down}" and error.value == "a1_0"
    assert f"c0 -> a1_0 -> e1_0 -> a1_0 -> c0, then port {down} again" in str(error)


def test_a_backup_through_the_failed_port_itself_is_refused():
    graph = graph_of("abfattree")
    plans = plan_fabric(graph)
    up = port(graph, "e0_0", "a0_0")
    plans["e0_0"].backups[("h5", up)] = [Backup(up, "a0_0")]
    error = refusal(graph, plans)
    assert error.field == f"f10 backup of e0_0 for h5 around port {up}" and "failed" in str(error)


def test_primary_routes_that_loop_are_named():
    graph = graph_of("abfattree")
    routes = compute_host_routes(graph)
    ip = graph.nodes["h1"]["ip"].split("/")[0]
    routes["c0"][ip] = [port(graph, "c0", "a1_0")]       # hand-made: c0 -> a1_0 -> c0 for h1
    routes["a1_0"][ip] = [port(graph, "a1_0", "c0")]
    error = refusal(graph, plan_fabric(graph), routes)
    assert error.field == "primary routes toward h1"
    assert "c0 -> a1_0 -> c0" in error.value or "a1_0 -> c0 -> a1_0" in error.value


def test_the_controller_refuses_to_write_a_looping_table():
    graph = graph_of("abfattree")
    plans = plan_fabric(graph)
    plans["a0_0"].backups[("h1", port(graph, "a0_0", "e0_0"))] = [Backup(port(graph, "a0_0", "c0"), "c0")]
    programmer = FabricProgrammer(graph, {}, pipeline=None)   # not connected: nothing may be written
    with pytest.raises(ParameterError, match="f10 backup of a0_0 for h1"):
        program_fabric(programmer, {}, plans)
