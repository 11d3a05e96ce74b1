/* onnx/norm.c: BatchNormalization, LayerNormalization (and the decomposed
 * ReduceMean->Sub->Pow->ReduceMean->Add->Sqrt->Div pattern), Softmax,
 * LogSoftmax, ReduceMean. */
#define _GNU_SOURCE
#ifdef SB_HAVE_ONNX

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "import.h"

/* Axes of a ReduceMean (attribute, or input 1 from opset 18). */
static int reduce_axes(ctx *C, const Onnx__NodeProto *n, int64_t *axes, int max)
{
    int k = ox_attr_ints(n, "axes", axes, max);
    if (k < 0) {
        val *a = ox_in_val(C, n, 1);
        if (!a)
            return -1;
        if (a->kind != V_CONST || a->ndata > max)
            return -2;
        for (int i = 0; i < a->ndata; i++) {
            if (!sym_is_const(a->data[i]))
                return -2;
            axes[i] = a->data[i].c;
        }
        k = a->ndata;
    }
    return k > max ? -2 : k;
}

int ox_norm_axis(int64_t a, int nd)
{
    if (a < 0)
        a += nd;
    return a >= 0 && a < nd ? (int)a : -1;
}

/* norm over logical axis j of x, keeping x's view; y is bound. */
static int emit_norm(ctx *C, const Onnx__NodeProto *n, val *x, int j, val *y)
{
    if (x->src[j] < 0)
        return ox_unsupported(C, n, "normalization over a size-1 dim");
    mtensor *T = &C->t[x->t];
    int t = ox_new_tensor(C, node_label(n), "norm", T->nd, T->dn, T->sz, C->nl);
    if (t < 0 || ox_add_line(C, C->t[t].name, "norm", 0, "%s, axis=%d", C->t[x->t].name, x->src[j]) < 0)
        return -1;
    ox_bind_view(C, y, t, x->nd, x->src);
    return 0;
}

/* The decomposed layer norm: ReduceMean -> Sub -> Pow -> ReduceMean -> Add
 * -> Sqrt -> Div [-> Mul(w) -> Add(b)]. 1 when matched and emitted. */
int ox_match_layernorm(ctx *C, int ni, int *rc)
{
    const Onnx__NodeProto *r1 = C->g->node[ni];
    val *x = ox_in_val(C, r1, 0);
    if (!x || x->kind != V_ACT || !out0(r1))
        return 0;
    int64_t axes[8];
    if (reduce_axes(C, r1, axes, 8) != 1 || ox_norm_axis(axes[0], x->nd) != x->nd - 1)
        return 0;
    int isub = ox_only_consumer(C, out0(r1));
    if (isub < 0)
        return 0;
    const Onnx__NodeProto *sub = C->g->node[isub];
    if (!op_is(sub, "Sub") || sub->n_input != 2 || !in_name(sub, 0) || !in_name(sub, 1)
        || strcmp(in_name(sub, 0), x->name) || strcmp(in_name(sub, 1), out0(r1)) || !out0(sub))
        return 0;
    val *d = ox_vfind(C, out0(sub));
    if (!d)
        return 0;
    int di = (int)(d - C->v);
    if (d->uses != 2 || C->ncons[di] != 2)
        return 0;
    int ipow = C->cons[di][0], idiv = C->cons[di][1];
    if (op_is(C->g->node[idiv], "Pow")) {
        int tmp = ipow;
        ipow = idiv;
        idiv = tmp;
    }
    const Onnx__NodeProto *pw = C->g->node[ipow], *dv = C->g->node[idiv];
    if (!op_is(pw, "Pow") || !op_is(dv, "Div") || !in_name(pw, 0) || strcmp(in_name(pw, 0), d->name)
        || !ox_static_name(C, in_name(pw, 1)) || !in_name(dv, 0) || strcmp(in_name(dv, 0), d->name))
        return 0;
    int ir2 = ox_only_consumer(C, out0(pw));
    if (ir2 < 0 || !op_is(C->g->node[ir2], "ReduceMean"))
        return 0;
    int iadd = ox_only_consumer(C, out0(C->g->node[ir2]));
    if (iadd < 0 || !op_is(C->g->node[iadd], "Add")
        || !ox_binop_with_static(C, C->g->node[iadd], out0(C->g->node[ir2])))
        return 0;
    int isq = ox_only_consumer(C, out0(C->g->node[iadd]));
    if (isq < 0 || !op_is(C->g->node[isq], "Sqrt"))
        return 0;
    if (ox_only_consumer(C, out0(C->g->node[isq])) != idiv || !in_name(dv, 1)
        || strcmp(in_name(dv, 1), out0(C->g->node[isq])) || !out0(dv))
        return 0;
    int chain[9] = {isub, ipow, ir2, iadd, isq, idiv}, nc = 6;
    const char *last = out0(dv);
    int k = ox_only_consumer(C, last);
    if (k >= 0 && op_is(C->g->node[k], "Mul") && ox_binop_with_static(C, C->g->node[k], last) && out0(C->g->node[k])) {
        chain[nc++] = k;
        last = out0(C->g->node[k]);
        k = ox_only_consumer(C, last);
    }
    if (k >= 0 && op_is(C->g->node[k], "Add") && ox_binop_with_static(C, C->g->node[k], last) && out0(C->g->node[k])) {
        chain[nc++] = k;
        last = out0(C->g->node[k]);
    }
    for (int i = 0; i < nc; i++)
        ox_absorb(C, chain[i]);
    val *y = ox_vget(C, last);
    if (!y)
        return *rc = -1, 1;
    *rc = emit_norm(C, r1, x, x->nd - 1, y);
    if (C->info)
        C->info->nfused += nc;
    return 1;
}

