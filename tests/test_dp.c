/* tests/test_dp.c: cmocka tests of the exact search (search/dp.c,
 * search/order.c) and of strategy files (strategy/strategy_io.c).
 *
 * Hundreds of random small graphs, written as model TEXT and parsed like any
 * model (chains, diamonds, Inception-like fan-out/fan-in with concat,
 * multi-edges where one tensor feeds two slots of one op, split/unstack
 * outputs joined again), each searched three ways: the DP in PaSE's order,
 * the DP in breadth-first order, and brute force. The three optima must be
 * equal, and each reported total must be the cost F of the reported choice.
 * Then the table limit, and strategy files written, read back, and damaged.
 * Not the cost formulas (test_cost.c). */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "../search/dp.h"
#include "../search/dp_reuse.h"
#include "../search/lagrange.h"

#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "shardbench/memory.h"
#include "shardbench/model.h"
#include "shardbench/search.h"
#include "shardbench/strategy.h"

#define NGRAPHS 360        /* graphs generated */
#define MIN_CHECKED 300    /* of which at least this many are small enough */
#define MAX_SPACE 2e5      /* brute-force strategies at most */
#define MAX_SPACE2 4e4     /* ... for the second, perturbed pass (time under ASan) */

/* ------------------------------------------------------------ helpers -- */

static double rel_diff(double a, double b)
{
    double s = fmax(fabs(a), fabs(b));
    return s > 0 ? fabs(a - b) / s : 0.0;
}

static uint64_t g_rng;

static uint64_t rnd(void)
{
    /* xorshift64* */
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    return g_rng * 2685821657736338717ULL;
}

static int rn(int n) { return n > 0 ? (int)(rnd() % (uint64_t)n) : 0; }

static int pick(const int *v, int n) { return v[rn(n)]; }

/* ---------------------------------------------------- graph generator -- */

enum {
    F_CHAIN = 1 << 0,
    F_DIAMOND = 1 << 1,
    F_INCEPTION = 1 << 2,   /* fan-out into branches, concat */
    F_MULTI_ADD = 1 << 3,   /* add(t, t) */
    F_MULTI_EINSUM = 1 << 4,/* einsum(t, t, ...) */
    F_MULTI_STACK = 1 << 5, /* stack(t, t) */
    F_SPLIT_JOIN = 1 << 6,  /* a, b = split(t); join(a, b) */
    F_CONV = 1 << 7,        /* conv / pool graphs */
    F_RESHAPE = 1 << 8,
    F_TWO_INPUTS = 1 << 9,  /* disconnected or joined later */
    F_UNSTACK = 1 << 10,
    F_DENSE = 1 << 11,      /* k-way adds of recent tensors: dependent sets > 2 */
    F_NFEAT = 12
};

static const char *const feat_names[F_NFEAT] = {
    "chain", "diamond", "inception", "add(t,t)", "einsum(t,t)", "stack(t,t)",
    "split+join", "conv/pool", "reshape", "two inputs", "unstack", "dense DAG",
};

typedef struct {
    int rank;
    int64_t d[4];
    char name[16];
} gtensor;

typedef struct {
    char text[8192];
    size_t len;
    gtensor t[128];
    int nt;
    int nops;     /* ops the text makes so far */
    int uid;      /* unique names */
    unsigned feat;
} gen;

static void emit(gen *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void emit(gen *g, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(g->text + g->len, sizeof g->text - g->len, fmt, ap);
    va_end(ap);
    assert_true(n >= 0 && (size_t)n < sizeof g->text - g->len);
    g->len += (size_t)n;
}

/* Registers a new tensor of the given shape; returns its index. */
static int new_tensor(gen *g, int rank, const int64_t *d)
{
    assert_true(g->nt < 128);
    gtensor *t = &g->t[g->nt];
    t->rank = rank;
    memcpy(t->d, d, (size_t)rank * sizeof *d);
    snprintf(t->name, sizeof t->name, "t%d", g->uid++);
    return g->nt++;
}

static int same_shape(const gtensor *a, const gtensor *b)
{
    if (a->rank != b->rank)
        return 0;
    for (int i = 0; i < a->rank; i++)
        if (a->d[i] != b->d[i])
            return 0;
    return 1;
}

/* Same shape but for dim 1 (concat along axis 1). */
static int concat_ok(const gtensor *a, const gtensor *b)
{
    if (a->rank != b->rank || a->rank < 2)
        return 0;
    for (int i = 0; i < a->rank; i++)
        if (i != 1 && a->d[i] != b->d[i])
            return 0;
    return 1;
}

static const int SIZES2[] = {4, 8, 12, 16};

/* A shape-preserving op on tensor ti (for diamonds). */
static int op_same(gen *g, int ti)
{
    gtensor x = g->t[ti];
    int o = new_tensor(g, x.rank, x.d);
    const char *on = g->t[o].name;
    if (x.rank == 4) {
        switch (rn(4)) {
        case 0: emit(g, "%s = batchnorm(%s)\n", on, x.name); break;
        case 1: emit(g, "%s = pool(%s, kernel=3, stride=1, pad=1, type=avg)\n", on, x.name); break;
        case 2: {
            int k = rn(2) ? 3 : 1; /* pad k/2 keeps h and w */
            emit(g, "%s = conv(%s, out=%lld, kernel=%d, pad=%d, dim=o%d)\n", on, x.name,
                 (long long)x.d[1], k, k / 2, g->uid);
            break;
        }
        default: emit(g, "%s = elementwise(%s, pw=1)\n", on, x.name); break;
        }
    } else {
        switch (rn(5)) {
        case 0: emit(g, "%s = norm(%s%s)\n", on, x.name, rn(2) ? ", axis=0" : ""); break;
        case 1: emit(g, "%s = softmax(%s)\n", on, x.name); break;
        case 2: emit(g, "%s = elementwise(%s, pw=%d)\n", on, x.name, rn(3)); break;
        case 3: emit(g, "%s = softmax_xent(%s)\n", on, x.name); break;
        default:
            emit(g, "%s = dense(%s, units=%lld, pw=%d, dim=u%d)\n", on, x.name,
                 (long long)x.d[x.rank - 1], rn(2), g->uid);
            break;
        }
    }
    g->nops++;
    return o;
}

/* A conv that keeps h and w (kernel 1, or 3 with pad 1). */
static int op_conv(gen *g, int ti, int64_t out)
{
    gtensor x = g->t[ti];
    int64_t d[4] = {x.d[0], out, x.d[2], x.d[3]};
    int o = new_tensor(g, 4, d);
    int k = rn(3) == 0 ? 3 : 1;
    emit(g, "%s = conv(%s, out=%lld, kernel=%d, pad=%d, pw=%d, dim=o%d)\n", g->t[o].name,
         x.name, (long long)out, k, k / 2, rn(2), g->uid);
    g->nops++;
    return o;
}

/* Any op on tensor ti; returns the (first) output. */
static int op_unary(gen *g, int ti)
{
    gtensor x = g->t[ti];
    if (x.rank == 4) {
        switch (rn(6)) {
        case 0: return op_conv(g, ti, pick((const int[]){4, 8}, 2));
        case 1:
            if (x.d[2] >= 4 && x.d[2] % 2 == 0 && x.d[3] >= 4 && x.d[3] % 2 == 0) {
                int64_t d[4] = {x.d[0], x.d[1], x.d[2] / 2, x.d[3] / 2};
                int o = new_tensor(g, 4, d);
                emit(g, "%s = pool(%s, kernel=2, stride=2)\n", g->t[o].name, x.name);
                g->nops++;
                return o;
            }
            return op_same(g, ti);
        case 2: {
            int64_t d[2] = {x.d[0], x.d[1]};
            int o = new_tensor(g, 2, d);
            emit(g, "%s = reduce_mean(%s, axes=[2, 3])\n", g->t[o].name, x.name);
            g->nops++;
            return o;
        }
        default: return op_same(g, ti);
        }
    }
    if (x.rank == 3) {
        switch (rn(5)) {
        case 4: {
            int64_t d[2] = {x.d[1], x.d[2]};
            int o = new_tensor(g, 2, d);
            emit(g, "%s = reduce_mean(%s, axes=[0])\n", g->t[o].name, x.name);
            g->nops++;
            return o;
        }
        case 0:
        case 1:
            if (x.d[0] <= 4) {
                int64_t d[2] = {x.d[1], x.d[2]};
                int first = -1;
                char names[256] = "";
                for (int k = 0; k < x.d[0]; k++) {
                    int o = new_tensor(g, 2, d);
                    if (first < 0)
                        first = o;
                    strcat(names, k ? ", " : "");
                    strcat(names, g->t[o].name);
                }
                emit(g, "%s = unstack(%s, axis=0)\n", names, x.name);
                g->nops++;
                g->feat |= F_UNSTACK;
                return first + rn((int)x.d[0]);
            }
            return op_same(g, ti);
        case 2: {
            int64_t u = pick(SIZES2, 4);
            int64_t d[3] = {x.d[0], x.d[1], u};
            int o = new_tensor(g, 3, d);
            emit(g, "%s = dense(%s, units=%lld, dim=u%d)\n", g->t[o].name, x.name, (long long)u,
                 g->uid);
            g->nops++;
            return o;
        }
        default: return op_same(g, ti);
        }
    }
    /* rank 2 */
    switch (rn(7)) {
    case 0:
    case 1: {
        int64_t u = pick(SIZES2, 4);
        int64_t d[2] = {x.d[0], u};
        int o = new_tensor(g, 2, d);
        emit(g, "%s = dense(%s, units=%lld, pw=%d, dim=u%d)\n", g->t[o].name, x.name,
             (long long)u, rn(2), g->uid);
        g->nops++;
        return o;
    }
    case 2: {
        int64_t d[2] = {x.d[1], x.d[0]};
        int o = new_tensor(g, 2, d);
        emit(g, "%s = transpose(%s, perm=[1, 0])\n", g->t[o].name, x.name);
        g->nops++;
        return o;
    }
    case 3: {
        /* reshape (X, Y) -> (Y, X): a flatten and an unflatten */
        int64_t d[2] = {x.d[1], x.d[0]};
        int o = new_tensor(g, 2, d);
        emit(g, "%s = reshape(%s, shape=[r%d=%lld, s%d=%lld])\n", g->t[o].name, x.name, g->uid,
             (long long)x.d[1], g->uid, (long long)x.d[0]);
        g->nops += 2;
        g->feat |= F_RESHAPE;
        return o;
    }
    default: return op_same(g, ti);
    }
}

/* An op joining tensors a and b (a == b makes a multi-edge); -1 if their
 * shapes allow none. */
static int op_join(gen *g, int a, int b)
{
    gtensor x = g->t[a], y = g->t[b];
    int choices[4], n = 0;
    if (same_shape(&x, &y))
        choices[n++] = 0; /* add */
    if (concat_ok(&x, &y))
        choices[n++] = 1; /* concat */
    if (x.rank == 2 && y.rank == 2 && same_shape(&x, &y))
        choices[n++] = 2; /* stack */
    if (x.rank == 2 && y.rank == 2 && (a == b ? 1 : x.d[1] == y.d[0]))
        choices[n++] = 3; /* einsum */
    if (n == 0)
        return -1;
    int o;
    switch (pick(choices, n)) {
    case 0:
        o = new_tensor(g, x.rank, x.d);
        emit(g, "%s = add(%s, %s, pw=%d)\n", g->t[o].name, x.name, y.name, rn(2));
        if (a == b)
            g->feat |= F_MULTI_ADD;
        break;
    case 1: {
        int64_t d[4];
        memcpy(d, x.d, sizeof d);
        d[1] = x.d[1] + y.d[1];
        o = new_tensor(g, x.rank, d);
        emit(g, "%s = concat(%s, %s, axis=1)\n", g->t[o].name, x.name, y.name);
        break;
    }
    case 2: {
        int64_t d[3] = {2, x.d[0], x.d[1]};
        o = new_tensor(g, 3, d);
        emit(g, "%s = stack(%s, %s)\n", g->t[o].name, x.name, y.name);
        if (a == b)
            g->feat |= F_MULTI_STACK;
        if (rn(2)) {
            /* and take it apart again */
            int64_t d2[2] = {x.d[0], x.d[1]};
            int u0 = new_tensor(g, 2, d2), u1 = new_tensor(g, 2, d2);
            emit(g, "%s, %s = unstack(%s, axis=0)\n", g->t[u0].name, g->t[u1].name, g->t[o].name);
            g->nops++;
            g->feat |= F_UNSTACK;
            o = rn(2) ? u0 : u1;
        }
        break;
    }
    default:
        if (a == b) {
            /* t t^T: "i k, j k -> i j" */
            int64_t d[2] = {x.d[0], x.d[0]};
            o = new_tensor(g, 2, d);
            emit(g, "%s = einsum(%s, %s, \"i k, j k -> i j\", pw=%d)\n", g->t[o].name, x.name,
                 x.name, rn(2));
            g->feat |= F_MULTI_EINSUM;
        } else {
            int64_t d[2] = {x.d[0], y.d[1]};
            o = new_tensor(g, 2, d);
            emit(g, "%s = einsum(%s, %s, \"i k, k j -> i j\")\n", g->t[o].name, x.name, y.name);
        }
        break;
    }
    g->nops++;
    return o;
}

/* add() of `last` and 1 to 3 other tensors of its shape (the most recent
 * first): many ops that all see each other. */
static int op_addn(gen *g, int last)
{
    int cand[128], nc = 0;
    for (int i = g->nt - 1; i >= 0 && nc < 128; i--)
        if (i != last && same_shape(&g->t[i], &g->t[last]))
            cand[nc++] = i;
    if (nc == 0)
        return op_same(g, last);
    int k = 1 + rn(3), in[4] = {last}, n = 1;
    for (int j = 0; j < nc && n <= k; j++)
        if (rn(4) != 0 || nc - j <= k - n + 1)
            in[n++] = cand[j];
    int o = new_tensor(g, g->t[last].rank, g->t[last].d);
    emit(g, "%s = add(%s", g->t[o].name, g->t[in[0]].name);
    for (int j = 1; j < n; j++)
        emit(g, ", %s", g->t[in[j]].name);
    emit(g, ", pw=%d)\n", rn(2));
    g->nops++;
    g->feat |= F_DENSE;
    return o;
}

/* Writes one random model. */
static void gen_model(gen *g, int *p, int *cutoff)
{
    memset(g, 0, sizeof *g);
    *p = 1 + rn(8);
    int conv = rn(10) < 3;
    /* bigger p: a bigger cutoff keeps the brute-force space small */
    *cutoff = *p <= 2 ? pick((const int[]){1, 2, 4}, 3)
            : *p <= 4 ? pick((const int[]){1, 2, 4, 4}, 4)
                      : pick((const int[]){2, 4, 4}, 3);
    emit(g, "model g\ncutoff %d\n", *cutoff);
    int x;
    if (conv) {
        g->feat |= F_CONV;
        int64_t d[4] = {pick((const int[]){2, 4, 8}, 3), pick((const int[]){4, 8}, 2),
                        pick((const int[]){4, 8}, 2), 0};
        d[3] = d[2];
        x = new_tensor(g, 4, d);
        emit(g, "input %s[b=%lld, c=%lld, h=%lld, w=%lld]\n", g->t[x].name, (long long)d[0],
             (long long)d[1], (long long)d[2], (long long)d[3]);
    } else {
        int64_t d[2] = {pick((const int[]){4, 8}, 2), pick(SIZES2, 4)};
        x = new_tensor(g, 2, d);
        emit(g, "input %s[b=%lld, f=%lld]\n", g->t[x].name, (long long)d[0], (long long)d[1]);
    }
    if (!conv && *p >= 2 && rn(4) == 0) {
        /* a banded DAG: each op adds up two or three of the last four
         * activations (treewidth 3: dependent sets of 3 and more) */
        int band[128], nb = 0, band_ops = 5 + rn(*p <= 3 ? 4 : 2);
        band[nb++] = op_same(g, x);
        band[nb++] = op_same(g, band[0]);
        while (g->nops < band_ops) {
            int o = new_tensor(g, 2, g->t[x].d);
            int k = 1 + rn(2); /* others besides the last */
            emit(g, "%s = add(%s", g->t[o].name, g->t[band[nb - 1]].name);
            int used = 0;
            for (int j = nb - 2; j >= 0 && j >= nb - 4 && used < k; j--)
                if (rn(3) != 0 || j == (nb - 4 > 0 ? nb - 4 : 0)) {
                    emit(g, ", %s", g->t[band[j]].name);
                    used++;
                }
            emit(g, ", pw=%d)\n", rn(3));
            g->nops++;
            band[nb++] = rn(3) ? o : op_same(g, o);
        }
        g->feat |= F_DENSE;
        return;
    }
    int second = -1;
    if (rn(6) == 0) {
        g->feat |= F_TWO_INPUTS;
        gtensor y = g->t[x];
        second = new_tensor(g, y.rank, y.d);
        if (y.rank == 4)
            emit(g, "input %s[b=%lld, c=%lld, h=%lld, w=%lld]\n", g->t[second].name,
                 (long long)y.d[0], (long long)y.d[1], (long long)y.d[2], (long long)y.d[3]);
        else
            emit(g, "input %s[b=%lld, f=%lld]\n", g->t[second].name, (long long)y.d[0],
                 (long long)y.d[1]);
    }
    /* small graphs at big p, larger at small p */
    int target = *p == 1 ? 3 + rn(6) : *p <= 3 ? 2 + rn(6) : 2 + rn(4);
    /* the first op consumes an input */
    int last = op_unary(g, x);
    if (second >= 0)
        op_unary(g, second);
    int structure = rn(8);
    while (g->nops < target) {
        switch (structure) {
        case 0: /* chain */
            last = op_unary(g, last);
            g->feat |= F_CHAIN;
            break;
        case 1: { /* diamond */
            int a = op_same(g, last), b = op_same(g, last);
            int j = op_join(g, a, b);
            last = j >= 0 ? j : a;
            g->feat |= F_DIAMOND;
            break;
        }
        case 2: { /* inception: branches that differ along dim 1, concat */
            int nb = 2 + rn(2), br[3];
            gtensor s = g->t[last];
            for (int k = 0; k < nb; k++) {
                if (s.rank == 4)
                    br[k] = rn(3) ? op_conv(g, last, pick((const int[]){4, 8}, 2)) : op_same(g, last);
                else if (s.rank == 2 && rn(3))
                    br[k] = op_unary(g, last);
                else
                    br[k] = op_same(g, last);
            }
            /* concat every branch that fits the first */
            char names[256];
            snprintf(names, sizeof names, "%s", g->t[br[0]].name);
            int64_t d[4];
            memcpy(d, g->t[br[0]].d, sizeof d);
            int joined = 1;
            for (int k = 1; k < nb; k++)
                if (concat_ok(&g->t[br[0]], &g->t[br[k]])) {
                    strcat(names, ", ");
                    strcat(names, g->t[br[k]].name);
                    d[1] += g->t[br[k]].d[1];
                    joined++;
                }
            if (joined >= 2) {
                int o = new_tensor(g, g->t[br[0]].rank, d);
                emit(g, "%s = concat(%s, axis=1)\n", g->t[o].name, names);
                g->nops++;
                g->feat |= F_INCEPTION;
                last = o;
            } else {
                last = br[0];
            }
            break;
        }
        case 3: { /* the same tensor twice into one op */
            int j = op_join(g, last, last);
            last = j >= 0 ? j : op_unary(g, last);
            break;
        }
        case 4: { /* split, then join the parts */
            gtensor s = g->t[last];
            if (s.rank >= 2 && s.d[1] % 2 == 0) {
                int64_t d[4];
                memcpy(d, s.d, sizeof d);
                d[1] /= 2;
                int a = new_tensor(g, s.rank, d), b = new_tensor(g, s.rank, d);
                emit(g, "%s, %s = split(%s, axis=1)\n", g->t[a].name, g->t[b].name, s.name);
                g->nops++;
                int j = op_join(g, a, b);
                last = j >= 0 ? j : a;
                g->feat |= F_SPLIT_JOIN;
            } else {
                last = op_unary(g, last);
            }
            break;
        }
        case 6:
        case 7: /* dense DAG: shape-keeping ops, each added to earlier ones */
            last = rn(2) ? op_addn(g, last) : op_same(g, last);
            break;
        default: { /* random DAG: any earlier activation or input */
            int a = rn(g->nt);
            if (rn(2)) {
                int b = rn(g->nt);
                int j = op_join(g, a, b);
                last = j >= 0 ? j : op_unary(g, a);
            } else {
                last = op_unary(g, a);
            }
            break;
        }
        }
        structure = rn(3) ? structure : rn(8);
    }
}

/* 1 if some op of the problem has no edge at all (an isolated vertex). */
static int has_isolated_op(const sb_problem *pb)
{
    int n = pb->m->nops, any = 0;
    int *deg = calloc((size_t)n, sizeof *deg);
    assert_non_null(deg);
    for (int k = 0; k < pb->nedges; k++) {
        deg[pb->edges[k].src]++;
        deg[pb->edges[k].dst]++;
    }
    for (int i = 0; i < n; i++)
        any |= deg[i] == 0;
    free(deg);
    return any;
}

/* sb_search in a forked child, for inputs that crash the library (so one
 * crash fails one check, not the whole program). Returns the wait status;
 * when the child exited normally, *rc and (on success) r->total_cost and
 * r->choice (malloc'd) hold its result. */
static int g_child_crashed; /* after the first crash, children keep quiet */
static int g_bf_isolated_ok; /* test_bf_isolated_op passed: no need to fork */

static int search_forked(const sb_problem *pb, sb_algo algo, int *rc, sb_result *r)
{
    int n = pb->m->nops, fd[2];
    assert_int_equal(pipe(fd), 0);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fd[0]);
        if (g_child_crashed) { /* one sanitizer report is enough */
            int null = open("/dev/null", O_WRONLY);
            if (null >= 0)
                dup2(null, 2);
        }
        sb_search_opts so = {.algo = algo};
        sb_result cr;
        sb_error err = {0};
        int crc = sb_search(pb, &so, &cr, &err);
        int ok = write(fd[1], &crc, sizeof crc) == (ssize_t)sizeof crc;
        if (crc == 0) {
            ok &= write(fd[1], &cr.total_cost, sizeof cr.total_cost) == (ssize_t)sizeof(double);
            ok &= write(fd[1], cr.choice, (size_t)n * sizeof(int)) == (ssize_t)((size_t)n * sizeof(int));
            sb_result_free(&cr);
        }
        _exit(ok ? 0 : 3);
    }
    close(fd[1]);
    memset(r, 0, sizeof *r);
    *rc = -2;
    FILE *f = fdopen(fd[0], "rb");
    assert_non_null(f);
    if (fread(rc, sizeof *rc, 1, f) == 1 && *rc == 0) {
        r->choice = calloc((size_t)n, sizeof *r->choice);
        assert_non_null(r->choice);
        if (fread(&r->total_cost, sizeof r->total_cost, 1, f) != 1
            || fread(r->choice, sizeof(int), (size_t)n, f) != (size_t)n)
            *rc = -2;
    }
    fclose(f);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (WIFSIGNALED(status) || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        g_child_crashed = 1;
    return status;
}

