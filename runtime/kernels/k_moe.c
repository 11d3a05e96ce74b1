/* k_moe.c: the CPU kernels of the mixture-of-experts router, moe_gate
 * (kernels.h): the routing steps of moe_route.h, group by group. */
#include <string.h>

#include "moe_route.h"
#include "par.h"
#include "shardbench/kernels.h"

/* work: idx (G·S·k int32), slot (G·S·k int32), weights (G·S·k), count
 * (G·E int32), dens (G·E) */
size_t sb_moe_gate_work_floats(int G, int S, int E, int k)
{
    return 3 * (size_t)G * (size_t)S * (size_t)k + 2 * (size_t)G * (size_t)E;
}

typedef struct {
    int32_t *idx, *slot, *count;
    float *wt, *dens;
} moe_work;

static moe_work split_work(float *work, int G, int S, int E, int k)
{
    size_t n = (size_t)G * (size_t)S * (size_t)k;
    moe_work w = {(int32_t *)(void *)work, (int32_t *)(void *)(work + n),
                  (int32_t *)(void *)(work + 3 * n), work + 2 * n,
                  work + 3 * n + (size_t)G * (size_t)E};
    return w;
}

/* The routing of group g: top-k of its tokens, then their slots. */
static void route_group(const moe_work *w, const float *logits, int64_t g, int S, int E, int C,
                        int k)
{
    for (int64_t t = g * S; t < (g + 1) * S; t++)
        sb_moe_topk_at(t, logits, E, k, w->idx, w->wt);
    sb_moe_assign_at(g, w->idx, w->slot, w->count, S, E, C, k);
}

void sb_moe_gate_forward(float *combine, float *dispatch, float *aux, float *work,
                         const float *logits, int G, int S, int E, int C, int k)
{
    size_t n = (size_t)G * S * E * C;
    memset(combine, 0, n * sizeof *combine);
    memset(dispatch, 0, n * sizeof *dispatch);
    moe_work w = split_work(work, G, S, E, k);
    SB_PAR(if ((int64_t)G * S * E * C > SB_PAR_MIN))
    for (int g = 0; g < G; g++) {
        route_group(&w, logits, g, S, E, C, k);
        for (int64_t t = (int64_t)g * S; t < (int64_t)(g + 1) * S; t++)
            sb_moe_scatter_at(t, combine, dispatch, w.idx, w.slot, w.wt, E, C, k);
        sb_moe_density_at(g, w.idx, w.dens, S, E, k);
        aux[g] = sb_moe_aux_at(g, logits, w.dens, S, E);
    }
}

void sb_moe_gate_backward(float *dlogits, float *work, const float *dcombine,
                          const float *logits, float aux_weight, int G, int S, int E, int C,
                          int k)
{
    moe_work w = split_work(work, G, S, E, k);
    SB_PAR(if ((int64_t)G * S * E * C > SB_PAR_MIN))
    for (int g = 0; g < G; g++) {
        route_group(&w, logits, g, S, E, C, k);
        for (int64_t t = (int64_t)g * S; t < (int64_t)(g + 1) * S; t++)
            sb_moe_grad_at(t, dlogits, dcombine, w.idx, w.slot, w.wt, E, C, k);
        if (aux_weight == 0.0f)
            continue;
        sb_moe_density_at(g, w.idx, w.dens, S, E, k);
        for (int64_t t = (int64_t)g * S; t < (int64_t)(g + 1) * S; t++)
            sb_moe_aux_grad_at(t, dlogits, logits, w.dens, aux_weight, S, E);
    }
}
