/* tests/unit/test_onnx_dyn.c: cmocka tests of the ONNX importer on exports with
 * dynamic axes and on torch's seq-first nn.Transformer (models/onnx/seq.c,
 * fold.c, shape.c's batch_entry; files written by
 * tests/data/onnx/make_dyn.py, numbers from torch there).
 *
 * gqa_dyn14 (dynamic batch; repeat_interleave as Loop and as Split) imports
 * to the graph of the static llama13 (the repeats are expand + reshape to
 * `heads`), with torch's 86848 parameters and the batch a param;
 * gqa_dynseq14 (dynamic seq too) is refused naming the axis until --dim
 * seq=16 fixes it; gqa_uneven14 (counts 1 and 3) is refused in both forms;
 * nn_transformer14 (seq = batch = d_model = 16) imports with the batch at
 * dim 1 (seq-first), torch's 5504 kept parameters, and re-imports at any
 * --set batch; nn_transformer_dyn14 (batch dynamic at dim 1) too, its
 * packed cross-attention projection cut by Slices. The search runs
 * on each. Training on 2 ranks = 1 rank: tests/cli/onnx_cli.sh. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardbench/onnx.h"
#include "shardbench/search.h"

#ifdef SB_HAVE_ONNX

static void data_path(char *buf, size_t n, const char *name)
{
    int len = snprintf(buf, n, "%s/tests/data/onnx/%s.onnx", SB_SOURCE_DIR, name);
    assert_true(len > 0 && (size_t)len < n);
}

/* Loads tests/data/onnx/NAME.onnx; 0, or -1 with the message in msg. */
static int load(const char *name, const sb_onnx_opts *o, const sb_setting *set, int nset, sb_model *m,
                char *msg, size_t n)
{
    char path[1024];
    sb_error err = {0};
    data_path(path, sizeof path, name);
    int rc = sb_onnx_load(path, o, set, nset, m, NULL, &err);
    if (rc) {
        assert_int_equal(err.code, SB_EXIT_INPUT);
        snprintf(msg, n, "%s", err.msg);
    }
    return rc;
}

static void load_ok(const char *name, const sb_onnx_opts *o, const sb_setting *set, int nset, sb_model *m)
{
    char msg[2048];
    if (load(name, o, set, nset, m, msg, sizeof msg))
        fail_msg("%s: %s", name, msg);
}

static void expect_refusal(const char *name, const sb_onnx_opts *o, const char *const *phrases)
{
    sb_model m;
    char msg[2048];
    if (!load(name, o, NULL, 0, &m, msg, sizeof msg)) {
        sb_model_free(&m);
        fail_msg("%s imported; expected a refusal", name);
    }
    for (int i = 0; phrases[i]; i++)
        if (!strstr(msg, phrases[i]))
            fail_msg("expected '%s' in: %s", phrases[i], msg);
}

static int count_kind(const sb_model *m, const char *kind)
{
    int n = 0;
    for (int i = 0; i < m->nops; i++)
        n += !strcmp(sb_op_kind_name(m->ops[i].kind), kind);
    return n;
}

static int64_t param(const sb_model *m, const char *name)
{
    for (int i = 0; i < m->nparams; i++)
        if (!strcmp(m->params[i].name, name))
            return m->params[i].value;
    return -1;
}

/* The n-th input tensor. */
static const sb_tensor *input(const sb_model *m, int n)
{
    for (int i = 0; i < m->ntensors; i++)
        if (m->tensors[i].kind == SB_TENSOR_INPUT && n-- == 0)
            return &m->tensors[i];
    fail_msg("no input %d", n);
    return NULL;
}

static void check_dim(const sb_tensor *t, int d, const char *name, int64_t size)
{
    assert_true(d < t->ndims);
    assert_string_equal(t->dims[d].name, name);
    assert_int_equal(t->dims[d].size, size);
}

/* The logits the loss reads: torch's output shape, dim by dim. */
static void check_logits(const sb_model *m, const char *const *names, const int64_t *sizes, int nd)
{
    for (int i = 0; i < m->nops; i++)
        if (m->ops[i].kind == SB_OP_SOFTMAX_XENT) {
            const sb_tensor *t = &m->tensors[m->ops[i].in[0].tensor];
            assert_int_equal(t->ndims, nd);
            for (int d = 0; d < nd; d++)
                check_dim(t, d, names[d], sizes[d]);
            return;
        }
    fail_msg("no softmax_xent");
}

