sb_unit_test(test_export test_export.c)
