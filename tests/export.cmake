sb_unit_test(test_export test_export.c)

# export_extras: `export` of a version-2 strategy file (pipeline, ZeRO,
# recomputation): the text block, the JSON strategy_extras, the Python
# form's refusal.
add_test(NAME export_extras
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/export_extras.sh $<TARGET_FILE:shardbench>)
set_tests_properties(export_extras PROPERTIES TIMEOUT 300
  ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models")
