# cmake/onnx.cmake: the ONNX importer (models/onnx/*.c, which need the
# generated bindings; models/onnx/load.c does not). Included by the
# top-level CMakeLists.txt after the library targets exist.
#
# The C bindings of ONNX's protobuf schema are generated at build time by
# protoc-c (protobuf-c-compiler) from the onnx.proto that Debian's
# libonnx-dev ships, into BUILD/generated/onnx/onnx.pb-c.{c,h}, compiled into
# libshardbench, which then links libprotobuf-c. Without protoc-c,
# libprotobuf-c or the schema, the library still builds (models/onnx/import.c
# compiles to a stub, the handlers' files to nothing) but every import fails
# with "built without ONNX support"; SB_HAVE_ONNX (ON/OFF here) also selects what tests/tests.cmake
# builds (test_onnx, onnx_cli, fuzz_onnx).
find_program(SB_PROTOC_C protoc-c)
pkg_check_modules(PROTOBUF_C IMPORTED_TARGET libprotobuf-c)
set(SB_ONNX_PROTO /usr/include/onnx/onnx.proto CACHE FILEPATH "onnx.proto to generate the C bindings from")

if(NOT SB_PROTOC_C OR NOT PROTOBUF_C_FOUND OR NOT EXISTS ${SB_ONNX_PROTO})
  message(WARNING "ONNX import disabled: needs protoc-c, libprotobuf-c and ${SB_ONNX_PROTO} "
                  "(apt-get install protobuf-c-compiler libprotobuf-c-dev libonnx-dev)")
  set(SB_HAVE_ONNX OFF)
  return()
endif()
set(SB_HAVE_ONNX ON)
set(SB_PC_REQUIRES_ONNX "libprotobuf-c") # shardbench.pc: a static link needs it

set(SB_ONNX_GEN ${CMAKE_BINARY_DIR}/generated/onnx)
get_filename_component(SB_ONNX_PROTO_DIR ${SB_ONNX_PROTO} DIRECTORY)
get_filename_component(SB_ONNX_PROTO_NAME ${SB_ONNX_PROTO} NAME_WE)
set(SB_ONNX_PB_C ${SB_ONNX_GEN}/${SB_ONNX_PROTO_NAME}.pb-c.c)
set(SB_ONNX_PB_H ${SB_ONNX_GEN}/${SB_ONNX_PROTO_NAME}.pb-c.h)
file(MAKE_DIRECTORY ${SB_ONNX_GEN})
add_custom_command(
  OUTPUT ${SB_ONNX_PB_C} ${SB_ONNX_PB_H}
  COMMAND ${SB_PROTOC_C} --c_out=${SB_ONNX_GEN} -I${SB_ONNX_PROTO_DIR} ${SB_ONNX_PROTO}
  DEPENDS ${SB_ONNX_PROTO}
  COMMENT "protoc-c: C bindings of ${SB_ONNX_PROTO}"
  VERBATIM)
# A target that other directories (the fuzz library in tests/) can depend on.
add_custom_target(shardbench_onnx_pb DEPENDS ${SB_ONNX_PB_C} ${SB_ONNX_PB_H})

# Generated code is not ours to keep -Wall -Wextra clean.
set_source_files_properties(${SB_ONNX_PB_C} PROPERTIES COMPILE_OPTIONS "-w")
target_sources(shardbench_obj PRIVATE ${SB_ONNX_PB_C})
target_include_directories(shardbench_obj PRIVATE ${SB_ONNX_GEN})
target_compile_definitions(shardbench_obj PRIVATE SB_HAVE_ONNX=1
  SB_ONNX_PB_HEADER="${SB_ONNX_PROTO_NAME}.pb-c.h")
add_dependencies(shardbench_obj shardbench_onnx_pb)
foreach(t shardbench_obj shardbench_static shardbench_shared)
  target_link_libraries(${t} PUBLIC PkgConfig::PROTOBUF_C)
endforeach()
