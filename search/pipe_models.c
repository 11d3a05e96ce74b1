/* pipe_models.c: the models the pipeline search works on (pipe_int.h): a
 * weight gradient's price, the micro-batch model, the allowed cut points,
 * a stage's ops as a model of their own with its problem and memory, and
 * the hashes that find equal stages. */
#define _GNU_SOURCE
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dp.h"
#include "lagrange.h"
#include "msort.h"
#include "pipe_int.h"

/* ---- prices ------------------------------------------------------------------ */

double sb_weight_grad_cost(const sb_model *m, const sb_op *op, const int *c,
                           const sb_cost_params *cp)
{
    if (cp->gpu_sms > 0) /* the GPU op model: exactly what the op's cost holds (its groups on
                            the nodes, the gradient word, only what the overlap exposes) */
        return sb_op_wgrad_cost(m, op, c, cp);
    double e[SB_MAX_OP_WEIGHTS + SB_MAX_IO], q[SB_MAX_OP_WEIGHTS + SB_MAX_IO];
    int n = sb_weight_replicas(m, op, c, e, q, SB_MAX_OP_WEIGHTS + SB_MAX_IO);
    double cost = 0.0;
    for (int w = 0; w < n; w++)
        if (q[w] > 1.0)
            cost += sb_allreduce_cost(cp, e[w], q[w]);
    return cost + sb_tied_cost(m, op, c, cp); /* a tied copy's pull and push (0 without) */
}

/* The one place a stage-to-stage send is priced: latency plus words at the
 * link's bandwidth (to become terms.c's point-to-point price). */
double sb_pipe_p2p_cost(const sb_cost_params *cp, double words, int inter)
{
    if (!(words > 0))
        return 0.0;
    int two = inter && cp->node_devices > 0;
    double gbs = two ? cp->gbs_inter : cp->gbs;
    double lat = two ? cp->latency_inter_us : cp->latency_us;
    return (cp->tflops * 1000.0) / (gbs / cp->word_bytes) * words
           + (lat > 0 ? lat * cp->tflops * 1e6 : 0.0);
}

/* ---- models: micro-batch, cut points, stage sub-models ----------------------- */

int pipe_batch_dim(const sb_op *op)
{
    for (int d = 0; d < op->ndims; d++)
        if (!strcmp(op->dims[d].name, "batch"))
            return d;
    return -1;
}

int sb_model_microbatch(const sb_model *m, int M, sb_model *out, sb_error *err)
{
    memset(out, 0, sizeof *out);
    *out = *m;
    out->params = NULL, out->ops = NULL, out->tensors = NULL, out->nparams = 0;
    out->ops = sb_malloc((size_t)m->nops * sizeof *out->ops, err);
    out->tensors = sb_malloc((size_t)m->ntensors * sizeof *out->tensors, err);
    unsigned char *mark = sb_calloc((size_t)m->ntensors * SB_MAX_DIMS, 1, err);
    if (m->nparams)
        out->params = sb_malloc((size_t)m->nparams * sizeof *out->params, err);
    if (!out->ops || !out->tensors || !mark || (m->nparams && !out->params)) {
        free(mark);
        sb_model_free(out);
        return -1;
    }
    memcpy(out->ops, m->ops, (size_t)m->nops * sizeof *out->ops);
    memcpy(out->tensors, m->tensors, (size_t)m->ntensors * sizeof *out->tensors);
    if (m->nparams)
        memcpy(out->params, m->params, (size_t)m->nparams * sizeof *out->params);
    out->nparams = m->nparams;
    for (int i = 0; i < m->nops && M > 1; i++) {
        sb_op *op = &out->ops[i];
        int bd = pipe_batch_dim(op);
        if (bd < 0 || op->dims[bd].size % M) {
            sb_fail(err, SB_EXIT_INPUT, "microbatches %d: op '%s' has no dim named batch that %d "
                    "divides", M, m->ops[i].name, M);
            free(mark);
            sb_model_free(out);
            return -1;
        }
        op->dims[bd].size /= M;
        for (int k = 0; k < op->nin + op->nout; k++) {
            const sb_operand *o = k < op->nin ? &op->in[k] : &op->out[k - op->nin];
            for (int j = 0; j < m->tensors[o->tensor].ndims; j++)
                if (o->map[j] == bd || o->map[j] == SB_MAP_ALL)
                    mark[(size_t)o->tensor * SB_MAX_DIMS + (size_t)j] = 1;
        }
    }
    for (int t = 0; t < m->ntensors; t++)
        for (int j = 0; j < m->tensors[t].ndims; j++)
            if (mark[(size_t)t * SB_MAX_DIMS + (size_t)j]) {
                if (out->tensors[t].dims[j].size % M) {
                    free(mark);
                    int64_t sz = out->tensors[t].dims[j].size;
                    sb_model_free(out);
                    return sb_fail(err, SB_EXIT_INPUT, "microbatches %d: does not divide dim %d "
                                   "(%lld) of tensor '%s'", M, j, (long long)sz, m->tensors[t].name);
                }
                out->tensors[t].dims[j].size /= M;
            }
    free(mark);
    return 0;
}

