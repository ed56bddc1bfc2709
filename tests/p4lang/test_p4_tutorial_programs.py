"""Tutorial-style P4 programs (tests/p4lang/programs/, written for this project after the P4 tutorials'
documented exercises) load on the embedded target and forward packets as documented.

Each test programs the tables through the switch state (as a controller would), sends frames
through ``Device.process`` (or the traffic manager for ECN) and checks the bytes that leave.
"""
import os
import struct

import pytest
from scapy.all import IP, TCP, UDP, Ether, Raw

from testbed.p4.loader import load_program
from testbed.p4.program import ActionCall, KeyMatch
from testbed.p4.state import SwitchState, TableEntry

from backend_helpers import backend_device

P4_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "programs")
CPU_PORT = 255
HOST_MAC = 0x080000000101


def _switch(name, **kwargs):
    program = load_program(os.path.join(P4_DIR, f"{name}.p4"))
    state = SwitchState(program.info)
    kwargs.setdefault("raise_errors", True)
    return program, state, backend_device(program, state, **kwargs)


def _ip(text):
    return int.from_bytes(bytes(int(part) for part in text.split(".")), "big")


def _lpm(state, table, prefix, length, action, *args):
    state.tables[table].insert(TableEntry([KeyMatch("lpm", _ip(prefix), prefix_len=length)],
                                          ActionCall(action, tuple(args))))


def _checksum_ok(frame):
    packet = Ether(frame)
    checksum = packet[IP].chksum
    del packet[IP].chksum
    return Ether(bytes(packet))[IP].chksum == checksum


def test_every_tutorial_program_loads():
    names = sorted(f[:-3] for f in os.listdir(P4_DIR) if f.endswith(".p4") and f != "common.p4")
    assert len(names) == 12
    for name in names:
        assert load_program(os.path.join(P4_DIR, f"{name}.p4")).compiled is not None


def test_basic_ipv4_forwarding():
    _, state, device = _switch("basic")
    _lpm(state, "MyIngress.ipv4_lpm", "10.0.2.0", 24, "MyIngress.ipv4_forward", HOST_MAC, 2)
    packet = Ether(src="00:00:00:00:00:01", dst="00:00:00:00:00:aa") / IP(src="10.0.1.1", dst="10.0.2.2", ttl=64) / \
        UDP(sport=1, dport=2) / Raw(b"payload")
    [(port, frame)] = device.process(1, bytes(packet))
    out = Ether(frame)
    assert port == 2 and out.dst == "08:00:00:00:01:01" and out.src == "00:00:00:00:00:aa"
    assert out[IP].ttl == 63 and _checksum_ok(frame) and out[Raw].load == b"payload"
    assert device.process(1, bytes(Ether() / IP(dst="10.0.3.1"))) == []  # default action: drop


def test_basic_tunnel_forwards_by_tunnel_id_and_plain_ipv4_by_prefix():
    _, state, device = _switch("basic_tunnel")
    state.tables["MyIngress.myTunnel_exact"].insert(
        TableEntry([KeyMatch("exact", 7)], ActionCall("MyIngress.myTunnel_forward", (3,))))
    _lpm(state, "MyIngress.ipv4_lpm", "10.0.2.0", 24, "MyIngress.ipv4_forward", HOST_MAC, 2)
    inner = bytes(IP(src="10.0.1.1", dst="10.0.2.2", ttl=10) / UDP())
    tunnelled = bytes(Ether(type=0x1212)) + struct.pack("!HH", 0x0800, 7) + inner
    [(port, frame)] = device.process(1, tunnelled)
    assert port == 3 and frame == tunnelled  # the tunnel header is kept, the IP packet untouched
    [(port, frame)] = device.process(1, bytes(Ether() / IP(src="10.0.1.1", dst="10.0.2.2", ttl=10) / UDP()))
    assert port == 2 and Ether(frame)[IP].ttl == 9
    unknown = bytes(Ether(type=0x1212)) + struct.pack("!HH", 0x0800, 8) + inner
    assert device.process(1, unknown) == []


