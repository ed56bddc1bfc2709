/* tb_dsf.c - the DSF traffic manager in native code; see tb_dsf.h.
 *
 * Each part follows its Python reference line for line: voq.py (VOQs and their credit),
 * scheduler.py (port credit schedulers; grant times kept as doubles since Python's are floats),
 * cells.py (header bytes, segmentation), reassembly.py, history.py and engine.py (order of work).
 * Maps keep insertion order where Python's dicts do, since timers walk them in that order.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tb_dsf.h"

#define CELL_DATA 1
#define CELL_CREDIT_REQUEST 2
#define CELL_CREDIT_GRANT 3
#define INITIAL_TTL 16
#define CELL_PORT 509
#define DELIVERY_PORT 508
#define CLASSES 8
#define REQUEST_REFRESH_NS 20000000LL
#define MAX_PENDING_PACKETS 1024u
#define PERMILLE 1000
#define HEADER_BYTES 20
#define ETHERNET_BYTES 14
#define MIN_CELL_BYTES (HEADER_BYTES + 1)
#define MAX_CELL_BYTES 1500
#define MAX_CATCH_UP 8
#define DROP_VOQ_TAIL 0
#define DROP_REASSEMBLY_TIMEOUT 1
#define DROP_LATE_CELL 2
#define DROP_BAD_PARAMETER 3
#define MAX_LOG_LINES 64

/* ---------------------------------------------------------------- a map: uint64 key -> index */
typedef struct map {
    uint64_t *keys;
    uint32_t *values; /* index + 1; 0: empty */
    uint32_t cap, n;
} map_t;

static uint64_t map_hash(uint64_t k)
{
    k ^= k >> 33, k *= 0xff51afd7ed558ccdull, k ^= k >> 33;
    return k;
}

static int64_t map_get(const map_t *m, uint64_t key)
{
    if (!m->cap) return -1;
    for (uint32_t i = (uint32_t)map_hash(key) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (!m->values[i]) return -1;
        if (m->keys[i] == key) return (int64_t)m->values[i] - 1;
    }
}

static int map_put(map_t *m, uint64_t key, uint32_t value)
{
    if ((m->n + 1) * 2 > m->cap) {
        uint32_t cap = m->cap ? m->cap * 2 : 16;
        uint64_t *keys = calloc(cap, sizeof *keys);
        uint32_t *values = calloc(cap, sizeof *values);
        if (!keys || !values) {
            free(keys), free(values);
            return -1;
        }
        for (uint32_t j = 0; j < m->cap; j++) {
            if (!m->values[j]) continue;
            uint32_t i = (uint32_t)map_hash(m->keys[j]) & (cap - 1);
            while (values[i]) i = (i + 1) & (cap - 1);
            keys[i] = m->keys[j], values[i] = m->values[j];
        }
        free(m->keys), free(m->values);
        m->keys = keys, m->values = values, m->cap = cap;
    }
    uint32_t i = (uint32_t)map_hash(key) & (m->cap - 1);
    while (m->values[i]) i = (i + 1) & (m->cap - 1);
    m->keys[i] = key, m->values[i] = value + 1, m->n++;
    return 0;
}

/* grows *items (of `size` bytes each) to hold n + 1 */
static int grow(void **items, uint32_t *cap, uint32_t n, size_t size)
{
    if (n < *cap) return 0;
    uint32_t c = *cap ? *cap * 2 : 8;
    void *p = realloc(*items, c * size);
    if (!p) return -1;
    *items = p, *cap = c;
    return 0;
}

/* ---------------------------------------------------------------- state */
typedef struct frame {
    struct frame *next;
    uint32_t port, len;
    uint8_t data[];
} frame_t;

typedef struct qpkt {
    struct qpkt *next;
    uint32_t len;
    uint8_t data[];
} qpkt_t;

typedef struct voq {
    uint32_t dst_port, tc, index, dst_node, src_node, cell_bytes, seq, depth;
    int credits, active;
    qpkt_t *head, *tail;
    int64_t backlog, balance, last_signal_ns;
    uint64_t last_grant_bytes;
} voq_t;

typedef struct sched {
    uint32_t port, system_port, my_node;
    uint64_t rate_bps, grant_bytes, granted, skipped;
    uint32_t *active, nactive, cap; /* keys src_node << 3 | tc, round-robin order */
    int has_next;
    double next_grant_ns;
} sched_t;

typedef struct piece {
    uint32_t index, len;
    uint8_t *data;
} piece_t;

typedef struct partial {
    struct partial *prev, *next; /* the context's insertion order */
    uint32_t seq, npieces, cap, last_index;
    int has_last;
    int64_t first_ns;
    uint64_t nbytes;
    piece_t *pieces;
} partial_t;

