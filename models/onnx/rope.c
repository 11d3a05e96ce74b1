/* onnx/rope.c: the rotary position embedding as torch writes it (Hugging
 * Face Llama's rotate_half):
 *
 *   y = x * cos + cat(-x[..., h:], x[..., :h]) * sin     (h = d / 2)
 *
 * i.e. Add(Mul(x, cos), Mul(Concat(Neg(Slice(x, h:d)), Slice(x, 0:h)), sin))
 * with cos, sin constant (seq, d) tables. The nodes of the pattern come
 * before its Add in the graph, so ox_hold_rope (at the prepass) holds them
 * back from the walk; the Add (ox_match_rope, called by import.c's do_node
 * before the Add's inputs are checked) checks the slices and
 * the tables (cos/sin of position * theta^(-2i/d), the theta read back from
 * the tables) and writes rope(x, seq=S, dim=D, theta=N), or refuses the
 * pattern with its reason. */
#define _GNU_SOURCE
#ifdef SB_HAVE_ONNX

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "import.h"

/* The producing node of a value, or -1. */
static int producer(ctx *C, const char *name)
{
    val *x = name ? ox_vfind(C, name) : NULL;
    return x ? x->prod : -1;
}

/* Node index of the producer of `name` if it is of type op and its output
 * is read only by node `by`; else -1. */
static int only_into(ctx *C, const char *name, const char *op, int by)
{
    int p = producer(C, name);
    if (p < 0 || !op_is(C->g->node[p], op) || ox_only_consumer(C, name) != by)
        return -1;
    return p;
}

int ox_hold_rope(ctx *C)
{
    for (size_t ai = 0; ai < C->g->n_node; ai++) {
        const Onnx__NodeProto *ad = C->g->node[ai];
        if (!op_is(ad, "Add") || ad->n_input != 2 || !in_name(ad, 0) || !in_name(ad, 1) || C->skip[ai])
            continue;
        for (int o = 0; o < 2; o++) {
            int mx = only_into(C, in_name(ad, (size_t)o), "Mul", (int)ai);
            int mr = only_into(C, in_name(ad, (size_t)(1 - o)), "Mul", (int)ai);
            if (mx < 0 || mr < 0)
                continue;
            const Onnx__NodeProto *r = C->g->node[mr];
            int cat = -1, tr = -1;
            for (int k = 0; k < 2 && cat < 0; k++)
                if ((cat = only_into(C, in_name(r, (size_t)k), "Concat", mr)) >= 0)
                    tr = 1 - k;
            if (cat < 0 || r->n_input != 2 || C->g->node[cat]->n_input != 2)
                continue;
            const Onnx__NodeProto *c = C->g->node[cat];
            int neg = only_into(C, in_name(c, 0), "Neg", cat), sb = only_into(C, in_name(c, 1), "Slice", cat);
            int sa = neg >= 0 ? only_into(C, in_name(C->g->node[neg], 0), "Slice", neg) : -1;
            if (sa < 0 || sb < 0)
                continue;
            const char *x = in_name(C->g->node[sa], 0);
            const Onnx__NodeProto *m = C->g->node[mx];
            int tx = -1;
            for (int k = 0; k < 2; k++)
                if (in_name(m, (size_t)k) && x && !strcmp(in_name(m, (size_t)k), x))
                    tx = 1 - k;
            if (tx < 0 || m->n_input != 2 || !in_name(C->g->node[sb], 0) || strcmp(in_name(C->g->node[sb], 0), x)
                || !ox_static_name(C, in_name(m, (size_t)tx)) || !ox_static_name(C, in_name(r, (size_t)tr)))
                continue;
            if (C->nropes == C->capropes) {
                int nc = C->capropes ? 2 * C->capropes : 16;
                void *np = realloc(C->ropes, (size_t)nc * sizeof *C->ropes);
                if (!np)
                    return ox_oom(C);
                C->ropes = np;
                C->capropes = nc;
            }
            int *h = C->ropes[C->nropes].node;
            h[0] = (int)ai, h[1] = mx, h[2] = mr, h[3] = cat, h[4] = neg, h[5] = sa, h[6] = sb;
            C->ropes[C->nropes].cos = in_name(m, (size_t)tx);
            C->ropes[C->nropes].sin = in_name(r, (size_t)tr);
            C->ropes[C->nropes++].x = x;
            for (int k = 1; k < 7; k++)
                C->skip[h[k]] = 3; /* held: the Add's match takes them */
            break;
        }
    }
    return 0;
}

/* The theta of (.., S, D) cos and sin tables of rotary angles, or 0 when
 * they are not cos/sin(p * theta^(-2i/D)) for p < S, i < D/2, repeated
 * over both halves, with an integer theta. The angle theta^(-2/D) of i = 1
 * is read at the largest position where it stays below 3 (atan2 of sin and
 * cos: float tables give theta to a few parts in 10^7, Llama 3's 500000
 * exactly once rounded). */
