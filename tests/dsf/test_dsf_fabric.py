"""The DSF fabric in one process: programs, traffic manager and control plane, on a simulated clock.

Expected behaviour comes from seed 000 (the DSF blog: cells sprayed over every
link with reachability, credit-based VOQ scheduling, reassembly and in-order
delivery at the egress interface node, Input Balanced Mode) and from the
documented semantics of the externs (p4src/include/dsf.p4) and of the fabric
header (p4src/include/dsf_headers.p4).  The devices are the real embedded
target running p4src/dsf_rdsw.p4 and p4src/dsf_fabric.p4, programmed by the
real control plane (testbed.controllers.dsf) through in-process sessions, and
wired with rate-limited links (testbed.p4.v1model.wiring): time is simulated, so
the outcomes do not depend on the machine's load.
"""
import ipaddress
import os
import re

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from testbed.controllers.dsf.inprocess import build_inprocess_fabric
from testbed.controllers.dsf.reachability import compute_reachability, failed_link_keys, ibm_rng
from testbed.controllers.fabric_programmer import switch_mac
from testbed.embedded_switch.state_client import StateClient
from testbed.errors import P4LoadError, ParameterError
from testbed.experiment.spec import SpecError, parse_spec
from testbed.modes import P4SRC_DIR, PARAMETERS
from testbed.p4.embedded_only import embedded_only_calls
from testbed.p4.loader import load_program, load_program_from_sources
from testbed.p4.v1model.dsf import constants as C
from testbed.p4.v1model.dsf.cells import CellHeader, segment
from testbed.targets import pipeline_config
from testbed.topologies.dsf.reachability import input_balanced_withdrawals
from testbed.topologies.registry import make_topology
from testbed.traffic import metrics

MS = 1_000_000
RDSW_PROGRAM = os.path.join(P4SRC_DIR, "dsf_rdsw.p4")
FABRIC_PROGRAM = os.path.join(P4SRC_DIR, "dsf_fabric.p4")


def one_cluster(rdsws=2, fdsws=2, hosts=2, host_mbps=10, fabric_mbps=10):
    return make_topology("dsf", clusters=1, rdsw_per_cluster=rdsws, fdsw_per_cluster=fdsws, sdsw=0,
                         hosts_per_rdsw=hosts, hosts_link_mbps=host_mbps, fabric_link_mbps=fabric_mbps)


def udp(fabric, src, dst, size=1000, sport=1000, ttl=64):
    """A frame from host ``src`` to host ``dst`` (``size`` bytes of UDP payload)."""
    nodes = fabric.graph.nodes
    return bytes(Ether(src=nodes[src]["mac"], dst="02:00:00:00:00:01")
                 / IP(src=nodes[src]["ip"].split("/")[0], dst=nodes[dst]["ip"].split("/")[0], ttl=ttl)
                 / UDP(sport=sport, dport=4791) / (b"x" * size))


def send_stream(fabric, src, dst, count, rate_bps, size=1000, sport=1000, start_ns=None):
    """Schedule ``count`` frames from ``src`` to ``dst`` at ``rate_bps``; the n-th carries sport + n."""
    rdsw, port = fabric.host_port(src)
    start = fabric.clock.now_ns if start_ns is None else start_ns
    for index in range(count):
        frame = udp(fabric, src, dst, size, sport + index)
        fabric.wired.schedule(start + int(index * len(frame) * 8 * 1e9 / rate_bps), rdsw, port, frame)


def counter(fabric, switch, name):
    return fabric.states[switch].counters[name]


def uplinks(fabric, rdsw):
    return {key: link for key, link in fabric.wired.links.items()
            if key[0] == rdsw and link.to[0].startswith("fdsw")}


def link_drops(fabric):
    return sum(link.dropped_frames for link in fabric.wired.links.values())


