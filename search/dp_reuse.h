/* dp_reuse.h: repeated eliminations of the exact DP (dp.c; the code in
 * dp_reuse.c). Internal to search/.
 *
 * Repeated layers give eliminations whose inputs (v's own costs, the tables
 * in the order the elimination reads them, the sizes and positions of the
 * dependent set) are bitwise equal to an earlier one's: their table and
 * argmins are then equal too, and are copied instead of computed. Recent
 * eliminations of at least DP_MEMO_MIN_WORK sums are kept, with a copy of
 * their inputs to compare against (a hash finds the candidates; equality is
 * checked in full), up to cap bytes (one entry at most half), oldest
 * dropped first. */
#ifndef SB_SEARCH_DP_REUSE_H
#define SB_SEARCH_DP_REUSE_H

#include <stddef.h>
#include <stdint.h>

#define DP_MAX_SCOPE 32
#define DP_MEMO_MIN_WORK 1e5

/* A table an elimination of v reads: over v and some vars of its dependent
 * set S (sorted by id). */
typedef struct {
    double *t;             /* rows x (configs of v), v innermost */
    int level;             /* deepest position in S of its other vars, -1 if none */
    int nv;
    int pos[DP_MAX_SCOPE]; /* positions in S of its other vars */
    int v[DP_MAX_SCOPE];   /* those vars */
    int64_t rows;          /* table size / configs of v */
    int64_t stride[DP_MAX_SCOPE];
} dp_inflow;

/* Everything one elimination's result depends on. */
typedef struct {
    int nv;              /* configs of v */
    int k;               /* size of the dependent set S */
    const int *dom;      /* k: configs of each var of S */
    const double *base;  /* nv: v's own costs */
    const dp_inflow *in; /* nin tables */
    int nin;
} dp_elim_inputs;

typedef struct dp_memo_entry dp_memo_entry;

/* The remembered eliminations. */
typedef struct {
    dp_memo_entry *e; /* n, oldest first */
    int n;
    double bytes, cap;
    long long hits;
} dp_memo;

uint64_t dp_memo_hash(const dp_elim_inputs *x);

/* When an entry's inputs equal x's (hash h): its table and argmins (gsize
 * entries) into g and arg, a hit counted, 1. Else 0. */
int dp_memo_take(dp_memo *m, uint64_t h, const dp_elim_inputs *x, double *g, uint16_t *arg,
                 int64_t gsize);

/* A copy of x, to be completed by dp_memo_commit; NULL when it would not
 * fit in the cap or memory is short (then nothing is remembered). */
dp_memo_entry *dp_memo_prepare(const dp_memo *m, uint64_t h, const dp_elim_inputs *x,
                               int64_t gsize);

/* Adds e (from dp_memo_prepare) with its result g and arg. */
void dp_memo_commit(dp_memo *m, dp_memo_entry *e, const double *g, const uint16_t *arg);

/* Frees e (from dp_memo_prepare) without adding it. */
void dp_memo_discard(dp_memo_entry *e);

void dp_memo_free(dp_memo *m);

/* Pair tables (the summed edge costs between two ops) of repeated layers are
 * equal when everything they are computed from is: the key (dp.c: per edge
 * the tensor's sizes, both operands' distinct layouts and each config's
 * layout id). Recent tables are kept with their keys, compared in full, up
 * to cap bytes (one at most half), oldest dropped first. */
typedef struct dp_pair_entry dp_pair_entry;
typedef struct {
    dp_pair_entry *e; /* n, oldest first */
    int n;
    double bytes, cap;
    long long hits;
} dp_pair_cache;

uint64_t dp_pair_hash(const void *key, size_t klen);

/* When a kept table has key (klen bytes, hash h) and size entries: copied
 * into t, a hit counted, 1. Else 0. */
int dp_pair_take(dp_pair_cache *c, uint64_t h, const void *key, size_t klen, double *t,
                 int64_t size);

/* Keeps a copy of key and t (dropped silently when memory is short). */
void dp_pair_put(dp_pair_cache *c, uint64_t h, const void *key, size_t klen, const double *t,
                 int64_t size);

void dp_pair_free(dp_pair_cache *c);

#endif
