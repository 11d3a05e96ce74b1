#!/usr/bin/env bash
# scripts/fuzz.sh SECONDS: fuzzes the model-file parser (tests/fuzz_parse.c),
# the calibration file reader (tests/fuzz_calibration.c) and the strategy
# file reader (tests/fuzz_strategy.c) for SECONDS in all (default 60: half
# to the parser, a quarter to each reader) with libFuzzer, ASan and UBSan.
#
# Configures build-fuzz/ with clang (-DSHARDBENCH_FUZZ=ON), builds the
# fuzz_parse, fuzz_calibration and fuzz_strategy targets, and runs each on
# its seed corpus (models/*.model and the test models tests/data/models/*.model;
# tests/data/calibration/*;
# tests/data/strategy/*.strategy) in a temporary folder. Exits non-zero if the fuzzer finds a crash, a leak, a
# timeout or an out-of-memory input; the reproducer is kept under
# build-fuzz/fuzz-artifacts/DATE-TIME/ (save it under tests/fuzz-crashes/ and replay
# it with `build-fuzz/tests/fuzz_parse FILE`).
set -euo pipefail

secs=${1:-60}
case "$secs" in
    '' | *[!0-9]*) echo "usage: scripts/fuzz.sh SECONDS" >&2; exit 2 ;;
esac

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
# shellcheck source=scripts/deps.sh
source scripts/deps.sh
sb_install_deps

CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Release \
    -DSHARDBENCH_FUZZ=ON -DSHARDBENCH_TESTS=ON
cmake --build build-fuzz -j"$(nproc)" --target fuzz_parse fuzz_calibration fuzz_strategy

corpus=$(mktemp -d)
trap 'rm -rf "$corpus"' EXIT
mkdir "$corpus/model" "$corpus/calibration" "$corpus/strategy"
cp models/*.model tests/data/models/*.model "$corpus/model/"
cp tests/data/calibration/* "$corpus/calibration/"
cp tests/data/strategy/*.strategy "$corpus/strategy/"
cal_secs=$((secs / 4))
[ "$cal_secs" -ge 1 ] || cal_secs=1
strat_secs=$((secs / 4))
[ "$strat_secs" -ge 1 ] || strat_secs=1
parse_secs=$((secs - cal_secs - strat_secs))
[ "$parse_secs" -ge 1 ] || parse_secs=1
artifacts=$root/build-fuzz/fuzz-artifacts/$(date +%Y%m%d-%H%M%S)
mkdir -p "$artifacts"

seeds=("$corpus"/model/*.model)
echo "fuzz.sh: fuzzing the model parser for $parse_secs s (seeds: ${#seeds[@]} models)"
rc=0
build-fuzz/tests/fuzz_parse -max_total_time="$parse_secs" -max_len=65536 -timeout=30 \
    -rss_limit_mb=4096 -verbosity=0 -print_final_stats=1 -artifact_prefix="$artifacts/" \
    "$corpus/model" || rc=$?
if [ "$rc" -eq 0 ]; then
    echo "fuzz.sh: fuzzing the calibration file reader for $cal_secs s"
    build-fuzz/tests/fuzz_calibration -max_total_time="$cal_secs" -max_len=4096 -timeout=30 \
        -rss_limit_mb=4096 -verbosity=0 -print_final_stats=1 -artifact_prefix="$artifacts/" \
        "$corpus/calibration" || rc=$?
fi
if [ "$rc" -eq 0 ]; then
    echo "fuzz.sh: fuzzing the strategy file reader for $strat_secs s"
    build-fuzz/tests/fuzz_strategy -max_total_time="$strat_secs" -max_len=16384 -timeout=30 \
        -rss_limit_mb=4096 -verbosity=0 -print_final_stats=1 -artifact_prefix="$artifacts/" \
        "$corpus/strategy" || rc=$?
fi
if [ "$rc" -ne 0 ]; then
    echo "fuzz.sh: FAILED (libFuzzer exit status $rc); reproducers:" >&2
    ls -l "$artifacts" >&2
    exit 1
fi
echo "fuzz.sh: no crash in $secs s"
