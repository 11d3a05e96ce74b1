# ZeRO's backend collectives (reduce_scatter, allgather) on the CPU and
# cpu-devmem backends with the executor's slicing, even, uneven and empty
# slices, on 2, 3 and 4 ranks (tests/test_zero.c). The executor's use of
# them: tests/equiv.cmake (--zero), tests/memory.cmake, run_cli.
add_executable(test_zero ${CMAKE_CURRENT_SOURCE_DIR}/test_zero.c)
target_link_libraries(test_zero PRIVATE shardbench_static)
foreach(np 2 3 4)
  add_test(NAME test_zero_np${np}
    COMMAND ${MPIEXEC_EXECUTABLE} --oversubscribe --allow-run-as-root -np ${np}
            $<TARGET_FILE:test_zero>)
  set_tests_properties(test_zero_np${np} PROPERTIES
    TIMEOUT 120
    ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;OPENBLAS_NUM_THREADS=1")
endforeach()
