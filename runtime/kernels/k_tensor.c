/* runtime/kernels/k_tensor.c: elementwise add/relu, reduce-mean over axes, box
 * copies between N-d row-major arrays (pack, unpack, accumulate-unpack) and
 * axis permutation: the data movement behind concat, split, stack, unstack,
 * transpose and relayout; plus the SGD and Adam updates.
 * Not here: moving boxes between ranks (the executor's relayout). */
#include "shardbench/kernels.h"

#include <math.h>
#include <string.h>

#include "box_runs.h"
#include "par.h"

/* ---- elementwise ---- */

void sb_add_forward(float *out, const float *const *inps, int k, size_t n,
                    int relu)
{
    SB_PAR(if (n * (size_t)k > SB_PAR_MIN))
    for (size_t i = 0; i < n; i++) {
        float s = 0.0f;
        for (int j = 0; j < k; j++)
            s += inps[j][i];
        out[i] = (relu && s < 0.0f) ? 0.0f : s;
    }
}

void sb_add_backward(float *const *dinps, const float *dout, const float *out,
                     int k, size_t n)
{
    for (int j = 0; j < k; j++) {
        if (!dinps[j])
            continue;
        if (out)
            sb_relu_backward(dinps[j], dout, out, n);
        else {
            float *d = dinps[j];
            SB_PAR(if (n > SB_PAR_MIN))
            for (size_t i = 0; i < n; i++)
                d[i] += dout[i];
        }
    }
}

void sb_relu_forward(float *out, const float *inp, size_t n)
{
    SB_PAR(if (n > SB_PAR_MIN))
    for (size_t i = 0; i < n; i++)
        out[i] = inp[i] > 0.0f ? inp[i] : 0.0f;
}

void sb_relu_backward(float *dinp, const float *dout, const float *out,
                      size_t n)
{
    SB_PAR(if (n > SB_PAR_MIN))
    for (size_t i = 0; i < n; i++)
        if (out[i] > 0.0f)
            dinp[i] += dout[i];
}

void sb_sgd_update(float *w, float *g, size_t n, float lr)
{
    SB_PAR(if (n > SB_PAR_MIN))
    for (size_t i = 0; i < n; i++) {
        w[i] -= lr * g[i];
        g[i] = 0.0f;
    }
}

void sb_adam_update(float *w, float *g, float *m, float *v, size_t n, float lr, float beta1,
                    float beta2, float eps, int t)
{
    /* bias corrections in double: 1 - b^t loses digits in float for b near 1 */
    float c1 = (float)(1.0 - pow(beta1, t)), c2 = (float)(1.0 - pow(beta2, t));
    SB_PAR(if (n > SB_PAR_MIN))
    for (size_t i = 0; i < n; i++) {
        m[i] = beta1 * m[i] + (1.0f - beta1) * g[i];
        v[i] = beta2 * v[i] + (1.0f - beta2) * g[i] * g[i];
        w[i] -= lr * (m[i] / c1) / (sqrtf(v[i] / c2) + eps);
        g[i] = 0.0f;
    }
}

/* ---- odometer over the leading nd-1 axes ---- */

// Walks every index of dims[0..nd-1) (the last axis is the caller's inner
// loop), keeping two running offsets with per-axis strides sa and sb.
typedef struct {
    int nd;
    int idx[SB_MAX_DIMS];
    const int *dims;
    const size_t *sa, *sb;
    size_t a, b; // current offsets
} odometer;

// Advances to the next index; returns 0 after the last one.
static int odo_next(odometer *od)
{
    for (int d = od->nd - 2; d >= 0; d--) {
        od->idx[d]++;
        od->a += od->sa[d];
        od->b += od->sb[d];
        if (od->idx[d] < od->dims[d])
            return 1;
        od->a -= od->sa[d] * (size_t)od->dims[d];
        od->b -= od->sb[d] * (size_t)od->dims[d];
        od->idx[d] = 0;
    }
    return 0;
}

