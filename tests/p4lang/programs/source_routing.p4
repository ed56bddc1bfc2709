/* Source routing: after Ethernet (etherType 0x1234) a stack of (bottom-of-stack, port) hops;
 * each switch sends the packet out of the first hop's port and pops it; at the last hop the
 * etherType becomes IPv4 again and the TTL is decremented. */
#include <core.p4>
#include <v1model.p4>
#include "common.p4"

const bit<16> TYPE_SRCROUTING = 0x1234;
#define MAX_HOPS 9

header srcRoute_t { bit<1> bos; bit<15> port; }

struct metadata { }
struct headers { ethernet_t ethernet; srcRoute_t[MAX_HOPS] srcRoutes; ipv4_t ipv4; }

parser MyParser(packet_in packet, out headers hdr, inout metadata meta, inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) { TYPE_SRCROUTING: parse_srcRouting; default: accept; }
    }
    state parse_srcRouting {
        packet.extract(hdr.srcRoutes.next);
        transition select(hdr.srcRoutes.last.bos) { 1: parse_ipv4; default: parse_srcRouting; }
    }
    state parse_ipv4 { packet.extract(hdr.ipv4); transition accept; }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyIngress(inout headers hdr, inout metadata meta, inout standard_metadata_t standard_metadata) {
    action drop() { mark_to_drop(standard_metadata); }
    action srcRoute_nhop() {
        standard_metadata.egress_spec = (bit<9>)hdr.srcRoutes[0].port;
        hdr.srcRoutes.pop_front(1);
    }
    action srcRoute_finish() { hdr.ethernet.etherType = TYPE_IPV4; }
    action update_ttl() { hdr.ipv4.ttl = hdr.ipv4.ttl - 1; }
    apply {
        if (hdr.srcRoutes[0].isValid()) {
            if (hdr.srcRoutes[0].bos == 1) { srcRoute_finish(); }
            srcRoute_nhop();
            if (hdr.ipv4.isValid()) { update_ttl(); }
        } else {
            drop();
        }
    }
}

control MyEgress(inout headers hdr, inout metadata meta, inout standard_metadata_t standard_metadata) { apply { } }
control MyComputeChecksum(inout headers hdr, inout metadata meta) { apply { IPV4_CHECKSUM(hdr); } }
control MyDeparser(packet_out packet, in headers hdr) {
    apply { packet.emit(hdr.ethernet); packet.emit(hdr.srcRoutes); packet.emit(hdr.ipv4); }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(), MyDeparser()) main;
