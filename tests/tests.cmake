# tests/tests.cmake: every test of the suite, registered here and nowhere
# else, by topic (the topics in alphabetical order: equiv's sb_equiv comes
# before hf's use of it, export_jax's Python before hf_ref's). The programs
# and scripts live by kind: unit/ (cmocka, one process), mpi/ (programs
# under mpirun), cli/ (scripts driving the `shardbench` command), fuzz/
# (libFuzzer targets); data/ what they read; gpu/ the GPU check run by
# hand; jax/ export_jax's JAX side; golden/ test_export's files. The
# labels at the end (ctest -L unit|mpi|cli|fuzz|tree) give each test the
# kind of its program; a test without one stops the configuration.
# Included by tests/CMakeLists.txt, which defines sb_unit_test.

# ---- bench_other
# The bench's view of other work on the machine (measure/bench.c): busy
# seconds of /proc/stat, the other cores of a launch, the strategies that
# get another trial round, the yield-when-idle environment, the default
# launcher's binding by ranks and CPUs. Fixed numbers,
# no timing.
sb_unit_test(test_bench_other unit/test_bench_other.c)

# ---- bench_pipeline
# The bench pipeline: unit tests of results/query.c (JSON reader, Spearman's
# rho, schema migration 1 -> 2, correlations) and an end-to-end test of
# `shardbench bench`, `plot`, `report` and `regress` on a tiny AlexNet at
# p = 2 (tests/cli/bench_pipeline.sh; needs mpirun, gnuplot and sqlite3).
sb_unit_test(test_bench_pipeline unit/bench_pipeline.c)

add_test(NAME bench_pipeline
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/bench_pipeline.sh $<TARGET_FILE:shardbench>
          ${CMAKE_SOURCE_DIR})
set_tests_properties(bench_pipeline PROPERTIES
  TIMEOUT 180
  ENVIRONMENT "OPENBLAS_NUM_THREADS=1;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models;SHARDBENCH_PLOTS=${CMAKE_SOURCE_DIR}/plots")

# ---- bench_search
# perf/search --memory (the full space, search/lagrange.c's walks seeded and
# unseeded): a small Transformer within 0.5 GiB, where stages are solved by
# the Lagrangian walk, its figures stored; --check fails (exit 1, "DIFFERS")
# when the seeded and unseeded searches disagree. --limit-mb 0: no
# address-space cap, which AddressSanitizer's reservations would exceed.
add_test(NAME bench_search_memory
  COMMAND $<TARGET_FILE:bench_search> --models transformer -p 4 --memory 0.5 --check
          --repeat 1 --limit-mb 0 --db ${CMAKE_CURRENT_BINARY_DIR}/bench_search_memory.db)
