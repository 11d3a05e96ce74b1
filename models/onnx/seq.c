/* onnx/seq.c: torch's repeat_interleave under a dynamic axis. torch 1.13
 * (opset 13 and later) writes `k.repeat_interleave(r, dim=a)` of grouped-
 * query attention, when the size of axis a is not a number at export time,
 * as
 *
 *   parts = SplitToSequence(k, ones, axis=a)          (the heads, 1 each)
 *   reps  = SplitToSequence(Expand(r, [n]), ones)     (r per part)
 *   seq   = Loop(n, true, SequenceEmpty()) body:
 *             e = Unsqueeze(SequenceAt(parts, i), a+1)
 *             e = Expand(e, [1, .., r_i at a+1, .., 1])  (shape arithmetic)
 *             SequenceInsert(seq, Reshape(e, merge a and a+1))
 *   y     = ConcatFromSequence(seq, axis=a)
 *
 * which is y[.., i*r + q, ..] = k[.., i, ..]: the repeat of each part. The
 * pattern is recognised, not interpreted: SplitToSequence and SequenceEmpty
 * give sequence values (V_SEQ), the Loop checks its body — the shape
 * arithmetic folded with the importer's own handlers (run_fold), the
 * tensor path followed dim by dim (which dims are k's, which are the
 * repeat) — and ConcatFromSequence writes expand + reshape, as a static
 * export's `k[:, :, None].expand(..).reshape(..)` is read (shape.c): the
 * repeated dim is `rep`, merged with `kv_heads` into `heads`. Anything else
 * in or around the Loop is refused, naming what. */
#define _GNU_SOURCE
#ifdef SB_HAVE_ONNX

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "import.h"

#define MAX_TRACK 32
enum { TAG_ONE = -1, TAG_REP = -2 }; /* a tracked dim: k's dim j (>= 0), size 1, or the repeat */

/* A tensor of the Loop body derived from one part of k. */
typedef struct {
    const char *name;
    int nd;
    sym shape[SB_MAX_DIMS];
    int tag[SB_MAX_DIMS];
} track;

typedef struct {
    track t[MAX_TRACK];
    int n;
    const val *k;      /* the split activation */
    int axis;          /* its split axis */
    int64_t rep;       /* r of the Expand met, 0 before */
} body_state;

static int is_one(sym s)
{
    return sym_is_const(s) && s.c == 1;
}

static track *tfind(body_state *B, const char *name)
{
    for (int i = 0; name && i < B->n; i++)
        if (!strcmp(B->t[i].name, name))
            return &B->t[i];
    return NULL;
}

static track *tnew(ctx *C, body_state *B, const Onnx__NodeProto *n)
{
    if (B->n == MAX_TRACK || !out0(n)) {
        ox_unsupported(C, n, "a Loop body of more than %d tensor nodes", MAX_TRACK);
        return NULL;
    }
    track *t = &B->t[B->n++];
    memset(t, 0, sizeof *t);
    t->name = out0(n);
    /* what else reads it must not fold it as a constant */
    val *y = ox_vfind(C, t->name);
    if (y) {
        y->kind = V_UNAVAIL;
        y->why = "a part of a sequence (read only by the repeat_interleave pattern)";
    }
    return t;
}

/* The integer entries of a constant input (shape or axes), or -1. */
static int const_ints(ctx *C, const Onnx__NodeProto *n, size_t slot, sym *out, int max)
{
    val *v = ox_in_val(C, n, slot);
    if (!v || v->kind != V_CONST || v->ndata > max)
        return -1;
    memcpy(out, v->data, (size_t)v->ndata * sizeof *out);
    return v->ndata;
}

/* torch 1.13's own reshape of the repeat: its target is the input's sizes
 * with -1 at the split axis a and 0 for each size unknown at export time,
 * meant as "this dim of k". Read by ONNX's rule, a 0 copies the dim at the
 * same index of the (rank + 1) expanded part, which is k's dim only before
 * a: where a size after a was unknown, the export as written does not
 * compute the repeat (its shapes do not compose at the attention's MatMul).
 * This is the repeat torch meant: accepted when the part is k's dims with
 * (1, r) in place of a. 1 when taken (y's dims set). */
