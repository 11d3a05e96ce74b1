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

/* The folders shipped models are looked up in, in order. */
static int model_dirs(const char *dirs[3])
{
    dirs[0] = getenv("SHARDBENCH_MODELS");
    dirs[1] = SB_MODELS_BUILD_DIR;
    dirs[2] = SB_MODELS_INSTALL_DIR;
    return 3;
}

char **sb_shipped_models(void)
{
    const char *dirs[3];
    return sb_shipped_names("model", dirs, model_dirs(dirs));
}

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
    const char *dirs[3];
    if (!sb_find_shipped(name, "model", dirs, model_dirs(dirs), path, sizeof path)) {
        struct stat st;
        if (stat(name, &st) == 0 && S_ISDIR(st.st_mode))
            return sb_fail(err, SB_EXIT_INPUT, "%s: is a directory, not a model file", name);
        char list[512] = "none found";
        char **names = sb_shipped_names("model", dirs, 3);
        if (names && names[0])
            sb_join_names((const char *const *)names, list, sizeof list);
        sb_names_free(names);
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
