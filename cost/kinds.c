/* kinds.c: the search stage's per-kind table (cost/kinds.h), made from
 * the kind list SB_OP_KINDS (shardbench/model.h): a kind without its
 * sb_search_<id> entry in cost/ops/ does not link. */
#include "kinds.h"

#define SB_KIND_ENTRY_(K, id) [SB_OP_##K] = &sb_search_##id,
const sb_kind_search *const sb_kind_search_table[SB_OP_KIND_COUNT] = {SB_OP_KINDS(SB_KIND_ENTRY_)};
#undef SB_KIND_ENTRY_
