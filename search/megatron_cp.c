/* megatron_cp.c: the memory-bound passes of context parallelism beside its
 * attention kernels, as Transformer Engine's ring (P2P) context parallelism
 * runs a causal attention (Megatron-LM's default `cp_comm_type p2p`; the
 * `sbhd` layout Megatron-LM gives it; the 16-bit path, TE 1.11, late 2024).
 * Each rank holds two chunks of the sequence (load balance); the attention
 * runs as cp kernel calls, one per K/V chunk pair met on the ring, and
 * these passes merge them (docs/megatron.md, "CP"):
 *
 * forward, once: K and V concatenated into the ring's buffer (2K elements
 *   copied), the output zeroed (Q written), the running log-sum-exp cloned
 *   (4 + 4 bytes per row), made fp64 (4 + 8) and, after the ring, fp32 again
 *   (8 + 4);
 *   per step after the first, the log-sum-exp corrected (fp32 read, fp64
 *   read and written per row; half the rows on a step that meets only the
 *   second query chunk);
 *   per step, once the ring is done: the step's output rescaled and added
 *   into the output (read both, write one: 3 words an element), all of Q on
 *   a step that meets both query chunks, half of it otherwise.
 * backward, once: K and V copied into the ring's buffer, the second half
 *   of the log-sum-exp made contiguous (fp32);
 *   per step: the kernel's dK and dV concatenated (2K, or K where the step
 *   met half of K and V), dQ and dKV copied (2 words) or added (3 words)
 *   into their accumulators: the first visit of each half copies, the
 *   others add.
 * Q: a rank's query elements (micro-batch x s/cp x local heads x head dim),
 * K: its key elements (the same with the local K/V heads). The ranks do not
 * move the same bytes (the last rank meets all of its queries on every step,
 * the other K/V chunks' first halves only; rank 0 the other chunks whole, with
 * its second query half only); the layer waits for the slowest, so each
 * direction takes the largest rank's. */
#include <math.h>

#include "mt_int.h"

/* one pass over n elements moving w words of b bytes each: a kernel */
static double pass(const sb_gpu *g, double n, double words, double b)
{
    return n > 0 ? sb_gpu_mem_s(g, n * words * b) : 0.0;
}

/* the passes of rank r's forward */
static double fwd_rank(const sb_gpu *g, int cp, int r, double Q, double K, double rows, double B)
{
    double t = pass(g, 2.0 * K, 2.0, B) + pass(g, Q, 1.0, B) + pass(g, rows, 8.0, 1.0) +
               pass(g, rows, 12.0, 1.0) + pass(g, rows, 12.0, 1.0);
    for (int i = 1; i < cp; i++) /* the log-sum-exp of step i merged */
        t += pass(g, i <= r ? rows : rows / 2.0, 20.0, 1.0);
    for (int i = 0; i < cp; i++) /* step i's output rescaled and added */
        t += pass(g, i <= r ? Q : Q / 2.0, 3.0, B);
    return t;
}

/* the passes of rank r's backward; step i meets the K/V of rank (r + i + 1) % cp,
 * the last step its own (the causal diagonal) */
static double bwd_rank(const sb_gpu *g, int cp, int r, double Q, double K, double rows, double B)
{
    double t = pass(g, 2.0 * K, 2.0, B) + pass(g, rows / 2.0, 8.0, 1.0);
    const int d = cp - 1 - r; /* the first step that meets the first K/V half */
    for (int i = 0; i < cp; i++) {
        double dq_copy = 0, dq_add = 0, kv_copy = 0, kv_add = 0, cat;
        if (i == cp - 1) { /* own chunks: all of Q against all of K/V */
            cat = 2.0 * K;
            if (r > 0)
                dq_add = Q, kv_add = 2.0 * K;
            else /* rank 0: dQ's first half first seen here; dKV half new */
                dq_copy = dq_add = Q / 2.0, kv_copy = kv_add = K;
        } else if (i >= d) { /* all of Q against the first K/V half */
            cat = K;
            if (i > d)
                dq_add = Q;
            else if (r == cp - 1)
                dq_copy = Q;
            else
                dq_copy = dq_add = Q / 2.0;
            if (i == 0 && r == cp - 1)
                kv_copy = K;
            else
                kv_add = K;
        } else { /* the second Q half against all of K/V */
            cat = 2.0 * K;
            if (i == 0)
                dq_copy = Q / 2.0, kv_copy = 2.0 * K;
            else
                dq_add = Q / 2.0, kv_add = 2.0 * K;
        }
        t += pass(g, cat, 2.0, B) + pass(g, dq_copy, 2.0, B) + pass(g, dq_add, 3.0, B) +
             pass(g, kv_copy, 2.0, B) + pass(g, kv_add, 3.0, B);
    }
    return t;
}

void sb_mt_cp_passes(const sb_gpu *g, int cp, double Q, double K, double rows, double B, double *fwd_s,
                     double *bwd_s)
{
    *fwd_s = *bwd_s = 0.0;
    if (cp < 2)
        return;
    for (int r = 0; r < cp; r++) {
        *fwd_s = fmax(*fwd_s, fwd_rank(g, cp, r, Q, K, rows, B));
        *bwd_s = fmax(*bwd_s, bwd_rank(g, cp, r, Q, K, rows, B));
    }
}
