"""The load-balancing P4 programs (p4src/{ecmp,eecmp,spray,flowlet,pinning}.p4) on the embedded target.

No Mininet: each program is loaded with the embedded compiler, a single
:class:`~testbed.p4.v1model.device.Device` gets one route whose action-selector
group has four next hops (ports 1-4), and Scapy-built packets go through
``Device.process``.  Time is an injected clock, so flowlet gaps are exact.
"""
import functools
import ipaddress
import os
import random
from collections import Counter

import pytest
from scapy.contrib.roce import BTH
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.l2 import ARP, Ether

from testbed import cli
from testbed.controllers.parameters import set_parameters_in_state, write_parameters
from testbed.modes import PARAMETERS
from testbed.p4.loader import load_program, load_program_from_sources
from testbed.p4.program import ActionCall, KeyMatch
from testbed.p4.state import SwitchState, TableEntry

from backend_helpers import backend_device

from repo_paths import REPO

P4SRC = os.path.join(REPO, "p4src")
PROGRAMS = ("ecmp", "eecmp", "spray", "flowlet", "pinning")
UPLINKS = (1, 2, 3, 4)
HOST_PORT = 10
CPU_PORT = 255
SWITCH_MAC = 0x02FB00000001
ROUTE = "10.0.2.0/24"
SRC_IP = "10.0.1.1"
DST_IP = "10.0.2.1"
ROCE_PORT = 4791


def program_path(name):
    """Path of p4src/NAME.p4."""
    return os.path.join(P4SRC, f"{name}.p4")


@functools.lru_cache(maxsize=None)
def loaded(name):
    """The loaded program (compiled once per test session)."""
    return load_program(program_path(name))


def next_hop_mac(port):
    """The neighbor MAC behind uplink ``port`` (distinct per port)."""
    return 0x0200000000A0 + port


def str_mac(value):
    """48-bit int -> 'aa:bb:..'."""
    return ":".join(f"{(value >> shift) & 0xFF:02x}" for shift in range(40, -1, -8))


class FakeClock:
    """A clock the test moves by hand (nanoseconds)."""

    def __init__(self, start_ns=1_000_000_000):
        self.now_ns = start_ns

    def __call__(self):
        return self.now_ns

    def advance_us(self, microseconds):
        """Move the clock forward."""
        self.now_ns += int(microseconds * 1000)


class Switch:
    """A Device running one program with an ECMP route to ROUTE over ``uplinks`` (default ports 1-4)."""

    def __init__(self, name, clock=None, uplinks=UPLINKS):
        self.program = loaded(name)
        self.state = SwitchState(self.program.info)
        self.clock = clock or FakeClock()
        self.device = backend_device(self.program, self.state, cpu_port=CPU_PORT, clock_ns=self.clock)
        profile = self.state.action_profiles["MyIngress.ecmp_selector"]
        for port in uplinks:
            profile.insert_member(port + 1, ActionCall("MyIngress.set_nhop",
                                                       (next_hop_mac(port), SWITCH_MAC, port)))
        profile.insert_group(1, [(port + 1, 1) for port in uplinks])
        network = ipaddress.ip_network(ROUTE)
        self.state.tables["MyIngress.ipv4_lpm"].insert(TableEntry(
            matches=[KeyMatch("lpm", value=int(network.network_address), prefix_len=network.prefixlen)],
            group_id=1))

    def register(self, name):
        """The register's cells (list the data plane reads and writes)."""
        return self.state.registers[name].values

    def set_params(self, **values):
        """Set run-time parameters as a controller does: each parameter table's default action."""
        assert set_parameters_in_state(self.state, values) == list(values)

    def send(self, frame):
        """Process one frame from the host port; return [(port, bytes)]."""
        return self.device.process(HOST_PORT, bytes(frame))

    def port_of(self, frame):
        """The single egress port the frame takes."""
        outputs = self.send(frame)
        assert len(outputs) == 1, outputs
        return outputs[0][0]


