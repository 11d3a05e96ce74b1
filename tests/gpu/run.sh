#!/usr/bin/env bash
# tests/gpu/run.sh: the checks of the cuda backend on a machine with a GPU,
# in one go, fitted to one short run (default budget 420 s, build included).
# CI has no GPU: it only builds the backend and runs its host tests.
# scripts/gpu-check.sh runs this script. From the repository root:
#
#   bash tests/gpu/run.sh [OUTDIR]        # OUTDIR: default $OUT when set, else build-gpu/
#   SB_GPU_BUDGET=900 SB_EQUIV_RANDOM=8 bash tests/gpu/run.sh   # a longer, fuller run
#   SB_EQUIV_NP="1 2" SB_EQUIV_MODELS="alexnet rnnlm" bash tests/gpu/run.sh
#
# 0. GPU and driver first, before building or writing anything: nvidia-smi
#    gives the GPUs, the driver and the compute mode; no nvidia-smi, no GPU,
#    or a driver older than the toolkit needs (CUDA 13: R580, CUDA 12: R525)
#    is one line and exit 77. A compute mode other than Default cannot
#    host several ranks on one GPU: those steps are skipped with a line.
# 1. dependencies: where mpirun is missing and build-gpu-deps/debs was
#    carried (scripts/gpu-deps.sh download), they are unpacked into
#    build-gpu-deps/prefix and used from there (Open MPI relocated with
#    OPAL_PREFIX); cuDNN and NCCL come from the toolkit or NVIDIA's Python
#    wheels (their lib/ folders go on LD_LIBRARY_PATH);
# 2. configure Release with SHARDBENCH_CUDA=ON in build-gpu/ and build only
#    shardbench, cuda_host, cuda_check, test_equiv, bench_gpu,
#    bench_gpu_model and bench_gpu_attention, -j nproc;
# 3. cuda_host, then cuda_check (every kernel of the cuda table against the
#    CPU table, then GEMM and conv TFLOP/s) in fp32, tf32 and bf16;
# 4. `shardbench run` of AlexNet on one rank (the pool and algorithm-cache
#    report), the same in bf16 with nothing kept (the report must show bf16
#    weight copies read by GEMMs, the losses must be those of a run without
#    the copies, SHARDBENCH_CUDA_BF16_COPIES=0, bit for bit; the per-op
#    times, from CUDA events read once per step, must be > 0 and fit in the
#    steps' wall time), a small transformer with conversions kept on 1 and
#    2 ranks the same way, within 1e-5 (the report must show GEMM operands
#    read again from a kept bf16 conversion), then
#    perf/gpu (-n 5 -w 2 -r 10) in the first precision of
#    SB_GPU_BENCH_PREC (default "bf16 tf32 fp32": bf16 first, the MFU goal
#    and the cost of its per-GEMM conversions); the others run after the
#    equivalence suite, as time allows; then perf/gpu_model (the GEMMs
#    `validate` prices for the published H100 runs, bf16 and fp8, the op
#    model against cuBLAS, a 15 s soak first, HBM copy; its machine-file
#    fragment into OUTDIR/gpu-model.machine); then `validate` over the
#    published runs with those figures in h100-sxm's place
#    (tests/gpu/measured_machines.sh; into the log and report.md);
# 5. the equivalence suite in fp32 (test_equiv --backend cuda: data
#    parallel, the search's best, priced at --flops 0.01 as in ctest so
#    that it splits, and SB_EQUIV_RANDOM random strategies of each model,
#    against a one-rank reference within 1e-3) at P = 2, then 4 as the
#    budget allows (test_equiv refuses one rank: nothing to split; P = 1
#    on the GPU is the `shardbench run` of step 4); more ranks than GPUs
#    go over the host-staged MPI path (SHARDBENCH_COMM=mpi); each rank's
#    exit report gives NCCL's estimated buffers, the pool's reserve for
#    them and the device's free memory, to hold the estimate to; after the
#    first P, perf/gpu_attention (cuDNN's fused attention through the image's
#    PyTorch, causal and not, 512-16k tokens: its fragment of
#    attn_fwd_tflops and attn_bwd_tflops into OUTDIR/gpu-attention.machine;
#    exit 77, "no-gpu", also where PyTorch or its cuDNN attention is missing),
#    and `validate` again with both fragments;
# 6. report: `shardbench bench --backend cuda` of AlexNet and the
#    Transformer at small sizes, P = 1 and 2, then `shardbench report` and
#    `shardbench plot` of that run.
#
# Each step prints its start time and duration. A step whose estimate does
# not fit in what is left of the budget (keeping the report's share) is
# skipped with a line; a step stopped by `timeout --kill-after` (exit 124 or
# 137) is a budget overrun, reported as such, not a code failure. A failed
# step does not stop the later ones (a failed build does).
#
# OUTDIR gets at most 8 files: gpu-model.machine and gpu-attention.machine
# (perf/gpu_model's and perf/gpu_attention's measured figures), gpu-run.log (everything printed),
# gpu-results.db (run, perf/gpu and report figures; SQLite), steps.tsv
# (step, status, seconds, exit status), report.md (GPU, versions, steps,
# validate with the measured figures, `shardbench report`), gpu-report.tar.gz (report.md and the figures; the
# gnuplot scripts and data when gnuplot is missing), and cmake.log.
# Exit status: 0 no step failed (skips and overruns are listed on the last
# line); 1 a step failed (named on the last lines); 77 no usable GPU.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root" || exit 1
me=tests/gpu/run.sh
out=${1:-${OUT:-$root/build-gpu}}
build=${SB_GPU_BUILD:-$root/build-gpu}
random=${SB_EQUIV_RANDOM:-2}
nps=${SB_EQUIV_NP:-2 4}
models=${SB_EQUIV_MODELS:-alexnet rnnlm transformer resnet101 inception3 transformer-large}
bench_precs=${SB_GPU_BENCH_PREC:-bf16 tf32 fp32}
budget=${SB_GPU_BUDGET:-420}
start=$SECONDS
[ -d /usr/local/cuda/bin ] && export PATH=/usr/local/cuda/bin:$PATH

