/* dp_engine.h: the exact DP's own types and the calls between its files
 * (private to search/). dp.c drives the eliminations; dp_factors.c builds
 * the initial tables, dp_classes.c the classes of equal slices and the
 * stable sort, dp_scan.c the vector, column-class and entry-wise scans,
 * dp_fill.c the fill of a table over threads. Split from one file of
 * 3,000 lines so that each part can be read alone (issue 38). */
#ifndef SB_DP_ENGINE_H
#define SB_DP_ENGINE_H

#include <stdint.h>

#include "dp.h"
#include "dp_reuse.h"
#include "msort.h"

#define MAX_SCOPE DP_MAX_SCOPE
#define DP_MAX_THREADS 256 /* the most threads one elimination starts (par_run's array) */
#define HASH_SEED0 1469598103934665603ULL
#define VEC_BLOCK 8 /* prefixes per block of the vector scan */
#define VEC_SAMPLE 64 /* entries of the other scans sampled before choosing */
#ifndef VEC_STEP_COST
#define VEC_STEP_COST 16 /* a sampled step against a config read by the vector scan */
#endif
#ifndef VEC_MAX_NV
#define VEC_MAX_NV 1024 /* the vector scan for at most this many configs of v */
#endif

#define ENT_W 32 /* entries per kernel call: four vectors of eight */

typedef struct {
    int nv;
    int vars[MAX_SCOPE]; /* table order: last var fastest */
    int64_t size;
    double *t;     /* NULL until built (edge tables: when first used) */
    int alive;
    int pend, npend; /* edge tables: its edges, pairs[3 * pend ..] of the engine */
    uint64_t id;     /* content id (dp_reuse.h); 0: none yet (plain: always) */
    int dim[MAX_SCOPE]; /* extent of each var's axis: its configs, or its classes */
    int *cm[MAX_SCOPE]; /* per var: config -> class (dp_buf), NULL: configs themselves */
} factor;

typedef struct {
    const sb_problem *pb;
    int n;
    factor *f;
    int nf, capf;
    int **vf;     /* per var: factor ids */
    int *nvf, *capvf;
    double live_bytes, peak_bytes, limit_bytes;
    long long entries_copied, configs_merged, rows_bounded, rows_threshold, rows_vector,
        rows_colclass, rows_entwise; /* shortcuts (sb_result) */
    int threads_used; /* the most threads an elimination's scan ran on (sb_result) */
    int *pairs; /* edges by (lower op, higher op, edge index), sorted */
    struct edge_layouts_s *elc; /* per edge of pb: its layouts (dp_factors.c, edge_layouts_of),
                                   computed once per DP when first read; NULL: none yet */
    unsigned char *elc_have;
    dp_layout_cache *elc_ext; /* elc and elc_have are its (kept after the DP), or NULL */
    dp_memo *memo; /* content ids, recent pair tables and eliminations (dp_reuse.h): own_memo
                      or the one shared by the caller (sb_search_opts.memo) */
    dp_memo own_memo;
    long long hits0; /* memo->hits at the start */
    int plain; /* sb_search_opts.plain: take none */
    int trace; /* SB_DP_TRACE set: one line per elimination on stderr */
    int scan;  /* sb_search_opts.scan */
    int threads; /* sb_search_opts.threads: the scan's threads at most (0: sb_dp_default_threads) */
    int colclass; /* sb_search_opts.colclass */
    int entwise; /* sb_search_opts.entwise */
    sb_error *err;
} engine;

static inline int dom(const engine *E, int v) { return E->pb->cfg[v].n; }

typedef struct {
    int nv;            /* dependent set size */
    int vars[MAX_SCOPE];
    uint16_t *arg;     /* argmin of v for every assignment of vars (by their classes) */
    int dim[MAX_SCOPE];
    int *cm[MAX_SCOPE]; /* per var: config -> class (dp_buf), NULL: none */
} step;

/* A table an elimination of v reads, over v and part of its dependent set
 * (dp_reuse.h). */
typedef dp_inflow inflow;

typedef struct {
    double k;
    int x;
} keyed;

typedef int (*vec_scan_fn)(const double *, const double *const *, int, int, double *);

