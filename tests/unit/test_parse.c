/* tests/unit/test_parse.c: cmocka tests of the model-file interpreter
 * (models/parse.c, models/lex.c, models/graph.c).
 *
 * The shipped models parse to the op counts of docs/models.md;
 * --set overrides reach the sizes; every class of bad input fails with
 * SB_EXIT_INPUT and a message naming the exact path:line:col and the
 * fault; blocks and repeat expand; multi-output ops wire their slots; and a
 * fixed-seed mutation loop over the shipped texts never crashes. Inputs that
 * might crash the parser run in a forked child, so a crash fails one test
 * instead of the whole executable. Not the cost model (test_cost.c). */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "shardbench/model.h"

#include "../models/ops/ops.h" /* op_rules[] */

#define PATH "t.model"

/* ------------------------------------------------------------ helpers -- */

static int file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static void shipped_path(char *buf, size_t n, const char *name)
{
    int len = snprintf(buf, n, "%s/models/%s.model", SB_SOURCE_DIR, name);
    assert_true(len > 0 && (size_t)len < n);
}

/* Whole file, malloc'd (exactly len bytes, no terminator: overreads show
 * under ASan). */
static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    long size = ftell(f);
    assert_true(size > 0);
    rewind(f);
    char *buf = malloc((size_t)size);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    *len = (size_t)size;
    return buf;
}

static int parse_text(const char *text, const sb_setting *set, int nset, sb_model *m,
                      sb_error *err)
{
    memset(err, 0, sizeof *err);
    return sb_model_parse(text, strlen(text), PATH, set, nset, m, err);
}

static void parse_ok(const char *text, const sb_setting *set, int nset, sb_model *m)
{
    sb_error err;
    if (parse_text(text, set, nset, m, &err) != 0)
        fail_msg("expected the model to parse, got: %s", err.msg);
}

/* The parse must fail with SB_EXIT_INPUT, a message that starts with
 * `where` (e.g. "t.model:3:18") followed by ':', and contains `phrase`. */
static void expect_error_set(const char *text, const sb_setting *set, int nset,
                             const char *where, const char *phrase)
{
    sb_model m;
    sb_error err;
    int rc = parse_text(text, set, nset, &m, &err);
    if (rc == 0) {
        sb_model_free(&m);
        fail_msg("expected an error at %s (%s), but the model parsed", where, phrase);
    }
    assert_int_equal(rc, -1);
    if (err.code != SB_EXIT_INPUT)
        fail_msg("error code %d, expected SB_EXIT_INPUT: %s", err.code, err.msg);
    size_t wl = strlen(where);
    if (strncmp(err.msg, where, wl) != 0 || err.msg[wl] != ':')
        fail_msg("expected the message to start with '%s:', got: %s", where, err.msg);
    if (!strstr(err.msg, phrase))
        fail_msg("expected '%s' in the message, got: %s", phrase, err.msg);
    /* a failed parse leaves nothing to free, and freeing is harmless */
    assert_int_equal(m.nops, 0);
    assert_null(m.ops);
    sb_model_free(&m);
}

static void expect_error(const char *text, const char *where, const char *phrase)
{
    expect_error_set(text, NULL, 0, where, phrase);
}

static int find_op(const sb_model *m, const char *name)
{
    for (int i = 0; i < m->nops; i++)
        if (strcmp(m->ops[i].name, name) == 0)
            return i;
    return -1;
}

static int find_tensor(const sb_model *m, const char *name)
{
    for (int i = 0; i < m->ntensors; i++)
        if (strcmp(m->tensors[i].name, name) == 0)
            return i;
    return -1;
}

static int64_t param_value(const sb_model *m, const char *name)
{
    for (int i = 0; i < m->nparams; i++)
        if (strcmp(m->params[i].name, name) == 0)
            return m->params[i].value;
    fail_msg("model has no parameter '%s'", name);
    return -1;
}

/* Structural invariants every parsed model must hold: op and tensor names
 * unique, operands in range, ops in topological order, maps valid, sizes
 * positive. */
static void check_model_invariants(const sb_model *m)
{
    for (int i = 0; i < m->nops; i++)
        for (int j = 0; j < i; j++)
            if (strcmp(m->ops[i].name, m->ops[j].name) == 0)
                fail_msg("op name '%s' used by ops %d and %d", m->ops[i].name, j, i);
    for (int i = 0; i < m->ntensors; i++) {
        const sb_tensor *t = &m->tensors[i];
        assert_true(t->ndims >= 1 && t->ndims <= SB_MAX_DIMS);
        for (int d = 0; d < t->ndims; d++)
            assert_true(t->dims[d].size > 0);
        if (t->producer >= 0) {
            assert_true(t->producer < m->nops);
            const sb_op *p = &m->ops[t->producer];
            assert_true(t->producer_slot >= 0 && t->producer_slot < p->nout);
            assert_int_equal(p->out[t->producer_slot].tensor, i);
        }
        for (int j = 0; j < i; j++)
            if (strcmp(t->name, m->tensors[j].name) == 0)
                fail_msg("tensor name '%s' used twice", t->name);
    }
    for (int i = 0; i < m->nops; i++) {
        const sb_op *op = &m->ops[i];
        assert_true(op->ndims >= 1 && op->ndims <= SB_MAX_DIMS);
        assert_true(op->nin >= 1 && op->nin <= SB_MAX_IO);
        assert_true(op->nout >= 1 && op->nout <= SB_MAX_IO);
        for (int d = 0; d < op->ndims; d++)
            assert_true(op->dims[d].size > 0);
        for (int k = 0; k < op->nin + op->nout; k++) {
            const sb_operand *o = k < op->nin ? &op->in[k] : &op->out[k - op->nin];
            assert_true(o->tensor >= 0 && o->tensor < m->ntensors);
            const sb_tensor *t = &m->tensors[o->tensor];
            if (k < op->nin && t->producer >= 0)
                assert_true(t->producer < i); /* topological order */
            if (k >= op->nin)
                assert_int_equal(t->producer, i);
            for (int d = 0; d < t->ndims; d++)
                assert_true(o->map[d] == SB_MAP_ONE || o->map[d] == SB_MAP_ALL
                            || (o->map[d] >= 0 && o->map[d] < op->ndims));
        }
    }
}

/* Runs sb_model_parse in a forked child, so an input that crashes the
 * parser fails the calling test instead of killing the test program.
 * Returns the child's wait status; *rc, *code and msg get the parse result
 * when the child exited normally. */
typedef struct {
    int rc, code;
    char msg[1024];
} child_result;

static int parse_in_child(const char *text, size_t len, child_result *res)
{
    int fd[2];
    assert_int_equal(pipe(fd), 0);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fd[0]);
        sb_model m;
        sb_error err = {0};
        child_result r = {0};
        r.rc = sb_model_parse(text, len, PATH, NULL, 0, &m, &err);
        r.code = err.code;
        memcpy(r.msg, err.msg, sizeof r.msg);
        if (r.rc == 0)
            sb_model_free(&m);
        ssize_t w = write(fd[1], &r, sizeof r);
        _exit(w == (ssize_t)sizeof r ? 0 : 3);
    }
    close(fd[1]);
    memset(res, 0, sizeof *res);
    size_t got = 0;
    while (got < sizeof *res) {
        ssize_t r = read(fd[0], (char *)res + got, sizeof *res - got);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd[0]);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (got != sizeof *res && WIFEXITED(status) && WEXITSTATUS(status) == 0)
        status = -1;
    return status;
}

static void expect_child_clean_error(const char *what, const char *text, size_t len,
                                     const char *phrase)
{
    child_result r;
    int status = parse_in_child(text, len, &r);
    if (WIFSIGNALED(status))
        fail_msg("LIBRARY BUG: sb_model_parse crashed with signal %d (%s) on %s",
                 WTERMSIG(status), strsignal(WTERMSIG(status)), what);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail_msg("LIBRARY BUG: sb_model_parse aborted (wait status 0x%x; a sanitizer report is "
                 "above) on %s", (unsigned)status, what);
    if (r.rc != -1 || r.code != SB_EXIT_INPUT)
        fail_msg("%s: expected a clean SB_EXIT_INPUT error, got rc=%d code=%d msg=%s", what, r.rc,
                 r.code, r.msg);
    if (phrase && !strstr(r.msg, phrase))
        fail_msg("%s: expected '%s' in the message, got: %s", what, phrase, r.msg);
}

/* ------------------------------------------------------ shipped models -- */

static void test_shipped_models_parse(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        int nops; /* as docs/models.md counts them */
    } expected[] = {
        {"alexnet", 14}, {"rnnlm", 4}, {"inception3", 219},
        {"resnet101", 245}, {"transformer", 204}, {"transformer-large", 204},
        {"llama3-8b", 580}, {"llama3-70b", 1444}, {"llama2-7b", 580}, {"gpt2", 162},
        {"gpt3-175b", 1254}, {"mixtral-8x7b", 708}, {"vit-b16", 170},
        {"mobilenet-v2", 152}, {"resnext50", 159},
    };
    int parsed = 0;
    for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++) {
        char path[1024];
        shipped_path(path, sizeof path, expected[i].name);
        if (!file_exists(path))
            fail_msg("shipped model %s is missing", path);
        sb_model m;
        sb_error err = {0};
        if (sb_model_load(expected[i].name, NULL, 0, &m, &err) != 0)
            fail_msg("shipped model %s does not load: %s", expected[i].name, err.msg);
        if (m.nops != expected[i].nops)
            fail_msg("shipped model %s has %d ops, expected %d", expected[i].name, m.nops,
                     expected[i].nops);
        check_model_invariants(&m);
        /* the edge list is consistent with the operands */
        sb_edge *edges = NULL;
        int ne = -1;
        assert_int_equal(sb_model_edges(&m, &edges, &ne, &err), 0);
        for (int k = 0; k < ne; k++) {
            assert_true(edges[k].src < edges[k].dst);
            assert_int_equal(m.ops[edges[k].dst].in[edges[k].dst_slot].tensor, edges[k].tensor);
            assert_int_equal(m.tensors[edges[k].tensor].producer, edges[k].src);
        }
        free(edges);
        /* by path too, and the same graph */
        sb_model m2;
        if (sb_model_load(path, NULL, 0, &m2, &err) != 0)
            fail_msg("%s does not load by path: %s", path, err.msg);
        assert_int_equal(m2.nops, m.nops);
        assert_int_equal(m2.ntensors, m.ntensors);
        sb_model_free(&m2);
        sb_model_free(&m);
        parsed++;
    }
    assert_int_equal(parsed, (int)(sizeof expected / sizeof expected[0]));
}

