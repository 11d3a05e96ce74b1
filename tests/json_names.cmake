# Model names with a double quote, a blank and '#' through the JSON outputs
# (search, candidates, run, bench) and strategy files (tests/json_names.sh;
# needs mpirun and sqlite3, the shell).
add_test(NAME json_names
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/json_names.sh $<TARGET_FILE:shardbench> ${MPIEXEC_EXECUTABLE})
set_tests_properties(json_names PROPERTIES
  TIMEOUT 180
  ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;OPENBLAS_NUM_THREADS=1;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models")
