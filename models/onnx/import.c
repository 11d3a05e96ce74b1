/* onnx/import.c: ONNX graph -> model-file text (include/shardbench/onnx.h).
 *
 * Decodes the protobuf with the protobuf-c bindings generated from
 * onnx.proto (cmake/onnx.cmake), infers every shape statically (a symbolic
 * dim is a monomial over the model's params, so `--set batch=N` still holds
 * in the written text), and maps each ONNX node onto the ops of
 * models/README.md through the handler of its op type (k_ops[] below; the
 * handlers live in one file per family of operators). Transposes, squeezes
 * and size-1 reshapes are kept as views of the producer's tensor until a
 * consumer needs the real layout. Pointwise nodes fuse into their
 * producer's pw. What the model format cannot express is collected and
 * reported in one error. The text is then parsed by sb_model_parse
 * (models/lang.c): the importer never builds the IR. Not the file reading
 * or the sb_model_load hook (load.c). */
#define _GNU_SOURCE
#include "shardbench/onnx.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef SB_HAVE_ONNX

int sb_onnx_to_text(const void *data, size_t size, const char *path, const sb_onnx_opts *opts,
                    char **text, size_t *len, sb_onnx_info *info, sb_error *err)
{
    (void)data;
    (void)size;
    (void)opts;
    (void)info;
    *text = NULL;
    *len = 0;
    return sb_fail(err, SB_EXIT_INPUT,
                   "%s: cannot import ONNX: shardbench was built without ONNX support "
                   "(needs protobuf-c-compiler, libprotobuf-c-dev and libonnx-dev at build time)",
                   path);
}

#else /* SB_HAVE_ONNX */

#include <math.h>

#include "import.h"

/* ---- the node table ----------------------------------------------------------- */

/* Every ONNX operator the importer reads, by op type: its handler (in the
 * file of its family) and what it needs before it runs. An op type not here
 * is refused ("operator not supported by the importer"). */
static const ox_op k_ops[] = {
    /* conv.c */
    {"Conv", ox_node_conv, OX_ACT, NULL},
    {"MaxPool", ox_node_maxpool, OX_ACT, NULL},
    {"AveragePool", ox_node_avgpool, OX_ACT, NULL},
    {"GlobalAveragePool", ox_node_globalpool, OX_ACT, NULL},
    {"GlobalMaxPool", ox_node_globalpool, OX_ACT, NULL},
    {"Pad", ox_node_pad, OX_ACT, NULL},
    /* gemm.c */
    {"Gemm", ox_node_gemm, 0, NULL},
    {"MatMul", ox_node_matmul, 0, NULL},
    {"Einsum", ox_node_einsum, 0, NULL},
    /* norm.c */
    {"BatchNormalization", ox_node_batchnorm, OX_ACT, NULL},
    {"LayerNormalization", ox_node_layernorm, OX_ACT, NULL},
    {"Softmax", ox_node_softmax, OX_ACT, NULL},
    {"LogSoftmax", ox_node_softmax, OX_ACT, NULL},
    {"ReduceMean", ox_node_reducemean, OX_ACT, ox_match_layernorm},
    /* elementwise.c */
    {"Add", ox_node_binary, 0, ox_match_masked_softmax},
    {"Sub", ox_node_binary, 0, NULL},
    {"Mul", ox_node_binary, 0, ox_match_mul},
    {"Div", ox_node_binary, 0, ox_match_div},
    {"Pow", ox_node_binary, 0, ox_match_rmsnorm},
    {"Relu", ox_node_pointwise, 0, NULL},
    {"Clip", ox_node_pointwise, 0, NULL},
    {"Sigmoid", ox_node_pointwise, 0, ox_match_silu},
    {"Tanh", ox_node_pointwise, 0, NULL},
    {"Gelu", ox_node_pointwise, 0, NULL},
    {"Erf", ox_node_pointwise, 0, NULL},
    {"Sqrt", ox_node_pointwise, 0, NULL},
    {"Exp", ox_node_pointwise, 0, NULL},
    {"Log", ox_node_pointwise, 0, NULL},
    {"Neg", ox_node_pointwise, 0, NULL},
    {"Abs", ox_node_pointwise, 0, NULL},
    {"Reciprocal", ox_node_pointwise, 0, NULL},
    {"LeakyRelu", ox_node_pointwise, 0, NULL},
    {"Elu", ox_node_pointwise, 0, NULL},
    {"Selu", ox_node_pointwise, 0, NULL},
    {"HardSigmoid", ox_node_pointwise, 0, NULL},
    {"HardSwish", ox_node_pointwise, 0, NULL},
    {"Softplus", ox_node_pointwise, 0, NULL},
    {"Softsign", ox_node_pointwise, 0, NULL},
    {"Mish", ox_node_pointwise, 0, NULL},
    {"Celu", ox_node_pointwise, 0, NULL},
    {"ThresholdedRelu", ox_node_pointwise, 0, NULL},
    /* shape.c */
    {"Constant", ox_node_constant, OX_NO_X, NULL},
    {"Identity", ox_node_identity, 0, NULL},
    {"Dropout", ox_node_identity, 0, NULL},
    {"Cast", ox_node_identity, 0, NULL},
    {"Shape", ox_node_shape, 0, NULL},
    {"ConstantOfShape", ox_node_constantofshape, 0, NULL},
    {"Gather", ox_node_gather, 0, NULL},
    {"Unsqueeze", ox_node_unsqueeze, 0, NULL},
    {"Squeeze", ox_node_squeeze, 0, NULL},
    {"Concat", ox_node_concat, OX_NO_X, NULL},
    {"Slice", ox_node_slice, 0, NULL},
    {"Flatten", ox_node_flatten, OX_ACT, NULL},
    {"Reshape", ox_node_reshape, 0, NULL},
    {"Transpose", ox_node_transpose, 0, NULL},
    {"Split", ox_node_split, OX_NO_Y, NULL},
    {"Equal", ox_node_equal, 0, NULL},
    {"Where", ox_node_where, 0, ox_match_masked_softmax},
    {"Range", ox_node_range, 0, NULL},
    {"Trilu", ox_node_trilu, 0, NULL},
    {"Expand", ox_node_expand, 0, NULL},
    /* lstm.c */
    {"LSTM", ox_node_lstm, OX_ACT | OX_NO_Y, NULL},
    /* seq.c: torch's repeat_interleave under a dynamic axis */
    {"SplitToSequence", ox_node_splittosequence, 0, NULL},
    {"SequenceEmpty", ox_node_sequenceempty, OX_NO_X, NULL},
    {"Loop", ox_node_loop, 0, NULL},
    {"ConcatFromSequence", ox_node_concatfromsequence, 0, NULL},
};