static void test_shipped_model_details(void **state)
{
    (void)state;
    sb_model m;
    sb_error err = {0};
    assert_int_equal(sb_model_load("alexnet", NULL, 0, &m, &err), 0);
    assert_string_equal(m.name, "alexnet");
    assert_int_equal(m.cutoff, 4);
    assert_int_equal(param_value(&m, "batch"), 128);
    assert_int_equal(m.ops[0].kind, SB_OP_CONV);
    assert_int_equal(m.ops[1].kind, SB_OP_POOL);
    assert_int_equal(m.ops[8].kind, SB_OP_FLATTEN);
    assert_int_equal(m.ops[9].kind, SB_OP_UNFLATTEN);
    assert_int_equal(m.ops[13].kind, SB_OP_SOFTMAX_XENT);
    /* conv1: 227 -> (227 - 11)/4 + 1 = 55; iteration space (b,c,h,w,r,s,n) */
    const sb_op *c1 = &m.ops[0];
    assert_int_equal(c1->ndims, 7);
    assert_int_equal(c1->dims[0].size, 128);
    assert_int_equal(c1->dims[1].size, 3);
    assert_int_equal(c1->dims[2].size, 55);
    assert_int_equal(c1->dims[3].size, 55);
    assert_int_equal(c1->dims[4].size, 11);
    assert_int_equal(c1->dims[5].size, 11);
    assert_int_equal(c1->dims[6].size, 96);
    assert_int_equal(c1->pw, 1);
    /* pool5 output 128 x 256 x 6 x 6 flattens whole, then unflattens to
     * (batch, 9216) */
    const sb_tensor *flat = &m.tensors[m.ops[8].out[0].tensor];
    assert_int_equal(flat->ndims, 1);
    assert_int_equal(flat->dims[0].size, 128 * 256 * 6 * 6);
    const sb_tensor *feat = &m.tensors[m.ops[9].out[0].tensor];
    assert_int_equal(feat->ndims, 2);
    assert_int_equal(feat->dims[0].size, 128);
    assert_int_equal(feat->dims[1].size, 256 * 6 * 6);
    /* fc8 has `classes` units */
    const sb_tensor *fc8 = &m.tensors[m.ops[12].out[0].tensor];
    assert_int_equal(fc8->dims[fc8->ndims - 1].size, 1024);
    sb_model_free(&m);

    assert_int_equal(sb_model_load("rnnlm", NULL, 0, &m, &err), 0);
    assert_int_equal(m.cutoff, 1);
    assert_int_equal(m.ops[0].kind, SB_OP_EMBEDDING);
    assert_int_equal(m.ops[1].kind, SB_OP_LSTM);
    assert_int_equal(m.ops[1].layers, 2);
    assert_int_equal(m.ops[2].kind, SB_OP_DENSE);
    sb_model_free(&m);

    assert_int_equal(sb_model_load("inception3", NULL, 0, &m, &err), 0);
    int nconcat = 0, nnorm = 0;
    for (int i = 0; i < m.nops; i++) {
        nconcat += m.ops[i].kind == SB_OP_CONCAT;
        nnorm += m.ops[i].kind == SB_OP_NORM;
    }
    /* 11 modules + 2 inner concats in each of the two E modules; one batch
     * norm per basic conv (94 of them) */
    assert_int_equal(nconcat, 15);
    assert_int_equal(nnorm, 94);
    sb_model_free(&m);

    /* unknown shipped name */
    assert_int_equal(sb_model_load("no-such-model", NULL, 0, &m, &err), -1);
    assert_int_equal(err.code, SB_EXIT_INPUT);
    assert_non_null(strstr(err.msg, "no-such-model"));
    /* a path that does not exist */
    assert_int_equal(sb_model_load("/nonexistent/dir/x.model", NULL, 0, &m, &err), -1);
    assert_int_equal(err.code, SB_EXIT_INPUT);
    assert_non_null(strstr(err.msg, "/nonexistent/dir/x.model"));
}

static void test_settings_override(void **state)
{
    (void)state;
    sb_setting set[2];
    sb_error err = {0};
    assert_int_equal(sb_setting_parse("batch=8", &set[0], &err), 0);
    assert_string_equal(set[0].name, "batch");
    assert_int_equal(set[0].value, 8);
    assert_int_equal(sb_setting_parse("classes=10", &set[1], &err), 0);

    sb_model m;
    assert_int_equal(sb_model_load("alexnet", set, 2, &m, &err), 0);
    assert_int_equal(param_value(&m, "batch"), 8);
    assert_int_equal(param_value(&m, "classes"), 10);
    assert_int_equal(param_value(&m, "image"), 227);
    assert_int_equal(m.ops[0].dims[0].size, 8);
    int img = find_tensor(&m, "img");
    assert_true(img >= 0);
    assert_int_equal(m.tensors[img].dims[0].size, 8);
    const sb_tensor *fc8 = &m.tensors[m.ops[12].out[0].tensor];
    assert_int_equal(fc8->dims[0].size, 8);
    assert_int_equal(fc8->dims[1].size, 10);
    sb_model_free(&m);

    /* a smaller image changes the spatial sizes: (131 - 11)/4 + 1 = 31 */
    sb_setting im;
    assert_int_equal(sb_setting_parse("image=131", &im, &err), 0);
    assert_int_equal(sb_model_load("alexnet", &im, 1, &m, &err), 0);
    assert_int_equal(m.ops[0].dims[2].size, 31);
    sb_model_free(&m);

    sb_setting r[2];
    assert_int_equal(sb_setting_parse("vocab=1000", &r[0], &err), 0);
    assert_int_equal(sb_setting_parse("seq=16", &r[1], &err), 0);
    assert_int_equal(sb_model_load("rnnlm", r, 2, &m, &err), 0);
    const sb_tensor *logits = &m.tensors[m.ops[2].out[0].tensor];
    assert_int_equal(logits->dims[2].size, 1000);
    assert_int_equal(logits->dims[1].size, 16);
    sb_model_free(&m);

    /* malformed settings */
    sb_setting bad;
    assert_int_equal(sb_setting_parse("batch", &bad, &err), -1);
    assert_int_equal(err.code, SB_EXIT_INPUT);
    assert_int_equal(sb_setting_parse("=4", &bad, &err), -1);
    assert_int_equal(sb_setting_parse("batch=4x", &bad, &err), -1);
    assert_int_equal(sb_setting_parse("batch=", &bad, &err), -1);
    assert_int_equal(err.code, SB_EXIT_INPUT);

    /* an override that makes the model invalid is an input error */
    sb_setting zero;
    assert_int_equal(sb_setting_parse("batch=0", &zero, &err), 0);
    assert_int_equal(sb_model_load("alexnet", &zero, 1, &m, &err), -1);
    assert_int_equal(err.code, SB_EXIT_INPUT);
    assert_non_null(strstr(err.msg, "non-positive"));
}

/* ------------------------------------------------------------- errors -- */

/* act, mul (same shape, broadcast by name, same shape by position) and
 * expand: iteration spaces, operand maps, fn */
static void test_pointwise_ops(void **state)
{
    (void)state;
    const char *text = "input x[batch=4, ch=6, h=3, w=5]\n"
                       "input t[batch=4, seq=7, embed=8]\n"
                       "weight s[batch=4, ch=6]\n"
                       "weight cls[seq=1, embed=8]\n"
                       "weight y2[p=4, q=6, r=3, u=5]\n"
                       "g = act(x, fn=gelu_tanh)\n"
                       "se = mul(g, s)\n"
                       "pos = mul(x, y2)\n"
                       "full = mul(g, pos)\n"
                       "c = expand(cls, shape=[batch=4, seq=1, embed=8])\n"
                       "tt = concat(c, t, axis=seq)\n";
    sb_model m;
    parse_ok(text, NULL, 0, &m);
    check_model_invariants(&m);
    const sb_op *g = &m.ops[find_op(&m, "g")];
    assert_int_equal(g->kind, SB_OP_ACT);
    assert_int_equal(g->fn, SB_ACT_GELU_TANH);
    assert_string_equal(sb_act_fn_name(g->fn), "gelu_tanh");
    assert_string_equal(sb_op_kind_name(g->kind), "act");
    assert_int_equal(g->ndims, 4);
    assert_int_equal(g->nin, 1);
    const sb_op *se = &m.ops[find_op(&m, "se")];
    assert_int_equal(se->kind, SB_OP_MUL);
    assert_int_equal(se->ndims, 4);
    assert_int_equal(se->nin, 2);
    assert_int_equal(se->in[1].map[0], 0); /* s's batch: dim 0 */
    assert_int_equal(se->in[1].map[1], 1); /* s's ch: dim 1 */
    assert_int_equal(se->nosplit, 0);
    const sb_op *pos = &m.ops[find_op(&m, "pos")]; /* a's shape, other names: position */
    for (int j = 0; j < 4; j++)
        assert_int_equal(pos->in[1].map[j], j);
    const sb_op *c = &m.ops[find_op(&m, "c")];
    assert_int_equal(c->kind, SB_OP_EXPAND);
    assert_int_equal(c->ndims, 3);
    assert_string_equal(c->dims[0].name, "batch");
    assert_int_equal(c->dims[0].size, 4);
    assert_int_equal(c->in[0].map[0], 1); /* seq */
    assert_int_equal(c->in[0].map[1], 2); /* embed */
    const sb_tensor *ct = &m.tensors[c->out[0].tensor];
    assert_int_equal(ct->ndims, 3);
    assert_int_equal(ct->dims[2].size, 8);
    assert_int_equal(m.tensors[m.ops[find_op(&m, "tt")].out[0].tensor].dims[1].size, 8);
    sb_model_free(&m);

    /* every fn by name */
    for (int f = 0; f < SB_ACT_FN_COUNT; f++) {
        char t[256];
        snprintf(t, sizeof t, "input x[b=4, f=8]\ny = act(x, fn=%s)\n", sb_act_fn_name(f));
        parse_ok(t, NULL, 0, &m);
        assert_int_equal(m.ops[0].fn, f);
        sb_model_free(&m);
    }
    assert_int_equal(sb_act_fn_lookup("silu", 4), SB_ACT_SILU);
    assert_int_equal(sb_act_fn_lookup("gelu_tanh", 4), SB_ACT_GELU);
    assert_int_equal(sb_act_fn_lookup("swish", 5), -1);
}

