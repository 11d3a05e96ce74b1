sb_unit_test(test_cost test_cost.c)
# The predictive cost model (profile.h): fits, keys, sb_profile_apply
# (measured, estimated and analytic configs, the relayout fit), and the
# profiles' storage (the fastest of three launches chosen).
sb_unit_test(test_profile test_profile.c)
# profile_cli: `profile` on 2 ranks, search and bench priced by it, the
# database intact after a bench that profiles while it holds it open.
add_test(NAME profile_cli
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/profile_cli.sh $<TARGET_FILE:shardbench>
          ${MPIEXEC_EXECUTABLE} ${CMAKE_SOURCE_DIR})
set_tests_properties(profile_cli PROPERTIES TIMEOUT 300
  ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models;SHARDBENCH_MACHINES=${CMAKE_SOURCE_DIR}/machines")