# ---- 0. GPU and driver, before anything else ---------------------------------
if ! command -v nvidia-smi >/dev/null 2>&1; then
    echo "$me: no GPU: nvidia-smi is not installed; nothing was built or run" >&2
    exit 77
fi
if ! gpus=$(timeout 20 nvidia-smi --query-gpu=index,name,driver_version,compute_mode,memory.total,pci.bus_id \
    --format=csv,noheader 2>&1) || ! grep -q ',' <<<"$gpus"; then
    echo "$me: no GPU: nvidia-smi lists none ($(head -n 1 <<<"$gpus")); nothing was built or run" >&2
    exit 77
fi
ngpu=$(grep -c ',' <<<"$gpus")
driver=$(head -n 1 <<<"$gpus" | cut -d, -f3 | tr -d ' ')
cuda_ver=$(nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9][0-9]*\)\.\([0-9]*\).*/\1.\2/p')
need=525
[ "${cuda_ver%%.*}" = 13 ] && need=580
need=${SB_GPU_MIN_DRIVER:-$need}
if ! [[ ${driver%%.*} =~ ^[0-9]+$ ]] || [ "${driver%%.*}" -lt "$need" ]; then
    echo "$me: driver $driver is too old for CUDA ${cuda_ver:-?} (needs R$need or newer); nothing was built or run" >&2
    exit 77
fi
shared_ok=1
grep -v -q ', Default, ' <<<"$gpus" && shared_ok=0

mkdir -p "$out" "$build"
out=$(cd "$out" && pwd)
log=$out/gpu-run.log
db=${SB_GPU_DB:-$out/gpu-results.db}
steps=$out/steps.tsv
: >"$log"
# a reused OUTDIR: no fragment of an earlier run may stand in for this one's
rm -f "$out/gpu-model.machine" "$out/gpu-attention.machine"
exec > >(tee -a "$log") 2>&1
printf 'step\tstatus\tseconds\texit\n' >"$steps"

echo "== $me: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), commit $(git rev-parse --short=12 HEAD 2>/dev/null || echo ?)," \
    "$(nproc) cores, budget $budget s, output in $out"
echo "== GPUs (index, name, driver, compute mode, memory, bus):"
printf '   %s\n' "$gpus"
echo "== driver $driver, toolkit CUDA ${cuda_ver:-? (no nvcc on PATH)}, needs R$need or newer: ok"
[ "$shared_ok" = 1 ] ||
    echo "== compute mode is not Default on every GPU: ranks cannot share a GPU; steps with more ranks than GPUs are skipped"