static void odo_start(odometer *od, int nd, const int *dims, const size_t *sa,
                      const size_t *sb, size_t a0, size_t b0)
{
    od->nd = nd;
    memset(od->idx, 0, sizeof od->idx);
    od->dims = dims;
    od->sa = sa;
    od->sb = sb;
    od->a = a0;
    od->b = b0;
}

static int any_empty(int nd, const int *dims)
{
    for (int d = 0; d < nd; d++)
        if (dims[d] <= 0)
            return 1;
    return 0;
}

// Row-major strides of dims.
static void strides_of(size_t *st, int nd, const int *dims)
{
    size_t s = 1;
    for (int d = nd - 1; d >= 0; d--) {
        st[d] = s;
        s *= (size_t)dims[d];
    }
}

/* ---- reduce-mean ---- */

// out strides: 0 along reduced axes; *n_out, *n_red: element counts
static void reduce_geometry(size_t *sin, size_t *sout, size_t *n_out,
                            size_t *n_red, int nd, const int *dims,
                            unsigned axes)
{
    size_t so = 1;
    *n_red = 1;
    for (int d = nd - 1; d >= 0; d--) {
        if (axes & (1u << d)) {
            sout[d] = 0;
            *n_red *= (size_t)dims[d];
        } else {
            sout[d] = so;
            so *= (size_t)dims[d];
        }
    }
    *n_out = so;
    strides_of(sin, nd, dims);
}

void sb_reduce_mean_forward(float *out, const float *inp, int nd,
                            const int *dims, unsigned axes, long count)
{
    size_t sin[SB_MAX_DIMS], sout[SB_MAX_DIMS], n_out, n_red;
    reduce_geometry(sin, sout, &n_out, &n_red, nd, dims, axes);
    memset(out, 0, sizeof(float) * n_out);
    if (nd == 0 || any_empty(nd, dims))
        return;
    float scale = 1.0f / (float)(count > 0 ? (size_t)count : n_red);
    int inner = dims[nd - 1], red_last = (axes >> (nd - 1)) & 1u;
    odometer od;
    odo_start(&od, nd, dims, sin, sout, 0, 0);
    do {
        const float *x = inp + od.a;
        float *o = out + od.b;
        if (red_last) {
            float s = 0.0f;
            for (int i = 0; i < inner; i++)
                s += x[i];
            *o += s;
        } else {
            for (int i = 0; i < inner; i++)
                o[i] += x[i];
        }
    } while (odo_next(&od));
    for (size_t i = 0; i < n_out; i++)
        out[i] *= scale;
}

void sb_reduce_mean_backward(float *dinp, const float *dout, int nd,
                             const int *dims, unsigned axes, long count)
{
    size_t sin[SB_MAX_DIMS], sout[SB_MAX_DIMS], n_out, n_red;
    reduce_geometry(sin, sout, &n_out, &n_red, nd, dims, axes);
    if (nd == 0 || any_empty(nd, dims))
        return;
    float scale = 1.0f / (float)(count > 0 ? (size_t)count : n_red);
    int inner = dims[nd - 1], red_last = (axes >> (nd - 1)) & 1u;
    odometer od;
    odo_start(&od, nd, dims, sin, sout, 0, 0);
    do {
        float *dx = dinp + od.a;
        const float *g = dout + od.b;
        for (int i = 0; i < inner; i++)
            dx[i] += g[red_last ? 0 : i] * scale;
    } while (odo_next(&od));
}

/* ---- box copies ---- */

void sb_box_runs_make(sb_box_runs *r, const int *dst_dims, const int *dst_lo,
                      const int *src_dims, const int *src_lo, const int *size, int nd)
{
    int64_t dd[SB_MAX_DIMS], sd[SB_MAX_DIMS], dl[SB_MAX_DIMS], sl[SB_MAX_DIMS];
    for (int d = 0; d < nd; d++) {
        dd[d] = dst_dims[d];
        sd[d] = src_dims[d];
        dl[d] = dst_lo[d];
        sl[d] = src_lo[d];
        r->size[d] = size[d];
    }
    while (nd > 1 && r->size[nd - 1] == dd[nd - 1] && r->size[nd - 1] == sd[nd - 1]) {
        int64_t k = r->size[nd - 1];
        nd--;
        dd[nd - 1] *= k;
        sd[nd - 1] *= k;
        dl[nd - 1] *= k;
        sl[nd - 1] *= k;
        r->size[nd - 1] *= k;
    }
    int64_t ds = 1, ss = 1;
    r->nd = nd;
    r->d0 = r->s0 = 0;
    for (int d = nd - 1; d >= 0; d--) {
        r->ds[d] = ds;
        r->ss[d] = ss;
        r->d0 += dl[d] * ds;
        r->s0 += sl[d] * ss;
        ds *= dd[d];
        ss *= sd[d];
    }
}

