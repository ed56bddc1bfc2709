/* tb_runtime.c - tables, action selectors, hashes and extern state of the native backend.
 * Semantics: testbed/p4/state/tables.py (lookup order and ties), action_profiles.py
 * (selection[hash % len]), testbed/p4/v1model/hashes.py (BMv2 calculations). */
#define _GNU_SOURCE
#include <stdlib.h>
#include "tb_runtime.h"

/* ---- hashes ------------------------------------------------------------------------ */
static uint32_t crc32_table[256];
static uint16_t crc16_table[256];
static int tables_ready;

static void hash_tables_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0xEDB88320u : c >> 1;
        crc32_table[i] = c;
        uint16_t d = (uint16_t)i;
        for (int k = 0; k < 8; k++) d = (d & 1) ? (uint16_t)((d >> 1) ^ 0xA001u) : (uint16_t)(d >> 1);
        crc16_table[i] = d;
    }
    tables_ready = 1;
}

typedef struct { int alg; uint32_t crc; uint64_t sum; uint64_t x; uint64_t ident; size_t n; int odd; uint8_t pending; } hstate_t;

static void h_feed(hstate_t *h, const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint8_t b = p[i];
        switch (h->alg) {
        case TB_CRC32: case TB_CRC32_CUSTOM: h->crc = (h->crc >> 8) ^ crc32_table[(h->crc ^ b) & 0xFF]; break;
        case TB_CRC16: case TB_CRC16_CUSTOM: h->crc = (h->crc >> 8) ^ crc16_table[(h->crc ^ b) & 0xFF]; break;
        case TB_IDENTITY: if (h->n < 8) h->ident = (h->ident << 8) | b; break;
        case TB_CSUM16: case TB_XOR16:
            if (!h->odd) { h->pending = b; h->odd = 1; }
            else {
                uint64_t w = ((uint64_t)h->pending << 8) | b;
                if (h->alg == TB_CSUM16) h->sum += w; else h->x ^= w;
                h->odd = 0;
            }
            break;
        }
        h->n++;
    }
}

static uint64_t h_final(hstate_t *h) {
    switch (h->alg) {
    case TB_CRC32: case TB_CRC32_CUSTOM: return (uint64_t)(h->crc ^ 0xFFFFFFFFu);
    case TB_CRC16: case TB_CRC16_CUSTOM: return (uint64_t)(h->crc & 0xFFFF);
    case TB_IDENTITY: return h->ident;
    case TB_CSUM16: {
        uint64_t s = h->sum + (h->odd ? ((uint64_t)h->pending << 8) : 0);
        while (s >> 16) s = (s & 0xFFFF) + (s >> 16);
        return (~s) & 0xFFFF;
    }
    case TB_XOR16: return h->x ^ (h->odd ? ((uint64_t)h->pending << 8) : 0);
    }
    return 0;
}

static void h_init(hstate_t *h, int alg) {
    if (!tables_ready) hash_tables_init();
    memset(h, 0, sizeof *h);
    h->alg = alg;
    h->crc = (alg == TB_CRC32 || alg == TB_CRC32_CUSTOM) ? 0xFFFFFFFFu : 0;
}

uint64_t tb_hash(int algorithm, const uint8_t *data, size_t n) {
    hstate_t h; h_init(&h, algorithm); h_feed(&h, data, n); return h_final(&h);
}

uint64_t tb_hash2(int algorithm, const uint8_t *a, size_t na, const uint8_t *b, size_t nb) {
    hstate_t h; h_init(&h, algorithm); h_feed(&h, a, na); h_feed(&h, b, nb); return h_final(&h);
}

/* ---- tables -------------------------------------------------------------------------- */
static inline uint64_t mix64(uint64_t x) {
    x ^= x >> 33; x *= UINT64_C(0xff51afd7ed558ccd); x ^= x >> 33; x *= UINT64_C(0xc4ceb9fe1a85ec53); x ^= x >> 33;
    return x;
}

static inline uint64_t level_hash(const tb_level_t *lv, const uint64_t *key, uint32_t nkeys) {
    uint64_t h = UINT64_C(0x9E3779B97F4A7C15);
    for (uint32_t k = 0; k < nkeys; k++) h = mix64(h ^ (key[k] & lv->masks[k]));
    return h;
}

