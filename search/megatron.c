/* megatron.c: Megatron-LM configurations priced and searched
 * (shardbench/megatron.h, docs/megatron.md). One transformer layer on one
 * GPU per micro-batch, op by op, through the GPU op model (gpu_op.c):
 * column-parallel QKV and MLP-up GEMMs, row-parallel projection and
 * MLP-down GEMMs (their output all-reduced, or reduce-scattered under
 * sequence parallelism), attention per local head, norms and
 * bias-dropout-adds over the sequence shard under sequence parallelism
 * (else on every TP rank), the vocab-parallel logits and loss on the last
 * stage. A stage is its layers (and embedding or head); the step is
 * interleaved 1F1B's: (M + (PP-1)/VPP) slowest-stage micro-batches, the
 * data-parallel traffic (when overlapped, the gradients' reduction exposed
 * beyond what the last micro-batch's backward hides, the distributed
 * optimizer's all-gather beyond the next first forward) and the optimizer
 * update. TP overlap's price: megatron_tpov.c. */
#include "shardbench/megatron.h"
#include "shardbench/precision.h"
#include "mt_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int sb_mt_recompute_parse(const char *s, int *out, sb_error *err)
{
    if (!strcmp(s, "none"))
        *out = SB_MT_RC_NONE;
    else if (!strcmp(s, "selective"))
        *out = SB_MT_RC_SELECTIVE;
    else if (!strcmp(s, "full") || !strcmp(s, "all"))
        *out = SB_MT_RC_FULL;
    else
        return sb_fail(err, SB_EXIT_INPUT, "--recompute: '%s' is not none, selective or full", s);
    return 0;
}

const char *sb_mt_recompute_name(int rc)
{
    return rc == SB_MT_RC_FULL ? "full" : rc == SB_MT_RC_SELECTIVE ? "selective" : "none";
}

static int param_of(const sb_model *m, const char *name, long *v)
{
    for (int i = 0; i < m->nparams; i++)
        if (!strcmp(m->params[i].name, name)) {
            *v = (long)m->params[i].value;
            return 1;
        }
    return 0;
}

/* A Hugging Face config's transformer: its sizes by their config keys. */
static int mt_model_hf(const sb_model *m, sb_mt_model *o, sb_error *err)
{
    if (m->grid_why[0])
        return sb_fail(err, SB_EXIT_INPUT, "%s: --algo megatron does not price this %s as it "
                       "is: %s", m->path, m->hf_arch, m->grid_why);
    struct {
        const char *name;
        long *at;
    } need[] = {{"num_hidden_layers", &o->layers}, {"hidden_size", &o->hidden},
                {"num_attention_heads", &o->heads}, {"intermediate_size", &o->ffn},
                {"vocab_size", &o->vocab}, {"seq", &o->seq}, {"batch", &o->global_batch}};
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
        if (!param_of(m, need[i].name, need[i].at) || *need[i].at <= 0)
            return sb_fail(err, SB_EXIT_INTERNAL, "%s: no positive param '%s'", m->path,
                           need[i].name);
    if (!param_of(m, "num_key_value_heads", &o->kv_heads))
        o->kv_heads = o->heads;
    if (!param_of(m, "num_local_experts", &o->experts)) /* Mixtral's key; Qwen3-MoE's */
        param_of(m, "num_experts", &o->experts);
    if (o->experts > 0 && !param_of(m, "num_experts_per_tok", &o->topk))
        o->topk = 1;
    if (o->experts > 0)
        param_of(m, "moe_intermediate_size", &o->moe_ffn);
    long hd = 0; /* the importer's head_dim (hidden / heads unless the config gives one) */
    if (param_of(m, "head_dim", &hd) && hd > 0 && hd * o->heads != o->hidden)
        o->head_dim = hd;
    o->swiglu = 1; /* Llama, Mistral, Mixtral, Qwen2, Qwen3, Qwen3-MoE (hf_grid_why) */
    o->qk_norm = m->hf_qk_norm, o->qkv_bias = m->hf_qkv_bias;
    o->untie = m->ntied == 0; /* tie_word_embeddings: the importer's `tie` */
    return 0;
}

int sb_mt_model_from(const sb_model *m, sb_mt_model *o, sb_error *err)
{
    memset(o, 0, sizeof *o);
    if (m->hf_arch[0])
        return mt_model_hf(m, o, err);
    struct {
        const char *name;
        long *at;
    } need[] = {{"layers", &o->layers}, {"embed", &o->hidden}, {"heads", &o->heads},
                {"ff", &o->ffn},        {"vocab", &o->vocab},  {"seq", &o->seq},
                {"batch", &o->global_batch}};
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
        if (!param_of(m, need[i].name, need[i].at) || *need[i].at <= 0)
            return sb_fail(err, SB_EXIT_INPUT,
                           "%s: --algo megatron needs a decoder-only transformer with a positive "
                           "param '%s' (layers, embed, heads, ff, vocab, seq, batch)",
                           m->path, need[i].name);
    if (!param_of(m, "kv_heads", &o->kv_heads))
        o->kv_heads = o->heads;
    long dk = 0; /* a head's width where the file's differs from embed / heads */
    if (param_of(m, "dk", &dk) && dk > 0 && dk * o->heads != o->hidden)
        o->head_dim = dk;
    param_of(m, "experts", &o->experts);
    if (o->experts > 0 && !param_of(m, "topk", &o->topk))
        o->topk = 1;
    long theta;
    o->swiglu = param_of(m, "theta", &theta);
    o->untie = m->ntied == 0; /* a decoder's one tie is its head's (`tie`) */
    return 0;
}

static int check_stages(const sb_mt_model *mm, const sb_mt_config *c, sb_error *err);
static int stages_ok(const sb_mt_model *mm, const sb_mt_config *c);

/* The query's width, heads x head_dim (hidden where head_dim is not given) */
static double q_width(const sb_mt_model *mm)
{
    return mm->head_dim > 0 ? (double)mm->heads * (double)mm->head_dim : (double)mm->hidden;
}

/* A fused attention kernel's heads: at most 256 dims, a multiple of 8 (FlashAttention,
 * cuDNN); -1 and the reason when mm's are not */
static int fused_head_refused(const sb_mt_model *mm, sb_error *err)
{
    double dh = sb_mt_dh(mm);
    if (dh <= 256 && fmod(dh, 8.0) == 0)
        return 0;
    return sb_fail(err, SB_EXIT_INPUT,
                   "--attention fused: a head of %g dims (FlashAttention and cuDNN's fused "
                   "attention take at most 256, a multiple of 8): give --attention "
                   "materialized", dh);
}

/* Megatron-LM asserts sequence parallelism for MoE with TP */
static int moe_needs_sp(int tp, sb_error *err)
{
    return sb_fail(err, SB_EXIT_INPUT,
                   "an MoE model at --tp %d needs sequence parallelism (Megatron-LM asserts it: "
                   "the token dispatcher splits the tokens over TP)", tp);
}

