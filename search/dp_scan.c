/* dp_scan.c: the DP's vector scans (dp_engine.h): the minimum of each
 * entry over the eliminated op's configs four or eight at a time, over
 * classes of equal columns, or entry-wise; each with a generic kernel and
 * AVX2/AVX-512 ones chosen at run time. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "dp_engine.h"

/* ---- the vector scan -------------------------------------------------------
 *
 * The plain scan's sums, four configs at a time: lane l keeps the least
 * sum over the configs x = l mod 4 met so far and the first x reaching it
 * (a later x replaces it only when strictly less), so the lowest x of the
 * least sum is the lowest among the lanes holding it. Each sum is added in
 * the plain scan's order (prev, then the last-level rows in inflow order),
 * so every value and argmin is dp_min_plain's. With few configs of v this
 * beats the bounded and threshold scans (their sorting and random access
 * cost more than reading every config): the transformer's decoder chain. */
typedef double vd4 __attribute__((vector_size(32)));
typedef long long vl4 __attribute__((vector_size(32)));

#define VEC_SCAN_BODY                                                                      \
    {                                                                                      \
        vd4 m = {INFINITY, INFINITY, INFINITY, INFINITY};                                  \
        vl4 mi = {0, 0, 0, 0}, xi = {0, 1, 2, 3}, four = {4, 4, 4, 4};                     \
        int x = 0;                                                                         \
        for (; x + 4 <= nv; x += 4, xi += four) {                                          \
            vd4 sv;                                                                        \
            memcpy(&sv, prev + x, sizeof sv);                                              \
            for (int q = 0; q < nq; q++) {                                                 \
                vd4 f;                                                                     \
                memcpy(&f, fts[q] + x, sizeof f);                                          \
                sv += f;                                                                   \
            }                                                                              \
            vl4 lt = sv < m;                                                               \
            m = (vd4)(((vl4)sv & lt) | ((vl4)m & ~lt));                                    \
            mi = (xi & lt) | (mi & ~lt);                                                   \
        }                                                                                  \
        double bv = INFINITY;                                                              \
        int best = nv;                                                                     \
        for (int l = 0; l < 4; l++)                                                        \
            if (m[l] < bv || (m[l] == bv && (int)mi[l] < best)) {                          \
                bv = m[l];                                                                 \
                best = (int)mi[l];                                                         \
            }                                                                              \
        for (; x < nv; x++) {                                                              \
            double sx = prev[x];                                                           \
            for (int q = 0; q < nq; q++)                                                   \
                sx += fts[q][x];                                                           \
            if (sx < bv) {                                                                 \
                bv = sx;                                                                   \
                best = x;                                                                  \
            }                                                                              \
        }                                                                                  \
        if (best == nv) { /* every sum infinite (or NaN): the plain scan's x = 0 */        \
            best = 0;                                                                      \
            bv = prev[0];                                                                  \
            for (int q = 0; q < nq; q++)                                                   \
                bv += fts[q][0];                                                           \
        }                                                                                  \
        *bvp = bv;                                                                         \
        return best;                                                                       \
    }

static int vec_scan_generic(const double *prev, const double *const *fts, int nq, int nv,
                            double *bvp)
    VEC_SCAN_BODY

#if defined(__x86_64__) && defined(__GNUC__)
/* With the x86 vector units: two passes, the least sum (vminpd), then the
 * first config whose sum (added again, in the same order: the same bits)
 * equals it. W doubles a vector; LOAD, ADD, MIN, EQ (a lane mask as bits)
 * the unit's operations. */
