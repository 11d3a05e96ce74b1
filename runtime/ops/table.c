/* table.c: the runtime's per-kind table (kinds.h), made from the kind list
 * SB_OP_KINDS (shardbench/model.h): a kind without its sb_op_runtime_<id>
 * entry in ops/ does not link. */
#include "kinds.h"

#define SB_OP_RUNTIME_ENTRY_(K, id) [SB_OP_##K] = &sb_op_runtime_##id,
const sb_op_runtime *const sb_op_runtime_table[] = {
    SB_OP_KINDS(SB_OP_RUNTIME_ENTRY_)};
#undef SB_OP_RUNTIME_ENTRY_

_Static_assert(sizeof sb_op_runtime_table / sizeof sb_op_runtime_table[0] == SB_OP_KIND_COUNT,
               "one runtime entry per op kind");
