/* dp_classes.c: classes of equal slices of the DP's tables (equal rows of
 * the dependent set, equal columns of the eliminated op) and the stable
 * sort of (key, index) pairs the scans use (dp_engine.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dp_engine.h"

/* ---- classes of equal slices (equal rows, equal columns) ---------------------
 *
 * Configs are grouped by a hash of their slices in the inflow tables
 * (sorted by hash, then index), and every merge is then checked element by
 * element, so a hash collision only loses a merge. */
typedef struct {
    uint64_t h;
    int i;
} hashed;

#define HASH_SEED 1469598103934665603ULL
#define HASH_PRIME 1099511628211ULL

static int cmp_hashed(const void *x, const void *y)
{
    const hashed *a = x, *b = y;
    if (a->h != b->h)
        return a->h < b->h ? -1 : 1;
    return a->i - b->i;
}

/* hs[i] = (seed, i) for i < n. */
static void hashed_init(hashed *hs, int n)
{
    for (int i = 0; i < n; i++)
        hs[i] = (hashed){.h = HASH_SEED, .i = i};
}

/* hs (n, sorted by hash): rep[i] = the lowest config of i's run of equal
 * hashes. */
static void first_of_runs(const hashed *hs, int n, int *rep)
{
    for (int a = 0; a < n;) {
        int b = a;
        while (b < n && hs[b].h == hs[a].h)
            rep[hs[b++].i] = hs[a].i;
        a = b;
    }
}

/* Mixes each column x of table t (rows x nv) into hs[x].h (hs in config
 * order, not yet sorted). */
static void hash_columns(hashed *hs, const double *t, int64_t rows, int nv)
{
    for (int64_t r = 0; r < rows; r++, t += nv)
        for (int x = 0; x < nv; x++) {
            uint64_t bits;
            memcpy(&bits, t + x, sizeof bits);
            uint64_t h = (hs[x].h ^ bits) * HASH_PRIME;
            hs[x].h = h ^ (h >> 29);
        }
}

/* Undoes each merge x -> rep[x] whose columns differ somewhere in t
 * (rows x nv). */
static void unmerge_columns(int *rep, const double *t, int64_t rows, int nv)
{
    for (int64_t r = 0; r < rows; r++, t += nv)
        for (int x = 0; x < nv; x++)
            if (rep[x] != x && memcmp(t + x, t + rep[x], sizeof *t))
                rep[x] = x;
}

/* Blocks of one axis of an inflow table: outer x n x inner, with the axis
 * in the middle. */
static void axis_blocks(const engine *E, const inflow *fl, int j, int nvv, int64_t *outer,
                        int64_t *inner)
{
    (void)E;
    int64_t total = nvv;
    for (int a = 0; a < fl->nv; a++)
        total *= fl->dim[a];
    *inner = fl->stride[j];
    *outer = total / (fl->stride[j] * fl->dim[j]);
}

/* h with the n doubles at b mixed in: four interleaved chains (their
 * multiplies overlap; one chain was bound by its latency), then folded.
 * A function of h and the bits alone, so equal slices mix equally. */
static uint64_t hash_slice(uint64_t h, const double *b, int64_t n)
{
    uint64_t l[4] = {h, h ^ 0x9e3779b97f4a7c15ULL, h ^ 0xc2b2ae3d27d4eb4fULL,
                     h ^ 0x165667b19e3779f9ULL};
    int64_t e = 0;
    for (; e + 4 <= n; e += 4)
        for (int j = 0; j < 4; j++) {
            uint64_t bits;
            memcpy(&bits, b + e + j, sizeof bits);
            l[j] = (l[j] ^ bits) * HASH_PRIME;
            l[j] ^= l[j] >> 29;
        }
    for (; e < n; e++) {
        uint64_t bits;
        memcpy(&bits, b + e, sizeof bits);
        l[0] = (l[0] ^ bits) * HASH_PRIME;
        l[0] ^= l[0] >> 29;
    }
    for (int j = 1; j < 4; j++) {
        l[0] = (l[0] ^ l[j]) * HASH_PRIME;
        l[0] ^= l[0] >> 29;
    }
    return l[0];
}

