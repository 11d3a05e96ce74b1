# libFuzzer targets (SHARDBENCH_FUZZ=ON, clang only); run them with
# scripts/fuzz.sh. The main library is built without sanitizer coverage, so
# the fuzz build compiles the library sources again into its own static
# library, with the same sources, include dirs and definitions as
# shardbench_obj (top-level CMakeLists.txt) plus the fuzzer instrumentation.
if(NOT SHARDBENCH_FUZZ)
  return()
endif()
if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
  message(WARNING "SHARDBENCH_FUZZ needs clang (configure with CC=clang); "
                  "fuzz targets are not built with ${CMAKE_C_COMPILER_ID}")
  return()
endif()

set(SB_FUZZ_FLAGS -g -O1 -fno-omit-frame-pointer -fno-sanitize-recover=all)

file(GLOB SB_FUZZ_LIB_SOURCES CONFIGURE_DEPENDS
  ${CMAKE_SOURCE_DIR}/common/*.c
  ${CMAKE_SOURCE_DIR}/results/*.c)
# models/ keeps its op builders and the ONNX importer in subfolders, cost/
# its per-kind cost rules (cost/ops/).
file(GLOB_RECURSE SB_FUZZ_MODELS_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/models/*.c
  ${CMAKE_SOURCE_DIR}/cost/*.c ${CMAKE_SOURCE_DIR}/search/*.c ${CMAKE_SOURCE_DIR}/strategy/*.c)
list(APPEND SB_FUZZ_LIB_SOURCES ${SB_FUZZ_MODELS_SOURCES})
add_library(shardbench_fuzzlib STATIC ${SB_FUZZ_LIB_SOURCES})
target_include_directories(shardbench_fuzzlib PUBLIC
  $<TARGET_PROPERTY:shardbench_obj,INCLUDE_DIRECTORIES>)
target_compile_definitions(shardbench_fuzzlib PRIVATE
  $<TARGET_PROPERTY:shardbench_obj,COMPILE_DEFINITIONS>)
target_compile_options(shardbench_fuzzlib PRIVATE
  ${SB_FUZZ_FLAGS} -fsanitize=fuzzer-no-link,address,undefined)
target_link_libraries(shardbench_fuzzlib PUBLIC SQLite::SQLite3 ${MATH_LIB})

# fuzz_parse: model-file parser, then problem build and search on small graphs.
add_executable(fuzz_parse fuzz_parse.c)
target_compile_options(fuzz_parse PRIVATE ${SB_FUZZ_FLAGS} -fsanitize=fuzzer,address,undefined)
target_link_options(fuzz_parse PRIVATE -fsanitize=fuzzer,address,undefined)
target_link_libraries(fuzz_parse PRIVATE shardbench_fuzzlib)

# The shipped models and any saved reproducers, each run once: a quick
# regression check inside ctest of a fuzz build.
file(GLOB SB_FUZZ_REPLAY CONFIGURE_DEPENDS
  ${CMAKE_SOURCE_DIR}/models/*.model
  ${CMAKE_SOURCE_DIR}/tests/fuzz-crashes/*)
list(FILTER SB_FUZZ_REPLAY EXCLUDE REGEX "/README[^/]*$")
add_test(NAME fuzz_parse_replay COMMAND fuzz_parse ${SB_FUZZ_REPLAY})

# fuzz_calibration: the calibration file reader, then the problem build and
# search of a small fixed model under every accepted file (no cost may come
# out non-finite). Its seeds (tests/data/calibration) each run once here.
add_executable(fuzz_calibration fuzz_calibration.c)
target_compile_options(fuzz_calibration PRIVATE ${SB_FUZZ_FLAGS} -fsanitize=fuzzer,address,undefined)
target_link_options(fuzz_calibration PRIVATE -fsanitize=fuzzer,address,undefined)
target_link_libraries(fuzz_calibration PRIVATE shardbench_fuzzlib)
file(GLOB SB_FUZZ_CAL_SEEDS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/data/calibration/*)
add_test(NAME fuzz_calibration_replay COMMAND fuzz_calibration ${SB_FUZZ_CAL_SEEDS})

# fuzz_strategy: the strategy file reader on a small fixed model at p = 4;
# an accepted file must choose valid configs and survive a save and reload.
# Its seeds (tests/data/strategy/*.strategy) each run once here.
add_executable(fuzz_strategy fuzz_strategy.c)
target_compile_options(fuzz_strategy PRIVATE ${SB_FUZZ_FLAGS} -fsanitize=fuzzer,address,undefined)
target_link_options(fuzz_strategy PRIVATE -fsanitize=fuzzer,address,undefined)
target_link_libraries(fuzz_strategy PRIVATE shardbench_fuzzlib PkgConfig::JANSSON)
file(GLOB SB_FUZZ_STRATEGY_SEEDS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/data/strategy/*.strategy)
add_test(NAME fuzz_strategy_replay COMMAND fuzz_strategy ${SB_FUZZ_STRATEGY_SEEDS})

# fuzz_hf: the Hugging Face config reader (models/hf/): a refusal carries a
# message and status 2, an accepted config's model text parses. Its seeds
# (tests/data/hf/*/config.json) each run once here.
add_executable(fuzz_hf fuzz_hf.c)
target_compile_options(fuzz_hf PRIVATE ${SB_FUZZ_FLAGS} -fsanitize=fuzzer,address,undefined)
target_link_options(fuzz_hf PRIVATE -fsanitize=fuzzer,address,undefined)
target_link_libraries(fuzz_hf PRIVATE shardbench_fuzzlib PkgConfig::JANSSON)
file(GLOB SB_FUZZ_HF_SEEDS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/data/hf/*/config.json)
add_test(NAME fuzz_hf_replay COMMAND fuzz_hf ${SB_FUZZ_HF_SEEDS})