#define VEC_TWO_PASS(W, VT, LOAD, ADD, MIN, EQ, SET1, HMIN)                                  \
    {                                                                                      \
        /* two running minima (even and odd vectors): the least of a set  \
         * does not depend on the order it is taken in, and the two chains \
         * of vminpd overlap */                                            \
        VT m = SET1(INFINITY), m1 = SET1(INFINITY);                                        \
        int x = 0;                                                                         \
        if (nq == 1) {                                                                     \
            const double *f0 = fts[0];                                                     \
            for (; x + 2 * W <= nv; x += 2 * W) {                                          \
                m = MIN(m, ADD(LOAD(prev + x), LOAD(f0 + x)));                             \
                m1 = MIN(m1, ADD(LOAD(prev + x + W), LOAD(f0 + x + W)));                   \
            }                                                                              \
            for (; x + W <= nv; x += W)                                                    \
                m = MIN(m, ADD(LOAD(prev + x), LOAD(f0 + x)));                             \
        } else {                                                                           \
            for (; x + W <= nv; x += W) {                                                  \
                VT sv = LOAD(prev + x);                                                    \
                for (int q = 0; q < nq; q++)                                               \
                    sv = ADD(sv, LOAD(fts[q] + x));                                        \
                m = MIN(m, sv);                                                            \
            }                                                                              \
        }                                                                                  \
        double bv = HMIN(MIN(m, m1));                                                      \
        for (int y = x; y < nv; y++) {                                                     \
            double sx = prev[y];                                                           \
            for (int q = 0; q < nq; q++)                                                   \
                sx += fts[q][y];                                                           \
            bv = sx < bv ? sx : bv;                                                        \
        }                                                                                  \
        VT b = SET1(bv);                                                                   \
        for (x = 0; x + W <= nv; x += W) {                                                 \
            VT sv = LOAD(prev + x);                                                        \
            for (int q = 0; q < nq; q++)                                                   \
                sv = ADD(sv, LOAD(fts[q] + x));                                            \
            unsigned eq = EQ(sv, b);                                                       \
            if (eq) {                                                                      \
                *bvp = bv;                                                                 \
                return x + __builtin_ctz(eq);                                              \
            }                                                                              \
        }                                                                                  \
        for (; x < nv; x++) {                                                              \
            double sx = prev[x];                                                           \
            for (int q = 0; q < nq; q++)                                                   \
                sx += fts[q][x];                                                           \
            if (sx == bv) {                                                                \
                *bvp = bv;                                                                 \
                return x;                                                                  \
            }                                                                              \
        }                                                                                  \
        /* no sum equals the least (a NaN): the plain scan's rule */                       \
        return vec_scan_generic(prev, fts, nq, nv, bvp);                                   \
    }

__attribute__((target("avx2"))) static double hmin_avx2(__m256d m)
{
    __m128d lo = _mm256_castpd256_pd128(m), hi = _mm256_extractf128_pd(m, 1);
    lo = _mm_min_pd(lo, hi);
    return _mm_cvtsd_f64(_mm_min_sd(lo, _mm_unpackhi_pd(lo, lo)));
}
#define EQ_AVX2(a, b) ((unsigned)_mm256_movemask_pd(_mm256_cmp_pd(a, b, _CMP_EQ_OQ)))

__attribute__((target("avx2"))) static int vec_scan_avx2(const double *prev,
                                                          const double *const *fts, int nq,
                                                          int nv, double *bvp)
    VEC_TWO_PASS(4, __m256d, _mm256_loadu_pd, _mm256_add_pd, _mm256_min_pd, EQ_AVX2,
                 _mm256_set1_pd, hmin_avx2)

/* One pass with AVX2: lane l keeps the least sum over the configs
 * x = l mod 4 met so far and the first x reaching it (replaced only when
 * strictly less: vcmppd LT, vblendvpd; the config numbers as doubles,
 * exact below 2^53), then the lowest x among the lanes holding the least,
 * the tail, and the plain scan's x = 0 when no sum is finite: the generic
 * kernel's rule, one read of the rows instead of the two passes' up to
 * two. Each sum is added in the plain scan's order. */