/* Mixes the slices of fl's axis j (n configs; nvv: v's configs) into
 * hs[i].h (hs in config order). */
static int hash_slices(const engine *E, const inflow *fl, int j, int nvv, hashed *hs, int n)
{
    int64_t outer, inner;
    axis_blocks(E, fl, j, nvv, &outer, &inner);
    const int *cm = fl->cm[j];
    int64_t d = fl->dim[j];
    if (!cm) {
        for (int64_t o = 0; o < outer; o++)
            for (int i = 0; i < n; i++)
                hs[i].h = hash_slice(hs[i].h, fl->t + (o * d + i) * inner, inner);
        return 0;
    }
    /* along classes: each class's slice hashed once, then mixed into its
     * configs' hashes (equal slices, equal hashes still) */
    uint64_t *hc = malloc((size_t)d * sizeof *hc);
    if (!hc)
        return -1;
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t c = 0; c < d; c++)
            hc[c] = hash_slice(HASH_SEED, fl->t + (o * d + c) * inner, inner);
        for (int i = 0; i < n; i++) {
            uint64_t h = (hs[i].h ^ hc[cm[i]]) * HASH_PRIME;
            hs[i].h = h ^ (h >> 29);
        }
    }
    free(hc);
    return 0;
}

/* Undoes each merge i -> rep[i] whose slices of fl's axis j differ. */
static void unmerge_slices(const engine *E, const inflow *fl, int j, int nvv, int *rep, int n)
{
    int64_t outer, inner;
    axis_blocks(E, fl, j, nvv, &outer, &inner);
    const int *cm = fl->cm[j];
    int64_t d = fl->dim[j];
    for (int64_t o = 0; o < outer; o++)
        for (int i = 0; i < n; i++) {
            if (rep[i] == i || (cm && cm[i] == cm[rep[i]])) /* one slice: equal */
                continue;
            const double *a = fl->t + (o * d + (cm ? cm[i] : i)) * inner;
            const double *b = fl->t + (o * d + (cm ? cm[rep[i]] : rep[i])) * inner;
            if (memcmp(a, b, (size_t)inner * sizeof *a))
                rep[i] = i;
        }
}

/* Classes of the configs of S[q] (q-th var of the dependent set, var; nvv:
 * v's configs): configs whose slices are bitwise equal in every inflow
 * table give equal rows of the new table, so only the class's first config
 * (its representative) is computed and the others are copied. rep[i]: the
 * representative of config i (rep[i] <= i; rep[i] == i for
 * representatives). */
int dp_config_classes(engine *E, const inflow *in, int nin, int q, int var, int nvv, int *rep)
{
    int n = dom(E, var);
    hashed *hs = malloc((size_t)n * sizeof *hs);
    if (!hs)
        return -1;
    hashed_init(hs, n);
    for (int f = 0; f < nin; f++)
        for (int j = 0; j < in[f].nv; j++)
            if (in[f].pos[j] == q && hash_slices(E, &in[f], j, nvv, hs, n)) {
                free(hs);
                return -1;
            }
    qsort(hs, (size_t)n, sizeof *hs, cmp_hashed);
    first_of_runs(hs, n, rep);
    free(hs);
    for (int f = 0; f < nin; f++)
        for (int j = 0; j < in[f].nv; j++)
            if (in[f].pos[j] == q)
                unmerge_slices(E, &in[f], j, nvv, rep, n);
    return 0;
}

/* hs (nv, sorted by hash): rep[x] = the config of least base in x's run of
 * equal hashes, lowest index on ties. */
