/* shardbench/hf.h: Hugging Face `config.json` reader. Turns the config of a
 * decoder LLM (Llama, Mistral, Mixtral, Qwen2/3, Qwen2/3-MoE, Gemma 2,
 * Phi-3, DeepSeek-V2/V3, GPT-NeoX, GPT-2) into the text of a model file
 * (docs/model-format.md), which sb_model_parse then reads: the model format
 * stays the one source of truth for the graph. `-m hf:PATH` (a config.json
 * or a folder holding one) loads through here wherever a model is named.
 *
 * Sizes become params named by their config keys (hidden_size, n_embd, ...)
 * plus `batch` and `seq`, so `--set` takes the Hugging Face names. What is
 * read, approximated and refused: docs/models.md, "Hugging Face configs". */
#ifndef SHARDBENCH_HF_H
#define SHARDBENCH_HF_H

#include "shardbench/model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What the reader did besides building the graph (each a "; "-joined list,
 * empty when none). */
typedef struct {
    char arch[96];         /* the architecture read (`architectures[0]`) */
    char config[1024];     /* the config.json read */
    char approx[2048];     /* "key=value: what the model does instead, effect" */
    char ignored[2048];    /* keys present but not read */
    char defaults[256];    /* "seq=8192, batch=512 (4194304 tokens)" */
    uint64_t settings_read; /* bit i: settings[i] (i < 64) named a key the reader read */
    char grid_why[200];    /* why --algo megatron cannot price it as it is ("" when it can) */
    int qk_norm, qkv_bias; /* Qwen3's QK norms, Qwen2's QKV biases (the grid prices them) */
} sb_hf_info;

/* 1 when name is "hf:PATH". */
int sb_hf_is_path(const char *name);

/* Reads PATH (config.json or a folder holding one) and writes model text
 * (malloc'd, NUL-terminated, *len without the NUL). Settings whose name is a
 * config key, `seq` or `batch` give those values (the text's defaults);
 * unknown names are left to sb_model_parse. info may be NULL. Returns 0,
 * or -1 with err (SB_EXIT_INPUT naming the file and the key). */
int sb_hf_to_text(const char *path, const sb_setting *settings, int nsettings, char **text,
                  size_t *len, sb_hf_info *info, sb_error *err);

/* sb_model_parse of the text sb_hf_to_text made, with the settings that
 * are params of the text or that the reader did not read (those name the
 * unknown ones). */
int sb_hf_parse_text(const char *text, size_t len, const sb_hf_info *info,
                     const sb_setting *settings, int nsettings, sb_model *out, sb_error *err);

/* sb_hf_to_text then sb_hf_parse_text. The notes (defaults, approximations,
 * ignored keys) go to stderr once per process and path unless quiet. */
int sb_hf_load(const char *path, const sb_setting *settings, int nsettings, sb_model *out,
               sb_hf_info *info, sb_error *err);

/* Parses a config held in memory (the fuzz target): path is used in
 * messages only. */
int sb_hf_text_from_json(const char *json, size_t n, const char *path,
                         const sb_setting *settings, int nsettings, char **text, size_t *len,
                         sb_hf_info *info, sb_error *err);

#ifdef __cplusplus
}
#endif
#endif