static void search_p4(const sb_model *m)
{
    sb_cost_params cp;
    sb_cost_params_default(&cp);
    sb_problem pb;
    sb_error err = {0};
    int rc = sb_problem_build(m, 4, &cp, &pb, &err);
    if (rc)
        fail_msg("%s", err.msg);
    sb_search_opts so = {.algo = SB_ALGO_PASE, .max_table_mb = 256, .progress = 0};
    sb_result r;
    if (sb_search(&pb, &so, &r, &err))
        fail_msg("%s", err.msg);
    assert_true(r.total_cost > 0);
    sb_result_free(&r);
    sb_problem_free(&pb);
}

/* The repeats are read as the static export's: expand (batch, kv_heads,
 * rep, seq, head_dim) then reshape to `heads`; no split, concat or
 * placeholder of the unrolled form is left. */
static void check_gqa(const sb_model *m)
{
    assert_int_equal(sb_model_param_count(m, NULL), 86848); /* make_dyn.py: torch's parameters */
    assert_int_equal(m->nops, 72);             /* as llama13's static import */
    assert_int_equal(count_kind(m, "expand"), 4);
    assert_int_equal(count_kind(m, "split"), 0);
    assert_int_equal(count_kind(m, "concat"), 0);
    assert_int_equal(count_kind(m, "rope"), 4);
    assert_int_equal(count_kind(m, "rmsnorm"), 5);
    assert_int_equal(count_kind(m, "softmax"), 2);
    int heads = 0;
    for (int i = 0; i < m->nops; i++) {
        const sb_op *o = &m->ops[i];
        if (!strcmp(sb_op_kind_name(o->kind), "expand")) {
            assert_int_equal(o->ndims, 5);
            assert_string_equal(o->dims[1].name, "kv_heads");
            assert_string_equal(o->dims[2].name, "rep");
            assert_int_equal(o->dims[2].size, 2);
        }
        if (o->kind == SB_OP_SOFTMAX) {
            assert_true(o->causal >= 0);
            for (int d = 0; d < o->ndims; d++)
                heads += !strcmp(o->dims[d].name, "heads") && o->dims[d].size == 4;
        }
    }
    assert_int_equal(heads, 2); /* the scores run over the 4 heads */
}

static void test_gqa_dyn(void **state)
{
    (void)state;
    sb_model m, s;
    load_ok("gqa_dyn14", NULL, NULL, 0, &m);
    assert_int_equal(param(&m, "batch"), 1); /* the dynamic axis: a param, default 1 */
    check_gqa(&m);
    sb_model_free(&m);
    sb_setting set = {.name = "batch", .value = 4};
    load_ok("gqa_dyn14", NULL, &set, 1, &m);
    assert_int_equal(param(&m, "batch"), 4);
    check_dim(input(&m, 0), 0, "batch", 4);
    check_dim(input(&m, 0), 1, "seq", 16);
    static const char *const ln[] = {"batch", "seq", "vocab"};
    static const int64_t ls[] = {4, 16, 100}; /* torch's logits (batch, 16, 100) */
    check_logits(&m, ln, ls, 3);
    check_gqa(&m);
    /* op for op the kinds of the static export's import */
    load_ok("llama13", NULL, &set, 1, &s);
    assert_int_equal(m.nops, s.nops);
    for (int i = 0; i < m.nops; i++)
        assert_int_equal(count_kind(&m, sb_op_kind_name(m.ops[i].kind)), count_kind(&s, sb_op_kind_name(m.ops[i].kind)));
    search_p4(&m);
    sb_model_free(&s);
    sb_model_free(&m);
}

static void test_gqa_dynseq(void **state)
{
    (void)state;
    /* the rotary tables and the mask are cut at the dynamic length */
    static const char *const need[] = {"/layers.0/attn/Slice (Slice, opset 14)", "dynamic axis 'seq'", "--dim", NULL};
    expect_refusal("gqa_dynseq14", NULL, need);
    sb_setting d = {.name = "seq", .value = 16};
    sb_onnx_opts o = {.dims = &d, .ndims = 1};
    sb_model m;
    load_ok("gqa_dynseq14", &o, NULL, 0, &m);
    check_dim(input(&m, 0), 1, "seq", 16);
    assert_int_equal(param(&m, "seq"), -1); /* fixed: no longer a param */
    check_gqa(&m);
    search_p4(&m);
    sb_model_free(&m);
    /* the ONNX name of the axis works too; a name the export lacks does not */
    sb_setting bad = {.name = "length", .value = 16};
    o.dims = &bad;
    static const char *const nodim[] = {"--dim length", "no dynamic axis 'length'", "batch, seq", NULL};
    expect_refusal("gqa_dynseq14", &o, nodim);
    sb_setting zero = {.name = "seq", .value = 0};
    o.dims = &zero;
    static const char *const range[] = {"--dim seq=0", "out of range", NULL};
    expect_refusal("gqa_dynseq14", &o, range);
}

