/* tb_runtime.h - the native backend's runtime: bit access, hashes, tables, selectors, externs.
 *
 * Included by every generated pipeline (testbed/p4/native/cgen.py) and by tb_runtime.c.
 * Field values are uint64_t (at most 64 bits); the semantics follow the Python target:
 * testbed/p4/state/tables.py (lookup), action_profiles.py (selection), v1model/hashes.py.
 */
#ifndef TB_RUNTIME_H
#define TB_RUNTIME_H

#include <stdint.h>
#include <stddef.h>
#include <string.h>
#include <pthread.h>
#include "tb_pipeline.h"

#define TB_MAX_KEYS 16
#define TB_MAX_ARGS 16

/* ---- bits ----------------------------------------------------------------- */
static inline uint64_t tb_mask(unsigned w) { return w >= 64 ? ~UINT64_C(0) : ((UINT64_C(1) << w) - 1); }

/* w bits (1..64) at bit offset `bit` of p, MSB first */
static inline uint64_t tb_get_bits(const uint8_t *p, unsigned bit, unsigned w) {
    unsigned first = bit >> 3, last = (bit + w - 1) >> 3;
    unsigned __int128 v = 0;
    for (unsigned i = first; i <= last; i++) v = (v << 8) | p[i];
    unsigned tail = 7 - ((bit + w - 1) & 7);
    return (uint64_t)(v >> tail) & tb_mask(w);
}

/* OR w bits of v at bit offset `bit` into p (the bytes must start zeroed) */
static inline void tb_put_bits(uint8_t *p, unsigned bit, unsigned w, uint64_t v) {
    unsigned first = bit >> 3, last = (bit + w - 1) >> 3;
    unsigned tail = 7 - ((bit + w - 1) & 7);
    unsigned __int128 x = (unsigned __int128)(v & tb_mask(w)) << tail;
    for (unsigned i = last + 1; i-- > first;) { p[i] |= (uint8_t)x; x >>= 8; }
}

/* int<w> values are kept as their w-bit two's complement pattern */
static inline int64_t tb_sext(uint64_t v, unsigned w) { return w >= 64 ? (int64_t)v : (int64_t)(v << (64 - w)) >> (64 - w); }
static inline uint64_t tb_sshr(uint64_t v, uint64_t n, unsigned w) {
    int64_t s = tb_sext(v, w);
    return (uint64_t)(n >= 64 ? (s < 0 ? -1 : 0) : s >> n) & tb_mask(w);
}
static inline uint64_t tb_ssat(__int128 r, unsigned w) {
    __int128 high = ((__int128)1 << (w - 1)) - 1, low = -((__int128)1 << (w - 1));
    return (uint64_t)(r > high ? high : r < low ? low : r) & tb_mask(w);
}
static inline uint64_t tb_shl(uint64_t v, uint64_t n, unsigned w) { return n >= w ? 0 : (v << n) & tb_mask(w); }
static inline uint64_t tb_shr(uint64_t v, uint64_t n) { return n >= 64 ? 0 : v >> n; }
static inline uint64_t tb_udiv(uint64_t a, uint64_t b) { return b ? a / b : 0; }
static inline uint64_t tb_umod(uint64_t a, uint64_t b) { return b ? a % b : 0; }
static inline uint64_t tb_sadd(uint64_t a, uint64_t b, uint64_t m) { uint64_t r = a + b; return (r < a || r > m) ? m : r; }
static inline uint64_t tb_ssub(uint64_t a, uint64_t b) { return a > b ? a - b : 0; }

/* ---- hashes (BMv2 calculations, as testbed/p4/v1model/hashes.py) ------------ */
enum { TB_CRC32 = 0, TB_CRC32_CUSTOM, TB_CRC16, TB_CRC16_CUSTOM, TB_RANDOM, TB_IDENTITY, TB_CSUM16, TB_XOR16 };
uint64_t tb_hash(int algorithm, const uint8_t *data, size_t n);
uint64_t tb_hash2(int algorithm, const uint8_t *a, size_t na, const uint8_t *b, size_t nb);
static inline uint64_t tb_hash_ext(uint64_t raw, uint64_t base, uint64_t max, unsigned w) {
    uint64_t mod = max ? max : 1;
    return ((raw % mod) + base) & tb_mask(w);
}

/* one two-rate three-colour marker cell (RFC 2698, colour-blind), as testbed/p4/state/stateful.py */
typedef struct tb_meter_cell {
    uint64_t configured, cir, cburst, pir, pburst, p_tokens, c_tokens, p_last, c_last;
} tb_meter_cell_t;
typedef struct tb_meters { uint64_t n; tb_meter_cell_t *cells; } tb_meters_t;

