# The bench's view of other work on the machine (measure/bench.c): busy
# seconds of /proc/stat, the other cores of a launch, the strategies that
# get another trial round, the yield-when-idle environment, the default
# launcher's binding by ranks and CPUs. Fixed numbers,
# no timing.
sb_unit_test(test_bench_other test_bench_other.c)