static void cheapest_of_runs(const hashed *hs, int nv, const double *base, int *rep)
{
    for (int a = 0; a < nv;) {
        int b = a, best = hs[a].i;
        while (b < nv && hs[b].h == hs[a].h) {
            int x = hs[b++].i;
            if (base[x] < base[best] || (base[x] == base[best] && x < best))
                best = x;
        }
        for (int c = a; c < b; c++)
            rep[hs[c].i] = best;
        a = b;
    }
}

/* Cuts the inflow tables (rows x nv, in place) and base down to the n
 * columns xmap[0..n). */
static void keep_columns(inflow *in, int nin, double *base, int nv, const int *xmap, int n)
{
    for (int f = 0; f < nin; f++) {
        for (int64_t r = 0; r < in[f].rows; r++) {
            const double *src = in[f].t + r * nv;
            double *dst = in[f].t + r * n;
            for (int i = 0; i < n; i++)
                dst[i] = src[xmap[i]]; /* dst <= src: in place */
        }
        for (int j = 0; j < in[f].nv; j++)
            in[f].stride[j] = in[f].stride[j] / nv * n;
    }
    for (int i = 0; i < n; i++)
        base[i] = base[xmap[i]];
}

/* Configs of the eliminated op v whose columns are bitwise equal in every
 * inflow table differ only in their own cost (base): of each such class
 * only the cheapest (lowest index among equals) can be a row's argmin, so
 * the tables are cut down to those columns. xmap[0..*nx): the kept configs
 * in increasing order. */
int dp_compact_eliminated(inflow *in, int nin, double *base, int nv, int *xmap, int *nx)
{
    hashed *hs = malloc((size_t)nv * sizeof *hs);
    int *rep = malloc((size_t)nv * sizeof *rep);
    if (!hs || !rep) {
        free(hs);
        free(rep);
        return -1;
    }
    hashed_init(hs, nv);
    for (int f = 0; f < nin; f++)
        hash_columns(hs, in[f].t, in[f].rows, nv);
    qsort(hs, (size_t)nv, sizeof *hs, cmp_hashed);
    cheapest_of_runs(hs, nv, base, rep);
    free(hs);
    for (int f = 0; f < nin; f++)
        unmerge_columns(rep, in[f].t, in[f].rows, nv);
    int n = 0;
    for (int x = 0; x < nv; x++)
        if (rep[x] == x)
            xmap[n++] = x;
    free(rep);
    *nx = n;
    if (n < nv)
        keep_columns(in, nin, base, nv, xmap, n);
    return 0;
}

/* The classes of rep (rep[x] <= x) as lists: cmem the configs class by
 * class, each class in increasing order; cstart[c] its first, cstart[n] =
 * nv. Classes are numbered by their lowest config (known before the
 * class's other members); a counting sort into cmem. rep is overwritten. */
static void class_lists(int *rep, int *cid, int nv, int *cmem, int *cstart, int *ncls)
{
    int n = 0;
    for (int x = 0; x < nv; x++)
        cid[x] = rep[x] == x ? n++ : cid[rep[x]];
    for (int c = 0; c <= n; c++)
        cstart[c] = 0;
    for (int x = 0; x < nv; x++)
        cstart[cid[x] + 1]++;
    for (int c = 0; c < n; c++)
        cstart[c + 1] += cstart[c];
    for (int c = 0; c < n; c++)
        rep[c] = cstart[c]; /* rep reused: next free slot of each class */
    for (int x = 0; x < nv; x++)
        cmem[rep[cid[x]]++] = x;
    *ncls = n;
}

/* Column classes of the last-level tables (the tables that vary with the
 * last var of the dependent set): configs x of v whose columns are bitwise
 * equal in all of them, as lists (class_lists: cmem, cstart, ncls). */
