"""The UDP source-port rule of RoCE QPs (per_qp / per_nic_pair) through the traffic package and specs.

No Mininet: QP objects, frames built by the sender's FrameFactory, the
sender/collective/CLI option checks, the experiment spec field, and the
placement predictor (embedded P4 switch) for the low-entropy case.
"""
import argparse
import copy

import pytest
from scapy.layers.inet import UDP
from scapy.layers.l2 import Ether

from testbed.errors import ParameterError
from testbed.experiment.spec import SpecError, parse_spec
from testbed.traffic import collectives, qp, roce, sender
from testbed.commands import traffic as traffic_command

BASE_SPEC = {
    "name": "sport", "seed": 4,
    "topology": {"kind": "clos", "params": {"leaves": 2, "spines": 4, "hosts_per_leaf": 4}},
    "traffic": [{"pattern": "stream", "hosts": ["h1", "h5", "h2", "h6", "h3", "h7", "h4", "h8"], "qps": 4,
                 "duration_s": 1}],
}


def spec_with(**traffic_fields):
    """BASE_SPEC with its traffic entry updated."""
    data = copy.deepcopy(BASE_SPEC)
    data["traffic"][0].update(traffic_fields)
    return data


def test_default_rule_is_per_qp_linux_style():
    pairs = qp.make_queue_pairs(0, 1, 4, job=3)
    assert [p.udp_sport for p in pairs] == [roce.udp_source_port(p.local_qpn, p.remote_qpn) for p in pairs]
    assert len({p.udp_sport for p in pairs}) == 4


def test_per_nic_pair_gives_one_port_per_pair_from_the_pair():
    pairs = qp.make_queue_pairs(2, 5, 8, job=7, udp_sport="per_nic_pair")
    ports = {p.udp_sport for p in pairs}
    assert len(ports) == 1
    first = qp.make_queue_pairs(2, 5, 1, job=7)[0]
    assert ports == {first.udp_sport}  # the port of the pair's first QP, as per_qp gives it
    # deterministic, and a different pair (or job) gets its own port
    assert {p.udp_sport for p in qp.make_queue_pairs(2, 5, 3, job=7, udp_sport="per_nic_pair")} == ports
    others = {qp.make_queue_pairs(src, dst, 2, job=7, udp_sport="per_nic_pair")[1].udp_sport
              for src, dst in ((0, 1), (2, 3), (4, 5), (6, 7))}
    assert len(others) == 4
    # destination QPs still differ: the only per-QP entropy left is the BTH destination QP
    assert len({p.remote_qpn for p in pairs}) == 8


def test_unknown_rule_is_refused():
    with pytest.raises(ValueError, match="per_qp, per_nic_pair"):
        qp.make_queue_pairs(0, 1, 2, udp_sport="random")
    with pytest.raises(ValueError):
        qp.udp_source_port_for("bogus", 0, 1, 0)


def test_sender_frames_carry_the_rule_port():
    factory = sender.FrameFactory("00:00:0a:00:00:01", "10.0.0.1")
    frames = []
    for pair in qp.make_queue_pairs(0, 1, 3, udp_sport="per_nic_pair"):
        patcher = factory.patcher("00:00:0a:00:00:02", "10.0.0.2", pair, 64)
        frames.append(Ether(patcher.frame(roce.OP_RDMA_WRITE_MIDDLE, pair.next_psn, bytes(roce.HEADER.size))))
    assert len({frame[UDP].sport for frame in frames}) == 1
    assert frames[0][UDP].sport == qp.udp_source_port_for("per_nic_pair", 0, 1, 2)


def test_sender_cli_option_and_validation():
    args = sender.build_argument_parser().parse_args(
        ["--intf", "x", "--dst-ip", "10.0.0.2", "--dst-mac", "00:00:00:00:00:02", "--udp-sport", "per_nic_pair"])
    assert args.udp_sport == "per_nic_pair"
    assert sender.build_argument_parser().parse_args(
        ["--intf", "x", "--dst-ip", "10.0.0.2", "--dst-mac", "00:00:00:00:00:02"]).udp_sport == "per_qp"
    config = sender.SenderConfig(intf="does-not-exist0", dst_ip="10.0.0.2", dst_mac="00:00:00:00:00:02",
                                 udp_sport="nope")
    with pytest.raises(ParameterError) as info:
        sender.run_sender(config)
    assert info.value.field == "--udp-sport"