static int is_seq_op(const Onnx__NodeProto *n)
{
    return op_is(n, "SplitToSequence") || op_is(n, "SequenceEmpty") || op_is(n, "Loop")
           || op_is(n, "ConcatFromSequence");
}

/* The table's entry for an op type, or NULL. */
static const ox_op *find_op(const char *op_type)
{
    for (size_t i = 0; op_type && i < sizeof k_ops / sizeof k_ops[0]; i++)
        if (strcmp(k_ops[i].op_type, op_type) == 0)
            return &k_ops[i];
    return NULL;
}

static int in_list(const char *const *l, const char *s)
{
    for (int i = 0; s && l[i]; i++)
        if (strcmp(l[i], s) == 0)
            return 1;
    return 0;
}

/* Refusals that need no shapes: op types and attributes. */
static int check_node_static(ctx *C, const Onnx__NodeProto *n)
{
    if (n->domain && n->domain[0] && strcmp(n->domain, "ai.onnx"))
        return ox_unsupported(C, n, "operator domain '%.40s' (only the default ONNX domain)", n->domain);
    if (!n->op_type || !find_op(n->op_type))
        return ox_unsupported(C, n, "operator not supported by the importer");
    return 0;
}

/* Weight positions: a graph input only read there (and without symbolic
 * dims) is a trained tensor of a graph-only export, not data. */
static int weight_slot(const Onnx__NodeProto *n, size_t slot)
{
    if (!n->op_type)
        return 0;
    if (op_is(n, "Gather") || op_is(n, "Expand") || op_is(n, "Slice"))
        return slot == 0; /* Slice: a packed projection cut in parts (nn.MultiheadAttention) */
    if (op_is(n, "MatMul") || op_is(n, "Einsum"))
        return slot == 1;
    if (op_is(n, "Add") || op_is(n, "Sub") || op_is(n, "Mul") || op_is(n, "Div") || op_is(n, "Pow")
        || op_is(n, "Identity"))
        return 1;
    return slot >= 1 && (op_is(n, "Conv") || op_is(n, "ConvTranspose") || op_is(n, "Gemm")
                         || op_is(n, "LSTM") || op_is(n, "GRU") || op_is(n, "RNN")
                         || op_is(n, "BatchNormalization") || op_is(n, "LayerNormalization")
                         || op_is(n, "PRelu"));
}

static int add_sym(ctx *C, const char *name, int64_t def)
{
    for (int i = 0; i < C->nsym; i++)
        if (strcmp(C->symname[i], name) == 0)
            return i;
    if (C->nsym == NSYM)
        return sb_fail(C->err, SB_EXIT_INPUT, "%s: more than %d symbolic dims", C->path, NSYM), -2;
    for (int i = 0; C->opts && i < C->opts->nsettings; i++)
        if (strcmp(C->opts->settings[i].name, name) == 0)
            def = C->opts->settings[i].value;
    if (def < 1 || def > ((int64_t)1 << 30))
        return sb_fail(C->err, SB_EXIT_INPUT, "%s: param '%s' = %lld out of range", C->path, name, (long long)def), -2;
    snprintf(C->symname[C->nsym], SB_NAME_MAX, "%s", name);
    C->symdef[C->nsym] = def;
    if (ox_name_take(C, name))
        return -2;
    return C->nsym++;
}

/* The --dim that fixes the dynamic axis named pn (the param) or dp (its
 * dim_param): its index + 1, or 0. */
static int fixed_dim(ctx *C, const char *pn, const char *dp)
{
    for (int i = 0; C->opts && i < C->opts->ndims; i++)
        if (!strcmp(C->opts->dims[i].name, pn) || (dp && !strcmp(C->opts->dims[i].name, dp))) {
            C->dims_used |= 1ull << (i < 63 ? i : 63);
            return i + 1;
        }
    return 0;
}

