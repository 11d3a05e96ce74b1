/* tests/unit/test_onnx.c: cmocka tests of the ONNX importer (models/onnx/: the
 * graph walk, its handlers, the file reader; the sb_model_load hook in
 * models/load.c).
 *
 * Each file of tests/data/onnx imports to the ops expected per type, with
 * the key dims named and sized (ops.onnx, built by make_ops.py, covers Pad,
 * ceil_mode, Split, chained Concat and Slice) (and ResNet-18's convolution MACs equal to a
 * count computed here from the architecture); the search runs on each at
 * p = 4; the written model text re-parses to the same graph; --set, --rename
 * and no_loss act; unsupported.onnx lists every offending node in one
 * error; empty, garbage, truncated and mutated files fail cleanly with the
 * file named. Built without ONNX support, only the refusal is checked. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shardbench/onnx.h"
#include "shardbench/search.h"
#ifdef SB_HAVE_ONNX
#include SB_ONNX_PB_HEADER
#endif

static void data_path(char *buf, size_t n, const char *name)
{
    int len = snprintf(buf, n, "%s/tests/data/onnx/%s.onnx", SB_SOURCE_DIR, name);
    assert_true(len > 0 && (size_t)len < n);
}

static char *slurp(const char *name, size_t *size)
{
    char path[1024], *data;
    sb_error err = {0};
    data_path(path, sizeof path, name);
    assert_int_equal(sb_onnx_read_file(path, &data, size, &err), 0);
    return data;
}

/* A directory, a FIFO (opening it would block) or a device given as an
 * .onnx file: refused by name, without reading (not 2 GiB of /dev/zero). */
static void expect_read_error(const char *path, const char *phrase)
{
    sb_error err = {0};
    char *data = NULL;
    size_t size = 0;
    assert_int_equal(sb_onnx_read_file(path, &data, &size, &err), -1);
    assert_null(data);
    assert_int_equal(err.code, SB_EXIT_INPUT);
    if (!strstr(err.msg, phrase) || !strstr(err.msg, path))
        fail_msg("expected '%s' and the path in the message, got: %s", phrase, err.msg);
    sb_model m;
    memset(&err, 0, sizeof err);
    assert_int_equal(sb_model_load(path, NULL, 0, &m, &err), -1);
    if (!strstr(err.msg, phrase))
        fail_msg("sb_model_load: expected '%s' in the message, got: %s", phrase, err.msg);
}

static void test_not_a_file(void **state)
{
    (void)state;
    char dir[] = "/tmp/sb_onnx_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char sub[256], fifo[256];
    snprintf(sub, sizeof sub, "%s/net.onnx", dir);
    snprintf(fifo, sizeof fifo, "%s/fifo.onnx", dir);
    assert_int_equal(mkdir(sub, 0700), 0);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    expect_read_error(sub, "is a directory");
    expect_read_error(fifo, "not a regular file");
    sb_error err = {0};
    char *data = NULL;
    size_t size = 0;
    assert_int_equal(sb_onnx_read_file("/dev/zero", &data, &size, &err), -1);
    assert_non_null(strstr(err.msg, "not a regular file"));
    unlink(fifo);
    rmdir(sub);
    rmdir(dir);
}

#ifdef SB_HAVE_ONNX

static int count_kind(const sb_model *m, sb_op_kind k)
{
    int n = 0;
    for (int i = 0; i < m->nops; i++)
        n += m->ops[i].kind == k;
    return n;
}

static int total_pw(const sb_model *m)
{
    int n = 0;
    for (int i = 0; i < m->nops; i++)
        n += m->ops[i].pw;
    return n;
}

static const sb_tensor *find_input(const sb_model *m)
{
    for (int i = 0; i < m->ntensors; i++)
        if (m->tensors[i].kind == SB_TENSOR_INPUT)
            return &m->tensors[i];
    return NULL;
}

static int64_t param(const sb_model *m, const char *name)
{
    for (int i = 0; i < m->nparams; i++)
        if (!strcmp(m->params[i].name, name))
            return m->params[i].value;
    return -1;
}

static int count_kind_name(const sb_model *m, const char *name)
{
    int n = 0;
    for (int i = 0; i < m->nops; i++)
        n += !strcmp(sb_op_kind_name(m->ops[i].kind), name);
    return n;
}

/* Trained parameters of a model: the ops' own weights and declared weights. */
static int64_t model_weights(const sb_model *m)
{
    int64_t n = 0;
    for (int i = 0; i < m->nops; i++)
        for (int w = 0; w < m->ops[i].nweights; w++) {
            int64_t k = 1;
            for (int d = 0; d < m->ops[i].weights[w].ndims; d++)
                k *= m->ops[i].weights[w].size[d];
            n += k;
        }
    for (int i = 0; i < m->ntensors; i++)
        if (m->tensors[i].kind == SB_TENSOR_WEIGHT) {
            int64_t k = 1;
            for (int d = 0; d < m->tensors[i].ndims; d++)
                k *= m->tensors[i].dims[d].size;
            n += k;
        }
    return n;
}

/* Whether this build's model language parses an op call on x[a=4, b=4]
 * (the newer op kinds come from other branches; the importer asks the
 * same way). */
static int have_op(const char *call)
{
    char text[256];
    snprintf(text, sizeof text, "model probe\ninput x[a=4, b=4]\n%s\n", call);
    sb_model m;
    sb_error err = {0};
    if (sb_model_parse(text, strlen(text), "probe", NULL, 0, &m, &err))
        return 0;
    sb_model_free(&m);
    return 1;
}

/* Every softmax of a model is causal with the query dim `q`, the key dim `k`. */
static void check_causal(const sb_model *m, const char *q, const char *k)
{
    for (int i = 0; i < m->nops; i++) {
        const sb_op *o = &m->ops[i];
        if (o->kind != SB_OP_SOFTMAX)
            continue;
        assert_true(o->causal >= 0);
        assert_string_equal(o->dims[o->causal].name, q);
        assert_string_equal(o->dims[o->axis].name, k);
    }
}

/* Every act of a model has function fn. */
static void check_act_fn(const sb_model *m, const char *fn)
{
    for (int i = 0; i < m->nops; i++)
        if (!strcmp(sb_op_kind_name(m->ops[i].kind), "act"))
            assert_string_equal(sb_act_fn_name(m->ops[i].fn), fn);
}

static void load(const char *name, const sb_onnx_opts *o, const sb_setting *set, int nset,
                 sb_model *m, sb_onnx_info *info)
{
    char path[1024];
    sb_error err = {0};
    data_path(path, sizeof path, name);
    int rc = sb_onnx_load(path, o, set, nset, m, info, &err);
    if (rc)
        fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(rc, 0);
}

/* The search runs on the import at p devices (as `shardbench search` does). */
static void search_p(const sb_model *m, int p)
{
    sb_cost_params cp;
    sb_cost_params_default(&cp);
    sb_problem pb;
    sb_error err = {0};
    int rc = sb_problem_build(m, p, &cp, &pb, &err);
    if (rc)
        fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(rc, 0);
    sb_search_opts so = {.algo = SB_ALGO_PASE, .max_table_mb = 256, .progress = 0};
    sb_result r;
    rc = sb_search(&pb, &so, &r, &err);
    if (rc)
        fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(rc, 0);
    assert_true(r.total_cost > 0);
    sb_result_free(&r);
    sb_problem_free(&pb);
}

static void search_p4(const sb_model *m) { search_p(m, 4); }