typedef struct ctx {
    uint32_t src_node, dst_port, tc, expected;
    int64_t timeout_ns;
    uint64_t delivered, given_up;
    partial_t **slots; /* MAX_PENDING_PACKETS, by seq: pending seqs lie in [expected, expected + 1024) */
    partial_t *first, *last;
    uint32_t npending;
} ctx_t;

typedef struct counter {
    uint64_t *packets, *bytes, size;
} counter_t;

typedef struct cell_note {
    uint32_t counter;
    uint64_t index, packets, bytes;
} cell_note_t;

typedef struct note {
    struct note *next;
    int64_t at_ns;
    uint32_t n, taken;
    cell_note_t cells[];
} note_t;

typedef struct dirty {
    uint8_t *bits;
    uint64_t *list;
    uint32_t n;
} dirty_t;

typedef struct history {
    int on;
    uint32_t mask, capacity, held, nnotes;
    int64_t start_ns, period_ns, next_ns;
    uint64_t overflows;
    dirty_t dirty[TB_DSF_COUNTERS];
    note_t *head, *tail;
} history_t;

typedef struct logline {
    struct logline *next;
    char text[];
} logline_t;

struct tb_dsf {
    counter_t counters[TB_DSF_COUNTERS];
    frame_t *fhead, *ftail;
    uint32_t nframes;
    voq_t *voqs;
    uint32_t nvoqs, cvoqs;
    map_t voq_map;
    sched_t *scheds;
    uint32_t nscheds, cscheds;
    map_t sched_map;
    ctx_t *ctxs;
    uint32_t nctxs, cctxs;
    map_t ctx_map;
    history_t history;
    logline_t *lhead, *ltail;
    uint32_t nlines; /* at most MAX_LOG_LINES wait (a native loop reads none): older ones are dropped */
    int failed; /* out of memory since the last call */
};

tb_dsf_t *tb_dsf_new(void) { return calloc(1, sizeof(tb_dsf_t)); }

static void history_clear(history_t *h)
{
    for (int c = 0; c < TB_DSF_COUNTERS; c++) free(h->dirty[c].bits), free(h->dirty[c].list);
    for (note_t *n = h->head, *next; n; n = next) next = n->next, free(n);
    memset(h, 0, sizeof *h);
}

void tb_dsf_free(tb_dsf_t *d)
{
    if (!d) return;
    for (frame_t *f = d->fhead, *next; f; f = next) next = f->next, free(f);
    for (uint32_t i = 0; i < d->nvoqs; i++)
        for (qpkt_t *p = d->voqs[i].head, *next; p; p = next) next = p->next, free(p);
    for (uint32_t i = 0; i < d->nscheds; i++) free(d->scheds[i].active);
    for (uint32_t i = 0; i < d->nctxs; i++) {
        for (partial_t *p = d->ctxs[i].first, *next; p; p = next) {
            next = p->next;
            for (uint32_t j = 0; j < p->npieces; j++) free(p->pieces[j].data);
            free(p->pieces), free(p);
        }
        free(d->ctxs[i].slots);
    }
    free(d->voqs), free(d->scheds), free(d->ctxs);
    free(d->voq_map.keys), free(d->voq_map.values), free(d->sched_map.keys), free(d->sched_map.values);
    free(d->ctx_map.keys), free(d->ctx_map.values);
    history_clear(&d->history);
    for (logline_t *l = d->lhead, *next; l; l = next) next = l->next, free(l);
    free(d);
}

void tb_dsf_set_counter(tb_dsf_t *d, int which, uint64_t *packets, uint64_t *bytes, uint64_t size)
{
    if (which < 0 || which >= TB_DSF_COUNTERS) return;
    d->counters[which].packets = packets, d->counters[which].bytes = bytes;
    d->counters[which].size = packets && bytes ? size : 0;
}

/* ---------------------------------------------------------------- plumbing (engine.py) */
static void count_n(tb_dsf_t *d, int which, uint64_t index, uint64_t nbytes, uint64_t packets)
{
    counter_t *c = &d->counters[which];
    if (index >= c->size) return; /* absent counter, or past its end: not counted (CounterState.count) */
    c->packets[index] += packets, c->bytes[index] += nbytes;
    history_t *h = &d->history;
    if (h->on && (h->mask >> which & 1)) {
        dirty_t *t = &h->dirty[which];
        if (!(t->bits[index >> 3] >> (index & 7) & 1)) {
            t->bits[index >> 3] |= (uint8_t)(1u << (index & 7));
            t->list[t->n++] = index;
        }
    }
}

static void count(tb_dsf_t *d, int which, uint64_t index, uint64_t nbytes)
{
    count_n(d, which, index, nbytes, 1);
}