/* last[t]: the last op reading tensor t (-1: none). */
int *pipe_last_use(const sb_model *m, sb_error *err)
{
    int *last = sb_malloc((size_t)(m->ntensors ? m->ntensors : 1) * sizeof *last, err);
    if (!last)
        return NULL;
    for (int t = 0; t < m->ntensors; t++)
        last[t] = -1;
    for (int i = 0; i < m->nops; i++)
        for (int k = 0; k < m->ops[i].nin; k++)
            last[m->ops[i].in[k].tensor] = i;
    return last;
}

int sb_pipe_cuts(const sb_model *m, int *pos, int max, int *crossing)
{
    int *last = pipe_last_use(m, NULL);
    if (!last)
        return 0;
    int best = -1, n = 0;
    /* cross[k] for k = 1 .. nops-1, counted by a sweep over producers */
    int *cross = calloc((size_t)m->nops + 1, sizeof *cross);
    if (!cross) {
        free(last);
        return 0;
    }
    for (int t = 0; t < m->ntensors; t++) {
        int pr = m->tensors[t].producer;
        if (pr < 0 || last[t] <= pr)
            continue;
        cross[pr + 1]++; /* crosses every cut k with pr < k <= last */
        cross[last[t] + 1]--;
    }
    for (int k = 1, run = cross[0]; k < m->nops; k++) {
        run += cross[k];
        cross[k] = run;
        if (best < 0 || run < best)
            best = run;
    }
    for (int k = 1; k < m->nops; k++)
        if (cross[k] == best && n < max)
            pos[n++] = k;
    if (crossing)
        *crossing = best < 0 ? 0 : best;
    free(cross);
    free(last);
    return n;
}

/* The fp8 marks (models/gpu_run.c) of a module the stage [i, j) divides,
 * undone in its copy ops: a run of linears whose first is an earlier
 * stage's, the stage's first casts; a fused norm and its linears on two
 * sides of a cut, the norm writes its 16-bit output (sent on) and the
 * linear casts it. Read from the stage's own ops and inputs only (its
 * first op's mark, the wiring, the spans), as equal stages must be. The
 * marks undone, counted (ops NULL: counted only). */
static int cut_fp8_marks(const sb_model *mb, int i, int j, sb_op *ops)
{
    int n = 0;
    for (int v = i; v < j; v++) {
        const sb_op *op = &mb->ops[v];
        int in = op->fp8_in, out = op->fp8_out;
        if (in == SB_FP8_IN_SHARED && v == i)
            in = SB_FP8_IN_CAST;
        if (out && v + op->fp8_span >= j)
            out = 0;
        if (in == SB_FP8_IN_NORM) { /* its norm: its activation input's producer */
            int p = mb->tensors[sb_op_fp8_input(mb, op)].producer;
            if (p < i || v + op->fp8_span >= j)
                in = SB_FP8_IN_CAST;
        }
        n += (in != op->fp8_in) + (out != op->fp8_out);
        if (ops)
            ops[v - i].fp8_in = in, ops[v - i].fp8_out = out;
    }
    return n;
}

