/* onnx/elementwise.c: Add, Sub, Mul, Div, Pow (folded, fused as a pw, or `add`)
 * and the pointwise operators (Relu, Sigmoid, ..., the Div->Erf->Add->Mul
 * Gelu pattern and Gemma 2's Div->Tanh->Mul soft-capping). */
#define _GNU_SOURCE
#ifdef SB_HAVE_ONNX

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "import.h"

static int fold_binary(ctx *C, const Onnx__NodeProto *n, val *a, val *b, val *y)
{
    if (a->kind != V_CONST || b->kind != V_CONST) {
        /* float or large constants: only the shape is kept */
        const val *big = a->nd >= b->nd ? a : b;
        y->kind = V_STATIC;
        y->nd = big->nd;
        memcpy(y->shape, big->shape, sizeof y->shape);
        return 0;
    }
    int nn = a->ndata > b->ndata ? a->ndata : b->ndata;
    if ((a->ndata != nn && a->ndata != 1) || (b->ndata != nn && b->ndata != 1))
        return ox_unsupported(C, n, "shape arithmetic on constants of %d and %d elements", a->ndata, b->ndata);
    sym out[MAX_CONST];
    for (int i = 0; i < nn; i++) {
        sym p = a->data[a->ndata == 1 ? 0 : i], q = b->data[b->ndata == 1 ? 0 : i], r;
        int bad = 0;
        if (op_is(n, "Mul"))
            bad = ox_sym_mul(p, q, &r);
        else if (op_is(n, "Div")) {
            if (sym_is_const(p) && sym_is_const(q) && q.c != 0 && !(p.c == INT64_MIN && q.c == -1)) {
                r = S(p.c / q.c); /* integer division, as ONNX on int64 */
                if ((p.c % q.c != 0) && ((p.c < 0) != (q.c < 0)))
                    r.c -= 0; /* C truncates like ONNX's int division */
            } else
                bad = ox_sym_div(p, q, &r);
        } else if (op_is(n, "Add") || op_is(n, "Sub")) {
            if (memcmp(p.e, q.e, sizeof p.e) != 0 && !(p.c == 0 || q.c == 0))
                bad = -1;
            else {
                r = p.c == 0 ? q : p;
                int64_t c;
                if (op_is(n, "Add") ? __builtin_add_overflow(p.c, q.c, &c) : __builtin_sub_overflow(p.c, q.c, &c))
                    bad = -1;
                else
                    r.c = c;
                if (p.c == 0 && op_is(n, "Sub"))
                    bad = -1;
            }
        } else
            bad = -1;
        if (bad)
            return ox_unsupported(C, n, "shape arithmetic that does not fold to a monomial of the params");
        out[i] = r;
    }
    const val *big = a->ndata >= b->ndata ? a : b;
    return ox_set_const(C, y, big->nd, big->shape, nn, out);
}

/* The model op act(x, fn=FN) where the model language has it (1), else 0:
 * the caller keeps the documented pw fusion (a cost-only pointwise op). */
static int have_act(ctx *C)
{
    return ox_have(C, "y = act(x, fn=silu)");
}

/* y = act(x, fn=fn) over x's tensor, keeping x's view. */
static int emit_act(ctx *C, const Onnx__NodeProto *n, val *x, const char *fn, val *y)
{
    mtensor *T = &C->t[x->t];
    int t = ox_new_tensor(C, node_label(n), "act", T->nd, T->dn, T->sz, C->nl);
    if (t < 0 || ox_add_line(C, C->t[t].name, "act", 0, "%s, fn=%s", C->t[x->t].name, fn) < 0)
        return -1;
    ox_bind_view(C, y, t, x->nd, x->src);
    return 0;
}

/* SiLU as x * sigmoid(x): Sigmoid(x) read only by Mul(x, .). act(silu)
 * where the model language has act; else 0 (Sigmoid and Mul go on as
 * pointwise ops). */
