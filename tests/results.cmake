sb_unit_test(test_results test_results.c)
