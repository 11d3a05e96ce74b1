#!/usr/bin/env bash
# tests/cli/paper_table2.sh: `shardbench paper --table2` (the PaSE paper's
# Table II strategies beside ours, strategies/paper-table2.tsv):
# - the shipped strategies/paper/*.strategy are what the table gives today
#   (written again into a temporary folder: byte-identical);
# - every row of the four models is printed; under the reference model the
#   paper's total is never below ours (ours is that model's optimum);
# - the JSON form parses and names each model's rows and totals;
# - a damaged table (wrong field count, a config with too few counts, a
#   letter the dims lack, a pattern that matches no op) is refused with
#   exit 2 naming file:line.
#
#   tests/cli/paper_table2.sh SHARDBENCH SOURCE_DIR
set -uo pipefail

SB=${1:?usage: paper_table2.sh SHARDBENCH SOURCE_DIR}
SRC=${2:?usage: paper_table2.sh SHARDBENCH SOURCE_DIR}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/paper_table2.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
# shared checks: check, refused, js (and fails=0)
# shellcheck source=tests/cli/check_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/check_lib.sh"

"$SB" paper --table2 --save-dir "$TMP" > "$TMP/out" 2> "$TMP/err"
check "paper --table2 exits 0" test $? -eq 0
for m in alexnet inception3 rnnlm transformer; do
    check "$m-p32.strategy is what the table gives" cmp "$SRC/strategies/paper/$m-p32.strategy" \
        "$TMP/$m-p32.strategy"
    check "$m is printed" grep -q "^# $m  p=32" "$TMP/out"
done
rows=$(grep -vc '^#' "$SRC/strategies/paper-table2.tsv")
printed=$(grep -cE '^(conv|fc|softmax|modules|module|embedding|lstm|multihead|feed)' "$TMP/out")
check "every row printed ($((rows - 1)) rows, $printed printed)" test "$printed" -eq $((rows - 1))
# "total, reference model: paper X FLOP (...), ours Y FLOP ..."
awk '/^total, reference model/ { p = $5; o = $10; if (p + 0 < o + 0) bad = 1; n++ }
     END { exit bad || n != 4 }' "$TMP/out"
check "paper >= ours under the reference model, 4 models" test $? -eq 0

"$SB" paper --table2 -m rnnlm,alexnet --format json > "$TMP/json" 2>> "$TMP/err"
python3 - "$TMP/json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
assert set(j) == {"rnnlm", "alexnet"}, j.keys()
assert [r["layers"] for r in j["rnnlm"]["rows"]] == ["embedding", "lstm", "fc", "softmax"]
assert j["rnnlm"]["rows"][1]["paper"] == "2,4,1,2,2"
for m in j.values():
    assert m["reference_flop"]["paper"] >= m["reference_flop"]["ours"] > 0
    assert m["machine"]["paper_seconds"] > 0 and m["machine"]["ours_seconds"] > 0
PY
check "JSON rows and totals" test $? -eq 0

bad() { # bad NAME SED-EXPR EXPECTED-TEXT
    sed "$2" "$SRC/strategies/paper-table2.tsv" > "$TMP/bad.tsv"
    "$SB" paper --table2 -m alexnet --table "$TMP/bad.tsv" > /dev/null 2> "$TMP/bad.err"
    local rc=$?
    check "$1: exit 2" test $rc -eq 2
    check "$1: names file:line and says '$3'" grep -qE "bad\.tsv:[0-9]+: .*$3" "$TMP/bad.err"
}
bad "five fields" 's/^\(alexnet\tconv5\t[^\t]*\t[^\t]*\t[^\t]*\)\t.*/\1/' "expected 6 tab-separated fields"
bad "short config" 's/^\(alexnet\tconv5\tbchwnrs\t\)16,2,1,1,1,1,1/\116,2,1/' "needs 7 split counts"
bad "unknown letter" 's/^\(alexnet\tfc2\tbnc\t1,8,4\tfc7\t\)b=batch/\1x=batch/' "map entry 'x=batch'"
bad "no op matches" 's/^\(alexnet\tfc2\tbnc\t1,8,4\t\)fc7/\1fc99/' "match no op of model 'alexnet'"
# issue 39: a repeated (model, layers) row names its first line; a header
# with a column more is refused
first=$(grep -n "^alexnet	conv5	" "$SRC/strategies/paper-table2.tsv" | cut -d: -f1)
bad "a repeated row" "/^alexnet\tconv5\t/p" "model alexnet, layers conv5 given twice \\(first on line $first\\)"
bad "a header with a seventh column" 's/^model\tlayers\tdims\tconfig\tops\tmap$/&\textra/' "expected the header line"
"$SB" paper --table2 -m resnet101 > /dev/null 2> "$TMP/r.err"
check "a model without rows: exit 2" test $? -eq 2
check "a model without rows: says so" grep -q "no rows for model 'resnet101'" "$TMP/r.err"

echo "paper_table2: $fails failed"
exit $((fails > 0))
