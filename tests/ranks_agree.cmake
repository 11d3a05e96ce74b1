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

add_executable(test_agree ${CMAKE_CURRENT_SOURCE_DIR}/test_agree.c)
target_link_libraries(test_agree PRIVATE shardbench_static)
foreach(np 2 3)
  add_test(NAME test_agree_np${np}
    COMMAND ${MPIEXEC_EXECUTABLE} --oversubscribe --allow-run-as-root -np ${np}
            $<TARGET_FILE:test_agree>)
  set_tests_properties(test_agree_np${np} PROPERTIES
    TIMEOUT 120
    ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;OPENBLAS_NUM_THREADS=1;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models")
endforeach()