# -- what the P4 side and the traffic manager must agree on -------------------------------------
def test_fabric_header_internal_ports_and_counters_agree_with_the_p4_includes():
    program = load_program(RDSW_PROGRAM)
    header = program.model.types["dsf_cell_t"]
    assert [(field.name, field.type.width) for field in header.fields] == list(C.HEADER_FIELDS)
    assert sum(width for _, width in C.HEADER_FIELDS) == 8 * C.HEADER_BYTES == 8 * C.HEADER_STRUCT.size
    texts = "".join(open(os.path.join(P4SRC_DIR, "include", name)).read()
                    for name in ("dsf.p4", "dsf_headers.p4"))

    def define(name):
        return int(re.search(rf"#define {name} (\d+)", texts).group(1))

    assert define("DSF_CELL_PORT_ID") == C.CELL_PORT and define("DSF_DELIVERY_PORT_ID") == C.DELIVERY_PORT
    assert define("DSF_HEADER_BYTES") == C.HEADER_BYTES and define("DSF_CLASSES") == C.CLASSES
    assert define("DSF_MAX_VOQS") == C.MAX_VOQS and define("DSF_MAX_SYSTEM_PORTS") == C.MAX_SYSTEM_PORTS
    assert define("DSF_REQUEST_REFRESH_US") * 1000 == C.REQUEST_REFRESH_NS
    assert define("DSF_MAX_PENDING_PACKETS") == C.MAX_PENDING_PACKETS
    for index, place in enumerate(C.DROP_PLACES):
        assert define(f"DSF_DROP_{place.upper()}") == index
    assert set(C.COUNTERS) <= set(program.info.counters)
    assert int(re.search(r"ETHERTYPE_DSF = (0x[0-9A-Fa-f]+)", texts).group(1), 16) == C.ETHERTYPE_DSF


def test_a_cell_header_packs_as_the_p4_parser_reads_it():
    header = CellHeader(C.CELL_DATA, src_node=3, dst_node=9, dst_port=17, tc=5, seq=0xDEADBEEF, cell_index=2,
                        last=1, payload_len=492, credit_bytes=7, ttl=11)
    assert CellHeader.unpack(header.pack()) == header
    assert header.pack()[0] == (C.CELL_DATA << 4) | (1 << 3) | 5


