#!/usr/bin/env bash
# tests/cli/hf_ref.sh SHARDBENCH MPIEXEC DATA NAME SETTINGS...: the first loss
# of `run` at one rank on the Hugging Face config DATA/NAME at the reduced
# sizes SETTINGS against hf_ref.py, an independent numpy reference of the
# architecture (2e-6 relative), run by $HF_REF_PYTHON (numpy; default python3).
set -euo pipefail
sb=$1 mpiexec=$2 data=$3 name=$4 py=${HF_REF_PYTHON:-python3}
shift 4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export SHARDBENCH_HF_QUIET=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
"$sb" search -m "hf:$data/$name" "$@" -p 1 --db none --save "$tmp/s.strategy" >/dev/null
"$sb" export "$tmp/s.strategy" -m "hf:$data/$name" --to jax --format json >"$tmp/export.json"
loss=$("$mpiexec" -np 1 "$sb" run -m "hf:$data/$name" "$@" --strategy dp --warmup 0 --steps 1 \
       --format json --db none | python3 -c 'import json, sys; print(json.load(sys.stdin)["losses"][0])')
sets=()  # the --set pairs, for the reference's own reading of the config
for a in "$@"; do [[ $a == --set ]] || sets+=("$a"); done
"$py" "$(dirname "$0")/hf_ref.py" "$data/$name/config.json" "$tmp/export.json" "$loss" "${sets[@]}"
