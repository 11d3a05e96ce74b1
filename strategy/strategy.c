/* strategy.c: the strategy type (shardbench/strategy.h): made empty, from
 * each search's answer, from plain configs; freed. Files are strategy_io.c,
 * JSON strategy_json.c. */
#include "shardbench/pipesearch.h"
#include "shardbench/search.h"
#include "shardbench/strategy.h"

#include <stdlib.h>
#include <string.h>

const int *sb_strategy_config(const sb_strategy *st, int i)
{
    return st->cfg + (size_t)i * SB_MAX_DIMS;
}

int sb_strategy_init(sb_strategy *st, const sb_model *m, int p)
{
    memset(st, 0, sizeof *st);
    st->p = p;
    snprintf(st->algo, sizeof st->algo, "%s", "none");
    size_t n = (size_t)(m->nops ? m->nops : 1);
    st->cfg = calloc(n * SB_MAX_DIMS, sizeof *st->cfg);
    st->recompute = calloc(n, 1);
    st->op_line = calloc(n, sizeof *st->op_line);
    sb_pipeline_none(&st->pipe, m->nops, p);
    if (st->cfg && st->recompute && st->op_line)
        return 0;
    sb_strategy_free(st);
    return -1;
}

void sb_strategy_free(sb_strategy *st)
{
    free(st->cfg);
    free(st->recompute);
    free(st->op_line);
    st->op_line = NULL;
    st->cfg = NULL;
    st->recompute = NULL;
}

int sb_strategy_has_extras(const sb_model *m, const sb_strategy *st)
{
    if (st->zero || st->node_order || (st->pipe.nstages && !sb_pipeline_is_none(&st->pipe)))
        return 1;
    for (int i = 0; st->recompute && i < m->nops; i++)
        if (st->recompute[i] && sb_op_recomputable(&m->ops[i]))
            return 1;
    return 0;
}

static int init_or_fail(sb_strategy *st, const sb_model *m, int p, const char *algo,
                        sb_error *err)
{
    if (sb_strategy_init(st, m, p))
        return sb_fail(err, SB_EXIT_INTERNAL, "out of memory");
    snprintf(st->algo, sizeof st->algo, "%s", algo ? algo : "none");
    return 0;
}

int sb_strategy_from_choice(sb_strategy *st, const sb_problem *pb, const int *choice,
                            sb_error *err)
{
    const sb_model *m = pb->m;
    if (init_or_fail(st, m, pb->p, "given", err))
        return -1;
    for (int i = 0; i < m->nops; i++) {
        int nd = m->ops[i].ndims;
        memcpy(st->cfg + (size_t)i * SB_MAX_DIMS, pb->cfg[i].c + (size_t)choice[i] * (size_t)nd,
               (size_t)nd * sizeof(int));
    }
    return 0;
}

int sb_strategy_from_result(sb_strategy *st, const sb_problem *pb, const sb_result *r,
                            const char *algo, sb_error *err)
{
    const sb_model *m = pb->m;
    if (sb_strategy_from_choice(st, pb, r->choice, err))
        return -1;
    snprintf(st->algo, sizeof st->algo, "%s", algo ? algo : "none");
    st->cost = r->total_cost;
    for (int i = 0; i < m->nops; i++)
        st->recompute[i] = (unsigned char)sb_result_recomputed(pb, r, i);
    if (pb->cp.node_order == 1 && sb_node_order_possible(&pb->cp)) {
        st->node_order = 1;
        st->node_devices = pb->cp.node_devices;
    }
    st->precision = pb->cp.machine[0] ? pb->cp.precision : 0;
    return 0;
}

int sb_strategy_from_pipe(sb_strategy *st, const sb_model *m, int p, const sb_pipe_result *r,
                          const char *algo, int precision, sb_error *err)
{
    if (init_or_fail(st, m, p, algo, err))
        return -1;
    st->cost = r->step_cost;
    memcpy(st->cfg, r->cfg, (size_t)m->nops * SB_MAX_DIMS * sizeof *st->cfg);
    st->pipe = r->pipe;
    st->zero = r->zero;
    for (int i = 0; r->recompute && i < m->nops; i++)
        st->recompute[i] = r->recompute[i];
    st->precision = precision;
    return 0;
}

int sb_strategy_from_configs(sb_strategy *st, const sb_model *m, int p,
                             const int *const *configs, const sb_pipeline *pipe,
                             const unsigned char *recompute, sb_error *err)
{
    if (init_or_fail(st, m, p, "given", err))
        return -1;
    for (int i = 0; i < m->nops; i++)
        memcpy(st->cfg + (size_t)i * SB_MAX_DIMS, configs[i],
               (size_t)m->ops[i].ndims * sizeof(int));
    if (pipe)
        st->pipe = *pipe;
    for (int i = 0; recompute && i < m->nops; i++)
        st->recompute[i] = recompute[i];
    return 0;
}