static int crashed(int status)
{
    return WIFSIGNALED(status) || !WIFEXITED(status) || WEXITSTATUS(status) != 0;
}

/* ------------------------------------------------------- the DP checks -- */

static void dump_model(const char *text, int p, int cutoff)
{
    print_message("---- model (p=%d, cutoff %d) ----\n%s--------\n", p, cutoff, text);
}

static void check_result(const sb_problem *pb, const sb_result *r, const char *what,
                         const char *text)
{
    int n = pb->m->nops;
    for (int i = 0; i < n; i++)
        if (r->choice[i] < 0 || r->choice[i] >= pb->cfg[i].n) {
            dump_model(text, pb->p, pb->cp.cutoff);
            fail_msg("%s: choice[%d] = %d out of range", what, i, r->choice[i]);
        }
    double f = sb_strategy_cost(pb, r->choice);
    if (rel_diff(f, r->total_cost) > 1e-9) {
        dump_model(text, pb->p, pb->cp.cutoff);
        fail_msg("%s: total_cost %.17g but F(choice) = %.17g", what, r->total_cost, f);
    }
}

static void check_order(const sb_problem *pb, const int *order, const char *text)
{
    int n = pb->m->nops;
    char *seen = calloc((size_t)n, 1);
    assert_non_null(seen);
    for (int i = 0; i < n; i++) {
        if (order[i] < 0 || order[i] >= n || seen[order[i]]) {
            dump_model(text, pb->p, pb->cp.cutoff);
            fail_msg("the vertex order is not a permutation (position %d: %d)", i, order[i]);
        }
        seen[order[i]] = 1;
    }
    free(seen);
}

/* Searches pb with the DP in PaSE order, the DP in breadth-first order and
 * brute force; fails unless all three optima agree and each total is F of
 * its choice. A breadth-first search that crashes (contained in a child:
 * see test_bf_isolated_op) is counted in *bf_crashes instead. */
static int g_dep_hist[8]; /* checked problems by the PaSE order's largest dependent set */
/* the DP's shortcuts met on the checked problems (the tests below make sure
 * they are, so that a broken shortcut shows) */
static long long g_copied, g_merged, g_bounded, g_vector, g_colclass, g_entwise, g_pruned_problems,
    g_pruned_configs;
static int g_checks; /* problems checked: every other one without the vector scan */

/* A search under so (`how` names it) must pick the plain DP's (*plain)
 * config for every op; its result into *out. */
static void same_as_plain(const sb_problem *pb, const sb_search_opts *so, const sb_result *plain,
                          const char *text, const char *what, const char *how, sb_result *out)
{
    sb_error err = {0};
    if (sb_search(pb, so, out, &err) != 0)
        fail_msg("%s: search with %s failed: %s", what, how, err.msg);
    for (int i = 0; i < pb->m->nops; i++)
        if (out->choice[i] != plain->choice[i]) {
            dump_model(text, pb->p, pb->cp.cutoff);
            fail_msg("LIBRARY BUG? %s: op %d: config %d with %s, %d plain (totals %.17g, %.17g)",
                     what, i, out->choice[i], how, plain->choice[i], out->total_cost,
                     plain->total_cost);
        }
}

