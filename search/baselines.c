/* baselines.c: strategies the search is compared with, costed by the same
 * model: data parallelism (more baselines come with the candidates work). */
#include <string.h>

#include "shardbench/search.h"
#include "shardbench/strategy.h"

int sb_strategy_data_parallel(const sb_problem *pb, int *choice, sb_error *err)
{
    (void)err;
    for (int i = 0; i < pb->m->nops; i++) {
        const sb_op *op = &pb->m->ops[i];
        const sb_configs *cf = &pb->cfg[i];
        int bd = -1;
        for (int d = 0; d < op->ndims; d++)
            if (!strcmp(op->dims[d].name, "batch"))
                bd = d;
        int best = -1, best_split = 0;
        for (int k = 0; k < cf->n; k++) {
            const int *c = cf->c + (size_t)k * (size_t)cf->ndims;
            int others = 1;
            for (int d = 0; d < op->ndims; d++)
                if (d != bd && c[d] != 1)
                    others = 0;
            int split = bd >= 0 ? c[bd] : 1;
            if (others && split > best_split) {
                best = k;
                best_split = split;
            }
        }
        choice[i] = best >= 0 ? best : 0; /* the all-ones config is enumerated first */
    }
    return 0;
}
