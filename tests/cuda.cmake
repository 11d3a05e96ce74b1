# The cuda backend's tests (runtime/cuda/, runtime/kernels/cuda/).
# - cuda_host: its host-side logic (pool, algorithm cache, geometry, rank ->
#   GPU mapping, communicator cache), cmocka, runs everywhere: with
#   SHARDBENCH_CUDA=OFF it compiles runtime/cuda/cuda_host.c itself.
# - cuda_check (SHARDBENCH_CUDA=ON): every kernel of the cuda table against
#   the CPU table on random inputs; exits 77 (skipped) when there is no GPU.
#   cuda_check_self runs its harness with the CPU table on both sides.
if(SHARDBENCH_CUDA)
  sb_unit_test(cuda_host cuda_host.c)
else()
  sb_unit_test(cuda_host cuda_host.c ${CMAKE_SOURCE_DIR}/runtime/cuda/cuda_host.c)
endif()
target_include_directories(cuda_host PRIVATE ${CMAKE_SOURCE_DIR}/runtime/cuda)
set_property(TEST cuda_host PROPERTY TIMEOUT 60)
set_property(TEST cuda_host APPEND PROPERTY ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0" OPENBLAS_NUM_THREADS=1)

if(SHARDBENCH_CUDA)
  add_executable(cuda_check cuda_check.c)
  target_link_libraries(cuda_check PRIVATE shardbench_static)
  target_include_directories(cuda_check PRIVATE ${CMAKE_SOURCE_DIR}/runtime/cuda)
  add_test(NAME cuda_check COMMAND cuda_check)
  set_tests_properties(cuda_check PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300
    ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0:protect_shadow_gap=0;OPENBLAS_NUM_THREADS=1")
  # the harness itself, no GPU: the CPU table on both sides
  add_test(NAME cuda_check_self COMMAND cuda_check 5 --self)
  set_tests_properties(cuda_check_self PROPERTIES TIMEOUT 60
    ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;OPENBLAS_NUM_THREADS=1")
endif()