def test_segmentation_cuts_a_packet_into_cells_of_the_configured_size():
    packet = bytes(range(256)) * 5  # 1280 bytes
    frames = segment(packet, 1, 2, 3, 0, 42, 256)
    room = 256 - C.HEADER_BYTES
    assert len(frames) == -(-len(packet) // room) == 6
    headers = [CellHeader.unpack(frame[C.ETHERNET_BYTES:]) for frame in frames]
    assert [h.cell_index for h in headers] == list(range(6)) and [h.last for h in headers] == [0] * 5 + [1]
    assert [h.payload_len for h in headers] == [214, 214, 213, 213, 213, 213]  # equal pieces, no short tail
    assert all(h.seq == 42 and h.dst_node == 2 for h in headers)
    assert b"".join(frame[C.ETHERNET_BYTES + C.HEADER_BYTES:] for frame in frames) == packet
    assert all(len(frame) - C.ETHERNET_BYTES <= 256 for frame in frames)


# -- forwarding, spraying, reassembly --------------------------------------------------------------
def test_a_packet_crosses_as_cells_and_leaves_like_a_routed_packet():
    fabric = build_inprocess_fabric(one_cluster())
    sent = udp(fabric, "h1", "h3", size=1000)
    rdsw, port = fabric.host_port("h1")
    fabric.wired.send(rdsw, port, sent)
    fabric.wired.run(duration_ns=200 * MS)
    (_, received), = fabric.wired.delivered["h3"]
    original, arrived = Ether(sent), Ether(received)
    assert arrived.dst == fabric.graph.nodes["h3"]["mac"]
    assert arrived.src == switch_mac(fabric.programmer.switches["rdsw1"]["device_id"])
    assert arrived[IP].ttl == original[IP].ttl - 1
    check = arrived[IP].copy()
    del check.chksum
    assert IP(bytes(check)).chksum == arrived[IP].chksum
    assert bytes(arrived[UDP].payload) == bytes(original[UDP].payload)
    cells = sum(link.sent_frames for link in uplinks(fabric, "rdsw0").values())
    data_cells = -(-len(sent) // (PARAMETERS["dsf_cell_bytes"].default - C.HEADER_BYTES))
    assert cells >= data_cells and counter(fabric, "rdsw1", C.COUNTER_REASSEMBLED).packets[
        fabric.programmer.addressing.system_ports["h3"].number] == 1


def test_cells_are_sprayed_round_robin_over_every_uplink_whatever_the_flow():
    fabric = build_inprocess_fabric(one_cluster(fdsws=4, hosts=1))
    rdsw, port = fabric.host_port("h1")
    for _ in range(40):  # one flow: a hash would put every packet on one uplink
        fabric.wired.send(rdsw, port, udp(fabric, "h1", "h2"))
        fabric.wired.run(duration_ns=2 * MS)
    fabric.wired.run(duration_ns=200 * MS)
    assert len(fabric.wired.delivered["h2"]) == 40
    cells = [link.sent_frames for link in uplinks(fabric, "rdsw0").values()]
    assert len(cells) == 4 and max(cells) - min(cells) <= 1
    # bytes too: a packet's cells have equal sizes, and control cells keep their own rotation
    assert metrics.max_mean_ratio([link.sent_bytes for link in uplinks(fabric, "rdsw0").values()]) <= 1.02


def test_delivery_is_in_order_per_source_voq_even_when_paths_differ_in_delay():
    fabric = build_inprocess_fabric(one_cluster(hosts=1))
    for (name, port), link in fabric.wired.links.items():
        if name == "fdsw0":
            link.delay_ns = 3 * MS  # every cell through fdsw0 arrives 3 ms after its sibling through fdsw1
    send_stream(fabric, "h1", "h2", 60, 5e6, sport=2000)
    fabric.wired.run(duration_ns=500 * MS)
    ports = [Ether(frame)[UDP].sport for _, frame in fabric.wired.delivered["h2"]]
    assert ports == list(range(2000, 2060))


def test_a_missing_cell_is_given_up_after_the_timeout_counted_and_the_voq_goes_on():
    fabric = build_inprocess_fabric(one_cluster(hosts=1), mode_params={"dsf_reassembly_timeout_us": 20_000})
    rdsw1 = fabric.wired.devices["rdsw1"]
    dst_port = fabric.programmer.addressing.system_ports["h2"].number
    fabric_port = next(port for (name, port), link in fabric.wired.links.items() if name == "rdsw1")
    packets = [udp(fabric, "h1", "h2", size=900, sport=3000 + n) for n in range(3)]
    cells = [segment(packet, 1, 2, dst_port, 0, seq, 512) for seq, packet in enumerate(packets)]
    for frame in [cells[0][0]] + cells[0][2:] + cells[1] + cells[2]:  # cell 1 of packet 0 is lost
        rdsw1.receive(fabric_port, frame)
    fabric.wired.run(duration_ns=15 * MS)
    assert fabric.wired.delivered["h2"] == []  # packets 1 and 2 wait behind packet 0
    fabric.wired.run(duration_ns=10 * MS)
    assert [Ether(f)[UDP].sport for _, f in fabric.wired.delivered["h2"]] == [3001, 3002]
    drops = counter(fabric, "rdsw1", C.COUNTER_DROPS)
    lost_bytes = sum(len(frame) - C.ETHERNET_BYTES - C.HEADER_BYTES for frame in cells[0]) \
        - (len(cells[0][1]) - C.ETHERNET_BYTES - C.HEADER_BYTES)
    assert (drops.packets[C.DROP_REASSEMBLY_TIMEOUT], drops.bytes[C.DROP_REASSEMBLY_TIMEOUT]) == (1, lost_bytes)
    rdsw1.receive(fabric_port, cells[0][1])  # the lost cell turns up after all: too late
    assert drops.packets[C.DROP_LATE_CELL] == 1


# -- the credit loop ----------------------------------------------------------------------------
def incast(credits, seconds=1.5):
    """8:1 onto h1 at twice its 4 Mbit/s; fabric links 3 Mbit/s (0.75 of a host port)."""
    fabric = build_inprocess_fabric(one_cluster(rdsws=5, hosts=2, host_mbps=4, fabric_mbps=3),
                                    mode_params={"dsf_credits": credits}, queue_frames=64)
    for position, sender in enumerate(f"h{n}" for n in range(3, 11)):
        send_stream(fabric, sender, "h1", int(seconds * 1e6 / 8 / 1042), 1e6,
                    start_ns=fabric.clock.now_ns + position * 1000)
    start = fabric.clock.now_ns
    fabric.wired.run(until_ns=start + int(seconds * 1e9))
    window = [(t, f) for t, f in fabric.wired.delivered["h1"] if t >= start + 0.5e9]
    busy = sum(len(f) for _, f in window) * 8 / ((seconds - 0.5) * 4e6)
    return fabric, busy


def test_with_credits_the_incast_waits_in_the_voqs_and_the_host_port_stays_busy():
    fabric, busy = incast(credits=1)
    assert busy >= 0.95
    assert link_drops(fabric) == 0
    for name in fabric.states:
        if name.startswith("rdsw"):
            assert sum(counter(fabric, name, C.COUNTER_DROPS).packets) == 0
    depth = sum(sum(counter(fabric, f"rdsw{n}", C.COUNTER_VOQ_ENQUEUED).packets)
                - sum(counter(fabric, f"rdsw{n}", C.COUNTER_VOQ_DEQUEUED).packets) for n in range(1, 5))
    assert depth > 100  # the excess waits at the ingress nodes
    grants = counter(fabric, "rdsw0", C.COUNTER_CREDIT_GRANTED).packets[fabric.host_port("h1")[1]]
    expected = 4e6 * 1.5 / (PARAMETERS["dsf_grant_bytes"].default * 8)  # grants at the port's rate
    assert 0.9 * expected <= grants <= 1.02 * expected


def test_without_credits_the_incast_overflows_the_fabric():
    fabric, busy = incast(credits=0)
    assert link_drops(fabric) > 0
    assert counter(fabric, "rdsw0", C.COUNTER_DROPS).packets[C.DROP_REASSEMBLY_TIMEOUT] > 0
    assert busy < 0.95


def test_a_full_voq_drops_at_its_tail():
    fabric = build_inprocess_fabric(one_cluster(hosts=1), mode_params={"dsf_voq_depth_pkts": 5})
    rdsw, port = fabric.host_port("h1")
    for n in range(12):  # at once: no grant can arrive in between
        fabric.wired.send(rdsw, port, udp(fabric, "h1", "h2", sport=4000 + n))
    drops = counter(fabric, "rdsw0", C.COUNTER_DROPS).packets[C.DROP_VOQ_TAIL]
    assert drops == 7 and sum(counter(fabric, "rdsw0", C.COUNTER_VOQ_ENQUEUED).packets) == 5
    fabric.wired.run(duration_ns=200 * MS)
    assert [Ether(f)[UDP].sport for _, f in fabric.wired.delivered["h2"]] == list(range(4000, 4005))


# -- parameters ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name,value,allowed", [
    ("dsf_cell_bytes", 20, "[21, 1500]"), ("dsf_cell_bytes", 1501, "[21, 1500]"),
    ("dsf_grant_bytes", 0, "[1, 1000000]"), ("dsf_credit_rate_pct", 101, "[1, 100] % of the egress port rate"),
    ("dsf_voq_depth_pkts", 0, "[1, 100000]")])
