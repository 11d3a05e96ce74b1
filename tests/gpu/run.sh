#!/usr/bin/env bash
# tests/gpu/run.sh: every check of the cuda backend on a machine with a GPU,
# in one go (CI has no GPU: it only builds the backend and runs its host
# tests). scripts/gpu-check.sh runs this script. From anywhere:
#
#   bash tests/gpu/run.sh                     # about 4-7 minutes on an H200
#   SB_EQUIV_RANDOM=8 bash tests/gpu/run.sh   # the full equivalence draw
#   SB_EQUIV_NP="1 2" SB_EQUIV_MODELS="alexnet rnnlm" bash tests/gpu/run.sh
#
# 0. looks for a GPU (nvidia-smi -L) first: without one it says "no GPU"
#    and exits 77 within seconds, before building anything;
# 1. configures Release with SHARDBENCH_CUDA=ON in build-gpu/ and builds
#    shardbench, the cuda tests, test_equiv and bench/gpu;
# 2. cuda_host (host logic) and cuda_check: every kernel of the cuda table
#    against the CPU table, in fp32, then tf32 and bf16 (looser GEMM/conv
#    tolerances), each followed by GEMM and conv TFLOP/s (--bench);
# 3. `shardbench run` of AlexNet (batch 16, data parallel, 5 steps) on the
#    cuda backend, one rank, with the pool/algorithm-cache report (stored in
#    the results database);
# 4. the runtime's equivalence suite with --backend cuda in fp32: data
#    parallel, the search's best and SB_EQUIV_RANDOM random strategies of
#    every shipped model, 3 SGD steps each, against a one-rank CPU reference
#    within 1e-3 relative, at P = 1 (NCCL) and, sharing the GPU over the
#    host-staged MPI path (SHARDBENCH_COMM=mpi), P = 2 and 4. (tf32 and bf16
#    are held to their looser tolerances kernel by kernel in step 2;
#    test_equiv holds every non-CPU backend to 1e-3, which only fp32 meets.)
# 5. bench/gpu (-n 5 -w 2 -r 10, to fit the budget) in each of
#    SB_GPU_BENCH_PREC (default "fp32 tf32 bf16"):
#    table vs cuBLAS/cuDNN TFLOP/s, AlexNet batch 128 and Transformer batch
#    64 step time, executor overhead, TFLOP/s and MFU (bench/README.md).
#
# Everything printed also goes to the log, $SB_GPU_BUILD/gpu-run.log; the
# figures of steps 3 and 5 go to the results database $SB_GPU_DB (default
# $SB_GPU_BUILD/gpu-results.db). The whole run is held to SB_GPU_BUDGET
# seconds (default 480: 8 minutes): a step that would run past it
# is stopped and the run fails. Exit status: 0 all passed; 77 no GPU; 1 the
# first failure (a kernel or a strategy that differs from the CPU, a build
# error, the budget), named on the last line.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
export PATH=/usr/local/cuda/bin:$PATH
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
export SHARDBENCH_MODELS=$root/models
build=${SB_GPU_BUILD:-build-gpu}
random=${SB_EQUIV_RANDOM:-2}
nps=${SB_EQUIV_NP:-1 2 4}
models=${SB_EQUIV_MODELS:-alexnet resnet101 inception3 rnnlm transformer transformer-large}
bench_precs=${SB_GPU_BENCH_PREC:-fp32 tf32 bf16}
budget=${SB_GPU_BUDGET:-480}
# No GPU: say so and stop before building or writing anything.
if ! command -v nvidia-smi >/dev/null 2>&1; then
    echo "tests/gpu/run.sh: no GPU: nvidia-smi is not installed; nothing was built or run" >&2
    exit 77
fi
if ! gpus=$(timeout 15 nvidia-smi -L 2>&1) || ! grep -q '^GPU ' <<<"$gpus"; then
    printf '%s\n' "$gpus" >&2
    echo "tests/gpu/run.sh: no GPU: nvidia-smi -L lists no GPU; nothing was built or run" >&2
    exit 77
fi

