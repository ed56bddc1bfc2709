/* tbio.c - the embedded switch's native packet loop (see tbio.h).
 *
 * A frame goes: AF_XDP receive -> parser, ingress (the compiled pipeline, tb_pipeline.h) ->
 * end-of-ingress decisions (I2E clone, resubmit, multicast, drop, unicast) -> traffic manager ->
 * egress, deparser -> recirculate, CPU port (punted to Python as PacketIn) or AF_XDP transmit,
 * through the port's loss and delay.  The order of things is testbed/p4/v1model/device.py's
 * (queued mode), which is the reference; the traffic manager is traffic_manager.py's, line by line.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "tbio.h"
#include TB_PIPELINE_HEADER
#include "xsk.h"

#define MAX_PORTS 512          /* v1model ports are bit<9> */
#define MAX_PRIORITIES 64
#define MAX_PASSES 32          /* resubmits + recirculations of one packet (device.py's loop guard) */
#define RX_BATCH 64
#define DEQ_BATCH 256
#define MAX_SLOTS 65536
#define PUNT_QUEUE 1024        /* frames waiting for the CPU port's reader; more are dropped (counted in errors) */
#define MASK32 0xffffffffull
#define MASK48 0xffffffffffffull
#define QDEPTH_MASK 0x7ffffu
#define ETH_HEADER 14 /* destination, source, EtherType */
/* The PAUSE frame's layout comes from its one definition, testbed/p4/v1model/pfc.py (c_layout), as -D flags:
 * PFC_CLASSES, PAUSE_BYTES (the whole frame), PAUSE_HEADER (up to the last quanta), PAUSE_VECTOR_AT
 * (the class-enable vector) and PAUSE_QUANTA_AT (the first class's quanta). */
#if !defined(PFC_CLASSES) || !defined(PAUSE_BYTES) || !defined(PAUSE_HEADER) || !defined(PAUSE_VECTOR_AT) || \
    !defined(PAUSE_QUANTA_AT)
#error "build with the PAUSE frame layout of pfc.c_layout() (testbed.embedded_switch.native_io.build)"
#endif

typedef __int128 i128;

static int64_t clock_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t floordiv(int64_t a, int64_t b) { return a / b - (a % b != 0 && (a < 0) != (b < 0)); }
static i128 ceildiv128(i128 a, i128 b) { return -((-a) / b - ((-a) % b != 0 && ((-a) < 0) != (b < 0))); }

/* ======================================================================= traffic manager */

typedef struct entry {
    uint64_t item;
    uint32_t nbytes;
    uint32_t enq_qdepth;
    int64_t enq_ns;
    int32_t ingress;   /* PFC: the ingress port it is counted against (with its priority), -1: none */
} entry_t;

/* A growable ring of T, oldest first: NAME_push appends (doubling its room from 16; -1 when out of
 * memory), NAME_pop takes the oldest (the ring must not be empty). */
#define DEFINE_RING(NAME, T)                                                                  \
    typedef struct NAME { T *buf; uint32_t cap, head, len; } NAME##_t;                        \
    static int NAME##_push(NAME##_t *f, T e)                                                  \
    {                                                                                         \
        if (f->len == f->cap) {                                                               \
            uint32_t cap = f->cap ? 2 * f->cap : 16;                                          \
            T *buf = malloc(sizeof *buf * cap);                                               \
            if (!buf) return -1;                                                              \
            for (uint32_t i = 0; i < f->len; i++) buf[i] = f->buf[(f->head + i) % f->cap];    \
            free(f->buf);                                                                     \
            f->buf = buf, f->cap = cap, f->head = 0;                                          \
        }                                                                                     \
        f->buf[(f->head + f->len++) % f->cap] = e;                                            \
        return 0;                                                                             \
    }                                                                                         \
    static T NAME##_pop(NAME##_t *f)                                                          \
    {                                                                                         \
        T e = f->buf[f->head];                                                                \
        f->head = (f->head + 1) % f->cap;                                                     \
        f->len--;                                                                             \
        return e;                                                                             \
    }

DEFINE_RING(fifo, entry_t)   /* a port queue's packets */
DEFINE_RING(tfifo, int64_t)  /* a port's arrival times */

typedef struct portq {
    fifo_t *queues;
    uint32_t npri, depth;
    uint64_t rate_pps, rate_bps;   /* 0: no limit */
    i128 scale, pps_units, bps_units_per_byte, link_free;
    uint64_t count, arrived, departed, enqueued, dequeued, dropped, dropped_full, dropped_priority, max_depth;
    tfifo_t arrivals;
    int64_t last_arrival;
    uint32_t port;
    struct portq *busy_prev, *busy_next;
    int busy;
    /* PFC, per class: the queue may not start a departure before paused_until (ns) */
    int64_t paused_until[PFC_CLASSES], pause_since[PFC_CLASSES], paused_ns[PFC_CLASSES];
    uint64_t pause_sent[PFC_CLASSES], resume_sent[PFC_CLASSES], pause_received[PFC_CLASSES],
        resume_received[PFC_CLASSES], dequeued_by_priority[PFC_CLASSES], dropped_headroom;
} portq_t;

typedef struct ready {
    tbio_departure_t d;
    uint64_t seq;
} ready_t;

struct tbio_tm {
    uint32_t default_depth, default_priorities;
    portq_t *ports[MAX_PORTS];
    portq_t *busy_head, *busy_tail;   /* ports with packets queued, in the order they became busy */
    ready_t *ready;                   /* departed by the schedule, not yet returned */
    uint32_t ready_len, ready_cap, ready_pos;
    uint32_t batch_end;               /* ready[ready_pos..batch_end): the sorted rest of a batch cut short by cap */
    uint64_t seq;
    /* PFC (traffic_manager.py's contract) */
    int pfc_on;
    tbio_pfc_config_t pfc;
    uint32_t held[MAX_PORTS][PFC_CLASSES];        /* packets counted against (ingress port, class) */
    uint8_t xoff_on[MAX_PORTS][PFC_CLASSES];      /* paused upstream */
    struct xoff { uint32_t port, priority; int64_t sent; } *xoff; /* the paused ones, in the order paused */
    uint32_t xoff_len, xoff_cap;
    tbio_pause_t *pauses;                         /* PAUSE frames to send, oldest first */
    uint32_t pauses_pos, pauses_len, pauses_cap;
};

tbio_tm_t *tbio_tm_new(uint32_t default_depth, uint32_t default_priorities)
{
    if (default_depth < 1 || default_priorities < 1 || default_priorities > MAX_PRIORITIES) return NULL;
    tbio_tm_t *tm = calloc(1, sizeof *tm);
    if (!tm) return NULL;
    tm->default_depth = default_depth;
    tm->default_priorities = default_priorities;
    return tm;
}

static void portq_free(portq_t *q)
{
    for (uint32_t i = 0; i < q->npri; i++) free(q->queues[i].buf);
    free(q->queues);
    free(q->arrivals.buf);
    free(q);
}

void tbio_tm_free(tbio_tm_t *tm)
{
    if (!tm) return;
    for (int i = 0; i < MAX_PORTS; i++)
        if (tm->ports[i]) portq_free(tm->ports[i]);
    free(tm->ready);
    free(tm->xoff);
    free(tm->pauses);
    free(tm);
}

static portq_t *portq_new(uint32_t port, uint32_t depth, uint32_t npri, int64_t now)
{
    portq_t *q = calloc(1, sizeof *q);
    if (!q) return NULL;
    q->queues = calloc(npri, sizeof *q->queues);
    if (!q->queues) {
        free(q);
        return NULL;
    }
    q->port = port, q->npri = npri, q->depth = depth, q->scale = 1, q->link_free = now;
    return q;
}

static void set_rates(portq_t *q, uint64_t pps, uint64_t bps)
{
    i128 link_free_ns = ceildiv128(q->link_free, q->scale);
    i128 scale = (i128)(pps ? pps : 1) * (i128)(bps ? bps : 1);
    q->rate_pps = pps, q->rate_bps = bps, q->scale = scale;
    q->pps_units = pps ? (i128)1000000000 * scale / pps : 0;
    q->bps_units_per_byte = bps ? (i128)8000000000LL * scale / bps : 0;
    q->link_free = link_free_ns * scale;
}

/* (start in units, priority index) of the next departure of a non-empty port (next_choice). */
static void next_choice(const portq_t *q, i128 *start, uint32_t *index)
{
    i128 earliest = 0;
    int found = 0;
    for (uint32_t i = 0; i < q->npri; i++) {
        const fifo_t *f = &q->queues[i];
        if (f->len) {
            int64_t eligible = f->buf[f->head].enq_ns;
            if (i < PFC_CLASSES && q->paused_until[i] > eligible) eligible = q->paused_until[i];
            i128 arrival = (i128)eligible * q->scale;
            if (!found || arrival < earliest) earliest = arrival, found = 1;
        }
    }
    i128 s = q->link_free > earliest ? q->link_free : earliest;
    for (uint32_t i = q->npri; i-- > 0;) {
        const fifo_t *f = &q->queues[i];
        if (f->len && (i128)f->buf[f->head].enq_ns * q->scale <= s &&
            (i >= PFC_CLASSES || (i128)q->paused_until[i] * q->scale <= s)) {
            *start = s, *index = i;
            return;
        }
    }
    *start = s, *index = 0; /* unreachable: the earliest head has arrived by s */
}

static void busy_add(tbio_tm_t *tm, portq_t *q)
{
    q->busy = 1, q->busy_next = NULL, q->busy_prev = tm->busy_tail;
    if (tm->busy_tail) tm->busy_tail->busy_next = q;
    else tm->busy_head = q;
    tm->busy_tail = q;
}

static void busy_remove(tbio_tm_t *tm, portq_t *q)
{
    if (!q->busy) return;
    if (q->busy_prev) q->busy_prev->busy_next = q->busy_next;
    else tm->busy_head = q->busy_next;
    if (q->busy_next) q->busy_next->busy_prev = q->busy_prev;
    else tm->busy_tail = q->busy_prev;
    q->busy = 0, q->busy_prev = q->busy_next = NULL;
}

static void ready_push(tbio_tm_t *tm, const tbio_departure_t *d)
{
    if (tm->ready_len == tm->ready_cap) {
        uint32_t cap = tm->ready_cap ? 2 * tm->ready_cap : 256;
        ready_t *r = realloc(tm->ready, sizeof *r * cap);
        if (!r) abort(); /* out of memory in the packet path: nothing sensible is left */
        tm->ready = r, tm->ready_cap = cap;
    }
    tm->ready[tm->ready_len++] = (ready_t){.d = *d, .seq = tm->seq++};
}

