/* shardbench/megatron.h: Megatron-LM configurations of a decoder-only
 * transformer priced on a GPU machine (docs/megatron.md): a GPU op model
 * (cost/gpu_op.c: GEMMs by tile and wave quantization over the SMs,
 * memory-bound ops by bytes, a per-kernel overhead), Megatron's layouts
 * (column/row-parallel linears, vocab-parallel embedding and loss,
 * sequence-parallel norms), its schedules (interleaved 1F1B) and overlap
 * (bucketed data-parallel reduction), collectives at NCCL bus bandwidth;
 * and the search over its grid. */
#ifndef SHARDBENCH_MEGATRON_H
#define SHARDBENCH_MEGATRON_H

#include "shardbench/machine.h"
#include "shardbench/model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The transformer a Megatron configuration trains. */
typedef struct {
    long layers, hidden, heads, kv_heads, ffn, vocab, seq;
    long experts, topk; /* MoE: experts per layer (0: dense), experts per token */
    long head_dim;      /* per head (Megatron's --kv-channels; Qwen3's head_dim); 0: hidden /
                           heads */
    long moe_ffn;       /* an expert's MLP width (--moe-ffn-hidden-size); 0: ffn */
    int qk_norm;        /* RMSNorm on each head's q and k (--qk-layernorm: Qwen3) */
    int qkv_bias;       /* biases on Q, K and V (--add-qkv-bias: Qwen2) */
    int swiglu;         /* 1: SwiGLU MLP (3 matrices), RMSNorm, rotary; 0: GELU MLP, LayerNorm */
    long global_batch;  /* sequences per step */
    int untie;          /* 1: the output layer has its own weight (Llama; Megatron-LM's
                           --untie-embeddings-and-output-weights); 0: it shares the
                           embedding's (GPT, Megatron-LM's default): one vocab shard at
                           PP 1, a copy on the last stage whose gradient is all-reduced
                           with the first's at PP > 1 */
} sb_mt_model;

enum { SB_MT_RC_NONE = 0, SB_MT_RC_SELECTIVE = 1, SB_MT_RC_FULL = 2 };
/* --overlap-param-gather: not given (as --dp-overlap), on, off */
enum { SB_MT_PG_AS_DP = 0, SB_MT_PG_ON = 1, SB_MT_PG_OFF = 2 };

/* One configuration; 0 in a degree of sb_mt_search's `fixed` means free. */
typedef struct {
    int tp, pp, dp, cp, ep, vpp, mbs; /* degrees; micro-batch size in sequences */
    /* layers of the first and the last pipeline stage (Megatron-Core's
     * --decoder-first-pipeline-num-layers, --decoder-last-pipeline-num-layers);
     * 0: not given, the stage holds what every middle one does: the layers the
     * given ends leave, split evenly (Megatron-LM asserts they divide) */
    int first_layers, last_layers;
    int recompute;                    /* SB_MT_RC_* */
    int sp;                           /* sequence parallelism (tp > 1) */
    int dist_opt;                     /* distributed optimizer (ZeRO 1 over dp) */
    int dp_overlap;                   /* grad reduce overlapped with the backward */
    int param_gather;                 /* the distributed optimizer's parameter all-gather
                                         overlapped with the next forward: SB_MT_PG_* (0: as
                                         dp_overlap, Megatron's recipes set both) */
    int tp_overlap;                   /* TP collectives overlapped with GEMMs */
    int fused_attention;              /* 1: FlashAttention-style; 0: materialized S x S */
    int ce_fusion;                    /* 1: Megatron's fused cross-entropy
                                         (cross_entropy_loss_fusion); 0: unfused, its default */
    int precision;                    /* sb_precision */
    double grad_bytes;                /* the gradient reduction's word; 0: the recipe's */
    int file_layout;                  /* sb_mt_search's fixed: only configurations a
                                         strategy file holds (sb_mt_strategy: VPP 1, EP
                                         dividing DP; MoE at TP, EP and CP 1, its
                                         moe_gate splitting its batch alone), for --save */
} sb_mt_config;
/* 1 when c's parameter all-gather is overlapped: param_gather on, or not given
 * and dp_overlap on */
int sb_mt_param_overlap(const sb_mt_config *c);

