"""A k=4 FatTree over two servers (this machine and a simulated one) with the embedded target.

The same checks as examples/ on one server: every pair reachable, ECMP spreading (read over
P4Runtime from a switch on the other server), recovery after a failure of a link between
the servers; a remote switch's port counters from its control socket on its server; a capture
and a collective on remote hosts; nothing left on either server, also after the run is killed
with SIGKILL and ``testbed cleanup --servers`` has run.
"""
import json
import os
import signal
import subprocess
import sys
import time

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from testbed.emulation.cleanup import REMOTE_DIR_PREFIX, REMOTE_PID_PREFIX, leftovers, server_marks
from testbed.emulation.cluster.servers import resolve
from testbed.pytest_plugin import SIMULATED_SERVER
from testbed.testing import assert_all_pairs_reachable, assert_recovers_within, settled

pytestmark = [pytest.mark.mininet, pytest.mark.cluster]

REMOTE_EDGE, REMOTE_UPLINKS = "e3_1", (3, 4)  # h16's edge switch, in pod 3: on the simulated server
CROSSING = ("a0_1", "c2")  # pod 0 (here) to a core on the simulated server: a VXLAN link


def assert_reachable_and_spread_from_the_remote_edge(fabric):
    """Every pair reachable; 200 flows from h16 to h1 spread over the remote edge's uplinks (its egress counters
    read over P4Runtime from the other server).  Returns the hosts ``(h16, h1)``."""
    assert_all_pairs_reachable(fabric)

    def uplinks():
        cells = settled(lambda: fabric.read_counter(REMOTE_EDGE, "MyEgress.egress_port_counter"))
        return [cells[port][0] for port in REMOTE_UPLINKS]
    src, dst = fabric["h16"], fabric["h1"]
    before = uplinks()
    fabric.send("h16", [Ether(src=src.MAC(), dst=dst.MAC()) / IP(src=src.IP(), dst=dst.IP())
                        / UDP(sport=10000 + i, dport=4791) for i in range(200)])
    spread = [after - was for after, was in zip(uplinks(), before)]
    assert sum(spread) == 200 and min(spread) >= 50, spread
    return src, dst


# the plugin's marker as a user writes it; the simulated server comes up first (fixture order)
@pytest.mark.fabric("fattree", k=4, program="ecmp", controller="static", detection_delay_ms=50,
                    servers=[SIMULATED_SERVER])
def test_fattree_over_two_servers_reaches_spreads_and_recovers(simulated_server, fabric):
    cluster = fabric.describe()["cluster"]
    assert [server["name"] for server in cluster["servers"]] == ["localhost", SIMULATED_SERVER]
    assert {cluster["placement"][node] for node in ("e0_0", "a1_1", "h1")} == {"localhost"}
    assert {cluster["placement"][node] for node in ("e3_1", "a2_0", "h16")} == {SIMULATED_SERVER}
    assert len(cluster["crossing_links"]) == 8 and list(CROSSING) in cluster["crossing_links"]
    assert fabric.switch(REMOTE_EDGE).grpc_address.startswith(simulated_server.address + ":")

    src, dst = assert_reachable_and_spread_from_the_remote_edge(fabric)

    # its control socket is in the simulated server's files: asked there, through the server's relay
    remote = fabric.switch(REMOTE_EDGE)
    assert remote.control_via is not None and fabric.switch("e0_0").control_via is None
    status = remote.port_status()
    assert set(REMOTE_UPLINKS) <= set(status) and all("tx_errors" in entry for entry in status.values())

    # no file crosses servers (the simulated server's /tmp is its own): a capture on a remote host comes
    # back on tcpdump's stdout, a collective's agents take their plans on stdin and report on stdout
    with fabric.capture("h16", "udp dst port 4791") as capture:
        fabric.send("h1", [Ether(src=dst.MAC(), dst=src.MAC()) / IP(src=dst.IP(), dst=src.IP())
                           / UDP(sport=20000 + i, dport=4791) for i in range(5)])
        captured = capture.packets(wait_s=1.0)
    assert sorted(packet[UDP].sport for packet in captured) == [20000 + i for i in range(5)]
    report = fabric.collective("allreduce", ["h1", "h2", "h15", "h16"], 64 * 1024, qps=2, rate_mbps=50.0,
                               ack_timeout=5.0)
    assert report["complete"] and report["missing_bytes"] == 0, report["ranks_report"]

    fail = (0.5, lambda: fabric.link_down(*CROSSING))
    report = fabric.stream([("h1", "h16"), ("h2", "h15")], duration=2.5, qps=8, rate_mbps=4, events=[fail])
    assert_recovers_within(report, 2.0)
    assert_all_pairs_reachable(fabric)


def net_up_as_another_run(arguments, state):
    """``testbed net up ARGUMENTS --servers <simulated> --no-cli`` as a run of its own (not this test's owner),
    returned once it wrote its state file ``state``."""
    environment = {name: value for name, value in os.environ.items() if name != "TESTBED_OWNER"}
    run = subprocess.Popen([sys.executable, "-m", "testbed.cli", "net", "up", *arguments, "--servers", SIMULATED_SERVER,
                            "--no-cli", "--quiet", "--state-file", str(state)],
                           env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 180
    while not state.exists():
        if run.poll() is not None or time.monotonic() > deadline:
            run.kill()
            run.wait()
            pytest.fail(f"the fabric did not come up: {run.stderr.read().decode()[-2000:]}")
        time.sleep(0.2)
    return run


def kill_and_clean(run):
    """SIGKILL ``run`` (of :func:`net_up_as_another_run`), ``testbed cleanup --servers`` the simulated server, and
    check that nothing of the run is left here or there: processes, files, interfaces."""
    run.send_signal(signal.SIGKILL)
    run.wait()
    run.stderr.close()
    cleaned = subprocess.run([sys.executable, "-m", "testbed.cli", "cleanup", "--servers", SIMULATED_SERVER],
                             capture_output=True, text=True, timeout=120)
    assert cleaned.returncode == 0, cleaned.stderr
    assert f"{SIMULATED_SERVER}: run {run.pid}" in cleaned.stdout, cleaned.stdout
    assert leftovers(owner=run.pid)["processes"] == [] and leftovers(owner=run.pid)["temp_paths"] == []
    assert run.pid not in server_marks(SIMULATED_SERVER)
    server = resolve(SIMULATED_SERVER)
    assert server.run(f"ls -d /tmp/{REMOTE_DIR_PREFIX}{run.pid}-* /tmp/{REMOTE_PID_PREFIX}{run.pid}-*").stdout == ""
    remote_links = subprocess.run(["ip", "-n", SIMULATED_SERVER, "-o", "link", "show"], capture_output=True,
                                  text=True).stdout
    assert [line.split(":")[1].strip().split("@")[0] for line in remote_links.splitlines()] == ["lo", "eth0"]


def test_killed_run_over_two_servers_is_cleaned_on_both(simulated_server, tmp_path):
    state = tmp_path / "net.json"
    run = net_up_as_another_run(["fattree", "k=4", "--program", "ecmp"], state)
    try:
        switches = json.loads(state.read_text())["switches"]
        assert switches[REMOTE_EDGE]["server"] == SIMULATED_SERVER
        assert server_marks(SIMULATED_SERVER)[run.pid]["processes"] > 0  # one process table: visible here too
    finally:
        kill_and_clean(run)
    assert not [name for name in leftovers()["interfaces"] if name.split("-eth")[0] in switches]
