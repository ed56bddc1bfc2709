/* l3_ecmp.p4 - IPv4 longest-prefix routing with ECMP.
 *
 * ipv4_lpm matches the destination address (lpm); its entries point either
 * at one next hop (set_nhop) or, through the action selector ecmp_selector,
 * at a group of next hops chosen by a hash of the 5-tuple (src/dst address,
 * protocol, src/dst L4 port).  The selector hashes with crc32, not the crc16
 * of the P4 tutorials: crc16 (polynomial 0x8005, a multiple of x+1) maps
 * flows that differ only in a sequential source port onto just 2 of 4 group
 * members (hash % 4 takes 2 values), which would fake ECMP imbalance.  TTL is decremented and the
 * IPv4 checksum recomputed.  Packets that miss, or whose TTL would expire,
 * are dropped.  Per-port counters count every packet in ingress (by ingress
 * port) and in egress (by egress port), so P4Runtime reads show how flows
 * spread over the paths.  Non-IPv4 frames go to the controller (packet_in);
 * the controller sends frames out of a port with packet_out.
 */
#include <core.p4>
#include <v1model.p4>

#include "include/headers.p4"

struct metadata_t {
    flow_t flow;
}

#include "include/parsers.p4"

control MyIngress(inout headers_t hdr,
                  inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {

    counter(512, CounterType.packets_and_bytes) ingress_port_counter;
    action_selector(HashAlgorithm.crc32, 32w1024, 32w14) ecmp_selector;

    action drop() {
        mark_to_drop(standard_metadata);
    }

    action set_nhop(mac_addr_t dmac, mac_addr_t smac, port_t port) {
        hdr.ethernet.srcAddr = smac;
        hdr.ethernet.dstAddr = dmac;
        standard_metadata.egress_spec = port;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }

    action send_to_cpu() {
        standard_metadata.egress_spec = CPU_PORT;
    }

    table ipv4_lpm {
        key = {
            hdr.ipv4.dstAddr   : lpm;
            meta.flow.src_addr : selector;
            meta.flow.dst_addr : selector;
            meta.flow.protocol : selector;
            meta.flow.src_port : selector;
            meta.flow.dst_port : selector;
        }
        actions = {
            set_nhop;
            drop;
            NoAction;
        }
        implementation = ecmp_selector;
        size = 1024;
    }

    apply {
        ingress_port_counter.count((bit<32>)standard_metadata.ingress_port);
        if (hdr.packet_out.isValid()) {
            /* from the controller: send out of the port it names, untouched */
            standard_metadata.egress_spec = hdr.packet_out.egress_port;
            hdr.packet_out.setInvalid();
            exit;
        }
        if (hdr.ipv4.isValid()) {
            if (hdr.ipv4.ttl <= 1) {
                drop();
            } else if (!ipv4_lpm.apply().hit) {
                drop();
            }
        } else {
            send_to_cpu();
        }
    }
}

control MyEgress(inout headers_t hdr,
                 inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {

    counter(512, CounterType.packets_and_bytes) egress_port_counter;

    apply {
        egress_port_counter.count((bit<32>)standard_metadata.egress_port);
        if (standard_metadata.egress_port == CPU_PORT) {
            hdr.packet_in.setValid();
            hdr.packet_in.ingress_port = standard_metadata.ingress_port;
            hdr.packet_in._pad = 0;
        }
    }
}

V1Switch(CommonParser(),
         CommonVerifyChecksum(),
         MyIngress(),
         MyEgress(),
         CommonComputeChecksum(),
         CommonDeparser()) main;