static int torch_reshape(const body_state *B, const track *x, const sym *s, int ns, track *y)
{
    const val *k = B->k;
    int a = B->axis;
    if (!k || ns != k->nd || x->nd != k->nd + 1 || !sym_is_const(s[a]) || s[a].c != -1)
        return 0;
    for (int j = 0; j < x->nd; j++) {
        int want = j < a ? j : j == a ? TAG_ONE : j == a + 1 ? TAG_REP : j - 1;
        if (x->tag[j] != want)
            return 0;
    }
    for (int j = 0; j < ns; j++)
        if (j != a && !(sym_is_const(s[j]) && s[j].c == 0) && !sym_eq(s[j], k->shape[j]))
            return 0;
    y->nd = ns;
    for (int j = 0; j < ns; j++) {
        y->tag[j] = j == a ? TAG_REP : j;
        y->shape[j] = j == a ? x->shape[a + 1] : k->shape[j];
    }
    return 1;
}

/* Unsqueeze, Squeeze, Expand, Reshape, Identity or Cast of a tracked tensor:
 * the output's dims. 0, or 1 when refused. */
static int track_node(ctx *C, body_state *B, const Onnx__NodeProto *n, const track *x)
{
    sym s[SB_MAX_DIMS];
    int64_t axes[SB_MAX_DIMS];
    track *y = tnew(C, B, n);
    if (!y)
        return 1;
    if (op_is(n, "Identity") || op_is(n, "Cast")) {
        const char *nm = y->name;
        *y = *x;
        y->name = nm;
        return 0;
    }
    if (op_is(n, "Unsqueeze") || op_is(n, "Squeeze")) {
        int na = ox_attr_ints(n, "axes", axes, SB_MAX_DIMS);
        if (na < 0) {
            sym a[SB_MAX_DIMS];
            na = const_ints(C, n, 1, a, SB_MAX_DIMS);
            for (int i = 0; i < na; i++)
                axes[i] = a[i].c;
        }
        int unsq = op_is(n, "Unsqueeze"), ond = unsq ? x->nd + na : x->nd - na;
        if (na < 1 || ond < 1 || ond > SB_MAX_DIMS)
            return ox_unsupported(C, n, "in the repeat pattern: axes not a small constant");
        uint32_t mask = 0;
        for (int i = 0; i < na; i++) {
            int a = ox_norm_axis(axes[i], unsq ? ond : x->nd);
            if (a < 0 || (!unsq && !is_one(x->shape[a])))
                return ox_unsupported(C, n, "in the repeat pattern: axis %lld", (long long)axes[i]);
            mask |= 1u << a;
        }
        y->nd = 0;
        for (int j = 0, q = 0; j < (unsq ? ond : x->nd); j++) {
            if (unsq && (mask & (1u << j))) {
                y->shape[y->nd] = S(1);
                y->tag[y->nd++] = TAG_ONE;
            } else if (unsq) {
                y->shape[y->nd] = x->shape[q];
                y->tag[y->nd++] = x->tag[q++];
            } else if (!(mask & (1u << j))) {
                y->shape[y->nd] = x->shape[j];
                y->tag[y->nd++] = x->tag[j];
            }
        }
        return 0;
    }
    int ns = const_ints(C, n, 1, s, SB_MAX_DIMS);
    if (ns < 1)
        return ox_unsupported(C, n, "in the repeat pattern: the shape is not a constant");
    if (op_is(n, "Expand")) {
        /* numpy broadcast; a size-1 dim of the part made r > 1 is the repeat */
        int nd = ns > x->nd ? ns : x->nd;
        y->nd = nd;
        for (int i = 0; i < nd; i++) {
            int xi = i - (nd - x->nd), si = i - (nd - ns);
            sym xv = xi >= 0 ? x->shape[xi] : S(1), sv = si >= 0 ? s[si] : S(1);
            int xt = xi >= 0 ? x->tag[xi] : TAG_ONE;
            if (is_one(sv) || sym_eq(xv, sv)) {
                y->shape[i] = xv;
                y->tag[i] = xt;
            } else if (is_one(xv) && sym_is_const(sv) && sv.c > 1 && !B->rep) {
                B->rep = sv.c;
                y->shape[i] = sv;
                y->tag[i] = TAG_REP;
            } else {
                return ox_unsupported(C, n, "in the repeat pattern: dim %d of size %lld expanded to %lld "
                                      "(only one size-1 dim, to a number)", i, (long long)ox_sym_val(C, xv),
                                      (long long)ox_sym_val(C, sv));
            }
        }
        return 0;
    }
    if (!op_is(n, "Reshape"))
        return ox_unsupported(C, n, "in the repeat pattern: reads a part of the sequence");
    if (torch_reshape(B, x, s, ns, y))
        return 0;
    /* a reshape that only adds or drops size-1 dims (row-major: the other
     * dims keep their order and sizes) */
    sym total = S(1), known = S(1);
    int infer = -1;
    for (int j = 0; j < x->nd; j++)
        if (ox_sym_mul(total, x->shape[j], &total))
            return ox_unsupported(C, n, "in the repeat pattern: size too large");
    for (int i = 0; i < ns; i++) {
        if (sym_is_const(s[i]) && s[i].c == 0 && !ox_attr_i(n, "allowzero", 0)) {
            if (i >= x->nd)
                return ox_unsupported(C, n, "in the repeat pattern: shape copies dim %d of rank %d", i, x->nd);
            s[i] = x->shape[i];
        } else if (sym_is_const(s[i]) && s[i].c == -1 && infer < 0) {
            infer = i;
            continue;
        } else if (s[i].c <= 0) {
            return ox_unsupported(C, n, "in the repeat pattern: shape entry %lld", (long long)s[i].c);
        }
        if (ox_sym_mul(known, s[i], &known))
            return ox_unsupported(C, n, "in the repeat pattern: size too large");
    }
    if (infer >= 0 && ox_sym_div(total, known, &s[infer]))
        return ox_unsupported(C, n, "in the repeat pattern: the -1 of the shape does not divide");
    int xi[SB_MAX_DIMS], nx = 0;
    for (int j = 0; j < x->nd; j++)
        if (!is_one(x->shape[j]))
            xi[nx++] = j;
    y->nd = ns;
    int q = 0;
    for (int i = 0; i < ns; i++) {
        y->shape[i] = s[i];
        if (is_one(s[i])) {
            y->tag[i] = TAG_ONE;
            continue;
        }
        if (q == nx || !sym_eq(s[i], x->shape[xi[q]]))
            return ox_unsupported(C, n, "in the repeat pattern: a reshape that moves data (only size-1 dims "
                                  "come or go)");
        y->tag[i] = x->tag[xi[q++]];
    }
    if (q != nx)
        return ox_unsupported(C, n, "in the repeat pattern: a reshape that moves data");
    return 0;
}

