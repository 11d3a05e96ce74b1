/* onnx/fold.c: constants that a dynamic-axis export leaves for the importer
 * to fold: a Slice of a float or bool table whose data we hold (the rotary
 * cos/sin tables and the causal mask cut to the sequence length,
 * `self.cos[:s]`, when the length comes from Shape rather than a number),
 * and a Split of an integer constant (the repeat counts of torch's
 * repeat_interleave). Called by shape.c's Slice and Split handlers. */
#define _GNU_SOURCE
#ifdef SB_HAVE_ONNX

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "import.h"

/* The names of the params in size s, for messages ("batch", "batch, seq"). */
static void sym_params(ctx *C, sym s, char *out, size_t n)
{
    out[0] = '\0';
    for (int i = 0; i < C->nsym; i++)
        if (s.e[i])
            snprintf(out + strlen(out), n - strlen(out), "%s'%s'", out[0] ? ", " : "", C->symname[i]);
}

int ox_need_number(ctx *C, const Onnx__NodeProto *n, sym s, const char *what)
{
    char ps[128];
    sym_params(C, s, ps, sizeof ps);
    return ox_unsupported(C, n, "%s depends on the dynamic axis %s, which the import needs as a number: "
                          "fix it with `shardbench import --dim NAME=N`", what, ps);
}

/* The elements x[st:en:sp] takes along each dim (ONNX's rules: negative
 * bounds count from the end, then clamp; a negative step walks down from
 * the start to the end, exclusive): first element lo, step, count cnt.
 * 0, or 1 when refused. */
static int slice_bounds(ctx *C, const Onnx__NodeProto *n, const val *x, const int64_t *st, const int64_t *en,
                        const int64_t *ax, const int64_t *sp, int k, int64_t *lo, int64_t *step, int64_t *cnt,
                        int64_t *dim)
{
    int nd = x->nd;
    for (int j = 0; j < nd; j++) {
        if (!sym_is_const(x->shape[j]))
            return ox_need_number(C, n, x->shape[j], "slice of a constant table whose size");
        dim[j] = x->shape[j].c;
        lo[j] = 0, step[j] = 1, cnt[j] = dim[j];
    }
    for (int i = 0; i < k; i++) {
        int a = ox_norm_axis(ax[i], nd);
        if (a < 0)
            return ox_unsupported(C, n, "axis %lld out of range", (long long)ax[i]);
        if (sp[i] == 0 || sp[i] > ((int64_t)1 << 40) || sp[i] < -((int64_t)1 << 40))
            return ox_unsupported(C, n, "step %lld (0, or beyond 2^40)", (long long)sp[i]);
        int64_t d = dim[a], s = st[i], e = en[i];
        /* ONNX: negative bounds count from the end, then clamp; a
         * negative step walks down from s to e (exclusive) */
        if (s < 0)
            s += d;
        if (e < 0)
            e += d;
        if (sp[i] > 0) {
            s = s < 0 ? 0 : s > d ? d : s;
            e = e < 0 ? 0 : e > d ? d : e;
            cnt[a] = e > s ? (e - s + sp[i] - 1) / sp[i] : 0;
        } else {
            s = s < 0 ? -1 : s > d - 1 ? d - 1 : s;
            e = e < -1 ? -1 : e > d - 1 ? d - 1 : e;
            cnt[a] = s > e ? (s - e - sp[i] - 1) / -sp[i] : 0;
        }
        lo[a] = s;
        step[a] = sp[i];
    }
    return 0;
}

/* y = x[st:en:sp] over the given axes (k entries), x a weight read for its
 * shape only (a graph-only export's packed projection cut in parts, as
 * nn.MultiheadAttention's in_proj_weight[:E] and [E:]): a weight of the
 * part's shape. The parts are disjoint, so they train as the slices of one
 * weight do, and count its elements once. */
int ox_slice_weight(ctx *C, const Onnx__NodeProto *n, val *x, const int64_t *st, const int64_t *en,
                    const int64_t *ax, const int64_t *sp, int k, val *y)
{
    int64_t lo[SB_MAX_DIMS], step[SB_MAX_DIMS], cnt[SB_MAX_DIMS], dim[SB_MAX_DIMS];
    int rc = slice_bounds(C, n, x, st, en, ax, sp, k, lo, step, cnt, dim);
    if (rc)
        return rc;
    y->kind = V_STATIC;
    y->weight = 1;
    y->wt = -1;
    y->nd = x->nd;
    for (int j = 0; j < x->nd; j++) {
        if (!cnt[j])
            return ox_unsupported(C, n, "an empty slice of a weight");
        y->shape[j] = S(cnt[j]);
    }
    return 0;
}

/* y = x[st:en:sp] over the given axes, x a static tensor whose float data we
 * hold (k entries; axes normalised by the caller's slice_params). */
int ox_fold_slice_static(ctx *C, const Onnx__NodeProto *n, val *x, const int64_t *st, const int64_t *en,
                         const int64_t *ax, const int64_t *sp, int k, val *y)
{
    int nd = x->nd;
    int64_t lo[SB_MAX_DIMS], step[SB_MAX_DIMS], cnt[SB_MAX_DIMS], dim[SB_MAX_DIMS];
    int rc = slice_bounds(C, n, x, st, en, ax, sp, k, lo, step, cnt, dim);
    if (rc)
        return rc;
    int64_t total = 1;
    sym shape[SB_MAX_DIMS];
    for (int j = 0; j < nd; j++) {
        total *= cnt[j];
        shape[j] = S(cnt[j]);
    }
    float *f = malloc((size_t)(total ? total : 1) * sizeof *f);
    if (!f)
        return ox_oom(C);
    for (int64_t o = 0; o < total; o++) {
        int64_t rem = o, src = 0, stride = 1;
        for (int j = nd - 1; j >= 0; j--) {
            int64_t q = rem % cnt[j];
            rem /= cnt[j];
            src += (lo[j] + q * step[j]) * stride;
            stride *= dim[j];
        }
        f[o] = x->fdata[src];
    }
    rc = ox_set_fconst(C, y, nd, shape, (int)total, f);
    free(f);
    return rc;
}

/* The outputs of a Split of an integer constant along axis a (1-D: the
 * repeat counts of repeat_interleave, cut per head). */
int ox_fold_split_const(ctx *C, const Onnx__NodeProto *n, val *x, int a, const int64_t *sizes, int ns)
{
    if (x->nd != 1 || a != 0)
        return ox_unsupported(C, n, "folds only splits of 1-D integer constants");
    int parts = (int)n->n_output, off = 0;
    if (ns >= 0 && ns != parts)
        return ox_unsupported(C, n, "%d split sizes for %d outputs", ns, parts);
    int64_t each = parts ? x->ndata / parts : 0;
    if (ns < 0 && (!parts || x->ndata % parts))
        return ox_unsupported(C, n, "%d elements do not split into %d", x->ndata, parts);
    for (int i = 0; i < parts; i++) {
        int64_t len = ns >= 0 ? sizes[i] : each;
        if (len < 0 || len > x->ndata - off)
            return ox_unsupported(C, n, "split sizes beyond the %d elements", x->ndata);
        val *y = ox_out_val(C, n, (size_t)i);
        sym sh = S(len);
        if (y && ox_set_const(C, y, 1, &sh, (int)len, x->data + off))
            return -1;
        off += (int)len;
    }
    if (off != x->ndata)
        return ox_unsupported(C, n, "split sizes add up to %d of %d elements", off, x->ndata);
    return 0;
}

#endif /* SB_HAVE_ONNX */
