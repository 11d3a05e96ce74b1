# test_hf: the Hugging Face config reader (models/hf/) and the parameter
# count (models/params.c) on tests/data/hf: counts against expected.tsv,
# settings, notes, bad configs, `tie`.
sb_unit_test(test_hf test_hf.c)

# test_equiv_hf_NAME_npN: the configs of tests/data/hf at reduced sizes
# (--set with their own keys: 2 layers, hidden 32, 4 heads, vocab 64, seq 8,
# batch 4; 4 experts of which 2 chosen) on 2 and 4 ranks against one: data
# parallel, the search's best and 8 random strategies, which split the
# pieces each one brings: a tied head (llama-3.2-1b, qwen2, gemma-2, gpt2),
# q/k/v biases (qwen2, qwen1.5-moe, gpt2, pythia), a head_dim other than
# hidden/heads (qwen3, gemma-2: 16 of 32/4), q/k norms (qwen3, qwen3-moe),
# Gemma 2's extra norms and GeGLU, partial rotary and the parallel
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
set(SB_HF_gemma-2-2b "${SB_HF_L};${SB_HF_K};--set;head_dim=16;--set;sliding_window=3")
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
foreach(name llama-3.2-1b qwen2-0.5b qwen3-0.6b gemma-2-2b pythia-160m gpt2 mixtral-8x7b-v0.1
             qwen1.5-moe-a2.7b qwen3-30b-a3b deepseek-v2-lite deepseek-v3 mistral-7b-v0.1)
  foreach(np 2 4)
    sb_equiv(test_equiv_hf_${name}_np${np} ${np} hf:${CMAKE_CURRENT_SOURCE_DIR}/data/hf/${name}
             ${SB_HF_${name}} --seed ${np} --flops 0.01 ${SB_HF_EQ_${name}})
    set_tests_properties(test_equiv_hf_${name}_np${np} PROPERTIES
      ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;OPENBLAS_NUM_THREADS=1;SHARDBENCH_HF_QUIET=1")
  endforeach()
endforeach()

# hf_cli: `import --from hf` (written through a temporary and a rename, the
# text parses, refusals exit 2 naming the key) and `search -m hf:` JSON
# (parameter_count equal to expected.tsv).
add_test(NAME hf_cli COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/hf_cli.sh $<TARGET_FILE:shardbench>
         ${CMAKE_CURRENT_SOURCE_DIR}/data/hf)
set_tests_properties(hf_cli PROPERTIES TIMEOUT 300 ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0")

# hf_ref_NAME: the first loss of `run` at one rank on the same reduced
# configs (and phi-3, mistral) against tests/hf_ref.py, a numpy reference
# of each architecture written from its published description
# (tests/hf_ref.sh; 2e-6 relative: the issue asks 1e-4, too loose at these
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
      COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/hf_ref.sh $<TARGET_FILE:shardbench>
              ${MPIEXEC_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/data/hf ${name} ${SB_HF_${name}})
    set_tests_properties(hf_ref_${name} PROPERTIES TIMEOUT 120
      ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;OPENBLAS_NUM_THREADS=1;HF_REF_PYTHON=${SB_HF_PY}")
  endforeach()
else()
  message(STATUS "no Python with numpy: tests hf_ref_* not registered (tests/hf.cmake)")
endif()
