"""Tests of PFC: the PAUSE frame (struct and Scapy layer), the settings' checks and the traffic manager's
802.1Qbb accounting, pausing and counters, with an injected clock (test input, not a mock).  The traffic
manager tests run on the Python traffic manager and on the native loop's (C) one."""

import pytest
from scapy.layers.l2 import Ether

from testbed.errors import ParameterError
from testbed.p4.v1model.pfc import (MAX_QUANTA, PFC_ETHERTYPE, PfcConfig, build_pause, parse_pause,
                                    quantum_ns)
from testbed.p4.v1model.pfc_scapy import PFC_DST, PFCPause
from testbed.p4.v1model.traffic_manager import TrafficManager

MS = 1_000_000
US = 1_000


class FakeClock:
    def __init__(self, now=0):
        self.now = now

    def __call__(self):
        return self.now


@pytest.fixture
def clock():
    return FakeClock(1_000 * MS)


@pytest.fixture(params=["python", "native"])
def make_tm(request):
    """The traffic manager class under test: the Python reference or the native loop's."""
    if request.param == "python":
        return TrafficManager
    from testbed.embedded_switch.native_io import NativeTrafficManager
    return NativeTrafficManager


def pfc_tm(clock, make_tm, **settings):
    """Port 1 egress at 1000 pps (1 ms per packet, 1 Mb/s), PFC on priority 3."""
    tm = make_tm(clock)
    tm.set_queue(1, rate_pps=1000, rate_bps=1_000_000, depth_packets=4, priorities=8)
    tm.set_queue(2, rate_bps=1_000_000, priorities=8)   # the ingress port's link: 512 us per quantum
    values = dict(buffer_packets=20, xoff_packets=6, xon_packets=2, headroom_packets=8)
    values.update(settings)
    tm.set_pfc(PfcConfig.checked([3], **values))
    return tm


# --- the frame --------------------------------------------------------------------------------

def test_pause_frame_layout_matches_8021qbb():
    frame = build_pause(bytes.fromhex("020000000001"), [(3, 0x1234), (5, 0)])
    assert frame[:6] == bytes.fromhex("0180c2000001")
    assert frame[12:14] == PFC_ETHERTYPE.to_bytes(2, "big")
    assert frame[14:16] == b"\x01\x01"                 # opcode: priority-based PAUSE
    assert frame[16:18] == (0b101000).to_bytes(2, "big")  # class-enable vector: bits 3 and 5
    assert frame[18 + 2 * 3:20 + 2 * 3] == b"\x12\x34"
    assert len(frame) == 60
    assert parse_pause(frame) == [(3, 0x1234), (5, 0)]


def test_scapy_layer_dissects_the_built_frame_and_builds_the_same_bytes():
    frame = build_pause(bytes.fromhex("020000000001"), [(3, 0xFFFF)])
    dissected = Ether(frame)
    assert dissected.haslayer(PFCPause)
    assert dissected[PFCPause].opcode == 0x0101
    assert int(dissected[PFCPause].class_enable) == 0x08
    assert dissected[PFCPause].quanta3 == 0xFFFF
    made = Ether(dst=PFC_DST, src="02:00:00:00:00:01") / PFCPause(class_enable=0x08, quanta3=0xFFFF)
    assert bytes(made).ljust(60, b"\0") == frame


def test_other_frames_are_not_pauses():
    assert parse_pause(bytes(60)) is None
    not_pfc = bytearray(build_pause(bytes(6), [(1, 1)]))
    not_pfc[14] = 0x00  # opcode 0x0001: the 802.3x whole-link PAUSE, not PFC
    assert parse_pause(bytes(not_pfc)) is None


def test_bad_frame_fields_are_refused():
    with pytest.raises(ParameterError, match="priority"):
        build_pause(bytes(6), [(8, 1)])
    with pytest.raises(ParameterError, match="quanta"):
        build_pause(bytes(6), [(0, MAX_QUANTA + 1)])


# --- the settings -----------------------------------------------------------------------------