/* reduce_mean over a mask of logical dims of x; keepdims keeps them as size 1. */
int ox_emit_reduce(ctx *C, const Onnx__NodeProto *n, val *x, uint32_t lmask, int keep, val *y)
{
    mtensor *T = &C->t[x->t];
    uint32_t tmask = 0;
    for (int i = 0; i < T->nd; i++) {
        int j = -1;
        for (int q = 0; q < x->nd; q++)
            if (x->src[q] == i)
                j = q;
        if (j < 0 || (lmask & (1u << j)))
            tmask |= 1u << i; /* reduced, or a dropped size-1 dim */
    }
    char dn[SB_MAX_DIMS][SB_NAME_MAX], axes[64] = "";
    sym sz[SB_MAX_DIMS];
    int newi[SB_MAX_DIMS], nd = 0;
    for (int i = 0; i < T->nd; i++) {
        if (tmask & (1u << i)) {
            newi[i] = -1;
            snprintf(axes + strlen(axes), sizeof axes - strlen(axes), "%s%d", axes[0] ? ", " : "", i);
        } else {
            newi[i] = nd;
            snprintf(dn[nd], SB_NAME_MAX, "%s", T->dn[i]);
            sz[nd++] = T->sz[i];
        }
    }
    if (nd == 0) {
        snprintf(dn[0], SB_NAME_MAX, "scalar");
        sz[0] = S(1);
        nd = 1;
    }
    int t = ox_new_tensor(C, node_label(n), "mean", nd, dn, sz, C->nl);
    if (t < 0 || ox_add_line(C, C->t[t].name, "reduce_mean", 0, "%s, axes=[%s]", C->t[x->t].name, axes) < 0)
        return -1;
    int8_t src[SB_MAX_DIMS];
    int ny = 0;
    for (int j = 0; j < x->nd; j++) {
        if (lmask & (1u << j)) {
            if (keep)
                src[ny++] = -1;
        } else {
            src[ny++] = (int8_t)(x->src[j] >= 0 ? newi[x->src[j]] : -1);
        }
    }
    ox_bind_view(C, y, t, ny, src);
    return 0;
}

/* Softmax / LogSoftmax over one logical axis: keeps x's view. With
 * causal >= 0, the softmax of a causal mask over logical dims (causal,
 * axis) (the query and the key positions). */
