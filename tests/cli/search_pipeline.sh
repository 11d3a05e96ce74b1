#!/usr/bin/env bash
# tests/cli/search_pipeline.sh: `search --space full` end to end.
#
#   tests/cli/search_pipeline.sh SHARDBENCH
#
# On a 2-layer Transformer at p = 4: forced --stages 2 --microbatches 4
# --schedule gpipe prints the stage table and gives the JSON fields
# (stages with ops, devices, mesh; microbatches, schedule, zero, recompute,
# peak_bytes_per_device); --save writes a version-2 strategy file with the
# pipeline line; --stages 1 --microbatches 1 costs what a plain search
# costs; a searched --memory limit is respected, and one that nothing fits
# exits 2 naming the least memory; bad values exit 2. With --machine the
# JSON has mesh_to_nodes per stage, per op and in sum, predicted_step_seconds
# and peak_bytes_per_device.
set -uo pipefail
SB=${1:?usage: search_pipeline.sh SHARDBENCH}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/search_pipeline.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
S=(-m transformer -p 4 --set layers=2 --set batch=8 --set seq=16 --set vocab=64 --db none)
fails=0
check() { local name=$1; shift; if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fails=$((fails + 1)); fi; }
jget() { sqlite3 -batch -noheader :memory: "SELECT json_extract(readfile('$1'), '$2');"; }

"$SB" search "${S[@]}" --stages 2 --microbatches 4 --schedule gpipe > "$TMP/t.out"
check "table: the pipeline line" grep -q "^pipeline: 2 stages of 2 devices, 4 micro-batches of batch/4, schedule gpipe" "$TMP/t.out"
check "table: stage 1 on ranks 2-3" grep -q "^1     2-3 " "$TMP/t.out"
check "table: the step line" grep -q "^step cost .* FLOP = sum_s t_s" "$TMP/t.out"
"$SB" search "${S[@]}" --stages 2 --microbatches 4 --schedule gpipe --format json --save "$TMP/s.strategy" > "$TMP/t.json"
check "json: 2 stages" test -n "$(jget "$TMP/t.json" '$.stages[1].ops[0]')" -a -z "$(jget "$TMP/t.json" '$.stages[2]')"
check "json: stages[1].devices = [2,3]" test "$(jget "$TMP/t.json" '$.stages[1].devices')" = "[2,3]"
check "json: stages[0].mesh = [2]" test "$(jget "$TMP/t.json" '$.stages[0].mesh')" = "[2]"
check "json: stages[0].ops[0] is the first op" test "$(jget "$TMP/t.json" '$.stages[0].ops[0]')" = "$(jget "$TMP/t.json" '$.ops[0].name')"
check "json: microbatches 4" test "$(jget "$TMP/t.json" '$.microbatches')" = 4
check "json: schedule gpipe" test "$(jget "$TMP/t.json" '$.schedule')" = gpipe
check "json: zero 0" test "$(jget "$TMP/t.json" '$.zero')" = 0
check "json: recompute []" test "$(jget "$TMP/t.json" '$.recompute')" = "[]"
check "json: peak_bytes_per_device > 0" test "$(jget "$TMP/t.json" '$.peak_bytes_per_device')" -gt 0
check "json: no predicted_step_seconds without --machine" test -z "$(jget "$TMP/t.json" '$.predicted_step_seconds')"
check "saved: version 2" grep -q "^shardbench-strategy 2" "$TMP/s.strategy"
check "saved: the pipeline line" grep -q "^pipeline 2 4 gpipe" "$TMP/s.strategy"
check "saved: two stage lines" test "$(grep -c '^stage ' "$TMP/s.strategy")" = 2
"$SB" search "${S[@]}" --stages 2 --microbatches 4 --machine h200-sxm --format json > "$TMP/m.json"
check "json: predicted_step_seconds with --machine" test -n "$(jget "$TMP/m.json" '$.predicted_step_seconds')"

check "json: no mesh_to_nodes without --machine" test -z "$(jget "$TMP/t.json" '$.mesh_to_nodes')" -a -z "$(jget "$TMP/t.json" '$.stages[0].mesh_to_nodes')"
# mesh_to_nodes with a machine file: each stage's sub-mesh (ranks as placed),
# each op's split dims, the summary; on nodes of 2 a stage of 4 spans two
# ("both"), on nodes of 8 it is inside one ("intra")
sed 's/^devices_per_node 8/devices_per_node 2/; s/^nodes 1/nodes 4/' \
    "$(dirname "$0")/../../machines/h200-sxm.machine" > "$TMP/n2.machine"