int ox_match_silu(ctx *C, int ni, int *rc)
{
    const Onnx__NodeProto *sg = C->g->node[ni];
    val *x = ox_in_val(C, sg, 0);
    if (!x || x->kind != V_ACT || !out0(sg) || !have_act(C))
        return 0;
    int im = ox_only_consumer(C, out0(sg));
    const Onnx__NodeProto *m = im >= 0 ? C->g->node[im] : NULL;
    if (!m || !op_is(m, "Mul") || m->n_input != 2 || !in_name(m, 0) || !in_name(m, 1) || !out0(m))
        return 0;
    const char *a = in_name(m, 0), *b = in_name(m, 1);
    if (!((!strcmp(a, x->name) && !strcmp(b, out0(sg))) || (!strcmp(b, x->name) && !strcmp(a, out0(sg)))))
        return 0;
    ox_absorb(C, im);
    val *y = ox_vget(C, out0(m));
    if (!y)
        return *rc = -1, 1;
    *rc = emit_act(C, sg, x, "silu", y);
    if (C->info)
        C->info->nfused++;
    return 1;
}

/* Gelu as x * (erf(x / sqrt2) + 1) [* 0.5]: act(gelu) where the model
 * language has act, else one pointwise op on x. */
int ox_match_gelu(ctx *C, int ni, int *rc)
{
    const Onnx__NodeProto *dv = C->g->node[ni];
    val *x = ox_in_val(C, dv, 0);
    if (!x || x->kind != V_ACT || !ox_binop_with_static(C, dv, x->name) || !out0(dv))
        return 0;
    if (!ox_static_name(C, in_name(dv, 1)))
        return 0;
    int ierf = ox_only_consumer(C, out0(dv));
    if (ierf < 0 || !op_is(C->g->node[ierf], "Erf") || !out0(C->g->node[ierf]))
        return 0;
    int iadd = ox_only_consumer(C, out0(C->g->node[ierf]));
    if (iadd < 0 || !op_is(C->g->node[iadd], "Add")
        || !ox_binop_with_static(C, C->g->node[iadd], out0(C->g->node[ierf])) || !out0(C->g->node[iadd]))
        return 0;
    int imul = ox_only_consumer(C, out0(C->g->node[iadd]));
    if (imul < 0)
        return 0;
    const Onnx__NodeProto *m = C->g->node[imul];
    if (!op_is(m, "Mul") || m->n_input != 2 || !in_name(m, 0) || !in_name(m, 1) || !out0(m))
        return 0;
    const char *a = in_name(m, 0), *b = in_name(m, 1), *s = out0(C->g->node[iadd]);
    if (!((strcmp(a, x->name) == 0 && strcmp(b, s) == 0) || (strcmp(b, x->name) == 0 && strcmp(a, s) == 0)))
        return 0;
    int chain[4] = {ierf, iadd, imul}, nc = 3;
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
    *rc = have_act(C) ? emit_act(C, dv, x, "gelu", y) : ox_emit_pw(C, dv, x, y, 1, 2);
    if (C->info)
        C->info->nfused += nc;
    return 1;
}

/* Node index of the only consumer of `v` if it is of type op (with a
 * static other operand when want_static), else -1. */
static int next_of(ctx *C, const char *v, const char *op, int want_static)
{
    int k = v ? ox_only_consumer(C, v) : -1;
    if (k < 0 || !op_is(C->g->node[k], op) || !out0(C->g->node[k]))
        return -1;
    if (want_static && !ox_binop_with_static(C, C->g->node[k], v))
        return -1;
    return k;
}

/* Node k reads exactly a and b (in either order). */
static int reads_pair(ctx *C, int k, const char *a, const char *b)
{
    const Onnx__NodeProto *m = C->g->node[k];
    const char *p = in_name(m, 0), *q = in_name(m, 1);
    return m->n_input == 2 && p && q && ((!strcmp(p, a) && !strcmp(q, b)) || (!strcmp(p, b) && !strcmp(q, a)));
}

/* The tanh Gelu as torch 1.13 writes it for opsets before 20:
 * 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x*x*x))), i.e.
 * Mul(x, x) -> Mul(x, .) -> Mul(k, .) -> Add(x, .) -> Mul(b, .) -> Tanh
 * -> Add(1, .) -> Mul(x, .) [-> Mul(0.5, .)]. act(gelu_tanh) where the
 * model language has act, else one pointwise op on x. */