def test_bad_parameters_are_refused_naming_the_field_and_the_range(name, value, allowed):
    with pytest.raises(ParameterError) as caught:
        PARAMETERS[name].check(value, f"mode_params.{name}")
    assert caught.value.field == f"mode_params.{name}" and allowed in str(caught.value)
    spec = {"name": "x", "seed": 1, "topology": {"kind": "dsf", "params": {"clusters": 1, "sdsw": 0}},
            "mode": "dsf", "mode_params": {name: value}}
    with pytest.raises(SpecError) as caught:
        parse_spec(spec, check_machine=False)
    assert str(caught.value).startswith(f"mode_params.{name}: must be an integer in {allowed.split(' ')[0]}")


def test_values_written_by_hand_past_the_checks_are_refused_by_the_traffic_manager():
    logs = []
    fabric = build_inprocess_fabric(one_cluster(hosts=1), on_log=logs.append)
    StateClient(fabric.states["rdsw0"]).set_default_action(
        "MyIngress.dsf_params", "MyIngress.set_dsf_params",
        {"cell_bytes": 10, "grant_bytes": 4096, "credit_rate_pct": 100, "voq_depth": 10,
         "reassembly_timeout_us": 1000, "credits": 1})
    rdsw, port = fabric.host_port("h1")
    fabric.wired.send(rdsw, port, udp(fabric, "h1", "h2"))
    assert counter(fabric, "rdsw0", C.COUNTER_DROPS).packets[C.DROP_BAD_PARAMETER] == 1
    assert any("cell_bytes=10" in line and "[21, 1500]" in line for line in logs)