@pytest.mark.parametrize("settings, field", [
    (dict(xoff_packets=300), "xoff_packets"),                    # XOFF above the buffer
    (dict(buffer_packets=100, xoff_packets=50, headroom_packets=60), "xoff_packets"),
    (dict(headroom_packets=0), "headroom_packets"),              # lossless without headroom
    (dict(xon_packets=32), "xon_packets"),
    (dict(buffer_packets=1), "buffer_packets"),
])
def test_bad_settings_are_refused_naming_the_field(settings, field):
    with pytest.raises(ParameterError) as error:
        PfcConfig.checked([3], **settings)
    assert error.value.field == field
    assert "allowed values are" in str(error.value)


def test_bad_lossless_priorities_are_refused():
    for value in ([8], [-1], "3", [True]):
        with pytest.raises(ParameterError, match="lossless"):
            PfcConfig.checked(value)


def test_lossy_only_settings_may_have_no_headroom():
    assert PfcConfig.checked([], headroom_packets=0).lossless == frozenset()


def test_quantum_is_512_bit_times():
    assert quantum_ns(1_000_000_000) == 512
    assert quantum_ns(10_000_000) == 51_200


# --- accounting, XOFF and XON -----------------------------------------------------------------

def test_xoff_at_threshold_then_xon_when_drained(clock, make_tm):
    tm = pfc_tm(clock, make_tm)
    t0 = clock.now
    for i in range(5):
        tm.enqueue(1, i, 125, priority=3, ingress_port=2)
    assert tm.pause_frames() == []                       # 5 held (one already left) < XOFF
    tm.enqueue(1, 5, 125, priority=3, ingress_port=2)
    tm.enqueue(1, 6, 125, priority=3, ingress_port=2)    # 6 held: XOFF to the upstream of port 2
    assert tm.pause_frames() == [(t0, 2, 3, MAX_QUANTA)]
    assert tm.pfc_stats(2)["held"][3] == 6
    assert tm.pfc_stats(2)["pause_sent"][3] == 1
    # one packet per ms leaves port 1; held falls to XON = 2 after the 5th departure at t0 + 4 ms
    clock.now = t0 + 3 * MS
    assert tm.pause_frames() == []
    clock.now = t0 + 10 * MS
    assert tm.pause_frames() == [(t0 + 4 * MS, 2, 3, 0)]
    assert tm.pfc_stats(2)["resume_sent"][3] == 1
    assert len(tm.dequeue_ready()) == 7


def test_lossless_priority_ignores_queue_depth_and_drops_only_past_the_buffer(clock, make_tm):
    tm = pfc_tm(clock, make_tm)
    kept = [tm.enqueue(1, i, 125, priority=3, ingress_port=2) for i in range(21)]
    assert kept.count(None) == 0                          # depth_packets=4 does not apply; 1 left at once
    assert tm.enqueue(1, "over", 125, priority=3, ingress_port=2) is None   # 20 held = buffer
    stats = tm.stats(1)
    assert stats["dropped_full"] == 0 and stats["dropped_headroom"] == 1


def test_lossy_priority_still_tail_drops(clock, make_tm):
    tm = pfc_tm(clock, make_tm)
    results = [tm.enqueue(1, i, 125, priority=1, ingress_port=2) for i in range(10)]
    assert results.count(None) == 5                       # 1 on the wire, 4 queued, the rest dropped
    assert tm.pause_frames() == []
    assert tm.stats(1)["dropped_full"] == 5


def test_accounting_is_per_ingress_port(clock, make_tm):
    tm = pfc_tm(clock, make_tm)
    for i in range(5):
        tm.enqueue(1, ("a", i), 125, priority=3, ingress_port=2)
        tm.enqueue(1, ("b", i), 125, priority=3, ingress_port=5)
    assert tm.pause_frames() == []     # 9 packets queued, but no ingress port holds 6


def test_pause_is_refreshed_at_half_its_time(clock, make_tm):
    tm = pfc_tm(clock, make_tm, pause_quanta=100)   # 100 quanta at 1 Mb/s on port 2 = 51.2 ms
    tm.set_queue(1, rate_pps=1, depth_packets=4, priorities=8)  # drains very slowly
    t0 = clock.now
    for i in range(7):
        tm.enqueue(1, i, 125, priority=3, ingress_port=2)
    assert [f[3] for f in tm.pause_frames()] == [100]
    assert tm.next_pause_ns() == t0 + 25_600_000
    clock.now = t0 + 25_600_000
    assert tm.pause_frames() == [(clock.now, 2, 3, 100)]
    assert tm.pfc_stats(2)["pause_sent"][3] == 2