__attribute__((target("avx2"))) static int vec_scan_avx2_1p(const double *prev,
                                                             const double *const *fts, int nq,
                                                             int nv, double *bvp)
{
    __m256d m = _mm256_set1_pd(INFINITY), mi = _mm256_setzero_pd();
    __m256d m1 = m, mi1 = mi; /* odd blocks of 4 (one table): two chains overlap */
    __m256d xi = _mm256_setr_pd(0, 1, 2, 3), four = _mm256_set1_pd(4);
    int x = 0;
    if (nq == 1) {
        const double *f0 = fts[0];
        __m256d xi1 = _mm256_add_pd(xi, four), eight = _mm256_set1_pd(8);
        for (; x + 8 <= nv; x += 8) {
            __m256d sv = _mm256_add_pd(_mm256_loadu_pd(prev + x), _mm256_loadu_pd(f0 + x));
            __m256d sv1 =
                _mm256_add_pd(_mm256_loadu_pd(prev + x + 4), _mm256_loadu_pd(f0 + x + 4));
            __m256d lt = _mm256_cmp_pd(sv, m, _CMP_LT_OQ);
            __m256d lt1 = _mm256_cmp_pd(sv1, m1, _CMP_LT_OQ);
            m = _mm256_blendv_pd(m, sv, lt);
            mi = _mm256_blendv_pd(mi, xi, lt);
            m1 = _mm256_blendv_pd(m1, sv1, lt1);
            mi1 = _mm256_blendv_pd(mi1, xi1, lt1);
            xi = _mm256_add_pd(xi, eight);
            xi1 = _mm256_add_pd(xi1, eight);
        }
        for (; x + 4 <= nv; x += 4, xi = _mm256_add_pd(xi, four)) {
            __m256d sv = _mm256_add_pd(_mm256_loadu_pd(prev + x), _mm256_loadu_pd(f0 + x));
            __m256d lt = _mm256_cmp_pd(sv, m, _CMP_LT_OQ);
            m = _mm256_blendv_pd(m, sv, lt);
            mi = _mm256_blendv_pd(mi, xi, lt);
        }
    } else {
        for (; x + 4 <= nv; x += 4, xi = _mm256_add_pd(xi, four)) {
            __m256d sv = _mm256_loadu_pd(prev + x);
            for (int q = 0; q < nq; q++)
                sv = _mm256_add_pd(sv, _mm256_loadu_pd(fts[q] + x));
            __m256d lt = _mm256_cmp_pd(sv, m, _CMP_LT_OQ);
            m = _mm256_blendv_pd(m, sv, lt);
            mi = _mm256_blendv_pd(mi, xi, lt);
        }
    }
    double mv[8], iv[8], bv = INFINITY;
    _mm256_storeu_pd(mv, m);
    _mm256_storeu_pd(iv, mi);
    _mm256_storeu_pd(mv + 4, m1);
    _mm256_storeu_pd(iv + 4, mi1);
    int best = nv;
    for (int l = 0; l < 8; l++) /* the least, the lowest config among the lanes holding it */
        if (mv[l] < bv || (mv[l] == bv && (int)iv[l] < best)) {
            bv = mv[l];
            best = (int)iv[l];
        }
    for (; x < nv; x++) {
        double sx = prev[x];
        for (int q = 0; q < nq; q++)
            sx += fts[q][x];
        if (sx < bv) {
            bv = sx;
            best = x;
        }
    }
    if (best == nv) { /* every sum infinite (or NaN): the plain scan's x = 0 */
        best = 0;
        bv = prev[0];
        for (int q = 0; q < nq; q++)
            bv += fts[q][0];
    }
    *bvp = bv;
    return best;
}

#define EQ_AVX512(a, b) ((unsigned)_mm512_cmp_pd_mask(a, b, _CMP_EQ_OQ))
__attribute__((target("avx512f"))) static int vec_scan_avx512(const double *prev,
                                                              const double *const *fts,
                                                              int nq, int nv, double *bvp)
    VEC_TWO_PASS(8, __m512d, _mm512_loadu_pd, _mm512_add_pd, _mm512_min_pd, EQ_AVX512,
                 _mm512_set1_pd, _mm512_reduce_min_pd)
#endif

/* The vector scan for this CPU: AVX-512, AVX2, or (forced: 1; else NULL,
 * where the bounded and threshold scans are faster) the generic one.
 * SB_DP_ISA=avx2 (one pass), avx2-2pass (the two passes) or generic picks
 * a narrower one (tests, bench). */
vec_scan_fn dp_vec_scan_pick(int forced)
{
    (void)forced;
#if defined(__x86_64__) && defined(__GNUC__)
    const char *isa = getenv("SB_DP_ISA");
    if (__builtin_cpu_supports("avx512f") &&
        !(isa && (!strncmp(isa, "avx2", 4) || !strcmp(isa, "generic"))))
        return vec_scan_avx512;
    if (__builtin_cpu_supports("avx2") && !(isa && !strcmp(isa, "generic")))
        return isa && !strcmp(isa, "avx2-2pass") ? vec_scan_avx2 : vec_scan_avx2_1p;
#endif
    return forced ? vec_scan_generic : NULL;
}