@pytest.mark.parametrize("op, a, b, expected", [
    ("+", 5, 7, 12), ("-", 5, 7, (5 - 7) & 0xFFFFFFFF), ("&", 0xF0F0, 0xFF00, 0xF000),
    ("|", 0xF0F0, 0x0F00, 0xFFF0), ("^", 0xFFFF, 0x0F0F, 0xF0F0),
])
def test_calculator(op, a, b, expected):
    _, _, device = _switch("calc")
    request = bytes(Ether(src="00:00:00:00:00:01", dst="00:00:00:00:00:02", type=0x1234)) + \
        struct.pack("!BBBBIII", 0x50, 0x34, 0x01, ord(op), a, b, 0)
    [(port, frame)] = device.process(4, request)
    assert port == 4  # sent back where it came from
    assert frame[:6] == bytes.fromhex("000000000001") and frame[6:12] == bytes.fromhex("000000000002")
    assert struct.unpack("!I", frame[26:30])[0] == expected


def test_calculator_drops_unknown_operators_and_other_frames():
    _, _, device = _switch("calc")
    bad_op = bytes(Ether(type=0x1234)) + struct.pack("!BBBBIII", 0x50, 0x34, 0x01, ord("*"), 2, 3, 0)
    bad_version = bytes(Ether(type=0x1234)) + struct.pack("!BBBBIII", 0x50, 0x34, 0x02, ord("+"), 2, 3, 0)
    assert device.process(1, bad_op) == [] and device.process(1, bad_version) == []


def test_ecn_marks_capable_packets_that_found_a_queue():
    now = [0]
    _, state, device = _switch("ecn", clock_ns=lambda: now[0])
    _lpm(state, "MyIngress.ipv4_lpm", "10.0.2.0", 24, "MyIngress.ipv4_forward", HOST_MAC, 2)
    device.set_queue(2, rate_pps=1000, depth_packets=64)
    capable = bytes(Ether() / IP(dst="10.0.2.2", tos=0x01) / UDP() / Raw(b"x" * 20))   # ECN 1 (ECT(1))
    not_capable = bytes(Ether() / IP(dst="10.0.2.2", tos=0x00) / UDP() / Raw(b"x" * 20))
    for _ in range(6):
        device.receive(1, capable)
    device.receive(1, not_capable)
    sent = []
    for step in range(8):
        now[0] = step * 1_000_000
        sent += device.transmit_ready()
    ecn = [Ether(frame)[IP].tos & 3 for _, frame in sent]
    assert len(ecn) == 7
    # the first packets find a short queue and keep ECT(1); once the queue has reached the threshold the
    # capable packets are marked CE (3), and a packet that is not ECN-capable is never marked
    assert ecn[0] == 1 and ecn[5] == 3 and ecn[6] == 0
    first_marked = ecn.index(3)
    assert all(value == 3 for value in ecn[first_marked:6]) and first_marked >= 3
    assert all(_checksum_ok(frame) for _, frame in sent)


def _tcp(src, dst, sport, dport, flags):
    return bytes(Ether() / IP(src=src, dst=dst) / TCP(sport=sport, dport=dport, flags=flags))


def test_firewall_lets_in_only_replies_to_flows_opened_from_inside():
    _, state, device = _switch("firewall")
    _lpm(state, "MyIngress.ipv4_lpm", "10.0.1.0", 24, "MyIngress.ipv4_forward", HOST_MAC, 1)   # inside
    _lpm(state, "MyIngress.ipv4_lpm", "10.0.3.0", 24, "MyIngress.ipv4_forward", HOST_MAC, 3)   # outside
    check = state.tables["MyIngress.check_ports"]
    check.insert(TableEntry([KeyMatch("exact", 1), KeyMatch("exact", 3)], ActionCall("MyIngress.set_direction", (0,))))
    check.insert(TableEntry([KeyMatch("exact", 3), KeyMatch("exact", 1)], ActionCall("MyIngress.set_direction", (1,))))
    reply = _tcp("10.0.3.3", "10.0.1.1", 80, 5000, "SA")
    assert device.process(3, reply) == []  # nobody inside asked
    [(port, _)] = device.process(1, _tcp("10.0.1.1", "10.0.3.3", 5000, 80, "S"))
    assert port == 3
    [(port, _)] = device.process(3, reply)
    assert port == 1  # the reply of the flow opened from inside
    assert device.process(3, _tcp("10.0.3.3", "10.0.1.1", 81, 5000, "SA")) == []  # another flow
    registers = state.registers["MyIngress.bloom_filter_1"].values
    assert sum(registers) == 1