/* The port's queues, made with the defaults when it has none (_port). */
static portq_t *port_of(tbio_tm_t *tm, uint32_t port, int64_t now)
{
    if (!tm->ports[port]) tm->ports[port] = portq_new(port, tm->default_depth, tm->default_priorities, now);
    return tm->ports[port];
}

/* One quantum (512 bit times) on a link of rate_bps, as pfc.quantum_ns computes it. */
static double quantum_ns(const tbio_tm_t *tm, uint64_t rate_bps)
{
    return rate_bps ? 512 * 1e9 / (double)rate_bps : tm->pfc.default_quantum_ns;
}

/* How long after a PAUSE it is sent again while its threshold stays crossed (_refresh_ns). */
static int64_t refresh_ns(const tbio_tm_t *tm, uint32_t port)
{
    const portq_t *q = tm->ports[port];
    return (int64_t)((double)tm->pfc.pause_quanta * quantum_ns(tm, q ? q->rate_bps : 0)) / 2;
}

/* Queue a PAUSE frame out of port and count it (_pause). */
static void send_pause(tbio_tm_t *tm, int64_t now, uint32_t port, uint32_t priority, uint32_t quanta)
{
    portq_t *q = port_of(tm, port, now);
    if (!q) abort(); /* out of memory in the packet path */
    if (quanta) q->pause_sent[priority]++;
    else q->resume_sent[priority]++;
    if (tm->pauses_len == tm->pauses_cap) {
        uint32_t cap = tm->pauses_cap ? 2 * tm->pauses_cap : 64;
        tbio_pause_t *p = realloc(tm->pauses, sizeof *p * cap);
        if (!p) abort();
        tm->pauses = p, tm->pauses_cap = cap;
    }
    tm->pauses[tm->pauses_len++] = (tbio_pause_t){.ns = now, .port = port, .priority = priority, .quanta = quanta};
}

static void xoff_add(tbio_tm_t *tm, uint32_t port, uint32_t priority, int64_t now)
{
    if (tm->xoff_len == tm->xoff_cap) {
        uint32_t cap = tm->xoff_cap ? 2 * tm->xoff_cap : 64;
        struct xoff *x = realloc(tm->xoff, sizeof *x * cap);
        if (!x) abort();
        tm->xoff = x, tm->xoff_cap = cap;
    }
    tm->xoff[tm->xoff_len++] = (struct xoff){port, priority, now};
    tm->xoff_on[port][priority] = 1;
}

static void xoff_remove(tbio_tm_t *tm, uint32_t port, uint32_t priority)
{
    for (uint32_t i = 0; i < tm->xoff_len; i++)
        if (tm->xoff[i].port == port && tm->xoff[i].priority == priority) {
            memmove(tm->xoff + i, tm->xoff + i + 1, sizeof *tm->xoff * (tm->xoff_len - i - 1));
            tm->xoff_len--;
            break;
        }
    tm->xoff_on[port][priority] = 0;
}

/* Move every departure the schedule gives q up to now into the ready list (_advance). */
static void advance(tbio_tm_t *tm, portq_t *q, int64_t now)
{
    i128 now_units = (i128)now * q->scale;
    while (q->count) {
        i128 start;
        uint32_t index;
        next_choice(q, &start, &index);
        if (start > now_units) break;
        entry_t e = fifo_pop(&q->queues[index]);
        q->count--;
        i128 bytes_units = (i128)e.nbytes * q->bps_units_per_byte;
        q->link_free = start + (q->pps_units > bytes_units ? q->pps_units : bytes_units);
        int64_t departure_ns = (int64_t)ceildiv128(start, q->scale);
        if (index < PFC_CLASSES) q->dequeued_by_priority[index]++;
        if (e.ingress >= 0) {
            uint32_t held = --tm->held[e.ingress][index];
            if (held <= tm->pfc.xon_packets && tm->xoff_on[e.ingress][index]) {
                xoff_remove(tm, (uint32_t)e.ingress, index);
                send_pause(tm, departure_ns, (uint32_t)e.ingress, index, 0);
            }
        }
        while (q->arrivals.len && q->arrivals.buf[q->arrivals.head] <= departure_ns) {
            tfifo_pop(&q->arrivals);
            q->arrived++;
        }
        q->departed++;
        q->dequeued++;
        tbio_departure_t d = {.port = q->port, .priority = index, .item = e.item, .nbytes = e.nbytes,
                              .enq_qdepth = e.enq_qdepth, .deq_qdepth = (uint32_t)(q->arrived - q->departed),
                              .enq_timestamp_ns = e.enq_ns, .deq_timestamp_ns = departure_ns};
        ready_push(tm, &d);
    }
    if (!q->count) busy_remove(tm, q);
}

int tbio_tm_set_queue(tbio_tm_t *tm, uint32_t port, uint64_t rate_pps, uint64_t rate_bps, uint32_t depth,
                      uint32_t priorities, int64_t now_ns)
{
    if (port >= MAX_PORTS || depth < 1 || priorities < 1 || priorities > MAX_PRIORITIES) return -2;
    portq_t *q = tm->ports[port];
    if (!q) {
        q = tm->ports[port] = portq_new(port, depth, priorities, now_ns);
        if (!q) return -3;
    } else {
        advance(tm, q, now_ns);
        if (priorities != q->npri) {
            if (q->count) return -1;
            fifo_t *queues = calloc(priorities, sizeof *queues);
            if (!queues) return -3;
            for (uint32_t i = 0; i < q->npri; i++) free(q->queues[i].buf);
            free(q->queues);
            q->queues = queues, q->npri = priorities;
        }
        q->depth = depth;
    }
    set_rates(q, rate_pps, rate_bps);
    return 0;
}

int64_t tbio_tm_enqueue(tbio_tm_t *tm, uint32_t port, uint64_t item, uint32_t nbytes, uint32_t priority,
                        int64_t now, int32_t ingress_port)
{
    if (port >= MAX_PORTS) return -1;
    portq_t *q = port_of(tm, port, now);
    if (!q) return -1;
    if (now < q->last_arrival) now = q->last_arrival; /* arrivals are kept in time order */
    if (q->count) advance(tm, q, now);
    if (priority >= q->npri) {
        q->dropped++, q->dropped_priority++;
        return -1;
    }
    fifo_t *f = &q->queues[priority];
    int32_t key = -1;
    if (tm->pfc_on && ingress_port >= 0 && ingress_port < MAX_PORTS && priority < PFC_CLASSES &&
        (tm->pfc.lossless >> priority & 1)) {
        /* lossless: never tail dropped; held back by the ingress buffer, paused upstream at XOFF */
        uint32_t held = tm->held[ingress_port][priority];
        if (held >= tm->pfc.buffer_packets) {
            q->dropped++, q->dropped_headroom++;
            return -1;
        }
        key = ingress_port;
        tm->held[ingress_port][priority] = held + 1;
        if (held + 1 >= tm->pfc.xoff_packets && !tm->xoff_on[ingress_port][priority]) {
            xoff_add(tm, (uint32_t)ingress_port, priority, now);
            send_pause(tm, now, (uint32_t)ingress_port, priority, tm->pfc.pause_quanta);
        }
    } else if (f->len >= q->depth) {
        q->dropped++, q->dropped_full++;
        return -1;
    }
    uint64_t depth = q->count;
    if (fifo_push(f, (entry_t){.item = item, .nbytes = nbytes, .enq_ns = now, .enq_qdepth = (uint32_t)depth,
                               .ingress = key}) ||
        tfifo_push(&q->arrivals, now))
        abort(); /* out of memory in the packet path (the accounting above is done) */
    q->last_arrival = now;
    q->count = depth + 1;
    q->enqueued++;
    if (depth + 1 > q->max_depth) q->max_depth = depth + 1;
    if (depth == 0) busy_add(tm, q);
    return (int64_t)depth;
}

static int ready_cmp(const void *a, const void *b)
{
    const ready_t *x = a, *y = b;
    if (x->d.deq_timestamp_ns != y->d.deq_timestamp_ns) return x->d.deq_timestamp_ns < y->d.deq_timestamp_ns ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

int tbio_tm_dequeue_ready(tbio_tm_t *tm, int64_t now, tbio_departure_t *out, int cap)
{
    if (tm->ready_pos >= tm->batch_end) { /* else: the rest of the previous batch comes first */
        if (tm->ready_pos) {
            memmove(tm->ready, tm->ready + tm->ready_pos, sizeof *tm->ready * (tm->ready_len - tm->ready_pos));
            tm->ready_len -= tm->ready_pos;
            tm->ready_pos = 0;
        }
        for (portq_t *q = tm->busy_head; q;) {
            portq_t *next = q->busy_next;
            advance(tm, q, now);
            q = next;
        }
        if (tm->ready_len > 1) qsort(tm->ready, tm->ready_len, sizeof *tm->ready, ready_cmp);
        tm->batch_end = tm->ready_len;
    }
    int n = 0;
    while (n < cap && tm->ready_pos < tm->batch_end) out[n++] = tm->ready[tm->ready_pos++].d;
    return n;
}

int tbio_tm_next_departure(tbio_tm_t *tm, int64_t *when)
{
    int found = 0;
    int64_t best = 0;
    for (uint32_t i = tm->ready_pos; i < tm->ready_len; i++)
        if (!found || tm->ready[i].d.deq_timestamp_ns < best) best = tm->ready[i].d.deq_timestamp_ns, found = 1;
    for (portq_t *q = tm->busy_head; q; q = q->busy_next) {
        i128 start;
        uint32_t index;
        next_choice(q, &start, &index);
        int64_t start_ns = (int64_t)ceildiv128(start, q->scale);
        if (!found || start_ns < best) best = start_ns, found = 1;
    }
    if (found) *when = best;
    return found;
}

uint64_t tbio_tm_depth(tbio_tm_t *tm, uint32_t port, int64_t now_ns)
{
    portq_t *q = port < MAX_PORTS ? tm->ports[port] : NULL;
    if (!q) return 0;
    if (q->count) advance(tm, q, now_ns);
    return q->count;
}

void tbio_tm_stats(tbio_tm_t *tm, uint32_t port, int64_t now_ns, tbio_queue_stats_t *out)
{
    memset(out, 0, sizeof *out);
    portq_t *q = port < MAX_PORTS ? tm->ports[port] : NULL;
    if (!q) return;
    if (q->count) advance(tm, q, now_ns);
    *out = (tbio_queue_stats_t){q->enqueued, q->dequeued, q->dropped, q->dropped_full, q->dropped_priority,
                                q->count, q->max_depth, q->dropped_headroom};
}

int tbio_tm_ports(tbio_tm_t *tm, uint32_t *out, int cap)
{
    int n = 0;
    for (uint32_t port = 0; port < MAX_PORTS && n < cap; port++)
        if (tm->ports[port]) out[n++] = port;
    return n;
}

int tbio_tm_set_pfc(tbio_tm_t *tm, const tbio_pfc_config_t *config)
{
    for (int i = 0; i < MAX_PORTS; i++)
        if (tm->ports[i] && tm->ports[i]->count) return -1; /* the accounting starts empty */
    tm->pfc_on = config != NULL;
    if (config) tm->pfc = *config;
    memset(tm->held, 0, sizeof tm->held);
    memset(tm->xoff_on, 0, sizeof tm->xoff_on);
    tm->xoff_len = 0;
    return 0;
}

int tbio_tm_pfc(tbio_tm_t *tm, tbio_pfc_config_t *config)
{
    if (tm->pfc_on) *config = tm->pfc;
    return tm->pfc_on;
}

void tbio_tm_receive_pause(tbio_tm_t *tm, uint32_t port, uint32_t n, const uint32_t *priorities,
                           const uint32_t *quanta, int64_t now)
{
    if (port >= MAX_PORTS) return;
    portq_t *q = port_of(tm, port, now);
    if (!q) return;
    if (q->count) advance(tm, q, now);
    double quantum = quantum_ns(tm, q->rate_bps);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t p = priorities[i];
        if (p >= PFC_CLASSES) continue;
        int64_t until = now + (int64_t)((double)quanta[i] * quantum);
        if (q->paused_until[p] > now) q->paused_ns[p] += now - q->pause_since[p]; /* still paused: close at now */
        else q->paused_ns[p] += q->paused_until[p] - q->pause_since[p];
        q->pause_since[p] = now;
        q->paused_until[p] = until;
        if (quanta[i]) q->pause_received[p]++;
        else q->resume_received[p]++;
    }
}

