/* Metadata of the load-balancing programs (ecmp, eecmp, spray, flowlet, pinning).
 *
 * Include after headers.p4 and before parsers.p4: it declares the program's
 * `struct metadata_t`, which parsers.p4 fills (meta.flow) and the
 * load-balancing includes (flow_hash.p4, routing.p4) use (meta.lb).  Each
 * program uses the lb fields its mechanism needs; the others stay 0.
 */
#ifndef _TESTBED_LB_METADATA_P4_
#define _TESTBED_LB_METADATA_P4_

struct lb_metadata_t {
    bit<1>  routed;         /* routing.p4 (Ipv4Routing): 1 when ipv4_lpm hit */
    /* flow_hash.p4 (FlowHash) */
    bit<24> entropy;        /* extra hashed field: the BTH destination QP (E-ECMP) or 0 */
    bit<32> seed;           /* the hash seed (parameter table MyIngress.lb_params) */
    bit<32> switch_salt;    /* this switch's own salt (same table, set per switch) */
    bit<32> flow_hash;      /* crc32 of the 5-tuple and entropy (not seeded) */
    bit<32> salt;           /* seed-dependent, non-linear mix of flow_hash (a selector key) */
    bit<32> slot;           /* index of the flow's cell in per-flow registers */
    /* spray / pinning: the value the identity-hash selector turns into a member */
    bit<32> path_key;
    /* flowlet */
    bit<16> flowlet_id;     /* a selector key: a new id is a new (hashed) path */
    bit<16> prev_flowlet_id;
    bit<1>  new_flowlet;
    bit<32> interval_us;
    bit<48> last_seen_us;
    bit<1>  load_aware;
    ipv4_addr_t prev_dst;   /* destination of the slot's previous packet */
    port_t  prev_port;      /* its egress port and next-hop MACs */
    mac_addr_t prev_dmac;
    mac_addr_t prev_smac;
    bit<19> prev_port_qdepth;
    bit<19> new_port_qdepth;
}

#ifndef METADATA_EXTRA
#define METADATA_EXTRA      /* a program's own members of metadata_t (f10.p4's f10_metadata_t) */
#endif

struct metadata_t {
    flow_t        flow;
    lb_metadata_t lb;
    METADATA_EXTRA
}

#endif /* _TESTBED_LB_METADATA_P4_ */