int sb_mt_check(const sb_mt_model *mm, const sb_mt_config *c, int P, sb_error *err)
{
    if (c->tp < 1 || c->pp < 1 || c->dp < 1 || c->cp < 1 || c->ep < 1 || c->vpp < 1 || c->mbs < 1)
        return sb_fail(err, SB_EXIT_INPUT, "megatron degrees must be at least 1");
    if ((double)c->tp * c->pp * c->dp * c->cp != (double)P)
        return sb_fail(err, SB_EXIT_INPUT,
                       "--tp %d x --pp %d x --dp %d x --cp %d = %.0f, not the %d devices (-p)", c->tp,
                       c->pp, c->dp, c->cp, (double)c->tp * c->pp * c->dp * c->cp, P);
    if (mm->heads % c->tp || mm->kv_heads % c->tp)
        return sb_fail(err, SB_EXIT_INPUT, "--tp %d does not divide the %ld heads (%ld kv heads)",
                       c->tp, mm->heads, mm->kv_heads);
    if (sb_mt_ff(mm) % c->tp)
        return sb_fail(err, SB_EXIT_INPUT, "--tp %d does not divide ff %ld", c->tp, sb_mt_ff(mm));
    if (mm->seq % c->cp || (c->cp > 1 && (mm->seq / c->cp) % 2))
        return sb_fail(err, SB_EXIT_INPUT,
                       "--cp %d does not divide seq %ld into an even number per rank", c->cp,
                       mm->seq);
    if (c->ep > 1 && mm->experts <= 0)
        return sb_fail(err, SB_EXIT_INPUT, "--ep %d: the model has no experts", c->ep);
    if (c->ep > 1 && (mm->experts % c->ep || (c->dp * c->cp) % c->ep))
        return sb_fail(err, SB_EXIT_INPUT,
                       "--ep %d must divide the %ld experts and DP x CP = %d (EP lies inside DP)",
                       c->ep, mm->experts, c->dp * c->cp);
    /* stages of even layers, or uneven ones as Megatron-Core's first/last-stage layer
     * counts make them (sb_mt_stage_count) */
    if (c->pp > mm->layers)
        return sb_fail(err, SB_EXIT_INPUT, "--pp %d is more stages than the %ld layers", c->pp,
                       mm->layers);
    if (c->vpp > 1 && c->pp < 2)
        return sb_fail(err, SB_EXIT_INPUT, "--vpp %d needs --pp of at least 2", c->vpp);
    if (check_stages(mm, c, err))
        return -1;
    if (mm->global_batch % ((long)c->dp * c->mbs))
        return sb_fail(err, SB_EXIT_INPUT,
                       "the batch of %ld sequences is not a whole number of micro-batches of %d "
                       "over --dp %d",
                       mm->global_batch, c->mbs, c->dp);
    long M = mm->global_batch / ((long)c->dp * c->mbs);
    if (c->vpp > 1 && M % c->pp)
        return sb_fail(err, SB_EXIT_INPUT,
                       "--vpp %d: the %ld micro-batches must be a multiple of --pp %d "
                       "(interleaved 1F1B)",
                       c->vpp, M, c->pp);
    if (c->sp && c->tp < 2)
        return sb_fail(err, SB_EXIT_INPUT, "sequence parallelism needs --tp of at least 2");
    if (c->fused_attention && fused_head_refused(mm, err))
        return -1;
    if (mm->experts > 0 && c->tp > 1 && !c->sp)
        return moe_needs_sp(c->tp, err);
    if (c->sp && (mm->seq / c->cp) % c->tp)
        return sb_fail(err, SB_EXIT_INPUT,
                       "sequence parallelism splits a rank's %ld tokens of the sequence over "
                       "--tp %d, which does not divide them (Megatron-LM asserts it)",
                       mm->seq / c->cp, c->tp);
    if (c->tp_overlap && c->tp > 1 && !c->sp)
        return sb_fail(err, SB_EXIT_INPUT,
                       "--tp-comm-overlap needs sequence parallelism (Megatron-LM refuses it "
                       "without: --sequence-parallel on)");
    if (c->param_gather == SB_MT_PG_ON && (!c->dist_opt || !c->dp_overlap))
        return sb_fail(err, SB_EXIT_INPUT,
                       "--overlap-param-gather on needs the distributed optimizer (--zero 1) and "
                       "--dp-overlap on (Megatron-LM asserts both)");
    return 0;
}

int sb_mt_param_overlap(const sb_mt_config *c)
{
    return c->param_gather == SB_MT_PG_ON || (c->param_gather == SB_MT_PG_AS_DP && c->dp_overlap);
}

int sb_mt_check_gpu(const sb_mt_config *c, const sb_gpu *g, sb_error *err)
{
    if (c->tp_overlap && c->tp > g->node_devices)
        return sb_fail(err, SB_EXIT_INPUT,
                       "--tp-comm-overlap needs TP inside a node (Transformer Engine's "
                       "userbuffers run over NVLink): --tp %d on nodes of %d",
                       c->tp, g->node_devices);
    return 0;
}

int sb_mt_layer_gemms(const sb_mt_model *mm, const sb_mt_config *c, sb_mt_gemm *out)
{
    static const char *const names[4] = {"qkv", "proj", "fc1", "fc2"};
    const double t = c->tp, h = (double)mm->hidden, f = (double)sb_mt_ff(mm);
    const double kvh = (double)mm->kv_heads * sb_mt_dh(mm), qw = q_width(mm);
    const double T = (double)c->mbs * ((double)mm->seq / c->cp); /* tokens of a micro-batch */
    const double routed = mm->experts > 0 ? (double)mm->topk : 1.0; /* MLP: each routed copy */
    /* forward (M x K)(K x N) of each linear */
    const double fw[4][3] = {{T, (qw + 2.0 * kvh) / t, h},                         /* column-parallel */
                             {T, h, qw / t},                                       /* row-parallel */
                             {T * routed, (mm->swiglu ? 2.0 : 1.0) * f / t, h},    /* up (and gate) */
                             {T * routed, h, f / t}};                              /* down, row-parallel */
    for (int i = 0; i < 4; i++) {
        double M = fw[i][0], N = fw[i][1], K = fw[i][2];
        out[3 * i] = (sb_mt_gemm){names[i], "fprop", M, N, K};
        out[3 * i + 1] = (sb_mt_gemm){names[i], "dgrad", M, K, N}; /* (M x N)(N x K) */
        out[3 * i + 2] = (sb_mt_gemm){names[i], "wgrad", K, N, M}; /* (K x M)(M x N) */
    }
    return SB_MT_LAYER_GEMMS;
}

int sb_mt_head_gemms(const sb_mt_model *mm, const sb_mt_config *c, sb_mt_gemm *out)
{
    const double t = c->tp, h = (double)mm->hidden, V = (double)mm->vocab;
    const double T = (double)c->mbs * ((double)mm->seq / c->cp);
    out[0] = (sb_mt_gemm){"logits", "fprop", T, V / t, h};
    out[1] = (sb_mt_gemm){"logits", "dgrad", T, h, V / t};
    out[2] = (sb_mt_gemm){"logits", "wgrad", h, V / t, T};
    return SB_MT_HEAD_GEMMS;
}

/* g with the figures of the GEMMs the fp8 recipe leaves in bf16 (the attention
 * core, the output layer): attn_peak_tflops and attn_gemm_eff, and no casts;
 * outside fp8 they are the machine's own. */
static sb_gpu non_fp8_gpu(const sb_gpu *g)
{
    sb_gpu u = *g;
    u.peak_tflops = g->attn_peak_tflops > 0 ? g->attn_peak_tflops : g->peak_tflops;
    u.gemm_eff = g->attn_gemm_eff > 0 ? g->attn_gemm_eff : g->gemm_eff;
    u.fp8 = 0;
    return u;
}

/* Whether the MLP's linears are Transformer Engine's LayerNormLinear (fc1, the
 * pre-MLP norm fused into it) and Linear (fc2), whose fp8 handling the model
 * follows: a dense MLP's. An MoE layer's pre-MLP norm is its own and its experts
 * are grouped linears beside a bf16 router. */
static int te_mlp(const sb_mt_model *mm) { return mm->experts == 0; }

/* The fp8 recipe's conversions around linear i (0 QKV, 1 proj, 2 fc1, 3 fc2; fp its
 * forward GEMM), forward *f and backward *b seconds (0 outside fp8): its input and its
 * output gradient cast-transposed (2 bytes read, 1 + 1 written), as Transformer Engine
 * runs them, but for these cases. TE fuses the norm before QKV, and before fc1 outside
 * MoE (LayerNormLinear; an MoE layer's pre-MLP norm is its own), into that linear: the
 * norm writes the fp8 input itself (its 1-byte write priced with the norm), and the
 * backward transposes the gathered fp8 copy for the wgrad. A TE Linear under sequence
 * parallelism (the row-parallel proj, fc2 outside MoE) casts its input without the
 * transpose (2 + 1), which the backward makes (1 + 1); casts its output gradient on
 * the T/t local rows (2 + 1), gathers it in fp8 and transposes the gathered copy; and
 * sums a bias gradient over those rows in a pass of its own (2: GELU models, which
 * carry biases). */
static void fp8_conversions(const sb_mt_model *mm, const sb_mt_config *c, const sb_gpu *g, int i,
                            const sb_mt_gemm *fp, double *f, double *b)
{
    const int ln_fused = i == 0 || (i == 2 && te_mlp(mm));
    const int row_sp = c->sp && (i == 1 || (i == 3 && te_mlp(mm))) && g->fp8;
    double in = fp->M * fp->K, go = fp->M * fp->N; /* elements of the input, output gradient */
    double rows = go / c->tp;                      /* the output gradient's local rows */
    *f = ln_fused ? 0.0 : row_sp ? sb_gpu_mem_s(g, in * 3.0) : sb_gpu_cast_s(g, in);
    *b = ln_fused || row_sp ? sb_gpu_fp8_transpose_s(g, in) : 0.0;
    *b += row_sp ? sb_gpu_mem_s(g, rows * 3.0) + sb_gpu_fp8_transpose_s(g, go) +
                       (mm->swiglu ? 0.0 : sb_gpu_mem_s(g, rows * 2.0))
                 : sb_gpu_cast_s(g, go);
}

/* A layer's TP collectives of tpb bytes (T x h words of B bytes), forward or backward
 * (the same): 2 all-reduces, or under sequence parallelism 2 all-gathers and 2
 * reduce-scatters. Under fp8 an all-gather moves fp8 words where Transformer Engine
 * gathers an fp8 copy: a fused norm's output (forward: QKV, fc1 outside MoE), a
 * linear's output gradient (backward: proj, fc2 outside MoE). */
