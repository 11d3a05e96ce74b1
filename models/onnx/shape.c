/* onnx/shape.c: shapes and layouts: Constant, Shape, ConstantOfShape, Identity,
 * Dropout, Cast, Gather, Squeeze, Unsqueeze, Concat, Slice, Split, Flatten,
 * Reshape, Transpose (folded to constants, kept as views, or emitted). */
#define _GNU_SOURCE
#ifdef SB_HAVE_ONNX

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "import.h"

/* The `batch` param as a size, when there is one: 1. */
static int batch_sym(ctx *C, sym *out)
{
    for (int i = 0; i < C->nsym; i++)
        if (!strcmp(C->symname[i], "batch")) {
            *out = S(1);
            out->e[i] = 1;
            return 1;
        }
    return 0;
}

static int is_one(sym s)
{
    return s.c == 1 && sym_is_const(s);
}

/* Names of a reshape's output dims: dims kept at either end keep their
 * names; an `embed` split in two gives `heads` and a generated name; a merge
 * back to the embedding width is `embed`; the rest are generated. */
static void reshape_names(ctx *C, const mtensor *X, int nd, const sym *sz, char dn[][SB_NAME_MAX])
{
    int pre = 0, suf = 0;
    while (pre < nd && pre < X->nd && sym_eq(sz[pre], X->sz[pre]))
        pre++;
    while (suf < nd - pre && suf < X->nd - pre && sym_eq(sz[nd - 1 - suf], X->sz[X->nd - 1 - suf]))
        suf++;
    for (int i = 0; i < pre; i++)
        snprintf(dn[i], SB_NAME_MAX, "%s", X->dn[i]);
    for (int i = 0; i < suf; i++)
        snprintf(dn[nd - 1 - i], SB_NAME_MAX, "%s", X->dn[X->nd - 1 - i]);
    int omid = nd - pre - suf, imid = X->nd - pre - suf;
    int bi = -1;
    for (int k = 0; k < C->nsym; k++)
        if (!strcmp(C->symname[k], "batch"))
            bi = k;
    for (int i = pre; i < nd - suf; i++) {
        int64_t v = ox_sym_val(C, sz[i]);
        const char *in0 = imid == 1 ? X->dn[pre] : "";
        int split2 = omid == 2 && imid == 1 && v > 1 && ox_sym_val(C, sz[pre + 1]) > 1;
        int64_t c = sz[i].c;
        int only_batch = bi >= 0 && sz[i].e[bi] == 1;
        for (int k = 0; k < NSYM; k++)
            only_batch &= k == bi || sz[i].e[k] == 0;
        if (omid == 1 && imid == 2 && !strcmp(X->dn[pre], "height") && !strcmp(X->dn[pre + 1], "width"))
            ox_recog_name(C, "patches", v, dn[i]); /* a conv's (height, width) flattened: ViT's patches */
        else if (omid == 1 && C->embed && v == C->embed)
            ox_recog_name(C, "embed", v, dn[i]);
        else if (omid == 1 && imid == 2 && !strcmp(X->dn[pre], "kv_heads") && !strcmp(X->dn[pre + 1], "rep"))
            ox_recog_name(C, "heads", v, dn[i]); /* grouped-query kv heads repeated to the heads */
        else if (omid == 1 && imid == 2 && !strcmp(X->dn[pre], "kv_heads") && !strcmp(X->dn[pre + 1], "head_dim"))
            ox_recog_name(C, "kv_embed", v, dn[i]);
        else if (split2 && C->embed && ox_sym_val(C, X->sz[pre]) == C->embed) {
            /* embed -> (heads, head_dim) */
            if (i == pre) {
                C->heads = v;
                C->head_dim = ox_sym_val(C, sz[pre + 1]);
            }
            ox_recog_name(C, i == pre ? "heads" : "head_dim", v, dn[i]);
        } else if (split2 && !strcmp(in0, "kv_embed") && C->head_dim && ox_sym_val(C, sz[pre + 1]) == C->head_dim)
            ox_recog_name(C, i == pre ? "kv_heads" : "head_dim", v, dn[i]); /* kv_embed -> (kv_heads, head_dim) */
        else if (omid == 2 && imid == 2 && bi >= 0 && X->sz[pre].e[bi] == 1 && X->sz[pre].c == 1 && C->embed
                 && ox_sym_val(C, X->sz[pre + 1]) == C->embed && sz[pre].e[bi] == 1 && sym_is_const(sz[pre + 1])
                 && sz[pre].c * sz[pre + 1].c == C->embed) {
            /* (batch, embed) -> (batch * heads, head_dim): nn.MultiheadAttention */
            C->heads = sz[pre].c;
            C->head_dim = sz[pre + 1].c;
            ox_recog_name(C, i == pre ? "batch_heads" : "head_dim", v, dn[i]);
        } else if (only_batch && c == 1)
            ox_recog_name(C, "batch", v, dn[i]);
        else if (only_batch && C->heads && c == C->heads)
            ox_recog_name(C, "batch_heads", v, dn[i]); /* nn.MultiheadAttention's (batch * heads) */
        else if (only_batch && C->seq && c == C->seq)
            ox_recog_name(C, "tokens", v, dn[i]); /* (batch * seq) */
        else if (C->seq && sym_is_const(sz[i]) && v == C->seq && imid == 1 && X->sz[pre].e[bi >= 0 ? bi : 0] > 0
                 && bi >= 0 && X->sz[pre].c == C->seq)
            ox_recog_name(C, "seq", v, dn[i]); /* (batch * seq) -> (seq, batch) or (batch, seq) */
        else if (C->head_dim && sym_is_const(sz[i]) && v == C->head_dim && i == nd - suf - 1 && omid >= 2
                 && C->heads && bi >= 0 && sz[i - 1].e[bi] > 0)
            ox_recog_name(C, "head_dim", v, dn[i]);
        else if (C->embed && sym_is_const(sz[i]) && v == C->embed)
            ox_recog_name(C, "embed", v, dn[i]);
        else if (is_one(sz[i]))
            snprintf(dn[i], SB_NAME_MAX, "one");
        else
            ox_gen_name(C, v, dn[i]);
    }
    /* a conv's (channels, height, width) flattened to (channels, patches):
     * the tokens of a vision transformer, (embed, seq) */
    if (omid == 1 && imid == 2 && !strcmp(X->dn[pre], "height") && !strcmp(X->dn[pre + 1], "width")) {
        for (int i = 0; i < nd; i++)
            if (!strcmp(dn[i], "channels")) {
                if (!C->embed)
                    C->embed = ox_sym_val(C, sz[i]);
                if (ox_sym_val(C, sz[i]) == C->embed)
                    ox_recog_name(C, "embed", C->embed, dn[i]);
            }
    }
    ox_uniq_dims(nd, dn);
}

/* y = x reshaped to the logical shape sz: a view when only size-1 dims come
 * or go, else a reshape op. */
static int emit_reshape(ctx *C, const Onnx__NodeProto *n, val *x, int nd, const sym *sz, val *y)
{
    if (nd < 1 || nd > SB_MAX_DIMS)
        return ox_unsupported(C, n, "reshape to rank %d", nd);
    int64_t a = ox_shape_numel(C, x->nd, x->shape), b = ox_shape_numel(C, nd, sz);
    if (a < 0 || a != b)
        return ox_unsupported(C, n, "reshape of %lld elements to %lld", (long long)a, (long long)b);
    /* the non-1 dims in order: equal -> a view */
    int xi[SB_MAX_DIMS], nx = 0, yi[SB_MAX_DIMS], ny = 0;
    for (int j = 0; j < x->nd; j++)
        if (!is_one(x->shape[j]))
            xi[nx++] = j;
    for (int j = 0; j < nd; j++)
        if (!is_one(sz[j]))
            yi[ny++] = j;
    int same = nx == ny;
    for (int i = 0; same && i < nx; i++)
        same = sym_eq(x->shape[xi[i]], sz[yi[i]]);
    if (same) {
        int8_t src[SB_MAX_DIMS];
        for (int j = 0; j < nd; j++)
            src[j] = -1;
        for (int i = 0; i < ny; i++)
            src[yi[i]] = x->src[xi[i]];
        ox_bind_view(C, y, x->t, nd, src);
        if (C->info)
            C->info->nviews++;
        return 0;
    }
    int in = ox_materialize(C, x, node_label(n));
    if (in < 0)
        return -1;
    char dn[SB_MAX_DIMS][SB_NAME_MAX], shape[1024] = "";
    reshape_names(C, &C->t[in], nd, sz, dn);
    for (int j = 0; j < nd; j++) {
        char s[128];
        ox_sym_str(C, sz[j], s, sizeof s);
        snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%s=%s", j ? ", " : "", dn[j], s);
    }
    int t = ox_new_tensor(C, node_label(n), "reshape", nd, dn, sz, C->nl);
    if (t < 0 || ox_add_line(C, C->t[t].name, "reshape", 0, "%s, shape=[%s]", C->t[in].name, shape) < 0)
        return -1;
    ox_bind_act(C, y, t);
    return 0;
}

