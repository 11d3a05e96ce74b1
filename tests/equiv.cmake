# Runtime equivalence: every strategy computes what one device computes.
# One ctest per (model, P), P = 2 and 4 (one rank splits nothing): data
# parallel, the search's best and 8 random strategies, 3 SGD steps each,
# against a single-rank run. The search prices with F = 0.01 TFLOP/s
# (--flops): at the paper's 10 TFLOP/s and 16 GB/s nothing at these sizes
# is worth splitting and "best" would be the unsplit one-device strategy;
# test_equiv fails when the best strategy splits no op. The deep CNNs
# train with a small learning rate: batch norm over a handful of elements
# (tiny test images) makes them chaotic at larger ones, and then float
# rounding, not the strategy, decides the weights.
add_executable(test_equiv ${CMAKE_CURRENT_SOURCE_DIR}/test_equiv.c)
target_link_libraries(test_equiv PRIVATE shardbench_static)

set(SB_EQUIV_alexnet "--set;batch=4;--set;image=67;--set;classes=16;--set;width_div=16")
set(SB_EQUIV_resnet101 "--set;batch=4;--set;image=64;--set;classes=10;--set;width_div=16;--lr;0.0001")
set(SB_EQUIV_inception3 "--set;batch=4;--set;image=107;--set;classes=10;--set;width_div=16;--lr;0.0001")
set(SB_EQUIV_rnnlm "--set;batch=4;--set;vocab=24;--set;units=8;--set;seq=4;--set;layers=2")
set(SB_EQUIV_transformer "--set;batch=2;--set;vocab=16;--set;seq=4;--set;embed=8;--set;heads=2;--set;dk=4;--set;ff=16;--set;layers=1")
set(SB_EQUIV_transformer-large "--set;batch=2;--set;vocab=16;--set;seq=4;--set;embed=16;--set;heads=4;--set;dk=4;--set;ff=32;--set;layers=1")
foreach(model alexnet resnet101 inception3 rnnlm transformer transformer-large)
  foreach(np 2 4)
    add_test(NAME test_equiv_${model}_np${np}
      COMMAND ${MPIEXEC_EXECUTABLE} --oversubscribe --allow-run-as-root -np ${np}
              $<TARGET_FILE:test_equiv> ${model} ${SB_EQUIV_${model}} --seed ${np} --flops 0.01)
    set_tests_properties(test_equiv_${model}_np${np} PROPERTIES
      TIMEOUT 600
      ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;OPENBLAS_NUM_THREADS=1;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models")
  endforeach()
endforeach()

# The grouped-conv CNNs and the conv variants: every strategy as above plus
# one that splits the grouped convs' `group` dim as far as P allows
# (--split group: the test fails when no op splits it). resnext50: 64 x 64
# images, 4 groups of 1, 2, 4, 8 channels, batch 8 (at batch 4 its batch
# norms over a few elements make training chaotic: rounding, not the
# strategy, then decides the weights); mobilenet-v2 with 1/8 of its
# channels (its depthwise convs keep groups = channels); conv-variants
# (tests/data/models): patch embedding, dilated, grouped and depthwise
# convs, whose random strategies split the dilated kernels' kh and kw too.
set(SB_EQUIV_resnext50 "--set;batch=8;--set;image=64;--set;classes=10;--set;width_div=16;--set;groups=4;--set;group_width=1;--lr;0.000001;--split;group")
set(SB_EQUIV_mobilenet-v2 "--set;batch=8;--set;image=64;--set;classes=10;--set;width_div=8;--lr;0.00001;--split;group")
set(SB_EQUIV_conv-variants "--split;group;--random;12")
set(SB_EQUIV_MODEL_resnext50 resnext50)
set(SB_EQUIV_MODEL_mobilenet-v2 mobilenet-v2)
set(SB_EQUIV_MODEL_conv-variants ${CMAKE_CURRENT_SOURCE_DIR}/data/models/conv-variants.model)
foreach(model resnext50 mobilenet-v2 conv-variants)
  foreach(np 2 4)
    add_test(NAME test_equiv_${model}_np${np}
      COMMAND ${MPIEXEC_EXECUTABLE} --oversubscribe --allow-run-as-root -np ${np}
              $<TARGET_FILE:test_equiv> ${SB_EQUIV_MODEL_${model}} ${SB_EQUIV_${model}} --seed ${np}
              --flops 0.01)
    set_tests_properties(test_equiv_${model}_np${np} PROPERTIES
      TIMEOUT 600
      ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;OPENBLAS_NUM_THREADS=1;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models")
  endforeach()
endforeach()

# The executor's device-memory paths (inputs and weights staged through
# to_host/from_host, relayouts packed and exchanged by sb_relayout_run_mem,
# as on the cuda backend) on the host, through the "cpu-devmem" backend.
foreach(case transformer:4 rnnlm:4 alexnet:4 resnet101:2 inception3:2)
  string(REPLACE ":" ";" mp ${case})
  list(GET mp 0 model)
  list(GET mp 1 np)
  add_test(NAME test_equiv_${model}_np${np}_devmem
    COMMAND ${MPIEXEC_EXECUTABLE} --oversubscribe --allow-run-as-root -np ${np}
            $<TARGET_FILE:test_equiv> ${model} ${SB_EQUIV_${model}} --seed ${np} --flops 0.01
            --backend cpu-devmem)
  set_tests_properties(test_equiv_${model}_np${np}_devmem PROPERTIES
    TIMEOUT 600
    ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;OPENBLAS_NUM_THREADS=1;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models")
endforeach()
