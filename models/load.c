/* load.c: a model by shipped name or by path (sb_model_load), and --set
 * settings. ONNX files go to the importer (onnx/load.c); model text is read
 * by sb_read_file (common.h) and parsed by sb_model_parse (lang.c). */
#define _GNU_SOURCE
#include "load.h"

#include "shardbench/hf.h"
#include "shardbench/onnx.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

const char *const sb_shipped_models[] = {
    "alexnet",   "resnet101",  "inception3", "rnnlm",        "transformer", "transformer-large",
    "llama3-8b", "llama3-70b", "llama2-7b",  "gpt2",         "gpt3-175b",   "mixtral-8x7b",
    "vit-b16",   "mobilenet-v2", "resnext50", NULL,
};

int sb_setting_parse(const char *arg, sb_setting *out, sb_error *err)
{
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg)
        return sb_fail(err, SB_EXIT_INPUT, "--set '%s': expected name=value", arg);
    char *end;
    errno = 0;
    long long v = strtoll(eq + 1, &end, 10);
    if (errno || end == eq + 1 || *end)
        return sb_fail(err, SB_EXIT_INPUT, "--set '%s': value '%s' is not an integer", arg, eq + 1);
    size_t len = (size_t)(eq - arg);
    if (len >= SB_NAME_MAX)
        return sb_fail(err, SB_EXIT_INPUT, "--set '%s': name too long", arg);
    memcpy(out->name, arg, len);
    out->name[len] = '\0';
    out->value = v;
    return 0;
}

int sb_model_load(const char *name, const sb_setting *settings, int nsettings, sb_model *out,
                  sb_error *err)
{
    if (sb_hf_is_path(name)) /* a Hugging Face config.json: model text, then parsed */
        return sb_hf_load(name, settings, nsettings, out, NULL, err);
    char path[1024];
    const char *dirs[3] = {getenv("SHARDBENCH_MODELS"), SB_MODELS_BUILD_DIR, SB_MODELS_INSTALL_DIR};
    if (!sb_find_shipped(name, "model", dirs, 3, path, sizeof path)) {
        struct stat st;
        if (stat(name, &st) == 0 && S_ISDIR(st.st_mode))
            return sb_fail(err, SB_EXIT_INPUT, "%s: is a directory, not a model file", name);
        char list[256];
        sb_join_names(sb_shipped_models, list, sizeof list);
        return sb_fail(err, SB_EXIT_INPUT,
                       "unknown model '%s': not a file, and not a shipped model (%s)", name, list);
    }
    if (sb_onnx_is_path(path)) /* ONNX: converted to model text, then parsed */
        return sb_onnx_load(path, NULL, settings, nsettings, out, NULL, err);
    size_t len;
    char *text;
    if (sb_read_file(path, "model file", MAX_MODEL_BYTES, &text, &len, err))
        return -1;
    int rc = sb_model_parse(text, len, path, settings, nsettings, out, err);
    free(text);
    return rc;
}