/* Where a row-major reshape puts x's batch: x has the `batch` param in one
 * dim p, as its outer factor (batch, or batch * heads as torch's attention
 * merges them), or where an earlier reshape put it in `tokens` (seq * batch
 * when torch's attention flattens its (seq, batch) rows, batch * seq when a
 * batch-first model does; ctx.tok_before);
 * with A the elements before the batch factor, the batch spans
 * flat positions in units of the rest from A to A * B. The entry of the
 * reshape (export values) holding that whole span is the one that carries
 * the batch: sizes that equal by chance (seq * batch = embed) do not
 * matter. The entry, or -1 when the batch does not sit in one entry. */
static int batch_entry(ctx *C, const val *x, int nd, const sym *sz, int bi)
{
    int64_t B = C->batch_static, A = 1;
    int p = -1;
    for (int j = 0; j < x->nd; j++) {
        if (x->shape[j].e[bi] == 1 && p < 0)
            p = j;
        else if (x->shape[j].e[bi])
            return -1;
        else if (p < 0 && (__builtin_mul_overflow(A, ox_sym_export_val(C, x->shape[j]), &A) || A <= 0))
            return -1;
    }
    if (p < 0)
        return -1;
    /* (seq * batch) of a seq-first layout flattened: the batch is the
     * inner factor of `tokens` there */
    int64_t AB;
    if (B <= 0 || (x->kind == V_ACT && x->src[p] >= 0 && !strcmp(ox_lname(C, x, p), "tokens")
                   && __builtin_mul_overflow(A, C->tok_before ? C->tok_before
                                                : C->batch_axis == 1 ? ox_sym_export_val(C, x->shape[p]) / B : 1,
                                             &A))
        || __builtin_mul_overflow(A, B, &AB) || A <= 0)
        return -1;
    int64_t lo = 1; /* elements of the entries before q */
    for (int q = 0; q < nd; q++) {
        int64_t hi;
        if (!sym_is_const(sz[q]) || sz[q].c <= 0 || __builtin_mul_overflow(lo, sz[q].c, &hi))
            return -1;
        if (A % lo == 0 && hi % AB == 0) {
            if (sz[q].c % B)
                return -1;
            if (C->seq && sz[q].c / B == C->seq)
                C->tok_before = A / lo; /* `tokens`: where the batch sits in it */
            return q;
        }
        if (lo > A)
            return -1;
        lo = hi;
    }
    return -1;
}

/* With a static batch made the `batch` param (ctx.batch_static), a
 * Reshape's shape still holds the numbers the export saw. One entry becomes
 * batch times the rest so that the element counts agree as products of
 * the params: first an entry equal to x's batch dim at the same position,
 * then an entry equal to the batch, then another multiple of it; entries
 * that x keeps unchanged at either end are left alone. 0, or -1 when no
 * such entry makes the counts agree. */
static int symbolic_batch(ctx *C, const val *x, int nd, sym *sz, int infer)
{
    int bi = -1;
    for (int i = 0; i < C->nsym; i++)
        if (!strcmp(C->symname[i], "batch"))
            bi = i;
    int64_t B = C->batch_static;
    if (!B || bi < 0 || infer >= 0)
        return 0;
    sym tx = S(1), ts = S(1);
    for (int i = 0; i < x->nd; i++)
        if (ox_sym_mul(tx, x->shape[i], &tx))
            return 0;
    for (int i = 0; i < nd; i++)
        if (ox_sym_mul(ts, sz[i], &ts))
            return 0;
    if (sym_eq(tx, ts))
        return 0;
    int q = batch_entry(C, x, nd, sz, bi);
    if (q >= 0) {
        sym t = sz[q];
        t.c /= B;
        t.e[bi]++;
        sz[q] = t;
        return 0;
    }
    int pre = 0, suf = 0;
    while (pre < nd && pre < x->nd && sym_eq(sz[pre], x->shape[pre]))
        pre++;
    while (suf < nd - pre && suf < x->nd - pre && sym_eq(sz[nd - 1 - suf], x->shape[x->nd - 1 - suf]))
        suf++;
    for (int pass = 0; pass < 3; pass++)
        for (int i = pre; i < nd - suf; i++) {
            if (!sym_is_const(sz[i]) || sz[i].c <= 0 || sz[i].c % B)
                continue;
            int ok = pass == 0 ? i < x->nd && x->shape[i].e[bi] > 0 && ox_sym_export_val(C, x->shape[i]) == sz[i].c
                     : pass == 1 ? sz[i].c == B
                                 : 1;
            if (!ok)
                continue;
            sym t = sz[i], tot = S(1);
            t.c /= B;
            t.e[bi]++;
            for (int j = 0; j < nd; j++)
                if (ox_sym_mul(tot, j == i ? t : sz[j], &tot))
                    return 0;
            if (sym_eq(tot, tx)) {
                sz[i] = t;
                return 0;
            }
        }
    return -1;
}

/* The target shape of a Reshape (0 copies, -1 is inferred). */
static int reshape_target(ctx *C, const Onnx__NodeProto *n, val *x, val *s, int *nd, sym *sz)
{
    if (!s || s->kind != V_CONST || s->nd != 1)
        return ox_unsupported(C, n, "the shape is not a constant (or a shape subgraph that folds)");
    if (s->ndata < 1 || s->ndata > SB_MAX_DIMS)
        return ox_unsupported(C, n, "reshape to rank %d", s->ndata);
    int infer = -1;
    sym known = S(1);
    int allowzero = (int)ox_attr_i(n, "allowzero", 0);
    for (int i = 0; i < s->ndata; i++) {
        sym d = s->data[i];
        if (sym_is_const(d) && d.c == 0 && !allowzero) {
            if (i >= x->nd)
                return ox_unsupported(C, n, "shape copies dim %d of a rank-%d input", i, x->nd);
            d = x->shape[i];
        } else if (sym_is_const(d) && d.c == -1) {
            if (infer >= 0)
                return ox_unsupported(C, n, "two -1 in the shape");
            infer = i;
            continue;
        } else if (d.c <= 0) {
            return ox_unsupported(C, n, "shape entry %lld", (long long)d.c);
        }
        sz[i] = d;
        if (ox_sym_mul(known, d, &known))
            return ox_unsupported(C, n, "shape too large");
    }
    if (symbolic_batch(C, x, s->ndata, sz, infer))
        return ox_unsupported(C, n, "the shape holds the export's batch of %lld where no entry can be made the batch param",
                              (long long)C->batch_static);
    known = S(1);
    for (int i = 0; i < s->ndata; i++)
        if (i != infer && ox_sym_mul(known, sz[i], &known))
            return ox_unsupported(C, n, "shape too large");
    if (infer >= 0) {
        sym total = S(1);
        for (int j = 0; j < x->nd; j++)
            if (ox_sym_mul(total, x->shape[j], &total))
                return ox_unsupported(C, n, "shape too large");
        if (ox_sym_div(total, known, &sz[infer]))
            return ox_unsupported(C, n, "cannot infer the -1 of the shape as a product of params");
    }
    *nd = s->ndata;
    return 0;
}