static int declare_input(ctx *C, const Onnx__ValueInfoProto *vi, val *x)
{
    const Onnx__TypeProto *tp = vi->type;
    if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type
        || !tp->tensor_type->shape)
        return sb_fail(C->err, SB_EXIT_INPUT, "%s: graph input '%.100s' has no tensor shape", C->path, vi->name);
    const Onnx__TensorShapeProto *sh = tp->tensor_type->shape;
    int nd = (int)sh->n_dim;
    if (nd < 1 || nd > SB_MAX_DIMS)
        return sb_fail(C->err, SB_EXIT_INPUT, "%s: graph input '%.100s' has rank %d (1 to %d)", C->path, vi->name,
                       nd, SB_MAX_DIMS);
    int elem = tp->tensor_type->has_elem_type ? tp->tensor_type->elem_type : 1;
    int isint = elem == 6 || elem == 7 || elem == 2 || elem == 3 || elem == 4 || elem == 5 || elem == 12 || elem == 13;
    const char *role4[4] = {"batch", "channels", "height", "width"};
    const char *role3[3] = {"batch", "seq", "embed"}, *role3s[3] = {"seq", "batch", "embed"};
    const char *role2i[2] = {"batch", "seq"}, *role2s[2] = {"seq", "batch"};
    char dn[SB_MAX_DIMS][SB_NAME_MAX], decl[2048] = "";
    sym sz[SB_MAX_DIMS];
    static const char *const batchy[] = {"batch", "batch_size", "N", "n", "b", "B", "bs", "batchsize", NULL};
    static const char *const seqy[] = {"seq", "seq_len", "sequence", "sequence_length", "T", "S", "len", NULL};
    /* a seq-first export with its batch dynamic: (seq, batch, ...) */
    int ba = C->batch_axis;
    if (nd >= 2 && sh->dim[1] && sh->dim[1]->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM
        && in_list(batchy, sh->dim[1]->dim_param)
        && !(sh->dim[0] && sh->dim[0]->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM
             && in_list(batchy, sh->dim[0]->dim_param)))
        ba = 1;
    for (int i = 0; i < nd; i++) {
        const Onnx__TensorShapeProto__Dimension *d = sh->dim[i];
        const char *role = NULL;
        char pn[SB_NAME_MAX];
        if (d && d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE
            && d->dim_value <= 0) /* not taken for a dynamic dim: that one is named */
            return sb_fail(C->err, SB_EXIT_INPUT, "%s: graph input '%.100s': dim %d is fixed at "
                           "%lld (a fixed dim is at least 1; a dynamic one has a dim_param name)",
                           C->path, vi->name, i, (long long)d->dim_value);
        if (nd == 4 && !isint)
            role = role4[i];
        else if (nd == 3 && !isint)
            role = ba ? role3s[i] : role3[i];
        else if (nd == 2 && isint)
            role = ba ? role2s[i] : role2i[i];
        else if (i == ba)
            role = "batch";
        int symbolic = d && d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && d->dim_param
                       && d->dim_param[0];
        int64_t v = d && d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE ? d->dim_value : 0;
        if (i == C->batch_axis && C->batch_static && v == C->batch_static) {
            int k = add_sym(C, "batch", v);
            if (k < 0)
                return -1;
            sz[i] = S(1);
            sz[i].e[k] = 1;
            role = "batch";
        } else if (symbolic || v <= 0) {
            const char *dp = symbolic ? d->dim_param : "";
            if ((i == 0 && !symbolic) || in_list(batchy, dp))
                snprintf(pn, sizeof pn, "batch");
            else if (in_list(seqy, dp) && (!C->seq_param[0] || !strcmp(C->seq_param, dp))) {
                /* the first sequence axis; another one (nn.Transformer's
                 * tgt length T beside src's S) keeps its own name */
                snprintf(pn, sizeof pn, "seq");
                snprintf(C->seq_param, sizeof C->seq_param, "%s", dp);
            } else {
                size_t k = 0;
                for (const char *p = dp; *p && k < 40; p++) {
                    int ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9' && k);
                    pn[k] = ok ? *p : '_';
                    k++;
                }
                pn[k] = '\0';
                if (!k || !((pn[0] >= 'a' && pn[0] <= 'z') || (pn[0] >= 'A' && pn[0] <= 'Z')))
                    snprintf(pn, sizeof pn, "dyn%d", C->nsym);
                if (!strcmp(pn, "model") || !strcmp(pn, "param") || !strcmp(pn, "input") || !strcmp(pn, "weight")
                    || !strcmp(pn, "repeat") || !strcmp(pn, "block") || !strcmp(pn, "end") || !strcmp(pn, "return")
                    || !strcmp(pn, "cutoff"))
                    strcat(pn, "_");
            }
            int fixed = fixed_dim(C, pn, dp);
            if (fixed > 0) {
                sz[i] = S(C->opts->dims[fixed - 1].value);
            } else {
                int k = add_sym(C, pn, 1);
                if (k < 0)
                    return -1;
                sz[i] = S(1);
                sz[i].e[k] = 1;
            }
            if (!strcmp(pn, "batch") || !strcmp(pn, "seq") || !role || !strcmp(role, "seq"))
                role = pn; /* a second sequence axis is named by its param */
        } else {
            if (v > ((int64_t)1 << 40))
                return sb_fail(C->err, SB_EXIT_INPUT, "%s: graph input '%.100s': dim %d too large", C->path, vi->name, i);
            sz[i] = S(v);
        }
        if (role && !strcmp(role, "seq") && !C->seq)
            C->seq = ox_sym_val(C, sz[i]);
        if (role)
            ox_recog_name(C, role, ox_sym_val(C, sz[i]), dn[i]);
        else
            ox_gen_name(C, ox_sym_val(C, sz[i]), dn[i]);
    }
    ox_uniq_dims(nd, dn);
    int t = ox_new_tensor(C, vi->name, "input", nd, dn, sz, -1);
    if (t < 0)
        return -1;
    for (int i = 0; i < nd; i++) {
        char s[128];
        ox_sym_str(C, sz[i], s, sizeof s);
        snprintf(decl + strlen(decl), sizeof decl - strlen(decl), "%s%s=%s", i ? ", " : "", C->t[t].dn[i], s);
    }
    ox_printf(&C->decl, "input %s[%s]\n", C->t[t].name, decl);
    ox_bind_act(C, x, t);
    return 0;
}

