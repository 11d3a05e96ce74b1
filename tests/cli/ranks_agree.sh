#!/bin/bash
# ranks_agree.sh SHARDBENCH MPIEXEC: ranks started with different arguments
# (MPMD launches: `mpirun -np 1 shardbench run ... : -np 1 shardbench run
# ...`) must all fail together, with status 2 and one message naming what
# differs: no hang (each launch runs under `timeout`), no crash, no
# MPI_Abort, no sanitizer report. Then a run whose ranks agree still trains.
set -uo pipefail
sb=$1
mpiexec=$2
dir=$(mktemp -d /tmp/sb_agree_XXXXXX)
trap 'rm -rf "$dir"' EXIT
T=(-m transformer --set vocab=16 --set seq=4 --set embed=8 --set heads=2 --set dk=4 --set ff=16
   --set layers=1 --db none --warmup 0)
fail=0
# case NAME EXPECTED-MESSAGE NP-EACH -- ARGS-OF-THE-FIRST -- ARGS-OF-THE-SECOND
# (an argument `env` starts the rank through env(1), for per-rank variables;
# `-wdir DIR` first runs it in its own working folder, as on another node)
case_() {
    local name=$1 want=$2 np=$3
    shift 3
    local a=() b=()
    shift # --
    while [ "$1" != -- ]; do a+=("$1"); shift; done
    shift
    b=("$@")
    local out status
    out=$(timeout 90 "$mpiexec" --oversubscribe --allow-run-as-root \
        -np "$np" "${a[@]}" : -np "$np" "${b[@]}" 2>&1)
    status=$?
    local msg
    msg=$(echo "$out" | grep '^shardbench:' | sort -u)
    if [ $status -eq 124 ]; then
        echo "$name: FAIL: hang (killed after 90 s)"
        fail=1
    elif echo "$out" | grep -qiE 'MPI_ABORT|Segmentation|signal|runtime error|AddressSanitizer'; then
        echo "$name: FAIL: crash or abort (status $status):"
        echo "$out" | head -20
        fail=1
    elif [ $status -ne 2 ] || [ "$(echo "$msg" | wc -l)" -ne 1 ] ||
        ! echo "$msg" | grep -qF "$want"; then
        echo "$name: FAIL: status $status, expected 2 and one message with [$want]:"
        echo "$out" | head -20
        fail=1
    else
        echo "$name: ok: $msg"
    fi
}
run=("$sb" run "${T[@]}")
case_ "batch (best, 2+2 ranks)" "ranks disagree on the model: rank 0 has batch=16, rank 2 has batch=8" 2 \
    -- "${run[@]}" --strategy best --steps 1 --set batch=16 -- "${run[@]}" --strategy best --steps 1 --set batch=8
case_ "steps" "ranks disagree on the options: rank 0 has steps=3, rank 1 has steps=1" 1 \
    -- "${run[@]}" --strategy dp --set batch=4 --steps 3 -- "${run[@]}" --strategy dp --set batch=4 --steps 1
case_ "seed" "ranks disagree on the options: rank 0 has seed=1, rank 1 has seed=2" 1 \
    -- "${run[@]}" --strategy dp --set batch=4 --steps 1 -- "${run[@]}" --strategy dp --set batch=4 --steps 1 --seed 2
case_ "lr" "ranks disagree on the options: rank 0 has lr=0.01, rank 1 has lr=0.5" 1 \
    -- "${run[@]}" --strategy dp --set batch=4 --steps 1 -- "${run[@]}" --strategy dp --set batch=4 --steps 1 --lr 0.5
case_ "model" "ranks disagree on the model: rank 0 has model=transformer, rank 1 has model=alexnet" 1 \
    -- "${run[@]}" --strategy best --set batch=4 --steps 1 \
    -- "$sb" run -m alexnet --set batch=4 --set image=67 --set classes=16 --set width_div=16 \
       --db none --warmup 0 --strategy best --steps 1
case_ "strategy" "ranks disagree on the options: rank 0 has strategy=best, rank 1 has strategy=dp" 1 \
    -- "${run[@]}" --strategy best --set batch=4 --steps 1 -- "${run[@]}" --strategy dp --set batch=4 --steps 1
