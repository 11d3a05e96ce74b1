# The command line under hostile files and values (tests/hostile_io.sh):
# another program's SQLite file, measurements that cannot be stored,
# non-finite numbers and a diverging run, writes that fail (old files kept),
# FIFOs, devices and directories as strategy files, a read-only folder,
# Markdown-breaking names, a bench killed by SIGKILL. Budget: 120 s (about
# 40 s on two cores in a Sanitize build).
find_program(SB_SQLITE3_SHELL sqlite3)
if(SB_SQLITE3_SHELL)
  add_test(NAME hostile_io
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/hostile_io.sh $<TARGET_FILE:shardbench> ${MPIEXEC_EXECUTABLE})
  set_tests_properties(hostile_io PROPERTIES
    TIMEOUT 300
    ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;OPENBLAS_NUM_THREADS=1;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models")
else()
  message(WARNING "sqlite3 (the shell) not found: test hostile_io not registered")
endif()