/* GREEN 0, YELLOW 1, RED 2; an unconfigured cell: GREEN */
static inline uint64_t tb_meter_cell_execute(tb_meter_cell_t *c, uint64_t need, uint64_t now_ns) {
    if (!c->configured) return 0;
    unsigned __int128 micros = now_ns / 1000;
    uint64_t since = (uint64_t)(micros * c->pir / 1000000u);
    if (since > c->p_last) {
        unsigned __int128 t = (unsigned __int128)c->p_tokens + since - c->p_last;
        c->p_tokens = t < c->pburst ? (uint64_t)t : c->pburst;
        c->p_last = since;
    }
    if (c->p_tokens < need) return 2;
    c->p_tokens -= need;
    since = (uint64_t)(micros * c->cir / 1000000u);
    if (since > c->c_last) {
        unsigned __int128 t = (unsigned __int128)c->c_tokens + since - c->c_last;
        c->c_tokens = t < c->cburst ? (uint64_t)t : c->cburst;
        c->c_last = since;
    }
    if (c->c_tokens < need) return 1;
    c->c_tokens -= need;
    return 0;
}

/* an index past the end: GREEN */
static inline uint64_t tb_meter_execute(tb_meters_t *m, uint64_t index, uint64_t need, uint64_t now_ns) {
    return index < m->n ? tb_meter_cell_execute(&m->cells[index], need, now_ns) : 0;
}

/* ---- tables ------------------------------------------------------------------- */
typedef struct tb_entry {
    int32_t prio;            /* rank: larger wins, then smaller seq */
    uint32_t seq;
    int32_t kind;            /* 0 direct action, 1 member, 2 group */
    int32_t action;          /* direct: action id */
    uint64_t ref;            /* member or group id */
    uint64_t counter_packets, counter_bytes;  /* direct counter */
    tb_meter_cell_t meter;   /* direct meter */
    uint64_t last_hit_ns;    /* idle timeout: time of the last hit + 1 (0: not hit since loaded) */
    uint64_t *vals;          /* nkeys values (range: low) */
    uint64_t *masks;         /* nkeys masks (range entries: high, with is_range) */
    uint64_t *args;
    int32_t is_range;
    int32_t level;           /* index of its mask level while tb_table_load builds them (sorted after), -1: range */
} tb_entry_t;

typedef struct tb_level {
    uint64_t masks[TB_MAX_KEYS];
    int32_t max_prio;
    uint32_t cap;            /* power of two */
    uint32_t used;           /* slots holding an entry (at most cap / 2) */
    int32_t *slots;          /* entry index or -1 */
} tb_level_t;

typedef struct tb_profile tb_profile_t;

typedef struct tb_table {
    uint32_t nkeys, nargs;
    uint32_t n, cap;         /* entries, and room for (entries, store and ranges; tb_table_append) */
    tb_entry_t *entries;
    uint64_t *store;         /* values, masks, args of all entries */
    uint32_t nlevels;
    tb_level_t *levels;      /* by decreasing max_prio */
    uint32_t nranges;
    int32_t *ranges;         /* range entries by rank */
    uint8_t range_key[TB_MAX_KEYS];  /* 1: the key is a range key (low/high in range entries) */
    int32_t default_action;
    uint64_t default_args[TB_MAX_ARGS];
    tb_profile_t *profile;
} tb_table_t;

typedef struct tb_result {
    int hit;
    int32_t action;
    const uint64_t *args;
    tb_entry_t *entry;
} tb_result_t;

typedef struct tb_member { uint64_t id; int32_t action; uint64_t args[TB_MAX_ARGS]; } tb_member_t;
typedef struct tb_group { uint64_t id; uint32_t n; uint32_t *selection; /* member indexes */ } tb_group_t;
struct tb_profile {
    uint32_t nmembers, ngroups;
    tb_member_t *members;    /* sorted by id */
    tb_group_t *groups;      /* sorted by id */
    uint32_t *selection_store;
};

typedef struct tb_array { uint64_t n; uint64_t *v; } tb_array_t;



void tb_table_lookup(tb_table_t *t, const uint64_t *key, uint64_t selector_hash, tb_result_t *r);

