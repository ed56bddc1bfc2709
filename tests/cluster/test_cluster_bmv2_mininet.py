"""BMv2 over two servers (this machine and a simulated one): a k=4 FatTree with BMv2 on both.

The checks of the embedded target's two-server test: every pair reachable, ECMP spreading
(counters read over P4Runtime, through the ssh forward of the remote switch's socket), recovery
after a failure of a link between the servers, which is cut as BMv2's links are on one server:
the switch ports lose their carrier and stay up; a register read over Thrift on the remote
switch's server; nothing left on either server, also after the run is killed with SIGKILL and
``testbed cleanup --servers`` has run.
"""
import json
import os

import pytest

from testbed.emulation.cleanup import REMOTE_DIR_PREFIX, server_marks
from testbed.pytest_plugin import SIMULATED_SERVER
from testbed.testing import assert_all_pairs_reachable, assert_recovers_within

from test_cluster_mininet import (CROSSING, REMOTE_EDGE, assert_reachable_and_spread_from_the_remote_edge,
                                  kill_and_clean, net_up_as_another_run)

pytestmark = [pytest.mark.mininet, pytest.mark.cluster, pytest.mark.bmv2]


def _link_flags(switch, interface):
    """``(flags, carrier)`` of a port in a switch's namespace, read through the switch's shell."""
    shown = switch.cmd(f"ip -o link show dev {interface}")
    flags = shown.split("<", 1)[1].split(">", 1)[0].split(",")
    return flags, "NO-CARRIER" not in flags


def test_bmv2_fattree_over_two_servers_reaches_spreads_and_recovers(simulated_server, fabric_factory):
    fabric = fabric_factory("fattree", k=4, program="ecmp", target="bmv2", controller="static",
                            detection_delay_ms=50, servers=[SIMULATED_SERVER])
    assert fabric.target == "bmv2"
    remote, local = fabric.switch(REMOTE_EDGE), fabric.switch("e0_0")
    assert remote.isRemote and remote.cluster_server.name == SIMULATED_SERVER and not local.isRemote
    # P4Runtime on a Unix socket in the run folder there, reached through a local socket's forward
    assert remote.serve_address() == f"unix:{remote.server_dir}/p4rt"
    assert remote.grpc_address.startswith("unix:") and remote.grpc_address != remote.serve_address()

    assert_reachable_and_spread_from_the_remote_edge(fabric)

    # registers over Thrift, which listens only in the switch's namespace: simple_switch_CLI there
    cells = fabric.read_register(REMOTE_EDGE, "port_qdepth")
    assert len(cells) == len(fabric.read_register("e0_0", "port_qdepth")) and all(cell >= 0 for cell in cells)
    assert fabric.read_register(REMOTE_EDGE, "port_qdepth", 3) == cells[3]
    with pytest.raises(Exception, match="no_such_register"):
        fabric.read_register(REMOTE_EDGE, "no_such_register")

    core = fabric.switch(CROSSING[1])
    port = next(intf.name for intf in core.intfList() if intf.link and CROSSING[0] in
                (intf.link.intf1.node.name, intf.link.intf2.node.name))
    assert _link_flags(core, port) == (_link_flags(core, port)[0], True)
    fail = (0.5, lambda: fabric.link_down(*CROSSING))
    report = fabric.stream([("h1", "h16"), ("h2", "h15")], duration=2.5, qps=8, rate_mbps=4, events=[fail])
    assert_recovers_within(report, 2.0)
    flags, carrier = _link_flags(core, port)
    assert "UP" in flags and not carrier, flags  # cut as a cable: no carrier, never set down
    assert_all_pairs_reachable(fabric)


def test_a_remote_bmv2s_packet_log_and_pcaps_come_back_at_stop(simulated_server, fabric_factory, tmp_path):
    logs = tmp_path / "logs"
    fabric = fabric_factory("clos", leaves=2, spines=1, hosts_per_leaf=1, program="ecmp", target="bmv2",
                            controller="static", servers=[SIMULATED_SERVER], placement={"leaf1": SIMULATED_SERVER},
                            packet_log=True, pcap=True, log_dir=str(logs))
    remote = fabric.switch("leaf1")
    assert remote.isRemote and remote.output_dir() == remote.server_dir
    assert_all_pairs_reachable(fabric)
    fabric.stop()
    packet_log = (logs / "leaf1.bmv2.txt").read_text()  # BMv2 adds .txt
    assert "Processing packet received on port" in packet_log
    pcaps = sorted(path.name for path in logs.glob("leaf1-eth*.pcap"))
    assert pcaps and all((logs / name).stat().st_size > 24 for name in pcaps), pcaps  # more than the header
    assert simulated_server.run(f"test -e {remote.server_dir}").returncode == 1  # removed there


def test_killed_bmv2_run_over_two_servers_is_cleaned_on_both(simulated_server, tmp_path):
    state = tmp_path / "net.json"
    run = net_up_as_another_run(["clos", "leaves=2", "spines=2", "hosts_per_leaf=1", "--program", "ecmp",
                                 "--target", "bmv2", "--placement", f"leaf1={SIMULATED_SERVER}"], state)
    try:
        switch = json.loads(state.read_text())["switches"]["leaf1"]
        assert switch["server"] == SIMULATED_SERVER and switch["target"] == "bmv2"
        assert os.path.basename(switch["server_dir"]).startswith(f"{REMOTE_DIR_PREFIX}{run.pid}-")
        # on the server (its /tmp is its own, as a real server's), not here
        assert simulated_server.run(f"test -S {switch['server_dir']}/p4rt").returncode == 0
        assert not os.path.exists(switch["server_dir"])
        assert server_marks(SIMULATED_SERVER)[run.pid]["processes"] > 0
    finally:
        kill_and_clean(run)  # its run folder there too
