#!/bin/bash
# ckpt_resume.sh SHARDBENCH MPIEXEC: `shardbench run` with checkpoints.
# 6 steps straight must give the same losses as 3 steps + save, then fresh
# processes + restore + 3 steps (bit for bit: same P and strategy, CPU).
# Also: --keep 2 leaves the two newest step folders; a restore from a
# folder without checkpoint fails with a clear message and status 2.
set -euo pipefail
sb=$1
mpiexec=$2
dir=$(mktemp -d /tmp/sb_resume_XXXXXX)
trap 'rm -rf "$dir"' EXIT
run() {
    local np=$1
    shift
    "$mpiexec" --oversubscribe --allow-run-as-root -np "$np" "$sb" run \
        -m transformer --set batch=4 --set vocab=16 --set seq=4 --set embed=8 --set heads=2 \
        --set dk=4 --set ff=16 --set layers=1 --db none --warmup 0 --lr 0.2 "$@"
}
losses() { sed -n 's/.*"losses":\[\([^]]*\)\].*/\1/p'; }
fail=0
for strategy in dp best; do
    straight=$(run 2 --strategy $strategy --steps 6 --format json | losses)
    run 2 --strategy $strategy --steps 3 --checkpoint "$dir/$strategy" --save-every 3 >/dev/null
    resumed=$(run 2 --strategy $strategy --steps 3 --restore "$dir/$strategy" --format json | losses)
    want=$(echo "$straight" | cut -d, -f4-6)
    [ $strategy = dp ] && want_dp=$want
    if [ -n "$want" ] && [ "$resumed" = "$want" ]; then
        echo "resume ($strategy, p=2): ok: losses $resumed"
    else
        echo "resume ($strategy, p=2): FAIL: straight [$straight], resumed [$resumed]"
        fail=1
    fi
done
# another P: the p=2 data-parallel checkpoint resumed on 1 rank (same
# losses up to float rounding: the sums run in another order)
one=$(run 1 --strategy dp --steps 3 --restore "$dir/dp" --format json | losses)
want=$want_dp
if awk -v a="$one" -v b="$want" 'BEGIN { n = split(a, x, ","); split(b, y, ",");
        if (n != 3) exit 1;
        for (i = 1; i <= n; i++) { d = x[i] - y[i]; if (d < 0) d = -d; if (d > 1e-5 * y[i]) exit 1 }
        exit 0 }'; then
    echo "resume on another P (dp, p=2 -> p=1): ok: losses $one"
else
    echo "resume on another P (dp, p=2 -> p=1): FAIL: [$one], expected about [$want]"
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
exit $fail
