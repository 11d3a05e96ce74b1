# Every op kind has its entry in every stage's table (models/ops,
# cost/ops, runtime/ops), none empty.
sb_unit_test(test_op_kinds test_op_kinds.c)
set_property(TEST test_op_kinds PROPERTY TIMEOUT 30)
