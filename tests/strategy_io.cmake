# Strategy files' model line: bare and quoted values, names with a blank,
# '#', '"', '\' and control characters saved and loaded back.
sb_unit_test(test_strategy_io test_strategy_io.c)
