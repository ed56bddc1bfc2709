/* ecmp.p4 - IPv4 routing with 5-tuple ECMP and a run-time hash seed.
 *
 * Seed 004 section 4.1.1: flows are placed on the equal-cost next hops of
 * their destination by a hash of the 5-tuple (source and destination
 * address, protocol, source and destination L4 port).  The selector hashes
 * (crc16) the 5-tuple plus the hash seed (parameter table MyIngress.lb_params,
 * 0 until the controller sets it) and a seed-dependent salt, so
 * a new seed re-places the flows (see include/flow_hash.p4).  A flow stays on
 * one path for its lifetime.
 *
 * Compiled with LB_HASH_DEST_QP defined (eecmp.p4 does that) the hash also
 * covers the BTH destination QP of RoCEv2 packets: E-ECMP.
 *
 * Routing objects, counters and controller headers: include/routing.p4.
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

    apply {
        preamble.apply(hdr, meta, standard_metadata);
        flow_hash.apply(hdr, meta);
        flow_salt.apply(meta);
        routing.apply(hdr, meta, standard_metadata);
    }
}

#include "include/v1switch.p4"
