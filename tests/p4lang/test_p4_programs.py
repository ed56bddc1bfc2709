"""The shipped P4 programs (p4src/*.p4) load and behave on the embedded target."""
import glob
import os
from collections import Counter

import pytest
from scapy.all import ARP, IP, TCP, UDP, Ether, Raw

from testbed.p4.loader import load_program
from testbed.p4.program import ActionCall, KeyMatch
from testbed.p4.state import SwitchState, TableEntry
from testbed.p4.v1model.device import Device
from testbed.p4src import P4SRC_DIR, program_path

PROGRAMS = sorted(glob.glob(os.path.join(P4SRC_DIR, "*.p4")))
CPU_PORT = 255


@pytest.mark.parametrize("path", PROGRAMS, ids=[os.path.basename(p) for p in PROGRAMS])
def test_every_shipped_program_loads(path):
    program = load_program(path)
    assert program.info.tables or program.info.registers
    assert program.compiled is not None
    Device(program, SwitchState(program.info))


def _mac(index):
    return 0x020000000000 + index


@pytest.fixture
def ecmp_switch():
    """l3_ecmp with 10.0.1.0/24 -> port 1 and 10.0.0.0/8 -> a group over ports 2..5."""
    program = load_program(program_path("l3_ecmp"))
    state = SwitchState(program.info)
    profile = state.action_profiles["MyIngress.ecmp_selector"]
    table = state.tables["MyIngress.ipv4_lpm"]
    for port in range(1, 6):
        profile.insert_member(port, ActionCall("MyIngress.set_nhop", (_mac(port), _mac(100), port)))
    profile.insert_group(1, [(port, 1) for port in range(2, 6)])
    table.insert(TableEntry([KeyMatch("lpm", 0x0A000100, prefix_len=24)], None, 1, None))
    table.insert(TableEntry([KeyMatch("lpm", 0x0A000000, prefix_len=8)], None, None, 1))
    return program, state, Device(program, state, cpu_port=CPU_PORT)


def test_l3_ecmp_forwards_by_longest_prefix_and_rewrites(ecmp_switch):
    program, state, device = ecmp_switch
    packet = Ether(src="00:00:00:00:00:09", dst="00:00:00:00:00:0a") / IP(src="10.9.9.9", dst="10.0.1.7", ttl=9) / \
        TCP(sport=1234, dport=80) / Raw(b"hello")
    [(port, frame)] = device.process(6, bytes(packet))
    assert port == 1
    received = Ether(frame)
    assert received.dst == "02:00:00:00:00:01" and received.src == "02:00:00:00:00:64"
    assert received[IP].ttl == 8 and received[Raw].load == b"hello"
    checksum = received[IP].chksum
    del received[IP].chksum
    assert Ether(bytes(received))[IP].chksum == checksum  # the checksum is correct on the wire
    assert state.counters["MyIngress.ingress_port_counter"].read(6)[0] == 1
    assert state.counters["MyEgress.egress_port_counter"].read(1)[0] == 1


def test_l3_ecmp_spreads_flows_over_every_group_member(ecmp_switch):
    _, state, device = ecmp_switch
    ports = Counter()
    for flow in range(400):
        packet = Ether() / IP(src="10.0.1.1", dst="10.2.0.1") / UDP(sport=10000 + flow, dport=4791) / Raw(b"x" * 12)
        [(port, _)] = device.process(1, bytes(packet))
        ports[port] += 1
    assert set(ports) == {2, 3, 4, 5}
    assert max(ports.values()) < 2 * min(ports.values())
    # the same flow always takes the same path
    packet = bytes(Ether() / IP(src="10.0.1.1", dst="10.2.0.1") / UDP(sport=10007, dport=4791))
    assert len({device.process(1, packet)[0][0] for _ in range(5)}) == 1
    counts = [state.counters["MyEgress.egress_port_counter"].read(p)[0] for p in range(2, 6)]
    assert sum(counts) == 405 and min(counts) > 0


def test_l3_ecmp_drops_misses_and_expiring_ttl(ecmp_switch):
    _, _, device = ecmp_switch
    assert device.process(1, bytes(Ether() / IP(dst="192.168.1.1") / UDP())) == []
    assert device.process(1, bytes(Ether() / IP(dst="10.0.1.1", ttl=1) / UDP())) == []


def test_l3_ecmp_packet_in_and_packet_out_through_the_cpu_port(ecmp_switch):
    _, _, device = ecmp_switch
    arp = bytes(Ether(dst="ff:ff:ff:ff:ff:ff") / ARP(pdst="10.0.1.1"))
    [(port, frame)] = device.process(3, arp)
    assert port == CPU_PORT
    ingress_port = int.from_bytes(frame[:2], "big") >> 7
    assert ingress_port == 3 and frame[2:] == arp
    packet_out = (4 << 7).to_bytes(2, "big") + arp
    [(port, frame)] = device.process(CPU_PORT, packet_out)
    assert port == 4 and frame == arp


def test_l3_ecmp_queued_mode_counts_queue_depth():
    program = load_program(program_path("l3_ecmp"))
    state = SwitchState(program.info)
    state.action_profiles["MyIngress.ecmp_selector"].insert_member(
        1, ActionCall("MyIngress.set_nhop", (_mac(1), _mac(100), 2)))
    state.tables["MyIngress.ipv4_lpm"].insert(TableEntry([KeyMatch("lpm", 0x0A000000, prefix_len=8)], None, 1, None))
    now = [0]
    device = Device(program, state, clock_ns=lambda: now[0])
    device.set_queue(2, rate_pps=1000, depth_packets=3)
    frame = bytes(Ether() / IP(dst="10.0.0.1") / UDP() / Raw(b"x" * 20))
    for _ in range(5):
        device.receive(1, frame)
    assert device.port_stats(2)["drops"] == 1  # 1 left at once, 3 queued, the fifth found the queue full
    sent = device.transmit_ready()
    assert len(sent) == 1
    assert device.next_departure_ns() == 1_000_000
    now[0] = 3_000_000
    sent += device.transmit_ready()
    assert [port for port, _ in sent] == [2, 2, 2, 2]
    assert device.port_stats(2)["tx_packets"] == 4