def test_the_parameter_defaults_of_the_program_are_those_of_the_mode_table():
    table = load_program(RDSW_PROGRAM).info.tables["MyIngress.dsf_params"]
    names = [PARAMETERS[n] for n in PARAMETERS if PARAMETERS[n].table == "MyIngress.dsf_params"]
    assert len(names) == 6 and all(p.default in table.default_action.args for p in names)


# -- BMv2 ---------------------------------------------------------------------------------------
def test_the_interface_node_program_is_refused_for_bmv2_naming_the_externs():
    with pytest.raises(ParameterError) as caught:
        pipeline_config(RDSW_PROGRAM, "bmv2")
    message = str(caught.value)
    for name in ("dsf_voq_enqueue", "dsf_credit_request", "dsf_credit_grant", "dsf_reassemble"):
        assert name in message
    assert "DSF traffic manager" in message
    spec = {"name": "x", "seed": 1, "target": "bmv2", "mode": "dsf",
            "topology": {"kind": "dsf", "params": {"clusters": 1, "sdsw": 0}}}
    with pytest.raises(SpecError) as caught:
        parse_spec(spec)
    assert caught.value.field == "target" and "dsf_voq_enqueue" in str(caught.value)


def test_the_fabric_node_program_is_plain_v1model():
    assert embedded_only_calls(FABRIC_PROGRAM) == {}
    assert embedded_only_calls(RDSW_PROGRAM).keys() == set(C.EXTERNS)