/* What the machine file gives the GPU op model (sb_gpu_from_machine). */
typedef struct {
    double peak_tflops;     /* dense peak at the precision */
    /* The attention core's peak: bf16's under the fp8 recipe (Transformer
     * Engine keeps dot-product attention in bf16: its recipes' fp8_dpa is
     * off by default), else peak_tflops. 0: peak_tflops. The output layer
     * (Megatron-LM's own linear) is priced at it and attn_gemm_eff too. */
    double attn_peak_tflops;
    int fp8;                /* 1: the fp8 recipe: each linear's input and output gradient
                               cast to fp8 by a cast-transpose kernel */
    double gemm_eff;        /* fraction of peak a large GEMM reaches (microbenchmark) */
    double attn_gemm_eff;   /* the attention core's and the output layer's fraction
                               (bf16's under fp8); 0: gemm_eff */
    /* the fused attention kernel's measured TFLOP/s by sequence length (n 0:
     * priced as its GEMMs at attn_gemm_eff), forward and backward */
    sb_curve attn_fwd, attn_bwd;
    double hbm_gbs, hbm_eff;
    double sms, tile_m, tile_n;
    double kernel_us;       /* per-kernel overhead */
    double intra_busbw, inter_busbw; /* NCCL bus bandwidth per GPU, GB/s */
    double intra_lat_us, inter_lat_us;
    int node_devices;
    double mem_bytes;
} sb_gpu;

typedef struct {
    double step_s;
    /* time_breakdown_seconds: they add up to step_s */
    double compute_s, tp_comm_s, dp_comm_s, pp_comm_s, bubble_s, optimizer_s;
    /* compute_s by kind: the GEMMs (linear layers and logits, with what TP overlap
     * adds), the attention core, the memory-bound rest (norms, activations, adds,
     * rotary, embedding, loss, fp8 casts); they add up to compute_s */
    double compute_gemm_s, compute_attention_s, compute_memory_s;
    /* peak bytes per device: the fullest of the first pipeline stage (the embedding,
     * the most micro-batches in flight), the last (the output layer, its fp32
     * logits) and stage 1 (the middle stages' most in flight) */
    double mem_weights, mem_grads, mem_optimizer, mem_activations, mem_buffers, mem_total;
    double model_flops;      /* per step, PaLM/Megatron convention (no recomputation) */
    double tokens_per_s, tflops_per_device, mfu;
} sb_mt_result;

/* The transformer of a loaded model file: its params layers, embed, heads,
 * kv_heads (default heads), ff, vocab, seq, batch, experts, topk; SwiGLU
 * when it has a `theta` (rotary) param; the head untied unless the file
 * ties it (`tie`). SB_EXIT_INPUT naming a missing param. */
int sb_mt_model_from(const sb_model *m, sb_mt_model *out, sb_error *err);
/* The GPU figures of machine mc at precision prec; SB_EXIT_INPUT when it
 * has no peak for it or lacks the GPU keys (sms, ...). */
int sb_gpu_from_machine(const sb_machine *mc, int prec, sb_gpu *g, sb_error *err);
/* The grid's starting point: every degree free (0), recompute, sequence
 * parallelism and the distributed optimizer searched (-1), the DP
 * reduction overlapped and attention fused (Megatron-LM's defaults). */
void sb_mt_config_free(sb_mt_config *c);
/* Checks a configuration on P devices (every degree given): the product
 * TP x PP x DP x CP is P, EP divides DP x CP... and the experts, heads
 * and ff divide by TP, CP divides seq, the batch divides into micro-batches,
 * the layers into stages (sb_mt_stage_count) whose counts VPP divides.
 * SB_EXIT_INPUT with the reason. */
int sb_mt_check(const sb_mt_model *mm, const sb_mt_config *c, int P, sb_error *err);
/* What configuration c needs of the machine g: TP inside a node for
 * --tp-comm-overlap. SB_EXIT_INPUT naming it. */
int sb_mt_check_gpu(const sb_mt_config *c, const sb_gpu *g, sb_error *err);
/* Prices a checked configuration. */
void sb_mt_price(const sb_mt_model *mm, const sb_mt_config *c, const sb_gpu *g, sb_mt_result *r);
/* The least step time over Megatron's grid on P devices: each degree of
 * `fixed` that is > 0 stays; recompute < 0, sp < 0, dist_opt < 0 free (the
 * overlap, attention and precision fields are taken as given). Only
 * configurations whose memory is at most mem_limit bytes (> 0) count.
 * Returns the number priced; 0 (and err) when none is valid or fits. */