# ---- steps -------------------------------------------------------------------
reserve=0 # seconds kept for the report step while the earlier ones run
nfail=0
failed=""
skipped=""
overran=""
record() { printf '%s\t%s\t%d\t%s\n' "$1" "$2" "$3" "$4" >>"$steps"; }
skip() { # NAME WHY
    printf '\n== SKIPPED %s: %s (at %d s)\n' "$1" "$2" $((SECONDS - start))
    record "$1" skipped 0 -
    skipped="$skipped; $1"
}
# run_step NAME ESTIMATE CMD...: runs CMD under what is left of the budget
# (less the reserve), when the estimate fits (else 75: skipped); records
# the outcome and returns CMD's exit status.
run_step() {
    local name=$1 est=$2
    shift 2
    local left=$((budget - (SECONDS - start) - reserve))
    if [ "$left" -le 0 ] || [ "$left" -lt "$est" ]; then
        skip "$name" "about $est s needed, $left s left of the budget"
        return 75
    fi
    printf '\n== %s (at %d s; estimate %d s, limit %d s)\n' "$name" $((SECONDS - start)) "$est" "$left"
    local t0=$SECONDS rc=0
    if declare -F "$1" >/dev/null; then # a function of this script: in a child bash
        timeout --kill-after=10 "$left" bash -uo pipefail -c "$(declare -f "$1"); $1" || rc=$?
    else
        timeout --kill-after=10 "$left" "$@" || rc=$?
    fi
    local dt=$((SECONDS - t0)) st
    case $rc in
    0) st=passed ;;
    124 | 137)
        st=overrun
        overran="$overran; $name"
        printf '== OVERRUN %s: stopped by timeout after %d s (exit %d): past the budget, not a code failure\n' \
            "$name" "$dt" "$rc"
        ;;
    77) st=no-gpu ;;
    *)
        st=FAILED
        nfail=$((nfail + 1))
        failed="$failed; $name (exit $rc)"
        ;;
    esac
    printf '== %s: %s in %d s (exit %d)\n' "$name" "$st" "$dt" "$rc"
    record "$name" "$st" "$dt" "$rc"
    return "$rc"
}
finish() {
    local rc=$1
    make_report
    # fold the database's write-ahead log back in (fewer files to carry back)
    [ -f "$db" ] && python3 -c "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.close()" "$db" 2>/dev/null
    printf '\n== %s: %d s in all; failed: %s; overrun: %s; skipped: %s\n' "$me" $((SECONDS - start)) \
        "${failed#; }" "${overran#; }" "${skipped#; }"
    [ -z "$failed" ] || printf '%s: FAILED:%s\n' "$me" "${failed#;}"
    [ "$rc" -ne 0 ] || [ -n "$failed" ] || echo "$me: no step failed; log $log, figures in $db"
    exit "$rc"
}

