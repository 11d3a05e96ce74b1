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
add_executable(test_equiv ${CMAKE_CURRENT_SOURCE_DIR}/test_equiv.c ${CMAKE_SOURCE_DIR}/cli/threads.c)
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
# The pointwise ops (act, mul, expand: tests/data/models/swiglu-mlp.model,
# read as a file). Beside best and random, --split forces the splits where a
# broadcast operand's gradient must be summed across ranks: the
# squeeze-excitation mul `se` split along h and w, which its gate `sg`
# lacks (an activation: summed by the accumulating relayout), `gs` along
# seq, which its scale weight lacks (summed with the weight's replicas),
# the expands `p` and `c` along batch, and the SwiGLU product along ff.
# The search's best must split the SwiGLU product along batch (and at P = 4
# along ff too).
set(SB_EQUIV_SPLITS "--split;se=h;--split;se=w;--split;gs=seq;--split;p=batch;--split;c=batch;--split;h1/h=ff")
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
    message(FATAL_ERROR "equiv.cmake: pipeline case ${case}: unknown extra '${extra}'")
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
# checkpoint resumed without one; refusals (tests/pipeline_run.sh).
add_test(NAME test_pipeline_run
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/pipeline_run.sh $<TARGET_FILE:shardbench>
          ${MPIEXEC_EXECUTABLE})
set_tests_properties(test_pipeline_run PROPERTIES
  TIMEOUT 120
  ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;OPENBLAS_NUM_THREADS=1;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models")

# Ranks on nodes (search --ranks, a strategy file's `ranks cyclic N`): the
# search's choice costs the least of the two orders; a cyclic strategy run on
# 4 ranks equals one rank and is placed as the file says; refusals
# (tests/ranks_cyclic.sh).
add_test(NAME test_ranks_cyclic
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/ranks_cyclic.sh $<TARGET_FILE:shardbench>
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

# Megatron's layouts as a strategy file (search --algo megatron --save):
# TP x PP with sequence parallelism, selective recompute and ZeRO 1, TP x CP,
# TP 4, each trained on 4 ranks with one rank's losses (tests/megatron_run.sh).
add_test(NAME megatron_run
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/megatron_run.sh $<TARGET_FILE:shardbench>
          ${MPIEXEC_EXECUTABLE})
set_tests_properties(megatron_run PROPERTIES
  TIMEOUT 180
  ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;OPENBLAS_NUM_THREADS=1;SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models")