/* softcap: x's iteration space, cap from an expression; the errors */
static void test_softcap_op(void **state)
{
    (void)state;
    sb_model m;
    parse_ok("param c = 30\ninput x[b=4, s=6, v=8]\ny = softcap(x, cap=c + 20)\n", NULL, 0, &m);
    check_model_invariants(&m);
    const sb_op *y = &m.ops[find_op(&m, "y")];
    assert_int_equal(y->kind, SB_OP_SOFTCAP);
    assert_string_equal(sb_op_kind_name(y->kind), "softcap");
    assert_true(y->cap == 50.0);
    assert_int_equal(y->ndims, 3);
    assert_int_equal(y->nin, 1);
    assert_int_equal(y->nosplit, 0);
    assert_int_equal(m.tensors[y->out[0].tensor].ndims, 3);
    for (int j = 0; j < 3; j++)
        assert_int_equal(y->in[0].map[j], j);
    sb_model_free(&m);
    expect_error("input x[b=4, f=8]\ny = softcap(x)\n", "t.model:2:5", "softcap: missing cap=N");
    expect_error("input x[b=4, f=8]\ny = softcap(x, cap=0)\n", "t.model:2:20",
                 "'cap' must be at least 1, got 0");
    expect_error("input x[b=4, f=8]\ny = softcap(x, cap=[1, 2])\n", "t.model:2:20",
                 "'cap' must be an integer");
    expect_error("input x[b=4, f=8]\ny = softcap(x, cap=2000000000)\n", "t.model:2:20",
                 "softcap: cap 2000000000 is over 1e9");
    expect_error("input x[b=4, f=8]\ny = softcap(x, cap=5, fn=tanh)\n", "t.model:2:23",
                 "unknown argument 'fn'");
    expect_error("input x[b=4, f=8]\ninput z[b=4, f=8]\ny = softcap(x, z, cap=5)\n",
                 "t.model:3:5", "softcap");
}

static void test_error_pointwise(void **state)
{
    (void)state;
    expect_error("input x[b=4, f=8]\n"
                 "y = act(x, fn=swish)\n",
                 "t.model:2:15", "act: unknown fn 'swish' (one of: relu, relu6, silu, gelu, gelu_tanh, sigmoid, tanh)");
    expect_error("input x[b=4, f=8]\n"
                 "y = act(x)\n",
                 "t.model:2:5", "act: missing fn=NAME");
    expect_error("input x[b=4, f=8]\n"
                 "y = act(x, fn=[relu])\n",
                 "t.model:2:15", "act: fn must be a function name");
    expect_error("input x[b=4, f=8]\n"
                 "y = act(x, fn=relu, pw=1)\n",
                 "t.model:2:21", "unknown argument 'pw'");
    expect_error("input x[b=4, ch=6, h=3]\n"
                 "input s[b=4, c=6]\n"
                 "y = mul(x, s)\n",
                 "t.model:3:12", "mul: dim 'c' of 's' is not a dim of 'x' [b, ch, h]");
    expect_error("input x[b=4, ch=6, h=3]\n"
                 "input s[b=4, ch=5]\n"
                 "y = mul(x, s)\n",
                 "t.model:3:12", "mul: dim 'ch' has size 5 in 's' but 6 in 'x'");
    expect_error("input x[b=4, ch=6, h=3]\n"
                 "input s[ch=6, b=4]\n"
                 "y = mul(x, s)\n",
                 "t.model:3:12", "mul: the dims of 's' must come in the order of 'x'");
    /* a's sizes, but 'b' names a's first dim in b's second place */
    expect_error("input x[b=4, f=4]\n"
                 "input s[f=4, b=4]\n"
                 "y = mul(x, s)\n",
                 "t.model:3:12", "mul: the dims of 's' must come in the order of 'x'");
    expect_error("input x[b=4, f=4]\n"
                 "input s[f=4, g=4]\n"
                 "y = mul(x, s)\n",
                 "t.model:3:12", "mul: dim 'g' of 's' is not a dim of 'x' [b, f]");
    expect_error("input x[b=4, f=8]\n"
                 "y = mul(x)\n",
                 "t.model:2:5", "mul takes 2 input tensors, got 1");
    expect_error("weight w[one=1, e=8]\n"
                 "y = expand(w, shape=[b=4, e=8])\n",
                 "t.model:2:12", "expand: dim 'one' of 'w' is not a dim of the shape [b, e]");
    expect_error("weight w[one=1, e=8]\n"
                 "y = expand(w, shape=[b=4, one=1, e=7])\n",
                 "t.model:2:12", "expand: dim 'e' has size 8 in 'w' but 7 in the shape");
    expect_error("weight w[one=1, e=8]\n"
                 "y = expand(w)\n",
                 "t.model:2:5", "expand: missing shape=[name=size, ...]");
    expect_error("weight w[one=1, e=8]\n"
                 "y = expand(w, shape=[b=0, one=1, e=8])\n",
                 "t.model:2:21", "expand: dim 'b' has non-positive size 0");
    expect_error("weight w[one=1, e=8]\n"
                 "y = expand(w, shape=[4, 1, 8])\n",
                 "t.model:2:21", "expand: each dim of the shape needs a name and a size");
}

static void test_error_unknown_op(void **state)
{
    (void)state;
    expect_error("input x[b=4, f=8]\n"
                 "y = frobnicate(x)\n",
                 PATH ":2:5", "unknown op or block 'frobnicate'");
}

static void test_error_arity(void **state)
{
    (void)state;
    /* add needs two inputs */
    expect_error("input x[b=4, f=8]\n"
                 "y = add(x)\n",
                 PATH ":2:5", "add takes 2 to 16 input tensors, got 1");
    /* conv takes one */
    expect_error("input x[b=4, c=4, h=8, w=8]\n"
                 "y = conv(x, x, out=4)\n",
                 PATH ":2:5", "conv takes 1 input tensor, got 2");
    /* einsum takes two */
    expect_error("input a[i=4, k=8]\n"
                 "y = einsum(a, \"i k, k j -> i j\")\n",
                 PATH ":2:5", "einsum takes 2 input tensors, got 1");
    /* a block called with too many arguments */
    expect_error("input x[b=4, f=8]\n"
                 "block twice(t)\n"
                 "  y = add(t, t)\n"
                 "  return y\n"
                 "end\n"
                 "z = twice(x, x)\n",
                 PATH ":6:5", "block 'twice' takes 1 arguments, got 2");
}

static void test_error_unknown_tensor(void **state)
{
    (void)state;
    /* "y = dense(" is 10 characters: z is at column 11 */
    expect_error("input x[b=4, f=8]\n"
                 "y = dense(z, units=4)\n",
                 PATH ":2:11", "unknown tensor 'z'");
    /* in a block's return */
    expect_error("input x[b=4, f=8]\n"
                 "block blk(t)\n"
                 "  y = add(t, t)\n"
                 "  return q\n"
                 "end\n"
                 "z = blk(x)\n",
                 PATH ":4:10", "unknown tensor 'q'");
}

static void test_error_einsum_mismatch(void **state)
{
    (void)state;
    /* the string starts at column 18: y = einsum(a, b, "... */
    expect_error("input a[i=4, k=8]\n"
                 "input b[k=6, j=4]\n"
                 "y = einsum(a, b, \"i k, k j -> i j\")\n",
                 PATH ":3:18", "einsum: dim 'k' is 8 in 'a' but 6 in 'b'");
    /* rank differs from the equation: operand 2 is at column 15 */
    expect_error("input a[i=4, k=8]\n"
                 "input b[k=8, j=4, l=2]\n"
                 "y = einsum(a, b, \"i k, k j -> i j\")\n",
                 PATH ":3:15", "operand 2 'b' has rank 3, the equation says 2");
}

static void test_error_concat_mismatch(void **state)
{
    (void)state;
    /* concatenating along c, but dim 0 differs (4 vs 6); b2 at column 15 */
    expect_error("input a[b=4, c=8]\n"
                 "input b2[b=6, c=8]\n"
                 "y = concat(a, b2, axis=c)\n",
                 PATH ":3:15", "concat: shape mismatch in dim 0");
    /* differing along the axis itself is fine */
    sb_model m;
    parse_ok("input a[b=4, c=8]\n"
             "input b2[b=4, c=12]\n"
             "y = concat(a, b2, axis=c)\n",
             NULL, 0, &m);
    assert_int_equal(m.ops[0].dims[1].size, 20);
    assert_true(m.ops[0].nosplit & (1u << 1));
    sb_model_free(&m);
}

