/* A copy of testbed/p4/native/include/tb_pipeline.h (branch native, commit 35f0a42), ABI version 1, used to
 * build native_io until that package is merged; the build prefers the original when it exists.  Delete after the merge. */
/* tb_pipeline.h - C ABI of a P4 program compiled by testbed.p4.native (the native backend).
 *
 * One shared object per program (built by testbed/p4/native/build.py, cached by content hash)
 * holds the generated parser / controls / deparser and the runtime state library
 * (tables, action selectors, registers, counters).  Several switches may share the object:
 * each has its own tb_pipeline (state) made by tb_pipeline_new.
 *
 * A packet's life, as testbed/p4/v1model/device.py runs it (BMv2 simple_switch semantics):
 *
 *   tb_packet_reset(pl, pkt);  set std->ingress_port, instance_type, packet_length, timestamps
 *   tb_parse(pl, pkt, frame, len)       parser; sets std->parser_error; keeps frame (payload)
 *   tb_ingress(pl, pkt, &req)           verifyChecksum + ingress; fills req (TM request)
 *     -> end-of-ingress decisions by the caller: I2E clone (req.clone_session), resubmit,
 *        multicast (std->mcast_grp), drop (egress_spec == TB_DROP_PORT), else unicast;
 *        a copy for a replica: tb_packet_copy, then set std->egress_port / egress_rid.
 *   traffic manager: sets std->egress_port and the queueing metadata (enq_*, deq_*)
 *   tb_egress(pl, pkt, &req)            egress; fills req (E2E clone, recirculate, drop)
 *   tb_deparse(pl, pkt, out, cap)       computeChecksum + deparser + payload; returns length
 *
 * The frame given to tb_parse is NOT copied: it must stay valid (and unchanged) until the
 * last tb_deparse of the packet and of all its copies.
 *
 * Threads: one packet-processing thread per tb_pipeline.  Control-plane writes (tb_table_*,
 * tb_profile_*, tb_meter_set ...) must not run concurrently with packet processing on the same
 * pipeline: the Python side (testbed/p4/native/state.py, NativeState.sync) copies changed tables
 * into native memory holding tb_pipeline_lock; a native packet loop holds the same lock while it
 * runs a batch of packets (and lets NativeState.sync run between batches).  Register and counter
 * cells may be read and written by the control plane at any time (64-bit cells).
 *
 * All field values are unsigned, at most 64 bits wide, in host order; header fields wider
 * than 64 bits are big-endian byte arrays.  Stable ABI: TB_PIPELINE_ABI_VERSION changes on
 * any incompatible change.
 */
#ifndef TB_PIPELINE_H
#define TB_PIPELINE_H

#include <stddef.h>
#include <stdint.h>

#define TB_PIPELINE_ABI_VERSION 1

#define TB_DROP_PORT 511u                  /* what mark_to_drop() writes to egress_spec */

/* standard_metadata.instance_type values (BMv2 simple_switch) */
#define TB_INSTANCE_NORMAL 0u
#define TB_INSTANCE_INGRESS_CLONE 1u
#define TB_INSTANCE_EGRESS_CLONE 2u
#define TB_INSTANCE_RECIRC 4u
#define TB_INSTANCE_REPLICATION 5u
#define TB_INSTANCE_RESUBMIT 6u

/* return status of tb_parse / tb_ingress / tb_egress (tb_deparse: negative of these) */
#define TB_OK 0
#define TB_DROPPED 1        /* the packet is dropped with a log line (assert, bad stack index) */
#define TB_HALT 2           /* simple_switch would stop: the switch stops forwarding for good */

/* v1model standard_metadata_t, one member per field (widths as in v1model.p4). */
typedef struct tb_std_meta {
    uint32_t ingress_port;              /* bit<9> */
    uint32_t egress_spec;               /* bit<9> */
    uint32_t egress_port;               /* bit<9> */
    uint32_t instance_type;             /* bit<32> */
    uint32_t packet_length;             /* bit<32> */
    uint32_t enq_timestamp;             /* bit<32>, us */
    uint32_t enq_qdepth;                /* bit<19> */
    uint32_t deq_timedelta;             /* bit<32>, us */
    uint32_t deq_qdepth;                /* bit<19> */
    uint64_t ingress_global_timestamp;  /* bit<48>, us since the pipeline's start */
    uint64_t egress_global_timestamp;   /* bit<48> */
    uint32_t mcast_grp;                 /* bit<16> */
    uint32_t egress_rid;                /* bit<16> */
    uint32_t checksum_error;            /* bit<1> */
    uint32_t parser_error;              /* error code (the program's error numbering) */
    uint32_t priority;                  /* bit<3> */
} tb_std_meta_t;

/* What a control asked of the target besides standard metadata (the "TM request").
 * egress_spec / mcast_grp / priority are copies of the standard metadata after the control. */
typedef struct tb_request {
    uint32_t egress_spec;
    uint32_t mcast_grp;
    uint32_t priority;
    int32_t clone_session;          /* -1: no clone; else the clone session id */
    int32_t clone_field_list;       /* -1: none; else the @field_list index kept in clones */
    int32_t resubmit_field_list;    /* -1: no resubmit */
    int32_t recirculate_field_list; /* -1: no recirculate */
    int32_t truncate_length;        /* -1: this control did not call truncate; else bytes to cut to */
} tb_request_t;

