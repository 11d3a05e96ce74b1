/* test_export.c: cmocka tests of `shardbench export` (strategy/export.c).
 *
 * Golden files: tests/golden/MODEL-p8.strategy is the PaSE-best strategy of
 * each paper model at p = 8 (checked to still be the optimum) and
 * MODEL-p8.{dtensor,torch,jax,mtf} its export, compared byte for byte.
 * Regenerate after an intended change with
 *   shardbench search -m MODEL -p 8 --db none --save tests/golden/MODEL-p8.strategy
 *   shardbench export tests/golden/MODEL-p8.strategy --to FMT > tests/golden/MODEL-p8.FMT
 * Round trips: every DTensor layout string of the export is parsed back and
 * must give the operand's split counts under the op's config; every Mesh-TF
 * mesh_shape + layout is parsed back and must give the op's config. Then the
 * readers' errors. The program forms (--format json|py, docs/export.md):
 * every operand's and weight's JSON spec, read back over its mesh, gives
 * the operand's split counts under the op's config, and the text form of
 * sb_strategy_export_as is sb_strategy_export's; what runs them is
 * tests/jax/check.sh. Not the strategy files themselves (test_dp.c). */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "shardbench/candidates.h"
#include "shardbench/strategy.h"

static const char *const models[] = {"alexnet", "inception3", "resnet101", "rnnlm", "transformer"};
static const char *const formats[] = {"dtensor", "torch", "jax", "mtf"};

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    *len = (size_t)n;
    return buf;
}

typedef struct {
    sb_model m;
    sb_problem pb;
    int *choice;
} loaded;

static void load_golden(const char *name, loaded *l)
{
    sb_error err = {0};
    if (sb_model_load(name, NULL, 0, &l->m, &err))
        fail_msg("%s: %s", name, err.msg);
    sb_cost_params cp;
    sb_cost_params_default(&cp);
    if (sb_problem_build(&l->m, 8, &cp, &l->pb, &err))
        fail_msg("%s: %s", name, err.msg);
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/golden/%s-p8.strategy", SB_SOURCE_DIR, name);
    l->choice = calloc((size_t)l->m.nops, sizeof *l->choice);
    if (sb_strategy_load_choice(path, &l->pb, l->choice, &err))
        fail_msg("%s: %s", path, err.msg);
}

static void free_loaded(loaded *l)
{
    free(l->choice);
    sb_problem_free(&l->pb);
    sb_model_free(&l->m);
}

static char *export_str(loaded *l, sb_export_format fmt, size_t *len)
{
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    assert_non_null(f);
    sb_error err = {0};
    assert_int_equal(sb_strategy_export(f, &l->pb, l->choice, fmt, &err), 0);
    fclose(f);
    return buf;
}

static void test_golden(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        loaded l;
        load_golden(models[i], &l);
        /* still the exact optimum */
        sb_search_opts so = {.algo = SB_ALGO_PASE, .max_table_mb = 1024, .progress = 0};
        sb_result r;
        sb_error err = {0};
        assert_int_equal(sb_search(&l.pb, &so, &r, &err), 0);
        assert_true(sb_strategy_cost(&l.pb, l.choice) == r.total_cost);
        sb_result_free(&r);
        for (int f = 0; f < 4; f++) {
            sb_export_format fmt;
            assert_int_equal(sb_export_format_parse(formats[f], &fmt, &err), 0);
            size_t n, gn;
            char *got = export_str(&l, fmt, &n);
            char path[1024];
            snprintf(path, sizeof path, "%s/tests/golden/%s-p8.%s", SB_SOURCE_DIR, models[i], formats[f]);
            char *want = slurp(path, &gn);
            if (n != gn || memcmp(got, want, n))
                fail_msg("%s differs from the export (%zu vs %zu bytes)", path, n, gn);
            free(got);
            free(want);
        }
        free_loaded(&l);
    }
}

static int op_index(const sb_model *m, const char *line)
{
    char name[SB_NAME_MAX];
    if (sscanf(line, "op %95s", name) != 1)
        return -1;
    for (int i = 0; i < m->nops; i++)
        if (!strcmp(m->ops[i].name, name))
            return i;
    return -1;
}