# ---- 1. dependencies -----------------------------------------------------------
command -v nvcc >/dev/null || { echo "$me: nvcc not found (PATH, /usr/local/cuda/bin): cannot build the cuda backend"; exit 1; }
if ! command -v mpirun >/dev/null 2>&1 || [ -n "${SB_GPU_USE_DEBS:-}" ]; then
    prefix=${SB_GPU_DEPS_PREFIX:-$root/build-gpu-deps/prefix}
    glibc=$(getconf GNU_LIBC_VERSION 2>/dev/null | sed 's/^glibc //')
    if [ -n "$glibc" ] && [ "$(printf '%s\n' 2.36 "$glibc" | sort -V | head -n 1)" != 2.36 ]; then
        echo "== glibc $glibc is older than Debian 12's 2.36: libevent (Open MPI) from build-gpu-deps will not load"
    fi
    # a prefix unpacked elsewhere (another checkout's paths) is unpacked again
    if ! grep -qx "export SB_DEPS_PREFIX=$prefix" "$prefix/env.sh" 2>/dev/null; then
        if ls build-gpu-deps/debs/*.deb >/dev/null 2>&1; then
            t0=$SECONDS
            bash scripts/gpu-deps.sh unpack "$prefix" || { echo "$me: unpacking build-gpu-deps/debs failed"; exit 1; }
            echo "== dependencies unpacked into $prefix in $((SECONDS - t0)) s"
        else
            echo "$me: mpirun not found and no build-gpu-deps/debs carried (bash scripts/gpu-deps.sh download, then carry build-gpu-deps/debs)"
            exit 1
        fi
    fi
    # shellcheck disable=SC1091
    . "$prefix/env.sh"
fi
for pkg in cudnn nccl; do # NVIDIA's wheels: their libraries load their neighbours by name
    d=$(python3 -c "import importlib.util as u; s = u.find_spec('nvidia.$pkg'); print(list(s.submodule_search_locations)[0] if s else '')" 2>/dev/null) || d=""
    if [ -n "$d" ] && [ -d "$d/lib" ]; then
        export LD_LIBRARY_PATH=$d/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
        echo "== $pkg from the Python wheel in $d"
    fi
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
export SHARDBENCH_MODELS=$root/models
echo "== mpirun: $(command -v mpirun) ($(mpirun --version 2>/dev/null | head -n 1))"

# ---- 2. build ------------------------------------------------------------------
work=$build/report
export build out db work
rm -rf "$work"
mkdir -p "$work/figures"
make_report() {
    local id
    id=$(sed -n 's/^run \([0-9][0-9]*\) in .*/\1/p' "$work/bench.txt" 2>/dev/null | tail -n 1)
    {
        echo "# shardbench on a GPU: $(date -u '+%Y-%m-%d %H:%M UTC')"
        echo
        echo "Commit $(git rev-parse --short=12 HEAD 2>/dev/null || echo ?), driver $driver, CUDA ${cuda_ver:-?}, $(nproc) cores."
        echo
        echo '```'
        printf '%s\n' "$gpus"
        "$build/shardbench" --version 2>&1
        echo '```'
        echo
        echo "## Steps"
        echo
        echo "| step | status | seconds | exit |"
        echo "|---|---|---|---|"
        tail -n +2 "$steps" | awk -F'\t' '{ printf "| %s | %s | %s | %s |\n", $1, $2, $3, $4 }'
        echo
        if [ -s "$work/validate-measured.txt" ]; then
            echo "## validate with this GPU's measured figures"
            echo
            echo '```'
            cat "$work/validate-measured.txt"
            echo '```'
            echo
        fi
        if [ -n "$id" ]; then
            echo "## shardbench report --run $id"
            echo
            "$build/shardbench" report --run "$id" --db "$db" 2>&1
        else
            echo "No bench run to report (the report step did not record one)."
        fi
    } >"$out/report.md"
    if [ -n "$id" ]; then
        if command -v gnuplot >/dev/null; then
            "$build/shardbench" plot --run "$id" --db "$db" --out "$work/figures" ||
                echo "== shardbench plot failed"
        else
            echo "no gnuplot on this machine: draw the figures from gpu-results.db with" \
                "shardbench plot --run $id --db gpu-results.db --out figures" >"$work/figures/README"
        fi
    fi
    cp "$out/report.md" "$work/report.md"
    touch "$work/bench.txt"
    tar -czf "$out/gpu-report.tar.gz" -C "$work" report.md figures bench.txt
    echo "== report: $out/report.md, $out/gpu-report.tar.gz"
}
# shellcheck disable=SC2317  # run through run_step
configure() {
    # shellcheck disable=SC2086  # SB_DEPS_CMAKE_ARGS are words
    cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DSHARDBENCH_CUDA=ON -DSHARDBENCH_TESTS=ON \
        -DCMAKE_CUDA_COMPILER="$(command -v nvcc)" ${SB_DEPS_CMAKE_ARGS:-} >"$out/cmake.log" 2>&1 ||
        { tail -n 40 "$out/cmake.log"; return 1; }
    grep -E 'cuda backend|ONNX|oneDNN|dnnl' "$out/cmake.log" || true
}
# estimate 0: run while any budget is left (everything after needs them)
no_build() { # RC STEP: what was not built stops the run
    case $1 in 75 | 124 | 137) failed="$failed; $2 (no time left in the budget)" ;; esac
    finish 1
}
run_step "configure (Release, SHARDBENCH_CUDA=ON) in $build" 0 configure || no_build $? configure
run_step "build shardbench, cuda tests, test_equiv, perf/gpu (-j$(nproc))" 0 \
    cmake --build "$build" -j"$(nproc)" --target shardbench cuda_host cuda_check test_equiv bench_gpu bench_gpu_model bench_gpu_attention ||
    no_build $? build