# --- honouring PAUSE --------------------------------------------------------------------------

def test_paused_priority_waits_and_others_pass(clock, make_tm):
    tm = pfc_tm(clock, make_tm)
    t0 = clock.now
    tm.receive_pause(1, [(3, 10)])                 # 10 quanta at 1 Mb/s = 5.12 ms
    tm.enqueue(1, "p3", 125, priority=3)
    tm.enqueue(1, "p1", 125, priority=1)
    assert tm.next_departure_ns() == t0            # priority 1 is not paused
    assert [d.item for d in tm.dequeue_ready()] == ["p1"]
    assert tm.next_departure_ns() == t0 + 5_120_000
    clock.now = t0 + 5_119_999
    assert tm.dequeue_ready() == []
    assert tm.pfc_stats(1)["paused"][3] == 1
    clock.now = t0 + 5_120_000
    out = tm.dequeue_ready()
    assert [(d.item, d.deq_timestamp_ns) for d in out] == [("p3", t0 + 5_120_000)]
    stats = tm.pfc_stats(1)
    assert stats["pause_received"][3] == 1 and stats["paused_ns"][3] == 5_120_000
    assert stats["paused"][3] == 0


def test_quanta_zero_resumes_at_once_and_paused_time_counts_to_it(clock, make_tm):
    tm = pfc_tm(clock, make_tm)
    t0 = clock.now
    tm.receive_pause(1, [(3, MAX_QUANTA)])
    tm.enqueue(1, "p3", 125, priority=3)
    clock.now = t0 + 2 * MS
    assert tm.dequeue_ready() == []
    assert tm.pfc_stats(1)["paused_ns"][3] == 2 * MS
    tm.receive_pause(1, [(3, 0)])
    assert [d.item for d in tm.dequeue_ready()] == ["p3"]
    clock.now = t0 + 9 * MS
    stats = tm.pfc_stats(1)
    assert stats["paused_ns"][3] == 2 * MS and stats["resume_received"][3] == 1


def test_pause_does_not_recall_a_departure_already_scheduled(clock, make_tm):
    tm = pfc_tm(clock, make_tm)
    t0 = clock.now
    tm.enqueue(1, "a", 125, priority=3)            # leaves at t0
    tm.enqueue(1, "b", 125, priority=3)            # would leave at t0 + 1 ms
    clock.now = t0 + 500 * US
    tm.receive_pause(1, [(3, 20)])                 # paused until t0 + 0.5 ms + 10.24 ms
    clock.now = t0 + 20 * MS
    out = tm.dequeue_ready()
    assert [(d.item, d.deq_timestamp_ns) for d in out] == [("a", t0), ("b", t0 + 500 * US + 10_240_000)]


def test_pfc_cannot_change_with_packets_queued(clock, make_tm):
    tm = pfc_tm(clock, make_tm)
    tm.enqueue(1, "a", 125, priority=3, ingress_port=2)
    tm.enqueue(1, "b", 125, priority=3, ingress_port=2)
    with pytest.raises(ParameterError, match="pfc"):
        tm.set_pfc(None)


# --- the host side ----------------------------------------------------------------------------

def test_host_gate_follows_pause_and_resume_of_its_class_only():
    from testbed.traffic.pause import DATA_PRIORITY, PauseGate

    gate = PauseGate.__new__(PauseGate)      # the frame logic alone, without a socket
    gate.priority, gate.paused_until, gate.pauses, gate.resumes = DATA_PRIORITY, 0, 0, 0
    gate._quantum_ns = quantum_ns(None)
    gate.receive(build_pause(bytes(6), [(DATA_PRIORITY + 1, MAX_QUANTA)]), 1000)
    assert not gate.paused(1000)                                 # another class
    gate.receive(build_pause(bytes(6), [(DATA_PRIORITY, 100)]), 1000)
    assert gate.paused(1000) and gate.paused(1000 + 100 * 512 - 1) and not gate.paused(1000 + 100 * 512)
    gate.receive(build_pause(bytes(6), [(DATA_PRIORITY, 0)]), 2000)
    assert not gate.paused(2000) and (gate.pauses, gate.resumes) == (1, 1)
    gate.receive(bytes(60), 3000)                                # not a PAUSE frame
    assert not gate.paused(3000)
