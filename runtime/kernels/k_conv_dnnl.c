/* runtime/kernels/k_conv_dnnl.c: conv2d forward, backward-data and backward-filter
 * through oneDNN's convolution primitives (the CPU backend's fast path; the
 * im2col kernels of k_conv.c stay the reference and the fallback).
 *
 * Semantics are kernels.h's: NCHW boxes, local padding, an explicit output
 * size; forward overwrites `out` (relu fused as a post-op), backward data
 * and filter ACCUMULATE into dinp and dw. oneDNN picks its own (blocked)
 * layouts ("any"); user buffers stay plain nchw / oihw and are reordered in
 * and out. Accumulation is a reorder with a sum post-op into the user's
 * buffer. A geometry oneDNN cannot take (negative padding of a halo box, a
 * right/bottom padding that does not match the output size) returns -1
 * and the caller uses the im2col kernels. Groups use oneDNN's grouped
 * weights (goihw: the same bytes as (N, C/G, R, S)); dilation d is oneDNN's
 * d - 1.
 *
 * Primitives and their internal buffers are made once per (pass, geometry)
 * and cached (a small table, most recent first). Threads: the library's
 * OpenMP runtime, the same count as the kernels' loops. Not thread-safe:
 * one executor per process calls it, as the CPU backend does. */
#include "shardbench/kernels.h"

#ifdef SB_HAVE_DNNL

#include <dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { PASS_FWD, PASS_BWD_DATA, PASS_BWD_FILTER };

/* oneDNN's bottom/right padding for an output of `out` rows: what the last
 * window needs beyond the input, at least 0 (a last window that stops short
 * of the input's end leaves rows unread: the floor in oneDNN's size rule);
 * -1 if oneDNN's rule (in + pad_lo + pad_hi - k) / stride + 1 == out fails. */
static int pad_hi(int in, int k, int stride, int pad_lo, int out)
{
    int p = (out - 1) * stride + k - in - pad_lo;
    if (p < 0)
        p = 0;
    return (in + pad_lo + p - k) / stride + 1 == out ? p : -1;
}

typedef struct {
    int pass, relu;
    int g[16]; /* B C Hin Win N R S sh sw pt pl Hout Wout dil_h dil_w groups */
} conv_key;

typedef struct {
    conv_key key;
    dnnl_primitive_t conv;
    /* user memories (plain layouts, handles set per call) and the primitive's
     * own (allocated by oneDNN when its layout differs) */
    dnnl_memory_t u_a, u_b, u_c;    /* inputs a, b and output c in user layout */
    dnnl_memory_t p_a, p_b, p_c;    /* the primitive's layouts (may alias u_*) */
    dnnl_primitive_t r_a, r_b, r_c; /* reorders u_a->p_a, u_b->p_b, p_c->u_c (NULL: none) */
    size_t need[3];                 /* bytes of p_a, p_b, p_c when they are not u_* */
} conv_entry;

#define CACHE_MAX 64

static struct {
    int ready; /* 1 ok, -1 unavailable */
    dnnl_engine_t eng;
    dnnl_stream_t st;
    conv_entry *e[CACHE_MAX];
    int n;
    /* the primitives' own layouts live in three scratch buffers shared by
     * every cached entry (calls are sequential): memory stays at three times
     * the largest tensor, however many shapes are cached */
    void *scratch[3];
    size_t cap[3];
} D;

static int init(void)
{
    if (D.ready)
        return D.ready;
    D.ready = -1;
    if (dnnl_engine_create(&D.eng, dnnl_cpu, 0) != dnnl_success)
        return -1;
    if (dnnl_stream_create(&D.st, D.eng, dnnl_stream_default_flags) != dnnl_success)
        return -1;
    D.ready = 1;
    return 1;
}

static void entry_free(conv_entry *e)
{
    if (!e)
        return;
    dnnl_primitive_t ps[] = {e->conv, e->r_a, e->r_b, e->r_c};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
        if (ps[i])
            dnnl_primitive_destroy(ps[i]);
    dnnl_memory_t ms[] = {e->u_a, e->u_b, e->u_c, e->p_a, e->p_b, e->p_c};
    for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++) {
        int dup = 0;
        for (size_t j = 0; j < i; j++)
            dup |= ms[j] == ms[i];
        if (ms[i] && !dup)
            dnnl_memory_destroy(ms[i]);
    }
    free(e);
}

