# fuzz_onnx: libFuzzer target for the ONNX importer (SHARDBENCH_FUZZ=ON, clang,
# ONNX support). Reuses tests/fuzz.cmake's shardbench_fuzzlib (the library
# sources compiled with fuzzer instrumentation), to which it adds the
# protoc-c bindings that cmake/onnx.cmake generates.
if(NOT SHARDBENCH_FUZZ OR NOT TARGET shardbench_fuzzlib OR NOT SB_HAVE_ONNX)
  return()
endif()
target_sources(shardbench_fuzzlib PRIVATE ${SB_ONNX_PB_C})
set_source_files_properties(${SB_ONNX_PB_C} TARGET_DIRECTORY shardbench_fuzzlib
  PROPERTIES GENERATED TRUE COMPILE_OPTIONS "-w")
add_dependencies(shardbench_fuzzlib shardbench_onnx_pb)
target_link_libraries(shardbench_fuzzlib PUBLIC PkgConfig::PROTOBUF_C)

add_executable(fuzz_onnx fuzz_onnx.c)
target_compile_options(fuzz_onnx PRIVATE ${SB_FUZZ_FLAGS} -fsanitize=fuzzer,address,undefined)
target_link_options(fuzz_onnx PRIVATE -fsanitize=fuzzer,address,undefined)
target_link_libraries(fuzz_onnx PRIVATE shardbench_fuzzlib)

# The seed corpus and the saved reproducers (tests/data/onnx/regress), each
# run once: a quick check inside ctest.
file(GLOB SB_FUZZ_ONNX_SEEDS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/data/onnx/*.onnx
  ${CMAKE_SOURCE_DIR}/tests/data/onnx/regress/*.bin)
add_test(NAME fuzz_onnx_replay COMMAND fuzz_onnx ${SB_FUZZ_ONNX_SEEDS})