void sb_strided_box_copy(float *dst, const int *dst_dims, const int *dst_lo,
                 const float *src, const int *src_dims, const int *src_lo,
                 const int *size, int nd, int accumulate)
{
    if (nd <= 0) { // a scalar
        *dst = accumulate ? *dst + *src : *src;
        return;
    }
    if (any_empty(nd, size))
        return;
    // Trailing axes that both arrays hold whole merge into longer runs.
    sb_box_runs r;
    sb_box_runs_make(&r, dst_dims, dst_lo, src_dims, src_lo, size, nd);
    nd = r.nd;
    int sz[SB_MAX_DIMS];
    size_t ds[SB_MAX_DIMS], ss[SB_MAX_DIMS], d0 = (size_t)r.d0, s0 = (size_t)r.s0;
    for (int d = 0; d < nd; d++) {
        sz[d] = (int)r.size[d];
        ds[d] = (size_t)r.ds[d];
        ss[d] = (size_t)r.ss[d];
    }
    int run = sz[nd - 1];
    odometer od;
    odo_start(&od, nd, sz, ds, ss, d0, s0);
    do {
        float *o = dst + od.a;
        const float *x = src + od.b;
        if (accumulate)
            for (int i = 0; i < run; i++)
                o[i] += x[i];
        else
            memcpy(o, x, sizeof(float) * (size_t)run);
    } while (odo_next(&od));
}

void sb_box_pack(float *dst, const float *src, int nd, const int *src_dims,
                 const int *lo, const int *size)
{
    int zero[SB_MAX_DIMS] = {0};
    sb_strided_box_copy(dst, size, zero, src, src_dims, lo, size, nd, 0);
}

void sb_box_unpack(float *dst, int nd, const int *dst_dims, const int *lo,
                   const int *size, const float *src)
{
    int zero[SB_MAX_DIMS] = {0};
    sb_strided_box_copy(dst, dst_dims, lo, src, size, zero, size, nd, 0);
}

void sb_box_unpack_add(float *dst, int nd, const int *dst_dims,
                       const int *lo, const int *size, const float *src)
{
    int zero[SB_MAX_DIMS] = {0};
    sb_strided_box_copy(dst, dst_dims, lo, src, size, zero, size, nd, 1);
}

void sb_permute(float *out, const float *inp, int nd, const int *dims,
                const int *perm, int accumulate)
{
    if (nd <= 0) {
        *out = accumulate ? *out + *inp : *inp;
        return;
    }
    int od_dims[SB_MAX_DIMS];
    size_t sin[SB_MAX_DIMS], sin_p[SB_MAX_DIMS], sout[SB_MAX_DIMS];
    strides_of(sin, nd, dims);
    for (int d = 0; d < nd; d++) {
        od_dims[d] = dims[perm[d]];
        sin_p[d] = sin[perm[d]]; // input stride of output axis d
    }
    if (any_empty(nd, od_dims))
        return;
    strides_of(sout, nd, od_dims);
    int inner = od_dims[nd - 1];
    size_t step = sin_p[nd - 1];
    odometer od;
    odo_start(&od, nd, od_dims, sout, sin_p, 0, 0);
    do {
        float *o = out + od.a;
        const float *x = inp + od.b;
        if (accumulate)
            for (int i = 0; i < inner; i++)
                o[i] += x[i * step];
        else
            for (int i = 0; i < inner; i++)
                o[i] = x[i * step];
    } while (odo_next(&od));
}
