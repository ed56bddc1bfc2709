"""End to end on Mininet: P4 switches programmed only over P4Runtime forward real packets.

Runs on the embedded target always, and on BMv2 when ``simple_switch_grpc``
and ``p4c`` are installed (skipped with the reason otherwise).  Fabrics are
started by the project's pytest plugin (``fabric_factory``, testbed/pytest_plugin.py).
"""
import os
import signal
import sys
import textwrap
import time

import pytest

from testbed.errors import EmulationError
from testbed.pytest_plugin import BOTH_TARGETS
from testbed.testing import settled, wait_until

pytestmark = pytest.mark.mininet

SEND_UDP_FLOWS = textwrap.dedent("""
    import sys
    from scapy.all import Ether, IP, UDP, Raw, sendp
    src_mac, dst_mac, src_ip, dst_ip, intf, count = sys.argv[1:7]
    frames = [Ether(src=src_mac, dst=dst_mac) / IP(src=src_ip, dst=dst_ip) /
              UDP(sport=10000 + i, dport=4791) / Raw(b"x" * 32) for i in range(int(count))]
    sendp(frames, iface=intf, verbose=False)
""")


def send_udp_flows(src, dst, count):
    """Send ``count`` one-packet UDP flows (distinct source ports) from host ``src`` to ``dst``."""
    script = SEND_UDP_FLOWS.replace("'", "'\"'\"'")
    output = src.cmd(f"{sys.executable} -c '{script}' {src.MAC()} {dst.MAC()} {src.IP()} {dst.IP()} "
                     f"{src.defaultIntf().name} {count}")
    assert "Traceback" not in output, output


def uplink_ports(graph, leaf):
    """Ports of ``leaf`` that lead to spines, by spine name."""
    ports = {}
    for _, neighbor, data in graph.edges(leaf, data=True):
        if graph.nodes[neighbor]["role"] != "host":
            ports[neighbor] = data["a_port"] if data["a"] == leaf else data["b_port"]
    return ports


@pytest.mark.parametrize("target", BOTH_TARGETS)
def test_leaf_spine_every_pair_pings(fabric_factory, target):
    fabric = fabric_factory("clos", leaves=2, spines=2, hosts_per_leaf=2, program="l3_ecmp", target=target)
    assert fabric.net.pingAll(timeout=2) == 0


@pytest.mark.slow
@pytest.mark.parametrize("target", BOTH_TARGETS)
def test_fattree_k4_every_pair_pings(fabric_factory, target):
    fabric = fabric_factory("fattree", k=4, program="l3_ecmp", target=target)
    assert fabric.net.pingAll(timeout=3) == 0


@pytest.mark.parametrize("target", BOTH_TARGETS)
def test_many_flows_spread_over_every_spine_and_down_link_carries_nothing(fabric_factory, target):
    # controller "static" with no detection delay: it reroutes as soon as it is told of the failure
    fabric = fabric_factory("clos", leaves=2, spines=4, hosts_per_leaf=1, program="l3_ecmp", target=target,
                            controller="static", detection_delay_ms=0)
    graph = fabric.topo.graph()
    src, dst = fabric.hosts[0], fabric.hosts[1]
    leaf = next(n for _, n in graph.edges(src.name))
    uplinks = uplink_ports(graph, leaf)
    assert len(uplinks) == 4

    def uplink_counts():
        # read once the switch has forwarded everything (BMv2 may lag the sender)
        cells = settled(lambda: fabric.read_counter(leaf, "MyEgress.egress_port_counter"))
        return {spine: cells[port][0] for spine, port in uplinks.items()}

    before = uplink_counts()
    send_udp_flows(src, dst, 200)
    spread = {spine: count - before[spine] for spine, count in uplink_counts().items()}
    assert sum(spread.values()) == 200
    assert all(count > 0 for count in spread.values()), spread

    # take one spine link down, let the controller route around it: nothing more crosses it
    down_spine = sorted(uplinks)[0]
    fabric.link_down(leaf, down_spine)
    reactions = fabric.controller.reactions
    wait_until(lambda: reactions and reactions[-1]["reacted_at_s"] is not None, what="the controller's reroute")
    assert reactions[-1]["error"] is None, reactions
    before = uplink_counts()
    spine_in_before = fabric.read_counter(down_spine, "MyIngress.ingress_port_counter")
    send_udp_flows(src, dst, 100)
    after = uplink_counts()
    assert after[down_spine] == before[down_spine]
    assert sum(after[s] - before[s] for s in uplinks) == 100
    assert fabric.read_counter(down_spine, "MyIngress.ingress_port_counter") == spine_in_before
    assert fabric.ping(src.name, dst.name, timeout_s=2)


@pytest.mark.parametrize("target", BOTH_TARGETS)
def test_packet_out_and_packet_in_through_the_cpu_port(fabric_factory, target):
    from scapy.all import Ether, Raw

    fabric = fabric_factory("clos", leaves=1, spines=1, hosts_per_leaf=2, program="l3_ecmp", target=target)
    graph = fabric.topo.graph()
    host = fabric.hosts[0]
    leaf, port = next((n, d["a_port"] if d["a"] == n else d["b_port"]) for _, n, d in graph.edges(host.name, data=True))
    client = fabric.controller.client(leaf)
    # PacketIn: a non-IPv4 frame from the host goes to the controller with its ingress port
    frame = bytes(Ether(src=host.MAC(), dst="ff:ff:ff:ff:ff:ff", type=0x88B5) / Raw(b"to-the-controller"))
    host.cmd(f"{sys.executable} -c 'import socket,sys; s=socket.socket(socket.AF_PACKET, socket.SOCK_RAW); "
             f"s.bind((sys.argv[1], 0)); s.send(bytes.fromhex(sys.argv[2]))' {host.defaultIntf().name} {frame.hex()}")
    packet_in = client.get_packet_in(timeout=5)
    assert packet_in is not None
    assert packet_in.payload == frame
    assert packet_in.metadata["ingress_port"] == port
    # PacketOut: the controller sends a frame out of the host's port; the host receives it
    capture = host.popen(["tcpdump", "-i", host.defaultIntf().name, "-c", "1", "-w", "-", "-U", "ether proto 0x88b6"],
                         stdout=-1, stderr=-1)
    try:
        time.sleep(1.0)  # tcpdump attaches its filter
        payload = bytes(Ether(src="02:00:00:00:00:01", dst=host.MAC(), type=0x88B6) / Raw(b"from-the-controller"))
        client.packet_out(payload, egress_port=port)
        out, _ = capture.communicate(timeout=10)
    finally:
        if capture.poll() is None:
            capture.kill()
            capture.wait()
    assert b"from-the-controller" in out


@pytest.mark.parametrize("target", BOTH_TARGETS)
def test_crashed_switch_is_reported_and_teardown_is_clean(fabric_factory, target):
    fabric = fabric_factory("clos", leaves=2, spines=1, hosts_per_leaf=1, program="l3_ecmp", target=target)
    victim = fabric.switches[0]
    os.kill(victim.process.pid, signal.SIGKILL)
    victim.process.wait()
    with pytest.raises(EmulationError, match=victim.name):
        fabric.check_switches()
