/* table.c: the runtime's per-kind table (kinds.h), made from the kind list
 * SB_OP_KINDS (shardbench/model.h): a kind without its sb_op_runtime_<id>
 * entry in ops/ does not link. */
#include <stdio.h>

#include "kinds.h"

#define SB_OP_RUNTIME_ENTRY_(K, id) [SB_OP_##K] = &sb_op_runtime_##id,
const sb_op_runtime *const sb_op_runtime_table[] = {
    SB_OP_KINDS(SB_OP_RUNTIME_ENTRY_)};
#undef SB_OP_RUNTIME_ENTRY_

_Static_assert(sizeof sb_op_runtime_table / sizeof sb_op_runtime_table[0] == SB_OP_KIND_COUNT,
               "one runtime entry per op kind");

int sb_ops_check_backend(const sb_backend *be, const sb_model *m, sb_error *err)
{
    if (sb_backend_require(be, SB_FAM(MOVE), "the executor's relayouts and ZeRO slices", err)
        || sb_backend_require(be, SB_FAM(SUM), "the executor's sums of gradients", err)
        || sb_backend_require(be, SB_FAM(OPTIM), "the executor's update", err))
        return -1;
    for (int i = 0; i < m->nops; i++) {
        const sb_op *op = &m->ops[i];
        char who[160];
        snprintf(who, sizeof who, "op '%s' (%s)", op->name, sb_op_kind_name(op->kind));
        if (sb_backend_require(be, sb_op_runtime_table[op->kind]->families, who, err))
            return -1;
    }
    return 0;
}
