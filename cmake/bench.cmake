# cmake/bench.cmake: bench/step, shardbench's training step against PyTorch
# (bench/README.md). A benchmark, not a test: never registered with ctest.
# The PyTorch peer is read from the source tree at run time.
add_executable(bench_step ${CMAKE_SOURCE_DIR}/bench/step.c)
target_link_libraries(bench_step PRIVATE shardbench_static)
target_compile_definitions(bench_step PRIVATE
  SB_STEP_PEER="${CMAKE_SOURCE_DIR}/bench/step_torch.py")
set_target_properties(bench_step PROPERTIES
  RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench OUTPUT_NAME step)
