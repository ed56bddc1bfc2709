"""The os-ken fabric controller run for real (launcher subprocess) against embedded P4 switches.

* Without Mininet: portless ``testbed.embedded_switch.switchd`` processes (real P4Runtime
  servers and devices) described by a state file; checks programming, the
  REST API, rerouting around a failed link, parameters and TE pinning.
* With Mininet (the ``fabric_factory`` fixture, controller ``osken``): a 2x2
  leaf-spine of embedded P4 switches; the controller programs routes, hosts
  ping; a spine link goes down, the controller is notified over REST (or finds
  out with its port monitor), recomputes (routes avoid the link, pings still
  succeed) and reports its reaction time.
"""
import ipaddress
import json
import os
import subprocess
import sys
import time

import pytest

import testbed.p4src
from testbed.controllers.launcher import FabricController, free_ports, program_fabric
from testbed.controllers.parameters import switch_salt
from testbed.controllers.notify import FabricControllerError
from testbed.emulation.p4switch import wait_listening
from testbed.errors import TestbedError
from testbed.log_format import LINE_RE
from testbed.p4runtime.client import P4RuntimeClient
from testbed.testing import settled
from testbed.topologies.graph import host_ip
from testbed.topologies.registry import make_topology

SELECTOR = "MyIngress.ecmp_selector"
LPM_TABLE = "MyIngress.ipv4_lpm"
P4SRC = os.path.dirname(testbed.p4src.__file__)

TE_PROGRAM = testbed.p4src.program_path("te")  # exact-match TE table before the ECMP routes


def route_ports(client):
    """``{destination ip: set of egress ports}`` of a switch's LPM routes, read over P4Runtime."""
    members = client.read_members(SELECTOR)
    groups = client.read_groups(SELECTOR)
    routes = {}
    for entry in client.read_table_entries(LPM_TABLE):
        address = entry.match["hdr.ipv4.dstAddr"][0]
        ip = str(ipaddress.ip_address(address)) if isinstance(address, int) else str(address)
        if entry.member_id:
            ports = {members[entry.member_id][1]["port"]}
        elif entry.group_id:
            ports = {members[member][1]["port"] for member, _ in groups[entry.group_id]}
        else:
            ports = {entry.params["port"]}
        routes[ip] = ports
    return routes


def port_between(graph, node, neighbor):
    """The port of ``node`` on its (first) link to ``neighbor``."""
    data = next(iter(graph.get_edge_data(node, neighbor).values()))
    return data["a_port"] if data["a"] == node else data["b_port"]


def read_switch(info):
    """A backup (read-only) P4Runtime session to a switch described in a state file."""
    return P4RuntimeClient(info["grpc"], device_id=info["device_id"], election_id=None)


