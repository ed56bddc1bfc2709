"""ECMP spreads many flows from one host over every uplink of its edge switch (P4 counters read over P4Runtime)."""
import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from testbed.testing import settled

UPLINK_PORTS = {"a0_0": 3, "a0_1": 4}  # e0_0's ports toward its aggregation switches (ports 1-2: hosts)


def uplink_packets(fabric):
    cells = settled(lambda: fabric.read_counter("e0_0", "MyEgress.egress_port_counter"))
    return {agg: cells[port][0] for agg, port in UPLINK_PORTS.items()}


def udp_flows(fabric, count):
    src, dst = fabric["h1"], fabric["h16"]
    return [Ether(src=src.MAC(), dst=dst.MAC()) / IP(src=src.IP(), dst=dst.IP()) / UDP(sport=10000 + i, dport=4791)
            for i in range(count)]


@pytest.mark.fabric("fattree", k=4, program="ecmp", controller="static", detection_delay_ms=0)
def test_ecmp_spreads_flows_over_every_uplink(fabric):
    before = uplink_packets(fabric)
    fabric.send("h1", udp_flows(fabric, 200))
    spread = {agg: count - before[agg] for agg, count in uplink_packets(fabric).items()}
    assert sum(spread.values()) == 200
    assert min(spread.values()) >= 50, spread  # 200 hashed flows over 2 uplinks: far from all on one
