/* k_moe.cu: the cuda kernels of the k_moe.c family, the mixture-of-experts
 * router moe_gate: the routing steps of ../moe_route.h in three launches,
 * one thread per token (top-k), one per group (slots, sequential within a
 * group as the order requires, and the load balance), one per token
 * (outputs or gradient).
 * tests/unit/cuda_host.c runs the same steps in this order on the host against
 * the CPU kernels. */
#include "../moe_route.h"
#include "launch.cuh"

__global__ static void moe_topk_k(const float *logits, int32_t *idx, float *wt, int64_t T, int E,
                                  int k)
{
    GRID_STRIDE(t, T) sb_moe_topk_at(t, logits, E, k, idx, wt);
}

__global__ static void moe_assign_k(const int32_t *idx, int32_t *slot, int32_t *count, int64_t G,
                                    int S, int E, int C, int k)
{
    GRID_STRIDE(g, G) sb_moe_assign_at(g, idx, slot, count, S, E, C, k);
}

__global__ static void moe_scatter_k(float *combine, float *dispatch, const int32_t *idx,
                                     const int32_t *slot, const float *wt, int64_t T, int E,
                                     int C, int k)
{
    GRID_STRIDE(t, T) sb_moe_scatter_at(t, combine, dispatch, idx, slot, wt, E, C, k);
}

__global__ static void moe_grad_k(float *dlogits, const float *dcombine, const int32_t *idx,
                                  const int32_t *slot, const float *wt, int64_t T, int E, int C,
                                  int k)
{
    GRID_STRIDE(t, T) sb_moe_grad_at(t, dlogits, dcombine, idx, slot, wt, E, C, k);
}

__global__ static void moe_balance_k(const float *logits, const int32_t *idx, float *dens,
                                     float *aux, int64_t G, int S, int E, int k)
{
    GRID_STRIDE(g, G)
    {
        sb_moe_density_at(g, idx, dens, S, E, k);
        if (aux)
            aux[g] = sb_moe_aux_at(g, logits, dens, S, E);
    }
}

__global__ static void moe_aux_grad_k(float *dlogits, const float *logits, const float *dens,
                                      float weight, int64_t T, int S, int E)
{
    GRID_STRIDE(t, T) sb_moe_aux_grad_at(t, dlogits, logits, dens, weight, S, E);
}

/* work as k_moe.c lays it out: idx, slot, weights (T·k each), count, dens
 * (G·E each) */
static void moe_route(float *work, const float *logits, int G, int S, int E, int C, int k,
                      int32_t **idx, int32_t **slot, float **wt)
{
    int64_t T = (int64_t)G * S, n = T * k;
    *idx = (int32_t *)work;
    *slot = (int32_t *)(work + n);
    *wt = work + 2 * n;
    int32_t *count = (int32_t *)(work + 3 * n);
    LAUNCH(moe_topk_k, T, logits, *idx, *wt, T, E, k);
    LAUNCH(moe_assign_k, G, *idx, *slot, count, (int64_t)G, S, E, C, k);
}

void sbk_moe_gate_forward(float *combine, float *dispatch, float *aux, float *work,
                          const float *logits, int G, int S, int E, int C, int k)
{
    int64_t T = (int64_t)G * S;
    size_t n = (size_t)T * E * C;
    if (n == 0)
        return;
    SBC_CUDA(cudaMemsetAsync(combine, 0, n * sizeof(float), sbk_stream()));
    SBC_CUDA(cudaMemsetAsync(dispatch, 0, n * sizeof(float), sbk_stream()));
    int32_t *idx, *slot;
    float *wt;
    moe_route(work, logits, G, S, E, C, k, &idx, &slot, &wt);
    LAUNCH(moe_scatter_k, T, combine, dispatch, idx, slot, wt, T, E, C, k);
    float *dens = work + 3 * (int64_t)T * k + (int64_t)G * E;
    LAUNCH(moe_balance_k, G, logits, idx, dens, aux, (int64_t)G, S, E, k);
}

void sbk_moe_gate_backward(float *dlogits, float *work, const float *dcombine,
                           const float *logits, float aux_weight, int G, int S, int E, int C,
                           int k)
{
    int64_t T = (int64_t)G * S;
    if (T == 0)
        return;
    int32_t *idx, *slot;
    float *wt;
    moe_route(work, logits, G, S, E, C, k, &idx, &slot, &wt);
    LAUNCH(moe_grad_k, T, dlogits, dcombine, idx, slot, wt, T, E, C, k);
    if (aux_weight == 0.0f)
        return;
    float *dens = work + 3 * T * k + (int64_t)G * E;
    LAUNCH(moe_balance_k, G, logits, idx, dens, (float *)NULL, (int64_t)G, S, E, k);
    LAUNCH(moe_aux_grad_k, T, dlogits, logits, dens, aux_weight, T, S, E);
}
