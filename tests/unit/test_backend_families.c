/* test_backend_families.c: the backend's kernel families (backend.h) and
 * the families each op kind declares (sb_op_runtime.families, runtime/ops/).
 *
 * For one small model per op kind (every kind covered, checked), on one
 * rank: a backend holding only the families the executor's step and the
 * model's ops declare (the others NULL) trains two steps to the full CPU
 * backend's losses, bit for bit; a family an op kind calls but does not
 * declare would be a call through NULL here (ASan stops the test). Then,
 * for each family the model needs, a backend without it is refused at
 * creation with SB_EXIT_INPUT and one message naming the backend, the
 * family and who needs it (the first op of that kind, or the step); a
 * family table with an empty entry likewise, naming the entry. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../runtime/ops/kinds.h"
#include "shardbench/runtime.h"

#define HEAD "model k\n"
static const char *const texts[] = {
    HEAD "input x[b=2, c=3, h=6, w=6]\ny = conv(x, out=4, kernel=3, pad=1, pw=1)\n"
         "l = softmax_xent(y)\n",
    HEAD "input x[b=2, c=3, h=6, w=6]\ny = pool(x, kernel=2, stride=2)\nz = pool(x, kernel=2, "
         "type=avg)\nl = softmax_xent(y)\nm = softmax_xent(z)\n",
    HEAD "input x[b=4, f=8]\ny = dense(x, units=5, pw=1)\nl = softmax_xent(y)\n",
    HEAD "input x[b=4, e=8]\nweight w[e=8, f=6]\ny = einsum(\"b e, e f -> b f\", x, w)\n"
         "l = softmax_xent(y)\n",
    HEAD "input t[b=4, s=3]\ny = embedding(t, vocab=10, size=6)\nl = softmax_xent(y)\n",
    HEAD "input x[batch=2, seq=3, units=4]\ny = lstm(x, layers=2)\nl = softmax_xent(y)\n",
    HEAD "input x[b=4, e=8]\ny = norm(x)\nl = softmax_xent(y)\n",
    HEAD "input x[b=2, c=3, h=4, w=4]\ny = batchnorm(x)\nl = softmax_xent(y)\n",
    HEAD "input x[b=4, e=8]\ny = rmsnorm(x)\nl = softmax_xent(y)\n",
    HEAD "input x[b=2, s=4, d=4]\ny = rope(x, seq=s)\nl = softmax_xent(y)\n",
    HEAD "input x[b=2, q=4, k=4]\ny = softmax(x, axis=k, causal=q)\nl = softmax_xent(y)\n",
    HEAD "input a[b=4, e=8]\ninput c[b=4, e=8]\ny = add(a, c, pw=1)\nl = softmax_xent(y)\n",
    HEAD "input x[b=4, e=8, f=3]\ny = reduce_mean(x, axes=f)\nl = softmax_xent(y)\n",
    HEAD "input a[b=4, e=8]\ninput c[b=4, e=8]\ny = concat(a, c, axis=1)\nl = softmax_xent(y)\n",
    HEAD "input x[b=4, e=8]\np, q = split(x, axis=-1)\ny = add(p, q)\nl = softmax_xent(y)\n",
    HEAD "input a[b=4, e=8]\ninput c[b=4, e=8]\ny = stack(a, c)\nl = softmax_xent(y)\n",
    HEAD "input x[b=4, n=2, e=8]\np, q = unstack(x, axis=1)\ny = add(p, q)\n"
         "l = softmax_xent(y)\n",
    HEAD "input x[b=2, c=3, h=2]\nf = flatten(x)\ny = reshape(f, shape=[b=2, z=6])\n"
         "l = softmax_xent(y)\n",
    HEAD "input x[b=4, e=8]\ny = transpose(x, perm=[1, 0])\nl = softmax_xent(y)\n",
    HEAD "input x[b=4, e=8]\ny = act(x, fn=gelu)\nl = softmax_xent(y)\n",
    HEAD "input a[b=4, e=8]\ninput c[e=8]\ny = mul(a, c)\nl = softmax_xent(y)\n",
    HEAD "input x[e=8]\ny = expand(x, shape=[b=4, e=8])\nl = softmax_xent(y)\n",
    HEAD "input x[g=2, s=4, e=4]\nc, d = moe_gate(x, k=2, capacity=2, aux=10)\ny = add(c, d)\n"
         "l = softmax_xent(y)\n",
    HEAD "input x[b=4, e=8]\ny = softcap(x, cap=3)\nl = softmax_xent(y)\n",
};
#define NTEXTS ((int)(sizeof texts / sizeof texts[0]))

static void parse(int i, sb_model *m)
{
    sb_error err = {0};
    if (sb_model_parse(texts[i], strlen(texts[i]), "k.model", NULL, 0, m, &err))
        fail_msg("model %d: %s", i, err.msg);
}

/* the executor's families and those of m's ops */
static unsigned needs(const sb_model *m)
{
    unsigned f = SB_EXEC_FAMILIES;
    for (int i = 0; i < m->nops; i++)
        f |= sb_op_runtime_table[m->ops[i].kind]->families;
    return f;
}