int sb_dp_vec_scan(const double *prev, const double *const *fts, int nq, int nv, double *bv)
{
    return dp_vec_scan_pick(1)(prev, fts, nq, nv, bv);
}

/* The vector scan of one entry (the assignment idx): g and arg at `at`. */
void dp_min_vec(elim *el, const double *prev, const int *idx, int64_t at)
{
    const double *fts[MAX_SCOPE + 1];
    int nq = 0;
    for (int q = 0; q < el->nfl; q++)
        if (el->in[q].level == el->k - 1)
            fts[nq++] = el->in[q].t + dp_row_offset(&el->in[q], idx);
    double bv;
    int best = el->vscan(prev, fts, nq, el->nv, &bv);
    el->g[at] = bv;
    el->arg[at] = (uint16_t)el->xmap[best];
}

/* ---- the column-class scan ------------------------------------------------
 *
 * Configs x of v whose columns are bitwise equal in every last-level table
 * (dp_last_level_classes) differ, within one entry, only in prev(x). A sum
 * prev(x) + t_1 + ... + t_n, rounded at each step, is monotone in prev(x),
 * so a class's least sum is the sum at its least prev (m_c, first reached
 * at config a_c): the vector scan runs over the classes' (m_c, columns)
 * instead of every config. The plain scan's argmin is the lowest config
 * whose sum is the least, bv: in a class reaching bv it is a_c unless a
 * member below a_c also reaches bv, which needs the least prev of those
 * members (e_c) to reach it; and only classes whose lowest config is below
 * the best config so far can hold a lower one (classes are numbered by
 * their lowest config). */

/* The column-class scan for an elimination of at least this many sums,
 * with at most nv / CLASS_GAIN classes. */
#define CLASS_MIN_SUMS 1e5
#define CLASS_GAIN 2

/* cc's parts (dp_class_scan_setup). */
static const int *cc_members(const elim *el) { return el->cc; }
static const int *cc_starts(const elim *el) { return el->cc + el->nv; }
static const int *cc_class(const elim *el) { return el->cc + 2 * el->nv + 1; }
static const int *cc_below(const elim *el) { return el->cc + 3 * el->nv + 1; }

/* Each config's class and, per config x, the classes whose lowest config
 * is below x (cc's last two parts, from the lists). */
static void class_index(elim *el)
{
    int nv = el->nv, ncc = el->ncc;
    const int *cmem = cc_members(el), *cst = cc_starts(el);
    int *cid = el->cc + 2 * nv + 1, *below = el->cc + 3 * nv + 1;
    for (int c = 0; c < ncc; c++)
        for (int i = cst[c]; i < cst[c + 1]; i++)
            cid[cmem[i]] = c;
    for (int x = 0, nb = 0; x < nv; x++) {
        while (nb < ncc && cmem[cst[nb]] < x)
            nb++;
        below[x] = nb;
    }
}

/* ct[q]: last-level inflow q's rows over the classes (rows x ncc), each
 * class's column taken at its lowest config (all members' are equal). */
static int class_tables(elim *el)
{
    int nv = el->nv, ncc = el->ncc;
    const int *cmem = cc_members(el), *cst = cc_starts(el);
    el->ct = calloc((size_t)el->nfl, sizeof *el->ct);
    if (!el->ct)
        return -1;
    for (int q = 0; q < el->nfl; q++) {
        const inflow *fl = &el->in[q];
        if (fl->level != el->k - 1)
            continue;
        el->ct[q] = malloc((size_t)fl->rows * (size_t)ncc * sizeof **el->ct);
        if (!el->ct[q])
            return -1;
        for (int64_t r = 0; r < fl->rows; r++)
            for (int c = 0; c < ncc; c++)
                el->ct[q][r * ncc + c] = fl->t[r * nv + cmem[cst[c]]];
    }
    return 0;
}

/* The block buffers of the class scan (one set per thread). */
int dp_class_buffers(elim *el)
{
    size_t n = (size_t)VEC_BLOCK * (size_t)el->ncc;
    el->Cm = malloc(n * sizeof *el->Cm);
    el->Ce = malloc(n * sizeof *el->Ce);
    el->Ca = malloc(n * sizeof *el->Ca);
    return el->Cm && el->Ce && el->Ca ? 0 : -1;
}