static void check_three_ways(const sb_problem *pb, const char *text, const char *what,
                             int *bf_crashes)
{
    int n = pb->m->nops;
    sb_result rp, rb, rx;
    sb_error err = {0};
    /* in turn: the DP's own choice of scan (on these small problems the
     * vector scan of this CPU), the bounded and threshold scans, and the
     * vector scan forced with AVX2 and with the generic kernel */
    int turn = g_checks++ % 6;
    static const int SCAN[] = {0, 1, 1, 2, 1, 2};
    static const char *const ISA[] = {"", "", "", "avx2", "", "generic"};
    setenv("SB_DP_ISA", ISA[turn], 1);
    sb_search_opts so = {.algo = SB_ALGO_PASE, .scan = SCAN[turn]};
    if (sb_search(pb, &so, &rp, &err) != 0) {
        dump_model(text, pb->p, pb->cp.cutoff);
        fail_msg("%s: PaSE-order search failed: %s", what, err.msg);
    }
    check_result(pb, &rp, "PaSE order", text);
    check_order(pb, rp.order, text);
    g_dep_hist[rp.max_dep_set < 7 ? rp.max_dep_set : 7]++;
    if (sb_search_brute(pb, &rx, &err) != 0) {
        dump_model(text, pb->p, pb->cp.cutoff);
        fail_msg("%s: brute force failed: %s", what, err.msg);
    }
    check_result(pb, &rx, "brute force", text);
    if (rel_diff(rp.total_cost, rx.total_cost) > 1e-9) {
        dump_model(text, pb->p, pb->cp.cutoff);
        fail_msg("LIBRARY BUG? %s (%d ops, p=%d): DP in PaSE order %.17g, brute force %.17g", what,
                 n, pb->p, rp.total_cost, rx.total_cost);
    }
    /* the shortcuts change nothing: the plain DP picks the same configs */
    sb_result rr;
    so.plain = 1;
    if (sb_search(pb, &so, &rr, &err) != 0) {
        dump_model(text, pb->p, pb->cp.cutoff);
        fail_msg("%s: plain search failed: %s", what, err.msg);
    }
    so.plain = 0;
    for (int i = 0; i < n; i++)
        if (rr.choice[i] != rp.choice[i]) {
            dump_model(text, pb->p, pb->cp.cutoff);
            fail_msg("LIBRARY BUG? %s: op %d: config %d with the DP's shortcuts, %d without "
                     "(totals %.17g, %.17g)",
                     what, i, rp.choice[i], rr.choice[i], rp.total_cost, rr.total_cost);
        }
    assert_true(rr.entries_copied == 0 && rr.configs_merged == 0 && rr.rows_bounded == 0
                && rr.rows_vector == 0 && rr.rows_colclass == 0);
    /* the column-class scan wherever it applies (this turn's kernel, the
     * vector scan forced): the plain DP's configs too */
    sb_result rc;
    sb_search_opts sc = {.algo = SB_ALGO_PASE, .scan = 2, .colclass = 2,
                         .entwise = turn % 2 ? 2 : 1}; /* with and without entry-wise */
    same_as_plain(pb, &sc, &rr, text, what, "the column-class scan", &rc);
    g_colclass += rc.rows_colclass;
    sb_result_free(&rc);
    /* the entry-wise scan wherever it applies (no column classes) */
    sc = (sb_search_opts){.algo = SB_ALGO_PASE, .scan = 2, .colclass = 1, .entwise = 2};
    same_as_plain(pb, &sc, &rr, text, what, "the entry-wise scan", &rc);
    g_entwise += rc.rows_entwise;
    sb_result_free(&rc);
    unsetenv("SB_DP_ISA");
    sb_result_free(&rr);
    g_copied += rp.entries_copied;
    g_merged += rp.configs_merged;
    g_bounded += rp.rows_bounded;
    g_vector += rp.rows_vector;
    /* with dominated configs dropped first: the same optimum */
    sb_result rq;
    so.prune = 1;
    if (sb_search(pb, &so, &rq, &err) != 0) {
        dump_model(text, pb->p, pb->cp.cutoff);
        fail_msg("%s: pruned search failed: %s", what, err.msg);
    }
    so.prune = 0;
    check_result(pb, &rq, "PaSE order, pruned", text);
    assert_true(rq.configs_kept <= rq.configs_total && rq.configs_kept >= n);
    g_pruned_problems += rq.configs_kept < rq.configs_total;
    g_pruned_configs += rq.configs_total - rq.configs_kept;
    if (rel_diff(rq.total_cost, rx.total_cost) > 1e-9) {
        dump_model(text, pb->p, pb->cp.cutoff);
        fail_msg("LIBRARY BUG? %s (%d ops, p=%d): pruned DP %.17g (%ld of %ld configs kept), "
                 "brute force %.17g",
                 what, n, pb->p, rq.total_cost, rq.configs_kept, rq.configs_total, rx.total_cost);
    }
    sb_result_free(&rq);
    so.algo = SB_ALGO_BF;
    if (!g_bf_isolated_ok && has_isolated_op(pb)) {
        int rc, status = search_forked(pb, SB_ALGO_BF, &rc, &rb);
        if (crashed(status)) {
            (*bf_crashes)++;
        } else {
            if (rc != 0) {
                dump_model(text, pb->p, pb->cp.cutoff);
                fail_msg("%s: BF-order search failed", what);
            }
            check_result(pb, &rb, "BF order", text);
            if (rel_diff(rb.total_cost, rx.total_cost) > 1e-9) {
                dump_model(text, pb->p, pb->cp.cutoff);
                fail_msg("LIBRARY BUG? %s (%d ops, p=%d): DP in BF order %.17g, brute force %.17g",
                         what, n, pb->p, rb.total_cost, rx.total_cost);
            }
        }
        sb_result_free(&rb);
    } else {
        if (sb_search(pb, &so, &rb, &err) != 0) {
            dump_model(text, pb->p, pb->cp.cutoff);
            fail_msg("%s: BF-order search failed: %s", what, err.msg);
        }
        check_result(pb, &rb, "BF order", text);
        check_order(pb, rb.order, text);
        if (rel_diff(rb.total_cost, rx.total_cost) > 1e-9) {
            dump_model(text, pb->p, pb->cp.cutoff);
            fail_msg("LIBRARY BUG? %s (%d ops, p=%d): DP in BF order %.17g, brute force %.17g",
                     what, n, pb->p, rb.total_cost, rx.total_cost);
        }
        sb_result_free(&rb);
    }
    sb_result_free(&rp);
    sb_result_free(&rx);
}

static void report_bf_crashes(int bf_crashes, int isolated)
{
    if (bf_crashes)
        fail_msg("LIBRARY BUG: sb_search(SB_ALGO_BF) crashed or aborted on %d of %d graphs "
                 "with an op that has no edges (search/order.c, sb_order_bf: "
                 "qsort(nb[v].v, 0, ...) with nb[v].v == NULL); every other check passed",
                 bf_crashes, isolated);
}

static void test_dp_equals_brute_force(void **state)
{
    (void)state;
    g_rng = 0x2545F4914F6CDD1DULL;
    int checked = 0, skipped = 0, feat_count[F_NFEAT] = {0}, by_p[9] = {0};
    int bf_crashes = 0, isolated = 0, perturbed = 0;
    double max_space = 0, t0 = sb_now();
    int64_t total_space = 0;
    gen *g = malloc(sizeof *g);
    assert_non_null(g);
    for (int gi = 0; gi < NGRAPHS; gi++) {
        int p, cutoff;
        gen_model(g, &p, &cutoff);
        sb_model m;
        sb_error err = {0};
        if (sb_model_parse(g->text, g->len, "random.model", NULL, 0, &m, &err) != 0) {
            dump_model(g->text, p, cutoff);
            fail_msg("graph %d: generated model does not parse: %s", gi, err.msg);
        }
        assert_int_equal(m.nops, g->nops);
        sb_cost_params cp;
        sb_cost_params_default(&cp);
        cp.cutoff = rn(4) == 0 ? 1 : 0; /* 0: the model's own */
        sb_problem pb;
        if (sb_problem_build(&m, p, &cp, &pb, &err) != 0) {
            dump_model(g->text, p, cutoff);
            fail_msg("graph %d: problem: %s", gi, err.msg);
        }
        double space = 1;
        for (int i = 0; i < m.nops; i++)
            space *= pb.cfg[i].n;
        if (space > MAX_SPACE) {
            skipped++;
        } else {
            char what[128];
            snprintf(what, sizeof what, "random graph %d", gi);
            int before = bf_crashes;
            check_three_ways(&pb, g->text, what, &bf_crashes);
            if (bf_crashes > before && before == 0)
                dump_model(g->text, p, pb.cp.cutoff);
            isolated += has_isolated_op(&pb);
            /* The same graph on a machine with faster links: at the default
             * 5000 FLOP per word, moving data dominates these tiny ops and
             * most optima avoid communication; cheaper words make compute
             * and communication trade off, so a DP that mis-adds a table
             * picks a worse strategy. */
            if (space <= MAX_SPACE2) {
                sb_cost_params cp2 = cp;
                cp2.gbs = 16.0 * pow(10.0, 1 + rn(4)); /* 500 .. 0.5 FLOP per word */
                sb_problem pb2;
                if (sb_problem_build(&m, p, &cp2, &pb2, &err) != 0)
                    fail_msg("graph %d: problem: %s", gi, err.msg);
                /* and vertex costs scaled by random factors in [1/4, 4]: the
                 * DP is exact for any vertex costs, and a rougher landscape
                 * makes a wrong table visible */
                for (int i = 0; i < m.nops; i++)
                    for (int k = 0; k < pb2.cfg[i].n; k++)
                        pb2.cfg[i].cost[k] *= pow(2.0, (double)rn(4001) / 1000.0 - 2.0);
                snprintf(what, sizeof what, "random graph %d at %g GB/s, perturbed vertex costs",
                         gi, cp2.gbs);
                check_three_ways(&pb2, g->text, what, &bf_crashes);
                isolated += has_isolated_op(&pb2);
                sb_problem_free(&pb2);
                total_space += (int64_t)space;
                perturbed++;
            }
            checked++;
            by_p[p]++;
            total_space += (int64_t)space;
            if (space > max_space)
                max_space = space;
            for (int k = 0; k < F_NFEAT; k++)
                feat_count[k] += (g->feat >> k) & 1;
        }
        sb_problem_free(&pb);
        sb_model_free(&m);
    }
    free(g);
    print_message("DP vs brute force: %d graphs checked (%d also perturbed), %d skipped "
                  "(space > %.0e), largest space %.0f, %lld strategies in all, %.1fs\n",
                  checked, perturbed, skipped, MAX_SPACE, max_space, (long long)total_space,
                  sb_now() - t0);
    print_message("  by p:");
    for (int p = 1; p <= 8; p++)
        print_message(" %d:%d", p, by_p[p]);
    print_message("\n  largest dependent set (PaSE order):");
    for (int k = 0; k < 8; k++)
        print_message(" %d%s:%d", k, k == 7 ? "+" : "", g_dep_hist[k]);
    print_message("\n  shapes:");
    for (int k = 0; k < F_NFEAT; k++)
        print_message(" %s %d%s", feat_names[k], feat_count[k], k + 1 < F_NFEAT ? "," : "\n");
    assert_true(checked >= MIN_CHECKED);
    /* every shape family is covered */
    for (int k = 0; k < F_NFEAT; k++)
        if (feat_count[k] < 5)
            fail_msg("only %d checked graphs of shape '%s'", feat_count[k], feat_names[k]);
    for (int p = 1; p <= 8; p++)
        assert_true(by_p[p] > 0);
    /* tables over three or more vertices are met, not just chains and pairs */
    int big = 0;
    for (int k = 3; k < 8; k++)
        big += g_dep_hist[k];
    if (big < 20)
        fail_msg("only %d problems with a dependent set of 3 or more", big);
    /* the shortcuts were taken, so the comparisons above cover them */
    print_message("  shortcuts: %lld entries copied, %lld configs merged, %lld bounded minima, "
                  "%lld vector minima (forced: column-class %lld, entry-wise %lld); pruning "
                  "dropped %lld configs in %lld problems\n",
                  g_copied, g_merged, g_bounded, g_vector, g_colclass, g_entwise,
                  g_pruned_configs, g_pruned_problems);
    if (g_copied < 1000 || g_merged < 100 || g_bounded < 200 || g_vector < 200
        || g_colclass < 100 || g_entwise < 100 || g_pruned_problems < 50)
        fail_msg("too few shortcuts met to test them: %lld entries copied, %lld configs merged, "
                 "%lld bounded minima, %lld vector minima, %lld column-class minima, %lld "
                 "problems pruned",
                 g_copied, g_merged, g_bounded, g_vector, g_colclass, g_pruned_problems);
    report_bf_crashes(bf_crashes, isolated);
}

/* ---- the search under a memory limit against brute force ------------------ */

/* Every strategy's cost and memory (space <= MAX_SPACE2), by odometer. */
static int64_t enumerate_all(const sb_problem *pb, sb_optimizer opt, double **cost, double **mem)
{
    int n = pb->m->nops;
    int64_t total = 1;
    for (int i = 0; i < n; i++)
        total *= pb->cfg[i].n;
    *cost = malloc((size_t)total * sizeof **cost);
    *mem = malloc((size_t)total * sizeof **mem);
    int *cur = calloc(n > 0 ? (size_t)n : 1u, sizeof *cur);
    assert_true(*cost && *mem && cur);
    for (int64_t k = 0; k < total; k++) {
        (*cost)[k] = sb_strategy_cost(pb, cur);
        (*mem)[k] = sb_strategy_memory(pb, cur, opt, NULL);
        for (int i = n - 1; i >= 0 && ++cur[i] == pb->cfg[i].n; i--)
            cur[i] = 0;
    }
    free(cur);
    return total;
}

/* The memory-limited search's shortcuts against it (r, its result at
 * limit, the optimum costing best): the Pareto filter by scan
 * (plain_pareto), and an upper bound (sb_search_within_ub) at the
 * optimum's cost, at the costliest strategy that fits and at one under the
 * optimum (nothing fits under it: the search without the bound again),
 * each the same strategy and cost. */
static void within_same(const sb_problem *pb, sb_optimizer opt, double limit, double best,
                        const double *cost, const double *mem, int64_t total, const sb_result *r,
                        const char *text)
{
    double worst = best;
    for (int64_t k = 0; k < total; k++)
        if (mem[k] <= limit && cost[k] > worst)
            worst = cost[k];
    const double ubs[4] = {best, worst, 0.5 * best, NAN};
    for (int q = 0; q < 4; q++) {
        sb_search_opts so = {.algo = SB_ALGO_PASE, .plain_pareto = q == 3};
        sb_result r2;
        sb_error err = {0};
        double least;
        int rc = sb_search_within_ub(pb, &so, limit, opt, q == 3 ? INFINITY : ubs[q], &r2, &least,
                                     &err);
        if (rc || r2.total_cost != r->total_cost
            || memcmp(r2.choice, r->choice, (size_t)pb->m->nops * sizeof *r->choice)) {
            dump_model(text, pb->p, pb->cp.cutoff);
            fail_msg("LIBRARY BUG? limit %.17g, %s %.17g: search %.17g, without %.17g (rc %d)",
                     limit, q == 3 ? "plain Pareto" : "upper bound", ubs[q],
                     rc ? NAN : r2.total_cost, r->total_cost, rc);
        }
        sb_result_free(&r2);
    }
}