/* Every DTensor layout parsed back gives the operand's split counts. */
static void test_dtensor_round_trip(void **state)
{
    (void)state;
    int checked = 0;
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        loaded l;
        load_golden(models[i], &l);
        size_t n;
        char *text = export_str(&l, SB_EXPORT_DTENSOR, &n);
        int cur = -1, kin = 0, kout = 0;
        char *save = NULL;
        for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
            if (!strncmp(line, "op ", 3)) {
                cur = op_index(&l.m, line);
                assert_true(cur >= 0);
                kin = kout = 0;
                continue;
            }
            char *spec = strstr(line, "sharding_specs:");
            if (!spec || cur < 0)
                continue;
            const sb_op *op = &l.m.ops[cur];
            const int *c = l.pb.cfg[cur].c + (size_t)l.choice[cur] * (size_t)op->ndims;
            int got[SB_MAX_DIMS], want[SB_MAX_DIMS];
            sb_error err = {0};
            int nd = sb_dtensor_layout_parse(spec, got, SB_MAX_DIMS, &err);
            if (nd < 0)
                fail_msg("%s: %s", models[i], err.msg);
            const sb_operand *o = NULL;
            int is_out = !strncmp(line, "  out ", 6);
            if (is_out)
                o = &op->out[kout++];
            else if (kin < op->nin)
                o = &op->in[kin++];
            if (!o)
                continue; /* the implicit weight: its dims are checked by the runtime's plan */
            const sb_tensor *t = &l.m.tensors[o->tensor];
            assert_int_equal(nd, t->ndims);
            sb_operand_layout(op, o, t->ndims, c, want);
            assert_memory_equal(got, want, (size_t)nd * sizeof(int));
            checked++;
        }
        free(text);
        free_loaded(&l);
    }
    printf("dtensor round trip: %d operand layouts\n", checked);
    assert_true(checked > 1000);
}

/* Every op's Mesh-TF rules parsed back give its config. */
static void test_mtf_round_trip(void **state)
{
    (void)state;
    int checked = 0;
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        loaded l;
        load_golden(models[i], &l);
        size_t n;
        char *text = export_str(&l, SB_EXPORT_MTF, &n);
        char *save = NULL, mesh[256] = "";
        int cur = -1;
        for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
            if (!strncmp(line, "op ", 3)) {
                cur = op_index(&l.m, line);
            } else if (sscanf(line, "  mesh_shape \"%255[^\"]\"", mesh) == 1 || !strcmp(line, "  mesh_shape \"\"")) {
                if (!strcmp(line, "  mesh_shape \"\""))
                    mesh[0] = '\0';
            } else if (!strncmp(line, "  layout \"", 10)) {
                char rules[1024] = "";
                sscanf(line, "  layout \"%1023[^\"]\"", rules);
                char names[SB_MAX_DIMS][SB_NAME_MAX];
                int splits[SB_MAX_DIMS];
                sb_error err = {0};
                int nr = sb_mtf_rules_parse(rules, mesh, names, splits, SB_MAX_DIMS, &err);
                if (nr < 0)
                    fail_msg("%s: %s", models[i], err.msg);
                const sb_op *op = &l.m.ops[cur];
                const int *c = l.pb.cfg[cur].c + (size_t)l.choice[cur] * (size_t)op->ndims;
                for (int d = 0; d < op->ndims; d++) {
                    int want = 1;
                    for (int r = 0; r < nr; r++)
                        if (!strcmp(names[r], op->dims[d].name))
                            want = splits[r];
                    assert_int_equal(c[d], want);
                }
                checked++;
            }
        }
        free(text);
        free_loaded(&l);
    }
    assert_true(checked > 600);
}