long sb_mt_search(const sb_mt_model *mm, const sb_mt_config *fixed, int P, const sb_gpu *g,
                  double mem_limit, sb_mt_config *best, sb_mt_result *r, sb_error *err);
/* The layers pipeline stage s (0 .. PP-1) holds: first_layers on stage 0
 * and last_layers on the last where given, the rest split evenly over the
 * other stages; 0 when they do not split so (sb_mt_check refuses it). */
int sb_mt_stage_count(const sb_mt_model *mm, const sb_mt_config *c, int s);
/* One pipeline stage (rank) of a configuration, stage by stage
 * (search/megatron_stages.c): its layers (sb_mt_stage_count; VPP equal
 * chunks interleaved: chunk k of stage s is virtual stage k PP + s, its
 * layers following virtual stage k PP + s - 1's), forward and backward
 * seconds per micro-batch over its chunks (its sends, the embedding on
 * stage 0 and the head on the last included), its memory per device at its
 * peak. sb_mt_price's step is the slowest stage's, its memory the fullest stage's. */
typedef struct {
    int stage, layers, first_layer; /* first_layer: of chunk 0, 1-based */
    double fwd_s, bwd_s;            /* per micro-batch, all its chunks */
    double inflight;                /* micro-batches' activations held at the peak */
    double mem_weights, mem_grads, mem_optimizer, mem_activations, mem_buffers, mem_total;
} sb_mt_stage;

void sb_mt_stage_of(const sb_mt_model *mm, const sb_mt_config *c, const sb_gpu *g, int s,
                    sb_mt_stage *out);
/* Chunk k (0 .. VPP-1) of stage s: its first layer (1-based), layer count,
 * forward and backward seconds per micro-batch. */
void sb_mt_chunk_of(const sb_mt_model *mm, const sb_mt_config *c, const sb_gpu *g, int s, int k,
                    int *first_layer, int *nlayers, double *fwd_s, double *bwd_s);
/* The GEMMs of one transformer layer, per micro-batch and device, as
 * sb_mt_layer prices them (perf/gpu_model measures the same lists): for QKV,
 * the projection, MLP up (and gate) and MLP down, in that order, the forward
 * (M x K)(K x N), the backward's dgrad (M x N)(N x K) and wgrad (K x M)(M x N),
 * each as its own (M, N, K). Fills SB_MT_LAYER_GEMMS entries of out. */
#define SB_MT_LAYER_GEMMS 12
typedef struct {
    const char *linear, *pass; /* "qkv" | "proj" | "fc1" | "fc2"; "fprop" | "dgrad" | "wgrad" */
    double M, N, K;
} sb_mt_gemm;
int sb_mt_layer_gemms(const sb_mt_model *mm, const sb_mt_config *c, sb_mt_gemm *out);
/* The head's (sb_mt_ends_of): the vocab-parallel logits forward, dgrad and
 * wgrad. Fills SB_MT_HEAD_GEMMS entries. */
#define SB_MT_HEAD_GEMMS 3
int sb_mt_head_gemms(const sb_mt_model *mm, const sb_mt_config *c, sb_mt_gemm *out);

/* Model FLOPs of one step (PaLM / Megatron-LM convention, no recomputation):
 * per token 6 x the layers' GEMM parameters (MoE: the top-k experts'),
 * 12 l h s of attention, 6 h V of the logits. */
double sb_mt_model_flops(const sb_mt_model *mm);
/* The throughput fields of a predicted step of model m on P devices at peak
 * TFLOP/s (JSON: predicted_tokens_per_second, predicted_tflops_per_device,
 * predicted_mfu); 0 when m is not a transformer sb_mt_model_from reads. */
int sb_mt_throughput(const sb_model *m, int P, double step_s, double peak_tflops,
                     double *tokens_per_s, double *tflops_per_device, double *mfu);
/* Configuration mc (checked by sb_mt_check) of model m (mm: its
 * sb_mt_model) on P devices as an op-level strategy (search/
 * megatron_layout.c: per op by its dim names; stages of whole layers; 1F1B;
 * distributed optimizer as ZeRO 1; precision). SB_EXIT_INPUT when it
 * cannot be one (an interleaved schedule, a split that does not divide).
 * Allocates st (sb_strategy_free). */
