#!/usr/bin/env bash
# scripts/main.sh: the first command of the Quick start (README.md): the
# main job on a default that needs no GPU.
#
# Installs missing Debian packages, builds Release in build/, then
#  1. searches the paper's five models at p = 4..64 (PaSE's exact DP) and
#     prints the summary table (`shardbench paper --quiet`);
#  2. calibrates the cost model to this machine (`shardbench calibrate`,
#     the machine file cpu-here), then runs a small end-to-end bench on the
#     CPU backend: AlexNet and the Transformer at reduced sizes on P = 1, 2,
#     4 MPI ranks, each (model, P) profiled (`bench --profile 3`, one launch before each trial round: the
#     predictive cost model's figures), then each survivor of `shardbench
#     prune` (pase-best, data parallel, expert, MCMC, the top mesh x layout
#     candidates) and 4 random valid strategies trained for a few real
#     steps, 3 launches each, predicted in seconds by the profiles;
#  3. writes the figures (gnuplot) and the Markdown report from the database.
# About 1 to 3 minutes on 2 cores once the packages are installed. Prints where the figures and the
# database are. SB_MAIN_PROCS overrides the device counts (default 1,2,4).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
# shellcheck source=scripts/deps.sh
source scripts/deps.sh
sb_install_deps
# one kernel thread per rank (OpenBLAS and the OpenMP loops): a device is a
# core, and one process runs within +-5% of the next (two threads at P = 1
# moved a step +-15% from one launch to the next, which no prediction can
# follow)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DSHARDBENCH_TESTS=OFF
cmake --build build -j"$(nproc)"

db=results/shardbench.db
out=results/main-$(date -u +%Y%m%d-%H%M%S)
mkdir -p "$out"

printf '\n== 1. the exact search over the paper models, p = 4..64\n'
build/shardbench paper --quiet --db "$db"

procs=${SB_MAIN_PROCS:-1,2,4}
pmax=$(tr ',' '\n' <<<"$procs" | sort -n | tail -n 1)
printf '\n== 2. calibrate and profile on this machine, then the end-to-end bench on the CPU backend (reduced sizes)\n'
# the cost model's constants measured here (GEMM, elementwise, all-reduce,
# latency), written as the machine file cpu-here
mpirun --oversubscribe -np "$((pmax > 1 ? pmax : 2))" build/shardbench calibrate --out "$out/calibration-cpu.txt" \
    --machine-out "$out/cpu-here.machine" --quiet
# every (model, P): 3 launches of `shardbench profile` (every op config's
# seconds, the relayouts, the collectives), one before each of the 3 trial
# rounds of the survivors of prune plus 4 random valid strategies, which are
# then predicted by the profiles of all three (the predictive cost model);
# a launch beside other processes' work (another user's, over 0.25 cores)
# is taken again when the machine is free of it, up to 2 times
# (--retries 2); the 4 ranks of P = 4 (more ranks than cores) are bound
# two to a core
# (docs/cost-measured.md, "Launches beside other work")
build/shardbench bench -m alexnet,transformer -p "$procs" --machine "$out/cpu-here.machine" \
    --set alexnet:batch=16 --set alexnet:image=99 --set alexnet:width_div=4 \
    --set transformer:batch=8 --set transformer:seq=32 --set transformer:vocab=2000 \
    --set transformer:embed=128 --set transformer:heads=4 --set transformer:dk=32 \
    --set transformer:ff=512 --set transformer:layers=2 --profile 3 --random 4 --trials 3 \
    --steps 3 --warmup 1 --top 3 --within 4 --retries 2 --timeout 300 --db "$db" | tee "$out/bench.log"
run=$(sed -n '/^run [0-9][0-9]* in /{s/^run \([0-9][0-9]*\) in .*/\1/p;q}' "$out/bench.log")
[ -n "$run" ] || { echo "main.sh: could not find the bench's run id in $out/bench.log" >&2; exit 1; }

printf '\n== 3. figures and report of run %s\n' "$run"
build/shardbench plot --db "$db" --run "$run" --out "$out/figures"
build/shardbench report --db "$db" --run "$run" > "$out/report.md"
cat "$out/report.md"

printf '\nmain.sh: done. Database: %s (run %s). Figures: %s/figures. Report: %s/report.md\n' \
    "$db" "$run" "$out" "$out"
