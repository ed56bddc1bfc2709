/* dsf_rdsw.p4 - a DSF interface node (RDSW) (seed 000).
 *
 * The programmable part of a Jericho-class interface node; the fixed-function
 * part (VOQs gated by credit, segmentation into cells, reassembly) is the
 * embedded target's DSF traffic manager, called through the externs of
 * include/dsf.p4 (so this program runs on the embedded target only; BMv2 refuses
 * it by name).  What the program does with each frame:
 *
 *  - A packet from a host (IPv4): MyIngress.dsf_hosts (LPM on the destination
 *    address) gives the egress interface node, the destination system port and
 *    the MACs the packet leaves the fabric with; MyIngress.dsf_class maps the DSCP
 *    to a traffic class (default 0); the TTL drops by one (the whole fabric is one
 *    router).  A destination on this node is switched locally; any other joins the
 *    VOQ (system port, class) toward its node: dsf_voq_enqueue.
 *  - A cell for another node (a transit cell, or one the traffic manager made:
 *    data cells of a granted packet, credit requests, credit grants, entering on
 *    DSF_CELL_PORT): sprayed toward its dst_node (include/dsf_forwarding.p4).
 *  - A cell for this node: a DATA cell goes to reassembly (dsf_reassemble); a
 *    CREDIT_REQUEST to the port scheduler of its system port (dsf_credit_request,
 *    with the port's rate from MyIngress.dsf_system_ports); a CREDIT_GRANT to its
 *    VOQ (dsf_credit_grant, scaled by this node's reachable share toward the
 *    granting node, MyIngress.dsf_reach_share).
 *  - A reassembled packet (entering on DSF_DELIVERY_PORT as the ingress node left it):
 *    MyIngress.dsf_hosts gives its system port again, MyIngress.dsf_system_ports the
 *    local port; out through the egress pipeline (its TTL was decremented once, at the
 *    ingress node).
 *
 * Tables written by the control plane (controllers/dsf/programming.py):
 * dsf_node (keyless: this node's number), dsf_hosts, dsf_system_ports,
 * dsf_reach_share, dsf_reach (+ selector dsf_spray_selector), dsf_class (optional),
 * and the parameter table dsf_params (testbed/modes.py: cell size, grant size,
 * credit rate, VOQ depth, reassembly timeout, credits on/off).
 */
#include <core.p4>
#include <v1model.p4>

#include "include/dsf_headers.p4"
#include "include/headers.p4"

struct metadata_t {
    flow_t         flow;
    dsf_metadata_t dsf;
}

#include "include/parsers.p4"
#include "include/dsf.p4"
#include "include/dsf_forwarding.p4"

