/* tests/unit/test_onnx_twins.c: cmocka test that each export of
 * tests/data/onnx with a static batch and its twin exported with a dynamic
 * batch axis (dynamic_axes {0: "batch"}; make_vision.py, make_llm.py,
 * make.py, make_dyn.py) import to the same model.
 *
 * Both are loaded with --set batch=3 (neither the static export's 2 nor the
 * dynamic default 1), and compared op by op: kind, iteration dims (names and
 * sizes), attributes, the dims of every operand and the sizes of the op's
 * weights; the parameter count is torch's (printed by the generator) where
 * given. A dynamic batch reaches the ops through Shape/Gather/Unsqueeze/
 * Concat chains (ViT's class token Expand, the patches' Reshape, the
 * head's Flatten) where the static export has numbers: a chain folded to
 * another size, or the batch put into the wrong entry, makes the twins
 * differ. Each dynamic twin is searched at p = 4; shape arithmetic that
 * is no product of the params (batch - 1) is refused by name; --dim batch
 * fixes a dynamic batch and is refused on a static one. Training on 2 ranks = 1
 * rank: tests/cli/onnx_vision_cli.sh and tests/cli/onnx_cli.sh. */
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

static void load_ok(const char *name, int64_t batch, sb_model *m)
{
    char path[1024];
    sb_error err = {0};
    sb_setting set = {.name = "batch", .value = batch};
    int len = snprintf(path, sizeof path, "%s/tests/data/onnx/%s.onnx", SB_SOURCE_DIR, name);
    assert_true(len > 0 && (size_t)len < sizeof path);
    if (sb_onnx_load(path, NULL, &set, 1, m, NULL, &err))
        fail_msg("%s: %s", name, err.msg);
}

static int64_t param(const sb_model *m, const char *name)
{
    for (int i = 0; i < m->nparams; i++)
        if (!strcmp(m->params[i].name, name))
            return m->params[i].value;
    return -1;
}

static void same_dims(const char *what, const char *op, const sb_dim *a, int na, const sb_dim *b, int nb)
{
    if (na != nb)
        fail_msg("%s of op %s: %d dims and %d", what, op, na, nb);
    for (int d = 0; d < na; d++)
        if (strcmp(a[d].name, b[d].name) || a[d].size != b[d].size)
            fail_msg("%s of op %s, dim %d: %s=%lld and %s=%lld", what, op, d, a[d].name,
                     (long long)a[d].size, b[d].name, (long long)b[d].size);
}

static void same_operands(const char *what, const char *op, const sb_model *a, const sb_operand *oa,
                          const sb_model *b, const sb_operand *ob, int n)
{
    for (int k = 0; k < n; k++) {
        const sb_tensor *ta = &a->tensors[oa[k].tensor], *tb = &b->tensors[ob[k].tensor];
        assert_int_equal(ta->kind, tb->kind);
        same_dims(what, op, ta->dims, ta->ndims, tb->dims, tb->ndims);
        assert_memory_equal(oa[k].map, ob[k].map, sizeof oa[k].map[0] * (size_t)ta->ndims);
    }
}

/* a (static) and b (dynamic) are the same graph: names of tensors and ops
 * may differ (torch numbers its nodes differently), nothing else. */
