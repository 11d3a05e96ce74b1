# cmake/perf.cmake: perf/step, shardbench's training step against PyTorch
# (perf/README.md). A benchmark, not a test: never registered with ctest.
# The PyTorch peer is read from the source tree at run time.
add_executable(bench_step ${CMAKE_SOURCE_DIR}/perf/step.c)
target_link_libraries(bench_step PRIVATE shardbench_static)
target_compile_definitions(bench_step PRIVATE
  SB_STEP_PEER="${CMAKE_SOURCE_DIR}/perf/step_torch.py")
set_target_properties(bench_step PROPERTIES
  RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/perf OUTPUT_NAME step)

# perf/checkpoint: sharded checkpoint save/restore against the disk's
# bandwidth (perf/README.md). A benchmark, not a test.
add_executable(bench_checkpoint ${CMAKE_SOURCE_DIR}/perf/checkpoint.c)
target_link_libraries(bench_checkpoint PRIVATE shardbench_static)
set_target_properties(bench_checkpoint PROPERTIES
  RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/perf OUTPUT_NAME checkpoint)

# perf/regress: false-alarm and detection rates of the nightly regression
# check, from launches stored in a results database (perf/README.md).
add_executable(bench_regress ${CMAKE_SOURCE_DIR}/perf/regress.c)
target_link_libraries(bench_regress PRIVATE shardbench_static)
set_target_properties(bench_regress PROPERTIES
  RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/perf OUTPUT_NAME regress)

# perf/gpu: the cuda backend against cuBLAS/cuDNN alone, full-step time,
# executor overhead and MFU (perf/README.md). Only with the cuda backend
# (cmake/cuda.cmake); it calls cuBLAS and cuDNN itself.
if(SHARDBENCH_CUDA)
  add_executable(bench_gpu ${CMAKE_SOURCE_DIR}/perf/gpu.c)
  target_link_libraries(bench_gpu PRIVATE shardbench_static)
  target_include_directories(bench_gpu PRIVATE ${CMAKE_SOURCE_DIR}/runtime/cuda
    ${SB_CUDNN_INCLUDE})
  set_target_properties(bench_gpu PROPERTIES
    RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/perf OUTPUT_NAME gpu)
endif()

# perf/memory: the memory model's peak per rank against the executor's
# measured peak, ZeRO 0-3 and recomputation off/on (perf/README.md). A
# benchmark, not a test; llama-tiny is read from the source tree.
add_executable(bench_memory ${CMAKE_SOURCE_DIR}/perf/memory.c)
target_link_libraries(bench_memory PRIVATE shardbench_static)
target_compile_definitions(bench_memory PRIVATE SB_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
set_target_properties(bench_memory PROPERTIES
  RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/perf OUTPUT_NAME memory)

# perf/gpu_model: the GPU op model's GEMM prices against cuBLAS on this GPU
# (perf/README.md). Built without CUDA too: --plan needs no GPU (ctest
# perf_gpu_model_plan); measuring needs the cuda backend.
add_executable(bench_gpu_model ${CMAKE_SOURCE_DIR}/perf/gpu_model.c)
target_link_libraries(bench_gpu_model PRIVATE shardbench_static)
if(SHARDBENCH_CUDA)
  target_link_libraries(bench_gpu_model PRIVATE CUDA::cublas CUDA::cudart)
endif()
set_target_properties(bench_gpu_model PROPERTIES
  RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/perf OUTPUT_NAME gpu_model)

# perf/gpu_attention: the fused attention kernel's measured rates (cuDNN through
# PyTorch, perf/gpu_attention.py, read from the source tree at run time) against
# the machine file's attn_fwd_tflops and attn_bwd_tflops (perf/README.md).
# Needs no CUDA to build: ctest perf_gpu_attention runs it without a GPU.
add_executable(bench_gpu_attention ${CMAKE_SOURCE_DIR}/perf/gpu_attention.c)
target_link_libraries(bench_gpu_attention PRIVATE shardbench_static)
target_compile_definitions(bench_gpu_attention PRIVATE
  SB_ATTN_PEER="${CMAKE_SOURCE_DIR}/perf/gpu_attention.py")
set_target_properties(bench_gpu_attention PROPERTIES
  RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/perf OUTPUT_NAME gpu_attention)