static double table_theta(const val *tc, const val *ts, int64_t S, int64_t D)
{
    if (!tc->fdata || !ts->fdata || tc->nf != S * D || ts->nf != S * D || S < 2 || D < 4 || D % 2)
        return 0;
    int64_t h = D / 2;
    double a1 = atan2(ts->fdata[D + 1], tc->fdata[D + 1]);
    if (!(a1 > 0 && a1 < 1))
        return 0;
    /* a tiny a1 (a table that is no rotary table) puts 3 / a1 past int64 */
    double pd = 3.0 / a1;
    int64_t p = pd < (double)(S - 1) ? (int64_t)pd : S - 1;
    a1 = atan2(ts->fdata[p * D + 1], tc->fdata[p * D + 1]) / (double)p;
    double theta = pow(a1, -(double)D / 2.0), r = round(theta);
    if (!(r >= 2) || fabs(theta - r) / r > 1e-4)
        return 0;
    for (int64_t q = 0; q < S; q++)
        for (int64_t i = 0; i < D; i++) {
            double ang = (double)q * pow(r, -2.0 * (double)(i % h) / (double)D);
            if (fabs(tc->fdata[q * D + i] - cos(ang)) > 1e-3 || fabs(ts->fdata[q * D + i] - sin(ang)) > 1e-3)
                return 0;
        }
    return r;
}

int ox_match_rope(ctx *C, int ni, int *rc)
{
    int k = 0;
    while (k < C->nropes && C->ropes[k].node[0] != ni)
        k++;
    if (k == C->nropes)
        return 0;
    const int *h = C->ropes[k].node;
    const Onnx__NodeProto *ad = C->g->node[ni];
    for (int i = 1; i < 7; i++)
        ox_absorb(C, h[i]);
    *rc = 0;
    val *y = ox_vget(C, out0(ad)), *x = ox_vfind(C, C->ropes[k].x);
    val *tc = ox_vfind(C, C->ropes[k].cos), *ts = ox_vfind(C, C->ropes[k].sin);
    if (!y)
        return *rc = -1, 1;
    y->kind = V_POISON;
    if (x && x->kind == V_POISON)
        return 1; /* its producer was refused */
    if (!x || x->kind != V_ACT || x->nd < 2) {
        ox_unsupported(C, ad, "rotary pattern on a constant or a rank-1 value");
        return 1;
    }
    sym Ss = x->shape[x->nd - 2], Ds = x->shape[x->nd - 1];
    if (!sym_is_const(Ds) || x->src[x->nd - 1] < 0 || x->src[x->nd - 2] < 0) {
        ox_unsupported(C, ad, "rotary pattern over a symbolic or size-1 dim");
        return 1;
    }
    int64_t S = ox_sym_val(C, Ss), D = Ds.c;
    int64_t st, en;
    int ax;
    if (ox_slice_range(C, C->g->node[h[5]], x->nd, D, &ax, &st, &en) || ax != x->nd - 1 || st != D / 2 || en != D
        || ox_slice_range(C, C->g->node[h[6]], x->nd, D, &ax, &st, &en) || ax != x->nd - 1 || st != 0 || en != D / 2
        || ox_norm_axis(ox_attr_i(C->g->node[h[3]], "axis", 0), x->nd) != x->nd - 1 || D % 2) {
        ox_unsupported(C, ad, "rotary pattern whose slices are not the two halves of the last dim");
        return 1;
    }
    double th = tc && ts && tc->kind == V_STATIC && ts->kind == V_STATIC && ox_broadcasts_to(tc, x)
                        && ox_broadcasts_to(ts, x) && tc->nd >= 2 && sym_eq(tc->shape[tc->nd - 2], Ss)
                        && ts->nd >= 2 && sym_eq(ts->shape[ts->nd - 2], Ss)
                    ? table_theta(tc, ts, S, D)
                    : 0;
    if (!th) {
        ox_unsupported(C, ad, "rotary tables that are not constant cos/sin(position * theta^(-2i/d)) of an integer theta");
        return 1;
    }
    if (!ox_have(C, "y = rope(x, seq=a, dim=b, theta=10000)")) {
        *rc = ox_refuse_shaped(C, ad, y, x->nd, x->shape, "the rotary pattern needs the model op "
                               "rope(x, seq=D, dim=D, theta=N), which this build does not have");
        return 1;
    }
    mtensor *T = &C->t[x->t];
    int t = ox_new_tensor(C, node_label(ad), "rope", T->nd, T->dn, T->sz, C->nl);
    if (t < 0 || ox_add_line(C, C->t[t].name, "rope", 0, "%s, seq=%s, dim=%s, theta=%.0f", C->t[x->t].name,
                             C->t[x->t].dn[x->src[x->nd - 2]], C->t[x->t].dn[x->src[x->nd - 1]], th) < 0)
        return *rc = -1, 1;
    ox_bind_view(C, y, t, x->nd, x->src);
    if (C->info)
        C->info->nfused += 6;
    return 1;
}

#endif /* SB_HAVE_ONNX */