int dp_last_level_classes(const inflow *in, int nin, int level, int nv, int *cmem,
                              int *cstart, int *ncls)
{
    hashed *hs = malloc((size_t)nv * sizeof *hs);
    int *rep = malloc((size_t)nv * sizeof *rep), *cid = malloc((size_t)nv * sizeof *cid);
    if (!hs || !rep || !cid) {
        free(hs);
        free(rep);
        free(cid);
        return -1;
    }
    hashed_init(hs, nv);
    for (int f = 0; f < nin; f++)
        if (in[f].level == level)
            hash_columns(hs, in[f].t, in[f].rows, nv);
    qsort(hs, (size_t)nv, sizeof *hs, cmp_hashed);
    first_of_runs(hs, nv, rep);
    free(hs);
    for (int f = 0; f < nin; f++)
        if (in[f].level == level)
            unmerge_columns(rep, in[f].t, in[f].rows, nv);
    class_lists(rep, cid, nv, cmem, cstart, ncls);
    free(rep);
    free(cid);
    return 0;
}

/* Configs of the eliminated op by their accumulated cost, for the bounded
 * minimum below. */

/* Sorts a[0..n) by k, stably (tmp: n entries). */
#define KEYED_LESS(ctx, x, y) ((x).k < (y).k)
SB_DEFINE_MSORT(msort_keyed, keyed, KEYED_LESS)

/* k's bits as an unsigned key in the order of k (-0 as +0, which compare
 * equal): the sign bit flipped for k >= 0, every bit for k < 0. */
static inline uint64_t keyed_bits(double k)
{
    uint64_t u;
    k = k == 0.0 ? 0.0 : k;
    memcpy(&u, &k, sizeof u);
    return u >> 63 ? ~u : u | (UINT64_C(1) << 63);
}

/* The same order as msort_keyed: a least-significant-digit radix sort on
 * keyed_bits, a byte a pass, which keeps equal keys in their order (stable)
 * and orders unequal ones as < does, so the result is the one every stable
 * sort by k gives. Passes whose byte is the same in every key are skipped
 * (the exponent's, mostly). The threshold scan sorts a config list per
 * prefix: the merge sort's compares were a tenth of the CPU time of
 * gpt3-175b at p = 16384. Short lists, and any with a NaN (which < does not
 * order), go to the merge sort. */
void dp_sort_keyed(keyed *a, keyed *tmp, int n)
{
    if (n < 64) {
        msort_keyed(a, tmp, (size_t)n, NULL);
        return;
    }
    uint32_t cnt[8][256];
    memset(cnt, 0, sizeof cnt);
    for (int i = 0; i < n; i++) {
        if (a[i].k != a[i].k) {
            msort_keyed(a, tmp, (size_t)n, NULL);
            return;
        }
        uint64_t u = keyed_bits(a[i].k);
        for (int d = 0; d < 8; d++)
            cnt[d][(u >> (8 * d)) & 255]++;
    }
    keyed *src = a, *dst = tmp;
    for (int d = 0; d < 8; d++) {
        uint32_t *c = cnt[d];
        if (c[(keyed_bits(a[0].k) >> (8 * d)) & 255] == (uint32_t)n)
            continue; /* one byte value throughout: the order stays */
        uint32_t at = 0;
        for (int b = 0; b < 256; b++) {
            uint32_t m = c[b];
            c[b] = at;
            at += m;
        }
        for (int i = 0; i < n; i++)
            dst[c[(keyed_bits(src[i].k) >> (8 * d)) & 255]++] = src[i];
        keyed *sw = src;
        src = dst;
        dst = sw;
    }
    if (src != a)
        memcpy(a, src, (size_t)n * sizeof *a);
}

int sb_dp_sort_order(const double *k, int n, int *order)
{
    keyed *a = malloc(2 * (size_t)(n > 0 ? n : 1) * sizeof *a);
    if (!a)
        return -1;
    for (int i = 0; i < n; i++)
        a[i] = (keyed){.k = k[i], .x = i};
    dp_sort_keyed(a, a + n, n);
    for (int i = 0; i < n; i++)
        order[i] = a[i].x;
    free(a);
    return 0;
}