case_ "format" "ranks disagree on the options: rank 0 has format=table, rank 1 has format=json" 1 \
    -- "${run[@]}" --strategy dp --set batch=4 --steps 1 -- "${run[@]}" --strategy dp --set batch=4 --steps 1 --format json
case_ "checkpoint on one rank" "ranks disagree on the options: rank 0 has checkpoint=$dir/ck, rank 1 has checkpoint=none" 1 \
    -- "${run[@]}" --strategy dp --set batch=4 --steps 1 --checkpoint "$dir/ck" \
    -- "${run[@]}" --strategy dp --set batch=4 --steps 1
case_ "restore on one rank" "ranks disagree on the options: rank 0 has restore=none, rank 1 has restore=$dir/ck" 1 \
    -- "${run[@]}" --strategy dp --set batch=4 --steps 1 \
    -- "${run[@]}" --strategy dp --set batch=4 --steps 1 --restore "$dir/ck"
case_ "data on one rank" "ranks disagree on the options: rank 0 has data=none, rank 1 has data=$dir/none.rec" 1 \
    -- "${run[@]}" --strategy dp --set batch=4 --steps 1 \
    -- "${run[@]}" --strategy dp --set batch=4 --steps 1 --data "$dir/none.rec"
# environment read by one rank only (the cuda backend's; compared before
# the backend starts, so this needs no GPU)
case_ "SHARDBENCH_PRECISION" "ranks disagree on the options: rank 0 has precision=fp32, rank 1 has precision=bf16" 1 \
    -- "${run[@]}" --strategy dp --set batch=4 --steps 1 --backend cuda \
    -- env SHARDBENCH_PRECISION=bf16 "${run[@]}" --strategy dp --set batch=4 --steps 1 --backend cuda
case_ "SHARDBENCH_COMM" "ranks disagree on the options: rank 0 has comm=auto, rank 1 has comm=mpi" 1 \
    -- "${run[@]}" --strategy dp --set batch=4 --steps 1 --backend cuda \
    -- env SHARDBENCH_COMM=mpi "${run[@]}" --strategy dp --set batch=4 --steps 1 --backend cuda
# per-node folders (each rank in its own working folder, a relative
# --restore): a checkpoint that only rank 0 has, and copies that differ
mkdir -p "$dir/n0" "$dir/n1" "$dir/n2"
(cd "$dir/n0" && "$mpiexec" --oversubscribe --allow-run-as-root -np 2 "${run[@]}" --strategy dp \
    --set batch=4 --steps 1 --checkpoint ck >/dev/null 2>&1) || { echo "save: FAIL"; fail=1; }
(cd "$dir/n2" && "$mpiexec" --oversubscribe --allow-run-as-root -np 2 "${run[@]}" --strategy dp \
    --set batch=4 --steps 2 --checkpoint ck --save-every 1 >/dev/null 2>&1 &&
    rm -r ck/step-000001 && mv ck/step-000002 ck/step-000001) || { echo "save: FAIL"; fail=1; }
case_ "checkpoint on rank 0 only" "checkpoint index 'ck/step-000001/ckpt.index' does not exist" 1 \
    -- -wdir "$dir/n0" "${run[@]}" --strategy dp --set batch=4 --steps 1 --restore ck \
    -- -wdir "$dir/n1" "${run[@]}" --strategy dp --set batch=4 --steps 1 --restore ck
case_ "checkpoint copies that differ" "ranks disagree on the checkpoint index 'ck/step-000001/ckpt.index': rank 0 has crc=" 1 \
    -- -wdir "$dir/n0" "${run[@]}" --strategy dp --set batch=4 --steps 1 --restore ck \
    -- -wdir "$dir/n2" "${run[@]}" --strategy dp --set batch=4 --steps 1 --restore ck
# ranks that agree: trains
out=$(timeout 90 "$mpiexec" --oversubscribe --allow-run-as-root -np 1 "${run[@]}" --strategy best \
    --set batch=4 --steps 1 : -np 1 "${run[@]}" --strategy best --set batch=4 --steps 1 2>&1)
status=$?
if [ $status -eq 0 ] && echo "$out" | grep -q '^step   0  loss'; then
    echo "ranks that agree: ok"
else
    echo "ranks that agree: FAIL: status $status"
    echo "$out" | head -20
    fail=1
fi
exit $fail