/* Two graphs are the same: ops (name, kind, space, operands, attributes)
 * and tensors. */
static void assert_same_graph(const sb_model *a, const sb_model *b)
{
    assert_int_equal(a->nops, b->nops);
    assert_int_equal(a->ntensors, b->ntensors);
    assert_int_equal(a->nparams, b->nparams);
    for (int i = 0; i < a->nops; i++) {
        const sb_op *x = &a->ops[i], *y = &b->ops[i];
        assert_string_equal(x->name, y->name);
        assert_int_equal(x->kind, y->kind);
        assert_int_equal(x->ndims, y->ndims);
        assert_int_equal(x->nin, y->nin);
        assert_int_equal(x->nout, y->nout);
        assert_int_equal(x->pw, y->pw);
        assert_int_equal(x->axis, y->axis);
        for (int d = 0; d < x->ndims; d++) {
            assert_string_equal(x->dims[d].name, y->dims[d].name);
            assert_int_equal(x->dims[d].size, y->dims[d].size);
        }
        for (int k = 0; k < x->nin; k++)
            assert_int_equal(x->in[k].tensor, y->in[k].tensor);
    }
    for (int i = 0; i < a->ntensors; i++) {
        assert_string_equal(a->tensors[i].name, b->tensors[i].name);
        assert_int_equal(a->tensors[i].ndims, b->tensors[i].ndims);
        for (int d = 0; d < a->tensors[i].ndims; d++)
            assert_int_equal(a->tensors[i].dims[d].size, b->tensors[i].dims[d].size);
    }
}

/* Converts, writes the text to a .model file, loads that file, compares. */
static void check_reparse(const char *name, const sb_model *m)
{
    size_t size, len;
    char *data = slurp(name, &size), *text;
    sb_error err = {0};
    assert_int_equal(sb_onnx_to_text(data, size, name, NULL, &text, &len, NULL, &err), 0);
    free(data);
    assert_int_equal(strlen(text), len);
    char path[] = "/tmp/test_onnx_XXXXXX.model";
    int fd = mkstemps(path, 6);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, len), (ssize_t)len);
    close(fd);
    free(text);
    sb_model r;
    int rc = sb_model_load(path, NULL, 0, &r, &err);
    unlink(path);
    if (rc)
        fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(rc, 0);
    assert_same_graph(m, &r);
    sb_model_free(&r);
}

static void test_cnn(void **state)
{
    (void)state;
    const char *names[2] = {"cnn", "cnn_w"};
    for (int f = 0; f < 2; f++) {
        sb_model m;
        sb_onnx_info info;
        load(names[f], NULL, NULL, 0, &m, &info);
        assert_int_equal(info.opset, 13);
        assert_int_equal(info.nnodes, 8);
        assert_int_equal(m.nops, 6);
        assert_int_equal(count_kind(&m, SB_OP_CONV), 2);
        assert_int_equal(count_kind(&m, SB_OP_POOL), 1);
        assert_int_equal(count_kind(&m, SB_OP_REDUCE_MEAN), 1);
        assert_int_equal(count_kind(&m, SB_OP_DENSE), 1);
        assert_int_equal(count_kind(&m, SB_OP_SOFTMAX_XENT), 1);
        assert_int_equal(total_pw(&m), 2); /* the two ReLUs, fused into the convs */
        assert_int_equal(param(&m, "batch"), 1);
        const sb_tensor *x = find_input(&m);
        assert_non_null(x);
        assert_int_equal(x->ndims, 4);
        const char *dn[4] = {"batch", "channels", "height", "width"};
        const int64_t sz[4] = {1, 3, 16, 16};
        for (int i = 0; i < 4; i++) {
            assert_string_equal(x->dims[i].name, dn[i]);
            assert_int_equal(x->dims[i].size, sz[i]);
        }
        /* conv2: stride 2, pad 1 on 8x8 -> 4x4, 16 channels out of 8 */
        const sb_op *c2 = NULL;
        for (int i = 0; i < m.nops; i++)
            if (m.ops[i].kind == SB_OP_CONV)
                c2 = &m.ops[i];
        assert_int_equal(c2->stride[0], 2);
        assert_int_equal(c2->pad[0], 1);
        assert_int_equal(c2->dims[2].size, 4);
        assert_int_equal(c2->dims[6].size, 16);
        assert_string_equal(c2->dims[1].name, "channels_in");
        const sb_op *fc = &m.ops[m.nops - 2];
        assert_int_equal(fc->kind, SB_OP_DENSE);
        assert_int_equal(fc->dims[1].size, 10);
        search_p4(&m);
        check_reparse(names[f], &m);
        sb_model_free(&m);
    }
}

/* --set reaches the batch param; --rename renames; no_loss drops the loss. */
static void test_cnn_options(void **state)
{
    (void)state;
    sb_setting set = {.name = "batch", .value = 32};
    sb_rename ren[2] = {{.from = "classes", .to = "labels"}, {.from = "channels", .to = "chan"}};
    sb_onnx_opts o = {.renames = ren, .nrenames = 2, .settings = &set, .nsettings = 1, .no_loss = 1};
    sb_model m;
    sb_onnx_info info;
    load("cnn", &o, &set, 1, &m, &info);
    assert_int_equal(param(&m, "batch"), 32);
    assert_int_equal(find_input(&m)->dims[0].size, 32);
    assert_string_equal(find_input(&m)->dims[1].name, "chan");
    assert_int_equal(count_kind(&m, SB_OP_SOFTMAX_XENT), 0);
    const sb_op *fc = &m.ops[m.nops - 1];
    assert_int_equal(fc->kind, SB_OP_DENSE);
    assert_string_equal(fc->dims[1].name, "labels"); /* a classifier's output is `classes` */
    int renamed = 0;
    for (int i = 0; i < info.ndims; i++)
        renamed += info.dims[i].how == SB_ONNX_DIM_RENAMED;
    assert_int_equal(renamed, 2);
    sb_model_free(&m);

    /* a rename of a dim the import does not have is an error that lists them */
    sb_rename bad = {.from = "nosuch", .to = "x"};
    sb_onnx_opts ob = {.renames = &bad, .nrenames = 1};
    char path[1024];
    sb_error err = {0};
    data_path(path, sizeof path, "cnn");
    assert_int_equal(sb_onnx_load(path, &ob, NULL, 0, &m, NULL, &err), -1);
    assert_int_equal(err.code, SB_EXIT_INPUT);
    assert_non_null(strstr(err.msg, "nosuch"));
    assert_non_null(strstr(err.msg, "channels"));

    /* the sb_model_load hook: -m FILE.onnx, with --set */
    assert_int_equal(sb_model_load(path, &set, 1, &m, &err), 0);
    assert_int_equal(param(&m, "batch"), 32);
    assert_int_equal(m.nops, 6);
    sb_model_free(&m);
}

