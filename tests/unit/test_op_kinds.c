/* test_op_kinds.c: every op kind has its entry in every stage, none empty:
 * the model language (a rule with a name and a builder, models/ops/), the
 * search (cost and memory, cost/ops/) and the runtime (forward and
 * backward, runtime/ops/). A kind missing from a stage's table does not link
 * (the tables are made from SB_OP_KINDS); this catches an entry left
 * empty. Export needs no entry of its own: it prints the op's weights
 * (sb_op.weights, filled by the model's rule) and operands. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../models/ops/ops.h"
#include "../runtime/ops/kinds.h"
#include "../cost/kinds.h"
#include "shardbench/memory.h"

static void every_kind_has_a_model_rule(void **state)
{
    (void)state;
    for (int k = 0; k < SB_OP_KIND_COUNT; k++) {
        const op_rule *r = op_rules[k];
        if (!r || !r->names[0] || !(r->build || r->exec))
            fail_msg("op kind %d: no model rule %s", k, !r ? "" : !r->names[0] ? "name" : "builder");
        assert_string_equal(sb_op_kind_name((sb_op_kind)k), r->names[0]);
    }
    assert_string_equal(sb_op_kind_name(SB_OP_KIND_COUNT), "?");
}

static void every_kind_has_a_cost_and_memory(void **state)
{
    (void)state;
    for (int k = 0; k < SB_OP_KIND_COUNT; k++) {
        const sb_kind_search *e = sb_kind_search_table[k];
        if (!e || !e->cost || !e->memory)
            fail_msg("op kind %s: no search %s", sb_op_kind_name((sb_op_kind)k),
                     !e ? "entry" : !e->cost ? "cost" : "memory");
    }
}

static void every_kind_has_forward_and_backward(void **state)
{
    (void)state;
    for (int k = 0; k < SB_OP_KIND_COUNT; k++) {
        const sb_op_runtime *e = sb_op_runtime_table[k];
        if (!e || !e->forward || !e->backward)
            fail_msg("op kind %s: no runtime %s", sb_op_kind_name((sb_op_kind)k),
                     !e ? "entry" : !e->forward ? "forward" : "backward");
    }
}

/* The kinds that own weights declare them through the model's rule, so the
 * runtime, the memory model and export all see the same ones. */
static void weights_come_from_the_rule(void **state)
{
    (void)state;
    const char *text = "model w\n"
                       "input x[batch=8, features=16]\n"
                       "h = dense(x, units=4)\n"
                       "n = norm(h, axis=units)\n"
                       "loss = softmax_xent(n)\n";
    sb_model m;
    sb_error err = {0};
    assert_int_equal(sb_model_parse(text, strlen(text), "w.model", NULL, 0, &m, &err), 0);
    assert_int_equal(m.ops[0].nweights, 1);
    assert_string_equal(m.ops[0].weights[0].suffix, ".w");
    assert_int_equal(m.ops[0].weights[0].size[0] * m.ops[0].weights[0].size[1], 16 * 4);
    assert_int_equal(m.ops[1].nweights, 2);
    assert_string_equal(m.ops[1].weights[0].suffix, ".gamma");
    assert_string_equal(m.ops[1].weights[1].suffix, ".beta");
    assert_int_equal(m.ops[1].stat_dims, 1u << m.ops[1].axis);
    assert_int_equal(m.ops[2].nweights, 0);
    sb_model_free(&m);

    /* rmsnorm: one scale, initialised to 1; rope: none */
    const char *llama = "model l\n"
                        "input x[batch=8, seq=4, dk=16]\n"
                        "h = rmsnorm(x, axis=dk)\n"
                        "r = rope(h, seq=seq, dim=dk)\n"
                        "loss = softmax_xent(r)\n";
    assert_int_equal(sb_model_parse(llama, strlen(llama), "l.model", NULL, 0, &m, &err), 0);
    assert_int_equal(m.ops[0].nweights, 1);
    assert_string_equal(m.ops[0].weights[0].suffix, ".gamma");
    assert_int_equal(m.ops[0].weights[0].size[0], 16);
    assert_true(m.ops[0].weights[0].init_offset == 1.0 && m.ops[0].weights[0].init_scale == 0.0);
    assert_int_equal(m.ops[0].stat_dims, 1u << 2);
    assert_int_equal(m.ops[1].nweights, 0);
    assert_int_equal(m.ops[1].stat_dims, 0);
    sb_model_free(&m);
}

/* moe_gate: configs split only the group dim (the slots of a group are
 * assigned in sequence, top-k needs every expert), its cost is the
 * documented elementwise count and its memory its operands and routing. */
static void moe_gate_splits_only_groups(void **state)
{
    (void)state;
    const char *text = "model g\n"
                       "input l[batch=8, seq=6, expert=4]\n"
                       "c, d = moe_gate(l, k=2, capacity=3)\n";
    sb_model m;
    sb_error err = {0};
    assert_int_equal(sb_model_parse(text, strlen(text), "g.model", NULL, 0, &m, &err), 0);
    const sb_op *op = &m.ops[0];
    sb_configs cf;
    assert_int_equal(sb_enumerate_configs(op, 8, 1, &cf, &err), 0);
    assert_int_equal(cf.n, 4); /* batch split 1, 2, 4, 8 */
    for (int i = 0; i < cf.n; i++)
        for (int d = 1; d < 4; d++)
            assert_int_equal(cf.c[i * 4 + d], 1);
    free(cf.c);
    free(cf.cost);
    sb_cost_params cp;
    sb_cost_params_default(&cp);
    cp.elem_ratio = 2.0;
    const int c2[4] = {2, 1, 1, 1};
    double l = 4.0 * 6 * 4, e = l * 3; /* per device: 4 groups */
    assert_true(fabs(sb_op_cost(&m, op, c2, &cp) - ((8.0 + 2 * 2) * l + 3 * e) * 2.0) < 1e-9);
    sb_mem mem;
    sb_op_memory(&m, op, c2, SB_OPTIM_SGD, &mem);
    assert_true(fabs(mem.activations - 4.0 * (l + 2 * e)) < 1e-9);
    assert_true(fabs(mem.scratch - 4.0 * (2 * e + 3 * 4 * 6 * 2 + 2 * 4 * 4 + 4)) < 1e-9);
    assert_true(mem.weights == 0);
    sb_model_free(&m);
    /* the load-balancing loss adds its value and gradient, 6 per logit */
    const char *aux = "model g\n"
                      "input l[batch=8, seq=6, expert=4]\n"
                      "c, d = moe_gate(l, k=2, capacity=3, aux=10)\n";
    assert_int_equal(sb_model_parse(aux, strlen(aux), "g.model", NULL, 0, &m, &err), 0);
    assert_true(m.ops[0].moe_aux == 0.01);
    assert_true(fabs(sb_op_cost(&m, &m.ops[0], c2, &cp) - ((8.0 + 2 * 2 + 6) * l + 3 * e) * 2.0) < 1e-9);
    sb_model_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_kind_has_a_model_rule),
        cmocka_unit_test(every_kind_has_a_cost_and_memory),
        cmocka_unit_test(every_kind_has_forward_and_backward),
        cmocka_unit_test(weights_come_from_the_rule),
        cmocka_unit_test(moe_gate_splits_only_groups),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
