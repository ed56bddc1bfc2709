/* Quality of service: IPv4 forwarding plus a DiffServ code point chosen by the transport
 * protocol: UDP gets Expedited Forwarding (46), TCP Assured Forwarding AF21 (18), anything
 * else Best Effort (0). */
#include <core.p4>
#include <v1model.p4>
#include "common.p4"

const bit<6> DSCP_EF   = 46;
const bit<6> DSCP_AF21 = 18;
const bit<6> DSCP_BE   = 0;

struct metadata { }
struct headers { ethernet_t ethernet; ipv4_t ipv4; }

parser MyParser(packet_in packet, out headers hdr, inout metadata meta, inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) { TYPE_IPV4: parse_ipv4; default: accept; }
    }
    state parse_ipv4 { packet.extract(hdr.ipv4); transition accept; }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyIngress(inout headers hdr, inout metadata meta, inout standard_metadata_t standard_metadata) {
    action drop() { mark_to_drop(standard_metadata); }
    action ipv4_forward(macAddr_t dstAddr, egressSpec_t port) {
        standard_metadata.egress_spec = port;
        hdr.ethernet.srcAddr = hdr.ethernet.dstAddr;
        hdr.ethernet.dstAddr = dstAddr;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }
    action expedited_forwarding() { hdr.ipv4.dscp = DSCP_EF; }
    action assured_forwarding() { hdr.ipv4.dscp = DSCP_AF21; }
    action best_effort() { hdr.ipv4.dscp = DSCP_BE; }
    table ipv4_lpm {
        key = { hdr.ipv4.dstAddr: lpm; }
        actions = { ipv4_forward; drop; }
        default_action = drop();
    }
    apply {
        if (hdr.ipv4.isValid()) {
            if (hdr.ipv4.protocol == PROTO_UDP) { expedited_forwarding(); }
            else if (hdr.ipv4.protocol == PROTO_TCP) { assured_forwarding(); }
            else { best_effort(); }
            ipv4_lpm.apply();
        }
    }
}

control MyEgress(inout headers hdr, inout metadata meta, inout standard_metadata_t standard_metadata) { apply { } }
control MyComputeChecksum(inout headers hdr, inout metadata meta) { apply { IPV4_CHECKSUM(hdr); } }
control MyDeparser(packet_out packet, in headers hdr) { apply { packet.emit(hdr.ethernet); packet.emit(hdr.ipv4); } }

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(), MyDeparser()) main;