static void test_resnet18(void **state)
{
    (void)state;
    sb_model m;
    sb_onnx_info info;
    sb_setting set = {.name = "batch", .value = 8};
    load("resnet18", NULL, &set, 1, &m, &info);
    assert_int_equal(m.nops, 32);
    assert_int_equal(count_kind(&m, SB_OP_CONV), 20);
    assert_int_equal(count_kind(&m, SB_OP_ELEMENTWISE), 8);
    assert_int_equal(count_kind(&m, SB_OP_POOL), 1);
    assert_int_equal(count_kind(&m, SB_OP_REDUCE_MEAN), 1);
    assert_int_equal(count_kind(&m, SB_OP_DENSE), 1);
    assert_int_equal(count_kind(&m, SB_OP_SOFTMAX_XENT), 1);
    assert_int_equal(total_pw(&m), 17); /* 17 ReLUs: 9 after convs, 8 after the adds */
    /* convolution MACs (batch 1) from the architecture at 64x64 */
    int64_t want = 0, hw = 32;
    want += hw * hw * 64 * 3 * 49; /* conv1 7x7/2 */
    hw = 16;                       /* maxpool 3x3/2 */
    int cin = 64;
    const int widths[4] = {64, 128, 256, 512};
    for (int s = 0; s < 4; s++) {
        int w = widths[s];
        if (s > 0)
            hw /= 2;
        for (int b = 0; b < 2; b++) {
            want += hw * hw * (int64_t)w * (b == 0 ? cin : w) * 9;
            want += hw * hw * (int64_t)w * w * 9;
            if (b == 0 && s > 0)
                want += hw * hw * (int64_t)w * cin; /* 1x1/2 downsample */
        }
        cin = w;
    }
    int64_t got = 0;
    for (int i = 0; i < m.nops; i++)
        if (m.ops[i].kind == SB_OP_CONV) {
            int64_t p = 1;
            for (int d = 0; d < m.ops[i].ndims; d++)
                p *= m.ops[i].dims[d].size;
            got += p / 8; /* per sample */
        }
    assert_int_equal(got, want);
    const sb_op *fc = NULL;
    for (int i = 0; i < m.nops; i++)
        if (m.ops[i].kind == SB_OP_DENSE)
            fc = &m.ops[i];
    assert_int_equal(fc->dims[0].size, 8);
    assert_int_equal(fc->dims[1].size, 1000);
    assert_int_equal(fc->dims[2].size, 512);
    search_p4(&m);
    sb_model_free(&m);
    load("resnet18", NULL, NULL, 0, &m, NULL);
    check_reparse("resnet18", &m);
    sb_model_free(&m);
}

/* Multiply-adds of the convs per sample (their iteration spaces over batch). */
static int64_t conv_macs(const sb_model *m, int64_t batch)
{
    int64_t got = 0;
    for (int i = 0; i < m->nops; i++)
        if (m->ops[i].kind == SB_OP_CONV) {
            int64_t p = 1;
            for (int d = 0; d < m->ops[i].ndims; d++)
                p *= m->ops[i].dims[d].size;
            got += p / batch;
        }
    return got;
}

/* Convs with a `group` dim of size g (g = 0: any), per-group channels cg
 * in and out (cg = 0: any). */
static int count_grouped(const sb_model *m, int64_t g, int64_t cg)
{
    int n = 0;
    for (int i = 0; i < m->nops; i++) {
        const sb_op *op = &m->ops[i];
        if (op->kind == SB_OP_CONV && op->ndims == 8 && !strcmp(op->dims[7].name, "group")
            && (!g || op->dims[7].size == g)
            && (!cg || (op->dims[1].size == cg && op->dims[6].size == cg)))
            n++;
    }
    return n;
}

/* torchvision's ResNeXt-50 32x4d (graph-only, 64x64): 16 grouped 3x3 convs
 * of 32 groups, its convolution MACs from the architecture, searched at p = 8. */
static void test_resnext50(void **state)
{
    (void)state;
    sb_model m;
    sb_setting set = {.name = "batch", .value = 16};
    load("resnext50_32x4d", NULL, &set, 1, &m, NULL);
    assert_int_equal(count_kind(&m, SB_OP_CONV), 53);
    assert_int_equal(count_grouped(&m, 32, 0), 16);
    assert_int_equal(count_grouped(&m, 0, 0), 16);
    /* the residual adds (torch folds the batch norms into the convs) */
    assert_int_equal(count_kind(&m, SB_OP_ELEMENTWISE), 16);
    int64_t want = 32 * 32 * 64 * 3 * 49, hw = 16; /* conv1 7x7/2; maxpool 3x3/2 */
    int64_t cin = 64;
    const int blocks[4] = {3, 4, 6, 3};
    for (int s = 0; s < 4; s++) {
        int64_t w = 128 << s, out = 256 << s;
        for (int b = 0; b < blocks[s]; b++) {
            int64_t hin = hw, c = b == 0 ? cin : out;
            if (b == 0 && s > 0)
                hw /= 2; /* the stride is on the 3x3 */
            want += hin * hin * w * c;                 /* 1x1 */
            want += hw * hw * w * (w / 32) * 9;        /* grouped 3x3: w/32 inputs per output */
            want += hw * hw * out * w;                 /* 1x1 */
            if (b == 0)
                want += hw * hw * out * cin;           /* 1x1 downsample */
        }
        cin = out;
    }
    assert_int_equal(conv_macs(&m, 16), want);
    search_p(&m, 8);
    sb_model_free(&m);
    load("resnext50_32x4d", NULL, NULL, 0, &m, NULL);
    check_reparse("resnext50_32x4d", &m);
    sb_model_free(&m);
}

/* torchvision's MobileNet-V2 (graph-only, 64x64, opset 17): 17 depthwise
 * 3x3 convs (groups = channels, one channel per group), the Clip of ReLU6
 * fused as a pointwise op, searched at p = 8. */
static void test_mobilenet_v2(void **state)
{
    (void)state;
    sb_model m;
    sb_setting set = {.name = "batch", .value = 16};
    load("mobilenet_v2", NULL, &set, 1, &m, NULL);
    assert_int_equal(count_kind(&m, SB_OP_CONV), 52);
    assert_int_equal(count_grouped(&m, 0, 1), 17);
    assert_int_equal(count_grouped(&m, 0, 0), 17);
    /* the depthwise convs, in order: 32, 96, 144, 144, 192 x 3, 384 x 4, 576 x 3, 960 x 3 */
    const int64_t dwc[17] = {32, 96, 144, 144, 192, 192, 192, 384, 384, 384, 384, 576, 576, 576,
                             960, 960, 960};
    int k = 0;
    for (int i = 0; i < m.nops; i++)
        if (m.ops[i].kind == SB_OP_CONV && m.ops[i].ndims == 8) {
            assert_true(k < 17);
            assert_int_equal(m.ops[i].dims[7].size, dwc[k]);
            assert_int_equal(m.ops[i].kernel[0], 3);
            k++;
        }
    assert_int_equal(k, 17);
    /* its 35 ReLU6 (Clip to [0, 6]) are act(relu6) where the build has act */
    if (have_op("y = act(x, fn=silu)")) {
        assert_int_equal(count_kind_name(&m, "act"), 35);
        check_act_fn(&m, "relu6");
    }
    search_p(&m, 8);
    sb_model_free(&m);
    load("mobilenet_v2", NULL, NULL, 0, &m, NULL);
    check_reparse("mobilenet_v2", &m);
    sb_model_free(&m);
}