int tbio_tm_pause_frames(tbio_tm_t *tm, int64_t now)
{
    for (portq_t *q = tm->busy_head; q;) {
        portq_t *next = q->busy_next;
        advance(tm, q, now);
        q = next;
    }
    for (uint32_t i = 0; i < tm->xoff_len; i++) {
        struct xoff *x = &tm->xoff[i];
        if (now >= x->sent + refresh_ns(tm, x->port)) {
            x->sent = now;
            send_pause(tm, now, x->port, x->priority, tm->pfc.pause_quanta);
        }
    }
    return (int)(tm->pauses_len - tm->pauses_pos);
}

int tbio_tm_take_pauses(tbio_tm_t *tm, tbio_pause_t *out, int cap)
{
    int n = 0;
    while (n < cap && tm->pauses_pos < tm->pauses_len) out[n++] = tm->pauses[tm->pauses_pos++];
    if (tm->pauses_pos == tm->pauses_len) tm->pauses_pos = tm->pauses_len = 0;
    return n;
}

int tbio_tm_next_pause(tbio_tm_t *tm, int64_t *when)
{
    int found = 0;
    int64_t best = 0;
    if (tm->pauses_pos < tm->pauses_len) {
        for (uint32_t i = tm->pauses_pos; i < tm->pauses_len; i++)
            if (!found || tm->pauses[i].ns < best) best = tm->pauses[i].ns, found = 1;
    } else {
        for (uint32_t i = 0; i < tm->xoff_len; i++) {
            int64_t due = tm->xoff[i].sent + refresh_ns(tm, tm->xoff[i].port);
            if (!found || due < best) best = due, found = 1;
        }
    }
    if (found) *when = best;
    return found;
}

void tbio_tm_pfc_stats(tbio_tm_t *tm, uint32_t port, int64_t now, tbio_pfc_stats_t *out)
{
    memset(out, 0, sizeof *out);
    portq_t *q = port < MAX_PORTS ? tm->ports[port] : NULL;
    if (!q) return;
    if (q->count) advance(tm, q, now);
    for (uint32_t p = 0; p < PFC_CLASSES; p++) {
        int64_t end = now < q->paused_until[p] ? now : q->paused_until[p];
        int64_t extra = end - q->pause_since[p];
        out->paused_ns[p] = q->paused_ns[p] + (extra > 0 ? extra : 0);
        out->paused[p] = q->paused_until[p] > now;
        out->pause_sent[p] = q->pause_sent[p], out->resume_sent[p] = q->resume_sent[p];
        out->pause_received[p] = q->pause_received[p], out->resume_received[p] = q->resume_received[p];
        out->dequeued[p] = q->dequeued_by_priority[p];
        out->held[p] = tm->held[port][p];
        if (p < q->npri) {
            const fifo_t *f = &q->queues[p];
            out->queued[p] = f->len;
            for (uint32_t i = 0; i < f->len; i++) {
                int32_t ingress = f->buf[(f->head + i) % f->cap].ingress;
                if (ingress >= 0) out->holders[p][ingress / 64] |= 1ull << (ingress % 64);
            }
        }
    }
    out->dropped_headroom = q->dropped_headroom;
}

int tbio_tm_queue_config(tbio_tm_t *tm, uint32_t port, uint64_t *rate_pps, uint64_t *rate_bps, uint32_t *depth,
                         uint32_t *priorities)
{
    portq_t *q = port < MAX_PORTS ? tm->ports[port] : NULL;
    if (!q) {
        *rate_pps = *rate_bps = 0, *depth = tm->default_depth, *priorities = tm->default_priorities;
        return 0;
    }
    *rate_pps = q->rate_pps, *rate_bps = q->rate_bps, *depth = q->depth, *priorities = q->npri;
    return 1;
}

/* ======================================================================= packet loop */

typedef struct ops {
    uint32_t (*abi_version)(void);
    size_t (*packet_size)(void);
    void (*packet_reset)(tb_pipeline_t *, tb_packet_t *);
    tb_std_meta_t *(*packet_std)(tb_packet_t *);
    void (*packet_copy)(tb_packet_t *, const tb_packet_t *);
    void (*packet_copy_headers)(tb_packet_t *, const tb_packet_t *);
    void (*preserve_fields)(int, const tb_packet_t *, tb_packet_t *);
    int (*parse)(tb_pipeline_t *, tb_packet_t *, const uint8_t *, uint32_t);
    int (*ingress)(tb_pipeline_t *, tb_packet_t *, uint64_t, tb_request_t *);
    int (*egress)(tb_pipeline_t *, tb_packet_t *, uint64_t, tb_request_t *);
    int (*deparse)(tb_pipeline_t *, tb_packet_t *, uint8_t *, uint32_t);
    /* optional: programs of the native backend that can call the target's own externs (DSF) */
    int (*extern_requests)(const tb_packet_t *, int32_t *, uint64_t *, uint32_t);
    /* optional: digests and log_msg calls of the last stage(s) */
    int (*events)(const tb_packet_t *, int32_t *, uint64_t *, uint32_t);
    /* optional: the state lock the control plane holds while it copies tables into native memory */
    void (*pl_lock)(tb_pipeline_t *);
    void (*pl_unlock)(tb_pipeline_t *);
} ops_t;

#define EVENT_VALUES 16    /* TB_MAX_EVENT_VALUES */
#define EVENTS_PER_STAGE 16 /* TB_MAX_EVENTS */
#define EVENT_QUEUE 4096

typedef struct event {
    int32_t site;
    uint32_t valid;        /* 0: the stage failed or was not ingress: its digests are not sent */
    uint64_t values[EVENT_VALUES];
} event_t;

#define SLOT_FRAME XSK_FRAME /* a slot's frame: what a port receives, a punted or delayed frame */
#define SCRATCH 4096u      /* the deparser's output buffer */

/* A packet between receive and transmit: its headers and metadata (tb_packet_t, after the slot
 * header) and a frame buffer.  Copies of a packet (multicast, clones, resubmit) parse or keep
 * pointing into the frame of the slot that received it (owner), which lives while refs > 0. */
typedef struct slot {
    struct slot *next;       /* free list, punt and delay queues */
    struct slot *owner;
    uint32_t refs, len, passes;
    int32_t truncate;
    int64_t release_ns;      /* delay queue */
    uint8_t frame[SLOT_FRAME];
} slot_t;

typedef struct replicas {
    uint32_t n, packet_length;
    uint32_t *ports, *rids;
} replicas_t;

#define QDISC_BATCH 64 /* frames per sendmmsg on a port that sends through its qdisc */

typedef struct xport {
    struct xsk xsk;
    uint32_t port;
    double loss;
    int64_t delay_ns;
    uint64_t rng;
    slot_t *delayed_head, *delayed_tail;
    /* >= 0: frames leave through this AF_PACKET socket, since AF_XDP's transmit bypasses the port's
     * qdisc (tc shaping); the loop's frames wait in qbuf until port_flush */
    int qdisc_fd;
    uint32_t nq;
    uint8_t *qbuf;
    struct mmsghdr *qmsgs;
    struct iovec *qiov;
    /* >= 0: AF_XDP could not be set up on the port (a VXLAN device has no XDP, see tbio_add_port):
     * frames arrive through this AF_PACKET socket and leave through qdisc_fd */
    int rx_fd;
    uint64_t rx_drops;     /* PACKET_STATISTICS' drops, summed (reading them resets them) */
    uint8_t *rbuf;
    struct mmsghdr *rmsgs;
    struct iovec *riov;
} xport_t;

/* Send the frames waiting for the port's qdisc; what it refuses (its queue or the socket's buffer
 * full) is dropped, as a link drops what its queue cannot take. */
static void qdisc_flush(xport_t *x, uint64_t *dropped)
{
    for (uint32_t done = 0; done < x->nq;) {
        int n = sendmmsg(x->qdisc_fd, x->qmsgs + done, x->nq - done, MSG_DONTWAIT);
        if (n > 0) done += (uint32_t)n;
        else if (errno != EINTR) done++, (*dropped)++; /* ENOBUFS / EAGAIN: this frame is lost */
    }
    x->nq = 0;
}

