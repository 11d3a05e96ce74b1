/* test_op_tables.c: the runtime's per-kind table (runtime/ops/kinds.h) has
 * an entry for every op kind, each with a forward and a backward. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "../runtime/ops/kinds.h"

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_kind_has_forward_and_backward),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
