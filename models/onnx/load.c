/* onnx/load.c: reading an .onnx file (a regular file only, at most 2 GiB)
 * and parsing its import (include/shardbench/onnx.h). The conversion itself
 * is import.c and its handlers; this file needs no protobuf and builds with
 * or without ONNX support. */
#define _GNU_SOURCE
#include "shardbench/onnx.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../load.h"

#define MAX_ONNX_BYTES ((size_t)2 << 30)

int sb_onnx_is_path(const char *path)
{
    size_t n = path ? strlen(path) : 0;
    return n > 5 && strcasecmp(path + n - 5, ".onnx") == 0;
}

int sb_onnx_read_file(const char *path, char **data, size_t *size, sb_error *err)
{
    return sb_read_file(path, "ONNX file", MAX_ONNX_BYTES, data, size, err);
}

int sb_onnx_load(const char *path, const sb_onnx_opts *opts, const sb_setting *settings,
                 int nsettings, sb_model *out, sb_onnx_info *info, sb_error *err)
{
    memset(out, 0, sizeof *out);
    char *data, *text;
    size_t size, len;
    sb_onnx_opts o = {0};
    if (opts)
        o = *opts;
    if (!o.settings && settings) {
        o.settings = settings;
        o.nsettings = nsettings;
    }
    if (sb_onnx_read_file(path, &data, &size, err))
        return -1;
    sb_onnx_info mine;
    if (!info)
        info = &mine;
    int rc = sb_onnx_to_text(data, size, path, &o, &text, &len, info, err);
    free(data);
    if (rc)
        return -1;
    rc = sb_model_parse(text, len, path, settings, nsettings, out, err);
    if (!rc)
        out->approx_ops = info->napprox;
    if (rc && err && strlen(err->msg) < sizeof err->msg - 80)
        strcat(err->msg, " (in the model text imported from ONNX: `shardbench import` writes it)");
    free(text);
    return rc;
}