static inline int level_match(const tb_level_t *lv, const tb_entry_t *e, const uint64_t *key, uint32_t nkeys) {
    for (uint32_t k = 0; k < nkeys; k++)
        if ((key[k] & lv->masks[k]) != (e->vals[k] & lv->masks[k])) return 0;
    return 1;
}

static int range_match(const tb_table_t *t, const tb_entry_t *e, const uint64_t *key) {
    for (uint32_t k = 0; k < t->nkeys; k++) {
        if (t->range_key[k]) { if (key[k] < e->vals[k] || key[k] > e->masks[k]) return 0; }
        else if ((key[k] & e->masks[k]) != e->vals[k]) return 0;
    }
    return 1;
}

static int profile_member(const tb_profile_t *p, uint64_t id) {
    uint32_t lo = 0, hi = p->nmembers;
    while (lo < hi) { uint32_t mid = (lo + hi) / 2; if (p->members[mid].id < id) lo = mid + 1; else hi = mid; }
    return (lo < p->nmembers && p->members[lo].id == id) ? (int)lo : -1;
}

static int profile_group(const tb_profile_t *p, uint64_t id) {
    uint32_t lo = 0, hi = p->ngroups;
    while (lo < hi) { uint32_t mid = (lo + hi) / 2; if (p->groups[mid].id < id) lo = mid + 1; else hi = mid; }
    return (lo < p->ngroups && p->groups[lo].id == id) ? (int)lo : -1;
}

void tb_table_lookup(tb_table_t *t, const uint64_t *key, uint64_t selector_hash, tb_result_t *r) {
    tb_entry_t *best = NULL;
    int64_t bp = -1;
    uint32_t bs = 0;
    for (uint32_t l = 0; l < t->nlevels; l++) {
        tb_level_t *lv = &t->levels[l];
        if (lv->max_prio < bp) break;
        uint32_t mask = lv->cap - 1, i = (uint32_t)level_hash(lv, key, t->nkeys) & mask;
        for (;;) {
            int32_t s = lv->slots[i];
            if (s < 0) break;
            tb_entry_t *e = &t->entries[s];
            if (level_match(lv, e, key, t->nkeys)) {
                if (e->prio > bp || (e->prio == bp && e->seq < bs)) { best = e; bp = e->prio; bs = e->seq; }
                break;
            }
            i = (i + 1) & mask;
        }
    }
    for (uint32_t j = 0; j < t->nranges; j++) {
        tb_entry_t *e = &t->entries[t->ranges[j]];
        if (e->prio < bp) break;
        if (e->prio == bp && e->seq > bs) break;
        if (range_match(t, e, key)) { best = e; break; }
    }
    if (best == NULL) goto miss;
    if (best->kind == 0) { r->hit = 1; r->action = best->action; r->args = best->args; r->entry = best; return; }
    {
        tb_profile_t *p = t->profile;
        int m = -1;
        if (p == NULL) goto miss;
        if (best->kind == 1) m = profile_member(p, best->ref);
        else {
            int g = profile_group(p, best->ref);
            if (g >= 0 && p->groups[g].n) m = (int)p->groups[g].selection[selector_hash % p->groups[g].n];
        }
        if (m < 0) goto miss;
        r->hit = 1; r->action = p->members[m].action; r->args = p->members[m].args; r->entry = best;
        return;
    }
miss:
    r->hit = 0; r->action = t->default_action; r->args = t->default_args; r->entry = NULL;
}

static void table_clear(tb_table_t *t) {
    free(t->entries); free(t->store);
    for (uint32_t l = 0; l < t->nlevels; l++) free(t->levels[l].slots);
    free(t->levels); free(t->ranges);
    t->entries = NULL; t->store = NULL; t->levels = NULL; t->ranges = NULL;
    t->n = t->cap = t->nlevels = t->nranges = 0;
}

/* Put entry idx in its level's hash: in a free slot, or in place of the entry with its masked key when
 * it ranks before it (higher priority; equal priority: the one loaded first stays). */
static void level_put(tb_table_t *t, tb_level_t *lv, int32_t idx) {
    const tb_entry_t *e = &t->entries[idx];
    uint32_t mask = lv->cap - 1, i = (uint32_t)level_hash(lv, e->vals, t->nkeys) & mask;
    for (;;) {
        int32_t s = lv->slots[i];
        if (s < 0) { lv->slots[i] = idx; lv->used++; return; }
        const tb_entry_t *held = &t->entries[s];
        if (level_match(lv, held, e->vals, t->nkeys)) {
            if (e->prio > held->prio || (e->prio == held->prio && e->seq < held->seq)) lv->slots[i] = idx;
            return;
        }
        i = (i + 1) & mask;
    }
}