/* be without the families outside keep */
static sb_backend only(const sb_backend *be, unsigned keep, const char *name)
{
    sb_backend t = *be;
    t.name = name;
#define SB_DROP_(E, m, T)                                                                          \
    if (!(keep & SB_FAM(E)))                                                                       \
        t.m = NULL;
    SB_KERNEL_FAMILIES(SB_DROP_)
#undef SB_DROP_
    return t;
}

/* create on one rank with every config 1: 0 and two steps' losses, or -1 and err */
static int train(const sb_model *m, const sb_backend *be, double loss[2], sb_error *err)
{
    int *ones = malloc((size_t)m->nops * SB_MAX_DIMS * sizeof *ones);
    const int **cfg = malloc((size_t)m->nops * sizeof *cfg);
    assert_non_null(ones);
    assert_non_null(cfg);
    for (int i = 0; i < m->nops * SB_MAX_DIMS; i++)
        ones[i] = 1;
    for (int i = 0; i < m->nops; i++)
        cfg[i] = ones + (size_t)i * SB_MAX_DIMS;
    sb_strategy st;
    if (sb_strategy_from_configs(&st, m, 1, cfg, NULL, NULL, err))
        fail_msg("strategy: %s", err->msg);
    sb_exec_opts eo = {.lr = 0.05f, .seed = 5};
    sb_executor *ex = NULL;
    int rc = sb_executor_create(MPI_COMM_SELF, m, &st, be, &eo, &ex, err);
    for (int s = 0; !rc && s < 2; s++)
        if (sb_executor_step(ex, &loss[s], err))
            fail_msg("%s: step %d: %s", be->name, s, err->msg);
    sb_executor_free(ex);
    sb_strategy_free(&st);
    free(cfg);
    free(ones);
    return rc;
}

static void every_kind_covered(void **state)
{
    (void)state;
    int seen[SB_OP_KIND_COUNT] = {0};
    for (int i = 0; i < NTEXTS; i++) {
        sb_model m;
        parse(i, &m);
        for (int k = 0; k < m.nops; k++)
            seen[m.ops[k].kind] = 1;
        sb_model_free(&m);
    }
    for (int k = 0; k < SB_OP_KIND_COUNT; k++)
        if (!seen[k])
            fail_msg("op kind %s: no model of this test uses it", sb_op_kind_name((sb_op_kind)k));
}

