/* ops/dense.c: dense (a matrix on the last dim) and embedding (a table
 * lookup), the GEMM-like ops with one data input. */
#define _GNU_SOURCE
#include "ops.h"

static int build_dense(parser *P, sb_op *op, call *c, outs *o, const op_use *u)
{
    (void)u;
    const char *nm = "dense";
    if (op_want_tensors(P, c, nm, 1, 1) || kw_check(P, c, nm, "units pw dim"))
        return -1;
    const sb_tensor *x = T(P, c->tens[0]);
    if (x->ndims < 2 || x->ndims > SB_MAX_DIMS - 1)
        return lang_err(P, c->tens_at[0], "dense needs an input of rank 2 to %d, '%s' has rank %d",
                    SB_MAX_DIMS - 1, x->name, x->ndims);
    int64_t units, pw;
    char uname[SB_NAME_MAX], kname[SB_NAME_MAX];
    if (!kw_get(c, "units"))
        return lang_err(P, c->callee, "dense: missing argument 'units'");
    if (kw_int(P, c, "units", 0, 1, &units) || kw_int(P, c, "pw", 0, 0, &pw)
        || kw_name(P, c, "dim", "units", uname))
        return -1;
    op->pw = (int)pw;
    int r = x->ndims;
    for (int i = 0; i < r - 1; i++)
        if (op_dim(P, c->callee, op, x->dims[i].name, x->dims[i].size, SB_ROLE_M) < 0)
            return -1;
    k_name(kname, x->dims[r - 1].name, uname);
    if (op_dim(P, c->callee, op, uname, units, SB_ROLE_N) < 0
        || op_dim(P, c->callee, op, kname, x->dims[r - 1].size, SB_ROLE_K) < 0)
        return -1;
    int imap[SB_MAX_DIMS], omap[SB_MAX_DIMS];
    identity_map(imap, r);
    imap[r - 1] = r; /* the k dim sits after units */
    identity_map(omap, r);
    op->nin = 1;
    set_operand(&op->in[0], c->tens[0], r, imap);
    o->nout = 1;
    o->ndims[0] = r;
    memcpy(o->dims[0], x->dims, sizeof x->dims);
    snprintf(o->dims[0][r - 1].name, SB_NAME_MAX, "%s", uname);
    o->dims[0][r - 1].size = units;
    memcpy(o->maps[0], omap, sizeof omap);
    return 0;
}

/* The matrix (k, n). */
static void dense_weights(sb_op *op)
{
    const int64_t none[SB_MAX_DIMS] = {0};
    int nd = op->ndims;
    int map[2] = {nd - 1, nd - 2};
    op_add_weight(op, ".w", 2, map, none, op_fan_in_scale(op), 0);
}

const op_rule op_rule_dense = {.names = {"dense"}, .build = build_dense, .weights = dense_weights};

static int build_embedding(parser *P, sb_op *op, call *c, outs *o, const op_use *u)
{
    (void)u;
    const char *nm = "embedding";
    if (op_want_tensors(P, c, nm, 1, 1) || kw_check(P, c, nm, "vocab size dim vocab_dim"))
        return -1;
    const sb_tensor *x = T(P, c->tens[0]);
    if (x->ndims < 1 || x->ndims > SB_MAX_DIMS - 2)
        return lang_err(P, c->tens_at[0], "embedding: input '%s' has rank %d", x->name, x->ndims);
    int64_t vocab, size;
    char ename[SB_NAME_MAX], vname[SB_NAME_MAX];
    if (!kw_get(c, "vocab") || !kw_get(c, "size"))
        return lang_err(P, c->callee, "embedding: needs 'vocab' and 'size' (embedding width)");
    if (kw_int(P, c, "vocab", 0, 1, &vocab) || kw_int(P, c, "size", 0, 1, &size)
        || kw_name(P, c, "dim", "embed", ename) || kw_name(P, c, "vocab_dim", "vocab", vname))
        return -1;
    int r = x->ndims;
    for (int i = 0; i < r; i++)
        if (op_dim(P, c->callee, op, x->dims[i].name, x->dims[i].size, SB_ROLE_M) < 0)
            return -1;
    if (op_dim(P, c->callee, op, ename, size, SB_ROLE_N) < 0
        || op_dim(P, c->callee, op, vname, vocab, SB_ROLE_K) < 0)
        return -1;
    int map[SB_MAX_DIMS];
    identity_map(map, r);
    op->nin = 1;
    set_operand(&op->in[0], c->tens[0], r, map);
    o->nout = 1;
    o->ndims[0] = r + 1;
    for (int i = 0; i <= r; i++) {
        o->dims[0][i] = op->dims[i];
        o->maps[0][i] = i;
    }
    return 0;
}

/* The table (vocab, embed). */
static void embedding_weights(sb_op *op)
{
    const int64_t none[SB_MAX_DIMS] = {0};
    int nd = op->ndims;
    int map[2] = {nd - 1, nd - 2};
    op_add_weight(op, ".table", 2, map, none, 1.0, 0);
}

const op_rule op_rule_embedding = {.names = {"embedding"}, .build = build_embedding, .weights = embedding_weights};
