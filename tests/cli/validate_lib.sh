# tests/cli/validate_lib.sh: what the published-runs tests (validate_h100.sh,
# validate_h100_dgxc.sh) check alike, sourced after check_lib.sh with SB, TMP
# and DATA set.

# validate_whole LABEL: `validate --data $DATA` as a user runs it: exit 0 or 1,
# every run reported, each priced with its breakdown adding up to its step, the
# exit status the one the report implies. Sets N (runs), rc (the exit status)
# and leaves the JSON in $TMP/val.json.
validate_whole() {
    N=$(grep -v '^#' "$DATA" | grep -vc '^id')
    "$SB" validate --data "$DATA" > "$TMP/val" 2> "$TMP/val.err"
    rc=$?
    cat "$TMP/val" "$TMP/val.err"
    check "validate --data $1 runs: exit 0 or 1, not an error ($rc)" test "$rc" -le 1
    check "validate: $N runs reported" grep -q "^$N runs: MAPE" "$TMP/val"
    "$SB" validate --data "$DATA" --format json > "$TMP/val.json" 2> /dev/null
    check "JSON: every row priced, its breakdown adding up to its step" js "$TMP/val.json" "
len(d['runs']) == $N and all(r['predicted_step_seconds'] > 0
and abs(sum(r['predicted_breakdown_seconds'].values()) - r['predicted_step_seconds'])
    < 1e-9 * r['predicted_step_seconds'] for r in d['runs'])"
    local want
    want=$(python3 -c "import json,sys; d=json.load(open(sys.argv[1]));
print(1 if d['mape_percent'] > 7 or d['max_error_percent'] > 15 or d['search_slower_than_published'] else 0)" "$TMP/val.json")
    check "exit status as the report says: over the target or a slower search's best is 1" \
        test "$rc" -eq "$want"
}

# bad_row ROW NAME COLUMN VALUE TEXT: $DATA with ROW's COLUMN set to VALUE is
# refused, exit 2 naming file:line and TEXT
bad_row() {
    local ln
    ln=$(grep -n "^$1" "$DATA" | cut -d: -f1)
    awk -v r="$1" -v k="$3" -v v="$4" 'BEGIN{FS=OFS="\t"} /^#/ {print; next}
      $1 == "id" {for (i = 1; i <= NF; i++) c[$i] = i; print; next} $1 == r {$c[k] = v} {print}' \
      "$DATA" > "$TMP/bad-$3.tsv"
    refused "$2" "bad-$3.tsv:$ln: $5" validate --data "$TMP/bad-$3.tsv"
}