int pipe_cut_divides(const sb_model *mb, int i, int j)
{
    return cut_fp8_marks(mb, i, j, NULL) > 0;
}

/* The stage of ops [i, j) of mb as a model of its own: the ops, every
 * tensor, those produced outside the range as inputs (stage_input: sent by
 * an earlier stage, which the memory model keeps for a recomputed
 * consumer). Shares nothing it frees with mb: free out->ops and
 * out->tensors. */
int pipe_sub_model(const sb_model *mb, int i, int j, sb_model *out, sb_error *err)
{
    memset(out, 0, sizeof *out);
    memcpy(out->name, mb->name, sizeof out->name);
    memcpy(out->path, mb->path, sizeof out->path);
    out->cutoff = mb->cutoff;
    out->nops = j - i;
    out->ntensors = mb->ntensors;
    out->ops = sb_malloc((size_t)(j - i) * sizeof *out->ops, err);
    out->tensors = sb_malloc((size_t)mb->ntensors * sizeof *out->tensors, err);
    if (!out->ops || !out->tensors) {
        free(out->ops), free(out->tensors);
        return -1;
    }
    memcpy(out->ops, mb->ops + i, (size_t)(j - i) * sizeof *out->ops);
    memcpy(out->tensors, mb->tensors, (size_t)mb->ntensors * sizeof *out->tensors);
    cut_fp8_marks(mb, i, j, out->ops);
    /* tied weights (`tie`): their tensors keep their indices; the table's
     * op may be another stage's (-1) */
    out->ntied = mb->ntied;
    for (int k = 0; k < mb->ntied && k < 4; k++) {
        out->tied[k] = mb->tied[k];
        out->tied_to[k] = mb->tied_to[k] >= i && mb->tied_to[k] < j ? mb->tied_to[k] - i : -1;
    }
    for (int t = 0; t < mb->ntensors; t++) {
        sb_tensor *x = &out->tensors[t];
        if (x->producer >= i && x->producer < j) {
            x->producer -= i;
        } else if (x->producer >= 0) {
            x->producer = -1;
            x->kind = SB_TENSOR_INPUT;
            x->stage_input = 1;
        }
    }
    return 0;
}

/* The non-GPU model's weight-gradient share taken off each op as it is
 * priced (the same op, configs and cp), before a memo keeps it. */
struct wg_adjust {
    const sb_model *sub;
    int M;
    const sb_price_memo *outer; /* or NULL */
};

static int adj_get(void *ctx, int i, sb_configs *cf, sb_error *err)
{
    const struct wg_adjust *a = ctx;
    return a->outer ? a->outer->get(a->outer->ctx, i, cf, err) : 0;
}

static int adj_priced(void *ctx, int i, sb_configs *cf, const sb_cost_params *cp, sb_error *err)
{
    const struct wg_adjust *a = ctx;
    if (a->M > 1)
        for (int x = 0; x < cf->n; x++)
            cf->cost[x] -= (double)(a->M - 1) / a->M
                * sb_weight_grad_cost(a->sub, &a->sub->ops[i],
                                      cf->c + (size_t)x * (size_t)cf->ndims, cp);
    return a->outer ? a->outer->priced(a->outer->ctx, i, cf, cp, err) : 0;
}

/* The stage's problem on d devices: vertex costs with the weight-gradient
 * all-reduce counted 1/M times (once per step over M micro-batches); memo
 * (sb_price_memo, or NULL) gives and keeps ops' prices. */
int pipe_stage_problem(const sb_model *sub, int d, int M, const sb_cost_params *cp, int k,
                       const void *memo_, sb_problem *pb, sb_error *err)
{
    const sb_price_memo *memo = memo_;
    sb_cost_params c2 = *cp;
    c2.act_copies = k;
    if (c2.gpu_sms > 0) /* the GPU op model: the cost and its reduction priced at once */
        return sb_problem_build_memo(sub, d, &c2, M > 1 ? (double)(M - 1) / M : 0.0, memo, pb,
                                     err);
    struct wg_adjust a = {sub, M, memo};
    sb_price_memo am = {adj_get, adj_priced, &a};
    return sb_problem_build_memo(sub, d, &c2, 0.0, &am, pb, err);
}

