#!/bin/bash
# ckpt_zero.sh SHARDBENCH MPIEXEC: `shardbench run` checkpoints of
# ZeRO-sliced state (the functions of ckpt_resume.sh). Adam's moments are
# sliced at every stage, the weights at stage 3: the save gathers them into
# whole shards, the restore slices them again. Resumed at the same P and
# stage: bit for bit; resharded into another stage (0, 2, 3) or P = 1: up to
# float rounding.
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
# resume LABEL DIR ARGS...: 6 steps straight must give the same losses as 3
# steps + save into DIR, then fresh processes + restore + 3 steps (bit for
# bit: same P and strategy, CPU); the resumed losses go to $want.
resume() {
    local label=$1 ck=$2
    shift 2
    local straight resumed
    straight=$(run 2 "$@" --steps 6 --format json | losses)
    run 2 "$@" --steps 3 --checkpoint "$ck" --save-every 3 >/dev/null
    resumed=$(run 2 "$@" --steps 3 --restore "$ck" --format json | losses)
    want=$(echo "$straight" | cut -d, -f4-6)
    if [ -n "$want" ] && [ "$resumed" = "$want" ]; then
        echo "resume ($label, p=2): ok: losses $resumed"
    else
        echo "resume ($label, p=2): FAIL: straight [$straight], resumed [$resumed]"
        fail=1
    fi
}
# reshard NP LABEL CKPT WANT ARGS...: the checkpoint resumed on NP ranks
# with other options (another ZeRO stage) gives WANT up to float rounding
reshard() {
    local np=$1 label=$2 ck=$3 expect=$4 got
    shift 4
    got=$(run "$np" "$@" --steps 3 --restore "$ck" --format json | losses)
    if awk -v a="$got" -v b="$expect" 'BEGIN { n = split(a, x, ","); split(b, y, ",");
            if (n != 3) exit 1;
            for (i = 1; i <= n; i++) { d = x[i] - y[i]; if (d < 0) d = -d; if (d > 1e-5 * y[i]) exit 1 }
            exit 0 }'; then
        echo "reshard ($label): ok: losses $got"
    else
        echo "reshard ($label): FAIL: [$got], expected about [$expect]"
        fail=1
    fi
}
resume "adam, dp, --zero 1" "$dir/adamz1" --strategy dp --optimizer adam --lr 0.01 --zero 1
reshard 2 "adam --zero 1 p=2 -> --zero 3 p=2" "$dir/adamz1" "$want" --strategy dp --optimizer adam --lr 0.01 --zero 3
reshard 1 "adam --zero 1 p=2 -> p=1" "$dir/adamz1" "$want" --strategy dp --optimizer adam --lr 0.01
resume "adam, dp, --zero 3" "$dir/adamz3" --strategy dp --optimizer adam --lr 0.01 --zero 3
reshard 2 "adam --zero 3 p=2 -> --zero 0 p=2" "$dir/adamz3" "$want" --strategy dp --optimizer adam --lr 0.01
reshard 2 "adam --zero 3 p=2 -> --zero 2 p=2" "$dir/adamz3" "$want" --strategy dp --optimizer adam --lr 0.01 --zero 2
exit $fail