static double tp_collectives(const sb_mt_model *mm, const sb_mt_config *c, const sb_gpu *g, double tpb,
                             double B)
{
    const int inter = c->tp > g->node_devices;
    if (!c->sp)
        return 2.0 * sb_gpu_allreduce_s(g, tpb, c->tp, inter);
    double rs = sb_gpu_gather_s(g, tpb, c->tp, inter);
    double ag8 = g->fp8 ? sb_gpu_gather_s(g, tpb / B, c->tp, inter) : rs;
    if (te_mlp(mm))
        return rs + ag8 + ag8 + rs;
    /* MoE: the router runs on the T/t local tokens; Megatron-Core's token dispatcher
     * all-gathers the top-k routed copies over the (expert) TP group after the EP
     * all-to-all and reduce-scatters the experts' output before the one back: top-k x
     * T x h each, bf16 */
    return rs + ag8 + 2.0 * sb_gpu_gather_s(g, tpb * (double)mm->topk, c->tp, inter);
}

/* The activations a layer keeps for its backward, bytes per micro-batch on one GPU. */
static double layer_act_bytes(const sb_mt_model *mm, const sb_mt_config *c, const sb_gpu *g)
{
    const double B = sb_precision_bytes(c->precision).act, t = c->tp;
    const double h = (double)mm->hidden, f = (double)sb_mt_ff(mm), a = (double)mm->heads;
    const double kvh = (double)mm->kv_heads * sb_mt_dh(mm), qw = q_width(mm);
    const double s = (double)mm->seq / c->cp, T = (double)c->mbs * s;
    const double moe_tokens = mm->experts > 0 ? (double)mm->topk : 1.0;
    /* activations kept (Korthikanti et al. 2022, Eq. 2-6, per layer and micro-batch), in
     * units of s b h bytes at 2-byte words: not split by TP (without sequence parallelism)
     * the two norms' inputs 4, the QKV and MLP inputs 2 + 2, the two dropout masks 1 + 1;
     * split by TP Q 2, K and V 2 + 2 times kv_heads / heads (GQA), the attention output 2,
     * the MLP's GEMM outputs and activation 4 f / h (GELU: fc1, gelu) or 6 f / h (SwiGLU:
     * gate, up, their product) per routed copy of a token; GPT-3 (f = 4h, MHA) gives
     * Korthikanti's s b h (10 + 24 / t), s b h 34 / t with sequence parallelism. A
     * SwiGLU (Llama-family) model trains without dropout: no masks (PyTorch keeps none at
     * p = 0). MoE keeps each routed copy's MLP input (2 per copy) beside the router's.
     * The materialized attention adds 5 a s / h (softmax output, its dropout's mask and
     * output; 2 without dropout);
     * selective recomputation drops that term, full keeps the layer's input only.
     * Under fp8 a Transformer Engine linear (and an expert's GroupedLinear) keeps an
     * fp8 copy of its input (1 byte): the fused norms' outputs (QKV; fc1 outside MoE),
     * each routed copy's expert input and the activation's output (fc2) 1 in place of
     * 2; an MoE router's input stays bf16 (a plain linear); the attention output's copy
     * (proj) 1 beside the bf16 output a fused attention keeps for its own backward,
     * alone where the core is recomputed or materialized (whose backward does not read
     * its output). */
    double sbh = T * h * B / 2.0;
    double drop = mm->swiglu ? 0.0 : 1.0;
    const int f8 = g->fp8, dense = te_mlp(mm);
    double in_qkv = f8 ? 1.0 : 2.0, in_mlp = f8 && dense ? 1.0 : 2.0, act_out = f8 ? 1.0 : 2.0;
    double attn_out = !f8 ? 2.0 : c->fused_attention && c->recompute != SB_MT_RC_SELECTIVE ? 3.0 : 1.0;
    /* norms, QKV and MLP inputs (MoE: the router's and each routed copy's), masks */
    double whole = 4.0 + in_qkv + in_mlp + (mm->experts > 0 ? act_out * moe_tokens : 0.0) + 2.0 * drop;
    /* (Q and the attention output are heads x head_dim wide; QK norms keep their inputs,
     * Q's and K's, 2 bytes each) */
    double split = (2.0 + attn_out) * qw / h + 4.0 * kvh / h +
                   ((mm->swiglu ? 4.0 : 2.0) + act_out) * f / h * moe_tokens +
                   (mm->qk_norm ? 2.0 * (qw + kvh) / h : 0.0);
    /* under sequence parallelism the experts' input is the dispatcher's TP all-gather of
     * the routed copies (top-k x T tokens a rank), which the grouped linear keeps whole */
    double ex_in = mm->experts > 0 ? act_out * moe_tokens : 0.0;
    double lin = c->sp ? (whole - ex_in + split) / t + ex_in : whole + split / t;
    /* materialized scores: softmax output 2 (+ its dropout's mask 1 and output 2) */
    double attn = c->fused_attention || c->recompute == SB_MT_RC_SELECTIVE
                      ? 0.0 : (2.0 + 3.0 * drop) * a * s / (h * t);
    if (c->recompute == SB_MT_RC_FULL)
        return 2.0 * sbh / (c->sp ? t : 1.0);
    return sbh * (lin + attn);
}