/* SequenceAt(parts of k, i): one part, k's dims with the split axis of
 * size 1 (or dropped, keepdims=0). */
static int track_part(ctx *C, body_state *B, const Onnx__NodeProto *n, const val *s)
{
    const val *k = ox_vfind(C, s->sq_src);
    if (!k || k->kind != V_ACT)
        return ox_unsupported(C, n, "a part of a sequence that is not an activation's split");
    if (B->k && B->k != k)
        return ox_unsupported(C, n, "parts of two different tensors in one Loop");
    B->k = k;
    B->axis = s->sq_axis;
    track *y = tnew(C, B, n);
    if (!y)
        return 1;
    for (int j = 0; j < k->nd; j++) {
        if (j == s->sq_axis && !s->sq_keep)
            continue;
        y->shape[y->nd] = j == s->sq_axis ? S(1) : k->shape[j];
        y->tag[y->nd++] = j == s->sq_axis ? TAG_ONE : j;
    }
    return 0;
}

/* The shape arithmetic a Loop body may hold, folded by the importer's own
 * handlers (the ops of import.c's table that fold constants). */
static const struct {
    const char *op;
    ox_handler fn;
} k_fold[] = {
    {"Constant", ox_node_constant}, {"Identity", ox_node_identity}, {"Cast", ox_node_identity},
    {"Shape", ox_node_shape},       {"ConstantOfShape", ox_node_constantofshape},
    {"Gather", ox_node_gather},     {"Unsqueeze", ox_node_unsqueeze}, {"Squeeze", ox_node_squeeze},
    {"Concat", ox_node_concat},     {"Slice", ox_node_slice},         {"Reshape", ox_node_reshape},
    {"Equal", ox_node_equal},       {"Where", ox_node_where},         {"Range", ox_node_range},
    {"Expand", ox_node_expand},     {"Add", ox_node_binary},          {"Sub", ox_node_binary},
    {"Mul", ox_node_binary},        {"Div", ox_node_binary},
};