/* Levels by decreasing best priority (stable: first seen first), as lookups search them. */
static void sort_levels(tb_table_t *t) {
    for (uint32_t a = 1; a < t->nlevels; a++) {
        tb_level_t x = t->levels[a];
        uint32_t b = a;
        while (b > 0 && t->levels[b - 1].max_prio < x.max_prio) { t->levels[b] = t->levels[b - 1]; b--; }
        t->levels[b] = x;
    }
}

/* Entry i of the table (its slot in the store) from row j of tb_table_load's arrays; its direct counters,
 * meter and hits zero, its seq i + 1. */
static tb_entry_t *entry_set(tb_table_t *t, uint32_t i, uint32_t j, const int32_t *prio, const int32_t *kind,
                             const int32_t *action, const uint64_t *ref, const int32_t *is_range,
                             const uint64_t *vals, const uint64_t *masks, const uint64_t *args) {
    uint32_t nk = t->nkeys, na = t->nargs, per = 2 * nk + na;
    tb_entry_t *e = &t->entries[i];
    memset(e, 0, sizeof *e);
    e->prio = prio[j]; e->seq = i + 1; e->kind = kind[j]; e->action = action[j]; e->ref = ref[j];
    e->is_range = is_range[j];
    e->vals = t->store + (size_t)i * per; e->masks = e->vals + nk; e->args = e->masks + nk;
    memcpy(e->vals, vals + (size_t)j * nk, nk * sizeof(uint64_t));
    memcpy(e->masks, masks + (size_t)j * nk, nk * sizeof(uint64_t));
    if (na) memcpy(e->args, args + (size_t)j * na, na * sizeof(uint64_t));
    return e;
}

static int by_rank(const void *a, const void *b, void *ctx) {
    const tb_entry_t *entries = ctx;
    const tb_entry_t *x = &entries[*(const int32_t *)a], *y = &entries[*(const int32_t *)b];
    if (x->prio != y->prio) return x->prio > y->prio ? -1 : 1;
    return x->seq < y->seq ? -1 : (x->seq > y->seq);
}

int tb_table_load(tb_pipeline_t *pl, uint32_t table, uint32_t n, const int32_t *prio, const int32_t *kind,
                  const int32_t *action, const uint64_t *ref, const int32_t *is_range,
                  const uint64_t *vals, const uint64_t *masks, const uint64_t *args,
                  const uint8_t *range_key) {
    tb_table_t *t = &pl->tables[table];
    uint32_t nk = t->nkeys, na = t->nargs, per = 2 * nk + na;
    table_clear(t);
    for (uint32_t k = 0; k < nk; k++) t->range_key[k] = range_key[k];
    if (n == 0) return 0;
    t->entries = calloc(n, sizeof(tb_entry_t));
    t->store = calloc((size_t)n * (per ? per : 1), sizeof(uint64_t));
    int32_t *order = malloc(n * sizeof(int32_t));
    t->levels = calloc(n, sizeof(tb_level_t));
    t->ranges = malloc(n * sizeof(int32_t));
    if (!t->entries || !t->store || !order || !t->levels || !t->ranges) { free(order); table_clear(t); return -1; }
    for (uint32_t i = 0; i < n; i++) {
        entry_set(t, i, i, prio, kind, action, ref, is_range, vals, masks, args);
        order[i] = (int32_t)i;
    }
    qsort_r(order, n, sizeof(int32_t), by_rank, t->entries);
    /* levels: distinct mask tuples; entries in rank order, so a bucket keeps its best entry */
    uint32_t *level_count = calloc(n, sizeof(uint32_t));
    if (!level_count) { free(order); table_clear(t); return -1; }
    for (uint32_t j = 0; j < n; j++) {
        tb_entry_t *e = &t->entries[order[j]];
        if (e->is_range) { t->ranges[t->nranges++] = order[j]; e->level = -1; continue; }
        uint32_t l;
        for (l = 0; l < t->nlevels; l++)
            if (memcmp(t->levels[l].masks, e->masks, nk * sizeof(uint64_t)) == 0) break;
        if (l == t->nlevels) {
            memcpy(t->levels[l].masks, e->masks, nk * sizeof(uint64_t));
            t->levels[l].max_prio = e->prio;  /* first in rank order: the level's best */
            t->nlevels++;
        }
        e->level = (int32_t)l;
        level_count[l]++;
    }
    for (uint32_t l = 0; l < t->nlevels; l++) {
        uint32_t cap = 8;
        while (cap < 2 * level_count[l]) cap <<= 1;
        t->levels[l].cap = cap;
        t->levels[l].slots = malloc(cap * sizeof(int32_t));
        if (!t->levels[l].slots) { free(level_count); free(order); table_clear(t); return -1; }
        for (uint32_t i = 0; i < cap; i++) t->levels[l].slots[i] = -1;
    }
    free(level_count);
    for (uint32_t j = 0; j < n; j++) {
        tb_entry_t *e = &t->entries[order[j]];
        if (!e->is_range) level_put(t, &t->levels[e->level], order[j]);  /* in rank order: never displaces */
    }
    free(order);
    sort_levels(t);
    t->n = t->cap = n;
    return 0;
}