static int op_flatten(ctx *C, const Onnx__NodeProto *n, val *x, val *y)
{
    int64_t ax = ox_attr_i(n, "axis", 1);
    if (ax < 0)
        ax += x->nd;
    if (ax < 0 || ax > x->nd)
        return ox_unsupported(C, n, "axis %lld out of range", (long long)ax);
    sym sz[2] = {S(1), S(1)};
    for (int j = 0; j < x->nd; j++)
        if (ox_sym_mul(sz[j >= ax], x->shape[j], &sz[j >= ax]))
            return ox_unsupported(C, n, "size too large");
    return emit_reshape(C, n, x, 2, sz, y);
}

static int get_axes(ctx *C, const Onnx__NodeProto *n, int64_t *axes, int *na)
{
    int k = ox_attr_ints(n, "axes", axes, SB_MAX_DIMS);
    if (k >= 0) {
        *na = k;
        return k > SB_MAX_DIMS ? -1 : 0;
    }
    val *a = ox_in_val(C, n, 1);
    if (!a) {
        *na = -1;
        return 0;
    }
    if (a->kind != V_CONST || a->ndata > SB_MAX_DIMS)
        return -1;
    for (int i = 0; i < a->ndata; i++)
        axes[i] = a->data[i].c;
    *na = a->ndata;
    return 0;
}

/* Squeeze / Unsqueeze on an activation (a view) or a constant (its shape). */
static int op_squeeze(ctx *C, const Onnx__NodeProto *n, val *x, val *y, int unsq)
{
    int64_t axes[SB_MAX_DIMS];
    int na;
    if (get_axes(C, n, axes, &na))
        return ox_unsupported(C, n, "axes are not a small constant");
    int ond = unsq ? x->nd + (na < 0 ? 0 : na) : x->nd;
    uint32_t mask = 0;
    if (na < 0) {
        if (unsq)
            return ox_unsupported(C, n, "Unsqueeze without axes");
        for (int j = 0; j < x->nd; j++)
            if (is_one(x->shape[j]))
                mask |= 1u << j;
    }
    for (int i = 0; i < na; i++) {
        int a = ox_norm_axis(axes[i], ond);
        if (a < 0 || a >= SB_MAX_DIMS)
            return ox_unsupported(C, n, "axis %lld out of range", (long long)axes[i]);
        if (!unsq && !is_one(x->shape[a]))
            return ox_unsupported(C, n, "squeezes dim %d of size %lld", a, (long long)ox_sym_val(C, x->shape[a]));
        mask |= 1u << a;
    }
    if (unsq && ond > SB_MAX_DIMS)
        return ox_unsupported(C, n, "more than %d dims", SB_MAX_DIMS);
    sym shape[SB_MAX_DIMS];
    int8_t src[SB_MAX_DIMS];
    int k = 0, q = 0;
    if (unsq) {
        for (int j = 0; j < ond; j++) {
            if (mask & (1u << j)) {
                shape[k] = S(1);
                src[k++] = -1;
            } else {
                shape[k] = x->shape[q];
                src[k++] = x->kind == V_ACT ? x->src[q] : 0;
                q++;
            }
        }
    } else {
        for (int j = 0; j < x->nd; j++)
            if (!(mask & (1u << j))) {
                shape[k] = x->shape[j];
                src[k++] = x->kind == V_ACT ? x->src[j] : 0;
            }
    }
    if (x->kind == V_ACT) {
        ox_bind_view(C, y, x->t, k, src);
        if (C->info)
            C->info->nviews++;
        return 0;
    }
    if (x->kind == V_CONST)
        return ox_set_const(C, y, k, shape, x->ndata, x->data);
    y->kind = V_STATIC;
    y->nd = k;
    memcpy(y->shape, shape, sizeof shape);
    return 0;
}

static int op_transpose(ctx *C, const Onnx__NodeProto *n, val *x, val *y)
{
    int64_t perm[SB_MAX_DIMS];
    int np = ox_attr_ints(n, "perm", perm, SB_MAX_DIMS);
    if (np < 0) {
        np = x->nd;
        for (int j = 0; j < np; j++)
            perm[j] = np - 1 - j;
    }
    if (np != x->nd)
        return ox_unsupported(C, n, "perm of %d entries for rank %d", np, x->nd);
    uint32_t seen = 0;
    for (int j = 0; j < np; j++) {
        if (perm[j] < 0 || perm[j] >= np || (seen & (1u << perm[j])))
            return ox_unsupported(C, n, "perm is not a permutation");
        seen |= 1u << perm[j];
    }
    sym shape[SB_MAX_DIMS];
    int8_t src[SB_MAX_DIMS];
    for (int j = 0; j < np; j++) {
        shape[j] = x->shape[perm[j]];
        src[j] = x->kind == V_ACT ? x->src[perm[j]] : 0;
    }
    if (x->kind == V_ACT) {
        ox_bind_view(C, y, x->t, np, src);
        if (C->info)
            C->info->nviews++;
        return 0;
    }
    y->kind = V_STATIC;
    y->nd = np;
    memcpy(y->shape, shape, sizeof shape);
    return 0;
}

static int op_concat(ctx *C, const Onnx__NodeProto *n, val *y)
{
    int64_t ax = ox_attr_i(n, "axis", 0);
    int nin = (int)n->n_input, nconst = 0, nact = 0;
    if (nin < 1)
        return ox_unsupported(C, n, "no inputs");
    if (nin > 1024)
        return ox_unsupported(C, n, "more than 1024 inputs");
    for (int i = 0; i < nin; i++) {
        val *x = ox_in_val(C, n, (size_t)i);
        if (!x)
            return ox_unsupported(C, n, "empty input name");
        nconst += x->kind == V_CONST;
        nact += x->kind == V_ACT;
    }
    if (nconst == nin) {
        sym out[MAX_CONST];
        int k = 0;
        for (int i = 0; i < nin; i++) {
            val *x = ox_in_val(C, n, (size_t)i);
            if (x->nd != 1 || k + x->ndata > MAX_CONST)
                return ox_unsupported(C, n, "folds only 1-D constants");
            memcpy(out + k, x->data, (size_t)x->ndata * sizeof *out);
            k += x->ndata;
        }
        sym shape = S(k);
        return ox_set_const(C, y, 1, &shape, k, out);
    }
    if (nact != nin)
        return ox_unsupported(C, n, "concatenates activations with constants");
    val *x0 = ox_in_val(C, n, 0);
    if (nin == 1)
        return ox_alias(C, x0, y);
    int a = ox_norm_axis(ax, x0->nd);
    if (a < 0)
        return ox_unsupported(C, n, "axis %lld out of range", (long long)ax);
    for (int i = 1; i < nin; i++) {
        val *x = ox_in_val(C, n, (size_t)i);
        if (x->nd != x0->nd)
            return ox_unsupported(C, n, "inputs of different ranks");
        for (int j = 0; j < x0->nd; j++)
            if (j != a && !sym_eq(x->shape[j], x0->shape[j]))
                return ox_unsupported(C, n, "inputs differ outside the axis");
        if (memcmp(x->shape[a].e, x0->shape[a].e, sizeof x0->shape[a].e) != 0)
            return ox_unsupported(C, n, "sizes along the axis do not add up as params");
    }
    /* at most 16 inputs per concat: more are chained, 15 at a time */
    int acc = -1;
    for (int i = 0; i < nin;) {
        char args[SB_MAX_IO * (SB_NAME_MAX + 2)] = "";
        int first = acc, k = 0;
        sym total = S(0);
        if (acc >= 0) {
            snprintf(args, sizeof args, "%s", C->t[acc].name);
            total = C->t[acc].sz[a];
            k = 1;
        } else {
            total = x0->shape[a];
            total.c = 0;
        }
        for (; i < nin && k < SB_MAX_IO; i++, k++) {
            val *x = ox_in_val(C, n, (size_t)i);
            int t = ox_materialize(C, x, node_label(n));
            if (t < 0)
                return -1;
            if (first < 0)
                first = t;
            total.c += x->shape[a].c;
            snprintf(args + strlen(args), sizeof args - strlen(args), "%s%s", k ? ", " : "", C->t[t].name);
        }
        sym sz[SB_MAX_DIMS];
        memcpy(sz, C->t[first].sz, sizeof sz);
        sz[a] = total;
        char dn[SB_MAX_DIMS][SB_NAME_MAX];
        memcpy(dn, C->t[first].dn, sizeof dn);
        /* the class token's size-1 dim does not name the joined axis */
        for (int q = 0; q < nin && !strcmp(dn[a], "one"); q++) {
            val *xq = ox_in_val(C, n, (size_t)q);
            if (xq->src[a] >= 0 && strcmp(ox_lname(C, xq, a), "one"))
                snprintf(dn[a], SB_NAME_MAX, "%s", ox_lname(C, xq, a));
        }
        if (!strcmp(dn[a], "patches") && (!C->seq || C->seq == ox_sym_val(C, total))) {
            /* class token + patches: the sequence of a vision transformer */
            C->seq = ox_sym_val(C, total);
            ox_recog_name(C, "seq", C->seq, dn[a]);
        }
        int t = ox_new_tensor(C, node_label(n), "concat", C->t[first].nd, dn, sz, C->nl);
        if (t < 0 || ox_add_line(C, C->t[t].name, "concat", 0, "%s, axis=%d", args, a) < 0)
            return -1;
        acc = t;
    }
    ox_bind_act(C, y, acc);
    return 0;
}

