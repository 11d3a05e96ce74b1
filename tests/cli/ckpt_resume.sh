#!/bin/bash
# ckpt_resume.sh SHARDBENCH MPIEXEC: `shardbench run` with checkpoints.
# 6 steps straight must give the same losses as 3 steps + save, then fresh
# processes + restore + 3 steps (bit for bit: same P and strategy, CPU).
# Also with --zero 1 and 2 (sgd), and with Adam (its moments saved and
# resharded; an sgd checkpoint refused for an adam run); ZeRO-sliced state:
# ckpt_zero.sh. Also: --keep 2 leaves the two newest step folders; a restore from a
# folder without checkpoint fails with a clear message and status 2.
set -euo pipefail
sb=$1
mpiexec=$2
dir=$(mktemp -d /tmp/sb_resume_XXXXXX)
trap 'rm -rf "$dir"' EXIT
# shellcheck source=tests/cli/ckpt_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ckpt_lib.sh"
# another_p LABEL CKPT WANT ARGS...: the p=2 checkpoint resumed on 1 rank
# gives WANT up to float rounding (the sums run in another order)
another_p() {
    local label=$1 ck=$2 expect=$3 one
    shift 3
    one=$(run 1 "$@" --steps 3 --restore "$ck" --format json | losses)
    if awk -v a="$one" -v b="$expect" 'BEGIN { n = split(a, x, ","); split(b, y, ",");
            if (n != 3) exit 1;
            for (i = 1; i <= n; i++) { d = x[i] - y[i]; if (d < 0) d = -d; if (d > 1e-5 * y[i]) exit 1 }
            exit 0 }'; then
        echo "resume $label on another P (dp, p=2 -> p=1): ok: losses $one"
    else
        echo "resume $label on another P (dp, p=2 -> p=1): FAIL: [$one], expected about [$expect]"
        fail=1
    fi
}
resume "best" "$dir/best" --strategy best
resume "dp" "$dir/dp" --strategy dp
another_p sgd "$dir/dp" "$want" --strategy dp
# ZeRO stage 1 and 2 (sgd): the weight is all-gathered after each update,
# so checkpoints hold whole shards (bit for bit, at the same stage)
for zero in 1 2; do
    resume "dp, --zero $zero" "$dir/zero$zero" --strategy dp --zero $zero
done
# Adam: its moments are in the checkpoint (W#adam_m, W#adam_v) with the step
# count of its bias correction: bit for bit at the same P (best: a strategy
# that splits), up to rounding on another P (the moments reshard like the
# weights)
resume "adam, best" "$dir/adambest" --strategy best --optimizer adam --lr 0.01
resume "adam, dp" "$dir/adamdp" --strategy dp --optimizer adam --lr 0.01
another_p adam "$dir/adamdp" "$want" --strategy dp --optimizer adam --lr 0.01
# an sgd checkpoint has no moments: restoring it into an adam run names them
set +e
nomom=$(run 2 --strategy dp --optimizer adam --steps 1 --restore "$dir/dp" 2>&1 >/dev/null | grep '^shardbench:')
set -e
if echo "$nomom" | grep -q "not in the checkpoint (.*#adam_m"; then
    echo "adam from an sgd checkpoint: ok: refused, naming the moments"
else
    echo "adam from an sgd checkpoint: FAIL: [$nomom]"
    fail=1
fi
# a rank killed in the middle of the save of step 2 (test hook): step 1
# restores, step 2 is reported absent. The barrier logs at debug level.
set +e
log=$(SHARDBENCH_LOG=debug SHARDBENCH_TEST_CKPT_DIE=1:2 run 2 --strategy dp --steps 2 \
    --checkpoint "$dir/kill" --save-every 1 2>&1 >/dev/null)
killed=$?
set -e
if echo "$log" | grep -q "rank 0\] barrier 'checkpoint: shards written': enter" &&
    echo "$log" | grep -q "rank 1\] barrier 'checkpoint: shards written': exit"; then
    echo "debug log: ok"
else
    echo "debug log: FAIL: $log"
    fail=1
fi
restored=$(run 2 --strategy dp --steps 1 --restore "$dir/kill" 2>&1 | grep '^# restored' || true)
set +e
absent=$(run 2 --strategy dp --steps 1 --restore "$dir/kill/step-000002/ckpt" 2>&1 >/dev/null |
    grep '^shardbench:')
