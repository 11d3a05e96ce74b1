/* ops/ops.h: the op builders of the model language (internal to models/).
 *
 * One rule per sb_op_kind (op_rules[], ops/table.c): the words that call it
 * in a model file, the builder that checks a call's arguments and fills one
 * op (iteration space, operand maps, attributes, output shapes), and the
 * op's own weights and statistics dims. Each kind's rule lives in the file
 * of its family (conv.c, dense.c, ...) and builds on build.c; lang.c hands
 * every op call to op_exec (table.c). Calls go one way: table.c to the
 * rules, the rules to build.c. */
#ifndef SB_MODELS_OPS_H
#define SB_MODELS_OPS_H

#include <stdio.h>
#include <string.h>

#include "../lang.h"

/* The outputs a builder makes: shapes and how each dim follows the op. */
typedef struct {
    int nout;
    int ndims[SB_MAX_IO];
    sb_dim dims[SB_MAX_IO][SB_MAX_DIMS];
    int maps[SB_MAX_IO][SB_MAX_DIMS];
} outs;

/* How the op was called: the word (`batchnorm`, `add`, ...) and the number
 * of names on the left. */
typedef struct {
    const char *word;
    int nlhs;
} op_use;

typedef struct {
    const char *names[2];  /* words that call it; names[0] is the kind's name (sb_op_kind_name) */
    /* Checks the call and fills op and o. Returns 0 or -1 (error set). */
    int (*build)(parser *P, sb_op *op, call *c, outs *o, const op_use *u);
    /* The whole statement, when the kind makes more than one op (reshape):
     * NULL for one op made by build. */
    int (*exec)(parser *P, scope *s, call *c, target *tg);
    /* The op's own weights (sb_op.weights) and reduced dims (stat_dims),
     * from its dims and attributes; NULL: none. */
    void (*weights)(sb_op *op);
} op_rule;

/* Indexed by sb_op_kind; SB_OP_KIND_COUNT entries, none NULL (table.c). */
extern const op_rule *const op_rules[];

/* The kinds' rules: op_rule_conv, op_rule_dense, ... */
#define OP_RULE_DECL_(K, id) extern const op_rule op_rule_##id;
SB_OP_KINDS(OP_RULE_DECL_)
#undef OP_RULE_DECL_

/* An op call `a, b = word(args)` in scope s: the op(s) made and bound
 * (table.c). */
int op_exec(parser *P, scope *s, call *c, target *tg);

/* ---- building blocks of the builders (build.c) ---------------------------- */

int op_add_tensor(parser *P, const token *at, const char *name, sb_tensor_kind kind, int ndims,
                  const sb_dim *dims, int producer, int slot);
sb_op *op_new(parser *P, const token *at, sb_op_kind kind, const char *name);
/* Adds iteration dim (name must be unique within the op); returns its index or -1. */
int op_dim(parser *P, const token *at, sb_op *op, const char *name, int64_t size, int role);
/* Registers the op and its outputs (tensors named by the left-hand names);
 * r is the rule of op's kind (its name for messages, its weights). */
int op_finish(parser *P, sb_op *op, const op_rule *r, target *tg, int nout, const int *ndims,
              sb_dim dims[][SB_MAX_DIMS], int maps[][SB_MAX_DIMS]);
/* Adds an implicit weight to op: dims follow iteration dims `map` (or, for
 * SB_MAP_ONE, take the size from `fixed`). */
void op_add_weight(sb_op *op, const char *suffix, int nd, const int *map, const int64_t *fixed,
                   double scale, double offset);
/* Initial scale of a weight: 1/sqrt(fan-in), fan-in the product of the K dims. */
double op_fan_in_scale(const sb_op *op);
/* Ops whose iteration space is the input's shape (and so is the output). */
void op_same_shape_space(parser *P, sb_op *op, call *c, outs *o, int nin);
int op_same_shapes(parser *P, call *c, const char *nm, int except_axis);
int op_want_tensors(parser *P, call *c, const char *op, int lo, int hi);
int op_want_rank(parser *P, call *c, int k, const char *op, int rank);

kwarg *kw_get(call *c, const char *key);
/* Checks that every keyword is in `allowed` (space separated) and that no
 * keyword repeats. */
int kw_check(parser *P, call *c, const char *op, const char *allowed);
/* Integer keyword (or default). */
int kw_int(parser *P, call *c, const char *key, int64_t def, int64_t lo, int64_t *out);
/* Integer or pair [a, b] (kernel, stride, pad). */
int kw_pair(parser *P, call *c, const char *key, int64_t def, int64_t lo, int out[2]);
/* A dim name keyword (`dim=units`), or def. */
int kw_name(parser *P, call *c, const char *key, const char *def, char *out);
/* Resolves an axis keyword (integer, negative from the end, or dim name). */
int kw_axis(parser *P, call *c, const char *key, const sb_tensor *t, int def, int *out);

static inline const sb_tensor *T(parser *P, int i) { return &P->m->tensors[i]; }

static inline void set_operand(sb_operand *o, int tensor, int ndims, const int *map)
{
    o->tensor = tensor;
    for (int i = 0; i < SB_MAX_DIMS; i++)
        o->map[i] = i < ndims ? map[i] : SB_MAP_ONE;
}

static inline void identity_map(int *map, int n)
{
    for (int i = 0; i < n; i++)
        map[i] = i;
}

/* in-channel names collide with out-channel names: suffix the reduction one */
static inline void k_name(char *out, const char *in, const char *other)
{
    if (strcmp(in, other) == 0)
        snprintf(out, SB_NAME_MAX, "%.*s_in", SB_NAME_MAX - 4, in);
    else
        snprintf(out, SB_NAME_MAX, "%s", in);
}

#endif