/* For one problem and one limit: sb_search_within equals the least cost of
 * the strategies that fit (and its strategy fits), or fails with the least
 * memory of all when none fits. Returns 1 if the limit bound (the
 * unconstrained optimum did not fit), else 0. */
static int check_within(const sb_problem *pb, sb_optimizer opt, double limit, const double *cost,
                        const double *mem, int64_t total, const char *text)
{
    double best = INFINITY, least = INFINITY, free_best = INFINITY, free_mem = 0;
    for (int64_t k = 0; k < total; k++) {
        if (mem[k] <= limit && cost[k] < best)
            best = cost[k];
        if (mem[k] < least)
            least = mem[k];
        if (cost[k] < free_best || (cost[k] == free_best && mem[k] < free_mem))
            free_best = cost[k], free_mem = mem[k];
    }
    sb_search_opts so = {.algo = SB_ALGO_PASE};
    sb_result r;
    sb_error err = {0};
    double got_least;
    int rc = sb_search_within(pb, &so, limit, opt, &r, &got_least, &err);
    if (!isfinite(best)) {
        if (rc == 0 || err.code != SB_EXIT_INPUT || rel_diff(got_least, least) > 1e-9) {
            dump_model(text, pb->p, pb->cp.cutoff);
            fail_msg("LIBRARY BUG? limit %.17g: nothing fits (least memory %.17g) but the search "
                     "said rc %d, least %.17g: %s", limit, least, rc, got_least, err.msg);
        }
        return 1;
    }
    if (rc != 0) {
        dump_model(text, pb->p, pb->cp.cutoff);
        fail_msg("limit %.17g: search failed: %s (brute force: %.17g fits)", limit, err.msg, best);
    }
    double m = sb_strategy_memory(pb, r.choice, opt, NULL);
    if (m > limit || rel_diff(r.total_cost, best) > 1e-9) {
        dump_model(text, pb->p, pb->cp.cutoff);
        fail_msg("LIBRARY BUG? limit %.17g: search %.17g at %.17g bytes, brute force %.17g", limit,
                 r.total_cost, m, best);
    }
    if (free_mem > limit) /* else the unconstrained optimum is the answer: no labels */
        within_same(pb, opt, limit, best, cost, mem, total, &r, text);
    sb_result_free(&r);
    return free_mem > limit;
}

/* A random graph's model and problem for the memory-limited tests: gen's
 * next model, links from compute-bound to communication-bound, the ZeRO
 * stage gi % 4 (the search's tables must follow it) and recomputation rc;
 * the space (product of config counts) into *space. */
static void random_problem(gen *g, int gi, sb_recompute_mode rc, sb_model *m, sb_problem *pb,
                           double *space)
{
    int p, cutoff;
    gen_model(g, &p, &cutoff);
    sb_error err = {0};
    assert_int_equal(sb_model_parse(g->text, g->len, "random.model", NULL, 0, m, &err), 0);
    sb_cost_params cp;
    sb_cost_params_default(&cp);
    cp.gbs = 16.0 * pow(10.0, 1 + rn(4));
    cp.zero = gi % 4;
    cp.recompute = rc;
    assert_int_equal(sb_problem_build(m, p, &cp, pb, &err), 0);
    *space = 1;
    for (int i = 0; i < m->nops; i++)
        *space *= pb->cfg[i].n;
}

static void test_within_equals_brute_force(void **state)
{
    (void)state;
    g_rng = 0x9E3779B97F4A7C15ULL;
    int checked = 0, bound = 0, none = 0;
    double t0 = sb_now();
    gen *g = malloc(sizeof *g);
    assert_non_null(g);
    for (int gi = 0; gi < NGRAPHS / 2; gi++) {
        sb_model m;
        sb_problem pb;
        double space;
        random_problem(g, gi, SB_RECOMPUTE_NONE, &m, &pb, &space);
        if (space <= MAX_SPACE2) {
            sb_optimizer opt = rn(2) ? SB_OPTIM_ADAM : SB_OPTIM_SGD;
            double *cost, *mem;
            int64_t total = enumerate_all(&pb, opt, &cost, &mem);
            double lo = INFINITY, hi = 0;
            for (int64_t k = 0; k < total; k++) {
                lo = mem[k] < lo ? mem[k] : lo;
                hi = mem[k] > hi ? mem[k] : hi;
            }
            /* limits: below the least (nothing fits), the least, and between */
            double limits[5] = {lo * 0.999, lo, lo + 0.25 * (hi - lo), lo + 0.5 * (hi - lo), hi};
            for (int j = 0; j < 5; j++) {
                int b = check_within(&pb, opt, limits[j], cost, mem, total, g->text);
                bound += b && j > 0;
                none += j == 0;
                checked++;
            }
            free(cost);
            free(mem);
        }
        sb_problem_free(&pb);
        sb_model_free(&m);
    }
    free(g);
    print_message("search within a memory limit vs brute force: %d (graph, limit) pairs, %d where "
                  "the limit excluded the unconstrained optimum, %d with nothing fitting, %.1fs\n",
                  checked, bound, none, sb_now() - t0);
    assert_true(checked >= 400);
    assert_true(bound >= 50); /* the constraint really decides, often */
}

/* Resident bytes and memory (resident + largest scratch) of every
 * strategy, in enumerate_all's order: what sb_lagrange_search prices. */
static void enumerate_res(const sb_problem *pb, sb_optimizer opt, int64_t total, double *res,
                          double *mem)
{
    int n = pb->m->nops;
    int *cur = calloc(n > 0 ? (size_t)n : 1u, sizeof *cur);
    assert_non_null(cur);
    for (int64_t k = 0; k < total; k++) {
        double r = 0.0, smax = 0.0;
        for (int v = 0; v < n; v++) {
            sb_mem mm;
            sb_problem_op_memory(pb, v, cur[v], opt, &mm);
            r += sb_mem_resident(&mm);
            smax = fmax(smax, mm.scratch);
        }
        res[k] = r, mem[k] = r + smax;
        for (int i = n - 1; i >= 0 && ++cur[i] == pb->cfg[i].n; i--)
            cur[i] = 0;
    }
    free(cur);
}

/* The configs of strategy number k of enumerate_all's order into x. */
static void strategy_at(const sb_problem *pb, int64_t k, int *x)
{
    for (int i = pb->m->nops - 1; i >= 0; i--) {
        x[i] = (int)(k % pb->cfg[i].n);
        k /= pb->cfg[i].n;
    }
}

typedef struct {
    double r, c;
    int fits;
} hpt;

static int hpt_cmp(const void *a, const void *b)
{
    const hpt *x = a, *y = b;
    if (x->r != y->r)
        return x->r < y->r ? -1 : 1;
    if (x->c != y->c)
        return x->c < y->c ? -1 : 1;
    return y->fits - x->fits;
}

/* The Lagrangian walk (sb_lagrange_search) against brute force over every
 * strategy, on random graphs at limits between their least and largest
 * memory: its answer fits and costs what it says; its dual bound is under
 * the optimum under the limit; the unconstrained optimum, when it fits, is
 * its answer (gap 0); the hull edge it ends on has no strategy under its
 * line; and where fitting is monotone along the lower hull of (resident,
 * cost) (every hull point, collinear ones included, fits up to some
 * resident size and none after), the answer costs no more than the
 * cheapest strict hull vertex that fits: the best any multiplier reaches
 * (a point inside a hull edge ties with its ends and is never the DP's
 * unique minimiser). The
 * walk started from seeds (random strategies and the cold walk's own
 * edge) gives the same answer there, or a seed that fits and costs less. */
static void test_lagrange_walk(void **state)
{
    (void)state;
    g_rng = 0x2545F4914F6CDD1DULL;
    int checked = 0, monotone = 0, edges = 0, walked = 0, exact = 0;
    long dps = 0;
    gen *g = malloc(sizeof *g);
    assert_non_null(g);
    for (int gi = 0; gi < NGRAPHS / 2; gi++) {
        sb_model m;
        sb_problem pb;
        double space;
        sb_error err = {0};
        random_problem(g, gi, SB_RECOMPUTE_NONE, &m, &pb, &space);
        if (space > MAX_SPACE2 || space < 4) {
            sb_problem_free(&pb);
            sb_model_free(&m);
            continue;
        }
        int n = m.nops;
        sb_optimizer opt = rn(2) ? SB_OPTIM_ADAM : SB_OPTIM_SGD;
        double *cost, *mem0;
        int64_t total = enumerate_all(&pb, opt, &cost, &mem0);
        double *res = malloc((size_t)total * sizeof *res), *mem = malloc((size_t)total * sizeof *mem);
        hpt *h = malloc((size_t)total * sizeof *h), *hull = malloc((size_t)total * sizeof *hull);
        int *choice = malloc((size_t)n * sizeof *choice), *bch = malloc((size_t)n * sizeof *bch);
        int *sd[7], nprev = 0, have_last = 0; /* sd[4], sd[5]: the previous limit's edge */
        int *last[2] = {malloc((size_t)n * sizeof(int)), malloc((size_t)n * sizeof(int))};
        for (int q = 0; q < 7; q++)
            sd[q] = malloc((size_t)n * sizeof *sd[q]);
        assert_true(res && mem && h && hull && choice && bch && sd[6] && last[0] && last[1]);
        enumerate_res(&pb, opt, total, res, mem);
        double lo = INFINITY, hi = 0;
        for (int64_t k = 0; k < total; k++)
            lo = fmin(lo, mem[k]), hi = fmax(hi, mem[k]);
        const double limits[4] = {lo, lo + 0.1 * (hi - lo), lo + 0.3 * (hi - lo),
                                  lo + 0.6 * (hi - lo)};
        for (int j = 0; j < 4; j++) {
            double limit = limits[j], best = INFINITY, ubest = INFINITY, umem = 0, ures = 0;
            for (int64_t k = 0; k < total; k++) {
                if (mem[k] <= limit && cost[k] < best)
                    best = cost[k];
                if (cost[k] < ubest)
                    ubest = cost[k], umem = mem[k], ures = res[k];
            }
            sb_search_opts so = {.algo = SB_ALGO_PASE};
            sb_lagrange_result R;
            assert_int_equal(sb_lagrange_search(&pb, &so, limit, opt, choice, &R, &err), 0);
            checked++;
            dps += R.dps;
            nprev = have_last ? 2 : 0; /* the previous limit's edge */
            if (have_last) {
                memcpy(sd[4], last[0], (size_t)n * sizeof *sd[4]);
                memcpy(sd[5], last[1], (size_t)n * sizeof *sd[5]);
            }
            have_last = 0;
            if (R.lam_edge >= 0 && isfinite(R.t)) { /* this limit's edge, for the next */
                sb_lagrange_result R0;
                assert_int_equal(sb_lagrange_search_seeded(&pb, &so, limit, opt, NULL, 0, last[0],
                                                           last[1], &R0, &err), 0);
                have_last = 1;
            }
            if (isfinite(R.t)) {
                double c = sb_strategy_cost(&pb, choice);
                int64_t k = 0;
                for (int v = 0; v < n; v++)
                    k = k * pb.cfg[v].n + choice[v];
                if (!(mem[k] <= limit) || fabs(c - R.t) > 1e-12 * fabs(c) || R.t < best * (1 - 1e-9))
                    fail_msg("LIBRARY BUG? limit %.17g: walk %.17g (strategy cost %.17g, memory "
                             "%.17g), optimum %.17g", limit, R.t, c, mem[k], best);
            } else if (isfinite(best) && best == ubest) {
                fail_msg("LIBRARY BUG? limit %.17g: walk found nothing, the optimum %.17g fits",
                         limit, best);
            }
            if (isfinite(best) && R.lb > best * (1 + 1e-9) + 1e-9)
                fail_msg("LIBRARY BUG? limit %.17g: dual bound %.17g over the optimum %.17g", limit,
                         R.lb, best);
            if (umem <= limit) {
                exact++;
                if (R.t != ubest || R.gap != 0.0)
                    fail_msg("LIBRARY BUG? limit %.17g: the unconstrained optimum %.17g fits, "
                             "walk %.17g gap %g", limit, ubest, R.t, R.gap);
                continue;
            }
            if (R.lam_edge >= 0) {
                edges++;
                double line = R.a_cost + R.lam_edge * R.a_res, under = INFINITY;
                for (int64_t k = 0; k < total; k++)
                    under = fmin(under, cost[k] + R.lam_edge * res[k]);
                if (under < line * (1 - 1e-9))
                    fail_msg("LIBRARY BUG? limit %.17g: the walk's edge at lambda %.17g has a "
                             "strategy under its line (%.17g < %.17g)", limit, R.lam_edge, under,
                             line);
                if (R.t > R.a_cost)
                    fail_msg("LIBRARY BUG? walk %.17g dearer than its edge's end %.17g", R.t,
                             R.a_cost);
            }
            /* the lower hull of (resident, cost), from the least resident
             * to the cheapest, collinear points kept */
            for (int64_t k = 0; k < total; k++)
                h[k] = (hpt){res[k], cost[k], mem[k] <= limit};
            qsort(h, (size_t)total, sizeof *h, hpt_cmp);
            int nh = 0;
            for (int64_t k = 0; k < total; k++) {
                if (nh && h[k].r == hull[nh - 1].r)
                    continue; /* not cheaper at the same bytes */
                if (nh && h[k].c >= hull[nh - 1].c)
                    continue; /* on the right of the cheapest so far: not on the lower-left hull */
                while (nh >= 2) {
                    const hpt *a = &hull[nh - 2], *b = &hull[nh - 1];
                    double cross = (b->r - a->r) * (h[k].c - a->c) - (b->c - a->c) * (h[k].r - a->r);
                    if (cross < 0)
                        nh--; /* b above the segment a-k */
                    else
                        break;
                }
                hull[nh++] = h[k];
            }
            int mono = 1, seen_out = 0;
            /* equal (resident, cost) pairs that fit differently break it too */
            for (int64_t k = 1; k < total; k++)
                if (h[k].r == h[k - 1].r && h[k].c == h[k - 1].c && h[k].fits != h[k - 1].fits)
                    mono = 0;
            double vsecond = INFINITY;
            double vbest = INFINITY; /* the cheapest strict vertex that fits: a point
                                        inside an edge is never a unique minimiser */
            for (int q = 0; q < nh; q++) {
                if (!hull[q].fits)
                    seen_out = 1;
                else if (seen_out)
                    mono = 0;
                int strict = q == 0 || q == nh - 1;
                if (!strict) {
                    const hpt *a = &hull[q - 1], *b = &hull[q], *c = &hull[q + 1];
                    strict = (b->r - a->r) * (c->c - a->c) - (b->c - a->c) * (c->r - a->r) != 0;
                }
                if (hull[q].fits && strict) {
                    if (hull[q].c < vbest)
                        vsecond = vbest, vbest = hull[q].c;
                    else if (hull[q].c < vsecond)
                        vsecond = hull[q].c;
                }
            }
            if (!mono)
                continue;
            monotone++;
            if (isfinite(vbest) && !(R.t <= vbest * (1 + 1e-12)))
                fail_msg("LIBRARY BUG? limit %.17g: walk %.17g, but a hull vertex that fits costs "
                         "%.17g (fitting monotone along the hull)", limit, R.t, vbest);
            /* seeded: random strategies, or the cold walk's own edge, and the
             * previous (lower) limit's edge, as a stage at other copies */
            int ns = 0, own = rn(2);
            for (; ns < 2 && !own; ns++)
                strategy_at(&pb, (int64_t)(rnd() % (uint64_t)total), sd[ns]);
            if (own && R.lam_edge >= 0 && isfinite(R.t)) {
                memcpy(sd[ns++], choice, (size_t)n * sizeof *choice);
                sb_lagrange_result R0;
                assert_int_equal(sb_lagrange_search_seeded(&pb, &so, limit, opt, NULL, 0, bch,
                                                           sd[ns], &R0, &err), 0);
                ns++;
            }
            for (int q = 0; q < nprev; q++)
                memcpy(sd[ns++], sd[4 + q], (size_t)n * sizeof *sd[0]);
            /* and, as seeds from another micro-batch size can be, one off the
             * hull: the cheapest that does not fit, with fewer resident bytes
             * than the unconstrained optimum, dearer than the second
             * cheapest strict vertex that fits (the walk can pass under it) */
            int64_t off = -1;
            for (int64_t k = 0; k < total; k++)
                if (mem[k] > limit && res[k] < ures && cost[k] > vsecond
                    && (off < 0 || cost[k] < cost[off]))
                    off = k;
            if (off >= 0 && isfinite(vsecond))
                strategy_at(&pb, off, sd[ns++]);
            sb_lagrange_result R2;
            assert_int_equal(sb_lagrange_search_seeded(&pb, &so, limit, opt,
                                                       (const int *const *)sd, ns, bch, NULL, &R2,
                                                       &err), 0);
            walked++;
            /* the cold walk's answer, or a seed that fits and costs less
             * (off the hull: under the relaxation's gap) */
            double want = R.t;
            for (int q = 0; q < ns; q++) {
                int64_t k = 0;
                for (int v = 0; v < n; v++)
                    k = k * pb.cfg[v].n + sd[q][v];
                if (mem[k] <= limit && cost[k] < want)
                    want = cost[k];
            }
            if (!(R2.t == want || (isfinite(want) && fabs(R2.t - want) <= 1e-12 * want)))
                fail_msg("LIBRARY BUG? limit %.17g: seeded walk %.17g (edge %g, %d DPs), cold "
                         "%.17g (edge %g, %d DPs), expected %.17g", limit, R2.t, R2.lam_edge,
                         R2.dps, R.t, R.lam_edge, R.dps, want);
        }
        for (int q = 0; q < 7; q++)
            free(sd[q]);
        free(last[0]), free(last[1]);
        free(cost), free(mem0), free(res), free(mem), free(h), free(hull), free(choice), free(bch);
        sb_problem_free(&pb);
        sb_model_free(&m);
    }
    free(g);
    print_message("Lagrangian walk vs brute force: %d (graph, limit) pairs, %d the unconstrained "
                  "optimum fitting, %d ending on a hull edge, %d with fitting monotone along the "
                  "hull (%d seeded walks equal), %.2f DPs a walk\n",
                  checked, exact, edges, monotone, walked, (double)dps / checked);
    assert_true(checked >= 300 && edges >= 50 && walked >= 50);
}

