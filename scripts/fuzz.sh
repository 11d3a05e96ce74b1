#!/usr/bin/env bash
# scripts/fuzz.sh SECONDS: fuzzes the model-file parser (tests/fuzz_parse.c)
# for SECONDS (default 60) with libFuzzer, ASan and UBSan.
#
# Configures build-fuzz/ with clang (-DSHARDBENCH_FUZZ=ON), builds the
# fuzz_parse target, and runs it on a seed corpus made of models/*.model in
# a temporary folder. Exits non-zero if the fuzzer finds a crash, a leak, a
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
cmake --build build-fuzz -j"$(nproc)" --target fuzz_parse

corpus=$(mktemp -d)
trap 'rm -rf "$corpus"' EXIT
cp models/*.model "$corpus/"
artifacts=$root/build-fuzz/fuzz-artifacts/$(date +%Y%m%d-%H%M%S)
mkdir -p "$artifacts"

seeds=("$corpus"/*.model)
echo "fuzz.sh: fuzzing the model parser for $secs s (seeds: ${#seeds[@]} models)"
rc=0
build-fuzz/tests/fuzz_parse -max_total_time="$secs" -max_len=65536 -timeout=30 \
    -rss_limit_mb=4096 -verbosity=0 -print_final_stats=1 -artifact_prefix="$artifacts/" "$corpus" || rc=$?
if [ "$rc" -ne 0 ]; then
    echo "fuzz.sh: FAILED (libFuzzer exit status $rc); reproducers:" >&2
    ls -l "$artifacts" >&2
    exit 1
fi
echo "fuzz.sh: no crash in $secs s"
