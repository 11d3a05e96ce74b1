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
# shellcheck source=tests/cli/ckpt_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ckpt_lib.sh"
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
