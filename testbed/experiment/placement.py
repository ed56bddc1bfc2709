"""Predict where a spec's stream QPs hash, without a network: the mode's P4 program on one embedded switch.

A flow-hashing mode (``ecmp``, ``eecmp``) sends every packet of a QP up the
same uplink, chosen by the action selector from the packet's headers and the
switch's hash seed (its parameter table, :mod:`testbed.controllers.parameters`).
:func:`predict_stream_placement` builds one RoCEv2 frame per QP of a spec's stream entries (the same QP numbers, UDP
source ports and addresses the traffic package uses), runs it through the
mode's program on an embedded :class:`~testbed.p4.v1model.device.Device`
whose route has a selector group of ``uplinks`` members, with the spec's
hash seed and the source leaf's own salt, and counts the QPs per group member.  The multiset of counts is
what the source leaf of a 2-tier leaf-spine does (which spine a member is does
not change it), so a test can check that a seed gives the imbalance it relies
on before running the emulation.
"""
import ipaddress
from collections import Counter

from testbed.controllers.parameters import set_parameters_in_state
from testbed.p4.loader import load_program
from testbed.p4.program import ActionCall, KeyMatch
from testbed.p4.state import SwitchState, TableEntry
from testbed.p4.v1model.device import Device
from testbed.traffic import qp as qp_module
from testbed.traffic import roce

_HOST_PORT = 1
_CPU_PORT = 255
_FIRST_UPLINK = 10
_SWITCH_MAC = "02:fb:00:00:00:01"


def _host_address(topo, name):
    return topo.nodeInfo(name)["ip"].split("/")[0], topo.nodeInfo(name)["mac"]


def _switch(program_path, uplinks, hash_seed, name):
    program = load_program(program_path)
    state = SwitchState(program.info)
    profile = state.action_profiles["MyIngress.ecmp_selector"]
    for member in range(uplinks):
        profile.insert_member(member + 1, ActionCall("MyIngress.set_nhop",
                                                     (0x0200000000A0 + member, 0x02FB00000001,
                                                      _FIRST_UPLINK + member)))
    profile.insert_group(1, [(member + 1, 1) for member in range(uplinks)])
    state.tables["MyIngress.ipv4_lpm"].insert(TableEntry(
        matches=[KeyMatch("lpm", value=int(ipaddress.ip_address("0.0.0.0")), prefix_len=0)], group_id=1))
    set_parameters_in_state(state, {"hash_seed": hash_seed}, switch=name)
    return Device(program, state, cpu_port=_CPU_PORT, clock_ns=lambda: 0)


def predict_stream_placement(spec, uplinks):
    """QPs per uplink that the spec's stream entries get on their source leaf.

    Args:
        spec: a validated :class:`~testbed.experiment.spec.ExperimentSpec` (its ``program``,
            ``mode_params["hash_seed"]`` and stream ``traffic`` entries are used).
        uplinks: members of the source leaf's selector group (spines of a leaf-spine).

    Returns:
        dict: ``{"per_uplink": [QPs on member 0, ...], "per_qp": {(src, dst, index): member}}``.
        Meaningful for flow-hashing modes only (ecmp, eecmp): spray and flowlet change
        the member per packet or per flowlet.
    """
    topo = spec.build_topology()
    graph = topo.graph()
    devices = {}  # source leaf -> its switch (every switch hashes with its own salt)
    per_qp = {}
    for entry in spec.traffic:
        if entry.pattern != "stream":
            continue
        for index, (src, dst) in enumerate(entry.pairs()):
            src_ip, src_mac = _host_address(topo, src)
            dst_ip, _ = _host_address(topo, dst)
            leaf = next(iter(graph.neighbors(src)))
            if leaf not in devices:
                devices[leaf] = _switch(spec.program, uplinks, spec.mode_params.get("hash_seed", 0), leaf)
            device = devices[leaf]
            for pair in qp_module.make_queue_pairs(2 * index, 2 * index + 1, entry.qps, job=entry.job,
                                                   udp_sport=entry.udp_sport):
                frame = roce.build_frame(src_mac, _SWITCH_MAC, src_ip, dst_ip, pair.udp_sport, pair.remote_qpn,
                                         0, roce.OP_RDMA_WRITE_ONLY, bytes(roce.extension_length(
                                             roce.OP_RDMA_WRITE_ONLY) + roce.HEADER.size))
                outputs = device.process(_HOST_PORT, bytes(frame))
                ports = {port for port, _ in outputs}
                if len(ports) != 1:
                    raise RuntimeError(f"expected one egress port for {src}->{dst} QP {pair.index}, got {ports}")
                per_qp[(src, dst, pair.index)] = ports.pop() - _FIRST_UPLINK
    counts = Counter(per_qp.values())
    return {"per_uplink": [counts.get(member, 0) for member in range(uplinks)], "per_qp": per_qp}