void sb_mt_layer(const sb_mt_model *mm, const sb_mt_config *c, const sb_gpu *g, sb_mt_layer_cost *L)
{
    memset(L, 0, sizeof *L);
    sb_prec_bytes pb = sb_precision_bytes(c->precision);
    const double B = pb.act, t = c->tp;
    const double h = (double)mm->hidden, f = (double)sb_mt_ff(mm), a = (double)mm->heads;
    const double dh = sb_mt_dh(mm), kvh = (double)mm->kv_heads * dh, qw = q_width(mm);
    const double s = (double)mm->seq / c->cp, T = (double)c->mbs * s; /* tokens */
    const double Tn = c->sp ? T / t : T; /* tokens a norm or dropout touches */
    const double moe_tokens = mm->experts > 0 ? (double)mm->topk : 1.0; /* routed copies per token */
    double fwd_attn = 0, bwd_attn = 0, fwd_mlp = 0, bwd_mlp = 0, fwd_rest = 0, bwd_rest = 0;
    /* of fwd_attn, bwd_attn: their memory-bound passes (CP's merges; the materialized
     * scores' softmax and dropout) */
    double attn_mem_f = 0, attn_mem_b = 0;
    sb_mt_gemm gm[SB_MT_LAYER_GEMMS];
    double gt[SB_MT_LAYER_GEMMS]; /* each GEMM's price, once (TP overlap reads them too) */
    sb_mt_layer_gemms(mm, c, gm);
    for (int i = 0; i < SB_MT_LAYER_GEMMS; i++)
        gt[i] = sb_gpu_gemm_s(g, 1, gm[i].M, gm[i].N, gm[i].K, B);
    for (int i = 0; i < 4; i++) {
        double cf, cb;
        fp8_conversions(mm, c, g, i, &gm[3 * i], &cf, &cb);
        double fw = gt[3 * i] + cf;
        double bw = gt[3 * i + 1] + gt[3 * i + 2] + cb;
        L->gemm_fwd_s += gt[3 * i], L->gemm_bwd_s += gt[3 * i + 1] + gt[3 * i + 2];
        if (i >= 2)
            fwd_mlp += fw, bwd_mlp += bw;
        else
            fwd_rest += fw, bwd_rest += bw;
    }
    /* attention core per local head: scores (s x dh)(dh x s_kv), then (s x s_kv)(s_kv x dh);
     * causal: the fused kernel skips the masked half, the materialized one computes it */
    double hl = a / t * c->mbs, skv = (double)mm->seq;
    if (c->fused_attention) {
        double half = 0.5;
        fwd_attn = 2.0 * sb_gpu_attn_s(g, hl, s, skv * half, dh, B, 0); /* scores on chip */
        /* backward: recomputes the scores, then dQ, dK, dV and dP: 2.5x the forward's
         * products, at the backward kernel's rate where the machine gives one */
        bwd_attn = 5.0 * sb_gpu_attn_s(g, hl, s, skv * half, dh, B, 1);
        /* CP: the passes that merge the ring's steps (memory-bound, with the core:
         * selective recomputation repeats them) */
        sb_mt_cp_passes(g, c->cp, hl * s * dh, c->mbs * s * kvh / t, hl * s, B, &attn_mem_f, &attn_mem_b);
        fwd_attn += attn_mem_f, bwd_attn += attn_mem_b;
    } else {
        double sc = hl * s * skv; /* score elements */
        sb_gpu ga = non_fp8_gpu(g); /* the attention core at its own peak (bf16 under fp8) */
        fwd_attn = sb_gpu_gemm_s(&ga, hl, s, skv, dh, B) + sb_gpu_gemm_s(&ga, hl, s, dh, skv, B);
        bwd_attn = 2.0 * fwd_attn;
        /* fused scale-mask-softmax (read, write), dropout (read, write, 1-byte mask) */
        attn_mem_f = sb_gpu_mem_s(g, sc * 2.0 * B) + sb_gpu_mem_s(g, sc * (2.0 * B + 1.0));
        attn_mem_b = sb_gpu_mem_s(g, sc * 3.0 * B) + sb_gpu_mem_s(g, sc * (2.0 * B + 1.0));
        fwd_attn += attn_mem_f, bwd_attn += attn_mem_b;
    }
    /* memory-bound ops (bytes per element read + written): 2 norms (2, backward 4; one
     * fused into an fp8 linear writes 1 byte),
     * 2 bias-dropout-adds (3 + mask, backward 2 + mask; no mask without dropout), the activation (gelu 2 / swiglu 3,
     * backward 3 / 5), rotary on q and k (2, backward 2) */
    double nrm = sb_gpu_mem_s(g, Tn * h * (B + (g->fp8 ? 1.0 : B))) +
                 sb_gpu_mem_s(g, Tn * h * (B + (g->fp8 && te_mlp(mm) ? 1.0 : B)));
    double nrm_b = 2.0 * sb_gpu_mem_s(g, Tn * h * 4.0 * B);
    /* (SwiGLU models: residual adds without dropout, no mask) */
    double mask = mm->swiglu ? 0.0 : 1.0;
    double bda = 2.0 * sb_gpu_mem_s(g, Tn * h * (3.0 * B + mask)),
           bda_b = 2.0 * sb_gpu_mem_s(g, Tn * h * (2.0 * B + mask));
    double ffl = f / t * T * moe_tokens;
    double act = sb_gpu_mem_s(g, ffl * (mm->swiglu ? 3.0 : 2.0) * B);
    double act_b = sb_gpu_mem_s(g, ffl * (mm->swiglu ? 5.0 : 3.0) * B);
    double rope = mm->swiglu ? sb_gpu_mem_s(g, T * (qw + kvh) / t * 2.0 * B) : 0.0;
    /* QK norms (Qwen3): an RMSNorm over each head of q and k, TE's fused kernel (read,
     * write; backward 4 per element, as the layer's norms); a QKV bias adds in the GEMM's
     * epilogue and its gradient in the backward GEMM's (cuBLASLt): no pass of its own */
    double qkn = mm->qk_norm ? sb_gpu_mem_s(g, T * (qw + kvh) / t * 2.0 * B) : 0.0;
    double qkn_b = mm->qk_norm ? sb_gpu_mem_s(g, T * (qw + kvh) / t * 4.0 * B) : 0.0;
    fwd_rest += nrm + bda + rope + qkn;
    bwd_rest += nrm_b + bda_b + rope + qkn_b;
    fwd_mlp += act;
    bwd_mlp += act_b;
    if (mm->experts > 0) { /* Megatron-Core's router and token dispatcher */
        /* the router: Tn x E x h, a plain linear (bf16 under fp8), its weight's gradient
         * and its input's in the backward; the permutation of a rank's tokens into their
         * top-k routed copies before the dispatch (read Tn x h, write k of them) and the
         * weighted un-permutation after the combine (the reverse), and their backward */
        sb_gpu gr = non_fp8_gpu(g);
        const double E = (double)mm->experts;
        double rf = sb_gpu_gemm_s(&gr, 1, Tn, E, h, B);
        double rb = sb_gpu_gemm_s(&gr, 1, Tn, h, E, B) + sb_gpu_gemm_s(&gr, 1, E, h, Tn, B);
        double perm = 2.0 * sb_gpu_mem_s(g, Tn * h * B * (1.0 + moe_tokens));
        L->gemm_fwd_s += rf, L->gemm_bwd_s += rb;
        fwd_mlp += rf + perm;
        bwd_mlp += rb + perm;
    }
    L->fwd_s = fwd_attn + fwd_mlp + fwd_rest;
    L->bwd_s = bwd_attn + bwd_mlp + bwd_rest;
    /* the attention core's products (a materialized one's softmax and dropout passes
     * are memory-bound, counted with the rest) */
    L->attn_fwd_s = fwd_attn - attn_mem_f, L->attn_bwd_s = bwd_attn - attn_mem_b;
    /* TP: forward 2 all-reduces of T x h (sequence parallel: 2 all-gathers and 2
     * reduce-scatters, the same volume), backward the same; a full recomputation repeats
     * the forward's */
    double tpb = T * h * B;
    L->tp_fwd_s = L->tp_bwd_s = tp_collectives(mm, c, g, tpb, B);
    if (c->tp_overlap && c->tp > 1) { /* overlapped: its price in the GEMMs, what stays exposed */
        sb_mt_tpov ov;
        sb_mt_tp_overlap(gm, gt, c, g, tpb, mm->experts > 0 ? (double)mm->topk : 0.0, &ov);
        L->fwd_s += ov.fwd_extra_s, L->bwd_s += ov.bwd_extra_s;
        L->gemm_fwd_s += ov.fwd_extra_s, L->gemm_bwd_s += ov.bwd_extra_s;
        L->tp_fwd_s = ov.fwd_exposed_s, L->tp_bwd_s = ov.bwd_exposed_s;
    }
    if (c->recompute == SB_MT_RC_FULL) /* the recomputed forward, its collectives */
        L->tp_bwd_s += L->tp_fwd_s;
    if (c->recompute == SB_MT_RC_FULL)
        L->recomp_s = L->fwd_s;
    else if (c->recompute == SB_MT_RC_SELECTIVE)
        L->recomp_s = fwd_attn;
    /* MoE: dispatch and combine all-to-all of the routed copies of a rank's tokens (its
     * T/t under sequence parallelism, which Megatron-LM requires with TP) over EP,
     * forward and backward; a full recomputation repeats the forward's. The EP group is
     * TP apart: its ranks in one node exchange over NVLink while the rest cross the
     * network, at once */
    if (mm->experts > 0 && c->ep > 1) {
        double per_peer = Tn * moe_tokens * h * B / c->ep; /* to each other EP rank */
        int node_ep = c->tp >= g->node_devices ? 1 : g->node_devices / c->tp;
        double one = node_ep >= c->ep ? sb_gpu_p2p_s(g, per_peer * (c->ep - 1.0), 0)
                                      : fmax(sb_gpu_p2p_s(g, per_peer * (node_ep - 1.0), 0),
                                             sb_gpu_p2p_s(g, per_peer * (double)(c->ep - node_ep), 1));
        L->ep_fwd_s = 2.0 * one;
        L->ep_s = (c->recompute == SB_MT_RC_FULL ? 6.0 : 4.0) * one;
    }
    /* CP: each rank gathers the other ranks' K and V (a ring, overlapped with the
     * attention kernels: only what they cannot hide is exposed; the merge passes run
     * before the ring starts or after it ends), the backward gathers them again and
     * reduce-scatters their gradients; a recomputation, full or selective (the core
     * attention, ring and all), repeats the forward's */
    if (c->cp > 1) {
        double kv = (double)c->mbs * mm->seq * 2.0 * kvh / t * B; /* the sequence's K and V */
        int inter = (long)c->tp * c->cp > g->node_devices;
        double ring = sb_gpu_gather_s(g, kv, c->cp, inter);
        L->cp_fwd_s = fmax(ring - (fwd_attn - attn_mem_f), 0.0);
        L->cp_s = L->cp_fwd_s + fmax(2.0 * ring - (bwd_attn - attn_mem_b), 0.0);
        if (c->recompute != SB_MT_RC_NONE)
            L->cp_s += L->cp_fwd_s;
    }
    double experts_here = mm->experts > 0 ? (double)mm->experts / c->ep : 1.0;
    double mlp = experts_here * (mm->swiglu ? 3.0 : 2.0) * h * f / t;
    L->expert_params = mm->experts > 0 ? mlp : 0.0;
    L->params = (h * (qw + 2.0 * kvh) + qw * h) / t + mlp + 2.0 * h +
                (mm->experts > 0 ? h * (double)mm->experts : 0.0) +
                (mm->qkv_bias ? (qw + 2.0 * kvh) / t : 0.0) + (mm->qk_norm ? 2.0 * dh : 0.0);
    L->act_bytes = layer_act_bytes(mm, c, g);
}

/* A layer's GEMM parameters as a token sees them (MoE: its top-k experts') */
static double layer_gemm_params(const sb_mt_model *mm)
{
    double hh = (double)mm->hidden, dense = mm->experts > 0 ? (double)mm->topk : 1.0;
    double kvh = (double)mm->kv_heads * sb_mt_dh(mm), qw = q_width(mm);
    return hh * (qw + 2.0 * kvh) + qw * hh + dense * (mm->swiglu ? 3.0 : 2.0) * hh * sb_mt_ff(mm);
}

double sb_mt_model_flops(const sb_mt_model *mm)
{
    double hh = (double)mm->hidden, qw = q_width(mm);
    double tokens = (double)mm->global_batch * mm->seq;
    return tokens * (6.0 * mm->layers * layer_gemm_params(mm) + 12.0 * mm->layers * qw * mm->seq +
                     6.0 * hh * (double)mm->vocab);
}