"$build/shardbench" --version

# ---- 3. host tests, kernels ------------------------------------------------------
reserve=${SB_GPU_REPORT_RESERVE:-75}
run_step "cuda_host (host logic)" 5 "$build/tests/cuda_host"
for prec in fp32 tf32 bf16; do
    rc=0
    run_step "cuda_check $prec (kernels against the CPU, then TFLOP/s)" 25 \
        env SHARDBENCH_PRECISION="$prec" "$build/tests/cuda_check" 20 --bench || rc=$?
    if [ "$rc" = 77 ]; then
        echo "== the cuda backend found no usable GPU although nvidia-smi lists one: later GPU steps are not run"
        failed="$failed; cuda backend start-up (exit 77)"
        finish 1
    fi
done

# ---- 4. one run, perf/gpu ---------------------------------------------------------
run_step "shardbench run: alexnet batch 16, dp, 5 steps, cuda, 1 rank" 20 \
    env SHARDBENCH_CUDA_REPORT=1 mpirun -np 1 "$build/shardbench" run -m alexnet --set batch=16 \
    --strategy dp --steps 5 --backend cuda --precision fp32 --db "$db"
# bf16 weight copies and per-op times from CUDA events, checked in the output
# shellcheck disable=SC2317  # run through run_step
bf16_events() {
    local o="$work/run-bf16.txt" t="$work/run-bf16-transformer.txt"
    # NP COMM ON_ENV TOL MODEL OUT SETS...: 5 steps of MODEL on NP ranks in bf16
    # with SHARDBENCH_CUDA_REPORT=1 and ON_ENV, then again with
    # SHARDBENCH_CUDA_BF16_COPIES=0 (no weight copies, no kept conversions:
    # both operands converted at every GEMM). The bf16 values are the same,
    # so the losses must agree within TOL (0: bit for bit, as the printed
    # digits show them)
    bf16_pair() {
        local np=$1 comm=$2 on_env=$3 tol=$4 model=$5 f=$6
        shift 6
        local setargs=()
        for kv in "$@"; do setargs+=(--set "$kv"); done
        env SHARDBENCH_COMM="$comm" SHARDBENCH_CUDA_REPORT=1 "$on_env" mpirun --oversubscribe -np "$np" \
            "$build/shardbench" run -m "$model" "${setargs[@]}" --strategy dp --steps 5 --backend cuda \
            --gemm-precision bf16 --db none >"$f" 2>&1 || { cat "$f"; return 1; }
        cat "$f"
        env SHARDBENCH_COMM="$comm" SHARDBENCH_CUDA_BF16_COPIES=0 mpirun --oversubscribe -np "$np" \
            "$build/shardbench" run -m "$model" "${setargs[@]}" --strategy dp --steps 5 --backend cuda \
            --gemm-precision bf16 --db none >"$f.off" 2>&1 || { cat "$f.off"; return 1; }
        paste <(grep -o 'loss [0-9.e+-]*' "$f" | awk '{print $2}') \
            <(grep -o 'loss [0-9.e+-]*' "$f.off" | awk '{print $2}') |
            awk -v m="$model P=$np ($on_env)" -v tol="$tol" \
                '{ n++; d = $1 - $2; if (d < 0) d = -d; s = $2 < 0 ? -$2 : $2;
                   r = d / (s > 1e-30 ? s : 1e-30); if (r > w) w = r }
                 END { printf "%s: bf16 losses against no copies and no kept conversions: %d compared, worst rel. diff %.2g (allowed %g)\n", m, n, w, tol;
                       if (n < 5 || !(w <= tol)) { print "FAIL: " m ": they differ"; exit 1 } }' || return 1
    }
    # AlexNet with the weight copies alone (nothing kept): bit for bit, as
    # before conversions were kept
    bf16_pair 1 auto SHARDBENCH_CUDA_BF16_KEEP_MB=0 0 alexnet "$o" batch=16 || return 1
    # the report: weights copied to bf16 once per update, GEMMs reading them
    local copies hits again
    copies=$(sed -n 's/.*bf16 weight copies [0-9]* ([0-9.]* MiB, made \([0-9]*\) times.*/\1/p' "$o")
    hits=$(sed -n 's/.* times, \([0-9]*\) GEMM operands read from them.*/\1/p' "$o")
    echo "bf16 weight copies made: ${copies:-none} times, GEMM operands read from them: ${hits:-none}"
    if [ "${copies:-0}" -eq 0 ] || [ "${hits:-0}" -eq 0 ]; then
        echo "FAIL: no bf16 weight copy was used"
        return 1
    fi
    # per-op times (event marks, read once per step) fit in the steps' wall time
    awk '/^step +[0-9]+ +loss/ && !/warm-up/ { wall += $5 } /^op +type/ { on = 1; next }
         on && NF == 5 { sum += $3 + $4 + $5 }
         END { printf "per-op seconds %.4f in steps of %.4f s\n", sum, wall;
               if (!(sum > 0) || sum > wall * 1.02 + 1e-4) { print "FAIL: per-op times"; exit 1 } }' "$o" || return 1
    # a transformer with conversions kept (the default): activation x
    # activation GEMMs, the forward's inputs read again in the backward. A
    # part of a kept conversion may be read at another alignment, for which
    # cuBLAS may pick another kernel: 1e-5, not bit equality
    bf16_pair 1 auto SHARDBENCH_CUDA_BF16_KEEP_MB=4096 1e-5 transformer "$t" batch=4 seq=32 vocab=1000 layers=2 || return 1
    again=$(sed -n 's/.*, \([0-9]*\) read again from a kept conversion.*/\1/p' "$t")
    echo "transformer: GEMM operands read again from a kept bf16 conversion: ${again:-none}"
    if [ "${again:-0}" -eq 0 ]; then
        echo "FAIL: no kept bf16 conversion was read again"
        return 1
    fi
    # the same on 2 ranks (the all-reduces and relayouts between the GEMMs)
    if [ "$ngpu" -ge 2 ]; then
        bf16_pair 2 auto SHARDBENCH_CUDA_BF16_KEEP_MB=4096 1e-5 transformer "$t.p2" batch=4 seq=32 vocab=1000 layers=2 || return 1
    elif [ "$shared_ok" = 1 ]; then
        bf16_pair 2 mpi SHARDBENCH_CUDA_BF16_KEEP_MB=4096 1e-5 transformer "$t.p2" batch=4 seq=32 vocab=1000 layers=2 || return 1
    else
        echo "transformer P=2 in bf16: not run (one GPU, compute mode not Default)"
    fi
}
export ngpu shared_ok
run_step "shardbench run: alexnet and transformer in bf16 (weight copies, kept conversions, event timing), 1 and 2 ranks" 60 bf16_events
bench_gpu() { # PRECISION
    run_step "perf/gpu $1" 45 \
        env SHARDBENCH_PRECISION="$1" mpirun -np 1 "$build/perf/gpu" -n 5 -w 2 -r 10 --db "$db"
}
first=${bench_precs%% *}
[ -z "$first" ] || bench_gpu "$first"
# the GPU op model's GEMM prices held to cuBLAS on this GPU (docs/validation.md),
# before the equivalence suite so that the default budget leaves it time
run_step "perf/gpu_model: the published runs' GEMMs, model against cuBLAS (bf16, fp8), 15 s soak" 70 \
    "$build/perf/gpu_model" --seconds 0.3 --soak 15 --db "$db" --fragment "$out/gpu-model.machine"
