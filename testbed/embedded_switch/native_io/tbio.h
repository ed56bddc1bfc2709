/* tbio.h - the embedded switch's native packet loop: AF_XDP port I/O, the v1model traffic manager,
 * and a compiled pipeline called through tb_pipeline.h's functions.
 *
 * Threads: one thread runs tbio_run, or the loop runs in a thread of its own (tbio_start) and one
 * reader waits for what it reports with tbio_wait; any other thread that touches the loop or the pipeline state
 * (P4Runtime writes, PacketOut injection, queue settings) brackets its calls with tbio_lock /
 * tbio_unlock.  The loop holds the lock while it processes and gives it up in poll() and between
 * batches when someone waits for it.  While it processes it also holds the pipeline's own state
 * lock (tb_pipeline_lock, when the program's library has one), so copying tables into native
 * memory under tbio_lock (which then takes tb_pipeline_lock) always waits for the end of a batch.
 *
 * The part between cdef-begin and cdef-end is read by cffi (testbed/embedded_switch/native_io/__init__.py).
 */
#ifndef TBIO_H
#define TBIO_H

#include <stddef.h>
#include <stdint.h>

/* cdef-begin */
typedef struct tbio_tm tbio_tm_t;
typedef struct tbio_loop tbio_loop_t;

/* One packet leaving its egress queue (see testbed/p4/v1model/traffic_manager.py, Departure). */
typedef struct tbio_departure {
    uint32_t port;
    uint32_t priority;
    uint64_t item;
    uint32_t nbytes;
    uint32_t enq_qdepth;
    uint32_t deq_qdepth;
    int64_t enq_timestamp_ns;
    int64_t deq_timestamp_ns;
} tbio_departure_t;

typedef struct tbio_queue_stats {
    uint64_t enqueued, dequeued, dropped, dropped_full, dropped_priority, depth, max_depth, dropped_headroom;
} tbio_queue_stats_t;

/* PFC settings (testbed/p4/v1model/pfc.py, PfcConfig; the values come from there, never from here). */
typedef struct tbio_pfc_config {
    uint32_t lossless;           /* bit p: priority p (0..7) is lossless */
    uint32_t buffer_packets, xoff_packets, xon_packets, pause_quanta;
    double default_quantum_ns;   /* one quantum on a port without a bit rate (pfc.DEFAULT_QUANTUM_NS) */
} tbio_pfc_config_t;

/* A PAUSE frame the traffic manager asks for: out of port, for priority, quanta (0: resume). */
typedef struct tbio_pause {
    int64_t ns;
    uint32_t port, priority, quanta;
} tbio_pause_t;

/* A port's PFC counters (TrafficManager.pfc_stats), per priority 0..7. */
typedef struct tbio_pfc_stats {
    uint64_t pause_sent[8], resume_sent[8], pause_received[8], resume_received[8];
    int64_t paused_ns[8];
    uint32_t paused[8];
    uint64_t queued[8], dequeued[8], held[8];
    uint64_t holders[8][8];      /* priority p: bit i of word w set when ingress port 64 w + i holds a packet */
    uint64_t dropped_headroom;
} tbio_pfc_stats_t;

typedef struct tbio_port_stats {
    uint64_t rx_packets, rx_bytes, tx_packets, tx_bytes, drops;
    uint64_t tx_errors;          /* frames the port's transmit ring (or qdisc) had no room for */
    uint64_t kernel_drops;       /* frames the kernel dropped before the loop read them (rx ring full) */
    uint64_t impairment_drops;   /* frames dropped by the port's configured loss */
} tbio_port_stats_t;

/* ---- traffic manager (also usable on its own: the differential test drives it directly) ---- */
tbio_tm_t *tbio_tm_new(uint32_t default_depth, uint32_t default_priorities);
void tbio_tm_free(tbio_tm_t *tm);
/* rates: 0 = no limit.  Returns 0, or -1 when priorities would change while packets are queued. */
int tbio_tm_set_queue(tbio_tm_t *tm, uint32_t port, uint64_t rate_pps, uint64_t rate_bps, uint32_t depth,
                      uint32_t priorities, int64_t now_ns);
/* enq_qdepth, or -1 when dropped (queue full, priority out of range, lossless ingress buffer full);
 * ingress_port: the port it is counted against under PFC, -1 for none (clones, recirculations). */
int64_t tbio_tm_enqueue(tbio_tm_t *tm, uint32_t port, uint64_t item, uint32_t nbytes, uint32_t priority,
                        int64_t now_ns, int32_t ingress_port);
/* PFC on with config (NULL: off).  Returns 0, or -1 when packets are queued. */
int tbio_tm_set_pfc(tbio_tm_t *tm, const tbio_pfc_config_t *config);
/* 1 and *config filled when PFC is on, else 0 */
int tbio_tm_pfc(tbio_tm_t *tm, tbio_pfc_config_t *config);
/* A PAUSE frame arrived on port: n (priority, quanta) pairs of its enabled classes. */
void tbio_tm_receive_pause(tbio_tm_t *tm, uint32_t port, uint32_t n, const uint32_t *priorities,
                           const uint32_t *quanta, int64_t now_ns);
