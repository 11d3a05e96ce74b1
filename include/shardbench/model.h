/* shardbench/model.h: the model graph (ops with named iteration spaces) and
 * the model-file parser. See models/README.md for the file format.
 *
 * A model is a list of ops in topological order and a list of tensors. Each
 * op has an iteration space: a list of named dimensions with sizes. Each
 * operand (input or output tensor of an op) says, per tensor dimension, which
 * iteration dimension it follows, so a config of the op (one split count per
 * iteration dimension) induces a layout of every operand. */
#ifndef SHARDBENCH_MODEL_H
#define SHARDBENCH_MODEL_H

#include "shardbench/common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SB_MAX_DIMS 8   /* dims of an iteration space or a tensor */
#define SB_MAX_IO 16    /* inputs or outputs of one op */
#define SB_NAME_MAX 96

/* Every op kind, once: X(KIND, id) for SB_OP_KIND and the identifier each
 * stage names the kind's entry after (sb_search_<id>, ...). A stage builds
 * its per-kind table from this list, so a kind added here without a stage's
 * entry does not link. Notes: norm is layer norm over `axis` (batchnorm is
 * norm with per-channel statistics); elementwise is add and other
 * elementwise ops with `pw` fused pointwise ops; flatten is multi-dim -> 1-D
 * (the prototype's Ravel), unflatten 1-D -> multi-dim (Unravel); rmsnorm
 * is Llama's RMS norm over `axis`; rope is the rotary position embedding
 * of Llama ("rotate half") over the head dim `axis`; act is a unary
 * activation (`fn`), mul an elementwise product whose second input may
 * broadcast, expand a broadcast to a larger shape (family "pointwise");
 * moe_gate is the top-k router of a mixture of experts (GShard-style dense
 * combine and dispatch tensors); softcap is Gemma 2's logit soft-capping
 * y = cap·tanh(x/cap) (family "pointwise"). */
#define SB_OP_KINDS(X)                                                                              \
    X(CONV, conv) X(POOL, pool) X(DENSE, dense) X(EINSUM, einsum) X(EMBEDDING, embedding)          \
    X(LSTM, lstm) X(NORM, norm) X(SOFTMAX, softmax) X(SOFTMAX_XENT, softmax_xent)                  \
    X(ELEMENTWISE, elementwise) X(REDUCE_MEAN, reduce_mean) X(CONCAT, concat) X(SPLIT, split)       \
    X(STACK, stack) X(UNSTACK, unstack) X(FLATTEN, flatten) X(UNFLATTEN, unflatten)                \
    X(TRANSPOSE, transpose) X(RMSNORM, rmsnorm) X(ROPE, rope) X(ACT, act) X(MUL, mul)          \
    X(EXPAND, expand) X(MOE_GATE, moe_gate) X(SOFTCAP, softcap)

typedef enum {
#define SB_OP_ENUM_(K, id) SB_OP_##K,
    SB_OP_KINDS(SB_OP_ENUM_)
#undef SB_OP_ENUM_
    SB_OP_KIND_COUNT
} sb_op_kind;

/* Name of an op kind as written in model files ("conv", "dense", ...). */
const char *sb_op_kind_name(sb_op_kind k);

/* The functions of act (sb_op.fn), in one list: X(ENUM, name as written). */
#define SB_ACT_FNS(X)                                                                              \
    X(RELU, relu) X(RELU6, relu6) X(SILU, silu) X(GELU, gelu) X(GELU_TANH, gelu_tanh)              \
    X(SIGMOID, sigmoid) X(TANH, tanh)

typedef enum {
#define SB_ACT_ENUM_(E, name) SB_ACT_##E,
    SB_ACT_FNS(SB_ACT_ENUM_)
#undef SB_ACT_ENUM_
    SB_ACT_FN_COUNT
} sb_act_fn;

/* Name of an act function ("silu"), or "?" out of range. */
const char *sb_act_fn_name(int fn);
/* The function named `name` (its first n chars), or -1. */
int sb_act_fn_lookup(const char *name, size_t n);

typedef struct {
    char name[SB_NAME_MAX];
    int64_t size;
} sb_dim;

typedef enum {
    SB_TENSOR_ACTIVATION = 0, /* produced by an op */
    SB_TENSOR_INPUT,          /* data fed to the model (images, tokens) */
    SB_TENSOR_WEIGHT,         /* trained parameter declared in the file */
} sb_tensor_kind;