/* An even split of logical axis a of x into `parts`; the outputs' tensors
 * are first..first+parts-1 (cached per value and axis). */
static int even_split(ctx *C, const Onnx__NodeProto *n, val *x, int a, int parts, int *first)
{
    for (int i = 0; i < C->nsplits; i++)
        if (C->splits[i].v == x->name && C->splits[i].axis == a && C->splits[i].parts == parts) {
            *first = C->splits[i].first;
            return 0;
        }
    if (parts < 2 || parts > SB_MAX_IO)
        return ox_unsupported(C, n, "split into %d parts (1 < parts <= %d)", parts, SB_MAX_IO);
    if (x->src[a] < 0)
        return ox_unsupported(C, n, "split of a size-1 dim");
    mtensor *T = &C->t[x->t];
    int ta = x->src[a];
    sym part;
    if (ox_sym_div(T->sz[ta], S(parts), &part))
        return ox_unsupported(C, n, "dim of size %lld does not split into %d", (long long)ox_sym_val(C, T->sz[ta]), parts);
    char lhs[SB_NAME_MAX * 17] = "";
    int f = -1;
    for (int k = 0; k < parts; k++) {
        sym sz[SB_MAX_DIMS];
        T = &C->t[x->t];
        memcpy(sz, T->sz, sizeof sz);
        sz[ta] = part;
        char nm[SB_NAME_MAX + 16];
        snprintf(nm, sizeof nm, "%s_%d", node_label(n), k);
        int t = ox_new_tensor(C, nm, "part", T->nd, T->dn, sz, C->nl);
        if (t < 0)
            return -1;
        if (f < 0)
            f = t;
        snprintf(lhs + strlen(lhs), sizeof lhs - strlen(lhs), "%s%s", k ? ", " : "", C->t[t].name);
    }
    if (ox_add_line(C, lhs, "split", 0, "%s, n=%d, axis=%d", C->t[x->t].name, parts, ta) < 0)
        return -1;
    if (C->nsplits < 64) {
        C->splits[C->nsplits].v = x->name;
        C->splits[C->nsplits].axis = a;
        C->splits[C->nsplits].parts = parts;
        C->splits[C->nsplits++].first = f;
    }
    *first = f;
    return 0;
}

static int op_split(ctx *C, const Onnx__NodeProto *n, val *x)
{
    if (x->kind != V_ACT && x->kind != V_CONST)
        return ox_unsupported(C, n, "applied to a float constant (only activations and integer constants)");
    int64_t ax = ox_attr_i(n, "axis", 0);
    int a = ox_norm_axis(ax, x->nd);
    if (a < 0)
        return ox_unsupported(C, n, "axis %lld out of range", (long long)ax);
    int parts = (int)n->n_output;
    int64_t sizes[SB_MAX_IO + 1];
    int ns = ox_attr_ints(n, "split", sizes, SB_MAX_IO + 1);
    if (ns < 0) {
        val *s = ox_in_val(C, n, 1);
        if (s) {
            if (s->kind != V_CONST || s->ndata > SB_MAX_IO + 1)
                return ox_unsupported(C, n, "split sizes are not a constant");
            ns = s->ndata;
            for (int i = 0; i < ns; i++)
                sizes[i] = ox_sym_val(C, s->data[i]);
        }
    }
    if (x->kind == V_CONST)
        return ox_fold_split_const(C, n, x, a, sizes, ns);
    if (ns >= 0) {
        if (ns != parts)
            return ox_unsupported(C, n, "%d split sizes for %d outputs", ns, parts);
        for (int i = 1; i < ns; i++)
            if (sizes[i] != sizes[0])
                return ox_unsupported(C, n, "uneven split sizes (the model format splits evenly)");
    }
    int first;
    int r = even_split(C, n, x, a, parts, &first);
    if (r)
        return r;
    for (int k = 0; k < parts; k++) {
        val *y = ox_out_val(C, n, (size_t)k);
        if (y)
            ox_bind_view(C, y, first + k, x->nd, x->src);
    }
    return 0;
}

static int slice_params(ctx *C, const Onnx__NodeProto *n, int64_t *st, int64_t *en, int64_t *ax, int64_t *sp, int *k)
{
    if (C->opset < 10) {
        int a = ox_attr_ints(n, "starts", st, SB_MAX_DIMS), b = ox_attr_ints(n, "ends", en, SB_MAX_DIMS);
        int c = ox_attr_ints(n, "axes", ax, SB_MAX_DIMS);
        if (a < 0 || a != b || a > SB_MAX_DIMS)
            return -1;
        if (c < 0)
            for (int i = 0; i < a; i++)
                ax[i] = i;
        for (int i = 0; i < a; i++)
            sp[i] = 1;
        *k = a;
        return 0;
    }
    val *v[4] = {ox_in_val(C, n, 1), ox_in_val(C, n, 2), ox_in_val(C, n, 3), ox_in_val(C, n, 4)};
    int64_t *dst[4] = {st, en, ax, sp};
    if (!v[0] || !v[1] || v[0]->kind != V_CONST || v[1]->kind != V_CONST || v[0]->ndata != v[1]->ndata
        || v[0]->ndata > SB_MAX_DIMS)
        return -1;
    *k = v[0]->ndata;
    for (int q = 0; q < 4; q++) {
        if (!v[q]) {
            for (int i = 0; i < *k; i++)
                dst[q][i] = q == 2 ? i : 1;
            continue;
        }
        if (v[q]->kind != V_CONST || v[q]->ndata != *k)
            return -1;
        for (int i = 0; i < *k; i++) {
            if (!sym_is_const(v[q]->data[i]))
                return -1;
            dst[q][i] = v[q]->data[i].c;
        }
    }
    return 0;
}

static void clamp_range(int64_t d, int64_t *s, int64_t *e);

/* A Slice of one axis with step 1 of a rank-nd value whose sliced dim has
 * d elements: the axis and the clamped [s, e). 0, or -1 when it is not one. */
int ox_slice_range(ctx *C, const Onnx__NodeProto *n, int nd, int64_t d, int *axis, int64_t *s, int64_t *e)
{
    int64_t st[SB_MAX_DIMS], en[SB_MAX_DIMS], ax[SB_MAX_DIMS], sp[SB_MAX_DIMS];
    int k;
    if (slice_params(C, n, st, en, ax, sp, &k) || k != 1 || sp[0] != 1 || (*axis = ox_norm_axis(ax[0], nd)) < 0)
        return -1;
    *s = st[0];
    *e = en[0];
    clamp_range(d, s, e);
    return 0;
}

