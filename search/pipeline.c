/* pipeline.c: the pipeline layer of the search (shardbench/pipesearch.h).
 *
 * A strategy in the full space is S stages of consecutive ops, each on
 * d = p / S devices, M micro-batches and a schedule; each stage's ops take
 * the least-cost intra-op configs of the exact DP run on the stage alone
 * (a sub-model of its ops whose inputs from earlier stages are model
 * inputs) at the micro-batch size, on d devices.
 *
 * Cost of a step (FLOP, as the rest of the model): stage s takes t_s per
 * micro-batch (its intra-op optimum, with each op's weight-gradient
 * all-reduce counted once per step, i.e. 1/M of it per micro-batch, plus
 * the point-to-point send of the activations crossing to stage s + 1 and
 * of their gradients back); the step is
 *     T = sum_s t_s + (M - 1) max_s t_s,
 * the schedule's makespan when every micro-batch takes t_s on stage s
 * (the first micro-batch crosses every stage, the other M - 1 follow at
 * the pace of the slowest): S = 1 gives M t, and S = M = 1 the plain
 * cost exactly. GPipe and 1F1B take the same time in this model; they
 * differ in memory: stage s holds the activations of M micro-batches
 * (GPipe) or of min(M, S - s) (1F1B), and the activation gradients,
 * weights, gradients and optimizer state of its ops once.
 *
 * Search, exact over its space: for each (S, M, schedule) the cut points
 * minimise T. T is non-decreasing in each t_s, so each stage takes its
 * own least t_s (under the memory limit: sb_search_within on the stage);
 * over cut points, for each candidate cap tau on max t_s (the stage costs
 * in increasing order) a DP over cut points gives the least sum with every
 * t_s <= tau, and T = min over tau of sum + (M - 1) tau. Shortcuts, none of
 * which changes the optimum:
 *   - cut points only where fewest tensors cross (a Transformer: between
 *     layers, where only the residual stream crosses);
 *   - stage costs cached by the stage's structure (op kinds, sizes and
 *     wiring relative to the stage), so equal stages of repeated layers
 *     are solved once;
 *   - lower bounds: an op's least cost over its configs, summed, bounds a
 *     stage's cost, and its least memory bounds the stage's; a stage range
 *     whose bound cannot beat the best step found, and an (S, M) whose
 *     bound cannot, are never solved.
 *
 * Recomputation (cp->recompute all): each stage problem is built with it
 * (vertex costs with sb_recompute_cost, memory by sb_op_memory_rc on the
 * stage's sub-model, whose inputs from earlier stages are marked
 * stage_input: the runtime keeps those per micro-batch in flight for the
 * recomputed forward). Chosen (o->choose_recompute, or auto): each stage
 * recomputes all its ops or none, the better (stage()); the ZeRO stage
 * chosen (o->choose_zero): 2 and 3 searched in turn, 0 and 1 dominated by
 * 2 (run(); search/README.md gives both arguments). */
#define _GNU_SOURCE
#include "shardbench/pipesearch.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardbench/memory.h"
#include "lagrange.h"
#include "msort.h"

void sb_pipe_opts_default(sb_pipe_opts *o)
{
    memset(o, 0, sizeof *o);
    o->schedule = -1;
    o->max_stage_devices = 0;
    o->opt = SB_OPTIM_SGD;
    o->dp = (sb_search_opts){.algo = SB_ALGO_PASE, .max_table_mb = 4096};
}

void sb_pipe_result_free(sb_pipe_result *r)
{
    if (!r)
        return;
    free(r->cfg);
    free(r->op_cost);
    free(r->recompute);
    r->cfg = NULL;
    r->op_cost = NULL;
    r->recompute = NULL;
}

/* ---- prices ------------------------------------------------------------------ */