static void test_error_split_not_divisible(void **state)
{
    (void)state;
    /* three names ask for three parts of 10; split is at column 14 */
    expect_error("input x[b=4, f=10]\n"
                 "y1, y2, y3 = split(x, axis=f)\n",
                 PATH ":2:14", "dim 'f' of size 10 is not divisible by 3");
}

/* a quoted model name may hold parts that start with a digit */
static void test_model_name_quoted(void **state)
{
    (void)state;
    sb_model m;
    parse_ok("model \"llama3-8b\"\ninput x[b=4, f=8]\ny = softmax(x)\n", NULL, 0, &m);
    assert_string_equal(m.name, "llama3-8b");
    sb_model_free(&m);
    expect_error("model \"llama 3\"\n", PATH ":1:7", "model name \"llama 3\": only letters");
    expect_error("model llama3-8b\n", PATH ":1:14", "expected a number, found '8b'");
}

/* split into given sizes: parts of those sizes; sizes that do not add up,
 * or given with n, are errors at the argument */
static void test_split_sizes(void **state)
{
    (void)state;
    sb_model m;
    parse_ok("input x[b=4, s=197, e=8]\n"
             "c, rest = split(x, sizes=[1, 196], axis=s)\n",
             NULL, 0, &m);
    assert_int_equal(m.ops[0].nout, 2);
    assert_int_equal(m.tensors[m.ops[0].out[0].tensor].dims[1].size, 1);
    assert_int_equal(m.tensors[m.ops[0].out[1].tensor].dims[1].size, 196);
    sb_model_free(&m);
    expect_error("input x[b=4, s=197]\n"
                 "c, rest = split(x, sizes=[1, 195], axis=s)\n",
                 PATH ":2:26", "split: sizes add up to 196, dim 's' has size 197");
    expect_error("input x[b=4, s=8]\n"
                 "c, rest = split(x, n=2, sizes=[4, 4], axis=s)\n",
                 PATH ":2:31", "split: give 'n' or 'sizes', not both");
    expect_error("input x[b=4, s=8]\n"
                 "c, rest = split(x, sizes=[8, 0], axis=s)\n",
                 PATH ":2:26", "'sizes' must be a list of positive integers");
}

static void test_error_nonpositive_size(void **state)
{
    (void)state;
    /* 5x5 kernel over a 4x4 input, no padding */
    expect_error("input x[b=4, c=3, h=4, w=4]\n"
                 "y = conv(x, out=8, kernel=5)\n",
                 PATH ":2:5", "conv: kernel 5x5 larger than padded input 4x4");
    /* a dilated kernel spans dilation * (kernel - 1) + 1: 3 taps 2 apart span 5 */
    expect_error("input x[b=4, c=3, h=6, w=4]\n"
                 "y = conv(x, out=8, kernel=3, dilation=[1, 2])\n",
                 PATH ":2:5",
                 "conv: kernel 3x3 larger than padded input 6x4 of 'x' (dilation 1x2: the kernel "
                 "spans 3x5)");
    /* groups must divide both channel counts; the error points at groups= */
    expect_error("input x[b=4, c=6, h=6, w=6]\n"
                 "y = conv(x, out=8, kernel=3, groups=3)\n",
                 PATH ":2:37",
                 "conv: groups=3 must divide the input channels (6 of 'x') and out=8");
    expect_error("input x[b=4, c=6, h=6, w=6]\n"
                 "y = conv(x, out=6, groups=0)\n",
                 PATH ":2:27", "'groups' must be at least 1, got 0");
    expect_error("input x[b=4, c=6, h=6, w=6]\n"
                 "y = conv(x, out=6, dilation=0)\n",
                 PATH ":2:29", "'dilation' out of range: 0");
    /* pooling window too */
    expect_error("input x[b=4, c=3, h=4, w=4]\n"
                 "y = pool(x, kernel=[2, 6])\n",
                 PATH ":2:5", "pool: window 2x6 larger than padded input");
    /* a zero-sized input dim; the tensor name is at column 7 */
    expect_error("input x[b=0]\n"
                 "y = softmax(x)\n",
                 PATH ":1:7", "dim 'b' has non-positive size 0");
    /* negative through an expression */
    expect_error("param n = 4\n"
                 "input x[b=n - 8, f=2]\n"
                 "y = softmax(x)\n",
                 PATH ":2:7", "non-positive size -4");
    /* zero units: the value is at column 20 */
    expect_error("input x[b=4, f=8]\n"
                 "y = dense(x, units=0)\n",
                 PATH ":2:20", "'units' must be at least 1, got 0");
}

static void test_error_unknown_parameter(void **state)
{
    (void)state;
    /* "input x[b=" is 10 characters */
    expect_error("input x[b=batch]\n"
                 "y = softmax(x)\n",
                 PATH ":1:11", "unknown parameter 'batch'");
    expect_error("param width = 8\n"
                 "input x[b=4, f=width]\n"
                 "y = dense(x, units=2 * widht)\n",
                 PATH ":3:24", "unknown parameter 'widht'");
}

static void test_error_unknown_setting(void **state)
{
    (void)state;
    sb_setting set = {.name = "nosuch", .value = 3};
    /* a --set has no line in the file: the message names the file */
    expect_error_set("param batch = 4\n"
                     "input x[b=batch, f=8]\n"
                     "y = softmax(x)\n",
                     &set, 1, PATH, "unknown parameter 'nosuch' in --set");
    sb_model m;
    sb_error err;
    assert_int_equal(parse_text("param batch = 4\ninput x[b=batch, f=8]\ny = softmax(x)\n", &set,
                                1, &m, &err),
                     -1);
    assert_non_null(strstr(err.msg, "batch")); /* lists the known ones */
    /* a known one is applied */
    sb_setting ok = {.name = "batch", .value = 16};
    parse_ok("param batch = 4\ninput x[b=batch, f=8]\ny = softmax(x)\n", &ok, 1, &m);
    assert_int_equal(m.ops[0].dims[0].size, 16);
    sb_model_free(&m);
}

static void test_error_block_cycle(void **state)
{
    (void)state;
    expect_error("input x[b=4, f=8]\n"
                 "block rec(t)\n"
                 "  y = rec(t)\n"
                 "  return y\n"
                 "end\n"
                 "z = rec(x)\n",
                 PATH ":3:7", "cycle: block 'rec' calls itself");
    /* through another block */
    expect_error("input x[b=4, f=8]\n"
                 "block ping(t)\n"
                 "  y = pong(t)\n"
                 "  return y\n"
                 "end\n"
                 "block pong(t)\n"
                 "  y = ping(t)\n"
                 "  return y\n"
                 "end\n"
                 "z = ping(x)\n",
                 PATH ":7:7", "cycle: block 'ping' calls itself");
}

static void test_error_missing_end(void **state)
{
    (void)state;
    /* reported on the header line, at its end (column 13 of "block foo(t)") */
    expect_error("input x[b=4, f=8]\n"
                 "block foo(t)\n"
                 "  y = add(t, t)\n"
                 "  return y\n"
                 "z = foo(x)\n",
                 PATH ":2:13", "missing 'end'");
    /* a repeat without end: the end of "repeat 2" is column 9 */
    expect_error("input x[b=4, f=8]\n"
                 "repeat 2\n"
                 "  x = add(x, x)\n",
                 PATH ":2:9", "missing 'end'");
    /* a stray end */
    expect_error("input x[b=4, f=8]\n"
                 "y = add(x, x)\n"
                 "end\n",
                 PATH ":3:1", "'end' without 'block' or 'repeat'");
}

static void test_error_lexical(void **state)
{
    (void)state;
    expect_error("input a[i=4, k=8]\n"
                 "input b[k=8, j=4]\n"
                 "y = einsum(a, b, \"i k, k j -> i j)\n",
                 PATH ":3:18", "unterminated string");
    expect_error("input x[b=4, f=8]\n"
                 "y = add(x, x) @\n",
                 PATH ":2:15", "unexpected character '@'");
    expect_error("input x[b=4, f=8]\n"
                 "y = add(x,\x01 x)\n",
                 PATH ":2:11", "unexpected byte 0x01");
    expect_error("input x[b=4, f=8]\n"
                 "y = add(x, x))\n",
                 PATH ":2:14", "unmatched ')'");
    expect_error("input x[b=4, f=8]\n"
                 "y = add(x, x\n",
                 PATH ":3:1", "unclosed");
    expect_error("input x[b=4, f=8]\n"
                 "y = dense(x, units=4a)\n",
                 PATH ":2:20", "expected a number");
    expect_error("param big = 99999999999999999999\n",
                 PATH ":1:13", "integer too large");
    /* the docs' bound exactly: 2^63 - 1 lexes, 2^63 does not */
    expect_error("param big = 9223372036854775808\n",
                 PATH ":1:13", "integer too large");
    sb_model m;
    parse_ok("param big = 9223372036854775807\ninput x[b=4, f=8]\ny = add(x, x)\n", NULL, 0,
             &m);
    assert_int_equal(m.nparams, 1);
    assert_true(m.params[0].value == INT64_MAX);
    sb_model_free(&m);
}

/* No `model` line: the name is the file's up to its first '.', checked as
 * a `model` line's name is: other characters than letters, digits, '-' and
 * '_' replaced by '_' (issue 39: an escape sequence, a newline, quotes and
 * ';' reached the terminal and the database). */