static void same_model(const sb_model *a, const sb_model *b)
{
    if (a->nops != b->nops)
        fail_msg("%d ops and %d", a->nops, b->nops);
    for (int i = 0; i < a->nops; i++) {
        const sb_op *x = &a->ops[i], *y = &b->ops[i];
        if (x->kind != y->kind)
            fail_msg("op %d: %s (%s) and %s (%s)", i, x->name, sb_op_kind_name(x->kind), y->name,
                     sb_op_kind_name(y->kind));
        same_dims("iteration space", x->name, x->dims, x->ndims, y->dims, y->ndims);
        assert_int_equal(x->nin, y->nin);
        assert_int_equal(x->nout, y->nout);
        same_operands("input", x->name, a, x->in, b, y->in, x->nin);
        same_operands("output", x->name, a, x->out, b, y->out, x->nout);
        assert_int_equal(x->nweights, y->nweights);
        for (int w = 0; w < x->nweights; w++) {
            assert_int_equal(x->weights[w].ndims, y->weights[w].ndims);
            assert_memory_equal(x->weights[w].size, y->weights[w].size,
                                sizeof x->weights[w].size[0] * (size_t)x->weights[w].ndims);
        }
        assert_int_equal(x->pw, y->pw);
        assert_int_equal(x->axis, y->axis);
        assert_int_equal(x->causal, y->causal);
        assert_int_equal(x->fn, y->fn);
        assert_int_equal(x->groups, y->groups);
        assert_memory_equal(x->kernel, y->kernel, sizeof x->kernel);
        assert_memory_equal(x->stride, y->stride, sizeof x->stride);
        assert_memory_equal(x->pad, y->pad, sizeof x->pad);
        assert_memory_equal(x->perm, y->perm, sizeof x->perm);
    }
    assert_int_equal(a->approx_ops, b->approx_ops);
}

static void search_p4(const sb_model *m)
{
    sb_cost_params cp;
    sb_cost_params_default(&cp);
    sb_problem pb;
    sb_error err = {0};
    if (sb_problem_build(m, 4, &cp, &pb, &err))
        fail_msg("%s", err.msg);
    sb_search_opts so = {.algo = SB_ALGO_PASE, .max_table_mb = 256, .progress = 0};
    sb_result r;
    if (sb_search(&pb, &so, &r, &err))
        fail_msg("%s", err.msg);
    assert_true(r.total_cost > 0);
    sb_result_free(&r);
    sb_problem_free(&pb);
}

typedef struct {
    const char *stat, *dyn;
    int64_t weights; /* torch's parameters the model file keeps; 0: not checked here */
} twin;

static void check_twin(const twin *t)
{
    sb_model a, b;
    print_message("%s / %s\n", t->stat, t->dyn);
    load_ok(t->stat, 3, &a);
    load_ok(t->dyn, 3, &b);
    assert_int_equal(param(&a, "batch"), 3);
    assert_int_equal(param(&b, "batch"), 3);
    same_model(&a, &b);
    int64_t n = sb_model_param_count(&a, NULL);
    assert_int_equal(n, sb_model_param_count(&b, NULL));
    if (t->weights)
        assert_int_equal(n, t->weights);
    search_p4(&b);
    sb_model_free(&a);
    sb_model_free(&b);
}

/* torchvision's ViT reduced (make_vision.py): the class token's Expand
 * and the patches' Reshape read the batch from Shape under a dynamic axis.
 * 116032 of torch's 117322 parameters are kept (no biases, no positions). */