static void declared_families_suffice(void **state)
{
    (void)state;
    for (int i = 0; i < NTEXTS; i++) {
        sb_model m;
        parse(i, &m);
        unsigned need = needs(&m);
        sb_backend lean = only(&sb_backend_cpu, need, "cpu-lean");
        double full[2], got[2];
        sb_error err = {0};
        if (train(&m, &sb_backend_cpu, full, &err) || train(&m, &lean, got, &err))
            fail_msg("model %d: %s", i, err.msg);
        if (memcmp(full, got, sizeof full))
            fail_msg("model %d: losses %.9g %.9g on its families, %.9g %.9g on all", i, got[0],
                     got[1], full[0], full[1]);
        int nfam = 0;
        for (int f = 0; f < SB_FAMILY_COUNT; f++)
            nfam += !!(need & (1u << f));
        printf("model %2d (%s): %d ops, %2d of %d families\n", i,
               sb_op_kind_name(m.ops[0].kind), m.nops, nfam, SB_FAMILY_COUNT);
        sb_model_free(&m);
    }
}

/* who the executor says needs family f of m: the step, else the first op */
static void who_needs(const sb_model *m, int f, char *who, size_t len)
{
    static const char *const step[SB_FAMILY_COUNT] = {
        [SB_FAMILY_MOVE] = "the executor's relayouts and ZeRO slices",
        [SB_FAMILY_SUM] = "the executor's sums of gradients",
        [SB_FAMILY_OPTIM] = "the executor's update"};
    if (step[f]) {
        snprintf(who, len, "%s", step[f]);
        return;
    }
    for (int i = 0; i < m->nops; i++)
        if (sb_op_runtime_table[m->ops[i].kind]->families & (1u << f)) {
            snprintf(who, len, "op '%s' (%s)", m->ops[i].name, sb_op_kind_name(m->ops[i].kind));
            return;
        }
    fail_msg("family %s: nothing needs it", sb_kernel_family_name((sb_kernel_family)f));
}

static void missing_family_refused(void **state)
{
    (void)state;
    int refused = 0;
    for (int i = 0; i < NTEXTS; i++) {
        sb_model m;
        parse(i, &m);
        unsigned need = needs(&m);
        for (int f = 0; f < SB_FAMILY_COUNT; f++) {
            if (!(need & (1u << f)))
                continue;
            sb_backend less = only(&sb_backend_cpu, ~(1u << f), "cpu-less");
            sb_error err = {0};
            double loss[2];
            assert_int_equal(train(&m, &less, loss, &err), -1);
            assert_int_equal(err.code, SB_EXIT_INPUT);
            const char *name = sb_kernel_family_name((sb_kernel_family)f);
            char who[200], want[400];
            who_needs(&m, f, who, sizeof who);
            snprintf(want, sizeof want,
                     "backend 'cpu-less' has no %s kernels (sb_backend.%s is NULL), needed by %s",
                     name, name, who);
            assert_string_equal(err.msg, want);
            refused++;
        }
        sb_model_free(&m);
    }
    printf("%d backends without a family the model needs: refused, each naming it\n", refused);
}

static void empty_entry_refused(void **state)
{
    (void)state;
    sb_model m;
    parse(6, &m); /* norm */
    sb_norm_kernels norm = *sb_backend_cpu.norm;
    norm.layernorm_apply = NULL; /* entry 7 of 17 */
    sb_backend holey = sb_backend_cpu;
    holey.name = "cpu-holey";
    holey.norm = &norm;
    sb_error err = {0};
    double loss[2];
    assert_int_equal(train(&m, &holey, loss, &err), -1);
    assert_int_equal(err.code, SB_EXIT_INPUT);
    char want[300];
    snprintf(want, sizeof want,
             "backend 'cpu-holey': its norm kernels leave entry 7 of 17 empty (sb_backend.norm), "
             "needed by op '%s' (norm)",
             m.ops[0].name);
    assert_string_equal(err.msg, want);
    assert_string_equal(sb_kernel_family_name(SB_FAMILY_GEMM), "gemm");
    assert_string_equal(sb_kernel_family_name(SB_FAMILY_OPTIM), "optim");
    assert_string_equal(sb_kernel_family_name(SB_FAMILY_COUNT), "?");
    sb_model_free(&m);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_kind_covered),
        cmocka_unit_test(declared_families_suffice),
        cmocka_unit_test(missing_family_refused),
        cmocka_unit_test(empty_entry_refused),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    MPI_Finalize();
    return rc;
}