static int op_softmax(ctx *C, const Onnx__NodeProto *n, val *x, val *y, int causal)
{
    int64_t ax = ox_attr_i(n, "axis", C->opset >= 13 ? -1 : 1);
    int a = ox_norm_axis(ax, x->nd);
    if (a < 0)
        return ox_unsupported(C, n, "axis %lld out of range", (long long)ax);
    if (C->opset < 13 && a != x->nd - 1)
        return ox_unsupported(C, n, "axis %d before opset 13 (softmax over flattened trailing dims)", a);
    if (x->src[a] < 0)
        return ox_unsupported(C, n, "softmax over a size-1 dim");
    mtensor *T = &C->t[x->t];
    char cz[SB_NAME_MAX + 16] = "";
    if (causal >= 0) {
        if (x->src[causal] < 0)
            return ox_unsupported(C, n, "causal mask over a size-1 dim");
        snprintf(cz, sizeof cz, ", causal=%s", T->dn[x->src[causal]]);
    }
    int t = ox_new_tensor(C, node_label(n), "softmax", T->nd, T->dn, T->sz, C->nl);
    if (t < 0 || ox_add_line(C, C->t[t].name, "softmax", 0, "%s, axis=%d%s", C->t[x->t].name, x->src[a], cz) < 0)
        return -1;
    C->l[C->nl - 1].sm_axis = x->src[a];
    C->l[C->nl - 1].in = x->t;
    ox_bind_view(C, y, t, x->nd, x->src);
    return 0;
}

/* A causal mask applied to attention scores right before a Softmax over
 * the last axis: Add(scores, additive mask) or Where(keep mask, scores,
 * -inf). Becomes `softmax(scores, axis=key, causal=query)` (the mask's
 * rows are the scores' second-last dim, its columns the last). 1 when
 * matched (emitted, or refused with its reason). */
int ox_match_masked_softmax(ctx *C, int ni, int *rc)
{
    const Onnx__NodeProto *n = C->g->node[ni];
    int where = op_is(n, "Where");
    if (n->n_input != (where ? 3u : 2u) || !out0(n))
        return 0;
    val *in[3] = {ox_in_val(C, n, 0), ox_in_val(C, n, 1), where ? ox_in_val(C, n, 2) : NULL};
    val *x = NULL, *m = NULL;
    if (where) {
        if (!in[0] || !in[1] || !in[2] || in[0]->kind != V_STATIC || in[0]->mask != MASK_KEEP
            || in[1]->kind != V_ACT || !is_static(in[2]) || !in[2]->has_f || !(in[2]->f < -1e30))
            return 0;
        x = in[1];
        m = in[0];
    } else {
        for (int k = 0; k < 2; k++)
            if (in[k] && in[1 - k] && in[k]->kind == V_ACT && in[1 - k]->kind == V_STATIC
                && in[1 - k]->mask == MASK_ADD) {
                x = in[k];
                m = in[1 - k];
            }
        if (!x)
            return 0;
    }
    if (x->nd < 2 || !ox_broadcasts_to(m, x) || !sym_eq(m->shape[m->nd - 1], x->shape[x->nd - 1])
        || !sym_eq(m->shape[m->nd - 2], x->shape[x->nd - 2]))
        return 0;
    int ism = ox_only_consumer(C, out0(n));
    const Onnx__NodeProto *sm = ism >= 0 ? C->g->node[ism] : NULL;
    if (!sm || !op_is(sm, "Softmax") || !out0(sm)
        || ox_norm_axis(ox_attr_i(sm, "axis", C->opset >= 13 ? -1 : 1), x->nd) != x->nd - 1)
        return 0;
    ox_absorb(C, ism);
    val *y = ox_vget(C, out0(sm));
    if (!y)
        return *rc = -1, 1;
    if (!ox_have(C, "y = softmax(x, axis=b, causal=a)")) {
        *rc = ox_refuse_shaped(C, n, y, x->nd, x->shape, "a causal mask before Softmax needs the model op "
                               "softmax(x, axis=D, causal=D), which this build does not have");
        return 1;
    }
    *rc = op_softmax(C, sm, x, y, x->nd - 2);
    if (*rc > 0)
        y->kind = V_POISON, *rc = 0;
    if (C->info)
        C->info->nfused++;
    return 1;
}