static void poison_outputs(ctx *C, const Onnx__NodeProto *n)
{
    for (size_t i = 0; i < n->n_output; i++) {
        val *y = ox_out_val(C, n, i);
        if (y && y->kind == V_NONE)
            y->kind = V_POISON;
    }
}

/* Repeated keys (issue 39): an initializer or a graph input named twice
 * (the second silently replaced the first), a node attribute given twice
 * (the first was read); each refused naming the first. */
static int check_repeats(ctx *C)
{
    const Onnx__GraphProto *g = C->g;
    int *first = calloc((size_t)C->nv + 1, sizeof *first);
    if (!first)
        return ox_oom(C);
    int rc = 0;
    for (size_t i = 0; !rc && i < g->n_initializer; i++) {
        const Onnx__TensorProto *tp = g->initializer[i];
        val *x = tp && tp->name ? ox_vfind(C, tp->name) : NULL;
        if (!x)
            continue;
        if (first[x - C->v])
            rc = sb_fail(C->err, SB_EXIT_INPUT, "%s: initializer '%.100s' given twice (first: "
                         "initializer %d, again: %zu)", C->path, tp->name, first[x - C->v] - 1, i);
        first[x - C->v] = (int)i + 1;
    }
    memset(first, 0, ((size_t)C->nv + 1) * sizeof *first);
    for (size_t i = 0; !rc && i < g->n_input; i++) {
        val *x = g->input[i] && g->input[i]->name ? ox_vfind(C, g->input[i]->name) : NULL;
        if (!x)
            continue;
        if (first[x - C->v])
            rc = sb_fail(C->err, SB_EXIT_INPUT, "%s: graph input '%.100s' given twice (first: "
                         "input %d, again: %zu)", C->path, g->input[i]->name, first[x - C->v] - 1,
                         i);
        first[x - C->v] = (int)i + 1;
    }
    free(first);
    for (size_t ni = 0; !rc && ni < g->n_node; ni++) {
        const Onnx__NodeProto *n = g->node[ni];
        for (size_t a = 0; !rc && a < n->n_attribute; a++)
            for (size_t b = 0; !rc && b < a; b++)
                if (n->attribute[a] && n->attribute[b] && n->attribute[a]->name
                    && n->attribute[b]->name && !strcmp(n->attribute[a]->name, n->attribute[b]->name))
                    rc = sb_fail(C->err, SB_EXIT_INPUT, "%s: node %zu '%.100s' (%.40s): attribute "
                                 "'%.60s' given twice (first: attribute %zu, again: %zu)", C->path,
                                 ni, n->name ? n->name : "", n->op_type ? n->op_type : "",
                                 n->attribute[a]->name, b, a);
    }
    return rc;
}

static int do_node(ctx *C, int ni)
{
    const Onnx__NodeProto *n = C->g->node[ni];
    int rc = 0;
    /* the Add of a rotary pattern reads nodes held back from the walk */
    if (op_is(n, "Add") && ox_match_rope(C, ni, &rc))
        return rc < 0 ? -1 : 0;
    /* so does the Concat of a repeat_interleave unrolled (seq.c) */
    if (op_is(n, "Concat") && ox_match_repeat(C, ni, &rc))
        return rc < 0 ? -1 : 0;
    for (size_t i = 0; i < n->n_input; i++) {
        const char *nm = in_name(n, i);
        if (!nm)
            continue;
        val *x = ox_vfind(C, nm);
        if (!x || x->kind == V_NONE) {
            if (x && x->prod > ni)
                ox_unsupported(C, n, "input '%.80s' comes from a later node (the graph is not topologically sorted)", nm);
            else if (!x || x->prod < 0)
                ox_unsupported(C, n, "input '%.80s' is not a graph input, initializer or node output", nm);
            poison_outputs(C, n);
            return 0;
        }
        if (x->kind == V_POISON) {
            poison_outputs(C, n);
            return 0;
        }
        if (x->kind == V_UNAVAIL) {
            ox_unsupported(C, n, "uses '%.80s', %s", nm, x->why);
            poison_outputs(C, n);
            return 0;
        }
        if (x->kind == V_SEQ && !is_seq_op(n)) {
            ox_unsupported(C, n, "reads the sequence '%.80s' (sequences are imported only as torch's "
                           "repeat_interleave: SplitToSequence, Loop, ConcatFromSequence)", nm);
            poison_outputs(C, n);
            return 0;
        }
    }
    for (size_t i = 0; i < n->n_input; i++)
        ox_consume(C, ox_in_val(C, n, i));
    int nl0 = C->nl;
    const ox_op *e = find_op(n->op_type);
    if (e && e->match && e->match(C, ni, &rc))
        return rc < 0 ? -1 : 0;
    val *x = ox_in_val(C, n, 0), *x1 = ox_in_val(C, n, 1), *y = ox_out_val(C, n, 0);
    int flags = e ? e->flags : OX_ACT;
    if (!(flags & OX_NO_X) && !x)
        rc = ox_unsupported(C, n, "missing input");
    else if (!y && !(flags & OX_NO_Y))
        rc = 0; /* nothing reads it */
    else if ((flags & OX_ACT) && x->kind != V_ACT)
        rc = ox_unsupported(C, n, "applied to a constant (only activations)");
    else if (x && x->nd > SB_MAX_DIMS)
        rc = ox_unsupported(C, n, "more than %d dims", SB_MAX_DIMS);
    else if (e)
        rc = e->handler(C, n, x, x1, y);
    else
        rc = ox_unsupported(C, n, "operator not supported by the importer");
    if (rc < 0)
        return -1;
    if (rc > 0) {
        poison_outputs(C, n);
        return 0;
    }
    if (C->info && C->nl == nl0 && y && is_static(y))
        C->info->nfolded++;
    return 0;
}

