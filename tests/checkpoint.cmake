# DTensor-style utilities (runtime/dtensor/: mesh, checkpoints, dataset,
# CRC-32C): the unit test (meshes, layouts, CRC-32C, datasets), the MPI
# checkpoint test on 1, 2 and 4 ranks, and `shardbench run --checkpoint /
# --restore` against an uninterrupted run (tests/ckpt_resume.sh).
sb_unit_test(test_dtensor ${CMAKE_CURRENT_SOURCE_DIR}/test_dtensor.c)

add_executable(test_checkpoint ${CMAKE_CURRENT_SOURCE_DIR}/test_checkpoint.c)
target_link_libraries(test_checkpoint PRIVATE shardbench_static)
foreach(np 1 2 4)
  add_test(NAME test_checkpoint_np${np}
    COMMAND ${MPIEXEC_EXECUTABLE} --oversubscribe --allow-run-as-root -np ${np}
            $<TARGET_FILE:test_checkpoint>)
  set_tests_properties(test_checkpoint_np${np} PROPERTIES
    TIMEOUT 120
    ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;OPENBLAS_NUM_THREADS=1;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models")
endforeach()

add_test(NAME test_ckpt_resume
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/ckpt_resume.sh $<TARGET_FILE:shardbench>
          ${MPIEXEC_EXECUTABLE})
# Budget 300 s: about 45 s alone in Sanitize, 90 s with the other core busy
# (many short launches under mpirun, each seconds of start-up).
set_tests_properties(test_ckpt_resume PROPERTIES
  TIMEOUT 300
  ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;OPENBLAS_NUM_THREADS=1;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models")

# Checkpoints of ZeRO-sliced state (tests/ckpt_zero.sh): Adam's moments at
# stages 1 and 3 and stage 3's weights, resumed at the same stage and
# resharded into another stage and P.
add_test(NAME test_ckpt_zero
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/ckpt_zero.sh $<TARGET_FILE:shardbench>
          ${MPIEXEC_EXECUTABLE})
set_tests_properties(test_ckpt_zero PROPERTIES
  TIMEOUT 120
  ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;OPENBLAS_NUM_THREADS=1;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models")
