/* ops/pointwise.c: the pointwise family: act (a unary activation, `fn`),
 * mul (elementwise product; the second input may broadcast) and expand (a
 * broadcast to a larger shape). Each iteration space is the output's shape,
 * every dim splittable; a smaller operand follows its named dims only. */
#define _GNU_SOURCE
#include "ops.h"

/* ---- act functions by name (sb_act_fn) ---------------------------------------- */

static const char *const act_fn_names[] = {
#define ACT_NAME_(E, name) [SB_ACT_##E] = #name,
    SB_ACT_FNS(ACT_NAME_)
#undef ACT_NAME_
};
_Static_assert(sizeof act_fn_names / sizeof act_fn_names[0] == SB_ACT_FN_COUNT,
               "one name per act function");

const char *sb_act_fn_name(int fn)
{
    return fn >= 0 && fn < SB_ACT_FN_COUNT ? act_fn_names[fn] : "?";
}

int sb_act_fn_lookup(const char *name, size_t n)
{
    for (int f = 0; f < SB_ACT_FN_COUNT; f++)
        if (strlen(act_fn_names[f]) == n && strncmp(act_fn_names[f], name, n) == 0)
            return f;
    return -1;
}

/* y = act(x, fn=NAME): iteration space = x's dims */
static int build_act(parser *P, sb_op *op, call *c, outs *o, const op_use *u)
{
    (void)u;
    const char *nm = "act";
    if (op_want_tensors(P, c, nm, 1, 1) || kw_check(P, c, nm, "fn"))
        return -1;
    char all[128] = "";
    for (int f = 0; f < SB_ACT_FN_COUNT; f++)
        snprintf(all + strlen(all), sizeof all - strlen(all), "%s%s", f ? ", " : "", act_fn_names[f]);
    kwarg *kw = kw_get(c, "fn");
    if (!kw)
        return lang_err(P, c->callee, "act: missing fn=NAME (one of: %s)", all);
    if (kw->is_list || kw->str || kw->nitems != 1 || !kw->items[0].ident)
        return lang_err(P, kw->at, "act: fn must be a function name (one of: %s)", all);
    const token *t = kw->items[0].ident;
    op->fn = sb_act_fn_lookup(t->s, (size_t)t->len);
    if (op->fn < 0)
        return lang_err(P, kw->at, "act: unknown fn '%.*s' (one of: %s)", t->len, t->s, all);
    op_same_shape_space(P, op, c, o, 1);
    return 0;
}

const op_rule op_rule_act = {.names = {"act"}, .build = build_act};

/* Maps every dim of small (by name, same size, in the order of big's dims)
 * to big's dim; lang_err at `at` naming the first that does not fit. */
static int map_by_name(parser *P, const token *at, const char *nm, const sb_tensor *small,
                       const sb_dim *big, int nbig, const char *bigname, int *map)
{
    int prev = -1;
    for (int j = 0; j < small->ndims; j++) {
        int i = 0;
        while (i < nbig && strcmp(big[i].name, small->dims[j].name) != 0)
            i++;
        if (i == nbig) {
            char names[SB_MAX_DIMS * (SB_NAME_MAX + 2)] = "";
            for (int k = 0; k < nbig; k++)
                snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", k ? ", " : "",
                         big[k].name);
            return lang_err(P, at, "%s: dim '%s' of '%s' is not a dim of %s [%s]", nm,
                            small->dims[j].name, small->name, bigname, names);
        }
        if (big[i].size != small->dims[j].size)
            return lang_err(P, at, "%s: dim '%s' has size %lld in '%s' but %lld in %s", nm,
                            small->dims[j].name, (long long)small->dims[j].size, small->name,
                            (long long)big[i].size, bigname);
        if (i < prev)
            return lang_err(P, at, "%s: the dims of '%s' must come in the order of %s ('%s' is "
                            "out of order)", nm, small->name, bigname, small->dims[j].name);
        prev = i;
        map[j] = i;
    }
    return 0;
}