/* The state of one elimination of v. */
typedef struct {
    engine *E;
    int v;
    int nv;                  /* configs of v in play: all, then those dp_compact_eliminated keeps */
    double full;             /* entries of a table over every config of S */
    int k, S[MAX_SCOPE];     /* the dependent set, by increasing id */
    int nin;                 /* v's live factors */
    double size;             /* entries of g (as the dp_charge counts them) */
    int64_t gsize;
    double *g;               /* gsize: the new table over S, last var fastest */
    uint16_t *arg;           /* gsize: v's (original) config reaching each entry */
    inflow *in;              /* nfl of the nin factors: those with vars besides v */
    int nfl;
    double *P;               /* (k + 1) x nv: P[0] v's own costs (base), P[l + 1] plus the
                              * inflows of levels 0..l at the current assignment */
    double *val;             /* nv: the sums of one entry (plain scan) */
    int *xmap;               /* nv: kept config -> v's original config */
    uint64_t id;             /* content id of g (dp_reuse.h) */
    /* equal rows: per position q of S, rep[q][i] (dp_config_classes) and the
     * representatives reps[q][0..nrep[q]) in increasing order */
    int *repbuf;
    int *rep[MAX_SCOPE], *reps[MAX_SCOPE], nrep[MAX_SCOPE], all_reps;
    int64_t gstride[MAX_SCOPE];      /* g is over the representatives: nrep[q] along q */
    int *gcm[MAX_SCOPE];             /* g's classes along q (dp_buf; NULL: all reps) */
    int idx[MAX_SCOPE], r[MAX_SCOPE]; /* current assignment of S; its rank among the reps */
    int nlast_in, last_in;   /* inflows at the last level: how many, the last of them */
    /* bounded minima */
    int bounded, threshold;
    keyed *ks;               /* 2 nv: v's configs (threshold) or the classes (bounded) by prev */
    double *rmbuf, **rowmin; /* rowmin[q][row]: least entry of each row of last-level inflow q */
    int *cbuf, ncls;         /* last-level column classes: members (nv), starts (ncls + 1), ties */
    int *rowsort;            /* threshold: rows x nv, each row's configs by value */
    char *rowdone;           /* threshold: which rows are sorted */
    keyed *rks;              /* 2 nv: a row being sorted */
    int *tie;                /* nv: tied classes (bounded scan) */
    vec_scan_fn vscan;       /* the vector scan (dp_min_vec) when not NULL */
    vec_scan_fn vlater;      /* the vector scan, if a sample of the other scans is slower */
    long long steps;         /* configs (threshold) or classes (bounded) the scans met */
    double *Pblk;            /* VEC_BLOCK x nv: the prefixes of a block (vector scan) */
    /* the column-class scan (dp_class_scan_setup): the vector scan over the
     * ncc classes of v's configs with equal last-level columns */
    int cscan, ncc;
    int *cc;                 /* members class by class (nv), starts (ncc + 1), each config's
                              * class (nv), the classes whose lowest config is below x (nv) */
    double **ct;             /* nfl: a last-level inflow's rows over the classes (rows x ncc) */
    double *Cm, *Ce;         /* VEC_BLOCK x ncc: per prefix of a block, each class's least
                              * prev, and the least prev of its members below Ca's */
    int *Ca;                 /* VEC_BLOCK x ncc: the first member reaching the least prev */
    /* the entry-wise scan (dp_entwise_setup): ENT_W entries at once */
    int (*ekern)(const double *, const double *const *, int, int, int64_t, double *, int *);
    int64_t eld;             /* entries per row of et (the last var's reps, padded) */
    double **et;             /* nfl: a last-level inflow as nv rows over the last var's reps */
} elim;

static inline int elim_oom(const elim *el)
{
    return sb_fail(el->E->err, SB_EXIT_INTERNAL, "out of memory at vertex '%s'",
                   el->E->pb->m->ops[el->v].name);
}


/* dp_classes.c */
int dp_compact_eliminated(inflow *in, int nin, double *base, int nv, int *xmap, int *nx);
int dp_config_classes(engine *E, const inflow *in, int nin, int q, int var, int nvv, int *rep);
int dp_last_level_classes(const inflow *in, int nin, int level, int nv, int *cmem,
                          int *cstart, int *ncls);
void dp_sort_keyed(keyed *a, keyed *tmp, int n);

/* dp_factors.c */
int dp_add_factor(engine *E, factor *src);
int dp_charge(engine *E, double bytes, int v, int depset);
int dp_build_pending(engine *E, factor *f, int rows_op);
int dp_init_factors(engine *E);
/* Frees the edges' layouts kept by the DP (engine_close). */
void dp_edge_layouts_free(engine *E);
int dp_pair_table(engine *E, factor *f, int rows_op, double *t);

/* dp_fill.c */
int dp_scan_rows(elim *el);

/* dp_min.c */
void dp_fill_prefix(elim *el, int lvl);
void dp_min_bounded(elim *el, const double *prev, int64_t at);
void dp_min_one_table(elim *el, const double *prev, int64_t at);
void dp_min_plain(elim *el, const double *prev, int64_t at);
void dp_min_threshold(elim *el, const double *prev, int64_t at);
void dp_order_by_prev(elim *el, const double *prev);
int64_t dp_row_offset(const inflow *fl, const int *idx);

/* dp_scan.c */
int dp_class_buffers(elim *el);
int dp_class_scan_setup(elim *el, int64_t nprefix);
void dp_class_stats(elim *el, int b);
int dp_entwise_setup(elim *el, int64_t nprefix);
void dp_min_class(elim *el, int b, const int *idx, int64_t at);
void dp_min_entwise(elim *el, int b, int64_t row, int jlo, int jhi);
void dp_min_vec(elim *el, const double *prev, const int *idx, int64_t at);
vec_scan_fn dp_vec_scan_pick(int forced);

#endif