/* --recompute: "all" prices and sizes every recomputable op recomputed
 * (check_within as above, its brute force through sb_strategy_cost and
 * sb_strategy_memory, which follow cp.recompute); "auto" lets the search
 * choose per op, a second option beside the config: its result equals
 * brute force over every (strategy, recomputed ops) pair, cost
 * sb_strategy_cost plus sb_recompute_cost of each recomputed op, memory
 * sb_strategy_memory_rc. */
static void test_within_recompute_equals_brute_force(void **state)
{
    (void)state;
    g_rng = 0xC2B2AE3D27D4EB4FULL;
    int checked = 0, bound = 0, chosen = 0, all_checked = 0;
    double t0 = sb_now();
    gen *g = malloc(sizeof *g);
    assert_non_null(g);
    for (int gi = 0; gi < NGRAPHS / 2; gi++) {
        int p, cutoff;
        gen_model(g, &p, &cutoff);
        sb_model m;
        sb_error err = {0};
        assert_int_equal(sb_model_parse(g->text, g->len, "random.model", NULL, 0, &m, &err), 0);
        sb_cost_params cp;
        sb_cost_params_default(&cp);
        cp.gbs = 16.0 * pow(10.0, 1 + rn(4));
        cp.zero = gi % 4;
        cp.recompute = gi % 3 == 2 ? SB_RECOMPUTE_ALL : SB_RECOMPUTE_AUTO;
        sb_problem pb;
        assert_int_equal(sb_problem_build(&m, p, &cp, &pb, &err), 0);
        int n = m.nops, nrec = 0, idx[64];
        double space = 1;
        for (int i = 0; i < n; i++) {
            space *= pb.cfg[i].n;
            if (sb_op_recomputable(&m.ops[i]) && nrec < 64)
                idx[nrec++] = i;
        }
        sb_optimizer opt = rn(2) ? SB_OPTIM_ADAM : SB_OPTIM_SGD;
        if (cp.recompute == SB_RECOMPUTE_ALL && space <= MAX_SPACE2) {
            double *cost, *mem;
            int64_t total = enumerate_all(&pb, opt, &cost, &mem);
            double lo = INFINITY, hi = 0;
            for (int64_t k = 0; k < total; k++) {
                lo = mem[k] < lo ? mem[k] : lo;
                hi = mem[k] > hi ? mem[k] : hi;
            }
            double limits[3] = {lo * 0.999, lo + 0.25 * (hi - lo), lo + 0.5 * (hi - lo)};
            for (int j = 0; j < 3; j++)
                all_checked += 1 + 0 * check_within(&pb, opt, limits[j], cost, mem, total, g->text);
            free(cost);
            free(mem);
        }
        if (cp.recompute == SB_RECOMPUTE_AUTO && nrec <= 16 && space * (double)(1 << nrec) <= MAX_SPACE2) {
            int64_t total = (int64_t)space << nrec;
            double *cost = malloc((size_t)total * sizeof *cost), *mem = malloc((size_t)total * sizeof *mem);
            int *cur = calloc((size_t)n, sizeof *cur);
            unsigned char *rec = calloc((size_t)n, 1);
            assert_true(cost && mem && cur && rec);
            for (int64_t k = 0, a = 0; a < (int64_t)space; a++) {
                double base = sb_strategy_cost(&pb, cur);
                for (int mask = 0; mask < (1 << nrec); mask++, k++) {
                    cost[k] = base;
                    for (int b = 0; b < nrec; b++) {
                        int i = idx[b];
                        rec[i] = (unsigned char)((mask >> b) & 1);
                        if (rec[i])
                            cost[k] += sb_recompute_cost(&m, &m.ops[i],
                                                         pb.cfg[i].c + (size_t)cur[i] * (size_t)pb.cfg[i].ndims, &cp);
                    }
                    mem[k] = sb_strategy_memory_rc(&pb, cur, rec, opt, NULL);
                }
                for (int i = n - 1; i >= 0 && ++cur[i] == pb.cfg[i].n; i--)
                    cur[i] = 0;
            }
            double lo = INFINITY, hi = 0, plain_best = INFINITY, plain_mem = 0;
            for (int64_t k = 0; k < total; k++) {
                lo = mem[k] < lo ? mem[k] : lo;
                hi = mem[k] > hi ? mem[k] : hi;
                if (k % (1 << nrec) == 0 && cost[k] < plain_best) /* mask 0: nothing recomputed */
                    plain_best = cost[k], plain_mem = mem[k];
            }
            double limits[4] = {lo * 0.999, lo, lo + 0.25 * (hi - lo), lo + 0.5 * (hi - lo)};
            for (int j = 0; j < 4; j++) {
                double limit = limits[j], best = INFINITY, least = INFINITY;
                for (int64_t k = 0; k < total; k++) {
                    if (mem[k] <= limit && cost[k] < best)
                        best = cost[k];
                    least = mem[k] < least ? mem[k] : least;
                }
                sb_search_opts so = {.algo = SB_ALGO_PASE};
                sb_result r;
                double got_least;
                int rc = sb_search_within(&pb, &so, limit, opt, &r, &got_least, &err);
                checked++;
                if (!isfinite(best)) {
                    if (rc == 0 || rel_diff(got_least, least) > 1e-9) {
                        dump_model(g->text, pb.p, pb.cp.cutoff);
                        fail_msg("recompute auto, limit %.17g: nothing fits (least %.17g) but the "
                                 "search said rc %d, least %.17g", limit, least, rc, got_least);
                    }
                    continue;
                }
                if (rc) {
                    dump_model(g->text, pb.p, pb.cp.cutoff);
                    fail_msg("recompute auto, limit %.17g: %s (brute force: %.17g fits)", limit,
                             err.msg, best);
                }
                double got_mem = sb_strategy_memory_rc(&pb, r.choice, r.recompute, opt, NULL);
                if (got_mem > limit || rel_diff(r.total_cost, best) > 1e-9) {
                    dump_model(g->text, pb.p, pb.cp.cutoff);
                    fail_msg("recompute auto, limit %.17g: search %.17g at %.17g bytes, brute "
                             "force %.17g", limit, r.total_cost, got_mem, best);
                }
                bound += plain_mem > limit;
                for (int i = 0; r.recompute && i < n; i++)
                    if (r.recompute[i]) {
                        chosen++;
                        break;
                    }
                sb_result_free(&r);
            }
            free(cost);
            free(mem);
            free(cur);
            free(rec);
        }
        sb_problem_free(&pb);
        sb_model_free(&m);
    }
    free(g);
    print_message("search within a memory limit, --recompute auto vs brute force: %d (graph, "
                  "limit) pairs, %d where the limit excluded the plain optimum, %d choosing to "
                  "recompute; --recompute all: %d pairs; %.1fs\n",
                  checked, bound, chosen, all_checked, sb_now() - t0);
    assert_true(checked >= 100);
    assert_true(chosen >= 20); /* recomputing really decides, often */
    assert_true(all_checked >= 50);
}

