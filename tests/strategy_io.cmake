# Strategy files' model line: bare and quoted values, names with a blank,
# '#', '"', '\' and control characters saved and loaded back.
sb_unit_test(test_strategy_io test_strategy_io.c)
# Devices, FIFOs and directories given as strategy files are refused at once
# (test_special_files); the timeout backs up the test's own alarm.
set_tests_properties(test_strategy_io PROPERTIES TIMEOUT 60)