static void clamp_range(int64_t d, int64_t *s, int64_t *e)
{
    if (*s < 0)
        *s += d;
    if (*e < 0)
        *e += d;
    if (*s < 0)
        *s = 0;
    if (*s > d)
        *s = d;
    if (*e < 0)
        *e = 0;
    if (*e > d)
        *e = d;
}

static int op_slice(ctx *C, const Onnx__NodeProto *n, val *x, val *y)
{
    int64_t st[SB_MAX_DIMS], en[SB_MAX_DIMS], ax[SB_MAX_DIMS], sp[SB_MAX_DIMS];
    int k;
    if (slice_params(C, n, st, en, ax, sp, &k)) {
        for (size_t i = 1; i < 5 && i < n->n_input; i++) {
            val *b = ox_in_val(C, n, i);
            for (int j = 0; b && b->kind == V_CONST && j < b->ndata; j++)
                if (!sym_is_const(b->data[j]))
                    return ox_need_number(C, n, b->data[j], "a bound of the slice");
        }
        return ox_unsupported(C, n, "starts/ends/axes/steps are not constants");
    }
    if (x->kind == V_STATIC && x->fdata && x->nf == ox_shape_numel(C, x->nd, x->shape))
        return ox_fold_slice_static(C, n, x, st, en, ax, sp, k, y);
    if (x->kind == V_STATIC && x->weight && !x->fdata)
        return ox_slice_weight(C, n, x, st, en, ax, sp, k, y);
    if (x->kind == V_CONST) {
        if (x->nd != 1 || k != 1 || sp[0] != 1 || ox_norm_axis(ax[0], 1) != 0)
            return ox_unsupported(C, n, "folds only 1-D constants with step 1");
        int64_t s = st[0], e = en[0];
        clamp_range(x->ndata, &s, &e);
        int cnt = e > s ? (int)(e - s) : 0;
        sym shape = S(cnt);
        return ox_set_const(C, y, 1, &shape, cnt, x->data + s);
    }
    if (x->kind != V_ACT)
        return ox_unsupported(C, n, "slice of a static tensor");
    int axis = -1, parts = 0, idx = 0;
    for (int i = 0; i < k; i++) {
        int a = ox_norm_axis(ax[i], x->nd);
        if (a < 0)
            return ox_unsupported(C, n, "axis %lld out of range", (long long)ax[i]);
        if (!sym_is_const(x->shape[a]))
            return ox_unsupported(C, n, "slice of a symbolic dim");
        int64_t d = x->shape[a].c, s = st[i], e = en[i];
        clamp_range(d, &s, &e);
        if (s == 0 && e == d && sp[i] == 1)
            continue;
        if (sp[i] != 1 || axis >= 0)
            return ox_unsupported(C, n, "not an even split of one axis (steps, or several axes)");
        int64_t len = e - s;
        if (len <= 0 || d % len || s % len)
            return ox_unsupported(C, n, "slice [%lld, %lld) of a dim of %lld is not an even split", (long long)s,
                               (long long)e, (long long)d);
        axis = a;
        parts = (int)(d / len);
        idx = (int)(s / len);
    }
    if (axis < 0) {
        ox_bind_view(C, y, x->t, x->nd, x->src);
        return 0;
    }
    int first, r = even_split(C, n, x, axis, parts, &first);
    if (r)
        return r;
    ox_bind_view(C, y, first + idx, x->nd, x->src);
    return 0;
}

/* x[..., k, ...]: one constant index along logical axis a of an activation
 * (ViT's class token, x[:, 0]): the part of `split(x, sizes=[..], axis=a)`
 * holding it, without the axis. */
static int gather_one(ctx *C, const Onnx__NodeProto *n, val *x, int a, int64_t k, val *y)
{
    if (a < 0 || x->src[a] < 0 || !sym_is_const(x->shape[a]))
        return ox_unsupported(C, n, "gather of one index along a size-1, symbolic or out-of-range axis");
    int64_t d = x->shape[a].c;
    if (k < 0)
        k += d;
    if (k < 0 || k >= d)
        return ox_unsupported(C, n, "index %lld out of range", (long long)k);
    if (!ox_have(C, "y, z = split(x, sizes=[1, 3], axis=b)"))
        return ox_unsupported(C, n, "needs the model op split(x, sizes=[...]), which this build does not have");
    int64_t sizes[3];
    int np = 0, part = 0;
    if (k > 0)
        sizes[np++] = k;
    part = np;
    sizes[np++] = 1;
    if (k < d - 1)
        sizes[np++] = d - 1 - k;
    mtensor *T = &C->t[x->t];
    int ta = x->src[a];
    char lhs[SB_NAME_MAX * 17] = "", ss[96] = "";
    int first = -1;
    for (int i = 0; i < np; i++) {
        sym sz[SB_MAX_DIMS];
        T = &C->t[x->t];
        memcpy(sz, T->sz, sizeof sz);
        sz[ta] = S(sizes[i]);
        char nm[SB_NAME_MAX + 16];
        snprintf(nm, sizeof nm, "%s_%d", node_label(n), i);
        int t = ox_new_tensor(C, nm, "part", T->nd, T->dn, sz, C->nl);
        if (t < 0)
            return -1;
        if (first < 0)
            first = t;
        snprintf(lhs + strlen(lhs), sizeof lhs - strlen(lhs), "%s%s", i ? ", " : "", C->t[t].name);
        snprintf(ss + strlen(ss), sizeof ss - strlen(ss), "%s%lld", i ? ", " : "", (long long)sizes[i]);
    }
    if (ox_add_line(C, lhs, "split", 0, "%s, sizes=[%s], axis=%d", C->t[x->t].name, ss, ta) < 0)
        return -1;
    int8_t src[SB_MAX_DIMS];
    int q = 0;
    for (int j = 0; j < x->nd; j++)
        if (j != a)
            src[q++] = x->src[j];
    ox_bind_view(C, y, first + part, q, src);
    return 0;
}

static int op_gather(ctx *C, const Onnx__NodeProto *n, val *d, val *ix, val *y)
{
    int64_t ax = ox_attr_i(n, "axis", 0);
    if (d->kind == V_CONST && ix->kind == V_CONST) {
        if (d->nd != 1 || ox_norm_axis(ax, 1) != 0)
            return ox_unsupported(C, n, "folds only gathers from 1-D constants");
        sym out[MAX_CONST];
        for (int i = 0; i < ix->ndata; i++) {
            int64_t k = ix->data[i].c;
            if (!sym_is_const(ix->data[i]) || k < -d->ndata || k >= d->ndata)
                return ox_unsupported(C, n, "index %lld out of range", (long long)k);
            out[i] = d->data[k < 0 ? k + d->ndata : k];
        }
        return ox_set_const(C, y, ix->nd, ix->shape, ix->ndata, out);
    }
    if (is_static(d) && ix->kind == V_ACT) {
        if (d->nd != 2 || ox_norm_axis(ax, 2) != 0)
            return ox_unsupported(C, n, "gather from a rank-%d table or along axis %lld (only embedding lookups)",
                               d->nd, (long long)ax);
        if (ix->nd < 1 || ix->nd > SB_MAX_DIMS - 2)
            return ox_unsupported(C, n, "indices of rank %d", ix->nd);
        int in = ox_materialize(C, ix, node_label(n));
        if (in < 0)
            return -1;
        mtensor *X = &C->t[in];
        char dn[SB_MAX_DIMS][SB_NAME_MAX], vn[SB_NAME_MAX];
        sym sz[SB_MAX_DIMS];
        int64_t V = ox_sym_val(C, d->shape[0]), E = ox_sym_val(C, d->shape[1]);
        if (!C->embed)
            C->embed = E;
        if (!C->vocab)
            C->vocab = V;
        for (int i = 0; i < X->nd; i++) {
            snprintf(dn[i], SB_NAME_MAX, "%s", X->dn[i]);
            sz[i] = X->sz[i];
        }
        ox_recog_name(C, E == C->embed ? "embed" : "embed_2", E, dn[X->nd]);
        ox_recog_name(C, V == C->vocab ? "vocab" : "vocab_2", V, vn);
        sz[X->nd] = d->shape[1];
        char vs[64], es[64];
        ox_sym_str(C, d->shape[0], vs, sizeof vs);
        ox_sym_str(C, d->shape[1], es, sizeof es);
        int r = X->nd;
        int t = ox_new_tensor(C, node_label(n), "embedding", r + 1, dn, sz, C->nl);
        if (t < 0 || ox_add_line(C, C->t[t].name, "embedding", 0, "%s, vocab=%s, size=%s, dim=%s, vocab_dim=%s",
                              C->t[in].name, vs, es, C->t[t].dn[r], vn) < 0)
            return -1;
        ox_bind_act(C, y, t);
        return 0;
    }
    if (d->kind == V_ACT && ix->kind == V_CONST && ix->nd == 0 && ix->ndata == 1 && sym_is_const(ix->data[0]))
        return gather_one(C, n, d, ox_norm_axis(ax, d->nd), ix->data[0].c, y);
    return ox_unsupported(C, n, "gather from an activation by activation indices (only embedding lookups in a "
                          "weight, one constant index, or shape arithmetic)");
}