typedef struct tb_pipeline tb_pipeline_t;   /* opaque: a switch's state */
typedef struct tb_packet tb_packet_t;       /* opaque: headers + metadata of one packet */

/* ---- program and state ---------------------------------------------------------- */
uint32_t tb_abi_version(void);
tb_pipeline_t *tb_pipeline_new(void);        /* NULL when out of memory */
void tb_pipeline_free(tb_pipeline_t *pl);
size_t tb_packet_size(void);                 /* bytes to allocate for one tb_packet_t */
void tb_pipeline_lock(tb_pipeline_t *pl);    /* the state lock (see Threads above) */
void tb_pipeline_unlock(tb_pipeline_t *pl);

/* ---- packet path ------------------------------------------------------------------- */
void tb_packet_reset(tb_pipeline_t *pl, tb_packet_t *pkt);     /* headers invalid, metadata 0 */
tb_std_meta_t *tb_packet_std(tb_packet_t *pkt);
void tb_packet_copy(tb_packet_t *dst, const tb_packet_t *src);
/* headers and frame of src, nothing else (E2E clones: dst was reset first) */
void tb_packet_copy_headers(tb_packet_t *dst, const tb_packet_t *src);
/* why the last stage returned TB_DROPPED / TB_HALT ("assert failed at file:line"), or "" */
const char *tb_packet_failure(const tb_packet_t *pkt);
/* the calls of the target's own externs (DSF, @embedded_only) the ingress made, in call order:
 * extern ids (testbed.p4.compiler.target_externs.TARGET_EXTERNS order) and TB_MAX_EXTERN_ARGS
 * argument values each; returns how many (at most max) */
#define TB_MAX_EXTERN_REQUESTS 8
#define TB_MAX_EXTERN_ARGS 12
int tb_packet_extern_requests(const tb_packet_t *pkt, int32_t *ids, uint64_t *args, uint32_t max);
/* what the last stage(s) reported besides the packet: digests and log_msg calls, in call order
 * (parse + ingress together, egress, deparse each start a new list): site ids (the program's
 * layout "events": a digest or a log_msg call) and TB_MAX_EVENT_VALUES values each */
#define TB_MAX_EVENTS 16
#define TB_MAX_EVENT_VALUES 16
int tb_packet_events(const tb_packet_t *pkt, int32_t *sites, uint64_t *values, uint32_t max);
/* where the unparsed payload starts in the frame */
uint32_t tb_packet_payload_offset(const tb_packet_t *pkt);
/* copy the user metadata fields of @field_list(index) from src to dst */
void tb_preserve_fields(int index, const tb_packet_t *src, tb_packet_t *dst);
int tb_parse(tb_pipeline_t *pl, tb_packet_t *pkt, const uint8_t *frame, uint32_t len);
int tb_ingress(tb_pipeline_t *pl, tb_packet_t *pkt, uint64_t now_ns, tb_request_t *req);
int tb_egress(tb_pipeline_t *pl, tb_packet_t *pkt, uint64_t now_ns, tb_request_t *req);
/* computeChecksum + deparser + unparsed payload into out; the frame length, or
 * -TB_DROPPED / -TB_HALT, or -(int)TB_NEED_SPACE when cap is too small */
#define TB_NEED_SPACE 3
int tb_deparse(tb_pipeline_t *pl, tb_packet_t *pkt, uint8_t *out, uint32_t cap);

/* ---- whole pipeline for the common case ------------------------------------------------
 * Parse, ingress and, when the end of ingress is a plain unicast (no clone, resubmit or
 * multicast, no target extern request, digest or log_msg), egress and deparse of one frame entering on `port`, without queueing
 * (egress timestamps = ingress ones).  Returns TB_OK with the frame in out (*out_len bytes,
 * truncation applied, port = tb_packet_std(pkt)->egress_port), or a stage ORed with what
 * stopped the packet there: TB_DROPPED / TB_HALT (errors), TB_DROP (egress_spec 511: a normal
 * drop) or TB_CONTINUE (the caller carries out the end-of-stage decisions with *req and pkt,
 * whose state is kept: TB_STAGE_INGRESS for clones / resubmit / multicast, TB_STAGE_EGRESS
 * for E2E clones / recirculation). */
#define TB_DROP 4
#define TB_CONTINUE 5
#define TB_STAGE_PARSE 0x10
#define TB_STAGE_INGRESS 0x20
#define TB_STAGE_EGRESS 0x30
#define TB_STAGE_DEPARSE 0x40
int tb_process(tb_pipeline_t *pl, tb_packet_t *pkt, const uint8_t *frame, uint32_t len, uint32_t port,
               uint64_t now_ns, uint64_t timestamp_us, uint8_t *out, uint32_t cap, int32_t *out_len,
               tb_request_t *req);

/* The ingress half in one call (a packet arriving on `port`, or resubmitted / recirculated with
 * instance_type and the @field_list fields of preserve_from, index preserve_index; NULL / -1: none):
 * reset, standard metadata, parse, verifyChecksum, ingress.  Returns TB_OK or a stage ORed with
 * TB_DROPPED / TB_HALT, as tb_process. */
int tb_run_ingress(tb_pipeline_t *pl, tb_packet_t *pkt, const uint8_t *frame, uint32_t len, uint32_t port,
                   uint32_t instance_type, uint64_t now_ns, uint64_t timestamp_us, const tb_packet_t *preserve_from,
                   int preserve_index, tb_request_t *req);

#endif /* TB_PIPELINE_H */
