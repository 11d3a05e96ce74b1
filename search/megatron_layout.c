/* megatron_layout.c: a Megatron-LM configuration written as an op-level
 * strategy (sb_strategy), so that `search --algo megatron --save FILE`
 * gives a file run, export and bench take like any search's. Split from
 * megatron.c, which prices a configuration per layer, because this maps
 * it onto the model file's ops by their dim names instead.
 *
 * Per op, over its stage's TP x DP x CP devices (docs/megatron.md):
 *   - "batch" split DP ways (an expert op: DP / EP ways, its "expert" dim EP);
 *   - tensor parallelism: the first of the op's dims among kvh, heads, rep,
 *     ff, vocab takes as much of TP as divides it, then the next (column-
 *     and row-parallel linears, the attention's heads, vocab-parallel
 *     embedding, head and loss);
 *   - an op with none of them (norms, residual adds) splits "seq" TP ways
 *     under sequence parallelism, else is replicated over TP;
 *   - context parallelism splits "seq" CP ways (queries; keys stay whole).
 * Stages: PP stages of whole layers (runs of ops "PREFIX/...", cut_stages),
 * as many on each as the pricer places there (sb_mt_stage_count: the first
 * and last stages' counts where given); ops
 * before the first layer in stage 0, after the last in the last stage.
 * Recompute full: every recomputable op; selective: the attention's
 * scores (softmax ops and the einsums that read or write them). The
 * distributed optimizer is ZeRO 1. */
#include "shardbench/megatron.h"
#include "shardbench/precision.h"
#include "shardbench/strategy.h"
#include "mt_int.h"

#include <stdlib.h>
#include <string.h>

static long gcd(long a, long b)
{
    while (b) {
        long t = a % b;
        a = b;
        b = t;
    }
    return a;
}

static int dim_of(const sb_op *op, const char *name)
{
    for (int d = 0; d < op->ndims; d++)
        if (!strcmp(op->dims[d].name, name))
            return d;
    return -1;
}

/* Splits dim `name` of op k ways into c (when it has it): 0, or -1 with
 * err when k does not divide its size (per micro-batch for "batch"). */
static int split(const sb_op *op, int *c, const char *name, long k, long mb, sb_error *err)
{
    int d = dim_of(op, name);
    if (d < 0 || k <= 1)
        return 0;
    long size = op->dims[d].size / (strcmp(name, "batch") ? 1 : mb);
    if (size % (k * c[d]))
        return sb_fail(err, SB_EXIT_INPUT, "--save: op '%s' cannot split %s (%ld) %ld ways",
                       op->name, name, size, k * c[d]);
    c[d] *= (int)k;
    return 0;
}

/* Op op's config (c, ndims counts) under configuration mc. */
static int op_config(const sb_op *op, const sb_mt_config *mc, long mb, int *c, sb_error *err)
{
    /* (eff: an expert's width as the hf: importer names it) */
    static const char *const tp_dims[] = {"kvh", "heads", "rep", "ff", "eff", "vocab"};
    for (int d = 0; d < op->ndims; d++)
        c[d] = 1;
    int expert = dim_of(op, "expert") >= 0;
    long ep = expert ? mc->ep : 1;
    if (mc->dp % ep)
        return sb_fail(err, SB_EXIT_INPUT, "--save: op '%s': EP %d does not divide DP %d (the "
                       "experts' batch split)", op->name, mc->ep, mc->dp);
    if (split(op, c, "batch", mc->dp / ep, mb, err) || split(op, c, "expert", ep, mb, err))
        return -1;
    long left = mc->tp;
    for (size_t k = 0; k < sizeof tp_dims / sizeof *tp_dims && left > 1; k++) {
        int d = dim_of(op, tp_dims[k]);
        long g = d < 0 ? 1 : gcd(left, op->dims[d].size);
        if (split(op, c, tp_dims[k], g, mb, err))
            return -1;
        left /= g;
    }
    if (left == mc->tp && mc->sp && split(op, c, "seq", left, mb, err))
        return -1;
    if (split(op, c, "seq", mc->cp, mb, err))
        return -1;
    /* moe_gate splits its group (batch) alone (docs/model-format.md) */
    for (int d = 0; op->kind == SB_OP_MOE_GATE && d < op->ndims; d++)
        if (c[d] > 1 && strcmp(op->dims[d].name, "batch"))
            return sb_fail(err, SB_EXIT_INPUT,
                           "--save: op '%s' (moe_gate) splits its group alone in a strategy "
                           "file, and this configuration splits its %s %d ways (EP, sequence "
                           "or context parallelism): give --ep 1 --cp 1 --tp 1 (an MoE model "
                           "at TP > 1 needs sequence parallelism)", op->name,
                           op->dims[d].name, c[d]);
    return 0;
}

/* The runs of ops named "PREFIX/..." with one PREFIX in m, in order; ord[i]
 * (when not NULL) op i's run, from 1 (0 before the first). */
static int layer_runs(const sb_model *m, int *ord)
{
    int L = 0;
    const char *prev = NULL;
    size_t pn = 0;
    for (int i = 0; i < m->nops; i++) {
        const char *nm = m->ops[i].name, *sl = strchr(nm, '/');
        if (sl && (!prev || (size_t)(sl - nm) != pn || strncmp(nm, prev, pn)))
            L++, prev = nm, pn = (size_t)(sl - nm);
        if (ord)
            ord[i] = L;
    }
    return L;
}

