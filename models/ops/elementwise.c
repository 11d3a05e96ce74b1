/* ops/elementwise.c: add and elementwise (1 to 16 inputs of one shape, `pw`
 * fused pointwise ops). */
#define _GNU_SOURCE
#include "ops.h"

static int build_elementwise(parser *P, sb_op *op, call *c, outs *o, const op_use *u)
{
    const char *nm = u->word;
    if (op_want_tensors(P, c, nm, strcmp(nm, "add") == 0 ? 2 : 1, SB_MAX_IO)
        || kw_check(P, c, nm, "pw") || op_same_shapes(P, c, nm, -1))
        return -1;
    int64_t pw;
    if (kw_int(P, c, "pw", 0, 0, &pw))
        return -1;
    op->pw = (int)pw;
    op_same_shape_space(P, op, c, o, c->ntens);
    return 0;
}

const op_rule op_rule_elementwise = {.names = {"add", "elementwise"}, .build = build_elementwise};