static void check_transformer(const char *name, int opset)
{
    sb_model m;
    sb_onnx_info info;
    sb_setting set = {.name = "batch", .value = 4};
    load(name, NULL, &set, 1, &m, &info);
    assert_int_equal(info.opset, opset);
    assert_int_equal(count_kind(&m, SB_OP_EMBEDDING), 1);
    assert_int_equal(count_kind(&m, SB_OP_DENSE), 13); /* 2 x (q k v o ff1 ff2) + out */
    assert_int_equal(count_kind(&m, SB_OP_EINSUM), 4);  /* q.k^T and a.v per layer */
    assert_int_equal(count_kind(&m, SB_OP_NORM), 4);    /* layer norms, decomposed or not */
    assert_int_equal(count_kind(&m, SB_OP_SOFTMAX), 2);
    assert_int_equal(count_kind(&m, SB_OP_SOFTMAX_XENT), 1);
    assert_int_equal(count_kind(&m, SB_OP_ELEMENTWISE), 4); /* residual adds */
    assert_int_equal(count_kind(&m, SB_OP_POOL) + count_kind(&m, SB_OP_CONV), 0);
    /* the head transposes are views: a.v is written in (batch, seq, heads, d)
     * order, so only the merge of the heads is a reshape */
    assert_int_equal(count_kind(&m, SB_OP_TRANSPOSE), 0);
    assert_int_equal(count_kind(&m, SB_OP_UNFLATTEN), 8);
    int act = have_op("y = act(x, fn=silu)");
    assert_int_equal(m.nops, act ? 47 : 45); /* with act: the two Gelus are ops */
    /* embedding: batch, seq, embed (32), vocab (100) */
    const sb_op *e = &m.ops[0];
    assert_int_equal(e->kind, SB_OP_EMBEDDING);
    assert_string_equal(e->dims[0].name, "batch");
    assert_int_equal(e->dims[0].size, 4);
    assert_string_equal(e->dims[1].name, "seq");
    assert_string_equal(e->dims[2].name, "embed");
    assert_int_equal(e->dims[2].size, 32);
    assert_string_equal(e->dims[3].name, "vocab");
    assert_int_equal(e->dims[3].size, 100);
    /* attention scores: batch, heads (4), seq, seq_2, reduced over the head width (8) */
    const sb_op *a = NULL;
    for (int i = 0; i < m.nops; i++)
        if (m.ops[i].kind == SB_OP_EINSUM && !a)
            a = &m.ops[i];
    assert_int_equal(a->ndims, 5);
    assert_string_equal(a->dims[1].name, "heads");
    assert_int_equal(a->dims[1].size, 4);
    assert_int_equal(a->dims[4].size, 8);
    assert_int_equal(a->pw, 1); /* the 1/sqrt(d) scale */
    /* the last dense is the output projection to the vocabulary */
    const sb_op *out = &m.ops[m.nops - 2];
    assert_int_equal(out->kind, SB_OP_DENSE);
    assert_string_equal(out->dims[2].name, "vocab");
    /* the Gelu (Erf pattern) is act(gelu) where the build has act, else one
     * pointwise op on ff1 beside its bias */
    int ff1 = 0;
    for (int i = 0; i < m.nops; i++)
        ff1 += m.ops[i].kind == SB_OP_DENSE && m.ops[i].pw == 2;
    assert_int_equal(ff1, act ? 0 : 2);
    assert_int_equal(count_kind_name(&m, "act"), act ? 2 : 0);
    search_p4(&m);
    sb_model_free(&m);
    load(name, NULL, NULL, 0, &m, NULL);
    check_reparse(name, &m);
    sb_model_free(&m);
}

static void test_transformer(void **state)
{
    (void)state;
    check_transformer("transformer", 13);
    check_transformer("transformer17_w", 17);
}

static void test_einsum(void **state)
{
    (void)state;
    sb_model m;
    load("einsum", NULL, NULL, 0, &m, NULL);
    assert_int_equal(count_kind(&m, SB_OP_EINSUM), 2);
    assert_int_equal(count_kind(&m, SB_OP_DENSE), 7);
    assert_int_equal(count_kind(&m, SB_OP_NORM), 2);
    assert_int_equal(count_kind(&m, SB_OP_SOFTMAX), 1);
    search_p4(&m);
    check_reparse("einsum", &m);
    sb_model_free(&m);
}

static void test_lstm(void **state)
{
    (void)state;
    const char *names[2] = {"lstm", "lstm_w"};
    for (int f = 0; f < 2; f++) {
        sb_model m;
        sb_setting set = {.name = "batch", .value = 16};
        load(names[f], NULL, &set, 1, &m, NULL);
        assert_int_equal(m.nops, 4);
        assert_int_equal(m.ops[0].kind, SB_OP_EMBEDDING);
        const sb_op *l = &m.ops[1];
        assert_int_equal(l->kind, SB_OP_LSTM);
        /* (layers, seq, batch, units, units_in) */
        assert_string_equal(l->dims[1].name, "seq");
        assert_int_equal(l->dims[1].size, 8);
        assert_string_equal(l->dims[2].name, "batch");
        assert_int_equal(l->dims[2].size, 16);
        assert_int_equal(l->dims[3].size, 32);
        assert_int_equal(m.ops[2].kind, SB_OP_DENSE);
        assert_int_equal(m.ops[2].pw, 1); /* the bias */
        /* LogSoftmax over the vocabulary becomes the loss */
        assert_int_equal(m.ops[3].kind, SB_OP_SOFTMAX_XENT);
        search_p4(&m);
        sb_model_free(&m);
        load(names[f], NULL, NULL, 0, &m, NULL);
        check_reparse(names[f], &m);
        sb_model_free(&m);
    }
}

/* ops.onnx (make_ops.py): Pad folded into the conv, ceil_mode as padding,
 * Split, a Concat of 18 chained, an even Slice, batch named N. */
static void test_ops(void **state)
{
    (void)state;
    sb_model m;
    sb_setting set = {.name = "batch", .value = 2};
    load("ops", NULL, &set, 1, &m, NULL);
    assert_int_equal(m.nops, 12);
    assert_int_equal(param(&m, "batch"), 2);
    const sb_op *c = &m.ops[0], *bn = &m.ops[1], *pool = &m.ops[3];
    assert_int_equal(c->kind, SB_OP_CONV);
    assert_int_equal(c->pad[0], 1);           /* from the Pad */
    assert_int_equal(c->dims[2].size, 10);
    assert_int_equal(bn->kind, SB_OP_NORM);
    assert_int_equal(bn->batchnorm, 1);
    assert_int_equal(pool->kind, SB_OP_POOL);
    assert_int_equal(pool->dims[2].size, 5);  /* ceil((10 - 3) / 2) + 1 */
    assert_int_equal(count_kind(&m, SB_OP_SPLIT), 2);
    assert_int_equal(count_kind(&m, SB_OP_CONCAT), 2);
    const sb_op *cat2 = &m.ops[6];
    assert_int_equal(cat2->kind, SB_OP_CONCAT);
    assert_int_equal(cat2->dims[1].size, 72);
    const sb_op *sl = &m.ops[7];
    assert_int_equal(sl->kind, SB_OP_SPLIT);
    assert_int_equal(sl->nout, 9);
    assert_int_equal(m.ops[8].in[0].tensor, sl->out[1].tensor); /* channels [8, 16) */
    assert_int_equal(m.ops[m.nops - 1].kind, SB_OP_SOFTMAX_XENT);
    search_p4(&m);
    sb_model_free(&m);
    load("ops", NULL, NULL, 0, &m, NULL);
    check_reparse("ops", &m);
    sb_model_free(&m);
}

/* fuse.onnx: a Relu does not fuse into a conv whose output an Add read
 * first; the last Add (of two activations) is an add op. */
