# The executor's per-step timing ledger (runtime/executor/timing.c): hand
# cases, random nesting booked at once and through the ledger, and one
# step's per-op times on the cpu (host marks) and cpu-devmem (backend
# marks read once per step) backends (tests/test_executor_timing.c).
sb_unit_test(test_executor_timing test_executor_timing.c)
set_property(TEST test_executor_timing APPEND PROPERTY ENVIRONMENT
  "ASAN_OPTIONS=detect_leaks=0" OPENBLAS_NUM_THREADS=1)
set_property(TEST test_executor_timing PROPERTY TIMEOUT 120)
