/* onnx/conv.c: Conv, MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool and
 * the Pad folded into them: windows, strides and symmetric pads; a Conv's
 * `group` (grouped and depthwise) and `dilations` too. */
#define _GNU_SOURCE
#ifdef SB_HAVE_ONNX

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "import.h"

/* k: the window's extent (a dilated kernel's: dilation * (kernel - 1) + 1) */
static int pads_sym(ctx *C, const Onnx__NodeProto *n, const sym *in, const int64_t *k,
                    const int64_t *s, int64_t *p)
{
    const Onnx__AttributeProto *ap = ox_attr(n, "auto_pad");
    const char *mode = ap && ap->has_s ? (const char *)ap->s.data : NULL;
    size_t ml = ap && ap->has_s ? ap->s.len : 0;
    int64_t pads[4] = {0, 0, 0, 0};
    if (mode && ml && !(ml == 6 && memcmp(mode, "NOTSET", 6) == 0)) {
        if (ml == 5 && memcmp(mode, "VALID", 5) == 0) {
            p[0] = p[1] = 0;
            return 0;
        }
        for (int i = 0; i < 2; i++) {
            int64_t h = ox_sym_val(C, in[i]);
            int64_t o = (h + s[i] - 1) / s[i];
            int64_t tot = (o - 1) * s[i] + k[i] - h;
            if (tot < 0)
                tot = 0;
            if (tot % 2)
                return ox_unsupported(C, n, "auto_pad %.*s needs asymmetric padding (the model format pads both sides equally)",
                                   (int)ml, mode);
            p[i] = tot / 2;
        }
        return 0;
    }
    int np = ox_attr_ints(n, "pads", pads, 4);
    if (np >= 0 && np != 4)
        return ox_unsupported(C, n, "pads with %d entries (expected 4)", np);
    if (pads[0] != pads[2] || pads[1] != pads[3])
        return ox_unsupported(C, n, "asymmetric pads [%lld, %lld, %lld, %lld] (the model format pads both sides equally)",
                           (long long)pads[0], (long long)pads[1], (long long)pads[2], (long long)pads[3]);
    for (int i = 0; i < 2; i++) {
        if (pads[i] < 0 || pads[i] > (1 << 20))
            return ox_unsupported(C, n, "pad %lld out of range", (long long)pads[i]);
        p[i] = pads[i];
    }
    return 0;
}

static int spatial_ok(ctx *C, const Onnx__NodeProto *n, const val *x, const char *what)
{
    if (x->nd != 4)
        return ox_unsupported(C, n, "%s of a rank-%d tensor (only 2-D, NCHW)", what, x->nd);
    if (!sym_is_const(x->shape[2]) || !sym_is_const(x->shape[3]))
        return ox_unsupported(C, n, "%s over a symbolic image size (export with a fixed height and width)", what);
    return 0;
}

/* The window's strides s, pads p, output size and (d != NULL: a Conv) its
 * dilations d; a pool's window is never dilated. */
static int window(ctx *C, const Onnx__NodeProto *n, const val *x, const int64_t *k, int64_t *s, int64_t *p,
                  int64_t *ho, int64_t *wo, int ceil_mode, int64_t *d)
{
    int64_t dd[2] = {1, 1};
    s[0] = s[1] = 1;
    int ns = ox_attr_ints(n, "strides", s, 2), nd = ox_attr_ints(n, "dilations", dd, 2);
    if ((ns >= 0 && ns != 2) || (nd >= 0 && nd != 2))
        return ox_unsupported(C, n, "strides or dilations not of 2 entries");
    if (!d && (dd[0] != 1 || dd[1] != 1))
        return ox_unsupported(C, n, "dilations [%lld, %lld] of a pooling window (the model format dilates conv kernels only)",
                           (long long)dd[0], (long long)dd[1]);
    int64_t ke[2]; /* the window's extent */
    for (int i = 0; i < 2; i++) {
        if (s[i] < 1 || s[i] > (1 << 20) || k[i] < 1 || k[i] > (1 << 20) || dd[i] < 1 || dd[i] > (1 << 20))
            return ox_unsupported(C, n, "kernel, stride or dilation out of range");
        ke[i] = dd[i] * (k[i] - 1) + 1;
        if (d)
            d[i] = dd[i];
    }
    k = ke;
    int r = pads_sym(C, n, &x->shape[2], k, s, p);
    if (r)
        return r;
    int64_t o[2];
    for (int i = 0; i < 2; i++) {
        p[i] += x->xpad[i];
        int64_t h = x->shape[2 + i].c + 2 * p[i] - k[i];
        if (h < 0)
            return ox_unsupported(C, n, "window %lld larger than the padded input %lld", (long long)k[i],
                               (long long)(x->shape[2 + i].c + 2 * p[i]));
        if (ceil_mode && h % s[i]) {
            /* the partial last window: one more row of padding gives the
             * same output size when the stride allows it */
            if ((h + 2) / s[i] != h / s[i] + 1 || p[i] + 1 >= k[i])
                return ox_unsupported(C, n, "ceil_mode=1 with an uneven window (the model format rounds down)");
            p[i]++;
            h += 2;
        }
        o[i] = h / s[i] + 1;
    }
    *ho = o[0];
    *wo = o[1];
    return 0;
}