/* The written-out RMSNorm, x * rsqrt(mean(x^2, -1) + eps) [* w]:
 * Pow(x, 2) -> ReduceMean(last axis) -> Add(eps) -> Sqrt -> Div(1, .) or
 * Reciprocal -> Mul(x, .) [-> Mul(., w)]. Becomes rmsnorm(x, axis=D) (its
 * eps is 1e-5; another eps is refused). 1 when matched (emitted or
 * refused). */
int ox_match_rmsnorm(ctx *C, int ni, int *rc)
{
    const Onnx__NodeProto *pw = C->g->node[ni];
    val *x = ox_in_val(C, pw, 0), *e = ox_in_val(C, pw, 1);
    if (!x || x->kind != V_ACT || !e || !is_static(e) || !e->has_f || e->f != 2.0 || !out0(pw) || x->nd < 1)
        return 0;
    int ir = ox_only_consumer(C, out0(pw));
    int64_t axes[8];
    if (ir < 0 || !op_is(C->g->node[ir], "ReduceMean") || !out0(C->g->node[ir])
        || reduce_axes(C, C->g->node[ir], axes, 8) != 1 || ox_norm_axis(axes[0], x->nd) != x->nd - 1
        || !ox_attr_i(C->g->node[ir], "keepdims", 1))
        return 0;
    int iadd = ox_only_consumer(C, out0(C->g->node[ir]));
    if (iadd < 0 || !op_is(C->g->node[iadd], "Add") || !ox_binop_with_static(C, C->g->node[iadd], out0(C->g->node[ir]))
        || !out0(C->g->node[iadd]))
        return 0;
    int isq = ox_only_consumer(C, out0(C->g->node[iadd]));
    if (isq < 0 || !op_is(C->g->node[isq], "Sqrt") || !out0(C->g->node[isq]))
        return 0;
    const char *sq = out0(C->g->node[isq]);
    int idv = ox_only_consumer(C, sq);
    const Onnx__NodeProto *dv = idv >= 0 ? C->g->node[idv] : NULL;
    if (!dv || !out0(dv))
        return 0;
    if (op_is(dv, "Div")) {
        val *one = ox_in_val(C, dv, 0);
        if (dv->n_input != 2 || !in_name(dv, 1) || strcmp(in_name(dv, 1), sq) || !one || !ox_static_name(C, one->name))
            return 0;
    } else if (!op_is(dv, "Reciprocal"))
        return 0;
    int im = ox_only_consumer(C, out0(dv));
    const Onnx__NodeProto *m = im >= 0 ? C->g->node[im] : NULL;
    if (!m || !op_is(m, "Mul") || m->n_input != 2 || !in_name(m, 0) || !in_name(m, 1) || !out0(m))
        return 0;
    const char *a = in_name(m, 0), *b = in_name(m, 1);
    if (!((!strcmp(a, x->name) && !strcmp(b, out0(dv))) || (!strcmp(b, x->name) && !strcmp(a, out0(dv)))))
        return 0;
    int chain[8] = {ir, iadd, isq, idv, im}, nc = 5;
    const char *last = out0(m);
    int k = ox_only_consumer(C, last);
    if (k >= 0 && op_is(C->g->node[k], "Mul") && ox_binop_with_static(C, C->g->node[k], last) && out0(C->g->node[k])) {
        chain[nc++] = k;
        last = out0(C->g->node[k]);
    }
    for (int i = 0; i < nc; i++)
        ox_absorb(C, chain[i]);
    val *y = ox_vget(C, last);
    if (!y)
        return *rc = -1, 1;
    *rc = 0;
    y->kind = V_POISON;
    /* the eps: a Constant node's value is set when the walk reaches it */
    const Onnx__NodeProto *ad = C->g->node[iadd];
    const char *en = strcmp(in_name(ad, 0), out0(C->g->node[ir])) ? in_name(ad, 0) : in_name(ad, 1);
    double eps;
    if (ox_scalar_of(C, en, &eps) || fabs(eps - 1e-5) > 1e-9) {
        ox_unsupported(C, pw, "RMSNorm with eps %g (the model op rmsnorm has eps 1e-5)", ox_scalar_of(C, en, &eps) ? NAN : eps);
        return 1;
    }
    if (!ox_have(C, "y = rmsnorm(x, axis=b)")) {
        *rc = ox_refuse_shaped(C, pw, y, x->nd, x->shape,
                               "the RMSNorm pattern needs the model op rmsnorm(x, axis=D), which this build does not have");
        return 1;
    }
    if (x->src[x->nd - 1] < 0) {
        ox_unsupported(C, pw, "RMSNorm over a size-1 dim");
        return 1;
    }
    mtensor *T = &C->t[x->t];
    int t = ox_new_tensor(C, node_label(pw), "rmsnorm", T->nd, T->dn, T->sz, C->nl);
    if (t < 0 || ox_add_line(C, C->t[t].name, "rmsnorm", 0, "%s, axis=%s", C->t[x->t].name,
                             C->t[x->t].dn[x->src[x->nd - 1]]) < 0)
        return *rc = -1, 1;
    ox_bind_view(C, y, t, x->nd, x->src);
    if (C->info)
        C->info->nfused += nc;
    return 1;
}