static void emit(tb_dsf_t *d, uint32_t port, const uint8_t *head, uint32_t nhead, const uint8_t *tail,
                 uint32_t ntail)
{
    frame_t *f = malloc(sizeof *f + nhead + ntail);
    if (!f) {
        d->failed = 1;
        return;
    }
    f->next = NULL, f->port = port, f->len = nhead + ntail;
    memcpy(f->data, head, nhead);
    if (ntail) memcpy(f->data + nhead, tail, ntail);
    if (d->ftail) d->ftail->next = f;
    else d->fhead = f;
    d->ftail = f;
    d->nframes++;
}

static void logf_(tb_dsf_t *d, const char *field, uint64_t value, const char *allowed)
{
    char text[256];
    int n = snprintf(text, sizeof text, "dsf: %s=%llu is not allowed (%s); packet dropped", field,
                     (unsigned long long)value, allowed);
    if (d->nlines >= MAX_LOG_LINES) {
        logline_t *old = d->lhead;
        d->lhead = old->next;
        if (!d->lhead) d->ltail = NULL;
        free(old);
        d->nlines--;
    }
    logline_t *l = malloc(sizeof *l + (size_t)n + 1);
    if (!l) return;
    d->nlines++;
    l->next = NULL;
    memcpy(l->text, text, (size_t)n + 1);
    if (d->ltail) d->ltail->next = l;
    else d->lhead = l;
    d->ltail = l;
}

static void bad(tb_dsf_t *d, const char *field, uint64_t value, const char *allowed, uint64_t nbytes)
{
    count(d, TB_DSF_DROPS, DROP_BAD_PARAMETER, nbytes);
    logf_(d, field, value, allowed);
}

/* ---------------------------------------------------------------- cells (cells.py) */
static void put16(uint8_t *p, uint32_t v) { p[0] = (uint8_t)(v >> 8), p[1] = (uint8_t)v; }
static void put32(uint8_t *p, uint32_t v) { put16(p, v >> 16), put16(p + 2, v & 0xFFFF); }

/* Ethernet and fabric header of a cell: 34 bytes */
static void cell_header(uint8_t *p, uint32_t type, uint32_t src, uint32_t dst, uint32_t port, uint32_t tc,
                        uint32_t seq, uint32_t index, uint32_t last, uint32_t length, uint32_t credit)
{
    static const uint8_t prefix[4] = {0x02, 0xd5, 0xf0, 0x00};
    memcpy(p, prefix, 4), put16(p + 4, dst & 0xFFFF);
    memcpy(p + 6, prefix, 4), put16(p + 10, src & 0xFFFF);
    put16(p + 12, 0x88B5);
    uint8_t *h = p + ETHERNET_BYTES;
    h[0] = (uint8_t)(type << 4 | last << 3 | (tc & 7));
    h[1] = INITIAL_TTL;
    put16(h + 2, src), put16(h + 4, dst), put16(h + 6, port), put32(h + 8, seq);
    put16(h + 12, index), put16(h + 14, length), put32(h + 16, credit);
}

static void emit_control(tb_dsf_t *d, uint32_t type, uint32_t src, uint32_t dst, uint32_t port, uint32_t tc,
                         uint32_t credit)
{
    uint8_t head[ETHERNET_BYTES + HEADER_BYTES];
    cell_header(head, type, src, dst, port, tc, 0, 0, 0, 0, credit);
    emit(d, CELL_PORT, head, sizeof head, NULL, 0);
}

/* segment(): n = ceil(L / room) cells, the first L mod n one byte longer */
static void segment(tb_dsf_t *d, const voq_t *v, const qpkt_t *p)
{
    uint32_t room = v->cell_bytes - HEADER_BYTES, len = p->len;
    uint32_t n = len ? (len + room - 1) / room : 1;
    uint32_t size = len / n, extra = len % n, offset = 0;
    uint8_t head[ETHERNET_BYTES + HEADER_BYTES];
    for (uint32_t i = 0; i < n; i++) {
        uint32_t piece = size + (i < extra);
        cell_header(head, CELL_DATA, v->src_node, v->dst_node, v->dst_port, v->tc, v->seq, i, i == n - 1, piece, 0);
        emit(d, CELL_PORT, head, sizeof head, p->data + offset, piece);
        offset += piece;
    }
}

/* ---------------------------------------------------------------- VOQs (voq.py) */
static voq_t *voq_find(tb_dsf_t *d, uint32_t dst_port, uint32_t tc, int create)
{
    uint64_t key = (uint64_t)dst_port << 3 | tc;
    int64_t i = map_get(&d->voq_map, key);
    if (i >= 0) return &d->voqs[i];
    if (!create) return NULL;
    if (grow((void **)&d->voqs, &d->cvoqs, d->nvoqs, sizeof *d->voqs) || map_put(&d->voq_map, key, d->nvoqs)) {
        d->failed = 1;
        return NULL;
    }
    voq_t *v = &d->voqs[d->nvoqs++];
    memset(v, 0, sizeof *v);
    v->dst_port = dst_port, v->tc = tc, v->index = dst_port * CLASSES + tc, v->credits = 1;
    return v;
}