G=(-m gpt3-175b -p 8 --set layers=2 --set batch=8 --db none --stages 2 --microbatches 2)
"$SB" search "${G[@]}" --machine "$TMP/n2.machine" --format json > "$TMP/n2.json"
"$SB" search "${G[@]}" --machine h200-sxm --format json > "$TMP/n8.json"
"$SB" search "${G[@]}" --machine "$TMP/n2.machine" > "$TMP/n2.out"
meshcheck() { # JSON WANT-STAGE-WORD NODE-SIZE
    python3 - "$@" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); want, n = sys.argv[2], int(sys.argv[3])
assert [s["mesh_to_nodes"] for s in d["stages"]] == [[want]] * len(d["stages"]), d["stages"]
split = 0
for o in d["ops"]:
    dims = [x["name"] for x, c in zip(o["dims"], o["config"]) if c > 1]
    assert sorted(o["mesh_to_nodes"]) == sorted(dims), (o["name"], o["mesh_to_nodes"], dims)
    assert all(w in ("intra", "inter", "both") for w in o["mesh_to_nodes"].values())
    split += len(dims)
m = d["mesh_to_nodes"]
assert m["devices_per_node"] == n and m["intra"] + m["inter"] + m["both"] == split > 0, m
assert m["ops_inside_one_node"] + m["ops_across_nodes"] == len(d["ops"]), m
assert d["predicted_step_seconds"] > 0 and d["peak_bytes_per_device"] > 0
PY
}
check "json --machine (nodes of 2): stages both, ops' split dims placed, the summary" meshcheck "$TMP/n2.json" both 2
check "json --machine h200-sxm (nodes of 8): stages intra" meshcheck "$TMP/n8.json" intra 8
check "table --machine: the mesh to nodes line" grep -q "^mesh to nodes (2 devices a node): stages intra 0, inter 0, both 2; split dims" "$TMP/n2.out"

"$SB" search "${S[@]}" --format json > "$TMP/plain.json"
"$SB" search "${S[@]}" --stages 1 --microbatches 1 --format json > "$TMP/one.json"
check "S=1 M=1: the plain optimum" test "$(jget "$TMP/one.json" '$.total_cost')" = "$(jget "$TMP/plain.json" '$.total_cost')"
check "S=1 M=1: the plain peak" test "$(jget "$TMP/one.json" '$.peak_bytes_per_device')" = "$(jget "$TMP/plain.json" '$.peak_bytes_per_device')"

P0=$(jget "$TMP/plain.json" '$.peak_bytes_per_device')
LIM=$((P0 / 2))
"$SB" search "${S[@]}" --memory "${LIM}B" --format json > "$TMP/lim.json" 2> "$TMP/lim.err"
rc=$?
check "--memory P0/2: found (rc $rc)" test "$rc" -eq 0
check "--memory P0/2: within the limit" test "$(jget "$TMP/lim.json" '$.peak_bytes_per_device')" -le "$LIM"
"$SB" search "${S[@]}" --memory 2B > /dev/null 2> "$TMP/none.err"
rc=$?
check "--memory 2B: exit 2 (got $rc)" test "$rc" -eq 2
check "  ... names the least memory found" grep -q "fits .* per device: the least memory" "$TMP/none.err"
check "  ... as a number (not inf)" grep -qE "the least memory of a stage (found )?is (at least )?[0-9.e+-]+ GiB" "$TMP/none.err"
for bad in "--stages 3" "--microbatches 3" "--schedule zigzag" "--space odd"; do
    "$SB" search "${S[@]}" $bad > /dev/null 2>&1
    rc=$?
    check "$bad: exit 2 (got $rc)" test "$rc" -eq 2
done
"$SB" search "${S[@]}" --space plain --stages 2 > /dev/null 2>&1
rc=$?
check "--space plain --stages 2: exit 2 (got $rc)" test "$rc" -eq 2
# no S with P/S within --max-stage-devices (16 cut segments, S = 32 needed):
# the largest S possible alone, said on stderr and in the JSON
"$SB" search -m transformer -p 32 --set layers=2 --set batch=32 --set seq=16 --set vocab=64 \
    --db none --space full --max-stage-devices 1 --format json > "$TMP/cap.json" 2> "$TMP/cap.err"
rc=$?
check "--max-stage-devices 1 at p=32: found (rc $rc)" test "$rc" -eq 0
check "  ... says it fell back" grep -q "no stage count S has P/S <= --max-stage-devices 1 .*searched S = 16 alone" "$TMP/cap.err"
check "  ... stage_cap_fallback 16 in the JSON" test "$(jget "$TMP/cap.json" '$.stage_cap_fallback')" = 16
check "  ... 16 stages" test "$(sqlite3 -batch -noheader :memory: "SELECT json_array_length(readfile('$TMP/cap.json'), '\$.stages');")" = 16
[ "$fails" -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
echo "all checks passed"
