/* pinning.p4 - path pinning by destination slice (seed 004 section 4.1.2).
 *
 * All traffic to a destination takes one fixed member of its equal-cost
 * group, chosen by the destination's "slice" - the index of its downlink on
 * its rack switch - not by a hash: the selector key is
 * hdr.ipv4.dstAddr & PIN_SLICE_MASK and the selector's hash is `identity`,
 * so the member index is slice mod group size.  With the testbed's addresses
 * (10.<leaf hi>.<leaf lo>.<host + 1>, topologies/base.py) the slice is the
 * last address byte, PIN_SLICE_MASK's default; another address plan can
 * compile with -DPIN_SLICE_MASK=...  Hosts with different slices use
 * different uplinks (while there are at least as many uplinks as hosts per
 * rack); hosts with the same slice in different racks share one.  Balanced
 * when every rack's hosts all send, uneven when jobs fill racks partially or
 * a link fails - what the seed reports.
 */
#include <core.p4>
#include <v1model.p4>

#include "include/headers.p4"
#include "include/lb_metadata.p4"
#include "include/parsers.p4"

#ifndef PIN_SLICE_MASK
#define PIN_SLICE_MASK 0xFF
#endif

#define LB_SELECTOR_ALGORITHM HashAlgorithm.identity
#define LB_SELECTOR_WIDTH 32w32
#define LB_SELECTOR_KEYS meta.lb.path_key : selector;
#include "include/routing.p4"

control MyIngress(inout headers_t hdr,
                  inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    IngressPreamble() preamble;
    Ipv4Routing() routing;

    apply {
        preamble.apply(hdr, meta, standard_metadata);
        meta.lb.path_key = hdr.ipv4.dstAddr & PIN_SLICE_MASK;
        routing.apply(hdr, meta, standard_metadata);
    }
}

#include "include/v1switch.p4"