static void voq_request(tb_dsf_t *d, voq_t *v, int64_t now, int active)
{
    int64_t backlog = active ? (v->backlog > 1 ? v->backlog : 1) : 0;
    emit_control(d, CELL_CREDIT_REQUEST, v->src_node, v->dst_node, v->dst_port, v->tc,
                 backlog > 0xFFFFFFFFLL ? 0xFFFFFFFFu : (uint32_t)backlog);
    v->active = active;
    v->last_signal_ns = now;
}

static void voq_send(tb_dsf_t *d, voq_t *v, int64_t now)
{
    while (v->head && (!v->credits || v->balance > 0)) {
        qpkt_t *p = v->head;
        v->head = p->next;
        if (!v->head) v->tail = NULL;
        v->depth--;
        v->backlog -= p->len;
        if (v->credits) v->balance -= p->len;
        segment(d, v, p);
        v->seq++;
        count(d, TB_DSF_VOQ_DEQUEUED, v->index, p->len);
        free(p);
    }
    if (v->credits) {
        int wanted = v->head != NULL || v->balance <= 0;
        if (wanted != v->active) voq_request(d, v, now, wanted);
    }
}

static void voq_enqueue(tb_dsf_t *d, int64_t now, const uint64_t *a, const uint8_t *packet, uint32_t len)
{
    uint64_t cell_bytes = a[4], depth = a[5];
    if (cell_bytes < MIN_CELL_BYTES || cell_bytes > MAX_CELL_BYTES) {
        bad(d, "cell_bytes", cell_bytes, "an integer in [21, 1500] bytes", len);
        return;
    }
    if (depth < 1) {
        bad(d, "voq_depth", depth, "an integer >= 1 packets", len);
        return;
    }
    voq_t *v = voq_find(d, (uint32_t)a[2], (uint32_t)a[3], 1);
    if (!v) return;
    if (v->depth >= depth) {
        count(d, TB_DSF_DROPS, DROP_VOQ_TAIL, len);
        return;
    }
    qpkt_t *p = malloc(sizeof *p + len);
    if (!p) {
        d->failed = 1;
        return;
    }
    v->src_node = (uint32_t)a[0], v->dst_node = (uint32_t)a[1], v->cell_bytes = (uint32_t)cell_bytes;
    v->credits = (int)a[6];
    p->next = NULL, p->len = len;
    memcpy(p->data, packet, len);
    if (v->tail) v->tail->next = p;
    else v->head = p;
    v->tail = p;
    v->depth++;
    v->backlog += len;
    count(d, TB_DSF_VOQ_ENQUEUED, v->index, len);
    voq_send(d, v, now);
}

static void voq_grant(tb_dsf_t *d, int64_t now, const uint64_t *a)
{
    uint32_t dst_port = (uint32_t)a[0], tc = (uint32_t)a[1];
    uint64_t credit = a[2], share = a[3] < PERMILLE ? a[3] : PERMILLE;
    count(d, TB_DSF_CREDIT_RECEIVED, (uint64_t)dst_port * CLASSES + tc, credit);
    voq_t *v = voq_find(d, dst_port, tc, 0);
    if (!v) return;
    v->balance += (int64_t)(credit * share / PERMILLE);
    v->last_grant_bytes = credit;
    if (!v->head) {
        if (v->balance > (int64_t)credit) v->balance = (int64_t)credit; /* an empty VOQ keeps at most one grant */
        if (!v->active && now - v->last_signal_ns >= REQUEST_REFRESH_NS) {
            voq_request(d, v, now, 0); /* a grant it did not want: the scheduler must stop */
            return;
        }
    }
    v->last_signal_ns = now;
    voq_send(d, v, now);
}

/* ---------------------------------------------------------------- credit schedulers (scheduler.py) */
/* Python's float floor division (floatobject.c float_floor_div), for operands Python has as floats */
static double py_floordiv(double vx, double wx)
{
    double mod = fmod(vx, wx), div = (vx - mod) / wx, floordiv;
    if (mod) {
        if ((wx < 0) != (mod < 0)) div -= 1.0;
    }
    if (div) {
        floordiv = floor(div);
        if (div - floordiv > 0.5) floordiv += 1.0;
    } else {
        floordiv = copysign(0.0, vx / wx);
    }
    return floordiv;
}

static double interval_ns(const sched_t *s)
{
    /* grant_bytes * 8 * 1e9 / rate_bps: exact operands below 2^53, so the quotient is Python's */
    return (double)(s->grant_bytes * 8 * 1000000000ull) / (double)s->rate_bps;
}

