sb_unit_test(test_parse test_parse.c)
