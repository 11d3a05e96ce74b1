# Machine files (docs/machines.md):
# - test_machine: the parser (a good file, every error class naming
#   file:line, the key and the value), the shipped files, one all-reduce
#   term computed by hand, p <= devices_per_node using the intra-node link;
# - machine_cli: --machine on search (a finite total at p = 64 different
#   from the reference), refusals of --flops, --bw, --calibration with it.
sb_unit_test(test_machine test_machine.c)
add_test(NAME machine_cli
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/machine_cli.sh $<TARGET_FILE:shardbench>
          ${CMAKE_SOURCE_DIR})
set_tests_properties(machine_cli PROPERTIES TIMEOUT 300
  ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models;SHARDBENCH_MACHINES=${CMAKE_SOURCE_DIR}/machines")
# - test_collectives: the placement of a group of an op's grid on nodes (by
#   hand, against a rank-by-rank count of every group of power-of-two grids,
#   a grid that does not line up), each collective's pricing function by
#   hand-computed figures, and the reference terms unchanged without nodes.
sb_unit_test(test_collectives test_collectives.c)

# paper_table2: `paper --table2` (strategies/paper-table2.tsv): the shipped
# paper strategies are what the table gives, every row printed, the
# paper's total >= ours under the reference model, JSON, damaged tables.
add_test(NAME paper_table2
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/paper_table2.sh $<TARGET_FILE:shardbench>
          ${CMAKE_SOURCE_DIR})
set_tests_properties(paper_table2 PROPERTIES TIMEOUT 300
  ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models;SHARDBENCH_MACHINES=${CMAKE_SOURCE_DIR}/machines;SHARDBENCH_STRATEGIES=${CMAKE_SOURCE_DIR}/strategies")
# precision_cli: --precision and --grad-reduce-dtype (docs/cost-model.md,
# "Precision"): the machine file's default recipe, each recipe's peak and
# bytes per parameter and activation, the refusals (fp8 on an A100, a
# precision without --machine), a file without a precision line is fp32.
add_test(NAME precision_cli
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/precision_cli.sh $<TARGET_FILE:shardbench>
          ${CMAKE_SOURCE_DIR})
set_tests_properties(precision_cli PROPERTIES TIMEOUT 300
  ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models;SHARDBENCH_MACHINES=${CMAKE_SOURCE_DIR}/machines")
# test_megatron: the GPU op model (GEMM tile and wave quantization, memory-bound
# kernels, collectives at bus bandwidth) by hand, a Megatron configuration's
# breakdown, bubble and bytes, the refusals of bad degrees, the grid search.
sb_unit_test(test_megatron test_megatron.c)
# megatron_cli: search --algo megatron (a configuration given, the JSON a planner
# reads, the grid's best, bad degrees refused) and validate: the published runs of
# tests/data/published-runs.tsv within MAPE 7% and 15% (it fails over them), its
# formats, malformed rows refused naming file:line.
add_test(NAME megatron_cli
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/megatron_cli.sh $<TARGET_FILE:shardbench>
          ${CMAKE_SOURCE_DIR})
set_tests_properties(megatron_cli PROPERTIES TIMEOUT 300
  ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models;SHARDBENCH_MACHINES=${CMAKE_SOURCE_DIR}/machines")
# validate: `shardbench validate` alone, as a user runs it: exit 1 over the target
# (MAPE 7%, largest error 15%) or when the grid's best is slower than a published run.
add_test(NAME validate COMMAND shardbench validate)
set_tests_properties(validate PROPERTIES TIMEOUT 120
  ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;SHARDBENCH_MACHINES=${CMAKE_SOURCE_DIR}/machines")
# search_refuse: a plain search whose DP tables are bounded over --max-table-mb
# refused before the DP in seconds (exit 2, the bound and what to do); the bound
# at least the DP's peak; a limit at the bound runs (search/dp_estimate.c).
add_test(NAME search_refuse
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/search_refuse.sh $<TARGET_FILE:shardbench>)
set_tests_properties(search_refuse PROPERTIES TIMEOUT 300
  ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models;SHARDBENCH_MACHINES=${CMAKE_SOURCE_DIR}/machines")
# op_breakdown: the op-level searches' time_breakdown_seconds (--algo megatron's
# keys, summing to the step) for the plain and full spaces; --dp-overlap.
add_test(NAME op_breakdown
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/op_breakdown.sh $<TARGET_FILE:shardbench>)
set_tests_properties(op_breakdown PROPERTIES TIMEOUT 300
  ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models;SHARDBENCH_MACHINES=${CMAKE_SOURCE_DIR}/machines")
