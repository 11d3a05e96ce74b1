/* megatron_tpov.c: TP collectives overlapped with the linear layers' GEMMs,
 * as Transformer Engine's userbuffers run them under Megatron-LM's
 * --tp-comm-overlap (sequence parallel: an all-gather before a
 * column-parallel GEMM, a reduce-scatter after a row-parallel one, the
 * mirror in the backward). Overlap is not free: three methods, each with
 * its own cost (docs/gpu-op-model.md, "TP overlap"):
 *
 *   ring exchange (all-gathers): the GEMM in t chunks while each chunk of
 *     the input goes to the next rank; exposed what a chunk's send takes
 *     beyond its GEMM, t - 1 times;
 *   pipeline (reduce-scatters): the GEMM in 4 chunks on the SMs the
 *     collective leaves (sms - n of them kept for it), on several streams
 *     (their waves run into one another), each chunk's reduce-scatter
 *     behind the next chunks; the last one exposed;
 *   bulk (the backward's): the collective on n SMs beside the GEMM, which
 *     loses them while it runs.
 *
 * Which GEMM uses which, and n: NVIDIA NeMo's userbuffers settings for an
 * H100 (recipes/tp_overlap_configs/userbuffers.py; Llama 3 70B, TP 4, one
 * 8192-token micro-batch: bf16 proj_fprop pipeline 24 SMs, fc2_fprop
 * pipeline 16; fp8 both ring exchange; backward bulk qkv_dgrad 4,
 * qkv_wgrad 24, fc1_dgrad 2, fc1_wgrad 4; the rest ring exchange), the
 * same for every model; SM counts scale with the machine's SMs (the
 * settings are for 132). Megatron-LM refuses the overlap without sequence
 * parallelism, and userbuffers run inside a node (sb_mt_check_gpu). An MoE
 * layer's expert MLP is not a userbuffers linear: its TP collectives stay
 * exposed; the attention's overlap as above. Under fp8 the all-gathers'
 * userbuffers hold fp8 (Transformer Engine's initialize_ub: every
 * all-gather overlap, the forward's inputs and the backward's, gets an fp8
 * buffer under the fp8 recipe): they move 1-byte words; the reduce-scatters
 * keep the activations' width (the NeMo settings followed put proj's and
 * fc2's fprop on ring exchanges; a later version of the file puts them on
 * pipelines with fp8 buffers, not modelled). */
#include <math.h>

#include "mt_int.h"
#include "shardbench/precision.h"

enum { NONE, RING, PIPE, BULK };

typedef struct {
    int method, sms;
    int gather; /* the collective is an all-gather (fp8 words under fp8), else a reduce-scatter */
} ub_cfg;

/* by sb_mt_layer_gemms' order: qkv, proj, fc1, fc2 x fprop, dgrad, wgrad */
static const ub_cfg ub_bf16[SB_MT_LAYER_GEMMS] = {
    {RING, 0, 1}, {BULK, 4, 1}, {BULK, 24, 0}, /* qkv: AG in; AG of the input for wgrad; RS of dgrad */
    {PIPE, 24, 0}, {RING, 0, 1}, {NONE, 0, 0}, /* proj: RS out; AG of the output gradient */
    {RING, 0, 1}, {BULK, 2, 1}, {BULK, 4, 0},  /* fc1 */
    {PIPE, 16, 0}, {RING, 0, 1}, {NONE, 0, 0}, /* fc2 */
};

#define PIPE_SPLITS 4.0

#define UB_SMS 132.0 /* the H100 the settings were made for */

/* a GEMM on the SMs a collective leaves (n kept for it) */
static double gemm_on(const sb_gpu *g, double n, double M, double N, double K, double B)
{
    sb_gpu r = *g;
    r.sms = g->sms - n;
    r.peak_tflops = g->peak_tflops * r.sms / g->sms;
    return sb_gpu_gemm_s(&r, 1, M, N, K, B);
}

void sb_mt_tp_overlap(const sb_mt_gemm *gm, const double *gt, const sb_mt_config *c, const sb_gpu *g,
                      double tok_bytes, double moe, sb_mt_tpov *o)
{
    const double t = c->tp;
    const int inter = c->tp > g->node_devices;
    const double B = sb_precision_bytes(c->precision).act;
    *o = (sb_mt_tpov){0};
    for (int i = 0; i < SB_MT_LAYER_GEMMS; i++) {
        ub_cfg u = ub_bf16[i];
        if (moe > 0 && i >= 6) { /* the expert MLP: an all-gather and a reduce-scatter each
                                    way of the routed copies (Megatron-Core's token
                                    dispatcher, over the expert TP group) */
            double coll = sb_gpu_gather_s(g, tok_bytes * moe, t, inter);
            if (i == 6)
                o->fwd_exposed_s += 2.0 * coll, o->bwd_exposed_s += 2.0 * coll;
            continue;
        }
        double n = u.sms * g->sms / UB_SMS;
        if (g->fp8 && u.method == PIPE) /* the fp8 settings: ring exchange for both */
            u.method = RING;
        const sb_mt_gemm *m = &gm[i];
        double G = gt[i], extra = 0, exposed = 0;
        double bytes = g->fp8 && u.gather ? tok_bytes / B : tok_bytes; /* T x h */
        double coll = sb_gpu_gather_s(g, bytes, t, inter); /* one AG or RS of them */
        if (u.method == RING) {
            exposed = (t - 1.0) * fmax(0.0, sb_gpu_p2p_s(g, bytes / t, inter) - G / t);
        } else if (u.method == PIPE) {
            /* the chunks go to several streams (TE: 3), so their waves run into one
             * another: the whole GEMM on the SMs left, and a launch per further chunk */
            double Gn = gemm_on(g, n, m->M, m->N, m->K, B);
            extra = Gn + (PIPE_SPLITS - 1.0) * g->kernel_us * 1e-6 - G;
            /* the last chunk's reduce-scatter, and what each other one takes beyond the
             * next chunk's GEMM */
            double rs = sb_gpu_gather_s(g, bytes / PIPE_SPLITS, t, inter);
            exposed = rs + (PIPE_SPLITS - 1.0) * fmax(0.0, rs - Gn / PIPE_SPLITS);
        } else if (u.method == BULK) {
            double slow = G * g->sms / (g->sms - n); /* the GEMM on the SMs left */
            extra = (coll < slow ? G + coll * n / g->sms : coll) - G;
        }
        if (i % 3 == 0)
            o->fwd_extra_s += extra, o->fwd_exposed_s += exposed;
        else
            o->bwd_extra_s += extra, o->bwd_exposed_s += exposed;
    }
}