/* The values of a Loop body get their entries before the walk (lookups
 * during it never reallocate); their producer is the Loop node. */
static int body_values(ctx *C, const Onnx__NodeProto *loop, int ni)
{
    const Onnx__GraphProto *b = ox_loop_body(loop);
    if (!b)
        return 0;
    if (b->n_node > 1024)
        return sb_fail(C->err, SB_EXIT_INPUT, "%s: a Loop body of %zu nodes (at most 1024)", C->path, b->n_node);
    for (size_t i = 0; i < b->n_input; i++)
        if (b->input[i] && b->input[i]->name && b->input[i]->name[0] && !ox_vget(C, b->input[i]->name))
            return -1;
    for (size_t k = 0; k < b->n_node; k++) {
        const Onnx__NodeProto *n = b->node[k];
        if (!n)
            return sb_fail(C->err, SB_EXIT_INPUT, "%s: empty node %zu in a Loop body", C->path, k);
        for (size_t j = 0; j < n->n_input; j++)
            if (n->input[j] && n->input[j][0] && !ox_vget(C, n->input[j]))
                return -1;
        for (size_t j = 0; j < n->n_output; j++) {
            val *y = n->output[j] && n->output[j][0] ? ox_vget(C, n->output[j]) : NULL;
            if (n->output[j] && n->output[j][0] && !y)
                return -1;
            if (y && y->prod < 0)
                y->prod = ni;
        }
    }
    return 0;
}

static int prepass(ctx *C)
{
    Onnx__GraphProto *g = C->g;
    if (g->n_node > MAX_NODES)
        return sb_fail(C->err, SB_EXIT_INPUT, "%s: %zu nodes (at most %d)", C->path, g->n_node, MAX_NODES);
    for (size_t i = 0; i < g->n_node; i++)
        if (!g->node[i])
            return sb_fail(C->err, SB_EXIT_INPUT, "%s: empty node %zu", C->path, i);
    /* every name gets its value now: later lookups never reallocate */
    for (size_t i = 0; i < g->n_initializer; i++)
        if (g->initializer[i] && g->initializer[i]->name && g->initializer[i]->name[0] && !ox_vget(C, g->initializer[i]->name))
            return -1;
    for (size_t i = 0; i < g->n_input; i++)
        if (g->input[i] && g->input[i]->name && g->input[i]->name[0] && !ox_vget(C, g->input[i]->name))
            return -1;
    for (size_t ni = 0; ni < g->n_node; ni++) {
        const Onnx__NodeProto *n = g->node[ni];
        for (size_t k = 0; k < n->n_output; k++) {
            if (!n->output[k] || !n->output[k][0])
                continue;
            val *y = ox_vget(C, n->output[k]);
            if (!y)
                return -1;
            if (y->prod >= 0)
                return sb_fail(C->err, SB_EXIT_INPUT, "%s: value '%.100s' is produced by two nodes", C->path, n->output[k]);
            y->prod = (int)ni;
        }
        if (body_values(C, n, (int)ni))
            return -1;
        for (size_t k = 0; k < n->n_input; k++)
            if (n->input[k] && n->input[k][0] && !ox_vget(C, n->input[k]))
                return -1;
    }
    for (size_t i = 0; i < g->n_output; i++)
        if (g->output[i] && g->output[i]->name && g->output[i]->name[0] && !ox_vget(C, g->output[i]->name))
            return -1;
    if (check_repeats(C))
        return -1;
    /* consumers */
    C->ncons = calloc((size_t)C->nv + 1, sizeof *C->ncons);
    C->cons = calloc((size_t)C->nv + 1, sizeof *C->cons);
    C->skip = calloc(g->n_node + 1, sizeof *C->skip);
    if (!C->ncons || !C->cons || !C->skip)
        return ox_oom(C);
    for (int pass = 0; pass < 2; pass++) {
        for (size_t ni = 0; ni < g->n_node; ni++) {
            const Onnx__NodeProto *n = g->node[ni];
            for (size_t k = 0; k < n->n_input; k++) {
                val *x = ox_in_val(C, n, k);
                if (!x)
                    continue;
                int vi = (int)(x - C->v);
                if (pass == 0) {
                    C->ncons[vi]++;
                    x->uses++;
                } else {
                    C->cons[vi][C->ncons[vi]++] = (int)ni;
                }
            }
        }
        if (pass == 0)
            for (int vi = 0; vi < C->nv; vi++) {
                if (C->ncons[vi] && !(C->cons[vi] = malloc((size_t)C->ncons[vi] * sizeof(int))))
                    return ox_oom(C);
                C->ncons[vi] = 0;
            }
    }
    for (size_t i = 0; i < g->n_output; i++) {
        val *x = g->output[i] && g->output[i]->name ? ox_vfind(C, g->output[i]->name) : NULL;
        if (x)
            x->uses++;
    }
    for (size_t ni = 0; ni < g->n_node; ni++)
        if (check_node_static(C, g->node[ni]))
            C->skip[ni] = 2; /* reported; its outputs are unknown */
    if (ox_hold_repeat(C))
        return -1;
    return ox_hold_rope(C);
}