static int op_shape(ctx *C, const Onnx__NodeProto *n, val *x, val *y)
{
    int64_t s = ox_attr_i(n, "start", 0), e = ox_attr_i(n, "end", x->nd);
    clamp_range(x->nd, &s, &e);
    int k = e > s ? (int)(e - s) : 0;
    sym shape = S(k);
    return ox_set_const(C, y, 1, &shape, k, x->shape + s);
}

static int op_constant(ctx *C, const Onnx__NodeProto *n, val *y)
{
    const Onnx__AttributeProto *a;
    if ((a = ox_attr(n, "value")) && a->t) {
        if (ox_set_from_tensor(C, y, a->t, 0))
            return ox_unsupported(C, n, "value tensor of more than %d dims or bad dims", SB_MAX_DIMS);
        return 0;
    }
    if ((a = ox_attr(n, "value_int")) && a->has_i) {
        sym v = S(a->i);
        return ox_set_const(C, y, 0, NULL, 1, &v);
    }
    if ((a = ox_attr(n, "value_ints"))) {
        if (a->n_ints > MAX_CONST)
            return ox_unsupported(C, n, "too large");
        sym out[MAX_CONST];
        for (size_t i = 0; i < a->n_ints; i++)
            out[i] = S(a->ints[i]);
        sym shape = S((int64_t)a->n_ints);
        return ox_set_const(C, y, 1, &shape, (int)a->n_ints, out);
    }
    if ((a = ox_attr(n, "value_float"))) {
        y->kind = V_STATIC;
        y->nd = 0;
        y->has_f = 1;
        y->f = a->f;
        return 0;
    }
    if ((a = ox_attr(n, "value_floats"))) {
        y->kind = V_STATIC;
        y->nd = 1;
        y->shape[0] = S((int64_t)a->n_floats);
        return 0;
    }
    return ox_unsupported(C, n, "no value, value_int(s) or value_float(s) attribute");
}

/* ---- node handlers ---------------------------------------------------------- */

int ox_node_constant(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y)
{
    (void)x;
    (void)x1;
    return op_constant(C, n, y);
}

/* Identity, Dropout, Cast: a view of the input. */
int ox_node_identity(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y)
{
    (void)x1;
    int rc = ox_alias(C, x, y);
    val *mask = ox_out_val(C, n, 1);
    if (mask) {
        mask->kind = V_UNAVAIL;
        mask->why = "Dropout's mask";
    }
    return rc;
}

int ox_node_shape(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y)
{
    (void)x1;
    return op_shape(C, n, x, y);
}

int ox_node_gather(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y)
{
    return x1 ? op_gather(C, n, x, x1, y) : ox_unsupported(C, n, "missing indices");
}

int ox_node_unsqueeze(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y)
{
    (void)x1;
    return op_squeeze(C, n, x, y, 1);
}

int ox_node_squeeze(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y)
{
    (void)x1;
    return op_squeeze(C, n, x, y, 0);
}

int ox_node_concat(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y)
{
    (void)x;
    (void)x1;
    return op_concat(C, n, y);
}

int ox_node_slice(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y)
{
    (void)x1;
    return op_slice(C, n, x, y);
}

int ox_node_flatten(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y)
{
    (void)x1;
    return op_flatten(C, n, x, y);
}

/* (batch, b, E) -> (batch, b * H, E / H), H > 1, b a number: the head
 * split of torch's attention, which merges the heads into the batch, here
 * into dim 1: the `batch` param of this static export is the sequence of a
 * seq-first layout (nn.Transformer's (seq, batch, embed)). */
static void check_seq_first(ctx *C, const val *x, int nd, const sym *sz)
{
    sym b;
    if (!C->batch_static || C->batch_axis || x->kind != V_ACT || x->nd != 3 || nd != 3 || !batch_sym(C, &b)
        || !sym_eq(x->shape[0], b) || !sym_eq(sz[0], b) || !sym_is_const(x->shape[1])
        || !sym_is_const(x->shape[2]) || !sym_is_const(sz[1]) || !sym_is_const(sz[2]) || x->shape[1].c < 2
        || sz[1].c % x->shape[1].c)
        return;
    int64_t H = sz[1].c / x->shape[1].c, e;
    if (H > 1 && !__builtin_mul_overflow(sz[2].c, H, &e) && e == x->shape[2].c)
        C->seq_first = 1;
}

int ox_node_reshape(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y)
{
    int nd = 0;
    sym sz[SB_MAX_DIMS];
    int rc = reshape_target(C, n, x, x1, &nd, sz);
    if (!rc)
        check_seq_first(C, x, nd, sz);
    if (!rc && x->kind == V_ACT)
        rc = emit_reshape(C, n, x, nd, sz, y);
    else if (!rc && x->kind == V_CONST && ox_shape_numel(C, nd, sz) == x->ndata)
        rc = ox_set_const(C, y, nd, sz, x->ndata, x->data);
    else if (!rc) {
        y->kind = V_STATIC;
        y->nd = nd;
        memcpy(y->shape, sz, sizeof sz);
    }
    return rc;
}

int ox_node_transpose(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y)
{
    (void)x1;
    return op_transpose(C, n, x, y);
}

int ox_node_split(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y)
{
    (void)x1;
    (void)y;
    return op_split(C, n, x);
}

/* ConstantOfShape: integer values fold (shape arithmetic: the ones of
 * torch's expand), float and bool ones keep their data for masks. */
int ox_node_constantofshape(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y)
{
    (void)x1;
    if (x->kind != V_CONST || x->nd != 1 || x->ndata > SB_MAX_DIMS)
        return ox_unsupported(C, n, "shape is not a constant");
    val v;
    memset(&v, 0, sizeof v);
    const Onnx__AttributeProto *a = ox_attr(n, "value");
    if (a && a->t && ox_set_from_tensor(C, &v, a->t, 0))
        return C->oom ? -1 : ox_unsupported(C, n, "bad value tensor");
    int64_t cnt = ox_shape_numel(C, x->ndata, x->data);
    for (int i = 0; i < x->ndata; i++)
        if (!sym_is_const(x->data[i]))
            cnt = -1; /* over the params: the shape only */
    int rc = 0;
    if (cnt >= 0 && v.kind == V_CONST && v.ndata == 1 && cnt <= MAX_CONST) {
        sym out[MAX_CONST];
        for (int64_t i = 0; i < cnt; i++)
            out[i] = v.data[0];
        rc = ox_set_const(C, y, x->ndata, x->data, (int)cnt, out);
    } else if (cnt >= 0 && cnt <= MAX_FCONST && (!a || (v.fdata && v.nf == 1))) {
        float *f = calloc((size_t)(cnt ? cnt : 1), sizeof *f);
        if (!f)
            rc = ox_oom(C);
        for (int64_t i = 0; f && i < cnt; i++)
            f[i] = a ? v.fdata[0] : 0.0f;
        if (f)
            rc = ox_set_fconst(C, y, x->ndata, x->data, (int)cnt, f);
        free(f);
    } else {
        y->kind = V_STATIC;
        y->nd = x->ndata;
        memcpy(y->shape, x->data, (size_t)x->ndata * sizeof *x->data);
    }
    free(v.data);
    free(v.fdata);
    return rc;
}