static void test_name_from_path(void **state)
{
    (void)state;
    static const struct {
        const char *path, *name;
    } cases[] = {
        {"/d/x\x1b[31mred\nline\"q;rm.model", "x__31mred_line_q_rm"},
        {"dir/my net#1.model", "my_net_1"},
        {"llama3-8b.model", "llama3-8b"},
        {"/d/.model", "model"},
        {"/d/\xc3\xa9t\xc3\xa9.model", "__t__"},
    };
    const char *text = "input x[b=4, f=8]\ny = add(x, x)\n";
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sb_model m;
        sb_error err = {0};
        if (sb_model_parse(text, strlen(text), cases[i].path, NULL, 0, &m, &err))
            fail_msg("%s: %s", cases[i].name, err.msg);
        assert_string_equal(m.name, cases[i].name);
        sb_model_free(&m);
    }
}

static void test_error_names_on_left(void **state)
{
    (void)state;
    expect_error("input x[b=4, f=8]\n"
                 "a, b = dense(x, units=4)\n",
                 PATH ":2:1", "dense gives 1 output, but 2 names are on the left");
    expect_error("input x[s=3, b=4, f=8]\n"
                 "p, q = unstack(x, axis=s)\n",
                 PATH ":2:1", "unstack gives 3 outputs, but 2 names are on the left");
    expect_error("input x[b=4, f=8]\n"
                 "s = split(x, n=2, axis=f)\n",
                 PATH ":2:1", "split gives 2 outputs, but 1 name is on the left");
    expect_error("input x[b=4, f=8]\n"
                 "block one(t)\n"
                 "  y = add(t, t)\n"
                 "  return y\n"
                 "end\n"
                 "a, b = one(x)\n",
                 PATH ":6:1", "block 'one' returns 1 tensor, but 2 names are on the left");
}

static void test_error_reshape_count(void **state)
{
    (void)state;
    expect_error("input x[b=4, f=8]\n"
                 "y = reshape(x, shape=[b=4, g=7])\n",
                 PATH ":2:5", "has 32 elements but the shape has 28");
    expect_error("input x[b=4, f=8]\n"
                 "y = reshape(x, shape=[b=-1, g=-1])\n",
                 PATH ":2:5", "at most one dim may be -1");
    expect_error("input x[b=4, f=9]\n"
                 "y = reshape(x, shape=[b=5, g=-1])\n",
                 PATH ":2:5", "do not divide into the shape");
    /* the inferred dim */
    sb_model m;
    parse_ok("input x[b=4, f=8]\n"
             "y = reshape(x, shape=[b=8, g=-1])\n",
             NULL, 0, &m);
    assert_int_equal(m.nops, 2);
    assert_int_equal(m.ops[0].kind, SB_OP_FLATTEN);
    assert_int_equal(m.ops[1].kind, SB_OP_UNFLATTEN);
    const sb_tensor *y = &m.tensors[m.ops[1].out[0].tensor];
    assert_int_equal(y->dims[0].size, 8);
    assert_int_equal(y->dims[1].size, 4);
    assert_int_equal(m.ops[0].out[0].map[0], SB_MAP_ALL);
    assert_int_equal(m.ops[1].in[0].map[0], SB_MAP_ALL);
    sb_model_free(&m);
}

static void test_error_dim_twice(void **state)
{
    (void)state;
    expect_error("input x[b=4, b=8]\n"
                 "y = softmax(x)\n",
                 PATH ":1:7", "dim name 'b' used twice");
    /* an iteration space that would name a dim twice */
    expect_error("input x[b=4, f=8]\n"
                 "y = dense(x, units=4, dim=b)\n",
                 PATH ":2:5", "dim name 'b' appears twice in its iteration space");
}

/* rmsnorm, rope and the causal softmax of a Llama block: attributes,
 * the weight, the unsplit head dim. */
static void test_llama_ops(void **state)
{
    (void)state;
    sb_model m;
    parse_ok("input x[batch=2, kvh=2, seq=8, dk=4]\n"
             "h = rmsnorm(x, axis=dk)\n"
             "q = rope(h, seq=seq, dim=dk, theta=500000)\n"
             "k = rope(x, seq=seq)\n"
             "l = einsum(\"b h s d, b h m d -> b h s m\", q, k)\n"
             "w = softmax(l, axis=m, causal=s)\n"
             "v = softmax(l, axis=m)\n",
             NULL, 0, &m);
    const sb_op *h = &m.ops[find_op(&m, "h")], *q = &m.ops[find_op(&m, "q")];
    const sb_op *k = &m.ops[find_op(&m, "k")], *w = &m.ops[find_op(&m, "w")];
    const sb_op *v = &m.ops[find_op(&m, "v")];
    assert_int_equal(h->kind, SB_OP_RMSNORM);
    assert_int_equal(h->axis, 3);
    assert_int_equal(h->nweights, 1);
    assert_string_equal(h->weights[0].suffix, ".gamma");
    assert_int_equal(h->weights[0].size[0], 4);
    assert_true(h->weights[0].init_scale == 0.0 && h->weights[0].init_offset == 1.0);
    assert_int_equal(h->stat_dims, 1u << 3);
    assert_int_equal(q->kind, SB_OP_ROPE);
    assert_int_equal(q->pos_axis, 2);
    assert_int_equal(q->axis, 3);
    assert_true(q->theta == 500000.0);
    assert_int_equal(q->nosplit, 1u << 3);
    assert_int_equal(q->nweights, 0);
    /* defaults: the head dim is the last, theta 10000 */
    assert_int_equal(k->axis, 3);
    assert_true(k->theta == 10000.0);
    assert_int_equal(w->kind, SB_OP_SOFTMAX);
    assert_int_equal(w->axis, 3);
    assert_int_equal(w->causal, 2);
    assert_int_equal(v->causal, -1);
    assert_int_equal(h->causal, -1);
    sb_model_free(&m);
}

static void test_error_llama_ops(void **state)
{
    (void)state;
    expect_error("input x[b=2, s=8, d=5]\n"
                 "y = rope(x, seq=s, dim=d)\n",
                 PATH ":2:24", "head dim 'd' of 'x' has odd size 5");
    expect_error("input x[b=2, s=8, d=4]\n"
                 "y = rope(x, seq=t, dim=d)\n",
                 PATH ":2:17", "tensor 'x' has no dim named 't'");
    expect_error("input x[b=2, s=8, d=4]\n"
                 "y = rope(x, seq=s, dim=e)\n",
                 PATH ":2:24", "tensor 'x' has no dim named 'e'");
    expect_error("input x[b=2, s=8, d=4]\n"
                 "y = rope(x, dim=d)\n",
                 PATH ":2:5", "rope needs seq=DIM");
    expect_error("input x[b=2, s=8, d=4]\n"
                 "y = rope(x, seq=d, dim=d)\n",
                 PATH ":2:24", "seq and dim are the same dim 'd'");
    expect_error("input x[b=2, s=8, d=4]\n"
                 "y = rope(x, seq=s, theta=1)\n",
                 PATH ":2:26", "'theta' must be at least 2");
    expect_error("input x[b=2, s=8, d=4]\n"
                 "y = rope(x, seq=s, base=3)\n",
                 PATH ":2:20", "unknown argument 'base'");
    expect_error("input x[b=2, s=8, d=4]\n"
                 "y = rmsnorm(x, axis=e)\n",
                 PATH ":2:21", "tensor 'x' has no dim named 'e'");
    expect_error("input x[b=2, s=8, d=4]\n"
                 "y = rmsnorm(x, axis=d, eps=1)\n",
                 PATH ":2:24", "unknown argument 'eps'");
    expect_error("input x[b=2, s=8, m=8]\n"
                 "y = softmax(x, axis=m, causal=q)\n",
                 PATH ":2:31", "tensor 'x' has no dim named 'q'");
    expect_error("input x[b=2, s=8, m=8]\n"
                 "y = softmax(x, axis=m, causal=m)\n",
                 PATH ":2:31", "causal=m is the softmax axis itself");
    expect_error("input x[b=2, c=8]\n"
                 "y = softmax_xent(x, causal=b)\n",
                 PATH ":2:21", "unknown argument 'causal'");
}

static void test_error_misc(void **state)
{
    (void)state;
    expect_error("param a = 1\nparam a = 2\n", PATH ":2:7", "parameter 'a' defined twice");
    /* issue 39: every repeated key names its first line */
    expect_error("param a = 1\nparam b = 1\n\nparam a = 2\n", PATH ":4:7",
                 "parameter 'a' defined twice (first on line 1)");
    expect_error("model one\nparam a = 1\nmodel two\ninput x[b=4]\n", PATH ":3:1",
                 "'model' given twice (first on line 1)");
    expect_error("cutoff 2\n# c\ncutoff 3\ninput x[b=4]\n", PATH ":3:1",
                 "cutoff given twice (first on line 1)");
    expect_error("block f(x)\nreturn x\nend\nblock f(y)\nreturn y\nend\n", PATH ":4:7",
                 "block 'f' defined twice (first on line 1)");
    expect_error("input x[b=4, f=8]\n"
                 "y = dense(x, units=4, color=3)\n",
                 PATH ":2:23", "dense: unknown argument 'color'");
    expect_error("input x[b=4, f=8]\n"
                 "y = dense(x, units=4, units=5)\n",
                 PATH ":2:23", "argument 'units' given twice");
    expect_error("param a = 7 / 2\n", PATH ":1:13", "7 is not divisible by 2");
    expect_error("param a = 7 / (2 - 2)\n", PATH ":1:13", "division by zero");
    expect_error("param a = 4611686018427387904 * 4\n", PATH ":1:31", "integer overflow");
    expect_error("input x[b=4, f=8]\n", PATH, "the model has no ops");
    expect_error("input x[b=4, f=8]\n"
                 "return x\n",
                 PATH ":2:1", "'return' outside a block");
    expect_error("input x[b=4, f=8]\n"
                 "y = transpose(x, perm=[0, 0])\n",
                 PATH ":2:23", "perm must be a permutation");
}