_WRONG = """
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> f; }
struct headers_t { h_t h; }
struct meta_t { bit<8> x; }
DECLARATION
parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }
control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { INGRESS } }
control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { EGRESS } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.h); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""
_GRANT = ("@embedded_only(\"x\") extern void dsf_credit_grant(in bit<16> dst_port, in bit<3> tc, "
          "in bit<32> credit_bytes, in bit<16> share_permille);")
_CALL = "dsf_credit_grant(1, 0, 4096, 1000);"


@pytest.mark.parametrize("declaration,ingress,egress,problem", [
    (_GRANT.replace('@embedded_only("x") ', ""), _CALL, "", "declare it @embedded_only"),
    (_GRANT.replace("share_permille", "share"), _CALL, "", "the embedded target's are"),
    (_GRANT, "", _CALL, "only allowed in the ingress control"),
])
def test_a_target_extern_must_be_declared_and_called_as_the_target_has_it(declaration, ingress, egress, problem):
    source = _WRONG.replace("DECLARATION", declaration).replace("INGRESS", ingress).replace("EGRESS", egress)
    with pytest.raises(P4LoadError) as caught:
        load_program_from_sources("p.p4", {"p.p4": source})
    assert problem in str(caught.value) and "p.p4:" in str(caught.value)


# -- reachability and Input Balanced Mode -------------------------------------------------------
FIGURE4_FAILURE = [("fdsw3", "rdsw7")]  # FDSW1 of cluster X loses its link to RDSW3 of cluster X


def test_withdrawals_are_those_of_dsf_reachability_for_the_seed_and_the_tables_follow_them():
    graph = make_topology("dsf").graph()
    for seed in (1, 2, 3):
        state = compute_reachability(graph, FIGURE4_FAILURE, input_balanced=True, seed=seed)
        expected = input_balanced_withdrawals(graph, "rdsw7", failed_link_keys(graph, FIGURE4_FAILURE),
                                              rng=ibm_rng(seed, "rdsw7"))
        assert state.withdrawals["rdsw7"] == sorted(expected)
        node = 8
        for advertiser, neighbour, key in expected:  # the neighbour no longer sends toward rdsw7 on that link
            port = graph[neighbour][advertiser][key]
            port = port["a_port"] if port["a"] == neighbour else port["b_port"]
            assert port not in state.next_hops[neighbour].get(node, [])
        x_minus_1 = [state.shares[f"rdsw{n}"][node] for n in range(4)]
        assert sum(x_minus_1) == 2000  # 50% of cluster X-1's capacity toward rdsw7, however it is spread
    plain = compute_reachability(graph, FIGURE4_FAILURE, input_balanced=False)
    assert plain.withdrawals["rdsw7"] == [] and plain.next_hops["fdsw3"].get(8, []) == []
    assert [plain.shares[f"rdsw{n}"][8] for n in range(4)] == [1000] * 4


def figure4_failure(input_balanced, seconds_before=0.6, seconds_after=0.8):
    """Cluster X-1's hosts send toward rdsw7's host; fdsw3-rdsw7 fails.  Returns (fabric, before, after)."""
    topo = make_topology("dsf", hosts_per_rdsw=1, hosts_link_mbps=4, fabric_link_mbps=3.2)
    fabric = build_inprocess_fabric(topo, queue_frames=64, input_balanced=input_balanced, ibm_seed=1)
    start = fabric.clock.now_ns
    total = seconds_before + seconds_after + 0.2
    for position, sender in enumerate(("h1", "h2", "h3", "h4")):  # 2 Mbit/s each, for rdsw7's 4 Mbit/s port
        send_stream(fabric, sender, "h8", int(total * 2e6 / 8 / 1042), 2e6, start_ns=start + position * 1000)

    def sent():
        return sum(link.sent_bytes for n in range(4) for link in uplinks(fabric, f"rdsw{n}").values())

    fabric.wired.run(until_ns=start + int(0.2e9))
    first = sent()
    fabric.wired.run(until_ns=start + int((0.2 + seconds_before) * 1e9))
    before = (sent() - first) / seconds_before
    end = fabric.graph["fdsw3"]["rdsw7"][min(fabric.graph["fdsw3"]["rdsw7"])]
    fabric.wired.set_link(end["a"], end["a_port"], False)
    fabric.wired.run(duration_ns=50 * MS)  # the controller's detection delay
    fabric.programmer.reroute({("fdsw3", "rdsw7")})
    fabric.wired.run(duration_ns=200 * MS)
    second = sent()
    queue_drops = link_drops(fabric)
    fabric.wired.run(duration_ns=int(seconds_after * 1e9))
    after = (sent() - second) / seconds_after
    return fabric, before, after, link_drops(fabric) - queue_drops


def test_input_balanced_mode_halves_cluster_x_minus_1_toward_rdsw3_without_fabric_drops():
    _fabric, before, after, drops = figure4_failure(input_balanced=True)
    assert 0.45 <= after / before <= 0.55
    assert drops == 0


def test_without_input_balanced_mode_the_last_link_overflows():
    _fabric, before, after, drops = figure4_failure(input_balanced=False)
    assert after / before > 0.9
    assert drops > 0


def test_a_destination_without_reachability_loses_its_table_entry_and_cells_are_counted():
    fabric = build_inprocess_fabric(one_cluster(hosts=1))
    programmer = fabric.programmer
    programmer.reroute({("fdsw0", "rdsw1"), ("fdsw1", "rdsw1")})  # rdsw1 cut off
    assert programmer.reachability.next_hops["rdsw0"].get(2, []) == []
    table = fabric.states["fdsw0"].tables["MyIngress.dsf_reach"]
    assert [entry.matches[0].value for entry in table.entries()] == [1]
    rdsw, port = fabric.host_port("h1")
    fabric.wired.send(rdsw, port, udp(fabric, "h1", "h2"))
    fabric.wired.run(duration_ns=50 * MS)
    assert counter(fabric, "rdsw0", "MyIngress.dsf_fabric_drops").packets[0] >= 1  # its credit request
    programmer.reroute(set())
    assert sorted(programmer.reachability.next_hops["rdsw0"][2]) == [2, 3]
    fabric.wired.run(duration_ns=100 * MS)
    assert len(fabric.wired.delivered["h2"]) == 1  # the VOQ's refreshed request finally got through


def test_node_numbers_and_system_ports_are_written_to_every_interface_node():
    fabric = build_inprocess_fabric(one_cluster(rdsws=3, hosts=2))
    hosts = fabric.states["rdsw2"].tables["MyIngress.dsf_hosts"]
    addresses = sorted(str(ipaddress.ip_address(e.matches[0].value)) for e in hosts.entries())
    assert addresses == sorted(fabric.graph.nodes[h]["ip"].split("/")[0] for h in ("h1", "h2", "h3", "h4", "h5", "h6"))
    node = fabric.states["rdsw2"].tables["MyIngress.dsf_node"].default_action
    assert node.args == (3,)
    ports = fabric.states["rdsw2"].tables["MyIngress.dsf_system_ports"]
    assert sorted(e.matches[0].value for e in ports.entries()) == [4, 5]