set_tests_properties(bench_search_memory PROPERTIES TIMEOUT 120
  PASS_REGULAR_EXPRESSION "check: the search with its Lagrangian walks unseeded gives the same cost"
  FAIL_REGULAR_EXPRESSION "DIFFERS|failed"
  ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models")

# ---- perf_gpu_model_plan
# perf/gpu_model --plan (tests/cli/gpu_model_plan.sh): the GEMMs of the published
# H100 runs' layers as the op model prices them, each row recomputed from the
# machine file; bad options refused. Measuring needs a GPU (tests/gpu/run.sh).
add_test(NAME perf_gpu_model_plan
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/gpu_model_plan.sh $<TARGET_FILE:bench_gpu_model>
          ${CMAKE_SOURCE_DIR})
set_tests_properties(perf_gpu_model_plan PROPERTIES TIMEOUT 60
  ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;SHARDBENCH_MACHINES=${CMAKE_SOURCE_DIR}/machines")

# ---- perf_gpu_attention
# perf/gpu_attention without a GPU (tests/cli/gpu_attention.sh): --plan recomputed
# from the machine files, the measuring path against a stand-in peer (table,
# results database, fragment validate reads), the peer's failures, bad options.
add_test(NAME perf_gpu_attention
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/gpu_attention.sh $<TARGET_FILE:bench_gpu_attention>
          ${CMAKE_SOURCE_DIR} $<TARGET_FILE:shardbench>)
set_tests_properties(perf_gpu_attention PROPERTIES TIMEOUT 120
  ENVIRONMENT "SHARDBENCH_MACHINES=${CMAKE_SOURCE_DIR}/machines;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models")

# ---- gpu_measured_machines
# tests/gpu/measured_machines.sh (tests/cli/measured_machines.sh): the machines
# folder tests/gpu/run.sh builds from a GPU's measured fragments for validate:
# the fragments' keys replaced once each, validate reading it, machines/
# unchanged, bad fragments and machines refused.
add_test(NAME gpu_measured_machines
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/measured_machines.sh $<TARGET_FILE:shardbench>
          ${CMAKE_SOURCE_DIR})
set_tests_properties(gpu_measured_machines PROPERTIES TIMEOUT 120
  ENVIRONMENT "SHARDBENCH_MACHINES=${CMAKE_SOURCE_DIR}/machines;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models")

# ---- bf16_keep
# The cuda backend's kept bf16 conversions of GEMM operands and its list
# of table entries that may write device memory (runtime/cuda/writes.hpp),
# on the CPU: tests/mpi/test_bf16_keep.cc trains five models (test sizes) with
# data parallel and the search's best on 2 ranks through "cpu-bf16" (the
# cpu-devmem table with the cuda backend's bf16 GEMM policy), keeping on
# and off: bit-identical losses and weights, some conversions read again.
# C++17 for writes.hpp's templates; with SHARDBENCH_CUDA=OFF it compiles
# runtime/cuda/cuda_host.c itself, as cuda_host does.
if(SHARDBENCH_CUDA)
  add_executable(test_bf16_keep mpi/test_bf16_keep.cc)
else()
  add_executable(test_bf16_keep mpi/test_bf16_keep.cc ${CMAKE_SOURCE_DIR}/runtime/cuda/cuda_host.c)
endif()
set_target_properties(test_bf16_keep PROPERTIES CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON
                                                CXX_EXTENSIONS OFF)
target_include_directories(test_bf16_keep PRIVATE ${CMAKE_SOURCE_DIR}/runtime/cuda)
# mpi.h in C++: the C API only (not the removed C++ bindings)
target_compile_definitions(test_bf16_keep PRIVATE OMPI_SKIP_MPICXX MPICH_SKIP_MPICXX)
target_link_libraries(test_bf16_keep PRIVATE shardbench_static)
add_test(NAME test_bf16_keep
  COMMAND ${MPIEXEC_EXECUTABLE} --oversubscribe --allow-run-as-root -np 2
          $<TARGET_FILE:test_bf16_keep>)
set_tests_properties(test_bf16_keep PROPERTIES TIMEOUT 300
  ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;OPENBLAS_NUM_THREADS=1;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models")

# ---- calibration
# The calibrated cost model's file and constants:
# - test_calibration: the reader's ranges (absurd but finite values refused
#   with file:line and the value), finite costs at the ranges' corners, and
#   sb_problem_build refusing a cost that is not a number;
# - calibration_cli: search, prune and candidates with such a file exit 2,
#   print no nan or inf and store nothing;
# - calibrate_rate: `calibrate` on 2 ranks against a cblas_sgemm and an add
#   loop timed in the test itself (GEMM rate within 2x, elem_ratio within
#   8x; best of 3 rounds on a loaded machine). About 5-15 s on two cores.
sb_unit_test(test_calibration unit/test_calibration.c)
add_test(NAME calibration_cli
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/calibration_cli.sh $<TARGET_FILE:shardbench>
          ${CMAKE_CURRENT_SOURCE_DIR}/data/calibration)
set_tests_properties(calibration_cli PROPERTIES TIMEOUT 120
  ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models")
add_executable(calibrate_rate cli/calibrate_rate.c)
target_link_libraries(calibrate_rate PRIVATE shardbench_static)
add_test(NAME calibrate_rate
  COMMAND calibrate_rate $<TARGET_FILE:shardbench> ${MPIEXEC_EXECUTABLE})
set_tests_properties(calibrate_rate PROPERTIES TIMEOUT 300
  ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models")

# ---- checkpoint
# DTensor-style utilities (runtime/dtensor/: mesh, checkpoints, dataset,
# CRC-32C): the unit test (meshes, layouts, CRC-32C, datasets), the MPI
# checkpoint test on 1, 2 and 4 ranks, and `shardbench run --checkpoint /
# --restore` against an uninterrupted run (tests/cli/ckpt_resume.sh).
sb_unit_test(test_dtensor ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_dtensor.c)

add_executable(test_checkpoint ${CMAKE_CURRENT_SOURCE_DIR}/mpi/test_checkpoint.c)
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
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/ckpt_resume.sh $<TARGET_FILE:shardbench>
          ${MPIEXEC_EXECUTABLE})
# Budget 300 s: about 45 s alone in Sanitize, 90 s with the other core busy
# (many short launches under mpirun, each seconds of start-up).
set_tests_properties(test_ckpt_resume PROPERTIES
  TIMEOUT 300
  ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;OPENBLAS_NUM_THREADS=1;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models")

# Checkpoints of ZeRO-sliced state (tests/cli/ckpt_zero.sh): Adam's moments at
# stages 1 and 3 and stage 3's weights, resumed at the same stage and
# resharded into another stage and P.
add_test(NAME test_ckpt_zero
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/ckpt_zero.sh $<TARGET_FILE:shardbench>
          ${MPIEXEC_EXECUTABLE})
set_tests_properties(test_ckpt_zero PROPERTIES
  TIMEOUT 120
  ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;OPENBLAS_NUM_THREADS=1;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models")

# ---- cost
sb_unit_test(test_cost unit/test_cost.c)
# The predictive cost model (profile.h): fits, keys, sb_profile_apply
# (measured, estimated and analytic configs, the relayout fit), and the
# profiles' storage (the fastest of three launches chosen).
sb_unit_test(test_profile unit/test_profile.c)
# profile_cli: `profile` on 2 ranks, search and bench priced by it, the
# database intact after a bench that profiles while it holds it open.
add_test(NAME profile_cli
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/profile_cli.sh $<TARGET_FILE:shardbench>
          ${MPIEXEC_EXECUTABLE} ${CMAKE_SOURCE_DIR})
set_tests_properties(profile_cli PROPERTIES TIMEOUT 300
  ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models;SHARDBENCH_MACHINES=${CMAKE_SOURCE_DIR}/machines")

# ---- cpuset
# The CPUs and threads of a rank (common/cpuset.c): the pure parts (share,
# CPU lists, the launcher's binding from its environment) as a cmocka
# test, and `shardbench run` under mpirun (tests/cli/cpuset_cli.sh: default
# binding widened to the share, --keep-binding, --bind-to core,
# OPENBLAS_NUM_THREADS, two ranks). About 10 s on two cores.
sb_unit_test(test_cpuset unit/test_cpuset.c)
add_test(NAME cpuset_cli
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/cpuset_cli.sh $<TARGET_FILE:shardbench> ${MPIEXEC_EXECUTABLE})
set_tests_properties(cpuset_cli PROPERTIES
  TIMEOUT 120 SKIP_RETURN_CODE 77
  ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models")

# ---- cuda
# The cuda backend's tests (runtime/cuda/, runtime/kernels/cuda/).
# - cuda_host: its host-side logic (pool, algorithm cache, geometry, rank ->
#   GPU mapping, communicator cache), cmocka, runs everywhere: with
#   SHARDBENCH_CUDA=OFF it compiles runtime/cuda/cuda_host.c itself.
# - cuda_check (SHARDBENCH_CUDA=ON): every kernel of the cuda table against
#   the CPU table on random inputs; exits 77 (skipped) when there is no GPU.
#   cuda_check_self runs its harness with the CPU table on both sides.
if(SHARDBENCH_CUDA)
  sb_unit_test(cuda_host unit/cuda_host.c)
else()
  sb_unit_test(cuda_host unit/cuda_host.c ${CMAKE_SOURCE_DIR}/runtime/cuda/cuda_host.c)
endif()
target_include_directories(cuda_host PRIVATE ${CMAKE_SOURCE_DIR}/runtime/cuda)
set_property(TEST cuda_host PROPERTY TIMEOUT 60)
set_property(TEST cuda_host APPEND PROPERTY ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0" OPENBLAS_NUM_THREADS=1)

if(SHARDBENCH_CUDA)
  add_executable(cuda_check unit/cuda_check.c)
  target_link_libraries(cuda_check PRIVATE shardbench_static)
  target_include_directories(cuda_check PRIVATE ${CMAKE_SOURCE_DIR}/runtime/cuda)
  add_test(NAME cuda_check COMMAND cuda_check)
  set_tests_properties(cuda_check PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300
    ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0:protect_shadow_gap=0;OPENBLAS_NUM_THREADS=1")
  # the harness itself, no GPU: the CPU table on both sides
  add_test(NAME cuda_check_self COMMAND cuda_check 5 --self)
  set_tests_properties(cuda_check_self PROPERTIES TIMEOUT 60
    ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;OPENBLAS_NUM_THREADS=1")
endif()

# ---- data_train
# Training on a record file (run --data): losses equal on 1 and P ranks,
# differ from synthetic inputs, and a misfit file is refused.
add_executable(test_data_train ${CMAKE_CURRENT_SOURCE_DIR}/mpi/test_data_train.c)
target_link_libraries(test_data_train PRIVATE shardbench_static)
foreach(np 1 2 4)
  add_test(NAME test_data_train_np${np}
    COMMAND ${MPIEXEC_EXECUTABLE} --oversubscribe --allow-run-as-root -np ${np}
            $<TARGET_FILE:test_data_train>)
  set_tests_properties(test_data_train_np${np} PROPERTIES
    TIMEOUT 120
    ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;OPENBLAS_NUM_THREADS=1;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models")
endforeach()

# ---- dp
sb_unit_test(test_dp unit/test_dp.c)

# ---- equiv
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
# cli/threads.c: the kernels' threads per rank, set as `run` sets them
add_executable(test_equiv ${CMAKE_CURRENT_SOURCE_DIR}/mpi/test_equiv.c ${CMAKE_SOURCE_DIR}/cli/threads.c)
target_include_directories(test_equiv PRIVATE ${CMAKE_SOURCE_DIR}/cli)
target_link_libraries(test_equiv PRIVATE shardbench_static)

# sb_equiv(NAME NP ARGS...): the ctest NAME, test_equiv on NP ranks with
# ARGS (a model and its options), in the environment every run shares.
set(SB_EQUIV_DATA ${CMAKE_CURRENT_SOURCE_DIR}/data/models)
function(sb_equiv name np)
  add_test(NAME ${name}
    COMMAND ${MPIEXEC_EXECUTABLE} --oversubscribe --allow-run-as-root -np ${np}
            $<TARGET_FILE:test_equiv> ${ARGN})
  set_tests_properties(${name} PROPERTIES
    TIMEOUT 600
    ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;OPENBLAS_NUM_THREADS=1;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models")
endfunction()

set(SB_EQUIV_alexnet "--set;batch=4;--set;image=67;--set;classes=16;--set;width_div=16")
set(SB_EQUIV_resnet101 "--set;batch=4;--set;image=64;--set;classes=10;--set;width_div=16;--lr;0.0001")
set(SB_EQUIV_inception3 "--set;batch=4;--set;image=107;--set;classes=10;--set;width_div=16;--lr;0.0001")
set(SB_EQUIV_rnnlm "--set;batch=4;--set;vocab=24;--set;units=8;--set;seq=4;--set;layers=2")
set(SB_EQUIV_transformer "--set;batch=2;--set;vocab=16;--set;seq=4;--set;embed=8;--set;heads=2;--set;dk=4;--set;ff=16;--set;layers=1")
set(SB_EQUIV_transformer-large "--set;batch=2;--set;vocab=16;--set;seq=4;--set;embed=16;--set;heads=4;--set;dk=4;--set;ff=32;--set;layers=1")
foreach(model alexnet resnet101 inception3 rnnlm transformer transformer-large)
  foreach(np 2 4)
    sb_equiv(test_equiv_${model}_np${np} ${np} ${model} ${SB_EQUIV_${model}} --seed ${np} --flops 0.01)
  endforeach()
endforeach()

# A Llama-style decoder from tests/data/models (a path: read as a file):
# rmsnorm, rope on q and k, causal softmax, grouped-query attention. Its
# random strategies split heads (kvh, rep), seq and mem (context
# parallelism: the causal mask on split seq and mem boxes), the rmsnorm
# axis and the rope positions; 12 of them rather than 8, and --want-split
# fails the test if the sample stops covering one of these.
foreach(np 2 4)
  sb_equiv(test_equiv_llama-tiny_np${np} ${np} ${SB_EQUIV_DATA}/llama-tiny.model
           --seed ${np} --flops 0.01 --random 12
           --want-split softmax:seq,softmax:mem,rope:seq,rope:mem,rmsnorm:embed,einsum:kvh,einsum:rep)
endforeach()
# The pointwise ops (act, mul, expand, softcap: tests/data/models/swiglu-mlp.model,
# read as a file). Beside best and random, --split forces the splits where a
# broadcast operand's gradient must be summed across ranks: the
# squeeze-excitation mul `se` split along h and w, which its gate `sg`
# lacks (an activation: summed by the accumulating relayout), `gs` along
# seq, which its scale weight lacks (summed with the weight's replicas),
# the expands `p` and `c` along batch, the SwiGLU product along ff, and the
# soft-capped logits along classes.
# The search's best must split the SwiGLU product along batch (and at P = 4
# along ff too).
set(SB_EQUIV_SPLITS "--split;se=h;--split;se=w;--split;gs=seq;--split;p=batch;--split;c=batch;--split;h1/h=ff;--split;capped=classes")
set(SB_EQUIV_BEST_2 "--best-splits;h1/h=batch")
set(SB_EQUIV_BEST_4 "--best-splits;h1/h=batch;--best-splits;h1/h=ff;--best-splits;h2/a=ff")
foreach(np 2 4)
  sb_equiv(test_equiv_swiglu-mlp_np${np} ${np} ${SB_EQUIV_DATA}/swiglu-mlp.model
           ${SB_EQUIV_SPLITS} ${SB_EQUIV_BEST_${np}} --seed ${np} --flops 0.01)
endforeach()
sb_equiv(test_equiv_swiglu-mlp_np4_devmem 4 ${SB_EQUIV_DATA}/swiglu-mlp.model
         ${SB_EQUIV_SPLITS} --seed 4 --flops 0.01 --backend cpu-devmem)
# The grouped-conv CNNs and the conv variants: every strategy as above plus
# one that splits the grouped convs' `group` dim as far as P allows
# (--split *=group: the test fails when no op splits it). resnext50: 64 x 64
# images, 4 groups of 1, 2, 4, 8 channels, batch 8 (at batch 4 its batch
# norms over a few elements make training chaotic: rounding, not the
# strategy, then decides the weights); mobilenet-v2 with 1/8 of its
# channels (its depthwise convs keep groups = channels); conv-variants
# (tests/data/models): patch embedding, dilated, grouped and depthwise
# convs, whose random strategies split the dilated kernels' kh and kw too.
set(SB_EQUIV_resnext50 "--set;batch=8;--set;image=64;--set;classes=10;--set;width_div=16;--set;groups=4;--set;group_width=1;--lr;0.000001;--split;*=group")
set(SB_EQUIV_mobilenet-v2 "--set;batch=8;--set;image=64;--set;classes=10;--set;width_div=8;--lr;0.00001;--split;*=group")
set(SB_EQUIV_conv-variants "--split;*=group;--random;12")
set(SB_EQUIV_MODEL_resnext50 resnext50)
set(SB_EQUIV_MODEL_mobilenet-v2 mobilenet-v2)
set(SB_EQUIV_MODEL_conv-variants ${SB_EQUIV_DATA}/conv-variants.model)
foreach(model resnext50 mobilenet-v2 conv-variants)
  foreach(np 2 4)
    sb_equiv(test_equiv_${model}_np${np} ${np} ${SB_EQUIV_MODEL_${model}} ${SB_EQUIV_${model}}
             --seed ${np} --flops 0.01)
  endforeach()
endforeach()

# The executor's device-memory paths (inputs and weights staged through
# to_host/from_host, relayouts packed and exchanged by sb_relayout_run_mem,
# as on the cuda backend) on the host, through the "cpu-devmem" backend.
foreach(case transformer:4 rnnlm:4 alexnet:4 resnet101:2 inception3:2)
  string(REPLACE ":" ";" mp ${case})
  list(GET mp 0 model)
  list(GET mp 1 np)
  sb_equiv(test_equiv_${model}_np${np}_devmem ${np} ${model} ${SB_EQUIV_${model}} --seed ${np}
           --flops 0.01 --backend cpu-devmem)
endforeach()

# Adam instead of SGD (--adam EPS; the one-device reference too): the
# moments live beside each weight shard, updated after the gradient's
# all-reduce, so every strategy must still equal one device.
foreach(case transformer:4 alexnet:2)
  string(REPLACE ":" ";" mp ${case})
  list(GET mp 0 model)
  list(GET mp 1 np)
  sb_equiv(test_equiv_${model}_np${np}_adam ${np} ${model} ${SB_EQUIV_${model}} --seed ${np}
           --flops 0.01 --adam 1e-8 --lr 0.001)
endforeach()

# Mixture of experts (moe_gate and the expert einsums): a file model of
# tests/data/models/; --split *=expert adds the expert-parallel strategy
# (every op splitting `expert` as far as it can) beside the search's best
# and the random ones; at np 4 also on the cpu-devmem backend (the cuda
# backend's staging and relayout paths, above).
foreach(np 2 4)
  sb_equiv(test_equiv_moe-tiny_np${np} ${np} ${SB_EQUIV_DATA}/moe-tiny.model
           --seed ${np} --flops 0.01 --split *=expert)
endforeach()
sb_equiv(test_equiv_moe-tiny_np4_devmem 4 ${SB_EQUIV_DATA}/moe-tiny.model
         --seed 4 --flops 0.01 --split *=expert --backend cpu-devmem)

# Today's shipped models at reduced sizes (every split dim kept >= 2):
# Llama 3 (GQA: kvh x rep heads, rope, causal softmax, SwiGLU), GPT-2
# (multi-head causal attention, gelu_tanh, position weights expanded over
# the batch), Mixtral (moe_gate and expert-parallel einsums: --split
# *=expert adds the strategy splitting `expert` everywhere) and ViT-B/16
# (patch conv, class token expanded and concatenated, split off for the
# head; its sequence, 16 patches + 1, is odd: not split). --want-split
# fails a run whose strategies never split the dims the model is there for.
set(SB_EQUIV_llama3-8b "--set;layers=2;--set;embed=16;--set;heads=4;--set;kv_heads=2;--set;ff=24;--set;vocab=32;--set;seq=8;--set;batch=2;--want-split;softmax:seq,rope:seq,einsum:kvh,einsum:rep,act:ff")
set(SB_EQUIV_gpt2 "--set;layers=1;--set;embed=16;--set;heads=2;--set;ff=32;--set;vocab=64;--set;seq=8;--set;batch=2;--want-split;softmax:seq,einsum:heads,act:ff")
set(SB_EQUIV_mixtral-8x7b "--set;layers=2;--set;embed=16;--set;heads=4;--set;kv_heads=2;--set;ff=24;--set;vocab=32;--set;seq=8;--set;batch=2;--set;experts=4;--split;*=expert;--want-split;einsum:expert,moe_gate:batch")
set(SB_EQUIV_vit-b16 "--set;layers=1;--set;image=32;--set;patch=8;--set;embed=16;--set;heads=2;--set;ff=32;--set;classes=10;--set;batch=2;--want-split;einsum:heads,act:ff,conv:batch")
foreach(model llama3-8b gpt2 mixtral-8x7b vit-b16)
  foreach(np 2 4)
    sb_equiv(test_equiv_${model}_np${np} ${np} ${model} ${SB_EQUIV_${model}} --seed ${np} --flops 0.01)
  endforeach()
endforeach()

# ZeRO (--zero N, runtime/README.md): every strategy's replicated weights
# (data-parallel splits: the dp strategy replicates every weight, and
# test_equiv fails when no strategy replicated one) are sliced over their
# replicas: stage 1 the optimizer state, 2 also the gradients
# (reduce-scattered), 3 also the weights (all-gathered around each op's
# forward and backward); SGD and Adam, at np 2 and 4; stage 3 also on the
# cpu-devmem backend (the slices copied by box_copy in backend memory).
foreach(model transformer alexnet)
  foreach(np 2 4)
    foreach(stage 1 2 3)
      sb_equiv(test_equiv_${model}_np${np}_zero${stage} ${np} ${model} ${SB_EQUIV_${model}}
               --seed ${np} --flops 0.01 --zero ${stage} --random 4)
      sb_equiv(test_equiv_${model}_np${np}_zero${stage}_adam ${np} ${model} ${SB_EQUIV_${model}}
               --seed ${np} --flops 0.01 --zero ${stage} --random 4 --adam 1e-8 --lr 0.001)
    endforeach()
  endforeach()
endforeach()
# Stage 3 on the kinds whose weights the loops above miss: the LSTM (a kind
# run on every rank), batch norm (its weights are never sliced: no gradient
# sum), rmsnorm, rope and GQA einsums, and the experts' weights. Adam,
# but ResNet with SGD: Adam on its batch-norm shifts (gradients near 0,
# whose sign rounding decides) differs from one device without ZeRO too.
set(SB_EQUIV_ZERO_llama-tiny ${SB_EQUIV_DATA}/llama-tiny.model --adam 1e-8 --lr 0.001)
set(SB_EQUIV_ZERO_moe-tiny ${SB_EQUIV_DATA}/moe-tiny.model --split *=expert --adam 1e-8 --lr 0.001)
set(SB_EQUIV_ZERO_rnnlm rnnlm ${SB_EQUIV_rnnlm} --adam 1e-8 --lr 0.001)
set(SB_EQUIV_ZERO_resnet101 resnet101 ${SB_EQUIV_resnet101})
foreach(model rnnlm resnet101 llama-tiny moe-tiny)
  sb_equiv(test_equiv_${model}_np4_zero3 4 ${SB_EQUIV_ZERO_${model}} --seed 4 --flops 0.01
           --zero 3 --random 4)
endforeach()
sb_equiv(test_equiv_transformer_np4_zero3_devmem 4 transformer ${SB_EQUIV_transformer} --seed 4
         --flops 0.01 --zero 3 --random 4 --adam 1e-8 --lr 0.001 --backend cpu-devmem)

# Pipelines (--stages S --microbatches M --schedule X, runtime/README.md):
# S even stages of P/S consecutive ranks, each op's config drawn for its
# stage's ranks (at P = 4, S = 2 they split: data parallel, the search's
# best and random ones), the batch cut into M micro-batches whose
# gradients add up before one update; GPipe and 1F1B; SGD, Adam and ZeRO.
# The reference stays one rank on the whole batch (ZeRO needs replicas:
# S < P). Batches are large
# enough that a micro-batch still splits over a stage's ranks.
set(SB_PIPE_transformer transformer --set batch=8 --set vocab=16 --set seq=4 --set embed=8
    --set heads=2 --set dk=4 --set ff=16 --set layers=1)
set(SB_PIPE_llama-tiny ${SB_EQUIV_DATA}/llama-tiny.model --set batch=4)
set(SB_PIPE_alexnet alexnet --set batch=4 --set image=67 --set classes=16 --set width_div=16)
# Recomputation inside the pipeline (extra rc...: --recompute all, every op
# but the loss; runtime/executor/recompute.c): each stage drops a
# recomputed op's activations after its forward and computes them again in
# the backward of the same micro-batch, from the inputs it received from
# the stage before (kept per micro-batch in flight, never received twice).
# These cases hold the run to one rank doing the same micro-batch
# accumulation (--ref-microbatches; one rank a stage then gives the same
# bits), and test_equiv fails unless some recomputed op reads an input
# from an earlier stage and unless data parallel and the best strategy
# hold fewer peak bytes per rank than without recomputation. Each model at
# P = 2, S = 2 and at P = 4, S = 2 and 4; SGD, Adam, ZeRO 1, 2 and 3.
# name:P:S:M:schedule:extra (extra: sgd, adam, zero1, zero2adam; rc, rcadam,
# rczero1, rczero2, rczero3adam: the same, recomputing)
foreach(case
    transformer:2:2:2:gpipe:sgd transformer:2:1:4:1f1b:sgd transformer:4:2:2:1f1b:sgd
    transformer:4:2:4:gpipe:zero2adam transformer:4:4:2:1f1b:adam transformer:4:4:4:gpipe:sgd
    llama-tiny:2:2:2:1f1b:adam llama-tiny:4:2:2:gpipe:zero1 llama-tiny:4:4:2:1f1b:sgd
    alexnet:2:2:2:gpipe:sgd alexnet:4:2:2:1f1b:adam alexnet:4:2:2:gpipe:zero1
    alexnet:4:4:2:1f1b:sgd
    transformer:2:2:2:gpipe:rc transformer:4:2:4:gpipe:rczero2 transformer:4:4:4:1f1b:rcadam
    llama-tiny:2:2:2:1f1b:rcadam llama-tiny:4:2:2:1f1b:rczero3adam llama-tiny:4:4:2:gpipe:rc
    alexnet:2:2:2:gpipe:rcadam alexnet:4:2:2:1f1b:rczero1 alexnet:4:4:2:1f1b:rc)
  string(REPLACE ":" ";" f ${case})
  list(GET f 0 model)
  list(GET f 1 np)
  list(GET f 2 s)
  list(GET f 3 mb)
  list(GET f 4 sched)
  list(GET f 5 extra)
  set(more "")
  set(opt ${extra})
  if(extra MATCHES "^rc")
    string(REGEX REPLACE "^rc" "" opt "${extra}")
    set(more --recompute all --ref-microbatches)
  endif()
  if(opt STREQUAL "adam")
    list(APPEND more --adam 1e-8 --lr 0.001)
  elseif(opt STREQUAL "zero1")
    list(APPEND more --zero 1)
  elseif(opt STREQUAL "zero2")
    list(APPEND more --zero 2)
  elseif(opt STREQUAL "zero2adam" OR opt STREQUAL "zero3adam")
    string(SUBSTRING ${opt} 4 1 zs)
    list(APPEND more --zero ${zs} --adam 1e-8 --lr 0.001)
  elseif(NOT opt STREQUAL "sgd" AND NOT opt STREQUAL "")
    message(FATAL_ERROR "tests/tests.cmake: pipeline case ${case}: unknown extra '${extra}'")
  endif()
  sb_equiv(test_equiv_pipe_${model}_np${np}_s${s}m${mb}_${sched}_${extra} ${np}
           ${SB_PIPE_${model}} --seed ${np} --flops 0.01 --random 3
           --stages ${s} --microbatches ${mb} --schedule ${sched} ${more})
endforeach()
# The staging path of a backend whose memory is not the host's.
sb_equiv(test_equiv_pipe_transformer_np4_s2m2_1f1b_devmem 4 ${SB_PIPE_transformer} --seed 4
         --flops 0.01 --random 2 --stages 2 --microbatches 2 --schedule 1f1b --backend cpu-devmem)

# `run` as a pipeline from a hand-written version-2 strategy file and from
# --stages/--microbatches/--schedule, against a one-rank run; a pipeline's
# checkpoint resumed without one; refusals (tests/cli/pipeline_run.sh).
add_test(NAME test_pipeline_run
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/pipeline_run.sh $<TARGET_FILE:shardbench>
          ${MPIEXEC_EXECUTABLE})
set_tests_properties(test_pipeline_run PROPERTIES
  TIMEOUT 120
  ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;OPENBLAS_NUM_THREADS=1;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models")

# Megatron's layouts as a strategy file (search --algo megatron --save) and
# prune's megatron survivor: TP x PP with sequence parallelism, selective
# recompute and ZeRO 1, TP x CP, TP 4, each trained on 4 ranks with one
# rank's losses (tests/cli/megatron_run.sh).
add_test(NAME megatron_run
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/megatron_run.sh $<TARGET_FILE:shardbench>
          ${MPIEXEC_EXECUTABLE})
set_tests_properties(megatron_run PROPERTIES
  TIMEOUT 180
  ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;OPENBLAS_NUM_THREADS=1;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models")

# Ranks on nodes (search --ranks, a strategy file's `ranks cyclic N`): the
# search's choice costs the least of the two orders; a cyclic strategy run on
# 4 ranks equals one rank and is placed as the file says; refusals
# (tests/cli/ranks_cyclic.sh).
add_test(NAME test_ranks_cyclic
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/ranks_cyclic.sh $<TARGET_FILE:shardbench>
          ${MPIEXEC_EXECUTABLE})
set_tests_properties(test_ranks_cyclic PROPERTIES
  TIMEOUT 120
  ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;OPENBLAS_NUM_THREADS=1;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models")

# The paper's Table II strategy (--paper, docs/paper-table2.md) mapped onto
# the transformer at P = 4 (its 16- and 32-way splits taken to the nearest
# configs at 4): the mapping's strategy runs and equals one rank. The
# p = 32 runs of all four models are too heavy for CI (32 ranks on 2
# cores); docs/paper-table2.md gives their figures.
sb_equiv(test_equiv_paper_transformer_np4 4 transformer ${SB_EQUIV_transformer} --paper --random 0 --flops 0.01)
set_property(TEST test_equiv_paper_transformer_np4 APPEND PROPERTY ENVIRONMENT "SHARDBENCH_STRATEGIES=${CMAKE_SOURCE_DIR}/strategies")

# Activation recomputation (--recompute, runtime/executor/recompute.c): the
# strategies run with every recomputable op's (or the listed ops')
# activations dropped after the forward and computed again before the
# backward; every strategy must still equal one device, and data parallel
# and the best strategy must hold fewer peak bytes per rank than without
# recomputation. Also with ZeRO stage 3 (the recomputed forward's gathered
# weight kept for the backward) and Adam.
foreach(np 2 4)
  sb_equiv(test_equiv_transformer_np${np}_recompute ${np} transformer ${SB_EQUIV_transformer}
           --seed ${np} --flops 0.01 --random 4 --recompute all)
  sb_equiv(test_equiv_llama-tiny_np${np}_recompute ${np} ${SB_EQUIV_DATA}/llama-tiny.model
           --seed ${np} --flops 0.01 --random 4 --recompute all)
  sb_equiv(test_equiv_alexnet_np${np}_recompute ${np} alexnet ${SB_EQUIV_alexnet}
           --seed ${np} --flops 0.01 --random 4 --recompute all)
endforeach()
sb_equiv(test_equiv_transformer_np4_recompute_list 4 transformer ${SB_EQUIV_transformer}
         --seed 4 --flops 0.01 --random 4 --recompute x.1/a/o/w,x.1/y/h,y.1/c/y,logits)
sb_equiv(test_equiv_transformer_np4_recompute_zero3 4 transformer ${SB_EQUIV_transformer}
         --seed 4 --flops 0.01 --random 4 --recompute all --zero 3 --adam 1e-8 --lr 0.001)
sb_equiv(test_equiv_alexnet_np4_recompute_devmem 4 alexnet ${SB_EQUIV_alexnet}
         --seed 4 --flops 0.01 --random 2 --recompute all --backend cpu-devmem)

# ---- executor_timing
# The executor's per-step timing ledger (runtime/executor/timing.c): hand
# cases, random nesting booked at once and through the ledger, and one
# step's per-op times on the cpu (host marks) and cpu-devmem (backend
# marks read once per step) backends (tests/unit/test_executor_timing.c).
sb_unit_test(test_executor_timing unit/test_executor_timing.c)
set_property(TEST test_executor_timing APPEND PROPERTY ENVIRONMENT
  "ASAN_OPTIONS=detect_leaks=0" OPENBLAS_NUM_THREADS=1)
set_property(TEST test_executor_timing PROPERTY TIMEOUT 120)

# ---- export
sb_unit_test(test_export unit/test_export.c)

# export_extras: `export` of a version-2 strategy file (pipeline, ZeRO,
# recomputation): the text block, the JSON strategy_extras, the Python
# form's refusal.
add_test(NAME export_extras
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/export_extras.sh $<TARGET_FILE:shardbench>)
set_tests_properties(export_extras PROPERTIES TIMEOUT 300
  ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models")

# ---- export_jax
# The exported JAX programs run in JAX on 8 host CPU devices
# (tests/jax/check.sh): Transformer, AlexNet and swiglu-mlp (act, mul,
# expand: tests/data/models/) at reduced sizes under
# pase-best at p = 4 and 8, MCMC at 4, data parallel at 8; shardings read back
# from the compiled step, losses against unsharded JAX and `shardbench
# run`, XLA's collectives beside the predicted communication; the JSON
# and PyTorch forms' structure. Needs the venv of scripts/deps.sh
# (sb_jax_venv, build-venv-jax/; scripts/test.sh and .ci/run make it):
# registered only where it exists, and then it fails without JAX.
# Budget: 300 s (about 35 s Release; in Sanitize 100 s with the other core busy).
set(SHARDBENCH_JAX_PYTHON "${CMAKE_SOURCE_DIR}/build-venv-jax/bin/python" CACHE FILEPATH
    "Python with JAX (CPU) for the export_jax test")
if(EXISTS "${SHARDBENCH_JAX_PYTHON}")
  add_test(NAME export_jax
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/jax/check.sh $<TARGET_FILE:shardbench>
            ${SHARDBENCH_JAX_PYTHON} ${MPIEXEC_EXECUTABLE})
  set_tests_properties(export_jax PROPERTIES
    TIMEOUT 300
    ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;OPENBLAS_NUM_THREADS=1;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models;SB_JAX_OUT=${CMAKE_CURRENT_BINARY_DIR}/export_jax")
else()
  message(STATUS "no ${SHARDBENCH_JAX_PYTHON}: test export_jax not registered (scripts/deps.sh sb_jax_venv)")
endif()

# ---- figures
# Every figure kind rendered (PNG and SVG) and its SVG read back: series in
# the legend's order, no colour repeated, the fidelity figure's y = x line,
# band and MAPE (tests/cli/figures.sh, tests/cli/svg_series.py; needs gnuplot,
# sqlite3 and python3).
add_test(NAME figures
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/figures.sh $<TARGET_FILE:shardbench> ${CMAKE_SOURCE_DIR})
set_tests_properties(figures PROPERTIES
  TIMEOUT 120
  ENVIRONMENT "SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models;SHARDBENCH_PLOTS=${CMAKE_SOURCE_DIR}/plots")
# figures_megatron: the same figures of a Megatron search's JSON (its
# stage_details against its pricer, the interleaved 1F1B schedule by hand;
# tests/cli/figures_megatron.sh).
add_test(NAME figures_megatron
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/figures_megatron.sh $<TARGET_FILE:shardbench> ${CMAKE_SOURCE_DIR})
set_tests_properties(figures_megatron PROPERTIES
  TIMEOUT 120
  ENVIRONMENT "SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models;SHARDBENCH_PLOTS=${CMAKE_SOURCE_DIR}/plots")

# ---- fuzz
# libFuzzer targets (SHARDBENCH_FUZZ=ON, clang only); run them with
# scripts/fuzz.sh. The main library is built without sanitizer coverage, so
# the fuzz build compiles the library sources again into its own static
# library, with the same sources, include dirs and definitions as
# shardbench_obj (top-level CMakeLists.txt) plus the fuzzer instrumentation.
if(SHARDBENCH_FUZZ AND NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
  message(WARNING "SHARDBENCH_FUZZ needs clang (configure with CC=clang); "
                  "fuzz targets are not built with ${CMAKE_C_COMPILER_ID}")
elseif(SHARDBENCH_FUZZ)

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
  add_executable(fuzz_parse fuzz/fuzz_parse.c)
  target_compile_options(fuzz_parse PRIVATE ${SB_FUZZ_FLAGS} -fsanitize=fuzzer,address,undefined)
  target_link_options(fuzz_parse PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_libraries(fuzz_parse PRIVATE shardbench_fuzzlib)

  # The shipped models and any saved reproducers, each run once: a quick
  # regression check inside ctest of a fuzz build.
  file(GLOB SB_FUZZ_REPLAY CONFIGURE_DEPENDS
    ${CMAKE_SOURCE_DIR}/models/*.model
    ${CMAKE_SOURCE_DIR}/tests/fuzz/crashes/*)
  list(FILTER SB_FUZZ_REPLAY EXCLUDE REGEX "/README[^/]*$")
  add_test(NAME fuzz_parse_replay COMMAND fuzz_parse ${SB_FUZZ_REPLAY})

  # fuzz_calibration: the calibration file reader, then the problem build and
  # search of a small fixed model under every accepted file (no cost may come
  # out non-finite). Its seeds (tests/data/calibration) each run once here.
  add_executable(fuzz_calibration fuzz/fuzz_calibration.c)
  target_compile_options(fuzz_calibration PRIVATE ${SB_FUZZ_FLAGS} -fsanitize=fuzzer,address,undefined)
  target_link_options(fuzz_calibration PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_libraries(fuzz_calibration PRIVATE shardbench_fuzzlib)
  file(GLOB SB_FUZZ_CAL_SEEDS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/data/calibration/*)
  add_test(NAME fuzz_calibration_replay COMMAND fuzz_calibration ${SB_FUZZ_CAL_SEEDS})

  # fuzz_strategy: the strategy file reader on a small fixed model at p = 4;
  # an accepted file must choose valid configs and survive a save and reload.
  # Its seeds (tests/data/strategy/*.strategy) each run once here.
  add_executable(fuzz_strategy fuzz/fuzz_strategy.c)
  target_compile_options(fuzz_strategy PRIVATE ${SB_FUZZ_FLAGS} -fsanitize=fuzzer,address,undefined)
  target_link_options(fuzz_strategy PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_libraries(fuzz_strategy PRIVATE shardbench_fuzzlib PkgConfig::JANSSON)
  file(GLOB SB_FUZZ_STRATEGY_SEEDS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/data/strategy/*.strategy)
  add_test(NAME fuzz_strategy_replay COMMAND fuzz_strategy ${SB_FUZZ_STRATEGY_SEEDS})

  # fuzz_hf: the Hugging Face config reader (models/hf/): a refusal carries a
  # message and status 2, an accepted config's model text parses. Its seeds
  # (tests/data/hf/*/config.json) each run once here.
  add_executable(fuzz_hf fuzz/fuzz_hf.c)
  target_compile_options(fuzz_hf PRIVATE ${SB_FUZZ_FLAGS} -fsanitize=fuzzer,address,undefined)
  target_link_options(fuzz_hf PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_libraries(fuzz_hf PRIVATE shardbench_fuzzlib PkgConfig::JANSSON)
  file(GLOB SB_FUZZ_HF_SEEDS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/data/hf/*/config.json)
  add_test(NAME fuzz_hf_replay COMMAND fuzz_hf ${SB_FUZZ_HF_SEEDS})

  # fuzz_onnx: libFuzzer target for the ONNX importer (with ONNX support).
  # Adds to shardbench_fuzzlib the protoc-c bindings that cmake/onnx.cmake
  # generates.
  if(SB_HAVE_ONNX)
    target_sources(shardbench_fuzzlib PRIVATE ${SB_ONNX_PB_C})
    set_source_files_properties(${SB_ONNX_PB_C} TARGET_DIRECTORY shardbench_fuzzlib
      PROPERTIES GENERATED TRUE COMPILE_OPTIONS "-w")
    add_dependencies(shardbench_fuzzlib shardbench_onnx_pb)
    target_link_libraries(shardbench_fuzzlib PUBLIC PkgConfig::PROTOBUF_C)

    add_executable(fuzz_onnx fuzz/fuzz_onnx.c)
    target_compile_options(fuzz_onnx PRIVATE ${SB_FUZZ_FLAGS} -fsanitize=fuzzer,address,undefined)
    target_link_options(fuzz_onnx PRIVATE -fsanitize=fuzzer,address,undefined)
    target_link_libraries(fuzz_onnx PRIVATE shardbench_fuzzlib)

    # The seed corpus and the saved reproducers (tests/data/onnx/regress), each
    # run once: a quick check inside ctest.
    file(GLOB SB_FUZZ_ONNX_SEEDS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/data/onnx/*.onnx
      ${CMAKE_SOURCE_DIR}/tests/data/onnx/regress/*.bin)
    add_test(NAME fuzz_onnx_replay COMMAND fuzz_onnx ${SB_FUZZ_ONNX_SEEDS})

  endif()
endif()

# ---- hf
# test_hf: the Hugging Face config reader (models/hf/) and the parameter
# count (models/params.c) on tests/data/hf: counts against expected.tsv,
# settings, notes, bad configs, `tie`.
sb_unit_test(test_hf unit/test_hf.c)

# test_equiv_hf_NAME_npN: the configs of tests/data/hf at reduced sizes
# (--set with their own keys: 2 layers, hidden 32, 4 heads, vocab 64, seq 8,
# batch 4; 4 experts of which 2 chosen) on 2 and 4 ranks against one: data
# parallel, the search's best and 8 random strategies, which split the
# pieces each one brings: a tied head (llama-3.2-1b, qwen2, gemma-2, gpt2),
# q/k/v biases (qwen2, qwen1.5-moe, gpt2, pythia), a head_dim other than
# hidden/heads (qwen3, gemma-2: 16 of 32/4), q/k norms (qwen3, qwen3-moe),
# Gemma 2's extra norms, GeGLU and soft-caps, partial rotary and the parallel
# residual (pythia), learned positions shorter than the table (gpt2), the
# mixtures (mixtral, qwen3-moe), shared experts (qwen1.5-moe behind its
# sigmoid gate, deepseek), MLA with and without q_lora_rank and a first
# dense layer (deepseek-v2-lite, deepseek-v3), a sliding window (mistral,
# gemma-2).
set(SB_HF_B "--set;seq=8;--set;batch=4;--set;vocab_size=64")
set(SB_HF_L "${SB_HF_B};--set;num_hidden_layers=2;--set;hidden_size=32;--set;num_attention_heads=4;--set;intermediate_size=48")
set(SB_HF_K "--set;num_key_value_heads=2")
set(SB_HF_MLA "--set;n_routed_experts=4;--set;num_experts_per_tok=2;--set;moe_intermediate_size=16;--set;n_shared_experts=1;--set;kv_lora_rank=8;--set;qk_nope_head_dim=4;--set;qk_rope_head_dim=4;--set;v_head_dim=6;--set;first_k_dense_replace=1;--set;num_key_value_heads=4")
set(SB_HF_llama-3.2-1b "${SB_HF_L};${SB_HF_K};--set;head_dim=8")
set(SB_HF_qwen2-0.5b "${SB_HF_L};${SB_HF_K}")
set(SB_HF_qwen3-0.6b "${SB_HF_L};${SB_HF_K};--set;head_dim=16")
# gemma-2: soft-caps small enough to bite at these sizes (scores and head
# logits of about 1: Gemma 2's 50 and 30 would leave them within 1e-4)
set(SB_HF_gemma-2-2b "${SB_HF_L};${SB_HF_K};--set;head_dim=16;--set;sliding_window=3;--set;attn_logit_softcapping=2;--set;final_logit_softcapping=1")
set(SB_HF_mistral-7b-v0.1 "${SB_HF_L};${SB_HF_K};--set;sliding_window=3")
set(SB_HF_pythia-160m "${SB_HF_L}")
set(SB_HF_gpt2 "${SB_HF_B};--set;n_layer=2;--set;n_embd=32;--set;n_head=4;--set;n_inner=48;--set;n_positions=16")
set(SB_HF_mixtral-8x7b-v0.1 "${SB_HF_L};${SB_HF_K};--set;num_local_experts=4;--set;num_experts_per_tok=2")
set(SB_HF_qwen1.5-moe-a2.7b "${SB_HF_L};${SB_HF_K};--set;num_experts=4;--set;num_experts_per_tok=2;--set;moe_intermediate_size=16;--set;shared_expert_intermediate_size=24")
set(SB_HF_qwen3-30b-a3b "${SB_HF_L};${SB_HF_K};--set;head_dim=8;--set;num_experts=4;--set;num_experts_per_tok=2;--set;moe_intermediate_size=16")
set(SB_HF_deepseek-v2-lite "${SB_HF_L};${SB_HF_MLA}")
set(SB_HF_deepseek-v3 "${SB_HF_L};${SB_HF_MLA};--set;q_lora_rank=12")
# mistral: a sliding window of 3 at seq 8 (gemma-2 on every other layer),
# 12 random strategies that must split the softmax's seq and mem (the
# window's mask from global offsets under sequence and context splits).
set(SB_HF_EQ_mistral-7b-v0.1 "--random;12;--want-split;softmax:seq,softmax:mem")
# gemma-2: both soft-caps split (the scores' mem, the head's vocab).
set(SB_HF_EQ_gemma-2-2b "--want-split;softcap:mem,softcap:vocab;--split;capped=vocab")
# tied heads (runtime/executor/tied.c): strategies that split the table
# (x0) and the head's copy (logits) along vocab and embed, layouts apart.
set(SB_HF_EQ_llama-3.2-1b "--split;x0=vocab;--split;logits=embed")
set(SB_HF_EQ_gpt2 "--split;x0=embed;--split;logits=vocab")
foreach(name llama-3.2-1b qwen2-0.5b qwen3-0.6b gemma-2-2b pythia-160m gpt2 mixtral-8x7b-v0.1
             qwen1.5-moe-a2.7b qwen3-30b-a3b deepseek-v2-lite deepseek-v3 mistral-7b-v0.1)
  foreach(np 2 4)
    sb_equiv(test_equiv_hf_${name}_np${np} ${np} hf:${CMAKE_CURRENT_SOURCE_DIR}/data/hf/${name}
             ${SB_HF_${name}} --seed ${np} --flops 0.01 ${SB_HF_EQ_${name}})
    set_tests_properties(test_equiv_hf_${name}_np${np} PROPERTIES
      ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;OPENBLAS_NUM_THREADS=1;SHARDBENCH_HF_QUIET=1")
  endforeach()
endforeach()

# ... and under ZeRO stage 3 with Adam (the table's shard gathered for
# the copy's pull, the copy's gradient into the table's slice) and as a
# pipeline (the table on the first stage, the head on the second).
sb_equiv(test_equiv_hf_tied_zero3_np4 4 hf:${CMAKE_CURRENT_SOURCE_DIR}/data/hf/llama-3.2-1b
         ${SB_HF_llama-3.2-1b} --seed 5 --flops 0.01 --adam 1e-8 --lr 0.001 --zero 3 --random 4
         --split x0=vocab --split logits=embed)
sb_equiv(test_equiv_hf_tied_pipe_np4 4 hf:${CMAKE_CURRENT_SOURCE_DIR}/data/hf/llama-3.2-1b
         ${SB_HF_llama-3.2-1b} --seed 6 --flops 0.01 --stages 2 --microbatches 2 --random 4)
# ZeRO 2: the copy's gradient reduce-scattered in rows, each replica pushing its rows
sb_equiv(test_equiv_hf_tied_zero2_np2 2 hf:${CMAKE_CURRENT_SOURCE_DIR}/data/hf/llama-3.2-1b
         ${SB_HF_llama-3.2-1b} --seed 7 --flops 0.01 --adam 1e-8 --lr 0.001 --zero 2 --random 4
         --split x0=vocab --split logits=embed)
foreach(t test_equiv_hf_tied_zero3_np4 test_equiv_hf_tied_pipe_np4 test_equiv_hf_tied_zero2_np2)
  set_tests_properties(${t} PROPERTIES
    ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;OPENBLAS_NUM_THREADS=1;SHARDBENCH_HF_QUIET=1")
endforeach()

# hf_cli: `import --from hf` (written through a temporary and a rename, the
# text parses, refusals exit 2 naming the key) and `search -m hf:` JSON
# (parameter_count equal to expected.tsv).
add_test(NAME hf_cli COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/hf_cli.sh $<TARGET_FILE:shardbench>
         ${CMAKE_CURRENT_SOURCE_DIR}/data/hf)
set_tests_properties(hf_cli PROPERTIES TIMEOUT 300 ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0")

# hf_ref_NAME: the first loss of `run` at one rank on the same reduced
# configs (and phi-3, mistral) against tests/cli/hf_ref.py, a numpy reference
# of each architecture written from its published description
# (tests/cli/hf_ref.sh; 2e-6 relative: the issue asks 1e-4, too loose at these
# sizes to see a piece broken). Needs a Python with numpy: the JAX
# venv's (sb_jax_venv) or build-venv-numpy/ (python3 -m venv
# build-venv-numpy && build-venv-numpy/bin/pip install numpy==1.26.4).
set(SHARDBENCH_NUMPY_PYTHON "${CMAKE_SOURCE_DIR}/build-venv-numpy/bin/python" CACHE FILEPATH
    "Python with numpy for the hf_ref tests")
set(SB_HF_PY "")
if(EXISTS "${SHARDBENCH_NUMPY_PYTHON}")
  set(SB_HF_PY "${SHARDBENCH_NUMPY_PYTHON}")
elseif(EXISTS "${SHARDBENCH_JAX_PYTHON}")
  set(SB_HF_PY "${SHARDBENCH_JAX_PYTHON}")
endif()
set(SB_HF_phi-3-mini-4k-instruct "${SB_HF_L};${SB_HF_K};--set;sliding_window=5")
if(SB_HF_PY)
  foreach(name llama-3.2-1b qwen2-0.5b qwen3-0.6b gemma-2-2b pythia-160m gpt2 mixtral-8x7b-v0.1
               qwen1.5-moe-a2.7b qwen3-30b-a3b deepseek-v2-lite deepseek-v3
               phi-3-mini-4k-instruct mistral-7b-v0.1)
    add_test(NAME hf_ref_${name}
      COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/hf_ref.sh $<TARGET_FILE:shardbench>
              ${MPIEXEC_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/data/hf ${name} ${SB_HF_${name}})
    set_tests_properties(hf_ref_${name} PROPERTIES TIMEOUT 120
      ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;OPENBLAS_NUM_THREADS=1;HF_REF_PYTHON=${SB_HF_PY}")
  endforeach()
  # hf_ref_tie: three SGD steps of a tied head (one table read by the
  # embedding and, transposed, by the head) against tests/cli/tie_ref.py
  add_test(NAME hf_ref_tie
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/tie_ref.sh $<TARGET_FILE:shardbench>
            ${MPIEXEC_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/data/models/tied-tiny.model)
  set_tests_properties(hf_ref_tie PROPERTIES TIMEOUT 120
    ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;OPENBLAS_NUM_THREADS=1;HF_REF_PYTHON=${SB_HF_PY}")
else()
  message(STATUS "no Python with numpy: tests hf_ref_* not registered (tests/tests.cmake)")
endif()

# ---- hostile_io
# The command line under hostile files and values (tests/cli/hostile_io.sh):
# another program's SQLite file, measurements that cannot be stored,
# non-finite numbers and a diverging run, writes that fail (old files kept),
# FIFOs, devices and directories as strategy files, a read-only folder,
# Markdown-breaking names, a bench killed by SIGKILL. Budget: 120 s (about
# 40 s on two cores in a Sanitize build).
find_program(SB_SQLITE3_SHELL sqlite3)
if(SB_SQLITE3_SHELL)
  add_test(NAME hostile_io
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/hostile_io.sh $<TARGET_FILE:shardbench> ${MPIEXEC_EXECUTABLE})
  set_tests_properties(hostile_io PROPERTIES
    TIMEOUT 300
    ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;OPENBLAS_NUM_THREADS=1;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models")
else()
  message(WARNING "sqlite3 (the shell) not found: test hostile_io not registered")
endif()

# Issue 39: hostile input of the third round (tests/cli/hostile_input.sh): FIFOs
# and folders where checkpoints, record files and calibrations are read,
# overflowing checkpoint shapes, strategy lines a version does not define,
# repeated keys, --stages without --microbatches, a nightly whose baseline
# measures nothing or whose gnuplot scripts are missing, names from file
# names, bench's pasted hint, loose numbers. Every command under timeout.
# test_text: common/text.c (escaping, shell quoting, strict numbers) and
# sb_open_input.
sb_unit_test(test_text unit/test_text.c)
set_tests_properties(test_text PROPERTIES TIMEOUT 60)
if(SB_SQLITE3_SHELL)
  add_test(NAME hostile_input
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/hostile_input.sh $<TARGET_FILE:shardbench>
            ${MPIEXEC_EXECUTABLE} ${CMAKE_SOURCE_DIR})
  set_tests_properties(hostile_input PROPERTIES
    TIMEOUT 600
    ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;OPENBLAS_NUM_THREADS=1;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models")
endif()

# ---- json_names
# Model names with a double quote, a blank and '#' through the JSON outputs
# (search, candidates, run, bench) and strategy files (tests/cli/json_names.sh;
# needs mpirun and sqlite3, the shell).
add_test(NAME json_names
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/json_names.sh $<TARGET_FILE:shardbench> ${MPIEXEC_EXECUTABLE})
set_tests_properties(json_names PROPERTIES
  TIMEOUT 180
  ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;OPENBLAS_NUM_THREADS=1;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models")

# ---- kernels
# CPU compute kernels of the runtime (runtime/kernels/k_*.c, include/shardbench/kernels.h):
# part of libshardbench; their unit test.
sb_unit_test(test_kernels unit/test_kernels.c)
# One BLAS thread: results independent of the machine, and fast under ASan.
set_property(TEST test_kernels APPEND PROPERTY ENVIRONMENT OPENBLAS_NUM_THREADS=1)
set_property(TEST test_kernels PROPERTY TIMEOUT 120)

# ---- limits
# The tree's size and shape limits (scripts/check_limits.py; README.md,
# "Contributing"): files, functions, READMEs and docs within their lengths,
# no loop of files calling each other in the library or the command (nm of
# their objects); what broke a limit before the check existed is listed in
# scripts/limits-known.tsv and may only shrink.
find_package(Python3 REQUIRED COMPONENTS Interpreter)
add_test(NAME limits
  COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/scripts/check_limits.py ${CMAKE_SOURCE_DIR}
    ${CMAKE_BINARY_DIR}/CMakeFiles/shardbench_obj.dir ${CMAKE_BINARY_DIR}/CMakeFiles/shardbench.dir)
set_tests_properties(limits PROPERTIES TIMEOUT 120)
# Commit subjects since the rule came in (scripts/check_commits.sh): at most
# 72 characters, `area: what`. Skipped (exit 77, reported as not run) when
# the clone's history does not reach that commit (a shallow clone).
add_test(NAME limits_commits
  COMMAND bash ${CMAKE_SOURCE_DIR}/scripts/check_commits.sh ${CMAKE_SOURCE_DIR})
set_tests_properties(limits_commits PROPERTIES TIMEOUT 60 SKIP_RETURN_CODE 77)

# ---- machine
# Machine files (docs/machines.md):
# - test_machine: the parser (a good file, every error class naming
#   file:line, the key and the value), the shipped files, one all-reduce
#   term computed by hand, p <= devices_per_node using the intra-node link;
# - machine_cli: --machine on search (a finite total at p = 64 different
#   from the reference), refusals of --flops, --bw, --calibration with it.
sb_unit_test(test_machine unit/test_machine.c)
add_test(NAME machine_cli
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/machine_cli.sh $<TARGET_FILE:shardbench>
          ${CMAKE_SOURCE_DIR})
set_tests_properties(machine_cli PROPERTIES TIMEOUT 300
  ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models;SHARDBENCH_MACHINES=${CMAKE_SOURCE_DIR}/machines")
# - test_collectives: the placement of a group of an op's grid on nodes (by
#   hand, against a rank-by-rank count of every group of power-of-two grids,
#   a grid that does not line up), each collective's pricing function by
#   hand-computed figures, and the reference terms unchanged without nodes.
sb_unit_test(test_collectives unit/test_collectives.c)

# paper_table2: `paper --table2` (strategies/paper-table2.tsv): the shipped
# paper strategies are what the table gives, every row printed, the
# paper's total >= ours under the reference model, JSON, damaged tables.
add_test(NAME paper_table2
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/paper_table2.sh $<TARGET_FILE:shardbench>
          ${CMAKE_SOURCE_DIR})
set_tests_properties(paper_table2 PROPERTIES TIMEOUT 300
  ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models;SHARDBENCH_MACHINES=${CMAKE_SOURCE_DIR}/machines;SHARDBENCH_STRATEGIES=${CMAKE_SOURCE_DIR}/strategies")
# precision_cli: --precision and --grad-reduce-dtype (docs/cost-model.md,
# "Precision"): the machine file's default recipe, each recipe's peak and
# bytes per parameter and activation, the refusals (fp8 on an A100, a
# precision without --machine), a file without a precision line is fp32.
add_test(NAME precision_cli
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/precision_cli.sh $<TARGET_FILE:shardbench>
          ${CMAKE_SOURCE_DIR})
set_tests_properties(precision_cli PROPERTIES TIMEOUT 300
  ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models;SHARDBENCH_MACHINES=${CMAKE_SOURCE_DIR}/machines")
# test_megatron: the GPU op model (GEMM tile and wave quantization, memory-bound
# kernels, collectives at bus bandwidth) by hand, a Megatron configuration's
# breakdown, bubble and bytes, the refusals of bad degrees, the grid search.
sb_unit_test(test_megatron unit/test_megatron.c)
# megatron_cli: search --algo megatron (a configuration given, the JSON a planner
# reads, the grid's best, bad degrees refused) and validate: the published runs of
# tests/data/published-runs.tsv within MAPE 7% and 15% (it fails over them), its
# formats, malformed rows refused naming file:line.
add_test(NAME megatron_cli
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/megatron_cli.sh $<TARGET_FILE:shardbench>
          ${CMAKE_SOURCE_DIR})
set_tests_properties(megatron_cli PROPERTIES TIMEOUT 300
  ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models;SHARDBENCH_MACHINES=${CMAKE_SOURCE_DIR}/machines")
# validate: `shardbench validate` alone, as a user runs it: exit 1 over the target
# (MAPE 7%, largest error 15%) or when the grid's best is slower than a published run.
add_test(NAME validate COMMAND shardbench validate)
set_tests_properties(validate PROPERTIES TIMEOUT 120
  ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;SHARDBENCH_MACHINES=${CMAKE_SOURCE_DIR}/machines")
# validate_h100: validate --data over the published H100 runs (published-runs-h100.tsv),
# priced by people who did not tune to them: the report whole (exit 0 within the
# target, 1 over it, as validate), the optional columns and units read, malformed
# rows refused naming file:line. Whether they land within 15% is printed, not held.
add_test(NAME validate_h100
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/validate_h100.sh $<TARGET_FILE:shardbench>
          ${CMAKE_SOURCE_DIR})
set_tests_properties(validate_h100 PROPERTIES TIMEOUT 120
  ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;SHARDBENCH_MACHINES=${CMAKE_SOURCE_DIR}/machines")
# full_vs_megatron: the full space never predicted slower than --algo megatron on
# published runs (A100 and H100 rows: an op-level answer and grid answers), the
# answer the faster half, --save keeps VPP 1, the grid left out when asked.
add_test(NAME full_vs_megatron
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/full_vs_megatron.sh $<TARGET_FILE:shardbench>
          ${CMAKE_SOURCE_DIR} k22-22b-full sc21-1.7b sc21-18.4b nemo2407-gpt3-5b
          nemo2407-llama3-8b)
set_tests_properties(full_vs_megatron PROPERTIES TIMEOUT 600
  ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models;SHARDBENCH_MACHINES=${CMAKE_SOURCE_DIR}/machines")
# validate_h100_dgxc: validate --data over the DGX Cloud Benchmarking H100 runs
# (published-runs-h100-dgxc.tsv, BF16/FP8 pairs): rows parse and are priced, the fp8
# twin priced faster, malformed rows refused naming file:line; 15% printed, not held.
add_test(NAME validate_h100_dgxc
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/validate_h100_dgxc.sh $<TARGET_FILE:shardbench>
          ${CMAKE_SOURCE_DIR})
set_tests_properties(validate_h100_dgxc PROPERTIES TIMEOUT 120
  ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;SHARDBENCH_MACHINES=${CMAKE_SOURCE_DIR}/machines")
# search_refuse: a plain search whose DP tables are bounded over --max-table-mb
# refused before the DP in seconds (exit 2, the bound and what to do); the bound
# at least the DP's peak; a limit at the bound runs (search/dp_estimate.c);
# the full space's stage DPs over the limit left out and counted.
add_test(NAME search_refuse
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/search_refuse.sh $<TARGET_FILE:shardbench>)
set_tests_properties(search_refuse PROPERTIES TIMEOUT 300
  ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models;SHARDBENCH_MACHINES=${CMAKE_SOURCE_DIR}/machines")
# op_breakdown: the op-level searches' time_breakdown_seconds (--algo megatron's
# keys, summing to the step) for the plain and full spaces; --dp-overlap.
add_test(NAME op_breakdown
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/op_breakdown.sh $<TARGET_FILE:shardbench>)
set_tests_properties(op_breakdown PROPERTIES TIMEOUT 300
  ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models;SHARDBENCH_MACHINES=${CMAKE_SOURCE_DIR}/machines")

# ---- memory
# Memory model: hand computations and the runtime's measured peak (within
# 25%) for the five paper models at test sizes, on 2 and 4 MPI ranks.
add_executable(test_memory ${CMAKE_CURRENT_SOURCE_DIR}/mpi/test_memory.c)
target_link_libraries(test_memory PRIVATE shardbench_static)
foreach(np 2 4)
  add_test(NAME test_memory_np${np}
    COMMAND ${MPIEXEC_EXECUTABLE} --oversubscribe --allow-run-as-root -np ${np} $<TARGET_FILE:test_memory>)
  set_tests_properties(test_memory_np${np} PROPERTIES
    TIMEOUT 300
    ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;OPENBLAS_NUM_THREADS=1;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models")
endforeach()

# ---- nightly
# The nightly regression check: the statistics of measure/stats.c on fixed
# synthetic samples (test_stats), and `shardbench nightly` end to end on a
# tiny AlexNet at p = 1 (tests/cli/nightly.sh: real launches, three nights of the
# same build: kept build, auto A/B with it, stored launches; then a fake
# launcher whose step times make a deterministic slowdown;
# needs mpirun, gnuplot and sqlite3).
sb_unit_test(test_stats unit/test_stats.c)
sb_unit_test(test_nightly_db unit/test_nightly_db.c)

add_test(NAME nightly
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/nightly.sh $<TARGET_FILE:shardbench>
          ${CMAKE_SOURCE_DIR})
set_tests_properties(nightly PROPERTIES
  TIMEOUT 240
  ENVIRONMENT "OPENBLAS_NUM_THREADS=1;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models;SHARDBENCH_PLOTS=${CMAKE_SOURCE_DIR}/plots")

# ---- onnx
# test_onnx: the ONNX importer (models/onnx/) on tests/data/onnx/*.onnx.
# Without ONNX support (cmake/onnx.cmake found no protoc-c), the same test
# checks that every import fails with "built without ONNX support".
sb_unit_test(test_onnx unit/test_onnx.c)
if(SB_HAVE_ONNX)
  target_compile_definitions(test_onnx PRIVATE SB_HAVE_ONNX=1
    SB_ONNX_PB_HEADER="${SB_ONNX_PROTO_NAME}.pb-c.h")
  target_include_directories(test_onnx PRIVATE ${SB_ONNX_GEN}) # protobuf-c: inputs edited
endif()
set_tests_properties(test_onnx PROPERTIES TIMEOUT 120)

# test_onnx_dyn: dynamic-axis exports and nn.Transformer (make_dyn.py).
sb_unit_test(test_onnx_dyn unit/test_onnx_dyn.c)
if(SB_HAVE_ONNX)
  target_compile_definitions(test_onnx_dyn PRIVATE SB_HAVE_ONNX=1)
endif()
set_tests_properties(test_onnx_dyn PROPERTIES TIMEOUT 120 SKIP_RETURN_CODE 77)

# test_onnx_twins: static and dynamic-batch twins import to the same model.
sb_unit_test(test_onnx_twins unit/test_onnx_twins.c)
if(SB_HAVE_ONNX)
  target_compile_definitions(test_onnx_twins PRIVATE SB_HAVE_ONNX=1)
endif()
set_tests_properties(test_onnx_twins PROPERTIES TIMEOUT 120 SKIP_RETURN_CODE 77)

# onnx_cli: the exports of make_llm.py and make_dyn.py through `shardbench search -p 8`,
# `mpirun -np 2 shardbench run --strategy best --steps 2` and test_equiv on
# 2 ranks (tests/cli/onnx_cli.sh; test_equiv is built in the equiv topic).
if(SB_HAVE_ONNX)
  add_test(NAME onnx_cli
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/onnx_cli.sh $<TARGET_FILE:shardbench>
            $<TARGET_FILE:test_equiv> ${CMAKE_SOURCE_DIR}/tests/data/onnx ${MPIEXEC_EXECUTABLE})
  set_tests_properties(onnx_cli PROPERTIES TIMEOUT 600
    ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;OPENBLAS_NUM_THREADS=1")
endif()
# onnx_vision_cli: the reduced ViT (static and dynamic batch), a ResNet-18
# and make.py's dynamic-batch exports: search, run and test_equiv on 2 ranks.
if(SB_HAVE_ONNX)
  add_test(NAME onnx_vision_cli
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/onnx_vision_cli.sh $<TARGET_FILE:shardbench>
            $<TARGET_FILE:test_equiv> ${CMAKE_SOURCE_DIR}/tests/data/onnx ${MPIEXEC_EXECUTABLE})
  set_tests_properties(onnx_vision_cli PROPERTIES TIMEOUT 600
    ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;OPENBLAS_NUM_THREADS=1")
endif()

# ---- op_kinds
# Every op kind has its entry in every stage's table (models/ops,
# cost/ops, runtime/ops), none empty.
sb_unit_test(test_op_kinds unit/test_op_kinds.c)
set_property(TEST test_op_kinds PROPERTY TIMEOUT 30)

# attention_cli: --attention fused|materialized refused without a GPU
# machine or with a bad value; fused prices a Llama below materialized.
add_test(NAME attention_cli
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/attention_cli.sh $<TARGET_FILE:shardbench>)
set_tests_properties(attention_cli PROPERTIES TIMEOUT 300)

# ---- gpu_run
# A model priced as a GPU framework runs it (models/gpu_run.c): fused
# attentions found and priced (4 + 3 passes over the kept pairs), no S x S
# tensor kept.
sb_unit_test(test_gpu_run unit/test_gpu_run.c)
set_property(TEST test_gpu_run PROPERTY TIMEOUT 30)

# ---- parse
sb_unit_test(test_parse unit/test_parse.c)

# ---- pipesearch
# The pipeline search (search/pipeline.c) against brute force over the same
# space, forced stages and micro-batches, S = M = 1 against the plain DP.
sb_unit_test(test_pipesearch unit/test_pipesearch.c)

# ---- ranks_agree
# Ranks started with different arguments (MPMD launches) fail together with
# one message naming what differs, within a timeout (tests/cli/ranks_agree.sh);
# the runtime's agreement (sb_agree_text, sb_agree_plan, data sources,
# checkpoint indexes read per rank) on 2 ranks (tests/mpi/test_agree.c).
add_test(NAME ranks_agree
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/ranks_agree.sh $<TARGET_FILE:shardbench>
          ${MPIEXEC_EXECUTABLE})
set_tests_properties(ranks_agree PROPERTIES
  TIMEOUT 600
  ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;OPENBLAS_NUM_THREADS=1;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models")

add_executable(test_agree ${CMAKE_CURRENT_SOURCE_DIR}/mpi/test_agree.c)
target_link_libraries(test_agree PRIVATE shardbench_static)
foreach(np 2 3)
  add_test(NAME test_agree_np${np}
    COMMAND ${MPIEXEC_EXECUTABLE} --oversubscribe --allow-run-as-root -np ${np}
            $<TARGET_FILE:test_agree>)
  set_tests_properties(test_agree_np${np} PROPERTIES
    TIMEOUT 120
    ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;OPENBLAS_NUM_THREADS=1;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models")
endforeach()

# ---- relayout
# Relayout and the group cache (runtime/relayout/relayout.c, groups.c, part of
# libshardbench): their MPI test, run on 1, 2, 3, 4 and 8 ranks; and the
# relayout benchmark (perf/relayout).
add_executable(test_relayout ${CMAKE_CURRENT_SOURCE_DIR}/mpi/test_relayout.c)
target_link_libraries(test_relayout PRIVATE shardbench_static PkgConfig::CMOCKA)

# Every rank runs every test; the test program agrees on pass/fail over MPI.
# ASan's leak checker is off for these tests only: it reports allocations
# OpenMPI keeps until exit (inside libmpi, libopen-pal, hwloc), not ours.
foreach(np 1 2 3 4 8)
  add_test(NAME test_relayout_np${np}
    COMMAND ${MPIEXEC_EXECUTABLE} --oversubscribe --allow-run-as-root -np ${np}
            $<TARGET_FILE:test_relayout>)
  set_tests_properties(test_relayout_np${np} PROPERTIES
    TIMEOUT 120
    ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0")
endforeach()

add_executable(bench_relayout ${CMAKE_SOURCE_DIR}/perf/relayout.c)
target_link_libraries(bench_relayout PRIVATE shardbench_static)
set_target_properties(bench_relayout PROPERTIES
  RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/perf OUTPUT_NAME relayout)

# ---- results
sb_unit_test(test_results unit/test_results.c)

# ---- run_cli
# `shardbench run` end to end under mpirun (tests/cli/run_cli.sh): the JSON
# report and the results database of a data-parallel run on 2 ranks, the
# errors (strategy for another P or model, unknown --set, unknown model: one
# message, every rank exits 2, no hang) and --strategy best on 3 ranks.
# Budget: 120 s (about 5 s on two idle cores in Release, 15 s in Sanitize,
# 30 s in Sanitize with the other core busy).
find_program(SB_SQLITE3_SHELL sqlite3)
if(SB_SQLITE3_SHELL)
  add_test(NAME run_cli
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/run_cli.sh $<TARGET_FILE:shardbench> ${MPIEXEC_EXECUTABLE})
  set_tests_properties(run_cli PROPERTIES
    TIMEOUT 120
    ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;OPENBLAS_NUM_THREADS=1;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models")
else()
  message(WARNING "sqlite3 (the shell) not found: test run_cli not registered")
endif()

# ---- search_baselines
sb_unit_test(test_search_baselines unit/test_search_baselines.c)

# ---- search_cli
# The baseline commands end to end: search --algo for every algorithm,
# candidates (table and JSON), prune (strategy files + index.tsv header that
# `shardbench bench` reads) and export of a survivor; bad input exits 2.
add_test(NAME test_search_cli
  COMMAND bash -c "set -e
    B=$<TARGET_FILE:shardbench>; D=$(mktemp -d); trap 'rm -rf $D' EXIT
    S='--set batch=8 --set vocab=64 --set units=16 --set seq=8'
    for a in pase bf dp expert mcmc candidates; do
      $B search -m rnnlm -p 4 $S --algo $a --budget 2000 --db $D/r.db | grep -q '^total cost'
    done
    test $(sqlite3 $D/r.db 'SELECT count(*) FROM search_runs') = 6
    $B candidates -m rnnlm -p 4 $S --top 3 | grep -q '^1 '
    $B candidates -m rnnlm -p 4 $S --format json | grep -q '\"candidates\":\\['
    $B prune -m rnnlm -p 4 $S --within 100 --budget 2000 --out $D/s > /dev/null
    test \"$(head -1 $D/s/index.tsv)\" = \"$(printf 'file\\tkind\\tpredicted_cost\\tpredicted_mem_bytes')\"
    test -f $D/s/01-pase.strategy
    for f in dtensor torch jax mtf; do $B export $D/s/01-pase.strategy --to $f | grep -q '^op loss'; done
    rc=0; $B search -m rnnlm -p 4 --algo nope 2>/dev/null || rc=$?; test $rc = 2
    rc=0; $B export $D/s/index.tsv --to jax 2>/dev/null || rc=$?; test $rc = 2
    rc=0; $B prune -m rnnlm -p 4 $S --device-mem 0.000001 --out $D/t > /dev/null 2>&1 || rc=$?; test $rc = 2")
set_tests_properties(test_search_cli PROPERTIES
  ENVIRONMENT "SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models;ASAN_OPTIONS=detect_leaks=0")

# search --threads: more than the CPUs this process may use is capped there
# and said (taskset to one CPU: the cap is 1); the same strategy as 1 thread;
# --threads 0 and a bad count.
add_test(NAME search_threads
  COMMAND bash -c "set -e
    B=$<TARGET_FILE:shardbench>
    a=$(taskset -c 0 $B search -m transformer -p 16 --threads 8 --db none --format tsv 2>err.txt | grep -v second)
    grep -q -- '--threads 8: this process may use 1 CPU; 1 thread' err.txt
    b=$($B search -m transformer -p 16 --threads 1 --db none --format tsv | grep -v second)
    test \"$a\" = \"$b\"
    $B search -m transformer -p 16 --threads 0 --db none --format tsv > /dev/null
    rc=0; $B search -m transformer -p 16 --threads x --db none 2>/dev/null || rc=$?; test $rc = 2")
set_tests_properties(search_threads PROPERTIES
  ENVIRONMENT "SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models;ASAN_OPTIONS=detect_leaks=0"
  WORKING_DIRECTORY ${CMAKE_BINARY_DIR})

# ---- search_memory
# search --memory LIMIT (the exact search within a per-device memory limit,
# search/dp_mem.c) end to end: the constraint binds, the optimum is kept when
# it fits, nothing-fits names the least memory, bad sizes exit 2.
# Exactness against brute force: test_dp (test_within_equals_brute_force).
add_test(NAME search_memory
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/search_memory.sh $<TARGET_FILE:shardbench>)
set_tests_properties(search_memory PROPERTIES TIMEOUT 300
  ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models")

# Activation recomputation through the command line (tests/cli/recompute_cli.sh):
# search --recompute all|auto|none (text, JSON, within --memory), the saved
# strategy's recompute lines run by `run` (same losses, lower peak).
add_test(NAME recompute_cli
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/recompute_cli.sh $<TARGET_FILE:shardbench>
          ${MPIEXEC_EXECUTABLE})
set_tests_properties(recompute_cli PROPERTIES TIMEOUT 120
  ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;OPENBLAS_NUM_THREADS=1;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models")

# ---- search_pipeline
# search --space full (the pipeline search, search/pipeline.c) end to end:
# forced stages, micro-batches and schedule in the table, JSON and strategy
# file; S = M = 1 equals plain; --memory respected or nothing-fits named.
add_test(NAME search_pipeline
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/search_pipeline.sh $<TARGET_FILE:shardbench>)
set_tests_properties(search_pipeline PROPERTIES TIMEOUT 120
  ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models")

# ---- strategy_io
# Strategy files' model line: bare and quoted values, names with a blank,
# '#', '"', '\' and control characters saved and loaded back.
sb_unit_test(test_strategy_io unit/test_strategy_io.c)
# Devices, FIFOs and directories given as strategy files are refused at once
# (test_special_files); the timeout backs up the test's own alarm.
set_tests_properties(test_strategy_io PROPERTIES TIMEOUT 60)

# ---- backend families
# The backend's kernel families (include/shardbench/backend.h): one small
# model per op kind runs on a backend holding only the families its ops
# and the executor declare, with the full CPU backend's losses; a backend
# without a family a model needs, or with an empty entry, is refused at
# creation naming the family and the op (tests/unit/test_backend_families.c).
sb_unit_test(test_backend_families unit/test_backend_families.c)
set_property(TEST test_backend_families APPEND PROPERTY ENVIRONMENT
  "ASAN_OPTIONS=detect_leaks=0" OPENBLAS_NUM_THREADS=1)
set_property(TEST test_backend_families PROPERTY TIMEOUT 120)

# ---- zero
# ZeRO's backend collectives (reduce_scatter, allgather) on the CPU and
# cpu-devmem backends with the executor's slicing, even, uneven and empty
# slices, on 2, 3 and 4 ranks (tests/mpi/test_zero.c). The executor's use of
# them: the equiv topic (--zero), memory, run_cli.
add_executable(test_zero ${CMAKE_CURRENT_SOURCE_DIR}/mpi/test_zero.c)
target_link_libraries(test_zero PRIVATE shardbench_static)
foreach(np 2 3 4)
  add_test(NAME test_zero_np${np}
    COMMAND ${MPIEXEC_EXECUTABLE} --oversubscribe --allow-run-as-root -np ${np}
            $<TARGET_FILE:test_zero>)
  set_tests_properties(test_zero_np${np} PROPERTIES
    TIMEOUT 120
    ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;OPENBLAS_NUM_THREADS=1")
endforeach()

# ---- labels
# Each test's kind, from the folder its program lives in (unit/, mpi/,
# cli/, fuzz/; tree: scripts/'s checks of the source tree; perf: perf/'s
# benchmark). sb_labels(LABEL REGEX...): LABEL on every test registered
# above whose name matches a REGEX. Then every test must have exactly one.
function(sb_labels label)
  get_property(all DIRECTORY PROPERTY TESTS)
  foreach(t IN LISTS all)
    foreach(re IN LISTS ARGN)
      if(t MATCHES "${re}")
        set_property(TEST ${t} APPEND PROPERTY LABELS ${label})
        break()
      endif()
    endforeach()
  endforeach()
endfunction()
sb_labels(unit
  "^test_(parse|cost|profile|dp|pipesearch|results|kernels|search_baselines|export)$"
  "^test_(strategy_io|text|hf|cpuset|calibration|machine|collectives|megatron)$"
  "^test_(stats|nightly_db|bench_other|bench_pipeline|op_kinds|onnx|onnx_dyn|onnx_twins|dtensor)$"
  "^test_gpu_run$"
  "^test_(executor_timing|backend_families)$" "^cuda_(host|check|check_self)$")
sb_labels(mpi "^test_(relayout|agree|checkpoint|data_train|memory|zero)_np[0-9]+$"
  "^test_equiv_" "^test_bf16_keep$")
sb_labels(cli
  "^(bench_pipeline|calibration_cli|calibrate_rate|cpuset_cli|export_extras|figures)$"
  "^(figures_megatron|megatron_run|search_refuse|op_breakdown|attention_cli)$"
  "^(hf_cli|hf_ref_.*|hostile_input|hostile_io|json_names|machine_cli|megatron_cli)$"
  "^(validate|validate_h100|validate_h100_dgxc|full_vs_megatron)$"
  "^(nightly|onnx_cli|onnx_vision_cli|paper_table2|precision_cli|profile_cli|ranks_agree)$"
  "^(recompute_cli|run_cli|search_memory|search_pipeline|search_threads|export_jax)$"
  "^test_(ckpt_resume|ckpt_zero|pipeline_run|ranks_cyclic|search_cli)$")
sb_labels(fuzz "^fuzz_[a-z]+_replay$")
sb_labels(tree "^limits(_commits)?$")
sb_labels(perf "^(bench_search_memory|perf_gpu_model_plan|perf_gpu_attention|gpu_measured_machines)$")
get_property(SB_ALL_TESTS DIRECTORY PROPERTY TESTS)
foreach(t IN LISTS SB_ALL_TESTS)
  get_property(l TEST ${t} PROPERTY LABELS)
  list(LENGTH l n)
  if(NOT n EQUAL 1)
    message(FATAL_ERROR "tests/tests.cmake: test ${t} has ${n} labels (${l}): "
                        "name it in one sb_labels list")
  endif()
endforeach()