/* Queue the PAUSE frames due by now (refreshes included); returns how many wait for tbio_tm_take_pauses. */
int tbio_tm_pause_frames(tbio_tm_t *tm, int64_t now_ns);
/* The oldest waiting PAUSE frames, at most cap, each once. */
int tbio_tm_take_pauses(tbio_tm_t *tm, tbio_pause_t *out, int cap);
/* 1 and *when set when a PAUSE frame waits or a refresh is due later, else 0 */
int tbio_tm_next_pause(tbio_tm_t *tm, int64_t *when);
void tbio_tm_pfc_stats(tbio_tm_t *tm, uint32_t port, int64_t now_ns, tbio_pfc_stats_t *out);
/* Departures due by now_ns, in departure-time order; at most cap (the rest stay for the next call). */
int tbio_tm_dequeue_ready(tbio_tm_t *tm, int64_t now_ns, tbio_departure_t *out, int cap);
/* 1 and *when set when something is queued or ready, else 0 */
int tbio_tm_next_departure(tbio_tm_t *tm, int64_t *when);
uint64_t tbio_tm_depth(tbio_tm_t *tm, uint32_t port, int64_t now_ns);
void tbio_tm_stats(tbio_tm_t *tm, uint32_t port, int64_t now_ns, tbio_queue_stats_t *out);
/* the configuration; 0 when the port was never configured nor used */
int tbio_tm_queue_config(tbio_tm_t *tm, uint32_t port, uint64_t *rate_pps, uint64_t *rate_bps, uint32_t *depth,
                         uint32_t *priorities);
/* The ports that have queues (configured or used), ascending, at most cap; returns how many. */
int tbio_tm_ports(tbio_tm_t *tm, uint32_t *out, int cap);

/* ---- packet generator (pktgen.c; also usable on its own: tests compare it with packet_generator.py) ---- */
#define TBIO_PKTGEN_APPS 8          /* packet_generator.MAX_APPS */
#define TBIO_PKTGEN_MAX_FRAME 1514  /* packet_generator.MAX_FRAME */
typedef struct tbio_pktgen tbio_pktgen_t;
/* An application's timer and counters (packet_generator.GeneratorApp); times in CLOCK_MONOTONIC ns. */
typedef struct tbio_pktgen_app {
    uint32_t port;
    int64_t period_ns, next_ns;
    uint64_t generated, skipped, skipped_run_max;
    int64_t late_max_ns;
} tbio_pktgen_app_t;
tbio_pktgen_t *tbio_pktgen_new(void);
void tbio_pktgen_free(tbio_pktgen_t *pg);
/* Start or change app with state and its frame (checked by packet_generator.py).  0, or -1 (bad values). */
int tbio_pktgen_set(tbio_pktgen_t *pg, uint32_t app, const tbio_pktgen_app_t *state, const uint8_t *frame,
                    uint32_t len);
void tbio_pktgen_stop(tbio_pktgen_t *pg, uint32_t app);
/* 1 and *out filled when app runs, else 0 */
int tbio_pktgen_get(tbio_pktgen_t *pg, uint32_t app, tbio_pktgen_app_t *out);
/* 1 and *when set (the earliest due time) when an application runs, else 0 */
int tbio_pktgen_next_due(tbio_pktgen_t *pg, int64_t *when);
/* The applications due by now (at most cap, in application order), each counted as generated once. */
int tbio_pktgen_due(tbio_pktgen_t *pg, int64_t now_ns, uint32_t *apps, int cap);
/* app's frame and its length, NULL when app does not run */
const uint8_t *tbio_pktgen_frame(tbio_pktgen_t *pg, uint32_t app, uint32_t *len);

/* ---- the packet loop ---- */
#define TBIO_STOPPED 0     /* tbio_run: the caller's timeout passed */
#define TBIO_WOKEN 1       /* tbio_wake was called */
#define TBIO_PUNTED 2      /* frames for the CPU port (tbio_take_punted) or events (tbio_take_event) wait */
#define TBIO_HALTED 3      /* the program did what stops simple_switch: see tbio_halt_reason */
#define TBIO_UNSUPPORTED 4 /* a packet called the target's own externs (DSF), which the loop cannot
                              carry out: it was dropped; the caller should forward in Python */

/* A loop for at most max_ports ports, each with AF_XDP rings of ring_size (a power of two >= 8): their
 * frames are one UMEM of max_ports * ring_size receive frames and 256 transmit frames for all. */
tbio_loop_t *tbio_new(int32_t cpu_port, int64_t clock_origin_ns, uint32_t ring_size, uint32_t max_ports,
                      uint32_t seed);
void tbio_free(tbio_loop_t *loop);
/* Open an AF_XDP socket on ifname's receive queue 0 and attach the redirecting XDP program.
 * Returns 0; or 1 when that failed (a device without XDP, such as VXLAN) and the port receives and
 * sends through AF_PACKET sockets instead (err says why AF_XDP failed); or -1 with a message in err. */
