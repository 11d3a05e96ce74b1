#!/bin/bash
# pipeline_run.sh SHARDBENCH MPIEXEC: `shardbench run` as a pipeline.
# A version-2 strategy file (2 stages of 2 ranks, each stage's configs from
# `search -p 2`, 2 micro-batches, 1f1b, ZeRO 1) run on 4 ranks must give a
# one-rank run's losses (within 1e-5, relative); so must `--stages 2
# --microbatches 2 --schedule gpipe --strategy dp`. A pipeline run's
# checkpoint resumes on 2 ranks without a pipeline, continuing the one-rank
# run's losses. A --zero that disagrees with the file, and --stages that
# does not divide P, fail with status 2 and say why.
set -euo pipefail
sb=$1
mpiexec=$2
dir=$(mktemp -d /tmp/sb_pipe_XXXXXX)
trap 'rm -rf "$dir"' EXIT
set_args=(--set layers=2 --set batch=8 --set seq=8 --set vocab=32 --set embed=16 --set heads=2
          --set dk=8 --set ff=32)
fail=0
# shellcheck source=tests/cli/run_losses.sh
source "$(dirname "${BASH_SOURCE[0]}")/run_losses.sh"

# each stage's configs: the search's best for a stage's 2 devices (splits at --flops 0.01)
"$sb" search -m transformer "${set_args[@]}" -p 2 --flops 0.01 --save "$dir/s2.strategy" >/dev/null
if ! grep '^op ' "$dir/s2.strategy" | awk '{print $4}' | grep -q 2; then
    echo "FAIL: the stage strategy splits no op"
    fail=1
fi
ops=$(grep -c '^op ' "$dir/s2.strategy")
mapfile -t names < <(grep '^op ' "$dir/s2.strategy" | awk '{print $2}')
half=$((ops / 2))
awk -v f0="${names[0]}" -v l0="${names[$((half - 1))]}" -v f1="${names[$half]}" \
    -v l1="${names[$((ops - 1))]}" '
    /^shardbench-strategy/ { print "shardbench-strategy 2"; next }
    /^p / { print "p 4"; next }
    /^cost/ { print; print "pipeline 2 2 1f1b"; print "stage 0 2 " f0 " " l0;
              print "stage 1 2 " f1 " " l1; print "zero 1"; next }
    { print }' "$dir/s2.strategy" >"$dir/s.strategy"

ref=$(run 1 --strategy dp --steps 6 | losses)
ref3=$(echo "$ref" | cut -d, -f1-3)
out=$(run 4 --strategy "$dir/s.strategy" --steps 3 --checkpoint "$dir/ck")
same "strategy file (2 stages x 2 ranks, M=2, 1f1b, zero 1)" "$(echo "$out" | losses)" "$ref3"
for key in '"stages":2' '"microbatches":2' '"schedule":"1f1b"' '"zero":1'; do
    if ! echo "$out" | grep -q "$key"; then
        echo "FAIL: run's JSON lacks $key"
        fail=1
    fi
done
same "--stages 2 --microbatches 2 --schedule gpipe, dp" \
    "$(run 4 --strategy dp --stages 2 --microbatches 2 --schedule gpipe --steps 3 | losses)" "$ref3"
same "checkpoint of the pipeline, resumed on 2 ranks" \
    "$(run 2 --strategy dp --steps 3 --restore "$dir/ck" | losses)" "$(echo "$ref" | cut -d, -f4-6)"

# refusals: status 2 and the reason
expect_error() {
    local label=$1 want=$2
    shift 2
    local st=0 err
    err=$(run 4 --steps 1 "$@" 2>&1 >/dev/null) || st=$?
    if [ "$st" -eq 2 ] && echo "$err" | grep -q "$want"; then
        echo "$label: ok: refused ($want)"
    else
        echo "$label: FAIL: status $st, said: $err"
        fail=1
    fi
}
expect_error "--zero against the file" "has zero 1" --strategy "$dir/s.strategy" --zero 2
expect_error "--stages 3 on 4 ranks" "does not divide p = 4" --strategy dp --stages 3
exit $fail