static void test_fusion_order(void **state)
{
    (void)state;
    sb_model m;
    load("fuse", NULL, NULL, 0, &m, NULL);
    assert_int_equal(m.nops, 4); /* conv, add(c, c), elementwise(c, pw=1), add */
    assert_int_equal(m.ops[0].kind, SB_OP_CONV);
    assert_int_equal(m.ops[0].pw, 0);
    assert_int_equal(count_kind(&m, SB_OP_ELEMENTWISE), 3);
    assert_int_equal(total_pw(&m), 1);
    assert_int_equal(count_kind(&m, SB_OP_SOFTMAX_XENT), 0); /* not logits */
    sb_model_free(&m);
}

/* softcap.onnx (make_ops.py): torch's c * tanh(x / c) as Div, Tanh, Mul is
 * softcap(cap=30) before the loss; at c = 2.5 (not a whole number) the
 * three operators stay pointwise ops. */
static void test_softcap(void **state)
{
    (void)state;
    sb_model m;
    sb_onnx_info info;
    load("softcap", NULL, NULL, 0, &m, &info);
    assert_int_equal(count_kind(&m, SB_OP_SOFTCAP), 1);
    const sb_op *cap = NULL;
    for (int i = 0; i < m.nops; i++)
        if (m.ops[i].kind == SB_OP_SOFTCAP)
            cap = &m.ops[i];
    assert_true(cap->cap == 30.0);
    assert_int_equal(cap->ndims, 3);
    assert_int_equal(cap->dims[2].size, 32);
    const sb_op *loss = &m.ops[m.nops - 1];
    assert_int_equal(loss->kind, SB_OP_SOFTMAX_XENT);
    assert_int_equal(loss->in[0].tensor, cap->out[0].tensor);
    assert_true(total_pw(&m) >= 1); /* the 2.5 cap: Div, Tanh, Mul as pointwise ops */
    search_p4(&m);
    sb_model_free(&m);
    load("softcap", NULL, NULL, 0, &m, NULL);
    check_reparse("softcap", &m);
    sb_model_free(&m);
}

static void test_unsupported(void **state)
{
    (void)state;
    char path[1024];
    sb_model m;
    sb_error err = {0};
    data_path(path, sizeof path, "unsupported");
    assert_int_equal(sb_onnx_load(path, NULL, NULL, 0, &m, NULL, &err), -1);
    assert_int_equal(err.code, SB_EXIT_INPUT);
    assert_non_null(strstr(err.msg, path));
    assert_non_null(strstr(err.msg, "2 unsupported nodes"));
    assert_non_null(strstr(err.msg, "(ConvTranspose, opset 13)"));
    assert_non_null(strstr(err.msg, "/ArgMax (ArgMax, opset 13)"));
    /* the healthy convs are not listed: the depthwise one (group=4) imports */
    assert_null(strstr(err.msg, "/c1/Conv"));
    assert_null(strstr(err.msg, "/c2/Conv"));
}

/* ---- today's transformer exports (make_llm.py) ------------------------------ */

/* The op of a model whose iteration space starts with these dim names. */
static const sb_op *find_op_dims(const sb_model *m, sb_op_kind k, const char *d0, const char *d1, const char *d2)
{
    for (int i = 0; i < m->nops; i++) {
        const sb_op *o = &m->ops[i];
        if (o->kind == k && o->ndims >= 3 && !strcmp(o->dims[0].name, d0) && !strcmp(o->dims[1].name, d1)
            && !strcmp(o->dims[2].name, d2))
            return o;
    }
    return NULL;
}

/* nn.MultiheadAttention with a static batch of 2: `batch` is a param, the
 * export's literal batch in reshapes follows --set, the heads merged with
 * the batch are named; the weights are torch's less the biases. */
static void test_mha_static_batch(void **state)
{
    (void)state;
    sb_model m;
    sb_onnx_info info;
    load("mha17", NULL, NULL, 0, &m, &info);
    assert_int_equal(param(&m, "batch"), 2);
    assert_int_equal(find_input(&m)->dims[0].size, 2);
    assert_string_equal(find_input(&m)->dims[0].name, "batch");
    assert_int_equal(count_kind(&m, SB_OP_EMBEDDING), 1);
    assert_int_equal(count_kind(&m, SB_OP_DENSE), 5); /* packed qkv, out, fc, proj, head */
    assert_int_equal(count_kind(&m, SB_OP_EINSUM), 2);
    assert_int_equal(count_kind(&m, SB_OP_NORM), 2);
    assert_int_equal(count_kind(&m, SB_OP_SOFTMAX), 1);
    assert_int_equal(count_kind(&m, SB_OP_SPLIT), 1);
    assert_int_equal(model_weights(&m), 14720); /* make_llm.py: "kept by the model file" */
    /* the tanh Gelu (Mul(x, x) ... Tanh ... Mul(0.5)) is one pointwise op on
     * fc, beside its bias; without act in the build: 29 ops in all */
    const sb_op *fc = find_op_dims(&m, SB_OP_DENSE, "batch", "seq", "ff");
    assert_non_null(fc);
    if (!have_op("y = act(x, fn=silu)")) {
        assert_int_equal(fc->pw, 2);
        assert_int_equal(m.nops, 29);
    } else {
        assert_int_equal(count_kind_name(&m, "act"), 1);
        check_act_fn(&m, "gelu_tanh");
    }
    const sb_op *q = find_op_dims(&m, SB_OP_UNFLATTEN, "seq", "batch_heads", "head_dim");
    assert_non_null(q);
    assert_int_equal(q->dims[1].size, 8); /* 4 heads x batch 2 */
    assert_int_equal(q->dims[2].size, 8);
    search_p4(&m);
    check_reparse("mha17", &m);
    sb_model_free(&m);
    sb_setting set = {.name = "batch", .value = 8};
    load("mha17", NULL, &set, 1, &m, NULL);
    q = find_op_dims(&m, SB_OP_UNFLATTEN, "seq", "batch_heads", "head_dim");
    assert_non_null(q);
    assert_int_equal(q->dims[1].size, 32);
    const sb_op *t = NULL;
    for (int i = 0; i < m.nops && !t; i++)
        if (m.ops[i].kind == SB_OP_DENSE && !strcmp(m.ops[i].dims[0].name, "tokens"))
            t = &m.ops[i];
    assert_non_null(t);
    assert_int_equal(t->dims[0].size, 64); /* seq 8 x batch 8 */
    assert_int_equal(model_weights(&m), 14720);
    search_p4(&m);
    sb_model_free(&m);
}

/* The import of one of today's exports, or (on a build without the model
 * ops it needs) the one error listing what blocks it. */
static int load_or_refusal(const char *name, const sb_setting *set, int nset, sb_model *m, char *msg, size_t n)
{
    char path[1024];
    sb_error err = {0};
    data_path(path, sizeof path, name);
    int rc = sb_onnx_load(path, NULL, set, nset, m, NULL, &err);
    if (rc) {
        assert_int_equal(err.code, SB_EXIT_INPUT);
        snprintf(msg, n, "%s", err.msg);
    }
    return rc;
}

