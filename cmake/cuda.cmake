# cmake/cuda.cmake: the cuda backend (runtime/cuda/, runtime/kernels/cuda/), included by the top
# CMakeLists.txt after the library targets.
#
# SHARDBENCH_CUDA defaults to ON when a CUDA compiler (nvcc) is found. Then
# every .cu under runtime/ (the backend in runtime/cuda/, its kernels in
# runtime/kernels/cuda/) and the .c files of folders named cuda/ join
# shardbench_obj, SB_HAVE_CUDA is defined for the whole library
# (runtime/backend/backend_cuda_none.c steps aside), and the library
# links cudart, cuBLAS, cuDNN and NCCL (found under the toolkit, the
# SHARDBENCH_CUDNN_ROOT / SHARDBENCH_NCCL_ROOT folders or NVIDIA's Python
# wheels; a library found only in a wheel is on the build tree's RPATH but
# its neighbours, which cuDNN loads by name, need LD_LIBRARY_PATH). Device
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

  # cuDNN and NCCL: under the toolkit, under SHARDBENCH_CUDNN_ROOT /
  # SHARDBENCH_NCCL_ROOT (or $CUDNN_ROOT / $NCCL_ROOT), or in NVIDIA's Python
  # wheels (site-packages/nvidia/{cudnn,nccl}/{include,lib}, which ship only
  # the versioned libcudnn.so.9 and libnccl.so.2).
  set(SHARDBENCH_CUDNN_ROOT "$ENV{CUDNN_ROOT}" CACHE PATH "cuDNN's folder (include/, lib/) when not under the toolkit")
  set(SHARDBENCH_NCCL_ROOT "$ENV{NCCL_ROOT}" CACHE PATH "NCCL's folder (include/, lib/) when not under the toolkit")
  set(SB_WHEEL_CUDNN "")
  set(SB_WHEEL_NCCL "")
  find_program(SB_PYTHON3 NAMES python3 python)
  if(SB_PYTHON3)
    foreach(pkg cudnn nccl)
      execute_process(COMMAND ${SB_PYTHON3} -c
        "import importlib.util as u; s = u.find_spec('nvidia.${pkg}'); print(list(s.submodule_search_locations)[0] if s else '')"
        OUTPUT_VARIABLE SB_WHEEL_DIR OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
      string(TOUPPER ${pkg} PKG)
      if(SB_WHEEL_DIR AND IS_DIRECTORY "${SB_WHEEL_DIR}")
        set(SB_WHEEL_${PKG} "${SB_WHEEL_DIR}")
      endif()
    endforeach()
  endif()
  set(SB_CUDA_HINTS ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}/lib64
      ${CUDAToolkit_TARGET_DIR}/lib64 /usr/local/cuda/lib64 /usr/local/cuda/lib)
  set(SB_CUDNN_ROOTS ${SHARDBENCH_CUDNN_ROOT} ${SB_WHEEL_CUDNN})
  set(SB_NCCL_ROOTS ${SHARDBENCH_NCCL_ROOT} ${SB_WHEEL_NCCL})
  find_library(SB_CUDNN_LIB NAMES cudnn libcudnn.so.9
    HINTS ${SB_CUDA_HINTS} PATHS ${SB_CUDNN_ROOTS} PATH_SUFFIXES lib lib64)
  find_library(SB_NCCL_LIB NAMES nccl libnccl.so.2
    HINTS ${SB_CUDA_HINTS} PATHS ${SB_NCCL_ROOTS} PATH_SUFFIXES lib lib64)
  find_path(SB_CUDNN_INCLUDE cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include
    PATHS ${SB_CUDNN_ROOTS} PATH_SUFFIXES include)
  find_path(SB_NCCL_INCLUDE nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include
    PATHS ${SB_NCCL_ROOTS} PATH_SUFFIXES include)
  foreach(v SB_CUDNN_LIB SB_NCCL_LIB SB_CUDNN_INCLUDE SB_NCCL_INCLUDE)
    if(NOT ${v})
      message(FATAL_ERROR "cuda backend: ${v} not found (cuDNN 9 and NCCL 2 are looked for under "
                          "the toolkit, SHARDBENCH_CUDNN_ROOT / SHARDBENCH_NCCL_ROOT and the "
                          "nvidia-cudnn / nvidia-nccl Python wheels); configure with -DSHARDBENCH_CUDA=OFF to build without")
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
  # a wheel's library is only there versioned: -l:libcudnn.so.9
  set(SB_PC_DNN_NCCL "")
  foreach(l ${SB_CUDNN_LIB} ${SB_NCCL_LIB})
    get_filename_component(n ${l} NAME)
    if(n MATCHES "^lib([a-z]+)\\.so$")
      list(APPEND SB_PC_DNN_NCCL "-l${CMAKE_MATCH_1}")
    else()
      list(APPEND SB_PC_DNN_NCCL "-l:${n}")
    endif()
  endforeach()
  string(JOIN " " SB_PC_DNN_NCCL ${SB_PC_DNN_NCCL})
  set(SB_PC_CUDA "-L${CUDAToolkit_LIBRARY_DIR} -L${SB_CUDNN_DIR} -L${SB_NCCL_DIR} -lcudart -lcublas ${SB_PC_DNN_NCCL} -lstdc++")
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