/* Grow a level's hash to twice its size (its occupants are each key's best entry: they stay so). */
static int level_grow(tb_table_t *t, tb_level_t *lv) {
    uint32_t old_cap = lv->cap;
    int32_t *old = lv->slots;
    int32_t *slots = malloc(2 * old_cap * sizeof(int32_t));
    if (!slots) return -1;
    for (uint32_t i = 0; i < 2 * old_cap; i++) slots[i] = -1;
    lv->slots = slots; lv->cap = 2 * old_cap; lv->used = 0;
    for (uint32_t i = 0; i < old_cap; i++) if (old[i] >= 0) level_put(t, lv, old[i]);
    free(old);
    return 0;
}

/* The entry's level: the one of its masks, or a new one (NULL: out of memory). */
static tb_level_t *level_of(tb_table_t *t, tb_entry_t *e) {
    uint32_t nk = t->nkeys;
    for (uint32_t l = 0; l < t->nlevels; l++)
        if (memcmp(t->levels[l].masks, e->masks, nk * sizeof(uint64_t)) == 0) return &t->levels[l];
    tb_level_t *levels = realloc(t->levels, (t->nlevels + 1) * sizeof(tb_level_t));
    if (!levels) return NULL;
    t->levels = levels;
    tb_level_t *lv = &levels[t->nlevels];
    memset(lv, 0, sizeof *lv);
    memcpy(lv->masks, e->masks, nk * sizeof(uint64_t));
    lv->max_prio = e->prio;
    lv->cap = 8;
    lv->slots = malloc(lv->cap * sizeof(int32_t));
    if (!lv->slots) return NULL;
    for (uint32_t i = 0; i < lv->cap; i++) lv->slots[i] = -1;
    t->nlevels++;
    return lv;
}

int tb_table_append(tb_pipeline_t *pl, uint32_t table, uint32_t n, const int32_t *prio, const int32_t *kind,
                    const int32_t *action, const uint64_t *ref, const int32_t *is_range,
                    const uint64_t *vals, const uint64_t *masks, const uint64_t *args) {
    tb_table_t *t = &pl->tables[table];
    uint32_t nk = t->nkeys, na = t->nargs, per = 2 * nk + na;
    if (n == 0) return 0;
    if (t->n + n > t->cap) {  /* grow geometrically; the entries' pointers into the store move with it */
        uint32_t cap = t->cap * 2 > t->n + n ? t->cap * 2 : t->n + n;
        tb_entry_t *entries = realloc(t->entries, (size_t)cap * sizeof(tb_entry_t));
        if (!entries) return -1;
        t->entries = entries;
        uint64_t *store = realloc(t->store, (size_t)cap * (per ? per : 1) * sizeof(uint64_t));
        if (!store) return -1;
        t->store = store;
        for (uint32_t i = 0; i < t->n; i++) {
            tb_entry_t *e = &t->entries[i];
            e->vals = t->store + (size_t)i * per; e->masks = e->vals + nk; e->args = e->masks + nk;
        }
        int32_t *ranges = realloc(t->ranges, (size_t)cap * sizeof(int32_t));
        if (!ranges) return -1;
        t->ranges = ranges;
        t->cap = cap;
    }
    int resort = 0;
    for (uint32_t j = 0; j < n; j++) {
        uint32_t i = t->n;
        tb_entry_t *e = entry_set(t, i, j, prio, kind, action, ref, is_range, vals, masks, args);
        t->n++;
        if (e->is_range) {  /* after every range entry of its priority or more (it has the largest seq) */
            uint32_t at = 0;
            while (at < t->nranges && t->entries[t->ranges[at]].prio >= e->prio) at++;
            memmove(&t->ranges[at + 1], &t->ranges[at], (t->nranges - at) * sizeof(int32_t));
            t->ranges[at] = (int32_t)i;
            t->nranges++;
            e->level = -1;
            continue;
        }
        uint32_t nlevels = t->nlevels;
        tb_level_t *lv = level_of(t, e);
        if (!lv) return -1;
        e->level = (int32_t)(lv - t->levels);
        if (e->prio > lv->max_prio) lv->max_prio = e->prio, resort = 1;
        if (t->nlevels != nlevels) resort = 1;
        if (2 * (lv->used + 1) > lv->cap && level_grow(t, lv)) return -1;
        level_put(t, lv, (int32_t)i);
    }
    if (resort) sort_levels(t);
    return 0;
}

