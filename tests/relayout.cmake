# Relayout and the group cache (runtime/relayout/relayout.c, groups.c, part of
# libshardbench): their MPI test, run on 1, 2, 3, 4 and 8 ranks; and the
# relayout benchmark (perf/relayout).
add_executable(test_relayout ${CMAKE_CURRENT_SOURCE_DIR}/test_relayout.c)
target_link_libraries(test_relayout PRIVATE shardbench_static PkgConfig::CMOCKA)

# Every rank runs every test; the test program agrees on pass/fail over MPI.
# ASan's leak checker is off for these tests only: it reports allocations
# OpenMPI keeps until exit (inside libmpi, libopen-pal, hwloc), not ours.
foreach(np 1 2 3 4 8)
  add_test(NAME test_relayout_np${np}
    COMMAND ${MPIEXEC_EXECUTABLE} --oversubscribe --allow-run-as-root -np ${np}
            $<TARGET_FILE:test_relayout>)
  set_tests_properties(test_relayout_np${np} PROPERTIES
    TIMEOUT 120
    ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0")
endforeach()

add_executable(bench_relayout ${CMAKE_SOURCE_DIR}/perf/relayout.c)
target_link_libraries(bench_relayout PRIVATE shardbench_static)
set_target_properties(bench_relayout PROPERTIES
  RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/perf OUTPUT_NAME relayout)
