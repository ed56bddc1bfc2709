/* Flow hashing shared by the load-balancing programs.
 *
 * Include after lb_metadata.p4 and parsers.p4.  Instantiate the controls in
 * MyIngress and apply them before routing:
 *
 * FlowHash fills meta.lb
 *   entropy    the BTH destination QP of RoCEv2 packets when the program
 *              #defines LB_HASH_DEST_QP before including this file (E-ECMP,
 *              seed 004 section 4.2.2), else 0;
 *   seed       the hash seed: the argument of MyIngress.set_lb_params, the
 *              default action of the keyless parameter table MyIngress.lb_params
 *              (0 until the controller modifies that default entry over
 *              P4Runtime; testbed/modes.py describes the parameter);
 *   flow_hash  crc32 over the 5-tuple and entropy, independent of the seed;
 *   slot       flow_hash mod FLOW_SLOTS: the flow's cell in per-flow registers.
 * FlowSalt (after FlowHash, and after the program set meta.lb.flowlet_id if
 * it uses one) fills
 *   switch_salt  this switch's own salt: the second argument of
 *              MyIngress.set_lb_params, which the controller sets per switch
 *              (controllers/parameters.py: a CRC of the switch's name), so
 *              switches hash the same flow independently;
 *   salt       (flow_hash ^ seed ^ switch_salt ^ flowlet_id) * 0x9E3779B1 mod 2^32.
 *
 * FLOW_SELECTOR_KEYS is the selector part of a table key: the 5-tuple, the
 * entropy, the seed and the salt.  The salt is why the seed (and a new
 * flowlet id) matters: CRCs are linear over GF(2), so a value only
 * concatenated to the key XORs a fixed pattern into the hash; for the seed
 * that merely relabels the members of a power-of-two group (the same flows
 * still collide), and consecutive flowlet ids may reach only half of the
 * members.  The integer multiply is not GF(2)-linear, so a new seed gives a
 * different partition of the flows and a new flowlet id a fresh choice.  With
 * the same salt everywhere, every switch of a multi-tier fabric would make the
 * same choice for a flow (the aggregation switches of a FatTree then send all
 * their traffic up the same relative uplink: ECMP polarization); the
 * per-switch salt makes each tier's choice its own.
 */
#ifndef _TESTBED_FLOW_HASH_P4_
#define _TESTBED_FLOW_HASH_P4_

#ifndef FLOW_SLOTS
#define FLOW_SLOTS 4096   /* cells of per-flow registers; a power of two */
#endif

const bit<32> FLOW_SLOT_MASK = FLOW_SLOTS - 1;
const bit<32> SALT_MULTIPLIER = 0x9E3779B1;   /* odd: 2^32 / golden ratio */

#define FLOW_SELECTOR_KEYS \
    meta.flow.src_addr : selector; \
    meta.flow.dst_addr : selector; \
    meta.flow.protocol : selector; \
    meta.flow.src_port : selector; \
    meta.flow.dst_port : selector; \
    meta.lb.entropy    : selector; \
    meta.lb.seed       : selector; \
    meta.lb.salt       : selector;

control FlowHash(in headers_t hdr, inout metadata_t meta) {
    @name(".MyIngress.set_lb_params")
    action set_lb_params(bit<32> hash_seed, bit<32> switch_salt) {
        meta.lb.seed = hash_seed;
        meta.lb.switch_salt = switch_salt;
    }

    /* run-time parameters: a keyless table whose default entry the controller modifies */
    @name(".MyIngress.lb_params")
    table lb_params {
        actions = { set_lb_params; }
        default_action = set_lb_params(0, 0);
    }

    apply {
        meta.lb.entropy = 0;
#ifdef LB_HASH_DEST_QP
        if (hdr.bth.isValid()) {
            meta.lb.entropy = hdr.bth.dstQP;
        }
#endif
        lb_params.apply();
        hash(meta.lb.flow_hash, HashAlgorithm.crc32, 32w0,
             { meta.flow.src_addr, meta.flow.dst_addr, meta.flow.protocol,
               meta.flow.src_port, meta.flow.dst_port, meta.lb.entropy },
             64w0x100000000);
        meta.lb.slot = meta.lb.flow_hash & FLOW_SLOT_MASK;
    }
}

control FlowSalt(inout metadata_t meta) {
    apply {
        meta.lb.salt = (meta.lb.flow_hash ^ meta.lb.seed ^ meta.lb.switch_salt ^ (bit<32>)meta.lb.flowlet_id)
                       * SALT_MULTIPLIER;
    }
}

#endif /* _TESTBED_FLOW_HASH_P4_ */
