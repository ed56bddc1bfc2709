"""p4src/f10.p4 on one embedded switch, packet by packet, with a clock the test moves.

Expected behaviour comes from the F10 paper (seed 002): section 5.4 (the
detector: frames counted per window t, down below c, up from d, exponential
backoff on flapping; a link is never silent), section 5.1 (local rerouting:
the next packet after detection takes the detour, a detoured packet is marked
and not detoured again), and the program's documented frames
(p4src/include/f10_headers.p4).

The switch: host port 1; fabric ports 3 and 4 (uplinks to two parents) and 5
(a downlink to a child); trigger frames enter on the generator port 510 every
probe period; clone session 100 (detector reports) goes to the CPU port 255.
"""
import ipaddress
import random

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from testbed.controllers.parameters import set_parameters_in_state
from testbed.modes import program_for_mode
from testbed.p4.loader import load_program
from testbed.p4.program import ActionCall, KeyMatch
from testbed.p4.state import SwitchState, TableEntry

from backend_helpers import backend_device

CPU_PORT = 255
PKTGEN_PORT = 510
HOST_PORT = 1
UPLINKS = (3, 4)
DOWNLINK = 5
FABRIC_PORTS = UPLINKS + (DOWNLINK,)
PERIOD_US = 10_000
UP_ROUTE = "10.0.2.0/24"        # reached through the parents (ECMP)
DOWN_ROUTE = "10.0.9.0/24"      # reached through the child on port 5
SWITCH_MAC = 0x02FB00000001
PROBE = 0x88B5
TRIGGER = 0x88B6
DETOUR = 0x88B7


class Clock:
    def __init__(self):
        self.now_ns = 1_000_000_000

    def __call__(self):
        return self.now_ns

    def advance_us(self, microseconds):
        self.now_ns += int(microseconds * 1000)


def mac(port):
    return 0x020000000000 + port


def nhop(port):
    return ActionCall("MyIngress.set_nhop", (mac(port), SWITCH_MAC, port))


def lpm(prefix):
    network = ipaddress.ip_network(prefix)
    return KeyMatch("lpm", value=int(network.network_address), prefix_len=network.prefixlen)