static int op_conv(ctx *C, const Onnx__NodeProto *n, val *x, val *w, val *y)
{
    int r = spatial_ok(C, n, x, "Conv");
    if (r)
        return r;
    if (!is_static(w) || w->nd != 4)
        return ox_unsupported(C, n, "the weight is not a static 4-D tensor");
    /* grouped (depthwise: group = channels): weight (out, in/group, kh, kw) */
    int64_t group = ox_attr_i(n, "group", 1), cin = ox_sym_val(C, x->shape[1]);
    if (group < 1 || !sym_is_const(x->shape[1]) || cin % group || w->shape[0].c % group)
        return ox_unsupported(C, n, "group=%lld does not divide the %lld input and %lld output channels",
                           (long long)group, (long long)cin, (long long)w->shape[0].c);
    int64_t k[2] = {w->shape[2].c, w->shape[3].c}, s[2], p[2], d[2], ho, wo;
    ox_attr_ints(n, "kernel_shape", k, 2);
    if ((r = window(C, n, x, k, s, p, &ho, &wo, 0, d)))
        return r;
    if (w->shape[1].c * group != cin)
        return ox_unsupported(C, n, "weight has %lld input channels per group, the input %lld in %lld groups",
                           (long long)w->shape[1].c, (long long)cin, (long long)group);
    int in = ox_materialize(C, x, node_label(n));
    if (in < 0)
        return -1;
    mtensor *X = &C->t[in];
    char dn[4][SB_NAME_MAX];
    sym sz[4] = {X->sz[0], w->shape[0], S(ho), S(wo)};
    snprintf(dn[0], SB_NAME_MAX, "%s", X->dn[0]);
    ox_recog_name(C, "channels", w->shape[0].c, dn[1]);
    snprintf(dn[2], SB_NAME_MAX, "%s", X->dn[2]);
    snprintf(dn[3], SB_NAME_MAX, "%s", X->dn[3]);
    if (!strcmp(dn[1], dn[0]) || !strcmp(dn[1], dn[2]) || !strcmp(dn[1], dn[3]))
        return ox_unsupported(C, n, "output channel name '%s' clashes with the input's dims", dn[1]);
    char outs[64], extra[96] = "";
    ox_sym_str(C, w->shape[0], outs, sizeof outs);
    /* written only where not 1, so plain convs read as before */
    if (d[0] != 1 || d[1] != 1)
        snprintf(extra, sizeof extra, ", dilation=[%lld, %lld]", (long long)d[0], (long long)d[1]);
    if (group != 1)
        snprintf(extra + strlen(extra), sizeof extra - strlen(extra), ", groups=%lld", (long long)group);
    int t = ox_new_tensor(C, node_label(n), "conv", 4, dn, sz, C->nl);
    if (t < 0 || ox_add_line(C, C->t[t].name, "conv", 1, "%s, out=%s, kernel=[%lld, %lld], stride=[%lld, %lld], pad=[%lld, %lld]%s, dim=%s",
                          C->t[in].name, outs, (long long)k[0], (long long)k[1], (long long)s[0],
                          (long long)s[1], (long long)p[0], (long long)p[1], extra, dn[1]) < 0)
        return -1;
    ox_bind_act(C, y, t);
    return 0;
}

