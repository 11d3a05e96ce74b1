# Ranks started with different arguments (MPMD launches) fail together with
# one message naming what differs, within a timeout (tests/ranks_agree.sh);
# the runtime's agreement (sb_agree_text, sb_agree_plan, data sources,
# checkpoint indexes read per rank) on 2 ranks (tests/test_agree.c).
add_test(NAME ranks_agree
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/ranks_agree.sh $<TARGET_FILE:shardbench>
          ${MPIEXEC_EXECUTABLE})
set_tests_properties(ranks_agree PROPERTIES
  TIMEOUT 600
  ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;OPENBLAS_NUM_THREADS=1;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models")
