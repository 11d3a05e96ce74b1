#!/usr/bin/env bash
# tests/cli/validate_h100_dgxc.sh: `shardbench validate --data` over the NVIDIA DGX
# Cloud Benchmarking H100 runs of tests/data/published-runs-h100-dgxc.tsv: the same
# configurations published at BF16 and at FP8, added by someone who did not tune
# the model (docs/megatron.md, "Published H100 runs"). Held: the file well formed
# (every row parsed and priced, its breakdown adding up to its step), every row a
# bf16/fp8 pair with the same configuration, the fp8 twin priced faster, the exit
# status as the report says, and a malformed row refused with exit 2 naming
# file:line. Whether the rows land within 15% is printed, not asserted.
#
#   tests/cli/validate_h100_dgxc.sh SHARDBENCH SOURCE_DIR
set -uo pipefail

SB=${1:?usage: validate_h100_dgxc.sh SHARDBENCH SOURCE_DIR}
SRC=${2:?usage: validate_h100_dgxc.sh SHARDBENCH SOURCE_DIR}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/validate_dgxc.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
# shellcheck source=tests/cli/check_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/check_lib.sh"
DATA="$SRC/tests/data/published-runs-h100-dgxc.tsv"
# shellcheck source=tests/cli/validate_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/validate_lib.sh"
validate_whole DGXC
validate_implied val "$SRC/machines"
validate_unmet dgxc-llama31-8b-bf16-8 10 "the rest of its step alone slower"
validate_unmet dgxc-llama31-8b-bf16-8 1.5 "met only by GEMMs above the peak"
check "the file holds runs ($N)" test "$N" -ge 20
# the table's errors per machine and precision (two here), recomputed from the runs;
# a table of one machine and precision (the A100 one) has no such lines
"$SB" validate --data "$DATA" > "$TMP/val.txt" 2> /dev/null
check "an errors line per precision, as the runs give them" python3 -c "
import json
runs = json.load(open('$TMP/val.json'))['runs']; txt = open('$TMP/val.txt').read()
for p in ('bf16', 'fp8'):
    e = [abs(r['error_percent']) for r in runs if r['precision'] == p]
    want = 'errors, h100-sxm %s: %d runs, MAPE %.2f%%, largest %.2f%%, %d within 15%%' % (
        p, len(e), sum(e) / len(e), max(e), sum(x <= 15 for x in e))
    assert want in txt, want"
"$SB" validate --data "$SRC/tests/data/published-runs.tsv" > "$TMP/a100.txt" 2> /dev/null
check "one machine and precision: no errors lines" bash -c "! grep -q '^errors,' '$TMP/a100.txt' && grep -q '^GEMMs,' '$TMP/a100.txt'"
# pairs: id ...-bf16-G and ...-fp8-G, the same degrees; fp8 priced faster
check "every run a bf16/fp8 pair of one configuration, the fp8 one priced faster" js "$TMP/val.json" "
(lambda m: len(m) == $N and all(r['precision'] in ('bf16', 'fp8') for r in m.values()) and all(
  (lambda b, f: all(b[k] == f[k] for k in ('gpus', 'tp', 'pp', 'dp', 'vpp', 'micro_batch_size'))
   and f['predicted_step_seconds'] < b['predicted_step_seconds'])(m[i], m[i.replace('-bf16-', '-fp8-')])
  for i in m if '-bf16-' in i))({r['id']: r for r in d['runs']})"

# gemm_eff_large_fp8 (h100-sxm: the fp8 microbenchmark's fraction): without the line
# fp8 GEMMs fall back to gemm_eff_large and price faster; bf16 rows do not move
mkdir -p "$TMP/m"
grep -v '^gemm_eff_large_fp8' "$SRC/machines/h100-sxm.machine" > "$TMP/m/h100-sxm.machine"
check "h100-sxm gives gemm_eff_large_fp8" grep -q '^gemm_eff_large_fp8' "$SRC/machines/h100-sxm.machine"
SHARDBENCH_MACHINES="$TMP/m" "$SB" validate --data "$DATA" --format json > "$TMP/nofp8.json" 2> /dev/null
check "gemm_eff_large_fp8 read: fp8 rows slower with it, bf16 rows the same" python3 -c "
import json; a = json.load(open('$TMP/val.json'))['runs']; b = json.load(open('$TMP/nofp8.json'))['runs']
assert len(a) == len(b) == $N
for x, y in zip(a, b):
    if x['precision'] == 'bf16': assert x['predicted_step_seconds'] == y['predicted_step_seconds'], x['id']
    else: assert x['predicted_step_seconds'] > y['predicted_step_seconds'], x['id']"
sed 's/^gemm_eff_large_fp8 .*/gemm_eff_large_fp8 1.5/' "$SRC/machines/h100-sxm.machine" > "$TMP/m/h100-sxm.machine"
SHARDBENCH_MACHINES="$TMP/m" "$SB" validate --data "$DATA" > /dev/null 2> "$TMP/m.err"
check "gemm_eff_large_fp8 out of range: exit 2 naming it ($?)" grep -q 'gemm_eff_large_fp8' "$TMP/m.err"

# attn_fwd_tflops, attn_bwd_tflops (h100-sxm: cuDNN's fused attention, measured): without
# them the kernel is priced as its GEMMs (about 421 TFLOP/s at head dim 128), slower
check "h100-sxm gives the attention kernel's rates" grep -q '^attn_bwd_tflops' "$SRC/machines/h100-sxm.machine"
grep -v '^attn_[fb]wd_tflops' "$SRC/machines/h100-sxm.machine" > "$TMP/m/h100-sxm.machine"
SHARDBENCH_MACHINES="$TMP/m" "$SB" validate --data "$DATA" --format json > "$TMP/noattn.json" 2> /dev/null
check "attention rates read: every run priced faster with them" python3 -c "
import json; a = json.load(open('$TMP/val.json'))['runs']; b = json.load(open('$TMP/noattn.json'))['runs']
assert len(a) == len(b) == $N
for x, y in zip(a, b): assert x['predicted_step_seconds'] < y['predicted_step_seconds'], x['id']"
grep -v '^attn_bwd_tflops' "$SRC/machines/h100-sxm.machine" > "$TMP/m/h100-sxm.machine"
SHARDBENCH_MACHINES="$TMP/m" "$SB" validate --data "$DATA" > /dev/null 2> "$TMP/m.err"
rc=$?
check "attn_fwd_tflops alone: exit 2 ($rc) naming the missing one" \
    grep -q 'attn_fwd_tflops without attn_bwd_tflops' "$TMP/m.err"
check "attn_fwd_tflops alone: exit 2" test "$rc" -eq 2

# malformed rows: exit 2 naming file:line
ROW=dgxc-llama31-70b-bf16-64
bad() { bad_row "$ROW" "$@"; } # bad NAME COLUMN VALUE TEXT
bad "degrees whose product is not the GPUs" dp 3 ""
bad "an unknown precision" precision fp6 ""
bad "step seconds that disagree with the published seconds" published_step_seconds 15.5 \
    "published_step_seconds 15.5 disagrees"
bad "a word for a number" vpp five "vpp 'five'"
echo "validate_h100_dgxc: $fails failure(s)"
exit $((fails > 0))