/* Queue one frame to leave the port; 0 when it cannot (see xsk_tx_put). */
static int port_put(xport_t *x, const void *data, uint32_t len, uint64_t *dropped)
{
    if (x->qdisc_fd < 0) return xsk_tx_put(&x->xsk, data, len);
    if (len > XSK_FRAME) return 0;
    if (x->nq == QDISC_BATCH) qdisc_flush(x, dropped);
    memcpy(x->qbuf + (size_t)x->nq * XSK_FRAME, data, len);
    x->qiov[x->nq].iov_len = len;
    x->nq++;
    return 1;
}

static void port_close(xport_t *x)
{
    xsk_close(&x->xsk);
    if (x->qdisc_fd >= 0) close(x->qdisc_fd);
    if (x->rx_fd >= 0) close(x->rx_fd);
    free(x->qbuf), free(x->qmsgs), free(x->qiov);
    free(x->rbuf), free(x->rmsgs), free(x->riov);
}

#define RX_CONTROL CMSG_SPACE(sizeof(struct tpacket_auxdata))
#define RX_HEADROOM 4u /* a VLAN tag the kernel took out goes back in front of the EtherType */

/* Receive up to max (<= RX_BATCH) frames from a port without AF_XDP (rx_fd), as xsk_receive does; a
 * frame keeps the VLAN tag the kernel took out (packet_sockets.receive_frame, libpcap); one longer
 * than a slot's frame is dropped (a kernel drop: AF_XDP could not have taken it either). */
static uint32_t packet_receive(xport_t *x, uint32_t max, void (*fn)(void *, const uint8_t *, uint32_t), void *ctx)
{
    uint8_t *control = x->rbuf + (size_t)RX_BATCH * XSK_FRAME;
    for (uint32_t i = 0; i < max; i++) {
        x->rmsgs[i].msg_hdr.msg_control = control + (size_t)i * RX_CONTROL;
        x->rmsgs[i].msg_hdr.msg_controllen = RX_CONTROL;
        x->rmsgs[i].msg_hdr.msg_flags = 0;
    }
    int n = recvmmsg(x->rx_fd, x->rmsgs, max, MSG_DONTWAIT, NULL);
    for (int i = 0; i < n; i++) {
        struct msghdr *h = &x->rmsgs[i].msg_hdr;
        uint8_t *data = x->rbuf + (size_t)i * XSK_FRAME + RX_HEADROOM;
        uint32_t len = x->rmsgs[i].msg_len;
        if (h->msg_flags & MSG_TRUNC || len < ETH_HEADER) {
            x->rx_drops++;
            continue;
        }
        for (struct cmsghdr *c = CMSG_FIRSTHDR(h); c; c = CMSG_NXTHDR(h, c)) {
            if (c->cmsg_level != SOL_PACKET || c->cmsg_type != PACKET_AUXDATA) continue;
            struct tpacket_auxdata aux;
            memcpy(&aux, CMSG_DATA(c), sizeof aux);
            if (!(aux.tp_status & TP_STATUS_VLAN_VALID || aux.tp_vlan_tci)) break;
            uint16_t tpid = aux.tp_status & TP_STATUS_VLAN_TPID_VALID ? aux.tp_vlan_tpid : ETH_P_8021Q;
            memmove(data - RX_HEADROOM, data, 12);
            data -= RX_HEADROOM, len += RX_HEADROOM;
            data[12] = (uint8_t)(tpid >> 8), data[13] = (uint8_t)tpid;
            data[14] = (uint8_t)(aux.tp_vlan_tci >> 8), data[15] = (uint8_t)aux.tp_vlan_tci;
        }
        fn(ctx, data, len);
    }
    return n > 0 ? (uint32_t)n : 0;
}

typedef struct pending { /* a recirculated frame waiting for ingress */
    slot_t *frame, *src;
    uint32_t port;
    int field_list;
} pending_t;

struct tbio_loop {
    pthread_mutex_t mutex;
    int waiters, woken;
    int wake_fd;
    /* the loop's own thread (tbio_start): it tells its reader through notify_fd and noted */
    pthread_t thread;
    int threaded, stopping;
    int notify_fd;
    uint32_t noted; /* bit s: status s happened since tbio_wait last looked */
    int32_t cpu_port;
    int64_t origin;
    uint32_t ring_size, max_ports, seed;
    struct xsk_umem umem; /* every port's AF_XDP frames (set up with the first port) */
    xport_t *xports[MAX_PORTS];
    uint32_t xport_list[MAX_PORTS], nxports;
    tbio_port_stats_t stats[MAX_PORTS];
    tbio_tm_t *tm;
    tbio_pktgen_t *pktgen;
    int generating; /* on_frame has a packet generator's frame: it never passed the kernel's receive path */
    ops_t ops;
    void *dl;
    tb_pipeline_t *pl;
    size_t slot_size;
    slot_t *free_slots;
    uint8_t *unused;       /* the newest chunk's slots not used yet: unused_slots of them from here */
    uint32_t unused_slots, nslots;
    void **chunks;
    uint32_t nchunks;
    slot_t *punt_head, *punt_tail;
    uint32_t npunted;
    replicas_t *groups[65536];
    replicas_t *sessions[65536];
    pending_t pending[DEQ_BATCH];
    uint32_t npending;
    event_t events[EVENT_QUEUE];
    uint32_t events_head, nevents;
    uint64_t events_dropped;
    uint64_t errors;
    int unsupported, unsupported_reported; /* a packet called the target's own externs (DSF) */
    struct dsf_glue *dsf;                  /* the DSF traffic manager (tbio_dsf.h); NULL: none */
    int halted, halt_reported;
    char halt_reason[256];
    uint8_t scratch[SCRATCH];
    uint8_t (*pause_frame)[PAUSE_BYTES];  /* per port: its PAUSE frame, no class enabled (tbio_set_pause_frame) */
    uint8_t pause_kind[4];                /* ethertype and opcode of PAUSE frames; 0: none set */
};

#define PKT(loop, s) ((tb_packet_t *)((uint8_t *)(s) + sizeof(slot_t)))

/* A free slot: a released one, else the next never used of the newest chunk, so a chunk's pages
 * become resident only as its slots are first used. */
static slot_t *slot_get(tbio_loop_t *L)
{
    slot_t *s = L->free_slots;
    if (s) {
        L->free_slots = s->next;
    } else {
        if (!L->unused_slots) {
            if (L->nslots >= MAX_SLOTS) return NULL;
            uint32_t n = 64;
            uint8_t *chunk = malloc(L->slot_size * n);
            void **chunks = realloc(L->chunks, sizeof *chunks * (L->nchunks + 1));
            if (!chunk || !chunks) {
                free(chunk);
                if (chunks) L->chunks = chunks;
                return NULL;
            }
            L->chunks = chunks;
            L->chunks[L->nchunks++] = chunk;
            L->unused = chunk;
            L->unused_slots = n;
            L->nslots += n;
        }
        s = (slot_t *)L->unused;
        L->unused += L->slot_size;
        L->unused_slots--;
    }
    s->next = NULL, s->owner = s, s->refs = 1, s->len = 0, s->passes = 0, s->truncate = -1;
    return s;
}

static void slot_unref(tbio_loop_t *L, slot_t *s)
{
    if (--s->refs == 0) {
        s->next = L->free_slots;
        L->free_slots = s;
    }
}

/* The packet in s is done: release it and its hold on the frame it points into. */
static void packet_free(tbio_loop_t *L, slot_t *s)
{
    if (s->owner != s) slot_unref(L, s->owner);
    slot_unref(L, s);
}

/* A new packet slot whose frame is s's frame (owner's). */
static slot_t *packet_sharing_frame(tbio_loop_t *L, slot_t *s)
{
    slot_t *c = slot_get(L);
    if (!c) return NULL;
    c->owner = s->owner;
    c->owner->refs++;
    c->len = s->len;
    c->passes = s->passes;
    return c;
}

static tbio_port_stats_t *port_stats(tbio_loop_t *L, uint32_t port)
{
    static tbio_port_stats_t sink;
    return port < MAX_PORTS ? &L->stats[port] : &sink;
}

static void halt(tbio_loop_t *L, const char *where, uint32_t port, int rc)
{
    L->halted = 1;
    port_stats(L, port)->drops++;
    snprintf(L->halt_reason, sizeof L->halt_reason, "%s port %u: the program stopped the switch (status %d)", where,
             port, rc);
}

/* After a pipeline stage: 0 when it went on (TB_OK), else the packet is gone and 1: a halt stopped
 * the switch, any other status dropped the packet (both counted as a drop on port). */
static int stage_ended(tbio_loop_t *L, slot_t *s, const char *stage, uint32_t port, int rc)
{
    if (rc == TB_OK) return 0;
    if (rc == TB_HALT) halt(L, stage, port, rc);
    else port_stats(L, port)->drops++;
    packet_free(L, s);
    return 1;
}

static const uint8_t *frame_of(slot_t *s) { return s->owner->frame; }

/* Queue the digests and log_msg calls the last stage(s) of pkt reported, for Python. */
static void collect_events(tbio_loop_t *L, tb_packet_t *pkt, uint32_t valid)
{
    if (!L->ops.events) return;
    int32_t sites[EVENTS_PER_STAGE];
    uint64_t values[EVENTS_PER_STAGE * EVENT_VALUES];
    int n = L->ops.events(pkt, sites, values, EVENTS_PER_STAGE);
    for (int i = 0; i < n; i++) {
        if (L->nevents == EVENT_QUEUE) {
            L->events_dropped++;
            continue;
        }
        event_t *e = &L->events[(L->events_head + L->nevents++) % EVENT_QUEUE];
        e->site = sites[i], e->valid = valid;
        memcpy(e->values, values + (size_t)i * EVENT_VALUES, sizeof e->values);
    }
}

static void enqueue(tbio_loop_t *L, slot_t *s)
{
    tb_std_meta_t *std = L->ops.packet_std(PKT(L, s));
    uint32_t port = std->egress_port;
    /* counted against their ingress port under PFC: received packets and their multicast copies */
    int32_t ingress = std->instance_type == TB_INSTANCE_NORMAL || std->instance_type == TB_INSTANCE_REPLICATION
                          ? (int32_t)std->ingress_port : -1;
    if (tbio_tm_enqueue(L->tm, port, (uint64_t)(uintptr_t)s, std->packet_length, std->priority, clock_ns(),
                        ingress) < 0) {
        port_stats(L, port)->drops++;
        packet_free(L, s);
    }
}

