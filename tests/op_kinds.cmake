# The runtime's per-kind table (runtime/ops/): every op kind has a forward
# and a backward entry.
sb_unit_test(test_op_tables test_op_tables.c)
set_property(TEST test_op_tables PROPERTY TIMEOUT 30)
