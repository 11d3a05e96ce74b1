/* ops/softcap.c: softcap, Gemma 2's logit soft-capping (Gemma Team 2024,
 * "Gemma 2", section 2; transformers' Gemma2 attention and head):
 *
 *   y = softcap(x, cap=C)      y = C * tanh(x / C), elementwise
 *
 * C is a positive integer expression (Gemma 2's configs give 50 for the
 * attention logits and 30 for the final logits). The iteration space is
 * x's shape, every dim splittable; y has x's dims. */
#include "ops.h"

static int build_softcap(parser *P, sb_op *op, call *c, outs *o, const op_use *u)
{
    (void)u;
    const char *nm = "softcap";
    if (op_want_tensors(P, c, nm, 1, 1) || kw_check(P, c, nm, "cap"))
        return -1;
    if (!kw_get(c, "cap"))
        return lang_err(P, c->callee, "softcap: missing cap=N (y = N * tanh(x / N), N >= 1)");
    int64_t cap;
    if (kw_int(P, c, "cap", 0, 1, &cap))
        return -1;
    if (cap > 1000000000)
        return lang_err(P, kw_get(c, "cap")->at, "softcap: cap %lld is over 1e9 (no effect "
                        "on a float32 logit)", (long long)cap);
    op->cap = (double)cap;
    op_same_shape_space(P, op, c, o, 1);
    return 0;
}

const op_rule op_rule_softcap = {.names = {"softcap"}, .build = build_softcap};