static int setup_inputs(ctx *C)
{
    Onnx__GraphProto *g = C->g;
    for (size_t i = 0; i < g->n_initializer; i++) {
        const Onnx__TensorProto *tp = g->initializer[i];
        if (!tp || !tp->name)
            continue;
        val *x = ox_vfind(C, tp->name);
        if (!x)
            continue; /* no name: nothing can read it */
        if (x->prod >= 0)
            return sb_fail(C->err, SB_EXIT_INPUT, "%s: initializer '%.100s' is also a node output", C->path, tp->name);
        if (ox_set_from_tensor(C, x, tp, 1))
            return C->oom ? -1
                          : sb_fail(C->err, SB_EXIT_INPUT, "%s: initializer '%.100s' has bad dims", C->path, tp->name);
    }
    /* an export without symbolic dims: the leading dim its data inputs
     * share is still the model's `batch` param (--set batch=N) */
    int anysym = 0, ndata = 0;
    int64_t lead = 0;
    for (size_t i = 0; i < g->n_input; i++) {
        const Onnx__ValueInfoProto *vi = g->input[i];
        val *x = vi && vi->name ? ox_vfind(C, vi->name) : NULL;
        if (!x || x->kind != V_NONE || x->prod >= 0 || !x->uses || !vi->type
            || vi->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !vi->type->tensor_type
            || !vi->type->tensor_type->shape || vi->type->tensor_type->shape->n_dim < 1)
            continue;
        const Onnx__TensorShapeProto *sh = vi->type->tensor_type->shape;
        int vix = (int)(x - C->v), all_weight = 1;
        for (int k = 0; k < C->ncons[vix]; k++) {
            const Onnx__NodeProto *n = g->node[C->cons[vix][k]];
            for (size_t s = 0; s < n->n_input; s++)
                if (n->input[s] && strcmp(n->input[s], vi->name) == 0 && !weight_slot(n, s))
                    all_weight = 0;
        }
        for (size_t k = 0; k < sh->n_dim; k++)
            anysym |= !sh->dim[k] || sh->dim[k]->value_case != ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE
                      || sh->dim[k]->dim_value <= 0;
        if (all_weight)
            continue;
        size_t ba = (size_t)C->batch_axis;
        int64_t d0 = ba < sh->n_dim && sh->dim[ba] ? sh->dim[ba]->dim_value : 0;
        lead = ndata++ == 0 ? d0 : lead == d0 ? lead : -1;
    }
    if (!anysym && ndata && lead > 0)
        C->batch_static = lead;
    /* params first (reserved names), in input order */
    for (size_t i = 0; i < g->n_input; i++) {
        const Onnx__ValueInfoProto *vi = g->input[i];
        if (!vi || !vi->name)
            continue;
        val *x = ox_vfind(C, vi->name);
        if (!x || x->kind != V_NONE || x->prod >= 0)
            continue; /* an initializer listed as an input (IR < 4), or no name */
        if (!x->uses)
            continue;
        int symbolic = 0, known = vi->type && vi->type->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE
                                  && vi->type->tensor_type && vi->type->tensor_type->shape;
        if (known) {
            const Onnx__TensorShapeProto *sh = vi->type->tensor_type->shape;
            for (size_t k = 0; k < sh->n_dim; k++)
                symbolic |= !sh->dim[k] || sh->dim[k]->value_case != ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE
                            || sh->dim[k]->dim_value <= 0;
        }
        int all_weight = 1;
        int vix = (int)(x - C->v);
        for (int k = 0; k < C->ncons[vix]; k++) {
            const Onnx__NodeProto *n = g->node[C->cons[vix][k]];
            for (size_t s = 0; s < n->n_input; s++)
                if (n->input[s] && strcmp(n->input[s], vi->name) == 0 && !weight_slot(n, s))
                    all_weight = 0;
        }
        if (!symbolic && all_weight && known) {
            const Onnx__TensorShapeProto *sh = vi->type->tensor_type->shape;
            if (sh->n_dim > SB_MAX_DIMS)
                return sb_fail(C->err, SB_EXIT_INPUT, "%s: weight '%.100s' has rank %zu", C->path, vi->name, sh->n_dim);
            x->kind = V_STATIC;
            x->weight = 1;
            x->nd = (int)sh->n_dim;
            for (int k = 0; k < x->nd; k++) {
                if (sh->dim[k]->dim_value > ((int64_t)1 << 40))
                    return sb_fail(C->err, SB_EXIT_INPUT, "%s: weight '%.100s' too large", C->path, vi->name);
                x->shape[k] = S(sh->dim[k]->dim_value);
            }
            continue;
        }
        if (declare_input(C, vi, x))
            return -1;
    }
    for (int i = 0; C->opts && i < C->opts->ndims; i++) {
        if (C->opts->dims[i].value < 1 || C->opts->dims[i].value > ((int64_t)1 << 30))
            return sb_fail(C->err, SB_EXIT_INPUT, "%s: --dim %s=%lld: out of range (1 to 2^30)", C->path,
                           C->opts->dims[i].name, (long long)C->opts->dims[i].value);
        if (!(C->dims_used & (1ull << (i < 63 ? i : 63)))) {
            /* the `batch` param of a static-batch export is no dynamic axis */
            char list[256] = "";
            int nlist = 0;
            for (int k = 0; k < C->nsym; k++)
                if (!(C->batch_static && !strcmp(C->symname[k], "batch")))
                    snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", nlist++ ? ", " : "",
                             C->symname[k]);
            if (C->batch_static && !strcmp(C->opts->dims[i].name, "batch"))
                return sb_fail(C->err, SB_EXIT_INPUT, "%s: --dim batch: the export's batch is static (%lld), "
                               "not a dynamic axis; its model file still has the param: --set batch=N",
                               C->path, (long long)C->batch_static);
            return sb_fail(C->err, SB_EXIT_INPUT, "%s: --dim %s: the export has no dynamic axis '%s' (%s%s)",
                           C->path, C->opts->dims[i].name, C->opts->dims[i].name,
                           nlist ? "dynamic axes left: " : "no other dynamic axes", list);
        }
    }
    return 0;
}

