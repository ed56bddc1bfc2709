"""FabricProgrammer against real portless embedded switches (switchd processes, no Mininet).

Routes read back over P4Runtime must equal the computed equal-cost routes after
programming and after every reroute; writes go out in batches (members, groups,
entries: a few Write requests per switch, however many routes); a switch that
dies is reported in ``unreachable`` while the others are still updated.
"""
import pytest

import testbed.p4src
from testbed.controllers.fabric_programmer import FabricProgrammer
from testbed.controllers.routing import compute_host_routes
from testbed.targets import pipeline_config

from test_fabric_app import portless_fabric, read_switch, route_ports  # noqa: F401 (portless_fabric: a fixture)

PROGRAM = testbed.p4src.program_path("l3_ecmp")


def _expected(graph, failed=()):
    return {switch: {ip: set(ports) for ip, ports in by_ip.items()}
            for switch, by_ip in compute_host_routes(graph, failed).items()}


def _read_back(state, switches):
    routes = {}
    for name in switches:
        with read_switch(state["switches"][name]) as client:
            routes[name] = route_ports(client)
    return routes


class _WriteCounter:
    """Counts the Write requests each real client sends (the call still goes to the switch)."""

    def __init__(self, clients):
        self.writes = {name: [] for name in clients}
        for name, client in clients.items():
            original = client.write

            def write(updates, name=name, original=original):
                self.writes[name].append(len(updates))
                return original(updates)
            client.write = write


@pytest.fixture
def programmer(portless_fabric):
    state_file, state, graph = portless_fabric
    switches = {name: {"grpc": info["grpc"], "device_id": info["device_id"]}
                for name, info in state["switches"].items()}
    fabric = FabricProgrammer(graph, switches, pipeline_config(PROGRAM, "embedded"))
    fabric.connect()
    try:
        yield fabric, state, graph
    finally:
        fabric.close()


@pytest.mark.slow
def test_program_writes_routes_in_batches_and_reroute_writes_the_difference(programmer):
    fabric, state, graph = programmer
    counter = _WriteCounter(fabric.clients)
    written = fabric.program()
    assert written == sum(len(by_ip) for by_ip in compute_host_routes(graph).values())
    assert fabric.unreachable == {}
    assert _read_back(state, fabric.clients) == _expected(graph)
    # a leaf with groups: one Write for its members, one for its groups, one for its entries
    assert all(1 <= len(sizes) <= 3 for sizes in counter.writes.values()), counter.writes
    assert max(max(sizes) for sizes in counter.writes.values()) > 1

    spine_link = ("leaf0", "spine0")
    for name in counter.writes:
        counter.writes[name].clear()
    result = fabric.reroute({spine_link})
    assert set(result) == {"entries_written", "seconds", "compute_s", "write_s"}
    assert 0 <= result["compute_s"] <= result["seconds"] and 0 <= result["write_s"] <= result["seconds"]
    assert result["entries_written"] > 0 and fabric.unreachable == {}
    assert _read_back(state, fabric.clients) == _expected(graph, {spine_link})
    # routes toward leaf0's hosts changed on the spines and leaf1, in one entries Write each
    assert all(len(sizes) <= 3 for sizes in counter.writes.values()), counter.writes

    again = fabric.reroute({spine_link})
    assert again["entries_written"] == 0
    back = fabric.reroute(set())
    assert back["entries_written"] == result["entries_written"]
    assert _read_back(state, fabric.clients) == _expected(graph)


@pytest.mark.slow
def test_a_dead_switch_is_unreachable_and_the_others_are_updated(programmer):
    fabric, state, graph = programmer
    fabric.program()
    dead = state["_processes"]["spine1"]
    dead.kill()
    dead.wait(timeout=10)
    spine_link = ("leaf0", "spine1")  # changes spine1's routes too, so it must be written
    fabric.reroute({spine_link})
    assert set(fabric.unreachable) == {"spine1"}
    alive = [name for name in fabric.clients if name != "spine1"]
    expected = _expected(graph, {spine_link})
    assert _read_back(state, alive) == {name: expected[name] for name in alive}
    fabric.forget_switch("spine1")
    assert fabric.reroute(set())["entries_written"] > 0 and fabric.unreachable == {}
    expected = _expected(graph)
    assert _read_back(state, alive) == {name: expected[name] for name in alive}


@pytest.mark.slow
def test_connect_reports_the_switch_it_cannot_reach_and_keeps_the_others(portless_fabric):
    _, state, graph = portless_fabric
    switches = {name: {"grpc": info["grpc"], "device_id": info["device_id"]}
                for name, info in state["switches"].items()}
    switches["nowhere"] = {"grpc": "127.0.0.1:1", "device_id": 99}
    fabric = FabricProgrammer(graph, switches, pipeline_config(PROGRAM, "embedded"))
    try:
        with pytest.raises(Exception, match="UNAVAILABLE"):
            fabric.connect()
        assert set(fabric.clients) == set(state["switches"])
    finally:
        fabric.close()


@pytest.mark.slow
def test_excluded_next_hops_are_left_out_until_lifted_and_never_all_of_them(programmer):
    """FabricProgrammer.exclude_next_hops: what F10's pushback installs (controllers/f10/pushback.py)."""
    fabric, state, graph = programmer
    fabric.program()
    routes = _expected(graph)
    ip, ports = next((ip, ports) for ip, ports in sorted(routes["leaf0"].items()) if len(ports) == 2)
    first, second = sorted(ports)
    assert fabric.exclude_next_hops({"leaf0": {ip: {first}}}) == 1      # one entry changed
    assert _read_back(state, ["leaf0"])["leaf0"][ip] == {second}
    assert _read_back(state, ["leaf1"]) == {"leaf1": routes["leaf1"]}   # other switches untouched
    # excluding every next hop would black-hole the destination: the route keeps them all
    fabric.exclude_next_hops({"leaf0": {ip: {first, second}}})
    assert _read_back(state, ["leaf0"])["leaf0"][ip] == {first, second}
    fabric.exclude_next_hops({"leaf0": {ip: {second}}})
    assert _read_back(state, ["leaf0"])["leaf0"][ip] == {first}
    assert fabric.exclude_next_hops({}) == 1                            # lifted: the computed route again
    assert _read_back(state, fabric.clients) == routes