static void run_ingress(tbio_loop_t *L, slot_t *s, uint32_t port, uint32_t instance, slot_t *src, int field_list);
#include "tbio_dsf.h"

/* Copies of the packet as it entered ingress, one per replica of the clone session (_i2e_clones). */
static void i2e_clones(tbio_loop_t *L, slot_t *s, uint32_t port, int32_t session, int field_list)
{
    replicas_t *r = session >= 0 && session < 65536 ? L->sessions[session] : NULL;
    if (!r) return;
    for (uint32_t i = 0; i < r->n; i++) {
        slot_t *c = packet_sharing_frame(L, s);
        if (!c) {
            L->errors++;
            return;
        }
        tb_packet_t *pkt = PKT(L, c);
        L->ops.packet_reset(L->pl, pkt);
        if (field_list >= 0) L->ops.preserve_fields(field_list, PKT(L, s), pkt);
        tb_std_meta_t *std = L->ops.packet_std(pkt);
        std->packet_length = s->len;
        std->instance_type = TB_INSTANCE_INGRESS_CLONE;
        int rc = L->ops.parse(L->pl, pkt, frame_of(c), c->len);
        collect_events(L, pkt, 0);
        if (rc == TB_HALT) {
            halt(L, "clone parser", port, rc);
            packet_free(L, c);
            return;
        }
        if (rc != TB_OK) {
            L->errors++;
            packet_free(L, c);
            continue;
        }
        std->egress_port = r->ports[i];
        std->egress_rid = r->rids[i];
        c->truncate = r->packet_length ? (int32_t)r->packet_length : -1;
        enqueue(L, c);
    }
}

/* Parser, verifyChecksum, ingress and the end-of-ingress decisions (_run_ingress); s is consumed. */
static void run_ingress(tbio_loop_t *L, slot_t *s, uint32_t port, uint32_t instance, slot_t *src, int field_list)
{
    int64_t now = clock_ns();
    if (instance == TB_INSTANCE_NORMAL) {
        port_stats(L, port)->rx_packets++;
        port_stats(L, port)->rx_bytes += s->len;
    }
    tb_packet_t *pkt = PKT(L, s);
    L->ops.packet_reset(L->pl, pkt);
    tb_std_meta_t *std = L->ops.packet_std(pkt);
    std->ingress_port = port;
    std->packet_length = s->len;
    std->instance_type = instance;
    std->ingress_global_timestamp = (uint64_t)floordiv(now - L->origin, 1000) & MASK48;
    tb_request_t req;
    memset(&req, 0, sizeof req);
    int rc = L->ops.parse(L->pl, pkt, frame_of(s), s->len);
    if (rc == TB_OK && src) L->ops.preserve_fields(field_list, PKT(L, src), pkt);
    if (rc == TB_OK) rc = L->ops.ingress(L->pl, pkt, (uint64_t)now, &req);
    collect_events(L, pkt, rc == TB_OK);
    if (stage_ended(L, s, "ingress", port, rc)) return;
    if (L->dsf) {
        if (dsf_takes(L, s, pkt, now)) return;
    } else if (L->ops.extern_requests) {
        int32_t ids[1];
        uint64_t args[64];
        if (L->ops.extern_requests(pkt, ids, args, 1) > 0) { /* the DSF traffic manager is Python's */
            L->unsupported = 1;
            L->errors++;
            port_stats(L, port)->drops++;
            packet_free(L, s);
            return;
        }
    }
    if (req.clone_session >= 0) i2e_clones(L, s, port, req.clone_session, req.clone_field_list);
    if (req.resubmit_field_list >= 0) {
        if (s->passes + 1 < MAX_PASSES) {
            slot_t *r = packet_sharing_frame(L, s);
            if (r) {
                r->passes = s->passes + 1;
                run_ingress(L, r, port, TB_INSTANCE_RESUBMIT, s, req.resubmit_field_list);
            } else {
                L->errors++;
            }
        }
        packet_free(L, s);
        return;
    }
    uint32_t group = std->mcast_grp;
    if (group) {
        replicas_t *r = group < 65536 ? L->groups[group] : NULL;
        if (!r || !r->n) port_stats(L, port)->drops++;
        for (uint32_t i = 0; r && i < r->n; i++) {
            slot_t *c = packet_sharing_frame(L, s);
            if (!c) {
                L->errors++;
                break;
            }
            L->ops.packet_copy(PKT(L, c), pkt);
            tb_std_meta_t *cs = L->ops.packet_std(PKT(L, c));
            cs->egress_port = r->ports[i];
            cs->egress_rid = r->rids[i];
            cs->instance_type = TB_INSTANCE_REPLICATION;
            c->truncate = req.truncate_length;
            enqueue(L, c);
        }
        packet_free(L, s);
        return;
    }
    if (std->egress_spec == TB_DROP_PORT) {
        port_stats(L, port)->drops++;
        packet_free(L, s);
        return;
    }
    std->egress_port = std->egress_spec;
    s->truncate = req.truncate_length;
    enqueue(L, s);
}

static uint64_t next_random(uint64_t *state) /* splitmix64 */
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void punt(tbio_loop_t *L, const uint8_t *data, uint32_t len)
{
    /* bounded: a reader held up (Python waiting for its GIL) must not take the slots forwarding needs */
    slot_t *p = len <= SLOT_FRAME && L->npunted < PUNT_QUEUE ? slot_get(L) : NULL;
    if (!p) {
        L->errors++;
        return;
    }
    memcpy(p->frame, data, len);
    p->len = len;
    if (L->punt_tail) L->punt_tail->next = p;
    else L->punt_head = p;
    L->punt_tail = p;
    L->npunted++;
}

/* A frame leaving port: the CPU port's goes to Python, a data port's through its loss and delay. */
static void output(tbio_loop_t *L, uint32_t port, const uint8_t *data, uint32_t len, int64_t now)
{
    if ((int32_t)port == L->cpu_port) {
        punt(L, data, len);
        return;
    }
    xport_t *x = port < MAX_PORTS ? L->xports[port] : NULL;
    if (!x) return; /* no interface: as the Python switch, nothing is sent */
    if (x->loss > 0 && (double)(next_random(&x->rng) >> 11) * 0x1.0p-53 < x->loss) {
        L->stats[port].impairment_drops++;
        return;
    }
    if (x->delay_ns > 0) {
        slot_t *d = len <= SLOT_FRAME ? slot_get(L) : NULL;
        if (!d) {
            L->stats[port].tx_errors++;
            return;
        }
        memcpy(d->frame, data, len);
        d->len = len;
        d->release_ns = now + x->delay_ns;
        if (x->delayed_tail) x->delayed_tail->next = d;
        else x->delayed_head = d;
        x->delayed_tail = d;
        return;
    }
    if (!port_put(x, data, len, &L->stats[port].tx_errors)) L->stats[port].tx_errors++;
}

/* Copies of the packet as egress left it, metadata reset, one per replica of the clone session;
 * they queue again (the E2E clone branch of _run_egress, enqueued as transmit_ready does). */
static void e2e_clones(tbio_loop_t *L, slot_t *s, int32_t session, int field_list, int32_t truncate)
{
    replicas_t *r = session < 65536 ? L->sessions[session] : NULL;
    if (!r) return;
    tb_packet_t *pkt = PKT(L, s);
    tb_std_meta_t *std = L->ops.packet_std(pkt);
    for (uint32_t i = 0; i < r->n; i++) {
        slot_t *c = packet_sharing_frame(L, s);
        if (!c) {
            L->errors++;
            return;
        }
        tb_packet_t *copy = PKT(L, c);
        L->ops.packet_reset(L->pl, copy);
        L->ops.packet_copy_headers(copy, pkt);
        tb_std_meta_t *cs = L->ops.packet_std(copy);
        cs->packet_length = std->packet_length;
        cs->instance_type = TB_INSTANCE_EGRESS_CLONE;
        cs->egress_port = r->ports[i];
        cs->egress_rid = r->rids[i];
        if (field_list >= 0) L->ops.preserve_fields(field_list, pkt, copy);
        c->truncate = r->packet_length ? (int32_t)r->packet_length : truncate;
        enqueue(L, c);
    }
}

/* Egress, deparser and what follows (_run_egress); s is consumed unless recirculated (pending). */
static void run_egress(tbio_loop_t *L, slot_t *s, int64_t now)
{
    tb_packet_t *pkt = PKT(L, s);
    tb_std_meta_t *std = L->ops.packet_std(pkt);
    uint32_t port = std->egress_port;
    std->egress_spec = 0;
    std->egress_global_timestamp = (uint64_t)floordiv(now - L->origin, 1000) & MASK48;
    tb_request_t req;
    memset(&req, 0, sizeof req);
    int rc = L->ops.egress(L->pl, pkt, (uint64_t)now, &req);
    collect_events(L, pkt, 0);
    if (stage_ended(L, s, "egress", port, rc)) return;
    int32_t truncate = req.truncate_length >= 0 ? req.truncate_length : s->truncate;
    if (req.clone_session >= 0) e2e_clones(L, s, req.clone_session, req.clone_field_list, truncate);
    if (std->egress_spec == TB_DROP_PORT) {
        port_stats(L, port)->drops++;
        packet_free(L, s);
        return;
    }
    int len = L->ops.deparse(L->pl, pkt, L->scratch, SCRATCH);
    collect_events(L, pkt, 0);
    if (len < 0) {
        if (len == -TB_NEED_SPACE) L->errors++;
        stage_ended(L, s, "deparser", port, -len);
        return;
    }
    if (truncate >= 0 && truncate < len) len = truncate;
    if (req.recirculate_field_list >= 0) {
        slot_t *f = s->passes + 1 < MAX_PASSES && L->npending < DEQ_BATCH && len <= (int)SLOT_FRAME ? slot_get(L) : NULL;
        if (!f) {
            if (s->passes + 1 < MAX_PASSES) L->errors++; /* too long for a slot, or out of slots */
            packet_free(L, s);
            return;
        }
        memcpy(f->frame, L->scratch, (size_t)len);
        f->len = (uint32_t)len;
        f->passes = s->passes + 1;
        L->pending[L->npending++] = (pending_t){f, s, std->ingress_port, req.recirculate_field_list};
        return;
    }
    port_stats(L, port)->tx_packets++;
    port_stats(L, port)->tx_bytes += (uint64_t)len;
    output(L, port, L->scratch, (uint32_t)len, now);
    packet_free(L, s);
}

/* The PAUSE frames the traffic manager asks for, out of their ports ahead of the departures
 * (device.py's _send_pauses). */