@functools.lru_cache(maxsize=None)
def udp_frame(sport=1000, dport=2000, dst=DST_IP, src=SRC_IP):
    """A UDP/IPv4 frame (bytes; cached: Scapy building dominates the test time)."""
    return bytes(Ether(src="00:00:0a:00:01:01", dst="02:fb:00:00:00:01") / IP(src=src, dst=dst, ttl=64) / \
        UDP(sport=sport, dport=dport) / (b"x" * 32))


@functools.lru_cache(maxsize=None)
def roce_frame(dqpn, sport=49152, dst=DST_IP, psn=0):
    """A RoCEv2 frame (UDP 4791 + BTH) to queue pair ``dqpn`` (bytes, cached)."""
    return bytes(Ether(src="00:00:0a:00:01:01", dst="02:fb:00:00:00:01") / IP(src=SRC_IP, dst=dst, ttl=64) / \
        UDP(sport=sport, dport=ROCE_PORT) / BTH(opcode=10, dqpn=dqpn, psn=psn) / (b"y" * 64))


def random_flows(count, seed=7):
    """``count`` distinct UDP/TCP 5-tuples toward ROUTE (deterministic)."""
    rng = random.Random(seed)
    flows = set()
    while len(flows) < count:
        flows.add((f"10.0.1.{rng.randint(1, 250)}", f"10.0.2.{rng.randint(1, 250)}",
                   rng.choice((6, 17)), rng.randint(1024, 65535), rng.randint(1024, 65535)))
    return sorted(flows)


@functools.lru_cache(maxsize=None)
def flow_frame(flow):
    """The frame of a 5-tuple from :func:`random_flows` (bytes, cached)."""
    src, dst, proto, sport, dport = flow
    l4 = TCP(sport=sport, dport=dport) if proto == 6 else UDP(sport=sport, dport=dport)
    return bytes(Ether() / IP(src=src, dst=dst, ttl=64) / l4 / b"z")


def placement(switch, flows):
    """{flow: egress port} for one packet of each flow."""
    return {flow: switch.port_of(flow_frame(flow)) for flow in flows}


# ---------------------------------------------------------------------------------------- all programs
@pytest.mark.parametrize("name", PROGRAMS)
def test_program_passes_p4_check(name, capsys):
    assert cli.main(["p4", "check", program_path(name)]) == 0
    out = capsys.readouterr().out
    assert "table MyIngress.ipv4_lpm" in out
    assert "MyIngress.ecmp_selector" in out


@pytest.mark.parametrize("name", PROGRAMS)
def test_program_keeps_routing_names_and_shapes(name):
    info = loaded(name).info
    table = info.tables["MyIngress.ipv4_lpm"]
    assert [(key.name, key.match_type) for key in table.match_keys] == [("hdr.ipv4.dstAddr", "lpm")]
    assert table.selector_keys, "the selector needs keys"
    assert table.implementation == "MyIngress.ecmp_selector"
    assert info.action_profiles["MyIngress.ecmp_selector"].with_selector
    params = [(p.name, p.bitwidth) for p in info.actions["MyIngress.set_nhop"].params]
    assert params == [("dmac", 48), ("smac", 48), ("port", 9)]
    assert "MyIngress.ingress_port_counter" in info.counters
    assert "MyEgress.egress_port_counter" in info.counters
    assert info.registers["port_qdepth"].size == 512


@pytest.mark.parametrize("name", PROGRAMS)
def test_routed_packet_gets_next_hop_macs_and_ttl(name):
    switch = Switch(name)
    (port, data), = switch.send(udp_frame())
    packet = Ether(data)
    assert bytes(packet[UDP]) == bytes(Ether(udp_frame())[UDP])      # payload untouched
    assert port in UPLINKS
    assert packet[Ether].dst == str_mac(next_hop_mac(port))
    assert packet[Ether].src == str_mac(SWITCH_MAC)
    assert packet[IP].ttl == 63
    fresh = packet[IP].copy()
    del fresh.chksum
    assert IP(bytes(fresh)).chksum == packet[IP].chksum          # checksum recomputed