# -- portless switches (no Mininet) -----------------------------------------------------------
@pytest.fixture
def portless_fabric(tmp_path):
    """Real switchd processes (no ports) for a 2x2 leaf-spine, and a state file describing them."""
    topo = make_topology("clos", leaves=2, spines=2, hosts_per_leaf=2)
    graph = topo.graph()
    switches = sorted(n for n, d in graph.nodes(data=True) if d["role"] != "host")
    processes = []
    state = {"pid": os.getpid(), "kind": "clos", "params": topo.params, "switch": "embedded",
             "hosts": {}, "switches": {}}
    try:
        for (device_id, name), port in zip(enumerate(switches, start=1), free_ports(len(switches))):
            address = f"127.0.0.1:{port}"
            processes.append(subprocess.Popen(
                [sys.executable, "-m", "testbed.embedded_switch.switchd", "--name", name, "--device-id", str(device_id),
                 "--grpc-addr", address], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            state["switches"][name] = {"grpc": address, "device_id": device_id, "target": "embedded",
                                       "ports": {}}
        for name, info in state["switches"].items():
            if not wait_listening(info["grpc"], timeout=30.0):
                pytest.fail(f"switch {name} not listening on {info['grpc']}")
        state_file = tmp_path / "net.json"
        state_file.write_text(json.dumps(state))
        state["_processes"] = dict(zip(switches, processes))  # for tests that crash a switch
        yield str(state_file), state, graph
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(timeout=10)


@pytest.mark.slow
def test_controller_programs_reroutes_and_reports(portless_fabric):
    state_file, state, graph = portless_fabric
    controller = FabricController(state_file, program=os.path.join(P4SRC, "l3_ecmp.p4"),
                                  flowlet_interval_us=256, hash_seed=7)
    try:
        status = controller.start(timeout=120)
        assert status["ready"] and status["routes_version"] == 1 and status["error"] is None
        # the program has no parameter table: skipped with a note, not an error
        assert any("flowlet_interval_us=256" in note and "not written" in note for note in status["notes"])
        assert any("hash_seed=7" in note and "not written" in note for note in status["notes"])

        leaf0 = read_switch(state["switches"]["leaf0"])
        try:
            before = route_ports(leaf0)
            up_spine0, up_spine1 = port_between(graph, "leaf0", "spine0"), port_between(graph, "leaf0", "spine1")
            remote = host_ip(graph, "h3")
            assert before[remote] == {up_spine0, up_spine1}  # ECMP over both spines
            assert before[host_ip(graph, "h1")] == {port_between(graph, "leaf0", "h1")}

            # bad notices are refused with the field named
            with pytest.raises(FabricControllerError) as refused:
                controller.client.link_status("leaf0", "spine0", "sideways")
            assert refused.value.status == 400 and refused.value.field == "status"
            with pytest.raises(FabricControllerError) as unknown:
                controller.client.link_status("leaf0", "leaf1", "down")
            assert unknown.value.status == 404

            cli = [sys.executable, "-m", "testbed.controllers.notify", "--url", controller.client.base_url]
            shown = subprocess.run(cli + ["status"], capture_output=True, text=True, check=True)
            assert json.loads(shown.stdout)["routes_version"] == 1
            cli_refused = subprocess.run(cli + ["link", "leaf0", "nowhere", "down"], capture_output=True, text=True)
            assert cli_refused.returncode == 1 and "HTTP 404" in cli_refused.stderr

            answer = controller.client.link_status("leaf0", "spine0", "down")
            assert answer["accepted"]
            status = controller.client.wait_for(lambda s: s["routes_version"] >= 2, timeout=20)
            reaction = status["reactions"][-1]
            assert reaction["link"] == ["leaf0", "spine0"] and reaction["status"] == "down"
            assert 0 < reaction["reaction_s"] < 10 and reaction["entries_written"] > 0
            assert status["last_failure_notice"] == pytest.approx(answer["noticed_at"])
            assert status["last_routes_written"] >= status["last_failure_notice"]
            after = route_ports(leaf0)
            assert after[remote] == {up_spine1}
            assert all(up_spine0 not in ports for ports in after.values())

            # the same notice again changes nothing, but is answered
            controller.client.link_status("leaf0", "spine0", "down")
            status = controller.client.wait_for(lambda s: len(s["reactions"]) >= 2, timeout=20)
            assert status["routes_version"] == 2
            assert status["reactions"][-1]["changed"] is False and status["reactions"][-1]["entries_written"] == 0

            controller.client.link_status("leaf0", "spine0", "up")
            controller.client.wait_for(lambda s: s["routes_version"] >= 3, timeout=20)
            assert route_ports(leaf0)[remote] == {up_spine0, up_spine1}
        finally:
            leaf0.close()
        reacted = [line for line in controller.log_text().splitlines() if "reacted to link leaf0-spine0 down" in line]
        assert reacted and LINE_RE.fullmatch(reacted[0])["name"] == "testbed.controllers.fabric_app"  # timestamped
    finally:
        process = controller.process
        controller.stop()
    assert process.poll() is not None
    assert controller._workdir is None


@pytest.mark.slow
def test_te_pins_flows_and_falls_back_to_ecmp(portless_fabric, tmp_path):
    state_file, state, graph = portless_fabric
    program = TE_PROGRAM
    flows = [{"name": "big", "src": "h1", "dst": "h3", "rate": 60},
             {"name": "mid", "src": "h2", "dst": "h4", "rate": 50}]
    with FabricController(state_file, program=str(program), routing="te", flows=flows) as controller:
        status = controller.client.wait_for(lambda s: s["te"]["version"] >= 1, timeout=30)
        assert status["te"]["enabled"] and status["te"]["flows"] == 2
        spine_of = {name: next(n for n in path if n.startswith("spine"))
                    for name, path in status["te"]["paths"].items()}
        assert spine_of["big"] != spine_of["mid"]  # least-loaded: one flow per spine
        leaf0 = read_switch(state["switches"]["leaf0"])
        try:
            pinned = {(str(ipaddress.ip_address(e.match["hdr.ipv4.srcAddr"])),
                       str(ipaddress.ip_address(e.match["hdr.ipv4.dstAddr"]))): e.params["port"]
                      for e in leaf0.read_table_entries("MyIngress.te_pin")}
            assert pinned == {("10.0.0.1", "10.0.1.1"): port_between(graph, "leaf0", spine_of["big"]),
                              ("10.0.0.2", "10.0.1.2"): port_between(graph, "leaf0", spine_of["mid"])}
            # ECMP routes are still there for everything else
            assert route_ports(leaf0)[host_ip(graph, "h4")] == {port_between(graph, "leaf0", "spine0"),
                                                                port_between(graph, "leaf0", "spine1")}
            # a failure moves the pinned flow off the failed link
            controller.client.link_status("leaf0", spine_of["big"], "down")
            status = controller.client.wait_for(lambda s: s["te"]["version"] >= 2, timeout=20)
            pinned = {(str(ipaddress.ip_address(e.match["hdr.ipv4.srcAddr"])),
                       str(ipaddress.ip_address(e.match["hdr.ipv4.dstAddr"]))): e.params["port"]
                      for e in leaf0.read_table_entries("MyIngress.te_pin")}
            survivor = port_between(graph, "leaf0", spine_of["mid"])
            assert set(pinned.values()) == {survivor}
            # new flows replace the old ones; entries of gone flows are deleted
            controller.client.announce_flows([{"name": "solo", "src": "h1", "dst": "h4", "rate": 10}])
            controller.client.wait_for(lambda s: s["te"]["version"] >= 3, timeout=20)
            entries = leaf0.read_table_entries("MyIngress.te_pin")
            assert [(str(ipaddress.ip_address(e.match["hdr.ipv4.dstAddr"])), e.params["port"])
                    for e in entries] == [("10.0.1.2", survivor)]
            with pytest.raises(FabricControllerError) as bad:
                controller.client.announce_flows([{"name": "x", "src": "h1", "dst": "h4", "rate": -1}])
            assert bad.value.status == 400 and bad.value.field == "flow.rate"
        finally:
            leaf0.close()


@pytest.mark.slow
def test_switch_crash_does_not_stop_the_others_from_being_updated(portless_fabric):
    state_file, state, graph = portless_fabric
    with FabricController(state_file, program=os.path.join(P4SRC, "l3_ecmp.p4")) as controller:
        crashed = state["_processes"]["spine0"]
        crashed.kill()
        crashed.wait()
        for leaf in ("leaf0", "leaf1"):
            controller.client.link_status(leaf, "spine0", "down")
        status = controller.client.wait_for(lambda s: len(s["reactions"]) >= 2, timeout=30)
        assert status["error"] is None
        assert "spine0" in status["reactions"][0]["unreachable_switches"] + \
            status["reactions"][1]["unreachable_switches"]
        assert any("switch spine0 not updated" in note for note in status["notes"])
        for leaf in ("leaf0", "leaf1"):
            session = read_switch(state["switches"][leaf])
            try:
                dead = port_between(graph, leaf, "spine0")
                routes = route_ports(session)
                assert routes and all(dead not in ports for ports in routes.values()), leaf
            finally:
                session.close()


def _parameter_defaults(session):
    """``{table: {param: value}}`` of the flowlet program's parameter tables' default entries."""
    return {table: session.read_table_entries(table, default=True)[0].params
            for table in ("MyIngress.flowlet_params", "MyIngress.lb_params")}


@pytest.mark.slow
def test_parameters_written_to_parameter_tables(portless_fabric):
    state_file, state, _ = portless_fabric
    with FabricController(state_file, program=os.path.join(P4SRC, "flowlet.p4"), flowlet_interval_us=256,
                          hash_seed=7) as controller:
        status = controller.client.status()
        assert status["params"] == {"flowlet_interval_us": 256, "flowlet_load_aware": 0, "hash_seed": 7}
        sessions = {name: read_switch(info) for name, info in state["switches"].items()}
        try:
            for name, session in sessions.items():
                assert _parameter_defaults(session) == {
                    "MyIngress.flowlet_params": {"interval_us": 256, "load_aware": 0},
                    "MyIngress.lb_params": {"hash_seed": 7, "switch_salt": switch_salt(name)}}
            controller.client.set_params(flowlet_load_aware=1)
            controller.client.wait_for(lambda s: s["params"].get("flowlet_load_aware") == 1, timeout=20)
            for session in sessions.values():  # the interval written before is kept
                assert _parameter_defaults(session)["MyIngress.flowlet_params"] == {"interval_us": 256,
                                                                                     "load_aware": 1}
            with pytest.raises(FabricControllerError) as bad:
                controller.client.set_params(flowlet_interval=5)
            assert bad.value.status == 400 and bad.value.field == "flowlet_interval"
            for wrong in (0, 2.5, 10**9):  # out of PARAMETERS' range: refused naming the field
                with pytest.raises(FabricControllerError) as bad:
                    controller.client.set_params(flowlet_interval_us=wrong)
                assert bad.value.status == 400 and bad.value.field == "flowlet_interval_us"
        finally:
            for session in sessions.values():
                session.close()


@pytest.mark.slow
def test_te_without_table_is_a_note(portless_fabric):
    state_file, _, _ = portless_fabric
    with FabricController(state_file, program=os.path.join(P4SRC, "l3_ecmp.p4"), routing="te",
                          flows=[{"name": "f", "src": "h1", "dst": "h3", "rate": 1}]) as controller:
        status = controller.client.wait_for(lambda s: any("TE disabled" in n for n in s["notes"]), timeout=20)
        assert not status["te"]["enabled"] and status["error"] is None


@pytest.mark.slow
def test_oneshot_programming_and_errors(portless_fabric, tmp_path):
    state_file, state, graph = portless_fabric
    program_fabric(state_file, program=os.path.join(P4SRC, "l3_ecmp.p4"), timeout=120)
    spine0 = read_switch(state["switches"]["spine0"])
    try:
        assert route_ports(spine0)[host_ip(graph, "h3")] == {port_between(graph, "spine0", "leaf1")}
    finally:
        spine0.close()
    with pytest.raises(TestbedError, match="does not exist"):
        program_fabric(str(tmp_path / "missing.json"), timeout=60)
    with pytest.raises(TestbedError, match="routing"):
        FabricController(state_file, routing="chaos")


# -- Mininet (fabrics started by the project's pytest plugin) -----------------------------------
def test_controller_on_mininet_fabric_reroutes_around_failed_spine_link(fabric_factory):
    fabric = fabric_factory("clos", leaves=2, spines=2, hosts_per_leaf=2, program="l3_ecmp", controller="osken",
                            detection_delay_ms=0)
    graph = fabric.topo.graph()
    app = fabric.controller.controller  # the os-ken app's launcher (FabricController)
    assert fabric.unreachable_pairs() == []

    fabric.link_down("leaf0", "spine0")  # the fabric tells the app over its REST API
    status = app.client.wait_for(lambda s: s["routes_version"] >= 2, timeout=30)
    reaction = status["reactions"][-1]
    print(f"controller reaction to leaf0-spine0 down: {reaction['reaction_s'] * 1000:.1f} ms "
          f"({reaction['entries_written']} entries)")
    assert reaction["link"] == ["leaf0", "spine0"] and reaction["source"] == "rest"
    assert 0 < reaction["reaction_s"] < 10

    dead_ports = {"leaf0": port_between(graph, "leaf0", "spine0"),
                  "spine0": port_between(graph, "spine0", "leaf0")}
    for name, dead in dead_ports.items():
        assert all(dead not in ports for ports in route_ports(fabric.client(name)).values()), name
    assert fabric.unreachable_pairs() == []
    assert "reacted to link leaf0-spine0 down" in app.log_text()


def test_port_monitor_detects_a_failed_link_without_notice(fabric_factory):
    fabric = fabric_factory("clos", leaves=2, spines=2, hosts_per_leaf=2, program="l3_ecmp", controller="osken",
                            controller_options={"port_poll_ms": 20})
    app = fabric.controller.controller
    assert fabric.ping("h1", "h3")
    taken_down = time.time()
    fabric.link_down("leaf1", "spine1", notify=False)  # the app must notice by itself
    status = app.client.wait_for(lambda s: s["routes_version"] >= 2, timeout=30)
    reaction = status["reactions"][-1]
    assert reaction["source"] == "port-monitor" and reaction["link"] == ["leaf1", "spine1"]
    detected = reaction["noticed_at"] - taken_down
    print(f"port monitor: detected {detected * 1000:.1f} ms after the link went down, "
          f"routes written {reaction['reaction_s'] * 1000:.1f} ms later")
    assert 0 <= detected < 5
    assert fabric.unreachable_pairs([("h1", "h3"), ("h3", "h1"), ("h2", "h4")]) == []
    fabric.link_up("leaf1", "spine1", notify=False)
    status = app.client.wait_for(lambda s: s["routes_version"] >= 3, timeout=30)
    assert status["reactions"][-1]["status"] == "up" and status["failed_links"] == []


def test_te_pinned_flow_takes_its_path_on_mininet(fabric_factory):
    fabric = fabric_factory("clos", leaves=2, spines=2, hosts_per_leaf=2, program=str(TE_PROGRAM),
                            controller="osken", controller_options={"routing": "te"})
    graph = fabric.topo.graph()
    app = fabric.controller.controller
    uplink = {spine: port_between(graph, "leaf0", spine) for spine in ("spine0", "spine1")}

    def uplink_packets():
        cells = settled(lambda: fabric.read_counter("leaf0", "MyEgress.egress_port_counter"))
        return {spine: cells[port][0] for spine, port in uplink.items()}

    # alone, the flow takes the first path (spine0); next to a bigger one, spine1
    for flows, expected in (([{"name": "a", "src": "h1", "dst": "h3", "rate": 10}], "spine0"),
                            ([{"name": "big", "src": "h2", "dst": "h4", "rate": 60},
                              {"name": "a", "src": "h1", "dst": "h3", "rate": 10}], "spine1")):
        version = app.client.status()["te"]["version"]
        app.client.announce_flows(flows)
        status = app.client.wait_for(lambda s: s["te"]["version"] > version, timeout=20)
        assert expected in status["te"]["paths"]["a"]
        assert fabric.ping("h1", "h3")
        before = uplink_packets()
        fabric["h1"].cmd(f"ping -c10 -i0.05 -W1 {fabric['h3'].IP()}")  # 10 requests leave leaf0 on the pinned uplink
        after = uplink_packets()
        other = "spine1" if expected == "spine0" else "spine0"
        assert after[expected] - before[expected] >= 10, (before, after)
        assert after[other] == before[other], (before, after)
