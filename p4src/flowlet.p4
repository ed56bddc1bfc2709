/* flowlet.p4 - flowlet switching, optionally load-aware (seed 004 section 4.5).
 *
 * A flow's packets are split into flowlets at gaps: when the time since the
 * flow's previous packet exceeds the flowlet interval, the packet starts a new
 * flowlet, which may take a new path.  Packets of one flowlet always take the
 * same path, so a gap longer than the paths' delay difference keeps them in
 * order.
 *
 * State, per flow slot (the flow's 5-tuple and BTH destination QP hashed into
 * FLOW_SLOTS cells, include/flow_hash.p4; flows sharing a cell share a
 * flowlet), MyIngress.*:
 *   flowlet_last_seen  ingress_global_timestamp (microseconds) of the last packet
 *   flowlet_id         the current flowlet number, a selector key (and mixed
 *                      into the salt): the path is the crc16 hash of the flow
 *                      keys (as in E-ECMP, with the hash seed of MyIngress.lb_params) and the
 *                      flowlet id, so a new id is a new hashed choice among
 *                      the equal-cost next hops
 *   flowlet_dst, flowlet_port, flowlet_dmac, flowlet_smac
 *                      destination, egress port and next-hop MACs of the last
 *                      packet (for the load-aware choice)
 * Run-time parameters: the arguments of MyIngress.set_flowlet_params, the
 * default action of the keyless parameter table MyIngress.flowlet_params,
 * which the controller modifies over P4Runtime (testbed/modes.py describes
 * them; the defaults below are the same there):
 *   interval_us   the flowlet interval in microseconds (default
 *                 FLOWLET_DEFAULT_INTERVAL_US)
 *   load_aware    1: load-aware choice, 0: plain flowlet switching (default)
 *
 * Counter MyIngress.flowlet_path_changes (packets, indexed by the new egress
 * port): flowlet boundaries at which the slot's packet leaves by another port
 * than the slot's previous packet did (a slot's first packet is not a
 * change).  Packets of one flowlet share a FIFO path, so reordering can only
 * happen at such a change: the count bounds the reordering the program can
 * cause, whatever the timing of the machine it runs on.
 *
 * Load-aware choice.  The egress pipeline records in port_qdepth the queue
 * depth (deq_qdepth) each port had when its last packet left
 * (include/routing.p4).  At a flowlet boundary the packet has two candidate
 * paths: the new hashed one and the flow's current one.  It moves to the new
 * one unless the current port's recorded depth is smaller, in which case it
 * keeps the current path (port, MACs and flowlet id), so flows drift toward
 * less loaded ports and stay put when their port is the better one.  The
 * current path is a candidate only when the slot's last packet went to the
 * same destination (a slot shared with a flow to another destination must not
 * lend its port).  Limits: a brand-new flow has one candidate (the hashed
 * one), and a single lookup cannot see the other members of the group; right
 * after a route change the first packet of a flowlet may still take the old
 * port once (later packets follow the hash over the new group).
 */
#include <core.p4>
#include <v1model.p4>

#include "include/headers.p4"
#include "include/lb_metadata.p4"
#include "include/parsers.p4"

#define LB_HASH_DEST_QP 1
#include "include/flow_hash.p4"

#ifndef FLOWLET_DEFAULT_INTERVAL_US
#define FLOWLET_DEFAULT_INTERVAL_US 512
#endif

#define LB_SELECTOR_KEYS FLOW_SELECTOR_KEYS meta.lb.flowlet_id : selector;
#include "include/routing.p4"

control MyIngress(inout headers_t hdr,
                  inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    register<bit<48>>(FLOW_SLOTS) flowlet_last_seen;
    register<bit<16>>(FLOW_SLOTS) flowlet_id;
    register<bit<32>>(FLOW_SLOTS) flowlet_dst;
    register<bit<9>>(FLOW_SLOTS) flowlet_port;
    register<bit<48>>(FLOW_SLOTS) flowlet_dmac;
    register<bit<48>>(FLOW_SLOTS) flowlet_smac;
    counter(PORT_COUNTER_SIZE, CounterType.packets) flowlet_path_changes;

    IngressPreamble() preamble;
    FlowHash() flow_hash;
    FlowSalt() flow_salt;
    Ipv4Routing() routing;

    action set_flowlet_params(bit<32> interval_us, bit<1> load_aware) {
        meta.lb.interval_us = interval_us;
        meta.lb.load_aware = load_aware;
    }

    table flowlet_params {
        actions = { set_flowlet_params; }
        default_action = set_flowlet_params(FLOWLET_DEFAULT_INTERVAL_US, 0);
    }

    action keep_current_path() {
        standard_metadata.egress_spec = meta.lb.prev_port;
        hdr.ethernet.dstAddr = meta.lb.prev_dmac;
        hdr.ethernet.srcAddr = meta.lb.prev_smac;
        meta.lb.flowlet_id = meta.lb.prev_flowlet_id;
    }

    apply {
        preamble.apply(hdr, meta, standard_metadata);
        flow_hash.apply(hdr, meta);

        /* new flowlet? */
        flowlet_params.apply();
        flowlet_last_seen.read(meta.lb.last_seen_us, meta.lb.slot);
        flowlet_id.read(meta.lb.prev_flowlet_id, meta.lb.slot);
        meta.lb.flowlet_id = meta.lb.prev_flowlet_id;
        meta.lb.new_flowlet = 0;
        if (standard_metadata.ingress_global_timestamp - meta.lb.last_seen_us
                > (bit<48>)meta.lb.interval_us) {
            meta.lb.flowlet_id = meta.lb.prev_flowlet_id + 1;
            meta.lb.new_flowlet = 1;
        }
        flowlet_last_seen.write(meta.lb.slot, standard_metadata.ingress_global_timestamp);
        flow_salt.apply(meta);

        routing.apply(hdr, meta, standard_metadata);
        if (meta.lb.routed == 1) {
            if (meta.lb.new_flowlet == 1 && meta.lb.load_aware == 1) {
                flowlet_dst.read(meta.lb.prev_dst, meta.lb.slot);
                if (meta.lb.prev_dst == hdr.ipv4.dstAddr) {
                    flowlet_port.read(meta.lb.prev_port, meta.lb.slot);
                    flowlet_dmac.read(meta.lb.prev_dmac, meta.lb.slot);
                    flowlet_smac.read(meta.lb.prev_smac, meta.lb.slot);
                    port_qdepth.read(meta.lb.prev_port_qdepth, (bit<32>)meta.lb.prev_port);
                    port_qdepth.read(meta.lb.new_port_qdepth, (bit<32>)standard_metadata.egress_spec);
                    if (meta.lb.prev_port_qdepth < meta.lb.new_port_qdepth) {
                        keep_current_path();
                    }
                }
            }
            if (meta.lb.new_flowlet == 1 && meta.lb.last_seen_us != 0) {
                port_t previous_port;
                flowlet_port.read(previous_port, meta.lb.slot);
                if (previous_port != standard_metadata.egress_spec) {
                    flowlet_path_changes.count((bit<32>)standard_metadata.egress_spec);
                }
            }
            flowlet_id.write(meta.lb.slot, meta.lb.flowlet_id);
            flowlet_dst.write(meta.lb.slot, hdr.ipv4.dstAddr);
            flowlet_port.write(meta.lb.slot, standard_metadata.egress_spec);
            flowlet_dmac.write(meta.lb.slot, hdr.ethernet.dstAddr);
            flowlet_smac.write(meta.lb.slot, hdr.ethernet.srcAddr);
        }
    }
}

#include "include/v1switch.p4"
