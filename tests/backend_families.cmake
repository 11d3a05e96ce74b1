# The backend's kernel families (include/shardbench/backend.h): one small
# model per op kind runs on a backend holding only the families its ops
# and the executor declare, with the full CPU backend's losses; a backend
# without a family a model needs, or with an empty entry, is refused at
# creation naming the family and the op (tests/test_backend_families.c).
sb_unit_test(test_backend_families test_backend_families.c)
set_property(TEST test_backend_families APPEND PROPERTY ENVIRONMENT
  "ASAN_OPTIONS=detect_leaks=0" OPENBLAS_NUM_THREADS=1)
set_property(TEST test_backend_families PROPERTY TIMEOUT 120)
