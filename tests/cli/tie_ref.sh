#!/usr/bin/env bash
# tests/cli/tie_ref.sh SHARDBENCH MPIEXEC MODEL: three SGD steps of `run` at
# one rank on a model with a tied head (tests/data/models/tied-tiny.model)
# against tie_ref.py, a numpy reference with one shared table (1e-5
# relative), run by $HF_REF_PYTHON (numpy; default python3).
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