int sb_mt_throughput(const sb_model *m, int P, double step_s, double peak_tflops,
                     double *tokens_per_s, double *tflops_per_device, double *mfu)
{
    sb_mt_model mm;
    sb_error err = {0};
    if (!(step_s > 0) || !(peak_tflops > 0) || P < 1 || sb_mt_model_from(m, &mm, &err))
        return 0;
    *tokens_per_s = (double)mm.global_batch * mm.seq / step_s;
    *tflops_per_device = sb_mt_model_flops(&mm) / step_s / P / 1e12;
    *mfu = *tflops_per_device / peak_tflops;
    return 1;
}

/* Bytes of a gradient word: the main gradients' buffer and their reduction
 * (--grad-reduce-dtype, else the recipe's). */
static double grad_word(const sb_mt_config *c)
{
    return c->grad_bytes > 0 ? c->grad_bytes : sb_precision_bytes(c->precision).grad_word;
}

void sb_mt_ends_of(const sb_mt_model *mm, const sb_mt_config *c, const sb_gpu *g,
                   sb_mt_ends *e)
{
    sb_prec_bytes pb = sb_precision_bytes(c->precision);
    const double t = c->tp, h = (double)mm->hidden, V = (double)mm->vocab;
    const double s = (double)mm->seq / c->cp, T = (double)c->mbs * s, B = pb.act;
    const int tp_inter = c->tp > g->node_devices;
    /* the head: vocab-parallel logits GEMM and the fp32 cross-entropy over T x V/t.
     * The output layer is Megatron-LM's own ColumnParallelLinear, not a Transformer
     * Engine one: under the fp8 recipe its GEMMs stay bf16 (the attention core's
     * figures, bf16's there) */
    sb_gpu gh = g->fp8 ? non_fp8_gpu(g) : *g;
    sb_mt_gemm hg[SB_MT_HEAD_GEMMS];
    sb_mt_head_gemms(mm, c, hg);
    e->head_gemm_f = sb_gpu_gemm_s(&gh, 1, hg[0].M, hg[0].N, hg[0].K, B);
    e->head_gemm_b = sb_gpu_gemm_s(&gh, 1, hg[1].M, hg[1].N, hg[1].K, B) +
                     sb_gpu_gemm_s(&gh, 1, hg[2].M, hg[2].N, hg[2].K, B);
    /* the loss as Megatron-LM's vocab-parallel cross-entropy runs it, bytes per
     * logit. Unfused (its default): forward the cast to fp32 (B + 4; none for 4-byte
     * logits), max (4), subtract the max (8), exp (8), sum (4), divide into the
     * softmax kept for the backward (8); backward the multiply by the loss's
     * gradient (8) and the cast back. Fused (--cross-entropy-fusion, NeMo 2's and
     * Megatron-Bridge's default): three kernels forward, the cast with the max (B +
     * 4, or 4), subtract-exp-sum (8), divide (8); the same backward */
    const double cast = B < 4.0 ? B + 4.0 : 0.0;
    const double ce_f = c->ce_fusion ? (B < 4.0 ? B + 4.0 : 4.0) + 16.0 : cast + 32.0;
    e->head_f = e->head_gemm_f + sb_gpu_mem_s(g, T * V / t * ce_f);
    e->head_b = e->head_gemm_b + sb_gpu_mem_s(g, T * V / t * (8.0 + cast));
    /* the output layer is not one of TE's overlapped linears: with --tp-comm-overlap its
     * input's all-gather stays exposed (its backward reduce-scatter hides behind wgrad) */
    e->head_tp = c->tp_overlap ? sb_gpu_gather_s(g, T * h * B, t, tp_inter)
                               : 2.0 * sb_gpu_allreduce_s(g, T * h * B, t, tp_inter);
    /* the embedding: a gather (read and write T x h); its backward PyTorch's dense
     * embedding gradient (the V/t x h table zeroed, the T rows added in), which the
     * data-parallel hook then adds into the main gradient (read B, read and write
     * the gradient word) each micro-batch */
    e->emb_f = sb_gpu_mem_s(g, T * h * 2.0 * B);
    e->emb_b = sb_gpu_mem_s(g, T * h * 2.0 * B + V / t * h * (2.0 * B + 2.0 * grad_word(c)));
    /* pipeline: each micro-batch's activations cross VPP chunk boundaries each way; the
     * scatter-gather of SC21 sends 1/t of them over a rank's own link (then an all-gather
     * inside the node); sends block the 1F1B steady state */
    e->pp_mb = 0.0;
    if (c->pp > 1) {
        double bytes = T * h * B / t;
        int inter = (long)c->tp * c->cp * c->dp >= g->node_devices; /* PP neighbours' distance */
        e->pp_mb = 2.0 * c->vpp * (sb_gpu_p2p_s(g, bytes, inter) +
                                   (c->tp > 1 ? sb_gpu_gather_s(g, T * h * B, t, tp_inter) : 0.0));
    }
}

int sb_mt_stage_count(const sb_mt_model *mm, const sb_mt_config *c, int s)
{
    if (c->pp <= 1)
        return (int)mm->layers;
    int fl = c->first_layers > 0 ? c->first_layers : 0, ll = c->last_layers > 0 ? c->last_layers : 0;
    if (s == 0 && fl)
        return fl;
    if (s == c->pp - 1 && ll)
        return ll;
    long rest = mm->layers - fl - ll;
    int others = c->pp - (fl > 0) - (ll > 0);
    return others > 0 && rest > 0 && rest % others == 0 ? (int)(rest / others) : 0;
}

void sb_mt_chunk_layers(const sb_mt_model *mm, const sb_mt_config *c, int s, int k, int *n,
                        int *first)
{
    /* virtual stages k' PP + q before k PP + s: every rank's first k chunks, then
     * chunk k of the ranks before s */
    int f = 1;
    for (int q = 0; q < c->pp; q++) {
        int per = sb_mt_stage_count(mm, c, q) / c->vpp;
        f += per * k + (q < s ? per : 0);
    }
    *n = sb_mt_stage_count(mm, c, s) / c->vpp, *first = f;
}

/* 1 when c's stages split the layers as check_stages asks (without a message) */
static int stages_ok(const sb_mt_model *mm, const sb_mt_config *c)
{
    int fl = c->first_layers, ll = c->last_layers;
    if (c->pp > mm->layers || fl < 0 || ll < 0 || ((fl || ll) && c->pp < 2))
        return 0;
    if ((long)fl + ll >= mm->layers && !(c->pp == 2 && fl && ll))
        return 0;
    if (c->pp == 2 && fl && ll && (long)fl + ll != mm->layers)
        return 0;
    if (!fl && !ll && mm->layers % ((long)c->pp * c->vpp))
        return 0;
    for (int s = 0; s < c->pp && s < 3; s++) {
        int n = sb_mt_stage_count(mm, c, s == 2 ? c->pp - 1 : s);
        if (n == 0 || n % c->vpp)
            return 0;
    }
    return 1;
}

/* The stage layout of c: every stage a whole number of layers that VPP divides
 * (Megatron-Core's rule for --decoder-first/last-pipeline-num-layers) */
static int check_stages(const sb_mt_model *mm, const sb_mt_config *c, sb_error *err)
{
    if (stages_ok(mm, c)) /* the same rules; below, which one fails and why */
        return 0;
    int fl = c->first_layers, ll = c->last_layers;
    if (fl < 0 || ll < 0)
        return sb_fail(err, SB_EXIT_INPUT, "a stage's layers (%d, %d) must be at least 1", fl, ll);
    if ((fl || ll) && c->pp < 2)
        return sb_fail(err, SB_EXIT_INPUT,
                       "--first-stage-layers and --last-stage-layers need --pp of at least 2");
    if (!fl && !ll) {
        if (c->vpp > 1 && mm->layers % ((long)c->pp * c->vpp))
            return sb_fail(err, SB_EXIT_INPUT, "--pp %d x --vpp %d does not divide the %ld layers",
                           c->pp, c->vpp, mm->layers);
        if (mm->layers % c->pp)
            return sb_fail(err, SB_EXIT_INPUT,
                           "--pp %d does not divide the %ld layers: give the first and last "
                           "stages' (--first-stage-layers, --last-stage-layers; Megatron-LM "
                           "asserts the rest divide evenly)",
                           c->pp, mm->layers);
        return 0;
    }
    if ((long)fl + ll >= mm->layers && !(c->pp == 2 && fl && ll))
        return sb_fail(err, SB_EXIT_INPUT,
                       "--first-stage-layers %d and --last-stage-layers %d leave none of the %ld "
                       "layers to the other %d stages", fl, ll, mm->layers,
                       c->pp - (fl > 0) - (ll > 0));
    if (c->pp == 2 && fl && ll && (long)fl + ll != mm->layers)
        return sb_fail(err, SB_EXIT_INPUT,
                       "--first-stage-layers %d + --last-stage-layers %d is not the %ld layers "
                       "of --pp 2", fl, ll, mm->layers);
    for (int s = 0; s < c->pp && s < 3; s++) { /* the middle stages are alike */
        int st = s == 2 ? c->pp - 1 : s, n = sb_mt_stage_count(mm, c, st);
        if (n == 0)
            return sb_fail(err, SB_EXIT_INPUT,
                           "the %ld layers less the first and last stages' (%d, %d) do not split "
                           "evenly over the other %d stages of --pp %d",
                           mm->layers, fl, ll, c->pp - (fl > 0) - (ll > 0), c->pp);
        if (n % c->vpp)
            return sb_fail(err, SB_EXIT_INPUT,
                           "--vpp %d does not divide stage %d's %d layers (Megatron-Core "
                           "asserts it)", c->vpp, st, n);
    }
    return 0;
}