/* y = mul(a, b): iteration space = a's dims; b has a's dims, or a subset of
 * them by name (in a's order), or a's shape position by position (when no
 * name of b names another position of a). */
static int build_mul(parser *P, sb_op *op, call *c, outs *o, const op_use *u)
{
    (void)u;
    const char *nm = "mul";
    if (op_want_tensors(P, c, nm, 2, 2) || kw_check(P, c, nm, ""))
        return -1;
    const sb_tensor *a = T(P, c->tens[0]), *b = T(P, c->tens[1]);
    int map[SB_MAX_DIMS];
    int same_shape = a->ndims == b->ndims;
    for (int i = 0; same_shape && i < a->ndims; i++)
        same_shape = a->dims[i].size == b->dims[i].size;
    int by_name = 1, positional = same_shape;
    for (int j = 0; j < b->ndims; j++) {
        int found = 0;
        for (int i = 0; i < a->ndims; i++)
            if (strcmp(a->dims[i].name, b->dims[j].name) == 0) {
                found = 1;
                positional &= i == j;
            }
        by_name &= found;
    }
    if (positional && !by_name) {
        identity_map(map, b->ndims);
    } else {
        char an[SB_NAME_MAX + 2];
        snprintf(an, sizeof an, "'%s'", a->name);
        if (map_by_name(P, c->tens_at[1], nm, b, a->dims, a->ndims, an, map))
            return -1;
    }
    op_same_shape_space(P, op, c, o, 1);
    op->nin = 2;
    set_operand(&op->in[1], c->tens[1], b->ndims, map);
    return 0;
}

const op_rule op_rule_mul = {.names = {"mul"}, .build = build_mul};

/* y = expand(x, shape=[name=size, ...]): iteration space = the shape; x's
 * dims are some of its dims, by name and size, in its order. */
static int build_expand(parser *P, sb_op *op, call *c, outs *o, const op_use *u)
{
    (void)u;
    const char *nm = "expand";
    if (op_want_tensors(P, c, nm, 1, 1) || kw_check(P, c, nm, "shape"))
        return -1;
    kwarg *kw = kw_get(c, "shape");
    if (!kw)
        return lang_err(P, c->callee, "expand: missing shape=[name=size, ...]");
    if (!kw->is_list || kw->nitems < 1 || kw->nitems > SB_MAX_DIMS)
        return lang_err(P, kw->at, "expand: shape must be a list [name=size, ...] of 1 to %d dims",
                        SB_MAX_DIMS);
    sb_dim d[SB_MAX_DIMS];
    int nd = kw->nitems;
    for (int i = 0; i < nd; i++) {
        if (!kw->items[i].name || !kw->items[i].has_int)
            return lang_err(P, kw->at, "expand: each dim of the shape needs a name and a size: "
                            "[name=size, ...]");
        tok_str(kw->items[i].name, d[i].name, SB_NAME_MAX);
        d[i].size = kw->items[i].i;
        if (d[i].size <= 0)
            return lang_err(P, kw->at, "expand: dim '%s' has non-positive size %lld", d[i].name,
                            (long long)d[i].size);
    }
    const sb_tensor *x = T(P, c->tens[0]);
    int map[SB_MAX_DIMS];
    if (map_by_name(P, c->tens_at[0], nm, x, d, nd, "the shape", map))
        return -1;
    for (int i = 0; i < nd; i++)
        if (op_dim(P, kw->at, op, d[i].name, d[i].size, SB_ROLE_NONE) < 0)
            return -1;
    op->nin = 1;
    set_operand(&op->in[0], c->tens[0], x->ndims, map);
    o->nout = 1;
    o->ndims[0] = nd;
    memcpy(o->dims[0], d, (size_t)nd * sizeof *d);
    identity_map(o->maps[0], nd);
    return 0;
}

const op_rule op_rule_expand = {.names = {"expand"}, .build = build_expand};
