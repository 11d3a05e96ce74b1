#!/usr/bin/env bash
# tests/cli/calibration_cli.sh: `search`, `prune` and `candidates` with a
# calibration file whose values are finite but absurd (1e308): exit 2, one
# message naming file:line and the value, no cost printed (no nan or inf
# anywhere), nothing stored. Then the valid file: exit 0, finite costs.
#
#   tests/cli/calibration_cli.sh SHARDBENCH DATA_DIR
set -uo pipefail

SB=${1:?usage: calibration_cli.sh SHARDBENCH DATA_DIR}
DATA=${2:?usage: calibration_cli.sh SHARDBENCH DATA_DIR}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/calibration_cli.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
SMALL=(--set batch=4 --set image=67 --set classes=16 --set width_div=16)
fails=0
check() { # check NAME CONDITION-COMMAND...
    local name=$1
    shift
    if "$@"; then echo "ok   $name"; else fails=$((fails + 1)); echo "FAIL $name"; fi
}
no_nan() { ! grep -Eqi '(^|[^a-z])-?(nan|inf)([^a-z]|$)' "$@"; }

for bad in word_bytes:3 elem_ratio:4 conv_ratio:6; do
    key=${bad%:*}
    line=${bad#*:}
    file="$DATA/${key}_huge.txt"
    for cmd in "search -p 4 --db $TMP/r.db" "prune -p 2 --out $TMP/pr" "candidates -p 4"; do
        read -r -a words <<< "$cmd"
        "$SB" "${words[@]}" -m alexnet "${SMALL[@]}" --calibration "$file" \
            > "$TMP/out" 2> "$TMP/err"
        rc=$?
        check "${words[0]} with $key 1e308: exit 2 (got $rc)" test "$rc" -eq 2
        check "${words[0]} with $key 1e308: the message names ${key}_huge.txt:$line and the value" \
            grep -qF "${key}_huge.txt:$line: $key 1e308 is out of range" "$TMP/err"
        check "${words[0]} with $key 1e308: no nan or inf printed" no_nan "$TMP/out" "$TMP/err"
    done
done
check "nothing stored from a refused calibration, no survivors written" test ! -e "$TMP/pr" -a \( ! -s "$TMP/r.db" -o \
    "$(sqlite3 "$TMP/r.db" 'SELECT count(*) FROM search_runs' 2>/dev/null || echo 0)" = 0 \)

"$SB" search -m alexnet -p 4 "${SMALL[@]}" --calibration "$DATA/ok.txt" --db none > "$TMP/ok" 2>&1
rc=$?
check "search with a valid calibration: exit 0 (got $rc)" test "$rc" -eq 0
check "search with a valid calibration: no nan or inf" no_nan "$TMP/ok"

[ "$fails" -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
echo "all checks passed"