/* Inputs that crashed the parser when these tests were written: each runs
 * in a forked child. */
static void test_error_int64_min_division(void **state)
{
    (void)state;
    /* -9223372036854775799 - 9 is INT64_MIN; dividing it by -1 overflows.
     * parse_term checks `v % r` (itself INT64_MIN % -1: SIGFPE on x86-64)
     * before its overflow check. */
    const char *text = "param a = (-9223372036854775799 - 9) / -1\n"
                       "input x[b=4, f=8]\n"
                       "y = softmax(x)\n";
    expect_child_clean_error("INT64_MIN / -1 in a param expression", text, strlen(text),
                             "integer overflow");
    /* the % form is already guarded */
    const char *mod = "param a = (-9223372036854775799 - 9) % -1\n"
                      "input x[b=4, f=8]\n"
                      "y = softmax(x)\n";
    expect_child_clean_error("INT64_MIN % -1 in a param expression", mod, strlen(mod),
                             "integer overflow");
}

static void test_error_deep_nesting(void **state)
{
    (void)state;
    /* 200000 unary minus signs (200 KB of text, far under the 64 MiB file
     * limit): the recursive-descent expression parser must refuse, not
     * overflow the stack. */
    enum { N = 200000 };
    static char t[N * 2 + 128]; /* static: nothing leaks when the check fails */
    size_t len = (size_t)sprintf(t, "param a = ");
    memset(t + len, '-', N);
    len += N;
    len += (size_t)sprintf(t + len, "1\ninput x[b=4, f=8]\ny = softmax(x)\n");
    expect_child_clean_error("200000 nested unary minus signs", t, len, NULL);
    /* and as many parentheses */
    len = (size_t)sprintf(t, "param a = ");
    memset(t + len, '(', N / 2);
    len += N / 2;
    t[len++] = '1';
    memset(t + len, ')', N / 2);
    len += N / 2;
    len += (size_t)sprintf(t + len, "\ninput x[b=4, f=8]\ny = softmax(x)\n");
    expect_child_clean_error("100000 nested parentheses", t, len, NULL);
}

/* ------------------------------------------------- blocks and repeat -- */

/* moe_gate: logits (group, seq, expert) -> combine, dispatch (group, seq,
 * expert, cap); only the group dim may split; k in sb_op.topk. */
static void test_moe_gate(void **state)
{
    (void)state;
    sb_model m;
    parse_ok("input x[batch=2, seq=4, embed=8]\n"
             "weight wr[embed=8, expert=4]\n"
             "l = einsum(\"batch seq embed, embed expert -> batch seq expert\", x, wr)\n"
             "c, d = moe_gate(l, axis=expert, k=3, capacity=5, dim=slot)\n",
             NULL, 0, &m);
    check_model_invariants(&m);
    const sb_op *g = &m.ops[find_op(&m, "c")];
    assert_int_equal(g->kind, SB_OP_MOE_GATE);
    assert_string_equal(sb_op_kind_name(g->kind), "moe_gate");
    assert_int_equal(g->topk, 3);
    assert_int_equal(g->ndims, 4);
    const char *names[] = {"batch", "seq", "expert", "slot"};
    const int64_t sizes[] = {2, 4, 4, 5};
    for (int i = 0; i < 4; i++) {
        assert_string_equal(g->dims[i].name, names[i]);
        assert_int_equal(g->dims[i].size, sizes[i]);
    }
    assert_int_equal(g->nosplit, 0xeu); /* seq, expert, cap */
    assert_int_equal(g->stat_dims, 1u << 2);
    assert_int_equal(g->nin, 1);
    assert_int_equal(g->nout, 2);
    assert_int_equal(g->nweights, 0);
    for (int k = 0; k < 2; k++) {
        const sb_tensor *t = &m.tensors[g->out[k].tensor];
        assert_int_equal(t->ndims, 4);
        assert_int_equal(t->dims[3].size, 5);
        assert_string_equal(t->dims[3].name, "slot");
        assert_int_equal(t->producer_slot, k);
    }
    assert_string_equal(m.tensors[g->out[1].tensor].name, "d");
    sb_model_free(&m);
    /* defaults: the last axis, k = 2, dim cap */
    parse_ok("input l[b=2, s=4, e=3]\nc, d = moe_gate(l, capacity=1)\n", NULL, 0, &m);
    assert_int_equal(m.ops[0].topk, 2);
    assert_string_equal(m.ops[0].dims[3].name, "cap");
    assert_true(m.ops[0].moe_aux == 0.0);
    sb_model_free(&m);
    /* the load-balancing loss's weight, in thousandths */
    parse_ok("input l[b=2, s=4, e=3]\nc, d = moe_gate(l, capacity=1, aux=25)\n", NULL, 0, &m);
    assert_true(m.ops[0].moe_aux == 0.025);
    sb_model_free(&m);
}

static void test_error_moe_gate(void **state)
{
    (void)state;
    expect_error("input x[b=4, e=4]\nc, d = moe_gate(x, capacity=2)\n", PATH ":2:17",
                 "moe_gate needs logits (group, seq, expert) of rank 3, 'x' has rank 2");
    expect_error("input x[b=2, s=4, e=4]\nc, d = moe_gate(x, axis=s, capacity=2)\n", PATH ":2:25",
                 "the expert axis must be the last dim of 'x' (got dim 1, 's')");
    expect_error("input x[b=2, s=4, e=4]\nc, d = moe_gate(x, k=5, capacity=2)\n", PATH ":2:22",
                 "k = 5 is more than the 4 experts of 'x'");
    expect_error("input x[b=2, s=4, e=4]\nc, d = moe_gate(x, k=0, capacity=2)\n", PATH ":2:22",
                 "'k' must be at least 1, got 0");
    expect_error("input x[b=2, s=4, e=4]\nc, d = moe_gate(x)\n", PATH ":2:8",
                 "moe_gate: missing 'capacity'");
    expect_error("input x[b=2, s=4, e=4]\nc, d = moe_gate(x, capacity=0)\n", PATH ":2:29",
                 "'capacity' must be at least 1, got 0");
    expect_error("input x[b=2, s=4, e=4]\nc = moe_gate(x, capacity=2)\n", PATH ":2:5",
                 "moe_gate gives 2 outputs (combine, dispatch), but 1 name is on the left");
    expect_error("input x[b=2, s=4, e=4]\nc, d = moe_gate(x, capacity=2, cap=3)\n", PATH ":2:32",
                 "moe_gate: unknown argument 'cap' (expected one of: axis k capacity dim aux)");
    expect_error("input x[b=2, s=4, e=4]\nc, d = moe_gate(x, capacity=2, aux=-1)\n", PATH ":2:36",
                 "'aux' must be at least 0, got -1");
    expect_error("input x[b=2, s=4, e=4]\nc, d = moe_gate(x, capacity=2, aux=2000000)\n",
                 PATH ":2:36", "aux is the loss weight in thousandths, at most 1000000, got 2000000");
    expect_error("input x[b=2, s=4, e=4]\nc, d = moe_gate(x, capacity=2, dim=e)\n", PATH ":2:36",
                 "dim name 'e' appears twice");
    expect_error("input x[b=2, s=4, e=4]\ny = add(x, x)\nc, d = moe_gate(x, y, capacity=2)\n",
                 PATH ":3:8", "moe_gate takes 1 input tensor, got 2");
}

static void test_blocks_and_repeat(void **state)
{
    (void)state;
    const char *text = "model rep\n"
                       "param n = 3\n"
                       "param width = 16\n"
                       "cutoff 1\n"
                       "input x[b=8, f=width]\n"
                       "block layer(t, u=width)\n"
                       "  h = dense(t, units=u, dim=f)\n"
                       "  y = add(h, t, pw=1)\n"
                       "  return y\n"
                       "end\n"
                       "block two(t)\n"
                       "  a = layer(t)\n"
                       "  b = layer(a, u=16)\n"
                       "  return b\n"
                       "end\n"
                       "repeat n\n"
                       "  x = layer(x)\n"
                       "end\n"
                       "z = two(x)\n"
                       "loss = softmax_xent(z)\n";
    sb_model m;
    parse_ok(text, NULL, 0, &m);
    assert_string_equal(m.name, "rep");
    assert_int_equal(m.cutoff, 1);
    /* 3 repeats of 2 ops, a block of 2 layers, the loss */
    assert_int_equal(m.nops, 3 * 2 + 2 * 2 + 1);
    check_model_invariants(&m);
    /* ops alternate dense, add; each dense reads the previous add's output
     * (the first reads the input), each add reads its dense and the dense's
     * input */
    for (int i = 0; i < 10; i++) {
        const sb_op *op = &m.ops[i];
        if (i % 2 == 0) {
            assert_int_equal(op->kind, SB_OP_DENSE);
            const sb_tensor *t = &m.tensors[op->in[0].tensor];
            assert_int_equal(t->producer, i - 1);
        } else {
            assert_int_equal(op->kind, SB_OP_ELEMENTWISE);
            assert_int_equal(op->nin, 2);
            assert_int_equal(op->pw, 1);
            assert_int_equal(m.tensors[op->in[0].tensor].producer, i - 1);
            assert_int_equal(op->in[1].tensor, m.ops[i - 1].in[0].tensor);
        }
        assert_non_null(strchr(op->name, '/')); /* named inside a block */
    }
    assert_int_equal(find_op(&m, "loss"), 10);
    assert_int_equal(m.ops[10].kind, SB_OP_SOFTMAX_XENT);
    assert_int_equal(m.tensors[m.ops[10].in[0].tensor].producer, 9);
    /* the nested block's ops carry both prefixes */
    int slashes = 0;
    for (const char *s = m.ops[7].name; *s; s++)
        slashes += *s == '/';
    assert_int_equal(slashes, 2);
    sb_model_free(&m);

    /* --set the repeat count */
    sb_setting set = {.name = "n", .value = 7};
    parse_ok(text, &set, 1, &m);
    assert_int_equal(m.nops, 7 * 2 + 2 * 2 + 1);
    check_model_invariants(&m);
    sb_model_free(&m);

    /* repeat 0 expands to nothing */
    set.value = 0;
    parse_ok(text, &set, 1, &m);
    assert_int_equal(m.nops, 2 * 2 + 1);
    sb_model_free(&m);

    /* a list argument: kernel=[a, b] through a block */
    parse_ok("input x[b=4, c=4, h=8, w=8]\n"
             "block basic(x, out, kernel=1, pad=0)\n"
             "  c = conv(x, out=out, kernel=kernel, pad=pad)\n"
             "  y = batchnorm(c)\n"
             "  return y\n"
             "end\n"
             "a = basic(x, out=8, kernel=[1, 3], pad=[0, 1])\n"
             "b = basic(a, out=8)\n",
             NULL, 0, &m);
    assert_int_equal(m.nops, 4);
    assert_int_equal(m.ops[0].kernel[0], 1);
    assert_int_equal(m.ops[0].kernel[1], 3);
    assert_int_equal(m.ops[0].pad[1], 1);
    const sb_tensor *a = &m.tensors[m.ops[0].out[0].tensor];
    assert_int_equal(a->dims[2].size, 8);
    assert_int_equal(a->dims[3].size, 8);
    check_model_invariants(&m);
    sb_model_free(&m);
}

