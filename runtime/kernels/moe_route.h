/* moe_route.h: the steps of moe_gate's routing (kernels.h, sb_moe_gate_*),
 * one token or one group at a time, shared by the CPU kernels (k_moe.c,
 * which run them group by group) and the cuda kernels (cuda/k_moe.cu, one
 * thread per token or group, in three launches); tests/unit/cuda_host.c runs
 * them in the cuda kernels' order against the CPU kernels. Plain C that
 * nvcc also compiles for the device. Internal to runtime/.
 *
 * Work arrays, over all G·S tokens t = g·S + s and their k choices j:
 * idx[t·k + j] (the chosen expert), wt[t·k + j] (its renormalised weight),
 * slot[t·k + j] (its slot in [0, C), or -1 when dropped); count[g·E + e];
 * dens[g·E + e] (the share of group g's tokens whose first choice is e). */
#ifndef SB_RUNTIME_KERNELS_MOE_ROUTE_H
#define SB_RUNTIME_KERNELS_MOE_ROUTE_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define SB_MOE_FN __host__ __device__ static inline
#else
#define SB_MOE_FN static inline
#endif

/* Token t: its k largest logits of l (E), in descending order, a tie going
 * to the lower expert index; their weights exp(l_e - max) / sum over the k
 * (the softmax over the experts renormalised over the chosen ones). */
SB_MOE_FN void sb_moe_topk_at(int64_t t, const float *logits, int E, int k, int32_t *idx,
                              float *wt)
{
    const float *l = logits + t * E;
    int32_t *ix = idx + t * k;
    float *w = wt + t * k;
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int e = 0; e < E; e++) {
            int taken = 0;
            for (int i = 0; i < j; i++)
                taken |= ix[i] == e;
            if (!taken && (best < 0 || l[e] > l[best]))
                best = e;
        }
        ix[j] = best;
    }
    float mx = l[ix[0]], sum = 0.0f;
    for (int j = 0; j < k; j++) {
        w[j] = expf(l[ix[j]] - mx);
        sum += w[j];
    }
    for (int j = 0; j < k; j++)
        w[j] /= sum;
}

/* Group g (S tokens): slots in order of choice rank, then token (all first
 * choices in seq order, then all second ones, ...); a choice whose expert
 * already holds C tokens is dropped (slot -1). */
SB_MOE_FN void sb_moe_assign_at(int64_t g, const int32_t *idx, int32_t *slot, int32_t *count,
                                int S, int E, int C, int k)
{
    int32_t *cnt = count + g * E;
    for (int e = 0; e < E; e++)
        cnt[e] = 0;
    for (int j = 0; j < k; j++)
        for (int s = 0; s < S; s++) {
            int64_t q = (g * S + s) * k + j;
            int e = idx[q];
            slot[q] = cnt[e] < C ? cnt[e]++ : -1;
        }
}

/* Token t's kept choices into combine and dispatch (G·S, E, C), which hold
 * zeros elsewhere. */
SB_MOE_FN void sb_moe_scatter_at(int64_t t, float *combine, float *dispatch, const int32_t *idx,
                                 const int32_t *slot, const float *wt, int E, int C, int k)
{
    for (int j = 0; j < k; j++) {
        int64_t q = t * k + j;
        if (slot[q] < 0)
            continue;
        int64_t o = (t * E + idx[q]) * C + slot[q];
        combine[o] = wt[q];
        dispatch[o] = 1.0f;
    }
}

/* Token t: dlogits (E) += the gradient through the renormalised softmax of
 * the chosen logits, w_i (g_i - sum_j w_j g_j), g_j the combine gradient at
 * choice j's slot (0 when dropped: a dropped choice still takes gradient as
 * part of the normaliser); the other experts get none. */
SB_MOE_FN void sb_moe_grad_at(int64_t t, float *dlogits, const float *dcombine, const int32_t *idx,
                              const int32_t *slot, const float *wt, int E, int C, int k)
{
    float dot = 0.0f;
    for (int j = 0; j < k; j++) {
        int64_t q = t * k + j;
        if (slot[q] >= 0)
            dot += wt[q] * dcombine[(t * E + idx[q]) * C + slot[q]];
    }
    for (int j = 0; j < k; j++) {
        int64_t q = t * k + j;
        float g = slot[q] >= 0 ? dcombine[(t * E + idx[q]) * C + slot[q]] : 0.0f;
        dlogits[t * E + idx[q]] += wt[q] * (g - dot);
    }
}

/* Group g's load balance (GShard's auxiliary loss): dens (E) = the share
 * of its S tokens whose first choice is each expert (before drops). */
SB_MOE_FN void sb_moe_density_at(int64_t g, const int32_t *idx, float *dens, int S, int E, int k)
{
    float *d = dens + g * E;
    for (int e = 0; e < E; e++)
        d[e] = 0.0f;
    for (int s = 0; s < S; s++)
        d[idx[(g * S + s) * k]] += 1.0f / (float)S;
}

/* Its loss, E · sum_e dens_e · mean over the tokens of p_e (p the softmax
 * over the experts): 1 when the first choices and the probabilities are
 * uniform, up to E when one expert takes everything. */
SB_MOE_FN float sb_moe_aux_at(int64_t g, const float *logits, const float *dens, int S, int E)
{
    const float *d = dens + g * E;
    float acc = 0.0f;
    for (int s = 0; s < S; s++) {
        const float *l = logits + (g * S + s) * E;
        float mx = l[0], z = 0.0f, dot = 0.0f;
        for (int e = 1; e < E; e++)
            mx = l[e] > mx ? l[e] : mx;
        for (int e = 0; e < E; e++) {
            float x = expf(l[e] - mx);
            z += x;
            dot += d[e] * x;
        }
        acc += dot / z;
    }
    return (float)E * acc / (float)S;
}

/* Token t of a group of S: dlogits (E) += the gradient of weight times its
 * group's loss, weight·E/S · p_e (dens_e - sum_e' p_e' dens_e') (the
 * densities are constants). */
SB_MOE_FN void sb_moe_aux_grad_at(int64_t t, float *dlogits, const float *logits, const float *dens,
                                  float weight, int S, int E)
{
    const float *l = logits + t * E, *d = dens + (t / S) * E;
    float mx = l[0], z = 0.0f, dot = 0.0f;
    for (int e = 1; e < E; e++)
        mx = l[e] > mx ? l[e] : mx;
    for (int e = 0; e < E; e++) {
        float x = expf(l[e] - mx);
        z += x;
        dot += d[e] * x;
    }
    dot /= z;
    float c = weight * (float)E / (float)S;
    for (int e = 0; e < E; e++)
        dlogits[t * E + e] += c * expf(l[e] - mx) / z * (d[e] - dot);
}

#endif
