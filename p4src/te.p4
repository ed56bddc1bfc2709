/* te.p4 - centralized traffic engineering: pinned flows first, ECMP for the rest.
 *
 * Seed 004 section 4.3: a controller that knows the large flows places each
 * on the least-loaded shortest path (controllers/te.py) and pins it with an
 * exact-match entry of MyIngress.te_pin (source and destination address)
 * whose action MyIngress.te_set_nhop names the next hop.  Packets that miss
 * the table follow the 5-tuple ECMP routes of include/routing.p4, so ECMP is
 * the fallback (and everything when no flow is pinned).  The routing objects
 * keep the names every program shares, so controllers/fabric_programmer.py
 * installs the ECMP routes as for the other modes; controllers/te_app.py
 * writes te_pin.
 */
#include <core.p4>
#include <v1model.p4>

#include "include/headers.p4"
#include "include/lb_metadata.p4"
#include "include/parsers.p4"
#include "include/flow_hash.p4"

#define LB_SELECTOR_KEYS FLOW_SELECTOR_KEYS
#include "include/routing.p4"

control MyIngress(inout headers_t hdr,
                  inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    IngressPreamble() preamble;
    FlowHash() flow_hash;
    FlowSalt() flow_salt;
    Ipv4Routing() routing;

    action te_set_nhop(mac_addr_t dmac, mac_addr_t smac, port_t port) {
        hdr.ethernet.srcAddr = smac;
        hdr.ethernet.dstAddr = dmac;
        standard_metadata.egress_spec = port;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }

    table te_pin {
        key = {
            hdr.ipv4.srcAddr : exact;
            hdr.ipv4.dstAddr : exact;
        }
        actions = { te_set_nhop; NoAction; }
        default_action = NoAction();
        size = 4096;
    }

    apply {
        preamble.apply(hdr, meta, standard_metadata);
        if (!te_pin.apply().hit) {
            flow_hash.apply(hdr, meta);
            flow_salt.apply(meta);
            routing.apply(hdr, meta, standard_metadata);
        }
    }
}

#include "include/v1switch.p4"
