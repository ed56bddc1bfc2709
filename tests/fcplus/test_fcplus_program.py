"""p4src/fcplus.p4 on the embedded target: hashed path choice, priority transitions, and PFC between two
switches (PAUSE frames made by one device honoured by the other) with an injected clock."""

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from testbed.p4.loader import load_program
from testbed.p4.program import ActionCall, KeyMatch
from testbed.p4.state import SwitchState, TableEntry
from testbed.p4.v1model.device import PFC_COUNTERS, Device
from testbed.p4.v1model.pfc import PfcConfig, parse_pause
from testbed.p4.v1model.pfc_scapy import PFCPause
from testbed.p4src import program_path

MS = 1_000_000
SRC, DST = "10.0.0.1", "10.0.2.5"


def _ip(text):
    a, b, c, d = (int(x) for x in text.split("."))
    return a << 24 | b << 16 | c << 8 | d


def _slash24(text):
    return KeyMatch("ternary", _ip(text) & 0xFFFFFF00, mask=0xFFFFFF00)


def switch(clock, paths=1, transition=None, host=None):
    """fcplus.p4 forwarding 10.0.0.0/24 -> 10.0.2.0/24 over ``paths`` ports (2, 3, ..), and ``host`` to port 9."""
    program = load_program(program_path("fcplus"))
    state = SwitchState(program.info)
    state.tables["MyIngress.host_route"].insert(TableEntry(
        [KeyMatch("exact", _ip(host or "10.0.3.3"))], ActionCall("MyIngress.to_host", (0x020000000002, 9)), None, None))
    state.tables["MyIngress.path_count"].insert(TableEntry(
        [_slash24(SRC), _slash24("10.0.2.0")], ActionCall("MyIngress.set_path_count", (paths,)), None, None,
        priority=1))
    for index in range(paths):
        state.tables["MyIngress.path_next"].insert(TableEntry(
            [_slash24(SRC), _slash24("10.0.2.0"), KeyMatch("exact", index)],
            ActionCall("MyIngress.set_port", (2 + index,)), None, None, priority=1))
    if transition:
        in_port, out_port, dscp, new = transition
        state.tables["MyIngress.priority_transition"].insert(TableEntry(
            [KeyMatch("exact", in_port), KeyMatch("exact", out_port), KeyMatch("exact", dscp)],
            ActionCall("MyIngress.set_priority", (new,)), None, None))
    return Device(program, state, clock_ns=clock, raise_errors=True), state


def packet(dst=DST, dscp=1, sport=1000, qp=0):
    bth = bytes([0x04, 0, 0xFF, 0xFF, 0]) + qp.to_bytes(3, "big") + bytes(4)
    return bytes(Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:99") /
                 IP(src=SRC, dst=dst, tos=dscp << 2, ttl=64) / UDP(sport=sport, dport=4791) / Raw(bth + b"x" * 64))


class Clock:
    def __init__(self):
        self.now = 1_000 * MS

    def __call__(self):
        return self.now


def test_pfc_counters_are_program_counters():
    program = load_program(program_path("fcplus"))
    names = {name.rsplit(".", 1)[-1] for name in SwitchState(program.info).counters}
    assert set(PFC_COUNTERS) <= names


def test_qps_spread_over_the_paths_and_each_keeps_one():
    clock = Clock()
    device, _ = switch(clock, paths=4)
    ports = {}
    for qp in range(64):
        out = {port for _ in range(3) for port, _frame in device.process(1, packet(qp=qp))}
        assert len(out) == 1                      # one QP, one path
        ports[qp] = out.pop()
    assert set(ports.values()) == {2, 3, 4, 5}   # 64 QPs use all 4 paths


def test_priority_moves_at_a_down_up_turn_only():
    clock = Clock()
    device, _ = switch(clock, transition=(1, 2, 1, 2))
    [(_, frame)] = device.process(1, packet(dscp=1))
    assert Ether(frame)[IP].tos >> 2 == 2
    [(_, frame)] = device.process(7, packet(dscp=1))   # another in-port: no turn
    assert Ether(frame)[IP].tos >> 2 == 1


def test_pause_from_downstream_holds_upstream_and_nothing_is_lost():
    """host -> A -> B -> host; B's host port drains 1 packet/ms, the sender offers 4.  B pauses A's port 2
    on priority 1, A holds the packets and pauses the sending host in turn, and every packet arrives."""
    clock = Clock()
    a, _ = switch(clock)
    b, b_state = switch(clock, host=DST)
    settings = dict(buffer_packets=16, xoff_packets=4, xon_packets=1, headroom_packets=8)
    for device in (a, b):
        device.set_pfc(PfcConfig.checked([1, 2], **settings))
        for port in (1, 2, 9):
            device.set_queue(port, rate_bps=1_000_000, depth_packets=2, priorities=8)
    b.set_queue(9, rate_pps=1000, rate_bps=1_000_000, depth_packets=2, priorities=8)
    a.set_queue(2, rate_pps=4000, rate_bps=10_000_000, depth_packets=2, priorities=8)
    delivered, pauses_to_a, to_send, host_paused = [], 0, 40, False
    for step in range(800):
        clock.now += MS // 4
        if to_send and not host_paused:            # the host honours its ToR's PAUSE frames
            a.receive(1, packet(dst=DST))
            to_send -= 1
        for port, frame in a.transmit_ready():
            if port == 2:
                b.receive(1, frame)                 # the A-B link
            elif port == 1:
                [(priority, quanta)] = parse_pause(frame)
                host_paused = quanta > 0
        for port, frame in b.transmit_ready():
            if port == 1:
                assert parse_pause(frame) is not None and Ether(frame).haslayer(PFCPause)
                pauses_to_a += 1
                a.receive(2, frame)
            elif port == 9:
                delivered.append(frame)
    assert len(delivered) == 40
    assert pauses_to_a >= 2                          # at least one XOFF and one XON
    assert a.tm.pfc_stats(1)["pause_sent"][1] >= 1   # back-pressure reached the sending host
    assert a.tm.pfc_stats(2)["pause_received"][1] >= 1 and a.tm.pfc_stats(2)["paused_ns"][1] > 0
    for device in (a, b):
        assert all(device.tm.stats(port)["dropped"] == 0 for port in (1, 2, 9))
    b.sync_pfc_counters()
    sent = b_state.counters["MyIngress.pfc_pause_sent"].read(1 * 8 + 1)[0]
    assert sent == b.tm.pfc_stats(1)["pause_sent"][1] >= 1


def test_without_pfc_the_same_traffic_is_tail_dropped():
    clock = Clock()
    b, _ = switch(clock, host=DST)
    b.set_queue(9, rate_pps=1000, depth_packets=2, priorities=8)
    for _ in range(40):
        b.receive(1, packet(dst=DST))
    assert b.tm.stats(9)["dropped_full"] > 30
