/* tb_dsf.h - the DSF traffic manager in native code (VOQs, credit schedulers, cells, reassembly, history).
 *
 * The same rules as the reference in Python (testbed/p4/v1model/dsf/, semantics in
 * p4src/include/dsf.p4); tests/native/test_native_dsf.py feeds both the same requests and clock.
 * Compiled into every native pipeline (testbed/p4/native/build.py), so the Python device
 * (cffi) and the native packet loop (dlsym) reach the same code.  One tb_dsf_t per switch;
 * not thread-safe (its caller holds the switch's lock).
 * The part between cdef-begin and cdef-end is read by cffi (testbed/p4/native/build.py).
 */
#ifndef TB_DSF_H
#define TB_DSF_H

#include <stdint.h>

/* cdef-begin */
typedef struct tb_dsf tb_dsf_t;

/* extern ids: testbed.p4.compiler.target_externs.TARGET_EXTERNS order */
enum { TB_DSF_ENQUEUE = 0, TB_DSF_CREDIT_REQUEST = 1, TB_DSF_CREDIT_GRANT = 2, TB_DSF_REASSEMBLE = 3 };
/* counters (testbed.p4.v1model.dsf.constants.COUNTERS order) */
enum { TB_DSF_VOQ_ENQUEUED = 0, TB_DSF_VOQ_DEQUEUED, TB_DSF_CREDIT_RECEIVED, TB_DSF_CREDIT_GRANTED,
       TB_DSF_REASSEMBLED, TB_DSF_DROPS, TB_DSF_COUNTERS };
#define TB_DSF_ARGS 12 /* TB_MAX_EXTERN_ARGS: stride of the argument rows */

tb_dsf_t *tb_dsf_new(void);
void tb_dsf_free(tb_dsf_t *d);
/* Count counter `which` into these cells (NULL: the program has no such counter). */
void tb_dsf_set_counter(tb_dsf_t *d, int which, uint64_t *packets, uint64_t *bytes, uint64_t size);
/* A packet's extern requests at the end of ingress; packet: as ingress left it (deparsed; needed
 * only when a request is TB_DSF_ENQUEUE), payload: what the parser did not consume.
 * Returns 1 when a request took the packet, -1 out of memory. */
int tb_dsf_handle(tb_dsf_t *d, int64_t now_ns, uint32_t n, const int32_t *ids, const uint64_t *args,
                  const uint8_t *packet, uint32_t packet_len, const uint8_t *payload, uint32_t payload_len);
/* Run the timers due by now_ns (grants, request refreshes, reassembly timeouts). */
void tb_dsf_due(tb_dsf_t *d, int64_t now_ns);
/* Frames made for ingress, oldest first: length of the next one (copied when cap allows and then
 * removed), -1 when none.  tb_dsf_pending: how many wait. */
int32_t tb_dsf_take(tb_dsf_t *d, uint32_t *port, uint8_t *out, uint32_t cap);
uint32_t tb_dsf_pending(const tb_dsf_t *d);
/* When tb_dsf_due next has work: 1 and *when (0 while frames wait), 0 when nothing is due ever. */
int tb_dsf_next_event(const tb_dsf_t *d, int64_t *when);
/* The next log line (parameter problems), copied into out; 0 when none. */
int tb_dsf_take_log(tb_dsf_t *d, char *out, uint32_t cap);

/* Counter history (testbed/p4/v1model/dsf/history.py): note the counters whose bit is set in
 * `mask` on the grid start_ns + k * period_ns, at most capacity notes unread.  0, or -1 bad values. */
int tb_dsf_history_start(tb_dsf_t *d, uint32_t mask, int64_t start_ns, int64_t period_ns, uint32_t capacity);
void tb_dsf_history_before(tb_dsf_t *d, int64_t now_ns);
/* Move the oldest note out: its time, and up to max cells (counter, index, packets, bytes); returns
 * the note's cell count (more than max: call again with room), -1 when there is none. */
int64_t tb_dsf_history_take(tb_dsf_t *d, int64_t *at_ns, uint32_t *counters, uint64_t *indexes,
                            uint64_t *packets, uint64_t *bytes, uint32_t max);
/* The reader holds `held` notes it took but did not hand on yet (they count against the capacity). */
void tb_dsf_history_held(tb_dsf_t *d, uint32_t held);
uint64_t tb_dsf_history_overflows(const tb_dsf_t *d);
/* cdef-end */

#endif