set -e
if [ $killed -ne 0 ] && echo "$restored" | grep -q "restored step 1 from $dir/kill/step-000001/ckpt" &&
    echo "$absent" | grep -q "no checkpoint at '$dir/kill/step-000002/ckpt'"; then
    echo "killed in the middle of a save: ok: $restored; $absent"
else
    echo "killed in the middle of a save: FAIL: status $killed; [$restored]; [$absent]"
    fail=1
fi
# --keep 2 after 4 saves leaves step-000003 and step-000004
run 2 --strategy dp --steps 4 --checkpoint "$dir/keep" --save-every 1 --keep 2 >/dev/null
left=$(cd "$dir/keep" && echo step-*)
if [ "$left" = "step-000003 step-000004" ]; then
    echo "keep 2: ok: $left"
else
    echo "keep 2: FAIL: left $left"
    fail=1
fi
# restoring from a folder with no checkpoint: status 2 and a message naming it
mkdir -p "$dir/empty"
set +e
msg=$(run 1 --strategy dp --steps 1 --restore "$dir/empty" 2>&1 >/dev/null)
status=$?
set -e
if [ $status -eq 2 ] && echo "$msg" | grep -q "no checkpoint in '$dir/empty'"; then
    echo "restore from an empty folder: ok: $(echo "$msg" | grep '^shardbench:')"
else
    echo "restore from an empty folder: FAIL: status $status, message: $msg"
    fail=1
fi
# a checkpoint of another model: refused, naming every kind of difference;
# --restore-partial restores what both hold and says what it skipped
run 2 --strategy dp --steps 1 --set layers=2 --checkpoint "$dir/l2" >/dev/null
part() {
    local np=$1
    shift
    "$mpiexec" --oversubscribe --allow-run-as-root -np "$np" "$sb" run \
        -m transformer --set batch=4 --set vocab=16 --set seq=4 --set embed=8 --set heads=2 \
        --set dk=4 --db none --warmup 0 --strategy dp --steps 1 "$@"
}
expect_refused() {
    local what=$1 want=$2
    shift 2
    set +e
    msg=$(part 2 "$@" --restore "$dir/l2" 2>&1 >/dev/null)
    status=$?
    set -e
    msg=$(echo "$msg" | grep '^shardbench:')
    if [ "$status" -eq 2 ] && [ "$(echo "$msg" | wc -l)" -eq 1 ] && echo "$msg" | grep -qF "$want" &&
        echo "$msg" | grep -qF -- "--restore-partial"; then
        echo "$what: ok: $msg"
    else
        echo "$what: FAIL: status $status, expected 2 and [$want]: $msg"
        fail=1
    fi
}
expect_refused "restore layers=2 into layers=1" \
    "20 tensors of the checkpoint not in the model ('x.2/a/wqkv', " --set ff=16 --set layers=1
expect_refused "restore layers=2 into layers=3" \
    "20 weights of the model not in the checkpoint ('x.3/a/wqkv', " --set ff=16 --set layers=3
expect_refused "restore ff=16 into ff=32" \
    "8 shape mismatches ('x.1/y/w1' is (8, 16) in the checkpoint, (8, 32) in the model; " \
    --set ff=32 --set layers=2
set +e
out=$(part 2 --set ff=16 --set layers=1 --restore "$dir/l2" --restore-partial --format json 2>&1)
status=$?
set -e
if [ $status -eq 0 ] && echo "$out" | grep -q '"losses":\[' &&
    echo "$out" | grep -qF "shardbench: --restore-partial: skipped 20 tensors of the checkpoint not in the model ('x.2/a/wqkv', "; then
    echo "--restore-partial: ok: $(echo "$out" | grep '^shardbench:')"
else
    echo "--restore-partial: FAIL: status $status: $out"
    fail=1
fi
# the tensors both hold are restored: layers=2 into layers=2 with
# --restore-partial skips nothing and says nothing
set +e
out=$(part 2 --set ff=16 --set layers=2 --restore "$dir/l2" --restore-partial 2>&1)
status=$?
set -e
if [ $status -eq 0 ] && ! echo "$out" | grep -q 'skipped'; then
    echo "--restore-partial of the same model: ok"
else
    echo "--restore-partial of the same model: FAIL: status $status: $out"
    fail=1
fi
exit $fail