static void test_multi_output(void **state)
{
    (void)state;
    sb_model m;
    parse_ok("input x[b=4, f=8]\n"
             "a, b = split(x, axis=f)\n"
             "y = add(a, b)\n"
             "s = stack(a, b, dim=two)\n"
             "p, q = unstack(s, axis=0)\n"
             "z = add(p, q)\n",
             NULL, 0, &m);
    check_model_invariants(&m);
    assert_int_equal(m.nops, 5);
    const sb_op *split = &m.ops[0];
    assert_int_equal(split->kind, SB_OP_SPLIT);
    assert_int_equal(split->nout, 2);
    assert_true(split->nosplit & (1u << 1));
    for (int k = 0; k < 2; k++) {
        const sb_tensor *t = &m.tensors[split->out[k].tensor];
        assert_int_equal(t->ndims, 2);
        assert_int_equal(t->dims[0].size, 4);
        assert_int_equal(t->dims[1].size, 4);
        assert_int_equal(t->producer, 0);
        assert_int_equal(t->producer_slot, k);
    }
    const sb_op *stack = &m.ops[2];
    assert_int_equal(stack->kind, SB_OP_STACK);
    assert_int_equal(stack->nin, 2);
    const sb_tensor *st = &m.tensors[stack->out[0].tensor];
    assert_int_equal(st->ndims, 3);
    assert_int_equal(st->dims[0].size, 2);
    assert_string_equal(st->dims[0].name, "two");
    assert_true(stack->nosplit & 1u);
    const sb_op *un = &m.ops[3];
    assert_int_equal(un->kind, SB_OP_UNSTACK);
    assert_int_equal(un->nout, 2);
    for (int k = 0; k < 2; k++) {
        const sb_tensor *t = &m.tensors[un->out[k].tensor];
        assert_int_equal(t->ndims, 2);
        assert_int_equal(t->producer_slot, k);
        /* unstacked dims follow the op's dims 1 and 2 */
        assert_int_equal(un->out[k].map[0], 1);
        assert_int_equal(un->out[k].map[1], 2);
    }
    /* edges: split->add (slots 0, 1), split->stack (0, 1), stack->unstack,
     * unstack->add (0, 1) */
    sb_edge *e = NULL;
    int ne = 0;
    sb_error err;
    assert_int_equal(sb_model_edges(&m, &e, &ne, &err), 0);
    assert_int_equal(ne, 7);
    int seen_slot1 = 0;
    for (int k = 0; k < ne; k++)
        if (e[k].src == 0 && e[k].dst == 1) {
            assert_int_equal(e[k].src_slot, e[k].dst_slot);
            seen_slot1 += e[k].src_slot == 1;
        }
    assert_int_equal(seen_slot1, 1);
    free(e);
    sb_model_free(&m);

    /* the same tensor twice into one op: two edges */
    parse_ok("input x[b=4, f=8]\n"
             "h = softmax(x)\n"
             "y = add(h, h)\n"
             "s = stack(h, h)\n",
             NULL, 0, &m);
    assert_int_equal(sb_model_edges(&m, &e, &ne, &err), 0);
    assert_int_equal(ne, 4);
    for (int k = 0; k < ne; k++)
        assert_int_equal(e[k].src, 0);
    assert_int_equal(e[0].dst_slot, 0);
    assert_int_equal(e[1].dst_slot, 1);
    free(e);
    sb_model_free(&m);
}

/* ------------------------------------------------------ mutation loop -- */

static uint64_t g_rng;

static uint64_t rnd(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}

static size_t rndn(size_t n) { return n ? (size_t)(rnd() % n) : 0; }

static void test_mutation_smoke(void **state)
{
    (void)state;
    const char *names[] = {"alexnet", "rnnlm", "inception3", "resnet101", "transformer"};
    char *texts[5];
    size_t lens[5];
    int nt = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char path[1024];
        shipped_path(path, sizeof path, names[i]);
        if (!file_exists(path))
            fail_msg("shipped model %s is missing", path);
        texts[nt] = slurp(path, &lens[nt]);
        nt++;
    }
    assert_int_equal(nt, 5);
    static const char alphabet[] = "=,()[]+-*/%:;#\"\\\n\t 0123456789abcxyz_@-1";
    static const char *const snippets[] = {
        "block b(x)\n", "end\n", "repeat 3\n", "return x\n", "(", ")", "[", "]",
        "=", ",", "\"", "\n", "-1", "0", "99999999999", "axis=", "kernel=[1,",
        "concat(", "reshape(", "x = split(", "a, b = ", "\\\n", ";", "#",
    };
    g_rng = 0x9E3779B97F4A7C15ULL;
    int ok = 0, bad = 0;
    for (int it = 0; it < 5000; it++) {
        /* shorter texts more often: the loop must stay fast under ASan */
        int which = (int)rndn((size_t)nt);
        if (lens[which] > 4000 && rndn(4) != 0)
            which = (int)rndn(2);
        const char *src = texts[which];
        size_t slen = lens[which];
        size_t cap = slen + 256;
        char *buf = malloc(cap);
        assert_non_null(buf);
        size_t len = slen;
        memcpy(buf, src, slen);
        int nmut = 1 + (int)rndn(3);
        for (int k = 0; k < nmut; k++) {
            switch (rndn(7)) {
            case 0: /* any byte */
                if (len)
                    buf[rndn(len)] = (char)rndn(256);
                break;
            case 1: /* a syntax character */
                for (int j = 0, n = 1 + (int)rndn(4); j < n && len; j++)
                    buf[rndn(len)] = alphabet[rndn(sizeof alphabet - 1)];
                break;
            case 2: /* truncate */
                len = rndn(len + 1);
                break;
            case 3: { /* delete a range */
                size_t at = rndn(len + 1), n = rndn(64);
                if (at + n > len)
                    n = len - at;
                memmove(buf + at, buf + at + n, len - at - n);
                len -= n;
                break;
            }
            case 4: { /* insert a snippet */
                const char *s = snippets[rndn(sizeof snippets / sizeof snippets[0])];
                size_t n = strlen(s), at = rndn(len + 1);
                if (len + n > cap)
                    break;
                memmove(buf + at + n, buf + at, len - at);
                memcpy(buf + at, s, n);
                len += n;
                break;
            }
            case 5: { /* duplicate a range */
                size_t at = rndn(len + 1), n = rndn(48);
                if (at + n > len)
                    n = len - at;
                if (len + n > cap)
                    break;
                size_t to = rndn(len + 1);
                char tmp[64];
                memcpy(tmp, buf + at, n);
                memmove(buf + to + n, buf + to, len - to);
                memcpy(buf + to, tmp, n);
                len += n;
                break;
            }
            default: /* a digit changed: sizes and counts */
                for (size_t j = 0, tries = 0; tries < 64 && len; tries++) {
                    j = rndn(len);
                    if (buf[j] >= '0' && buf[j] <= '9') {
                        buf[j] = (char)('0' + rndn(10));
                        break;
                    }
                }
                break;
            }
        }
        if (it % 10 == 9) { /* pure garbage now and then */
            len = rndn(200);
            for (size_t j = 0; j < len; j++)
                buf[j] = rndn(8) ? alphabet[rndn(sizeof alphabet - 1)] : (char)rndn(256);
        }
        /* exactly len bytes, so any read past the end shows under ASan */
        char *exact = malloc(len ? len : 1);
        assert_non_null(exact);
        memcpy(exact, buf, len);
        free(buf);
        sb_model m;
        sb_error err = {0};
        int rc = sb_model_parse(exact, len, "mut.model", NULL, 0, &m, &err);
        if (rc == 0) {
            ok++;
            check_model_invariants(&m);
            sb_edge *e = NULL;
            int ne = 0;
            assert_int_equal(sb_model_edges(&m, &e, &ne, &err), 0);
            free(e);
            sb_model_free(&m);
        } else {
            bad++;
            if (rc != -1 || err.code != SB_EXIT_INPUT)
                fail_msg("iteration %d: rc=%d code=%d msg=%s", it, rc, err.code, err.msg);
            if (strncmp(err.msg, "mut.model", 9) != 0)
                fail_msg("iteration %d: message does not name the file: %s", it, err.msg);
        }
        free(exact);
    }
    print_message("mutation smoke: %d parsed, %d rejected cleanly\n", ok, bad);
    assert_int_equal(ok + bad, 5000);
    assert_true(bad > 0);
    for (int i = 0; i < nt; i++)
        free(texts[i]);
}

