# search --space full (the pipeline search, search/pipeline.c) end to end:
# forced stages, micro-batches and schedule in the table, JSON and strategy
# file; S = M = 1 equals plain; --memory respected or nothing-fits named.
add_test(NAME search_pipeline
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/search_pipeline.sh $<TARGET_FILE:shardbench>)
set_tests_properties(search_pipeline PROPERTIES TIMEOUT 120
  ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models")