static void send_pauses(tbio_loop_t *L, int64_t now)
{
    tbio_pfc_config_t config;
    if (!tbio_tm_pfc(L->tm, &config) || !tbio_tm_pause_frames(L->tm, now)) return;
    tbio_pause_t pauses[64];
    int n;
    while ((n = tbio_tm_take_pauses(L->tm, pauses, 64)) > 0)
        for (int i = 0; i < n; i++) {
            const tbio_pause_t *p = &pauses[i];
            if (!L->pause_frame || p->port >= MAX_PORTS || !L->pause_frame[p->port][0]) continue; /* no frame: no port */
            uint8_t frame[PAUSE_BYTES];
            memcpy(frame, L->pause_frame[p->port], PAUSE_BYTES);
            uint8_t *vector = frame + PAUSE_VECTOR_AT, *quanta = frame + PAUSE_QUANTA_AT + 2 * p->priority;
            vector[0] = (uint8_t)(1u << p->priority >> 8), vector[1] = (uint8_t)(1u << p->priority);
            quanta[0] = (uint8_t)(p->quanta >> 8), quanta[1] = (uint8_t)p->quanta;
            port_stats(L, p->port)->tx_packets++;
            port_stats(L, p->port)->tx_bytes += PAUSE_BYTES;
            output(L, p->port, frame, PAUSE_BYTES, now);
        }
}

/* Dequeue what the port rates allow, run egress (transmit_ready). */
static void transmit_ready(tbio_loop_t *L, int64_t now)
{
    tbio_departure_t deps[DEQ_BATCH];
    int n;
    do {
        n = tbio_tm_dequeue_ready(L->tm, now, deps, DEQ_BATCH);
        send_pauses(L, now);
        for (int i = 0; i < n && !L->halted; i++) {
            const tbio_departure_t *d = &deps[i];
            slot_t *s = (slot_t *)(uintptr_t)d->item;
            tb_std_meta_t *std = L->ops.packet_std(PKT(L, s));
            std->enq_timestamp = (uint32_t)((uint64_t)floordiv(d->enq_timestamp_ns - L->origin, 1000) & MASK32);
            std->enq_qdepth = d->enq_qdepth & QDEPTH_MASK;
            std->deq_timedelta =
                (uint32_t)((uint64_t)floordiv(d->deq_timestamp_ns - d->enq_timestamp_ns, 1000) & MASK32);
            std->deq_qdepth = d->deq_qdepth & QDEPTH_MASK;
            run_egress(L, s, d->deq_timestamp_ns);
            if (L->npending == DEQ_BATCH) break;
        }
        for (uint32_t i = 0; i < L->npending; i++) {
            pending_t *p = &L->pending[i];
            run_ingress(L, p->frame, p->port, TB_INSTANCE_RECIRC, p->src, p->field_list);
            packet_free(L, p->src);
        }
        L->npending = 0;
    } while (n == DEQ_BATCH && !L->halted);
}

static void release_delayed(tbio_loop_t *L, int64_t now)
{
    for (uint32_t i = 0; i < L->nxports; i++) {
        xport_t *x = L->xports[L->xport_list[i]];
        while (x->delayed_head && x->delayed_head->release_ns <= now) {
            slot_t *d = x->delayed_head;
            x->delayed_head = d->next;
            if (!x->delayed_head) x->delayed_tail = NULL;
            if (!port_put(x, d->frame, d->len, &L->stats[x->port].tx_errors)) L->stats[x->port].tx_errors++;
            slot_unref(L, d);
        }
    }
}

struct rx_ctx {
    tbio_loop_t *L;
    uint32_t port;
};

static void on_frame(void *ctx, const uint8_t *data, uint32_t len)
{
    struct rx_ctx *c = ctx;
    tbio_loop_t *L = c->L;
    tbio_pfc_config_t config;
    /* The kernel's receive path drops an 802.1Q/802.1ad frame too short to untag (skb_vlan_untag pulls
     * the 4-byte tag and the inner EtherType) before any packet socket sees it, so BMv2 (libpcap) and the
     * Python switch never get it; XDP runs before that and would. */
    if (!L->generating && len < ETH_HEADER + 6 && len >= ETH_HEADER &&
        ((data[12] == 0x81 && data[13] == 0x00) || (data[12] == 0x88 && data[13] == 0xa8)))
        return;
    if (len >= PAUSE_HEADER && L->pause_kind[0] && !memcmp(data + 12, L->pause_kind, 4) &&
        tbio_tm_pfc(L->tm, &config)) { /* a PAUSE frame: honoured by the port's egress queues (Device.receive) */
        uint32_t priorities[PFC_CLASSES], quanta[PFC_CLASSES], n = 0;
        const uint8_t *at = data + PAUSE_QUANTA_AT;
        uint32_t vector = (uint32_t)data[PAUSE_VECTOR_AT] << 8 | data[PAUSE_VECTOR_AT + 1];
        for (uint32_t p = 0; p < PFC_CLASSES; p++)
            if (vector >> p & 1) priorities[n] = p, quanta[n++] = (uint32_t)at[2 * p] << 8 | at[2 * p + 1];
        L->stats[c->port].rx_packets++;
        L->stats[c->port].rx_bytes += len;
        tbio_tm_receive_pause(L->tm, c->port, n, priorities, quanta, clock_ns());
        return;
    }
    if (!L->pl || L->halted) { /* no pipeline (as BMv2 --no-p4) or a halted switch: dropped */
        if (L->halted) L->stats[c->port].drops++;
        return;
    }
    slot_t *s = slot_get(L);
    if (!s) {
        L->stats[c->port].drops++;
        return;
    }
    memcpy(s->frame, data, len);
    s->len = len;
    run_ingress(L, s, c->port, TB_INSTANCE_NORMAL, NULL, -1);
}

tbio_loop_t *tbio_new(int32_t cpu_port, int64_t clock_origin_ns, uint32_t ring_size, uint32_t max_ports,
                      uint32_t seed)
{
    if (ring_size < 8 || (ring_size & (ring_size - 1)) || max_ports > MAX_PORTS) return NULL;
    tbio_loop_t *L = calloc(1, sizeof *L);
    if (!L) return NULL;
    L->umem.fd = -1;
    pthread_mutex_init(&L->mutex, NULL);
    L->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    L->notify_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    L->tm = tbio_tm_new(64, 1);
    L->pktgen = tbio_pktgen_new();
    if (L->wake_fd < 0 || L->notify_fd < 0 || !L->tm || !L->pktgen) {
        tbio_free(L);
        return NULL;
    }
    L->cpu_port = cpu_port;
    L->origin = clock_origin_ns;
    L->ring_size = ring_size;
    L->max_ports = max_ports;
    L->seed = seed;
    return L;
}

static void free_replicas(replicas_t *r)
{
    if (!r) return;
    free(r->ports);
    free(r->rids);
    free(r);
}

static void release_pool(tbio_loop_t *L)
{
    for (uint32_t i = 0; i < L->nchunks; i++) free(L->chunks[i]);
    free(L->chunks);
    L->chunks = NULL, L->nchunks = 0, L->nslots = 0, L->free_slots = NULL;
    L->unused = NULL, L->unused_slots = 0;
    L->punt_head = L->punt_tail = NULL;
    L->npunted = 0;
    for (uint32_t i = 0; i < L->nxports; i++) L->xports[L->xport_list[i]]->delayed_head = NULL,
                                             L->xports[L->xport_list[i]]->delayed_tail = NULL;
}

void tbio_free(tbio_loop_t *L)
{
    if (!L) return;
    tbio_stop(L);
    release_pool(L);
    for (uint32_t i = 0; i < L->nxports; i++) {
        port_close(L->xports[L->xport_list[i]]);
        free(L->xports[L->xport_list[i]]);
    }
    if (L->umem.area) xsk_umem_close(&L->umem);
    for (int i = 0; i < 65536; i++) free_replicas(L->groups[i]), free_replicas(L->sessions[i]);
    tbio_tm_free(L->tm);
    tbio_pktgen_free(L->pktgen);
    free(L->pause_frame);
    dsf_detach(L);
    if (L->dl) dlclose(L->dl);
    if (L->wake_fd >= 0) close(L->wake_fd);
    if (L->notify_fd >= 0) close(L->notify_fd);
    pthread_mutex_destroy(&L->mutex);
    free(L);
}

/* A port whose AF_XDP socket failed (err says why, and still does on success): it sends through
 * tbio_port_via_qdisc's socket and receives through rx_fd.  0, or -1 with a new err. */
static int port_without_xdp(tbio_loop_t *L, xport_t *x, char *err, size_t errlen)
{
    char reason[512];
    snprintf(reason, sizeof reason, "%s", err);
    if (tbio_port_via_qdisc(L, x->port, err, errlen)) return -1;
    int fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0), one = 1, rcvbuf = (int)(L->ring_size * XSK_FRAME);
    struct sockaddr_ll addr = {.sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_ALL),
                               .sll_ifindex = x->xsk.ifindex};
    /* bound with its protocol, it receives from this interface only; what the loop sends is not read back */
    if (fd < 0 || setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one) < 0 ||
        setsockopt(fd, SOL_PACKET, PACKET_AUXDATA, &one, sizeof one) < 0 ||
        bind(fd, (struct sockaddr *)&addr, sizeof addr) < 0) {
        snprintf(err, errlen, "port %u: receiving AF_PACKET socket: %s (AF_XDP failed: %s)", x->port, strerror(errno),
                 reason);
        if (fd >= 0) close(fd);
        return -1;
    }
    setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof rcvbuf); /* a burst as the AF_XDP ring takes */
    x->rx_fd = fd;
    x->rbuf = malloc((size_t)RX_BATCH * (XSK_FRAME + RX_CONTROL));
    x->rmsgs = calloc(RX_BATCH, sizeof *x->rmsgs);
    x->riov = calloc(RX_BATCH, sizeof *x->riov);
    if (!x->rbuf || !x->rmsgs || !x->riov) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (uint32_t i = 0; i < RX_BATCH; i++) {
        x->riov[i].iov_base = x->rbuf + (size_t)i * XSK_FRAME + RX_HEADROOM;
        x->riov[i].iov_len = XSK_FRAME - RX_HEADROOM;
        x->rmsgs[i].msg_hdr.msg_iov = &x->riov[i];
        x->rmsgs[i].msg_hdr.msg_iovlen = 1;
    }
    snprintf(err, errlen, "%s", reason);
    return 0;
}