int sb_mt_file_layout(const sb_model *m, const sb_mt_model *mm, sb_mt_config *fx)
{
    fx->file_layout = 1;
    if (fx->pp || layer_runs(m, NULL) == mm->layers)
        return 0;
    fx->pp = 1;
    return 1;
}

/* Stages of whole layers as configuration mc lays them (sb_mt_chunk_layers):
 * first_op of each of S stages. A layer is a run of ops named "PREFIX/..."
 * with one PREFIX (a model file's x.1, x.2, ...; the hf: importer's x, x.1,
 * ...), numbered from 1 in order; an op without a slash (the embedding,
 * the final norm, the head) belongs with the layer before it. */
static int cut_stages(const sb_model *m, const sb_mt_model *mm, const sb_mt_config *mc, int S,
                      sb_pipeline *pl, sb_error *err)
{
    int *ord = malloc(sizeof *ord * (size_t)(m->nops > 0 ? m->nops : 1));
    if (!ord)
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    int L = layer_runs(m, ord);
    if (S > 1 && L != mm->layers) { /* a block before the layers, a layer of two blocks,
                                     * an encoder and a decoder: no cut matches the price */
        free(ord);
        return sb_fail(err, SB_EXIT_INPUT, "--save: the model's ops hold %d runs of 'PREFIX/...' "
                       "where the grid priced %ld layers: no cut into %d stages matches its price",
                       L, mm->layers, S);
    }
    pl->nstages = S;
    pl->first_op[0] = 0;
    for (int s = 1; s < S; s++) { /* stage s starts at its first layer */
        int n, first;
        sb_mt_chunk_layers(mm, mc, s, 0, &n, &first);
        int i = pl->first_op[s - 1];
        while (i < m->nops && ord[i] < first)
            i++;
        pl->first_op[s] = i;
    }
    pl->first_op[S] = m->nops;
    free(ord);
    return 0;
}

/* 1 when a softmax reads op i's output, directly or through a softcap
 * (Gemma 2's capped attention logits). */
static int feeds_softmax(const sb_model *m, int i)
{
    for (int j = 0; j < m->nops; j++)
        for (int k = 0; k < m->ops[j].nin; k++) {
            if (m->tensors[m->ops[j].in[k].tensor].producer != i)
                continue;
            if (m->ops[j].kind == SB_OP_SOFTMAX)
                return 1;
            if (m->ops[j].kind == SB_OP_SOFTCAP && m->ops[i].kind != SB_OP_SOFTCAP &&
                feeds_softmax(m, j))
                return 1;
        }
    return 0;
}

int sb_mt_strategy(const sb_model *m, const sb_mt_config *mc, const sb_mt_model *mm, int P,
                   sb_strategy *st, sb_error *err)
{
    if (mc->vpp > 1)
        return sb_fail(err, SB_EXIT_INPUT, "--save: the interleaved schedule (--vpp %d) is not "
                       "one a strategy file holds (1f1b, gpipe): give --vpp 1", mc->vpp);
    long mb = mm->global_batch / ((long)mc->dp * mc->mbs); /* micro-batches */
    if (mm->experts > 0 && mb > 1) /* the runtime's router (k_moe.c): one micro-batch */
        return sb_fail(err, SB_EXIT_INPUT,
                       "--save: an MoE model's router (moe_gate) runs in one micro-batch (its "
                       "load-balancing loss is a mean over the batch), and this configuration "
                       "has %ld: give --micro-batch-size %ld", mb,
                       mm->global_batch / mc->dp);
    if (sb_strategy_init(st, m, P))
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    snprintf(st->algo, sizeof st->algo, "megatron");
    sb_pipeline *pl = &st->pipe;
    int rc = cut_stages(m, mm, mc, mc->pp, pl, err);
    for (int s = 0; s < mc->pp; s++)
        pl->devices[s] = P / mc->pp;
    pl->microbatches = (int)mb;
    pl->schedule = SB_SCHEDULE_1F1B;
    for (int i = 0; !rc && i < m->nops; i++)
        rc = op_config(&m->ops[i], mc, mb, st->cfg + (size_t)i * SB_MAX_DIMS, err);
    for (int i = 0; !rc && i < m->nops; i++) {
        const sb_op *op = &m->ops[i];
        /* the scores: softmax, the einsums beside it, a soft-cap between */
        int scores = op->kind == SB_OP_SOFTMAX || (op->kind == SB_OP_SOFTCAP && feeds_softmax(m, i));
        for (int k = 0; !scores && op->kind == SB_OP_EINSUM && k < op->nin; k++) {
            int p = m->tensors[op->in[k].tensor].producer;
            scores = p >= 0 && m->ops[p].kind == SB_OP_SOFTMAX;
        }
        if (!scores && op->kind == SB_OP_EINSUM)
            scores = feeds_softmax(m, i);
        st->recompute[i] = sb_op_recomputable(op) &&
                           (mc->recompute == SB_MT_RC_FULL ||
                            (mc->recompute == SB_MT_RC_SELECTIVE && scores));
    }
    st->zero = mc->dist_opt ? 1 : 0;
    st->precision = mc->precision;
    if (!rc)
        rc = sb_pipeline_check(pl, m, P, err);
    if (rc)
        sb_strategy_free(st);
    return rc;
}
