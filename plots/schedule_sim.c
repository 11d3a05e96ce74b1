/* plots/schedule_sim.c: a pipeline schedule simulated over one step, for
 * the Gantt chart of `plot --search` (fig_search.c): when each forward and
 * backward of each micro-batch starts on each virtual stage, each rank
 * running its ops in the schedule's order, an op starting when its rank is
 * free and its input is there (forward m of virtual stage v after forward m
 * of v - 1; backward m of v after backward m of v + 1 and its own forward
 * m). Virtual stage v = k PP + r is chunk k of rank r (VPP chunks a rank;
 * VPP = 1: the plain stages). The orders:
 *   GPipe: F0..F(M-1), then B(M-1)..B0.
 *   1F1B: min(PP - r - 1, M) forwards, then one forward and one backward in
 *     turn, then the backwards left (PipeDream-flush, Megatron-LM's
 *     non-interleaved schedule).
 *   interleaved 1F1B (Megatron-LM's forward_backward_pipelining_with_
 *     interleaving, Narayanan et al. SC21): 2 (PP - r - 1) + (VPP - 1) PP
 *     warm-up forwards (all M VPP when M = PP), then one forward and one
 *     backward in turn; forward unit u is chunk (u mod PP VPP) / PP of
 *     micro-batch (u / PP VPP) PP + u mod PP, backward unit u the same
 *     micro-batch of chunk VPP - 1 - (u mod PP VPP) / PP. */
#include <math.h>
#include <stdlib.h>

#include "figs.h"

/* an op: (v M + m) 2 + 1 for a backward, + 0 for a forward */
static int op_code(int v, int m, int M, int bwd) { return ((v * M + m) << 1) | bwd; }

static void rank_order(int r, int pp, int vpp, int M, int kind, int *o)
{
    int k = 0, total = M * vpp, group = pp * vpp;
    if (kind == SB_SCHED_GPIPE) {
        for (int m = 0; m < M; m++)
            o[k++] = op_code(r, m, M, 0);
        for (int m = M - 1; m >= 0; m--)
            o[k++] = op_code(r, m, M, 1);
        return;
    }
    int warm;
    if (vpp == 1)
        warm = pp - r - 1 < M ? pp - r - 1 : M;
    else {
        warm = M == pp ? total : 2 * (pp - r - 1) + (vpp - 1) * pp;
        warm = warm < total ? warm : total;
    }
    int nf = 0, nb = 0;
#define FWD(u) op_code(((u) % group) / pp * pp + r, ((u) / group) * pp + (u) % pp, M, 0)
#define BWD(u) op_code((vpp - 1 - ((u) % group) / pp) * pp + r, ((u) / group) * pp + (u) % pp, M, 1)
    if (vpp == 1) { /* micro-batches in order */
        while (nf < warm)
            o[k++] = op_code(r, nf++, M, 0);
        while (nf < M) {
            o[k++] = op_code(r, nf++, M, 0);
            o[k++] = op_code(r, nb++, M, 1);
        }
        while (nb < M)
            o[k++] = op_code(r, nb++, M, 1);
        return;
    }
    while (nf < warm) {
        o[k++] = FWD(nf);
        nf++;
    }
    while (nf < total) {
        o[k++] = FWD(nf);
        nf++;
        o[k++] = BWD(nb);
        nb++;
    }
    while (nb < total) {
        o[k++] = BWD(nb);
        nb++;
    }
#undef FWD
#undef BWD
}

double sb_sched_simulate(int pp, int vpp, int M, int kind, const double *fw, const double *bw,
                         double *tf, double *tb)
{
    int V = pp * vpp, per = 2 * M * vpp;
    size_t vm = (size_t)V * M;
    int *order = malloc((size_t)pp * per * sizeof *order), *next = calloc((size_t)pp, sizeof *next);
    double *free_at = calloc((size_t)pp, sizeof *free_at), end = 0.0;
    if (!order || !next || !free_at) {
        free(order), free(next), free(free_at);
        return NAN;
    }
    for (int r = 0; r < pp; r++)
        rank_order(r, pp, vpp, M, kind, order + (size_t)r * per);
    for (size_t i = 0; i < vm; i++)
        tf[i] = tb[i] = -1.0;
    for (int progress = 1; progress;) {
        progress = 0;
        for (int r = 0; r < pp; r++)
            while (next[r] < per) {
                int op = order[(size_t)r * per + next[r]], bwd = op & 1;
                int v = (op >> 1) / M, m = (op >> 1) % M;
                size_t at = (size_t)v * M + m;
                double ready = 0.0;
                if (!bwd) {
                    if (v > 0 && tf[at - M] < 0)
                        break;
                    if (v > 0)
                        ready = tf[at - M] + fw[v - 1];
                    tf[at] = fmax(ready, free_at[r]);
                    free_at[r] = tf[at] + fw[v];
                } else {
                    if (tf[at] < 0 || (v + 1 < V && tb[at + M] < 0))
                        break;
                    ready = tf[at] + fw[v];
                    if (v + 1 < V)
                        ready = fmax(ready, tb[at + M] + bw[v + 1]);
                    tb[at] = fmax(ready, free_at[r]);
                    free_at[r] = tb[at] + bw[v];
                }
                end = fmax(end, free_at[r]);
                next[r]++;
                progress = 1;
            }
    }
    int done = 1;
    for (int r = 0; r < pp; r++)
        done = done && next[r] == per;
    free(order), free(next), free(free_at);
    return done ? end : NAN;
}