static void credit_request(tb_dsf_t *d, int64_t now, const uint64_t *a)
{
    uint32_t my_node = (uint32_t)a[0], src_node = (uint32_t)a[1], dst_port = (uint32_t)a[2], tc = (uint32_t)a[3];
    uint64_t backlog = a[4], port = a[5], rate_kbps = a[6], pct = a[7], grant_bytes = a[8];
    if (pct < 1 || pct > 100) {
        bad(d, "credit_rate_pct", pct, "an integer in [1, 100] % of the port rate", 0);
        return;
    }
    if (grant_bytes < 1) {
        bad(d, "grant_bytes", grant_bytes, "an integer >= 1 bytes", 0);
        return;
    }
    if (rate_kbps < 1) {
        bad(d, "port_rate_kbps", rate_kbps, "an integer >= 1 kbit/s", 0);
        return;
    }
    int64_t i = map_get(&d->sched_map, port);
    sched_t *s;
    if (i >= 0) {
        s = &d->scheds[i];
    } else {
        if (grow((void **)&d->scheds, &d->cscheds, d->nscheds, sizeof *d->scheds) ||
            map_put(&d->sched_map, port, d->nscheds)) {
            d->failed = 1;
            return;
        }
        s = &d->scheds[d->nscheds++];
        memset(s, 0, sizeof *s);
        s->port = (uint32_t)port;
    }
    s->system_port = dst_port, s->my_node = my_node;
    s->rate_bps = rate_kbps * 1000 * pct / 100, s->grant_bytes = grant_bytes;
    uint32_t key = src_node << 3 | tc, at = 0;
    while (at < s->nactive && s->active[at] != key) at++;
    if (backlog > 0) {
        int was_idle = s->nactive == 0;
        if (at == s->nactive) {
            if (grow((void **)&s->active, &s->cap, s->nactive, sizeof *s->active)) {
                d->failed = 1;
                return;
            }
            s->active[s->nactive++] = key;
        }
        if (was_idle && (!s->has_next || s->next_grant_ns < (double)now))
            s->has_next = 1, s->next_grant_ns = (double)now; /* idle until now: no credit was saved up */
    } else if (at < s->nactive) {
        memmove(s->active + at, s->active + at + 1, (s->nactive - at - 1) * sizeof *s->active);
        s->nactive--;
    }
}

static void schedulers_due(tb_dsf_t *d, int64_t now)
{
    for (uint32_t i = 0; i < d->nscheds; i++) {
        sched_t *s = &d->scheds[i];
        if (!s->nactive || !s->has_next || s->next_grant_ns > (double)now) continue;
        double interval = interval_ns(s);
        int64_t behind = (int64_t)py_floordiv((double)now - s->next_grant_ns, interval) + 1;
        if (behind > MAX_CATCH_UP) {
            s->skipped += (uint64_t)(behind - MAX_CATCH_UP);
            s->next_grant_ns += (double)(behind - MAX_CATCH_UP) * interval;
        }
        while (s->nactive && s->next_grant_ns <= (double)now) {
            uint32_t key = s->active[0];
            memmove(s->active, s->active + 1, (s->nactive - 1) * sizeof *s->active);
            s->active[s->nactive - 1] = key;
            emit_control(d, CELL_CREDIT_GRANT, s->my_node, key >> 3, s->system_port, key & 7,
                         (uint32_t)s->grant_bytes);
            count(d, TB_DSF_CREDIT_GRANTED, s->port, s->grant_bytes);
            s->granted++;
            s->next_grant_ns += interval;
        }
    }
}

/* ---------------------------------------------------------------- reassembly (reassembly.py) */
static int64_t ctx_deadline(const ctx_t *c, int *has)
{
    *has = c->npending > 0;
    if (!*has) return 0;
    partial_t *head = c->slots[c->expected % MAX_PENDING_PACKETS];
    if (!head || head->seq != c->expected) head = c->first;
    return head->first_ns + c->timeout_ns;
}

static void partial_unlink(ctx_t *c, partial_t *p)
{
    if (p->prev) p->prev->next = p->next;
    else c->first = p->next;
    if (p->next) p->next->prev = p->prev;
    else c->last = p->prev;
    c->slots[p->seq % MAX_PENDING_PACKETS] = NULL;
    c->npending--;
}

static void partial_free(partial_t *p)
{
    for (uint32_t j = 0; j < p->npieces; j++) free(p->pieces[j].data);
    free(p->pieces), free(p);
}

static int piece_order(const void *a, const void *b)
{
    uint32_t x = ((const piece_t *)a)->index, y = ((const piece_t *)b)->index;
    return (x > y) - (x < y);
}

