/* read.c: the Hugging Face config reader's entry points (include/
 * shardbench/hf.h): the file (config.json, or a folder holding one) read
 * through jansson with duplicate keys refused, the list of keys not read,
 * and the load that parses the text the writer (emit.c) makes. The checked
 * getters every architecture reads its keys with: keys.c. */
#define _GNU_SOURCE
#include "hf_int.h"

#include "../load.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_CONFIG_BYTES ((size_t)4 << 20)

int sb_hf_is_path(const char *name)
{
    return name && strncmp(name, "hf:", 3) == 0;
}

/* The keys of the object that no getter read, in file order. */
static void list_ignored(hf_reader *R)
{
    const char *key;
    json_t *v;
    json_object_foreach(R->root, key, v) {
        int used = 0;
        for (int i = 0; i < R->nused && !used; i++)
            used = strcmp(R->used[i], key) == 0;
        if (!used)
            hf_note(R->info->ignored, sizeof R->info->ignored, "%s", key);
    }
}

/* The model's name: the folder of a config.json, else the file name up to
 * ".json"; characters a quoted model name cannot hold become '-'. */
static void model_name(const char *path, char *out, size_t cap)
{
    const char *end = path + strlen(path), *base;
    if (end - path >= 12 && strcmp(end - 12, "/config.json") == 0)
        end -= 12;
    else if (end - path >= 5 && strcmp(end - 5, ".json") == 0)
        end -= 5;
    for (base = end; base > path && base[-1] != '/';)
        base--;
    size_t n = 0;
    for (const char *p = base; p < end && n + 1 < cap && n < 80; p++) {
        char ch = *p;
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                 ch == '-' || ch == '_' || ch == '.';
        out[n++] = ok ? ch : '-';
    }
    out[n] = '\0';
    if (!n)
        snprintf(out, cap, "hf-model");
}

int sb_hf_text_from_json(const char *json, size_t n, const char *path, const sb_setting *settings,
                         int nsettings, char **text, size_t *len, sb_hf_info *info, sb_error *err)
{
    sb_hf_info local;
    if (!info)
        info = &local;
    memset(info, 0, sizeof *info);
    snprintf(info->config, sizeof info->config, "%s", path);
    json_error_t je;
    json_t *root = json_loadb(json, n, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return sb_fail(err, SB_EXIT_INPUT, "%s:%d:%d: not a JSON config: %s", path, je.line,
                       je.column, je.text);
    hf_reader R = {.root = root, .path = path, .settings = settings, .nsettings = nsettings,
                   .info = info, .err = err};
    int rc = 0;
    if (!json_is_object(root))
        rc = hf_fail(&R, NULL, "not a JSON object (a config.json holds one)");
    hf_cfg c;
    if (!rc)
        rc = hf_read_cfg(&R, &c);
    if (!rc) {
        list_ignored(&R);
        hf_grid_why(&c, info->arch, info->grid_why, sizeof info->grid_why);
        info->qk_norm = c.qk_norm, info->qkv_bias = c.qkv_bias;
        snprintf(info->defaults, sizeof info->defaults, "seq=%lld, batch=%lld (%lld tokens)",
                 (long long)c.seq, (long long)c.batch, (long long)(c.seq * c.batch));
        char name[96];
        model_name(path, name, sizeof name);
        rc = hf_emit(&c, name, text, len, err);
    }
    json_decref(root);
    return rc;
}

/* PATH or PATH/config.json, whichever is a file. */
static int config_path(const char *path, char *out, size_t cap, sb_error *err)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return sb_fail(err, SB_EXIT_INPUT, "%s: no such file or folder", path);
    if (S_ISDIR(st.st_mode)) {
        if ((size_t)snprintf(out, cap, "%s/config.json", path) >= cap)
            return sb_fail(err, SB_EXIT_INPUT, "%s: path too long", path);
        if (stat(out, &st) != 0 || !S_ISREG(st.st_mode))
            return sb_fail(err, SB_EXIT_INPUT, "%s: a folder without a config.json", path);
        return 0;
    }
    if ((size_t)snprintf(out, cap, "%s", path) >= cap)
        return sb_fail(err, SB_EXIT_INPUT, "%s: path too long", path);
    return 0;
}

