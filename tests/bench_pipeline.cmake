# The bench pipeline: unit tests of results/query.c (JSON reader, Spearman's
# rho, schema migration 1 -> 2, correlations) and an end-to-end test of
# `shardbench bench`, `plot`, `report` and `regress` on a tiny AlexNet at
# p = 2 (tests/bench_pipeline.sh; needs mpirun, gnuplot and sqlite3).
sb_unit_test(test_bench_pipeline bench_pipeline.c)

add_test(NAME bench_pipeline
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/bench_pipeline.sh $<TARGET_FILE:shardbench>
          ${CMAKE_SOURCE_DIR})
set_tests_properties(bench_pipeline PROPERTIES
  TIMEOUT 180
  ENVIRONMENT "OPENBLAS_NUM_THREADS=1;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models;SHARDBENCH_PLOTS=${CMAKE_SOURCE_DIR}/plots")