# the published runs priced again with the figures measured so far (docs/validation.md,
# "What is left"): machines/ copied with h100-sxm's measured keys replaced
# (tests/gpu/measured_machines.sh), validate over the H100 tables; into the log and
# report.md. On an H200 (the same GH100 chip, power limit and SMs; more and faster
# HBM) the H100 rows are priced with its figures, and the report says so.
# shellcheck disable=SC2317  # run through run_step
validate_measured() {
    local frags=() f data rc=0
    for f in "$out/gpu-model.machine" "$out/gpu-attention.machine"; do
        [ -s "$f" ] && frags+=("$f")
    done
    [ ${#frags[@]} -gt 0 ] || { echo "no measured fragment: nothing to price"; return 1; }
    bash tests/gpu/measured_machines.sh "$work/measured" h100-sxm "${frags[@]}" || return 1
    {
        local name
        name=$(head -n 1 <<<"$gpus" | cut -d, -f2 | sed 's/^ //')
        echo "Measured on: $name; the rows' machine h100-sxm, its keys replaced by: ${frags[*]##*/}"
        case $name in
        *H100*HBM3* | *H100*SXM*) ;; # the SXM part (nvidia-smi: "NVIDIA H100 80GB HBM3")
        *) echo "NOT an H100 SXM: the H100 rows are priced with this GPU's fractions of its own peaks" \
            "(the fragments' comments name the machine file they were measured against)" ;;
        esac
        for data in tests/data/published-runs-h100-dgxc.tsv tests/data/published-runs-h100.tsv tests/data/published-runs.tsv; do
            echo
            echo "\$ SHARDBENCH_MACHINES=measured shardbench validate --data $data"
            SHARDBENCH_MACHINES="$work/measured" "$build/shardbench" validate --data "$data" 2>&1
            f=$?
            echo "(exit $f: 0 within the targets, 1 over them)"
            [ "$f" -le 1 ] || rc=1
        done
    } >"$work/validate-measured.txt"
    cat "$work/validate-measured.txt"
    return "$rc"
}
export gpus
if [ -s "$out/gpu-model.machine" ]; then
    run_step "validate: the published runs with this GPU's GEMM figures" 15 validate_measured
