#!/usr/bin/env bash
# tests/cli/precision_cli.sh: --precision and --grad-reduce-dtype (docs/cost-model.md,
# "Precision"): a GPU machine file prices bf16 mixed precision by default and
# says so; fp32 is the fp32 peak; the bytes per parameter of each recipe
# (Adam: fp32 4+4+8, bf16 2+4+12, fp16 2+2+16) and per activation element;
# a machine without a peak for the precision (fp8 on an A100) and a precision
# without --machine are refused (exit 2) naming them; the gradient reduction's
# word; a machine file without a `precision` line (what calibrate writes) is
# fp32; run's --precision is the same recipe (fp32 only there).
#
#   tests/cli/precision_cli.sh SHARDBENCH SOURCE_DIR
set -uo pipefail

SB=${1:?usage: precision_cli.sh SHARDBENCH SOURCE_DIR}
SRC=${2:?usage: precision_cli.sh SHARDBENCH SOURCE_DIR}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/precision_cli.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
# shared checks: check, refused, js (and fails=0)
# shellcheck source=tests/cli/check_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/check_lib.sh"

S=(search -m transformer -p 1 --algo dp --optimizer adam --format json --db none)
"$SB" "${S[@]}" --machine h100-sxm > "$TMP/def.json" 2> /dev/null
"$SB" "${S[@]}" --machine h100-sxm --precision fp32 > "$TMP/fp32.json" 2> /dev/null
"$SB" "${S[@]}" --machine h100-sxm --precision fp16 > "$TMP/fp16.json" 2> /dev/null
check "h100-sxm prices bf16 by default" js "$TMP/def.json" "d['precision'] == 'bf16'"
check "--precision fp32 at the fp32 peak (67 TFLOP/s)" \
    js "$TMP/fp32.json" "d['precision'] == 'fp32' and d['flops_tflops'] == 67"
check "bf16 at the bf16 peak (989.5 TFLOP/s)" js "$TMP/def.json" "d['flops_tflops'] == 989.5"
python3 - "$TMP/fp32.json" "$TMP/def.json" "$TMP/fp16.json" > "$TMP/bytes" << 'PY'
import json, sys
f32, b16, f16 = (json.load(open(p))['memory_bytes_per_device'] for p in sys.argv[1:])
W = f32['weights'] / 4  # parameters
ok = (f32['gradients'] == 4 * W and f32['optimizer'] == 8 * W
      and b16['weights'] == 2 * W and b16['gradients'] == 4 * W and b16['optimizer'] == 12 * W
      and f16['weights'] == 2 * W and f16['gradients'] == 2 * W and f16['optimizer'] == 16 * W
      and 2 * b16['activations'] == f32['activations'])
print("ok" if ok else "bad", W, f32, b16, f16)
PY
check "bytes per parameter 4+4+8, 2+4+12, 2+2+16 and activations 4 vs 2 bytes" grep -q '^ok' "$TMP/bytes"

# the gradient reduction's word: data parallel at p = 8 moves less in bf16
D=(search -m transformer -p 8 --algo dp --format json --db none --machine h100-sxm)
"$SB" "${D[@]}" > "$TMP/g32.json" 2> /dev/null
"$SB" "${D[@]}" --grad-reduce-dtype bf16 > "$TMP/g16.json" 2> /dev/null
check "--grad-reduce-dtype bf16 prices data parallel below the recipe's fp32 reduction" \
    python3 -c "import json,sys; a, b = (json.load(open(p))['total_cost'] for p in sys.argv[1:]); sys.exit(0 if b < a else 1)" \
    "$TMP/g32.json" "$TMP/g16.json"

# the full space searches within --memory in the recipe's bytes (its stage
# memory once counted fp32 while the report counted bf16: 1391 MiB "within" 1 GiB)
for lim in 1GiB 500MiB; do
    "$SB" search -m transformer --set batch=8 -p 8 --machine h100-sxm --optimizer adam \
        --memory $lim --space full --db none --format json > "$TMP/pipe.json" 2> /dev/null
    check "--space full --memory $lim at bf16: the peak is within it" python3 -c "
import json, sys; d = json.load(open(sys.argv[1])); lim = {'1GiB': 2**30, '500MiB': 500 * 2**20}[sys.argv[2]]
assert 0 < d['peak_bytes_per_device'] <= lim, d['peak_bytes_per_device']" "$TMP/pipe.json" $lim
done

