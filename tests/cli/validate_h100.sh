#!/usr/bin/env bash
# tests/cli/validate_h100.sh: `shardbench validate --data` over the published H100
# runs of tests/data/published-runs-h100.tsv (docs/validation.md),
# priced by people who did not tune to them. validate exits 0 within its target,
# 1 over it (or when the grid's best is slower than a published run), as on the
# A100 rows; this test holds the file well formed and the run's report whole
# (exit 0 or 1, each row priced, its breakdown adding up to its step), the exit
# status consistent with the report, the optional columns (mlp, tp_comm_overlap,
# grad_reduce_dtype) and the units tokens_per_s_per_gpu and tflops_per_gpu_model
# read, and a malformed row refused with exit 2 naming file:line. Whether the
# rows land within 15% is reported (stdout), not asserted here.
#
#   tests/cli/validate_h100.sh SHARDBENCH SOURCE_DIR
set -uo pipefail

SB=${1:?usage: validate_h100.sh SHARDBENCH SOURCE_DIR}
SRC=${2:?usage: validate_h100.sh SHARDBENCH SOURCE_DIR}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/validate_h100.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
# shellcheck source=tests/cli/check_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/check_lib.sh"
DATA="$SRC/tests/data/published-runs-h100.tsv"
# shellcheck source=tests/cli/validate_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/validate_lib.sh"
validate_whole H100
validate_implied val "$SRC/machines"
# under fp8 the implied rate moves the linear layers' GEMMs only (not the output
# layer's, bf16): with the attention priced as GEMM tiles (no measured rates) it
# keeps bf16's gemm_eff_large
mkdir -p "$TMP/noattn"
for f in "$SRC"/machines/*.machine; do grep -v '^attn_[fb]wd_tflops' "$f" > "$TMP/noattn/${f##*/}"; done
SHARDBENCH_MACHINES="$TMP/noattn" "$SB" validate --data "$DATA" --format json > "$TMP/noattn.json" 2> /dev/null
validate_implied noattn "$TMP/noattn"
check "JSON: every row fp8 on h100" js "$TMP/val.json" "all(r['precision'] == 'fp8' for r in d['runs'])"
"$SB" validate --data "$DATA" --target-mape 1e6 --target-max 1e6 > /dev/null 2>&1
rc2=$?
slow=$(python3 -c "import json,sys; print(1 if json.load(open(sys.argv[1]))['search_slower_than_published'] else 0)" "$TMP/val.json")
check "targets out of reach: exit 1 only for a slower search's best ($rc2)" test "$rc2" -eq "$slow"
"$SB" validate --data "$DATA" --target-max 0.001 > /dev/null 2> "$TMP/tgt"
check "over a target: exit 1 and says so" test $? -eq 1
check "over a target: names it" grep -q "over the target" "$TMP/tgt"

# the units: llama2-7b's NeMo Model TFLOP/s (776) gives the same step within 0.1%
ROW=nemo2407-llama2-7b
awk -v r=$ROW 'BEGIN{FS=OFS="\t"} /^#/ {print; next} $1 == "id" {for (i = 1; i <= NF; i++) c[$i] = i; print; next}
  $1 == r {$c["published"] = 776; $c["published_unit"] = "tflops_per_gpu_model"} {print}' "$DATA" > "$TMP/tflops.tsv"
"$SB" validate --data "$TMP/tflops.tsv" --format json > "$TMP/tflops.json" 2> /dev/null
check "tflops_per_gpu_model: accepted, the same prediction" python3 -c "
import json; a = json.load(open('$TMP/val.json'))['runs']; b = json.load(open('$TMP/tflops.json'))['runs']
assert [r['predicted_step_seconds'] for r in a] == [r['predicted_step_seconds'] for r in b]"
awk -v r=$ROW 'BEGIN{FS=OFS="\t"} /^#/ {print; next} $1 == "id" {for (i = 1; i <= NF; i++) c[$i] = i; print; next}
  $1 == r {$c["mlp"] = "gelu"} {print}' "$TMP/tflops.tsv" > "$TMP/gelu.tsv"
refused "mlp read: a GELU MLP's FLOPs disagree with the published TFLOP/s" "disagrees" validate --data "$TMP/gelu.tsv"

# cross_entropy_fusion read: the Megatron-Bridge row (1) priced slower at 0, the others alike
awk 'BEGIN{FS=OFS="\t"} /^#/ {print; next} $1 == "id" {for (i = 1; i <= NF; i++) c[$i] = i; print; next}
  {$c["cross_entropy_fusion"] = 0} {print}' "$DATA" > "$TMP/cef0.tsv"
"$SB" validate --data "$TMP/cef0.tsv" --format json > "$TMP/cef0.json" 2> /dev/null
check "cross_entropy_fusion read: mb2511's fused loss priced faster, the unfused rows as they were" python3 -c "
import json; a = json.load(open('$TMP/val.json'))['runs']; b = json.load(open('$TMP/cef0.json'))['runs']
assert len(a) == len(b) == $N
for x, y in zip(a, b):
    if x['id'].startswith('mb2511'): assert x['predicted_step_seconds'] < y['predicted_step_seconds'], x['id']
    else: assert x['predicted_step_seconds'] == y['predicted_step_seconds'], x['id']"

# malformed rows: exit 2 naming file:line
bad() { bad_row "$ROW" "$@"; } # bad NAME COLUMN VALUE TEXT
bad "degrees whose product is not the GPUs" tp 3 ""
bad "an mlp neither gelu nor swiglu" mlp relu "mlp 'relu'"
bad "tp_comm_overlap not 0 or 1" tp_comm_overlap 2 "tp_comm_overlap"
bad "grad_reduce_dtype unknown" grad_reduce_dtype fp16x "grad_reduce_dtype 'fp16x'"
bad "cross_entropy_fusion not 0 or 1" cross_entropy_fusion 2 "cross_entropy_fusion '2'"
bad "an unknown published_unit" published_unit mfu "published_unit 'mfu'"
bad "step seconds that disagree with tokens/s" published_step_seconds 4.5 "published_step_seconds 4.5 disagrees"
bad "a word for a number" layers thirty "layers 'thirty'"
echo "validate_h100: $fails failure(s)"
exit $((fails > 0))
