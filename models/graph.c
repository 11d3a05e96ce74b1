/* graph.c: model loading by name or path, edges, names of things.
 * The parsing itself is in parse.c. */
#define _GNU_SOURCE
#include "shardbench/model.h"
#include "shardbench/onnx.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

const char *const sb_shipped_models[] = {
    "alexnet", "resnet101", "inception3", "rnnlm", "transformer", "transformer-large", NULL,
};

const char *sb_op_kind_name(sb_op_kind k)
{
    static const char *names[SB_OP_KIND_COUNT] = {
        [SB_OP_CONV] = "conv",          [SB_OP_POOL] = "pool",
        [SB_OP_DENSE] = "dense",        [SB_OP_EINSUM] = "einsum",
        [SB_OP_EMBEDDING] = "embedding", [SB_OP_LSTM] = "lstm",
        [SB_OP_NORM] = "norm",          [SB_OP_SOFTMAX] = "softmax",
        [SB_OP_SOFTMAX_XENT] = "softmax_xent", [SB_OP_ELEMENTWISE] = "add",
        [SB_OP_REDUCE_MEAN] = "reduce_mean", [SB_OP_CONCAT] = "concat",
        [SB_OP_SPLIT] = "split",        [SB_OP_STACK] = "stack",
        [SB_OP_UNSTACK] = "unstack",    [SB_OP_FLATTEN] = "flatten",
        [SB_OP_UNFLATTEN] = "reshape",  [SB_OP_TRANSPOSE] = "transpose",
    };
    return (unsigned)k < SB_OP_KIND_COUNT ? names[k] : "?";
}

void sb_model_free(sb_model *m)
{
    if (!m)
        return;
    free(m->params);
    free(m->ops);
    free(m->tensors);
    m->params = NULL;
    m->ops = NULL;
    m->tensors = NULL;
    m->nparams = m->nops = m->ntensors = 0;
}

int sb_model_edges(const sb_model *m, sb_edge **edges, int *nedges, sb_error *err)
{
    int n = 0;
    for (int i = 0; i < m->nops; i++)
        for (int k = 0; k < m->ops[i].nin; k++)
            n += m->tensors[m->ops[i].in[k].tensor].producer >= 0;
    sb_edge *e = sb_calloc((size_t)n, sizeof *e, err);
    if (!e)
        return -1;
    n = 0;
    for (int i = 0; i < m->nops; i++)
        for (int k = 0; k < m->ops[i].nin; k++) {
            const sb_tensor *t = &m->tensors[m->ops[i].in[k].tensor];
            if (t->producer < 0)
                continue;
            e[n++] = (sb_edge){.src = t->producer, .src_slot = t->producer_slot,
                               .dst = i, .dst_slot = k, .tensor = m->ops[i].in[k].tensor};
        }
    *edges = e;
    *nedges = n;
    return 0;
}

void sb_op_dims_str(const sb_op *op, char *buf, size_t n)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < op->ndims && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%s", i ? "," : "", op->dims[i].name);
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

static int is_file(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

int sb_model_load(const char *name, const sb_setting *settings, int nsettings, sb_model *out,
                  sb_error *err)
{
    char path[1024];
    int found = 0;
    if (strchr(name, '/') || is_file(name)) {
        snprintf(path, sizeof path, "%s", name);
        found = 1;
    } else {
        const char *dirs[3] = {getenv("SHARDBENCH_MODELS"), SB_MODELS_BUILD_DIR, SB_MODELS_INSTALL_DIR};
        for (int i = 0; i < 3 && !found; i++) {
            if (!dirs[i] || !dirs[i][0])
                continue;
            snprintf(path, sizeof path, "%s/%s.model", dirs[i], name);
            found = is_file(path);
        }
        if (!found) {
            char list[256] = "";
            for (int i = 0; sb_shipped_models[i]; i++) {
                strcat(list, i ? ", " : "");
                strcat(list, sb_shipped_models[i]);
            }
            return sb_fail(err, SB_EXIT_INPUT,
                           "unknown model '%s': not a file, and not a shipped model (%s)", name, list);
        }
    }
    if (sb_onnx_is_path(path)) /* ONNX: converted to model text, then parsed */
        return sb_onnx_load(path, NULL, settings, nsettings, out, NULL, err);
    size_t len;
    char *text;
    if (sb_read_file(path, "model file", (size_t)64 << 20, &text, &len, err))
        return -1;
    int rc = sb_model_parse(text, len, path, settings, nsettings, out, err);
    free(text);
    return rc;
}
