#!/usr/bin/env bash
# tests/cli/nightly.sh SHARDBENCH SOURCE_DIR: `shardbench nightly` end to end on a
# tiny AlexNet at p = 1, into a temporary database:
#   1. real launches, three nights of the same build: the first has no
#      baseline and keeps a copy of its binary (--keep-builds); the second
#      measures that kept build launch for launch beside itself (auto A/B)
#      and exits 0, "no regression"; the third, with --baseline-build none,
#      is held to the stored launches of the last good night (a wide
#      --threshold: this checks the plumbing, not the machine's noise);
#   2. a fake launcher printing `run --format json` with fixed step times (a
#      slowdown made deterministic): 30% slower against the last good night
#      is confirmed after the re-measure and exits 1; the same times again
#      exit 0 and pick the last good night, not the regressed one; one
#      launch per strategy is not enough data (exit 0).
set -euo pipefail

SB=${1:?usage: nightly.sh SHARDBENCH SOURCE_DIR}
SRC=${2:?usage: nightly.sh SHARDBENCH SOURCE_DIR}
T=$(mktemp -d "${TMPDIR:-/tmp}/sb-nightly-test-XXXXXX")
trap 'rm -rf "$T"' EXIT
export SHARDBENCH_MODELS=${SHARDBENCH_MODELS:-$SRC/models}
export SHARDBENCH_PLOTS=${SHARDBENCH_PLOTS:-$SRC/plots}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
MPI="env ASAN_OPTIONS=detect_leaks=0 mpirun --oversubscribe"
[ "$(id -u)" -eq 0 ] && MPI="$MPI --allow-run-as-root"
DB=$T/t.db
ARGS=(-m alexnet -p 1 --set batch=4 --set image=67 --set classes=16 --set width_div=16
      --steps 2 --warmup 1 --top 1)
fail() { echo "FAIL: $*" >&2; exit 1; }
q() { sqlite3 -batch -noheader "$DB" "$1"; }

echo "--- 1. the same build, three nights"
K=$T/builds
"$SB" nightly "${ARGS[@]}" --db "$DB" --launcher "$MPI" --trials 3 --extra 3 --threshold 1 \
    --keep-builds "$K" --out "$T/n1" >"$T/n1.log" 2>&1 || { cat "$T/n1.log"; fail "first night: exit $?"; }
grep -q "first night (no baseline)" "$T/n1.log" || fail "first night not said"
[ -x "$K/t-run-1/shardbench" ] || fail "the first night kept no build in $K/t-run-1"
cmp -s "$K/t-run-1/shardbench" "$SB" || fail "the kept build is not this binary"
[ "$(q 'SELECT build_path FROM nightly_verdicts WHERE run_id = 1')" = "$K/t-run-1/shardbench" ] ||
    fail "kept build not recorded with the verdict"
set +e
"$SB" nightly "${ARGS[@]}" --db "$DB" --launcher "$MPI" --trials 3 --extra 3 --threshold 1 \
    --keep-builds "$K" --out "$T/n2" >"$T/n2.log" 2>&1; r=$?
set -e
[ $r = 0 ] || { cat "$T/n2.log"; fail "same build: exit 0 expected, got $r"; }
grep -q "^no regression$" "$T/n2/report.md" || fail "no 'no regression' in the report"
grep -q "A/B with the last good night's build (run 1: $K/t-run-1/shardbench)" "$T/n2.log" ||
    { cat "$T/n2.log"; fail "auto did not measure the kept build of run 1"; }
grep -q "run 2 against run 3" "$T/n2.log" || fail "A/B: run 2 not held to the kept build's run 3"
[ "$(q 'SELECT count(*) FROM measurements WHERE run_id = 3')" -ge 3 ] || fail "A/B launches not stored"
ls "$T/n2"/trend-alexnet-p1-*.png >/dev/null || fail "no trend figure"
set +e
"$SB" nightly "${ARGS[@]}" --db "$DB" --launcher "$MPI" --trials 3 --extra 3 --threshold 1 \
    --keep-builds none --baseline-build none --out "$T/n3" >"$T/n3.log" 2>&1; r=$?