class F10Switch:
    """f10.p4 on a Device with a fake clock, fabric ports, the probe group and the report session."""

    def __init__(self, **params):
        program = load_program(program_for_mode("f10"))
        self.clock = Clock()
        self.state = SwitchState(program.info)
        self.device = backend_device(program, self.state, cpu_port=CPU_PORT, clock_ns=self.clock, raise_errors=True)
        state = self.state
        for port in FABRIC_PORTS:
            state.tables["MyIngress.f10_fabric_ports"].insert(TableEntry(
                matches=[KeyMatch("exact", value=port)], action=ActionCall("MyIngress.fabric_port", ())))
        state.tables["MyEgress.f10_host_ports"].insert(TableEntry(
            matches=[KeyMatch("exact", value=HOST_PORT)], action=ActionCall("MyEgress.to_host", ())))
        state.multicast_groups.insert(1, [(port, 0) for port in FABRIC_PORTS])
        state.clone_sessions.insert(100, [(CPU_PORT, 0)])
        set_parameters_in_state(state, dict({"probe_period_us": PERIOD_US, "detector_window_periods": 3,
                                             "holddown_us": 100_000}, **params))
        ecmp = state.action_profiles["MyIngress.ecmp_selector"]
        for port in UPLINKS + (DOWNLINK,):
            ecmp.insert_member(port, nhop(port))
        ecmp.insert_group(1, [(port, 1) for port in UPLINKS])
        state.tables["MyIngress.ipv4_lpm"].insert(TableEntry(matches=[lpm(UP_ROUTE)], group_id=1))
        state.tables["MyIngress.ipv4_lpm"].insert(TableEntry(matches=[lpm(DOWN_ROUTE)], member_id=DOWNLINK))
        backup = state.action_profiles["MyIngress.backup_selector"]
        for number, port in enumerate(UPLINKS, start=1):  # up: the other parent, no mark
            other = UPLINKS[1 - UPLINKS.index(port)]
            backup.insert_member(number, nhop(other))
            state.tables["MyIngress.f10_backup"].insert(TableEntry(
                matches=[lpm(UP_ROUTE), KeyMatch("exact", value=port)], member_id=number))
        # down: Scheme 1 through a parent (phase UP), as an AB FatTree's type-B child would be reached
        backup.insert_member(10, ActionCall("MyIngress.detour", (mac(3), SWITCH_MAC, 3, 2, 1)))
        state.tables["MyIngress.f10_backup"].insert(TableEntry(
            matches=[lpm(DOWN_ROUTE), KeyMatch("exact", value=DOWNLINK)], member_id=10))
        up = state.action_profiles["MyIngress.detour_up_selector"]
        up.insert_member(1, nhop(4))
        for parent in UPLINKS:  # a marked packet from parent 3 goes up through 4, and back
            member = 1 if parent == 3 else 2
            if parent == 4:
                up.insert_member(2, nhop(3))
            state.tables["MyIngress.f10_detour_up"].insert(TableEntry(
                matches=[KeyMatch("exact", value=parent)], member_id=member))
        down = state.action_profiles["MyIngress.detour_down_selector"]
        down.insert_member(1, nhop(DOWNLINK))
        state.tables["MyIngress.f10_detour_down"].insert(TableEntry(matches=[KeyMatch("exact", value=1)],
                                                                    member_id=1))

    def tick(self, alive=FABRIC_PORTS, frames_per_port=1):
        """One probe period: neighbours on ``alive`` ports send frames, then the trigger; returns its outputs."""
        for port in alive:
            for _ in range(frames_per_port):
                assert self.device.process(port, probe_from(port)) == []   # consumed, never forwarded
        self.clock.advance_us(PERIOD_US)
        return self.device.process(PKTGEN_PORT, trigger())

    def reports(self, outputs):
        """The detector reports among ``outputs``: [(port, status, frames, holddown_us, level, time_us)]."""
        found = []
        for port, frame in outputs:
            if port != CPU_PORT:
                continue
            header = int.from_bytes(frame[:21], "big")  # packet_in: 168 bits
            fields = []
            for width in (8, 32, 32, 48, 8, 16, 8, 7, 9):  # last field first
                fields.append(header & ((1 << width) - 1))
                header >>= width
            level, holddown, frames, time_us, status, report_port, reason = fields[:7]
            assert reason == 1
            found.append((report_port, status, frames, holddown, level, time_us))
        return found

    def send(self, frame, port=HOST_PORT):
        return self.device.process(port, bytes(frame))


def trigger():
    return bytes(Ether(dst="ff:ff:ff:ff:ff:ff", src="00:00:00:00:00:00", type=TRIGGER)) + bytes(46)


def probe_from(port):
    return bytes(Ether(dst="01:80:c2:00:00:0e", src="00:00:00:00:00:00", type=PROBE)) + \
        port.to_bytes(2, "big") + bytes(40)


def udp(dst, sport=1000, ttl=64):
    return Ether(src="00:00:0a:00:01:01", dst="02:fb:00:00:00:01") / IP(src="10.0.1.1", dst=dst, ttl=ttl) / \
        UDP(sport=sport, dport=2000) / (b"x" * 20)


def settle(switch, periods=4):
    """Run until every port has been watched for a whole window (default window: 3 periods)."""
    for _ in range(periods):
        assert switch.reports(switch.tick()) == []