const Onnx__GraphProto *ox_loop_body(const Onnx__NodeProto *n)
{
    const Onnx__AttributeProto *a = op_is(n, "Loop") ? ox_attr(n, "body") : NULL;
    return a ? a->g : NULL;
}

/* Runs the folding handler of body node n: its inputs must be constants.
 * 0, 1 when refused, -1 fatal. */
static int run_fold(ctx *C, const Onnx__NodeProto *n)
{
    ox_handler fn = NULL;
    for (size_t i = 0; i < sizeof k_fold / sizeof k_fold[0] && !fn; i++)
        if (op_is(n, k_fold[i].op))
            fn = k_fold[i].fn;
    if (!fn)
        return ox_unsupported(C, n, "in a Loop body: an operator other than shape arithmetic");
    for (size_t i = 0; i < n->n_input; i++) {
        val *x = ox_in_val(C, n, i);
        if (in_name(n, i) && (!x || (x->kind != V_CONST && x->kind != V_STATIC)))
            return ox_unsupported(C, n, "in a Loop body, reads '%.80s', which is not a constant (only the "
                                  "shape arithmetic of torch's repeat_interleave is read there)", in_name(n, i));
    }
    val *x = ox_in_val(C, n, 0), *x1 = ox_in_val(C, n, 1), *y = ox_out_val(C, n, 0);
    if ((!x && !op_is(n, "Constant")) || !y)
        return ox_unsupported(C, n, "in a Loop body: missing input or output");
    return fn(C, n, x, x1, y);
}

/* The Loop body's nodes, in order. seq_in, iter: the body's inputs; *ins:
 * the tracked tensor SequenceInsert appends. 0, or 1 when refused. */
static int walk_body(ctx *C, body_state *B, const Onnx__GraphProto *b, const char *iter, const char *seq_in,
                     const track **ins, const char **ins_out)
{
    for (size_t k = 0; k < b->n_node; k++) {
        const Onnx__NodeProto *n = b->node[k];
        for (size_t i = 0; i < n->n_input; i++)
            if (in_name(n, i) && !strcmp(in_name(n, i), iter) && !(op_is(n, "SequenceAt") && i == 1))
                return ox_unsupported(C, n, "in a Loop body: uses the iteration number other than as "
                                      "SequenceAt's position (only torch's repeat_interleave is read)");
        if (op_is(n, "SequenceAt")) {
            val *s = ox_in_val(C, n, 0), *y = ox_out_val(C, n, 0);
            if (!s || s->kind != V_SEQ || s->sq != SQ_SPLIT || !in_name(n, 1) || strcmp(in_name(n, 1), iter) || !y)
                return ox_unsupported(C, n, "in a Loop body: SequenceAt of something other than a "
                                      "SplitToSequence's parts at the iteration number");
            val *src = ox_vfind(C, s->sq_src);
            if (src && src->kind == V_ACT) {
                if (track_part(C, B, n, s))
                    return 1;
                continue;
            }
            /* the repeat counts: every part alike, so the body is the same
             * at every iteration */
            if (!src || src->kind != V_CONST || src->nd != 1 || src->ndata < 1)
                return ox_unsupported(C, n, "in a Loop body: parts of a tensor that is neither an activation "
                                      "nor integer repeat counts");
            for (int i = 1; i < src->ndata; i++)
                if (!sym_eq(src->data[i], src->data[0]))
                    return ox_unsupported(C, n, "repeat counts that differ between the parts (only a "
                                          "repeat_interleave by one number is read)");
            sym one = S(1);
            if (ox_set_const(C, y, s->sq_keep ? 1 : 0, &one, 1, src->data))
                return -1;
            continue;
        }
        if (op_is(n, "SequenceInsert")) {
            const track *t = tfind(B, in_name(n, 1));
            if (n->n_input != 2 || !in_name(n, 0) || strcmp(in_name(n, 0), seq_in) || !t || *ins)
                return ox_unsupported(C, n, "in a Loop body: a SequenceInsert that does not append one "
                                      "part to the carried sequence");
            *ins = t;
            *ins_out = out0(n);
            continue;
        }
        const track *x = tfind(B, in_name(n, 0));
        if (x) {
            if (track_node(C, B, n, x))
                return 1;
            continue;
        }
        for (size_t i = 1; i < n->n_input; i++)
            if (tfind(B, in_name(n, i)))
                return ox_unsupported(C, n, "in the repeat pattern: reads a part of the sequence");
        if (op_is(n, "Loop") || op_is(n, "If") || op_is(n, "Scan"))
            return ox_unsupported(C, n, "in a Loop body: a nested %s", n->op_type);
        int nl0 = C->nl, rc = run_fold(C, n);
        if (rc)
            return rc;
        if (C->nl != nl0)
            return ox_unsupported(C, n, "in a Loop body: computes (only shape arithmetic folds there)");
    }
    return 0;
}

