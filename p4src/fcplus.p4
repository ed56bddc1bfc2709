/* fcplus.p4 - lossless forwarding over an FC+/FC expander's routed paths, with Tagger-style priority transitions.
 *
 * Path choice: per-flow hashing of the RoCE queue pair over the K paths of
 * the (source ToR, destination ToR) pair, recomputed at every hop.  Every
 * switch hashes the same fields (crc32 of source and destination address and
 * the BTH destination QP; UDP ports for non-RoCE traffic) into the same path
 * index, then looks up its own next hop for (source prefix, destination
 * prefix, path index).  Why not destination-based next hops: KSP and DF-KSP
 * paths are not shortest and not trees, so the next hop depends on which
 * path a packet is on, not only on where it goes.  Why not source routing:
 * a label stack would change the packets the hosts' RoCE endpoints see and
 * grow with the path; the hashed index needs no header, keeps a QP on one
 * path (in order, as RoCE needs) and spreads QPs over the K paths.  The
 * price is a table of (pairs x K) entries per switch on those paths.
 *
 * Priorities: the class of a packet inside the fabric is its IPv4 DSCP (1..3
 * lossless, the routing's 1-based hop priority; 0 and 7 lossy), copied into
 * standard_metadata.priority.  The source ToR classifies what hosts send
 * (table MyIngress.classify: RoCE data DSCP 26 -> 1, control DSCP 46 -> 7, the
 * ACKs and CNPs ahead of data and never paused), so the traffic manager
 * queues and accounts it on that class (PFC, testbed/p4/v1model/traffic_manager.py).  A packet moves to
 * the next class where its path makes a down-up turn: table
 * MyIngress.priority_transition matches (ingress port, egress port, class),
 * as Tagger does, and rewrites DSCP and priority.
 *
 * Tables (controllers/fcplus/programmer.py fills them from topologies/fcplus/routing.py):
 *   MyIngress.classify          dscp exact -> set_priority(dscp): hosts' DSCP to the first class
 *   MyIngress.host_route        dstAddr exact -> to_host(dmac, port): a host of this ToR
 *   MyIngress.path_count        (srcAddr, dstAddr) ternary /24 -> set_path_count(n)
 *   MyIngress.path_next         (srcAddr, dstAddr) ternary /24, path index exact -> set_port(port)
 *   MyIngress.priority_transition  (ingress_port, egress_spec, dscp) exact -> set_priority(dscp)
 * PFC counters (the embedded device keeps them, testbed/p4/v1model/device.py PFC_COUNTERS):
 *   MyIngress.pfc_pause_sent, pfc_pause_received, pfc_resume_sent, pfc_paused_us,
 *   index = port * 8 + priority.
 */
#include <core.p4>
#include <v1model.p4>

#include "include/headers.p4"

#define PFC_PORTS 64

struct fcplus_metadata_t {
    bit<16> path_count;
    bit<16> path_index;
    bit<24> entropy;
}

struct metadata_t {
    flow_t flow;
    fcplus_metadata_t fc;
}

#include "include/parsers.p4"

control MyIngress(inout headers_t hdr,
                  inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    counter(PFC_PORTS * 8, CounterType.packets_and_bytes) pfc_pause_sent;
    counter(PFC_PORTS * 8, CounterType.packets_and_bytes) pfc_pause_received;
    counter(PFC_PORTS * 8, CounterType.packets_and_bytes) pfc_resume_sent;
    counter(PFC_PORTS * 8, CounterType.packets_and_bytes) pfc_paused_us;
    counter(512, CounterType.packets_and_bytes) ingress_port_counter;

    action drop() {
        mark_to_drop(standard_metadata);
    }

    action to_host(mac_addr_t dmac, port_t port) {
        hdr.ethernet.dstAddr = dmac;
        standard_metadata.egress_spec = port;
    }

    action set_path_count(bit<16> n) {
        meta.fc.path_count = n;
    }

    action set_port(port_t port) {
        standard_metadata.egress_spec = port;
    }

    action set_priority(bit<6> dscp) {
        hdr.ipv4.dscp = dscp;
    }

    table classify {
        key = { hdr.ipv4.dscp : exact; }
        actions = { set_priority; NoAction; }
        default_action = NoAction();
        size = 64;
    }

    table host_route {
        key = { hdr.ipv4.dstAddr : exact; }
        actions = { to_host; NoAction; }
        default_action = NoAction();
        size = 1024;
    }

    table path_count {
        key = { hdr.ipv4.srcAddr : ternary; hdr.ipv4.dstAddr : ternary; }
        actions = { set_path_count; drop; }
        default_action = drop();
        size = 4096;
    }

    table path_next {
        key = { hdr.ipv4.srcAddr : ternary; hdr.ipv4.dstAddr : ternary; meta.fc.path_index : exact; }
        actions = { set_port; drop; }
        default_action = drop();
        size = 16384;
    }

    table priority_transition {
        key = { standard_metadata.ingress_port : exact; standard_metadata.egress_spec : exact;
                hdr.ipv4.dscp : exact; }
        actions = { set_priority; NoAction; }
        default_action = NoAction();
        size = 4096;
    }

    apply {
        ingress_port_counter.count((bit<32>)standard_metadata.ingress_port);
        if (hdr.packet_out.isValid()) {
            standard_metadata.egress_spec = hdr.packet_out.egress_port;
            hdr.packet_out.setInvalid();
            exit;
        }
        if (!hdr.ipv4.isValid()) {
            mark_to_drop(standard_metadata);
            exit;
        }
        if (hdr.ipv4.ttl <= 1) {
            mark_to_drop(standard_metadata);
            exit;
        }
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
        classify.apply();
        if (!host_route.apply().hit) {
            meta.fc.entropy = 0;
            if (hdr.bth.isValid()) {
                meta.fc.entropy = hdr.bth.dstQP;
            }
            path_count.apply();
            if (meta.fc.path_count != 0) {
                hash(meta.fc.path_index, HashAlgorithm.crc32, (bit<16>)0,
                     { hdr.ipv4.srcAddr, hdr.ipv4.dstAddr, meta.flow.src_port, meta.flow.dst_port,
                       meta.fc.entropy },
                     meta.fc.path_count);
                path_next.apply();
            }
        }
        priority_transition.apply();
        standard_metadata.priority = (bit<3>)hdr.ipv4.dscp;
    }
}

control MyEgress(inout headers_t hdr,
                 inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    counter(512, CounterType.packets_and_bytes) egress_port_counter;
    apply {
        egress_port_counter.count((bit<32>)standard_metadata.egress_port);
    }
}

V1Switch(CommonParser(),
         CommonVerifyChecksum(),
         MyIngress(),
         MyEgress(),
         CommonComputeChecksum(),
         CommonDeparser()) main;
