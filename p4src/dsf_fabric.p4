/* dsf_fabric.p4 - a DSF fabric node (FDSW) or spine node (SDSW) (seed 000).
 *
 * Fabric nodes forward cells by destination interface node only: no L3 lookup,
 * no reassembly.  Every cell (include/dsf_headers.p4) is sprayed over the
 * node's links that currently have reachability to its dst_node, round robin
 * per destination (include/dsf_forwarding.p4: table MyIngress.dsf_reach, written
 * by the DSF control plane over P4Runtime).  Anything else is dropped and counted.
 * Plain v1model: runs on BMv2 as on the embedded target.
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
#include "include/dsf_forwarding.p4"

control MyIngress(inout headers_t hdr,
                  inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    counter(DSF_PORT_COUNTERS, CounterType.packets_and_bytes) ingress_port_counter;

    DsfSpray() spray;

    apply {
        ingress_port_counter.count((bit<32>)standard_metadata.ingress_port);
        if (hdr.packet_out.isValid()) {
            /* from the controller: send out of the port it names, untouched */
            standard_metadata.egress_spec = hdr.packet_out.egress_port;
            hdr.packet_out.setInvalid();
            exit;
        }
        spray.apply(hdr, meta, standard_metadata);
    }
}

#include "include/v1switch.p4"
