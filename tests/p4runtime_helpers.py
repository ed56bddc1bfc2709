"""Helpers shared by the P4Runtime server tests: the demo control plane, small programs, a running server."""
import contextlib
import json

from testbed.p4.device_config import DEVICE_CONFIG_FORMAT

from testbed.p4.program import (
    Action, ActionCall, ActionParam, ActionProfile, ActionRef, ConstEntry, ControllerPacketMetadata,
    Counter, Digest, DigestField, DirectCounter, DirectMeter, KeyMatch, MatchField, Meter,
    PacketMetadataField, ProgramInfo, Register, Table,
)
from testbed.p4runtime.server import P4RuntimeServer
from testbed.embedded_switch.p4runtime_target import EmbeddedTarget

DEVICE_ID = 1

_SMALL_PROGRAM = """
#include <core.p4>
#include <v1model.p4>
header h_t { FIELDS }
struct headers_t { h_t h; }
struct meta_t { bit<8> x; }
parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }
control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    INGRESS
}
control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.h); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


def small_program(ingress, fields="bit<8> f;"):
    """A v1model program of one header ``hdr.h`` (parsed at the frame's start, emitted back) whose
    ingress control ``I`` is ``ingress``.

    Args:
        ingress: the declarations and ``apply`` block of the ingress control.
        fields: the header's fields (default one 8-bit ``f``).
    """
    return _SMALL_PROGRAM.replace("INGRESS", ingress).replace("FIELDS", fields)


def device_config(sources, main="p.p4"):
    """Embedded-target device config bytes for ``sources`` ({file name: text or anything})."""
    return json.dumps({"format": DEVICE_CONFIG_FORMAT, "main": main, "sources": sources}).encode()


def demo_info():
    """A control plane with every kind of object the server handles."""
    info = ProgramInfo(name="demo")
    info.actions["NoAction"] = Action("NoAction")
    info.actions["MyIngress.drop"] = Action("MyIngress.drop")
    info.actions["MyIngress.set_nhop"] = Action(
        "MyIngress.set_nhop", [ActionParam("dmac", 48), ActionParam("port", 9)])
    info.actions["MyIngress.set_port"] = Action("MyIngress.set_port", [ActionParam("port", 9)])
    info.tables["MyIngress.ipv4_lpm"] = Table(
        "MyIngress.ipv4_lpm", [MatchField("hdr.ipv4.dstAddr", 32, "lpm")],
        [ActionRef("MyIngress.set_nhop"), ActionRef("MyIngress.drop"), ActionRef("NoAction", "DEFAULT_ONLY")],
        size=64, default_action=ActionCall("MyIngress.drop"), direct_counter="MyIngress.lpm_counter")
    info.tables["MyIngress.acl"] = Table(
        "MyIngress.acl",
        [MatchField("hdr.ipv4.srcAddr", 32, "ternary"), MatchField("hdr.tcp.dstPort", 16, "range"),
         MatchField("hdr.ipv4.protocol", 8, "optional")],
        [ActionRef("MyIngress.drop"), ActionRef("NoAction")], direct_meter="MyIngress.acl_meter")
    info.tables["MyIngress.ecmp"] = Table(
        "MyIngress.ecmp",
        [MatchField("meta.nhop_group", 16, "exact"), MatchField("hdr.ipv4.srcAddr", 32, "selector")],
        [ActionRef("MyIngress.set_port"), ActionRef("MyIngress.drop")],
        implementation="MyIngress.ecmp_selector")
    info.tables["MyEgress.fixed"] = Table(
        "MyEgress.fixed", [MatchField("standard_metadata.egress_port", 9, "exact")],
        [ActionRef("MyIngress.drop"), ActionRef("NoAction")], default_action=ActionCall("NoAction"),
        const_default_action=True,
        const_entries=[ConstEntry([KeyMatch("exact", 1)], ActionCall("MyIngress.drop"))],
        entries_are_const=True)
    info.tables["MyIngress.flows"] = Table(
        "MyIngress.flows", [MatchField("meta.flow_id", 16, "exact")], [ActionRef("NoAction")],
        idle_timeout=True)
    info.action_profiles["MyIngress.ecmp_selector"] = ActionProfile(
        "MyIngress.ecmp_selector", ["MyIngress.ecmp"], 64, with_selector=True, algorithm="crc16",
        output_width=14)
    info.direct_counters["MyIngress.lpm_counter"] = DirectCounter("MyIngress.lpm_counter", "MyIngress.ipv4_lpm")
    info.direct_meters["MyIngress.acl_meter"] = DirectMeter("MyIngress.acl_meter", "MyIngress.acl")
    info.counters["MyIngress.port_counter"] = Counter("MyIngress.port_counter", 8)
    info.meters["MyIngress.port_meter"] = Meter("MyIngress.port_meter", 4, "PACKETS")
    info.registers["MyIngress.reg"] = Register("MyIngress.reg", 32, 16)
    info.digests["mac_learn_t"] = Digest("mac_learn_t", [DigestField("srcAddr", 48), DigestField("port", 9)])
    info.controller_packet_metadata["packet_in"] = ControllerPacketMetadata(
        "packet_in", [PacketMetadataField("ingress_port", 9), PacketMetadataField("_pad", 7)])
    info.controller_packet_metadata["packet_out"] = ControllerPacketMetadata(
        "packet_out", [PacketMetadataField("egress_port", 9), PacketMetadataField("_pad", 7)])
    return info


@contextlib.contextmanager
def running_server(info=None, cpu_port=510, device_id=DEVICE_ID):
    """An EmbeddedTarget with a P4Runtime server on a free localhost port, stopped on exit.

    Args:
        info: a ProgramInfo to load (None: no pipeline, as switchd starts a switch).
        cpu_port: the target's CPU port.
        device_id: the P4Runtime device id.

    Yields:
        (target, server, address): ``address`` is ``"127.0.0.1:<port>"``.
    """
    target = EmbeddedTarget(cpu_port=cpu_port)
    server = None
    try:
        if info is not None:
            target.load_program_info(info)
        server = P4RuntimeServer(target, device_id=device_id, address="127.0.0.1:0")
        server.start()
        yield target, server, f"127.0.0.1:{server.port}"
    finally:
        if server is not None:
            server.stop()
        target.close()