def test_link_monitor_probe_collects_bytes_sent_per_port():
    now = [5_000_000]
    _, state, device = _switch("link_monitor", clock_ns=lambda: now[0])
    _lpm(state, "MyIngress.ipv4_lpm", "10.0.2.0", 24, "MyIngress.ipv4_forward", HOST_MAC, 2)
    state.tables["MyEgress.swid"].set_default(ActionCall("MyEgress.set_swid", (5,)))
    data = bytes(Ether() / IP(dst="10.0.2.2") / UDP() / Raw(b"y" * 58))
    device.process(1, data)
    device.process(1, data)
    # probe: hop_cnt 0, no records yet, forwarding instructions: port 2 then port 7
    probe = bytes(Ether(type=0x812)) + bytes([0]) + bytes([2, 7])
    [(port, frame)] = device.process(1, probe)
    assert port == 2
    assert frame[14] == 1  # hop count
    record = frame[15:15 + 18]
    bos_swid, out_port, byte_cnt = record[0], record[1], struct.unpack("!I", record[2:6])[0]
    assert bos_swid == (1 << 7) | 5 and out_port == 2
    assert byte_cnt == 2 * len(data) + len(probe)
    assert int.from_bytes(record[6:12], "big") == 0  # no earlier probe on this port
    assert frame[33:] == bytes([2, 7])  # the forwarding instructions follow the records
    now[0] = 9_000_000
    [(_, frame)] = device.process(1, probe)
    second = frame[15:33]
    assert struct.unpack("!I", second[2:6])[0] == len(probe)  # reset by the first probe
    assert int.from_bytes(second[6:12], "big") == int.from_bytes(record[12:18], "big")


def test_load_balance_spreads_flows_and_keeps_each_flow_on_one_path():
    _, state, device = _switch("load_balance")
    _lpm(state, "MyIngress.ecmp_group", "10.0.0.1", 32, "MyIngress.set_ecmp_select", 0, 2)
    nhop = state.tables["MyIngress.ecmp_nhop"]
    nhop.insert(TableEntry([KeyMatch("exact", 0)], ActionCall("MyIngress.set_nhop", (0x0A, _ip("10.0.2.2"), 2))))
    nhop.insert(TableEntry([KeyMatch("exact", 1)], ActionCall("MyIngress.set_nhop", (0x0B, _ip("10.0.3.3"), 3))))
    frame_out = state.tables["MyEgress.send_frame"]
    for port in (2, 3):
        frame_out.insert(TableEntry([KeyMatch("exact", port)], ActionCall("MyEgress.rewrite_mac", (0x100 + port,))))
    seen = {}
    for sport in range(1000, 1040):
        packet = bytes(Ether() / IP(src="10.0.1.1", dst="10.0.0.1") / TCP(sport=sport, dport=80))
        [(port, frame)] = device.process(1, packet)
        out = Ether(frame)
        assert out[IP].dst == {2: "10.0.2.2", 3: "10.0.3.3"}[port] and int(out.src.replace(":", ""), 16) == 0x100 + port
        seen.setdefault(port, 0)
        seen[port] += 1
        assert device.process(1, packet)[0][0] == port  # the same flow takes the same path
    assert set(seen) == {2, 3}


