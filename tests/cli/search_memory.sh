#!/usr/bin/env bash
# tests/cli/search_memory.sh: `search --memory LIMIT` end to end.
#
#   tests/cli/search_memory.sh SHARDBENCH
#
# On a small Transformer at p = 4: the unconstrained optimum's predicted
# peak (JSON peak_bytes_per_device) is P0 at cost C0. Searching within
# P0 - 1 byte must return a strategy that fits and costs at least C0 (the
# constraint binds: the optimum is excluded); within P0 it must return C0;
# within 1 byte nothing fits and the message gives the least memory; a bad
# size and an algorithm that cannot search within a limit exit 2. --zero:
# the data-parallel strategy's predicted peak falls with each stage, its
# cost rises at stage 3 only; a bad stage exits 2. The
# DP's exactness under a limit is tested against brute force in test_dp.
set -uo pipefail
SB=${1:?usage: search_memory.sh SHARDBENCH}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/search_memory.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
# --space plain: the intra-op DP within the limit (--memory and --zero alone
# imply --space full, the pipeline search: tests/cli/search_pipeline.sh)
S=(-m transformer -p 4 --set layers=1 --set batch=8 --set seq=16 --set vocab=64 --db none --space plain)
fails=0
check() { local name=$1; shift; if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fails=$((fails + 1)); fi; }
jget() { sqlite3 -batch -noheader :memory: "SELECT json_extract(readfile('$1'), '$2');"; }

"$SB" search "${S[@]}" --format json > "$TMP/free.json" || { echo "FAIL unconstrained search"; exit 1; }
P0=$(jget "$TMP/free.json" '$.peak_bytes_per_device')
C0=$(jget "$TMP/free.json" '$.total_cost')
check "JSON has peak_bytes_per_device ($P0)" test "${P0:-0}" -gt 0

"$SB" search "${S[@]}" --format json --memory "$((P0 - 1))B" > "$TMP/tight.json" 2> "$TMP/tight.err"
rc=$?
if [ "$rc" -eq 0 ]; then
    P1=$(jget "$TMP/tight.json" '$.peak_bytes_per_device')
    C1=$(jget "$TMP/tight.json" '$.total_cost')
    check "within P0-1: fits ($P1 < $P0)" test "$P1" -lt "$P0"
    check "within P0-1: costs more than the optimum ($C1 > $C0)" \
        awk -v a="$C1" -v b="$C0" 'BEGIN { exit !(a + 0 > b + 0) }'
else
    check "within P0-1: nothing fits is said with the least memory" grep -q "least memory" "$TMP/tight.err"
fi
"$SB" search "${S[@]}" --format json --memory "${P0}B" > "$TMP/exact.json"
check "within P0: the optimum" test "$(jget "$TMP/exact.json" '$.total_cost')" = "$C0"
"$SB" search "${S[@]}" --memory 2B > /dev/null 2> "$TMP/none.err"
rc=$?
check "within 2 bytes: exit 2 (got $rc)" test "$rc" -eq 2
check "  ... says nothing fits and the least memory" \
    grep -q "fits .* per device: the least memory of any strategy is" "$TMP/none.err"
"$SB" search "${S[@]}" --memory 80XB > /dev/null 2> "$TMP/bad.err"
rc=$?
check "--memory 80XB: exit 2 (got $rc)" test "$rc" -eq 2
check "  ... names the value" grep -q "'80XB' is not a memory size" "$TMP/bad.err"
"$SB" search "${S[@]}" --algo dp --memory 80GiB > /dev/null 2> "$TMP/dp.err"
rc=$?
check "--algo dp with --memory: exit 2 (got $rc)" test "$rc" -eq 2
"$SB" search "${S[@]}" --memory 80GiB > "$TMP/table.out"
check "the table gives the predicted peak within the limit" \
    grep -q "^predicted peak memory .* GiB per device, within --memory 80 GiB" "$TMP/table.out"
# --zero, Adam, data parallel (--algo dp: every weight replicated): the
# predicted peak shrinks stage by stage; stages 1 and 2 cost what 0 costs,
# 3 more (the weights' all-gather in backward); a bad stage exits 2 naming it
"$SB" search "${S[@]}" --algo dp --format json --optimizer adam > "$TMP/adam.json"
prev=$(jget "$TMP/adam.json" '$.peak_bytes_per_device')
CD=$(jget "$TMP/adam.json" '$.total_cost')
for z in 1 2 3; do
    "$SB" search "${S[@]}" --algo dp --format json --zero $z --optimizer adam > "$TMP/z$z.json"
    Pz=$(jget "$TMP/z$z.json" '$.peak_bytes_per_device')
    Cz=$(jget "$TMP/z$z.json" '$.total_cost')
    check "--zero $z: predicted peak below the last stage's ($Pz < $prev)" test "$Pz" -lt "$prev"
    prev=$Pz
    if [ $z -lt 3 ]; then
        check "--zero $z: the cost of --zero 0" test "$Cz" = "$CD"
    else
        check "--zero 3: costs more than --zero 0 ($Cz > $CD)" \
            awk -v a="$Cz" -v b="$CD" 'BEGIN { exit !(a + 0 > b + 0) }'
    fi
done
"$SB" search "${S[@]}" --format json --zero 0 > "$TMP/z0.json"
check "--zero 0: the output without --zero" test "$(jget "$TMP/z0.json" '$.total_cost') $(jget "$TMP/z0.json" '$.peak_bytes_per_device')" = "$C0 $P0"
"$SB" search "${S[@]}" --zero 4 > /dev/null 2> "$TMP/z4.err"
rc=$?
check "--zero 4: exit 2 (got $rc)" test "$rc" -eq 2
check "  ... names the value" grep -q "'4' is not an integer in 0..3" "$TMP/z4.err"
"$SB" prune -m transformer -p 4 --set layers=1 --zero x > /dev/null 2> "$TMP/zp.err"
rc=$?
check "prune --zero x: exit 2 (got $rc)" test "$rc" -eq 2
[ "$fails" -eq 0 ]
