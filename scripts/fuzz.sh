#!/usr/bin/env bash
# scripts/fuzz.sh SECONDS: fuzzes the model-file parser (tests/fuzz/fuzz_parse.c),
# the calibration file reader (tests/fuzz/fuzz_calibration.c), the strategy
# file reader (tests/fuzz/fuzz_strategy.c) and the ONNX importer
# (tests/fuzz/fuzz_onnx.c) and the Hugging Face config reader (tests/fuzz/fuzz_hf.c,
# a tenth; seeds tests/data/hf/*/config.json) for SECONDS in all (default 60: a fifth to each
# reader and the importer, the rest to the parser) with libFuzzer, ASan
# and UBSan. A build without ONNX support says so and gives the
# importer's share to the parser.
#
# Configures build-fuzz/ with clang (-DSHARDBENCH_FUZZ=ON), builds the
# fuzz targets, and runs each on its seed corpus (models/*.model and the
# test models tests/data/models/*.model; tests/data/calibration/*;
# tests/data/strategy/*.strategy; tests/data/onnx/*.onnx and the saved
# reproducers tests/data/onnx/regress/*.bin) in a temporary folder. Exits
# non-zero if the fuzzer finds a crash, a leak, a timeout or an
# out-of-memory input; the reproducer is kept under
# build-fuzz/fuzz-artifacts/DATE-TIME/ (save it under tests/fuzz/crashes/,
# or tests/data/onnx/regress/ for the importer, and replay it with the
# target that found it: `build-fuzz/tests/fuzz_parse FILE`, fuzz_onnx, ...).
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
cmake --build build-fuzz -j"$(nproc)" --target fuzz_parse fuzz_calibration fuzz_strategy fuzz_hf
onnx=0
targets=$(cmake --build build-fuzz --target help) # not piped into grep -q: pipefail, SIGPIPE
if grep -q '\<fuzz_onnx\>' <<<"$targets"; then
    cmake --build build-fuzz -j"$(nproc)" --target fuzz_onnx
    onnx=1
else
    echo "fuzz.sh: no ONNX support in this build (protobuf-c, libonnx-dev): the importer is not fuzzed"
fi

corpus=$(mktemp -d)
trap 'rm -rf "$corpus"' EXIT
mkdir "$corpus/model" "$corpus/calibration" "$corpus/strategy" "$corpus/onnx" "$corpus/hf"
cp models/*.model tests/data/models/*.model "$corpus/model/"
cp tests/data/calibration/* "$corpus/calibration/"
cp tests/data/strategy/*.strategy "$corpus/strategy/"
cp tests/data/onnx/*.onnx tests/data/onnx/regress/*.bin "$corpus/onnx/"
for d in tests/data/hf/*/; do cp "$d/config.json" "$corpus/hf/$(basename "$d").json"; done
hf_secs=$((secs / 10))
[ "$hf_secs" -ge 1 ] || hf_secs=1
cal_secs=$((secs / 5))
[ "$cal_secs" -ge 1 ] || cal_secs=1
strat_secs=$((secs / 5))
[ "$strat_secs" -ge 1 ] || strat_secs=1
onnx_secs=0
[ "$onnx" = 0 ] || onnx_secs=$((secs / 5))
[ "$onnx" = 0 ] || [ "$onnx_secs" -ge 1 ] || onnx_secs=1
parse_secs=$((secs - cal_secs - strat_secs - onnx_secs - hf_secs))
[ "$parse_secs" -ge 1 ] || parse_secs=1
artifacts=$root/build-fuzz/fuzz-artifacts/$(date +%Y%m%d-%H%M%S)
mkdir -p "$artifacts"

# fuzz TARGET SECONDS MAX_LEN CORPUS WHAT: one libFuzzer run; rc keeps the
# first failure's status, and a failure stops the runs after it
rc=0
fuzz() {
    [ "$rc" -eq 0 ] || return 0
    echo "fuzz.sh: fuzzing $5 for $2 s"
    build-fuzz/tests/"$1" -max_total_time="$2" -max_len="$3" -timeout=30 -rss_limit_mb=4096 \
        -verbosity=0 -print_final_stats=1 -artifact_prefix="$artifacts/" "$4" || rc=$?
}
seeds=("$corpus"/model/*.model)
fuzz fuzz_parse "$parse_secs" 65536 "$corpus/model" "the model parser (seeds: ${#seeds[@]} models)"
fuzz fuzz_calibration "$cal_secs" 4096 "$corpus/calibration" "the calibration file reader"
fuzz fuzz_strategy "$strat_secs" 16384 "$corpus/strategy" "the strategy file reader"
fuzz fuzz_hf "$hf_secs" 16384 "$corpus/hf" "the Hugging Face config reader"
[ "$onnx" = 0 ] || fuzz fuzz_onnx "$onnx_secs" 262144 "$corpus/onnx" "the ONNX importer"
if [ "$rc" -ne 0 ]; then
    echo "fuzz.sh: FAILED (libFuzzer exit status $rc); reproducers:" >&2
    ls -l "$artifacts" >&2
    exit 1
fi
echo "fuzz.sh: no crash in $secs s"
