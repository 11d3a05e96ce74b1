# search --memory LIMIT (the exact search within a per-device memory limit,
# search/dp_mem.c) end to end: the constraint binds, the optimum is kept when
# it fits, nothing-fits names the least memory, bad sizes exit 2.
# Exactness against brute force: test_dp (test_within_equals_brute_force).
add_test(NAME search_memory
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/search_memory.sh $<TARGET_FILE:shardbench>)
set_tests_properties(search_memory PROPERTIES TIMEOUT 300
  ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models")

# Activation recomputation through the command line (tests/recompute_cli.sh):
# search --recompute all|auto|none (text, JSON, within --memory), the saved
# strategy's recompute lines run by `run` (same losses, lower peak).
add_test(NAME recompute_cli
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/recompute_cli.sh $<TARGET_FILE:shardbench>
          ${MPIEXEC_EXECUTABLE})
set_tests_properties(recompute_cli PROPERTIES TIMEOUT 120
  ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;OPENBLAS_NUM_THREADS=1;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models")