static void test_gqa_uneven(void **state)
{
    (void)state;
    static const char *const need[] = {"2 unsupported nodes",
                                       "(SequenceAt, opset 14): repeat counts that differ",
                                       "(Concat, opset 14): part 0 of the split is not repeated in place", NULL};
    expect_refusal("gqa_uneven14", NULL, need);
}

static void test_nn_transformer(void **state)
{
    (void)state;
    sb_model m;
    load_ok("nn_transformer14", NULL, NULL, 0, &m);
    /* seq-first (seq, batch, embed) = (16, 16, 16): the batch is dim 1 */
    assert_int_equal(param(&m, "batch"), 16);
    for (int k = 0; k < 2; k++) {
        check_dim(input(&m, k), 0, "seq", 16);
        check_dim(input(&m, k), 1, "batch", 16);
        check_dim(input(&m, k), 2, "embed", 16);
    }
    assert_int_equal(sb_model_param_count(&m, NULL), 5504); /* make_dyn.py: torch's, less the Linear biases */
    static const char *const ln[] = {"seq", "batch", "classes"};
    static const int64_t ls[] = {16, 16, 10}; /* torch's output (16, 16, 10) */
    check_logits(&m, ln, ls, 3);
    assert_int_equal(count_kind(&m, "dense"), 12);
    assert_int_equal(count_kind(&m, "einsum"), 6);
    assert_int_equal(count_kind(&m, "norm"), 7);
    assert_int_equal(count_kind(&m, "softmax"), 3);
    assert_int_equal(count_kind(&m, "softmax_xent"), 1);
    search_p4(&m);
    sb_model_free(&m);
    /* the batch is a param the whole graph follows: other sizes still parse
     * (a reshape that took seq * batch = batch * embed the wrong way would
     * not), and it is dim 1, not the seq of dim 0 */
    for (int64_t b = 1; b <= 8; b *= 2) {
        sb_setting set = {.name = "batch", .value = b};
        load_ok("nn_transformer14", NULL, &set, 1, &m);
        check_dim(input(&m, 1), 0, "seq", 16);
        check_dim(input(&m, 1), 1, "batch", b);
        assert_int_equal(sb_model_param_count(&m, NULL), 5504);
        sb_model_free(&m);
    }
}

/* The same with a dynamic batch at dim 1: the packed cross-attention
 * projection is cut by Slices into weights of the parts (the same 5504). */
static void test_nn_transformer_dyn(void **state)
{
    (void)state;
    sb_model m;
    sb_setting set = {.name = "batch", .value = 4};
    load_ok("nn_transformer_dyn14", NULL, &set, 1, &m);
    assert_int_equal(param(&m, "batch"), 4);
    static const char *const ln[] = {"seq", "batch", "classes"};
    static const int64_t ls[] = {16, 4, 10};
    check_logits(&m, ln, ls, 3);
    for (int k = 0; k < 2; k++) {
        check_dim(input(&m, k), 0, "seq", 16);
        check_dim(input(&m, k), 1, "batch", 4);
        check_dim(input(&m, k), 2, "embed", 16);
    }
    assert_int_equal(sb_model_param_count(&m, NULL), 5504);
    assert_int_equal(count_kind(&m, "dense"), 12);
    assert_int_equal(count_kind(&m, "softmax"), 3);
    search_p4(&m);
    sb_model_free(&m);
}

/* Source and target lengths dynamic too: two sequence params (S is
 * `seq`, T its own), which may differ. */
static void test_nn_transformer_dynlen(void **state)
{
    (void)state;
    sb_model m;
    sb_setting set[3] = {{.name = "batch", .value = 4}, {.name = "seq", .value = 16}, {.name = "T", .value = 8}};
    load_ok("nn_transformer_dynlen14", NULL, set, 3, &m);
    check_dim(input(&m, 0), 0, "seq", 16);
    check_dim(input(&m, 0), 1, "batch", 4);
    check_dim(input(&m, 1), 0, "T", 8);
    check_dim(input(&m, 1), 1, "batch", 4);
    assert_int_equal(sb_model_param_count(&m, NULL), 5504);
    search_p4(&m);
    sb_model_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gqa_dyn), cmocka_unit_test(test_gqa_dynseq),
        cmocka_unit_test(test_gqa_uneven), cmocka_unit_test(test_nn_transformer),
        cmocka_unit_test(test_nn_transformer_dyn), cmocka_unit_test(test_nn_transformer_dynlen),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#else /* built without ONNX support: test_onnx checks the refusal */

int main(void)
{
    return 77; /* skipped */
}

#endif