/* Bytes per device of ops [i, j) of mb under configs cfg (SB_MAX_DIMS
 * apart) with k micro-batches of activations in flight, every recomputable
 * op recomputed when rc (sb_op_memory_prec on the stage's sub-model: its
 * inputs from earlier stages kept), into *bytes. */
int pipe_stage_memory(const sb_model *mb, int i, int j, const int *cfg, sb_optimizer opt,
                        int zero, int prec, int k, int rc, double *bytes, sb_error *err)
{
    sb_model sub;
    if (pipe_sub_model(mb, i, j, &sub, err))
        return -1;
    double res = 0.0, scr = 0.0;
    for (int v = 0; v < j - i; v++) {
        sb_mem x;
        sb_op_memory_prec(&sub, &sub.ops[v], cfg + (size_t)v * SB_MAX_DIMS, opt, zero, rc, prec,
                          &x);
        x.activations *= k > 1 ? k : 1;
        res += sb_mem_resident(&x);
        if (x.scratch > scr)
            scr = x.scratch;
    }
    free(sub.ops), free(sub.tensors);
    *bytes = res + scr;
    return 0;
}

/* Words of the activations crossing the cut before op b (tensors produced
 * before b and read at or after it), per device of a stage of d devices. */
double pipe_crossing_words(const sb_model *mb, const int *last, int b, int d)
{
    double w = 0.0;
    for (int t = 0; t < mb->ntensors; t++) {
        const sb_tensor *x = &mb->tensors[t];
        if (x->producer < 0 || x->producer >= b || last[t] < b)
            continue;
        double e = 1.0;
        for (int j = 0; j < x->ndims; j++)
            e *= (double)x->dims[j].size;
        w += e;
    }
    return w / d;
}

/* ---- stage structure: equal stages cost the same -------------------------------- */

uint64_t pipe_mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

static uint64_t mixd(uint64_t h, double v)
{
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    return pipe_mix(h, u);
}

/* Everything of an op the cost and memory models read, bar names and
 * tensor identities (the wiring is compared separately). */
uint64_t pipe_op_hash(const sb_model *m, const sb_op *op)
{
    uint64_t h = pipe_mix(0, (uint64_t)op->kind);
    h = pipe_mix(h, (uint64_t)op->ndims);
    for (int d = 0; d < op->ndims; d++) {
        h = pipe_mix(h, (uint64_t)op->dims[d].size);
        for (const char *s = op->dims[d].name; *s; s++)
            h = pipe_mix(h, (uint64_t)(unsigned char)*s);
        h = pipe_mix(h, (uint64_t)op->role[d]);
    }
    h = pipe_mix(h, op->nosplit);
    h = pipe_mix(h, (uint64_t)(op->nin * 64 + op->nout));
    for (int k = 0; k < op->nin + op->nout; k++) {
        const sb_operand *o = k < op->nin ? &op->in[k] : &op->out[k - op->nin];
        const sb_tensor *t = &m->tensors[o->tensor];
        h = pipe_mix(h, (uint64_t)(t->kind * 64 + t->ndims));
        for (int j = 0; j < t->ndims; j++)
            h = pipe_mix(pipe_mix(h, (uint64_t)t->dims[j].size), (uint64_t)(int64_t)o->map[j]);
    }
    h = pipe_mix(h, (uint64_t)op->nweights);
    for (int w = 0; w < op->nweights; w++)
        for (int j = 0; j < op->weights[w].ndims; j++)
            h = pipe_mix(pipe_mix(h, (uint64_t)op->weights[w].size[j]), (uint64_t)(int64_t)op->weights[w].map[j]);
    h = pipe_mix(h, op->stat_dims);
    int attrs[] = {op->pw, op->axis, op->causal, op->pos_axis, (int)op->axes, op->kernel[0],
                   op->kernel[1], op->stride[0], op->stride[1], op->pad[0], op->pad[1],
                   op->dilation[0], op->dilation[1], op->groups, op->pool_avg, op->batchnorm,
                   op->layers, op->fn, op->topk, op->attn, op->attn_slot, op->gpu_run,
                   op->feeds_loss, op->fp8_in, op->fp8_out, op->fp8_span, op->routes};
    for (size_t a = 0; a < sizeof attrs / sizeof attrs[0]; a++)
        h = pipe_mix(h, (uint64_t)(int64_t)attrs[a]);
    for (int d = 0; d < SB_MAX_DIMS; d++)
        h = pipe_mix(h, (uint64_t)(int64_t)op->perm[d]);
    return mixd(mixd(mixd(h, op->theta), op->moe_aux), op->attn_frac);
}

