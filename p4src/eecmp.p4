/* eecmp.p4 - Enhanced ECMP: 5-tuple ECMP that also hashes the RoCEv2 BTH destination QP.
 *
 * Seed 004 section 4.2: with QP scaling a NIC-to-NIC transfer is posted over
 * several queue pairs, but their packets may share the whole 5-tuple (same
 * UDP source port), so plain ECMP keeps them on one path.  Hashing the
 * destination QP as well (what the switches' UDF hashing did) gives each QP
 * its own hashed path.  Non-RoCE packets are hashed as in ecmp.p4.  The
 * program is ecmp.p4 compiled with LB_HASH_DEST_QP (see
 * include/flow_hash.p4); it has the same objects, including
 * the parameter table MyIngress.lb_params (the hash seed).
 */
#define LB_HASH_DEST_QP 1
#include "ecmp.p4"
