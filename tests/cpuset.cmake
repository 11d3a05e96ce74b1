# The CPUs and threads of a rank (common/cpuset.c): the pure parts (share,
# CPU lists, the launcher's binding from its environment) as a cmocka
# test, and `shardbench run` under mpirun (tests/cpuset_cli.sh: default
# binding widened to the share, --keep-binding, --bind-to core,
# OPENBLAS_NUM_THREADS, two ranks). About 10 s on two cores.
sb_unit_test(test_cpuset test_cpuset.c)
add_test(NAME cpuset_cli
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cpuset_cli.sh $<TARGET_FILE:shardbench> ${MPIEXEC_EXECUTABLE})
set_tests_properties(cpuset_cli PROPERTIES
  TIMEOUT 120 SKIP_RETURN_CODE 77
  ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models")
