/* search/mt_int.h: what megatron.c, megatron_stages.c, megatron_layout.c,
 * megatron_tpov.c and megatron_cp.c share (internal):
 * one transformer layer's figures on one GPU per micro-batch, and the
 * pipeline's ends (embedding, head, the sends between stages), both from
 * the GPU op model. */
#ifndef SB_SEARCH_MT_INT_H
#define SB_SEARCH_MT_INT_H

#include "shardbench/megatron.h"

/* A head's width (head_dim, else hidden / heads) and the MLP width a token's
 * GEMMs see (an expert's under MoE where moe_ffn is given, else ffn). */
static inline double sb_mt_dh(const sb_mt_model *mm)
{
    return mm->head_dim > 0 ? (double)mm->head_dim : (double)mm->hidden / (double)mm->heads;
}
static inline long sb_mt_ff(const sb_mt_model *mm)
{
    return mm->experts > 0 && mm->moe_ffn > 0 ? mm->moe_ffn : mm->ffn;
}

/* per-layer figures of one micro-batch on one GPU */
typedef struct {
    double fwd_s, bwd_s, recomp_s; /* compute (GEMMs and memory-bound ops) */
    double gemm_fwd_s, gemm_bwd_s; /* of fwd_s, bwd_s: the linear layers' GEMMs (with what
                                      TP overlap adds to them) */
    double attn_fwd_s, attn_bwd_s; /* of fwd_s, bwd_s: the attention core */
    double tp_fwd_s, tp_bwd_s;     /* exposed TP collectives */
    double ep_s, ep_fwd_s;         /* MoE all-to-alls (dispatch and combine), forward and
                                      backward (and a full recomputation's); the forward's */
    double cp_s, cp_fwd_s;         /* CP's K/V exchange not hidden by the attention; its
                                      forward's part */
    double params;                 /* parameters of the layer on this GPU */
    double expert_params;          /* of params: the experts' (E/EP of them, split by TP),
                                      reduced and sharded over the expert-data-parallel group
                                      of DP x CP / EP ranks, not DP x CP */
    double act_bytes;              /* activations kept for the backward */
} sb_mt_layer_cost;

/* per micro-batch: the head (vocab-parallel logits and loss) forward,
 * backward and its TP all-reduces; the embedding forward and backward; the
 * pipeline sends of one micro-batch over all VPP chunk boundaries, both
 * directions (0 without a pipeline) */
typedef struct {
    double head_f, head_b, head_tp, emb_f, emb_b, pp_mb;
    double head_gemm_f, head_gemm_b; /* of head_f, head_b: the logits GEMMs */
} sb_mt_ends;

/* TP collectives overlapped with the linear layers' GEMMs (megatron_tpov.c):
 * per layer and micro-batch, what the overlap adds to the GEMMs' time and
 * the collective time it leaves exposed, forward and backward; gm is
 * sb_mt_layer_gemms' and gt their plain prices (sb_gpu_gemm_s), tok_bytes
 * a layer input's bytes (T x h words); moe: an expert MLP's routed copies per
 * token (top-k; 0: a dense MLP), whose all-gather and reduce-scatter of the
 * routed tokens (top-k x T x h) stay exposed. */
typedef struct {
    double fwd_extra_s, bwd_extra_s, fwd_exposed_s, bwd_exposed_s;
} sb_mt_tpov;
void sb_mt_tp_overlap(const sb_mt_gemm *gm, const double *gt, const sb_mt_config *c, const sb_gpu *g,
                      double tok_bytes, double moe, sb_mt_tpov *o);

/* Context parallelism's memory-bound passes beside its attention kernels, per
 * layer and micro-batch, forward and backward (megatron_cp.c: Transformer
 * Engine's ring, causal, two chunks a rank): Q a rank's query elements, K its
 * key elements, rows its log-sum-exp rows (Q over the head dim), B bytes a
 * word; 0 below cp 2. */
void sb_mt_cp_passes(const sb_gpu *g, int cp, double Q, double K, double rows, double B, double *fwd_s,
                     double *bwd_s);

void sb_mt_layer(const sb_mt_model *mm, const sb_mt_config *c, const sb_gpu *g,
                 sb_mt_layer_cost *L);
void sb_mt_ends_of(const sb_mt_model *mm, const sb_mt_config *c, const sb_gpu *g,
                   sb_mt_ends *e);

/* Chunk k (0 .. VPP-1) of stage s: its layer count *n (the stage's over
 * VPP) and first layer *first (1-based): virtual stages k PP + s in order,
 * each after the one before. The step's slowest stage (sb_mt_price,
 * megatron.c, where it lives), the stages one by one (megatron_stages.c)
 * and the strategy's (megatron_layout.c) all follow it. */
void sb_mt_chunk_layers(const sb_mt_model *mm, const sb_mt_config *c, int s, int k, int *n,
                        int *first);

/* Stage s's memory per device at its peak when it holds `layers` layers
 * (o->inflight and o->mem_*; megatron.c): 1F1B keeps min(M, PP - s)
 * micro-batches in flight, interleaved the warm-up of Megatron-LM's schedule
 * plus one; stage 0 holds the embedding's vocab shard, the last the output
 * layer's and one micro-batch's fp32 logits and their gradient. sb_mt_price
 * reports the fullest of the first, the last and stage 1 (the middle stages
 * hold the same layers, stage 1 the most in flight). */
void sb_mt_stage_mem(const sb_mt_model *mm, const sb_mt_config *c, const sb_mt_layer_cost *L,
                     int s, int layers, sb_mt_stage *o);

/* The V x h / t vocab matrices stage s holds (megatron.c): the embedding's on
 * stage 0, the output layer's on the last (a tied head's copy at PP > 1, as
 * Megatron-LM keeps it); both on the one stage of PP 1, one where tied. */
int sb_mt_vocab_shards(const sb_mt_model *mm, const sb_mt_config *c, int s);

#endif