struct sb_strategy;
int sb_mt_strategy(const sb_model *m, const sb_mt_config *mc, const sb_mt_model *mm, int P,
                   struct sb_strategy *st, sb_error *err);
/* Sets fx->file_layout (what sb_mt_strategy can write) for model m (mm: its
 * sb_mt_model) and, where m's runs of ops "PREFIX/..." are not mm's layers
 * (an encoder-decoder, a block before the layers) and PP is free, PP 1:
 * then returns 1 (the caller says so), else 0. */
int sb_mt_file_layout(const sb_model *m, const sb_mt_model *mm, sb_mt_config *fx);
/* Megatron's recompute names: "none", "selective", "full" (also "all"). */
int sb_mt_recompute_parse(const char *s, int *out, sb_error *err);
const char *sb_mt_recompute_name(int rc);

/* ---- the GPU op model (cost/gpu_op.c) ---- */
/* The dense peak of precision `prec` (< 0: the file's `precision`; fp16 and
 * bf16 share the bf16 peak), 0 when the file gives none; with attn, the
 * peak of products between two activations (attention): bf16's under the
 * fp8 recipe, which casts only linear layers' operands (Transformer Engine:
 * fp8_dpa off), else the same. */
double sb_machine_peak(const sb_machine *mc, int prec, int attn);
/* The large-GEMM fraction of that peak (gemm_eff_large_fp8 for fp8 GEMMs where given). */
double sb_machine_gemm_eff(const sb_machine *mc, int prec, int attn);
/* 1 when the file has the GPU op model's figures (sms, gemm_eff_large,
 * hbm_eff): searches on it price the model as a GPU framework runs it. */
int sb_machine_has_gpu_model(const sb_machine *mc);
/* 1 when a machine file's attention curves (measured in bf16) price a
 * training at precision prec: bf16, fp16 and fp8 (whose attention stays
 * bf16); fp32 and tf32 price the kernel as its GEMMs at their peak. */
int sb_attn_curves_apply(int prec);
/* Seconds of `batch` GEMMs (M x K)(K x N) at `bytes` per element. */
double sb_gpu_gemm_s(const sb_gpu *g, double batch, double M, double N, double K, double bytes);
/* One of a fused attention kernel's (M x K)(K x N) products (M queries, N
 * keys, K the head dim; the forward has 2, the backward 5), in its forward
 * (bwd 0) or backward (1) kernel: HBM moves only the M x K and N x K
 * operands and the M x K result; the M x N scores stay on chip
 * (FlashAttention). The math at the machine's measured rate of that kernel
 * at M queries where the file gives one (attn_fwd, attn_bwd; a head dim K
 * under 128 pays (K / (K + 128)) / (128 / 256) of the rate; the tiles of 128
 * queries, batch x ceil(M / 128), in waves over the SMs against the
 * measurement's 2,048), else as a GEMM at attn_gemm_eff. */
double sb_gpu_attn_s(const sb_gpu *g, double batch, double M, double N, double K, double bytes,
                     int bwd);
/* Seconds of a memory-bound kernel moving `bytes`. */
double sb_gpu_mem_s(const sb_gpu *g, double bytes);
/* Seconds of the fp8 recipe's cast-transpose of `elems` 2-byte elements
 * (a GEMM operand: 2 bytes read, 1 + 1 written); 0 unless g->fp8. */
double sb_gpu_cast_s(const sb_gpu *g, double elems);
/* Seconds of the fp8 transpose of `elems` fp8 elements (an operand whose fp8
 * copy a fused kernel wrote: 1 byte read, 1 written); 0 unless g->fp8. */
double sb_gpu_fp8_transpose_s(const sb_gpu *g, double elems);
/* Seconds of a collective moving `bytes` per rank over q ranks, inside a
 * node (inter = 0) or across nodes: all-reduce 2(q-1)/q, reduce-scatter and
 * all-gather (q-1)/q of the buffer at the bus bandwidth, plus the ring's
 * step latencies. */
double sb_gpu_allreduce_s(const sb_gpu *g, double bytes, double q, int inter);
double sb_gpu_gather_s(const sb_gpu *g, double bytes, double q, int inter);
double sb_gpu_p2p_s(const sb_gpu *g, double bytes, int inter);

#ifdef __cplusplus
}
#endif

#endif