static void deliver(tb_dsf_t *d, ctx_t *c, partial_t *p)
{
    qsort(p->pieces, p->npieces, sizeof *p->pieces, piece_order);
    uint64_t len = 0;
    for (uint32_t j = 0; j < p->npieces; j++) len += p->pieces[j].len;
    frame_t *f = malloc(sizeof *f + len);
    if (!f) {
        d->failed = 1;
        return;
    }
    f->next = NULL, f->port = DELIVERY_PORT, f->len = (uint32_t)len;
    uint64_t off = 0;
    for (uint32_t j = 0; j < p->npieces; j++) {
        memcpy(f->data + off, p->pieces[j].data, p->pieces[j].len);
        off += p->pieces[j].len;
    }
    count(d, TB_DSF_REASSEMBLED, c->dst_port, len);
    if (d->ftail) d->ftail->next = f;
    else d->fhead = f;
    d->ftail = f;
    d->nframes++;
}

static void ctx_drain(tb_dsf_t *d, ctx_t *c)
{
    for (;;) {
        partial_t *head = c->slots[c->expected % MAX_PENDING_PACKETS];
        if (!head || head->seq != c->expected || !head->has_last || head->npieces != head->last_index + 1) return;
        partial_unlink(c, head);
        deliver(d, c, head);
        partial_free(head);
        c->delivered++;
        c->expected++;
    }
}

/* A cell beyond the window came: give up the next `skipped` packets at once (reassembly.py _resync). */
static void ctx_resync(tb_dsf_t *d, ctx_t *c, uint32_t skipped)
{
    uint64_t nbytes = 0;
    if (skipped < c->npending) { /* look the skipped ones up, else go through what is pending */
        for (uint32_t k = 0; k < skipped; k++) {
            partial_t *p = c->slots[(c->expected + k) % MAX_PENDING_PACKETS];
            if (p && p->seq == c->expected + k) {
                nbytes += p->nbytes;
                partial_unlink(c, p);
                partial_free(p);
            }
        }
    } else {
        for (partial_t *p = c->first, *next; p; p = next) {
            next = p->next;
            if (p->seq - c->expected < skipped) {
                nbytes += p->nbytes;
                partial_unlink(c, p);
                partial_free(p);
            }
        }
    }
    count_n(d, TB_DSF_DROPS, DROP_REASSEMBLY_TIMEOUT, nbytes, skipped);
    c->given_up += skipped;
    c->expected += skipped;
}

static void reassemble(tb_dsf_t *d, int64_t now, const uint64_t *a, const uint8_t *payload, uint32_t payload_len)
{
    uint32_t src_node = (uint32_t)a[0], dst_port = (uint32_t)a[1], tc = (uint32_t)a[2], seq = (uint32_t)a[3];
    uint32_t index = (uint32_t)a[4], last = (uint32_t)a[5];
    uint32_t len = a[6] < payload_len ? (uint32_t)a[6] : payload_len;
    uint64_t key = (uint64_t)src_node << 32 | (uint64_t)dst_port << 3 | tc;
    int64_t i = map_get(&d->ctx_map, key);
    ctx_t *c;
    if (i >= 0) {
        c = &d->ctxs[i];
    } else {
        partial_t **slots = calloc(MAX_PENDING_PACKETS, sizeof *slots);
        if (!slots || grow((void **)&d->ctxs, &d->cctxs, d->nctxs, sizeof *d->ctxs) ||
            map_put(&d->ctx_map, key, d->nctxs)) {
            free(slots);
            d->failed = 1;
            return;
        }
        c = &d->ctxs[d->nctxs++];
        memset(c, 0, sizeof *c);
        c->src_node = src_node, c->dst_port = dst_port, c->tc = tc, c->slots = slots;
    }
    c->timeout_ns = (int64_t)a[7] * 1000;
    uint32_t distance = seq - c->expected;
    if (distance >= (1u << 31)) {
        count(d, TB_DSF_DROPS, DROP_LATE_CELL, len); /* given up or delivered already */
        return;
    }
    if (distance >= MAX_PENDING_PACKETS) ctx_resync(d, c, distance - MAX_PENDING_PACKETS + 1);
    partial_t *p = c->slots[seq % MAX_PENDING_PACKETS];
    if (!p) {
        p = calloc(1, sizeof *p);
        if (!p) {
            d->failed = 1;
            return;
        }
        p->seq = seq, p->first_ns = now;
        p->prev = c->last;
        if (c->last) c->last->next = p;
        else c->first = p;
        c->last = p;
        c->slots[seq % MAX_PENDING_PACKETS] = p;
        c->npending++;
    }
    for (uint32_t j = 0; j < p->npieces; j++) {
        if (p->pieces[j].index == index) {
            count(d, TB_DSF_DROPS, DROP_LATE_CELL, len); /* a duplicate */
            return;
        }
    }
    uint8_t *data = malloc(len ? len : 1);
    if (!data || grow((void **)&p->pieces, &p->cap, p->npieces, sizeof *p->pieces)) {
        free(data);
        d->failed = 1;
        return;
    }
    memcpy(data, payload, len);
    p->pieces[p->npieces++] = (piece_t){index, len, data};
    p->nbytes += len;
    if (last) p->has_last = 1, p->last_index = index;
    ctx_drain(d, c);
}