/* The parameters whose Adam state a rank keeps and updates, of `params` on its
 * stage, `ex` of them the experts': all of them, or with the distributed optimizer
 * the dense ones' 1/(DP x CP) and the experts' 1/(DP x CP / EP), Megatron-Core's
 * expert-data-parallel group */
static double optimizer_params(const sb_mt_config *c, double params, double ex)
{
    double q = (double)c->dp * c->cp;
    return c->dist_opt ? (params - ex) / q + ex / (q / c->ep) : params;
}

int sb_mt_vocab_shards(const sb_mt_model *mm, const sb_mt_config *c, int s)
{
    if (c->pp == 1)
        return mm->untie ? 2 : 1;
    return s == 0 || s == c->pp - 1;
}

void sb_mt_stage_mem(const sb_mt_model *mm, const sb_mt_config *c, const sb_mt_layer_cost *L,
                     int s, int layers, sb_mt_stage *o)
{
    sb_prec_bytes pb = sb_precision_bytes(c->precision);
    const double t = c->tp, h = (double)mm->hidden, V = (double)mm->vocab;
    const double T = (double)c->mbs * ((double)mm->seq / c->cp), B = pb.act;
    const long M = mm->global_batch / ((long)c->dp * c->mbs);
    /* Megatron-Core's gradient buffer is in the reduction's word (fp32 unless
     * --grad-reduce-dtype says otherwise: grad_reduce_in_fp32 off keeps it bf16) */
    const double gw = grad_word(c);
    /* the vocab shards: the embedding's (stage 0) and the output layer's (the last),
     * one matrix where a single stage holds a tied pair */
    double params = layers * L->params + sb_mt_vocab_shards(mm, c, s) * V * h / t;
    /* activations in flight at the stage's peak, in layers' worth of one micro-batch */
    double units, per_unit = (double)layers / c->vpp;
    if (c->pp == 1)
        units = 1.0;
    else if (c->vpp == 1)
        units = fmin((double)M, (double)(c->pp - s));
    else
        units = fmin((double)M * c->vpp, 2.0 * (c->pp - s - 1) + (c->vpp - 1.0) * c->pp + 1.0);
    o->inflight = units / c->vpp;
    o->mem_weights = params * pb.weight;
    o->mem_grads = params * gw;
    o->mem_optimizer = optimizer_params(c, params, layers * L->expert_params) * pb.adam;
    /* the last stage also keeps the fp32 logits and their gradient of one micro-batch */
    o->mem_activations = units * per_unit * L->act_bytes +
                         (s == c->pp - 1 ? T * V / t * 4.0 * 2.0 : 0.0);
    /* buffers: the TP all-gather of a layer's input and the backward's transient
     * full-width tensors (4 of T x h), and 1 GiB of CUDA context, cuBLAS and NCCL buffers */
    o->mem_buffers = 4.0 * T * h * B + 1073741824.0;
    o->mem_total = o->mem_weights + o->mem_grads + o->mem_optimizer + o->mem_activations +
                   o->mem_buffers;
}

/* Adds to *rs and *ag the data-parallel sync of n parameters over q ranks:
 * their gradients all-reduced in the gradient word, or with the distributed
 * optimizer reduce-scattered, then the updated weights all-gathered */
static void dp_sync(const sb_mt_config *c, const sb_gpu *g, double n, double q, int inter,
                    double *rs, double *ag)
{
    double gw = grad_word(c);
    if (!c->dist_opt) {
        *rs += sb_gpu_allreduce_s(g, n * gw, q, inter);
        return;
    }
    *rs += sb_gpu_gather_s(g, n * gw, q, inter);
    *ag += sb_gpu_gather_s(g, n * sb_precision_bytes(c->precision).weight, q, inter);
}

/* Stage s holding n layers: one micro-batch's forward and backward compute
 * (its layers, the embedding on stage 0, the head on the last) and its
 * intra-layer collectives (TP's, CP's K/V ring, EP's all-to-all, the head's) */
static void stage_mb(const sb_mt_config *c, const sb_mt_layer_cost *L, const sb_mt_ends *E, int s,
                     int n, double *comp, double *tp)
{
    int head = s == c->pp - 1, emb = s == 0;
    double ends = head && emb ? E->head_f + E->head_b + E->emb_f + E->emb_b
                  : head      ? E->head_f + E->head_b
                  : emb       ? E->emb_f + E->emb_b
                              : 0.0;
    *comp = n * (L->fwd_s + L->bwd_s + L->recomp_s) + ends;
    *tp = n * (L->tp_fwd_s + L->tp_bwd_s + L->cp_s + L->ep_s) + (head ? E->head_tp : 0.0);
}

/* The slowest stage *s of c (the last on a tie; else the first, or stage 1 for the
 * middle ones, all alike): its layers *n and one micro-batch's compute and
 * intra-layer collectives (stage_mb) */
static void slowest_stage(const sb_mt_model *mm, const sb_mt_config *c, const sb_mt_layer_cost *L,
                          const sb_mt_ends *E, int *s, int *n, double *comp, double *tp)
{
    int ks[3] = {c->pp - 1, 0, 1}, nk = c->pp > 2 ? 3 : c->pp > 1 ? 2 : 1;
    *s = ks[0], *n = sb_mt_stage_count(mm, c, ks[0]);
    stage_mb(c, L, E, *s, *n, comp, tp);
    for (int i = 1; i < nk; i++) {
        int ni = sb_mt_stage_count(mm, c, ks[i]);
        double cm, tm;
        stage_mb(c, L, E, ks[i], ni, &cm, &tm);
        if (cm + tm > *comp + *tp)
            *s = ks[i], *n = ni, *comp = cm, *tp = tm;
    }
}

/* sb_mt_price of c from its layer's and ends' figures (the grid shares them
 * between the stage layouts it tries) */
