"""Every topology kind builds in Mininet (real namespaces and veths) and tears down cleanly."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from testbed.emulation.network import FabricNetwork
from testbed.emulation.state import read_state
from testbed.fabrics import Fabric
from testbed.errors import EmulationError, ParameterError
from testbed.topologies.registry import make_topology

pytestmark = pytest.mark.mininet

SMALL_FABRICS = [
    ("clos", {"leaves": 2, "spines": 2, "hosts_per_leaf": 2}),
    ("clos3", {"pods": 2, "leaves_per_pod": 2, "spines_per_pod": 2, "cores": 2, "hosts_per_leaf": 1}),
    ("fattree", {"k": 4}),
    ("abfattree", {"k": 4}),
    ("dsf", {}),
]


@pytest.mark.parametrize("kind,params", SMALL_FABRICS, ids=[kind for kind, _ in SMALL_FABRICS])
def test_fabric_builds_with_topology_ports_and_leaves_nothing(kind, params, tmp_path, no_leftovers):
    topo = make_topology(kind, **params)
    graph = topo.graph()
    state_file = str(tmp_path / "net.json")
    with Fabric(topo, state_file=state_file) as fabric:  # no program: Linux bridges
        assert len(fabric.hosts) == sum(1 for _, d in graph.nodes(data=True) if d["role"] == "host")
        assert len(fabric.switches) == graph.number_of_nodes() - len(fabric.hosts)
        # every topology link exists with the topology's port numbers on both ends
        for _, _, link in graph.edges(data=True):
            for node, port in ((link["a"], link["a_port"]), (link["b"], link["b_port"])):
                intf = fabric.net.get(node).intfs[port]
                assert intf.name == f"{node}-eth{port}"
                assert intf.link is not None
        state = read_state(state_file)
        assert state["kind"] == kind and set(state["hosts"]) == {h.name for h in fabric.hosts}
        for host in fabric.hosts:
            expected = graph.nodes[host.name]
            assert host.IP() == expected["ip"].split("/")[0]
            assert host.MAC() == expected["mac"]
    assert not os.path.exists(state_file)


def test_unknown_switch_kind_is_refused():
    with pytest.raises(ParameterError, match="switch"):
        FabricNetwork(make_topology("clos", leaves=1, spines=1, hosts_per_leaf=1), switch="ovs")


def test_read_state_without_network_says_how_to_start_one(tmp_path):
    with pytest.raises(EmulationError, match="testbed net up"):
        read_state(str(tmp_path / "missing.json"))


def test_net_up_torn_down_by_sigint(tmp_path, no_leftovers):
    state_file = tmp_path / "net.json"
    process = subprocess.Popen(
        [sys.executable, "-m", "testbed.cli", "net", "up", "clos", "leaves=2", "spines=2", "hosts_per_leaf=1",
         "--no-cli", "--state-file", str(state_file)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 60
        while not state_file.exists() and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.1)
        assert state_file.exists(), process.communicate(timeout=5)[0] if process.poll() is not None else "timeout"
        assert json.loads(state_file.read_text())["pid"] == process.pid
        process.send_signal(signal.SIGINT)
        output, _ = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, output
    assert "tearing the network down" in output
    assert not state_file.exists()


def test_with_on_a_fabric_factory_fabric_returns_it_and_stops_it(fabric_factory):
    fabric = fabric_factory("clos", leaves=1, spines=1, hosts_per_leaf=2)  # already started
    with fabric as entered:
        assert entered is fabric
        assert [host.name for host in fabric.hosts] == ["h1", "h2"]
        assert "h1-eth0" in fabric.hosts[0].cmd("ip -o link")
    assert fabric.network is None  # the with block stopped it; the factory's stop is then a no-op
