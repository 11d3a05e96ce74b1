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