static void price_with(const sb_mt_model *mm, const sb_mt_config *c, const sb_gpu *g,
                       const sb_mt_layer_cost *Lp, const sb_mt_ends *E, sb_mt_result *r)
{
    memset(r, 0, sizeof *r);
    const sb_mt_layer_cost L = *Lp;
    sb_prec_bytes pb = sb_precision_bytes(c->precision);
    const double t = c->tp, h = (double)mm->hidden, V = (double)mm->vocab;
    const long M = mm->global_batch / ((long)c->dp * c->mbs);
    /* the stages that differ: the last (the head), the first (the embedding), stage 1
     * for the middle ones (all alike, stage 1 the most in flight) */
    int ks[3] = {c->pp - 1, 0, 1}, nk = c->pp > 2 ? 3 : c->pp > 1 ? 2 : 1;
    /* per micro-batch on the slowest stage */
    int slow, n_slow;
    double comp_mb, tp_mb;
    slowest_stage(mm, c, &L, E, &slow, &n_slow, &comp_mb, &tp_mb);
    int head = slow == c->pp - 1;
    double pp_mb = E->pp_mb;
    double mb = comp_mb + tp_mb; /* a micro-batch's time on the slowest stage */
    r->compute_s = M * comp_mb;
    /* of it: the GEMMs and the attention core (a full recomputation repeats the
     * forward's, a selective one the attention's); the rest memory-bound */
    double rc_gemm = c->recompute == SB_MT_RC_FULL ? L.gemm_fwd_s : 0.0;
    double rc_attn = c->recompute == SB_MT_RC_NONE ? 0.0 : L.attn_fwd_s;
    r->compute_gemm_s = M * (n_slow * (L.gemm_fwd_s + L.gemm_bwd_s + rc_gemm) +
                             (head ? E->head_gemm_f + E->head_gemm_b : 0.0));
    r->compute_attention_s = M * n_slow * (L.attn_fwd_s + L.attn_bwd_s + rc_attn);
    r->compute_memory_s = r->compute_s - r->compute_gemm_s - r->compute_attention_s;
    r->tp_comm_s = M * tp_mb;
    r->pp_comm_s = M * pp_mb;
    r->bubble_s = c->pp > 1 ? (c->pp - 1.0) / c->vpp * (mb + pp_mb) : 0.0;
    /* the data-parallel sync and the optimizer of the stage with the most parameters
     * (its layers; the first and last also hold a vocab shard, the one stage of PP 1
     * two where the head is untied); the first on a tie */
    int n_dp = sb_mt_stage_count(mm, c, 0);
    double params = n_dp * L.params + sb_mt_vocab_shards(mm, c, 0) * V * h / t;
    for (int i = 0; i < nk; i++) {
        int n = sb_mt_stage_count(mm, c, ks[i]);
        double p = n * L.params + sb_mt_vocab_shards(mm, c, ks[i]) * V * h / t;
        if (p > params)
            params = p, n_dp = n;
    }
    /* data parallel: gradients reduced in the gradient word (reduce-scatter then all-gather
     * of the bf16/fp16 weights with the distributed optimizer); CP ranks join the reduction */
    double q = (double)c->dp * c->cp;
    /* Megatron's rank order (TP fastest, then CP, DP, PP): a DP group is TP x CP apart */
    int dp_inter = (long)c->tp * c->cp * c->dp > g->node_devices;
    double gw = grad_word(c);
    /* the experts' gradients (Megatron-Core's expert_parallel_buffers) reduce over the
     * expert-data-parallel group, DP x CP / EP ranks (none at EP = DP x CP), spanning
     * nodes as the dense group does (its ranks TP x EP apart) */
    double ex = n_dp * L.expert_params, rs = 0.0, ag = 0.0;
    dp_sync(c, g, params - ex, q, dp_inter, &rs, &ag);
    if (ex > 0 && q / c->ep > 1)
        dp_sync(c, g, ex, q / c->ep, dp_inter, &rs, &ag);
    double dp_s = rs + ag;
    if (c->dp_overlap) { /* (sb_mt_check: a parameter all-gather overlapped only with it) */
        /* the gradients' buckets reduce during the last micro-batch's backward: what it
         * cannot hide, at least the last bucket's share (Megatron's default bucket,
         * max(40 M, 1 M x DP x CP) parameters); the distributed optimizer's parameter all-gather, bucket by bucket,
         * during the next step's first forward (--overlap-param-gather, which Megatron's
         * and NeMo's recipes pair with the gradients'), at least the first bucket's share */
        double share = fmin(1.0, fmax(4e7, 1e6 * q) / params); /* max(40 M, 1 M x DP x CP) */
        dp_s = fmax(rs - n_dp * (L.bwd_s + L.recomp_s), rs * share) +
               (sb_mt_param_overlap(c) ? fmax(ag - n_dp * L.fwd_s, ag * share) : ag);
    }
    /* a tied head at PP > 1: the first stage's embedding and the last's copy have
     * their gradients all-reduced after the backward (Megatron-LM's embedding group,
     * the two ranks PP - 1 stages apart), exposed */
    if (c->pp > 1 && !mm->untie)
        dp_s += sb_gpu_allreduce_s(g, V * h / t * gw, 2.0,
                                   (long)c->tp * c->cp * c->dp * c->pp > g->node_devices);
    r->dp_comm_s = dp_s;
    /* optimizer: Adam over the rank's parameters (its 1/q slice with the distributed
     * optimizer): fp32 master, two moments read and written, the gradient read twice
     * (norm and update), the model copy written */
    double upd = optimizer_params(c, params, ex) * (24.0 + 2.0 * gw + pb.weight);
    r->optimizer_s = sb_gpu_mem_s(g, upd);
    r->step_s = r->compute_s + r->tp_comm_s + r->pp_comm_s + r->bubble_s + r->dp_comm_s + r->optimizer_s;
    /* memory per device: the fullest of the first stage (most in flight, the
     * embedding), the last (the output layer and its fp32 logits) and stage 1 (the
     * middle stages' most in flight); the first on a tie */
    sb_mt_stage pk, o;
    sb_mt_stage_mem(mm, c, &L, 0, sb_mt_stage_count(mm, c, 0), &pk);
    for (int i = 0; i < nk; i++) {
        if (ks[i] == 0)
            continue;
        sb_mt_stage_mem(mm, c, &L, ks[i], sb_mt_stage_count(mm, c, ks[i]), &o);
        if (o.mem_total > pk.mem_total)
            pk = o;
    }
    r->mem_weights = pk.mem_weights, r->mem_grads = pk.mem_grads;
    r->mem_optimizer = pk.mem_optimizer, r->mem_activations = pk.mem_activations;
    r->mem_buffers = pk.mem_buffers, r->mem_total = pk.mem_total;
    double tokens = (double)mm->global_batch * mm->seq;
    r->model_flops = sb_mt_model_flops(mm);
    double P = (double)c->tp * c->pp * c->dp * c->cp;
    r->tokens_per_s = tokens / r->step_s;
    r->tflops_per_device = r->model_flops / r->step_s / P / 1e12;
    r->mfu = r->tflops_per_device / g->peak_tflops;
}

void sb_mt_price(const sb_mt_model *mm, const sb_mt_config *c, const sb_gpu *g, sb_mt_result *r)
{
    sb_mt_layer_cost L;
    sb_mt_layer(mm, c, g, &L);
    sb_mt_ends E;
    sb_mt_ends_of(mm, c, g, &E);
    price_with(mm, c, g, &L, &E, r);
}

/* the divisors of n up to lim, ascending */
static int divisors(long n, long lim, int *out, int max)
{
    int k = 0;
    for (long d = 1; d <= n && d <= lim && k < max; d++)
        if (n % d == 0)
            out[k++] = (int)d;
    return k;
}

/* The degrees fixed in a search, each on its own: what no completion can mend. */
static int check_fixed(const sb_mt_model *mm, const sb_mt_config *f, int P, sb_error *err)
{
    const struct {
        const char *name;
        int v;
    } d[] = {{"--tp", f->tp}, {"--pp", f->pp}, {"--dp", f->dp}, {"--cp", f->cp}};
    long prod = 1;
    for (int i = 0; i < 4; i++) {
        if (d[i].v && P % d[i].v)
            return sb_fail(err, SB_EXIT_INPUT, "%s %d does not divide the %d devices (-p)",
                           d[i].name, d[i].v, P);
        prod *= d[i].v ? d[i].v : 1;
    }
    if (P % prod)
        return sb_fail(err, SB_EXIT_INPUT,
                       "the degrees given (product %ld) do not divide the %d devices (-p)", prod, P);
    if (f->tp && (mm->heads % f->tp || mm->kv_heads % f->tp || sb_mt_ff(mm) % f->tp))
        return sb_fail(err, SB_EXIT_INPUT,
                       "--tp %d does not divide the %ld heads, %ld kv heads and ff %ld", f->tp,
                       mm->heads, mm->kv_heads, sb_mt_ff(mm));
    if (f->cp && (mm->seq % f->cp || (f->cp > 1 && (mm->seq / f->cp) % 2)))
        return sb_fail(err, SB_EXIT_INPUT,
                       "--cp %d does not divide seq %ld into an even number per rank", f->cp,
                       mm->seq);
    if (f->ep > 1 && mm->experts <= 0)
        return sb_fail(err, SB_EXIT_INPUT, "--ep %d: the model has no experts", f->ep);
    if (f->ep > 1 && mm->experts % f->ep)
        return sb_fail(err, SB_EXIT_INPUT, "--ep %d does not divide the %ld experts", f->ep,
                       mm->experts);
    if (mm->experts > 0 && f->tp > 1 && f->sp == 0)
        return moe_needs_sp(f->tp, err);
    if (f->pp && f->pp > mm->layers)
        return sb_fail(err, SB_EXIT_INPUT, "--pp %d is more stages than the %ld layers", f->pp,
                       mm->layers);
    if (f->fused_attention && fused_head_refused(mm, err))
        return -1;
    if ((f->first_layers || f->last_layers) && f->pp == 1)
        return sb_fail(err, SB_EXIT_INPUT,
                       "--first-stage-layers and --last-stage-layers need --pp of at least 2");
    if (f->param_gather == SB_MT_PG_ON && (f->dist_opt == 0 || !f->dp_overlap))
        return sb_fail(err, SB_EXIT_INPUT,
                       "--overlap-param-gather on needs the distributed optimizer (--zero 1) and "
                       "--dp-overlap on (Megatron-LM asserts both)");
    if (f->mbs && mm->global_batch % f->mbs)
        return sb_fail(err, SB_EXIT_INPUT,
                       "--micro-batch-size %d does not divide the batch of %ld sequences", f->mbs,
                       mm->global_batch);
    return 0;
}


/* The stage layouts ({first, last} stage layers; {0, 0}: even) the grid tries
 * on pp x vpp: the one `fixed` gives; else the even one (sb_mt_check refuses it
 * where it does not divide) and uneven ones, in units of vpp layers, with
 * middle stages of m units and ends of m - D .. m + 1 (D: the output layer's
 * GEMMs in layers and 2 more, at most the layers), which cover the ends'
 * balancing against the head and the embedding. Fills out[] up to cap and
 * returns how many there are (a caller with less room asks again). */
