"""Bad input for fabrics over several servers is refused before anything starts, naming what is wrong."""
import pytest

from testbed.emulation.cluster.placement import place
from testbed.emulation.cluster.servers import Server, check_servers, resolve, resolve_all
from testbed.errors import EmulationError, ParameterError
from testbed.topologies.registry import make_topology


def test_an_unknown_server_is_refused_by_name():
    with pytest.raises(ParameterError, match="no-such-server.invalid.*unknown host"):
        resolve("no-such-server.invalid")
    with pytest.raises(ParameterError, match="tb-srv77.*no simulated server"):
        resolve("tb-srv77")
    with pytest.raises(ParameterError, match="each server once"):
        resolve_all(["localhost", "127.0.0.1"])


def test_a_placement_naming_a_node_or_server_that_does_not_exist_is_refused():
    topo = make_topology("fattree", k=4)
    with pytest.raises(ParameterError, match="placement.*no node x9"):
        place(topo, ["localhost", "b"], {"x9": "b"})
    with pytest.raises(ParameterError, match="one of the servers: localhost, b"):
        place(topo, ["localhost", "b"], {"e0_0": "c"})


def test_pods_stay_whole_and_only_pod_to_core_links_cross():
    topo = make_topology("fattree", k=4)
    placement = place(topo, ["localhost", "b"])
    assert {placement[node] for node in ("e0_0", "e1_1", "a0_0", "a1_1", "h1", "h8")} == {"localhost"}
    assert {placement[node] for node in ("e2_0", "e3_1", "a2_0", "a3_1", "h9", "h16")} == {"b"}
    crossing = [(a, b) for a, b in topo.links() if placement[a] != placement[b]]
    assert len(crossing) == 8 and all(b.startswith("c") or a.startswith("c") for a, b in crossing)


def test_dsf_clusters_or_planes_stay_whole():
    topo = make_topology("dsf")  # one plane, two clusters: only FDSW-to-SDSW links cross
    placement = place(topo, ["localhost", "b"])
    graph = topo.graph()
    for node in topo.switches():
        cluster = graph.nodes[node].get("cluster")
        if cluster is not None:
            assert placement[node] == ("localhost", "b")[cluster], node
    crossing = [(a, b) for a, b in topo.links() if placement[a] != placement[b]]
    assert crossing and all({a[:4], b[:4]} == {"fdsw", "sdsw"} for a, b in crossing)
    assert sorted(placement[node] for node in topo.switches() if node.startswith("sdsw")) == ["b", "localhost"]

    two_planes = make_topology("dsf", planes=2)  # disjoint planes, one per server: nothing crosses
    placement = place(two_planes, ["localhost", "b"])
    assert not [link for link in two_planes.links() if placement[link[0]] != placement[link[1]]]
    assert {placement[node] for node in two_planes.switches()} == {"localhost", "b"}
    # three servers: planes are fewer, so a plane's clusters are split over them
    placement = place(two_planes, ["localhost", "b", "c"])
    assert {placement[node] for node in two_planes.switches()} == {"localhost", "b", "c"}


def test_an_unreachable_server_is_named_before_anything_starts():
    server = Server("gone", "198.18.250.2")  # nothing answers there (no such simulated server)
    with pytest.raises(EmulationError, match="server gone .*not reachable"):
        check_servers([Server("localhost", "127.0.0.1"), server], "embedded", "vxlan")


def test_run_and_compare_put_a_spec_on_servers_and_check_the_link_kind():
    from testbed.experiment.spec import SpecError, load_spec, on_servers

    spec = load_spec("experiments/elephants_lowentropy.yaml", check_machine=False)
    moved = on_servers(spec, "tb-srv1", "ssh")
    assert (moved.servers, moved.cross_link, moved.placement) == (["tb-srv1"], "ssh", {})
    assert moved.with_seed(5).servers == ["tb-srv1"]  # repeats keep the servers
    assert on_servers(spec, ["tb-srv1"]).cross_link == "vxlan"
    with pytest.raises(SpecError, match="cross_link"):
        on_servers(spec, "tb-srv1", "gre")
