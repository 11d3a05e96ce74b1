# The cuda backend's kept bf16 conversions of GEMM operands and its wrapper
# of the backend entries that may write device memory (runtime/cuda/writes.hpp),
# on the CPU: tests/test_bf16_keep.cc trains five models (test sizes) with
# data parallel and the search's best on 2 ranks through "cpu-bf16" (the
# cpu-devmem table with the cuda backend's bf16 GEMM policy), keeping on
# and off: bit-identical losses and weights, some conversions read again.
# C++17 for writes.hpp's templates; with SHARDBENCH_CUDA=OFF it compiles
# runtime/cuda/cuda_host.c itself, as cuda_host does.
if(SHARDBENCH_CUDA)
  add_executable(test_bf16_keep test_bf16_keep.cc)
else()
  add_executable(test_bf16_keep test_bf16_keep.cc ${CMAKE_SOURCE_DIR}/runtime/cuda/cuda_host.c)
endif()
set_target_properties(test_bf16_keep PROPERTIES CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON
                                                CXX_EXTENSIONS OFF)
target_include_directories(test_bf16_keep PRIVATE ${CMAKE_SOURCE_DIR}/runtime/cuda)
# mpi.h in C++: the C API only (not the removed C++ bindings)
target_compile_definitions(test_bf16_keep PRIVATE OMPI_SKIP_MPICXX MPICH_SKIP_MPICXX)
target_link_libraries(test_bf16_keep PRIVATE shardbench_static)
add_test(NAME test_bf16_keep
  COMMAND ${MPIEXEC_EXECUTABLE} --oversubscribe --allow-run-as-root -np 2
          $<TARGET_FILE:test_bf16_keep>)
set_tests_properties(test_bf16_keep PROPERTIES TIMEOUT 300
  ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;OPENBLAS_NUM_THREADS=1;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models")