/* Take entry idx out of its level's hash if it holds it; the entries after it in its probe run are put
 * again, so that each stays reachable from its home slot (linear probing). */
static void level_unput(tb_table_t *t, tb_level_t *lv, int32_t idx) {
    uint32_t mask = lv->cap - 1, i = (uint32_t)level_hash(lv, t->entries[idx].vals, t->nkeys) & mask;
    for (;; i = (i + 1) & mask) {
        if (lv->slots[i] < 0) return;  /* not held: another entry of its masked key ranks before it */
        if (lv->slots[i] == idx) break;
    }
    lv->slots[i] = -1;
    lv->used--;
    for (i = (i + 1) & mask; lv->slots[i] >= 0; i = (i + 1) & mask) {
        int32_t moved = lv->slots[i];
        lv->slots[i] = -1;
        lv->used--;
        level_put(t, lv, moved);
    }
}

int tb_table_remove(tb_pipeline_t *pl, uint32_t table, uint32_t position) {
    tb_table_t *t = &pl->tables[table];
    if (position >= t->n) return -1;
    uint32_t nk = t->nkeys, per = 2 * nk + t->nargs;
    int32_t gone = (int32_t)position;
    tb_entry_t *e = &t->entries[position];
    tb_level_t *lv = NULL;  /* its mask level (entries' level numbers are stale once levels are sorted) */
    uint64_t key[TB_MAX_KEYS];
    memcpy(key, e->vals, nk * sizeof(uint64_t));
    if (!e->is_range)
        for (uint32_t l = 0; l < t->nlevels && !lv; l++)
            if (memcmp(t->levels[l].masks, e->masks, nk * sizeof(uint64_t)) == 0) lv = &t->levels[l];
    if (e->is_range) {
        uint32_t at = 0;
        while (at < t->nranges && t->ranges[at] != gone) at++;
        if (at < t->nranges) {
            memmove(&t->ranges[at], &t->ranges[at + 1], (t->nranges - at - 1) * sizeof(int32_t));
            t->nranges--;
        }
    } else if (lv) {
        level_unput(t, lv, gone);
    }
    /* the entries after it move down one place, in order, and their seq with them (as load order, as
     * tb_table_load and tb_table_append number entries: one more than the position) */
    memmove(&t->entries[position], &t->entries[position + 1], (t->n - position - 1) * sizeof(tb_entry_t));
    if (per)
        memmove(t->store + (size_t)position * per, t->store + (size_t)(position + 1) * per,
                (size_t)(t->n - position - 1) * per * sizeof(uint64_t));
    t->n--;
    for (uint32_t i = position; i < t->n; i++) {
        tb_entry_t *moved = &t->entries[i];
        moved->vals = t->store + (size_t)i * per; moved->masks = moved->vals + nk; moved->args = moved->masks + nk;
        moved->seq = i + 1;
    }
    for (uint32_t l = 0; l < t->nlevels; l++)
        for (uint32_t i = 0; i < t->levels[l].cap; i++)
            if (t->levels[l].slots[i] > gone) t->levels[l].slots[i]--;
    for (uint32_t j = 0; j < t->nranges; j++)
        if (t->ranges[j] > gone) t->ranges[j]--;
    if (lv) {  /* the best remaining entry of its masked key takes its place (level_put keeps the best) */
        for (uint32_t i = 0; i < t->n; i++) {
            const tb_entry_t *other = &t->entries[i];
            if (!other->is_range && memcmp(other->masks, lv->masks, nk * sizeof(uint64_t)) == 0 &&
                level_match(lv, other, key, nk))
                level_put(t, lv, (int32_t)i);
        }
    }
    return 0;
}

