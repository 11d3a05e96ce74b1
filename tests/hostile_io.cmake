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

# Issue 39: hostile input of the third round (tests/hostile_input.sh): FIFOs
# and folders where checkpoints, record files and calibrations are read,
# overflowing checkpoint shapes, strategy lines a version does not define,
# repeated keys, --stages without --microbatches, a nightly whose baseline
# measures nothing or whose gnuplot scripts are missing, names from file
# names, bench's pasted hint, loose numbers. Every command under timeout.
# test_text: common/text.c (escaping, shell quoting, strict numbers) and
# sb_open_input.
sb_unit_test(test_text test_text.c)
set_tests_properties(test_text PROPERTIES TIMEOUT 60)
if(SB_SQLITE3_SHELL)
  add_test(NAME hostile_input
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/hostile_input.sh $<TARGET_FILE:shardbench>
            ${MPIEXEC_EXECUTABLE} ${CMAKE_SOURCE_DIR})
  set_tests_properties(hostile_input PROPERTIES
    TIMEOUT 600
    ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;OPENBLAS_NUM_THREADS=1;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models")
endif()