static void check_llama(const char *name, int opset)
{
    /* what blocks it on a build without a model op: per layer 2 RMSNorms,
     * rotary on q and k, the expand of k and v, the causal Where; and the
     * final RMSNorm (act and mul fall back to pw and add) */
    static const struct {
        const char *probe, *node, *why;
        int count;
    } need[] = {
        {"y = rmsnorm(x, axis=b)", "/layers.0/n1/Pow (Pow", "the RMSNorm pattern needs the model op rmsnorm", 5},
        {"y = rope(x, seq=a, dim=b, theta=10000)", "/layers.0/attn/Add (Add", "the rotary pattern needs the model op rope", 4},
        {"y = expand(x, shape=[c=2, a=4, b=4])", "/layers.0/attn/Expand_1 (Expand", "needs the model op expand", 4},
        {"y = softmax(x, axis=b, causal=a)", "/layers.0/attn/Where_2 (Where", "a causal mask before Softmax", 2},
    };
    int missing = 0;
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
        missing += have_op(need[i].probe) ? 0 : need[i].count;
    sb_model m;
    char msg[2048], want[256];
    sb_setting set = {.name = "batch", .value = 4};
    int rc = load_or_refusal(name, &set, 1, &m, msg, sizeof msg);
    if (missing) {
        assert_int_equal(rc, -1);
        snprintf(want, sizeof want, "%d unsupported nodes", missing);
        if (!strstr(msg, want))
            fail_msg("expected '%s' in: %s", want, msg);
        for (size_t i = 0; i < sizeof need / sizeof need[0]; i++) {
            snprintf(want, sizeof want, "%s, opset %d): %s", need[i].node, opset, need[i].why);
            /* listed, unless the message is full ("... and N more") */
            if (!have_op(need[i].probe) && !strstr(msg, want) && !strstr(msg, "... and"))
                fail_msg("expected '%s' in: %s", want, msg);
            if (have_op(need[i].probe) && strstr(msg, need[i].why))
                fail_msg("'%s' refused though the build has it: %s", need[i].why, msg);
        }
        return;
    }
    if (rc)
        fail_msg("%s", msg);
    assert_int_equal(param(&m, "batch"), 4);
    assert_int_equal(count_kind_name(&m, "rmsnorm"), 5);
    assert_int_equal(count_kind_name(&m, "rope"), 4);
    assert_int_equal(count_kind_name(&m, "expand"), 4);
    if (have_op("y = act(x, fn=silu)"))
        assert_int_equal(count_kind_name(&m, "act"), 2);
    if (have_op("y = mul(x, x)"))
        assert_int_equal(count_kind_name(&m, "mul"), 2);
    assert_int_equal(count_kind(&m, SB_OP_SOFTMAX), 2);
    assert_int_equal(count_kind(&m, SB_OP_DENSE), 15); /* 2 x (q k v o gate up down) + out */
    assert_int_equal(count_kind(&m, SB_OP_EINSUM), 4);
    assert_int_equal(count_kind(&m, SB_OP_EMBEDDING), 1);
    assert_int_equal(model_weights(&m), 86848); /* make_llm.py: torch's parameters */
    assert_non_null(find_op_dims(&m, SB_OP_UNFLATTEN, "batch", "seq", "heads"));
    assert_non_null(find_op_dims(&m, SB_OP_UNFLATTEN, "batch", "seq", "kv_heads"));
    assert_int_equal(m.nops, 72); /* the rotary's Slice/Neg/Concat/Mul leave no op of their own */
    check_causal(&m, "seq", "seq_2");
    for (int i = 0; i < m.nops; i++) {
        const sb_op *o = &m.ops[i];
        const char *k = sb_op_kind_name(o->kind);
        if (!strcmp(k, "rope")) {
            assert_true(o->theta == 10000);
            assert_string_equal(o->dims[o->pos_axis].name, "seq");
            assert_string_equal(o->dims[o->axis].name, "head_dim");
        } else if (!strcmp(k, "rmsnorm")) {
            assert_string_equal(o->dims[o->axis].name, "embed");
        } else if (!strcmp(k, "expand")) {
            assert_int_equal(o->ndims, 5); /* batch, kv_heads, rep, seq, head_dim */
            assert_string_equal(o->dims[1].name, "kv_heads");
            assert_string_equal(o->dims[2].name, "rep");
            assert_int_equal(o->dims[2].size, 2);
        }
    }
    if (have_op("y = act(x, fn=silu)"))
        check_act_fn(&m, "silu");
    search_p4(&m);
    sb_model_free(&m);
}

static void check_gpt2(const char *name, int opset)
{
    sb_model m;
    char msg[2048], want[256];
    int rc = load_or_refusal(name, NULL, 0, &m, msg, sizeof msg);
    if (!have_op("y = softmax(x, axis=b, causal=a)")) {
        assert_int_equal(rc, -1);
        assert_non_null(strstr(msg, "2 unsupported nodes"));
        for (int l = 0; l < 2; l++) {
            snprintf(want, sizeof want, "/layers.%d/attn/Add_2 (Add, opset %d): a causal mask before Softmax needs", l, opset);
            assert_non_null(strstr(msg, want));
        }
        return;
    }
    if (rc)
        fail_msg("%s", msg);
    assert_int_equal(count_kind(&m, SB_OP_SOFTMAX), 2);
    assert_int_equal(count_kind(&m, SB_OP_DENSE), 9); /* 2 x (qkv out fc proj) + head */
    assert_int_equal(count_kind(&m, SB_OP_NORM), 5);
    assert_int_equal(model_weights(&m), 111744); /* make_llm.py: less biases and positions */
    assert_non_null(find_op_dims(&m, SB_OP_UNFLATTEN, "seq", "batch_heads", "head_dim"));
    check_causal(&m, "seq", "seq_2");
    if (have_op("y = act(x, fn=silu)")) {
        assert_int_equal(count_kind_name(&m, "act"), 2);
        check_act_fn(&m, "gelu");
    }
    search_p4(&m);
    sb_model_free(&m);
}

static void check_vit(const char *name, int opset)
{
    sb_model m;
    char msg[2048], want[256];
    int rc = load_or_refusal(name, NULL, 0, &m, msg, sizeof msg);
    if (!have_op("y = expand(x, shape=[c=2, a=4, b=4])")) {
        /* only the class token's Expand blocks: the shape checks around it
         * (Equal, Where, ConstantOfShape) fold, x[:, 0] is a split */
        assert_int_equal(rc, -1);
        assert_non_null(strstr(msg, "1 unsupported node"));
        snprintf(want, sizeof want, "/Expand (Expand, opset %d): needs the model op expand", opset);
        assert_non_null(strstr(msg, want));
        return;
    }
    if (rc)
        fail_msg("%s", msg);
    assert_int_equal(count_kind(&m, SB_OP_CONV), 1);
    assert_int_equal(count_kind_name(&m, "expand"), 1);
    assert_int_equal(count_kind(&m, SB_OP_NORM), 25);
    assert_int_equal(count_kind(&m, SB_OP_DENSE), 49); /* 12 x (qkv out fc proj) + head */
    assert_int_equal(model_weights(&m), 86331648); /* make_llm.py: less biases and positions */
    /* class token + 4 patches: the sequence of 5 */
    const sb_op *cat = NULL;
    for (int i = 0; i < m.nops && !cat; i++)
        if (m.ops[i].kind == SB_OP_CONCAT)
            cat = &m.ops[i];
    assert_non_null(cat);
    assert_string_equal(cat->dims[1].name, "seq");
    assert_int_equal(cat->dims[1].size, 5);
    if (have_op("y = act(x, fn=silu)")) {
        assert_int_equal(count_kind_name(&m, "act"), 12);
        check_act_fn(&m, "gelu");
    }
    search_p4(&m);
    sb_model_free(&m);
}

/* The rotary tables are read, not assumed: Llama 3's theta comes back as
 * 500000; tables that are not rotary angles are refused by name. */