static void sanitize_model_name(const char *path, const char *graph, char *out, size_t n)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t k = 0;
    for (const char *p = base; *p && *p != '.' && k + 1 < n && k < 60; p++) {
        char ch = *p;
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_';
        out[k++] = ok ? ch : '_';
    }
    out[k] = '\0';
    if (!k || !((out[0] >= 'a' && out[0] <= 'z') || (out[0] >= 'A' && out[0] <= 'Z'))) {
        char tmp[72];
        snprintf(tmp, sizeof tmp, "onnx_%.60s", out);
        snprintf(out, n, "%.71s", tmp);
    }
    (void)graph;
}

/* Graph outputs: materialized; logits get a softmax_xent. */
static int finish_outputs(ctx *C)
{
    int have_loss = 0;
    for (size_t i = 0; i < C->g->n_output; i++) {
        const Onnx__ValueInfoProto *o = C->g->output[i];
        if (!o || !o->name || !o->name[0])
            continue;
        val *x = ox_vfind(C, o->name);
        if (!x || x->kind == V_POISON)
            continue;
        if (x->kind != V_ACT)
            return sb_fail(C->err, SB_EXIT_INPUT, "%s: graph output '%.100s' is %s", C->path, o->name,
                           x->kind == V_NONE ? "not produced by any node" : "a constant, not computed from the inputs");
        int t = ox_materialize(C, x, o->name);
        if (t < 0)
            return -1;
        C->t[t].out = 1;
        if (have_loss || (C->opts && C->opts->no_loss))
            continue;
        int L = C->t[t].line;
        if (L < 0 || C->t[t].nd < 2)
            continue;
        line *l = &C->l[L];
        if (!strcmp(l->op, "softmax") && l->sm_axis == C->t[l->in].nd - 1 && C->t[l->in].nd >= 2) {
            snprintf(l->op, sizeof l->op, "softmax_xent");
            free(l->args);
            if (!(l->args = strdup(C->t[l->in].name)))
                return ox_oom(C);
            have_loss = 1;
        } else if (!strcmp(l->op, "dense") || !strcmp(l->op, "einsum")) {
            char nm[SB_NAME_MAX];
            if (ox_make_ident(C, "loss", "loss", nm) || ox_add_line(C, nm, "softmax_xent", 0, "%s", C->t[t].name) < 0)
                return -1;
            have_loss = 1;
        }
    }
    return 0;
}

static void free_ctx(ctx *C)
{
    for (int i = 0; i < C->nv; i++) {
        free(C->v[i].data);
        free(C->v[i].fdata);
    }
    free(C->v);
    free(C->hash);
    free(C->t);
    for (int i = 0; i < C->nl; i++)
        free(C->l[i].args);
    free(C->l);
    free(C->decl.s);
    for (int i = 0; i < C->nnames; i++)
        free(C->names[i]);
    free(C->names);
    if (C->cons)
        for (int i = 0; i < C->nv; i++)
            free(C->cons[i]);
    free(C->cons);
    free(C->ncons);
    free(C->skip);
    free(C->ropes);
    free(C->unsup.s);
    if (C->mp)
        onnx__model_proto__free_unpacked(C->mp, NULL);
}

/* The one error listing the refused nodes (C->unsup): as many whole lines
 * as the message holds, then a count. Returns -1. */
static int report_unsupported(ctx *C, const char *path, sb_error *err)
{
    char head[256], list[1024] = "";
    int n = snprintf(head, sizeof head, "%s: cannot import: %d unsupported node%s (the model format has no equivalent):",
                     path, C->nunsup, C->nunsup == 1 ? "" : "s");
    size_t room = sizeof err->msg - (size_t)(n > 0 ? n : 0) - 48, used = 0;
    int shown = 0;
    for (const char *p = C->unsup.s; p && *p;) {
        const char *e = strchr(p + 1, '\n');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (used + l >= room || used + l >= sizeof list)
            break;
        memcpy(list + used, p, l);
        used += l;
        list[used] = '\0';
        shown++;
        p += l;
    }
    if (shown < C->nunsup)
        snprintf(list + used, sizeof list - used, "\n  ... and %d more", C->nunsup - shown);
    return sb_fail(err, SB_EXIT_INPUT, "%s%s", head, list);
}

/* The model text: header comments, model name, params, inputs, then one
 * line per op. */
static void write_text(ctx *C, const char *path, const sb_onnx_info *info, sbuf *b)
{
    char mname[96];
    sanitize_model_name(path, C->g->name, mname, sizeof mname);
    const char *base = strrchr(path, '/');
    ox_printf(b, "# Imported from %s by `shardbench import`: ONNX IR %lld, opset %lld, producer '%s'.\n",
              base ? base + 1 : path, (long long)C->mp->ir_version, (long long)C->opset,
              info ? info->producer : (C->mp->producer_name ? C->mp->producer_name : ""));
    ox_printf(b, "# %zu ONNX nodes; weights are implicit in the ops that own them.\n", C->g->n_node);
    ox_printf(b, "model %s\n", mname);
    for (int i = 0; i < C->nsym; i++)
        ox_printf(b, "param %s = %lld\n", C->symname[i], (long long)C->symdef[i]);
    ox_printf(b, "\n%s\n", C->decl.s ? C->decl.s : "");
    for (int i = 0; i < C->nl; i++) {
        line *l = &C->l[i];
        if (!l->op[0])
            ox_printf(b, "%s\n", l->args);
        else if (l->pw > 0)
            ox_printf(b, "%s = %s(%s, pw=%d)\n", l->lhs, l->op, l->args, l->pw);
        else
            ox_printf(b, "%s = %s(%s)\n", l->lhs, l->op, l->args);
    }
}

