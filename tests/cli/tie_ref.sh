#!/usr/bin/env bash
# tests/cli/tie_ref.sh SHARDBENCH MPIEXEC MODEL: three SGD steps of `run` at
# one rank on a model with a tied head (tests/data/models/tied-tiny.model)
# against tie_ref.py, a numpy reference with one shared table (1e-5
# relative), run by $HF_REF_PYTHON (numpy; default python3). A tied weight
# read by two ops is refused: exit 2 naming it.
set -euo pipefail
sb=$1 mpiexec=$2 model=$3 py=${HF_REF_PYTHON:-python3} lr=0.5
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
"$sb" search -m "$model" -p 1 --db none --save "$tmp/s.strategy" >/dev/null
"$sb" export "$tmp/s.strategy" -m "$model" --to jax --format json >"$tmp/export.json"
losses=$("$mpiexec" -np 1 "$sb" run -m "$model" --strategy dp --warmup 0 --steps 3 --lr $lr \
         --format json --db none |
         python3 -c 'import json, sys; print(" ".join(map(str, json.load(sys.stdin)["losses"])))')
# shellcheck disable=SC2086
"$py" "$(dirname "$0")/tie_ref.py" "$tmp/export.json" $lr $losses
# the tied weight read by a second op: refused, naming it (no untied copy)
sed 's/^loss = softmax_xent(logits)$/l2 = einsum("batch seq embed, embed vocab -> batch seq vocab", x0, wout)\nsum = add(logits, l2)\nloss = softmax_xent(sum)/' \
    "$model" >"$tmp/two.model"
grep -q '^l2 = ' "$tmp/two.model"
rc=0
"$mpiexec" -np 1 "$sb" run -m "$tmp/two.model" --strategy dp --steps 1 --db none 2>"$tmp/err" >/dev/null || rc=$?
grep -q "weight 'wout' (tied to an embedding's table) is used by ops 'logits' and 'l2'" "$tmp/err" && [ $rc = 2 ] ||
    { echo "tie_ref: a tied weight read twice: rc $rc, $(cat "$tmp/err")"; exit 1; }
echo "tie_ref: a tied weight read by two ops: refused"