@pytest.mark.parametrize("name", PROGRAMS)
def test_misses_ttl_and_non_ip(name):
    switch = Switch(name)
    assert switch.send(udp_frame(dst="10.0.9.1")) == []          # no route
    frame = Ether() / IP(src=SRC_IP, dst=DST_IP, ttl=1) / UDP() / b"x"
    assert switch.send(frame) == []                              # TTL would expire
    arp = Ether(dst="ff:ff:ff:ff:ff:ff") / ARP(pdst=DST_IP)
    (port, data), = switch.send(arp)
    assert port == CPU_PORT
    assert int.from_bytes(data[:2], "big") >> 7 == HOST_PORT     # packet_in.ingress_port
    assert data[2:] == bytes(arp)


@pytest.mark.parametrize("name", PROGRAMS)
def test_packet_out_goes_out_of_the_named_port(name):
    switch = Switch(name)
    payload = bytes(udp_frame())
    header = (3 << 7).to_bytes(2, "big")                         # packet_out.egress_port = 3
    assert switch.device.process(CPU_PORT, header + payload) == [(3, payload)]


REGISTERS = {
    "ecmp": set(),
    "eecmp": set(),
    "spray": {"MyIngress.spray_packet_count"},
    "flowlet": {"MyIngress.flowlet_last_seen", "MyIngress.flowlet_id", "MyIngress.flowlet_dst",
                "MyIngress.flowlet_port", "MyIngress.flowlet_dmac", "MyIngress.flowlet_smac"},
    "pinning": set(),
}


@pytest.mark.parametrize("name", PROGRAMS)
def test_pipeline_config_and_device_config_round_trip(name):
    from testbed.targets import pipeline_config

    config = pipeline_config(program_path(name), "embedded")
    assert "MyIngress.ipv4_lpm" in {table.preamble.name for table in config.p4info.tables}
    assert {register.preamble.name for register in config.p4info.registers} == REGISTERS[name] | {"port_qdepth"}
    program = loaded(name)
    again = load_program_from_sources(program.main_file, program.sources)
    assert again.info.name == name
    assert set(again.info.registers) == set(program.info.registers)


def test_flowlet_programmed_over_p4runtime_like_the_fabric_controller():
    """Pipeline, members, group, route and run-time parameters written over P4Runtime."""
    from testbed.p4runtime.client import P4RuntimeClient
    from testbed.p4runtime.server import P4RuntimeServer
    from testbed.embedded_switch.p4runtime_target import EmbeddedTarget

    target = EmbeddedTarget(cpu_port=CPU_PORT)
    server = P4RuntimeServer(target, device_id=1, address="127.0.0.1:0")
    server.start()
    try:
        with P4RuntimeClient(f"127.0.0.1:{server.port}", device_id=1, election_id=(0, 1), timeout=10) as sw:
            sw.set_pipeline(program_path("flowlet"))
            for port in UPLINKS:
                sw.insert_member("MyIngress.ecmp_selector", port + 1, "MyIngress.set_nhop",
                                 {"dmac": str_mac(next_hop_mac(port)), "smac": str_mac(SWITCH_MAC), "port": port})
            sw.insert_group("MyIngress.ecmp_selector", 1, [port + 1 for port in UPLINKS])
            sw.insert_table_entry("MyIngress.ipv4_lpm", {"hdr.ipv4.dstAddr": ("10.0.2.0", 24)}, group_id=1)
            written, notes = write_parameters({"s1": sw}, sw.load_p4info(),
                                              {"flowlet_interval_us": 300, "flowlet_load_aware": 1, "hash_seed": 7})
            assert written == {"flowlet_interval_us": 300, "flowlet_load_aware": 1, "hash_seed": 7} and not notes
            default, = sw.read_table_entries("MyIngress.flowlet_params", default=True)
            assert (default.action, default.params) == ("MyIngress.set_flowlet_params",
                                                        {"interval_us": 300, "load_aware": 1})
            outputs = target.device.process(HOST_PORT, roce_frame(0x42))
            assert len(outputs) == 1 and outputs[0][0] in UPLINKS
            assert sw.read_register("port_qdepth", outputs[0][0]) == 0
            egress = sw.read_counter("MyEgress.egress_port_counter", outputs[0][0])
            assert egress[0] == 1
    finally:
        server.stop()
        target.close()