int tbio_add_port(tbio_loop_t *L, uint32_t port, const char *ifname, char *err, size_t errlen)
{
    if (port >= MAX_PORTS || L->xports[port] || L->nxports == L->max_ports) {
        snprintf(err, errlen, "port %u: %s", port,
                 port >= MAX_PORTS ? "must be below 512"
                 : L->xports[port] ? "already added"
                                   : "one more port than the loop was made for (tbio_new's max_ports)");
        return -1;
    }
    if (!L->umem.area && xsk_umem_open(&L->umem, L->max_ports * L->ring_size, XSK_TX_FRAMES, err, errlen))
        return -1;
    xport_t *x = calloc(1, sizeof *x);
    if (!x) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    int without_xdp = xsk_open(&x->xsk, &L->umem, ifname, L->ring_size, err, errlen) < 0;
    if (without_xdp && !(x->xsk.ifindex = (int)if_nametoindex(ifname))) { /* no interface: no port */
        free(x);
        return -1;
    }
    x->port = port;
    x->qdisc_fd = x->rx_fd = -1;
    x->rng = ((uint64_t)L->seed << 32) ^ port;
    L->xports[port] = x;
    L->xport_list[L->nxports++] = port;
    if (without_xdp && port_without_xdp(L, x, err, errlen)) {
        L->xports[port] = NULL;
        L->nxports--;
        port_close(x);
        free(x);
        return -1;
    }
    return without_xdp;
}

int tbio_port_via_qdisc(tbio_loop_t *L, uint32_t port, char *err, size_t errlen)
{
    xport_t *x = port < MAX_PORTS ? L->xports[port] : NULL;
    char ifname[IF_NAMESIZE];
    if (!x || !if_indextoname((unsigned)x->xsk.ifindex, ifname)) {
        snprintf(err, errlen, "port %u: not an open port", port);
        return -1;
    }
    if (x->qdisc_fd >= 0) return 0;
    int fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0); /* protocol 0: it sends, never receives */
    struct sockaddr_ll addr = {.sll_family = AF_PACKET, .sll_ifindex = x->xsk.ifindex};
    if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof addr) < 0) {
        snprintf(err, errlen, "port %u: AF_PACKET socket on %s: %s", port, ifname, strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    /* the qdisc's queue, not the socket's buffer, decides what a busy link drops */
    int sndbuf = 4 << 20;
    setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof sndbuf);
    x->qbuf = malloc((size_t)QDISC_BATCH * XSK_FRAME);
    x->qmsgs = calloc(QDISC_BATCH, sizeof *x->qmsgs);
    x->qiov = calloc(QDISC_BATCH, sizeof *x->qiov);
    if (!x->qbuf || !x->qmsgs || !x->qiov) {
        free(x->qbuf), free(x->qmsgs), free(x->qiov);
        x->qbuf = NULL, x->qmsgs = NULL, x->qiov = NULL;
        close(fd);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (uint32_t i = 0; i < QDISC_BATCH; i++) {
        x->qiov[i].iov_base = x->qbuf + (size_t)i * XSK_FRAME;
        x->qmsgs[i].msg_hdr.msg_iov = &x->qiov[i];
        x->qmsgs[i].msg_hdr.msg_iovlen = 1;
    }
    x->qdisc_fd = fd;
    return 0;
}

int tbio_set_pipeline(tbio_loop_t *L, const char *path, void *pipeline, int64_t clock_origin_ns, char *err,
                      size_t errlen)
{
    L->origin = clock_origin_ns;
    /* packets of the previous program refer to its state: they go with it */
    tbio_tm_t *tm = tbio_tm_new(64, 1);
    if (!tm) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (uint32_t p = 0; p < MAX_PORTS; p++) { /* queue settings belong to the ports, not the program */
        uint64_t pps, bps;
        uint32_t depth, npri;
        if (tbio_tm_queue_config(L->tm, p, &pps, &bps, &depth, &npri))
            tbio_tm_set_queue(tm, p, pps, bps, depth, npri, clock_ns());
    }
    tbio_pfc_config_t pfc;
    if (tbio_tm_pfc(L->tm, &pfc)) tbio_tm_set_pfc(tm, &pfc); /* so are the PFC settings */
    tbio_tm_free(L->tm);
    L->tm = tm;
    dsf_detach(L);
    release_pool(L);
    if (L->dl) dlclose(L->dl);
    L->dl = NULL, L->pl = NULL;
    memset(&L->ops, 0, sizeof L->ops);
    if (!path) return 0;
    void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!dl) {
        snprintf(err, errlen, "%s", dlerror());
        return -1;
    }
    ops_t o;
    const char *names[] = {"tb_abi_version", "tb_packet_size", "tb_packet_reset", "tb_packet_std", "tb_packet_copy",
                           "tb_packet_copy_headers", "tb_preserve_fields", "tb_parse", "tb_ingress", "tb_egress",
                           "tb_deparse"};
    void **slots[] = {(void **)&o.abi_version, (void **)&o.packet_size, (void **)&o.packet_reset,
                      (void **)&o.packet_std, (void **)&o.packet_copy, (void **)&o.packet_copy_headers,
                      (void **)&o.preserve_fields,
                      (void **)&o.parse, (void **)&o.ingress, (void **)&o.egress, (void **)&o.deparse};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        *slots[i] = dlsym(dl, names[i]);
        if (!*slots[i]) {
            snprintf(err, errlen, "%s: no function %s (not a pipeline of tb_pipeline.h)", path, names[i]);
            dlclose(dl);
            return -1;
        }
    }
    *(void **)&o.extern_requests = dlsym(dl, "tb_packet_extern_requests");
    *(void **)&o.events = dlsym(dl, "tb_packet_events");
    *(void **)&o.pl_lock = dlsym(dl, "tb_pipeline_lock");
    *(void **)&o.pl_unlock = dlsym(dl, "tb_pipeline_unlock");
    if (!o.pl_lock || !o.pl_unlock) o.pl_lock = NULL, o.pl_unlock = NULL;
    if (o.abi_version() != TB_PIPELINE_ABI_VERSION) {
        snprintf(err, errlen, "%s: pipeline ABI version %u, this loop speaks %u", path, o.abi_version(),
                 TB_PIPELINE_ABI_VERSION);
        dlclose(dl);
        return -1;
    }
    L->dl = dl, L->ops = o, L->pl = pipeline;
    L->slot_size = (sizeof(slot_t) + o.packet_size() + 63) & ~(size_t)63;
    L->halted = L->halt_reported = 0;
    L->unsupported = L->unsupported_reported = 0;
    L->nevents = L->events_head = 0;
    return 0;
}

tbio_tm_t *tbio_traffic_manager(tbio_loop_t *L) { return L->tm; }

tbio_pktgen_t *tbio_packet_generator(tbio_loop_t *L) { return L->pktgen; }

static int set_replicas(replicas_t **table, uint32_t id, uint32_t n, const uint32_t *ports, const uint32_t *rids,
                        uint32_t packet_length)
{
    if (id >= 65536) return -1;
    free_replicas(table[id]);
    table[id] = NULL;
    if (!n) return 0;
    replicas_t *r = calloc(1, sizeof *r);
    if (!r) return -1;
    r->ports = malloc(sizeof *r->ports * n);
    r->rids = malloc(sizeof *r->rids * n);
    if (!r->ports || !r->rids) {
        free_replicas(r);
        return -1;
    }
    memcpy(r->ports, ports, sizeof *r->ports * n);
    memcpy(r->rids, rids, sizeof *r->rids * n);
    r->n = n, r->packet_length = packet_length;
    table[id] = r;
    return 0;
}

int tbio_set_multicast_group(tbio_loop_t *L, uint32_t group, uint32_t n, const uint32_t *ports, const uint32_t *rids)
{
    return set_replicas(L->groups, group, n, ports, rids, 0);
}

int tbio_set_clone_session(tbio_loop_t *L, uint32_t session, uint32_t n, const uint32_t *ports, const uint32_t *rids,
                           uint32_t packet_length)
{
    return set_replicas(L->sessions, session, n, ports, rids, packet_length);
}

int tbio_set_impairment(tbio_loop_t *L, uint32_t port, double loss, int64_t delay_ns)
{
    xport_t *x = port < MAX_PORTS ? L->xports[port] : NULL;
    if (!x || loss < 0 || loss > 1 || delay_ns < 0) return -1;
    x->loss = loss, x->delay_ns = delay_ns;
    return 0;
}

int tbio_set_pause_frame(tbio_loop_t *L, uint32_t port, const uint8_t *frame, uint32_t len)
{
    if (port >= MAX_PORTS || len != PAUSE_BYTES || !frame[0]) return -1;
    if (!L->pause_frame && !(L->pause_frame = calloc(MAX_PORTS, sizeof *L->pause_frame))) return -1;
    memcpy(L->pause_frame[port], frame, PAUSE_BYTES);
    memcpy(L->pause_kind, frame + 12, 4);
    return 0;
}

void tbio_lock(tbio_loop_t *L)
{
    __atomic_add_fetch(&L->waiters, 1, __ATOMIC_SEQ_CST);
    pthread_mutex_lock(&L->mutex);
    __atomic_sub_fetch(&L->waiters, 1, __ATOMIC_SEQ_CST);
}

static void poke(tbio_loop_t *L)
{
    uint64_t one = 1;
    if (write(L->wake_fd, &one, sizeof one) < 0) { /* full counter: a wake-up is pending anyway */
    }
}

void tbio_unlock(tbio_loop_t *L)
{
    pthread_mutex_unlock(&L->mutex);
    poke(L); /* what was changed may move the loop's next deadline */
}

/* Tell the reader of a threaded loop that status happened (once until tbio_wait takes it). */
static void notify(tbio_loop_t *L, int status)
{
    uint32_t bit = 1u << status;
    uint64_t one = 1;
    if (__atomic_fetch_or(&L->noted, bit, __ATOMIC_SEQ_CST) & bit) return;
    if (write(L->notify_fd, &one, sizeof one) < 0) { /* full counter: the reader is woken anyway */
    }
}

void tbio_wake(tbio_loop_t *L)
{
    if (__atomic_load_n(&L->threaded, __ATOMIC_SEQ_CST)) {
        notify(L, TBIO_WOKEN); /* the thread needs nothing: it is the reader that waits */
        return;
    }
    __atomic_store_n(&L->woken, 1, __ATOMIC_SEQ_CST);
    poke(L);
}

