# Every figure kind rendered (PNG and SVG) and its SVG read back: series in
# the legend's order, no colour repeated, the fidelity figure's y = x line,
# band and MAPE (tests/figures.sh, tests/svg_series.py; needs gnuplot,
# sqlite3 and python3).
add_test(NAME figures
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/figures.sh $<TARGET_FILE:shardbench> ${CMAKE_SOURCE_DIR})
set_tests_properties(figures PROPERTIES
  TIMEOUT 120
  ENVIRONMENT "SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models;SHARDBENCH_PLOTS=${CMAKE_SOURCE_DIR}/plots")
# figures_megatron: the same figures of a Megatron search's JSON (its
# stage_details against its pricer, the interleaved 1F1B schedule by hand;
# tests/figures_megatron.sh).
add_test(NAME figures_megatron
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/figures_megatron.sh $<TARGET_FILE:shardbench> ${CMAKE_SOURCE_DIR})
set_tests_properties(figures_megatron PROPERTIES
  TIMEOUT 120
  ENVIRONMENT "SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models;SHARDBENCH_PLOTS=${CMAKE_SOURCE_DIR}/plots")