# ---------------------------------------------------------------------------------------- ECMP
def test_ecmp_keeps_a_flow_on_one_port():
    switch = Switch("ecmp")
    ports = {switch.port_of(udp_frame(sport=4242)) for _ in range(50)}
    assert len(ports) == 1


def test_ecmp_spreads_1000_flows_over_all_ports():
    switch = Switch("ecmp")
    loads = Counter(placement(switch, random_flows(1000)).values())
    assert set(loads) == set(UPLINKS)
    assert min(loads.values()) >= 200 and max(loads.values()) <= 300, loads


def test_ecmp_same_seed_same_placement():
    flows = random_flows(200)
    first, second = Switch("ecmp"), Switch("ecmp")
    for switch in (first, second):
        switch.set_params(hash_seed=12345)
    assert placement(first, flows) == placement(second, flows)


def test_ecmp_hash_seed_changes_the_placement_not_just_the_labels():
    flows = random_flows(400)
    switch = Switch("ecmp")
    before = placement(switch, flows)
    switch.set_params(hash_seed=0xC0FFEE)
    after = placement(switch, flows)
    moved = sum(before[flow] != after[flow] for flow in flows)
    assert moved > len(flows) // 2, moved
    # A mere relabeling of the ports would send every flow of an old port to one new port.
    targets = {port: {after[flow] for flow in flows if before[flow] == port} for port in UPLINKS}
    assert all(len(ports) > 1 for ports in targets.values()), targets
    switch.set_params(hash_seed=0)
    assert placement(switch, flows) == before


def test_ecmp_1000_flows_on_16_links_mean_mmr_above_1_2():
    """Seed 004 section 4.1.1: hashing 1,000 flows onto 16 links gives a mean max/mean ratio above 1.2."""
    flows = random_flows(1000)
    switch = Switch("ecmp", uplinks=tuple(range(1, 17)))
    ratios = []
    for seed in range(1, 6):
        switch.set_params(hash_seed=seed)
        loads = Counter(placement(switch, flows).values())
        assert len(loads) == 16
        ratios.append(max(loads.values()) / (len(flows) / 16))
    assert len(set(ratios)) > 1, "different seeds should give different imbalance"
    assert sum(ratios) / len(ratios) > 1.2, ratios


# ---------------------------------------------------------------------------------------- E-ECMP
def test_eecmp_spreads_queue_pairs_that_ecmp_keeps_together():
    qps = range(0x100, 0x100 + 64)
    ecmp, eecmp = Switch("ecmp"), Switch("eecmp")
    ecmp_ports = Counter(ecmp.port_of(roce_frame(qp)) for qp in qps)
    eecmp_ports = Counter(eecmp.port_of(roce_frame(qp)) for qp in qps)
    assert len(ecmp_ports) == 1, ecmp_ports
    assert set(eecmp_ports) == set(UPLINKS), eecmp_ports


def test_eecmp_keeps_one_queue_pair_on_one_port():
    switch = Switch("eecmp")
    assert len({switch.port_of(roce_frame(0x777, psn=psn)) for psn in range(40)}) == 1


def test_eecmp_hashes_non_roce_like_ecmp_fields():
    switch = Switch("eecmp")
    loads = Counter(placement(switch, random_flows(400)).values())
    assert set(loads) == set(UPLINKS)


# ---------------------------------------------------------------------------------------- spray
def test_spray_uses_every_port_for_one_flow_and_balances():
    switch = Switch("spray")
    frame = roce_frame(0x10)
    loads = Counter(switch.port_of(frame) for _ in range(1000))
    assert set(loads) == set(UPLINKS)
    assert max(loads.values()) <= 1.1 * 250 and min(loads.values()) >= 0.9 * 250, loads