static void test_rope_tables(void **state)
{
    (void)state;
    sb_model m;
    char msg[2048];
    if (!have_op("y = rope(x, seq=a, dim=b, theta=10000)"))
        skip();
    int rc = load_or_refusal("llama_theta", NULL, 0, &m, msg, sizeof msg);
    if (rc)
        fail_msg("%s", msg);
    int n = 0;
    for (int i = 0; i < m.nops; i++)
        if (!strcmp(sb_op_kind_name(m.ops[i].kind), "rope")) {
            assert_true(m.ops[i].theta == 500000);
            n++;
        }
    assert_int_equal(n, 2);
    sb_model_free(&m);
    assert_int_equal(load_or_refusal("llama_badrope", NULL, 0, &m, msg, sizeof msg), -1);
    assert_non_null(strstr(msg, "2 unsupported nodes"));
    assert_non_null(strstr(msg, "/layers.0/attn/Add (Add, opset 17): rotary tables that are not constant cos/sin"));
    assert_non_null(strstr(msg, "/layers.0/attn/Add_1 (Add, opset 17): rotary tables"));
}

/* masks.onnx: a causal mask built with ConstantOfShape, Trilu, Cast and
 * Where before a Softmax is softmax(causal=); a reshape's shape through
 * Range and Gather folds (--set batch still reaches it). */
static void test_masks(void **state)
{
    (void)state;
    if (!have_op("y = softmax(x, axis=b, causal=a)"))
        skip();
    sb_onnx_opts o = {.no_loss = 1};
    sb_setting set = {.name = "batch", .value = 3};
    sb_model m;
    load("masks", &o, &set, 1, &m, NULL);
    assert_int_equal(m.nops, 3); /* softmax, and the reshape's flatten and unflatten */
    assert_int_equal(m.ops[0].kind, SB_OP_SOFTMAX);
    assert_int_equal(m.ops[0].causal, 2); /* rows of the mask: dim 2, columns: dim 3 */
    assert_int_equal(m.ops[0].axis, 3);
    const sb_op *r = &m.ops[2];
    assert_int_equal(r->kind, SB_OP_UNFLATTEN);
    assert_int_equal(r->ndims, 3);
    assert_int_equal(r->dims[0].size, 3);
    assert_int_equal(r->dims[2].size, 64); /* Range(2, 20, 2)[3] squared */
    sb_model_free(&m);
}

static void test_llm_exports(void **state)
{
    (void)state;
    check_llama("llama13", 13);
    check_llama("llama17", 17);
    check_gpt2("gpt2_13", 13);
    check_gpt2("gpt2_17", 17);
    /* the same modules exported with a dynamic batch axis (make_llm.py) */
    check_llama("llama13_dyn", 13);
    check_llama("llama17_dyn", 17);
    check_gpt2("gpt2_13_dyn", 13);
    check_gpt2("gpt2_17_dyn", 17);
    check_vit("vit13", 13);
    check_vit("vit17", 17);
}

static void expect_clean_error(const void *data, size_t size, const char *path)
{
    char *text = NULL;
    size_t len;
    sb_error err = {0};
    int rc = sb_onnx_to_text(data, size, path, NULL, &text, &len, NULL, &err);
    if (rc == 0) {
        /* a prefix or mutation that still decodes must give parseable text */
        sb_model m;
        if (sb_model_parse(text, len, path, NULL, 0, &m, &err) == 0)
            sb_model_free(&m);
        free(text);
        return;
    }
    assert_null(text);
    assert_true(err.code == SB_EXIT_INPUT || err.code == SB_EXIT_INTERNAL);
    assert_non_null(strstr(err.msg, path));
}

static void test_bad_files(void **state)
{
    (void)state;
    sb_error err = {0};
    char *text;
    size_t len;
    /* empty */
    assert_int_equal(sb_onnx_to_text("", 0, "empty.onnx", NULL, &text, &len, NULL, &err), -1);
    assert_int_equal(err.code, SB_EXIT_INPUT);
    assert_non_null(strstr(err.msg, "empty.onnx"));
    /* garbage and text */
    const char *garbage = "\xff\xff\xff\xff\x0f garbage that is no protobuf";
    assert_int_equal(sb_onnx_to_text(garbage, strlen(garbage), "junk.onnx", NULL, &text, &len, NULL, &err), -1);
    assert_int_equal(err.code, SB_EXIT_INPUT);
    assert_non_null(strstr(err.msg, "junk.onnx"));
    assert_non_null(strstr(err.msg, "not an ONNX model"));
    const char *model = "model x\ninput x[a=2, b=3]\ny = dense(x, units=4)\n";
    assert_int_equal(sb_onnx_to_text(model, strlen(model), "text.onnx", NULL, &text, &len, NULL, &err), -1);
    assert_non_null(strstr(err.msg, "text.onnx"));
    /* a missing file */
    sb_model m;
    assert_int_equal(sb_model_load("/nonexistent/dir/net.onnx", NULL, 0, &m, &err), -1);
    assert_int_equal(err.code, SB_EXIT_INPUT);
    assert_non_null(strstr(err.msg, "/nonexistent/dir/net.onnx"));
    /* every prefix of cnn.onnx, and every 7th of the transformer */
    const char *files[2] = {"cnn", "transformer"};
    for (int f = 0; f < 2; f++) {
        size_t size;
        char *data = slurp(files[f], &size);
        for (size_t n = 1; n < size; n += f ? 7 : 1) {
            char *cut = malloc(n);
            assert_non_null(cut);
            memcpy(cut, data, n);
            expect_clean_error(cut, n, "cut.onnx");
            free(cut);
        }
        free(data);
    }
}

/* Reproducers the fuzzer found (tests/data/onnx/regress): clean results. */
static void test_regress(void **state)
{
    (void)state;
    const char *files[] = {"unnamed-input", "einsum-weight-realloc", "rope-tiny-angle"};
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        char path[1024], *data;
        size_t size;
        sb_error err = {0};
        snprintf(path, sizeof path, "%s/tests/data/onnx/regress/%s.bin", SB_SOURCE_DIR, files[f]);
        assert_int_equal(sb_onnx_read_file(path, &data, &size, &err), 0);
        expect_clean_error(data, size, "regress.onnx");
        free(data);
    }
    /* a held rotary chain (Llama) or repeat of K/V heads (GQA) whose last
     * node's output was emptied: refused by name, no value made after the
     * prepass (the CI fuzzer's find of 2026-12-07, a null name hashed) */
    const char *unnamed[] = {"rope-unnamed-output", "repeat-unnamed-output"};
    for (size_t f = 0; f < sizeof unnamed / sizeof unnamed[0]; f++) {
        char path[1024], *data, *text = NULL;
        size_t size, len;
        sb_error err = {0};
        snprintf(path, sizeof path, "%s/tests/data/onnx/regress/%s.bin", SB_SOURCE_DIR, unnamed[f]);
        assert_int_equal(sb_onnx_read_file(path, &data, &size, &err), 0);
        assert_int_not_equal(sb_onnx_to_text(data, size, "unnamed.onnx", NULL, &text, &len, NULL, &err), 0);
        assert_null(text);
        assert_int_equal(err.code, SB_EXIT_INPUT);
        assert_non_null(strstr(err.msg, "unnamed.onnx: a node's output has no name"));
        free(data);
    }
}