typedef struct {
    char name[SB_NAME_MAX];
    sb_tensor_kind kind;
    int ndims;
    sb_dim dims[SB_MAX_DIMS];
    int producer;      /* op index, or -1 for inputs and weights */
    int producer_slot; /* output slot of the producer */
    /* 1 in the search's stage sub-models (search/pipeline.c) for an input
     * an earlier pipeline stage produced: the runtime receives it once per
     * micro-batch and keeps it for a recomputed consumer (memory.c); 0 in
     * every model a file gives */
    int stage_input;
} sb_tensor;

/* How a tensor dim takes its split count from an op config. */
#define SB_MAP_ONE (-1) /* never split under this op */
#define SB_MAP_ALL (-2) /* flat side of flatten/unflatten: product of config */

typedef struct {
    int tensor;              /* index into sb_model.tensors */
    int map[SB_MAX_DIMS];    /* per tensor dim: iteration dim, or SB_MAP_* */
} sb_operand;

/* Roles of iteration dims of GEMM-like ops (conv, dense, einsum, embedding). */
enum { SB_ROLE_NONE = 0, SB_ROLE_BATCH, SB_ROLE_M, SB_ROLE_N, SB_ROLE_K };

/* A trained tensor that an op owns (conv filter, dense matrix, embedding
 * table, norm scale and shift, LSTM matrices): the op builder fills these
 * once; the runtime declares them, the memory model counts them and export
 * prints them. Weights declared in the file (`weight w[...]`) are inputs of
 * the op instead. */
#define SB_MAX_OP_WEIGHTS 4
typedef struct {
    char suffix[16];              /* appended to the op's name: ".w", ".gamma" */
    int ndims;
    int map[SB_MAX_DIMS];         /* per weight dim: iteration dim or SB_MAP_ONE */
    int64_t size[SB_MAX_DIMS];    /* size of each weight dim */
    double init_scale;            /* initial values: offset + uniform(-scale, scale) */
    double init_offset;
} sb_weight;