int tbio_inject(tbio_loop_t *L, uint32_t port, const uint8_t *frame, uint32_t len)
{
    if (!L->pl || L->halted || len > SLOT_FRAME) return -1;
    slot_t *s = slot_get(L);
    if (!s) return -1;
    memcpy(s->frame, frame, len);
    s->len = len;
    if (L->ops.pl_lock) L->ops.pl_lock(L->pl);
    run_ingress(L, s, port, TB_INSTANCE_NORMAL, NULL, -1);
    if (L->ops.pl_unlock) L->ops.pl_unlock(L->pl);
    return 0;
}

int tbio_take_punted(tbio_loop_t *L, uint8_t *buf, uint32_t cap)
{
    pthread_mutex_lock(&L->mutex);
    slot_t *p = L->punt_head;
    int len = -1;
    if (p) {
        L->punt_head = p->next;
        if (!L->punt_head) L->punt_tail = NULL;
        L->npunted--;
        len = (int)p->len;
        memcpy(buf, p->frame, p->len < cap ? p->len : cap);
        slot_unref(L, p);
    }
    pthread_mutex_unlock(&L->mutex);
    return len;
}

int tbio_take_event(tbio_loop_t *L, int32_t *site, uint32_t *valid, uint64_t *values)
{
    pthread_mutex_lock(&L->mutex);
    int found = L->nevents > 0;
    if (found) {
        event_t *e = &L->events[L->events_head];
        *site = e->site, *valid = e->valid;
        memcpy(values, e->values, sizeof e->values);
        L->events_head = (L->events_head + 1) % EVENT_QUEUE;
        L->nevents--;
    }
    pthread_mutex_unlock(&L->mutex);
    return found;
}

uint64_t tbio_events_dropped(tbio_loop_t *L) { return L->events_dropped; }

void tbio_port_stats(tbio_loop_t *L, uint32_t port, tbio_port_stats_t *out)
{
    memset(out, 0, sizeof *out);
    if (port >= MAX_PORTS) return;
    *out = L->stats[port];
    xport_t *x = L->xports[port];
    if (x && x->rx_fd >= 0) {
        struct tpacket_stats stats;
        socklen_t len = sizeof stats;
        if (getsockopt(x->rx_fd, SOL_PACKET, PACKET_STATISTICS, &stats, &len) == 0) x->rx_drops += stats.tp_drops;
        out->kernel_drops = x->rx_drops;
    } else if (x) out->kernel_drops = xsk_drops(&x->xsk);
}

const char *tbio_halt_reason(tbio_loop_t *L) { return L->halted ? L->halt_reason : NULL; }

uint64_t tbio_errors(tbio_loop_t *L) { return L->errors; }

/* The loop's lock, then the pipeline's state lock (tb_pipeline.h: held while packets are processed). */
static void hold(tbio_loop_t *L)
{
    pthread_mutex_lock(&L->mutex);
    if (L->pl && L->ops.pl_lock) L->ops.pl_lock(L->pl);
}

static void release(tbio_loop_t *L)
{
    if (L->pl && L->ops.pl_unlock) L->ops.pl_unlock(L->pl);
    pthread_mutex_unlock(&L->mutex);
}

/* The packet generator's due frames enter ingress as received frames do (Device.transmit_ready). */
static void generate(tbio_loop_t *L, int64_t now)
{
    uint32_t apps[TBIO_PKTGEN_APPS], len;
    tbio_pktgen_app_t app;
    int n = tbio_pktgen_due(L->pktgen, now, apps, TBIO_PKTGEN_APPS);
    for (int i = 0; i < n; i++) {
        const uint8_t *frame = tbio_pktgen_frame(L->pktgen, apps[i], &len);
        tbio_pktgen_get(L->pktgen, apps[i], &app);
        struct rx_ctx ctx = {L, app.port};
        L->generating = 1;
        on_frame(&ctx, frame, len);
        L->generating = 0;
    }
}

/* The loop until deadline; in the loop's own thread (threaded) until tbio_stop, telling the reader
 * what tbio_run would return for, instead of returning. */
static int run_until(tbio_loop_t *L, int64_t deadline, int threaded)
{
    struct pollfd fds[MAX_PORTS + 1];
    int rc;
    hold(L);
    for (;;) {
        uint32_t received = 0;
        for (uint32_t i = 0; i < L->nxports; i++) {
            xport_t *x = L->xports[L->xport_list[i]];
            struct rx_ctx ctx = {L, x->port};
            received += x->rx_fd < 0 ? xsk_receive(&x->xsk, RX_BATCH, on_frame, &ctx)
                                     : packet_receive(x, RX_BATCH, on_frame, &ctx);
        }
        int64_t now = clock_ns();
        if (L->pl) generate(L, now);
        if (L->pl && !L->halted) transmit_ready(L, now);
        if (L->dsf && !L->halted) dsf_run(L, now);
        release_delayed(L, now);
        for (uint32_t i = 0; i < L->nxports; i++) {
            xport_t *p = L->xports[L->xport_list[i]];
            struct xsk *x = &p->xsk;
            if (p->nq) qdisc_flush(p, &L->stats[p->port].tx_errors);
            if (x->fd >= 0 && (x->tx_prod != *x->tx.producer ||
                               __atomic_load_n(x->tx.consumer, __ATOMIC_ACQUIRE) != x->tx_prod))
                xsk_tx_flush(x);
        }
        if (threaded) {
            if (L->halted && !L->halt_reported) L->halt_reported = 1, notify(L, TBIO_HALTED);
            if (L->unsupported && !L->unsupported_reported) L->unsupported_reported = 1, notify(L, TBIO_UNSUPPORTED);
            if (L->punt_head || L->nevents) notify(L, TBIO_PUNTED);
            if (__atomic_load_n(&L->stopping, __ATOMIC_SEQ_CST)) {
                rc = TBIO_STOPPED;
                break;
            }
        } else if (L->halted && !L->halt_reported) {
            L->halt_reported = 1;
            rc = TBIO_HALTED;
            break;
        }
        else if (L->unsupported && !L->unsupported_reported) {
            L->unsupported_reported = 1;
            rc = TBIO_UNSUPPORTED;
            break;
        } else if (L->punt_head || L->nevents) {
            rc = TBIO_PUNTED;
            break;
        } else if (__atomic_exchange_n(&L->woken, 0, __ATOMIC_SEQ_CST)) {
            rc = TBIO_WOKEN;
            break;
        }
        if (now >= deadline) {
            rc = TBIO_STOPPED;
            break;
        }
        if (__atomic_load_n(&L->waiters, __ATOMIC_SEQ_CST)) { /* let control in between batches */
            release(L);
            while (__atomic_load_n(&L->waiters, __ATOMIC_SEQ_CST)) sched_yield();
            hold(L);
            continue;
        }
        if (received) continue;
        int64_t next = deadline, when;
        if (L->pl && !L->halted && tbio_tm_next_departure(L->tm, &when) && when < next) next = when;
        if (L->pl && !L->halted && tbio_tm_next_pause(L->tm, &when) && when < next) next = when;
        if (L->dsf && !L->halted) dsf_next(L, &next);
        if (L->pl && tbio_pktgen_next_due(L->pktgen, &when) && when < next) next = when;
        for (uint32_t i = 0; i < L->nxports; i++) {
            xport_t *x = L->xports[L->xport_list[i]];
            if (x->delayed_head && x->delayed_head->release_ns < next) next = x->delayed_head->release_ns;
        }
        int nfds = 0;
        for (uint32_t i = 0; i < L->nxports; i++) {
            xport_t *x = L->xports[L->xport_list[i]];
            fds[nfds++] = (struct pollfd){.fd = x->rx_fd < 0 ? x->xsk.fd : x->rx_fd, .events = POLLIN};
        }
        fds[nfds++] = (struct pollfd){.fd = L->wake_fd, .events = POLLIN};
        struct timespec ts, *tsp = NULL;
        if (next != INT64_MAX) {
            int64_t wait = next > now ? next - now : 0;
            ts.tv_sec = wait / 1000000000, ts.tv_nsec = wait % 1000000000;
            tsp = &ts;
        }
        release(L);
        ppoll(fds, (nfds_t)nfds, tsp, NULL);
        hold(L);
        if (fds[nfds - 1].revents & POLLIN) {
            uint64_t value;
            if (read(L->wake_fd, &value, sizeof value) < 0) { /* raced with another reader: fine */
            }
        }
    }
    release(L);
    return rc;
}

int tbio_run(tbio_loop_t *L, int timeout_ms)
{
    if (__atomic_load_n(&L->threaded, __ATOMIC_SEQ_CST)) return -1;
    return run_until(L, timeout_ms < 0 ? INT64_MAX : clock_ns() + (int64_t)timeout_ms * 1000000, 0);
}

static void *thread_main(void *arg)
{
    run_until((tbio_loop_t *)arg, INT64_MAX, 1);
    return NULL;
}

int tbio_start(tbio_loop_t *L)
{
    sigset_t all, old;
    if (L->threaded) return -1;
    L->stopping = 0;
    __atomic_store_n(&L->threaded, 1, __ATOMIC_SEQ_CST);
    /* signals stay with the process's other threads (Python handles them in its main thread) */
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    int failed = pthread_create(&L->thread, NULL, thread_main, L);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (failed) __atomic_store_n(&L->threaded, 0, __ATOMIC_SEQ_CST);
    return failed ? -1 : 0;
}

void tbio_stop(tbio_loop_t *L)
{
    if (!__atomic_load_n(&L->threaded, __ATOMIC_SEQ_CST)) return;
    __atomic_store_n(&L->stopping, 1, __ATOMIC_SEQ_CST);
    poke(L);
    pthread_join(L->thread, NULL);
    __atomic_store_n(&L->threaded, 0, __ATOMIC_SEQ_CST);
}

uint32_t tbio_wait(tbio_loop_t *L, int timeout_ms)
{
    uint64_t value;
    /* the bits first, the counter after: a status noted in between keeps its bit for the next call */
    uint32_t bits = __atomic_exchange_n(&L->noted, 0, __ATOMIC_SEQ_CST);
    if (!bits) {
        struct pollfd fd = {.fd = L->notify_fd, .events = POLLIN};
        if (poll(&fd, 1, timeout_ms) > 0) bits = __atomic_exchange_n(&L->noted, 0, __ATOMIC_SEQ_CST);
    }
    if (read(L->notify_fd, &value, sizeof value) < 0) { /* nothing written: fine */
    }
    return bits;
}
