# Memory model: hand computations and the runtime's measured peak (within
# 25%) for the five paper models at test sizes, on 2 and 4 MPI ranks.
add_executable(test_memory ${CMAKE_CURRENT_SOURCE_DIR}/test_memory.c)
target_link_libraries(test_memory PRIVATE shardbench_static)
foreach(np 2 4)
  add_test(NAME test_memory_np${np}
    COMMAND ${MPIEXEC_EXECUTABLE} --oversubscribe --allow-run-as-root -np ${np} $<TARGET_FILE:test_memory>)
  set_tests_properties(test_memory_np${np} PROPERTIES
    TIMEOUT 300
    ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;OPENBLAS_NUM_THREADS=1;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models")
endforeach()
