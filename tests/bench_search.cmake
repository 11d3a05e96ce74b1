# perf/search --memory (the full space, search/lagrange.c's walks seeded and
# unseeded): a small Transformer within 0.5 GiB, where stages are solved by
# the Lagrangian walk, its figures stored; --check fails (exit 1, "DIFFERS")
# when the seeded and unseeded searches disagree. --limit-mb 0: no
# address-space cap, which AddressSanitizer's reservations would exceed.
add_test(NAME bench_search_memory
  COMMAND $<TARGET_FILE:bench_search> --models transformer -p 4 --memory 0.5 --check
          --repeat 1 --limit-mb 0 --db ${CMAKE_CURRENT_BINARY_DIR}/bench_search_memory.db)
set_tests_properties(bench_search_memory PROPERTIES TIMEOUT 120
  PASS_REGULAR_EXPRESSION "check: the search with its Lagrangian walks unseeded gives the same cost"
  FAIL_REGULAR_EXPRESSION "DIFFERS|failed"
  ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models")