int sb_hf_to_text(const char *path, const sb_setting *settings, int nsettings, char **text,
                  size_t *len, sb_hf_info *info, sb_error *err)
{
    if (sb_hf_is_path(path))
        path += 3;
    if (!*path)
        return sb_fail(err, SB_EXIT_INPUT, "hf: needs a path (hf:config.json or hf:FOLDER)");
    char file[1024];
    if (config_path(path, file, sizeof file, err))
        return -1;
    char *data;
    size_t n;
    if (sb_read_file(file, "config.json", MAX_CONFIG_BYTES, &data, &n, err))
        return -1;
    int rc = sb_hf_text_from_json(data, n, file, settings, nsettings, text, len, info, err);
    free(data);
    return rc;
}

/* The notes once per process and config: the defaults, what is
 * approximated and the keys not read. */
static void print_notes(const sb_hf_info *in)
{
    static char last[1024];
    if (strcmp(last, in->config) == 0)
        return;
    snprintf(last, sizeof last, "%s", in->config);
    /* the config's own strings (its path, architecture, keys, values quoted in
     * the notes) with their control characters escaped: no terminal escape or
     * forged line from a config file */
    char shown[4 * sizeof in->ignored], arch[4 * sizeof in->arch];
    sb_escape_controls(in->config, shown, sizeof shown, 0);
    sb_escape_controls(in->arch, arch, sizeof arch, 0);
    fprintf(stderr, "hf: %s: %s; %s\n", shown, arch, in->defaults);
    if (in->approx[0]) {
        sb_escape_controls(in->approx, shown, sizeof shown, 0);
        fprintf(stderr, "hf: approximated: %s\n", shown);
    }
    if (in->ignored[0]) {
        sb_escape_controls(in->ignored, shown, sizeof shown, 0);
        fprintf(stderr, "hf: ignored keys: %s\n", shown);
    }
}

/* 1 when the text declares `param NAME`. */
static int has_param(const char *text, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = strstr(text, "\nparam "); p; p = strstr(p + 1, "\nparam "))
        if (strncmp(p + 7, name, n) == 0 && p[7 + n] == ' ')
            return 1;
    return 0;
}

/* The settings for the parser: those the text has a param for, and those
 * the reader did not read (the parser names them unknown); a key the
 * reader read that shapes the graph without a param (first_k_dense_replace,
 * rotary_pct, ...) has done its work. */
static int parser_settings(const char *text, const sb_setting *in, int n, uint64_t read,
                           sb_setting *out)
{
    int k = 0;
    for (int i = 0; i < n; i++) {
        const char *a = hf_alias_of(in[i].name);
        if (!has_param(text, in[i].name) && a != in[i].name && has_param(text, a)) {
            out[k] = in[i]; /* hidden_size for GPT-2's n_embd */
            snprintf(out[k++].name, sizeof out->name, "%s", a);
        } else if (has_param(text, in[i].name) || i >= 64 || !(read >> i & 1)) {
            out[k++] = in[i];
        }
    }
    return k;
}

int sb_hf_parse_text(const char *text, size_t len, const sb_hf_info *info,
                     const sb_setting *settings, int nsettings, sb_model *out, sb_error *err)
{
    char gen[1100];
    snprintf(gen, sizeof gen, "%s (as model text)", info->config);
    sb_setting *set = malloc(sizeof *set * (size_t)(nsettings + 1));
    if (!set)
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    int nset = parser_settings(text, settings, nsettings, info->settings_read, set);
    int rc = sb_model_parse(text, len, gen, set, nset, out, err);
    free(set);
    if (!rc) { /* what --algo megatron reads of it (sb_mt_model_from) */
        snprintf(out->hf_arch, sizeof out->hf_arch, "%s", info->arch);
        snprintf(out->grid_why, sizeof out->grid_why, "%s", info->grid_why);
        out->hf_qk_norm = info->qk_norm, out->hf_qkv_bias = info->qkv_bias;
    }
    return rc;
}

int sb_hf_load(const char *path, const sb_setting *settings, int nsettings, sb_model *out,
               sb_hf_info *info, sb_error *err)
{
    sb_hf_info local;
    if (!info)
        info = &local;
    char *text;
    size_t len;
    if (sb_hf_to_text(path, settings, nsettings, &text, &len, info, err))
        return -1;
    int rc = sb_hf_parse_text(text, len, info, settings, nsettings, out, err);
    free(text);
    if (!rc) /* what a strategy file or a rank loads again: the name given */
        snprintf(out->path, sizeof out->path, "hf:%s", sb_hf_is_path(path) ? path + 3 : path);
    if (!rc && !getenv("SHARDBENCH_HF_QUIET"))
        print_notes(info);
    return rc;
}
