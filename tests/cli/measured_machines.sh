#!/usr/bin/env bash
# tests/cli/measured_machines.sh: tests/gpu/measured_machines.sh, the machines
# folder tests/gpu/run.sh builds from a GPU's measured figures for `validate`.
# With stand-in fragments (perf/gpu_model's and perf/gpu_attention's keys and
# comments): the keys they give replaced in h100-sxm's copy, once each; validate
# reads the folder (the bf16 GEMM rate the new fraction's, fp8's and the other
# machines' untouched); machines/ itself unchanged; a missing, empty or keyless
# fragment and an unknown machine refused with exit 2.
#
#   tests/cli/measured_machines.sh SHARDBENCH SOURCE_DIR
set -uo pipefail

SB=${1:?usage: measured_machines.sh SHARDBENCH SOURCE_DIR}
SRC=${2:?usage: measured_machines.sh SHARDBENCH SOURCE_DIR}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/measured_machines.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
# shellcheck source=tests/cli/check_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/check_lib.sh"
MM="$SRC/tests/gpu/measured_machines.sh"

cat > "$TMP/gpu-model.machine" <<'FRAG'
# Measured by perf/gpu_model on a stand-in (132 SMs), against machines/h100-sxm.machine;
#   no soak (--soak 0). Each large-GEMM fraction is the file's times ...
gemm_eff_large 0.640   # the file's 0.801 x 0.799 over 40 bf16 GEMMs; the best
#   measured shape: 790.0 of 989.5 TFLOP/s bf16
hbm_eff 0.870          # device-to-device copy: 2915 of 3350 GB/s
FRAG
cat > "$TMP/gpu-attention.machine" <<'FRAG'
# Measured by perf/gpu_attention on a stand-in
attn_fwd_tflops 1024:400,8192:520
attn_bwd_tflops 1024:380,8192:480
FRAG
sum0=$(cat "$SRC"/machines/*.machine | md5sum)
bash "$MM" "$TMP/m" h100-sxm "$TMP/gpu-model.machine" "$TMP/gpu-attention.machine" > "$TMP/out" 2>&1
rc=$?
check "merged: exit 0 ($rc)" test "$rc" -eq 0
check "merged: names the measured keys" grep -q "gemm_eff_large hbm_eff attn_fwd_tflops attn_bwd_tflops measured" "$TMP/out"
for k in gemm_eff_large hbm_eff attn_fwd_tflops attn_bwd_tflops gemm_eff_large_fp8 sms; do
    check "h100-sxm's copy gives $k once" test "$(grep -c "^$k " "$TMP/m/h100-sxm.machine")" -eq 1
done
check "h100-sxm's copy: the fragment's gemm_eff_large" grep -q "^gemm_eff_large 0.640 " "$TMP/m/h100-sxm.machine"
check "h100-sxm's copy: the fragment's comments kept" grep -q "^#   measured shape: 790.0" "$TMP/m/h100-sxm.machine"
check "every other machine copied as it is" bash -c "cd '$SRC/machines' && for f in *.machine; do
    [ \$f = h100-sxm.machine ] || cmp -s \$f '$TMP/m/'\$f || exit 1; done"
check "machines/ unchanged" test "$(cat "$SRC"/machines/*.machine | md5sum)" = "$sum0"

DATA="$SRC/tests/data/published-runs-h100-dgxc.tsv"
SHARDBENCH_MACHINES="$TMP/m" "$SB" validate --data "$DATA" --format json > "$TMP/val.json" 2> "$TMP/val.err"
rc=$?
check "validate reads the folder: exit 0 or 1 ($rc)" test "$rc" -le 1
check "validate: the bf16 GEMM rate the fragment's (0.640 x 989.5), fp8's the file's" js "$TMP/val.json" "
all(abs(r['gemm_tflops'] - (0.640 * 989.5 if r['precision'] == 'bf16' else 0.709 * 1978.9)) < 1e-6
    for r in d['runs'])"
"$SB" validate --data "$DATA" --format json > "$TMP/val0.json" 2> /dev/null
check "validate: the measured figures move every prediction" python3 -c "
import json; a = json.load(open('$TMP/val.json'))['runs']; b = json.load(open('$TMP/val0.json'))['runs']
assert len(a) == len(b) > 0
for x, y in zip(a, b): assert x['predicted_step_seconds'] != y['predicted_step_seconds'], x['id']"

printf '# only a comment\n' > "$TMP/keyless.machine"
: > "$TMP/empty.machine"
for bad in "keyless.machine:gives no key" "empty.machine:missing or empty" "nosuch.machine:missing or empty"; do
    bash "$MM" "$TMP/b" h100-sxm "$TMP/${bad%%:*}" > /dev/null 2> "$TMP/err"
    rc=$?
    check "${bad%%:*} refused: exit 2 ($rc), says '${bad#*:}'" bash -c "[ $rc -eq 2 ] && grep -q '${bad#*:}' '$TMP/err'"
done
bash "$MM" "$TMP/b" no-such-gpu "$TMP/gpu-model.machine" > /dev/null 2> "$TMP/err"
rc=$?
check "an unknown machine refused: exit 2 ($rc), names it" bash -c "[ $rc -eq 2 ] && grep -q 'no-such-gpu' '$TMP/err'"
check "no stray temporary file left" test -z "$(find "$TMP/m" -name '.*' -type f)"
exit $((fails > 0))
