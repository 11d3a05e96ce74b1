# Training on a record file (run --data): losses equal on 1 and P ranks,
# differ from synthetic inputs, and a misfit file is refused.
add_executable(test_data_train ${CMAKE_CURRENT_SOURCE_DIR}/test_data_train.c)
target_link_libraries(test_data_train PRIVATE shardbench_static)
foreach(np 1 2 4)
  add_test(NAME test_data_train_np${np}
    COMMAND ${MPIEXEC_EXECUTABLE} --oversubscribe --allow-run-as-root -np ${np}
            $<TARGET_FILE:test_data_train>)
  set_tests_properties(test_data_train_np${np} PROPERTIES
    TIMEOUT 120
    ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;OPENBLAS_NUM_THREADS=1;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models")
endforeach()
