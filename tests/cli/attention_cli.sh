#!/usr/bin/env bash
# tests/cli/attention_cli.sh: --attention fused|materialized on a GPU
# machine (models/gpu_run.c, docs/gpu-op-model.md "Fused attention"): refused
# without a GPU machine or with a bad value (exit 2, naming it); a fused
# attention prices a Llama's step and peak memory below the materialized
# one, and plain and full-space searches both take it.
#
#   tests/cli/attention_cli.sh SHARDBENCH
set -uo pipefail

SB=${1:?usage: attention_cli.sh SHARDBENCH}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/attention_cli.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
# shellcheck source=tests/cli/check_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/check_lib.sh"

"$SB" search -m transformer -p 8 --attention fused --db none > "$TMP/o" 2> "$TMP/e"
check "--attention without a GPU machine: exit 2 ($?)" test "$?" -eq 2
check "  names --machine" grep -q -- "--attention: needs a GPU machine file" "$TMP/e"
"$SB" search -m transformer -p 8 --machine h100-sxm --attention flash --db none > "$TMP/o" 2> "$TMP/e"
rc=$?
check "--attention flash: exit 2 ($rc)" test "$rc" -eq 2
check "  names the value" grep -q -- "--attention: 'flash' is not fused or materialized" "$TMP/e"

M=(-m llama3-8b --set layers=2 --set batch=16 --set seq=4096 --machine h100-sxm --db none
   --format json)
# the full space's op-level half (its Megatron grid prices attention by layer)
for space in plain full; do
    G=()
    [ "$space" = full ] && G=(--megatron-grid off)
    for a in fused materialized; do
        "$SB" search "${M[@]}" "${G[@]}" -p 8 --space "$space" --memory 80GiB --attention "$a" \
            > "$TMP/$space-$a.json" 2> "$TMP/$space-$a.err"
        check "$space, --attention $a: runs (exit $?)" test -s "$TMP/$space-$a.json"
    done
    check "$space: fused predicted faster and smaller than materialized" python3 -c "
import json
f = json.load(open('$TMP/$space-fused.json')); m = json.load(open('$TMP/$space-materialized.json'))
print('  step', f['predicted_step_seconds'], m['predicted_step_seconds'],
      'peak', f['peak_bytes_per_device'], m['peak_bytes_per_device'])
assert f['fused_attentions'] == 2 and m['fused_attentions'] == 0, (f['fused_attentions'], m['fused_attentions'])
assert f['predicted_step_seconds'] < m['predicted_step_seconds']
assert f['peak_bytes_per_device'] < m['peak_bytes_per_device']"
done
# the default on a GPU machine is fused
"$SB" search "${M[@]}" -p 8 --space full --megatron-grid off --memory 80GiB > "$TMP/def.json" \
    2> /dev/null
check "the default is fused" python3 -c "
import json
assert json.load(open('$TMP/def.json'))['predicted_step_seconds'] == \
    json.load(open('$TMP/full-fused.json'))['predicted_step_seconds']"
exit $((fails > 0))