def test_spray_round_robins_each_flow_from_its_own_start():
    switch = Switch("spray")
    a = [switch.port_of(udp_frame(sport=1)) for _ in range(8)]
    assert sorted(a[:4]) == list(UPLINKS) and a[4:] == a[:4]
    starts = {switch.port_of(udp_frame(sport=sport)) for sport in range(100, 140)}
    assert len(starts) > 1, "flows should not all start on the same port"


# ---------------------------------------------------------------------------------------- flowlet
def flowlet_switch(interval_us, load_aware=0, clock=None):
    """A flowlet Switch with the interval and load-aware flag written as a controller would."""
    switch = Switch("flowlet", clock=clock)
    switch.set_params(flowlet_interval_us=interval_us, flowlet_load_aware=load_aware)
    switch.clock.advance_us(10_000)   # the switch has run a while: a flow's first packet is a gap
    return switch


def flowlet_slot_id(switch):
    """The flowlet id of the only flow slot in use (the one with a last-seen time)."""
    used = [i for i, seen in enumerate(switch.register("MyIngress.flowlet_last_seen")) if seen]
    assert len(used) == 1, used
    return switch.register("MyIngress.flowlet_id")[used[0]]


def test_flowlet_stays_on_one_port_while_gaps_are_below_the_interval():
    switch = flowlet_switch(interval_us=200)
    ports = set()
    for psn in range(300):
        ports.add(switch.port_of(roce_frame(0x42, psn=psn)))
        switch.clock.advance_us(150)
    assert len(ports) == 1
    assert flowlet_slot_id(switch) == 1      # the first packet opened flowlet 1, no other started


def test_flowlet_moves_after_gaps_above_the_interval():
    switch = flowlet_switch(interval_us=200)
    ports = []
    for burst in range(12):
        burst_ports = set()
        for psn in range(5):
            burst_ports.add(switch.port_of(roce_frame(0x42, psn=burst * 5 + psn)))
            switch.clock.advance_us(10)
        assert len(burst_ports) == 1          # one path per flowlet
        ports.append(burst_ports.pop())
        switch.clock.advance_us(500)          # gap > interval: next burst is a new flowlet
    assert flowlet_slot_id(switch) == 12
    assert len(set(ports)) >= 3, ports        # new flowlets are re-hashed over the group


def test_flowlet_path_changes_counter_counts_the_boundaries_that_moved_a_flow():
    """MyIngress.flowlet_path_changes: new flowlets that left by another port, indexed by the new port."""
    switch = flowlet_switch(interval_us=200)
    ports = []
    for burst in range(16):
        for psn in range(4):
            ports.append(switch.port_of(roce_frame(0x42, psn=burst * 4 + psn)))
            switch.clock.advance_us(50)       # below the interval: same flowlet
        switch.clock.advance_us(500)          # above: the next burst is a new flowlet
    moves = Counter(new for old, new in zip(ports, ports[1:]) if new != old)
    counter = switch.state.counters["MyIngress.flowlet_path_changes"]
    counted = {port: counter.read(port)[0] for port in UPLINKS if counter.read(port)[0]}
    assert counted == dict(moves) and 0 < sum(moves.values()) < 16, (counted, ports)
    assert flowlet_slot_id(switch) == 16      # 16 flowlets, the first of which is no change


def test_flowlet_interval_is_read_from_the_parameter_table_at_run_time():
    switch = flowlet_switch(interval_us=1000)
    switch.port_of(roce_frame(0x42))
    switch.clock.advance_us(600)
    switch.port_of(roce_frame(0x42))
    assert flowlet_slot_id(switch) == 1       # 600 us < 1000 us: same flowlet
    switch.set_params(flowlet_interval_us=100)
    switch.clock.advance_us(600)
    switch.port_of(roce_frame(0x42))
    assert flowlet_slot_id(switch) == 2       # 600 us > 100 us: new flowlet