def test_mri_appends_a_switch_trace_to_the_ip_option():
    _, state, device = _switch("mri")
    _lpm(state, "MyIngress.ipv4_lpm", "10.0.2.0", 24, "MyIngress.ipv4_forward", HOST_MAC, 2)
    state.tables["MyEgress.swtrace"].set_default(ActionCall("MyEgress.add_swtrace", (7,)))
    # IPv4 with an MRI option: type 31 (copy 0, class 2), length 4, count 1, one earlier trace (swid 9)
    option = bytes([0x5F, 12]) + struct.pack("!H", 1) + struct.pack("!II", 9, 0)
    ip = IP(src="10.0.1.1", dst="10.0.2.2", ihl=5 + len(option) // 4, options=[], proto=17, ttl=20)
    body = bytes(UDP(sport=1, dport=2) / Raw(b"mri"))
    header = bytearray(bytes(ip)[:20])
    packet_ip = bytes(header) + option
    ip_total = IP(packet_ip + body)
    ip_total.len = len(packet_ip) + len(body)
    del ip_total.chksum
    frame_in = bytes(Ether() / ip_total)
    [(port, frame)] = device.process(1, frame_in)
    out = Ether(frame)
    assert port == 2 and out[IP].ihl == 5 + 3 + 2 and out[IP].len == len(packet_ip) + len(body) + 8
    # as in the tutorial, the checksum covers the 20-byte base header (the fields the program lists)
    base = bytearray(frame[14:34])
    stated = int.from_bytes(base[10:12], "big")
    base[10:12] = b"\0\0"
    total = sum(struct.unpack("!10H", bytes(base)))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    assert stated == ~total & 0xFFFF
    options = frame[14 + 20:14 + 20 + 20]
    assert options[0] == 0x5F and options[1] == 20 and struct.unpack("!H", options[2:4])[0] == 2
    assert struct.unpack("!IIII", options[4:20]) == (7, 0, 9, 0)  # the new trace first
    assert frame[14 + 40:] == body


def test_multicast_replicates_broadcast_to_the_other_ports():
    _, state, device = _switch("multicast")
    state.multicast_groups.insert(1, [(1, 0), (2, 0), (3, 0), (4, 0)])
    state.tables["MyIngress.mac_lookup"].insert(
        TableEntry([KeyMatch("exact", 0x080000000404)], ActionCall("MyIngress.mac_forward", (4,))))
    broadcast = bytes(Ether(dst="ff:ff:ff:ff:ff:ff", src="08:00:00:00:02:02") / Raw(b"hello"))
    outputs = device.process(2, broadcast)
    assert sorted(port for port, _ in outputs) == [1, 3, 4] and all(frame == broadcast for _, frame in outputs)
    unicast = bytes(Ether(dst="08:00:00:00:04:04") / Raw(b"x"))
    assert device.process(2, unicast) == [(4, unicast)]


@pytest.mark.parametrize("layer, dscp", [(UDP(), 46), (TCP(), 18), (Raw(b"icmp-ish"), 0)])
def test_qos_marks_dscp_by_protocol(layer, dscp):
    _, state, device = _switch("qos")
    _lpm(state, "MyIngress.ipv4_lpm", "10.0.2.0", 24, "MyIngress.ipv4_forward", HOST_MAC, 2)
    ip = IP(dst="10.0.2.2", tos=0) if not isinstance(layer, Raw) else IP(dst="10.0.2.2", tos=0, proto=1)
    [(port, frame)] = device.process(1, bytes(Ether() / ip / layer))
    assert port == 2 and Ether(frame)[IP].tos >> 2 == dscp and _checksum_ok(frame)


def test_source_routing_follows_and_pops_the_hops():
    _, _, device = _switch("source_routing")
    hops = struct.pack("!HHH", 3, 5, (1 << 15) | 2)  # ports 3, 5, then 2 (bottom of stack)
    inner = bytes(IP(dst="10.0.2.2", ttl=9) / UDP())
    frame = bytes(Ether(type=0x1234)) + hops + inner
    [(port, frame)] = device.process(1, frame)
    assert port == 3 and frame[12:14] == b"\x12\x34" and frame[14:18] == hops[2:]
    assert IP(frame[18:]).ttl == 8  # every hop that parses the IPv4 header decrements the TTL
    [(port, frame)] = device.process(3, frame)
    assert port == 5 and frame[14:16] == hops[4:]
    [(port, frame)] = device.process(5, frame)
    assert port == 2 and frame[12:14] == b"\x08\x00" and Ether(frame)[IP].ttl == 6 and _checksum_ok(frame)
    assert device.process(1, bytes(Ether() / IP() / UDP())) == []  # no route: dropped


def test_flow_cache_packet_in_on_a_miss_packet_out_and_a_cached_flow():
    _, state, device = _switch("flowcache", cpu_port=CPU_PORT)
    packet = bytes(Ether(dst="00:00:00:00:00:aa") / IP(src="10.0.1.1", dst="10.0.2.2", ttl=30) / UDP())
    [(port, frame)] = device.process(4, packet)
    assert port == CPU_PORT and int.from_bytes(frame[:2], "big") >> 7 == 4 and frame[2:] == packet
    # the controller sends it out of port 2 and caches the flow
    [(port, frame)] = device.process(CPU_PORT, (2 << 7).to_bytes(2, "big") + packet)
    assert port == 2 and frame == packet
    state.tables["MyIngress.flow_cache"].insert(TableEntry(
        [KeyMatch("exact", 17), KeyMatch("exact", _ip("10.0.1.1")), KeyMatch("exact", _ip("10.0.2.2"))],
        ActionCall("MyIngress.cached_action", (2, HOST_MAC))))
    [(port, frame)] = device.process(4, packet)
    assert port == 2 and Ether(frame)[IP].ttl == 29 and Ether(frame).dst == "08:00:00:00:01:01"