int tbio_add_port(tbio_loop_t *loop, uint32_t port, const char *ifname, char *err, size_t errlen);
/* Send port's frames through an AF_PACKET socket, so they pass the interface's qdisc (tc shaping),
 * which AF_XDP's transmit bypasses; it still receives with AF_XDP.  Returns 0, or -1 with err. */
int tbio_port_via_qdisc(tbio_loop_t *loop, uint32_t port, char *err, size_t errlen);
/* Load the pipeline functions from the shared object at path (dlopen; the same object the control
 * plane opened, so its state is shared) and use pipeline, whose timestamps count from
 * clock_origin_ns (CLOCK_MONOTONIC); path NULL: no pipeline (frames dropped, as BMv2 --no-p4).
 * Returns 0, or -1 with a message in err. */
int tbio_set_pipeline(tbio_loop_t *loop, const char *path, void *pipeline, int64_t clock_origin_ns, char *err,
                      size_t errlen);
/* Carry out the pipeline's DSF extern calls with dsf, the switch's tb_dsf_t (testbed/p4/native/dsf.py), in
 * the loop (tbio_dsf.h); NULL: none (such a packet is dropped: TBIO_UNSUPPORTED).  Call after
 * tbio_set_pipeline, under tbio_lock; a new pipeline forgets it.  Returns 0, or -1 with err. */
int tbio_set_dsf(tbio_loop_t *loop, void *dsf, char *err, size_t errlen);
tbio_tm_t *tbio_traffic_manager(tbio_loop_t *loop);
/* The loop's packet generator: its due frames enter ingress on its ports from the loop's own timer
 * while a pipeline is set (set and read its applications under tbio_lock). */
tbio_pktgen_t *tbio_packet_generator(tbio_loop_t *loop);
int tbio_set_multicast_group(tbio_loop_t *loop, uint32_t group, uint32_t n, const uint32_t *ports,
                             const uint32_t *rids);
int tbio_set_clone_session(tbio_loop_t *loop, uint32_t session, uint32_t n, const uint32_t *ports,
                           const uint32_t *rids, uint32_t packet_length);
/* loss in [0, 1], delay in ns, for frames leaving port (an AF_XDP port) */
int tbio_set_impairment(tbio_loop_t *loop, uint32_t port, double loss, int64_t delay_ns);
/* The PAUSE frame port sends (pfc.build_pause with no class enabled: the loop sets the class-enable
 * vector and quanta); frames of its kind arriving on any port are PAUSE frames.  0, or -1. */
int tbio_set_pause_frame(tbio_loop_t *loop, uint32_t port, const uint8_t *frame, uint32_t len);
/* Forward until a status above (the first one met), or -1 while the loop's own thread runs. */
int tbio_run(tbio_loop_t *loop, int timeout_ms);
/* Run the loop in a thread of its own until tbio_stop (or tbio_free): it forwards and keeps its
 * timers whatever the caller's threads do; what tbio_run would return for is noted for tbio_wait
 * instead.  0, or -1 (already running, or no thread could be made). */
int tbio_start(tbio_loop_t *loop);
/* End the loop's own thread (waits for it; nothing when none runs). */
void tbio_stop(tbio_loop_t *loop);
/* With the loop's own thread: wait at most timeout_ms (-1: no limit) until a status is noted; returns
 * the statuses noted since the last call, bit s for status s (TBIO_WOKEN, TBIO_PUNTED, TBIO_HALTED,
 * TBIO_UNSUPPORTED), 0 at the timeout.  One reader at a time. */
uint32_t tbio_wait(tbio_loop_t *loop, int timeout_ms);
/* Make tbio_run return TBIO_WOKEN, or tbio_wait note it (any thread). */
void tbio_wake(tbio_loop_t *loop);
void tbio_lock(tbio_loop_t *loop);
void tbio_unlock(tbio_loop_t *loop);
/* A frame entering ingress on port (a PacketOut on the CPU port); call under tbio_lock. */
int tbio_inject(tbio_loop_t *loop, uint32_t port, const uint8_t *frame, uint32_t len);
/* The oldest frame sent to the CPU port: its length (copied into buf up to cap), or -1 when none. */
int tbio_take_punted(tbio_loop_t *loop, uint8_t *buf, uint32_t cap);
/* The oldest digest / log_msg call a stage reported (tb_packet_events: site id, 16 values);
 * valid is 0 for a stage other than a successful ingress (its digests are not sent).  1, or 0 when none. */
int tbio_take_event(tbio_loop_t *loop, int32_t *site, uint32_t *valid, uint64_t *values);
uint64_t tbio_events_dropped(tbio_loop_t *loop);
void tbio_port_stats(tbio_loop_t *loop, uint32_t port, tbio_port_stats_t *out);
const char *tbio_halt_reason(tbio_loop_t *loop);
uint64_t tbio_errors(tbio_loop_t *loop);
/* cdef-end */

#endif /* TBIO_H */