int tb_table_update(tb_pipeline_t *pl, uint32_t table, uint32_t position, int32_t kind, int32_t action, uint64_t ref,
                    const uint64_t *args) {
    tb_table_t *t = &pl->tables[table];
    if (position >= t->n) return -1;
    tb_entry_t *e = &t->entries[position];
    e->kind = kind; e->action = action; e->ref = ref;
    if (t->nargs) memcpy(e->args, args, t->nargs * sizeof(uint64_t));
    return 0;
}

void tb_table_set_default(tb_pipeline_t *pl, uint32_t table, int32_t action, const uint64_t *args) {
    tb_table_t *t = &pl->tables[table];
    t->default_action = action;
    memset(t->default_args, 0, sizeof t->default_args);
    if (t->nargs) memcpy(t->default_args, args, t->nargs * sizeof(uint64_t));
}

int tb_profile_load(tb_pipeline_t *pl, uint32_t profile, uint32_t nmembers, const uint64_t *member_ids,
                    const int32_t *member_actions, const uint64_t *member_args, uint32_t nargs,
                    uint32_t ngroups, const uint64_t *group_ids, const uint32_t *group_sizes,
                    const uint64_t *selection_ids) {
    tb_profile_t *p = &pl->profiles[profile];
    free(p->members); free(p->groups); free(p->selection_store);
    memset(p, 0, sizeof *p);
    uint64_t total = 0;
    for (uint32_t g = 0; g < ngroups; g++) total += group_sizes[g];
    p->members = calloc(nmembers ? nmembers : 1, sizeof(tb_member_t));
    p->groups = calloc(ngroups ? ngroups : 1, sizeof(tb_group_t));
    p->selection_store = calloc(total ? total : 1, sizeof(uint32_t));
    if (!p->members || !p->groups || !p->selection_store) return -1;
    for (uint32_t m = 0; m < nmembers; m++) {
        p->members[m].id = member_ids[m];
        p->members[m].action = member_actions[m];
        if (nargs) memcpy(p->members[m].args, member_args + (size_t)m * nargs, nargs * sizeof(uint64_t));
    }
    p->nmembers = nmembers;
    uint64_t at = 0;
    for (uint32_t g = 0; g < ngroups; g++) {
        p->groups[g].id = group_ids[g];
        p->groups[g].n = group_sizes[g];
        p->groups[g].selection = p->selection_store + at;
        for (uint32_t i = 0; i < group_sizes[g]; i++) {
            int m = profile_member(p, selection_ids[at + i]);
            if (m < 0) return -2;
            p->groups[g].selection[i] = (uint32_t)m;
        }
        at += group_sizes[g];
    }
    p->ngroups = ngroups;
    return 0;
}

/* ---- random(): MT19937 as CPython's _randommodule.c seeds and draws it ------------------------ */
static void mt_init(tb_rng_t *r, uint32_t s) {
    r->mt[0] = s;
    for (int i = 1; i < 624; i++) r->mt[i] = 1812433253u * (r->mt[i - 1] ^ (r->mt[i - 1] >> 30)) + (uint32_t)i;
    r->mti = 624;
}

void tb_rng_seed(tb_rng_t *r, const uint32_t *key, uint32_t n) {
    uint32_t one = 0;
    if (n == 0) { key = &one; n = 1; }
    mt_init(r, 19650218u);
    uint32_t i = 1, j = 0, k = 624 > n ? 624 : n;
    for (; k; k--) {
        r->mt[i] = (r->mt[i] ^ ((r->mt[i - 1] ^ (r->mt[i - 1] >> 30)) * 1664525u)) + key[j] + j;
        i++; j++;
        if (i >= 624) { r->mt[0] = r->mt[623]; i = 1; }
        if (j >= n) j = 0;
    }
    for (k = 623; k; k--) {
        r->mt[i] = (r->mt[i] ^ ((r->mt[i - 1] ^ (r->mt[i - 1] >> 30)) * 1566083941u)) - i;
        i++;
        if (i >= 624) { r->mt[0] = r->mt[623]; i = 1; }
    }
    r->mt[0] = 0x80000000u;
}