/* A static scalar that is true (a bool constant, or a nonzero integer). */
static int is_true(const val *v)
{
    if (!v)
        return 0;
    if (v->kind == V_CONST)
        return v->ndata == 1 && sym_is_const(v->data[0]) && v->data[0].c != 0;
    return v->kind == V_STATIC && ((v->has_f && v->f != 0) || (v->fdata && v->nf == 1 && v->fdata[0] != 0));
}

/* Loop(n, true, SequenceEmpty) whose body appends each part of k repeated
 * r times: y becomes a SQ_REPEAT sequence. */
static int op_loop(ctx *C, const Onnx__NodeProto *n, val *y)
{
    const Onnx__GraphProto *b = ox_loop_body(n);
    val *M = ox_in_val(C, n, 0), *cond = ox_in_val(C, n, 1), *v0 = ox_in_val(C, n, 2);
    if (!b || n->n_input != 3 || n->n_output != 1 || b->n_input != 3 || b->n_output != 2)
        return ox_unsupported(C, n, "a Loop other than one carried sequence and no scan outputs (only "
                              "torch's repeat_interleave is read)");
    if (!M || M->kind != V_CONST || M->ndata != 1)
        return ox_unsupported(C, n, "the trip count is not a constant");
    if (in_name(n, 1) && !is_true(cond))
        return ox_unsupported(C, n, "the loop condition is not the constant true");
    if (!v0 || v0->kind != V_SEQ || v0->sq != SQ_EMPTY)
        return ox_unsupported(C, n, "the carried value does not start as an empty sequence");
    const char *iter = b->input[0] ? b->input[0]->name : NULL, *cin = b->input[1] ? b->input[1]->name : NULL;
    const char *sin = b->input[2] ? b->input[2]->name : NULL;
    val *vi = ox_vfind(C, iter), *vc = ox_vfind(C, cin), *vs = ox_vfind(C, sin);
    if (!vi || !vc || !vs || !b->output[0] || !b->output[1])
        return ox_unsupported(C, n, "a Loop body without its inputs or outputs named");
    sym zero = S(0), one = S(1);
    if (ox_set_const(C, vi, 0, NULL, 1, &zero) || ox_set_const(C, vc, 0, NULL, 1, &one))
        return -1;
    vs->kind = V_SEQ;
    vs->sq = SQ_EMPTY;
    body_state B;
    memset(&B, 0, sizeof B);
    const track *ins = NULL;
    const char *ins_out = NULL;
    int rc = walk_body(C, &B, b, iter, sin, &ins, &ins_out);
    if (rc)
        return rc;
    val *cout = ox_vfind(C, b->output[0]->name);
    if (!(cout == vc || is_true(cout)))
        return ox_unsupported(C, n, "the body's condition is not always true");
    if (!ins || !b->output[1]->name || strcmp(b->output[1]->name, ins_out))
        return ox_unsupported(C, n, "the body does not return the sequence with one part appended");
    /* the part appended: k's dims in order, the split axis repeated */
    const val *k = B.k;
    int a = B.axis, ok = k && ins->nd == k->nd;
    for (int j = 0; ok && j < k->nd; j++)
        ok = j == a ? (ins->tag[j] == TAG_REP || (ins->tag[j] == TAG_ONE && !B.rep))
                    : ins->tag[j] == j && sym_eq(ins->shape[j], k->shape[j]);
    if (!ok)
        return ox_unsupported(C, n, "the body does not repeat each part along its split axis in place "
                              "(only torch's repeat_interleave is read)");
    val *src = NULL;
    for (size_t q = 0; q < b->n_node && !src; q++)
        if (op_is(b->node[q], "SequenceAt")) {
            val *s = ox_in_val(C, b->node[q], 0);
            val *sv = s ? ox_vfind(C, s->sq_src) : NULL;
            if (sv == k)
                src = s;
        }
    if (!src || !sym_eq(src->sq_n, M->data[0]))
        return ox_unsupported(C, n, "the trip count is not the number of parts");
    y->kind = V_SEQ;
    y->sq = SQ_REPEAT;
    y->sq_src = k->name;
    y->sq_axis = a;
    y->sq_rep = B.rep ? B.rep : 1;
    return 0;
}

