#!/usr/bin/env bash
# tests/cli/export_extras.sh: `export` of a version-2 strategy file (a
# pipeline of 2 stages, ZeRO 1, one recomputed op), written here from a
# searched version-1 file: the text form starts with the stages (ops and
# ranks), the ZeRO stage and the recomputed op, and what each framework's
# API can say of them; the JSON form carries them as strategy_extras; the
# Python form refuses them (exit 2); a version-1 file exports as before
# (no extras block).
#
#   tests/cli/export_extras.sh SHARDBENCH
set -uo pipefail

SB=${1:?usage: export_extras.sh SHARDBENCH}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/export_extras.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
fails=0
check() { # check NAME CONDITION-COMMAND...
    local name=$1
    shift
    if "$@"; then echo "ok   $name"; else fails=$((fails + 1)); echo "FAIL $name"; fi
}

"$SB" search -m transformer -p 2 --set layers=1 --db none --save "$TMP/v1.strategy" > /dev/null
check "search --save exits 0" test $? -eq 0
# version 2: p 4, two stages of 2 ranks (the p = 2 configs fit), 2 micro-batches
awk 'BEGIN { n = 0 } /^op / { op[n++] = $2 } END { print n; print op[0]; print op[int(n/2)-1]; print op[int(n/2)]; print op[n-1]; print op[3] }' \
    "$TMP/v1.strategy" > "$TMP/ops"
{ read -r n; read -r first; read -r mid_last; read -r mid; read -r last; read -r rc_op; } < "$TMP/ops"
sed -e 's/^shardbench-strategy 1$/shardbench-strategy 2/' -e 's/^p 2$/p 4/' \
    -e "/^cost /a pipeline 2 2 1f1b\nstage 0 2 $first $mid_last\nstage 1 2 $mid $last\nzero 1\nrecompute $rc_op" \
    "$TMP/v1.strategy" > "$TMP/v2.strategy"

for to in torch jax dtensor mtf; do
    "$SB" export "$TMP/v2.strategy" --to $to > "$TMP/$to.txt" 2> "$TMP/$to.err"
    check "$to text exits 0" test $? -eq 0
    check "$to text names the stages" grep -q "^# pipeline: 2 stages, 2 micro-batches, schedule 1f1b" "$TMP/$to.txt"
    check "$to text: stage 1 on ranks 2..3 from $mid" grep -q "^#   stage 1: ops $mid .. $last .* on ranks 2..3" "$TMP/$to.txt"
    check "$to text: ZeRO 1" grep -q "^# ZeRO stage 1" "$TMP/$to.txt"
    check "$to text: recomputed $rc_op" grep -q "^# recomputed ops: $rc_op$" "$TMP/$to.txt"
done
check "torch names its pipeline API" grep -q "Schedule1F1B" "$TMP/torch.txt"
check "jax says it has no schedule" grep -q "jax.sharding has no pipeline schedule" "$TMP/jax.txt"
"$SB" export "$TMP/v2.strategy" --to jax --format json > "$TMP/jax.json"
check "jax json exits 0" test $? -eq 0
python3 - "$TMP/jax.json" "$n" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
x = j["strategy_extras"]
assert x["microbatches"] == 2 and x["schedule"] == "1f1b" and x["zero"] == 1, x
assert [s["devices"] for s in x["stages"]] == [[0, 1], [2, 3]], x["stages"]
assert sum(len(s["ops"]) for s in x["stages"]) == int(sys.argv[2])
assert len(x["recompute"]) == 1
PY
check "json strategy_extras: stages, devices, micro-batches, zero, recompute" test $? -eq 0
"$SB" export "$TMP/v2.strategy" --to torch --format py > /dev/null 2> "$TMP/py.err"
check "py form refuses the extras (exit 2)" test $? -eq 2
check "py refusal says why" grep -q "runs one mesh" "$TMP/py.err"
"$SB" export "$TMP/v1.strategy" --to torch > "$TMP/v1.txt"
check "a version-1 file has no extras block" bash -c "! grep -q '^# pipeline' '$TMP/v1.txt'"
echo "export_extras: $fails failed"
exit $((fails > 0))