set -e
[ $r = 0 ] || { cat "$T/n3.log"; fail "stored launches: exit 0 expected, got $r"; }
grep -q "run 4 against run 2" "$T/n3.log" || { cat "$T/n3.log"; fail "auto baseline is not run 2"; }
[ "$(q 'SELECT count(*) FROM nightly_verdicts WHERE regressions = 0')" = 3 ] || fail "verdicts"
[ "$(q 'SELECT count(*) FROM nightly_verdicts WHERE run_id = 4 AND build_path IS NULL')" = 1 ] ||
    fail "--keep-builds none kept a build"
[ "$(q 'SELECT count(*) FROM measurements WHERE run_id = 4')" -ge 3 ] || fail "launches not stored"
"$SB" nightly "${ARGS[@]}" --db "$DB" --baseline-build "$T/no-such" >"$T/bad.log" 2>&1 && fail "a missing --baseline-build ran"
grep -q "is not an executable" "$T/bad.log" || fail "a missing --baseline-build not named"

echo "--- 2. a fake launcher: fixed step times, in a database of their own"
DB=$T/fake.db
cat >"$T/fake.sh" <<'FAKE'
#!/bin/bash
# prints what `run --format json` prints, with the step time of $FAKE_STEP
# and a small fixed wobble per call (a counter file)
n=$(cat "$FAKE_COUNT" 2>/dev/null || echo 0); echo $((n + 1)) >"$FAKE_COUNT"
w=$(awk -v n="$n" -v s="$FAKE_STEP" 'BEGIN { printf "%.6f", s * (1 + 0.01 * ((n * 7) % 5 - 2) / 2) }')
echo "{\"step_seconds\": {\"median\": $w, \"min\": $w, \"max\": $w}, \"losses\": [2.7, 2.6, 2.5], \"warmup\": 1, \"peak_bytes_per_rank\": [1000]}"
FAKE
chmod +x "$T/fake.sh"
export FAKE_COUNT=$T/count
night() { # STEP OUT [options]
    local step=$1 out=$2; shift 2
    set +e
    FAKE_STEP=$step "$SB" nightly "${ARGS[@]}" --db "$DB" --launcher "$T/fake.sh" --out "$T/$out" \
        --keep-builds none --baseline-build none "$@" \
        >"$T/$out.log" 2>&1
    r=$?
    set -e
}
night 0.100 f1 --trials 5 --extra 5
[ $r = 0 ] || { cat "$T/f1.log"; fail "fake night at 0.100: exit $r"; }
night 0.130 f2 --trials 5 --extra 5
cat "$T/f2/report.md"
[ $r = 1 ] || { cat "$T/f2.log"; fail "30% slower: exit 1 expected, got $r"; }
grep -q "REGRESSION\*\* (confirmed by the re-measures)" "$T/f2/report.md" ||
    fail "confirmed regression row missing"
grep -q "suspect.* measured again" "$T/f2.log" || fail "suspects not measured again"
grep -q "^\*\*1 confirmed regression\*\*" "$T/f2/report.md" || fail "summary missing"
[ "$(q 'SELECT regressions FROM nightly_verdicts ORDER BY run_id DESC LIMIT 1')" = 1 ] ||
    fail "verdict not stored"
# the next night is held to the last good night (run 1), not the regressed one (run 2)
night 0.100 f3 --trials 5 --extra 5
[ $r = 0 ] || { cat "$T/f3.log"; fail "back to normal: exit $r"; }
grep -q "run 3 against run 1" "$T/f3.log" || { cat "$T/f3.log"; fail "baseline is not the last good night"; }
# one launch a side is no evidence
night 0.200 f4 --trials 1 --extra 0 --baseline 1
[ $r = 0 ] || { cat "$T/f4.log"; fail "one launch: exit 0 expected, got $r"; }
grep -q "not enough data |" "$T/f4/report.md" || fail "not enough data not said"
echo "nightly: ok"