static int operands_same(const sb_model *m, const sb_operand *a, const sb_operand *b)
{
    const sb_tensor *x = &m->tensors[a->tensor], *y = &m->tensors[b->tensor];
    if (x->kind != y->kind || x->ndims != y->ndims)
        return 0;
    for (int j = 0; j < x->ndims; j++)
        if (x->dims[j].size != y->dims[j].size || a->map[j] != b->map[j])
            return 0;
    return 1;
}

/* Ops a and b of m are equal for the cost and memory models. */
int pipe_ops_same(const sb_model *m, const sb_op *a, const sb_op *b)
{
    if (a->kind != b->kind || a->ndims != b->ndims || a->nosplit != b->nosplit
        || a->nin != b->nin || a->nout != b->nout || a->nweights != b->nweights
        || a->stat_dims != b->stat_dims || a->pw != b->pw || a->axis != b->axis
        || a->causal != b->causal || a->pos_axis != b->pos_axis || a->theta != b->theta
        || a->axes != b->axes || a->groups != b->groups || a->pool_avg != b->pool_avg
        || a->batchnorm != b->batchnorm || a->layers != b->layers || a->fn != b->fn
        || a->topk != b->topk || a->moe_aux != b->moe_aux || a->attn != b->attn
        || a->attn_slot != b->attn_slot || a->attn_frac != b->attn_frac || a->gpu_run != b->gpu_run
        || a->feeds_loss != b->feeds_loss || a->fp8_in != b->fp8_in || a->fp8_out != b->fp8_out
        || a->fp8_span != b->fp8_span || a->routes != b->routes
        || memcmp(a->kernel, b->kernel, sizeof a->kernel) || memcmp(a->stride, b->stride, sizeof a->stride)
        || memcmp(a->pad, b->pad, sizeof a->pad) || memcmp(a->dilation, b->dilation, sizeof a->dilation)
        || memcmp(a->perm, b->perm, sizeof a->perm) || memcmp(a->role, b->role, sizeof a->role))
        return 0;
    for (int d = 0; d < a->ndims; d++)
        if (a->dims[d].size != b->dims[d].size || strcmp(a->dims[d].name, b->dims[d].name))
            return 0;
    for (int k = 0; k < a->nin; k++)
        if (!operands_same(m, &a->in[k], &b->in[k]))
            return 0;
    for (int k = 0; k < a->nout; k++)
        if (!operands_same(m, &a->out[k], &b->out[k]))
            return 0;
    for (int w = 0; w < a->nweights; w++) {
        const sb_weight *x = &a->weights[w], *y = &b->weights[w];
        if (x->ndims != y->ndims || memcmp(x->map, y->map, sizeof x->map)
            || memcmp(x->size, y->size, (size_t)x->ndims * sizeof x->size[0]))
            return 0;
    }
    return 1;
}

/* Where input k of op v comes from, relative to a stage starting at op i:
 * the producing op's offset and slot, or -1 for outside the stage. */
int64_t pipe_wire(const sb_model *m, int i, int v, int k)
{
    const sb_tensor *t = &m->tensors[m->ops[v].in[k].tensor];
    if (t->producer < i || t->producer >= v)
        return -1;
    return (int64_t)(t->producer - i) * 64 + t->producer_slot;
}