/* A reorder from memory desc `from` to `to` (accumulate: to += from). */
static int make_reorder(const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to,
                        int accumulate, dnnl_primitive_t *out)
{
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    dnnl_primitive_desc_t pd = NULL;
    int rc = -1;
    if (dnnl_primitive_attr_create(&attr) != dnnl_success)
        return -1;
    if (accumulate) {
        if (dnnl_post_ops_create(&po) != dnnl_success || dnnl_post_ops_append_sum(po, 1.0f)
            || dnnl_primitive_attr_set_post_ops(attr, po) != dnnl_success)
            goto done;
    }
    if (dnnl_reorder_primitive_desc_create(&pd, from, D.eng, to, D.eng, attr) != dnnl_success)
        goto done;
    rc = dnnl_primitive_create(out, pd) == dnnl_success ? 0 : -1;
done:
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    if (po)
        dnnl_post_ops_destroy(po);
    dnnl_primitive_attr_destroy(attr);
    return rc;
}

/* The user memory `u` (plain) and, if the primitive wants another layout,
 * its own memory plus the reorder between them (into the primitive for
 * inputs, out of it for the output). */
static int bind(const dnnl_memory_desc_t *user, const dnnl_memory_desc_t *prim, int is_output,
                int accumulate, dnnl_memory_t *u, dnnl_memory_t *p, dnnl_primitive_t *r,
                size_t *need)
{
    *need = 0;
    if (dnnl_memory_create(u, user, D.eng, DNNL_MEMORY_NONE) != dnnl_success)
        return -1;
    if (dnnl_memory_desc_equal(user, prim) && !accumulate) {
        *p = *u;
        *r = NULL;
        return 0;
    }
    if (dnnl_memory_create(p, prim, D.eng, DNNL_MEMORY_NONE) != dnnl_success)
        return -1;
    *need = dnnl_memory_desc_get_size(prim);
    return is_output ? make_reorder(prim, user, accumulate, r) : make_reorder(user, prim, 0, r);
}