/* Fixed-seed byte mutations of every test file: no crash, clean errors. */
static void test_mutations(void **state)
{
    (void)state;
    const char *files[] = {"cnn", "lstm", "einsum", "resnet18", "unsupported", "transformer17_w", "ops"};
    uint64_t seed = 0x9e3779b97f4a7c15ULL;
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        size_t size;
        char *data = slurp(files[f], &size);
        char *buf = malloc(size);
        assert_non_null(buf);
        for (int it = 0; it < 300; it++) {
            memcpy(buf, data, size);
            int flips = 1 + it % 4;
            for (int k = 0; k < flips; k++) {
                seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
                size_t pos = (size_t)(seed >> 33) % size;
                buf[pos] = (char)(seed >> 13);
            }
            expect_clean_error(buf, size, "mut.onnx");
        }
        free(buf);
        free(data);
    }
}

/* A graph input whose fixed dim is 0 or negative (issue 39): refused
 * naming the input and the dim, not imported as `param batch = 1`. The
 * static-batch export mha17 with its data input's dim 0 set by protobuf-c. */
static void test_fixed_dim_not_positive(void **state)
{
    (void)state;
    size_t size;
    char *data = slurp("mha17", &size);
    const int64_t bad[] = {0, -3};
    for (int b = 0; b < 2; b++) {
        Onnx__ModelProto *mp = onnx__model_proto__unpack(NULL, size, (const uint8_t *)data);
        assert_non_null(mp);
        Onnx__GraphProto *g = mp->graph;
        const char *name = NULL;
        for (size_t i = 0; i < g->n_input && !name; i++) {
            Onnx__TypeProto *tp = g->input[i]->type;
            int init = 0;
            for (size_t k = 0; k < g->n_initializer; k++)
                init |= !strcmp(g->initializer[k]->name, g->input[i]->name);
            if (init || !tp || !tp->tensor_type || !tp->tensor_type->shape
                || !tp->tensor_type->shape->n_dim)
                continue;
            Onnx__TensorShapeProto__Dimension *d = tp->tensor_type->shape->dim[0];
            assert_int_equal(d->value_case, ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE);
            assert_int_equal(d->dim_value, 2);
            d->dim_value = bad[b];
            name = g->input[i]->name;
        }
        assert_non_null(name);
        size_t n = onnx__model_proto__get_packed_size(mp);
        uint8_t *buf = malloc(n);
        assert_non_null(buf);
        onnx__model_proto__pack(mp, buf);
        char *text = NULL, want[256];
        size_t len;
        sb_error err = {0};
        assert_int_equal(sb_onnx_to_text(buf, n, "zero.onnx", NULL, &text, &len, NULL, &err), -1);
        assert_int_equal(err.code, SB_EXIT_INPUT);
        snprintf(want, sizeof want, "graph input '%s': dim 0 is fixed at %lld", name,
                 (long long)bad[b]);
        if (!strstr(err.msg, want) || !strstr(err.msg, "zero.onnx"))
            fail_msg("expected '%s', got: %s", want, err.msg);
        free(buf);
        onnx__model_proto__free_unpacked(mp, NULL);
    }
    free(data);
}

/* Repeated keys (issue 39): an initializer given twice (the second
 * replaced the first), a node attribute given twice (the first was read):
 * refused naming the name and both places. cnn_w and mha17 edited by
 * protobuf-c. */
static void test_repeated_names(void **state)
{
    (void)state;
    for (int c = 0; c < 2; c++) {
        size_t size;
        char *data = slurp(c == 0 ? "cnn_w" : "mha17", &size); /* cnn_w: initializers */
        Onnx__ModelProto *mp = onnx__model_proto__unpack(NULL, size, (const uint8_t *)data);
        assert_non_null(mp);
        Onnx__GraphProto *g = mp->graph;
        char want[256];
        void *extra = NULL;
        if (c == 0) { /* the last initializer again, in the first's place */
            assert_true(g->n_initializer >= 2);
            extra = g->initializer[0];
            g->initializer[0] = g->initializer[g->n_initializer - 1];
            snprintf(want, sizeof want, "initializer '%s' given twice (first: initializer 0, "
                     "again: %zu)", g->initializer[0]->name, g->n_initializer - 1);
        } else { /* a node's first attribute again, appended */
            Onnx__NodeProto *n = NULL;
            for (size_t i = 0; i < g->n_node && !n; i++)
                if (g->node[i]->n_attribute >= 1)
                    n = g->node[i];
            assert_non_null(n);
            Onnx__AttributeProto **more = malloc((n->n_attribute + 1) * sizeof *more);
            assert_non_null(more);
            memcpy(more, n->attribute, n->n_attribute * sizeof *more);
            more[n->n_attribute] = n->attribute[0];
            extra = n->attribute;
            n->attribute = more;
            n->n_attribute++;
            snprintf(want, sizeof want, "attribute '%s' given twice (first: attribute 0, again: "
                     "%zu)", more[0]->name, n->n_attribute - 1);
        }
        size_t n = onnx__model_proto__get_packed_size(mp);
        uint8_t *buf = malloc(n);
        assert_non_null(buf);
        onnx__model_proto__pack(mp, buf);
        char *text = NULL;
        size_t len;
        sb_error err = {0};
        assert_int_equal(sb_onnx_to_text(buf, n, "rep.onnx", NULL, &text, &len, NULL, &err), -1);
        assert_int_equal(err.code, SB_EXIT_INPUT);
        if (!strstr(err.msg, want))
            fail_msg("expected '%s', got: %s", want, err.msg);
        free(buf);
        /* put the message back as protobuf-c allocated it before freeing */
        if (c == 0) {
            g->initializer[0] = extra;
            onnx__model_proto__free_unpacked(mp, NULL);
        } else {
            for (size_t i = 0; i < g->n_node; i++)
                if (g->node[i]->attribute && g->node[i]->n_attribute >= 2
                    && g->node[i]->attribute[g->node[i]->n_attribute - 1] == g->node[i]->attribute[0]
                    && extra) {
                    free(g->node[i]->attribute);
                    g->node[i]->attribute = extra;
                    g->node[i]->n_attribute--;
                    extra = NULL;
                }
            onnx__model_proto__free_unpacked(mp, NULL);
        }
        free(data);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixed_dim_not_positive),
        cmocka_unit_test(test_repeated_names),
        cmocka_unit_test(test_cnn),         cmocka_unit_test(test_cnn_options),
        cmocka_unit_test(test_resnet18),    cmocka_unit_test(test_transformer),
        cmocka_unit_test(test_einsum),      cmocka_unit_test(test_lstm),
        cmocka_unit_test(test_ops),         cmocka_unit_test(test_fusion_order),
        cmocka_unit_test(test_unsupported), cmocka_unit_test(test_bad_files),
        cmocka_unit_test(test_regress),     cmocka_unit_test(test_mutations),
        cmocka_unit_test(test_not_a_file),  cmocka_unit_test(test_resnext50),
        cmocka_unit_test(test_mobilenet_v2), cmocka_unit_test(test_mha_static_batch),
        cmocka_unit_test(test_llm_exports), cmocka_unit_test(test_rope_tables),
        cmocka_unit_test(test_masks), cmocka_unit_test(test_softcap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#else /* built without ONNX support: every import fails loudly */

static void test_without_onnx(void **state)
{
    (void)state;
    size_t size, len;
    char *data = slurp("cnn", &size), *text;
    sb_error err = {0};
    assert_int_equal(sb_onnx_to_text(data, size, "cnn.onnx", NULL, &text, &len, NULL, &err), -1);
    assert_int_equal(err.code, SB_EXIT_INPUT);
    assert_non_null(strstr(err.msg, "built without ONNX support"));
    free(data);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_without_onnx),
                                       cmocka_unit_test(test_not_a_file)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#endif
