sb_unit_test(test_cost test_cost.c)
