# test_onnx: the ONNX importer (models/onnx/) on tests/data/onnx/*.onnx.
# Without ONNX support (cmake/onnx.cmake found no protoc-c), the same test
# checks that every import fails with "built without ONNX support".
sb_unit_test(test_onnx test_onnx.c)
if(SB_HAVE_ONNX)
  target_compile_definitions(test_onnx PRIVATE SB_HAVE_ONNX=1
    SB_ONNX_PB_HEADER="${SB_ONNX_PROTO_NAME}.pb-c.h")
  target_include_directories(test_onnx PRIVATE ${SB_ONNX_GEN}) # protobuf-c: inputs edited
endif()
set_tests_properties(test_onnx PROPERTIES TIMEOUT 120)

# test_onnx_dyn: dynamic-axis exports and nn.Transformer (make_dyn.py).
sb_unit_test(test_onnx_dyn test_onnx_dyn.c)
if(SB_HAVE_ONNX)
  target_compile_definitions(test_onnx_dyn PRIVATE SB_HAVE_ONNX=1)
endif()
set_tests_properties(test_onnx_dyn PROPERTIES TIMEOUT 120 SKIP_RETURN_CODE 77)

# onnx_cli: the exports of make_llm.py through `shardbench search -p 8`,
# `mpirun -np 2 shardbench run --strategy best --steps 2` and test_equiv on
# 2 ranks (tests/onnx_cli.sh; test_equiv is built by equiv.cmake).
if(SB_HAVE_ONNX)
  add_test(NAME onnx_cli
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/onnx_cli.sh $<TARGET_FILE:shardbench>
            $<TARGET_FILE:test_equiv> ${CMAKE_SOURCE_DIR}/tests/data/onnx ${MPIEXEC_EXECUTABLE})
  set_tests_properties(onnx_cli PROPERTIES TIMEOUT 420
    ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;OPENBLAS_NUM_THREADS=1")
endif()