def test_collective_and_testbed_traffic_options():
    collectives.validate_options("allreduce", 1024, 2, 10.0, "roundrobin", udp_sport="per_nic_pair")
    with pytest.raises(ParameterError) as info:
        collectives.validate_options("allreduce", 1024, 2, 10.0, "roundrobin", udp_sport="per_host")
    assert info.value.field == "--udp-sport" and "per_nic_pair" in str(info.value)
    parser = argparse.ArgumentParser()
    traffic_command.register(parser.add_subparsers())
    args = parser.parse_args(["traffic", "stream", "--hosts", "h1,h2", "--udp-sport", "per_nic_pair"])
    assert traffic_command.validate(args) == ["h1", "h2"]
    args = parser.parse_args(["traffic", "stream", "--hosts", "h1,h2", "--udp-sport", "sideways"])
    with pytest.raises(ParameterError):
        traffic_command.validate(args)


def test_spec_field_default_and_error_names_path_and_allowed_values():
    assert parse_spec(spec_with(), check_machine=False).traffic[0].udp_sport == "per_qp"
    assert parse_spec(spec_with(udp_sport="per_nic_pair"), check_machine=False).traffic[0].udp_sport == \
        "per_nic_pair"
    with pytest.raises(SpecError) as info:
        parse_spec(spec_with(udp_sport="per_flow"), check_machine=False)
    message = str(info.value)
    assert message.startswith("traffic[0].udp_sport:") and "per_qp" in message and "per_nic_pair" in message


def test_placement_per_nic_pair_ecmp_sees_one_flow_per_pair_eecmp_sees_each_qp():
    from testbed.experiment.placement import predict_stream_placement

    spec = parse_spec(spec_with(udp_sport="per_nic_pair"), check_machine=False)
    ecmp = predict_stream_placement(spec.with_mode("ecmp"), 4)
    eecmp = predict_stream_placement(spec.with_mode("eecmp"), 4)
    assert sum(ecmp["per_uplink"]) == sum(eecmp["per_uplink"]) == 16
    # ECMP: the 4 QPs of a NIC pair share one uplink
    for pair in range(4):
        members = {member for (src, dst, index), member in ecmp["per_qp"].items()
                   if (src, dst) == spec.traffic[0].pairs()[pair]}
        assert len(members) == 1
    # E-ECMP separates QPs of one pair on some pair (the destination QP is hashed)
    assert any(len({member for (src, dst, _), member in eecmp["per_qp"].items() if (src, dst) == pair}) > 1
               for pair in spec.traffic[0].pairs())
    # per_qp: ECMP already separates QPs of a pair (the runner's earlier, high-entropy setting)
    high = predict_stream_placement(parse_spec(spec_with(), check_machine=False).with_mode("ecmp"), 4)
    assert any(len({member for (src, dst, _), member in high["per_qp"].items() if (src, dst) == pair}) > 1
               for pair in spec.traffic[0].pairs())


def test_collective_agent_data_qps_follow_the_plan_rule():
    from testbed.traffic.agent import Agent

    peers = [{"rank": rank, "ip": f"10.0.0.{rank + 1}", "mac": f"00:00:0a:00:00:0{rank + 1}"} for rank in range(2)]
    plan = {"rank": 0, "intf": "unused", "peers": peers, "steps": [], "qps": 4, "job": 5}
    per_qp = Agent(dict(plan))._data_qps(1)
    per_pair = Agent(dict(plan, udp_sport="per_nic_pair"))._data_qps(1)
    assert len({pair.udp_sport for pair in per_qp}) == 4
    assert {pair.udp_sport for pair in per_pair} == {qp.udp_source_port_for("per_nic_pair", 0, 1, 0, job=5)}