/* ---- random(): CPython's random.Random (MT19937, init_by_array, getrandbits, randint) ------- */
typedef struct tb_rng { uint32_t mt[624]; int mti; } tb_rng_t;
void tb_rng_seed(tb_rng_t *r, const uint32_t *key, uint32_t n);
/* random.Random.randint(lo, hi) for lo <= hi (else lo, as the Python target does) */
uint64_t tb_rng_randint(tb_rng_t *r, uint64_t lo, uint64_t hi);

/* ---- the state of one switch (layout shared with the generated code) -------------- */
struct tb_pipeline {
    uint32_t ntables, nprofiles, nregisters, ncounters, nmeters;
    tb_table_t *tables;
    tb_profile_t *profiles;
    tb_array_t *registers;
    tb_array_t *counter_packets;
    tb_array_t *counter_bytes;
    tb_meters_t *meters;
    tb_rng_t rng;
    pthread_mutex_t lock;
};

/* control plane (called from Python through cffi) */
tb_pipeline_t *tb_state_new(uint32_t ntables, const uint32_t *nkeys, const uint32_t *nargs,
                            uint32_t nprofiles, const int32_t *table_profile,
                            uint32_t nregisters, const uint64_t *register_sizes,
                            uint32_t ncounters, const uint64_t *counter_sizes,
                            uint32_t nmeters, const uint64_t *meter_sizes);
/* (re)configure one meter cell, its buckets full (configured 0: unconfigured) */
void tb_meter_set(tb_pipeline_t *pl, uint32_t meter, uint64_t index, int configured, uint64_t cir, uint64_t cburst,
                  uint64_t pir, uint64_t pburst);
void tb_state_free(tb_pipeline_t *pl);
/* replace a table's entries: n entries, each nkeys vals, nkeys masks (or highs), nargs args */
int tb_table_load(tb_pipeline_t *pl, uint32_t table, uint32_t n, const int32_t *prio, const int32_t *kind,
                  const int32_t *action, const uint64_t *ref, const int32_t *is_range,
                  const uint64_t *vals, const uint64_t *masks, const uint64_t *args,
                  const uint8_t *range_key);
/* add n entries after a table's last (the arrays as tb_table_load's; they rank after the loaded entries of
 * equal priority, as later inserts do), their direct counters, meter and hits zero */
int tb_table_append(tb_pipeline_t *pl, uint32_t table, uint32_t n, const int32_t *prio, const int32_t *kind,
                    const int32_t *action, const uint64_t *ref, const int32_t *is_range,
                    const uint64_t *vals, const uint64_t *masks, const uint64_t *args);
/* remove the entry at position (load order); the entries after it move down one position, in order */
int tb_table_remove(tb_pipeline_t *pl, uint32_t table, uint32_t position);
/* change the action of the entry at position (load order): its key and priority stay */
int tb_table_update(tb_pipeline_t *pl, uint32_t table, uint32_t position, int32_t kind, int32_t action, uint64_t ref,
                    const uint64_t *args);
void tb_table_set_default(tb_pipeline_t *pl, uint32_t table, int32_t action, const uint64_t *args);
/* replace a profile's members (sorted by id) and groups (sorted by id; selection: member ids) */
int tb_profile_load(tb_pipeline_t *pl, uint32_t profile, uint32_t nmembers, const uint64_t *member_ids,
                    const int32_t *member_actions, const uint64_t *member_args, uint32_t nargs,
                    uint32_t ngroups, const uint64_t *group_ids, const uint32_t *group_sizes,
                    const uint64_t *selection_ids);
uint64_t *tb_register_cells(tb_pipeline_t *pl, uint32_t index);
/* seed random() as random.Random(seed) is seeded: the seed's 32-bit words, least significant first */
void tb_random_seed(tb_pipeline_t *pl, const uint32_t *key, uint32_t n);
/* direct counters of a table's entries (load order): read into / write from the arrays */
/* direct meter cells of a table's entries (load order), 9 values each as tb_meter_cell_t: read / write */
void tb_table_meters(tb_pipeline_t *pl, uint32_t table, uint32_t n, uint64_t *cells, int write);
/* idle timeout: the last hit times of a table's entries (load order), +1, 0 for none since loaded */
void tb_table_hits(tb_pipeline_t *pl, uint32_t table, uint32_t n, uint64_t *hits);
void tb_table_counts(tb_pipeline_t *pl, uint32_t table, uint32_t n, uint64_t *packets, uint64_t *bytes,
                     int write);
uint64_t *tb_counter_cells(tb_pipeline_t *pl, uint32_t index, int bytes);

#endif /* TB_RUNTIME_H */
