/* plan.c: what every rank derives from a strategy: each op's device grid,
 * every rank's box of the iteration space, and the boxes of every operand
 * (inputs with their halos, outputs, weights) that a rank holds or needs.
 * Pure functions of (model, configs, rank); no MPI, no data. */
#include "plan.h"

#include <string.h>

/* grid coordinates of rank r under config c (last dim fastest); 0 if r is
 * outside the grid */
int plan_coords(const int *c, int nd, int r, int *g)
{
    int q = 1;
    for (int i = 0; i < nd; i++)
        q *= c[i];
    if (r >= q)
        return 0;
    for (int i = nd - 1; i >= 0; i--) {
        g[i] = r % c[i];
        r /= c[i];
    }
    return 1;
}

int plan_grid_size(const int *c, int nd)
{
    int q = 1;
    for (int i = 0; i < nd; i++)
        q *= c[i];
    return q;
}

void plan_iter_box(const sb_op *op, const int *c, const int *g, int64_t *lo, int64_t *hi)
{
    for (int i = 0; i < op->ndims; i++) {
        int64_t step = op->dims[i].size / c[i];
        lo[i] = g[i] * step;
        hi[i] = lo[i] + step;
    }
}

/* Input rows a window op reads for output rows [olo, ohi) and kernel rows
 * [r0, r1) whose taps are dil rows apart, clipped to [0, n): a split output
 * reads a halo of dil * (r1 - r0 - 1) rows beyond its strided rows. */
void plan_window(int64_t olo, int64_t ohi, int stride, int pad, int64_t r0, int64_t r1, int dil,
                 int64_t n, int64_t *lo, int64_t *hi)
{
    int64_t a = olo * stride - pad + r0 * dil;
    int64_t b = (ohi - 1) * stride - pad + (r1 - 1) * dil + 1;
    *lo = a < 0 ? 0 : a;
    *hi = b > n ? n : b;
    if (*hi < *lo)
        *hi = *lo;
}

/* Box of an operand's tensor for the rank with grid coords g. */
void plan_operand_box(const sb_model *m, const sb_op *op, const sb_operand *o, const int *c,
                      const int *g, int is_input, sb_box *box)
{
    const sb_tensor *t = &m->tensors[o->tensor];
    int64_t lo[SB_MAX_DIMS], hi[SB_MAX_DIMS];
    plan_iter_box(op, c, g, lo, hi);
    box->nd = t->ndims;
    for (int j = 0; j < t->ndims; j++) {
        int mp = o->map[j];
        if (mp >= 0 && (op->nosplit & (1u << mp)) && !(is_input && (op->kind == SB_OP_CONV || op->kind == SB_OP_POOL))) {
            /* a never-split dim (concat/split/stack axis, LSTM seq): whole */
            box->lo[j] = 0;
            box->hi[j] = t->dims[j].size;
        } else if (mp >= 0) {
            /* a grouped conv's channels (group-major, G groups of k) follow
             * its `group` dim (7) in blocks of k */
            int64_t k = op->kind == SB_OP_CONV && op->groups > 1 && mp == 7
                            ? t->dims[j].size / op->dims[7].size
                            : 1;
            box->lo[j] = lo[mp] * k;
            box->hi[j] = hi[mp] * k;
        } else if (mp == SB_MAP_ALL) {
            /* flat side of a contiguous config: one range of the flat index */
            int64_t start = 0, vol = 1;
            for (int i = 0; i < op->ndims; i++) {
                start = start * op->dims[i].size + lo[i];
                vol *= hi[i] - lo[i];
            }
            box->lo[j] = start;
            box->hi[j] = start + vol;
        } else {
            box->lo[j] = 0;
            box->hi[j] = t->dims[j].size;
        }
    }
    if (is_input && (op->kind == SB_OP_CONV || op->kind == SB_OP_POOL)) {
        /* spatial dims: the window rows the output box reads (halo) */
        for (int a = 0; a < 2; a++) {
            int64_t r0 = 0, r1 = op->kernel[a];
            int dil = 1;
            if (op->kind == SB_OP_CONV) {
                r0 = lo[4 + a];
                r1 = hi[4 + a];
                dil = op->dilation[a];
            }
            plan_window(lo[2 + a], hi[2 + a], op->stride[a], op->pad[a], r0, r1, dil,
                        t->dims[2 + a].size, &box->lo[2 + a], &box->hi[2 + a]);
        }
    }
    if (op->kind == SB_OP_LSTM) {
        /* the first layer group reads the input, the last writes the output */
        int first = g[0] == 0, last = g[0] == c[0] - 1;
        if ((is_input && !first) || (!is_input && !last))
            box->nd = 0;
    }
}

/* color of rank r in the group of ranks that share every coordinate except
 * those of dims in `free_mask`; -1 outside the grid */
int plan_group_color(const int *c, int nd, int r, uint32_t free_mask)
{
    int g[SB_MAX_DIMS];
    if (!plan_coords(c, nd, r, g))
        return -1;
    int color = 0;
    for (int i = 0; i < nd; i++)
        if (!(free_mask & (1u << i)))
            color = color * c[i] + g[i];
    return color;
}

int plan_group_size(const int *c, int nd, uint32_t free_mask)
{
    int q = 1;
    for (int i = 0; i < nd; i++)
        if (free_mask & (1u << i))
            q *= c[i];
    return q;
}