static void reassembly_expire(tb_dsf_t *d, int64_t now)
{
    for (uint32_t i = 0; i < d->nctxs; i++) {
        ctx_t *c = &d->ctxs[i];
        int has;
        int64_t deadline = ctx_deadline(c, &has);
        while (has && deadline <= now) {
            partial_t *head = c->slots[c->expected % MAX_PENDING_PACKETS];
            uint64_t nbytes = 0;
            if (head && head->seq == c->expected) {
                nbytes = head->nbytes;
                partial_unlink(c, head);
                partial_free(head);
            }
            count(d, TB_DSF_DROPS, DROP_REASSEMBLY_TIMEOUT, nbytes);
            c->given_up++;
            c->expected++;
            ctx_drain(d, c);
            deadline = ctx_deadline(c, &has);
        }
    }
}

/* ---------------------------------------------------------------- history (history.py) */
static void history_note(history_t *h, tb_dsf_t *d, int64_t at_ns, int all)
{
    if (h->nnotes + h->held >= h->capacity) {
        h->overflows++;
        return;
    }
    uint64_t n = 0;
    for (int c = 0; c < TB_DSF_COUNTERS; c++) {
        if (!(h->mask >> c & 1)) continue;
        if (all) {
            for (uint64_t i = 0; i < d->counters[c].size; i++) n += d->counters[c].packets[i] != 0;
        } else {
            n += h->dirty[c].n;
        }
    }
    note_t *note = malloc(sizeof *note + n * sizeof(cell_note_t));
    if (!note) {
        d->failed = 1;
        return;
    }
    note->next = NULL, note->at_ns = at_ns, note->n = (uint32_t)n, note->taken = 0;
    uint32_t k = 0;
    for (int c = 0; c < TB_DSF_COUNTERS; c++) {
        if (!(h->mask >> c & 1)) continue;
        const counter_t *ct = &d->counters[c];
        if (all) {
            for (uint64_t i = 0; i < ct->size; i++)
                if (ct->packets[i]) note->cells[k++] = (cell_note_t){(uint32_t)c, i, ct->packets[i], ct->bytes[i]};
        } else {
            /* the cells in index order (sorted(indexes)): a walk over the bitmap */
            dirty_t *t = &h->dirty[c];
            if (t->n) {
                uint64_t lo = t->list[0], hi = t->list[0];
                for (uint32_t j = 1; j < t->n; j++) lo = t->list[j] < lo ? t->list[j] : lo, hi = t->list[j] > hi ? t->list[j] : hi;
                for (uint64_t i = lo; i <= hi; i++)
                    if (t->bits[i >> 3] >> (i & 7) & 1)
                        note->cells[k++] = (cell_note_t){(uint32_t)c, i, ct->packets[i], ct->bytes[i]};
            }
        }
    }
    if (h->tail) h->tail->next = note;
    else h->head = note;
    h->tail = note;
    h->nnotes++;
}

int tb_dsf_history_start(tb_dsf_t *d, uint32_t mask, int64_t start_ns, int64_t period_ns, uint32_t capacity)
{
    if (period_ns <= 0 || capacity == 0) return -1;
    history_t *h = &d->history;
    history_clear(h);
    for (int c = 0; c < TB_DSF_COUNTERS; c++) {
        if (!(mask >> c & 1) || !d->counters[c].size) continue;
        h->dirty[c].bits = calloc((d->counters[c].size + 7) / 8, 1);
        h->dirty[c].list = malloc(d->counters[c].size * sizeof(uint64_t));
        if (!h->dirty[c].bits || !h->dirty[c].list) {
            history_clear(h);
            return -1;
        }
        h->mask |= 1u << c;
    }
    h->on = 1, h->start_ns = start_ns, h->period_ns = period_ns, h->next_ns = start_ns, h->capacity = capacity;
    history_note(h, d, start_ns, 1); /* every non-zero cell at the grid's origin (the reader starts from zero) */
    return 0;
}