static long stage_layouts(const sb_mt_model *mm, const sb_mt_config *fixed, int pp, int vpp,
                          int (*out)[2], long cap)
{
    long k = 0;
#define PUT(F, L) (k < cap ? (out[k][0] = (int)(F), out[k][1] = (int)(L)) : 0, k++)
    if (fixed->first_layers || fixed->last_layers) {
        PUT(fixed->first_layers, fixed->last_layers);
        return k;
    }
    PUT(0, 0);
    if (pp < 2 || mm->layers % vpp)
        return k;
    const long Lu = mm->layers / vpp;
    double D = fmin((double)mm->layers,
                    ceil((double)mm->vocab * mm->hidden / layer_gemm_params(mm)) + 2.0);
    const long Du = ((long)D + vpp - 1) / vpp;
    for (long m = 1; pp == 2 ? m == 1 : (pp - 2) * m < Lu; m++) {
        /* pp 2: two ends of Lu units, about half each */
        long mid = pp == 2 ? Lu / 2 : m, R = Lu - (pp - 2) * (pp == 2 ? 0 : m);
        long lo = mid - Du > 1 ? mid - Du : 1, hi = mid + 1 + (pp == 2 ? Du : 0);
        for (long F = lo > R - hi ? lo : R - hi; F <= hi && F <= R - lo; F++) {
            long Lst = R - F;
            if ((pp > 2 && F == m && Lst == m) || (pp == 2 && F == Lst))
                continue; /* the even one */
            PUT(F * vpp, Lst * vpp);
        }
    }
#undef PUT
    return k;
}

/* A lower bound of c's step: (M + (PP - 1)/VPP) x the slowest stage's micro-batch
 * and sends, as price_with adds them up before the data-parallel sync and the
 * optimizer */
static double slowest_bound(const sb_mt_model *mm, const sb_mt_config *c, const sb_mt_layer_cost *L,
                            const sb_mt_ends *E)
{
    int slow, n;
    double cm, tm;
    slowest_stage(mm, c, L, E, &slow, &n, &cm, &tm);
    double mb = cm + tm;
    const long M = mm->global_batch / ((long)c->dp * c->mbs);
    return (M + (c->pp - 1.0) / c->vpp) * (mb + E->pp_mb);
}

/* The grid's configuration c over the stage layouts `lay` (n of them): prices
 * each valid one from one set of layer and ends figures, keeps the fastest
 * that fits mem_limit in *best, *r, *best_s; returns how many it priced. */
static long try_layouts(const sb_mt_model *mm, sb_mt_config c, const int (*lay)[2], long n, int P,
                        const sb_gpu *g, double mem_limit, sb_mt_config *best, sb_mt_result *r,
                        double *best_s, sb_error *e2)
{
    long priced = 0;
    int have = 0;
    sb_mt_layer_cost L;
    sb_mt_ends E;
    sb_mt_result tmp;
    int checked = 0;
    for (long y = 0; y < n; y++) {
        c.first_layers = lay[y][0], c.last_layers = lay[y][1];
        if (!stages_ok(mm, &c)) {
            if (y == n - 1 && !checked) /* none splits: say why the last does not */
                sb_mt_check(mm, &c, P, e2);
            continue;
        }
        /* the rest of the checks does not depend on the layout: once (a message
         * formatted for each refusal would cost more than the pricing) */
        if (!checked++ && (sb_mt_check(mm, &c, P, e2) || sb_mt_check_gpu(&c, g, e2)))
            return priced;
        if (!have) /* the layout changes neither */
            sb_mt_layer(mm, &c, g, &L), sb_mt_ends_of(mm, &c, g, &E), have = 1;
        priced++;
        /* a bound no layout can beat: the step is at least the slowest stage's micro-
         * batches and bubble (the data-parallel sync and the optimizer add to it) */
        if (*best_s < INFINITY && slowest_bound(mm, &c, &L, &E) * (1.0 - 1e-12) >= *best_s)
            continue;
        price_with(mm, &c, g, &L, &E, &tmp);
        if (mem_limit > 0 && tmp.mem_total > mem_limit)
            continue;
        if (tmp.step_s < *best_s) {
            *best_s = tmp.step_s;
            *best = c;
            *r = tmp;
        }
    }
    return priced;
}

long sb_mt_search(const sb_mt_model *mm, const sb_mt_config *fixed, int P, const sb_gpu *g,
                  double mem_limit, sb_mt_config *best, sb_mt_result *r, sb_error *err)
{
    if (check_fixed(mm, fixed, P, err))
        return -1;
    int tps[64], pps[256], cps[64], eps[64], vps[16], mbs[16];
    /* TP inside a node unless fixed; PP the divisors of P up to the layers (each with
     * its stage layouts, stage_layouts); CP over the sequence */
    int ntp = fixed->tp ? (tps[0] = fixed->tp, 1) : divisors(P, g->node_devices, tps, 64);
    int npp = fixed->pp ? (pps[0] = fixed->pp, 1) : divisors(P, mm->layers, pps, 256);
    int ncp = fixed->cp ? (cps[0] = fixed->cp, 1) : divisors(P, 16, cps, 64);
    int nep = fixed->ep ? (eps[0] = fixed->ep, 1)
                        : (mm->experts > 0 ? divisors(mm->experts, P, eps, 64) : (eps[0] = 1, 1));
    /* a strategy file holds one chunk a stage (file_layout) */
    int nvp = fixed->vpp || fixed->file_layout ? (vps[0] = fixed->vpp ? fixed->vpp : 1, 1)
                                               : divisors(mm->layers, 8, vps, 16);
    int nmb = fixed->mbs ? (mbs[0] = fixed->mbs, 1) : divisors(mm->global_batch, 16, mbs, 16);
    long priced = 0, cap = 256;
    double best_s = INFINITY;
    sb_error e2 = {0};
    int(*lay)[2] = malloc(sizeof *lay * (size_t)cap); /* the stage layouts of a PP x VPP */
    if (!lay)
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    for (int a = 0; a < ntp; a++)
        for (int b = 0; b < npp; b++)
            for (int cc = 0; cc < ncp; cc++) {
                long rest = (long)tps[a] * pps[b] * cps[cc];
                if (P % rest)
                    continue;
                int dp = (int)(P / rest);
                if (fixed->dp && fixed->dp != dp)
                    continue;
                for (int e = 0; e < nep; e++)
                    for (int v = 0; v < nvp; v++) {
                        long nlay = stage_layouts(mm, fixed, pps[b], vps[v], lay, cap);
                        if (nlay > cap) { /* room for them all */
                            int(*more)[2] = realloc(lay, sizeof *lay * (size_t)nlay);
                            if (!more) {
                                free(lay);
                                return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
                            }
                            lay = more, cap = nlay;
                            stage_layouts(mm, fixed, pps[b], vps[v], lay, cap);
                        }
                        for (int m = 0; m < nmb; m++)
                            for (int rc = 0; rc < 3; rc++)
                                for (int sp = 0; sp < 2; sp++)
                                    for (int dop = 0; dop < 2; dop++) {
                                        sb_mt_config c = *fixed;
                                        c.tp = tps[a], c.pp = pps[b], c.cp = cps[cc], c.dp = dp;
                                        c.ep = eps[e], c.vpp = vps[v], c.mbs = mbs[m];
                                        if (fixed->recompute >= 0 && rc != fixed->recompute)
                                            continue;
                                        if (fixed->sp >= 0 && sp != fixed->sp)
                                            continue;
                                        if (fixed->dist_opt >= 0 && dop != fixed->dist_opt)
                                            continue;
                                        c.recompute = rc, c.sp = sp, c.dist_opt = dop;
                                        if (fixed->file_layout && c.dp % c.ep)
                                            continue; /* its experts' batch split DP/EP ways */
                                        /* a file's moe_gate splits its batch alone,
                                         * in one micro-batch */
                                        if (fixed->file_layout && mm->experts > 0 &&
                                            (c.ep > 1 || c.cp > 1 || c.sp ||
                                             mm->global_batch != (long)c.dp * c.mbs)) {
                                            sb_fail(&e2, SB_EXIT_INPUT,
                                                    "--save: an MoE model's router splits its "
                                                    "batch alone, in one micro-batch (TP, EP, CP 1, "
                                                    "micro-batch size = batch / DP)");
                                            continue;
                                        }
                                        priced += try_layouts(mm, c, lay, nlay, P, g, mem_limit,
                                                              best, r, &best_s, &e2);
                                    }
                    }
            }
    free(lay);
    if (!(best_s < INFINITY)) {
        if (!priced)
            return sb_fail(err, SB_EXIT_INPUT,
                           "--algo megatron: no valid configuration on %d devices (the last "
                           "refused: %s)",
                           P, e2.msg[0] ? e2.msg : "none tried");
        return sb_fail(err, SB_EXIT_INPUT,
                       "--algo megatron: none of the %ld valid configurations on %d devices fits "
                       "%.2f GiB per device (--memory)",
                       priced, P, mem_limit / 1073741824.0);
    }
    return priced;
}

void sb_mt_config_free(sb_mt_config *c)
{
    memset(c, 0, sizeof *c);
    c->recompute = c->sp = c->dist_opt = -1;
    c->dp_overlap = c->fused_attention = 1;
}