static void test_reader_errors(void **state)
{
    (void)state;
    sb_error err = {0};
    int s[SB_MAX_DIMS];
    assert_int_equal(sb_dtensor_layout_parse("sharding_specs:x,unsharded, mesh:|x=4,y=2|0,1|0,1", s, 8, &err), 2);
    assert_int_equal(s[0], 4);
    assert_int_equal(s[1], 1);
    assert_int_equal(sb_dtensor_layout_parse("sharding_specs:(x*y),y, mesh:|x=4,y=2|0|0", s, 8, &err), 2);
    assert_int_equal(s[0], 8);
    assert_int_equal(s[1], 2);
    const char *bad[] = {"x,unsharded, mesh:|x=4|0|0", "sharding_specs:q,unsharded, mesh:|x=4|0|0",
                         "sharding_specs:x,unsharded", "sharding_specs:x, mesh:|x=a|0|0",
                         "sharding_specs:xx, mesh:|x=4|0|0"};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        err.code = 0;
        assert_int_equal(sb_dtensor_layout_parse(bad[k], s, 8, &err), -1);
        assert_int_equal(err.code, SB_EXIT_INPUT);
    }
    char names[4][SB_NAME_MAX];
    assert_int_equal(sb_mtf_rules_parse("batch:x;heads:y", "x:4;y:2", names, s, 4, &err), 2);
    assert_string_equal(names[1], "heads");
    assert_int_equal(s[1], 2);
    assert_int_equal(sb_mtf_rules_parse("batch:z", "x:4;y:2", names, s, 4, &err), -1);
    assert_int_equal(sb_mtf_rules_parse("batch:x", "x:0", names, s, 4, &err), -1);
    assert_int_equal(sb_mtf_rules_parse("batchx", "x:4", names, s, 4, &err), -1);
    sb_export_format f;
    assert_int_equal(sb_export_format_parse("onnx", &f, &err), -1);
    assert_int_equal(err.code, SB_EXIT_INPUT);
}


static char *export_as_str(loaded *l, sb_export_format fmt, sb_export_form form, size_t *len)
{
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    assert_non_null(f);
    sb_error err = {0};
    if (sb_strategy_export_as(f, &l->pb, l->choice, fmt, form, &err))
        fail_msg("export: %s", err.msg);
    fclose(f);
    return buf;
}

/* Split count of a JSON spec entry (null, "x" or ["x", "y"]) over a mesh. */
static int spec_split(json_t *entry, json_t *mesh)
{
    json_t *names = json_object_get(mesh, "axis_names"), *shape = json_object_get(mesh, "shape");
    int split = 1;
    for (size_t k = 0; k < (json_is_array(entry) ? json_array_size(entry) : !json_is_null(entry)); k++) {
        const char *a = json_string_value(json_is_array(entry) ? json_array_get(entry, k) : entry);
        assert_non_null(a);
        int found = 0;
        for (size_t n = 0; n < json_array_size(names); n++)
            if (!strcmp(json_string_value(json_array_get(names, n)), a)) {
                split *= (int)json_integer_value(json_array_get(shape, n));
                found = 1;
            }
        assert_true(found);
    }
    return split;
}