/* Hand-written graphs the generator may not hit exactly. */
static void test_dp_fixed_graphs(void **state)
{
    (void)state;
    static const char *const models[] = {
        /* Inception-like module: four branches of convs and a pool, concat */
        "cutoff 2\n"
        "input x[b=4, c=4, h=4, w=4]\n"
        "a = conv(x, out=4)\n"
        "b1 = conv(x, out=4)\n"
        "b2 = conv(b1, out=4, kernel=3, pad=1)\n"
        "c = pool(x, kernel=3, stride=1, pad=1, type=avg)\n"
        "d = conv(c, out=4)\n"
        "y = concat(a, b2, d, axis=1)\n",
        /* residual block: the input feeds a conv chain and the add */
        "cutoff 2\n"
        "input x[b=4, c=4, h=4, w=4]\n"
        "s = batchnorm(x)\n"
        "a = conv(s, out=4)\n"
        "b = batchnorm(a)\n"
        "y = add(b, s, pw=1)\n",
        /* one tensor into both slots of add, einsum and stack */
        "cutoff 1\n"
        "input x[b=4, f=8]\n"
        "h = dense(x, units=4)\n"
        "a = add(h, h)\n"
        "e = einsum(h, h, \"i k, j k -> i j\")\n"
        "s = stack(a, a)\n",
        /* split outputs joined twice */
        "cutoff 1\n"
        "input x[b=4, f=8]\n"
        "h = softmax(x)\n"
        "p, q = split(h, axis=f)\n"
        "a = add(p, q)\n"
        "c = concat(q, p, axis=1)\n"
        "y = add(c, h)\n",
        /* an attention-like shape: stack, batched einsums, unstack */
        "cutoff 1\n"
        "input x[b=2, l=4, e=4]\n"
        "h = norm(x)\n"
        "s = stack(h, h, h, dim=three)\n"
        "q, k, v = unstack(s, axis=0)\n"
        "a = einsum(q, k, \"b l e, b m e -> b l m\")\n"
        "m = softmax(a, axis=2)\n"
        "o = einsum(m, v, \"b l m, b m e -> b l e\")\n",
        /* embedding, lstm, dense, loss: RNNLM in miniature */
        "cutoff 1\n"
        "input tok[b=4, s=4]\n"
        "e = embedding(tok, vocab=8, size=4, dim=u)\n"
        "r = lstm(e, layers=2)\n"
        "l = dense(r, units=8, dim=v)\n"
        "y = softmax_xent(l)\n",
        /* AlexNet's reshape between pooling and dense */
        "cutoff 2\n"
        "input x[b=4, c=4, h=4, w=4]\n"
        "p = pool(x, kernel=2, stride=2)\n"
        "f = reshape(p, shape=[b=4, g=-1])\n"
        "d = dense(f, units=8)\n"
        "y = softmax_xent(d)\n",
        /* two components */
        "cutoff 1\n"
        "input x[b=4, f=4]\n"
        "input z[b=4, f=4]\n"
        "a = norm(x)\n"
        "b = softmax(z)\n"
        "c = elementwise(a, pw=2)\n"
        "d = elementwise(b, pw=1)\n",
    };
    int bf_crashes = 0, isolated = 0, checked = 0;
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++)
        for (int p = 1; p <= 8; p++) {
            sb_model m;
            sb_error err = {0};
            if (sb_model_parse(models[i], strlen(models[i]), "fixed.model", NULL, 0, &m, &err))
                fail_msg("fixed model %zu: %s", i, err.msg);
            /* the default machine, and links 10 and 1000 times faster */
            for (int speed = 0; speed < 3; speed++) {
                sb_cost_params cp;
                sb_cost_params_default(&cp);
                cp.gbs *= speed == 0 ? 1 : speed == 1 ? 10 : 1000;
                sb_problem pb;
                assert_int_equal(sb_problem_build(&m, p, &cp, &pb, &err), 0);
                double space = 1;
                for (int k = 0; k < m.nops; k++)
                    space *= pb.cfg[k].n;
                if (space <= MAX_SPACE) {
                    char what[96];
                    snprintf(what, sizeof what, "fixed model %zu at p=%d, %g GB/s", i, p, cp.gbs);
                    check_three_ways(&pb, models[i], what, &bf_crashes);
                    isolated += has_isolated_op(&pb);
                    checked += speed == 0;
                }
                sb_problem_free(&pb);
            }
            sb_model_free(&m);
        }
    print_message("fixed graphs: %d (model, p) pairs checked\n", checked);
    assert_true(checked >= 40);
    report_bf_crashes(bf_crashes, isolated);
}

/* The smallest reproductions of the breadth-first ordering bug: an op with
 * no edge (a one-op model, or an op whose output nobody reads and whose
 * inputs are model inputs). */
static void test_bf_isolated_op(void **state)
{
    (void)state;
    static const char *const models[] = {
        "input x[b=4, f=8]\n"
        "y = softmax(x)\n",
        "input x[b=4, f=8]\n"
        "a = norm(x)\n"
        "b = softmax(a)\n"
        "c = dense(x, units=4)\n",
    };
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        sb_model m;
        sb_error err = {0};
        assert_int_equal(sb_model_parse(models[i], strlen(models[i]), "iso.model", NULL, 0, &m,
                                        &err),
                         0);
        sb_cost_params cp;
        sb_cost_params_default(&cp);
        sb_problem pb;
        assert_int_equal(sb_problem_build(&m, 4, &cp, &pb, &err), 0);
        assert_true(has_isolated_op(&pb));
        sb_result rb, rx;
        int rc, status = search_forked(&pb, SB_ALGO_BF, &rc, &rb);
        if (crashed(status)) {
            sb_result_free(&rb);
            sb_problem_free(&pb);
            sb_model_free(&m);
            fail_msg("LIBRARY BUG: sb_search(SB_ALGO_BF) crashed or aborted (wait status 0x%x; "
                     "see the sanitizer report above) on a model with an op without edges; "
                     "search/order.c sb_order_bf calls qsort(nb[v].v, 0, ...) with "
                     "nb[v].v == NULL, undefined behaviour (nonnull argument). Model:\n%s",
                     (unsigned)status, models[i]);
        }
        assert_int_equal(rc, 0);
        assert_int_equal(sb_search_brute(&pb, &rx, &err), 0);
        assert_true(rel_diff(rb.total_cost, rx.total_cost) <= 1e-9);
        sb_result_free(&rb);
        sb_result_free(&rx);
        sb_problem_free(&pb);
        sb_model_free(&m);
    }
    g_bf_isolated_ok = 1;
}

/* ---------------------------------------------------------- table limit -- */

/* The paper's models at the batches the tests search them at. */
static const struct paper_model {
    const char *model;
    int batch;
} PAPER_MODELS[] = {{"alexnet", 128}, {"inception3", 128}, {"resnet101", 128},
                    {"rnnlm", 64},    {"transformer", 64}};
enum { N_PAPER_MODELS = sizeof PAPER_MODELS / sizeof *PAPER_MODELS };

static void load_problem(const char *model, int batch, int p, sb_model *m, sb_problem *pb)
{
    sb_setting set = {.name = "batch", .value = batch};
    sb_error err = {0};
    if (sb_model_load(model, &set, 1, m, &err) != 0)
        fail_msg("%s: %s", model, err.msg);
    sb_cost_params cp;
    sb_cost_params_default(&cp);
    if (sb_problem_build(m, p, &cp, pb, &err) != 0)
        fail_msg("%s p=%d: %s", model, p, err.msg);
}

static void test_table_limit(void **state)
{
    (void)state;
    sb_model m;
    sb_problem pb;
    load_problem("alexnet", 128, 8, &m, &pb);
    sb_search_opts so = {.algo = SB_ALGO_PASE, .max_table_mb = 0.001};
    sb_result r;
    sb_error err = {0};
    assert_int_equal(sb_search(&pb, &so, &r, &err), -1);
    assert_true(err.code == SB_EXIT_INTERNAL || err.code == SB_EXIT_INPUT);
    if (!strstr(err.msg, "--max-table-mb"))
        fail_msg("the message should name --max-table-mb: %s", err.msg);
    assert_null(r.choice);
    assert_null(r.order);
    sb_result_free(&r); /* harmless after a failure */
    so.algo = SB_ALGO_BF;
    assert_int_equal(sb_search(&pb, &so, &r, &err), -1);
    assert_non_null(strstr(err.msg, "--max-table-mb"));
    sb_problem_free(&pb);
    sb_model_free(&m);

    /* the limit is exact: the search succeeds at its own peak and fails just
     * below it */
    load_problem("inception3", 128, 8, &m, &pb);
    so.algo = SB_ALGO_PASE;
    so.max_table_mb = 0;
    assert_int_equal(sb_search(&pb, &so, &r, &err), 0);
    double peak = r.peak_table_bytes, cost = r.total_cost;
    assert_true(peak > 0);
    sb_result_free(&r);
    so.max_table_mb = peak * (1 + 1e-9) / 1e6;
    if (sb_search(&pb, &so, &r, &err) != 0)
        fail_msg("search at its own peak (%.0f bytes) failed: %s", peak, err.msg);
    assert_true(r.total_cost == cost);
    sb_result_free(&r);
    so.max_table_mb = peak * (1 - 1e-6) / 1e6;
    assert_int_equal(sb_search(&pb, &so, &r, &err), -1);
    assert_non_null(strstr(err.msg, "--max-table-mb"));
    assert_null(r.choice);
    sb_problem_free(&pb);
    sb_model_free(&m);
}

/* ------------------------------------- pruning on the shipped models -- */

/* The paper's models at small p: the DP with its shortcuts (reuse of
 * repeated layers' eliminations included) picks the same configs as
 * without; with dominated configs dropped it gives the same total (to 1e-9
 * relative), and drops some. */
static void test_prune_shipped(void **state)
{
    (void)state;
    const struct paper_model *M = PAPER_MODELS;
    static const int P[] = {4, 8, 16};
    long long dropped = 0, reused = 0;
    for (size_t i = 0; i < N_PAPER_MODELS; i++)
        for (size_t j = 0; j < sizeof P / sizeof *P; j++) {
            sb_model m;
            sb_problem pb;
            load_problem(M[i].model, M[i].batch, P[j], &m, &pb);
            sb_search_opts so = {.algo = SB_ALGO_PASE};
            sb_result r0, r1;
            sb_error err = {0};
            if (sb_search(&pb, &so, &r0, &err))
                fail_msg("%s p=%d: %s", M[i].model, P[j], err.msg);
            /* the shortcuts: the same configs as the plain DP */
            sb_result rr;
            so.plain = 1;
            if (sb_search(&pb, &so, &rr, &err))
                fail_msg("%s p=%d, plain: %s", M[i].model, P[j], err.msg);
            so.plain = 0;
            for (int v = 0; v < m.nops; v++)
                if (rr.choice[v] != r0.choice[v])
                    fail_msg("%s p=%d: op '%s': config %d with the shortcuts, %d without",
                             M[i].model, P[j], m.ops[v].name, r0.choice[v], rr.choice[v]);
            sb_result_free(&rr);
            so.prune = 1;
            if (sb_search(&pb, &so, &r1, &err))
                fail_msg("%s p=%d, pruned: %s", M[i].model, P[j], err.msg);
            if (rel_diff(r0.total_cost, r1.total_cost) > 1e-9)
                fail_msg("%s p=%d: pruned %.17g, unpruned %.17g", M[i].model, P[j], r1.total_cost,
                         r0.total_cost);
            if (rel_diff(r1.total_cost, sb_strategy_cost(&pb, r1.choice)) > 1e-12)
                fail_msg("%s p=%d: pruned total is not F of its choice", M[i].model, P[j]);
            dropped += r1.configs_total - r1.configs_kept;
            reused += r0.eliminations_reused;
            sb_result_free(&r0);
            sb_result_free(&r1);
            sb_problem_free(&pb);
            sb_model_free(&m);
        }
    print_message("shipped models: %lld eliminations reused (repeated layers); pruning dropped "
                  "%lld configs in all\n",
                  reused, dropped);
    assert_true(dropped > 0);
    assert_true(reused > 0); /* so the comparison with the plain DP covers reuse */
}

/* ------------------------------------------- repeated layers -- */

/* A random model of `layers` equal layers (a `repeat` of one block): an
 * FF part (optionally gated, pre- or post-norm) with a residual add, and
 * optionally attention over a second input shared by every layer (as the
 * transformer's decoder reads the encoder's output). */
static void gen_layers(char *buf, size_t n, int *p)
{
    int b = pick((const int[]){8, 16, 32}, 3), sq = pick((const int[]){8, 16}, 2);
    int e = pick((const int[]){16, 32, 64}, 3), f = pick((const int[]){32, 64}, 2);
    int layers = 2 + rn(4), gated = rn(2), prenorm = rn(2), shared = rn(3) == 0;
    int attn = rn(2);
    *p = pick((const int[]){2, 4, 8, 16}, 4);
    size_t o = 0;
#define OUT(...) o += (size_t)snprintf(buf + o, o < n ? n - o : 0, __VA_ARGS__)
    OUT("model layers\ncutoff %d\n", 1 + rn(2));
    OUT("block layer(x%s)\n", shared ? ", mem" : "");
    OUT("  %s\n", prenorm ? "n = rmsnorm(x, axis=e)" : "n = add(x, x)");
    if (attn) {
        OUT("  c = einsum(\"b s e, b m e -> b s m\", n, %s)\n", shared ? "mem" : "n");
        OUT("  w = softmax(c, axis=m)\n");
        OUT("  z = einsum(\"b s m, b m e -> b s e\", w, %s)\n", shared ? "mem" : "n");
        OUT("  n2 = add(n, z)\n");
    } else if (shared) {
        OUT("  n2 = add(n, mem)\n");
    } else {
        OUT("  n2 = act(n, fn=relu)\n");
    }
    OUT("  weight w1[e=%d, f=%d]\n  weight w2[f=%d, e=%d]\n", e, f, f, e);
    OUT("  h = einsum(\"b s e, e f -> b s f\", n2, w1)\n");
    if (gated) {
        OUT("  weight w3[e=%d, f=%d]\n", e, f);
        OUT("  u = einsum(\"b s e, e f -> b s f\", n2, w3)\n  a = act(h, fn=silu)\n  g = mul(a, u)\n");
    } else {
        OUT("  g = act(h, fn=relu)\n");
    }
    OUT("  o = einsum(\"b s f, f e -> b s e\", g, w2)\n  r = add(x, o)\n");
    OUT("  %s\n  return y\nend\n", prenorm ? "y = add(r, r)" : "y = norm(r, axis=e)");
    OUT("input x[b=%d, s=%d, e=%d]\n", b, sq, e);
    if (shared)
        OUT("mem = act(x, fn=relu)\n");
    OUT("repeat %d\n  x = layer(x%s)\nend\n", layers, shared ? ", mem" : "");
    OUT("weight wout[e=%d, v=%d]\n", e, pick((const int[]){8, 16}, 2));
    OUT("logits = einsum(\"b s e, e v -> b s v\", x, wout)\nloss = softmax_xent(logits)\n");
#undef OUT
}

/* The DP's default path (repeated layers' interiors eliminated first, and
 * their equal eliminations reused; the scan on two threads) against the
 * plain DP (GenerateSeq order, no shortcuts): the same total cost, exactly,
 * and the same config for every op, on random models of repeated layers
 * (fast links, so that ops split) and on the paper's models at p = 32 and
 * 64 (the transformer at 32 only: its plain DP at 64 is too slow for the
 * sanitizer build; p = 4..16: test_prune_shipped). */
/* A random layers model (gen_layers: text, p) parsed into m and its
 * problem built into pb, over one of three link speeds (fast links: splits
 * that pay). */
