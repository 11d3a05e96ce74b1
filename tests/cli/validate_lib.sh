# shellcheck shell=bash
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

# validate_implied [NAME BASEDIR]: the GEMM rate a run implies (implied_gemm_tflops)
# is the one that prices it at its published step: with the machine files of
# BASEDIR (default $SRC/machines; validate's JSON of them in $TMP/NAME.json, NAME
# default val: validate_whole's), a copy of the run's machine file with the
# precision's large-GEMM fraction (gemm_eff_large_fp8 for an fp8 run, else
# gemm_eff_large) scaled to that rate predicts the run's published step within
# 0.1%, where the file's own figure misses it by more than 1%.
validate_implied() {
    local name=${1:-val} base=${2:-$SRC/machines} id mach prec rate imp key
    read -r id mach prec rate imp < <(python3 -c "import json,sys
d = json.load(open(sys.argv[1]))
r = next((r for r in d['runs'] if r['implied_gemm_tflops'] and r['implied_gemm_tflops'] < 0.95 * r['gemm_tflops']
          and abs(r['error_percent']) > 1), None)
print(*([r['id'], r['machine'], r['precision'], r['gemm_tflops'], r['implied_gemm_tflops']] if r else ['-']))" "$TMP/$name.json")
    check "$name: a run with an implied GEMM rate to check (${id:--})" test -n "$imp"
    [ -n "$imp" ] || return 0
    key=gemm_eff_large
    [ "$prec" = fp8 ] && key=gemm_eff_large_fp8
    rm -rf "$TMP/implied" && mkdir -p "$TMP/implied" && cp "$base"/*.machine "$TMP/implied/"
    awk -v k="$key" -v f="$(python3 -c "print($imp / $rate)")" \
        '$1 == k {printf "%s %.12g\n", k, $2 * f; next} {print}' \
        "$base/$mach.machine" > "$TMP/implied/$mach.machine"
    check "$mach gives $key" grep -q "^$key " "$base/$mach.machine"
    SHARDBENCH_MACHINES="$TMP/implied" "$SB" validate --data "$DATA" --format json \
        > "$TMP/implied.json" 2> /dev/null
    check "$name: $id ($prec): $key set to the implied $imp TFLOP/s prices it at its published step" \
        js "$TMP/implied.json" "
[abs(r['predicted_step_seconds'] / r['published_step_seconds'] - 1) < 1e-3
 and abs(r['gemm_tflops'] / $imp - 1) < 1e-6 for r in d['runs'] if r['id'] == '$id'] == [True]"
}

# validate_unmet ROW DIVISOR WHY: $DATA with ROW's published step divided by DIVISOR
# (faster than any GEMM rate up to the peak could price it): its GEMMs column "-",
# null in JSON, empty in CSV, and the summary counts it (the row's published figure
# restated in seconds)
validate_unmet() {
    awk -v r="$1" -v k="$2" 'BEGIN{FS=OFS="\t"} /^#/ {print; next}
      $1 == "id" {for (i = 1; i <= NF; i++) c[$i] = i; print; next}
      $1 == r {$c["published"] = $c["published_step_seconds"] / k; $c["published_unit"] = "seconds"
               $c["published_step_seconds"] = $c["published"]} {print}' \
        "$DATA" > "$TMP/unmet.tsv"
    "$SB" validate --data "$TMP/unmet.tsv" > "$TMP/unmet.txt" 2> /dev/null
    "$SB" validate --data "$TMP/unmet.tsv" --format json > "$TMP/unmet.json" 2> /dev/null
    "$SB" validate --data "$TMP/unmet.tsv" --format csv > "$TMP/unmet.csv" 2> /dev/null
    check "$1 $2 times faster ($3): no GEMM rate up to the peak meets it (table, JSON, CSV, summary)" \
        python3 -c "
import csv, json, sys
t = open(sys.argv[1]).read().splitlines()
row = [l for l in t if l.startswith(sys.argv[4] + ' ')]
assert len(row) == 1 and row[0].split()[-1] == '-', row
assert any('1 run no rate up to the peak meets' in l for l in t if l.startswith('GEMMs, '))
j = [r for r in json.load(open(sys.argv[2]))['runs'] if r['id'] == sys.argv[4]]
assert len(j) == 1 and j[0]['implied_gemm_tflops'] is None and j[0]['gemm_tflops'] > 0
c = [r for r in csv.DictReader(open(sys.argv[3])) if r['id'] == sys.argv[4]]
assert len(c) == 1 and c[0]['implied_gemm_tflops'] == ''
" "$TMP/unmet.txt" "$TMP/unmet.json" "$TMP/unmet.csv" "$1"
}
