/* pipeline.c: the pipeline part of a strategy (shardbench/pipeline.h):
 * construction, checks and names, shared by the search, strategy files and
 * the runtime. */
#include "shardbench/pipeline.h"

#include <string.h>

void sb_pipeline_none(sb_pipeline *pl, int nops, int p)
{
    memset(pl, 0, sizeof *pl);
    pl->nstages = 1;
    pl->first_op[0] = 0;
    pl->first_op[1] = nops;
    pl->devices[0] = p;
    pl->microbatches = 1;
    pl->schedule = SB_SCHEDULE_GPIPE;
}

static int batch_dim(const sb_op *op)
{
    for (int d = 0; d < op->ndims; d++)
        if (!strcmp(op->dims[d].name, "batch"))
            return d;
    return -1;
}

int sb_pipeline_check(const sb_pipeline *pl, const sb_model *m, int p, sb_error *err)
{
    int S = pl->nstages;
    if (S < 1 || S > SB_MAX_STAGES)
        return sb_fail(err, SB_EXIT_INPUT, "pipeline stages %d: must be 1 .. %d", S, SB_MAX_STAGES);
    if (S > m->nops)
        return sb_fail(err, SB_EXIT_INPUT, "pipeline stages %d: model '%s' has only %d ops", S,
                       m->name, m->nops);
    if (pl->first_op[0] != 0 || pl->first_op[S] != m->nops)
        return sb_fail(err, SB_EXIT_INPUT,
                       "pipeline stages must cover ops 0 .. %d (they cover %d .. %d)",
                       m->nops - 1, pl->first_op[0], pl->first_op[S] - 1);
    int sum = 0;
    for (int s = 0; s < S; s++) {
        if (pl->first_op[s + 1] <= pl->first_op[s])
            return sb_fail(err, SB_EXIT_INPUT, "pipeline stage %d is empty or out of order", s);
        if (pl->devices[s] < 1)
            return sb_fail(err, SB_EXIT_INPUT, "pipeline stage %d has %d devices", s,
                           pl->devices[s]);
        sum += pl->devices[s];
    }
    if (sum != p)
        return sb_fail(err, SB_EXIT_INPUT, "pipeline stages hold %d devices in all, not p = %d",
                       sum, p);
    if (pl->microbatches < 1)
        return sb_fail(err, SB_EXIT_INPUT, "microbatches %d: must be >= 1", pl->microbatches);
    if (pl->schedule != SB_SCHEDULE_GPIPE && pl->schedule != SB_SCHEDULE_1F1B)
        return sb_fail(err, SB_EXIT_INPUT, "pipeline schedule %d unknown", (int)pl->schedule);
    if (pl->microbatches > 1)
        for (int i = 0; i < m->nops; i++) {
            const sb_op *op = &m->ops[i];
            int d = batch_dim(op);
            if (d < 0)
                return sb_fail(err, SB_EXIT_INPUT,
                               "microbatches %d: op '%s' has no dim named batch to cut",
                               pl->microbatches, op->name);
            if (op->dims[d].size % pl->microbatches)
                return sb_fail(err, SB_EXIT_INPUT,
                               "microbatches %d: does not divide op '%s' batch %lld",
                               pl->microbatches, op->name, (long long)op->dims[d].size);
        }
    return 0;
}

int sb_pipeline_even(sb_pipeline *pl, const sb_model *m, int p, int S, int M, sb_schedule sched,
                     sb_error *err)
{
    if (S < 1 || S > SB_MAX_STAGES || S > m->nops)
        return sb_fail(err, SB_EXIT_INPUT, "--stages %d: must be 1 .. %d for model '%s'", S,
                       m->nops < SB_MAX_STAGES ? m->nops : SB_MAX_STAGES, m->name);
    if (p % S)
        return sb_fail(err, SB_EXIT_INPUT, "--stages %d does not divide p = %d", S, p);
    memset(pl, 0, sizeof *pl);
    pl->nstages = S;
    for (int s = 0; s <= S; s++)
        pl->first_op[s] = (int)((long long)m->nops * s / S);
    for (int s = 0; s < S; s++)
        pl->devices[s] = p / S;
    pl->microbatches = M;
    pl->schedule = sched;
    return sb_pipeline_check(pl, m, p, err);
}

int sb_pipeline_stage_of(const sb_pipeline *pl, int op)
{
    for (int s = 0; s < pl->nstages; s++)
        if (op < pl->first_op[s + 1])
            return s;
    return pl->nstages - 1;
}

int sb_pipeline_first_rank(const sb_pipeline *pl, int s)
{
    int r = 0;
    for (int t = 0; t < s; t++)
        r += pl->devices[t];
    return r;
}

int sb_pipeline_is_none(const sb_pipeline *pl)
{
    return pl->nstages == 1 && pl->microbatches == 1;
}

const char *sb_schedule_name(sb_schedule s)
{
    return s == SB_SCHEDULE_1F1B ? "1f1b" : "gpipe";
}

int sb_schedule_parse(const char *s, sb_schedule *out)
{
    if (!strcmp(s, "gpipe"))
        *out = SB_SCHEDULE_GPIPE;
    else if (!strcmp(s, "1f1b"))
        *out = SB_SCHEDULE_1F1B;
    else
        return -1;
    return 0;
}

int sb_op_recomputable(const sb_op *op)
{
    return op->kind != SB_OP_SOFTMAX_XENT && op->kind != SB_OP_LSTM;
}

int sb_recompute_parse(const sb_model *m, const char *spec, unsigned char *flags, sb_error *err)
{
    memset(flags, 0, (size_t)m->nops);
    size_t sl = strlen(spec);
    if (!sl || spec[0] == ',' || spec[sl - 1] == ',' || strstr(spec, ",,"))
        return sb_fail(err, SB_EXIT_INPUT, "--recompute: '%s' holds an empty op name (none, all, "
                       "or op names separated by commas)", spec);
    if (!strcmp(spec, "none"))
        return 0;
    if (!strcmp(spec, "all")) {
        for (int i = 0; i < m->nops; i++)
            flags[i] = (unsigned char)sb_op_recomputable(&m->ops[i]);
        return 0;
    }
    for (const char *s = spec; *s;) {
        const char *e = strchr(s, ',');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        int found = -1;
        for (int i = 0; i < m->nops && found < 0; i++)
            if (strlen(m->ops[i].name) == n && !strncmp(m->ops[i].name, s, n))
                found = i;
        if (found < 0)
            return sb_fail(err, SB_EXIT_INPUT, "--recompute: '%.*s' is not an op of model '%s' "
                           "(none, all, or op names separated by commas)", (int)n, s, m->name);
        if (!sb_op_recomputable(&m->ops[found]))
            return sb_fail(err, SB_EXIT_INPUT, "--recompute: op '%s' (%s) cannot be recomputed "
                           "(the loss and the LSTM are not)", m->ops[found].name,
                           sb_op_kind_name(m->ops[found].kind));
        flags[found] = 1;
        s += n;
        if (*s == ',')
            s++;
    }
    return 0;
}
