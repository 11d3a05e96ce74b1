#!/usr/bin/env bash
# scripts/gpu-check.sh: the cuda backend's checks on a machine with a GPU,
# in one go (CI has no GPU and only builds the backend and runs its host
# tests). Run from anywhere, as root or not:
#
#   bash scripts/gpu-check.sh            # about 3-6 minutes on an H200
#   SB_EQUIV_RANDOM=8 bash scripts/gpu-check.sh   # the full equivalence draw
#   SB_EQUIV_NP="1 2" SB_EQUIV_MODELS="alexnet rnnlm" bash scripts/gpu-check.sh
#
# 1. configures Release with SHARDBENCH_CUDA=ON in build-gpu/ and builds;
# 2. cuda_host (host logic) and cuda_check: every kernel of the cuda table
#    against the CPU table, in fp32, then tf32 and bf16 (looser GEMM/conv
#    tolerances), each followed by GEMM and conv TFLOP/s (--bench);
# 3. `shardbench run` of AlexNet (batch 16, data parallel, 5 steps) on the
#    cuda backend, one rank, with the pool/algorithm-cache report;
# 4. the runtime's equivalence test with --backend cuda (strategies on the
#    GPU against a one-rank CPU reference, 1e-3 relative): every shipped
#    model at P = 1 and, sharing the GPU over the host-staged MPI path
#    (SHARDBENCH_COMM=mpi), P = 2 and 4.
# Everything goes to build-gpu/gpu-check.log as well; exits non-zero at the
# first failure, naming it.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
export PATH=/usr/local/cuda/bin:$PATH
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
export SHARDBENCH_MODELS=$root/models
build=${SB_GPU_BUILD:-build-gpu}
random=${SB_EQUIV_RANDOM:-2}
nps=${SB_EQUIV_NP:-1 2 4}
models=${SB_EQUIV_MODELS:-alexnet resnet101 inception3 rnnlm transformer transformer-large}
mkdir -p "$build"
log=$build/gpu-check.log
: >"$log"
exec > >(tee -a "$log") 2>&1

start=$SECONDS
step() { printf '\n== %s (%d s)\n' "$*" $((SECONDS - start)); }
fail() { printf 'gpu-check: FAILED: %s\n' "$*" >&2; exit 1; }

step "GPU"
nvidia-smi -L || fail "nvidia-smi sees no GPU"

step "configure and build (Release, SHARDBENCH_CUDA=ON) in $build/"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DSHARDBENCH_CUDA=ON -DSHARDBENCH_TESTS=ON >/dev/null ||
    fail "configure"
cmake --build "$build" -j"$(nproc)" --target shardbench cuda_host cuda_check test_equiv ||
    fail "build"
"$build/shardbench" --version

step "cuda_host (host logic)"
"$build/tests/cuda_host" || fail "cuda_host"

for prec in fp32 tf32 bf16; do
    step "cuda_check, SHARDBENCH_PRECISION=$prec"
    SHARDBENCH_PRECISION=$prec "$build/tests/cuda_check" 20 --bench ||
        fail "cuda_check ($prec): a cuda kernel differs from its CPU reference (exit $?)"
done

step "shardbench run: alexnet batch 16, dp, 5 steps, cuda backend"
SHARDBENCH_CUDA_REPORT=1 mpirun -np 1 "$build/shardbench" run -m alexnet --set batch=16 \
    --strategy dp --steps 5 --backend cuda || fail "shardbench run on the cuda backend"

declare -A sets=(
    [alexnet]="--set batch=4 --set image=67 --set classes=16 --set width_div=16"
    [resnet101]="--set batch=4 --set image=64 --set classes=10 --set width_div=16 --lr 0.0001"
    [inception3]="--set batch=4 --set image=107 --set classes=10 --set width_div=16 --lr 0.0001"
    [rnnlm]="--set batch=4 --set vocab=24 --set units=8 --set seq=4 --set layers=2"
    [transformer]="--set batch=2 --set vocab=16 --set seq=4 --set embed=8 --set heads=2 --set dk=4 --set ff=16 --set layers=1"
    [transformer-large]="--set batch=2 --set vocab=16 --set seq=4 --set embed=16 --set heads=4 --set dk=4 --set ff=32 --set layers=1"
)
for np in $nps; do
    for model in $models; do
        [ -n "${sets[$model]:-}" ] || fail "SB_EQUIV_MODELS: no test sizes for '$model'"
        step "equivalence: $model, P=$np, cuda backend (SHARDBENCH_COMM=mpi when P > 1)"
        comm=auto
        [ "$np" -gt 1 ] && comm=mpi
        # shellcheck disable=SC2086  # the settings are words
        SHARDBENCH_COMM=$comm mpirun --oversubscribe -np "$np" "$build/tests/test_equiv" "$model" \
            ${sets[$model]} --seed "$np" --random "$random" --backend cuda ||
            fail "equivalence of $model at P=$np on the cuda backend"
    done
done

step "gpu-check: all passed; log in $log"