static void layers_problem(char *text, size_t n, int *p, sb_model *m, sb_problem *pb)
{
    gen_layers(text, n, p);
    sb_error err = {0};
    if (sb_model_parse(text, strlen(text), "layers.model", NULL, 0, m, &err))
        fail_msg("generated model does not parse: %s\n%s", err.msg, text);
    sb_cost_params cp;
    sb_cost_params_default(&cp);
    static const double BW[] = {16, 1e3, 1e5};
    cp.gbs = BW[rn(3)];
    if (sb_problem_build(m, *p, &cp, pb, &err))
        fail_msg("problem: %s\n%s", err.msg, text);
}

static void test_blocks_equal_plain(void **state)
{
    (void)state;
    g_rng = 0x5eed0b10c5ULL;
    int models = 0, with_interior = 0, differ_order = 0, split_ops = 0;
    long long reused = 0;
    for (int i = 0; i < 60; i++) {
        char text[4096];
        int p;
        sb_model m;
        sb_problem pb;
        layers_problem(text, sizeof text, &p, &m, &pb);
        sb_error err = {0};
        char *interior = calloc((size_t)m.nops, 1);
        int *o1 = calloc((size_t)m.nops, sizeof *o1), *o2 = calloc((size_t)m.nops, sizeof *o2);
        assert_non_null(interior);
        assert_non_null(o1);
        assert_non_null(o2);
        with_interior += sb_block_interior(&pb, interior) > 0;
        sb_order_blocks(&pb, o1);
        sb_order_pase(&pb, o2);
        differ_order += memcmp(o1, o2, (size_t)m.nops * sizeof *o1) != 0;
        sb_search_opts so = {.algo = SB_ALGO_PASE, .scan = i % 2}; /* 1: no vector scan */
        sb_result r0, r1;
        if (sb_search(&pb, &so, &r0, &err))
            fail_msg("%s", err.msg);
        so.plain = 1;
        if (sb_search(&pb, &so, &r1, &err))
            fail_msg("plain: %s", err.msg);
        if (r0.total_cost != r1.total_cost)
            fail_msg("p=%d, %g GB/s: %.17g with the block order and reuse, %.17g plain\n%s", p,
                     pb.cp.gbs, r0.total_cost, r1.total_cost, text);
        for (int v = 0; v < m.nops; v++)
            if (r0.choice[v] != r1.choice[v])
                fail_msg("p=%d: op '%s': config %d, plain %d\n%s", p, m.ops[v].name,
                         r0.choice[v], r1.choice[v], text);
        reused += r0.eliminations_reused;
        for (int v = 0; v < m.nops; v++)
            split_ops += r0.choice[v] != 0;
        models++;
        free(interior);
        free(o1);
        free(o2);
        sb_result_free(&r0);
        sb_result_free(&r1);
        sb_problem_free(&pb);
        sb_model_free(&m);
    }
    const struct paper_model *M = PAPER_MODELS;
    for (size_t i = 0; i < N_PAPER_MODELS; i++)
        for (int p = 32; p <= 64; p *= 2) {
            if (p == 64 && !strcmp(M[i].model, "transformer"))
                continue; /* the plain DP takes seconds there, more under ASan (perf/search) */
            sb_model m;
            sb_problem pb;
            sb_error err = {0};
            load_problem(M[i].model, M[i].batch, p, &m, &pb);
            sb_search_opts so = {.algo = SB_ALGO_PASE};
            sb_result r0, r1;
            if (sb_search(&pb, &so, &r0, &err))
                fail_msg("%s p=%d: %s", M[i].model, p, err.msg);
            so.plain = 1;
            if (sb_search(&pb, &so, &r1, &err))
                fail_msg("%s p=%d, plain: %s", M[i].model, p, err.msg);
            if (r0.total_cost != r1.total_cost)
                fail_msg("%s p=%d: %.17g, plain %.17g", M[i].model, p, r0.total_cost,
                         r1.total_cost);
            for (int v = 0; v < m.nops; v++)
                if (r0.choice[v] != r1.choice[v])
                    fail_msg("%s p=%d: op '%s': config %d, plain %d", M[i].model, p,
                             m.ops[v].name, r0.choice[v], r1.choice[v]);
            /* the bounded and threshold scans where the vector scan was taken */
            sb_result r2;
            so = (sb_search_opts){.algo = SB_ALGO_PASE, .scan = 1};
            if (sb_search(&pb, &so, &r2, &err))
                fail_msg("%s p=%d, no vector scan: %s", M[i].model, p, err.msg);
            assert_true(r2.rows_vector == 0 && r0.rows_vector > 0);
            for (int v = 0; v < m.nops; v++)
                if (r2.choice[v] != r1.choice[v])
                    fail_msg("%s p=%d, no vector scan: op '%s': config %d, plain %d",
                             M[i].model, p, m.ops[v].name, r2.choice[v], r1.choice[v]);
            reused += r0.eliminations_reused;
            sb_result_free(&r0);
            sb_result_free(&r1);
            sb_result_free(&r2);
            sb_problem_free(&pb);
            sb_model_free(&m);
        }
    print_message("repeated layers: %d random models (%d with layer interiors, %d in another "
                  "order than GenerateSeq, %d ops split) and the paper models at p = 32, 64 "
                  "equal the plain DP; %lld eliminations reused\n",
                  models, with_interior, differ_order, split_ops, reused);
    assert_true(with_interior == models);
    assert_true(differ_order > models / 2);
    assert_true(reused > 0);
}

/* The DP's threads (sb_search_opts.threads, `search --threads`): the same
 * total, bit for bit, and every op's config on 1, 2, 3 and 8 threads (more
 * threads than this machine's cores too), on the paper's models at p = 32
 * and 64 (the transformer at 32); some elimination must have run on the
 * threads asked for, or the count would not be tested. */
static void test_threads_equal(void **state)
{
    (void)state;
    static const int T[] = {2, 3, 8};
    int shared = 0;
    const struct paper_model *M = PAPER_MODELS;
    for (size_t i = 0; i < N_PAPER_MODELS; i++)
        for (int p = 32; p <= 64; p *= 2) {
            if (p == 64 && !strcmp(M[i].model, "transformer"))
                continue;
            sb_model m;
            sb_problem pb;
            sb_error err = {0};
            load_problem(M[i].model, M[i].batch, p, &m, &pb);
            sb_search_opts so = {.algo = SB_ALGO_PASE, .threads = 1};
            sb_result r1;
            if (sb_search(&pb, &so, &r1, &err))
                fail_msg("%s p=%d, 1 thread: %s", M[i].model, p, err.msg);
            assert_int_equal(r1.threads_used, 1);
            for (size_t t = 0; t < sizeof T / sizeof *T; t++) {
                sb_result rt;
                so.threads = T[t];
                if (sb_search(&pb, &so, &rt, &err))
                    fail_msg("%s p=%d, %d threads: %s", M[i].model, p, T[t], err.msg);
                if (rt.total_cost != r1.total_cost)
                    fail_msg("%s p=%d: %.17g on %d threads, %.17g on 1", M[i].model, p,
                             rt.total_cost, T[t], r1.total_cost);
                for (int v = 0; v < m.nops; v++)
                    if (rt.choice[v] != r1.choice[v])
                        fail_msg("%s p=%d: op '%s': config %d on %d threads, %d on 1",
                                 M[i].model, p, m.ops[v].name, rt.choice[v], T[t],
                                 r1.choice[v]);
                assert_true(rt.threads_used <= T[t]);
                shared += rt.threads_used == T[t];
                sb_result_free(&rt);
            }
            sb_result_free(&r1);
            sb_problem_free(&pb);
            sb_model_free(&m);
        }
    print_message("threads: the paper models at p = 32, 64 on 2, 3 and 8 threads equal one "
                  "thread; %d searches ran an elimination on all the threads asked for\n",
                  shared);
    assert_true(shared > 0);
}

/* Two searches of pb, without the vector scan's column-class and
 * entry-wise shortcuts and with them as `colclass` and `entwise` say: the
 * same total, bit for bit, and every op's config. *used gets the last-var
 * entries each took. */
static void shortcut_pair(const sb_problem *pb, int colclass, int entwise, int scan,
                          const char *what, long long used[2])
{
    sb_search_opts so = {.algo = SB_ALGO_PASE, .scan = scan, .colclass = 1, .entwise = 1};
    sb_result r0, r1;
    sb_error err = {0};
    if (sb_search(pb, &so, &r0, &err))
        fail_msg("%s: %s", what, err.msg);
    so.colclass = colclass;
    so.entwise = entwise;
    if (sb_search(pb, &so, &r1, &err))
        fail_msg("%s, colclass %d entwise %d: %s", what, colclass, entwise, err.msg);
    assert_true(r0.rows_colclass == 0 && r0.rows_entwise == 0);
    if (r0.total_cost != r1.total_cost)
        fail_msg("%s: %.17g without the shortcuts, %.17g with (colclass %d, entwise %d)", what,
                 r0.total_cost, r1.total_cost, colclass, entwise);
    for (int v = 0; v < pb->m->nops; v++)
        if (r0.choice[v] != r1.choice[v])
            fail_msg("%s: op '%s': config %d without the shortcuts, %d with (colclass %d, "
                     "entwise %d)",
                     what, pb->m->ops[v].name, r0.choice[v], r1.choice[v], colclass, entwise);
    used[0] += r1.rows_colclass;
    used[1] += r1.rows_entwise;
    sb_result_free(&r0);
    sb_result_free(&r1);
}

/* The vector scan's shortcuts (sb_search_opts.colclass, .entwise) on
 * and off: the same total and configs on random models of repeated layers
 * (each forced wherever it applies) and on the paper's models at
 * p = 4 .. 64 (the DP's own choice, and each forced). Against the plain
 * DP and brute force on random graphs: test_dp_equals_brute_force. */
static void test_scan_shortcuts_equal(void **state)
{
    (void)state;
    g_rng = 0xc01c1a55ULL;
    long long forced[2] = {0, 0}, chosen[2] = {0, 0};
    for (int i = 0; i < 40; i++) {
        char text[4096], what[64];
        int p;
        sb_model m;
        sb_problem pb;
        layers_problem(text, sizeof text, &p, &m, &pb);
        snprintf(what, sizeof what, "layers model %d (p=%d)", i, p);
        shortcut_pair(&pb, 2, 1, 2 * (i % 2), what, forced);
        shortcut_pair(&pb, 1, 2, 2 * (i % 2), what, forced);
        shortcut_pair(&pb, 2, 2, 2 * (i % 2), what, forced);
        sb_problem_free(&pb);
        sb_model_free(&m);
    }
    const struct paper_model *M = PAPER_MODELS;
    for (size_t i = 0; i < N_PAPER_MODELS; i++)
        for (int p = 4; p <= 64; p *= 2) {
            char what[64];
            sb_model m;
            sb_problem pb;
            load_problem(M[i].model, M[i].batch, p, &m, &pb);
            snprintf(what, sizeof what, "%s p=%d", M[i].model, p);
            shortcut_pair(&pb, 0, 0, 0, what, chosen);
            shortcut_pair(&pb, 2, 1, 0, what, forced);
            shortcut_pair(&pb, 1, 2, 0, what, forced);
            shortcut_pair(&pb, 2, 2, 0, what, forced);
            sb_problem_free(&pb);
            sb_model_free(&m);
        }
    print_message("vector scan shortcuts: column-class %lld and entry-wise %lld last-var "
                  "entries by the DP's choice, %lld and %lld forced; the same configs as "
                  "without them\n",
                  chosen[0], chosen[1], forced[0], forced[1]);
    assert_true(chosen[0] > 0 && forced[0] > chosen[0]);
    assert_true(chosen[1] > 0 && forced[1] > chosen[1]);
}

/* The vector scan's kernels (AVX-512, AVX2 one pass and two passes, generic), and the
 * column-class scan over each, against the plain scan, on sums with many
 * ties (entries from a few small integers, some infinite, some large
 * enough to absorb prev's differences): the same least sum and the lowest
 * config reaching it, for every length (the vectors' tails) and 1 to 3
 * tables. */
static void test_vec_scan_kernels(void **state)
{
    (void)state;
    static const char *const ISA[] = {"", "avx2", "avx2-2pass", "generic"};
    g_rng = 0x7ec5ca11ULL;
    double prev[200], t[3][200];
    int checked = 0;
    for (int a = 0; a < 4; a++) {
        setenv("SB_DP_ISA", ISA[a], 1);
        for (int rep = 0; rep < 400; rep++) {
            int nv = 1 + rn(200), nq = 1 + rn(3), vals = 1 + rn(4);
            /* every other array: entries of 2^60, which absorb prev's
             * differences (equal sums from unequal prev: the column-class
             * scan's ties below a class's least prev) */
            double unit = rep % 2 ? 0x1p60 : 0.5;
            for (int x = 0; x < nv; x++) {
                prev[x] = rn(vals) + (rn(50) == 0 ? INFINITY : 0);
                for (int q = 0; q < nq; q++)
                    t[q][x] = rn(vals) * unit;
            }
            const double *fts[3] = {t[0], t[1], t[2]};
            int best = 0;
            double bv = INFINITY;
            for (int x = 0; x < nv; x++) {
                double sx = prev[x];
                for (int q = 0; q < nq; q++)
                    sx += fts[q][x];
                if (x == 0 || sx < bv) {
                    bv = sx;
                    best = x;
                }
            }
            double got;
            int x = sb_dp_vec_scan(prev, fts, nq, nv, &got);
            if (x != best || !(got == bv || (isinf(got) && isinf(bv))))
                fail_msg("vector scan (%s): nv %d, %d tables: config %d sum %g, plain %d sum %g",
                         ISA[a][0] ? ISA[a] : "native", nv, nq, x, got, best, bv);
            for (int ew = 0; ew < 2; ew++) {
                x = sb_dp_class_scan(prev, fts, nq, nv, ew, &got);
                if (x != best || !(got == bv || (isinf(got) && isinf(bv))))
                    fail_msg("column-class scan (%s%s): nv %d, %d tables: config %d sum %g, "
                             "plain %d sum %g",
                             ISA[a][0] ? ISA[a] : "native", ew ? ", entry-wise" : "", nv, nq, x,
                             got, best, bv);
            }
            checked++;
        }
    }
    unsetenv("SB_DP_ISA");
    assert_true(checked == 1600);
}