/* y = k repeated r times along axis a, each element in place: k with a
 * size-1 dim after a, expanded to r there, the two merged. */
static int emit_repeat(ctx *C, const Onnx__NodeProto *n, val *k, int a, int64_t rep, val *y)
{
    if (k->nd + 1 > SB_MAX_DIMS)
        return ox_unsupported(C, n, "more than %d dims", SB_MAX_DIMS - 1);
    if (rep == 1)
        return ox_alias(C, k, y);
    val u = *k, e;
    memset(&e, 0, sizeof e);
    e.name = y->name;
    sym ex[SB_MAX_DIMS], out[SB_MAX_DIMS];
    for (int j = 0, q = 0; j <= k->nd; j++) {
        if (j == a + 1) {
            u.shape[j] = S(1);
            u.src[j] = -1;
            ex[j] = S(rep);
            continue;
        }
        u.shape[j] = k->shape[q];
        u.src[j] = k->src[q];
        ex[j] = k->shape[q++];
    }
    u.nd = k->nd + 1;
    u.mat = -1;
    for (int j = 0; j < k->nd; j++)
        out[j] = k->shape[j];
    if (ox_sym_mul(out[a], S(rep), &out[a]))
        return ox_unsupported(C, n, "size too large");
    int rc = ox_emit_expand(C, n, &u, u.nd, ex, &e);
    if (rc || e.kind != V_ACT)
        return rc;
    return ox_emit_reshape(C, n, &e, k->nd, out, y);
}

/* ---- node handlers ---------------------------------------------------------- */

/* SplitToSequence(x, split=1s, axis): the parts of x, one element each. */
int ox_node_splittosequence(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y)
{
    if (x->kind != V_ACT && x->kind != V_CONST)
        return ox_unsupported(C, n, "splits a float constant (only activations and integer constants)");
    int a = ox_norm_axis(ox_attr_i(n, "axis", 0), x->nd), keep = (int)ox_attr_i(n, "keepdims", 1);
    if (a < 0)
        return ox_unsupported(C, n, "axis out of range");
    if (x1 && x1->kind != V_CONST && !sym_is_const(x->shape[a]))
        return ox_need_number(C, n, x->shape[a], "the number of parts");
    if (x1) {
        int ok = x1->kind == V_CONST && x1->ndata >= 1;
        for (int i = 0; ok && i < x1->ndata; i++)
            ok = is_one(x1->data[i]);
        if (!ok)
            return ox_unsupported(C, n, "split sizes other than 1 (only parts of one element are read)");
        keep = 1; /* with split given, the parts keep the axis */
        if (x1->nd == 1 && (!sym_is_const(x->shape[a]) || x1->ndata != x->shape[a].c))
            return ox_unsupported(C, n, "%d split sizes for a dim of %lld", x1->ndata,
                                  (long long)ox_sym_val(C, x->shape[a]));
    }
    y->kind = V_SEQ;
    y->sq = SQ_SPLIT;
    y->sq_src = x->name;
    y->sq_axis = a;
    y->sq_keep = keep;
    y->sq_n = x->shape[a];
    return 0;
}