static uint32_t mt_next(tb_rng_t *r) {
    static const uint32_t mag01[2] = {0x0u, 0x9908b0dfu};
    uint32_t y;
    if (r->mti >= 624) {
        int kk;
        for (kk = 0; kk < 624 - 397; kk++) {
            y = (r->mt[kk] & 0x80000000u) | (r->mt[kk + 1] & 0x7fffffffu);
            r->mt[kk] = r->mt[kk + 397] ^ (y >> 1) ^ mag01[y & 1];
        }
        for (; kk < 623; kk++) {
            y = (r->mt[kk] & 0x80000000u) | (r->mt[kk + 1] & 0x7fffffffu);
            r->mt[kk] = r->mt[kk + (397 - 624)] ^ (y >> 1) ^ mag01[y & 1];
        }
        y = (r->mt[623] & 0x80000000u) | (r->mt[0] & 0x7fffffffu);
        r->mt[623] = r->mt[396] ^ (y >> 1) ^ mag01[y & 1];
        r->mti = 0;
    }
    y = r->mt[r->mti++];
    y ^= (y >> 11); y ^= (y << 7) & 0x9d2c5680u; y ^= (y << 15) & 0xefc60000u; y ^= (y >> 18);
    return y;
}

/* getrandbits(k), k <= 96: 32-bit words least significant first, the last one cut to its bits */
static unsigned __int128 mt_bits(tb_rng_t *r, unsigned k) {
    if (k <= 32) return mt_next(r) >> (32 - k);
    unsigned __int128 v = 0;
    for (unsigned shift = 0; k; shift += 32) {
        uint32_t w = mt_next(r);
        if (k < 32) { w >>= (32 - k); k = 0; } else k -= 32;
        v |= (unsigned __int128)w << shift;
    }
    return v;
}

uint64_t tb_rng_randint(tb_rng_t *r, uint64_t lo, uint64_t hi) {
    if (lo > hi) return lo;
    unsigned __int128 n = (unsigned __int128)hi - lo + 1, v;
    unsigned k = 0;
    for (unsigned __int128 t = n; t; t >>= 1) k++;
    do v = mt_bits(r, k); while (v >= n);
    return lo + (uint64_t)v;
}

void tb_pipeline_lock(tb_pipeline_t *pl) { pthread_mutex_lock(&pl->lock); }
void tb_pipeline_unlock(tb_pipeline_t *pl) { pthread_mutex_unlock(&pl->lock); }

void tb_random_seed(tb_pipeline_t *pl, const uint32_t *key, uint32_t n) { tb_rng_seed(&pl->rng, key, n); }

/* ---- state ------------------------------------------------------------------------------ */
tb_pipeline_t *tb_state_new(uint32_t ntables, const uint32_t *nkeys, const uint32_t *nargs,
                            uint32_t nprofiles, const int32_t *table_profile,
                            uint32_t nregisters, const uint64_t *register_sizes,
                            uint32_t ncounters, const uint64_t *counter_sizes,
                            uint32_t nmeters, const uint64_t *meter_sizes) {
    tb_pipeline_t *pl = calloc(1, sizeof *pl);
    if (!pl) return NULL;
    tb_rng_seed(&pl->rng, NULL, 0);
    pthread_mutex_init(&pl->lock, NULL);
    pl->ntables = ntables; pl->nprofiles = nprofiles; pl->nregisters = nregisters; pl->ncounters = ncounters;
    pl->tables = calloc(ntables ? ntables : 1, sizeof(tb_table_t));
    pl->profiles = calloc(nprofiles ? nprofiles : 1, sizeof(tb_profile_t));
    pl->registers = calloc(nregisters ? nregisters : 1, sizeof(tb_array_t));
    pl->counter_packets = calloc(ncounters ? ncounters : 1, sizeof(tb_array_t));
    pl->counter_bytes = calloc(ncounters ? ncounters : 1, sizeof(tb_array_t));
    pl->nmeters = nmeters;
    pl->meters = calloc(nmeters ? nmeters : 1, sizeof(tb_meters_t));
    if (!pl->meters) { tb_state_free(pl); return NULL; }
    for (uint32_t i = 0; i < nmeters; i++) {
        pl->meters[i].n = meter_sizes[i];
        pl->meters[i].cells = calloc(meter_sizes[i] ? meter_sizes[i] : 1, sizeof(tb_meter_cell_t));
        if (!pl->meters[i].cells) { tb_state_free(pl); return NULL; }
    }
    if (!pl->tables || !pl->profiles || !pl->registers || !pl->counter_packets || !pl->counter_bytes) {
        tb_state_free(pl); return NULL;
    }
    for (uint32_t i = 0; i < ntables; i++) {
        pl->tables[i].nkeys = nkeys[i];
        pl->tables[i].nargs = nargs[i];
        pl->tables[i].profile = table_profile[i] >= 0 ? &pl->profiles[table_profile[i]] : NULL;
    }
    for (uint32_t i = 0; i < nregisters; i++) {
        pl->registers[i].n = register_sizes[i];
        pl->registers[i].v = calloc(register_sizes[i] ? register_sizes[i] : 1, sizeof(uint64_t));
        if (!pl->registers[i].v) { tb_state_free(pl); return NULL; }
    }
    for (uint32_t i = 0; i < ncounters; i++) {
        uint64_t n = counter_sizes[i] ? counter_sizes[i] : 1;
        pl->counter_packets[i].n = pl->counter_bytes[i].n = counter_sizes[i];
        pl->counter_packets[i].v = calloc(n, sizeof(uint64_t));
        pl->counter_bytes[i].v = calloc(n, sizeof(uint64_t));
        if (!pl->counter_packets[i].v || !pl->counter_bytes[i].v) { tb_state_free(pl); return NULL; }
    }
    return pl;
}

