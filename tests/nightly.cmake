# The nightly regression check: the statistics of measure/stats.c on fixed
# synthetic samples (test_stats), and `shardbench nightly` end to end on a
# tiny AlexNet at p = 1 (tests/nightly.sh: real launches, three nights of the
# same build: kept build, auto A/B with it, stored launches; then a fake
# launcher whose step times make a deterministic slowdown;
# needs mpirun, gnuplot and sqlite3).
sb_unit_test(test_stats test_stats.c)
sb_unit_test(test_nightly_db test_nightly_db.c)

add_test(NAME nightly
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/nightly.sh $<TARGET_FILE:shardbench>
          ${CMAKE_SOURCE_DIR})
set_tests_properties(nightly PROPERTIES
  TIMEOUT 240
  ENVIRONMENT "OPENBLAS_NUM_THREADS=1;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models;SHARDBENCH_PLOTS=${CMAKE_SOURCE_DIR}/plots")