refused "fp8 on an A100" "no fp8 peak" search -m transformer -p 8 --db none --machine a100-sxm-80g --precision fp8
"$SB" search -m transformer -p 8 --db none --machine h100-sxm --precision fp8 > "$TMP/fp8" 2>&1
check "fp8 on an H100 is priced at fp8" grep -q "at fp8" "$TMP/fp8"
# the full space under fp8 on a Llama (a norm's linears converting one input, so
# equal GEMMs priced apart): a strategy of one stage, found as priced (an
# equal-op test that ignored the conversions returned none, at a step of 0 s)
"$SB" search -m llama3-8b --set layers=2 -p 1 --db none --machine h100-sxm --precision fp8 \
    --space full --megatron-grid off --format json > "$TMP/f8.json"
check "fp8 full space: one stage, a step found" js "$TMP/f8.json" \
    "len(d['stages']) == 1 and d['predicted_step_seconds'] > 0 and d['total_cost'] > 0"
# two linears of one model input are one fp8 module, and a cut between them
# divides it: a segment priced alone then costs more than inside a stage, so
# it must not bound one. The full space (stages, micro-batches) holds the
# plain search's answer: never dearer than it.
cat > "$TMP/share.model" <<'EOF2'
model "share"
param batch = 1024
input x[batch=batch, e=8192]
weight wa[e=8192, f=8192]
a = einsum("batch e, e f -> batch f", x, wa)
weight wb[e=8192, f=8192]
b = einsum("batch e, e f -> batch f", x, wb)
s = add(a, b)
weight wc[f=8192, c=1024]
z = einsum("batch f, f c -> batch c", s, wc)
loss = softmax_xent(z)
EOF2
for p in 1 4; do
    F8=(search -m "$TMP/share.model" -p "$p" --db none --machine h100-sxm --precision fp8 --format json)
    "$SB" "${F8[@]}" > "$TMP/sh-plain.json"
    "$SB" "${F8[@]}" --space full --megatron-grid off > "$TMP/sh-full.json"
    check "fp8 module cut, p=$p: the full space no dearer than the plain search" python3 -c "
import json, sys; f, p = (json.load(open(a))['total_cost'] for a in sys.argv[1:3])
assert 0 < f <= p * (1 + 1e-9), (f, p)" "$TMP/sh-full.json" "$TMP/sh-plain.json"
done
refused "--precision without --machine" "needs --machine" search -m transformer -p 8 --db none --precision bf16
refused "--grad-reduce-dtype without --machine" "needs --machine" search -m transformer -p 8 --db none --grad-reduce-dtype bf16
refused "an unknown precision" "'fp4' is not" search -m transformer -p 8 --db none --machine h100-sxm --precision fp4
refused "bench --precision without --machine" "needs --machine" bench -m alexnet -p 2 --precision bf16 --db "$TMP/x.db"
# a machine file without a precision line (as calibrate writes them) prices fp32
grep -v '^precision' "$SRC/machines/h100-sxm.machine" > "$TMP/np.machine"
"$SB" "${S[@]}" --machine "$TMP/np.machine" > "$TMP/np.json" 2> /dev/null
check "a machine file without 'precision' prices fp32" js "$TMP/np.json" "d['precision'] == 'fp32'"
printf 'precision bf17\n' >> "$TMP/np.machine"
refused "a bad precision line" "np.machine:" search -m transformer -p 1 --db none --machine "$TMP/np.machine"
# the plain reference search (no --machine) prints no precision
"$SB" search -m transformer -p 8 --db none --format json > "$TMP/ref.json"
check "the reference model's JSON names no precision" js "$TMP/ref.json" "'precision' not in d"
# the attention kernel's measured rates (h100-sxm: cuDNN in bf16) price the 16-bit
# recipes only: fp32 and tf32 the same without them, bf16 and fp8 not, both halves
grep -v '^attn_[fb]wd_tflops' "$SRC/machines/h100-sxm.machine" > "$TMP/na.machine"
for alg in "--algo megatron" ""; do
    for p in fp32 tf32 bf16 fp8; do
        for m in h100-sxm "$TMP/na.machine"; do
            # shellcheck disable=SC2086
            "$SB" search -m llama3-8b --set seq=4096 --set batch=16 -p 8 $alg --machine "$m" \
                --precision $p --db none --format json 2> /dev/null |
                python3 -c "import json,sys; print(json.load(sys.stdin)['predicted_step_seconds'])"
        done | paste -sd' ' > "$TMP/attn-$p"
    done
    read -r a b < "$TMP/attn-fp32"; read -r c d < "$TMP/attn-tf32"
    read -r e f < "$TMP/attn-bf16"; read -r g h < "$TMP/attn-fp8"
    check "attention rates ${alg:-op level}: fp32, tf32 unmoved ($a $b, $c $d); bf16, fp8 moved ($e $f, $g $h)" \
        test -n "$a" -a "$a" = "$b" -a "$c" = "$d" -a -n "$e" -a "$e" != "$f" -a "$g" != "$h"
done
echo "precision_cli: $fails failure(s)"
exit $((fails > 0))