double sb_weight_grad_cost(const sb_model *m, const sb_op *op, const int *c,
                           const sb_cost_params *cp)
{
    double e[SB_MAX_OP_WEIGHTS + SB_MAX_IO], q[SB_MAX_OP_WEIGHTS + SB_MAX_IO];
    int n = sb_weight_replicas(m, op, c, e, q, SB_MAX_OP_WEIGHTS + SB_MAX_IO);
    double cost = 0.0;
    for (int w = 0; w < n; w++)
        if (q[w] > 1.0)
            cost += sb_allreduce_cost(cp, e[w], q[w]);
    return cost;
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

static int batch_dim(const sb_op *op)
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
        int bd = batch_dim(op);
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
static int *last_use(const sb_model *m, sb_error *err)
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
    int *last = last_use(m, NULL);
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

/* The stage of ops [i, j) of mb as a model of its own: the ops, every
 * tensor, those produced outside the range as inputs (stage_input: sent by
 * an earlier stage, which the memory model keeps for a recomputed
 * consumer). Shares nothing it frees with mb: free out->ops and
 * out->tensors. */
static int sub_model(const sb_model *mb, int i, int j, sb_model *out, sb_error *err)
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

/* The stage's problem on d devices: vertex costs with the weight-gradient
 * all-reduce counted 1/M times (once per step over M micro-batches). */
static int stage_problem(const sb_model *sub, int d, int M, const sb_cost_params *cp, int k,
                         sb_problem *pb, sb_error *err)
{
    sb_cost_params c2 = *cp;
    c2.act_copies = k;
    if (sb_problem_build(sub, d, &c2, pb, err))
        return -1;
    if (M > 1)
        for (int v = 0; v < sub->nops; v++)
            for (int x = 0; x < pb->cfg[v].n; x++)
                pb->cfg[v].cost[x] -= (double)(M - 1) / M
                    * sb_weight_grad_cost(sub, &sub->ops[v],
                                          pb->cfg[v].c + (size_t)x * (size_t)pb->cfg[v].ndims, &pb->cp);
    return 0;
}

/* Bytes per device of ops [i, j) of mb under configs cfg (SB_MAX_DIMS
 * apart) with k micro-batches of activations in flight, every recomputable
 * op recomputed when rc (sb_op_memory_prec on the stage's sub-model: its
 * inputs from earlier stages kept), into *bytes. */
static int stage_memory(const sb_model *mb, int i, int j, const int *cfg, sb_optimizer opt,
                        int zero, int prec, int k, int rc, double *bytes, sb_error *err)
{
    sb_model sub;
    if (sub_model(mb, i, j, &sub, err))
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
static double crossing_words(const sb_model *mb, const int *last, int b, int d)
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

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

static uint64_t mixd(uint64_t h, double v)
{
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    return mix(h, u);
}

/* Everything of an op the cost and memory models read, bar names and
 * tensor identities (the wiring is compared separately). */
static uint64_t op_hash(const sb_model *m, const sb_op *op)
{
    uint64_t h = mix(0, (uint64_t)op->kind);
    h = mix(h, (uint64_t)op->ndims);
    for (int d = 0; d < op->ndims; d++) {
        h = mix(h, (uint64_t)op->dims[d].size);
        for (const char *s = op->dims[d].name; *s; s++)
            h = mix(h, (uint64_t)(unsigned char)*s);
        h = mix(h, (uint64_t)op->role[d]);
    }
    h = mix(h, op->nosplit);
    h = mix(h, (uint64_t)(op->nin * 64 + op->nout));
    for (int k = 0; k < op->nin + op->nout; k++) {
        const sb_operand *o = k < op->nin ? &op->in[k] : &op->out[k - op->nin];
        const sb_tensor *t = &m->tensors[o->tensor];
        h = mix(h, (uint64_t)(t->kind * 64 + t->ndims));
        for (int j = 0; j < t->ndims; j++)
            h = mix(mix(h, (uint64_t)t->dims[j].size), (uint64_t)(int64_t)o->map[j]);
    }
    h = mix(h, (uint64_t)op->nweights);
    for (int w = 0; w < op->nweights; w++)
        for (int j = 0; j < op->weights[w].ndims; j++)
            h = mix(mix(h, (uint64_t)op->weights[w].size[j]), (uint64_t)(int64_t)op->weights[w].map[j]);
    h = mix(h, op->stat_dims);
    int attrs[] = {op->pw, op->axis, op->causal, op->pos_axis, (int)op->axes, op->kernel[0],
                   op->kernel[1], op->stride[0], op->stride[1], op->pad[0], op->pad[1],
                   op->dilation[0], op->dilation[1], op->groups, op->pool_avg, op->batchnorm,
                   op->layers, op->fn, op->topk};
    for (size_t a = 0; a < sizeof attrs / sizeof attrs[0]; a++)
        h = mix(h, (uint64_t)(int64_t)attrs[a]);
    for (int d = 0; d < SB_MAX_DIMS; d++)
        h = mix(h, (uint64_t)(int64_t)op->perm[d]);
    return mixd(mixd(h, op->theta), op->moe_aux);
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
static int ops_same(const sb_model *m, const sb_op *a, const sb_op *b)
{
    if (a->kind != b->kind || a->ndims != b->ndims || a->nosplit != b->nosplit
        || a->nin != b->nin || a->nout != b->nout || a->nweights != b->nweights
        || a->stat_dims != b->stat_dims || a->pw != b->pw || a->axis != b->axis
        || a->causal != b->causal || a->pos_axis != b->pos_axis || a->theta != b->theta
        || a->axes != b->axes || a->groups != b->groups || a->pool_avg != b->pool_avg
        || a->batchnorm != b->batchnorm || a->layers != b->layers || a->fn != b->fn
        || a->topk != b->topk || a->moe_aux != b->moe_aux
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
static int64_t wire(const sb_model *m, int i, int v, int k)
{
    const sb_tensor *t = &m->tensors[m->ops[v].in[k].tensor];
    if (t->producer < i || t->producer >= v)
        return -1;
    return (int64_t)(t->producer - i) * 64 + t->producer_slot;
}

/* ---- the search's state --------------------------------------------------------- */

typedef struct {
    uint64_t key;
    int what;          /* ENTRY_STAGE: a stage's optimum; ENTRY_LEAST_MEM: t is its least memory */
    int i, j, d, M, k; /* the first stage with this structure: ops [i, j), k act copies (-1: no limit) */
    int rc, zero;      /* recomputes every recomputable op (0 or 1); the ZeRO stage */
    double t;          /* intra-op optimum per micro-batch; INFINITY: nothing fits or given up */
    double least;      /* nothing fits: the least memory of the stage */
    double gap;        /* Lagrangian relaxation: the relative gap of t to its dual bound (else 0) */
    int *cfg;          /* (j - i) * SB_MAX_DIMS; ENTRY_DUAL: the bound's minimiser */
    double *cost;      /* (j - i) */
    int *cfg_b;        /* Lagrangian: the non-fitting end of the hull edge its walk ended on
                          ((j - i) * SB_MAX_DIMS), or NULL */
} stage_entry;

enum { ENTRY_STAGE = 0, ENTRY_LEAST_MEM = 1, ENTRY_DUAL = 2 };

typedef struct {
    double c;          /* least cost' over configs */
    double wg, a, s;   /* least (weights + grads + optimizer + act grads), activations, scratch */
} op_bound;

typedef struct {
    const sb_model *m;
    int p;
    sb_cost_params cp;
    const sb_pipe_opts *o;
    sb_search_opts dp;  /* o->dp, with the DP memo every stage DP shares (o->no_shared_memo:
                           none) */
    sb_error *err;
    uint64_t *hop;      /* nops: op_hash */
    int *rep;           /* nops: the first op equal to op i */
    int *last;          /* ntensors: last reader */
    int nseg;           /* segments between allowed cuts */
    int *seg;           /* nseg + 1 op positions */
    sb_model *mb;       /* per M (index: position in Ms) */
    int *Ms, nM;
    uint64_t *hseg;     /* (nseg + 1)^2: hash of segments [a, b), 0: not yet */
    stage_entry **tab;  /* open addressing; entries stay where they are */
    size_t cap, used;
    uint64_t serial;    /* brute: every stage its own key */
    sb_pipe_result *r;
    int brute;          /* sb_pipe_brute: every stage by enumeration */
    int rc_choose;      /* each stage chooses to recompute or not (under a limit, or brute) */
    int rc_fixed;       /* else: every stage recomputes (1) or none does (0) */
    double least_lb;    /* the least lower bound of a stage range's memory met (the bounds) */
    long canon;         /* the (S, M, schedule) being searched: its rank in the canonical order */
    long best_canon;    /* the rank of the one whose step is in X->r (LONG_MAX: none yet) */
    /* op_bounds' (d, M): per op equal to no earlier one (rep[v] == v), its
     * configs' memory terms cm[cm_off[v] .. cm_off[v + 1]) (3 doubles each:
     * weights + grads + optimizer + act grads, activations, scratch) */
    double *cm;
    int *cm_off;        /* nops + 1 */
    /* least_mem's work arrays */
    int *cnt;           /* nops: ops of the range equal to op u (u a rep) */
    double *cur;        /* nops */
    size_t cm_cap;
    int *cm_perm;       /* per rep u, its entries cm_off[u] .. cm_off[u + 1] by scratch
                           ascending, stably (op_bounds) */
    size_t perm_cap;
    struct mem_item *items;
    size_t items_cap;
    /* dual bounds: the multiplier of the latest Lagrangian stage solved per
     * (d, M, k, rc, zero), replaced in turn when full */
    struct lam_hint { int d, M, k, rc, zero; double lam; } hints[64];
    int nhints, hint_next;
} pctx;

/* One config of one op in least_mem's sweep. */
struct mem_item {
    double s, val;      /* scratch; weights + grads + optimizer + act grads + k x activations */
    int u;              /* the op (a rep) */
};

/* The recompute modes the bounds cover: the fixed one, or both when each
 * stage chooses (lo..hi, 0 none, 1 every recomputable op; a recomputed op's
 * vertex cost has sb_recompute_cost through the stage problem's cp). */
static int rc_lo(const pctx *X) { return X->rc_choose ? 0 : X->rc_fixed; }
static int rc_hi(const pctx *X) { return X->rc_choose ? 1 : X->rc_fixed; }

/* Whether configs cfg of ops [i, j) fit the limit with k act copies,
 * recomputed when rc: 1 yes, 0 no, -1 error (X->err). */
static int fits_at(pctx *X, const sb_model *mb, int i, int j, const int *cfg, int k, int rc)
{
    double m = INFINITY;
    if (stage_memory(mb, i, j, cfg, X->o->opt, X->cp.zero, X->cp.precision, k, rc, &m, X->err))
        return -1;
    return m <= X->o->mem_limit;
}

static sb_model *micro(pctx *X, int M)
{
    for (int q = 0; q < X->nM; q++)
        if (X->Ms[q] == M)
            return &X->mb[q];
    return NULL;
}

static uint64_t range_hash(const pctx *X, const sb_model *mb, int i, int j)
{
    uint64_t h = mix(0, (uint64_t)(j - i));
    for (int v = i; v < j; v++) {
        h = mix(h, X->hop[v]);
        for (int k = 0; k < mb->ops[v].nin; k++)
            h = mix(h, (uint64_t)wire(mb, i, v, k));
    }
    return h;
}

static int ranges_same(const pctx *X, const sb_model *mb, int i, int j, int i2, int j2)
{
    if (j - i != j2 - i2)
        return 0;
    for (int v = i, w = i2; v < j; v++, w++) {
        if (X->rep[v] != X->rep[w] && !ops_same(X->m, &X->m->ops[v], &X->m->ops[w]))
            return 0;
        for (int k = 0; k < mb->ops[v].nin; k++)
            if (wire(mb, i, v, k) != wire(mb, i2, w, k))
                return 0;
    }
    return 1;
}

static int tab_grow(pctx *X)
{
    size_t ncap = X->cap ? X->cap * 2 : 1024;
    stage_entry **nt = sb_calloc(ncap, sizeof *nt, X->err);
    if (!nt)
        return -1;
    for (size_t q = 0; q < X->cap; q++)
        if (X->tab[q]) {
            size_t h = X->tab[q]->key & (ncap - 1);
            while (nt[h])
                h = (h + 1) & (ncap - 1);
            nt[h] = X->tab[q];
        }
    free(X->tab);
    X->tab = nt;
    X->cap = ncap;
    return 0;
}

/* Stores a new entry (a copy of e) in a free slot. */
static stage_entry *tab_put(pctx *X, const stage_entry *e)
{
    if ((X->used + 1) * 2 >= X->cap && tab_grow(X))
        return NULL;
    stage_entry *ne = sb_malloc(sizeof *ne, X->err);
    if (!ne)
        return NULL;
    *ne = *e;
    size_t h = e->key & (X->cap - 1);
    while (X->tab[h])
        h = (h + 1) & (X->cap - 1);
    X->tab[h] = ne;
    X->used++;
    return ne;
}

static long configs_total(const sb_problem *pb)
{
    long n = 0;
    for (int v = 0; v < pb->m->nops; v++)
        n += pb->cfg[v].n;
    return n;
}

/* Exhaustive intra-op search of a stage problem (sb_pipe_brute): the least
 * cost whose memory fits, every config combination. */
static int brute_stage(const sb_problem *pb, double limit, sb_optimizer opt, int *best,
                       double *bestc, sb_error *err)
{
    int n = pb->m->nops;
    int *x = sb_calloc((size_t)n, sizeof *x, err);
    if (!x)
        return -1;
    *bestc = INFINITY;
    for (;;) {
        double c = sb_strategy_cost(pb, x);
        if (c < *bestc && (!(limit > 0) || sb_strategy_memory(pb, x, opt, NULL) <= limit)) {
            *bestc = c;
            memcpy(best, x, (size_t)n * sizeof *x);
        }
        int v = 0;
        while (v < n && ++x[v] == pb->cfg[v].n)
            x[v++] = 0;
        if (v == n)
            break;
    }
    free(x);
    return 0;
}

/* Stage problems with more configs than this (over all their ops) are
 * solved under a memory limit by Lagrangian relaxation, not by the exact
 * Pareto search (sb_search_within), whose labels take minutes there (one
 * GPT-3 stage of 24 ops on 16 devices: over a minute). */
#define EXACT_MEM_CONFIGS 512

/* Bounds are sums in another order than the DP's: this factor keeps a
 * bound under the value it bounds despite rounding. */
#define BOUND_SLACK (1.0 - 1e-12)

/* The DP memo the stage DPs share: at most this many bytes (and a quarter
 * of --max-table-mb) of remembered tables and eliminations. */
#define SHARED_MEMO_BYTES 256e6

/* The multiplier of a Lagrangian stage like e (its d, M, k, rc, ZeRO
 * stage) kept for dual bounds of others. */
static void hint_put(pctx *X, const stage_entry *e, double lam)
{
    struct lam_hint h = {e->d, e->M, e->k, e->rc, e->zero, lam};
    for (int q = 0; q < X->nhints; q++)
        if (X->hints[q].d == h.d && X->hints[q].M == h.M && X->hints[q].k == h.k
            && X->hints[q].rc == h.rc && X->hints[q].zero == h.zero) {
            X->hints[q] = h;
            return;
        }
    int n = (int)(sizeof X->hints / sizeof X->hints[0]);
    X->hints[X->nhints < n ? X->nhints++ : X->hint_next++ % n] = h;
}

/* A multiplier for a stage at (d, M, k, rc): the one kept for the same
 * copies k, else for the nearest k; -1 when none (only a guess: any
 * multiplier >= 0 gives a valid bound). */
static double hint_get(const pctx *X, int d, int M, int k, int rc)
{
    double lam = -1.0;
    int dk = -1;
    for (int q = 0; q < X->nhints; q++) {
        const struct lam_hint *h = &X->hints[q];
        if (h->d != d || h->M != M || h->rc != rc || h->zero != X->cp.zero)
            continue;
        int dist = abs(h->k - k);
        if (dk < 0 || dist < dk)
            dk = dist, lam = h->lam;
    }
    return lam;
}

static uint64_t entry_key(pctx *X, int what, int i, int j, int d, int M, int k, int rc);
static stage_entry *entry_find(pctx *X, int what, uint64_t key, int i, int j, int d, int M, int k,
                               int rc);

/* The index of config cfg (ndims split counts) among op v's configs in
 * pb, or -1. */
static int config_index(const sb_problem *pb, int v, const int *cfg)
{
    const sb_configs *cf = &pb->cfg[v];
    for (int x = 0; x < cf->n; x++)
        if (!memcmp(cf->c + (size_t)x * (size_t)cf->ndims, cfg, (size_t)cf->ndims * sizeof *cfg))
            return x;
    return -1;
}

/* An upper bound of the exact stage e (k copies, under limit) for its DP
 * (sb_search_within_ub): the least cost in pb of the optima of the same
 * stage at nearby other copies k2 (cached: the same structure, d, M, rc
 * and ZeRO stage) whose configs fit pb under the limit, with a margin for
 * the sums' order; INFINITY when none (or o->no_stage_ub). choice: pb's
 * ops, scratch. */
static double stage_ub(pctx *X, const stage_entry *e, const sb_problem *pb, double limit,
                       int *choice)
{
    double ub = INFINITY;
    if (X->o->no_stage_ub || X->brute || X->o->no_shortcuts || e->k < 1)
        return ub;
    int n = e->j - e->i;
    for (int k2 = e->k - 8; k2 <= e->k + 8; k2++) {
        if (k2 < 1 || k2 == e->k)
            continue;
        stage_entry *w = entry_find(X, ENTRY_STAGE, entry_key(X, ENTRY_STAGE, e->i, e->j, e->d,
                                                                e->M, k2, e->rc),
                                    e->i, e->j, e->d, e->M, k2, e->rc);
        if (!w || !w->cfg)
            continue;
        int v = 0;
        for (; v < n; v++)
            if ((choice[v] = config_index(pb, v, w->cfg + (size_t)v * SB_MAX_DIMS)) < 0)
                break;
        if (v < n || !(sb_strategy_memory(pb, choice, X->o->opt, NULL) <= limit * (1.0 - 1e-9)))
            continue;
        ub = fmin(ub, sb_strategy_cost(pb, choice));
    }
    if (isfinite(ub))
        X->r->stage_ubs++;
    return ub;
}

/* Strategies of the same stage met before, as starts for e's Lagrangian
 * walk (sb_lagrange_search_seeded), each mapped to pb's config indices
 * (malloc'd; *nseeds of them): the minimiser of its dual bound at the
 * same copies, and both ends of the hull edge of the nearest two searches
 * of the same structure at other copies (up to SEED_DIST away). None when
 * o->no_lagrange_seeds. */
#define LAGRANGE_SEEDS 5
#define SEED_DIST 128
static int lagrange_seeds(pctx *X, const stage_entry *e, const sb_problem *pb, int **seeds,
                          int *nseeds)
{
    *nseeds = 0;
    if (X->o->no_lagrange_seeds || X->o->no_shortcuts || X->brute || e->k < 1)
        return 0;
    int n = e->j - e->i;
    const int *from[LAGRANGE_SEEDS];
    int nf = 0;
    stage_entry *du = entry_find(X, ENTRY_DUAL, entry_key(X, ENTRY_DUAL, e->i, e->j, e->d, e->M,
                                                          e->k, e->rc),
                                 e->i, e->j, e->d, e->M, e->k, e->rc);
    if (du && du->cfg)
        from[nf++] = du->cfg;
    for (int dist = 1; dist <= SEED_DIST && nf + 2 <= LAGRANGE_SEEDS; dist++)
        for (int sgn = -1; sgn <= 1 && nf + 2 <= LAGRANGE_SEEDS; sgn += 2) {
            int k2 = e->k + sgn * dist;
            if (k2 < 1)
                continue;
            stage_entry *w = entry_find(X, ENTRY_STAGE, entry_key(X, ENTRY_STAGE, e->i, e->j,
                                                                  e->d, e->M, k2, e->rc),
                                        e->i, e->j, e->d, e->M, k2, e->rc);
            if (!w || !w->cfg || !w->cfg_b)
                continue;
            from[nf++] = w->cfg;
            from[nf++] = w->cfg_b;
        }
    for (int q = 0; q < nf; q++) {
        int *x = sb_malloc((size_t)n * sizeof *x, X->err);
        if (!x)
            return -1;
        int v = 0;
        for (; v < n; v++)
            if ((x[v] = config_index(pb, v, from[q] + (size_t)v * SB_MAX_DIMS)) < 0)
                break;
        if (v < n)
            free(x);
        else
            seeds[(*nseeds)++] = x;
    }
    return 0;
}

/* Runs the DP of one stage into e. */
static int solve_stage(pctx *X, const sb_model *mb, stage_entry *e)
{
    double ts = sb_now();
    sb_model sub;
    sb_problem pb;
    if (sub_model(mb, e->i, e->j, &sub, X->err))
        return -1;
    int k = e->k < 0 ? 0 : e->k;
    sb_cost_params c2 = X->cp;
    c2.recompute = e->rc ? SB_RECOMPUTE_ALL : SB_RECOMPUTE_NONE;
    if (stage_problem(&sub, e->d, e->M, &c2, k, &pb, X->err)) {
        free(sub.ops), free(sub.tensors);
        return -1;
    }
    int n = e->j - e->i, rc = 0;
    e->cfg = sb_calloc((size_t)n * SB_MAX_DIMS, sizeof *e->cfg, X->err);
    e->cost = sb_calloc((size_t)n, sizeof *e->cost, X->err);
    int *choice = sb_calloc((size_t)n, sizeof *choice, X->err);
    if (!e->cfg || !e->cost || !choice) {
        rc = -1;
        goto out;
    }
    double limit = e->k >= 0 ? X->o->mem_limit : 0.0;
    X->r->subproblems++;
    X->r->rc_solved += X->rc_choose && e->rc;
    if (X->brute) {
        if (brute_stage(&pb, limit, X->o->opt, choice, &e->t, X->err)) {
            rc = -1;
            goto out;
        }
    } else if (limit > 0 && configs_total(&pb) > EXACT_MEM_CONFIGS) {
        sb_lagrange_result lr;
        int nseeds = 0, *seeds[LAGRANGE_SEEDS], *bch = sb_calloc((size_t)n, sizeof *bch, X->err);
        if (!bch || lagrange_seeds(X, e, &pb, seeds, &nseeds)
            || sb_lagrange_search_seeded(&pb, &X->dp, limit, X->o->opt,
                                         (const int *const *)seeds, nseeds, choice, bch, &lr,
                                         X->err)) {
            for (int q = 0; q < nseeds; q++)
                free(seeds[q]);
            free(bch);
            rc = -1;
            goto out;
        }
        for (int q = 0; q < nseeds; q++)
            free(seeds[q]);
        X->r->lagrange_seeded += nseeds > 0;
        if (lr.lam_edge >= 0 && isfinite(lr.t)) {
            e->cfg_b = sb_calloc((size_t)n * SB_MAX_DIMS, sizeof *e->cfg_b, X->err);
            if (!e->cfg_b) {
                free(bch);
                rc = -1;
                goto out;
            }
            for (int v = 0; v < n; v++)
                memcpy(e->cfg_b + (size_t)v * SB_MAX_DIMS,
                       pb.cfg[v].c + (size_t)bch[v] * (size_t)pb.cfg[v].ndims,
                       (size_t)pb.cfg[v].ndims * sizeof(int));
        }
        free(bch);
        e->t = lr.t;
        e->least = lr.least;
        if (lr.lam > 0)
            hint_put(X, e, lr.lam);
        X->r->lagrange_stages++;
        X->r->lagrange_dps += lr.dps;
        if (isfinite(e->t)) {
            e->gap = lr.gap;
            if (lr.gap > X->r->lagrange_gap)
                X->r->lagrange_gap = lr.gap;
        }
    } else {
        sb_result res;
        sb_error e2 = {0};
        double least = NAN;
        double ub = limit > 0 ? stage_ub(X, e, &pb, limit, choice) : INFINITY;
        int src = limit > 0 ? sb_search_within_ub(&pb, &X->dp, limit, X->o->opt, ub, &res, &least,
                                                  &e2)
                            : sb_search(&pb, &X->dp, &res, &e2);
        if (src) {
            e->t = INFINITY;
            e->least = isfinite(least) ? least : INFINITY;
            if (!isfinite(least))
                X->r->ranges_given_up++; /* a budget, not "nothing fits" */
            goto out;
        }
        e->t = res.total_cost;
        memcpy(choice, res.choice, (size_t)n * sizeof *choice);
        sb_result_free(&res);
    }
    if (isfinite(e->t))
        for (int v = 0; v < n; v++) {
            memcpy(e->cfg + (size_t)v * SB_MAX_DIMS,
                   pb.cfg[v].c + (size_t)choice[v] * (size_t)pb.cfg[v].ndims,
                   (size_t)pb.cfg[v].ndims * sizeof(int));
            e->cost[v] = pb.cfg[v].cost[choice[v]];
        }
out:
    if (getenv("SB_PIPE_TRACE"))
        fprintf(stderr, "stage ops %d..%d d=%d M=%d k=%d zero=%d rc=%d: t=%.6e least=%.4g GiB, "
                "%.3f s\n", e->i, e->j, e->d, e->M, e->k, e->zero, e->rc, e->t,
                e->least / 1073741824.0, sb_now() - ts);
    if (!isfinite(e->t) && e->cfg) {
        free(e->cfg), free(e->cost), free(e->cfg_b);
        e->cfg = NULL, e->cost = NULL, e->cfg_b = NULL;
    }
    free(choice);
    sb_problem_free(&pb);
    free(sub.ops), free(sub.tensors);
    return rc;
}

/* The cache key of ops [i, j) on d devices at M micro-batches with k act
 * copies, recompute mode rc (ENTRY_LEAST_MEM: the modes the bounds cover)
 * at the current ZeRO stage, for an entry of kind `what`. */
static uint64_t entry_key(pctx *X, int what, int i, int j, int d, int M, int k, int rc)
{
    if (X->brute)
        return ++X->serial;
    int a = 0, b = 0; /* stages start and end at segment bounds */
    while (X->seg[a] < i)
        a++;
    while (X->seg[b] < j)
        b++;
    uint64_t *slot = &X->hseg[(size_t)a * (size_t)(X->nseg + 1) + (size_t)b];
    if (!*slot)
        *slot = range_hash(X, X->m, i, j) | 1;
    uint64_t key = mix(mix(mix(*slot, (uint64_t)d), (uint64_t)M), (uint64_t)(int64_t)k);
    key = mix(mix(key, (uint64_t)rc), (uint64_t)X->cp.zero);
    return what == ENTRY_STAGE ? key : mix(key, 0x6c65617374ull + (uint64_t)what);
}

/* The cached entry of kind `what` equal in structure to ops [i, j) (d, M,
 * k, rc, the current ZeRO stage), or NULL. */
static stage_entry *entry_find(pctx *X, int what, uint64_t key, int i, int j, int d, int M, int k,
                               int rc)
{
    if (X->brute || !X->cap)
        return NULL;
    sb_model *mb = micro(X, M);
    for (size_t h = key & (X->cap - 1); X->tab[h]; h = (h + 1) & (X->cap - 1)) {
        stage_entry *e = X->tab[h];
        if (e->key == key && e->what == what && e->d == d && e->M == M && e->k == k
            && e->rc == rc && e->zero == X->cp.zero && ranges_same(X, mb, i, j, e->i, e->j))
            return e;
    }
    return NULL;
}

/* A new entry for ops [i, j) that takes the configs and costs of u. */
static stage_entry *entry_copy(pctx *X, stage_entry *ne, const stage_entry *u)
{
    int n = ne->j - ne->i;
    ne->t = u->t;
    ne->gap = u->gap;
    ne->cfg = sb_malloc((size_t)n * SB_MAX_DIMS * sizeof *ne->cfg, X->err);
    ne->cost = sb_malloc((size_t)n * sizeof *ne->cost, X->err);
    if (!ne->cfg || !ne->cost) {
        free(ne->cfg), free(ne->cost);
        return NULL;
    }
    memcpy(ne->cfg, u->cfg, (size_t)n * SB_MAX_DIMS * sizeof *ne->cfg);
    memcpy(ne->cost, u->cost, (size_t)n * sizeof *ne->cost);
    stage_entry *e = tab_put(X, ne);
    if (!e)
        free(ne->cfg), free(ne->cost);
    return e;
}

/* The stage of ops [i, j) on d devices at M micro-batches with k act
 * copies (-1: no memory limit): from the cache, or solved. NULL on error.
 * Under a limit, before any DP (each exact): the unconstrained optimum,
 * when it fits at k; the optimum at fewer copies k' < k, when it fits at k
 * (its memory only grows with the copies, so t(k) >= t(k'): it is optimal at
 * k, within the same gap to the same bound when Lagrangian); at k > 1 the
 * optimum at k' = 1 is solved first for that test, and when nothing fits
 * at 1 copy nothing fits at k. */
static stage_entry *stage_rc(pctx *X, int i, int j, int d, int M, int k, int rc)
{
    sb_model *mb = micro(X, M);
    uint64_t key = entry_key(X, ENTRY_STAGE, i, j, d, M, k, rc);
    if (!X->cap && tab_grow(X))
        return NULL;
    stage_entry *hit = entry_find(X, ENTRY_STAGE, key, i, j, d, M, k, rc);
    if (hit) {
        X->r->cache_hits++;
        return hit;
    }
    stage_entry ne = {.key = key, .what = ENTRY_STAGE, .i = i, .j = j, .d = d, .M = M, .k = k,
                      .rc = rc, .zero = X->cp.zero};
    if (k >= 0 && !X->brute) {
        stage_entry *u = stage_rc(X, i, j, d, M, -1, rc);
        if (!u)
            return NULL;
        int f = u->cfg ? fits_at(X, mb, i, j, u->cfg, k, rc) : 0;
        if (f < 0)
            return NULL;
        if (f)
            return entry_copy(X, &ne, u);
        for (int kk = X->o->no_shortcuts ? 0 : k - 1; kk >= 1; kk--) {
            stage_entry *w = entry_find(X, ENTRY_STAGE,
                                        entry_key(X, ENTRY_STAGE, i, j, d, M, kk, rc), i, j, d, M,
                                        kk, rc);
            f = w && w->cfg ? fits_at(X, mb, i, j, w->cfg, k, rc) : 0;
            if (f < 0)
                return NULL;
            if (f) {
                X->r->copies_reused++;
                return entry_copy(X, &ne, w);
            }
        }
        if (k > 1 && !X->o->no_shortcuts) {
            stage_entry *w = stage_rc(X, i, j, d, M, 1, rc);
            if (!w)
                return NULL;
            f = w->cfg ? fits_at(X, mb, i, j, w->cfg, k, rc) : 0;
            if (f < 0)
                return NULL;
            if (f) {
                X->r->copies_reused++;
                return entry_copy(X, &ne, w);
            }
            if (!isfinite(w->t) && isfinite(w->least)) { /* nothing fits at 1 copy */
                ne.t = INFINITY;
                ne.least = w->least;
                X->r->copies_reused++;
                return tab_put(X, &ne);
            }
        }
    }
    if (solve_stage(X, mb, &ne))
        return NULL;
    stage_entry *e = tab_put(X, &ne);
    if (!e)
        free(ne.cfg), free(ne.cost);
    return e;
}

/* Memory skip (exact): 1 when each stage chooses its recomputation and the
 * exact least memory of ops [i, j) kept (every config choice, k copies) is
 * over the limit, so no kept strategy fits and its DP need not run; 0 else
 * (also with o->no_skips or brute force: the DP decides); -1 on error. */
static int least_mem_mode(pctx *X, int i, int j, int d, int M, int k, int mode, double *out);

static int kept_over(pctx *X, int i, int j, int d, int M, int k)
{
    double lm = 0.0;
    if (!X->rc_choose || k < 0 || X->brute || X->o->no_shortcuts || X->o->no_skips)
        return 0;
    if (least_mem_mode(X, i, j, d, M, k, 0, &lm))
        return -1;
    return lm * BOUND_SLACK > X->o->mem_limit;
}

/* The stage of ops [i, j) (d, M, k as stage_rc) in its recompute mode:
 * the fixed one, or, when each stage chooses, the better of none and all
 * (ties: none). Exact shortcut: recomputing adds sb_recompute_cost >= 0 to
 * every config's vertex cost and leaves the edges as they are, so every
 * strategy costs at least as much recomputed as kept, and the recomputing
 * optimum under the limit is at least the kept unconstrained optimum, and
 * at least the recomputing unconstrained one; when the kept optimum under
 * the limit is at most either, recomputing cannot win and is not solved
 * (r->rc_dominated). */
static stage_entry *stage(pctx *X, int i, int j, int d, int M, int k)
{
    if (!X->rc_choose || k < 0) /* no limit: kept (recomputing costs no less) */
        return stage_rc(X, i, j, d, M, k, X->rc_choose ? 0 : X->rc_fixed);
    int over = kept_over(X, i, j, d, M, k);
    if (over < 0)
        return NULL;
    if (over) { /* kept fits no config choice: recomputed, unless that fails too (then as
                   below, which reports the lesser least memory) */
        stage_entry *ea = stage_rc(X, i, j, d, M, k, 1);
        if (!ea || isfinite(ea->t))
            return ea;
    }
    stage_entry *en = stage_rc(X, i, j, d, M, k, 0);
    if (!en)
        return NULL;
    if (!X->o->no_shortcuts && isfinite(en->t)) {
        stage_entry *un = stage_rc(X, i, j, d, M, -1, 0);
        if (!un)
            return NULL;
        if (en->t <= un->t) {
            X->r->rc_dominated++;
            return en;
        }
        stage_entry *ua = stage_rc(X, i, j, d, M, -1, 1);
        if (!ua)
            return NULL;
        if (en->t <= ua->t) {
            X->r->rc_dominated++;
            return en;
        }
    }
    stage_entry *ea = stage_rc(X, i, j, d, M, k, 1);
    if (!ea)
        return NULL;
    if (ea->t < en->t)
        return ea;
    if (!isfinite(en->t) && !isfinite(ea->t) && ea->least < en->least)
        return ea; /* nothing fits either way: the lesser least memory */
    return en;
}

/* The Lagrangian dual bound of ops [i, j) with k copies in mode rc at
 * multiplier lam >= 0, by one DP: every strategy stage_rc can return fits
 * (resident bytes plus its largest scratch, at least the least scratch
 * s_lb, within the limit), so it costs at least min over strategies of
 * (cost + lam resident) - lam (limit - s_lb). Cached by structure; its
 * minimiser kept as a start for the range's Lagrangian walk. */
static int dual_bound(pctx *X, int i, int j, int d, int M, int k, int rc, double lam, double *lb)
{
    uint64_t key = entry_key(X, ENTRY_DUAL, i, j, d, M, k, rc);
    stage_entry *hit = entry_find(X, ENTRY_DUAL, key, i, j, d, M, k, rc);
    if (hit) {
        *lb = hit->t;
        return 0;
    }
    double ts = sb_now(), limit = X->o->mem_limit;
    sb_model sub;
    sb_problem pb;
    if (sub_model(micro(X, M), i, j, &sub, X->err))
        return -1;
    sb_cost_params c2 = X->cp;
    c2.recompute = rc ? SB_RECOMPUTE_ALL : SB_RECOMPUTE_NONE;
    if (stage_problem(&sub, d, M, &c2, k, &pb, X->err)) {
        free(sub.ops), free(sub.tensors);
        return -1;
    }
    double s_lb = 0.0;
    for (int v = 0; v < pb.m->nops; v++) {
        double smin = INFINITY;
        for (int x = 0; x < pb.cfg[v].n; x++) {
            sb_mem mm;
            sb_problem_op_memory(&pb, v, x, X->o->opt, &mm);
            pb.cfg[v].cost[x] += lam * sb_mem_resident(&mm);
            smin = fmin(smin, mm.scratch);
        }
        s_lb = fmax(s_lb, smin);
    }
    sb_result r;
    int n = j - i, *cfg = NULL;
    int rc2 = sb_search(&pb, &X->dp, &r, X->err);
    if (!rc2) {
        /* the DP's sums and the strategies' costs are added in other
         * orders: slack on both terms keeps the bound under */
        *lb = r.total_cost * BOUND_SLACK - lam * (limit - s_lb) / BOUND_SLACK;
        /* its minimiser: a start for the range's Lagrangian walk */
        cfg = sb_calloc((size_t)n * SB_MAX_DIMS, sizeof *cfg, X->err);
        for (int v = 0; cfg && v < n; v++)
            memcpy(cfg + (size_t)v * SB_MAX_DIMS,
                   pb.cfg[v].c + (size_t)r.choice[v] * (size_t)pb.cfg[v].ndims,
                   (size_t)pb.cfg[v].ndims * sizeof(int));
        sb_result_free(&r);
        rc2 = cfg ? 0 : -1;
    }
    sb_problem_free(&pb);
    free(sub.ops), free(sub.tensors);
    if (rc2)
        return -1;
    X->r->dual_bounds++;
    if (getenv("SB_PIPE_TRACE"))
        fprintf(stderr, "dual ops %d..%d d=%d M=%d k=%d zero=%d rc=%d lambda %.4g: %.6e, %.3f s\n",
                i, j, d, M, k, X->cp.zero, rc, lam, *lb, sb_now() - ts);
    stage_entry ne = {.key = key, .what = ENTRY_DUAL, .i = i, .j = j, .d = d, .M = M, .k = k,
                      .rc = rc, .zero = X->cp.zero, .t = *lb, .cfg = cfg};
    if (tab_put(X, &ne))
        return 0;
    free(cfg);
    return -1;
}



/* Whether a Lagrangian search of ops [i, j)'s structure at copies within
 * k +- 8 (either mode) ended on a hull edge: its walk at k then starts
 * from that edge (lagrange_seeds) and takes about one DP, what a dual
 * bound takes, so the range is solved rather than bounded. */
static int seeds_near(pctx *X, int i, int j, int d, int M, int k)
{
    if (X->o->no_lagrange_seeds || X->o->no_shortcuts || X->brute)
        return 0;
    for (int rc = rc_lo(X); rc <= rc_hi(X); rc++)
        for (int k2 = k - SEED_DIST; k2 <= k + SEED_DIST; k2++) {
            if (k2 < 1 || k2 == k)
                continue;
            stage_entry *w = entry_find(X, ENTRY_STAGE,
                                        entry_key(X, ENTRY_STAGE, i, j, d, M, k2, rc), i, j, d,
                                        M, k2, rc);
            if (w && w->cfg_b)
                return 1;
        }
    return 0;
}

/* A lower bound of the stage of ops [i, j) under the limit with k copies
 * as stage() gives it (either mode when each stage chooses: the lesser of
 * the two bounds, only the recomputed one when no kept strategy fits),
 * each mode's bound the larger of its unconstrained optimum and its dual
 * bound at the multiplier of a Lagrangian stage like it (hint_get; none:
 * the unconstrained optimum alone). -1 on error. */
static int stage_dual_lower(pctx *X, int i, int j, int d, int M, int k, double *lb)
{
    int over = 0;
    if (X->rc_choose && (over = kept_over(X, i, j, d, M, k)) < 0)
        return -1;
    double lbm[2] = {INFINITY, INFINITY};
    for (int rc = rc_lo(X); rc <= rc_hi(X); rc++) {
        if (rc == 0 && over)
            continue;
        if (rc == 1 && X->rc_choose && lbm[0] < INFINITY) {
            /* the recomputed mode costs at least its unconstrained optimum,
             * which is at least the kept one: no DP when that already says it */
            stage_entry *ua = stage_rc(X, i, j, d, M, -1, 1);
            if (!ua)
                return -1;
            if (ua->t * BOUND_SLACK >= lbm[0])
                break;
        }
        stage_entry *u = stage_rc(X, i, j, d, M, -1, rc);
        if (!u)
            return -1;
        lbm[rc] = isfinite(u->t) ? u->t * BOUND_SLACK : -INFINITY;
        double lam = hint_get(X, d, M, k, rc), du = -INFINITY;
        if (lam > 0 && dual_bound(X, i, j, d, M, k, rc, lam, &du))
            return -1;
        lbm[rc] = fmax(lbm[rc], du);
    }
    *lb = fmin(lbm[0], lbm[1]);
    return 0;
}

/* ---- bounds ------------------------------------------------------------------------ */

/* Entry indices by their scratch (cm[3 i + 2]; ctx: cm), stably. */
#define SCRATCH_LESS(ctx, x, y) \
    (((const double *)(ctx))[3 * (size_t)(x) + 2] < ((const double *)(ctx))[3 * (size_t)(y) + 2])
SB_DEFINE_MSORT(msort_by_scratch, int, SCRATCH_LESS)

/* X->cm_perm for op_bounds' entries: each rep's entries by scratch,
 * stably. */
static int sort_reps(pctx *X, int nops)
{
    size_t n = (size_t)X->cm_off[nops];
    if (2 * n > X->perm_cap) { /* the permutation and the merge's scratch */
        int *q = realloc(X->cm_perm, (2 * n + 1) * sizeof *q);
        if (!q)
            return sb_fail(X->err, SB_EXIT_INTERNAL, "out of memory");
        X->cm_perm = q, X->perm_cap = 2 * n + 1;
    }
    int *tmp = X->cm_perm + n;
    for (int u = 0; u < nops; u++) {
        int o = X->cm_off[u], e = X->cm_off[u + 1];
        if (X->rep[u] != u || e <= o)
            continue;
        int *idx = X->cm_perm + o;
        size_t len = (size_t)(e - o);
        for (size_t x = 0; x < len; x++)
            idx[x] = o + (int)x;
        msort_by_scratch(idx, tmp + o, len, X->cm);
    }
    return 0;
}

/* Per op of the micro model at d devices: least cost' and least memory
 * terms over its configs (equal ops computed once). */
static int op_bounds(pctx *X, const sb_model *mb, int d, int M, op_bound *b)
{
    size_t ncm = 0;
    for (int v = 0; v < mb->nops; v++) {
        X->cm_off[v] = (int)(ncm / 3);
        if (X->rep[v] != v) {
            b[v] = b[X->rep[v]];
            continue;
        }
        const sb_op *op = &mb->ops[v];
        sb_configs cf;
        int cutoff = X->cp.cutoff > 0 ? X->cp.cutoff : X->m->cutoff;
        if (sb_enumerate_configs(op, d, cutoff, &cf, X->err))
            return -1;
        sb_cost_params c2 = X->cp;
        c2.devices = d;
        b[v] = (op_bound){INFINITY, INFINITY, INFINITY, INFINITY};
        size_t nmodes = (size_t)(rc_hi(X) - rc_lo(X) + 1);
        if (ncm + 3 * nmodes * (size_t)cf.n > X->cm_cap) {
            size_t nc = 2 * (ncm + 3 * nmodes * (size_t)cf.n);
            double *q = realloc(X->cm, nc * sizeof *q);
            if (!q) {
                free(cf.c), free(cf.cost);
                return sb_fail(X->err, SB_EXIT_INTERNAL, "out of memory");
            }
            X->cm = q, X->cm_cap = nc;
        }
        for (int x = 0; x < cf.n; x++) {
            const int *c = cf.c + (size_t)x * (size_t)cf.ndims;
            double cost = sb_op_cost(mb, op, c, &c2);
            if (M > 1)
                cost -= (double)(M - 1) / M * sb_weight_grad_cost(mb, op, c, &c2);
            b[v].c = fmin(b[v].c, cost); /* kept: recomputing only adds cost */
            for (int rc = rc_lo(X); rc <= rc_hi(X); rc++) {
                /* recomputed: the op's least memory without its stage's kept
                 * inputs, still a bound (they move scratch to activations held
                 * at least once); both modes when each stage chooses: the
                 * least over them bounds either */
                sb_mem mm;
                sb_op_memory_prec(mb, op, c, X->o->opt, X->cp.zero, rc, X->cp.precision, &mm);
                double wg = mm.weights + mm.weight_grads + mm.optimizer + mm.act_grads;
                b[v].wg = fmin(b[v].wg, wg);
                b[v].a = fmin(b[v].a, mm.activations);
                b[v].s = fmin(b[v].s, mm.scratch);
                X->cm[ncm++] = wg, X->cm[ncm++] = mm.activations, X->cm[ncm++] = mm.scratch;
            }
        }
        free(cf.c);
        free(cf.cost);
    }
    X->cm_off[mb->nops] = (int)(ncm / 3);
    return sort_reps(X, mb->nops);
}

/* Sorts it[0, n) by scratch, stably (equal scratch: the order listed, as
 * glibc's merge sort behind qsort did, so least_mem adds its sums in the
 * same order on any C library), by merging its ascending runs pairwise
 * (least_mem lists each rep's items as one run, op_bounds' cm_perm: a
 * stable sort of the runs is the stable sort of the items in config
 * order, as ties keep the rep's order and then the config's); tmp: n
 * items. */
static void sort_items(struct mem_item *it, struct mem_item *tmp, size_t n)
{
    struct mem_item *src = it, *dst = tmp;
    int again = n > 1;
    while (again) {
        again = 0;
        size_t a = 0, o = 0;
        while (a < n) {
            size_t m = a + 1, b;
            while (m < n && !(src[m].s < src[m - 1].s))
                m++;
            for (b = m < n ? m + 1 : m; b < n && !(src[b].s < src[b - 1].s); b++)
                ;
            again |= m < n;
            size_t i = a, j = m;
            while (i < m && j < b)
                dst[o++] = src[j].s < src[i].s ? src[j++] : src[i++];
            while (i < m)
                dst[o++] = src[i++];
            while (j < b)
                dst[o++] = src[j++];
            a = b;
        }
        struct mem_item *sw = src;
        src = dst;
        dst = sw;
    }
    if (src != it)
        memcpy(it, src, n * sizeof *it);
}

/* The least memory per device of ops [i, j) with k act copies over every
 * config choice (stage_memory's model: each op's resident bytes, plus the
 * largest scratch), exactly: memory is per op, so for each scratch level
 * sigma (the ops' scratch values, ascending) each op takes its least
 * resident bytes among configs with scratch <= sigma; the least over sigma
 * of sigma + their sum. Cached by structure; needs op_bounds of (d, M).
 * When each stage chooses its recomputation, op_bounds lists every config
 * in both modes, so each op takes its own mode here: a lower bound of the
 * stage's least memory in either mode (not always reached), still
 * non-decreasing as ops are added. */
static int least_mem(pctx *X, int i, int j, int d, int M, int k, double *out)
{
    return least_mem_mode(X, i, j, d, M, k, -1, out);
}

/* least_mem of one recompute mode (0 kept, 1 recomputed) when each stage
 * chooses (op_bounds listed both, mode by mode per config: only that
 * mode's entries taken); mode -1: the modes op_bounds listed. */
static int least_mem_mode(pctx *X, int i, int j, int d, int M, int k, int mode, double *out)
{
    int both = X->rc_choose && mode >= 0;             /* entries x of mode: x % 2 == mode */
    int modes = both ? 3 + mode : X->rc_choose ? 2 : X->rc_fixed; /* the cache's key */
    uint64_t key = entry_key(X, ENTRY_LEAST_MEM, i, j, d, M, k, modes);
    stage_entry *hit = entry_find(X, ENTRY_LEAST_MEM, key, i, j, d, M, k, modes);
    if (hit) {
        *out = hit->t;
        return 0;
    }
    double kk = k > 1 ? k : 1;
    size_t n = 0;
    int nreps = 0;
    for (int v = i; v < j; v++)
        if (X->cnt[X->rep[v]]++ == 0) {
            int u = X->rep[v];
            nreps++;
            X->cur[u] = INFINITY;
            n += (size_t)(X->cm_off[u + 1] - X->cm_off[u]);
        }
    if (2 * n > X->items_cap) { /* the items and sort_items' scratch */
        struct mem_item *q = realloc(X->items, 4 * n * sizeof *q);
        if (!q) {
            for (int v = i; v < j; v++)
                X->cnt[X->rep[v]] = 0;
            return sb_fail(X->err, SB_EXIT_INTERNAL, "out of memory");
        }
        X->items = q, X->items_cap = 4 * n;
    }
    n = 0;
    for (int v = i; v < j; v++) {
        int u = X->rep[v];
        if (X->cnt[u] < 0)
            continue;
        for (int xi = X->cm_off[u]; xi < X->cm_off[u + 1]; xi++) {
            int x = X->cm_perm[xi]; /* by scratch: each rep one sorted run */
            if (!both || (x - X->cm_off[u]) % 2 == mode)
                X->items[n++] = (struct mem_item){.s = X->cm[3 * (size_t)x + 2],
                                              .val = X->cm[3 * (size_t)x] + kk * X->cm[3 * (size_t)x + 1],
                                              .u = u};
        }
        X->cnt[u] = -X->cnt[u]; /* listed */
    }
    sort_items(X->items, X->items + n, n);
    double best = INFINITY, sum = 0.0;
    int open = nreps;
    for (size_t q = 0; q < n; q++) {
        const struct mem_item *it = &X->items[q];
        double c = -(double)X->cnt[it->u];
        if (it->val < X->cur[it->u]) {
            if (X->cur[it->u] == INFINITY)
                open--, sum += c * it->val;
            else
                sum += c * (it->val - X->cur[it->u]);
            X->cur[it->u] = it->val;
        }
        if (!open && (q + 1 == n || X->items[q + 1].s != it->s))
            best = fmin(best, sum + it->s);
    }
    for (int v = i; v < j; v++)
        X->cnt[X->rep[v]] = 0;
    stage_entry ne = {.key = key, .what = ENTRY_LEAST_MEM, .i = i, .j = j, .d = d, .M = M, .k = k,
                      .rc = modes, .zero = X->cp.zero, .t = best};
    if (!tab_put(X, &ne))
        return -1;
    *out = best;
    return 0;
}

/* ---- one (S, M, schedule) ------------------------------------------------------- */

typedef struct {
    int a, b;     /* segments [a, b) */
    int unc;      /* t is the unconstrained optimum + p2p (1), then the dual bound (2) */
    double t;     /* t_s: intra-op optimum + p2p */
    stage_entry *e;
} srange;

static int inflight(const sb_pipe_opts *o, int S, int M, int sched, int s)
{
    (void)o;
    if (sched == SB_SCHEDULE_GPIPE)
        return M;
    return M < S - s ? M : S - s;
}

/* The least sum over partitions into S stages using, for stage s, the
 * ranges in R[s] with t <= cap; parent (if not NULL) gets the argmins. */
static double min_sum(const pctx *X, int S, srange *const *R, const int *nR, double cap,
                      double *f, double *g, int *parent)
{
    int n = X->nseg;
    for (int a = 0; a <= n; a++)
        f[a] = a ? INFINITY : 0.0;
    for (int s = 0; s < S; s++) {
        for (int b = 0; b <= n; b++)
            g[b] = INFINITY;
        for (int q = 0; q < nR[s]; q++) {
            const srange *x = &R[s][q];
            if (x->t > cap || !isfinite(f[x->a]))
                continue;
            double v = f[x->a] + x->t;
            if (v < g[x->b]) {
                g[x->b] = v;
                if (parent)
                    parent[s * (n + 1) + x->b] = q;
            }
        }
        memcpy(f, g, (size_t)(n + 1) * sizeof *f);
    }
    return f[n];
}

/* The least max_s t_s over partitions into S stages (INFINITY: none). */
static double min_max(const pctx *X, int S, srange *const *R, const int *nR, double *f, double *g)
{
    int n = X->nseg;
    for (int a = 0; a <= n; a++)
        f[a] = a ? INFINITY : 0.0;
    for (int s = 0; s < S; s++) {
        for (int b = 0; b <= n; b++)
            g[b] = INFINITY;
        for (int q = 0; q < nR[s]; q++) {
            const srange *x = &R[s][q];
            double v = fmax(f[x->a], x->t);
            if (v < g[x->b])
                g[x->b] = v;
        }
        memcpy(f, g, (size_t)(n + 1) * sizeof *f);
    }
    return f[n];
}

/* Sorts v[0, n) ascending (no NaN); tmp: n doubles. */
#define DOUBLE_LESS(ctx, x, y) ((x) < (y))
SB_DEFINE_MSORT(msort_doubles, double, DOUBLE_LESS)
static void sort_doubles(double *v, double *tmp, size_t n) { msort_doubles(v, tmp, n, NULL); }

/* A lower bound of the stage of ops [i, j) with k act copies (-1: no
 * limit) as stage() would find it, from its unconstrained optima only
 * (cheap beside a DP under the limit, and cached): at least the kept one
 * (a limit only raises an optimum, recomputing only adds cost), and the
 * recomputed one when no kept strategy fits (kept_over). INFINITY when
 * the kept unconstrained DP gave up; -1 on error. */
static int stage_lower(pctx *X, int i, int j, int d, int M, int k, double *lb)
{
    stage_entry *u = stage(X, i, j, d, M, -1);
    if (!u)
        return -1;
    *lb = u->t;
    if (k < 0 || !isfinite(u->t))
        return 0;
    int over = kept_over(X, i, j, d, M, k);
    if (over < 0)
        return -1;
    if (over) {
        stage_entry *ua = stage_rc(X, i, j, d, M, -1, 1);
        if (!ua)
            return -1;
        if (isfinite(ua->t))
            *lb = fmax(*lb, ua->t);
    }
    return 0;
}

/* The first partition's cuts: where the bound's prefix sums pass s / S of
 * the total (each stage at least one segment); cut[s] is the segment stage
 * s starts at, cut[S] = nseg. */
static void incumbent_cuts(const pctx *X, int S, const double *pc, int *cut)
{
    int n = X->nseg, a = 0;
    cut[0] = 0;
    for (int s = 0; s < S; s++) {
        int b = s == S - 1 ? n : a + 1;
        while (s < S - 1 && b < n - (S - 1 - s) && pc[b] < pc[n] * (s + 1) / S)
            b++;
        cut[s + 1] = b;
        a = b;
    }
}

/* Whether the first partition cannot beat *best (exact): its step over
 * lower bounds of its stages (the segment bounds, then stage_lower, in
 * turn until one proves it) is already over *best, so solving its stages
 * under the limit could not lower *best. 1 yes, 0 no, -1 error. Off with
 * o->no_incumbent_bound, brute force or no best yet. */
static int incumbent_beaten(pctx *X, int S, int M, int sched, int d, const double *pc,
                            const double *p2p, const int *cut, double best)
{
    if (X->o->no_incumbent_bound || X->o->no_shortcuts || X->brute || !isfinite(best))
        return 0;
    double lb[SB_MAX_STAGES];
    for (int s = 0; s < S; s++)
        lb[s] = (pc[cut[s + 1]] - pc[cut[s]]) * BOUND_SLACK + p2p[cut[s + 1]];
    for (int s = -1; s < S; s++) {
        if (s >= 0) {
            int k = X->o->mem_limit > 0 ? inflight(X->o, S, M, sched, s) : -1;
            double t = 0.0;
            if (stage_lower(X, X->seg[cut[s]], X->seg[cut[s + 1]], d, M, k, &t))
                return -1;
            if (!isfinite(t))
                return 0; /* a DP given up: no bound, the partition solved as before */
            lb[s] = fmax(lb[s], t * BOUND_SLACK + p2p[cut[s + 1]]);
        }
        double sum = 0.0, mx = 0.0;
        for (int q = 0; q < S; q++)
            sum += lb[q], mx = fmax(mx, lb[q]);
        if ((sum + (double)(M - 1) * mx) * BOUND_SLACK > best)
            return 1;
    }
    return 0;
}

/* A first partition, so that the bounds have a step to beat (cuts by
 * incumbent_cuts). Lowers *best to its step when it fits; not solved when
 * its bound shows it cannot (incumbent_beaten). */
static int incumbent(pctx *X, int S, int M, int sched, int d, const double *pc,
                     const double *p2p, double *best)
{
    int cut[SB_MAX_STAGES + 1];
    incumbent_cuts(X, S, pc, cut);
    int beaten = incumbent_beaten(X, S, M, sched, d, pc, p2p, cut, *best);
    if (beaten < 0)
        return -1;
    if (beaten) {
        X->r->incumbents_skipped++;
        return 0;
    }
    double sum = 0.0, mx = 0.0;
    for (int s = 0; s < S; s++) {
        int a = cut[s], b = cut[s + 1];
        int k = X->o->mem_limit > 0 ? inflight(X->o, S, M, sched, s) : -1;
        stage_entry *e = stage(X, X->seg[a], X->seg[b], d, M, k);
        if (!e)
            return -1;
        if (!isfinite(e->t))
            return 0;
        sum += e->t + p2p[b];
        mx = fmax(mx, e->t + p2p[b]);
    }
    double T = sum + (double)(M - 1) * mx;
    if (T < *best)
        *best = T * (1.0 + 1e-12); /* the search itself finds and reports it (ties kept) */
    return 0;
}

/* sb_pipe_brute: every partition into S stages, one range per stage from
 * R[s] starting where the last ended; the first least T wins. */
static void enumerate(int S, int M, srange *const *R, const int *nR, int s, int a, double sum,
                      double mx, int *cur, int *pick, double *best, int n)
{
    if (s == S) {
        double T = sum + (double)(M - 1) * mx;
        if (a == n && T < *best) {
            *best = T;
            memcpy(pick, cur, (size_t)S * sizeof *pick);
        }
        return;
    }
    for (int q = 0; q < nR[s]; q++)
        if (R[s][q].a == a) {
            cur[s] = q;
            enumerate(S, M, R, nR, s + 1, R[s][q].b, sum + R[s][q].t, fmax(mx, R[s][q].t), cur,
                      pick, best, n);
        }
}

/* The least T over partitions into S stages, one range per stage from
 * R[s] (t INFINITY: left out), by the cap DP: for each cap tau (the values
 * ascending) the least sum with every t_s <= tau. *T_out INFINITY when
 * no partition; else pick[s] the range of stage s. */
static int best_partition(pctx *X, int S, int M, srange *const *R, const int *nR, double *f,
                          double *g, double *T_out, int *pick)
{
    int n = X->nseg;
    *T_out = INFINITY;
    double free_sum = min_sum(X, S, R, nR, INFINITY, f, g, NULL);
    if (!isfinite(free_sum))
        return 0;
    size_t nvals = 0;
    for (int s = 0; s < S; s++)
        nvals += (size_t)nR[s];
    double *vals = malloc((nvals ? 2 * nvals : 1) * sizeof *vals); /* and sort's scratch */
    int *parent = malloc((size_t)S * (size_t)(n + 1) * sizeof *parent);
    if (!vals || !parent) {
        free(vals), free(parent);
        return sb_fail(X->err, SB_EXIT_INTERNAL, "out of memory");
    }
    nvals = 0;
    for (int s = 0; s < S; s++)
        for (int q = 0; q < nR[s]; q++)
            if (isfinite(R[s][q].t))
                vals[nvals++] = R[s][q].t;
    sort_doubles(vals, vals + nvals, nvals);
    /* no cap under the least max of any partition gives one */
    double tmin = min_max(X, S, R, nR, f, g), best_here = INFINITY, best_cap = 0.0;
    size_t q0 = 0;
    while (q0 < nvals && vals[q0] < tmin)
        q0++;
    for (size_t q = q0; q < nvals; q++) {
        if (q && vals[q] == vals[q - 1])
            continue;
        if ((double)(M - 1) * vals[q] + free_sum >= best_here)
            break;
        double sum = min_sum(X, S, R, nR, vals[q], f, g, NULL);
        if (isfinite(sum) && sum + (double)(M - 1) * vals[q] < best_here) {
            best_here = sum + (double)(M - 1) * vals[q];
            best_cap = vals[q];
        }
    }
    if (isfinite(best_here)) {
        min_sum(X, S, R, nR, best_cap, f, g, parent);
        for (int s = S - 1, b = n; s >= 0; s--) {
            pick[s] = parent[s * (n + 1) + b];
            b = R[s][pick[s]].a;
        }
    }
    *T_out = best_here;
    free(vals), free(parent);
    return 0;
}


/* Whether a step T of the (S, M, schedule) being searched replaces the
 * best one: lower, or equal and earlier in the canonical order (ZeRO
 * stages as given, S descending, M descending, 1F1B before GPipe), so that
 * the answer is the one a search in that order gives (the first least T),
 * whatever order the combinations are searched in (s_order). */
static int combo_wins(const pctx *X, double T, double best)
{
    return T < best || (T == best && isfinite(T) && X->canon < X->best_canon);
}

/* The best partition of one (S, M, schedule) into X->r when it beats
 * *best. Brute force: every range's stage solved, every partition. Else
 * lazily, exact: every range that the bounds allow starts with its cost
 * bound (the sum over its segments of their unconstrained optima, each
 * segment solved alone: a stage's optimum restricted to a segment is one of
 * its strategies, edges cost >= 0, and the limit only raises it; plus the
 * p2p); the best partition over these values is found, its stages not yet
 * solved are solved (their values only rise), and again, until the best
 * partition has only solved stages: every other partition's T is at least
 * its value over bounds, so it is the least T. */
static int try_combo(pctx *X, int S, int M, int sched, const op_bound *ob, double *best,
                     double *least)
{
    const sb_model *mb = micro(X, M);
    int d = X->p / S, n = X->nseg, limited = X->o->mem_limit > 0;
    int lazy = !X->brute && !X->o->no_shortcuts;
    double lbsum = 0.0;
    for (int v = 0; v < mb->nops; v++)
        lbsum += ob[v].c;
    /* bounds summed in another order than the step (BOUND_SLACK): a
     * combination whose step ties the best must reach combo_wins */
    if (!X->brute && lbsum * BOUND_SLACK * (1.0 + (double)(M - 1) / S) > *best) {
        X->r->combos_skipped++;
        return 0;
    }
    /* prefix sums of the bounds over segments */
    double *pc = calloc((size_t)n + 1, sizeof *pc), *pw = calloc((size_t)n + 1, sizeof *pw);
    double *pa = calloc((size_t)n + 1, sizeof *pa), *ps = calloc((size_t)n, sizeof *ps);
    double *p2p = calloc((size_t)n + 1, sizeof *p2p);
    srange **R = calloc((size_t)S, sizeof *R);
    int *nR = calloc((size_t)S, sizeof *nR), *capR = calloc((size_t)S, sizeof *capR);
    double *f = calloc((size_t)n + 1, sizeof *f), *g = calloc((size_t)n + 1, sizeof *g);
    int rc = -1;
    if (!pc || !pw || !pa || !ps || !p2p || !R || !nR || !capR || !f || !g) {
        sb_fail(X->err, SB_EXIT_INTERNAL, "out of memory");
        goto out;
    }
    for (int a = 0; a < n; a++) {
        double c = 0, w = 0, ac = 0, sc = 0;
        for (int v = X->seg[a]; v < X->seg[a + 1]; v++)
            c += ob[v].c, w += ob[v].wg, ac += ob[v].a, sc = fmax(sc, ob[v].s);
        if (lazy) { /* the segment's own optimum bounds it better */
            stage_entry *e = stage(X, X->seg[a], X->seg[a + 1], d, M, -1);
            if (!e)
                goto out;
            if (isfinite(e->t))
                c = fmax(c, e->t * BOUND_SLACK);
        }
        pc[a + 1] = pc[a] + c, pw[a + 1] = pw[a] + w, pa[a + 1] = pa[a] + ac, ps[a] = sc;
    }
    if (lazy)
        lbsum = fmax(lbsum, pc[n] * BOUND_SLACK);
    if (lazy && lbsum * BOUND_SLACK * (1.0 + (double)(M - 1) / S) > *best) {
        X->r->combos_skipped++;
        rc = 0;
        goto out;
    }
    for (int b = 1; b < n; b++) {
        /* the stage before the cut sends on its own node or across nodes */
        int inter = X->cp.node_devices > 0 && d >= X->cp.node_devices;
        p2p[b] = 2.0 * sb_pipe_p2p_cost(&X->cp, crossing_words(mb, X->last, X->seg[b], d), inter);
    }
    if (!X->brute && incumbent(X, S, M, sched, d, pc, p2p, best))
        goto out;
    for (int s = 0; s < S; s++) {
        int k = limited ? inflight(X->o, S, M, sched, s) : -1;
        for (int a = s; a <= n - (S - s); a++) {
            double smax = 0.0;
            for (int b = a + 1; b <= n - (S - 1 - s); b++) {
                if (s == 0 && a > 0)
                    break;
                if (s == S - 1 && b < n)
                    continue;
                smax = fmax(smax, ps[b - 1]);
                double lbt = pc[b] - pc[a] + p2p[b];
                double lbm = pw[b] - pw[a] + (k > 1 ? k : 1) * (pa[b] - pa[a]) + smax;
                if (limited && lbm > X->o->mem_limit)
                    X->least_lb = fmin(X->least_lb, lbm);
                if (!X->brute && ((limited && lbm > X->o->mem_limit)
                                  || ((double)(M - 1) * lbt + lbsum) * BOUND_SLACK > *best)) {
                    X->r->ranges_bounded++;
                    continue;
                }
                if (lazy && limited) { /* the exact least memory, non-decreasing in b */
                    double lm = 0.0;
                    if (least_mem(X, X->seg[a], X->seg[b], d, M, k, &lm))
                        goto out;
                    if (lm * BOUND_SLACK > X->o->mem_limit) {
                        *least = fmin(*least, lm);
                        X->least_lb = fmin(X->least_lb, lm);
                        X->r->ranges_bounded++;
                        break;
                    }
                }
                /* brute force with the choice: the range once per mode,
                 * partitions then enumerate every stage's choice */
                int nmodes = X->brute && X->rc_choose ? 2 : 1;
                for (int md = 0; md < nmodes; md++) {
                    stage_entry *e = NULL;
                    double t = lbt * BOUND_SLACK;
                    if (!lazy) {
                        e = nmodes == 2 ? stage_rc(X, X->seg[a], X->seg[b], d, M, k, md)
                                        : stage(X, X->seg[a], X->seg[b], d, M, k);
                        if (!e)
                            goto out;
                        if (!isfinite(e->t)) {
                            if (e->least < *least)
                                *least = e->least;
                            continue;
                        }
                        t = e->t + p2p[b];
                    }
                    if (nR[s] == capR[s]) {
                        srange *nr = realloc(R[s], (size_t)(capR[s] = capR[s] * 2 + 16) * sizeof *nr);
                        if (!nr) {
                            sb_fail(X->err, SB_EXIT_INTERNAL, "out of memory");
                            goto out;
                        }
                        R[s] = nr;
                    }
                    R[s][nR[s]++] = (srange){.a = a, .b = b, .t = t, .e = e};
                }
            }
        }
    }
    rc = 0;
    int pick[SB_MAX_STAGES];
    double best_here = INFINITY;
    if (X->brute) {
        int cur[SB_MAX_STAGES];
        enumerate(S, M, R, nR, 0, 0, 0.0, 0.0, cur, pick, &best_here, n);
    } else {
        for (;;) {
            if ((rc = best_partition(X, S, M, R, nR, f, g, &best_here, pick)))
                goto out;
            if (!combo_wins(X, best_here, *best))
                break; /* the bounds say this combination cannot win */
            int solved = 0;
            for (int s = 0; s < S; s++) {
                srange *x = &R[s][pick[s]];
                if (x->e)
                    continue;
                int k = limited ? inflight(X->o, S, M, sched, s) : -1;
                if (limited && !x->unc) {
                    /* first the range's unconstrained optimum (a plain DP, cheap
                     * beside one under the limit, and kept in the cache): the
                     * stage under the limit costs at least that, so it is the
                     * range's value until the best partition still picks it */
                    x->unc = 1;
                    stage_entry *u = stage(X, X->seg[x->a], X->seg[x->b], d, M, -1);
                    if (!u) {
                        rc = -1;
                        goto out;
                    }
                    if (isfinite(u->t)) {
                        x->t = fmax(x->t, u->t + p2p[x->b]);
                        /* only recomputed strategies fit: they cost at least the
                         * recomputed unconstrained optimum (recomputing adds cost
                         * per config), a higher bound */
                        int over = kept_over(X, X->seg[x->a], X->seg[x->b], d, M, k);
                        stage_entry *ua = over > 0 ? stage_rc(X, X->seg[x->a], X->seg[x->b], d,
                                                              M, -1, 1)
                                                   : u;
                        if (over < 0 || !ua) {
                            rc = -1;
                            goto out;
                        }
                        if (isfinite(ua->t))
                            x->t = fmax(x->t, ua->t + p2p[x->b]);
                        solved++;
                        continue;
                    }
                }
                if (limited && x->unc == 1 && X->o->dual_bound
                    && !seeds_near(X, X->seg[x->a], X->seg[x->b], d, M, k)) {
                    /* then its dual bound (one DP): solved only when the best
                     * partition still picks it */
                    x->unc = 2;
                    double lb = -INFINITY;
                    if (stage_dual_lower(X, X->seg[x->a], X->seg[x->b], d, M, k, &lb)) {
                        rc = -1;
                        goto out;
                    }
                    if (lb + p2p[x->b] > x->t) {
                        x->t = lb + p2p[x->b];
                        solved++;
                        continue;
                    }
                }
                stage_entry *e = stage(X, X->seg[x->a], X->seg[x->b], d, M, k);
                if (!e) {
                    rc = -1;
                    goto out;
                }
                x->e = e;
                x->t = isfinite(e->t) ? e->t + p2p[x->b] : INFINITY;
                if (!isfinite(e->t) && e->least < *least)
                    *least = e->least;
                solved++;
            }
            if (!solved)
                break; /* every stage of the best partition solved: the least T */
            X->r->lazy_rounds++;
        }
    }
    if (!combo_wins(X, best_here, *best))
        goto out;
    sb_pipe_result *r = X->r;
    *best = best_here;
    X->best_canon = X->canon;
    r->step_cost = best_here;
    memset(&r->pipe, 0, sizeof r->pipe);
    r->pipe.nstages = S;
    r->pipe.microbatches = M;
    r->pipe.schedule = (sb_schedule)sched;
    r->zero = X->cp.zero;
    r->peak_bytes = 0.0;
    for (int s = 0; s < S; s++) {
        const srange *x = &R[s][pick[s]];
        int i = X->seg[x->a], j = X->seg[x->b];
        r->pipe.first_op[s] = i;
        r->pipe.first_op[s + 1] = j;
        r->pipe.devices[s] = d;
        r->stage_time[s] = x->t;
        r->stage_p2p[s] = p2p[x->b];
        r->inflight[s] = inflight(X->o, S, M, sched, s);
        r->stage_recompute[s] = (unsigned char)x->e->rc;
        memcpy(r->cfg + (size_t)i * SB_MAX_DIMS, x->e->cfg, (size_t)(j - i) * SB_MAX_DIMS * sizeof(int));
        memcpy(r->op_cost + i, x->e->cost, (size_t)(j - i) * sizeof(double));
        if (stage_memory(mb, i, j, x->e->cfg, X->o->opt, X->cp.zero, X->cp.precision,
                         r->inflight[s], x->e->rc,
                         &r->stage_mem[s], X->err)) {
            rc = -1;
            goto out;
        }
        r->peak_bytes = fmax(r->peak_bytes, r->stage_mem[s]);
    }
out:
    for (int s = 0; R && s < S; s++)
        free(R[s]);
    free(pc), free(pw), free(pa), free(ps), free(p2p), free(R), free(nR), free(capR), free(f), free(g);
    return rc;
}

/* ---- the whole search ------------------------------------------------------------ */

/* The order in which the nS searched stage counts (ascending in Ss) are
 * tried: the middle one first, then the larger ones ascending, then the
 * smaller ones descending (no_middle_first: the largest down). With every
 * stage solved exactly any order gives the same answer (every bound that
 * skips work is against a step already found, and ties go to the
 * canonical order, combo_wins); Lagrangian stages are seeded by what was
 * solved before, which can move their answer within their gap
 * (search/README.md). The order decides how soon a good step is known.
 * The largest S has a stage at almost every copy count in flight (1F1B:
 * S - s), each its own stage DP under the limit, and the smallest S the
 * largest stage DPs: both are slow to give a first step,
 * and the middle is where the optima of the shipped LLMs lie (gpt3-175b
 * at p = 1024 searches S = 16, 32, 64, 128 and takes 32: its first step
 * from S = 128 cost 2.5 s and was 48% over the optimum). */
static int s_order(int nS, int oi, int no_middle_first)
{
    if (no_middle_first)
        return nS - 1 - oi;
    int mid = (nS - 1) / 2;
    return oi < nS - mid ? mid + oi : nS - 1 - oi;
}

static int64_t batch_of(const sb_model *m)
{
    int64_t g = 0;
    for (int i = 0; i < m->nops; i++) {
        int d = batch_dim(&m->ops[i]);
        if (d < 0)
            return 0;
        int64_t a = g, b = m->ops[i].dims[d].size;
        while (b) {
            int64_t t = a % b;
            a = b;
            b = t;
        }
        g = a;
    }
    return g;
}

static void ctx_free(pctx *X)
{
    sb_dp_memo_free(X->dp.memo);
    X->dp.memo = NULL;
    for (size_t q = 0; q < X->cap; q++)
        if (X->tab[q]) {
            free(X->tab[q]->cfg);
            free(X->tab[q]->cost);
            free(X->tab[q]->cfg_b);
            free(X->tab[q]);
        }
    free(X->tab);
    for (int q = 0; q < X->nM; q++)
        sb_model_free(&X->mb[q]);
    free(X->mb), free(X->Ms), free(X->hop), free(X->rep), free(X->last), free(X->seg);
    free(X->hseg), free(X->cm), free(X->cm_off), free(X->cnt), free(X->cur), free(X->items);
    free(X->cm_perm);
}

static int run(const sb_model *m, int p, const sb_cost_params *cp, const sb_pipe_opts *o,
               sb_pipe_result *r, int brute, sb_error *err)
{
    double t0 = sb_now();
    memset(r, 0, sizeof *r);
    pctx X = {.m = m, .p = p, .cp = *cp, .o = o, .err = err, .r = r, .brute = brute,
              .least_lb = INFINITY, .best_canon = LONG_MAX};
    X.cp.devices = p;
    X.dp = o->dp;
    int rc = -1;
    int *cuts = NULL;
    op_bound *ob = NULL;
    if (o->stages && (o->stages < 1 || o->stages > SB_MAX_STAGES || p % o->stages))
        return sb_fail(err, SB_EXIT_INPUT, "--stages %d: must divide p = %d (and be at most %d)",
                       o->stages, p, SB_MAX_STAGES);
    if (cp->recompute != SB_RECOMPUTE_NONE && cp->recompute != SB_RECOMPUTE_ALL
        && cp->recompute != SB_RECOMPUTE_AUTO)
        return sb_fail(err, SB_EXIT_INPUT, "recompute mode %d: not none, all or auto",
                       cp->recompute);
    if (!o->choose_zero && (cp->zero < 0 || cp->zero > 3))
        return sb_fail(err, SB_EXIT_INPUT, "--zero %d: not 0, 1, 2 or 3", cp->zero);
    /* recomputation chosen per stage (auto: the same); without a limit
     * keeping is optimal (recomputing only adds cost), but brute force
     * tries both anyway */
    int choose_rc = o->choose_recompute || cp->recompute == SB_RECOMPUTE_AUTO;
    X.rc_choose = choose_rc && (o->mem_limit > 0 || brute);
    X.rc_fixed = !choose_rc && cp->recompute == SB_RECOMPUTE_ALL;
    X.cp.recompute = X.rc_fixed ? SB_RECOMPUTE_ALL : SB_RECOMPUTE_NONE;
    /* the ZeRO stages searched: 0, 1 and 2 cost the same per config (only
     * stage 3 adds a term, sb_zero_cost) and 2 needs no more memory per op
     * than 1 or 0 (sliced gradients and optimizer state, the rest equal),
     * so under a limit 2 stands for all three (then reported at the least
     * stage its strategy fits), and without one 0 for all four (3 only
     * adds cost); brute force tries every stage */
    int zs[4], nz = 0;
    if (!o->choose_zero)
        zs[nz++] = cp->zero;
    else if (brute)
        zs[0] = 0, zs[1] = 1, zs[2] = 2, zs[3] = 3, nz = 4;
    else if (o->mem_limit > 0)
        zs[0] = 2, zs[1] = 3, nz = 2;
    else
        zs[nz++] = 0;
    r->zero_searched = nz;
    if (!o->no_shared_memo && !o->dp.plain && !brute) {
        /* the stage DPs' equal eliminations (repeated layers in stages of
         * other lengths and places, the same micro-batch and devices)
         * computed once: content-keyed, so every value and argmin is the one
         * a fresh DP computes (search/README.md) */
        double mb = o->dp.max_table_mb > 0 ? o->dp.max_table_mb : 4096;
        if (!(X.dp.memo = sb_dp_memo_new(fmin(mb * 1e6 / 4, SHARED_MEMO_BYTES)))) {
            rc = sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
            goto out;
        }
    }
    r->cfg = sb_calloc((size_t)m->nops * SB_MAX_DIMS, sizeof *r->cfg, err);
    r->op_cost = sb_calloc((size_t)m->nops, sizeof *r->op_cost, err);
    X.hop = sb_malloc((size_t)m->nops * sizeof *X.hop, err);
    X.rep = sb_malloc((size_t)m->nops * sizeof *X.rep, err);
    X.last = last_use(m, err);
    cuts = sb_malloc((size_t)m->nops * sizeof *cuts, err);
    X.seg = sb_malloc(((size_t)m->nops + 1) * sizeof *X.seg, err);
    ob = sb_malloc((size_t)m->nops * sizeof *ob, err);
    X.cm_off = sb_malloc(((size_t)m->nops + 1) * sizeof *X.cm_off, err);
    X.cnt = sb_calloc((size_t)m->nops, sizeof *X.cnt, err);
    X.cur = sb_malloc((size_t)m->nops * sizeof *X.cur, err);
    if (!r->cfg || !r->op_cost || !X.hop || !X.rep || !X.last || !cuts || !X.seg || !ob
        || !X.cm_off || !X.cnt || !X.cur)
        goto out;
    for (int v = 0; v < m->nops; v++) {
        X.hop[v] = op_hash(m, &m->ops[v]);
        X.rep[v] = v;
        for (int w = 0; w < v; w++)
            if (X.rep[w] == w && X.hop[w] == X.hop[v] && ops_same(m, &m->ops[w], &m->ops[v])) {
                X.rep[v] = w;
                break;
            }
    }
    int ncut = sb_pipe_cuts(m, cuts, m->nops, &r->crossing);
    r->cuts = ncut;
    X.nseg = ncut + 1;
    X.seg[0] = 0;
    for (int q = 0; q < ncut; q++)
        X.seg[q + 1] = cuts[q];
    X.seg[X.nseg] = m->nops;
    X.hseg = sb_calloc((size_t)(X.nseg + 1) * (size_t)(X.nseg + 1), sizeof *X.hseg, err);
    if (!X.hseg)
        goto out;
    /* the micro-batch counts: divisors of the batch (all ops' batch dims) */
    int64_t B = batch_of(m);
    X.Ms = sb_malloc(64 * sizeof *X.Ms, err);
    X.mb = sb_calloc(64, sizeof *X.mb, err);
    if (!X.Ms || !X.mb)
        goto out;
    if (o->microbatches) {
        X.Ms[X.nM] = o->microbatches;
        if (sb_model_microbatch(m, o->microbatches, &X.mb[X.nM], err))
            goto out;
        X.nM++;
    } else {
        for (int64_t M = 1; M <= (B > 0 ? B : 1) && X.nM < 64; M++)
            if (M == 1 || (B % M) == 0) {
                X.Ms[X.nM] = (int)M;
                if (sb_model_microbatch(m, (int)M, &X.mb[X.nM], err))
                    goto out;
                X.nM++;
            }
    }
    double best = INFINITY, least = INFINITY;
    int Ss[64], nS = 0;
    for (int S = 1; S <= p && S <= SB_MAX_STAGES && nS < 64; S++) {
        if (p % S || S > X.nseg)
            continue;
        if (o->stages ? S != o->stages
                      : (o->max_stage_devices > 0 && p / S > o->max_stage_devices))
            continue;
        Ss[nS++] = S;
    }
    /* searched S, none with P/S within the cap (large P, few cut segments):
     * the largest S possible alone (its stages the smallest there are) */
    for (int S = 1; nS == 0 && !o->stages && o->max_stage_devices > 0 && S <= p
                    && S <= SB_MAX_STAGES && S <= X.nseg; S++)
        if (p % S == 0 && (S == 1 || o->microbatches || X.Ms[X.nM - 1] >= S))
            r->stage_cap_fallback = S; /* with an M >= S (one is needed; largest last) */
    if (r->stage_cap_fallback)
        Ss[nS++] = r->stage_cap_fallback;
    if (nS == 0) {
        rc = sb_fail(err, SB_EXIT_INPUT, "no stage count to search: %d stages need %d cut points "
                     "(model '%s' has %d where fewest tensors cross) and must divide p = %d",
                     o->stages ? o->stages : p, (o->stages ? o->stages : p) - 1, m->name, ncut, p);
        goto out;
    }
    /* S from the middle of the searched ones out (s_order), each S's M
     * from the largest down; each ZeRO stage in turn, the best step of the
     * ones before bounding the next */
    /* pass 1 only when pass 0 found nothing: the micro-batch counts below
     * S (a stage idle most of the step), so that a pipeline is found
     * whenever one exists for some M (-p 5 --stages 5 at batch 4) */
    for (int pass = 0; pass < 2; pass++)
    for (int zi = 0; zi < nz; zi++) {
        if (pass && (o->microbatches || isfinite(best)))
            break;
        X.cp.zero = zs[zi];
        for (int oi = 0; oi < nS; oi++) {
            int si = s_order(nS, oi, o->no_middle_first), S = Ss[si], d = p / S;
            for (int q = X.nM - 1; q >= 0; q--) {
                int M = X.Ms[q];
                if (S > 1 && !o->microbatches && (M < S) != pass)
                    continue;
                if (pass && S == 1)
                    continue;
                if (op_bounds(&X, &X.mb[q], d, M, ob))
                    goto out;
                for (int sched = SB_SCHEDULE_1F1B; sched >= SB_SCHEDULE_GPIPE; sched--) {
                    if (o->schedule >= 0 && sched != o->schedule)
                        continue;
                    if (o->schedule < 0 && sched == SB_SCHEDULE_GPIPE && !(o->mem_limit > 0))
                        continue; /* the same cost and more memory than 1F1B without a limit */
                    r->combos++;
                    X.canon = (((long)zi * 64 + (nS - 1 - si)) * 64 + (X.nM - 1 - q)) * 2
                              + (SB_SCHEDULE_1F1B - sched);
                    double tc = sb_now();
                    long sp0 = r->subproblems, sk0 = r->combos_skipped;
                    if (try_combo(&X, S, M, sched, ob, &best, &least))
                        goto out;
                    if (getenv("SB_PIPE_TRACE"))
                        fprintf(stderr, "combo zero=%d S=%d M=%d %s: %s%ld stage DPs, %.3f s; best "
                                "%.6e\n", X.cp.zero, S, M, sb_schedule_name((sb_schedule)sched),
                                r->combos_skipped > sk0 ? "skipped, " : "", r->subproblems - sp0,
                                sb_now() - tc, best);
                }
            }
        }
    }
    if (!isfinite(best)) {
        r->least_bytes = least;
        if (o->mem_limit > 0 && !isfinite(least))
            rc = sb_fail(err, SB_EXIT_INPUT,
                         "no pipeline strategy of '%s' at p=%d fits %.4g GiB per device: the "
                         "least memory of a stage is at least %.4g GiB (by the bounds: weights, "
                         "activations and scratch at their least over the configs; none solved)",
                         m->name, p, o->mem_limit / 1073741824.0, X.least_lb / 1073741824.0);
        else if (o->mem_limit > 0)
            rc = sb_fail(err, SB_EXIT_INPUT,
                         "no pipeline strategy of '%s' at p=%d fits %.4g GiB per device: the "
                         "least memory of a stage found is %.4g GiB", m->name, p,
                         o->mem_limit / 1073741824.0, least / 1073741824.0);
        else {
            char ms[256] = "";
            for (int q = 0, k = 0; q < X.nM && k < (int)sizeof ms - 1; q++)
                k += snprintf(ms + k, sizeof ms - (size_t)k, "%s%d", q ? ", " : "", X.Ms[q]);
            rc = sb_fail(err, SB_EXIT_INPUT, "no pipeline strategy of '%s' at p=%d: %d stage "
                         "count%s tried (%d .. %d), micro-batch counts %s%s; %ld stage DPs given "
                         "up%s", m->name, p, nS, nS == 1 ? "" : "s", Ss[0], Ss[nS - 1], ms,
                         o->microbatches ? " (--microbatches)" : " (the divisors of the batch)",
                         r->ranges_given_up,
                         r->ranges_given_up ? " (over the stage DP's label budget)"
                                            : ": no stage cut and config fits these counts");
        }
        goto out;
    }
    if (o->choose_zero && !brute && r->zero == 2 && o->mem_limit > 0) {
        /* the same strategy at stage 0 or 1 costs the same: reported at the
         * least stage where every stage of it fits */
        const sb_model *mb = micro(&X, r->pipe.microbatches);
        for (int z = 0; z < 2; z++) {
            double mem[SB_MAX_STAGES], peak = 0.0;
            int fit = 1;
            for (int s = 0; s < r->pipe.nstages && fit; s++) {
                int i = r->pipe.first_op[s], j = r->pipe.first_op[s + 1];
                if (stage_memory(mb, i, j, r->cfg + (size_t)i * SB_MAX_DIMS, o->opt, z,
                                 X.cp.precision, r->inflight[s], r->stage_recompute[s], &mem[s], err))
                    goto out;
                fit = mem[s] <= o->mem_limit;
                peak = fmax(peak, mem[s]);
            }
            if (fit) {
                r->zero = z;
                r->peak_bytes = peak;
                memcpy(r->stage_mem, mem, (size_t)r->pipe.nstages * sizeof *mem);
                break;
            }
        }
    }
    int any_rc = 0;
    for (int s = 0; s < r->pipe.nstages; s++)
        any_rc |= r->stage_recompute[s];
    if (X.rc_fixed || any_rc) {
        if (!(r->recompute = sb_calloc((size_t)m->nops, 1, err)))
            goto out;
        for (int i = 0; i < m->nops; i++)
            r->recompute[i] = (unsigned char)(sb_op_recomputable(&m->ops[i])
                                              && r->stage_recompute[sb_pipeline_stage_of(&r->pipe, i)]);
    }
    rc = 0;
out:
    free(cuts);
    free(ob);
    ctx_free(&X);
    r->seconds = sb_now() - t0;
    if (rc)
        sb_pipe_result_free(r);
    return rc;
}

int sb_pipe_search(const sb_model *m, int p, const sb_cost_params *cp, const sb_pipe_opts *o,
                   sb_pipe_result *r, sb_error *err)
{
    sb_pipe_opts oo = *o;
    if (oo.threads > 0)
        oo.dp.threads = oo.threads; /* each stage DP's threads (sb_search, sb_search_within) */
    return run(m, p, cp, &oo, r, 0, err);
}

int sb_pipe_brute(const sb_model *m, int p, const sb_cost_params *cp, const sb_pipe_opts *o,
                  sb_pipe_result *r, sb_error *err)
{
    return run(m, p, cp, o, r, 1, err);
}

int sb_pipe_stage_model(const sb_model *mb, int i, int j, sb_model *out, sb_error *err)
{
    return sub_model(mb, i, j, out, err);
}
