/* dp_reuse.h: repeated work of the exact DP (dp.c; the code in dp_reuse.c),
 * found by content ids. Internal to search/.
 *
 * Every table the DP holds gets a content id: equal ids mean bitwise equal
 * tables (in the table's own var order). A pair table's id comes from its
 * key (per edge: the tensor's sizes, both operands' distinct layouts and
 * each config's layout id: everything its entries are computed from),
 * compared in full: equal keys, one id. An elimination's result is a
 * function of its inputs (v's own costs, and per table it reads: its id,
 * which vars of the dependent set it spans, in which order, and the
 * dependent set's sizes): when those equal an earlier elimination's, its
 * table and argmins are copied from it and its result keeps that one's id;
 * else the result gets a new id. Repeated layers thus reuse whole chains
 * of eliminations without reading the tables they would compare.
 * Remembered results are dropped oldest first beyond a byte cap. */
#ifndef SB_SEARCH_DP_REUSE_H
#define SB_SEARCH_DP_REUSE_H

#include <stddef.h>
#include <stdint.h>

#define DP_MAX_SCOPE 32

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
    int dim[DP_MAX_SCOPE]; /* extent of each of those axes: classes, or configs */
    int *cm[DP_MAX_SCOPE]; /* config -> class along each axis (dp_buf), NULL: none */
} dp_inflow;

/* Reference-counted tables: the DP's tables and argmins, shared between
 * the remembered eliminations and the eliminations that reuse them
 * (never written while shared: dp.c copies a shared table before changing
 * it). dp_buf_alloc: one reference, NULL when out of memory; dp_buf_free
 * drops one (NULL: nothing), freeing the table with the last. */
void *dp_buf_alloc(size_t bytes);
void *dp_buf_ref(void *p);
void dp_buf_free(void *p);
int dp_buf_shared(const void *p);

/* Freed large tables are kept for reuse (dp_reuse.c), at most bytes of
 * them (0, the start: none); drain frees them all (the end of a search). */
void dp_buf_pool_limit(size_t bytes);
void dp_buf_pool_drain(void);

/* A byte string built up key_add by key_add (an elimination's or a pair
 * table's key). */
typedef struct {
    unsigned char *b;
    size_t len, cap;
    int failed; /* out of memory: the key is unusable */
} dp_key;

void dp_key_add(dp_key *k, const void *p, size_t n);
void dp_key_free(dp_key *k);

typedef struct dp_memo_entry dp_memo_entry;

/* Remembered keys: pair-table keys with their ids and tables, elimination
 * keys with their results. */
typedef struct {
    dp_memo_entry *e; /* n, oldest first */
    int n, ecap;      /* entries, and room for ecap */
    double bytes, cap;
    uint64_t next_id;  /* the next new content id (ids start at 1) */
    long long hits;    /* elimination results copied */
    long long pair_hits; /* pair tables copied */
} dp_memo;

/* The id of the pair table with key k (a new one when k is new or
 * unusable); when its table is remembered, *t (size entries) gets a copy
 * and *have 1. */
uint64_t dp_memo_pair(dp_memo *m, const dp_key *k, double *t, int64_t size, int *have);

/* Remembers the table (size entries) of the pair table with id id. */
void dp_memo_pair_put(dp_memo *m, uint64_t id, const double *t, int64_t size);

/* An elimination's result: its table and argmins (dp_bufs of size
 * entries) over its ncm vars, and per var its classes (a dp_buf of the
 * var's configs: config -> index along that axis; NULL: every config its
 * own). */
typedef struct {
    double *g;
    uint16_t *arg;
    int64_t size;
    int ncm;
    int *cm[DP_MAX_SCOPE];
} dp_result;

/* When an elimination with key k was remembered: *r gets references to
 * its result (r's own fields are not freed: the caller's are empty), its
 * id into *id, a hit counted, 1. Else 0. */
int dp_memo_take(dp_memo *m, const dp_key *k, dp_result *r, uint64_t *id);

/* Remembers the result r (referenced, not copied) of the elimination with
 * key k and gives it a new id (returned; 0 never); when k is remembered
 * without its table (too large to keep, or dropped), its id: equal keys,
 * equal results. */
uint64_t dp_memo_put(dp_memo *m, const dp_key *k, const dp_result *r);

void dp_memo_free(dp_memo *m);

#endif