static int match_gelu_tanh(ctx *C, int ni, int *rc)
{
    const Onnx__NodeProto *sq = C->g->node[ni];
    val *x = ox_in_val(C, sq, 0);
    if (!x || x->kind != V_ACT || sq->n_input != 2 || !in_name(sq, 1) || strcmp(in_name(sq, 1), x->name) || !out0(sq))
        return 0;
    int ch[9], nc = 0;
    const char *v = out0(sq);
    int k = next_of(C, v, "Mul", 0);
    if (k < 0 || !reads_pair(C, k, x->name, v))
        return 0;
    ch[nc++] = k;
    if ((k = next_of(C, out0(C->g->node[k]), "Mul", 1)) < 0)
        return 0;
    ch[nc++] = k;
    v = out0(C->g->node[k]);
    if ((k = next_of(C, v, "Add", 0)) < 0 || !reads_pair(C, k, x->name, v))
        return 0;
    ch[nc++] = k;
    static const char *const rest[3] = {"Mul", "Tanh", "Add"};
    for (int i = 0; i < 3; i++) {
        if ((k = next_of(C, out0(C->g->node[k]), rest[i], i != 1)) < 0)
            return 0;
        ch[nc++] = k;
    }
    v = out0(C->g->node[k]);
    if ((k = next_of(C, v, "Mul", 0)) < 0 || !reads_pair(C, k, x->name, v))
        return 0;
    ch[nc++] = k;
    int h = next_of(C, out0(C->g->node[k]), "Mul", 1);
    if (h >= 0)
        ch[nc++] = h;
    for (int i = 0; i < nc; i++)
        ox_absorb(C, ch[i]);
    val *y = ox_vget(C, out0(C->g->node[ch[nc - 1]]));
    if (!y)
        return *rc = -1, 1;
    /* x is read twice by Mul(x, x) and once by Mul(x, .), Add(x, .) and Mul(x, .) */
    *rc = have_act(C) ? emit_act(C, sq, x, "gelu_tanh", y) : ox_emit_pw(C, sq, x, y, 1, 5);
    if (C->info)
        C->info->nfused += nc;
    return 1;
}

/* Mul: the tanh Gelu, the Gelu whose Div is a Mul by 1/sqrt2, or a Mul. */
int ox_match_mul(ctx *C, int ni, int *rc)
{
    return match_gelu_tanh(C, ni, rc) || ox_match_gelu(C, ni, rc);
}

/* Logit soft-capping as torch writes c * tanh(x / c) (Gemma 2):
 * Div(x, c) -> Tanh -> Mul(., c), c one scalar constant in both, a whole
 * number in [1, 1e9] as the softcap op takes. softcap(x, cap=c); any other
 * c is left to the operators one by one. */
static int match_softcap(ctx *C, int ni, int *rc)
{
    const Onnx__NodeProto *dv = C->g->node[ni];
    val *x = ox_in_val(C, dv, 0);
    double c1, c2;
    if (!x || x->kind != V_ACT || dv->n_input != 2 || !in_name(dv, 1) || !out0(dv)
        || !ox_static_name(C, in_name(dv, 1)) || ox_scalar_of(C, in_name(dv, 1), &c1))
        return 0;
    int it = next_of(C, out0(dv), "Tanh", 0);
    int im = it >= 0 ? next_of(C, out0(C->g->node[it]), "Mul", 1) : -1;
    if (im < 0 || !ox_have(C, "y = softcap(x, cap=2)"))
        return 0;
    const Onnx__NodeProto *m = C->g->node[im];
    const char *t = out0(C->g->node[it]);
    const char *cn = strcmp(in_name(m, 0), t) == 0 ? in_name(m, 1) : in_name(m, 0);
    if (ox_scalar_of(C, cn, &c2) || c1 != c2 || c1 < 1 || c1 > 1e9 || c1 != floor(c1))
        return 0;
    ox_absorb(C, it);
    ox_absorb(C, im);
    val *y = ox_vget(C, out0(m));
    if (!y)
        return *rc = -1, 1;
    mtensor *T = &C->t[x->t];
    int k = ox_new_tensor(C, node_label(dv), "softcap", T->nd, T->dn, T->sz, C->nl);
    if (k < 0 || ox_add_line(C, C->t[k].name, "softcap", 0, "%s, cap=%lld", C->t[x->t].name,
                             (long long)c1) < 0)
        return *rc = -1, 1;
    ox_bind_view(C, y, k, x->nd, x->src);
    *rc = 0;
    if (C->info)
        C->info->nfused += 2;
    return 1;
}

int ox_match_div(ctx *C, int ni, int *rc)
{
    return match_softcap(C, ni, rc) || ox_match_gelu(C, ni, rc);
}

