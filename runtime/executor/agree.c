/* agree.c: what every rank must share to train together, as text (one
 * fact a line), compared across ranks by sb_agree_text (dtensor.h): the
 * model (its name, parameters, tensors, ops with their dims, attributes,
 * operands and weights), the strategy (one config per op) and the
 * executor's options. Ranks started with different arguments (MPMD
 * launches, per-node files) otherwise run different plans: mismatched
 * collectives hang, or configs index past each other's tables. */
#define _GNU_SOURCE
#include "shardbench/runtime.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardbench/dtensor.h"

typedef struct {
    char *p;
    size_t n, cap;
    int oom;
} sbuf;

static void put(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(sbuf *b, const char *fmt, ...)
{
    if (b->oom)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) {
            b->oom = 1;
            return;
        }
        if (b->p && b->n + (size_t)k < b->cap) {
            b->n += (size_t)k;
            return;
        }
        size_t cap = b->cap ? b->cap : 4096;
        while (cap <= b->n + (size_t)k)
            cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
}

static char *done(sbuf *b)
{
    if (b->oom || !b->p) {
        free(b->p);
        return b->oom ? NULL : strdup("");
    }
    return b->p;
}

static void put_ints(sbuf *b, const char *key, const int *v, int n)
{
    put(b, " %s=", key);
    for (int i = 0; i < n; i++)
        put(b, "%s%d", i ? "," : "", v[i]);
}

static void put_operand(sbuf *b, const sb_model *m, const sb_operand *o, const char *key)
{
    const sb_tensor *t = &m->tensors[o->tensor];
    put(b, " %s=%s", key, t->name);
    put_ints(b, "map", o->map, t->ndims);
}

char *sb_model_text(const sb_model *m)
{
    sbuf b = {0};
    /* name and parameters first: the usual differences, named as the user set them */
    put(&b, "model=%s\n", m->name);
    for (int i = 0; i < m->nparams; i++)
        put(&b, "%s=%lld\n", m->params[i].name, (long long)m->params[i].value);
    put(&b, "cutoff=%d\nops=%d\ntensors=%d\n", m->cutoff, m->nops, m->ntensors);
    for (int i = 0; i < m->ntensors; i++) {
        const sb_tensor *t = &m->tensors[i];
        put(&b, "tensor %s kind=%d shape=", t->name, (int)t->kind);
        for (int d = 0; d < t->ndims; d++)
            put(&b, "%s%s:%lld", d ? "," : "", t->dims[d].name, (long long)t->dims[d].size);
        put(&b, " producer=%d.%d\n", t->producer, t->producer_slot);
    }
    for (int i = 0; i < m->nops; i++) {
        const sb_op *op = &m->ops[i];
        put(&b, "op %s kind=%s dims=", op->name, sb_op_kind_name(op->kind));
        for (int d = 0; d < op->ndims; d++)
            put(&b, "%s%s:%lld", d ? "," : "", op->dims[d].name, (long long)op->dims[d].size);
        put(&b, " nosplit=%u stat=%u", op->nosplit, op->stat_dims);
        put_ints(&b, "role", op->role, op->ndims);
        for (int k = 0; k < op->nin; k++)
            put_operand(&b, m, &op->in[k], "in");
        for (int k = 0; k < op->nout; k++)
            put_operand(&b, m, &op->out[k], "out");
        for (int w = 0; w < op->nweights; w++) {
            const sb_weight *wt = &op->weights[w];
            put(&b, " weight=%s shape=", wt->suffix);
            for (int d = 0; d < wt->ndims; d++)
                put(&b, "%s%lld", d ? "," : "", (long long)wt->size[d]);
            put_ints(&b, "map", wt->map, wt->ndims);
            put(&b, " init=%a,%a", wt->init_scale, wt->init_offset);
        }
        put(&b, " pw=%d axis=%d axes=%u", op->pw, op->axis, op->axes);
        put_ints(&b, "kernel", op->kernel, 2);
        put_ints(&b, "stride", op->stride, 2);
        put_ints(&b, "pad", op->pad, 2);
        put_ints(&b, "dilation", op->dilation, 2);
        put(&b, " groups=%d", op->groups);
        put(&b, " avg=%d bn=%d layers=%d topk=%d aux=%a", op->pool_avg, op->batchnorm, op->layers,
            op->topk, op->moe_aux);
        if (op->kind == SB_OP_TRANSPOSE)
            put_ints(&b, "perm", op->perm, op->ndims);
        if (op->causal >= 0)
            put(&b, " causal=%d", op->causal);
        if (op->kind == SB_OP_ROPE)
            put(&b, " seq=%d theta=%a", op->pos_axis, op->theta);
        if (op->kind == SB_OP_ACT)
            put(&b, " fn=%s", sb_act_fn_name(op->fn));
        if (op->kind == SB_OP_SOFTCAP)
            put(&b, " cap=%a", op->cap);
        put(&b, "\n");
    }
    return done(&b);
}