/* ---- node handlers ---------------------------------------------------------- */

int ox_node_batchnorm(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y)
{
    (void)x1;
    if (x->nd < 2 || ox_attr_i(n, "training_mode", 0))
        return ox_unsupported(C, n, "rank %d input or training_mode", x->nd);
    int in = ox_materialize(C, x, node_label(n));
    int t = in < 0 ? -1 : ox_new_tensor(C, node_label(n), "bn", C->t[in].nd, C->t[in].dn, C->t[in].sz, C->nl);
    if (t < 0 || ox_add_line(C, C->t[t].name, "batchnorm", 0, "%s", C->t[in].name) < 0)
        return -1;
    ox_bind_act(C, y, t);
    return 0;
}

int ox_node_layernorm(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y)
{
    (void)x1;
    int rc;
    int a = ox_norm_axis(ox_attr_i(n, "axis", -1), x->nd);
    if (a != x->nd - 1 || x->nd < 2)
        rc = ox_unsupported(C, n, "normalizes over several axes (the model format's norm takes one)");
    else
        rc = emit_norm(C, n, x, a, y);
    for (size_t k = 1; k < 3; k++) {
        val *o = ox_out_val(C, n, k);
        if (o) {
            o->kind = V_UNAVAIL;
            o->why = "LayerNormalization's mean or inverse deviation";
        }
    }
    return rc;
}

/* Softmax, LogSoftmax */
int ox_node_softmax(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y)
{
    (void)x1;
    return op_softmax(C, n, x, y, -1);
}

int ox_node_reducemean(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y)
{
    (void)x1;
    int64_t axes[SB_MAX_DIMS];
    int na = reduce_axes(C, n, axes, SB_MAX_DIMS);
    uint32_t mask = 0;
    if (na == -2)
        return ox_unsupported(C, n, "axes are not a constant");
    if (na <= 0 && !ox_attr_i(n, "noop_with_empty_axes", 0))
        mask = (1u << x->nd) - 1;
    for (int i = 0; i < na; i++) {
        int a = ox_norm_axis(axes[i], x->nd);
        if (a < 0)
            return ox_unsupported(C, n, "axis %lld out of range", (long long)axes[i]);
        mask |= 1u << a;
    }
    return mask ? ox_emit_reduce(C, n, x, mask, (int)ox_attr_i(n, "keepdims", 1), y) : ox_alias(C, x, y);
}

#endif /* SB_HAVE_ONNX */
