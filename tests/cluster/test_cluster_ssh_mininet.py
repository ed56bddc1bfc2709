"""SSH-tunnel links between servers (``cross_link="ssh"``): a k=4 FatTree over this machine and a
simulated server whose 8 pod-to-core links crossing servers are ``ssh -w`` Ethernet tunnels.

Traffic crosses them both ways without loss; every tunnel has its own tap number (the cluster
edition names them all ``tap9``); Mininet's ``RemoteLink.status()`` answers for tunnel links and
for links without a tunnel process; when the fabric stops, every tunnel process ends on both
servers (the simulated server's fixture also checks that only its sshd runs there afterwards).
"""
import os
import re

import pytest

from testbed.pytest_plugin import SIMULATED_SERVER
from testbed.testing import assert_all_pairs_reachable, assert_no_loss, wait_until

pytestmark = [pytest.mark.mininet, pytest.mark.cluster]


def _pair(link):
    return frozenset((link.intf1.node.name, link.intf2.node.name))


def test_ssh_tunnel_links_carry_traffic_and_end_with_the_fabric(simulated_server, fabric_factory):
    fabric = fabric_factory("fattree", k=4, program="ecmp", controller="static", servers=[SIMULATED_SERVER],
                            cross_link="ssh")
    cluster = fabric.describe()["cluster"]
    assert cluster["link"] == "ssh" and len(cluster["crossing_links"]) == 8
    crossing = {frozenset(pair) for pair in cluster["crossing_links"]}
    tunnel_links = [link for link in fabric.net.links if _pair(link) in crossing]
    assert len(tunnel_links) == 8
    numbers = [re.search(r"-w (\d+):\1", " ".join(link.cmd)).group(1) for link in tunnel_links]
    assert len(set(numbers)) == 8 and "9" not in numbers, numbers
    assert all("Tunnel Running" in link.status() for link in tunnel_links)
    local_link = next(link for link in fabric.net.links if _pair(link) == {"e0_0", "a0_0"})
    remote_link = next(link for link in fabric.net.links if _pair(link) == {"e3_1", "a3_0"})
    for link in (local_link, remote_link):  # no tunnel process: Mininet's status must still answer
        assert link.tunnel is None and link.status() == "(OK OK) OK"

    assert_all_pairs_reachable(fabric)
    report = fabric.stream([("h16", "h1"), ("h1", "h16"), ("h9", "h5")], duration=2.0, qps=4, rate_mbps=8)
    assert report["sent_packets"] > 0
    assert_no_loss(report)

    processes = [link.tunnel.pid for link in tunnel_links]
    fabric.stop()
    wait_until(lambda: not any(os.path.exists(f"/proc/{pid}") for pid in processes), timeout_s=10,
               what="every ssh tunnel process ended")