/* Add, Sub, Mul, Div (and Pow with a constant exponent). */
static int op_binary(ctx *C, const Onnx__NodeProto *n, val *a, val *b, val *y)
{
    if (is_static(a) && is_static(b))
        return fold_binary(C, n, a, b, y);
    if (a->kind == V_ACT && b->kind == V_ACT) {
        if (op_is(n, "Pow"))
            return ox_unsupported(C, n, "power of two activations");
        if (op_is(n, "Mul") && ox_same_shape(a, b) && ox_have(C, "y = mul(x, x)")) {
            /* the model's mul matches b to a position by position */
            int ta = ox_materialize(C, a, node_label(n)), tb = ox_materialize(C, b, node_label(n));
            if (ta < 0 || tb < 0)
                return -1;
            mtensor *A = &C->t[ta];
            int t = ox_new_tensor(C, node_label(n), "mul", A->nd, A->dn, A->sz, C->nl);
            if (t < 0 || ox_add_line(C, C->t[t].name, "mul", 0, "%s, %s", C->t[ta].name, C->t[tb].name) < 0)
                return -1;
            ox_bind_act(C, y, t);
            return 0;
        }
        if (ox_same_shape(a, b)) {
            int ta = ox_materialize(C, a, node_label(n)), tb = ox_materialize(C, b, node_label(n));
            if (ta < 0 || tb < 0)
                return -1;
            mtensor *A = &C->t[ta];
            int t = ox_new_tensor(C, node_label(n), "add", A->nd, A->dn, A->sz, C->nl);
            if (t < 0 || ox_add_line(C, C->t[t].name, "add", 1, "%s, %s", C->t[ta].name, C->t[tb].name) < 0)
                return -1;
            ox_bind_act(C, y, t);
            return 0;
        }
        /* broadcast: a pointwise op on the larger operand */
        if (ox_broadcasts_to(b, a))
            return ox_emit_pw(C, n, a, y, 1, 1 + (a->t == b->t));
        if (ox_broadcasts_to(a, b))
            return ox_emit_pw(C, n, b, y, 1, 1 + (a->t == b->t));
        return ox_unsupported(C, n, "operands of shapes that do not broadcast one way");
    }
    val *x = a->kind == V_ACT ? a : b, *c = a->kind == V_ACT ? b : a;
    if (!ox_broadcasts_to(c, x))
        return ox_unsupported(C, n, "a constant that does not broadcast to the activation");
    return ox_emit_pw(C, n, x, y, 1, 1);
}

/* ---- node handlers ---------------------------------------------------------- */

/* Add, Sub, Mul, Div, Pow */
int ox_node_binary(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y)
{
    return x1 ? op_binary(C, n, x, x1, y) : ox_unsupported(C, n, "needs two inputs");
}

/* Relu, Sigmoid, ...: one pw fused into the producer, or an elementwise;
 * Clip to [0, 6], Sigmoid, Tanh and Gelu are act where the model language
 * has it. */
int ox_node_pointwise(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y)
{
    (void)x1;
    if (x->kind == V_ACT && op_is(n, "Clip") && have_act(C)) {
        /* ReLU6 (MobileNet): Clip to [0, 6], bounds as inputs from opset 11 */
        double lo = NAN, hi = NAN;
        if (C->opset >= 11) {
            if (ox_scalar_of(C, in_name(n, 1), &lo) || ox_scalar_of(C, in_name(n, 2), &hi))
                lo = hi = NAN;
        } else {
            const Onnx__AttributeProto *a = ox_attr(n, "min"), *b = ox_attr(n, "max");
            lo = a && a->has_f ? a->f : NAN;
            hi = b && b->has_f ? b->f : NAN;
        }
        if (lo == 0 && hi == 6)
            return emit_act(C, n, x, "relu6", y);
    }
    if (x->kind == V_ACT && (op_is(n, "Sigmoid") || op_is(n, "Tanh") || op_is(n, "Gelu")) && have_act(C)) {
        const Onnx__AttributeProto *ap = ox_attr(n, "approximate");
        int tanh_approx = ap && ap->has_s && ap->s.len == 4 && !memcmp(ap->s.data, "tanh", 4);
        return emit_act(C, n, x, op_is(n, "Sigmoid") ? "sigmoid" : op_is(n, "Tanh") ? "tanh" : tanh_approx ? "gelu_tanh" : "gelu", y);
    }
    if (x->kind == V_ACT)
        return ox_emit_pw(C, n, x, y, 1, 1);
    int rc = ox_alias(C, x, y);
    y->kind = y->kind == V_CONST ? V_STATIC : y->kind;
    return rc;
}

#endif /* SB_HAVE_ONNX */