static conv_entry *entry_make(const conv_key *k)
{
    const int *g = k->g;
    int B = g[0], C = g[1], Hin = g[2], Win = g[3], N = g[4], R = g[5], S = g[6];
    int sh = g[7], sw = g[8], pt = g[9], pl = g[10], Hout = g[11], Wout = g[12];
    int dh = g[13], dw = g[14], G = g[15];
    /* plain: (N, C, R, S); grouped: (G, N/G, C/G, R, S) */
    dnnl_dims_t src_d = {B, C, Hin, Win}, dst_d = {B, N, Hout, Wout};
    dnnl_dims_t w_d = {N, C, R, S}, wg_d = {G, N / G, C / G, R, S};
    int w_nd = G > 1 ? 5 : 4;
    dnnl_format_tag_t w_tag = G > 1 ? dnnl_goihw : dnnl_oihw;
    dnnl_dims_t strides = {sh, sw}, pad_l = {pt, pl}, dil = {dh - 1, dw - 1},
                pad_r = {pad_hi(Hin, dh * (R - 1) + 1, sh, pt, Hout),
                         pad_hi(Win, dw * (S - 1) + 1, sw, pl, Wout)};
    dnnl_memory_desc_t src_u, w_u, dst_u, src_any, w_any, dst_any;
    if (dnnl_memory_desc_init_by_tag(&src_u, 4, src_d, dnnl_f32, dnnl_nchw)
        || dnnl_memory_desc_init_by_tag(&w_u, w_nd, G > 1 ? wg_d : w_d, dnnl_f32, w_tag)
        || dnnl_memory_desc_init_by_tag(&dst_u, 4, dst_d, dnnl_f32, dnnl_nchw)
        || dnnl_memory_desc_init_by_tag(&src_any, 4, src_d, dnnl_f32, dnnl_format_tag_any)
        || dnnl_memory_desc_init_by_tag(&w_any, w_nd, G > 1 ? wg_d : w_d, dnnl_f32,
                                        dnnl_format_tag_any)
        || dnnl_memory_desc_init_by_tag(&dst_any, 4, dst_d, dnnl_f32, dnnl_format_tag_any))
        return NULL;
    conv_entry *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->key = *k;
    dnnl_convolution_desc_t fd, bd;
    dnnl_primitive_desc_t fpd = NULL, pd = NULL;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    int ok = 0;
    if (dnnl_dilated_convolution_forward_desc_init(&fd, dnnl_forward_training,
                                                   dnnl_convolution_direct, &src_any, &w_any, NULL,
                                                   &dst_any, strides, dil, pad_l, pad_r)
        != dnnl_success)
        goto done;
    if (k->pass == PASS_FWD && k->relu) {
        if (dnnl_primitive_attr_create(&attr) || dnnl_post_ops_create(&po)
            || dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f)
            || dnnl_primitive_attr_set_post_ops(attr, po))
            goto done;
    }
    if (dnnl_primitive_desc_create(&fpd, &fd, attr, D.eng, NULL) != dnnl_success)
        goto done;
    if (k->pass == PASS_FWD) {
        pd = fpd;
        fpd = NULL;
        ok = !bind(&src_u, dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0), 0, 0, &e->u_a,
                   &e->p_a, &e->r_a, &e->need[0])
             && !bind(&w_u, dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0), 0, 0,
                      &e->u_b, &e->p_b, &e->r_b, &e->need[1])
             && !bind(&dst_u, dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0), 1, 0,
                      &e->u_c, &e->p_c, &e->r_c, &e->need[2]);
    } else if (k->pass == PASS_BWD_DATA) {
        /* a = diff_dst, b = weights, c = diff_src (accumulated) */
        if (dnnl_dilated_convolution_backward_data_desc_init(&bd, dnnl_convolution_direct,
                                                             &src_any, &w_any, &dst_any, strides,
                                                             dil, pad_l, pad_r)
                != dnnl_success
            || dnnl_primitive_desc_create(&pd, &bd, NULL, D.eng, fpd) != dnnl_success)
            goto done;
        ok = !bind(&dst_u, dnnl_primitive_desc_query_md(pd, dnnl_query_diff_dst_md, 0), 0, 0,
                   &e->u_a, &e->p_a, &e->r_a, &e->need[0])
             && !bind(&w_u, dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0), 0, 0,
                      &e->u_b, &e->p_b, &e->r_b, &e->need[1])
             && !bind(&src_u, dnnl_primitive_desc_query_md(pd, dnnl_query_diff_src_md, 0), 1, 1,
                      &e->u_c, &e->p_c, &e->r_c, &e->need[2]);
    } else {
        /* a = src, b = diff_dst, c = diff_weights (accumulated) */
        if (dnnl_dilated_convolution_backward_weights_desc_init(&bd, dnnl_convolution_direct,
                                                                &src_any, &w_any, NULL, &dst_any,
                                                                strides, dil, pad_l, pad_r)
                != dnnl_success
            || dnnl_primitive_desc_create(&pd, &bd, NULL, D.eng, fpd) != dnnl_success)
            goto done;
        ok = !bind(&src_u, dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0), 0, 0, &e->u_a,
                   &e->p_a, &e->r_a, &e->need[0])
             && !bind(&dst_u, dnnl_primitive_desc_query_md(pd, dnnl_query_diff_dst_md, 0), 0, 0,
                      &e->u_b, &e->p_b, &e->r_b, &e->need[1])
             && !bind(&w_u, dnnl_primitive_desc_query_md(pd, dnnl_query_diff_weights_md, 0), 1, 1,
                      &e->u_c, &e->p_c, &e->r_c, &e->need[2]);
    }
    ok = ok && dnnl_primitive_create(&e->conv, pd) == dnnl_success;
done:
    if (fpd)
        dnnl_primitive_desc_destroy(fpd);
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    if (po)
        dnnl_post_ops_destroy(po);
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    if (!ok) {
        entry_free(e);
        return NULL;
    }
    return e;
}

/* The cached entry for k (made on first use); NULL if oneDNN cannot do it.
 * Failed geometries are cached too (conv NULL), so they are tried once. */