int ox_node_sequenceempty(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y)
{
    (void)C, (void)n, (void)x, (void)x1;
    y->kind = V_SEQ;
    y->sq = SQ_EMPTY;
    return 0;
}

int ox_node_loop(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y)
{
    (void)x, (void)x1;
    return op_loop(C, n, y);
}

/* ConcatFromSequence of the Loop's repeat along the split axis: k with a
 * size-1 dim after the axis, expanded to r there, the two merged. */
int ox_node_concatfromsequence(ctx *C, const Onnx__NodeProto *n, val *x, val *x1, val *y)
{
    (void)x1;
    if (x->kind != V_SEQ || x->sq != SQ_REPEAT)
        return ox_unsupported(C, n, "concatenates a sequence that is not the repeat_interleave Loop's");
    val *k = ox_vfind(C, x->sq_src);
    int a = x->sq_axis;
    if (!k || k->kind != V_ACT || ox_attr_i(n, "new_axis", 0) || ox_norm_axis(ox_attr_i(n, "axis", 0), k->nd) != a)
        return ox_unsupported(C, n, "joins the repeated parts along another axis than the one split");
    if (k->nd + 1 > SB_MAX_DIMS)
        return ox_unsupported(C, n, "more than %d dims", SB_MAX_DIMS - 1);
    return emit_repeat(C, n, k, a, x->sq_rep, y);
}

/* ---- the same repeat unrolled: Split / Unsqueeze / Expand / Reshape / Concat ---- */

/* Node index of the producer of `name` if it is of type op and its output
 * is read only by node `by`; else -1. */
static int only_into(ctx *C, const char *name, const char *op, int by)
{
    val *x = name ? ox_vfind(C, name) : NULL;
    int p = x ? x->prod : -1;
    if (p < 0 || p >= (int)C->g->n_node || !op_is(C->g->node[p], op) || ox_only_consumer(C, name) != by)
        return -1;
    return p;
}

/* When the size along the axis is a number at export time, torch writes
 * the repeat unrolled: Split(k, 1s, axis=a) into the parts, and per part
 * Unsqueeze(a+1), Expand (r at a+1), Reshape (its own target, as above),
 * all joined by Concat(axis=a). The chain's nodes come before the Concat,
 * so they are held back from the walk here (as rope.c does); the Concat's
 * match checks them. */
int ox_hold_repeat(ctx *C)
{
    for (size_t ci = 0; ci < C->g->n_node; ci++) {
        const Onnx__NodeProto *c = C->g->node[ci];
        size_t P = c->n_input;
        if (!op_is(c, "Concat") || P < 2 || P > SB_MAX_IO || C->skip[ci])
            continue;
        int split = -1, ok = 1;
        for (size_t j = 0; ok && j < P; j++) {
            int r = only_into(C, in_name(c, j), "Reshape", (int)ci);
            int e = r >= 0 ? only_into(C, in_name(C->g->node[r], 0), "Expand", r) : -1;
            int u = e >= 0 ? only_into(C, in_name(C->g->node[e], 0), "Unsqueeze", e) : -1;
            const char *part = u >= 0 ? in_name(C->g->node[u], 0) : NULL;
            val *pv = part ? ox_vfind(C, part) : NULL;
            int sp = pv ? pv->prod : -1;
            ok = sp >= 0 && sp < (int)C->g->n_node && op_is(C->g->node[sp], "Split")
                 && C->g->node[sp]->n_output == P && (split < 0 || split == sp) && C->g->node[sp]->output[j]
                 && !strcmp(C->g->node[sp]->output[j], part) && ox_only_consumer(C, part) == u;
            split = sp;
        }
        if (!ok)
            continue;
        for (size_t j = 0; j < P; j++) {
            int r = ((val *)ox_vfind(C, in_name(c, j)))->prod;
            int e = ox_vfind(C, in_name(C->g->node[r], 0))->prod;
            int u = ox_vfind(C, in_name(C->g->node[e], 0))->prod;
            C->skip[r] = C->skip[e] = C->skip[u] = 3; /* held: the Concat's match takes them */
        }
        C->skip[split] = 3;
    }
    return 0;
}