/* Takes the column-class scan for a vector-scanned elimination of enough
 * sums whose last-level columns fall into few classes (sb_search_opts
 * colclass 0; 2: any with fewer classes than configs, 1: none). */
int dp_class_scan_setup(elim *el, int64_t nprefix)
{
    int nv = el->nv, k = el->k;
    const engine *E = el->E;
    double sums = (double)nprefix * el->nrep[k - 1] * nv;
    int always = E->colclass == 2;
    if (!el->vscan || E->plain || E->colclass == 1 || (!always && sums < CLASS_MIN_SUMS))
        return 0;
    el->cc = malloc((4 * (size_t)nv + 1) * sizeof *el->cc);
    if (!el->cc
        || dp_last_level_classes(el->in, el->nfl, k - 1, nv, el->cc, el->cc + nv, &el->ncc))
        return elim_oom(el);
    if (always ? el->ncc == nv : (int64_t)el->ncc * CLASS_GAIN > nv)
        return 0;
    class_index(el);
    if (class_tables(el) || dp_class_buffers(el))
        return elim_oom(el);
    el->cscan = 1;
    el->E->rows_colclass += el->nrep[k - 1];
    return 0;
}

/* The b-th prefix of a block (prev: its sums through level k - 2): per
 * class c, m_c = its members' least prev, a_c the first member reaching it
 * (the lowest member when all are infinite), e_c the least prev of the
 * members below a_c (infinite when none). */
void dp_class_stats(elim *el, int b)
{
    int nv = el->nv, ncc = el->ncc;
    const double *prev = el->Pblk + (size_t)b * nv;
    double *m = el->Cm + (size_t)b * ncc, *e = el->Ce + (size_t)b * ncc;
    int *a = el->Ca + (size_t)b * ncc;
    const int *cid = cc_class(el), *cmem = cc_members(el), *cst = cc_starts(el);
    for (int c = 0; c < ncc; c++) {
        m[c] = INFINITY;
        e[c] = INFINITY;
        a[c] = cmem[cst[c]];
    }
    for (int x = 0; x < nv; x++) {
        int c = cid[x];
        if (prev[x] < m[c]) {
            e[c] = m[c]; /* the least over the members before x */
            m[c] = prev[x];
            a[c] = x;
        }
    }
}

/* The lowest member of class c whose sum is bv (it reaches bv at a_c or
 * not at all; fts: the rows over the classes). */
static int class_lowest(const elim *el, int b, const double *const *fts, int nq, int c,
                        double bv)
{
    int nv = el->nv, ncc = el->ncc;
    size_t o = (size_t)b * ncc + (size_t)c;
    int a = el->Ca[o];
    double se = el->Ce[o];
    for (int q = 0; q < nq; q++)
        se += fts[q][c];
    if (se > bv) /* no member below a_c reaches bv (monotone sums) */
        return a;
    const double *prev = el->Pblk + (size_t)b * nv;
    const int *cmem = cc_members(el), *cst = cc_starts(el);
    for (int i = cst[c]; i < cst[c + 1] && cmem[i] < a; i++) {
        double sx = prev[cmem[i]];
        for (int q = 0; q < nq; q++)
            sx += fts[q][c];
        if (sx == bv)
            return cmem[i];
    }
    return a;
}

/* The lowest config whose sum is bv, the least sum, of the b-th prefix's
 * entry whose rows over the classes are fts, c0 the first class reaching
 * bv: from c0 and the tied classes whose lowest config is below the best
 * so far. */
static int class_resolve(const elim *el, int b, const double *const *fts, int nq, int c0,
                         double bv)
{
    const double *m = el->Cm + (size_t)b * el->ncc;
    const int *below = cc_below(el);
    int best = class_lowest(el, b, fts, nq, c0, bv);
    for (int c = c0 + 1; c < below[best]; c++) {
        double sc = m[c];
        for (int q = 0; q < nq; q++)
            sc += fts[q][c];
        if (sc == bv) {
            int x = class_lowest(el, b, fts, nq, c, bv);
            best = x < best ? x : best;
        }
    }
    return best;
}

/* The class scan of one entry (the assignment idx, the b-th prefix of its
 * block): the least sum over the classes (the vector scan over m_c and the
 * rows over the classes: the first class reaching it), then the lowest
 * config reaching it, from that class and the tied classes whose lowest
 * config is below the best so far. */
