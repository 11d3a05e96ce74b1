# cmake/cuda.cmake: the cuda backend (runtime/cuda/, runtime/kernels/cuda/), included by the top
# CMakeLists.txt after the library targets.
#
# SHARDBENCH_CUDA defaults to ON when a CUDA compiler (nvcc) is found. Then
# every .cu under runtime/ (the backend in runtime/cuda/, its kernels in
# runtime/kernels/cuda/) and the .c files of folders named cuda/ join
# shardbench_obj, SB_HAVE_CUDA is defined for the whole library
# (runtime/backend/backend_cuda_none.c steps aside), and the library
# links cudart, cuBLAS, cuDNN and NCCL (found under the toolkit). Device
# code is built for sm_90 (H100/H200) plus PTX for later GPUs.
#
# Sanitizers: nvcc does not take -fsanitize, so .cu files get the build
# type's optimization flags only (CMAKE_CUDA_FLAGS_SANITIZE); host .c files
# keep ASan/UBSan. Builds without a GPU compile and link everything; the
# backend then reports "no GPU" at start-up.
include(CheckLanguage)
check_language(CUDA)
if(CMAKE_CUDA_COMPILER)
  set(SB_CUDA_DEFAULT ON)
else()
  set(SB_CUDA_DEFAULT OFF)
endif()
option(SHARDBENCH_CUDA "Build the cuda backend (cuBLAS, cuDNN, NCCL)" ${SB_CUDA_DEFAULT})

if(SHARDBENCH_CUDA)
  if(NOT CMAKE_CUDA_COMPILER)
    message(FATAL_ERROR "SHARDBENCH_CUDA=ON but no CUDA compiler (nvcc) was found; "
                        "put /usr/local/cuda/bin on PATH or configure with -DSHARDBENCH_CUDA=OFF")
  endif()
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES "90-real;90-virtual")
  endif()
  set(CMAKE_CUDA_STANDARD 17)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  # nvcc gets no sanitizer flags; -g for host code is enough under Sanitize.
  set(CMAKE_CUDA_FLAGS_SANITIZE "-O1 -g")
  set(CMAKE_CUDA_FLAGS_RELEASE "-O2")
  set(CMAKE_CUDA_FLAGS_DEBUG "-O0 -g")
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)

  set(SB_CUDA_HINTS ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}/lib64
      ${CUDAToolkit_TARGET_DIR}/lib64 /usr/local/cuda/lib64 /usr/local/cuda/lib)
  find_library(SB_CUDNN_LIB cudnn HINTS ${SB_CUDA_HINTS})
  find_library(SB_NCCL_LIB nccl HINTS ${SB_CUDA_HINTS})
  find_path(SB_CUDNN_INCLUDE cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include)
  find_path(SB_NCCL_INCLUDE nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include)
  foreach(v SB_CUDNN_LIB SB_NCCL_LIB SB_CUDNN_INCLUDE SB_NCCL_INCLUDE)
    if(NOT ${v})
      message(FATAL_ERROR "cuda backend: ${v} not found (cuDNN 9 and NCCL 2 are expected under "
                          "/usr/local/cuda); configure with -DSHARDBENCH_CUDA=OFF to build without")
    endif()
  endforeach()

  # every .cu under runtime/, and the host .c files of any folder named cuda/
  file(GLOB_RECURSE SB_CUDA_SOURCES CONFIGURE_DEPENDS
    ${CMAKE_SOURCE_DIR}/runtime/*.c ${CMAKE_SOURCE_DIR}/runtime/*.cu)
  list(FILTER SB_CUDA_SOURCES INCLUDE REGEX "(\\.cu|/cuda/[^/]*\\.c)$")
  target_sources(shardbench_obj PRIVATE ${SB_CUDA_SOURCES})
  target_compile_definitions(shardbench_obj PUBLIC SB_HAVE_CUDA=1)
  target_include_directories(shardbench_obj PRIVATE ${CMAKE_SOURCE_DIR}/runtime/cuda
    ${SB_CUDNN_INCLUDE} ${SB_NCCL_INCLUDE})
  # add_compile_options(-Wall -Wextra) reached shardbench_obj for every
  # language; nvcc does not take them: keep them for C, hand them to nvcc's
  # host compiler through -Xcompiler.
  get_target_property(SB_OBJ_OPTS shardbench_obj COMPILE_OPTIONS)
  if(SB_OBJ_OPTS)
    set(SB_OBJ_OPTS_C "")
    foreach(o ${SB_OBJ_OPTS})
      list(APPEND SB_OBJ_OPTS_C "$<$<NOT:$<COMPILE_LANGUAGE:CUDA>>:${o}>")
    endforeach()
    set_target_properties(shardbench_obj PROPERTIES COMPILE_OPTIONS "${SB_OBJ_OPTS_C}")
  endif()
  target_compile_options(shardbench_obj PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra --expt-relaxed-constexpr>)
  set(SB_CUDA_LIBS CUDA::cudart CUDA::cublas ${SB_CUDNN_LIB} ${SB_NCCL_LIB})
  target_link_libraries(shardbench_obj PUBLIC ${SB_CUDA_LIBS})
  # what a static link of libshardbench.a needs besides (shardbench.pc's
  # Libs.private): the CUDA runtime, cuBLAS, cuDNN, NCCL and C++'s runtime
  # (nvcc's objects use it)
  get_filename_component(SB_CUDNN_DIR ${SB_CUDNN_LIB} DIRECTORY)
  get_filename_component(SB_NCCL_DIR ${SB_NCCL_LIB} DIRECTORY)
  set(SB_PC_CUDA "-L${CUDAToolkit_LIBRARY_DIR} -L${SB_CUDNN_DIR} -L${SB_NCCL_DIR} -lcudart -lcublas -lcudnn -lnccl -lstdc++")
  # the targets predate enable_language(CUDA): give them the architectures
  set_target_properties(shardbench_obj shardbench_static shardbench_shared PROPERTIES
    CUDA_ARCHITECTURES "${CMAKE_CUDA_ARCHITECTURES}")
  foreach(t shardbench_static shardbench_shared)
    target_link_libraries(${t} PUBLIC ${SB_CUDA_LIBS})
    target_compile_definitions(${t} PUBLIC SB_HAVE_CUDA=1)
  endforeach()
  message(STATUS "cuda backend: ON (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, arch ${CMAKE_CUDA_ARCHITECTURES}, "
                 "cuDNN ${SB_CUDNN_LIB}, NCCL ${SB_NCCL_LIB})")
else()
  message(STATUS "cuda backend: OFF")
endif()
