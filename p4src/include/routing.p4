/* IPv4 routing through an action selector, shared by the load-balancing programs.
 *
 * The programs differ only in what feeds the selector (its keys and hash
 * algorithm) and in their own registers; the routing objects keep the names
 * and shapes of l3_ecmp.p4, so one controller programs every mode
 * (controllers/fabric_programmer.py): table MyIngress.ipv4_lpm (key
 * hdr.ipv4.dstAddr lpm plus selector keys), action MyIngress.set_nhop(dmac,
 * smac, port), selector MyIngress.ecmp_selector.  They are declared in the
 * controls below with absolute @name annotations (a leading dot), so the
 * P4Info names are the same as if they were declared in MyIngress itself.
 *
 * Before including this file a program #defines
 *   LB_SELECTOR_KEYS       the selector keys of ipv4_lpm (required), e.g.
 *                          FLOW_SELECTOR_KEYS from flow_hash.p4;
 *   LB_SELECTOR_ALGORITHM  the selector's hash (default HashAlgorithm.crc16);
 *   LB_SELECTOR_WIDTH      the selector's output width (default 32w14).
 *
 * Provided:
 *   IngressPreamble  counts every packet by ingress port; sends packet_out
 *                    frames out of the port they name, non-IPv4 frames to the
 *                    CPU port, drops IPv4 whose TTL would expire; in those
 *                    cases it ends ingress (exit), so what follows it in
 *                    MyIngress runs only for routable IPv4 packets.
 *   Ipv4Routing      the lookup: sets egress port and MACs, decrements TTL;
 *                    drops on a miss; sets meta.lb.routed to 1 on a hit.
 *   MyEgress         counts by egress port, records the queue depth each port
 *                    had when its last packet left (port_qdepth, read by the
 *                    load-aware flowlet choice and by the controller as
 *                    telemetry), adds packet_in to frames for the CPU port.
 * End the program with #include "include/v1switch.p4".
 */
#ifndef _TESTBED_ROUTING_P4_
#define _TESTBED_ROUTING_P4_

#ifndef LB_SELECTOR_KEYS
#error "define LB_SELECTOR_KEYS (the selector keys of MyIngress.ipv4_lpm) before including routing.p4"
#endif
#ifndef LB_SELECTOR_ALGORITHM
#define LB_SELECTOR_ALGORITHM HashAlgorithm.crc16
#endif
#ifndef LB_SELECTOR_WIDTH
#define LB_SELECTOR_WIDTH 32w14
#endif

#define PORT_COUNTER_SIZE 512

/* deq_qdepth (packets) of the last packet each port sent; written in egress,
 * read in ingress, hence declared outside both controls. */
register<bit<19>>(PORT_COUNTER_SIZE) port_qdepth;

control IngressPreamble(inout headers_t hdr,
                        inout metadata_t meta,
                        inout standard_metadata_t standard_metadata) {
    @name(".MyIngress.ingress_port_counter")
    counter(PORT_COUNTER_SIZE, CounterType.packets_and_bytes) ingress_port_counter;

    apply {
        ingress_port_counter.count((bit<32>)standard_metadata.ingress_port);
        if (hdr.packet_out.isValid()) {
            /* from the controller: send out of the port it names, untouched */
            standard_metadata.egress_spec = hdr.packet_out.egress_port;
            hdr.packet_out.setInvalid();
            exit;
        }
        if (!hdr.ipv4.isValid()) {
            standard_metadata.egress_spec = CPU_PORT;
            exit;
        }
        if (hdr.ipv4.ttl <= 1) {
            mark_to_drop(standard_metadata);
            exit;
        }
    }
}

control Ipv4Routing(inout headers_t hdr,
                    inout metadata_t meta,
                    inout standard_metadata_t standard_metadata) {
    @name(".MyIngress.ecmp_selector")
    action_selector(LB_SELECTOR_ALGORITHM, 32w1024, LB_SELECTOR_WIDTH) ecmp_selector;

    @name(".MyIngress.drop")
    action drop() {
        mark_to_drop(standard_metadata);
    }

    @name(".MyIngress.set_nhop")
    action set_nhop(mac_addr_t dmac, mac_addr_t smac, port_t port) {
        hdr.ethernet.srcAddr = smac;
        hdr.ethernet.dstAddr = dmac;
        standard_metadata.egress_spec = port;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }

    @name(".MyIngress.ipv4_lpm")
    table ipv4_lpm {
        key = {
            hdr.ipv4.dstAddr : lpm;
            LB_SELECTOR_KEYS
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
        if (ipv4_lpm.apply().hit) {
            meta.lb.routed = 1;
        } else {
            meta.lb.routed = 0;
            mark_to_drop(standard_metadata);
        }
    }
}

control MyEgress(inout headers_t hdr,
                 inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {

    counter(PORT_COUNTER_SIZE, CounterType.packets_and_bytes) egress_port_counter;

    apply {
        egress_port_counter.count((bit<32>)standard_metadata.egress_port);
        port_qdepth.write((bit<32>)standard_metadata.egress_port, standard_metadata.deq_qdepth);
        if (standard_metadata.egress_port == CPU_PORT) {
            hdr.packet_in.setValid();
            hdr.packet_in.ingress_port = standard_metadata.ingress_port;
            hdr.packet_in._pad = 0;
        }
    }
}

#endif /* _TESTBED_ROUTING_P4_ */
