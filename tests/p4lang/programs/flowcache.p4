/* A flow cache programmed by a controller: IPv4 packets whose (protocol, source, destination)
 * is in flow_cache are forwarded with the cached next hop; a miss goes to the controller as a
 * packet-in (with the ingress port) through the CPU port; packet-outs from the controller leave
 * by the port their header names. */
#include <core.p4>
#include <v1model.p4>
#include "common.p4"

#define CPU_PORT 255

@controller_header("packet_in")
header packet_in_t { bit<9> ingress_port; bit<7> _pad; }

@controller_header("packet_out")
header packet_out_t { bit<9> egress_port; bit<7> _pad; }

struct metadata { }
struct headers { packet_out_t packet_out; packet_in_t packet_in; ethernet_t ethernet; ipv4_t ipv4; }

parser MyParser(packet_in packet, out headers hdr, inout metadata meta, inout standard_metadata_t standard_metadata) {
    state start {
        transition select(standard_metadata.ingress_port) { CPU_PORT: parse_packet_out; default: parse_ethernet; }
    }
    state parse_packet_out { packet.extract(hdr.packet_out); transition parse_ethernet; }
    state parse_ethernet {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) { TYPE_IPV4: parse_ipv4; default: accept; }
    }
    state parse_ipv4 { packet.extract(hdr.ipv4); transition accept; }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyIngress(inout headers hdr, inout metadata meta, inout standard_metadata_t standard_metadata) {
    action drop() { mark_to_drop(standard_metadata); }
    action cached_action(egressSpec_t port, macAddr_t dstAddr) {
        standard_metadata.egress_spec = port;
        hdr.ethernet.srcAddr = hdr.ethernet.dstAddr;
        hdr.ethernet.dstAddr = dstAddr;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }
    action send_to_controller() {
        standard_metadata.egress_spec = CPU_PORT;
        hdr.packet_in.setValid();
        hdr.packet_in.ingress_port = standard_metadata.ingress_port;
    }
    table flow_cache {
        key = { hdr.ipv4.protocol: exact; hdr.ipv4.srcAddr: exact; hdr.ipv4.dstAddr: exact; }
        actions = { cached_action; drop; send_to_controller; }
        default_action = send_to_controller();
    }
    apply {
        if (hdr.packet_out.isValid()) {
            standard_metadata.egress_spec = hdr.packet_out.egress_port;
            hdr.packet_out.setInvalid();
            exit;
        }
        if (hdr.ipv4.isValid()) { flow_cache.apply(); } else { drop(); }
    }
}

control MyEgress(inout headers hdr, inout metadata meta, inout standard_metadata_t standard_metadata) { apply { } }
control MyComputeChecksum(inout headers hdr, inout metadata meta) { apply { IPV4_CHECKSUM(hdr); } }
control MyDeparser(packet_out packet, in headers hdr) {
    apply { packet.emit(hdr.packet_in); packet.emit(hdr.ethernet); packet.emit(hdr.ipv4); }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(), MyDeparser()) main;