/* One conversion with the static batch at dim batch_axis of the data
 * inputs; *again set when a reshape shows that the batch taken is a
 * seq-first export's sequence (the caller converts again with axis 1). */
static int convert(const void *data, size_t size, const char *path, const sb_onnx_opts *opts,
                   char **text, size_t *len, sb_onnx_info *info, sb_error *err, int batch_axis,
                   int *again)
{
    *text = NULL;
    *len = 0;
    if (info)
        memset(info, 0, sizeof *info);
    if (size == 0)
        return sb_fail(err, SB_EXIT_INPUT, "%s: empty file, not an ONNX model", path);
    ctx C0, *C = &C0;
    memset(C, 0, sizeof *C);
    C->path = path;
    C->opts = opts;
    C->err = err;
    C->info = info;
    C->batch_axis = batch_axis;
    int rc = -1;
    C->mp = onnx__model_proto__unpack(NULL, size, data);
    if (!C->mp) {
        sb_fail(err, SB_EXIT_INPUT, "%s: not an ONNX model, or a truncated one (the protobuf does not decode)", path);
        goto out;
    }
    C->g = C->mp->graph;
    if (!C->g || !C->mp->has_ir_version || C->g->n_node == 0) {
        sb_fail(err, SB_EXIT_INPUT, "%s: not an ONNX model (%s)", path,
                !C->g ? "no graph" : !C->mp->has_ir_version ? "no IR version" : "the graph has no nodes");
        goto out;
    }
    for (size_t i = 0; i < C->mp->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = C->mp->opset_import[i];
        if (o && (!o->domain || !o->domain[0] || !strcmp(o->domain, "ai.onnx")) && o->has_version)
            C->opset = o->version;
    }
    if (C->opset < 7 || C->opset > 18) {
        sb_fail(err, SB_EXIT_INPUT, "%s: ONNX opset %lld is not supported (the importer reads opsets 7 to 18; "
                "tested with 11 to 17)", path, (long long)C->opset);
        goto out;
    }
    if (info) {
        info->ir_version = C->mp->ir_version;
        info->opset = C->opset;
        snprintf(info->producer, sizeof info->producer, "%.60s%s%.60s",
                 C->mp->producer_name ? C->mp->producer_name : "", C->mp->producer_version ? " " : "",
                 C->mp->producer_version ? C->mp->producer_version : "");
        info->nnodes = (int)C->g->n_node;
    }
    static const char *const reserved[] = {"model", "param", "cutoff", "block", "end", "repeat",
                                           "return", "input", "weight", NULL};
    for (int i = 0; reserved[i]; i++)
        if (ox_name_take(C, reserved[i]))
            goto out;
    if (prepass(C) || setup_inputs(C))
        goto out;
    for (size_t ni = 0; ni < C->g->n_node; ni++) {
        if (C->skip[ni] == 2)
            poison_outputs(C, C->g->node[ni]);
        if (C->skip[ni])
            continue;
        if (do_node(C, (int)ni))
            goto out;
    }
    if (C->seq_first && !batch_axis && C->batch_static) {
        *again = 1;
        goto out;
    }
    if (C->nunsup) {
        report_unsupported(C, path, err);
        goto out;
    }
    if (finish_outputs(C))
        goto out;
    if (C->nl == 0) {
        sb_fail(err, SB_EXIT_INPUT, "%s: the graph computes nothing the model format can express (no ops)", path);
        goto out;
    }
    for (int i = 0; opts && i < opts->nrenames; i++) {
        int found = 0;
        for (int k = 0; k < C->ndims; k++)
            found |= strcmp(C->dims[k].name, opts->renames[i].from) == 0;
        if (!found) {
            char list[512] = "";
            for (int k = 0; k < C->ndims; k++)
                snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", k ? ", " : "", C->dims[k].name);
            sb_fail(err, SB_EXIT_INPUT, "%s: --rename %s=%s: the import has no dim '%s' (dims: %s)", path,
                    opts->renames[i].from, opts->renames[i].to, opts->renames[i].from, list);
            goto out;
        }
    }
    sbuf b = {0};
    write_text(C, path, info, &b);
    if (b.oom || C->decl.oom) {
        free(b.s);
        ox_oom(C);
        goto out;
    }
    *text = b.s;
    *len = b.n;
    if (info) {
        info->ndims = 0;
        for (int k = 0; k < C->ndims && k < 64; k++) {
            char nm[SB_NAME_MAX];
            int how = C->dims[k].how;
            ox_dim_name(C, C->dims[k].name, how, C->dims[k].size, nm);
            if (strcmp(nm, C->dims[k].name))
                how = SB_ONNX_DIM_RENAMED;
            snprintf(info->dims[info->ndims].name, SB_NAME_MAX, "%s", nm);
            info->dims[info->ndims++].how = how;
        }
    }
    rc = 0;
out:
    free_ctx(C);
    return rc;
}

int sb_onnx_to_text(const void *data, size_t size, const char *path, const sb_onnx_opts *opts,
                    char **text, size_t *len, sb_onnx_info *info, sb_error *err)
{
    int again = 0;
    int rc = convert(data, size, path, opts, text, len, info, err, 0, &again);
    if (again)
        rc = convert(data, size, path, opts, text, len, info, err, 1, &again);
    return rc;
}

#endif /* SB_HAVE_ONNX */