static conv_entry *entry_get(const conv_key *k)
{
    for (int i = 0; i < D.n; i++)
        if (!memcmp(&D.e[i]->key, k, sizeof *k)) {
            conv_entry *e = D.e[i]; /* move to front */
            memmove(&D.e[1], &D.e[0], (size_t)i * sizeof D.e[0]);
            D.e[0] = e;
            return e->conv ? e : NULL;
        }
    conv_entry *e = entry_make(k);
    if (!e && !(e = calloc(1, sizeof *e)))
        return NULL;
    e->key = *k;
    if (D.n == CACHE_MAX)
        entry_free(D.e[--D.n]);
    memmove(&D.e[1], &D.e[0], (size_t)D.n * sizeof D.e[0]);
    D.e[0] = e;
    D.n++;
    return e->conv ? e : NULL;
}

static int run(conv_entry *e, const float *a, const float *b, float *c, int arg_a, int arg_b,
               int arg_c)
{
    dnnl_memory_t own[3] = {e->p_a, e->p_b, e->p_c};
    for (int k = 0; k < 3; k++) {
        if (!e->need[k])
            continue;
        if (D.cap[k] < e->need[k]) {
            free(D.scratch[k]);
            D.cap[k] = 0;
            size_t n = (e->need[k] + 63) & ~(size_t)63;
            if (posix_memalign(&D.scratch[k], 64, n)) {
                D.scratch[k] = NULL;
                return -1;
            }
            D.cap[k] = n;
        }
        if (dnnl_memory_set_data_handle(own[k], D.scratch[k]))
            return -1;
    }
    if (dnnl_memory_set_data_handle(e->u_a, (void *)a) || dnnl_memory_set_data_handle(e->u_b, (void *)b)
        || dnnl_memory_set_data_handle(e->u_c, c))
        return -1;
    if (e->r_a) {
        dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, e->u_a}, {DNNL_ARG_TO, e->p_a}};
        if (dnnl_primitive_execute(e->r_a, D.st, 2, args))
            return -1;
    }
    if (e->r_b) {
        dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, e->u_b}, {DNNL_ARG_TO, e->p_b}};
        if (dnnl_primitive_execute(e->r_b, D.st, 2, args))
            return -1;
    }
    dnnl_exec_arg_t args[3] = {{arg_a, e->p_a}, {arg_b, e->p_b}, {arg_c, e->p_c}};
    if (dnnl_primitive_execute(e->conv, D.st, 3, args))
        return -1;
    if (e->r_c) {
        dnnl_exec_arg_t rargs[2] = {{DNNL_ARG_FROM, e->p_c}, {DNNL_ARG_TO, e->u_c}};
        if (dnnl_primitive_execute(e->r_c, D.st, 2, rargs))
            return -1;
    }
    return dnnl_stream_wait(D.st) == dnnl_success ? 0 : -1;
}

static int key_of(conv_key *k, int pass, int relu, int B, int C, int H_in, int W_in, int N, int R,
                  int S, int sh, int sw, int pt, int pl, int H_out, int W_out, int dh, int dw,
                  int G)
{
    memset(k, 0, sizeof *k);
    k->pass = pass;
    k->relu = relu;
    int g[16] = {B, C, H_in, W_in, N, R, S, sh, sw, pt, pl, H_out, W_out, dh, dw, G};
    memcpy(k->g, g, sizeof g);
    /* extent of the dilated window */
    int RE = dh * (R - 1) + 1, SE = dw * (S - 1) + 1;
    /* halo boxes carry negative local padding: not oneDNN's */
    if (init() != 1 || B <= 0 || C <= 0 || N <= 0 || H_out <= 0 || W_out <= 0 || pt < 0 || pl < 0
        || pt >= RE || pl >= SE || dh < 1 || dw < 1 || G < 1 || C % G || N % G)
        return -1;
    int pb = pad_hi(H_in, RE, sh, pt, H_out), pr = pad_hi(W_in, SE, sw, pl, W_out);
    if (pb < 0 || pr < 0 || pb >= RE || pr >= SE)
        return -1;
    return 0;
}