static void test_program_json(void **state)
{
    (void)state;
    int checked = 0;
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        loaded l;
        load_golden(models[i], &l);
        for (int torch = 0; torch < 2; torch++) {
            size_t len;
            char *text = export_as_str(&l, torch ? SB_EXPORT_TORCH : SB_EXPORT_JAX, SB_EXPORT_JSON, &len);
            json_error_t je;
            json_t *root = json_loads(text, 0, &je);
            if (!root)
                fail_msg("%s: JSON line %d: %s", models[i], je.line, je.text);
            assert_int_equal(json_integer_value(json_object_get(root, "p")), 8);
            json_t *meshes = json_object_get(root, "meshes"), *ops = json_object_get(root, "ops");
            for (size_t k = 0; k < json_array_size(meshes); k++) {
                json_t *sh = json_object_get(json_array_get(meshes, k), "shape");
                int prod = 1;
                for (size_t n = 0; n < json_array_size(sh); n++)
                    prod *= (int)json_integer_value(json_array_get(sh, n));
                assert_int_equal(prod, 8);
                /* p = 8: every mesh is the device mesh 2x2x2 with axes merged */
                assert_true(json_is_array(json_object_get(json_array_get(meshes, k), "global_axes")));
            }
            assert_int_equal(json_array_size(ops), (size_t)l.m.nops);
            for (int o = 0; o < l.m.nops; o++) {
                const sb_op *op = &l.m.ops[o];
                const int *c = l.pb.cfg[o].c + (size_t)l.choice[o] * (size_t)op->ndims;
                json_t *oj = json_array_get(ops, (size_t)o);
                assert_string_equal(json_string_value(json_object_get(oj, "name")), op->name);
                json_t *mesh = json_array_get(meshes, (size_t)json_integer_value(json_object_get(oj, "mesh")));
                int q = 1;
                for (int d = 0; d < op->ndims; d++) {
                    assert_int_equal(json_integer_value(json_array_get(json_object_get(oj, "config"), (size_t)d)), c[d]);
                    q *= c[d];
                }
                if (8 % q) /* exported replicated, and said so */
                    continue;
                for (int role = 0; role < 2; role++) {
                    const sb_operand *ops_ = role ? op->out : op->in;
                    int n = role ? op->nout : op->nin;
                    json_t *arr = json_object_get(oj, role ? "out" : "in");
                    assert_int_equal(json_array_size(arr), (size_t)n);
                    for (int k = 0; k < n; k++) {
                        const sb_tensor *t = &l.m.tensors[ops_[k].tensor];
                        int lay[SB_MAX_DIMS];
                        sb_operand_layout(op, &ops_[k], t->ndims, c, lay);
                        json_t *spec = json_object_get(json_array_get(arr, (size_t)k), "spec");
                        assert_int_equal(json_array_size(spec), (size_t)t->ndims);
                        for (int j = 0; j < t->ndims; j++)
                            assert_int_equal(spec_split(json_array_get(spec, (size_t)j), mesh), lay[j]);
                        checked++;
                    }
                }
                json_t *ws = json_object_get(oj, "weights");
                assert_int_equal(json_array_size(ws), (size_t)op->nweights);
                for (int w = 0; w < op->nweights; w++) {
                    json_t *spec = json_object_get(json_array_get(ws, (size_t)w), "spec");
                    for (int j = 0; j < op->weights[w].ndims; j++) {
                        int mp = op->weights[w].map[j];
                        assert_int_equal(spec_split(json_array_get(spec, (size_t)j), mesh), mp >= 0 ? c[mp] : 1);
                    }
                    checked++;
                }
            }
            json_decref(root);
            free(text);
        }
        /* the text form through export_as is the text export, byte for byte */
        for (int f = 0; f < 4; f++) {
            size_t la, lb;
            char *a = export_str(&l, (sb_export_format)f, &la);
            char *b = export_as_str(&l, (sb_export_format)f, SB_EXPORT_TEXT, &lb);
            assert_int_equal(la, lb);
            assert_memory_equal(a, b, la);
            free(a);
            free(b);
        }
        free_loaded(&l);
    }
    assert_true(checked > 1000);
}

static void test_program_errors(void **state)
{
    (void)state;
    sb_error err = {0};
    sb_export_form form;
    assert_int_equal(sb_export_form_parse("py", &form, &err), 0);
    assert_int_equal(form, SB_EXPORT_PY);
    assert_int_equal(sb_export_form_parse("yaml", &form, &err), -1);
    assert_int_equal(err.code, SB_EXIT_INPUT);
    loaded l;
    load_golden("alexnet", &l);
    char *buf = NULL;
    size_t len;
    FILE *f = open_memstream(&buf, &len);
    for (int fmt = 0; fmt < 4; fmt += 3) { /* dtensor, mtf: no program form */
        err.code = 0;
        assert_int_equal(sb_strategy_export_as(f, &l.pb, l.choice, (sb_export_format)fmt, SB_EXPORT_PY, &err), -1);
        assert_int_equal(err.code, SB_EXIT_INPUT);
    }
    fclose(f);
    free(buf);
    free_loaded(&l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reader_errors),
        cmocka_unit_test(test_golden),
        cmocka_unit_test(test_dtensor_round_trip),
        cmocka_unit_test(test_mtf_round_trip),
        cmocka_unit_test(test_program_json),
        cmocka_unit_test(test_program_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