static int op_pool(ctx *C, const Onnx__NodeProto *n, val *x, val *y, int avg)
{
    int r = spatial_ok(C, n, x, n->op_type);
    if (r)
        return r;
    int64_t k[2] = {1, 1}, s[2], p[2], ho, wo;
    if (ox_attr_ints(n, "kernel_shape", k, 2) != 2)
        return ox_unsupported(C, n, "kernel_shape missing or not 2-D");
    if ((r = window(C, n, x, k, s, p, &ho, &wo, (int)ox_attr_i(n, "ceil_mode", 0), NULL)))
        return r;
    int in = ox_materialize(C, x, node_label(n));
    if (in < 0)
        return -1;
    mtensor *X = &C->t[in];
    sym sz[4] = {X->sz[0], X->sz[1], S(ho), S(wo)};
    int t = ox_new_tensor(C, node_label(n), "pool", 4, X->dn, sz, C->nl);
    if (t < 0 || ox_add_line(C, C->t[t].name, "pool", 0, "%s, kernel=[%lld, %lld], stride=[%lld, %lld], pad=[%lld, %lld], type=%s",
                          C->t[in].name, (long long)k[0], (long long)k[1], (long long)s[0], (long long)s[1],
                          (long long)p[0], (long long)p[1], avg ? "avg" : "max") < 0)
        return -1;
    ox_bind_act(C, y, t);
    return 0;
}

/* Pad (constant mode): no op. Zero pads are a view; symmetric spatial pads
 * read only by a Conv or Pool are added to its pads. */
static int op_pad(ctx *C, const Onnx__NodeProto *n, val *x, val *y)
{
    const Onnx__AttributeProto *md = ox_attr(n, "mode");
    if (md && md->has_s && !(md->s.len == 8 && memcmp(md->s.data, "constant", 8) == 0))
        return ox_unsupported(C, n, "mode %.*s (only constant padding before a Conv or Pool)",
                           (int)(md->s.len < 20 ? md->s.len : 20), (const char *)md->s.data);
    int64_t pads[2 * SB_MAX_DIMS] = {0};
    int np = ox_attr_ints(n, "pads", pads, 2 * SB_MAX_DIMS);
    if (np < 0) {
        val *pv = ox_in_val(C, n, 1);
        if (!pv || pv->kind != V_CONST || pv->ndata > 2 * SB_MAX_DIMS)
            return ox_unsupported(C, n, "pads are not a constant");
        np = pv->ndata;
        for (int i = 0; i < np; i++)
            pads[i] = sym_is_const(pv->data[i]) ? pv->data[i].c : -1;
    }
    if (np != 2 * x->nd || ox_in_val(C, n, 3))
        return ox_unsupported(C, n, "pads of %d entries for rank %d, or axes", np, x->nd);
    int any = 0;
    for (int i = 0; i < np; i++) {
        if (pads[i] < 0 || pads[i] > (1 << 20))
            return ox_unsupported(C, n, "pad %lld", (long long)pads[i]);
        any |= pads[i] != 0;
    }
    if (!any)
        return ox_alias(C, x, y);
    int ok = x->nd == 4 && !pads[0] && !pads[1] && !pads[4] && !pads[5] && pads[2] == pads[6] && pads[3] == pads[7];
    int k = ox_only_consumer(C, y->name);
    if (!ok || k < 0 || !(op_is(C->g->node[k], "Conv") || op_is(C->g->node[k], "MaxPool")
                          || op_is(C->g->node[k], "AveragePool"))
        || !in_name(C->g->node[k], 0) || strcmp(in_name(C->g->node[k], 0), y->name))
        return ox_unsupported(C, n, "padding that is not symmetric on height and width right before a Conv or Pool");
    ox_bind_view(C, y, x->t, x->nd, x->src);
    y->xpad[0] = pads[2];
    y->xpad[1] = pads[3];
    if (C->info)
        C->info->nviews++;
    return 0;
}

/* ---- node handlers ---------------------------------------------------------- */

int ox_node_conv(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y)
{
    return op_conv(C, n, x, x1 ? x1 : x, y);
}

int ox_node_maxpool(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y)
{
    (void)x1;
    return op_pool(C, n, x, y, 0);
}

int ox_node_avgpool(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y)
{
    (void)x1;
    return op_pool(C, n, x, y, 1);
}

/* GlobalAveragePool, GlobalMaxPool: reduce_mean over the spatial dims. */
int ox_node_globalpool(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y)
{
    (void)x1;
    if (x->nd < 3)
        return ox_unsupported(C, n, "input of rank %d", x->nd);
    return ox_emit_reduce(C, n, x, ((1u << x->nd) - 1) & ~3u, 1, y);
}

int ox_node_pad(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y)
{
    (void)x1;
    return op_pad(C, n, x, y);
}

#endif /* SB_HAVE_ONNX */
