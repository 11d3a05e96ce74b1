/* ops/table.c: the rules by op kind (op_rules[], made from SB_OP_KINDS of
 * shardbench/model.h; sb_op_kind_name reads their names) and op_exec, which
 * runs an op call of lang.c through its rule. Above the rules (conv.c,
 * dense.c, ...) and their building blocks (build.c), none of which calls
 * back here. */
#define _GNU_SOURCE
#include "ops.h"

#include <stdio.h>
#include <string.h>

/* Indexed by kind, made from the kind list SB_OP_KINDS (shardbench/model.h):
 * a kind without its op_rule_<id> does not link; test_op_kinds checks that
 * none is empty. */
#define OP_RULE_ENTRY_(K, id) [SB_OP_##K] = &op_rule_##id,
const op_rule *const op_rules[] = {SB_OP_KINDS(OP_RULE_ENTRY_)};
#undef OP_RULE_ENTRY_
_Static_assert(sizeof op_rules / sizeof op_rules[0] == SB_OP_KIND_COUNT,
               "op_rules needs one rule per sb_op_kind");

/* ---- op calls ------------------------------------------------------------------ */

int op_exec(parser *P, scope *s, call *c, target *tg)
{
    char name[SB_NAME_MAX], lhs[SB_NAME_MAX], callee[SB_NAME_MAX];
    tok_str(c->callee, callee, sizeof callee);
    tok_str(tg->lhs[0], lhs, sizeof lhs);
    int kind = -1;
    for (int k = 0; k < SB_OP_KIND_COUNT; k++)
        for (int j = 0; j < 2; j++)
            if (op_rules[k]->names[j] && strcmp(callee, op_rules[k]->names[j]) == 0)
                kind = k;
    if (kind < 0) {
        char words[512] = "";
        for (int k = 0; k < SB_OP_KIND_COUNT; k++)
            for (int j = 0; j < 2; j++)
                if (op_rules[k]->names[j])
                    snprintf(words + strlen(words), sizeof words - strlen(words), "%s%s",
                             words[0] ? " " : "", op_rules[k]->names[j]);
        return lang_err(P, c->callee, "unknown op or block '%s' (ops: %s)", callee, words);
    }
    const op_rule *r = op_rules[kind];
    if (c->ntens == 0)
        return lang_err(P, c->callee, "%s needs at least one input tensor", callee);
    if (r->exec)
        return r->exec(P, s, c, tg);
    if (lang_unique_name(P, tg->lhs[0], s->prefix, lhs, name))
        return -1;
    sb_op *op = op_new(P, c->callee, (sb_op_kind)kind, name);
    if (!op)
        return -1;
    outs o;
    memset(&o, 0, sizeof o);
    op_use u = {.word = callee, .nlhs = tg->nlhs};
    if (r->build(P, op, c, &o, &u))
        return -1;
    return op_finish(P, op, r, tg, o.nout, o.ndims, o.dims, o.maps);
}