typedef struct {
    char name[SB_NAME_MAX];
    sb_op_kind kind;
    int line;                 /* line in the model file that made it */

    int ndims;                /* iteration space */
    sb_dim dims[SB_MAX_DIMS];
    uint32_t nosplit;         /* bit i set: dim i is never split */
    int role[SB_MAX_DIMS];    /* SB_ROLE_* for GEMM-like ops */

    int nin, nout;
    sb_operand in[SB_MAX_IO];   /* data inputs, in slot order */
    sb_operand out[SB_MAX_IO];  /* outputs, in slot order */
    int nweights;
    sb_weight weights[SB_MAX_OP_WEIGHTS]; /* the op's own trained tensors */
    uint32_t stat_dims;       /* iteration dims the op reduces over: norm's
                                 statistics, softmax's axis, reduce_mean's axes,
                                 softmax_xent's classes */

    /* attributes (meaning depends on kind) */
    int pw;                   /* fused pointwise ops */
    int axis;                 /* norm, rmsnorm, softmax, concat, split, stack,
                                 unstack; rope: the head dim */
    int causal;               /* softmax: the iteration dim of the causal
                                 mask's query index (`causal=DIM`): element
                                 (axis index j, causal index i) is masked
                                 when global j > global i; -1: no mask */
    int64_t window;           /* softmax with causal: a key `window` or more
                                 before its query is masked too (sliding-window
                                 attention, Mistral's sliding_window); 0: none */
    int pos_axis;             /* rope: the iteration dim of the positions
                                 (`seq=DIM`); -1 for other kinds */
    double theta;             /* rope: base of the angles (default 10000) */
    uint32_t axes;            /* reduce_mean: bit mask of reduced input dims */
    int kernel[2], stride[2], pad[2]; /* conv, pool */
    int dilation[2];          /* conv: kernel taps this far apart (1: dense) */
    int groups;               /* conv: filter groups (1: plain; > 1: iteration
                                 dim 7 is `group`, dims 1 and 6 per group) */
    int pool_avg;             /* pool: 1 = average, 0 = max */
    int batchnorm;            /* norm: 1 = batch norm (runtime: per-channel
                                 statistics over dims 0, 2, 3; the cost model
                                 uses axis 0 as the prototype does) */
    int layers;               /* lstm */
    int perm[SB_MAX_DIMS];    /* transpose: out dim j = in dim perm[j] */
    int fn;                   /* act: the function (sb_act_fn) */
    int topk;                 /* moe_gate: experts chosen per token (the
                                 capacity is the size of its cap dim, 3) */
    double moe_aux;           /* moe_gate: weight of its load-balancing loss
                                 (0: none) */
    /* Attention priced as one fused kernel (sb_model_fuse_attention; a GPU
     * machine's default): the scores einsum, its softmax and the weighted
     * sum of the values are marked SB_ATTN_*; 0 for every other op and in
     * every model as loaded. The runtime ignores it. */
    int attn;
    /* 1: priced as a GPU training framework runs it (sb_model_gpu_run): its
     * memory as autograd keeps tensors (each once, at its producer; the
     * gradients freed as the backward goes) rather than as the CPU runtime
     * allocates them. 0 in every model as loaded. */
    int gpu_run;
    /* 1 (sb_model_gpu_run): the output layer, the dense or einsum whose
     * output the loss (softmax_xent) reads, directly or through ops of one
     * input and no weight (a softcap): Megatron-LM runs it as its own
     * linear, not a Transformer Engine one, so in bf16 under fp8 */
    int feeds_loss;
    /* 1 (sb_model_gpu_run): a mixture of experts' router, the dense or
     * einsum whose output a moe_gate reads: a plain linear, bf16 under fp8 */
    int routes;
    /* (sb_model_gpu_run) how the fp8 recipe converts the activation input of
     * an fp8 linear (sb_op_fp8_linear): SB_FP8_IN_CAST, it casts and
     * transposes it itself (and 0 for every op that is no fp8 linear);
     * SB_FP8_IN_SHARED, the linear before it in op order, reading the same
     * tensor, did (one Transformer Engine module: QKV, gate and up);
     * SB_FP8_IN_NORM, the norm that writes it wrote the fp8 copy
     * (LayerNormLinear), the linear transposes it. */
    int fp8_in;
    /* (sb_model_gpu_run) layer norm, rmsnorm: 1 when one module of fp8 linears
     * (a run, above) alone reads its output, so under fp8 it writes their fp8
     * copy in place of its 16-bit output (Transformer Engine's LayerNormLinear). */
    int fp8_out;
    /* A fused norm (fp8_out) and the linear it feeds (SB_FP8_IN_NORM): ops
     * from it to the module's last linear, so that a pipeline stage that ends
     * inside the module undoes the fusion (search/pipe_models.c); else 0. */
    int fp8_span;
    int attn_slot;            /* SB_ATTN_VALUES: the input slot of the softmax's output */
    double attn_frac;         /* the fraction of (query, key) pairs the mask keeps */
    double cap;               /* softcap: c of y = c·tanh(x/c) (> 0) */
} sb_op;

enum { SB_ATTN_NONE = 0, SB_ATTN_SCORES, SB_ATTN_SOFTMAX, SB_ATTN_VALUES };
enum { SB_FP8_IN_CAST = 0, SB_FP8_IN_SHARED, SB_FP8_IN_NORM };

typedef struct {
    char name[SB_NAME_MAX];
    int64_t value;
} sb_param;

typedef struct {
    char name[SB_NAME_MAX];   /* from the `model` line, else the file name */
    char path[512];           /* file it came from */
    int cutoff;               /* minimum shard size for config enumeration */
    int nparams;
    sb_param *params;
    int approx_ops;           /* ONNX import: nodes only priced, not computed as in
                                 the export (sb_onnx_info.napprox); 0 for model files */
    int nops;
    sb_op *ops;
    int ntensors;
    sb_tensor *tensors;
    /* `tie W = E` (model-format.md): declared weight tensors that hold
     * another weight of the model, the table of embedding op tied_to[i]
     * transposed (a tied output head). sb_model_param_count counts each
     * once; the graph still trains and stores W as its own weight. */
    int ntied;
    int tied[4];
    int tied_to[4];
    /* A Hugging Face config (hf:PATH): its architecture, and why --algo
     * megatron's per-layer model cannot price it as it is ("" when it can;
     * sb_hf_info.grid_why). Empty for model files and ONNX imports. */
    char hf_arch[96];
    char grid_why[200];
    /* what the per-layer model prices of it beyond its params: QK norms (Qwen3),
     * biases on Q, K and V (Qwen2) */
    int hf_qk_norm, hf_qkv_bias;
} sb_model;

