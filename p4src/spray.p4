/* spray.p4 - per-packet spraying over all equal-cost next hops.
 *
 * Every packet of a flow takes the next member of its destination's group,
 * round robin: the selector key is path_key = salt + n, where n counts
 * the packets of the flow so far (register MyIngress.spray_packet_count,
 * one cell per flow slot, see include/flow_hash.p4), and the selector's hash
 * is `identity`, so the member index is path_key mod group size.
 *
 * Why a per-flow counter and not a random value: round robin balances each
 * flow exactly (k packets over m paths: every path gets floor(k/m) or
 * ceil(k/m)), where a random choice has a binomial spread (about 5% per path
 * for 1,000 packets over 4 paths) and makes runs depend on a random state;
 * both are plain v1model, valid for BMv2 (its action selector implements
 * `identity` as the leading bytes of the key).  Starting at the flow's
 * salt (a seeded hash of the flow, include/flow_hash.p4) keeps different
 * flows from marching in lock step over the same paths.
 * Packets of one flow arrive out of order when the paths' delays differ; that
 * is the price of the perfect balance (seed 004 section 4.5).
 */
#include <core.p4>
#include <v1model.p4>

#include "include/headers.p4"
#include "include/lb_metadata.p4"
#include "include/parsers.p4"
#include "include/flow_hash.p4"

#define LB_SELECTOR_ALGORITHM HashAlgorithm.identity
#define LB_SELECTOR_WIDTH 32w32
#define LB_SELECTOR_KEYS meta.lb.path_key : selector;
#include "include/routing.p4"

control MyIngress(inout headers_t hdr,
                  inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    register<bit<32>>(FLOW_SLOTS) spray_packet_count;

    IngressPreamble() preamble;
    FlowHash() flow_hash;
    FlowSalt() flow_salt;
    Ipv4Routing() routing;

    apply {
        preamble.apply(hdr, meta, standard_metadata);
        flow_hash.apply(hdr, meta);
        flow_salt.apply(meta);
        bit<32> sent;
        spray_packet_count.read(sent, meta.lb.slot);
        spray_packet_count.write(meta.lb.slot, sent + 1);
        meta.lb.path_key = meta.lb.salt + sent;
        routing.apply(hdr, meta, standard_metadata);
    }
}

#include "include/v1switch.p4"