def test_flowlet_interval_defaults_to_the_parameter_table_default():
    switch = Switch("flowlet", clock=FakeClock())
    switch.clock.advance_us(10_000)
    assert PARAMETERS["flowlet_interval_us"].default == 512
    switch.port_of(roce_frame(0x42))
    switch.clock.advance_us(400)
    switch.port_of(roce_frame(0x42))
    assert flowlet_slot_id(switch) == 1       # below the default 512 us
    switch.clock.advance_us(600)
    switch.port_of(roce_frame(0x42))
    assert flowlet_slot_id(switch) == 2


def test_flowlet_hash_seed_is_a_selector_input():
    one, two = flowlet_switch(200), flowlet_switch(200)
    two.set_params(hash_seed=99)
    ports_one = [one.port_of(roce_frame(qp)) for qp in range(64)]
    ports_two = [two.port_of(roce_frame(qp)) for qp in range(64)]
    assert ports_one != ports_two


def _boundary_ports(load_aware, depths_for, qp):
    """Send one packet, set the recorded queue depths, wait past the interval, send again.

    Args:
        load_aware: value of flowlet_load_aware.
        depths_for: callable(first port) -> {port: depth}.
        qp: destination QP of the flow.

    Returns:
        (first port, port after the gap, frame after the gap, flowlet id after the gap)
    """
    switch = flowlet_switch(interval_us=100, load_aware=load_aware)
    first = switch.port_of(roce_frame(qp))
    for port, depth in depths_for(first).items():
        switch.register("port_qdepth")[port] = depth
    switch.clock.advance_us(300)
    (second, data), = switch.send(roce_frame(qp, psn=1))
    return first, second, data, flowlet_slot_id(switch)


@functools.lru_cache(maxsize=None)
def _flows_whose_hash_moves():
    """(qp, first port, port after a gap) of 5 QPs whose second flowlet hashes to another port (plain flowlet)."""
    moving, tried = [], 0
    for qp in range(200, 260):
        tried += 1
        first, second, _, _ = _boundary_ports(0, lambda p: {}, qp)
        if first != second:
            moving.append((qp, first, second))
        if len(moving) == 5:
            break
    assert len(moving) == 5 and tried <= 15, "with 4 ports about 3 in 4 new flowlets move"
    return tuple(moving)


def test_flowlet_load_aware_keeps_the_less_loaded_current_port():
    for qp, first, hashed in _flows_whose_hash_moves():
        got_first, port, data, flowlet_id = _boundary_ports(
            1, lambda p: {u: (0 if u == p else 40) for u in UPLINKS}, qp)
        assert got_first == first
        assert port == first, "the current port has the smaller queue: stay"
        assert Ether(data).dst == str_mac(next_hop_mac(first))    # MACs of the kept next hop
        assert Ether(data)[IP].ttl == 63
        assert flowlet_id == 1                                     # the kept path's flowlet id


def test_flowlet_load_aware_moves_to_the_less_loaded_new_port():
    for qp, first, hashed in _flows_whose_hash_moves():
        _, port, data, flowlet_id = _boundary_ports(
            1, lambda p: {u: (40 if u == p else 0) for u in UPLINKS}, qp)
        assert port == hashed, "the new port has the smaller queue: move"
        assert Ether(data).dst == str_mac(next_hop_mac(hashed))
        assert flowlet_id == 2


def test_flowlet_load_aware_kept_path_persists_within_the_flowlet():
    qp, first, hashed = _flows_whose_hash_moves()[0]
    switch = flowlet_switch(interval_us=100, load_aware=1)
    assert switch.port_of(roce_frame(qp)) == first
    for port in UPLINKS:
        switch.register("port_qdepth")[port] = 0 if port == first else 40
    switch.clock.advance_us(300)
    ports = set()
    for psn in range(1, 20):
        ports.add(switch.port_of(roce_frame(qp, psn=psn)))
        switch.clock.advance_us(10)
    assert ports == {first}


def test_flowlet_without_load_awareness_ignores_queue_depths():
    qp, first, hashed = _flows_whose_hash_moves()[0]
    _, port, _, _ = _boundary_ports(0, lambda p: {u: (0 if u == p else 40) for u in UPLINKS}, qp)
    assert port == hashed