/* The Concat of a held repeat: each part followed through its chain. */
int ox_match_repeat(ctx *C, int ni, int *rc)
{
    const Onnx__NodeProto *c = C->g->node[ni];
    val *r0 = c->n_input >= 2 ? ox_in_val(C, c, 0) : NULL;
    if (!r0 || r0->prod < 0 || r0->prod >= (int)C->g->n_node || C->skip[r0->prod] != 3
        || !op_is(C->g->node[r0->prod], "Reshape"))
        return 0;
    *rc = 0;
    size_t P = c->n_input;
    int chain[SB_MAX_IO][3], split = -1;
    for (size_t j = 0; j < P; j++) {
        chain[j][2] = ox_in_val(C, c, j)->prod;
        chain[j][1] = ox_in_val(C, C->g->node[chain[j][2]], 0)->prod;
        chain[j][0] = ox_in_val(C, C->g->node[chain[j][1]], 0)->prod;
        split = ox_in_val(C, C->g->node[chain[j][0]], 0)->prod;
        for (int q = 0; q < 3; q++)
            ox_absorb(C, chain[j][q]);
    }
    ox_absorb(C, split);
    const Onnx__NodeProto *sn = C->g->node[split];
    val *y = ox_vget(C, out0(c)), *k = ox_in_val(C, sn, 0);
    if (!y)
        return *rc = -1, 1;
    y->kind = V_POISON;
    if (!k || k->kind == V_POISON)
        return 1; /* its producer was refused */
    for (size_t j = 0; j < P; j++)
        for (int q = 1; q < 3; q++)
            for (size_t i = 1; i < C->g->node[chain[j][q]]->n_input; i++) {
                val *v = ox_in_val(C, C->g->node[chain[j][q]], i);
                if (v && v->kind == V_POISON)
                    return 1;
            }
    int a = k->kind == V_ACT ? ox_norm_axis(ox_attr_i(sn, "axis", 0), k->nd) : -1;
    if (a < 0 || !sym_is_const(k->shape[a]) || k->shape[a].c != (int64_t)P
        || ox_norm_axis(ox_attr_i(c, "axis", 0), k->nd) != a) {
        ox_unsupported(C, c, "a Concat of split parts expanded and reshaped that is not a repeat of "
                       "one activation's parts along the split axis");
        return 1;
    }
    val *sizes = ox_in_val(C, sn, 1);
    for (int i = 0; sizes && i < sizes->ndata; i++)
        if (sizes->kind != V_CONST || !is_one(sizes->data[i])) {
            ox_unsupported(C, c, "the repeat's parts are not of one element each");
            return 1;
        }
    int64_t rep = 0;
    for (size_t j = 0; j < P; j++) {
        body_state B;
        memset(&B, 0, sizeof B);
        B.k = k;
        B.axis = a;
        track *t = &B.t[B.n++];
        t->name = sn->output[j];
        for (int d = 0; d < k->nd; d++) {
            t->shape[t->nd] = d == a ? S(1) : k->shape[d];
            t->tag[t->nd++] = d == a ? TAG_ONE : d;
        }
        for (int q = 0; q < 3; q++) {
            int r = track_node(C, &B, C->g->node[chain[j][q]], &B.t[B.n - 1]);
            if (r)
                return *rc = r < 0 ? -1 : 0, 1;
        }
        const track *f = &B.t[B.n - 1];
        int ok = f->nd == k->nd && B.rep && (!rep || B.rep == rep);
        for (int d = 0; ok && d < k->nd; d++)
            ok = d == a ? f->tag[d] == TAG_REP : f->tag[d] == d && sym_eq(f->shape[d], k->shape[d]);
        if (!ok) {
            ox_unsupported(C, c, "part %zu of the split is not repeated in place along the split axis "
                           "(only torch's repeat_interleave by one number is read)", j);
            return 1;
        }
        rep = B.rep;
    }
    *rc = emit_repeat(C, c, k, a, rep, y);
    if (*rc > 0)
        *rc = 0;
    if (C->info)
        C->info->nfused += (int)(3 * P + 1);
    return 1;
}

#endif /* SB_HAVE_ONNX */
