/* tests/mpi/test_relayout.c: boxes, sb_box_copy, relayout and the group cache
 * (include/shardbench/relayout.h), run under mpirun on 1..8 ranks.
 *
 * Every rank runs every test. A check that fails only marks the rank's
 * failure flag (and says why on stderr, with the rank); at the end of a test
 * the flags are reduced with MPI_Allreduce and the test fails on every rank,
 * so no rank leaves a collective the others are still in. Only rank 0
 * writes cmocka's report; the other ranks write only what goes wrong.
 *
 * Relayout is held to a brute-force reference: every element of every dst
 * box is compared (exactly: values are small integers, so sums are exact)
 * with the value of its global index (COPY) or that value times the number
 * of src boxes holding it (ACCUM), over ~200 random cases per mode. The MPI
 * calls the library makes are counted through the profiling interface
 * (PMPI) to show that planning and cache hits do not communicate. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardbench/relayout.h"

#define N_CASES 200

static int g_me, g_n;
static uint64_t g_seed; /* SB_TEST_SEED: other random cases (same on all ranks) */

/* ---- agreement over ranks ------------------------------------------------ */

static int g_failed, g_reported;

static void failure(int line, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void failure(int line, const char *fmt, ...)
{
    g_failed = 1;
    if (g_reported++ >= 8)
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "[rank %d] test_relayout.c:%d: ", g_me, line);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

#define CHECK(c) \
    do { \
        if (!(c)) \
            failure(__LINE__, "check failed: %s", #c); \
    } while (0)
#define CHECKF(c, ...) \
    do { \
        if (!(c)) \
            failure(__LINE__, __VA_ARGS__); \
    } while (0)

static int any_rank(int flag)
{
    int any = 0;
    MPI_Allreduce(&flag, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return any;
}

/* Ends a test: fails it on every rank if it failed on any. */
static void agree(void)
{
    int any = any_rank(g_failed);
    g_failed = 0;
    g_reported = 0;
    if (any)
        fail_msg("a check failed on some rank (see stderr)");
}

/* ---- counting MPI calls (PMPI interposition) ----------------------------- */

static long n_alltoallv, n_comm_split, n_other;

int MPI_Alltoallv(const void *sb, const int sc[], const int sd[], MPI_Datatype st, void *rb,
                  const int rc[], const int rd[], MPI_Datatype rt, MPI_Comm comm)
{
    n_alltoallv++;
    return PMPI_Alltoallv(sb, sc, sd, st, rb, rc, rd, rt, comm);
}

int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *out)
{
    n_comm_split++;
    return PMPI_Comm_split(comm, color, key, out);
}

int MPI_Alltoall(const void *sb, int sc, MPI_Datatype st, void *rb, int rc, MPI_Datatype rt,
                 MPI_Comm comm)
{
    n_other++;
    return PMPI_Alltoall(sb, sc, st, rb, rc, rt, comm);
}

int MPI_Allgather(const void *sb, int sc, MPI_Datatype st, void *rb, int rc, MPI_Datatype rt,
                  MPI_Comm comm)
{
    n_other++;
    return PMPI_Allgather(sb, sc, st, rb, rc, rt, comm);
}

int MPI_Allreduce(const void *sb, void *rb, int c, MPI_Datatype t, MPI_Op op, MPI_Comm comm)
{
    n_other++;
    return PMPI_Allreduce(sb, rb, c, t, op, comm);
}

int MPI_Bcast(void *b, int c, MPI_Datatype t, int root, MPI_Comm comm)
{
    n_other++;
    return PMPI_Bcast(b, c, t, root, comm);
}

int MPI_Barrier(MPI_Comm comm)
{
    n_other++;
    return PMPI_Barrier(comm);
}

int MPI_Send(const void *b, int c, MPI_Datatype t, int dest, int tag, MPI_Comm comm)
{
    n_other++;
    return PMPI_Send(b, c, t, dest, tag, comm);
}

int MPI_Recv(void *b, int c, MPI_Datatype t, int src, int tag, MPI_Comm comm, MPI_Status *st)
{
    n_other++;
    return PMPI_Recv(b, c, t, src, tag, comm, st);
}

static long mpi_calls(void) { return n_alltoallv + n_comm_split + n_other; }

/* ---- sb_relayout_run_mem on host memory ------------------------------------
 * The path of backends with their own memory (the cuda backend), driven here
 * by host functions that behave like a device's: box copies through
 * sb_strided_box_copy's semantics (written out here, independently), packing
 * buffers from a counted allocator (every one must be released by the time
 * the plan is freed), and an
 * exchange made of one send and one receive per peer (as NCCL's grouped
 * send/recv), never MPI_Alltoallv. */
static long mem_live, mem_allocs;

static void *mem_alloc(size_t bytes)
{
    mem_live++;
    mem_allocs++;
    return malloc(bytes ? bytes : 1);
}

static void mem_release(void *p)
{
    if (p)
        mem_live--;
    free(p);
}

static void mem_zero(float *p, size_t n) { memset(p, 0, n * sizeof *p); }

static void mem_box_copy(float *dst, const int *dd, const int *dl, const float *src, const int *sd,
                         const int *sl, const int *size, int nd, int acc)
{
    int64_t n = 1, idx[SB_BOX_MAX_DIMS] = {0};
    for (int i = 0; i < nd; i++)
        n *= size[i];
    for (int64_t k = 0; k < n; k++) {
        int64_t so = 0, dof = 0;
        for (int i = 0; i < nd; i++) {
            so = so * sd[i] + sl[i] + idx[i];
            dof = dof * dd[i] + dl[i] + idx[i];
        }
        dst[dof] = acc ? dst[dof] + src[so] : src[so];
        for (int i = nd - 1; i >= 0; i--) {
            if (++idx[i] < size[i])
                break;
            idx[i] = 0;
        }
    }
}

static int mem_p2p(const float *sbuf, const int *sc, const int *sd, float *rbuf, const int *rc,
                   const int *rd, MPI_Comm comm)
{
    int n, me;
    MPI_Comm_size(comm, &n);
    MPI_Comm_rank(comm, &me);
    MPI_Request *req = malloc(sizeof *req * (size_t)(2 * n));
    int nreq = 0, rcode = MPI_SUCCESS;
    for (int p = 0; p < n; p++) {
        if (p == me && (sc[p] || rc[p]))
            rcode = MPI_ERR_OTHER; /* the own overlap must not go through the exchange */
        if (rc[p] > 0)
            MPI_Irecv(rbuf + rd[p], rc[p], MPI_FLOAT, p, 77, comm, &req[nreq++]);
        if (sc[p] > 0)
            MPI_Isend(sbuf + sd[p], sc[p], MPI_FLOAT, p, 77, comm, &req[nreq++]);
    }
    MPI_Waitall(nreq, req, MPI_STATUSES_IGNORE);
    free(req);
    return rcode;
}

static const sb_relayout_mem host_mem = {mem_box_copy, mem_zero, mem_alloc, mem_release, mem_p2p};

/* ---- random numbers (same sequence on every rank) ------------------------ */

typedef struct {
    uint64_t s;
} rng;

static uint64_t rnext(rng *g)
{
    uint64_t z = (g->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static int64_t rnd(rng *g, int64_t n) { return n <= 0 ? 0 : (int64_t)(rnext(g) % (uint64_t)n); }

/* ---- boxes and reference values ------------------------------------------ */

static const sb_box EMPTY = {0};

/* The value at a global row-major index: a small integer, so sums are exact. */
static float fval(int64_t lin) { return (float)((lin * 7919 + 13) % 1021); }

static int64_t lin_index(int nd, const int64_t *shape, const int64_t *idx)
{
    int64_t l = 0;
    for (int i = 0; i < nd; i++)
        l = l * shape[i] + idx[i];
    return l;
}

static int in_box(const sb_box *b, const int64_t *idx)
{
    if (b->nd <= 0)
        return 0;
    for (int i = 0; i < b->nd; i++)
        if (idx[i] < b->lo[i] || idx[i] >= b->hi[i])
            return 0;
    return 1;
}

/* Odometer over the global indices of box b, row-major: start with
 * idx = b->lo; returns 0 after the last. */
static int next_index(const sb_box *b, int64_t *idx)
{
    for (int i = b->nd - 1; i >= 0; i--) {
        if (++idx[i] < b->hi[i])
            return 1;
        idx[i] = b->lo[i];
    }
    return 0;
}

static sb_box whole(int nd, const int64_t *shape)
{
    sb_box b = {.nd = nd};
    for (int i = 0; i < nd; i++)
        b.hi[i] = shape[i];
    return b;
}

/* Buffer for box b holding fval of each element's global index. */
static float *fill_box(const sb_box *b, int nd, const int64_t *shape)
{
    int64_t v = sb_box_volume(b);
    if (v == 0)
        return NULL;
    float *p = malloc(sizeof(float) * (size_t)v);
    if (!p)
        return NULL;
    int64_t idx[SB_BOX_MAX_DIMS], k = 0;
    memcpy(idx, b->lo, sizeof idx);
    do
        p[k++] = fval(lin_index(nd, shape, idx));
    while (next_index(b, idx));
    return p;
}

static const char *box_text(const sb_box *b, char *buf, size_t n)
{
    if (b->nd <= 0)
        return snprintf(buf, n, "-"), buf;
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < b->nd && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld:%lld", i ? "," : "", (long long)b->lo[i],
                              (long long)b->hi[i]);
    if (k < n)
        snprintf(buf + k, n - k, "]");
    return buf;
}

/* A random sub-box of b (non-empty when b is); a dim is taken whole with
 * probability 1/3 so that copies meet long contiguous runs too. */
static sb_box random_sub(rng *g, const sb_box *b)
{
    sb_box s = {.nd = b->nd};
    for (int i = 0; i < b->nd; i++) {
        int64_t e = b->hi[i] - b->lo[i];
        if (rnd(g, 3) == 0) {
            s.lo[i] = b->lo[i];
            s.hi[i] = b->hi[i];
            continue;
        }
        s.lo[i] = b->lo[i] + rnd(g, e);
        s.hi[i] = s.lo[i] + 1 + rnd(g, b->hi[i] - s.lo[i]);
    }
    return s;
}

/* ---- box unit tests ------------------------------------------------------ */

static int max_ext(int nd) { return nd <= 2 ? 9 : nd <= 4 ? 5 : 3; }

static void random_global(rng *g, int nd, int64_t *shape)
{
    for (int i = 0; i < nd; i++)
        shape[i] = 1 + rnd(g, max_ext(nd));
}

static void test_box_volume_intersect(void **state)
{
    (void)state;
    rng g = {101};
    CHECK(sb_box_volume(&EMPTY) == 0);
    sb_box a = {.nd = 2, .lo = {1, 1}, .hi = {3, 1}}, o;
    CHECK(sb_box_volume(&a) == 0);
    sb_box b = {.nd = 2, .lo = {0, 0}, .hi = {4, 5}};
    CHECK(sb_box_volume(&b) == 20);
    CHECK(sb_box_intersect(&b, &EMPTY, &o) == 0 && sb_box_volume(&o) == 0);
    sb_box c1 = {.nd = 1, .lo = {0}, .hi = {4}};
    CHECK(sb_box_intersect(&b, &c1, &o) == 0); /* different ranks of box */
    sb_box touch = {.nd = 2, .lo = {4, 0}, .hi = {6, 5}};
    CHECK(sb_box_intersect(&b, &touch, &o) == 0); /* half-open: sharing a face is empty */

    for (int nd = 1; nd <= SB_BOX_MAX_DIMS; nd++)
        for (int t = 0; t < 30; t++) {
            int64_t shape[SB_BOX_MAX_DIMS];
            random_global(&g, nd, shape);
            sb_box w = whole(nd, shape);
            sb_box x = random_sub(&g, &w), y = random_sub(&g, &w), z;
            int ne = sb_box_intersect(&x, &y, &z);
            int64_t idx[SB_BOX_MAX_DIMS], nx = 0, nxy = 0, wrong = 0;
            memcpy(idx, w.lo, sizeof idx);
            do {
                nx += in_box(&x, idx);
                int both = in_box(&x, idx) && in_box(&y, idx);
                nxy += both;
                wrong += both != in_box(&z, idx);
            } while (next_index(&w, idx));
            CHECKF(nx == sb_box_volume(&x), "volume nd=%d: %lld vs %lld", nd, (long long)nx,
                   (long long)sb_box_volume(&x));
            CHECKF(nxy == sb_box_volume(&z) && ne == (nxy > 0) && wrong == 0,
                   "intersect nd=%d: %lld common elements, volume %lld, returned %d, %lld wrong",
                   nd, (long long)nxy, (long long)sb_box_volume(&z), ne, (long long)wrong);
        }
    agree();
}

/* Copies sub from a buffer laid out as `from` into one laid out as `to`
 * (prefilled with -1 - index) and checks every element of `to`. */
static void check_copy(int nd, const int64_t *shape, const sb_box *from, const sb_box *to,
                       const sb_box *sub, int accumulate)
{
    float *s = fill_box(from, nd, shape);
    int64_t vt = sb_box_volume(to);
    float *d = malloc(sizeof(float) * (size_t)vt);
    int64_t idx[SB_BOX_MAX_DIMS], k = 0, wrong = 0;
    memcpy(idx, to->lo, sizeof idx);
    do
        d[k++] = -1.0f - (float)lin_index(nd, shape, idx);
    while (next_index(to, idx));
    sb_box_copy(s, from, d, to, sub, accumulate);
    memcpy(idx, to->lo, sizeof idx);
    k = 0;
    do {
        float old = -1.0f - (float)lin_index(nd, shape, idx);
        float want = old;
        if (in_box(sub, idx))
            want = accumulate ? old + fval(lin_index(nd, shape, idx))
                              : fval(lin_index(nd, shape, idx));
        wrong += d[k++] != want;
    } while (next_index(to, idx));
    char a[200], b[200], c[200];
    CHECKF(wrong == 0, "sb_box_copy nd=%d acc=%d from %s to %s sub %s: %lld wrong", nd,
           accumulate, box_text(from, a, sizeof a), box_text(to, b, sizeof b),
           box_text(sub, c, sizeof c), (long long)wrong);
    free(s);
    free(d);
}

static void test_box_copy(void **state)
{
    (void)state;
    rng g = {202};
    for (int nd = 1; nd <= SB_BOX_MAX_DIMS; nd++) {
        int64_t shape[SB_BOX_MAX_DIMS];
        random_global(&g, nd, shape);
        sb_box w = whole(nd, shape);
        /* Whole buffers: the copy is one run. */
        check_copy(nd, shape, &w, &w, &w, 0);
        check_copy(nd, shape, &w, &w, &w, 1);
        for (int t = 0; t < 40; t++) {
            random_global(&g, nd, shape);
            w = whole(nd, shape);
            sb_box from = random_sub(&g, &w), to = random_sub(&g, &w), common;
            if (rnd(&g, 4) == 0)
                to = from;
            if (!sb_box_intersect(&from, &to, &common))
                continue;
            sb_box sub = random_sub(&g, &common);
            check_copy(nd, shape, &from, &to, &sub, (int)rnd(&g, 2));
        }
    }
    /* An empty sub-box copies nothing. */
    int64_t shape[2] = {3, 4};
    sb_box w = whole(2, shape);
    check_copy(2, shape, &w, &w, &EMPTY, 0);
    agree();
}

/* ---- random layouts ------------------------------------------------------ */

typedef struct {
    int nd;
    int64_t shape[SB_BOX_MAX_DIMS];
    int64_t cut[SB_BOX_MAX_DIMS][9]; /* cut[i][0..split[i]] */
    int split[SB_BOX_MAX_DIMS];
    int count;                       /* boxes in the grid */
} grid;

static void random_shape(rng *g, int *nd, int64_t *shape)
{
    static const int ext[] = {0, 24, 10, 6, 5, 4};
    *nd = 1 + (int)rnd(g, 5);
    for (int i = 0; i < *nd; i++)
        shape[i] = 1 + rnd(g, ext[*nd]);
}

/* A grid of at most n boxes: per dim a split count (dividing the size, cut
 * evenly; or, one time in four, any count cut at random points). */
static grid random_grid(rng *g, int nd, const int64_t *shape, int n)
{
    grid G = {.nd = nd, .count = 1};
    memcpy(G.shape, shape, sizeof G.shape);
    int order[SB_BOX_MAX_DIMS];
    for (int i = 0; i < nd; i++)
        order[i] = i;
    for (int i = nd - 1; i > 0; i--) {
        int j = (int)rnd(g, i + 1), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    int uneven = rnd(g, 4) == 0;
    for (int k = 0; k < nd; k++) {
        int i = order[k], opts[9], no = 0;
        for (int s = 1; s <= 8 && s <= shape[i]; s++)
            if (G.count * s <= n && (uneven || shape[i] % s == 0))
                opts[no++] = s;
        int s = opts[rnd(g, no)];
        G.split[i] = s;
        G.count *= s;
        if (!uneven || s == 1) {
            for (int c = 0; c <= s; c++)
                G.cut[i][c] = c * shape[i] / s;
        } else { /* s-1 distinct cut points in 1..shape-1 */
            int64_t pts[64];
            int np = 0;
            for (int64_t p = 1; p < shape[i] && np < 64; p++)
                pts[np++] = p;
            for (int c = 0; c < s - 1; c++) { /* partial shuffle */
                int j = c + (int)rnd(g, np - c);
                int64_t t = pts[c];
                pts[c] = pts[j];
                pts[j] = t;
            }
            for (int c = 1; c < s - 1; c++) /* sort the chosen s-1 */
                for (int j = c; j > 0 && pts[j - 1] > pts[j]; j--) {
                    int64_t t = pts[j];
                    pts[j] = pts[j - 1];
                    pts[j - 1] = t;
                }
            G.cut[i][0] = 0;
            for (int c = 1; c < s; c++)
                G.cut[i][c] = pts[c - 1];
            G.cut[i][s] = shape[i];
        }
    }
    return G;
}

static sb_box grid_box(const grid *G, int j)
{
    sb_box b = {.nd = G->nd};
    for (int i = G->nd - 1; i >= 0; i--) {
        int c = j % G->split[i];
        j /= G->split[i];
        b.lo[i] = G->cut[i][c];
        b.hi[i] = G->cut[i][c + 1];
    }
    return b;
}

/* Deals the grid's boxes to ranks (the first `count` ranks, or `count`
 * ranks at random); every other rank is idle or holds a copy of a random
 * grid box (all of them copies, one time in six). */
static void deal_grid(rng *g, const grid *G, int n, sb_box *out)
{
    int perm[64];
    for (int i = 0; i < n; i++)
        perm[i] = i;
    if (rnd(g, 2))
        for (int i = n - 1; i > 0; i--) {
            int j = (int)rnd(g, i + 1), t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
    int all_copies = rnd(g, 6) == 0;
    for (int j = 0; j < n; j++) {
        if (j < G->count)
            out[perm[j]] = grid_box(G, j);
        else if (all_copies || rnd(g, 2))
            out[perm[j]] = grid_box(G, (int)rnd(g, G->count));
        else
            out[perm[j]] = EMPTY;
    }
}

/* Every rank a random sub-box of the tensor, or nothing (one in five). */
static void deal_arbitrary(rng *g, int nd, const int64_t *shape, int n, sb_box *out)
{
    sb_box w = whole(nd, shape);
    for (int r = 0; r < n; r++)
        out[r] = rnd(g, 5) == 0 ? EMPTY : random_sub(g, &w);
}

/* Grows every box by 0-2 on some sides, clipped to the tensor (halos). */
static void grow_halos(rng *g, int nd, const int64_t *shape, int n, sb_box *b)
{
    for (int r = 0; r < n; r++) {
        if (b[r].nd == 0)
            continue;
        for (int i = 0; i < nd; i++) {
            int64_t lo = b[r].lo[i] - (rnd(g, 2) ? rnd(g, 3) : 0);
            int64_t hi = b[r].hi[i] + (rnd(g, 2) ? rnd(g, 3) : 0);
            b[r].lo[i] = lo < 0 ? 0 : lo;
            b[r].hi[i] = hi > shape[i] ? shape[i] : hi;
        }
    }
}

static void describe_case(int cs, sb_relayout_mode mode, int nd, const int64_t *shape,
                          const sb_box *S, const sb_box *D)
{
    char buf[200];
    fprintf(stderr, "[rank %d]   case %d, %s, shape (", g_me, cs,
            mode == SB_RELAYOUT_COPY ? "COPY" : "ACCUM");
    for (int i = 0; i < nd; i++)
        fprintf(stderr, "%s%lld", i ? "," : "", (long long)shape[i]);
    fprintf(stderr, ")\n");
    for (int r = 0; r < g_n; r++) {
        fprintf(stderr, "[rank %d]     rank %d src %s", g_me, r, box_text(&S[r], buf, sizeof buf));
        fprintf(stderr, " dst %s\n", box_text(&D[r], buf, sizeof buf));
    }
}

/* Plans and runs one relayout on every rank, checks every element of this
 * rank's dst box and that the per-peer counts of all ranks match up. */
static void run_case(int cs, sb_relayout_mode mode, int nd, const int64_t *shape,
                     const sb_box *S, const sb_box *D)
{
    const int me = g_me, n = g_n;
    int failed_before = g_failed;
    float *src = fill_box(&S[me], nd, shape);
    int64_t vd = sb_box_volume(&D[me]);
    float *dst = vd ? malloc(sizeof(float) * (size_t)vd) : NULL;
    for (int64_t i = 0; i < vd; i++)
        dst[i] = -7777.0f;

    sb_relayout *rl = NULL;
    sb_error err = {0};
    long calls = mpi_calls();
    int rc = sb_relayout_plan(MPI_COMM_WORLD, nd, shape, S, D, mode, &rl, &err);
    CHECKF(rc == 0, "plan failed: %s", err.msg);
    CHECK(mpi_calls() == calls);
    if (any_rank(rc != 0))
        goto out;

    rc = sb_relayout_run(rl, src, dst, &err);
    CHECKF(rc == 0, "run failed: %s", err.msg);
    if (!rc) { /* the same relayout through sb_relayout_run_mem: the same bits */
        float *dst2 = vd ? malloc(sizeof(float) * (size_t)vd) : NULL;
        for (int64_t i = 0; i < vd; i++)
            dst2[i] = -5555.0f;
        long a2a = n_alltoallv;
        int rc2 = sb_relayout_run_mem(rl, src, dst2, &host_mem, &err);
        CHECKF(rc2 == 0, "run_mem failed: %s", err.msg);
        CHECK(n_alltoallv == a2a);
        CHECKF(vd == 0 || !memcmp(dst, dst2, sizeof(float) * (size_t)vd),
               "run_mem's dst differs from run's");
        free(dst2);
        /* and point to point: the same bits, no collective */
        float *dst3 = vd ? malloc(sizeof(float) * (size_t)vd) : NULL;
        for (int64_t i = 0; i < vd; i++)
            dst3[i] = -3333.0f;
        sb_relayout_pending *pend = NULL;
        CHECK(sb_relayout_pending_new(&pend, &err) == 0);
        long a2a3 = n_alltoallv;
        int rc3 = sb_relayout_run_p2p(rl, src, dst3, cs % 32768, pend, &err);
        CHECKF(rc3 == 0, "run_p2p failed: %s", err.msg);
        CHECK(sb_relayout_pending_wait(pend, &err) == 0);
        CHECK(n_alltoallv == a2a3);
        CHECKF(vd == 0 || !memcmp(dst, dst3, sizeof(float) * (size_t)vd),
               "run_p2p's dst differs from run's");
        sb_relayout_pending_free(pend);
        free(dst3);
    }
    if (vd) {
        int64_t idx[SB_BOX_MAX_DIMS], k = 0, wrong = 0;
        memcpy(idx, D[me].lo, sizeof idx);
        do {
            float want = fval(lin_index(nd, shape, idx)), got = dst[k++];
            if (mode == SB_RELAYOUT_ACCUM) {
                int holders = 0;
                for (int r = 0; r < n; r++)
                    holders += in_box(&S[r], idx);
                want *= (float)holders;
            }
            if (got != want && wrong++ == 0)
                failure(__LINE__, "dst element %lld: got %g, want %g",
                        (long long)lin_index(nd, shape, idx), got, want);
        } while (next_index(&D[me], idx));
        CHECKF(wrong == 0, "%lld of %lld dst elements wrong", (long long)wrong, (long long)vd);
    }

    /* What I send to p is what p receives from me. */
    int64_t *sc = calloc((size_t)n, sizeof *sc), *rcv = calloc((size_t)n, sizeof *rcv),
            *peer_sent = calloc((size_t)n, sizeof *peer_sent);
    sb_relayout_peer_counts(rl, sc, rcv);
    MPI_Alltoall(sc, 1, MPI_INT64_T, peer_sent, 1, MPI_INT64_T, MPI_COMM_WORLD);
    int64_t tot_s = 0, tot_r = 0;
    for (int p = 0; p < n; p++) {
        CHECKF(peer_sent[p] == rcv[p], "rank %d sends %lld floats to me, I expect %lld", p,
               (long long)peer_sent[p], (long long)rcv[p]);
        tot_s += sc[p];
        tot_r += rcv[p];
    }
    CHECK(sc[me] == 0 && rcv[me] == 0);
    CHECK(sb_relayout_bytes_sent(rl) == 4 * tot_s);
    CHECK(sb_relayout_bytes_received(rl) == 4 * tot_r);
    if (mode == SB_RELAYOUT_ACCUM) { /* every overlap with another rank's dst */
        int64_t want = 0;
        sb_box o;
        for (int d = 0; d < n; d++)
            if (d != me && sb_box_intersect(&S[me], &D[d], &o))
                want += sb_box_volume(&o);
        CHECK(tot_s == want);
    }
    free(sc);
    free(rcv);
    free(peer_sent);
out:
    if (g_failed && !failed_before)
        describe_case(cs, mode, nd, shape, S, D);
    sb_relayout_free(rl);
    /* the plan keeps run_mem's packing buffers and gives them back freed */
    CHECKF(mem_live == 0, "run_mem left %ld packing buffers allocated", mem_live);
    free(src);
    free(dst);
}

static void test_relayout_copy_random(void **state)
{
    (void)state;
    const int n = g_n;
    rng g = {0xC0FFEEull + (uint64_t)n + g_seed};
    sb_box *S = calloc((size_t)n, sizeof *S), *D = calloc((size_t)n, sizeof *D);
    for (int cs = 0; cs < N_CASES; cs++) {
        int nd;
        int64_t shape[SB_BOX_MAX_DIMS];
        random_shape(&g, &nd, shape);
        grid gs = random_grid(&g, nd, shape, n);
        deal_grid(&g, &gs, n, S);
        if (rnd(&g, 2)) {
            grid gd = random_grid(&g, nd, shape, n);
            deal_grid(&g, &gd, n, D);
        } else {
            deal_arbitrary(&g, nd, shape, n, D);
        }
        run_case(cs, SB_RELAYOUT_COPY, nd, shape, S, D);
    }
    free(S);
    free(D);
    agree();
}

static void test_relayout_accum_random(void **state)
{
    (void)state;
    const int n = g_n;
    rng g = {0xACC0ull + (uint64_t)n + g_seed};
    sb_box *S = calloc((size_t)n, sizeof *S), *D = calloc((size_t)n, sizeof *D);
    for (int cs = 0; cs < N_CASES; cs++) {
        int nd;
        int64_t shape[SB_BOX_MAX_DIMS];
        random_shape(&g, &nd, shape);
        if (rnd(&g, 3)) {
            grid gs = random_grid(&g, nd, shape, n);
            deal_grid(&g, &gs, n, S);
        } else { /* partial sums, overlapping at random */
            deal_arbitrary(&g, nd, shape, n, S);
        }
        int k = (int)rnd(&g, 3);
        if (k == 2) {
            deal_arbitrary(&g, nd, shape, n, D);
        } else {
            grid gd = random_grid(&g, nd, shape, n);
            deal_grid(&g, &gd, n, D);
            if (k == 1)
                grow_halos(&g, nd, shape, n, D);
        }
        run_case(cs, SB_RELAYOUT_ACCUM, nd, shape, S, D);
    }
    free(S);
    free(D);
    agree();
}

/* ---- point to point ------------------------------------------------------ */

/* Plans between the halves of the ranks, run point to point in different
 * orders on the two sides (what a pipeline's stages do): the lower half
 * sends A and C, then needs B; the upper half sends B, then needs C, then
 * A. The sends stay in flight (messages of 64 KiB and more: not sent
 * eagerly), so neither side waits for the other, and the tags keep A's and
 * C's messages (same sizes, same peers) apart. Only ranks with a part
 * call; no collective. */
static void test_relayout_p2p_orders(void **state)
{
    (void)state;
    const int n = g_n, me = g_me, h = n / 2;
    if (n < 2) {
        agree();
        return;
    }
    const int64_t rows = 16 * n, cols = 2048, shape[2] = {rows, cols};
    sb_box *lo = calloc((size_t)n, sizeof *lo), *hi = calloc((size_t)n, sizeof *hi);
    for (int r = 0; r < n; r++) {
        if (r < h) /* the lower half holds the rows in h blocks */
            lo[r] = (sb_box){.nd = 2, .lo = {rows * r / h, 0}, .hi = {rows * (r + 1) / h, cols}};
        else /* the upper half in n - h blocks */
            hi[r] = (sb_box){.nd = 2, .lo = {rows * (r - h) / (n - h), 0},
                             .hi = {rows * (r - h + 1) / (n - h), cols}};
    }
    sb_relayout *a = NULL, *b = NULL, *c = NULL;
    sb_relayout_pending *pend = NULL;
    sb_error err = {0};
    CHECK(sb_relayout_plan(MPI_COMM_WORLD, 2, shape, lo, hi, SB_RELAYOUT_COPY, &a, &err) == 0);
    CHECK(sb_relayout_plan(MPI_COMM_WORLD, 2, shape, hi, lo, SB_RELAYOUT_ACCUM, &b, &err) == 0);
    CHECK(sb_relayout_plan(MPI_COMM_WORLD, 2, shape, lo, hi, SB_RELAYOUT_COPY, &c, &err) == 0);
    CHECK(sb_relayout_pending_new(&pend, &err) == 0);
    const sb_box *mine = me < h ? &lo[me] : &hi[me];
    float *src = fill_box(mine, 2, shape);
    int64_t v = sb_box_volume(mine);
    float *src2 = malloc(sizeof(float) * (size_t)v), *dst = malloc(sizeof(float) * (size_t)v),
          *dst2 = malloc(sizeof(float) * (size_t)v);
    for (int64_t i = 0; i < v; i++)
        src2[i] = 2 * src[i];
    long a2a = n_alltoallv;
    for (int round = 0; round < 3 && a && b && c && pend; round++) {
        for (int64_t i = 0; i < v; i++)
            dst[i] = dst2[i] = -1.0f;
        int rc = me < h ? sb_relayout_run_p2p(a, src, NULL, 1, pend, &err)
                              || sb_relayout_run_p2p(c, src2, NULL, 3, pend, &err)
                              || sb_relayout_run_p2p(b, NULL, dst, 2, pend, &err)
                        : sb_relayout_run_p2p(b, src, NULL, 2, pend, &err)
                              || sb_relayout_run_p2p(c, NULL, dst2, 3, pend, &err)
                              || sb_relayout_run_p2p(a, NULL, dst, 1, pend, &err);
        CHECKF(rc == 0, "run_p2p: %s", err.msg);
        int64_t idx[2] = {mine->lo[0], mine->lo[1]}, k = 0, wrong = 0;
        do {
            float want = fval(lin_index(2, shape, idx));
            wrong += dst[k] != want || (me >= h && dst2[k] != 2 * want);
            k++;
        } while (next_index(mine, idx));
        CHECKF(wrong == 0, "round %d: %lld of %lld elements wrong", round, (long long)wrong,
               (long long)v);
    }
    CHECK(sb_relayout_pending_wait(pend, &err) == 0);
    CHECK(n_alltoallv == a2a);
    sb_relayout_pending_free(pend);
    sb_relayout_free(a);
    sb_relayout_free(b);
    sb_relayout_free(c);
    free(src);
    free(src2);
    free(dst);
    free(dst2);
    free(lo);
    free(hi);
    agree();
}

/* ---- fixed layouts ------------------------------------------------------- */

/* Rows of a (rows, cols) tensor split over ranks: rank r holds block r. */
static sb_box rows_of(int r, int n, int64_t rows, int64_t cols)
{
    sb_box b = {.nd = 2, .lo = {r * rows / n, 0}, .hi = {(r + 1) * rows / n, cols}};
    return b;
}

/* Replica choice: ranks hold alternate halves (even ranks the top, odd ones
 * the bottom) and every rank needs everything. A rank reads the half it
 * holds from itself and the other from replica (its rank mod count). */
static void test_relayout_replica_choice(void **state)
{
    (void)state;
    const int n = g_n, me = g_me;
    int64_t shape[2] = {4, 6};
    sb_box top = {.nd = 2, .lo = {0, 0}, .hi = {2, 6}}, bottom = {.nd = 2, .lo = {2, 0}, .hi = {4, 6}};
    sb_box *S = calloc((size_t)n, sizeof *S), *D = calloc((size_t)n, sizeof *D);
    for (int r = 0; r < n; r++) {
        S[r] = r % 2 ? bottom : top;
        D[r] = whole(2, shape);
    }
    if (n == 1) /* one rank: it must hold everything */
        S[0] = whole(2, shape);
    run_case(0, SB_RELAYOUT_COPY, 2, shape, S, D);
    sb_relayout *rl = NULL;
    sb_error err = {0};
    if (sb_relayout_plan(MPI_COMM_WORLD, 2, shape, S, D, SB_RELAYOUT_COPY, &rl, &err) == 0) {
        int64_t *rc = calloc((size_t)n, sizeof *rc);
        sb_relayout_peer_counts(rl, NULL, rc);
        if (n > 1) {
            int other = 1 - me % 2;                        /* parity of the other half */
            int count = (n - other + 1) / 2;               /* ranks with that parity */
            int from = other + 2 * (me % count);           /* replica index me % count */
            for (int p = 0; p < n; p++)
                CHECKF(rc[p] == (p == from ? 12 : 0), "rank %d: receives %lld from %d", me,
                       (long long)rc[p], p);
        }
        free(rc);
        sb_relayout_free(rl);
    } else {
        failure(__LINE__, "plan: %s", err.msg);
    }
    /* Fully replicated source: nothing moves, no exchange at all. */
    for (int r = 0; r < n; r++)
        S[r] = whole(2, shape);
    long a2av = n_alltoallv;
    run_case(1, SB_RELAYOUT_COPY, 2, shape, S, D);
    CHECK(n_alltoallv == a2av);
    free(S);
    free(D);
    agree();
}

/* (n, 1) -> (1, n) on a (2n, 3n) tensor: every rank sends 6 floats to
 * every other rank; and the same exchange in ACCUM mode. */
static void test_relayout_transpose_counts(void **state)
{
    (void)state;
    const int n = g_n;
    int64_t shape[2] = {2 * n, 3 * n};
    sb_box *S = calloc((size_t)n, sizeof *S), *D = calloc((size_t)n, sizeof *D);
    for (int r = 0; r < n; r++) {
        S[r] = rows_of(r, n, 2 * n, 3 * n);
        D[r] = (sb_box){.nd = 2, .lo = {0, 3 * r}, .hi = {2 * n, 3 * r + 3}};
    }
    for (int mode = 0; mode < 2; mode++) {
        run_case(mode, (sb_relayout_mode)mode, 2, shape, S, D);
        sb_relayout *rl = NULL;
        sb_error err = {0};
        CHECK(sb_relayout_plan(MPI_COMM_WORLD, 2, shape, S, D, (sb_relayout_mode)mode, &rl,
                               &err) == 0);
        if (rl) {
            CHECK(sb_relayout_bytes_sent(rl) == 4 * 6 * (n - 1));
            CHECK(sb_relayout_bytes_received(rl) == 4 * 6 * (n - 1));
            sb_relayout_free(rl);
        }
    }
    free(S);
    free(D);
    agree();
}

/* ---- errors -------------------------------------------------------------- */

/* Plans on every rank, expecting an error whose message contains each of
 * the given pieces, reached with no MPI call. */
static void expect_plan_error(int nd, const int64_t *shape, const sb_box *S, const sb_box *D,
                              sb_relayout_mode mode, const char *want1, const char *want2)
{
    sb_relayout *rl = NULL;
    sb_error err = {0};
    long calls = mpi_calls();
    int rc = sb_relayout_plan(MPI_COMM_WORLD, nd, shape, S, D, mode, &rl, &err);
    CHECK(mpi_calls() == calls);
    CHECKF(rc != 0 && rl == NULL, "plan succeeded, expected an error with \"%s\"", want1);
    CHECKF(rc == 0 || (strstr(err.msg, want1) && (!want2 || strstr(err.msg, want2))),
           "error message \"%s\" lacks \"%s\"%s%s", err.msg, want1, want2 ? " / " : "",
           want2 ? want2 : "");
    CHECK(rc == 0 || err.code != 0);
    if (rc == 0)
        sb_relayout_free(rl);
    else if (g_me == 0 && getenv("SB_TEST_VERBOSE"))
        fprintf(stderr, "expected error: %s\n", err.msg);
}

static void test_relayout_errors(void **state)
{
    (void)state;
    const int n = g_n;
    int64_t shape[2] = {2 * n, 3};
    sb_box *S = calloc((size_t)n, sizeof *S), *D = calloc((size_t)n, sizeof *D);

    /* COPY: the last rank's rows are held by nobody; rank 0 needs them. */
    for (int r = 0; r < n; r++) {
        S[r] = r == n - 1 ? EMPTY : rows_of(r, n, 2 * n, 3);
        D[r] = whole(2, shape);
    }
    char want[64];
    snprintf(want, sizeof want, "[0:%d, 0:3]", 2 * n);
    expect_plan_error(2, shape, S, D, SB_RELAYOUT_COPY,
                      "rank 0 needs elements that no rank holds", want);
    /* ACCUM accepts it: missing elements are 0. */
    sb_relayout *rl = NULL;
    sb_error err = {0};
    CHECK(sb_relayout_plan(MPI_COMM_WORLD, 2, shape, S, D, SB_RELAYOUT_ACCUM, &rl, &err) == 0);
    sb_relayout_free(rl);

    /* COPY: rank 0 holds rows [0, 3), every other rank rows [2, 2n): they
     * overlap without being replicas. */
    if (n >= 2) {
        for (int r = 0; r < n; r++) {
            S[r] = r == 0 ? (sb_box){.nd = 2, .lo = {0, 0}, .hi = {3, 3}}
                          : (sb_box){.nd = 2, .lo = {2, 0}, .hi = {2 * n, 3}};
            D[r] = rows_of(r, n, 2 * n, 3);
        }
        expect_plan_error(2, shape, S, D, SB_RELAYOUT_COPY, "rank 0 [0:3, 0:3] and rank 1",
                          "overlap");
        /* ACCUM: overlapping sources are partial sums; fine. */
        run_case(0, SB_RELAYOUT_ACCUM, 2, shape, S, D);
    }

    /* Boxes that do not fit the tensor. */
    for (int r = 0; r < n; r++) {
        S[r] = rows_of(r, n, 2 * n, 3);
        D[r] = S[r];
    }
    D[n - 1].hi[1] = 4;
    snprintf(want, sizeof want, "rank %d's dst box", n - 1);
    expect_plan_error(2, shape, S, D, SB_RELAYOUT_COPY, want, "not inside the tensor");
    D[n - 1].hi[1] = 3;
    S[0].nd = 3;
    expect_plan_error(2, shape, S, D, SB_RELAYOUT_ACCUM, "rank 0's src box has 3 dims", NULL);
    S[0].nd = 2;
    expect_plan_error(0, shape, S, D, SB_RELAYOUT_COPY, "0 dims", NULL);
    int64_t huge[2] = {(int64_t)1 << 40, (int64_t)1 << 40};
    expect_plan_error(2, huge, S, D, SB_RELAYOUT_COPY, "more than 2^63 elements", NULL);

    /* More floats in one exchange than an int counts: the plan refuses on
     * every rank before allocating anything. */
    if (n >= 2) {
        int64_t big[1] = {(int64_t)1 << 32};
        int64_t cut = ((int64_t)1 << 31) + 8;
        for (int r = 0; r < n; r++)
            S[r] = D[r] = EMPTY;
        S[0] = (sb_box){.nd = 1, .lo = {0}, .hi = {cut}};
        S[1] = (sb_box){.nd = 1, .lo = {cut}, .hi = {big[0]}};
        D[1] = S[0];
        expect_plan_error(1, big, S, D, SB_RELAYOUT_COPY, "rank 0 would send 2147483656 floats",
                          "int count limit");
    }
    free(S);
    free(D);
    agree();
}

/* A rank that passes no src buffer for a non-empty box gets an error, and
 * the others still finish (they receive zeros from it). */
static void test_relayout_null_buffer(void **state)
{
    (void)state;
    const int n = g_n, me = g_me;
    int64_t shape[2] = {2 * n, 3 * n};
    sb_box *S = calloc((size_t)n, sizeof *S), *D = calloc((size_t)n, sizeof *D);
    for (int r = 0; r < n; r++) {
        S[r] = rows_of(r, n, 2 * n, 3 * n);
        D[r] = (sb_box){.nd = 2, .lo = {0, 3 * r}, .hi = {2 * n, 3 * r + 3}};
    }
    sb_relayout *rl = NULL;
    sb_error err = {0};
    CHECK(sb_relayout_plan(MPI_COMM_WORLD, 2, shape, S, D, SB_RELAYOUT_COPY, &rl, &err) == 0);
    if (!any_rank(rl == NULL)) {
        float *src = fill_box(&S[me], 2, shape);
        float *dst = malloc(sizeof(float) * (size_t)sb_box_volume(&D[me]));
        int rc = sb_relayout_run(rl, me == 0 ? NULL : src, dst, &err);
        if (me == 0)
            CHECKF(rc != 0 && strstr(err.msg, "NULL src buffer"), "rank 0: rc %d, \"%s\"", rc,
                   err.msg);
        else
            CHECKF(rc == 0 && dst[0] == 0.0f && dst[3 * 2 * n - 1] != 0.0f,
                   "rank %d: rc %d, dst[0] %g", me, rc, dst[0]);
        free(src);
        free(dst);
    }
    sb_relayout_free(rl);
    free(S);
    free(D);
    agree();
}

/* ---- group cache --------------------------------------------------------- */

/* Checks comm against the grouping `color` from this rank's side. */
static void check_group(const int *color, MPI_Comm comm)
{
    const int n = g_n, me = g_me;
    if (color[me] < 0) {
        CHECKF(comm == MPI_COMM_NULL, "rank %d has color %d but a communicator", me, color[me]);
        return;
    }
    CHECK(comm != MPI_COMM_NULL);
    if (comm == MPI_COMM_NULL)
        return;
    int size = -1, rank = -1, want_size = 0, want_rank = 0, sum = -1, want_sum = 0;
    for (int r = 0; r < n; r++)
        if (color[r] == color[me]) {
            want_size++;
            want_sum += r;
            want_rank += r < me;
        }
    MPI_Comm_size(comm, &size);
    MPI_Comm_rank(comm, &rank);
    MPI_Allreduce(&me, &sum, 1, MPI_INT, MPI_SUM, comm);
    CHECKF(size == want_size && rank == want_rank && sum == want_sum,
           "color %d: size %d rank %d sum %d, want %d %d %d", color[me], size, rank, sum,
           want_size, want_rank, want_sum);
}

static void test_group_cache(void **state)
{
    (void)state;
    const int n = g_n;
    int *odd_even = calloc((size_t)n, sizeof(int)), *all = calloc((size_t)n, sizeof(int));
    int *odd_even2 = calloc((size_t)n, sizeof(int));
    for (int r = 0; r < n; r++) {
        odd_even[r] = r % 2;
        all[r] = 3; /* one group; a key distinct from odd_even even on 1 rank */
    }
    if (n >= 3)
        odd_even[n - 1] = -1; /* the last rank joins no group */
    memcpy(odd_even2, odd_even, sizeof(int) * (size_t)n);
    if (n >= 3)
        odd_even2[n - 1] = -5; /* any negative color means none */

    sb_group_cache *gc = NULL;
    sb_error err = {0};
    CHECK(sb_group_cache_new(MPI_COMM_WORLD, &gc, &err) == 0);
    if (any_rank(gc == NULL)) {
        sb_group_cache_free(gc);
        agree();
        return;
    }
    MPI_Comm a = MPI_COMM_NULL, a2 = MPI_COMM_NULL, b = MPI_COMM_NULL, a3 = MPI_COMM_NULL;
    long splits = n_comm_split;
    CHECK(sb_group_cache_size(gc) == 0);
    CHECK(sb_group_get(gc, odd_even, &a, &err) == 0);
    CHECK(n_comm_split == splits + 1);
    check_group(odd_even, a);

    long calls = mpi_calls();
    CHECK(sb_group_get(gc, odd_even, &a2, &err) == 0); /* a hit: local */
    CHECK(mpi_calls() == calls);
    CHECK(a2 == a);
    CHECK(sb_group_cache_size(gc) == 1);

    CHECK(sb_group_get(gc, all, &b, &err) == 0);
    CHECK(n_comm_split == splits + 2);
    CHECK(sb_group_cache_size(gc) == 2);
    check_group(all, b);
    CHECK(n == 1 || b != a || g_me == n - 1); /* distinct unless both are NULL */

    CHECK(sb_group_get(gc, odd_even2, &a3, &err) == 0);
    CHECK(a3 == a);
    CHECK(n_comm_split == splits + 2);
    CHECK(sb_group_cache_size(gc) == 2);
    check_group(odd_even, a3);

    sb_group_cache_free(gc);
    free(odd_even);
    free(odd_even2);
    free(all);
    agree();
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_me);
    MPI_Comm_size(MPI_COMM_WORLD, &g_n);
    if (getenv("SB_TEST_SEED"))
        g_seed = strtoull(getenv("SB_TEST_SEED"), NULL, 0) * 0x9E3779B97F4A7C15ull;
    if (g_n > 64) {
        if (g_me == 0)
            fprintf(stderr, "test_relayout: at most 64 ranks\n");
        MPI_Finalize();
        return 1;
    }
    /* Other ranks: cmocka's report in TAP form (all on stdout) to /dev/null;
     * stderr stays, for the checks' diagnostics and sanitizer reports. */
    if (g_me != 0) {
        if (!freopen("/dev/null", "w", stdout))
            return 1;
        cmocka_set_message_output(CM_OUTPUT_TAP);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_box_volume_intersect),
        cmocka_unit_test(test_box_copy),
        cmocka_unit_test(test_relayout_transpose_counts),
        cmocka_unit_test(test_relayout_replica_choice),
        cmocka_unit_test(test_relayout_copy_random),
        cmocka_unit_test(test_relayout_accum_random),
        cmocka_unit_test(test_relayout_p2p_orders),
        cmocka_unit_test(test_relayout_errors),
        cmocka_unit_test(test_relayout_null_buffer),
        cmocka_unit_test(test_group_cache),
    };
    char name[64];
    snprintf(name, sizeof name, "relayout on %d rank%s", g_n, g_n == 1 ? "" : "s");
    int failed = cmocka_run_group_tests_name(name, tests, NULL, NULL);
    MPI_Finalize();
    return failed ? 1 : 0;
}
