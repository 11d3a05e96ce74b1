/* k_pointwise.c: the CPU kernels of the pointwise family (act, mul,
 * expand; kernels.h). A broadcast operand s of a full array (dims, nd) has
 * the dims of a bit mask `sdims`, in order, row-major: element (i_0, ...,
 * i_{nd-1}) of the full array reads s at Σ i_d·sstride_d over the dims of
 * the mask. Loops that only write full-size outputs run in parallel; the
 * sums into a broadcast operand's gradient run in one thread, in a fixed
 * order, so results do not depend on the thread count. */
#include <string.h>

#include "act_math.h"
#include "par.h"
#include "shardbench/kernels.h"

void sb_act_forward(float *out, const float *inp, size_t n, int fn)
{
    SB_PAR(if (n > SB_PAR_MIN))
    for (size_t i = 0; i < n; i++)
        out[i] = sb_act_value(fn, inp[i]);
}

void sb_act_backward(float *dinp, const float *dout, const float *inp, size_t n, int fn)
{
    SB_PAR(if (n > SB_PAR_MIN))
    for (size_t i = 0; i < n; i++)
        dinp[i] += dout[i] * sb_act_grad(fn, inp[i]);
}

/* The walk of a full array by rows of its last dim: rows, the row length,
 * and per dim the stride of the broadcast operand (0 for a dim it lacks). */
typedef struct {
    int nd;
    size_t rows, inner;
    size_t dims[SB_MAX_DIMS], sstride[SB_MAX_DIMS];
} bcast_walk;

/* 0 when the full array is empty */
static int bcast_walk_make(bcast_walk *w, int nd, const int *dims, unsigned sdims)
{
    memset(w, 0, sizeof *w);
    w->nd = nd;
    size_t s = 1, total = 1;
    for (int d = nd - 1; d >= 0; d--) {
        w->dims[d] = dims[d] > 0 ? (size_t)dims[d] : 0;
        total *= w->dims[d];
        if (sdims & (1u << d)) {
            w->sstride[d] = s;
            s *= w->dims[d];
        }
    }
    w->inner = nd > 0 ? w->dims[nd - 1] : 1;
    w->rows = w->inner ? total / w->inner : 0;
    return total > 0;
}

/* offset in the broadcast operand of the first element of row r */
static size_t bcast_row_offset(const bcast_walk *w, size_t r)
{
    size_t off = 0;
    for (int d = w->nd - 2; d >= 0; d--) {
        off += (r % w->dims[d]) * w->sstride[d];
        r /= w->dims[d];
    }
    return off;
}

static size_t bcast_last_stride(const bcast_walk *w) { return w->nd > 0 ? w->sstride[w->nd - 1] : 0; }

void sb_mul_forward(float *out, const float *a, const float *b, int nd, const int *dims,
                    unsigned bdims)
{
    bcast_walk w;
    if (!bcast_walk_make(&w, nd, dims, bdims))
        return;
    size_t ls = bcast_last_stride(&w), inner = w.inner;
    SB_PAR(if (w.rows * inner > SB_PAR_MIN))
    for (size_t r = 0; r < w.rows; r++) {
        const float *br = b + bcast_row_offset(&w, r);
        size_t o = r * inner;
        for (size_t j = 0; j < inner; j++)
            out[o + j] = a[o + j] * br[j * ls];
    }
}

void sb_mul_backward(float *da, float *db, const float *dout, const float *a, const float *b,
                     int nd, const int *dims, unsigned bdims)
{
    bcast_walk w;
    if (!bcast_walk_make(&w, nd, dims, bdims))
        return;
    size_t ls = bcast_last_stride(&w), inner = w.inner;
    if (da) {
        SB_PAR(if (w.rows * inner > SB_PAR_MIN))
        for (size_t r = 0; r < w.rows; r++) {
            const float *br = b + bcast_row_offset(&w, r);
            size_t o = r * inner;
            for (size_t j = 0; j < inner; j++)
                da[o + j] += dout[o + j] * br[j * ls];
        }
    }
    if (db) {
        for (size_t r = 0; r < w.rows; r++) {
            float *dbr = db + bcast_row_offset(&w, r);
            size_t o = r * inner;
            for (size_t j = 0; j < inner; j++)
                dbr[j * ls] += dout[o + j] * a[o + j];
        }
    }
}

void sb_expand_forward(float *out, const float *inp, int nd, const int *dims, unsigned xdims)
{
    bcast_walk w;
    if (!bcast_walk_make(&w, nd, dims, xdims))
        return;
    size_t ls = bcast_last_stride(&w), inner = w.inner;
    SB_PAR(if (w.rows * inner > SB_PAR_MIN))
    for (size_t r = 0; r < w.rows; r++) {
        const float *xr = inp + bcast_row_offset(&w, r);
        size_t o = r * inner;
        for (size_t j = 0; j < inner; j++)
            out[o + j] = xr[j * ls];
    }
}

void sb_expand_backward(float *dinp, const float *dout, int nd, const int *dims, unsigned xdims)
{
    bcast_walk w;
    if (!bcast_walk_make(&w, nd, dims, xdims))
        return;
    size_t ls = bcast_last_stride(&w), inner = w.inner;
    for (size_t r = 0; r < w.rows; r++) {
        float *dr = dinp + bcast_row_offset(&w, r);
        size_t o = r * inner;
        for (size_t j = 0; j < inner; j++)
            dr[j * ls] += dout[o + j];
    }
}