int sb_dnnl_conv2d_forward(float *out, const float *inp, const float *w, int B, int C, int H_in,
                           int W_in, int N, int R, int S, int sh, int sw, int pt, int pl,
                           int H_out, int W_out, int dil_h, int dil_w, int groups, int relu)
{
    conv_key k;
    if (key_of(&k, PASS_FWD, relu != 0, B, C, H_in, W_in, N, R, S, sh, sw, pt, pl, H_out, W_out,
               dil_h, dil_w, groups))
        return -1;
    conv_entry *e = entry_get(&k);
    return e ? run(e, inp, w, out, DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST) : -1;
}

int sb_dnnl_conv2d_backward_data(float *dinp, const float *dout, const float *w, int B, int C,
                                 int H_in, int W_in, int N, int R, int S, int sh, int sw, int pt,
                                 int pl, int H_out, int W_out, int dil_h, int dil_w, int groups)
{
    conv_key k;
    if (key_of(&k, PASS_BWD_DATA, 0, B, C, H_in, W_in, N, R, S, sh, sw, pt, pl, H_out, W_out,
               dil_h, dil_w, groups))
        return -1;
    conv_entry *e = entry_get(&k);
    return e ? run(e, dout, w, dinp, DNNL_ARG_DIFF_DST, DNNL_ARG_WEIGHTS, DNNL_ARG_DIFF_SRC) : -1;
}

int sb_dnnl_conv2d_backward_filter(float *dw, const float *dout, const float *inp, int B, int C,
                                   int H_in, int W_in, int N, int R, int S, int sh, int sw, int pt,
                                   int pl, int H_out, int W_out, int dil_h, int dil_w,
                                   int groups)
{
    conv_key k;
    if (key_of(&k, PASS_BWD_FILTER, 0, B, C, H_in, W_in, N, R, S, sh, sw, pt, pl, H_out, W_out,
               dil_h, dil_w, groups))
        return -1;
    conv_entry *e = entry_get(&k);
    return e ? run(e, inp, dout, dw, DNNL_ARG_SRC, DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_WEIGHTS) : -1;
}

int sb_dnnl_available(void) { return init() == 1; }

void sb_dnnl_release(void)
{
    for (int i = 0; i < D.n; i++)
        entry_free(D.e[i]);
    D.n = 0;
    for (int k = 0; k < 3; k++) {
        free(D.scratch[k]);
        D.scratch[k] = NULL;
        D.cap[k] = 0;
    }
}

#else /* no oneDNN: every call declines, the im2col kernels run */

int sb_dnnl_conv2d_forward(float *out, const float *inp, const float *w, int B, int C, int H_in,
                           int W_in, int N, int R, int S, int sh, int sw, int pt, int pl,
                           int H_out, int W_out, int dil_h, int dil_w, int groups, int relu)
{
    (void)dil_h, (void)dil_w, (void)groups;
    (void)out, (void)inp, (void)w, (void)B, (void)C, (void)H_in, (void)W_in, (void)N, (void)R;
    (void)S, (void)sh, (void)sw, (void)pt, (void)pl, (void)H_out, (void)W_out, (void)relu;
    return -1;
}

int sb_dnnl_conv2d_backward_data(float *dinp, const float *dout, const float *w, int B, int C,
                                 int H_in, int W_in, int N, int R, int S, int sh, int sw, int pt,
                                 int pl, int H_out, int W_out, int dil_h, int dil_w, int groups)
{
    (void)dil_h, (void)dil_w, (void)groups;
    (void)dinp, (void)dout, (void)w, (void)B, (void)C, (void)H_in, (void)W_in, (void)N, (void)R;
    (void)S, (void)sh, (void)sw, (void)pt, (void)pl, (void)H_out, (void)W_out;
    return -1;
}

int sb_dnnl_conv2d_backward_filter(float *dw, const float *dout, const float *inp, int B, int C,
                                   int H_in, int W_in, int N, int R, int S, int sh, int sw, int pt,
                                   int pl, int H_out, int W_out, int dil_h, int dil_w,
                                   int groups)
{
    (void)dil_h, (void)dil_w, (void)groups;
    (void)dw, (void)dout, (void)inp, (void)B, (void)C, (void)H_in, (void)W_in, (void)N, (void)R;
    (void)S, (void)sh, (void)sw, (void)pt, (void)pl, (void)H_out, (void)W_out;
    return -1;
}

int sb_dnnl_available(void) { return 0; }
void sb_dnnl_release(void) {}

#endif
