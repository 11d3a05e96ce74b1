# CPU compute kernels of the runtime (runtime/kernels/k_*.c, include/shardbench/kernels.h):
# part of libshardbench; their unit test.
sb_unit_test(test_kernels test_kernels.c)
# One BLAS thread: results independent of the machine, and fast under ASan.
set_property(TEST test_kernels APPEND PROPERTY ENVIRONMENT OPENBLAS_NUM_THREADS=1)
set_property(TEST test_kernels PROPERTY TIMEOUT 120)