# ----------------------------------------------------------------------------------- detector
def test_idle_links_get_probes_and_a_silent_port_goes_down_within_one_window():
    switch = F10Switch()
    outputs = switch.tick()
    probes = sorted(port for port, frame in outputs if frame[12:14] == PROBE.to_bytes(2, "big"))
    assert probes == list(FABRIC_PORTS)      # nothing was sent yet: every fabric port probes
    settle(switch)
    # port 4's neighbour falls silent; window 3 periods, c = 1: down once 3 silent buckets are counted
    reports = []
    periods = 0
    while not reports:
        reports = switch.reports(switch.tick(alive=(3, 5)))
        periods += 1
        assert periods <= 4
    assert periods == 3
    (port, status, frames, holddown, level, _), = reports
    assert (port, status, frames, level) == (4, 0, 0, 0)
    assert holddown == 100_000           # the base hold-down
    assert switch.state.registers["port_down"].values[4] == 1
    assert switch.state.counters["MyEgress.port_down_events"].packets[4] == 1


def test_an_idle_port_probes_at_every_trigger_however_late_the_triggers_run():
    """Triggers run late by varying amounts (a loaded host): each one still probes an idle port.

    F10's rule is "a link is never silent": a port that sent nothing since the previous
    trigger probes.  Comparing the time since the last probe with the period instead would
    skip the probe whenever a trigger ran less late than the one before.
    """
    switch = F10Switch()
    lateness = random.Random(5)
    start = switch.clock.now_ns
    probes = 0
    for number in range(1, 101):
        switch.clock.now_ns = start + (number * PERIOD_US + int(lateness.uniform(0, PERIOD_US / 2))) * 1000
        outputs = switch.device.process(PKTGEN_PORT, trigger())
        probes += sum(1 for port, frame in outputs if port == 3 and frame[12:14] == PROBE.to_bytes(2, "big"))
    assert probes == 100


def test_a_busy_port_sends_no_probe():
    switch = F10Switch()
    switch.tick()                                           # every port probed now
    for _ in range(20):                                     # port 5 carries data all the next period
        switch.clock.advance_us(PERIOD_US / 20)
        assert [port for port, _ in switch.send(udp("10.0.9.7"))] == [DOWNLINK]
    outputs = switch.device.process(PKTGEN_PORT, trigger())
    probed = {port for port, frame in outputs if frame[12:14] == PROBE.to_bytes(2, "big")}
    assert DOWNLINK not in probed and probed == set(UPLINKS)


def test_up_again_after_the_hold_down_with_d_frames_and_backoff_doubles_on_flapping():
    switch = F10Switch(holddown_us=30_000, backoff_reset_us=500_000)
    settle(switch)
    down_times = []

    def go_down():
        while True:
            reports = switch.reports(switch.tick(alive=(3, 5)))
            if reports:
                down_times.append(reports[0][5])
                return reports[0]

    def come_up():
        periods = 0
        while True:
            reports = switch.reports(switch.tick(alive=FABRIC_PORTS))
            periods += 1
            if reports:
                return reports[0], periods

    first = go_down()
    assert first[3] == 30_000 and first[4] == 0
    report, periods = come_up()
    assert report[1] == 1 and report[2] >= 3      # d = 3 frames in the window
    second = go_down()                            # within backoff_reset: the hold-down doubles
    assert (second[3], second[4]) == (60_000, 1)
    report, periods_second = come_up()
    assert periods_second >= periods              # waited at least as long before coming back
    third = go_down()
    assert (third[3], third[4]) == (120_000, 2)
    # stable for longer than backoff_reset_us: the next down starts again at the base hold-down
    come_up()
    for _ in range(60):
        switch.tick(alive=FABRIC_PORTS)
    fourth = go_down()
    assert (fourth[3], fourth[4]) == (30_000, 0)


def test_frames_that_stay_above_c_keep_the_port_up():
    switch = F10Switch(detector_down_below=2)
    settle(switch)
    for _ in range(50):
        assert switch.reports(switch.tick(frames_per_port=1)) == []   # 3 frames per window >= 2


def test_a_trigger_from_a_link_is_dropped_and_starts_nothing():
    switch = F10Switch()
    assert switch.device.process(3, trigger()) == []


# ----------------------------------------------------------------------------------- rerouting
def _down(switch, port):
    settle(switch)
    alive = tuple(p for p in FABRIC_PORTS if p != port)
    while not switch.reports(switch.tick(alive=alive)):
        pass