@pytest.mark.parametrize("load_aware", [1, 0])
def test_flowlet_load_aware_avoids_a_real_backlog_in_queued_mode(load_aware):
    """Queue depths recorded by the egress pipeline from the traffic manager, not poked by the test."""
    qp, first, hashed = _flows_whose_hash_moves()[0]
    switch = flowlet_switch(interval_us=100, load_aware=load_aware)
    device = switch.device
    device.set_queue(hashed, rate_pps=1000)                 # one packet per ms: a backlog builds up
    device.receive(HOST_PORT, roce_frame(qp))
    assert [port for port, _ in device.transmit_ready()] == [first]
    packet_out = (hashed << 7).to_bytes(2, "big")
    for _ in range(20):                                      # controller traffic queues up on `hashed`
        device.receive(CPU_PORT, packet_out + udp_frame())
    assert [port for port, _ in device.transmit_ready()] == [hashed]
    switch.clock.advance_us(1000)
    assert [port for port, _ in device.transmit_ready()] == [hashed]
    assert switch.register("port_qdepth")[hashed] == 18      # deq_qdepth, recorded by egress
    switch.clock.advance_us(300)                             # a gap: new flowlet
    device.receive(HOST_PORT, roce_frame(qp, psn=1))
    sent = [port for port, _ in device.transmit_ready()]
    if load_aware:
        assert sent == [first]                               # stayed off the backlogged port
    else:
        assert sent == [] and device.port_stats(hashed)["queue_depth"] == 19   # joined the backlog


# ---------------------------------------------------------------------------------------- pinning
def test_pinning_sends_all_traffic_for_a_destination_out_one_port():
    switch = Switch("pinning")
    for host in range(1, 9):
        dst = f"10.0.2.{host}"
        ports = {switch.port_of(udp_frame(sport=sport, dport=sport + 7, dst=dst)) for sport in range(1000, 1050)}
        ports |= {switch.port_of(roce_frame(qp, dst=dst)) for qp in range(16)}
        assert len(ports) == 1, (dst, ports)


def test_pinning_spreads_destinations_by_slice():
    switch = Switch("pinning")
    ports = [switch.port_of(udp_frame(dst=f"10.0.2.{host}")) for host in range(1, 5)]
    assert sorted(ports) == list(UPLINKS)
    # member index = slice (last address byte) mod group size; members in port order
    assert ports == [UPLINKS[host % 4] for host in range(1, 5)]
    # the same slice behind another rack prefix takes the same uplink
    other = Switch("pinning")
    other.state.tables["MyIngress.ipv4_lpm"].insert(TableEntry(
        matches=[KeyMatch("lpm", value=int(ipaddress.ip_address("10.0.3.0")), prefix_len=24)], group_id=1))
    assert other.port_of(udp_frame(dst="10.0.3.2")) == other.port_of(udp_frame(dst="10.0.2.2"))


def test_switches_with_their_own_salts_do_not_polarize():
    """Two tiers hashing the same flows: with one salt they make the same choice (polarization:
    a FatTree's aggregation switches would use one relative uplink only); with each switch's own
    salt (controllers/parameters.py) every pair of choices occurs."""
    flows = random_flows(400)
    edge, agg = Switch("ecmp", uplinks=(1, 2)), Switch("ecmp", uplinks=(1, 2))
    for switch in (edge, agg):
        switch.set_params(hash_seed=7)
    polarized = {(edge.port_of(flow_frame(f)), agg.port_of(flow_frame(f))) for f in flows}
    assert len(polarized) == 2, polarized
    set_parameters_in_state(edge.state, {"hash_seed": 7}, switch="e0_0")
    set_parameters_in_state(agg.state, {"hash_seed": 7}, switch="a0_0")
    pairs = Counter((edge.port_of(flow_frame(f)), agg.port_of(flow_frame(f))) for f in flows)
    assert set(pairs) == {(1, 1), (1, 2), (2, 1), (2, 2)}
    assert min(pairs.values()) > 60, pairs   # about 100 each
