/* shardbench/onnx.h: ONNX import. Turns an ONNX model file (protobuf, read
 * with protobuf-c bindings generated from onnx.proto) into the text of an
 * equivalent model file (models/README.md), which sb_model_parse then reads:
 * the model format stays the one source of truth for the graph IR.
 *
 * What is mapped, fused and refused: models/README.md, "ONNX import". A
 * symbolic dimension becomes a `param` (the batch one is `batch`, default
 * 1); weights are only read for their shapes; pointwise chains fuse into
 * their producer's `pw`. Anything the format cannot express fails with one
 * error (SB_EXIT_INPUT) listing every offending node. */
#ifndef SHARDBENCH_ONNX_H
#define SHARDBENCH_ONNX_H

#include "shardbench/model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* --rename OLD=NEW: a dim name of the imported model replaced. */
typedef struct {
    char from[SB_NAME_MAX];
    char to[SB_NAME_MAX];
} sb_rename;

typedef struct {
    const sb_rename *renames;
    int nrenames;
    /* Settings (--set) whose name is a param of the import (batch, other
     * symbolic dims) become that param's default in the text. Others are
     * ignored here (sb_model_parse checks them). */
    const sb_setting *settings;
    int nsettings;
    int no_loss;   /* 1: do not end the graph with softmax_xent */
    /* --dim NAME=N: the dynamic axis NAME (its dim_param, or the param the
     * import makes of it: batch, seq, ...) fixed at N, as if exported
     * static; for what needs an axis as a number (a constant table cut to
     * it). An axis the export does not have is an error. */
    const sb_setting *dims;
    int ndims;
} sb_onnx_opts;

/* How each dim name of the imported model came about. */
enum { SB_ONNX_DIM_RECOGNISED = 0, SB_ONNX_DIM_GENERATED, SB_ONNX_DIM_RENAMED };

typedef struct {
    char name[SB_NAME_MAX];
    int how;             /* SB_ONNX_DIM_* */
} sb_onnx_dim;

typedef struct {
    int64_t ir_version, opset;
    char producer[128];
    int nnodes;          /* ONNX nodes in the graph */
    int nfolded;         /* nodes folded to constants or weights */
    int nfused;          /* pointwise nodes fused into a producer's pw */
    int napprox;         /* of those (and of the elementwise ops made for them), the
                            nodes a pw only prices: a bias, a constant scale or a
                            learned position added; the runtime applies ReLU for a
                            pw, so they are not computed as in the export */
    int nviews;          /* transposes/squeezes/identities that needed no op */
    int ndims;
    sb_onnx_dim dims[64];
} sb_onnx_info;

/* Converts the ONNX bytes to model-file text (malloc'd, NUL-terminated,
 * *len without the NUL). path names the file in messages. info may be NULL.
 * Returns 0, or -1 with err: SB_EXIT_INPUT for a file that is not ONNX, is
 * truncated, or uses what the model format cannot express. */
int sb_onnx_to_text(const void *data, size_t size, const char *path, const sb_onnx_opts *opts,
                    char **text, size_t *len, sb_onnx_info *info, sb_error *err);

/* Reads an .onnx file and parses the converted text into a model
 * (sb_model_parse with the given settings; the model's path is `path`). */
int sb_onnx_load(const char *path, const sb_onnx_opts *opts, const sb_setting *settings,
                 int nsettings, sb_model *out, sb_onnx_info *info, sb_error *err);

/* Reads a whole file (at most 2 GiB); error names the file. */
int sb_onnx_read_file(const char *path, char **data, size_t *size, sb_error *err);

/* 1 when the path ends in ".onnx" (any case). */
int sb_onnx_is_path(const char *path);

#ifdef __cplusplus
}
#endif
#endif