static void test_vit_twins(void **state)
{
    (void)state;
    const twin t[] = {{"vit_mini13", "vit_mini13_dyn", 116032}, {"vit_mini17", "vit_mini17_dyn", 116032}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        check_twin(&t[i]);
    /* the class token + 4 patches make the sequence of 5 at batch 3 */
    sb_model m;
    load_ok("vit_mini13_dyn", 3, &m);
    int ncat = 0;
    for (int i = 0; i < m.nops; i++)
        if (m.ops[i].kind == SB_OP_CONCAT) {
            ncat++;
            assert_string_equal(m.ops[i].dims[0].name, "batch");
            assert_int_equal(m.ops[i].dims[0].size, 3);
            assert_string_equal(m.ops[i].dims[1].name, "seq");
            assert_int_equal(m.ops[i].dims[1].size, 5);
        }
    assert_int_equal(ncat, 1);
    sb_model_free(&m);
}

/* torchvision's CNNs: make.py exports them with a dynamic batch,
 * make_vision.py the static twins (torch folds each batch norm into its
 * conv: the kept weights are the convs' and the Linear's). */
static void test_cnn_twins(void **state)
{
    (void)state;
    const twin t[] = {
        {"resnet18_static", "resnet18", 11678912},
        {"resnext50_32x4d_static", "resnext50_32x4d", 24959680},
        {"mobilenet_v2_static", "mobilenet_v2", 3469760},
        {"resnet18_c10_static", "resnet18_c10", 11172032},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        check_twin(&t[i]);
}

/* The transformer exports of make_llm.py and make_dyn.py (their numbers
 * are checked in test_onnx.c and test_onnx_dyn.c). */
static void test_llm_twins(void **state)
{
    (void)state;
    const twin t[] = {
        {"llama13", "llama13_dyn", 0},   {"llama17", "llama17_dyn", 0},
        {"gpt2_13", "gpt2_13_dyn", 0},   {"gpt2_17", "gpt2_17_dyn", 0},
        {"mha17", "mha17_dyn", 0},       {"llama13", "gqa_dyn14", 0},
        {"nn_transformer14", "nn_transformer_dyn14", 0},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        check_twin(&t[i]);
}

/* Shape arithmetic on a dynamic batch that is no product of the params
 * (x[: x.shape[0] - 1]: batch - 1) is refused naming the node, exit 2. */
static void test_not_monomial(void **state)
{
    (void)state;
    char path[1024];
    sb_error err = {0};
    sb_model m;
    snprintf(path, sizeof path, "%s/tests/data/onnx/droplast_dyn.onnx", SB_SOURCE_DIR);
    if (!sb_onnx_load(path, NULL, NULL, 0, &m, NULL, &err)) {
        sb_model_free(&m);
        fail_msg("droplast_dyn imported; expected a refusal");
    }
    assert_int_equal(err.code, SB_EXIT_INPUT);
    if (!strstr(err.msg, "1 unsupported node")
        || !strstr(err.msg, "/Sub (Sub, opset 13): shape arithmetic that does not fold to a monomial"))
        fail_msg("%s", err.msg);
}

/* --dim batch=4 fixes the dynamic twin's batch (no param left); on the
 * static export, whose `batch` param is its leading dim, it is refused
 * saying so (it read "no dynamic axis 'batch' (dynamic axes left: batch)"). */
static void test_dim_batch(void **state)
{
    (void)state;
    char path[1024];
    sb_error err = {0};
    sb_model m;
    sb_setting d = {.name = "batch", .value = 4};
    sb_onnx_opts o = {.dims = &d, .ndims = 1};
    snprintf(path, sizeof path, "%s/tests/data/onnx/vit_mini17_dyn.onnx", SB_SOURCE_DIR);
    if (sb_onnx_load(path, &o, NULL, 0, &m, NULL, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(param(&m, "batch"), -1);
    for (int i = 0; i < m.nops; i++)
        if (m.ops[i].kind == SB_OP_CONCAT)
            assert_int_equal(m.ops[i].dims[0].size, 4);
    sb_model_free(&m);
    snprintf(path, sizeof path, "%s/tests/data/onnx/vit_mini17.onnx", SB_SOURCE_DIR);
    if (!sb_onnx_load(path, &o, NULL, 0, &m, NULL, &err)) {
        sb_model_free(&m);
        fail_msg("--dim batch on a static export imported");
    }
    assert_int_equal(err.code, SB_EXIT_INPUT);
    if (!strstr(err.msg, "--dim batch: the export's batch is static (2), not a dynamic axis")
        || !strstr(err.msg, "--set batch=N"))
        fail_msg("%s", err.msg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dim_batch),
        cmocka_unit_test(test_not_monomial),
        cmocka_unit_test(test_vit_twins),
        cmocka_unit_test(test_cnn_twins),
        cmocka_unit_test(test_llm_twins),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#else /* built without ONNX support: test_onnx checks the refusal */

int main(void)
{
    return 77; /* skipped */
}

#endif
