# The calibrated cost model's file and constants:
# - test_calibration: the reader's ranges (absurd but finite values refused
#   with file:line and the value), finite costs at the ranges' corners, and
#   sb_problem_build refusing a cost that is not a number;
# - calibration_cli: search, prune and candidates with such a file exit 2,
#   print no nan or inf and store nothing;
# - calibrate_rate: `calibrate` on 2 ranks against a cblas_sgemm and an add
#   loop timed in the test itself (GEMM rate within 2x, elem_ratio within
#   8x; best of 3 rounds on a loaded machine). About 5-15 s on two cores.
sb_unit_test(test_calibration test_calibration.c)
add_test(NAME calibration_cli
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/calibration_cli.sh $<TARGET_FILE:shardbench>
          ${CMAKE_CURRENT_SOURCE_DIR}/data/calibration)
set_tests_properties(calibration_cli PROPERTIES TIMEOUT 120
  ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models")
add_executable(calibrate_rate calibrate_rate.c)
target_link_libraries(calibrate_rate PRIVATE shardbench_static)
add_test(NAME calibrate_rate
  COMMAND calibrate_rate $<TARGET_FILE:shardbench> ${MPIEXEC_EXECUTABLE})
set_tests_properties(calibrate_rate PROPERTIES TIMEOUT 300
  ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models")
