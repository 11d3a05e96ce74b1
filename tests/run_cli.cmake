# `shardbench run` end to end under mpirun (tests/run_cli.sh): the JSON
# report and the results database of a data-parallel run on 2 ranks, the
# errors (strategy for another P or model, unknown --set, unknown model: one
# message, every rank exits 2, no hang) and --strategy best on 3 ranks.
# Budget: 120 s (about 5 s on two idle cores in Release, 15 s in Sanitize,
# 30 s in Sanitize with the other core busy).
find_program(SB_SQLITE3_SHELL sqlite3)
if(SB_SQLITE3_SHELL)
  add_test(NAME run_cli
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/run_cli.sh $<TARGET_FILE:shardbench> ${MPIEXEC_EXECUTABLE})
  set_tests_properties(run_cli PROPERTIES
    TIMEOUT 120
    ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;OPENBLAS_NUM_THREADS=1;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models")
else()
  message(WARNING "sqlite3 (the shell) not found: test run_cli not registered")
endif()