/* Equal of two integer constants (shape checks): 0/1 constants. */
int ox_node_equal(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y)
{
    if (!x1 || x->kind != V_CONST || x1->kind != V_CONST)
        return ox_unsupported(C, n, "compares tensors that are not integer constants (only shape checks fold)");
    int nn = x->ndata > x1->ndata ? x->ndata : x1->ndata;
    if ((x->ndata != nn && x->ndata != 1) || (x1->ndata != nn && x1->ndata != 1))
        return ox_unsupported(C, n, "constants of %d and %d elements", x->ndata, x1->ndata);
    sym out[MAX_CONST];
    for (int i = 0; i < nn; i++) {
        sym p = x->data[x->ndata == 1 ? 0 : i], q = x1->data[x1->ndata == 1 ? 0 : i];
        /* a size over the params is positive: never equal to 0 or -1 (torch's
         * expand(n, -1, -1) checks its sizes against -1) */
        int known = sym_eq(p, q) || (sym_is_const(p) && sym_is_const(q)) || (sym_is_const(p) && p.c <= 0)
                    || (sym_is_const(q) && q.c <= 0);
        if (!known)
            return ox_unsupported(C, n, "compares a param with a number (the answer depends on --set)");
        out[i] = S(sym_eq(p, q));
    }
    const val *big = x->ndata >= x1->ndata ? x : x1;
    return ox_set_const(C, y, big->nd, big->shape, nn, out);
}

/* Where of integer constants folds; Where(causal mask, scores, -inf) before
 * a Softmax is the softmax pattern (norm.c); anything else is refused. */
int ox_node_where(ctx *C, const Onnx__NodeProto *n, val *c, val *a, val *y)
{
    val *b = ox_in_val(C, n, 2);
    if (!a || !b)
        return ox_unsupported(C, n, "needs three inputs");
    if (c->kind != V_CONST || a->kind != V_CONST || b->kind != V_CONST)
        return ox_unsupported(C, n, "selects between tensors that are not integer constants "
                              "(only shape arithmetic, or a causal mask right before a Softmax)");
    int nn = c->ndata;
    const val *in[3] = {c, a, b};
    for (int k = 0; k < 3; k++) {
        if (in[k]->ndata > nn)
            nn = in[k]->ndata;
    }
    for (int k = 0; k < 3; k++)
        if (in[k]->ndata != nn && in[k]->ndata != 1)
            return ox_unsupported(C, n, "constants of different sizes");
    sym out[MAX_CONST];
    for (int i = 0; i < nn; i++) {
        sym cv = c->data[c->ndata == 1 ? 0 : i];
        if (!sym_is_const(cv))
            return ox_unsupported(C, n, "condition is not a number");
        out[i] = cv.c ? a->data[a->ndata == 1 ? 0 : i] : b->data[b->ndata == 1 ? 0 : i];
    }
    const val *big = c->ndata == nn ? c : a->ndata == nn ? a : b;
    return ox_set_const(C, y, big->nd, big->shape, nn, out);
}

/* Range of integer constants. */
int ox_node_range(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y)
{
    val *d = ox_in_val(C, n, 2);
    if (!x1 || !d || x->kind != V_CONST || x1->kind != V_CONST || d->kind != V_CONST || x->ndata != 1
        || x1->ndata != 1 || d->ndata != 1 || !sym_is_const(x->data[0]) || !sym_is_const(x1->data[0])
        || !sym_is_const(d->data[0]) || d->data[0].c == 0)
        return ox_unsupported(C, n, "start, limit and delta are not integer constants");
    int64_t s = x->data[0].c, e = x1->data[0].c, st = d->data[0].c;
    const int64_t lim = (int64_t)1 << 40;
    if (s < -lim || s > lim || e < -lim || e > lim || st < -lim || st > lim)
        return ox_unsupported(C, n, "start, limit or delta beyond 2^40");
    int64_t cnt = st > 0 ? (e - s + st - 1) / st : (s - e - st - 1) / -st;
    if (cnt < 0)
        cnt = 0;
    if (cnt > MAX_CONST)
        return ox_unsupported(C, n, "more than %d elements", MAX_CONST);
    sym out[MAX_CONST];
    for (int64_t i = 0; i < cnt; i++)
        out[i] = S(s + i * st);
    sym shape = S(cnt);
    return ox_set_const(C, y, 1, &shape, (int)cnt, out);
}

/* Trilu of a constant whose data we hold (the causal masks of
 * torch.triu / tril): the triangle, kept as data. */
int ox_node_trilu(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y)
{
    if (x->kind != V_STATIC || !x->fdata || x->nd < 2 || !sym_is_const(x->shape[x->nd - 1])
        || !sym_is_const(x->shape[x->nd - 2]))
        return ox_unsupported(C, n, "applied to %s (only to constants, for masks)",
                              x->kind == V_ACT ? "an activation" : "a constant without data");
    int64_t k = 0;
    if (x1) {
        if (x1->kind != V_CONST || x1->ndata != 1 || !sym_is_const(x1->data[0]))
            return ox_unsupported(C, n, "k is not a constant");
        k = x1->data[0].c;
    }
    int upper = (int)ox_attr_i(n, "upper", 1);
    int64_t r = x->shape[x->nd - 2].c, c = x->shape[x->nd - 1].c;
    float *f = malloc((size_t)x->nf * sizeof *f);
    if (!f)
        return ox_oom(C);
    for (int i = 0; i < x->nf; i++) {
        int64_t col = i % c, row = (i / c) % r;
        int keep = upper ? col - row >= k : col - row <= k;
        f[i] = keep ? x->fdata[i] : 0.0f;
    }
    int rc = ox_set_fconst(C, y, x->nd, x->shape, x->nf, f);
    free(f);
    return rc;
}

/* Whether output dim i of an Expand to nd dims broadcasts x (x has size 1
 * there, or no dim) to a size other than 1. */
static int expand_bcast(const val *x, int nd, const sym *sz, int i)
{
    int xi = i - (nd - x->nd);
    return xi < 0 || (is_one(x->shape[xi]) && !is_one(sz[i]));
}

/* y = expand(x, shape=[...]): the model op takes x without the dims it
 * broadcasts (x's other dims appear in the shape by name, in order), so x
 * is laid out without them first; new dims get names of their size
 * (`batch`, `rep` for grouped-query heads). */
static int emit_expand(ctx *C, const Onnx__NodeProto *n, val *x, int nd, const sym *sz, val *y)
{
    val w = *x;
    int k = 0, kept[SB_MAX_DIMS];
    for (int i = 0; i < nd; i++) {
        int xi = i - (nd - x->nd);
        kept[i] = -1;
        if (!expand_bcast(x, nd, sz, i)) {
            w.src[k] = x->src[xi];
            w.shape[k] = x->shape[xi];
            kept[i] = k++;
        }
    }
    w.nd = k;
    w.mat = -1;
    int in = ox_materialize(C, &w, node_label(n));
    if (in < 0)
        return -1;
    char dn[SB_MAX_DIMS][SB_NAME_MAX], shape[1024] = "";
    for (int i = 0; i < nd; i++) {
        sym b;
        if (kept[i] >= 0)
            snprintf(dn[i], SB_NAME_MAX, "%s", C->t[in].dn[kept[i]]);
        else if (batch_sym(C, &b) && sym_eq(b, sz[i]))
            ox_recog_name(C, "batch", ox_sym_val(C, sz[i]), dn[i]);
        else if (C->heads && i > 0 && !strcmp(dn[i - 1], "kv_heads"))
            ox_recog_name(C, "rep", ox_sym_val(C, sz[i]), dn[i]); /* grouped-query: heads per kv head */
        else
            ox_gen_name(C, ox_sym_val(C, sz[i]), dn[i]);
    }
    ox_uniq_dims(nd, dn);
    for (int i = 0; i < nd; i++) {
        char v[128];
        ox_sym_str(C, sz[i], v, sizeof v);
        snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%s=%s", i ? ", " : "", dn[i], v);
    }
    int t = ox_new_tensor(C, node_label(n), "expand", nd, dn, sz, C->nl);
    if (t < 0 || ox_add_line(C, C->t[t].name, "expand", 0, "%s, shape=[%s]", C->t[in].name, shape) < 0)
        return -1;
    ox_bind_act(C, y, t);
    return 0;
}