/* Trained values of the model as the framework counts them: every op's own
 * weights and every declared weight, tied weights once. *active (may be
 * NULL): the values one token uses, a weight with the expert dim of a
 * moe_gate (size E, top-k) counted k/E of it, except the router's. */
int64_t sb_model_param_count(const sb_model *m, int64_t *active);
/* 1 when op trains a weight: its own (sb_op.weights) or an input declared
 * `weight` in the model file. models/params.c. */
int sb_op_trains_weight(const sb_model *m, const sb_op *op);
/* 1 when op runs in fp8 under the fp8 recipe, as a Transformer Engine linear:
 * a dense or einsum that trains a weight, not the output layer (feeds_loss)
 * nor a router (routes); convs, attention products and the rest stay bf16.
 * models/gpu_run.c. */
int sb_op_fp8_linear(const sb_model *m, const sb_op *op);
/* The activation input (a tensor) of an fp8 linear (its first input that is
 * no weight), or -1 for any other op. models/gpu_run.c. */
int sb_op_fp8_input(const sb_model *m, const sb_op *op);

/* Marks each attention of m that one fused kernel (FlashAttention-style)
 * computes: a softmax (causal or not) whose input is an einsum of two
 * activations (the scores q.k) read by it alone (or through a softcap
 * read by it alone) and whose output one einsum alone reads with another
 * activation (the values). The three (four) ops get
 * SB_ATTN_* and the fraction of pairs the mask keeps; the cost and memory
 * models then price no S x S tensor (cost/ops/gemm.c, softmax.c). Returns
 * the number marked, or -1 (err) when out of memory. models/gpu_run.c. */
int sb_model_fuse_attention(sb_model *m, sb_error *err);
/* m priced as a GPU training framework runs it: every op's gpu_run set,
 * each loss's output layer marked feeds_loss, the fp8 recipe's conversions
 * of each linear's input marked (fp8_in, fp8_out), and with
 * fuse its attentions fused (sb_model_fuse_attention). 0, or -1 (err).
 * models/gpu_run.c. */
int sb_model_gpu_run(sb_model *m, int fuse, sb_error *err);
/* The attentions of m marked fused (their softmaxes). */
int sb_model_fused_attentions(const sb_model *m);

/* An override `name=value` from the command line (--set). */
typedef struct {
    char name[SB_NAME_MAX];
    int64_t value;
} sb_setting;

/* Parses a model from text. `path` is used in messages only. Settings
 * override the file's `param` defaults; an unknown name is an error.
 * Returns 0, or -1 with err set (code SB_EXIT_INPUT for any fault of the
 * text: message "path:line:col: ..."). */
int sb_model_parse(const char *text, size_t len, const char *path,
                   const sb_setting *settings, int nsettings,
                   sb_model *out, sb_error *err);

/* Loads a model by shipped name ("alexnet") or by file path. Shipped models
 * are looked up in $SHARDBENCH_MODELS, then the build's models/ folder, then
 * the installed data folder. */
int sb_model_load(const char *name_or_path, const sb_setting *settings,
                  int nsettings, sb_model *out, sb_error *err);

/* Parses "k=v" into a setting. */
int sb_setting_parse(const char *arg, sb_setting *out, sb_error *err);

/* Names of the shipped models: the *.model files of $SHARDBENCH_MODELS, the
 * source tree's models/ and the installed folder (sb_shipped_names; free
 * with sb_names_free). */
char **sb_shipped_models(void);

void sb_model_free(sb_model *m);

/* Number of edges: one per (tensor, consumer input slot) whose tensor has a
 * producer op. */
typedef struct {
    int src, src_slot;  /* producer op and its output slot */
    int dst, dst_slot;  /* consumer op and its input slot */
    int tensor;
} sb_edge;

/* Builds the edge list of a model (caller frees *edges). */
int sb_model_edges(const sb_model *m, sb_edge **edges, int *nedges,
                   sb_error *err);

/* Writes "batch=128,channels=3,..." style text of an op's iteration space. */
void sb_op_dims_str(const sb_op *op, char *buf, size_t n);

#ifdef __cplusplus
}
#endif
#endif