void tb_state_free(tb_pipeline_t *pl) {
    if (!pl) return;
    for (uint32_t i = 0; pl->tables && i < pl->ntables; i++) table_clear(&pl->tables[i]);
    for (uint32_t i = 0; pl->profiles && i < pl->nprofiles; i++) {
        free(pl->profiles[i].members); free(pl->profiles[i].groups); free(pl->profiles[i].selection_store);
    }
    for (uint32_t i = 0; pl->registers && i < pl->nregisters; i++) free(pl->registers[i].v);
    for (uint32_t i = 0; pl->counter_packets && i < pl->ncounters; i++) {
        free(pl->counter_packets[i].v); free(pl->counter_bytes[i].v);
    }
    for (uint32_t i = 0; pl->meters && i < pl->nmeters; i++) free(pl->meters[i].cells);
    free(pl->meters);
    pthread_mutex_destroy(&pl->lock);
    free(pl->tables); free(pl->profiles); free(pl->registers); free(pl->counter_packets); free(pl->counter_bytes);
    free(pl);
}

uint64_t *tb_register_cells(tb_pipeline_t *pl, uint32_t index) { return pl->registers[index].v; }

void tb_meter_set(tb_pipeline_t *pl, uint32_t meter, uint64_t index, int configured, uint64_t cir, uint64_t cburst,
                  uint64_t pir, uint64_t pburst) {
    tb_meter_cell_t *c = &pl->meters[meter].cells[index];
    memset(c, 0, sizeof *c);
    if (!configured) return;
    c->configured = 1; c->cir = cir; c->cburst = cburst; c->pir = pir; c->pburst = pburst;
    c->p_tokens = pburst; c->c_tokens = cburst;
}

void tb_table_meters(tb_pipeline_t *pl, uint32_t table, uint32_t n, uint64_t *cells, int write) {
    tb_table_t *t = &pl->tables[table];
    for (uint32_t i = 0; i < t->n && i < n; i++) {
        if (write) memcpy(&t->entries[i].meter, cells + 9 * (size_t)i, sizeof(tb_meter_cell_t));
        else memcpy(cells + 9 * (size_t)i, &t->entries[i].meter, sizeof(tb_meter_cell_t));
    }
}

void tb_table_hits(tb_pipeline_t *pl, uint32_t table, uint32_t n, uint64_t *hits) {
    tb_table_t *t = &pl->tables[table];
    for (uint32_t i = 0; i < t->n && i < n; i++) hits[i] = t->entries[i].last_hit_ns;
}

void tb_table_counts(tb_pipeline_t *pl, uint32_t table, uint32_t n, uint64_t *packets, uint64_t *bytes,
                     int write) {
    tb_table_t *t = &pl->tables[table];
    for (uint32_t i = 0; i < t->n && i < n; i++) {
        if (write) { t->entries[i].counter_packets = packets[i]; t->entries[i].counter_bytes = bytes[i]; }
        else { packets[i] = t->entries[i].counter_packets; bytes[i] = t->entries[i].counter_bytes; }
    }
}
uint64_t *tb_counter_cells(tb_pipeline_t *pl, uint32_t index, int bytes) {
    return bytes ? pl->counter_bytes[index].v : pl->counter_packets[index].v;
}
