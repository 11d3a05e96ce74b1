sb_unit_test(test_dp test_dp.c)