/* ------------------------------------------------ rules, limits, files -- */

/* Every op kind has its builder's rule: a name (the one sb_op_kind_name
 * gives) and a builder; a kind added without one fails here (or does not
 * build: op_rules[] is checked against SB_OP_KIND_COUNT). */
static void test_op_rules_complete(void **state)
{
    (void)state;
    for (int k = 0; k < SB_OP_KIND_COUNT; k++) {
        const op_rule *r = op_rules[k];
        if (!r || !r->build || !r->names[0] || !r->names[0][0])
            fail_msg("op kind %d has no rule, builder or name", k);
        assert_string_equal(sb_op_kind_name((sb_op_kind)k), r->names[0]);
    }
    assert_string_equal(sb_op_kind_name(SB_OP_KIND_COUNT), "?");
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* `repeat N` of `h = dense(h, ...)`: N + 1 ops sharing the name h. */
static char *repeat_text(int n)
{
    char *text = malloc(256);
    assert_non_null(text);
    snprintf(text, 256,
             "input x[batch=4, f=16]\n"
             "h = dense(x, units=16)\n"
             "repeat %d\n"
             "  h = dense(h, units=16)\n"
             "end\n", n);
    return text;
}

/* 20,000 ops of one name take one step each to name (not one per earlier
 * op); the names are h, h.1, h.2, ... in order. The bound is generous
 * (Sanitize build, shared machine); it took minutes before. */
static void test_many_ops_one_name(void **state)
{
    (void)state;
    char *text = repeat_text(19999);
    sb_model m;
    double t0 = now_s();
    parse_ok(text, NULL, 0, &m);
    double dt = now_s() - t0;
    assert_int_equal(m.nops, 20000);
    assert_string_equal(m.ops[0].name, "h");
    assert_string_equal(m.ops[1].name, "h.1");
    assert_string_equal(m.ops[19999].name, "h.19999");
    for (int i = 1; i < m.nops; i++) {
        char want[32];
        snprintf(want, sizeof want, "h.%d", i);
        if (strcmp(m.ops[i].name, want) != 0)
            fail_msg("op %d is named %s, expected %s", i, m.ops[i].name, want);
    }
    if (dt > 10.0)
        fail_msg("20,000 ops of one name took %.1f s to parse (bound 10 s)", dt);
    sb_model_free(&m);
    free(text);
    /* names that a block call or an earlier tensor took are skipped */
    parse_ok("input h[b=2, f=4]\n"
             "h = dense(h, units=4)\n"
             "h = dense(h, units=4)\n"
             "block blk(x)\n  h = dense(x, units=4)\n  return h\nend\n"
             "h = blk(h)\n"
             "h = dense(h, units=4)\n", NULL, 0, &m);
    assert_int_equal(m.nops, 4);
    assert_string_equal(m.ops[0].name, "h.1");
    assert_string_equal(m.ops[1].name, "h.2");
    assert_string_equal(m.ops[2].name, "h.3/h");
    assert_string_equal(m.ops[3].name, "h.4");
    sb_model_free(&m);
}

/* 20,000 params, 20,000 blocks and a call of each: params and blocks are
 * found by name in one step (this took about 30 s under Sanitize when each
 * lookup went through the whole list). */
static void test_many_blocks_and_params(void **state)
{
    (void)state;
    const int n = 20000;
    size_t cap = (size_t)n * 96 + 256, used = 0;
    char *text = malloc(cap);
    assert_non_null(text);
    for (int i = 0; i < n; i++)
        used += (size_t)snprintf(text + used, cap - used, "param p%d = %d\n", i, i + 1);
    for (int i = 0; i < n; i++)
        used += (size_t)snprintf(text + used, cap - used,
                                 "block b%d(x)\n  y = add(x, x)\n  return y\nend\n", i);
    used += (size_t)snprintf(text + used, cap - used, "input x[a=p%d]\nh = x\n", n - 1);
    for (int i = 0; i < n; i++)
        used += (size_t)snprintf(text + used, cap - used, "h = b%d(h)\n", n - 1 - i);
    assert_true(used < cap);
    sb_model m;
    double t0 = now_s();
    parse_ok(text, NULL, 0, &m);
    double dt = now_s() - t0;
    assert_int_equal(m.nparams, n);
    assert_int_equal(m.nops, n);
    assert_int_equal(m.tensors[0].dims[0].size, n);
    assert_string_equal(m.ops[0].name, "h/y");
    assert_string_equal(m.ops[n - 1].name, "h.19999/y");
    if (dt > 10.0)
        fail_msg("20,000 params, blocks and calls took %.1f s to parse (bound 10 s)", dt);
    sb_model_free(&m);
    free(text);
}

/* One op over the 100,000-op limit: refused, quickly, saying the limit. */
static void test_op_limit(void **state)
{
    (void)state;
    char *text = repeat_text(100000);
    double t0 = now_s();
    expect_error(text, "t.model:4:7", "too many ops (at most 100000)");
    double dt = now_s() - t0;
    if (dt > 30.0)
        fail_msg("a file one op over the limit took %.1f s to refuse (bound 30 s)", dt);
    free(text);
}

/* Repeats nested over statements that make no op stop at 10,000,000
 * statements run, instead of running 10^10 rounds. */
static void test_step_limit(void **state)
{
    (void)state;
    double t0 = now_s();
    expect_error("input x[a=2]\n"
                 "repeat 100000\n"
                 "  repeat 100000\n"
                 "    z = x\n"
                 "  end\n"
                 "end\n"
                 "y = add(x, x)\n",
                 "t.model:3:3", "more than 10000000 statements run");
    expect_error("input x[a=2]\nrepeat 100000\n  repeat 100000\n  end\nend\ny = add(x, x)\n",
                 "t.model:3:3", "statements run");
    double dt = now_s() - t0;
    if (dt > 30.0)
        fail_msg("nested repeats took %.1f s to refuse (bound 30 s)", dt);
}

static void expect_load_error(const char *path, const char *phrase)
{
    sb_model m;
    sb_error err;
    memset(&err, 0, sizeof err);
    double t0 = now_s();
    int rc = sb_model_load(path, NULL, 0, &m, &err);
    if (rc == 0) {
        sb_model_free(&m);
        fail_msg("%s loaded as a model", path);
    }
    assert_int_equal(err.code, SB_EXIT_INPUT);
    if (!strstr(err.msg, phrase) || !strstr(err.msg, path))
        fail_msg("expected '%s' and the path in the message, got: %s", phrase, err.msg);
    if (now_s() - t0 > 5.0)
        fail_msg("%s took %.1f s to refuse", path, now_s() - t0);
}

/* A directory, a FIFO (nothing writes to it: opening it would block) or a
 * device is refused by name, without reading it. */
static void test_load_not_a_file(void **state)
{
    (void)state;
    char dir[] = "/tmp/sb_parse_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char sub[256], fifo[256];
    snprintf(sub, sizeof sub, "%s/net.model", dir);
    snprintf(fifo, sizeof fifo, "%s/fifo.model", dir);
    assert_int_equal(mkdir(sub, 0700), 0);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    expect_load_error(dir, "is a directory");
    expect_load_error(sub, "is a directory");
    expect_load_error(fifo, "not a regular file");
    expect_load_error("/dev/zero", "not a regular file");
    /* a directory named without a '/' is not looked up as a shipped model */
    char cwd[1024];
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir(dir), 0);
    expect_load_error("net.model", "is a directory");
    assert_int_equal(chdir(cwd), 0);
    unlink(fifo);
    rmdir(sub);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shipped_models_parse),
        cmocka_unit_test(test_moe_gate),
        cmocka_unit_test(test_error_moe_gate),
        cmocka_unit_test(test_shipped_model_details),
        cmocka_unit_test(test_settings_override),
        cmocka_unit_test(test_error_unknown_op),
        cmocka_unit_test(test_error_arity),
        cmocka_unit_test(test_error_unknown_tensor),
        cmocka_unit_test(test_error_einsum_mismatch),
        cmocka_unit_test(test_error_concat_mismatch),
        cmocka_unit_test(test_error_split_not_divisible),
        cmocka_unit_test(test_split_sizes),
        cmocka_unit_test(test_model_name_quoted),
        cmocka_unit_test(test_error_nonpositive_size),
        cmocka_unit_test(test_error_unknown_parameter),
        cmocka_unit_test(test_error_unknown_setting),
        cmocka_unit_test(test_error_block_cycle),
        cmocka_unit_test(test_error_missing_end),
        cmocka_unit_test(test_error_lexical),
        cmocka_unit_test(test_error_names_on_left), cmocka_unit_test(test_name_from_path),
        cmocka_unit_test(test_error_reshape_count),
        cmocka_unit_test(test_error_dim_twice),
        cmocka_unit_test(test_llama_ops),
        cmocka_unit_test(test_error_llama_ops),
        cmocka_unit_test(test_error_misc),
        cmocka_unit_test(test_error_int64_min_division),
        cmocka_unit_test(test_error_deep_nesting),
        cmocka_unit_test(test_blocks_and_repeat),
        cmocka_unit_test(test_multi_output),
        cmocka_unit_test(test_mutation_smoke),
        cmocka_unit_test(test_op_rules_complete),
        cmocka_unit_test(test_many_ops_one_name),
        cmocka_unit_test(test_many_blocks_and_params),
        cmocka_unit_test(test_op_limit),
        cmocka_unit_test(test_step_limit),
        cmocka_unit_test(test_pointwise_ops),
        cmocka_unit_test(test_softcap_op),
        cmocka_unit_test(test_error_pointwise),
        cmocka_unit_test(test_load_not_a_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
