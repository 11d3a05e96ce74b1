/* layout_ids.c: the distinct layouts of an operand over an op's configs
 * (sb_layout_ids, dp.h). Its own file because both the DP (dp.c: edge
 * tables by layout) and the dominance pruning (dp_prune.c) build them, and
 * neither should call into the other. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dp.h"

/* Distinct layouts of an operand over an op's configs: id per config. */
int sb_layout_ids(const sb_problem *pb, int op, const sb_operand *o, int tnd, int *ids,
                  int **layouts, int *nlayouts, sb_error *err)
{
    const sb_configs *cf = &pb->cfg[op];
    int nh = 16;
    while (nh < 2 * cf->n)
        nh *= 2;
    int *L = sb_malloc((size_t)cf->n * (size_t)tnd * sizeof *L, err);
    int *slot = sb_malloc((size_t)nh * sizeof *slot, err); /* layout index + 1, 0: free */
    if (!L || !slot) {
        free(L);
        free(slot);
        return -1;
    }
    memset(slot, 0, (size_t)nh * sizeof *slot);
    int nl = 0;
    for (int a = 0; a < cf->n; a++) {
        int lay[SB_MAX_DIMS];
        sb_operand_layout(&pb->m->ops[op], o, tnd, cf->c + (size_t)a * (size_t)cf->ndims, lay);
        uint64_t h = 1469598103934665603ULL;
        for (int d = 0; d < tnd; d++)
            h = (h ^ (uint64_t)(uint32_t)lay[d]) * 1099511628211ULL;
        int s = (int)(h & (uint64_t)(nh - 1)), found = -1;
        while (slot[s] && found < 0) {
            if (memcmp(L + (size_t)(slot[s] - 1) * (size_t)tnd, lay, (size_t)tnd * sizeof *lay) == 0)
                found = slot[s] - 1;
            else
                s = (s + 1) & (nh - 1);
        }
        if (found < 0) {
            memcpy(L + (size_t)nl * (size_t)tnd, lay, (size_t)tnd * sizeof *lay);
            found = nl++;
            slot[s] = nl;
        }
        ids[a] = found;
    }
    free(slot);
    *layouts = L;
    *nlayouts = nl;
    return 0;
}