char *sb_strategy_text(const sb_model *m, const sb_strategy *st)
{
    sbuf b = {0};
    for (int i = 0; i < m->nops; i++) {
        const int *c = sb_strategy_config(st, i);
        put(&b, "op %s config=", m->ops[i].name);
        for (int d = 0; d < m->ops[i].ndims; d++)
            put(&b, "%s%d", d ? "," : "", c[d]);
        put(&b, "%s\n", st->recompute && st->recompute[i] ? " recompute" : "");
    }
    const sb_pipeline *pl = &st->pipe;
    if (!sb_pipeline_is_none(pl)) {
        put(&b, "pipeline stages=%d microbatches=%d schedule=%s\n", pl->nstages, pl->microbatches,
            sb_schedule_name(pl->schedule));
        for (int s = 0; s < pl->nstages; s++)
            put(&b, "stage %d ops=%d..%d devices=%d\n", s, pl->first_op[s], pl->first_op[s + 1] - 1,
                pl->devices[s]);
    }
    put(&b, "zero=%d\n", st->zero);
    return done(&b);
}

/* A text that could not be made (out of memory) differs from every other:
 * every rank still takes part in the comparison. */
static int agree_owned(MPI_Comm comm, const char *what, char *text, sb_error *err)
{
    char oom[64];
    int rank;
    MPI_Comm_rank(comm, &rank);
    snprintf(oom, sizeof oom, "(rank %d out of memory)", rank);
    int rc = sb_agree_text(comm, what, text ? text : oom, err);
    free(text);
    return rc;
}

int sb_agree_model(MPI_Comm comm, const sb_model *m, sb_error *err)
{
    return agree_owned(comm, "model", sb_model_text(m), err);
}

static char *options_text(const sb_backend *be, const sb_exec_opts *o)
{
    sbuf b = {0};
    put(&b, "backend=%s\n", be ? be->name : "none");
    if (be && !strcmp(be->name, "cuda")) {
        /* read by each rank's backend at start-up (backend_cuda.cu): a rank
         * on the host-staged path and one on NCCL would never meet */
        const char *prec = getenv("SHARDBENCH_PRECISION"), *comm = getenv("SHARDBENCH_COMM");
        put(&b, "SHARDBENCH_PRECISION=%s\nSHARDBENCH_COMM=%s\n", prec ? prec : "",
            comm ? comm : "");
    }
    /* the shortest decimal that reads back as the same float */
    float lr = o && o->lr > 0 ? o->lr : 0.01f;
    char lrs[32];
    for (int digits = 6; digits <= 9; digits++) {
        snprintf(lrs, sizeof lrs, "%.*g", digits, (double)lr);
        if (strtof(lrs, NULL) == lr)
            break;
    }
    put(&b, "lr=%s\nseed=%llu\n", lrs, (unsigned long long)(o && o->seed ? o->seed : 1));
    if (o && o->update == SB_UPDATE_ADAM)
        put(&b, "update=adam beta1=%.9g beta2=%.9g eps=%.9g\n", (double)o->beta1,
            (double)o->beta2, (double)o->eps);
    else
        put(&b, "update=sgd\n");
    if (o && o->data) {
        char d[1024];
        sb_data_describe(o->data, d, sizeof d);
        put(&b, "data=%s\ndata_seed=%llu\n", d, (unsigned long long)o->data_seed);
    } else {
        put(&b, "data=none\n");
    }
    if (o && o->agree)
        put(&b, "%s%s", o->agree, *o->agree && o->agree[strlen(o->agree) - 1] != '\n' ? "\n" : "");
    return done(&b);
}

int sb_agree_plan(MPI_Comm comm, const sb_model *m, const sb_strategy *st,
                  const sb_backend *be, const sb_exec_opts *opts, sb_error *err)
{
    if (agree_owned(comm, "model", sb_model_text(m), err)
        || agree_owned(comm, "strategy", sb_strategy_text(m, st), err)
        || agree_owned(comm, "options", options_text(be, opts), err))
        return -1;
    return 0;
}
