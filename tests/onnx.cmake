# test_onnx: the ONNX importer (models/onnx/) on tests/data/onnx/*.onnx.
# Without ONNX support (cmake/onnx.cmake found no protoc-c), the same test
# checks that every import fails with "built without ONNX support".
sb_unit_test(test_onnx test_onnx.c)
if(SB_HAVE_ONNX)
  target_compile_definitions(test_onnx PRIVATE SB_HAVE_ONNX=1)
endif()
set_tests_properties(test_onnx PROPERTIES TIMEOUT 120)