static int64_t floordiv64(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

void tb_dsf_history_before(tb_dsf_t *d, int64_t now)
{
    history_t *h = &d->history;
    if (!h->on || now < h->next_ns) return;
    int any = 0;
    for (int c = 0; c < TB_DSF_COUNTERS; c++) any |= h->dirty[c].n != 0;
    if (any) {
        history_note(h, d, h->next_ns, 0);
        for (int c = 0; c < TB_DSF_COUNTERS; c++) {
            dirty_t *t = &h->dirty[c];
            for (uint32_t j = 0; j < t->n; j++) t->bits[t->list[j] >> 3] = 0;
            t->n = 0;
        }
    }
    h->next_ns = h->start_ns + (floordiv64(now - h->start_ns, h->period_ns) + 1) * h->period_ns;
}

int64_t tb_dsf_history_take(tb_dsf_t *d, int64_t *at_ns, uint32_t *counters, uint64_t *indexes, uint64_t *packets,
                            uint64_t *bytes, uint32_t max)
{
    history_t *h = &d->history;
    note_t *note = h->head;
    if (!note) return -1;
    *at_ns = note->at_ns;
    if (note->n > max) return note->n;
    for (uint32_t k = 0; k < note->n; k++) {
        counters[k] = note->cells[k].counter, indexes[k] = note->cells[k].index;
        packets[k] = note->cells[k].packets, bytes[k] = note->cells[k].bytes;
    }
    int64_t n = note->n;
    h->head = note->next;
    if (!h->head) h->tail = NULL;
    h->nnotes--;
    free(note);
    return n;
}

void tb_dsf_history_held(tb_dsf_t *d, uint32_t held) { d->history.held = held; }
uint64_t tb_dsf_history_overflows(const tb_dsf_t *d) { return d->history.overflows; }

/* ---------------------------------------------------------------- the engine (engine.py) */
int tb_dsf_handle(tb_dsf_t *d, int64_t now, uint32_t n, const int32_t *ids, const uint64_t *args,
                  const uint8_t *packet, uint32_t packet_len, const uint8_t *payload, uint32_t payload_len)
{
    d->failed = 0;
    tb_dsf_history_before(d, now);
    int taken = 0;
    for (uint32_t i = 0; i < n; i++) {
        const uint64_t *a = args + (size_t)i * TB_DSF_ARGS;
        switch (ids[i]) {
        case TB_DSF_ENQUEUE:
            if (!taken) voq_enqueue(d, now, a, packet, packet_len);
            taken = 1;
            break;
        case TB_DSF_REASSEMBLE:
            if (!taken) reassemble(d, now, a, payload, payload_len);
            taken = 1;
            break;
        case TB_DSF_CREDIT_REQUEST:
            credit_request(d, now, a);
            break;
        case TB_DSF_CREDIT_GRANT:
            voq_grant(d, now, a);
            break;
        default:
            break;
        }
    }
    return d->failed ? -1 : taken;
}

void tb_dsf_due(tb_dsf_t *d, int64_t now)
{
    tb_dsf_history_before(d, now);
    schedulers_due(d, now);
    for (uint32_t i = 0; i < d->nvoqs; i++) {
        voq_t *v = &d->voqs[i];
        if (v->active && now - v->last_signal_ns >= REQUEST_REFRESH_NS) voq_request(d, v, now, 1);
    }
    reassembly_expire(d, now);
}

int32_t tb_dsf_take(tb_dsf_t *d, uint32_t *port, uint8_t *out, uint32_t cap)
{
    frame_t *f = d->fhead;
    if (!f) return -1;
    *port = f->port;
    if (f->len > cap) return (int32_t)f->len;
    memcpy(out, f->data, f->len);
    int32_t len = (int32_t)f->len;
    d->fhead = f->next;
    if (!d->fhead) d->ftail = NULL;
    d->nframes--;
    free(f);
    return len;
}

uint32_t tb_dsf_pending(const tb_dsf_t *d) { return d->nframes; }

int tb_dsf_next_event(const tb_dsf_t *d, int64_t *when)
{
    if (d->fhead) {
        *when = 0;
        return 1;
    }
    int have = 0;
    int64_t best = 0;
    double grant = 0;
    int have_grant = 0;
    for (uint32_t i = 0; i < d->nscheds; i++) {
        const sched_t *s = &d->scheds[i];
        if (s->nactive && s->has_next && (!have_grant || s->next_grant_ns < grant))
            grant = s->next_grant_ns, have_grant = 1;
    }
    if (have_grant) best = (int64_t)grant, have = 1; /* int(min(times)) */
    for (uint32_t i = 0; i < d->nvoqs; i++) {
        const voq_t *v = &d->voqs[i];
        int64_t t = v->last_signal_ns + REQUEST_REFRESH_NS;
        if (v->active && (!have || t < best)) best = t, have = 1;
    }
    for (uint32_t i = 0; i < d->nctxs; i++) {
        int has;
        int64_t t = ctx_deadline(&d->ctxs[i], &has);
        if (has && (!have || t < best)) best = t, have = 1;
    }
    *when = best;
    return have;
}

int tb_dsf_take_log(tb_dsf_t *d, char *out, uint32_t cap)
{
    logline_t *l = d->lhead;
    if (!l || !cap) return 0;
    snprintf(out, cap, "%s", l->text);
    d->lhead = l->next;
    if (!d->lhead) d->ltail = NULL;
    free(l);
    d->nlines--;
    return 1;
}