void dp_min_class(elim *el, int b, const int *idx, int64_t at)
{
    const double *fts[MAX_SCOPE + 1];
    int nq = 0, ncc = el->ncc;
    for (int q = 0; q < el->nfl; q++)
        if (el->in[q].level == el->k - 1)
            fts[nq++] = el->ct[q] + dp_row_offset(&el->in[q], idx) / el->nv * ncc;
    double bv;
    int c0 = el->vscan(el->Cm + (size_t)b * ncc, fts, nq, ncc, &bv);
    el->g[at] = bv;
    el->arg[at] = (uint16_t)el->xmap[class_resolve(el, b, fts, nq, c0, bv)];
}

/* ---- the entry-wise scan ----------------------------------------------------
 *
 * When every last-level table is over (last var, v) alone, the entries of
 * one prefix differ only in the last var's row. The entry-wise scan takes
 * ENT_W of them at once, one vector lane an entry: for x = 0, 1, ... it
 * adds prev[x] (broadcast) and each table's entries at x (the tables
 * stored as nv rows over the last var, et) in the plain scan's order, and
 * a lane keeps its sum and x when strictly less than its least so far.
 * So each lane ends with its entry's least sum and the first (lowest) x
 * reaching it: the plain scan's, bit for bit (no sum finite: x = 0, as
 * the plain scan). No horizontal minimum, no second pass and no tail per
 * entry: the decoder chain's 161 to 261 configs paid for those as much
 * as for the sums. */

#define ENT_MIN_SUMS 1e5
#define ENT_MAX_TABLE (1 << 24) /* et's entries at most (per table) */

typedef double vd8 __attribute__((vector_size(64)));
typedef long long vl8 __attribute__((vector_size(64)));

/* ENT_W entries: lane l of entry column l of the et rows (tt[q] at the
 * block's first entry, ld entries a row): its least sum into gm[l], the
 * first x reaching it into gi[l]. */
/* One vector of lanes (entries OFF .. OFF + 7 of the block) at config x. */
#define ENT_LANES(M, MI, OFF)                                                              \
    {                                                                                      \
        vd8 sv;                                                                            \
        memcpy(&sv, tt[0] + xo + (OFF), sizeof sv);                                        \
        sv = px + sv;                                                                      \
        for (int q = 1; q < nq; q++) {                                                     \
            vd8 t;                                                                         \
            memcpy(&t, tt[q] + xo + (OFF), sizeof t);                                      \
            sv += t;                                                                       \
        }                                                                                  \
        vl8 lt = sv < M;                                                                   \
        M = (vd8)(((vl8)sv & lt) | ((vl8)M & ~lt));                                        \
        MI = (xv & lt) | (MI & ~lt);                                                       \
    }

static inline __attribute__((always_inline)) int
ent_body(const double *prev, const double *const *tt, int nq, int nv, int64_t ld, double *gm,
         int *gi)
{
    const vd8 inf = {INFINITY, INFINITY, INFINITY, INFINITY,
                     INFINITY, INFINITY, INFINITY, INFINITY};
    const vl8 zero = {0, 0, 0, 0, 0, 0, 0, 0};
    vd8 m0 = inf, m1 = inf, m2 = inf, m3 = inf; /* four chains in registers */
    vl8 i0 = zero, i1 = zero, i2 = zero, i3 = zero;
    for (int x = 0; x < nv; x++) {
        double p = prev[x];
        vd8 px = {p, p, p, p, p, p, p, p};
        vl8 xv = zero + x;
        int64_t xo = x * ld;
        ENT_LANES(m0, i0, 0)
        ENT_LANES(m1, i1, 8)
        ENT_LANES(m2, i2, 16)
        ENT_LANES(m3, i3, 24)
    }
    for (int j = 0; j < 8; j++) {
        gm[j] = m0[j], gm[8 + j] = m1[j], gm[16 + j] = m2[j], gm[24 + j] = m3[j];
        gi[j] = (int)i0[j], gi[8 + j] = (int)i1[j], gi[16 + j] = (int)i2[j];
        gi[24 + j] = (int)i3[j];
    }
    return 0;
}

