/* Cell forwarding shared by every DSF node program: by destination interface node only,
 * over the links that have reachability to it, spraying per cell; and the common egress.
 *
 * Include after parsers.p4 (needs headers_t with `dsf` and metadata_t with
 * `dsf_metadata_t dsf`); end the program with include/v1switch.p4.
 *
 * DsfSpray (in MyIngress):
 *   MyIngress.dsf_reach, key hdr.dsf.dst_node (exact), selector meta.dsf.spray_key:
 *   one selector group per destination node whose members (action dsf_to_link(port))
 *   are the node's links that currently have reachability to it.  The control plane
 *   writes them over P4Runtime (controllers/dsf/programming.py) from the topology,
 *   the link state and Input Balanced Mode, and rewrites them on every link event.
 *   Spraying policy: round robin per destination node.  The selector's hash is
 *   `identity` and its key counts the cells this node has sent toward that
 *   destination (register MyIngress.dsf_spray_next), so consecutive cells to one
 *   destination take consecutive members (member = count mod group size; BMv2 does
 *   the same with identity), whatever flow or packet they belong to: k cells over
 *   m links give every link floor(k/m) or ceil(k/m).  Data cells and control cells
 *   (credit requests and grants, 34 bytes on the wire) keep separate counts, so a
 *   request that follows every packet cannot lock onto one link and skew the links'
 *   bytes (the data cells of a packet have equal sizes: include/dsf.p4).
 *   A cell without any entry (no reachability: a link just failed, or the table is
 *   not written yet) is dropped and counted in MyIngress.dsf_fabric_drops
 *   [DSF_FABRIC_DROP_NO_REACHABILITY]; a cell whose ttl reached 0 likewise
 *   [DSF_FABRIC_DROP_TTL].  A frame that is not a cell is dropped into
 *   [DSF_FABRIC_DROP_NOT_A_CELL].
 *
 * MyEgress: counts every frame by egress port (MyEgress.egress_port_counter: on
 * fabric ports these are cells, so link loads are in bytes of cells) and adds the
 * packet_in header to frames for the CPU port.
 */
#ifndef _TESTBED_DSF_FORWARDING_P4_
#define _TESTBED_DSF_FORWARDING_P4_

#define DSF_FABRIC_DROP_NO_REACHABILITY 0
#define DSF_FABRIC_DROP_TTL 1
#define DSF_FABRIC_DROP_NOT_A_CELL 2
#define DSF_FABRIC_DROP_PLACES 3

#define DSF_PORT_COUNTERS 512
#define DSF_SPRAY_COUNTS 2048   /* 2 * DSF_MAX_NODES: data cells, then control cells */

control DsfSpray(inout headers_t hdr,
                 inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    @name(".MyIngress.dsf_spray_selector")
    action_selector(HashAlgorithm.identity, 32w1024, 32w32) dsf_spray_selector;

    @name(".MyIngress.dsf_spray_next")
    register<bit<32>>(DSF_SPRAY_COUNTS) dsf_spray_next;

    @name(".MyIngress.dsf_fabric_drops")
    counter(DSF_FABRIC_DROP_PLACES, CounterType.packets_and_bytes) dsf_fabric_drops;

    @name(".MyIngress.dsf_to_link")
    action dsf_to_link(port_t port) {
        standard_metadata.egress_spec = port;
    }

    @name(".MyIngress.dsf_reach")
    table dsf_reach {
        key = {
            hdr.dsf.dst_node    : exact;
            meta.dsf.spray_key  : selector;
        }
        actions = {
            dsf_to_link;
            NoAction;
        }
        implementation = dsf_spray_selector;
        size = DSF_MAX_NODES;
    }

    apply {
        if (!hdr.dsf.isValid()) {
            dsf_fabric_drops.count(DSF_FABRIC_DROP_NOT_A_CELL);
            mark_to_drop(standard_metadata);
            return;
        }
        if (hdr.dsf.ttl == 0) {
            dsf_fabric_drops.count(DSF_FABRIC_DROP_TTL);
            mark_to_drop(standard_metadata);
            return;
        }
        hdr.dsf.ttl = hdr.dsf.ttl - 1;
        bit<32> slot = (bit<32>)hdr.dsf.dst_node;
        if (hdr.dsf.cell_type != DSF_CELL_DATA) {
            slot = slot + DSF_MAX_NODES;   /* control cells: their own round robin */
        }
        bit<32> sent;
        dsf_spray_next.read(sent, slot);
        dsf_spray_next.write(slot, sent + 1);
        meta.dsf.spray_key = sent;
        if (!dsf_reach.apply().hit) {
            dsf_fabric_drops.count(DSF_FABRIC_DROP_NO_REACHABILITY);
            mark_to_drop(standard_metadata);
        }
    }
}

control MyEgress(inout headers_t hdr,
                 inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {

    counter(DSF_PORT_COUNTERS, CounterType.packets_and_bytes) egress_port_counter;

    apply {
        egress_port_counter.count((bit<32>)standard_metadata.egress_port);
        if (standard_metadata.egress_port == CPU_PORT) {
            hdr.packet_in.setValid();
            hdr.packet_in.ingress_port = standard_metadata.ingress_port;
            hdr.packet_in._pad = 0;
        }
    }
}

#endif /* _TESTBED_DSF_FORWARDING_P4_ */