control MyIngress(inout headers_t hdr,
                  inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    counter(DSF_PORT_COUNTERS, CounterType.packets_and_bytes) ingress_port_counter;

    DsfSpray() spray;

    action drop() {
        mark_to_drop(standard_metadata);
    }

    /* run-time parameters: the defaults equal testbed/modes.py's (a test checks) */
    action set_dsf_params(bit<16> cell_bytes, bit<32> grant_bytes, bit<8> credit_rate_pct,
                          bit<32> voq_depth, bit<32> reassembly_timeout_us, bit<1> credits) {
        meta.dsf.cell_bytes = cell_bytes;
        meta.dsf.grant_bytes = grant_bytes;
        meta.dsf.credit_rate_pct = credit_rate_pct;
        meta.dsf.voq_depth = voq_depth;
        meta.dsf.reassembly_timeout_us = reassembly_timeout_us;
        meta.dsf.credits = credits;
    }

    table dsf_params {
        key = { }
        actions = { set_dsf_params; }
        default_action = set_dsf_params(512, 4096, 100, 1024, 200000, 1);
    }

    action set_node(bit<16> node) {
        meta.dsf.my_node = node;
    }

    table dsf_node {
        key = { }
        actions = { set_node; }
        default_action = set_node(0);   /* 0: not configured (node numbers start at 1) */
    }

    action to_system_port(bit<16> node, bit<16> port, mac_addr_t dmac, mac_addr_t smac) {
        meta.dsf.dst_node = node;
        meta.dsf.dst_port = port;
        hdr.ethernet.dstAddr = dmac;
        hdr.ethernet.srcAddr = smac;
    }

    table dsf_hosts {
        key = { hdr.ipv4.dstAddr : lpm; }
        actions = { to_system_port; drop; }
        default_action = drop();
        size = 1024;
    }

    action set_class(bit<3> tc) {
        meta.dsf.tc = tc;
    }

    table dsf_class {
        key = { hdr.ipv4.dscp : exact; }
        actions = { set_class; NoAction; }
        default_action = NoAction();
        size = 64;
    }

    action local_port(port_t port, bit<32> rate_kbps) {
        meta.dsf.local_port = port;
        meta.dsf.port_rate_kbps = rate_kbps;
    }

    table dsf_system_ports {
        key = { meta.dsf.lookup_port : exact; }
        actions = { local_port; NoAction; }
        default_action = NoAction();
        size = DSF_MAX_SYSTEM_PORTS;
    }

    action set_share(bit<16> permille) {
        meta.dsf.share_permille = permille;
    }

    table dsf_reach_share {
        key = { hdr.dsf.src_node : exact; }
        actions = { set_share; }
        default_action = set_share(1000);
        size = DSF_MAX_NODES;
    }

    apply {
        ingress_port_counter.count((bit<32>)standard_metadata.ingress_port);
        if (hdr.packet_out.isValid()) {
            /* from the controller: send out of the port it names, untouched */
            standard_metadata.egress_spec = hdr.packet_out.egress_port;
            hdr.packet_out.setInvalid();
            exit;
        }
        dsf_params.apply();
        dsf_node.apply();

        if (standard_metadata.ingress_port == DSF_DELIVERY_PORT) {
            /* a reassembled packet for a host of this node: its host port again */
            meta.dsf.lookup_port = DSF_NO_PORT;
            if (hdr.ipv4.isValid()) {
                if (dsf_hosts.apply().hit) {
                    if (meta.dsf.dst_node == meta.dsf.my_node) {
                        meta.dsf.lookup_port = meta.dsf.dst_port;
                    }
                }
            }
            if (dsf_system_ports.apply().hit) {
                standard_metadata.egress_spec = meta.dsf.local_port;
            } else {
                drop();
            }
            exit;
        }
        if (hdr.dsf.isValid()) {
            if (hdr.dsf.dst_node != meta.dsf.my_node) {
                spray.apply(hdr, meta, standard_metadata);
                exit;
            }
            if (hdr.dsf.cell_type == DSF_CELL_DATA) {
                dsf_reassemble(hdr.dsf.src_node, hdr.dsf.dst_port, hdr.dsf.tc, hdr.dsf.seq,
                               hdr.dsf.cell_index, hdr.dsf.last, hdr.dsf.payload_len,
                               meta.dsf.reassembly_timeout_us);
            } else if (hdr.dsf.cell_type == DSF_CELL_CREDIT_REQUEST) {
                meta.dsf.lookup_port = hdr.dsf.dst_port;
                if (dsf_system_ports.apply().hit) {
                    dsf_credit_request(meta.dsf.my_node, hdr.dsf.src_node, hdr.dsf.dst_port, hdr.dsf.tc,
                                       hdr.dsf.credit_bytes, meta.dsf.local_port, meta.dsf.port_rate_kbps,
                                       meta.dsf.credit_rate_pct, meta.dsf.grant_bytes);
                }
            } else if (hdr.dsf.cell_type == DSF_CELL_CREDIT_GRANT) {
                dsf_reach_share.apply();
                dsf_credit_grant(hdr.dsf.dst_port, hdr.dsf.tc, hdr.dsf.credit_bytes, meta.dsf.share_permille);
            }
            mark_to_drop(standard_metadata);   /* taken or consumed by the traffic manager */
            exit;
        }

        if (!hdr.ipv4.isValid()) {
            standard_metadata.egress_spec = CPU_PORT;
            exit;
        }
        if (hdr.ipv4.ttl <= 1) {
            drop();
            exit;
        }
        if (!dsf_hosts.apply().hit) {
            exit;   /* dropped by the default action */
        }
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
        dsf_class.apply();
        if (meta.dsf.dst_node == meta.dsf.my_node) {
            /* a host of this node: switched locally */
            meta.dsf.lookup_port = meta.dsf.dst_port;
            if (dsf_system_ports.apply().hit) {
                standard_metadata.egress_spec = meta.dsf.local_port;
            } else {
                drop();
            }
            exit;
        }
        dsf_voq_enqueue(meta.dsf.my_node, meta.dsf.dst_node, meta.dsf.dst_port, meta.dsf.tc,
                        meta.dsf.cell_bytes, meta.dsf.voq_depth, meta.dsf.credits);
    }
}

#include "include/v1switch.p4"