def test_up_traffic_moves_to_the_other_parent_in_the_same_pass():
    switch = F10Switch()
    flows = [udp("10.0.2.9", sport=sport) for sport in range(1000, 1064)]
    before = {bytes(frame): switch.send(frame)[0][0] for frame in flows}
    assert set(before.values()) == set(UPLINKS)
    _down(switch, 4)
    for frame in flows:
        (port, data), = switch.send(frame)
        assert port == 3
        assert Ether(data).type == 0x0800       # an upward reroute is not marked


def test_down_traffic_takes_the_scheme1_detour_marked_and_ttl_counts_the_hops():
    switch = F10Switch()
    _down(switch, DOWNLINK)
    (port, data), = switch.send(udp("10.0.9.7", ttl=64))
    assert port == 3
    frame = Ether(data)
    assert frame.type == DETOUR
    raw = bytes(frame.payload)
    assert (raw[0], raw[1], int.from_bytes(raw[2:4], "big")) == (2, 1, 0x0800)   # phase UP, scheme 1
    assert IP(raw[4:]).ttl == 63
    assert switch.state.counters["MyIngress.f10_detoured"].packets[DOWNLINK] == 1


def test_a_marked_packet_follows_its_phase_and_is_never_detoured_twice():
    switch = F10Switch()
    marked = bytes(Ether(src="02:00:00:00:00:03", dst="02:fb:00:00:00:01", type=DETOUR)) + \
        bytes([2, 1]) + (0x0800).to_bytes(2, "big") + bytes(IP(src="10.0.1.1", dst="10.0.9.7", ttl=60) /
                                                            UDP(sport=1, dport=2) / b"y")
    (port, data), = switch.send(marked, port=3)             # phase UP from parent 3: up, not back to 3
    assert port == 4 and bytes(Ether(data).payload)[0] == 3  # phase DONE
    done = marked[:14] + bytes([3]) + marked[15:]
    assert [p for p, _ in switch.send(done, port=4)] == [DOWNLINK]   # routes normally
    _down(switch, DOWNLINK)
    assert switch.send(done, port=4) == []                  # already detoured: dropped, not detoured again
    assert switch.state.counters["MyIngress.f10_no_detour"].packets[DOWNLINK] == 1


def test_the_mark_is_removed_toward_a_host():
    switch = F10Switch()
    state = switch.state
    state.action_profiles["MyIngress.ecmp_selector"].insert_member(HOST_PORT, nhop(HOST_PORT))
    state.tables["MyIngress.ipv4_lpm"].insert(TableEntry(matches=[lpm("10.0.1.1/32")], member_id=HOST_PORT))
    marked = bytes(Ether(src="02:00:00:00:00:03", dst="02:fb:00:00:00:01", type=DETOUR)) + \
        bytes([3, 1]) + (0x0800).to_bytes(2, "big") + bytes(IP(src="10.0.5.5", dst="10.0.1.1", ttl=60) / b"z")
    (port, data), = switch.send(marked, port=3)
    assert port == HOST_PORT
    frame = Ether(data)
    assert frame.type == 0x0800 and frame[IP].ttl == 59


@pytest.mark.parametrize("name", ["probe_period_us", "detector_window_periods", "detector_down_below",
                                  "detector_up_at_least", "holddown_us", "holddown_max_us", "backoff_reset_us"])
def test_every_detector_parameter_is_in_the_parameter_table(name):
    from testbed.modes import MODES, PARAMETERS

    assert name in MODES["f10"].parameters
    assert PARAMETERS[name].table == "MyEgress.detector_params"


def test_a_port_whose_neighbour_never_sent_is_not_declared_down():
    switch = F10Switch()
    for _ in range(10):   # port 4's neighbour has not started (no frame yet): no report
        assert switch.reports(switch.tick(alive=(3, 5))) == []
    assert switch.state.registers["port_down"].values[4] == 0