static int ent_generic(const double *prev, const double *const *tt, int nq, int nv, int64_t ld,
                       double *gm, int *gi)
{
    return ent_body(prev, tt, nq, nv, ld, gm, gi);
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"))) static int ent_avx2(const double *prev,
                                                     const double *const *tt, int nq, int nv,
                                                     int64_t ld, double *gm, int *gi)
{
    return ent_body(prev, tt, nq, nv, ld, gm, gi);
}

__attribute__((target("avx512f"))) static int ent_avx512(const double *prev,
                                                          const double *const *tt, int nq,
                                                          int nv, int64_t ld, double *gm,
                                                          int *gi)
{
    return ent_body(prev, tt, nq, nv, ld, gm, gi);
}
#endif

/* The entry-wise kernel of the vector scan's unit (vscan). */
static void ent_pick(elim *el)
{
    el->ekern = ent_generic;
#if defined(__x86_64__) && defined(__GNUC__)
    if (el->vscan == vec_scan_avx512)
        el->ekern = ent_avx512;
    else if (el->vscan == vec_scan_avx2 || el->vscan == vec_scan_avx2_1p)
        el->ekern = ent_avx2;
#endif
}

/* et[q]: last-level inflow q as nv rows (ncc over classes: its ct) over
 * the last var's reps (eld a row, the padding 0). */
static int ent_tables(elim *el)
{
    int nv = el->nv, k = el->k, nlast = el->nrep[k - 1];
    const int *reps = el->reps[k - 1];
    el->et = calloc((size_t)el->nfl, sizeof *el->et);
    if (!el->et)
        return -1;
    int w = el->cscan ? el->ncc : nv; /* columns: configs, or classes (ct) */
    for (int q = 0; q < el->nfl; q++) {
        const inflow *fl = &el->in[q];
        if (fl->level != k - 1)
            continue;
        /* ENT_W more: a block may start at any entry (threads' chunks).
         * From the DP's buffer pool (a table of 10-20 MB per elimination,
         * fresh pages from calloc each time, was a twentieth of the CPU
         * time of gpt3-175b at p = 16384 in page faults); every entry is
         * written below, the padding with 0 */
        size_t n = (size_t)w * (size_t)el->eld + ENT_W;
        double *et = el->et[q] = dp_buf_alloc(n * sizeof **el->et);
        if (!et)
            return -1;
        const double *src = el->cscan ? el->ct[q] : fl->t;
        for (int jr = 0; jr < nlast; jr++) {
            int i = reps[jr];
            const double *row = src + (int64_t)(fl->cm[0] ? fl->cm[0][i] : i) * w;
            for (int x = 0; x < w; x++)
                et[x * el->eld + jr] = row[x];
        }
        for (int x = 0; nlast < el->eld && x < w; x++)
            memset(et + (size_t)x * el->eld + nlast, 0, (size_t)(el->eld - nlast) * sizeof *et);
        memset(et + (size_t)w * el->eld, 0, ENT_W * sizeof *et);
    }
    return 0;
}

/* Takes the entry-wise scan for a vector-scanned elimination (over
 * configs or column classes) of enough sums whose last-level tables are
 * all over (last var, v) (sb_search_opts entwise 0; 2: any such, 1:
 * none). */
int dp_entwise_setup(elim *el, int64_t nprefix)
{
    int nv = el->nv, k = el->k, nlast = el->nrep[k - 1];
    const engine *E = el->E;
    double sums = (double)nprefix * nlast * nv;
    if (!el->vscan || E->plain || E->entwise == 1
        || (E->entwise != 2 && sums < ENT_MIN_SUMS))
        return 0;
    for (int q = 0; q < el->nfl; q++)
        if (el->in[q].level == k - 1 && el->in[q].nv != 1)
            return 0;
    el->eld = (nlast + ENT_W - 1) / ENT_W * ENT_W;
    if ((double)(el->cscan ? el->ncc : nv) * el->eld > ENT_MAX_TABLE)
        return 0;
    if (ent_tables(el))
        return elim_oom(el);
    ent_pick(el);
    el->E->rows_entwise += nlast;
    return 0;
}

/* The entries jlo .. jhi - 1 (ranks of the last var's reps) of the b-th
 * prefix of a block, at row of g: ENT_W at a time. Over configs each
 * lane's first x is the argmin; over classes it is the first class
 * reaching the least, and class_resolve finds the lowest config (the
 * class scan's rule, dp_min_class). */