/* The name for size-1 dim a of value y (of rank nd, not yet bound) when
 * its only reader is a Concat along a: the other inputs' name there
 * (`patches` joined by a class token make the `seq`). 1 when named. */
static int joined_name(ctx *C, const val *y, int nd, int a, char *out)
{
    int k = ox_only_consumer(C, y->name);
    const Onnx__NodeProto *c = k >= 0 ? C->g->node[k] : NULL;
    if (!c || !op_is(c, "Concat") || ox_norm_axis(ox_attr_i(c, "axis", 0), nd) != a)
        return 0;
    for (size_t i = 0; i < c->n_input; i++) {
        val *o = ox_in_val(C, c, i);
        if (!o || o == y || o->kind != V_ACT || o->nd != nd || o->src[a] < 0)
            continue;
        const char *nm = ox_lname(C, o, a);
        if (!strcmp(nm, "patches")) {
            /* the sequence: this size-1 dim and the other inputs' sizes */
            int64_t total = 1;
            for (size_t q = 0; q < c->n_input; q++) {
                val *w = ox_in_val(C, c, q);
                if (w && w != y && w->kind == V_ACT && w->nd == nd)
                    total += ox_sym_val(C, w->shape[a]);
            }
            if (!C->seq)
                C->seq = total;
            ox_recog_name(C, "seq", total, out);
        } else
            snprintf(out, SB_NAME_MAX, "%s", nm);
        return 1;
    }
    return 0;
}

/* Expand: of integer constants, folded; of an activation or a weight, the
 * `expand` op where the model language has it. */
int ox_node_expand(ctx *C, const Onnx__NodeProto *n, val *x, val *s, val *y)
{
    if (!s || s->kind != V_CONST || s->nd != 1 || s->ndata > SB_MAX_DIMS || s->ndata < 1)
        return ox_unsupported(C, n, "the shape is not a constant (or a shape subgraph that folds)");
    int nd = s->ndata > x->nd ? s->ndata : x->nd;
    sym out[SB_MAX_DIMS];
    for (int i = 0; i < nd; i++) {
        int xi = i - (nd - x->nd), si = i - (nd - s->ndata);
        sym xv = xi >= 0 ? x->shape[xi] : S(1), sv = si >= 0 ? s->data[si] : S(1);
        int x1 = sym_is_const(xv) && xv.c == 1, s1 = sym_is_const(sv) && sv.c == 1;
        if (x1 && i == 0 && C->batch_static && sym_is_const(sv) && sv.c == C->batch_static && batch_sym(C, &out[0]))
            ; /* the leading dim of a static-batch export's shape: the batch param */
        else if (x1)
            out[i] = sv;
        else if (s1 || sym_eq(xv, sv) || ox_sym_export_val(C, xv) == ox_sym_export_val(C, sv))
            out[i] = xv; /* the input's own (symbolic) size wins */
        else
            return ox_unsupported(C, n, "dim %d of size %lld does not broadcast to %lld", i,
                                  (long long)ox_sym_val(C, xv), (long long)ox_sym_val(C, sv));
    }
    if (x->kind == V_CONST) {
        int64_t cnt = ox_shape_numel(C, nd, out);
        if (x->ndata != 1 || cnt < 0 || cnt > MAX_CONST)
            return ox_unsupported(C, n, "expands an integer constant of %d elements", x->ndata);
        sym d[MAX_CONST];
        for (int64_t i = 0; i < cnt; i++)
            d[i] = x->data[0];
        return ox_set_const(C, y, nd, out, (int)cnt, d);
    }
    if (x->kind != V_ACT && !(x->kind == V_STATIC && x->weight))
        return ox_unsupported(C, n, "expands a float constant (only activations and weights)");
    if (!ox_have(C, "y = expand(x, shape=[c=2, a=4, b=4])"))
        return ox_refuse_shaped(C, n, y, nd, out, "needs the model op expand(x, shape=[...]), which this build does not have");
    if (x->kind == V_STATIC) {
        /* a weight (ViT's class token): declared, then expanded */
        if (x->wt < 0) {
            /* declared without the dims the Expand broadcasts (the class
             * token's (1, 1, E) is `weight class_token[one=1, embed=E]`) */
            val d = *x;
            int opos[SB_MAX_DIMS];
            d.nd = 0;
            for (int j = 0; j < x->nd; j++)
                if (!expand_bcast(x, nd, out, j + (nd - x->nd))) {
                    opos[d.nd] = j + (nd - x->nd);
                    d.shape[d.nd++] = x->shape[j];
                }
            x = &d;
            char dn[SB_MAX_DIMS][SB_NAME_MAX], decl[1200] = "";
            for (int j = 0; j < x->nd; j++) {
                int64_t v = ox_sym_val(C, x->shape[j]);
                if (v == 1 && joined_name(C, y, nd, opos[j], dn[j]))
                    ; /* the class token's place in the sequence it joins */
                else if (v == 1)
                    snprintf(dn[j], SB_NAME_MAX, "one");
                else if (C->embed && v == C->embed)
                    ox_recog_name(C, "embed", v, dn[j]);
                else
                    ox_gen_name(C, v, dn[j]);
            }
            ox_uniq_dims(x->nd, dn);
            int t = ox_new_tensor(C, x->name, "w", x->nd, dn, x->shape, -1);
            if (t < 0)
                return -1;
            for (int j = 0; j < x->nd; j++) {
                char v[64];
                ox_sym_str(C, x->shape[j], v, sizeof v);
                snprintf(decl + strlen(decl), sizeof decl - strlen(decl), "%s%s=%s", j ? ", " : "", C->t[t].dn[j], v);
            }
            if (ox_add_line(C, "", "", 0, "weight %s[%s]", C->t[t].name, decl) < 0)
                return -1;
            x = ox_in_val(C, n, 0);
            x->wt = t;
        }
        /* the weight as an activation of its declared tensor, with the
         * broadcast dims as size-1 views */
        val w;
        memset(&w, 0, sizeof w);
        w.name = x->name;
        ox_bind_act(C, &w, x->wt);
        w.nd = x->nd;
        for (int j = 0, q = 0; j < x->nd; j++) {
            int bc = expand_bcast(x, nd, out, j + (nd - x->nd));
            w.src[j] = (int8_t)(bc ? -1 : q++);
            w.shape[j] = x->shape[j];
        }
        return emit_expand(C, n, &w, nd, out, y);
    }
    return emit_expand(C, n, x, nd, out, y);
}

/* For seq.c's repeat (repeat_interleave): the reshape and expand writers. */
int ox_emit_reshape(ctx *C, const Onnx__NodeProto *n, val *x, int nd, const sym *sz, val *y)
{
    return emit_reshape(C, n, x, nd, sz, y);
}

int ox_emit_expand(ctx *C, const Onnx__NodeProto *n, val *x, int nd, const sym *sz, val *y)
{
    if (!ox_have(C, "y = expand(x, shape=[c=2, a=4, b=4])"))
        return ox_refuse_shaped(C, n, y, nd, sz, "needs the model op expand(x, shape=[...]), which this build does not have");
    return emit_expand(C, n, x, nd, sz, y);
}

#endif /* SB_HAVE_ONNX */