else
    skip "validate: the published runs with this GPU's GEMM figures" "perf/gpu_model wrote no fragment"
fi

# ---- 5. equivalence ------------------------------------------------------------------
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
        name="equivalence $model P=$np (fp32)"
        if [ -z "${sets[$model]:-}" ]; then
            skip "$name" "no test sizes for '$model' in $me"
            continue
        fi
        comm=auto
        if [ "$np" -gt "$ngpu" ]; then
            comm=mpi
            [ "$shared_ok" = 1 ] || { skip "$name" "$np ranks on $ngpu GPU(s) need compute mode Default"; continue; }
        fi
        # shellcheck disable=SC2086  # the settings are words
        run_step "$name, SHARDBENCH_COMM=$comm" $((8 + 6 * np)) \
            env SHARDBENCH_COMM=$comm SHARDBENCH_PRECISION=fp32 SHARDBENCH_CUDA_REPORT=1 mpirun --oversubscribe -np "$np" \
            "$build/tests/test_equiv" "$model" ${sets[$model]} --seed "$np" --random "$random" \
            --flops 0.01 --backend cuda
    done
    # after the first P's equivalence, before the next: the fused attention kernel's rates
    # (cuDNN through the image's PyTorch) against the machine file's
    if [ -z "${attn_done:-}" ]; then
        attn_done=1
        run_step "perf/gpu_attention: cuDNN's fused attention, causal and not, model against measured" 45 \
            "$build/perf/gpu_attention" --seconds 0.3 --db "$db" --fragment "$out/gpu-attention.machine"
        if [ -s "$out/gpu-attention.machine" ]; then
            run_step "validate: the published runs with this GPU's figures, the attention's too" 15 \
                validate_measured
        else
            skip "validate: the published runs with this GPU's attention figures" \
                "perf/gpu_attention wrote no fragment"
        fi
    fi
done

# the other precisions of perf/gpu, as time allows
for prec in ${bench_precs#"$first"}; do
    bench_gpu "$prec"
done

# ---- 6. report ---------------------------------------------------------------------------
reserve=0
bench_p=1,2
[ "$shared_ok" = 1 ] || [ "$ngpu" -ge 2 ] || bench_p=1
export bench_p
# shellcheck disable=SC2317  # run through run_step
bench_report() { # exec: the budget's timeout signals shardbench itself
    exec > >(tee "$work/bench.txt")
    exec "$build/shardbench" bench -m alexnet,transformer -p "$bench_p" --backend cuda --steps 3 --warmup 1 \
        --top 3 --search-algos pase --timeout 60 --db "$db" \
        --set alexnet:batch=32 --set transformer:batch=8 --set transformer:seq=32 \
        --set transformer:vocab=2000 --set transformer:layers=2
}
run_step "report: shardbench bench --backend cuda (alexnet, transformer; P=$bench_p)" 60 bench_report
if [ -z "$failed" ]; then finish 0; else finish 1; fi