/* The memo of eliminations (dp_reuse.c) drops the least recently used
 * table first: a key taken again between the puts of others stays (by age
 * it was dropped: llama3-70b's q0 was computed again in every layer), and
 * a key whose table was dropped keeps the table put again, with its id. */
static uint64_t memo_put(dp_memo *m, int key, int64_t n)
{
    dp_key k = {0};
    dp_key_add(&k, &key, sizeof key);
    double *g = dp_buf_alloc((size_t)n * sizeof *g);
    uint16_t *arg = dp_buf_alloc((size_t)n * sizeof *arg);
    assert_non_null(g);
    assert_non_null(arg);
    for (int64_t i = 0; i < n; i++) {
        g[i] = key;
        arg[i] = (uint16_t)key;
    }
    dp_result r = {.g = g, .arg = arg, .size = n};
    uint64_t id = dp_memo_put(m, &k, &r);
    dp_buf_free(g);
    dp_buf_free(arg);
    dp_key_free(&k);
    return id;
}

static int memo_take(dp_memo *m, int key, int64_t n, uint64_t *id)
{
    dp_key k = {0};
    dp_key_add(&k, &key, sizeof key);
    dp_result r = {0};
    int hit = dp_memo_take(m, &k, &r, id);
    if (hit)
        assert_true(r.size == n && r.g[n - 1] == key && r.arg[0] == key);
    dp_buf_free(r.g);
    dp_buf_free(r.arg);
    dp_key_free(&k);
    return hit;
}

/* The DP's sort of a config list by cost (a radix sort from 64 entries)
 * against a stable insertion sort by <: the same order on random lists of
 * every length class, with many equal costs, -0 beside +0 (equal under <:
 * their order kept), infinities, negatives, subnormals, costs equal but for
 * one bit, and a NaN (the merge sort's order then). */
static void test_sort_order(void **state)
{
    (void)state;
    unsigned s = 12345;
    int checked = 0;
    for (int t = 0; t < 400; t++) {
        int n = t < 100 ? t : t < 390 ? 64 + (t * 37) % 2000 : 3000 + t; /* 10 long ones */
        double *k = malloc((size_t)(n + 1) * sizeof *k);
        int *got = malloc((size_t)(n + 1) * sizeof *got);
        int *want = malloc((size_t)(n + 1) * sizeof *want);
        assert_non_null(k);
        assert_non_null(got);
        assert_non_null(want);
        for (int i = 0; i < n; i++) {
            s = s * 1103515245u + 12345u;
            unsigned r = s >> 8;
            switch (r % 9) {
            case 0: k[i] = 0.0; break;
            case 1: k[i] = -0.0; break;
            case 2: k[i] = (r % 2 ? 1 : -1) * INFINITY; break;
            case 3: k[i] = (double)(r % 7); break; /* many equal */
            case 4: k[i] = -(double)(r % 1000) * 1e9; break;
            case 5: k[i] = 4.9e-324 * (r % 5); break;
            case 6: k[i] = nextafter(1e12, r % 2 ? 2e12 : 0); break;
            case 7: k[i] = 1e12; break;
            default: k[i] = (double)r * 12345.678; break;
            }
        }
        if (t == 399 && n > 10)
            k[n / 2] = NAN; /* < orders nothing against it: the merge sort's order */
        assert_int_equal(sb_dp_sort_order(k, n, got), 0);
        if (t == 399) {
            free(k), free(got), free(want);
            continue;
        }
        for (int i = 0; i < n; i++) { /* stable insertion by < */
            int j = i;
            while (j > 0 && k[i] < k[want[j - 1]]) {
                want[j] = want[j - 1];
                j--;
            }
            want[j] = i;
        }
        for (int i = 0; i < n; i++)
            if (got[i] != want[i])
                fail_msg("n = %d: position %d holds %d (%g), want %d (%g)", n, i, got[i],
                         k[got[i]], want[i], k[want[i]]);
        checked++;
        free(k), free(got), free(want);
    }
    assert_int_equal(checked, 399);
}

static void test_memo_lru(void **state)
{
    (void)state;
    const int64_t n = 1000; /* 10000 bytes a result: the memo holds four */
    dp_memo m = {.cap = 45000, .next_id = 1};
    uint64_t id, a = memo_put(&m, 1, n);
    for (int key = 2; key < 12; key++) {
        memo_put(&m, key, n);
        assert_true(memo_take(&m, 1, n, &id)); /* used again: kept */
        assert_true(id == a);
    }
    assert_false(memo_take(&m, 2, n, &id)); /* not used again: dropped */
    uint64_t b = memo_put(&m, 2, n);        /* computed again: the same id, kept again */
    assert_true(memo_take(&m, 2, n, &id));
    assert_true(id == b);
    assert_true(memo_take(&m, 1, n, &id));
    dp_memo_free(&m);
}

/* ------------------------------------------------------- strategy files -- */

static char g_dir[PATH_MAX];

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static int setup_dir(void **state)
{
    (void)state;
    snprintf(g_dir, sizeof g_dir, "/tmp/sb_test_dp_XXXXXX");
    return mkdtemp(g_dir) ? 0 : -1;
}

static int teardown_dir(void **state)
{
    (void)state;
    return nftw(g_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

typedef struct {
    char *line[512];
    int n;
} lines;

static void read_lines(const char *path, lines *L)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char buf[4096];
    L->n = 0;
    while (fgets(buf, sizeof buf, f)) {
        assert_true(L->n < 512);
        L->line[L->n++] = strdup(buf);
    }
    fclose(f);
}

static void free_lines(lines *L)
{
    for (int i = 0; i < L->n; i++)
        free(L->line[i]);
    L->n = 0;
}

/* Writes L to path with line `at` (0-based) replaced by `repl` (NULL: as
 * is); keep < 0 writes only the first -keep lines. */
static void write_variant(const char *path, const lines *L, int at, const char *repl, int keep)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    int n = keep < 0 ? -keep : L->n;
    for (int i = 0; i < n; i++)
        fputs(i == at && repl ? repl : L->line[i], f);
    assert_int_equal(fclose(f), 0);
}

static int find_line(const lines *L, const char *prefix, int nth)
{
    for (int i = 0; i < L->n; i++)
        if (strncmp(L->line[i], prefix, strlen(prefix)) == 0 && nth-- == 0)
            return i;
    fail_msg("no line '%s...' in the strategy file", prefix);
    return -1;
}

static void expect_load_error(const char *path, const sb_problem *pb, int line,
                              const char *phrase)
{
    int *choice = calloc((size_t)pb->m->nops, sizeof *choice);
    assert_non_null(choice);
    sb_error err = {0};
    int rc = sb_strategy_load_choice(path, pb, choice, &err);
    free(choice);
    if (rc == 0)
        fail_msg("loading %s should fail (%s)", path, phrase);
    assert_int_equal(rc, -1);
    assert_int_equal(err.code, SB_EXIT_INPUT);
    char where[PATH_MAX + 32];
    if (line > 0)
        snprintf(where, sizeof where, "%s:%d:", path, line);
    else
        snprintf(where, sizeof where, "%s:", path);
    if (strncmp(err.msg, where, strlen(where)) != 0)
        fail_msg("expected the message to start with '%s', got: %s", where, err.msg);
    if (!strstr(err.msg, phrase))
        fail_msg("expected '%s' in: %s", phrase, err.msg);
}

static void test_strategy_roundtrip(void **state)
{
    (void)state;
    sb_model m;
    sb_problem pb;
    load_problem("alexnet", 32, 8, &m, &pb);
    sb_search_opts so = {.algo = SB_ALGO_PASE};
    sb_result r;
    sb_error err = {0};
    assert_int_equal(sb_search(&pb, &so, &r, &err), 0);
    char path[PATH_MAX + 64], bad[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/alexnet.strategy", g_dir);
    snprintf(bad, sizeof bad, "%s/bad.strategy", g_dir);
    assert_int_equal(sb_result_save(path, &pb, &r, "pase", &err), 0);
    int *choice = calloc((size_t)m.nops, sizeof *choice);
    assert_non_null(choice);
    if (sb_strategy_load_choice(path, &pb, choice, &err) != 0)
        fail_msg("reading back: %s", err.msg);
    for (int i = 0; i < m.nops; i++)
        assert_int_equal(choice[i], r.choice[i]);
    assert_true(sb_strategy_cost(&pb, choice) == r.total_cost);

    /* every config of op 0, and a random mix, round-trip too */
    for (int k = 0; k < pb.cfg[0].n; k++) {
        sb_result r2 = r;
        int *c2 = malloc((size_t)m.nops * sizeof *c2);
        assert_non_null(c2);
        for (int i = 0; i < m.nops; i++)
            c2[i] = (k + 7 * i) % pb.cfg[i].n;
        c2[0] = k;
        r2.choice = c2;
        r2.total_cost = sb_strategy_cost(&pb, c2);
        assert_int_equal(sb_result_save(path, &pb, &r2, "bf", &err), 0);
        assert_int_equal(sb_strategy_load_choice(path, &pb, choice, &err), 0);
        for (int i = 0; i < m.nops; i++)
            assert_int_equal(choice[i], c2[i]);
        free(c2);
    }
    assert_int_equal(sb_result_save(path, &pb, &r, "pase", &err), 0);

    lines L;
    read_lines(path, &L);
    int lp = find_line(&L, "p ", 0), lm = find_line(&L, "model ", 0);
    int l0 = find_line(&L, "op ", 0), l3 = find_line(&L, "op ", 3);

    /* wrong op name */
    write_variant(bad, &L, l3, "op nosuchop conv 1,1,1,1,1,1,1\n", 0);
    expect_load_error(bad, &pb, l3 + 1, "op 'nosuchop' does not match the model");
    /* wrong p */
    write_variant(bad, &L, lp, "p 4\n", 0);
    expect_load_error(bad, &pb, lp + 1, "strategy is for p=4");
    /* malformed configs */
    write_variant(bad, &L, l0, "op conv1 conv 2,x,1\n", 0);
    expect_load_error(bad, &pb, l0 + 1, "needs 7 split counts");
    write_variant(bad, &L, l0, "op conv1 conv 1,1,1\n", 0);
    expect_load_error(bad, &pb, l0 + 1, "needs 7 split counts");
    write_variant(bad, &L, l0, "op conv1 conv 1,1,1,1,1,1,1,1,1\n", 0);
    expect_load_error(bad, &pb, l0 + 1, "needs 7 split counts");
    write_variant(bad, &L, l0, "op conv1 conv 0,1,1,1,1,1,1\n", 0);
    expect_load_error(bad, &pb, l0 + 1, "needs 7 split counts");
    write_variant(bad, &L, l0, "op conv1\n", 0);
    expect_load_error(bad, &pb, l0 + 1, "expected 'op NAME KIND CONFIG'");
    /* well formed, but not a config at p = 8 (h is never split) */
    write_variant(bad, &L, l0, "op conv1 conv 1,1,2,1,1,1,1\n", 0);
    expect_load_error(bad, &pb, l0 + 1, "not a valid config at p=8");
    /* wrong model */
    write_variant(bad, &L, lm, "model resnet101\n", 0);
    expect_load_error(bad, &pb, lm + 1, "strategy is for model 'resnet101'");
    /* not a strategy file; a newer version */
    write_variant(bad, &L, 0, "hello world\n", 0);
    expect_load_error(bad, &pb, 1, "not a shardbench strategy file");
    write_variant(bad, &L, 0, "shardbench-strategy 3\n", 0);
    expect_load_error(bad, &pb, 1, "version '3' not supported");
    /* ops missing at the end */
    write_variant(bad, &L, -1, NULL, -(L.n - 2));
    expect_load_error(bad, &pb, 0, "has 12 ops, the model has 14");
    /* empty file, missing file */
    FILE *f = fopen(bad, "w");
    assert_non_null(f);
    fclose(f);
    expect_load_error(bad, &pb, 0, "empty or not a strategy file");
    char missing[PATH_MAX + 64];
    snprintf(missing, sizeof missing, "%s/none.strategy", g_dir);
    expect_load_error(missing, &pb, 0, "cannot open");

    /* a strategy for another p does not load into this problem */
    sb_problem pb4;
    sb_cost_params cp;
    sb_cost_params_default(&cp);
    assert_int_equal(sb_problem_build(&m, 4, &cp, &pb4, &err), 0);
    expect_load_error(path, &pb4, lp + 1, "strategy is for p=8, running with p=4");
    sb_problem_free(&pb4);

    /* JSON names every op */
    char *json = sb_result_json_str(&pb, &r, "pase");
    assert_non_null(json);
    assert_non_null(strstr(json, "\"model\":\"alexnet\""));
    assert_non_null(strstr(json, "\"name\":\"fc8\""));
    free(json);

    free_lines(&L);
    free(choice);
    sb_result_free(&r);
    sb_problem_free(&pb);
    sb_model_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bf_isolated_op), /* first: the others rely on its verdict */
        cmocka_unit_test(test_dp_equals_brute_force),
        cmocka_unit_test(test_within_equals_brute_force),
        cmocka_unit_test(test_within_recompute_equals_brute_force),
        cmocka_unit_test(test_lagrange_walk),
        cmocka_unit_test(test_dp_fixed_graphs),
        cmocka_unit_test(test_table_limit),
        cmocka_unit_test(test_prune_shipped),
        cmocka_unit_test(test_blocks_equal_plain),
        cmocka_unit_test(test_threads_equal),
        cmocka_unit_test(test_scan_shortcuts_equal),
        cmocka_unit_test(test_memo_lru),
        cmocka_unit_test(test_sort_order),
        cmocka_unit_test(test_vec_scan_kernels),
        cmocka_unit_test_setup_teardown(test_strategy_roundtrip, setup_dir, teardown_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
