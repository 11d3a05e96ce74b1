/* ops/lstm.c: lstm, the whole multi-layer RNN as one op. */
#define _GNU_SOURCE
#include <math.h>

#include "ops.h"

static int build_lstm(parser *P, sb_op *op, call *c, outs *o, const op_use *u)
{
    (void)u;
    const char *nm = "lstm";
    if (op_want_tensors(P, c, nm, 1, 1) || op_want_rank(P, c, 0, nm, 3) || kw_check(P, c, nm, "layers"))
        return -1;
    const sb_tensor *x = T(P, c->tens[0]);
    int64_t layers;
    if (kw_int(P, c, "layers", 1, 1, &layers))
        return -1;
    op->layers = (int)layers;
    char kname[SB_NAME_MAX];
    k_name(kname, x->dims[2].name, x->dims[2].name);
    /* (layers, seq, batch, n = units, k = units) */
    if (op_dim(P, c->callee, op, "layers", layers, SB_ROLE_BATCH) < 0
        || op_dim(P, c->callee, op, x->dims[1].name, x->dims[1].size, SB_ROLE_M) < 0
        || op_dim(P, c->callee, op, x->dims[0].name, x->dims[0].size, SB_ROLE_M) < 0
        || op_dim(P, c->callee, op, x->dims[2].name, x->dims[2].size, SB_ROLE_N) < 0
        || op_dim(P, c->callee, op, kname, x->dims[2].size, SB_ROLE_K) < 0)
        return -1;
    op->nosplit = 1u << 1;
    int imap[3] = {2, 1, 4}, omap[3] = {2, 1, 3};
    op->nin = 1;
    set_operand(&op->in[0], c->tens[0], 3, imap);
    o->nout = 1;
    o->ndims[0] = 3;
    memcpy(o->dims[0], x->dims, 3 * sizeof(sb_dim));
    memcpy(o->maps[0], omap, sizeof omap);
    return 0;
}

/* (layers, 2, units_in, 4, units): [x; h] -> 4 gates of each unit. */
static void lstm_weights(sb_op *op)
{
    int map[5] = {0, SB_MAP_ONE, 4, SB_MAP_ONE, 3};
    int64_t fixed[5] = {0, 2, 0, 4, 0};
    op_add_weight(op, ".w", 5, map, fixed, 1.0 / sqrt((double)op->dims[3].size), 0);
}

const op_rule op_rule_lstm = {.names = {"lstm"}, .build = build_lstm, .weights = lstm_weights};
