/* hf_int.h: the Hugging Face reader's internals (models/hf/): the config as
 * read (hf_cfg, filled by arch.c through the checked getters of read.c)
 * and the text writer (emit.c). */
#ifndef SB_MODELS_HF_INT_H
#define SB_MODELS_HF_INT_H

#include "shardbench/hf.h"

#include <jansson.h>
#include <stdint.h>

#define HF_MAX_KEYS 256
#define HF_MAX_LAYERS 1024

/* The reader: the parsed object, the keys read so far (the rest are listed
 * as ignored), the notes. */
typedef struct {
    json_t *root;
    const char *path;
    const char *used[HF_MAX_KEYS];
    int nused;
    const sb_setting *settings;
    int nsettings;
    sb_hf_info *info;
    sb_error *err;
} hf_reader;

/* Checked getters: absent or null gives the default (or, with required, an
 * error naming the key); a value of the wrong type or out of range is an
 * error naming the key and the value. Each marks the key read. */
int hf_int(hf_reader *R, const char *key, int required, int64_t def, int64_t min, int64_t *out);
int hf_real(hf_reader *R, const char *key, double def, double *out);
int hf_bool(hf_reader *R, const char *key, int def, int *out);
int hf_str(hf_reader *R, const char *key, const char *def, const char **out);
/* name, or the key it stands for (GPT-2's n_embd for hidden_size; keys.c). */
const char *hf_alias_of(const char *name);
json_t *hf_get(hf_reader *R, const char *key); /* marks it; NULL when absent or null */
int hf_fail(hf_reader *R, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void hf_note(char *list, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A --set value for name, or def. */
int64_t hf_setting(hf_reader *R, const char *name, int64_t def);

enum { HF_NORM_RMS = 0, HF_NORM_LAYER };
enum { HF_MLP_SWIGLU = 0, HF_MLP_GEGLU, HF_MLP_GELU, HF_MLP_GELU_TANH };
enum { HF_SHARED_NONE = 0, HF_SHARED_PLAIN, HF_SHARED_GATED };

/* Param names: the config's keys for the sizes (GPT-2 names them n_embd,
 * ...), so that --set takes them. */
typedef struct {
    const char *vocab, *hidden, *layers, *heads, *kv_heads, *ff, *head_dim;
    const char *experts, *topk, *moe_ff; /* mixtures of experts */
    const char *shared;      /* the shared experts' width or count */
} hf_keys;

typedef struct {
    hf_keys k;
    int64_t vocab, hidden, layers, heads, kv_heads, ff, head_dim, max_pos;
    int head_dim_given;      /* head_dim is a config key (else hidden / heads) */
    int64_t seq, batch;      /* defaults (or --set) */
    int64_t theta;           /* rope base; 0: learned absolute positions (GPT-2) */
    int64_t rotary_dim;      /* < head_dim: partial rotary (GPT-NeoX) */
    int norm;                /* HF_NORM_* */
    int mlp;                 /* HF_MLP_* */
    int qkv_bias, o_bias, mlp_bias;
    int qk_norm;             /* Qwen3: rmsnorm on each head's q and k */
    int parallel_residual;   /* GPT-NeoX: x + attn(ln1(x)) + mlp(ln2(x)) */
    int sandwich;            /* Gemma 2: norms after attention and MLP too */
    int tie;                 /* output head tied to the token embedding */
    int64_t window;          /* sliding_window (0: none): keys that far before a query masked */
    int window_alt;          /* Gemma 2: the window on layers 0, 2, 4, ... only */
    int64_t attn_cap;        /* Gemma 2: attention logits cap·tanh(x/cap) (0: none) */
    int64_t final_cap;       /* Gemma 2: the head's logits capped so (0: none) */
    /* mixture of experts */
    int64_t experts, topk, moe_ff, first_dense, dense_ff;
    int64_t layer_freq;      /* decoder_sparse_step (Qwen), moe_layer_freq (DeepSeek) */
    int shared;              /* HF_SHARED_* */
    int64_t shared_ff;       /* their width (DeepSeek: count x moe_ff) */
    int64_t shared_n;        /* DeepSeek: n_shared_experts */
    /* multi-head latent attention (DeepSeek) */
    int mla;
    int64_t q_lora, kv_lora, qk_nope, qk_rope, v_dim;
    unsigned char sparse[HF_MAX_LAYERS]; /* layer i has the mixture */
} hf_cfg;

/* Fills c from the config (arch.c): the architecture's keys, defaults and
 * checks. */
int hf_read_cfg(hf_reader *R, hf_cfg *c);

/* Why --algo megatron cannot price c as it is, or "" (arch.c). */
void hf_grid_why(const hf_cfg *c, const char *cls, char *why, size_t cap);

/* Writes the model text for c (emit.c). */
int hf_emit(const hf_cfg *c, const char *name, char **text, size_t *len, sb_error *err);

#endif