void dp_min_entwise(elim *el, int b, int64_t row, int jlo, int jhi)
{
    const double *tt[MAX_SCOPE + 1], *prev = el->cscan ? el->Cm + (size_t)b * el->ncc
                                                       : el->Pblk + (size_t)b * el->nv;
    double gm[ENT_W];
    int gi[ENT_W], nq = 0, w = el->cscan ? el->ncc : el->nv;
    for (int jb = jlo; jb < jhi; jb += ENT_W) {
        nq = 0;
        for (int q = 0; q < el->nfl; q++)
            if (el->in[q].level == el->k - 1)
                tt[nq++] = el->et[q] + jb;
        el->ekern(prev, tt, nq, w, el->eld, gm, gi);
        int n = jhi - jb < ENT_W ? jhi - jb : ENT_W;
        for (int l = 0; l < n; l++) {
            int x = gi[l];
            if (el->cscan) {
                const double *fts[MAX_SCOPE + 1];
                int i = el->reps[el->k - 1][jb + l], nf = 0;
                for (int q = 0; q < el->nfl; q++) {
                    const inflow *fl = &el->in[q];
                    if (fl->level == el->k - 1)
                        fts[nf++] = el->ct[q] + (int64_t)(fl->cm[0] ? fl->cm[0][i] : i) * w;
                }
                x = class_resolve(el, b, fts, nf, x, gm[l]);
            }
            el->g[row + jb + l] = gm[l];
            el->arg[row + jb + l] = (uint16_t)el->xmap[x];
        }
    }
}

/* One entry by the column-class scan (tests): v's nv configs with sums
 * prev + fts[0] + ... + fts[nq - 1], as one-row last-level tables over
 * (u, v) for a one-config u; entwise: through the entry-wise kernel. The
 * least sum in *bv, the lowest config reaching it returned; -1 when out
 * of memory. */
int sb_dp_class_scan(const double *prev, const double *const *fts, int nq, int nv, int entwise,
                     double *bv)
{
    inflow in[MAX_SCOPE + 1] = {0};
    double g = 0;
    uint16_t arg = 0;
    int *xmap = malloc((size_t)nv * sizeof *xmap), rc = -1, idx[1] = {0}, rep0[1] = {0};
    elim el = {.nv = nv, .k = 1, .nfl = nq, .in = in, .xmap = xmap, .g = &g, .arg = &arg,
               .vscan = dp_vec_scan_pick(1), .cscan = 1, .eld = ENT_W};
    el.reps[0] = rep0;
    el.nrep[0] = 1;
    for (int q = 0; q < nq && q <= MAX_SCOPE; q++)
        in[q] = (inflow){.t = (double *)fts[q], .rows = 1, .level = 0, .nv = 1,
                         .stride = {nv}, .dim = {1}};
    el.cc = malloc((4 * (size_t)nv + 1) * sizeof *el.cc);
    el.Pblk = malloc((size_t)nv * sizeof *el.Pblk);
    if (nq <= MAX_SCOPE && xmap && el.cc && el.Pblk
        && !dp_last_level_classes(in, nq, 0, nv, el.cc, el.cc + nv, &el.ncc)
        && !class_tables(&el) && !dp_class_buffers(&el) && !(entwise && ent_tables(&el))) {
        for (int x = 0; x < nv; x++)
            xmap[x] = x;
        memcpy(el.Pblk, prev, (size_t)nv * sizeof *prev);
        class_index(&el);
        dp_class_stats(&el, 0);
        if (entwise) {
            ent_pick(&el);
            dp_min_entwise(&el, 0, 0, 0, 1);
        } else {
            dp_min_class(&el, 0, idx, 0);
        }
        *bv = g;
        rc = arg;
    }
    for (int q = 0; q < nq && q <= MAX_SCOPE; q++) {
        free(el.ct ? el.ct[q] : NULL);
        dp_buf_free(el.et ? el.et[q] : NULL);
    }
    free(el.ct);
    free(el.et);
    free(el.cc);
    free(el.Pblk);
    free(el.Cm);
    free(el.Ce);
    free(el.Ca);
    free(xmap);
    return rc;
}