mkdir -p "$build"
log=$build/gpu-run.log
db=${SB_GPU_DB:-$build/gpu-results.db}
: >"$log"
exec > >(tee -a "$log") 2>&1

start=0 # SECONDS counts from the start of the script
step() { printf '\n== %s (%d s)\n' "$*" $((SECONDS - start)); }
fail() {
    printf 'tests/gpu/run.sh: FAILED: %s (after %d s; log %s)\n' "$*" $((SECONDS - start)) "$log" >&2
    exit 1
}
# Runs a command under what is left of the budget; 124 means it ran out.
timed() {
    local left=$((budget - (SECONDS - start)))
    [ "$left" -gt 0 ] || return 124
    timeout --kill-after=10 "$left" "$@"
}
# Fails, naming the step, and says when it was the budget that stopped it.
check() {
    local rc=$1
    shift
    [ "$rc" -eq 124 ] && fail "$* (stopped: past the budget of $budget s)"
    [ "$rc" -eq 77 ] &&
        fail "$* (exit 77: the cuda backend found no usable GPU although nvidia-smi lists one; driver too old for this CUDA?)"
    fail "$* (exit $rc)"
}

step "GPU"
printf '%s\n' "$gpus"
command -v mpirun >/dev/null || fail "mpirun not found (bash scripts/deps.sh installs Open MPI)"

step "configure and build (Release, SHARDBENCH_CUDA=ON) in $build/"
rc=0
timed cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DSHARDBENCH_CUDA=ON \
    -DSHARDBENCH_TESTS=ON >/dev/null || rc=$?
[ "$rc" -eq 0 ] || check "$rc" "configure"
timed cmake --build "$build" -j"$(nproc)" --target shardbench cuda_host cuda_check test_equiv \
    bench_gpu || rc=$?
[ "$rc" -eq 0 ] || check "$rc" "build"
"$build/shardbench" --version

step "cuda_host (host logic)"
timed "$build/tests/cuda_host" || check $? "cuda_host"

for prec in fp32 tf32 bf16; do
    step "cuda_check, SHARDBENCH_PRECISION=$prec"
    SHARDBENCH_PRECISION=$prec timed "$build/tests/cuda_check" 20 --bench ||
        check $? "cuda_check ($prec) (a mismatch names the kernel above)"
done

step "shardbench run: alexnet batch 16, dp, 5 steps, cuda backend"
SHARDBENCH_CUDA_REPORT=1 timed mpirun -np 1 "$build/shardbench" run \
    -m alexnet --set batch=16 --strategy dp --steps 5 --backend cuda --precision fp32 --db "$db" ||
    check $? "shardbench run on the cuda backend"
step "shardbench run: transformer (small), best, 2 ranks sharing the GPU, --comm mpi, tf32"
SHARDBENCH_CUDA_REPORT=1 timed mpirun --oversubscribe -np 2 "$build/shardbench" run \
    -m transformer --set batch=8 --set seq=32 --set vocab=2000 --set layers=2 --strategy best \
    --steps 3 --backend cuda --precision tf32 --comm mpi --db "$db" ||
    check $? "shardbench run of the transformer on 2 ranks, cuda backend"

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
        step "equivalence: $model, P=$np, cuda backend, fp32 (SHARDBENCH_COMM=mpi when P > 1)"
        comm=auto
        [ "$np" -gt 1 ] && comm=mpi
        # shellcheck disable=SC2086  # the settings are words
        SHARDBENCH_COMM=$comm SHARDBENCH_PRECISION=fp32 timed mpirun --oversubscribe -np "$np" \
            "$build/tests/test_equiv" "$model" ${sets[$model]} --seed "$np" --random "$random" \
            --backend cuda ||
            check $? "equivalence of $model at P=$np on the cuda backend"
    done
done

for prec in $bench_precs; do
    step "bench/gpu, SHARDBENCH_PRECISION=$prec"
    SHARDBENCH_PRECISION=$prec timed mpirun -np 1 "$build/bench/gpu" -n 5 -w 2 -r 10 --db "$db" ||
        check $? "bench/gpu ($prec)"
done

step "tests/gpu/run.sh: all passed; log in $log, figures in $db"
