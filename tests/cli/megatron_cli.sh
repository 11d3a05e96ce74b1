#!/usr/bin/env bash
# tests/cli/megatron_cli.sh: `search --algo megatron` and `validate`
# (docs/megatron.md). Every degree given: that configuration, with the JSON
# fields a planner reads (precision, predicted_step_seconds, _tokens_per_second,
# _tflops_per_device, _mfu, time_breakdown_seconds {compute, tp_comm, dp_comm,
# pp_comm, bubble, optimizer} adding up to the step, memory_bytes_per_device
# {weights, gradients, optimizer, activations, buffers}, the degrees); the grid's
# best no slower than that configuration; bad degrees and option clashes refused
# (exit 2 with the reason); -p 262144 accepted; validate over the published runs
# within its target, and a malformed row refused naming file:line.
#
#   tests/cli/megatron_cli.sh SHARDBENCH SOURCE_DIR
set -uo pipefail

SB=${1:?usage: megatron_cli.sh SHARDBENCH SOURCE_DIR}
SRC=${2:?usage: megatron_cli.sh SHARDBENCH SOURCE_DIR}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/megatron_cli.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
# shared checks: check, refused, js (and fails=0)
# shellcheck source=tests/cli/check_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/check_lib.sh"

M=(search --algo megatron -m gpt3-175b --set layers=80 --set embed=12288 --set heads=96
   --set ff=49152 --set vocab=51200 --set seq=2048 --set batch=2304 --machine a100-sxm-80g)
FIX=(--tp 8 --pp 8 --dp 24 --cp 1 --ep 1 --vpp 2 --micro-batch-size 2 --recompute full
     --sequence-parallel off --zero 0)
"$SB" "${M[@]}" -p 1536 "${FIX[@]}" --format json > "$TMP/fix.json"
check "a configuration given: exit 0" test $? -eq 0
check "its JSON: the degrees, bf16 (the machine's), the planner's fields" js "$TMP/fix.json" "
d['algo'] == 'megatron' and d['precision'] == 'bf16' and d['configurations_priced'] == 1
and d['megatron']['tp'] == 8 and d['megatron']['pp'] == 8 and d['megatron']['dp'] == 24
and d['megatron']['vpp'] == 2 and d['megatron']['micro_batch_size'] == 2
and d['megatron']['microbatches'] == 48 and d['megatron']['recompute'] == 'full'
and all(d[k] > 0 for k in ('predicted_step_seconds', 'predicted_tokens_per_second',
        'predicted_tflops_per_device', 'predicted_mfu'))
and sorted(d['time_breakdown_seconds']) == sorted(['compute', 'tp_comm', 'dp_comm', 'pp_comm', 'bubble', 'optimizer'])
and abs(sum(d['time_breakdown_seconds'].values()) - d['predicted_step_seconds']) < 1e-9 * d['predicted_step_seconds']
and sorted(d['memory_bytes_per_device']) == sorted(['weights', 'gradients', 'optimizer', 'activations', 'buffers'])
and abs(sum(d['memory_bytes_per_device'].values()) - d['peak_bytes_per_device']) <= 5"
"$SB" "${M[@]}" -p 1536 "${FIX[@]}" --precision fp16 --format json > "$TMP/fp16.json"
check "--precision fp16: the same peak, fp16 gradients (2 bytes, not 4)" js "$TMP/fp16.json" "
d['precision'] == 'fp16' and 2 * d['memory_bytes_per_device']['gradients'] == json.load(open('$TMP/fix.json'))['memory_bytes_per_device']['gradients']"
"$SB" "${M[@]}" -p 1536 --format json > "$TMP/grid.json"
check "the grid's best is no slower than the configuration given" python3 -c "
import json; a = json.load(open('$TMP/fix.json')); b = json.load(open('$TMP/grid.json'))
assert b['configurations_priced'] > 100 and b['predicted_step_seconds'] <= a['predicted_step_seconds']
assert b['peak_bytes_per_device'] <= b['device_memory_bytes']"
"$SB" "${M[@]}" -p 1536 --tp 4 --format json > "$TMP/tp4.json"
check "--tp 4 fixes TP" js "$TMP/tp4.json" "d['megatron']['tp'] == 4"
"$SB" "${M[@]}" -p 1536 --stages 4 --format json > "$TMP/st4.json"
check "--stages is --pp" js "$TMP/st4.json" "d['megatron']['pp'] == 4"
"$SB" "${M[@]}" -p 1536 "${FIX[@]}" --attention fused --format json > "$TMP/fa.json"
"$SB" "${M[@]}" -p 1536 "${FIX[@]}" --attention materialized --format json > "$TMP/ma.json"
check "fused attention is faster than the materialized S x S scores" python3 -c "
import json; a = json.load(open('$TMP/fa.json')); b = json.load(open('$TMP/ma.json'))
assert a['predicted_step_seconds'] < b['predicted_step_seconds']"
"$SB" "${M[@]}" -p 1536 "${FIX[@]}" --cross-entropy-fusion on --format json > "$TMP/cef.json"
check "--cross-entropy-fusion on: the loss's fewer passes, only its memory-bound time less" python3 -c "
import json; a = json.load(open('$TMP/fix.json')); b = json.load(open('$TMP/cef.json'))
assert a['megatron']['cross_entropy_fusion'] is False and b['megatron']['cross_entropy_fusion'] is True
ka, kb = a['compute_breakdown_seconds'], b['compute_breakdown_seconds']
assert kb['memory_bound'] < ka['memory_bound'] and kb['gemm'] == ka['gemm'] and kb['attention'] == ka['attention']
assert b['predicted_step_seconds'] < a['predicted_step_seconds']"
refused "--cross-entropy-fusion a word other than on/off" "'yes' is not on or off" "${M[@]}" -p 1536 \
    --cross-entropy-fusion yes
"$SB" "${M[@]}" -p 1536 "${FIX[@]}" --dp-overlap off --format json > "$TMP/noov.json"
check "--dp-overlap off exposes more data-parallel time" python3 -c "
import json; a = json.load(open('$TMP/fix.json')); b = json.load(open('$TMP/noov.json'))
assert b['time_breakdown_seconds']['dp_comm'] > a['time_breakdown_seconds']['dp_comm']"
"$SB" search --algo megatron -m llama3-70b -p 262144 --machine h100-sxm > "$TMP/big" 2>&1
check "-p 262144 is searched" test $? -eq 0

refused "degrees whose product is not P" "not the 1536 devices" "${M[@]}" -p 1536 --tp 8 --pp 8 --dp 8 --cp 1
refused "TP not dividing the heads" "--tp 5" "${M[@]}" -p 1920 --tp 5
refused "CP not dividing seq" "--cp 3" "${M[@]}" -p 1536 --cp 3
refused "EP without experts" "no experts" "${M[@]}" -p 1536 --ep 2
refused "fp8 on an A100" "no fp8 peak" "${M[@]}" -p 1536 --precision fp8
refused "--microbatches against --micro-batch-size" "disagree" "${M[@]}" -p 1536 --dp 24 --microbatches 4 --micro-batch-size 2
refused "--zero 2" "ZeRO 1" "${M[@]}" -p 1536 --zero 2
# TP overlap: Megatron-LM refuses it without sequence parallelism; userbuffers run in a node
refused "--tp-comm-overlap without sequence parallelism" "needs sequence parallelism" "${M[@]}" -p 1536 \
    --tp 8 --pp 8 --dp 24 --cp 1 --ep 1 --vpp 1 --micro-batch-size 1 --recompute full --zero 1 \
    --sequence-parallel off --tp-comm-overlap
refused "--tp-comm-overlap with TP across nodes" "TP inside a node" "${M[@]}" -p 1536 \
    --tp 16 --pp 4 --dp 24 --cp 1 --ep 1 --vpp 1 --micro-batch-size 1 --recompute full --zero 1 \
    --sequence-parallel on --tp-comm-overlap
refused "-p over 262144" "-p" "${M[@]}" -p 262145
refused "a model that is not a transformer" "param" search --algo megatron -m alexnet -p 8 --machine a100-sxm-80g
refused "no --machine" "--machine" search --algo megatron -m gpt3-175b -p 8
refused "nothing fits" "fits" search --algo megatron -m gpt3-175b -p 8 --machine a100-sxm-80g

# the op-level search prices a GEMM by the GPU op model: one einsum at p = 1 on a
# toy GPU (10 SMs, 100 TFLOP/s bf16, large-GEMM fraction 0.8, 1000 GB/s at 0.5):
# forward, input and weight gradients, each max(2mnk / (peak eff(shape)), bytes / HBM)
printf 'model g\nparam m = 1280\nparam n = 2560\nparam k = 2048\ncutoff 1\ninput x[m=m, k=k]\nweight w[k=k, n=n]\ny = einsum("m k, k n -> m n", x, w)\n' > "$TMP/g.model"
printf 'devices_per_node 8\nnodes 1\ntflops_fp32 10\ntflops_tf32 50\ntflops_bf16 100\nmem_gib 80\nmem_gbs 1000\nintra_gbs 100\nintra_latency_us 0\ninter_gbs 10\ninter_latency_us 0\nprecision bf16\nsms 10\ngemm_eff_large 0.8\nhbm_eff 0.5\nkernel_us 0\nintra_busbw 100\ninter_busbw 10\n' > "$TMP/toy.machine"
"$SB" search -m "$TMP/g.model" -p 1 --machine "$TMP/toy.machine" --db none --format json > "$TMP/g.json"
check "search prices a GEMM by the GPU op model (by hand)" python3 -c "
import json, math; d = json.load(open('$TMP/g.json'))
def g(M, N, K):
    tm, tn = math.ceil(M / 128), math.ceil(N / 256); t = tm * tn; w = math.ceil(t / 10)
    eff = 0.8 * (M * N / (tm * 128 * tn * 256)) * (t / (w * 10)) * min(1, (K / (K + 128)) / (2048 / 2176))
    return max(2 * M * N * K / (100e12 * eff), (M * K + K * N + M * N) * 2 / (1000e9 * 0.5))
want = g(1280, 2560, 2048) + g(1280, 2048, 2560) + g(2048, 2560, 1280)
assert abs(d['predicted_step_seconds'] - want) <= 1e-9 * want, (d['predicted_step_seconds'], want)"

# the op-level search's JSON gives the same throughput fields for a transformer
"$SB" search -m llama3-8b -p 8 --machine h100-sxm --db none --format json > "$TMP/l8.json" 2> /dev/null
check "plain search JSON: tokens/s, TFLOP/s per device and MFU of its predicted step" js "$TMP/l8.json" "
d['precision'] == 'bf16' and abs(d['predicted_tokens_per_second'] * d['predicted_step_seconds'] - 512 * 8192) < 1e-6 * 512 * 8192
and abs(d['predicted_mfu'] - d['predicted_tflops_per_device'] / 989.5) < 1e-12 and 0 < d['predicted_mfu'] < 1"
"$SB" search -m alexnet -p 8 --machine h100-sxm --db none --format json > "$TMP/ax.json" 2> /dev/null
check "plain search JSON: no throughput fields for a model that is not a transformer" js "$TMP/ax.json" "
'predicted_mfu' not in d and 'predicted_step_seconds' in d"

# validate: the shipped runs within the target, and a malformed row
"$SB" validate > "$TMP/val" 2> "$TMP/val.err"
rc=$?
cat "$TMP/val"
check "validate on the published runs: exit 0, within MAPE 7% and 15% ($rc)" test "$rc" -eq 0
check "validate: 18 runs" grep -q "^18 runs: MAPE" "$TMP/val"
"$SB" validate --format json > "$TMP/val.json"
check "validate --format json: 18 runs, the search's best never slower" js "$TMP/val.json" "
len(d['runs']) == 18 and d['search_slower_than_published'] == 0 and d['mape_percent'] <= 7
and all(r['search_best_ratio'] <= 1 for r in d['runs'])"
"$SB" validate --format csv > "$TMP/val.csv"
check "validate --format csv: a header and 18 rows" test "$(wc -l < "$TMP/val.csv")" -eq 19
check "validate: the GEMM rate the runs imply, beside the file's" \
    grep -q "^GEMMs, a100-sxm-80g fp16: the file's 268 TFLOP/s; the published steps imply" "$TMP/val"
check "validate --format csv: implied_gemm_tflops a number on every row" python3 -c "
import csv, sys; rows = list(csv.DictReader(open(sys.argv[1])))
assert len(rows) == 18 and all(float(r['implied_gemm_tflops']) > 0 for r in rows)" "$TMP/val.csv"
# the rate a run implies prices it at its published step (tests/cli/validate_lib.sh):
# here gemm_eff_large also prices the materialized attention's GEMMs
DATA="$SRC/tests/data/published-runs.tsv"
# shellcheck source=tests/cli/validate_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/validate_lib.sh"
validate_implied val "$SRC/machines"
"$SB" validate --target-mape 1 > /dev/null 2> "$TMP/tgt"
check "validate over a target: exit 1 and says so" test $? -eq 1
check "validate over a target: names it" grep -q "over the target" "$TMP/tgt"
DATA="$SRC/tests/data/published-runs.tsv"
awk 'BEGIN{FS=OFS="\t"} /^sc21-3.6b/ {$14 = 3} {print}' "$DATA" > "$TMP/bad-tp.tsv"
refused "a row whose degrees do not multiply to its GPUs" "bad-tp.tsv:" validate --data "$TMP/bad-tp.tsv"
awk 'BEGIN{FS=OFS="\t"} /^sc21-3.6b/ {$28 = 9.99} {print}' "$DATA" > "$TMP/bad-step.tsv"
refused "a row whose step seconds disagree with its source's figure" "disagrees" validate --data "$TMP/bad-step.tsv"
awk 'BEGIN{FS=OFS="\t"} /^sc21-3.6b/ {$3 = "thirty"} {print}' "$DATA" > "$TMP/bad-num.tsv"
refused "a row with a word for a number" "bad-num.tsv:" validate --data "$TMP/bad-num.tsv"
grep -v "^#" "$DATA" | cut -f1-5 > "$TMP/bad-hdr.tsv"
refused "a header missing columns" "no column" validate --data "$TMP/bad-hdr.tsv"
refused "a file that does not exist" "nosuch.tsv" validate --data "$TMP/nosuch.tsv"
# a header naming a column twice, a row wider than the header, a NUL byte (which
# once ended the file there), kv_heads that do not divide the heads
{ grep -v "^#" "$DATA" | head -1 | sed 's/^/tp\t/'; grep "^sc21-3.6b" "$DATA" | sed 's/^/1\t/'; } > "$TMP/bad-dup.tsv"
refused "a header with a column twice" "bad-dup.tsv:1: column 'tp' given twice" validate --data "$TMP/bad-dup.tsv"
{ grep -v "^#" "$DATA" | head -1; grep "^sc21-3.6b" "$DATA" | sed 's/$/\tjunk/'; } > "$TMP/bad-wide.tsv"
refused "a row wider than the header" "bad-wide.tsv:2: .* columns, the header has" validate --data "$TMP/bad-wide.tsv"
{ grep -v "^#" "$DATA" | head -2; printf '\0'; grep -v "^#" "$DATA" | sed -n 3p; } > "$TMP/bad-nul.tsv"
refused "a NUL byte" "bad-nul.tsv: published-runs file holds a NUL byte" validate --data "$TMP/bad-nul.tsv"
awk 'BEGIN{FS=OFS="\t"} NR == 1 {for (i = 1; i <= NF; i++) if ($i == "kv_heads") k = i}
     /^sc21-3.6b/ {$k = 5} {print}' <(grep -v "^#" "$DATA") > "$TMP/bad-kv.tsv"
# an id and a source with a comma and quotes: quoted CSV fields; a control
# character in one refused
awk 'BEGIN{FS=OFS="\t"} /^sc21-3.6b/ {$1 = "run,\"x\""; $2 = "SC21, T1"} {print}' "$DATA" > "$TMP/q.tsv"
"$SB" validate --data "$TMP/q.tsv" --format csv --target-mape 1e6 --target-max 1e6 > "$TMP/q.csv" 2> /dev/null
check "validate --format csv: quoted fields read back" python3 -c "
import csv; rows = list(csv.reader(open('$TMP/q.csv')))
assert all(len(r) == 18 for r in rows) and ['run,\"x\"', 'SC21, T1'] in [r[:2] for r in rows], rows[:3]"
awk 'BEGIN{FS=OFS="\t"} /^sc21-3.6b/ {$1 = "run\033[31m"} {print}' "$DATA" > "$TMP/bad-esc.tsv"
refused "an id with a control character" "bad-esc.tsv:.*: id holds a control character (0x1b)" \
    validate --data "$TMP/bad-esc.tsv"
refused "kv_heads that do not divide the heads" "bad-kv.tsv:3: kv_heads 5 does not divide" validate --data "$TMP/bad-kv.tsv"
# the stage-layout columns (Megatron-Core's flags): even given as 10 + 6 x 10 + 10 prices
# as the row without them; ends that leave the rest uneven, or a word, refused file:line
awk 'BEGIN{FS=OFS="\t"} /^#/ {print; next} $1 == "id" {print $0, "decoder_first_pipeline_num_layers", "decoder_last_pipeline_num_layers"; next}
     $1 == "sc21-145.6b" {print $0, 10, 10; next} {print $0, 0, 0}' "$DATA" > "$TMP/st.tsv"
"$SB" validate --data "$TMP/st.tsv" --format csv > "$TMP/st.csv" 2> /dev/null
"$SB" validate --format csv > "$TMP/st0.csv" 2> /dev/null
check "validate: the stage columns, even ends given, price as without them" python3 -c "
import csv; a = {r['id']: r for r in csv.DictReader(open('$TMP/st.csv'))}
b = {r['id']: r for r in csv.DictReader(open('$TMP/st0.csv'))}
assert a['sc21-145.6b']['predicted_s'] == b['sc21-145.6b']['predicted_s'] and len(a) == 18"
sed 's/^\(sc21-145.6b\t.*\)\t10\t10$/\1\t10\t8/' "$TMP/st.tsv" > "$TMP/bad-st.tsv"
refused "validate: stage columns leaving the rest uneven" "bad-st.tsv:[0-9]*: .*do not split evenly" \
    validate --data "$TMP/bad-st.tsv"
sed 's/^\(sc21-145.6b\t.*\)\t10\t10$/\1\tten\t10/' "$TMP/st.tsv" > "$TMP/bad-st2.tsv"
refused "validate: a stage column's word" "bad-st2.tsv:[0-9]*: decoder_first_pipeline_num_layers" \
    validate --data "$TMP/bad-st2.tsv"
# hf: configs the grid prices (Llama, Mistral, Mixtral) as the model file of the same
# architecture; the ones it cannot price refused, naming the feature
H=(--machine h100-sxm --memory 80GiB --format json -p 64)
SHARDBENCH_HF_QUIET=1 "$SB" search --algo megatron -m "hf:$SRC/tests/data/hf/llama-3.1-8b" "${H[@]}" \
    > "$TMP/hf.json" 2> "$TMP/hf.err"
"$SB" search --algo megatron -m llama3-8b "${H[@]}" > "$TMP/mf.json" 2> /dev/null
check "hf: Llama 3.1 8B priced as llama3-8b.model" python3 -c "
import json; a = json.load(open('$TMP/hf.json')); b = json.load(open('$TMP/mf.json'))
assert a['predicted_step_seconds'] == b['predicted_step_seconds'] and a['megatron'] == b['megatron']"
export SHARDBENCH_HF_QUIET=1
refused "hf: a sliding window under seq" "sliding_window=4096 < seq=8192" \
    search --algo megatron -m "hf:$SRC/tests/data/hf/mistral-7b-v0.1" "${H[@]}"
# a tied head (Llama 3.2 1B) priced as one vocab matrix at PP 1, its untied twin two
mkdir -p "$TMP/l1b-untied"
sed 's/"tie_word_embeddings": true/"tie_word_embeddings": false/' \
    "$SRC/tests/data/hf/llama-3.2-1b/config.json" > "$TMP/l1b-untied/config.json"
L1=(--machine h100-sxm --format json -p 64 --tp 1 --pp 1 --cp 1 --vpp 1 --micro-batch-size 1)
for t in tied untied; do
    [ $t = tied ] && D="$SRC/tests/data/hf/llama-3.2-1b" || D="$TMP/l1b-untied"
    "$SB" search --algo megatron -m "hf:$D" "${L1[@]}" > "$TMP/l1b-$t.json"
    check "hf: Llama 3.2 1B, $t head: priced" test $? -eq 0
done
check "hf: an untied head's vocab matrix: 2 bytes of weights, 4 of fp32 gradients" python3 -c "
import json; a = json.load(open('$TMP/l1b-tied.json')); b = json.load(open('$TMP/l1b-untied.json'))
V = 128256 * 2048; ma = a['memory_bytes_per_device']; mb = b['memory_bytes_per_device']
assert mb['weights'] - ma['weights'] == 2 * V and mb['gradients'] - ma['gradients'] == 4 * V, (ma, mb)
assert a['time_breakdown_seconds']['compute'] == b['time_breakdown_seconds']['compute']"
refused "hf: DeepSeek-V3" "prices Llama, Mistral, Mixtral and Qwen 2, 3 (dense and MoE) configs only" \
    search --algo megatron -m "hf:$SRC/tests/data/hf/deepseek-v3" "${H[@]}"
# Qwen2 (QKV biases), Qwen3 (QK norms, head_dim 128 beside hidden 1024 / 16 heads) and
# Qwen3-MoE (128 experts of 768, top 8): the grid's weights at TP 1, PP 1 are 2 bytes
# a parameter of the count refcount.py gives (tests/data/hf/expected.tsv), short of the
# final norm alone; Qwen2-MoE's shared experts refused
for q in qwen2-0.5b qwen3-0.6b qwen3-30b-a3b; do
    "$SB" search --algo megatron -m "hf:$SRC/tests/data/hf/$q" --machine h100-sxm --format json -p 8 \
        --tp 1 --pp 1 --dp 8 --cp 1 --ep 1 --vpp 1 --micro-batch-size 1 --recompute none \
        --sequence-parallel off --zero 0 > "$TMP/$q.json" 2> /dev/null
    check "hf: $q priced, its weights its parameters" python3 -c "
import json, sys
d = json.load(open('$TMP/$q.json')); want = None
for line in open('$SRC/tests/data/hf/expected.tsv'):
    f = line.split('\t')
    if f[0] == '$q': want = int(f[1])
h = json.load(open('$SRC/tests/data/hf/$q/config.json'))['hidden_size']
got = d['memory_bytes_per_device']['weights'] / 2
assert want and 0 <= want - got <= h, (got, want)"
done
refused "hf: Qwen2-MoE's shared experts" "does not price (norms, MLP, caps, shared" \
    search --algo megatron -m "hf:$SRC/tests/data/hf/qwen1.5-moe-a2.7b" "${H[@]}"
mkdir -p "$TMP/q3dense"
python3 -c "import json, sys; d = json.load(open(sys.argv[1])); d['mlp_only_layers'] = [0, 1, 2, 3]
json.dump(d, open(sys.argv[2], 'w'))" "$SRC/tests/data/hf/qwen3-30b-a3b/config.json" "$TMP/q3dense/config.json"
refused "hf: Qwen3-MoE with dense layers (mlp_only_layers)" "dense layers among the experts'" \
    search --algo megatron -m "hf:$TMP/q3dense" "${H[@]}"
# --save of an hf: model (layers x, x.1, ...: numbered 0 up) cuts where it priced: 8 + 8 of
# Llama 3.2 1B's 16 layers, stage 1 from x.8; an MoE save keeps its router whole (TP,
# EP, CP 1), and a given EP is refused naming the router
"$SB" search --algo megatron -m "hf:$SRC/tests/data/hf/llama-3.2-1b" --machine h100-sxm -p 8 --tp 1 \
    --pp 2 --vpp 1 --first-stage-layers 8 --last-stage-layers 8 --save "$TMP/l1b.strategy" > /dev/null 2>&1
check "--save of an hf: model: stage 1 starts at its ninth layer (x.8)" grep -q '^stage 1 4 x\.8/' "$TMP/l1b.strategy"
refused "--save of an MoE configuration at EP 2" "(moe_gate) splits its group alone" \
    search --algo megatron -m mixtral-8x7b --set batch=8 -p 16 --machine h100-sxm --tp 1 --pp 2 --dp 8 --cp 1 --ep 2 \
    --vpp 1 --micro-batch-size 1 --recompute full --sequence-parallel off --zero 1 --save "$TMP/mx2.strategy"
# a validate row naming Qwen3-30B-A3B (its sizes "-"): priced with what no column gives
# (128 experts of 768, head_dim 128, QK norms), as search prices the same configuration
DG="$SRC/tests/data/published-runs-h100-dgxc.tsv"
Q3="hf:$SRC/tests/data/hf/qwen3-30b-a3b"
{ grep -v '^#' "$DG" | head -1 | sed 's/$/\tmodel/'
  grep '^dgxc-llama31-8b-bf16-8' "$DG" | awk -v P="$Q3" 'BEGIN{FS=OFS="\t"} {for (i = 3; i <= 8; i++) $i = "-"; $NF = "-"; print $0, P}'
} > "$TMP/vq.tsv"
"$SB" validate --data "$TMP/vq.tsv" --format json > "$TMP/vq.json" 2> /dev/null
"$SB" search --algo megatron -m "$Q3" --set seq=8192 --set batch=128 -p 8 --machine h100-sxm \
    --tp 1 --pp 1 --dp 4 --cp 2 --ep 1 --vpp 1 --micro-batch-size 1 --recompute none \
    --sequence-parallel off --zero 1 --grad-reduce-dtype fp32 --format json > "$TMP/sq.json" 2> /dev/null
check "validate: a Qwen3-MoE row priced as search prices it" python3 -c "
import json; a = json.load(open('$TMP/vq.json'))['runs'][0]; b = json.load(open('$TMP/sq.json'))
assert a['predicted_step_seconds'] == b['predicted_step_seconds'], (a['predicted_step_seconds'], b['predicted_step_seconds'])"
# validate rows naming their model (the optional model column, hf:PATH): the sizes
# given as "-" read from the config, the same prices; a size that disagrees refused
DG="$SRC/tests/data/published-runs-h100-dgxc.tsv"
HF8="hf:$SRC/tests/data/hf/llama-3.1-8b"
{ grep -v '^#' "$DG" | head -1; grep '^dgxc-llama31-8b' "$DG"; } > "$TMP/v0.tsv"
{ grep -v '^#' "$DG" | head -1 | sed 's/$/\tmodel/'
  grep '^dgxc-llama31-8b' "$DG" | awk -v P="$HF8" 'BEGIN{FS=OFS="\t"} {$3 = "-"; $4 = "-"; print $0, P}'
} > "$TMP/vm.tsv"
"$SB" validate --data "$TMP/v0.tsv" --format csv > "$TMP/v0.csv" 2> /dev/null
"$SB" validate --data "$TMP/vm.tsv" --format csv > "$TMP/vm.csv" 2> "$TMP/vm.err"
check "validate: rows naming hf: Llama 3.1 8B priced as its sizes" cmp -s "$TMP/v0.csv" "$TMP/vm.csv"
check "validate: ... 10 runs" test "$(grep -c '^dgxc' "$TMP/vm.csv")" -eq 10
{ grep -v '^#' "$DG" | head -1 | sed 's/$/\tmodel/'
  grep '^dgxc-llama31-8b-bf16-8' "$DG" | awk -v P="$HF8" 'BEGIN{FS=OFS="\t"} {$6 = 16; print $0, P}'
} > "$TMP/vk.tsv"
refused "validate: a row's kv_heads not its model's" "vk.tsv:2: kv_heads 16, but" validate --data "$TMP/vk.tsv"
# the head's tie: a row's column against its model's config, and its values
{ grep -v '^#' "$DG" | head -1 | sed 's/$/\tmodel/'
  grep '^dgxc-llama31-8b-bf16-8' "$DG" | awk -v P="$HF8" 'BEGIN{FS=OFS="\t"} {$NF = 0; print $0, P}'
} > "$TMP/vt.tsv"
refused "validate: a row's tie not its model's" \
    "vt.tsv:2: untie_embeddings_and_output_weights 0, but .*untied (1)" validate --data "$TMP/vt.tsv"
awk 'BEGIN{FS=OFS="\t"} /^dgxc-llama31-8b-bf16-8/ {$NF = "yes"} {print}' "$DG" > "$TMP/vu.tsv"
refused "validate: untie_embeddings_and_output_weights not 0, 1 or -" \
    "vu.tsv:[0-9]*: untie_embeddings_and_output_weights 'yes' is not 0, 1 or -" \
    validate --data "$TMP/vu.tsv"
unset SHARDBENCH_HF_QUIET

# --overlap-param-gather (Megatron-LM's flag): off exposes the distributed optimizer's
# parameter all-gather (the gradients' reduction stays hidden), on is the default
PG=(search --algo megatron -m llama3-70b --set seq=8192 --set batch=256 -p 128 --machine h100-sxm
    --tp 4 --pp 4 --dp 4 --cp 2 --vpp 5 --micro-batch-size 1 --recompute none
    --sequence-parallel on --zero 1 --format json)
for v in def on off; do
    a=(); [ "$v" = def ] || a=(--overlap-param-gather "$v")
    "$SB" "${PG[@]}" "${a[@]}" > "$TMP/pg-$v.json" 2> "$TMP/pg-$v.err"
done
check "--overlap-param-gather off: more dp_comm, on: the default's" python3 -c "
import json; d, n, f = (json.load(open('$TMP/pg-%s.json' % v)) for v in ('def', 'on', 'off'))
b = lambda x: x['time_breakdown_seconds']['dp_comm']
assert b(n) == b(d) and b(f) > b(d) + 0.01, (b(d), b(n), b(f))
assert d['megatron']['param_gather_overlap'] and not f['megatron']['param_gather_overlap']"
check "compute by kind: GEMMs, attention, memory-bound add up to compute" python3 -c "
import json; d = json.load(open('$TMP/pg-def.json')); k = d['compute_breakdown_seconds']
c = d['time_breakdown_seconds']['compute']
assert abs(k['gemm'] + k['attention'] + k['memory_bound'] - c) < 1e-9 * c, (k, c)
assert k['gemm'] > k['attention'] > k['memory_bound'] > 0, k"
"$SB" "${PG[@]/json/table}" > "$TMP/pg.txt" 2> /dev/null
check "the table says compute by kind" grep -qE '^compute by kind \(s\): GEMMs [0-9.]+, attention [0-9.]+, memory-bound [0-9.]+$' "$TMP/pg.txt"
refused "--overlap-param-gather on without the distributed optimizer" \
    "needs the distributed optimizer (--zero 1) and --dp-overlap on" "${PG[@]}" --zero 0 --overlap-param-gather on
refused "--overlap-param-gather on without --dp-overlap" "Megatron-LM asserts both" \
    "${PG[@]}" --dp-overlap off --overlap-param-gather on
refused "--overlap-param-gather maybe" "overlap-param-gather" "${PG[@]}" --overlap-param-gather maybe
# the grid with --overlap-param-gather on keeps the distributed optimizer on: half the configurations
G=(search --algo megatron -m llama3-70b --set seq=8192 --set batch=256 -p 128 --machine h100-sxm --format json)
"$SB" "${G[@]}" > "$TMP/g-def.json" 2> /dev/null
"$SB" "${G[@]}" --overlap-param-gather on > "$TMP/g-on.json" 2> /dev/null
check "the grid with --overlap-param-gather on: the distributed optimizer alone, half the configurations" python3 -c "
import json; d, o = (json.load(open('$TMP/g-%s.json' % v)) for v in ('def', 'on'))
assert o['megatron']['distributed_optimizer'] and o['megatron']['param_gather_overlap']
assert 2 * o['configurations_priced'] == d['configurations_priced'], (o['configurations_priced'], d['configurations_priced'])"
# validate's optional column: 0 prices the row slower, 1 as the default; a bad value or
# one Megatron asserts against: exit 2 naming file:line
R=dgxc-llama31-70b-bf16-128
pgrow() { # pgrow VALUE [sed expression for the row]
    { grep -v '^#' "$DG" | head -1 | sed 's/$/\tparam_gather_overlap/'
      grep "^$R	" "$DG" | sed "${2:-s/^/&/}" | sed "s/\$/\t$1/"; } > "$TMP/pg-$1.tsv"
}
for v in - 0 1; do
    pgrow "$v"
    "$SB" validate --data "$TMP/pg-$v.tsv" --format json --target-mape 1e6 --target-max 1e6 \
        > "$TMP/pgv-$v.json" 2> /dev/null
done
check "validate JSON: each run's compute by kind adds up to its compute" python3 -c "
import json; r = json.load(open('$TMP/pgv--.json'))['runs'][0]
k, c = r['predicted_compute_breakdown_seconds'], r['predicted_breakdown_seconds']['compute']
assert abs(sum(k.values()) - c) < 1e-9 * c and min(k.values()) > 0, (k, c)"
check "validate param_gather_overlap: 0 slower, 1 as '-'" python3 -c "
import json; s = lambda v: json.load(open('$TMP/pgv-%s.json' % v))['runs'][0]['predicted_step_seconds']
assert s('1') == s('-') and s('0') > s('-'), (s('-'), s('0'), s('1'))"
pgrow x
refused "validate param_gather_overlap x" "pg-x.tsv:2: param_gather_overlap 'x'" validate --data "$TMP/pg-x.tsv"
pgrow 1 's/\t1\t1\t1\tfused/\t1\t0\t1\tfused/'
refused "validate param_gather_overlap 1 without the distributed optimizer" \
    "pg-1.tsv:2:.*needs the distributed optimizer" validate --data "$TMP/pg-1.tsv"
# --save: the grid keeps to what a strategy file holds (EP dividing DP: Mixtral's
# 8 experts on 8 GPUs once took DP 4 x CP 2 x EP 8 and then failed to write; an MoE
# model's router at TP, EP, CP 1 in one micro-batch, as the runtime runs it), and
# the file's cost is the op level's unit, the step x the machine's F x 1e12. On 16
# GPUs, a batch of 16: on 8 no configuration fits (46.7 B parameters at 18 bytes with
# Adam, 105 GB a GPU however sharded; the experts' optimizer state shards over DP x CP
# / EP only)
refused "Mixtral 8x7B on 8 H100s: its weights, gradients and Adam state do not fit" \
    "none of the .* valid configurations on 8 devices fits" \
    search --algo megatron -m mixtral-8x7b -p 8 --machine h100-sxm --vpp 1
MX=(search --algo megatron -m mixtral-8x7b --set batch=16 -p 16 --machine h100-sxm --vpp 1)
"$SB" "${MX[@]}" --save "$TMP/mx.strategy" --format json --db none > "$TMP/mx.json" 2> "$TMP/err"
check "--save of an MoE grid answer: exit 0" test $? -eq 0
check "--save: an MoE answer at TP, EP, CP 1 in one micro-batch" js "$TMP/mx.json" "
d['megatron']['tp'] == d['megatron']['ep'] == d['megatron']['cp'] == 1 and d['megatron']['microbatches'] == 1"
refused "--save of an MoE configuration in 2 micro-batches" "runs in one micro-batch" \
    search --algo megatron -m mixtral-8x7b --set batch=16 -p 16 --machine h100-sxm --tp 1 --pp 8 \
    --dp 2 --cp 1 --ep 1 --vpp 1 --micro-batch-size 4 --recompute full --sequence-parallel off \
    --zero 1 --save "$TMP/mx3.strategy"
refused "--save of an encoder-decoder's grid answer at PP 2 (12 runs of layer ops, 6 layers priced)" \
    "no cut into 2 stages matches its price" search --algo megatron -m transformer -p 64 \
    --machine h100-sxm --pp 2 --vpp 1 --save "$TMP/tr.strategy"
# ... and the grid under --save, PP free, keeps such a model to one stage and says so
"$SB" search --algo megatron -m transformer -p 64 --machine h100-sxm --save "$TMP/tr1.strategy" \
    --format json > "$TMP/tr1.json" 2> "$TMP/tr1.err"
check "--save of an encoder-decoder, PP free: one stage, said" python3 -c "
import json; d = json.load(open('$TMP/tr1.json')); assert d['megatron']['pp'] == 1, d['megatron']
assert 'kept to one pipeline stage' in open('$TMP/tr1.err').read()"
refused "fused attention on 20-dim heads, the rest searched" "a head of 20 dims" \
    search --algo megatron -m llama3-8b --set embed=640 --set heads=32 -p 8 --machine h100-sxm
# F as the cost model takes it: the bf16 peak times eff_gemm (1 when the file has none)
F=$(awk '$1 == "tflops_bf16" {p = $2} $1 == "eff_gemm" {e = $2} END {print p * (e ? e : 1)}' \
    "$SRC/machines/h100-sxm.machine")
check "--save: the file's cost is the step x F x 1e12" python3 -c "
import json; d = json.load(open('$TMP/mx.json'))
c = [float(l.split()[1]) for l in open('$TMP/mx.strategy') if l.startswith('cost ')][0]
want = d['predicted_step_seconds'] * $F * 1e12
assert abs(c - want) <= 1e-9 * want, (c, want)"
# MoE with EP (Megatron-Core): the dense parts and the optimizer's bytes a device
# (E/EP experts' state over DP x CP / EP ranks) do not change with EP; at EP = DP x CP
# the experts' gradients stay on their rank (dp_comm the dense ones' alone); TP
# without sequence parallelism refused (Megatron-LM asserts it)
MOE=(search --algo megatron -m mixtral-8x7b -p 64 --machine h100-sxm --tp 2 --pp 4 --dp 8 --cp 1
     --vpp 1 --micro-batch-size 1 --recompute selective --zero 1 --format json)
"$SB" "${MOE[@]}" --ep 1 --sequence-parallel on > "$TMP/ep1.json" 2>/dev/null
"$SB" "${MOE[@]}" --ep 8 --sequence-parallel on > "$TMP/ep8.json" 2>/dev/null
check "MoE: EP leaves compute, activations and the optimizer's bytes as they are" python3 -c "
import json; a = json.load(open('$TMP/ep1.json')); b = json.load(open('$TMP/ep8.json'))
ma, mb = a['memory_bytes_per_device'], b['memory_bytes_per_device']
assert a['time_breakdown_seconds']['compute'] == b['time_breakdown_seconds']['compute']
assert ma['activations'] == mb['activations'] and abs(ma['optimizer'] - mb['optimizer']) <= 2
assert mb['weights'] < ma['weights'] and b['time_breakdown_seconds']['dp_comm'] < 0.01 * a['time_breakdown_seconds']['dp_comm']"
refused "MoE at TP 2 without sequence parallelism" "needs sequence parallelism" "${MOE[@]}" --ep 8 \
    --sequence-parallel off
refused "MoE at a fixed TP 4 without sequence parallelism, the rest searched" \
    "an MoE model at --tp 4 needs sequence parallelism" \
    search --algo megatron -m mixtral-8x7b -p 64 --machine h100-sxm --tp 4 --sequence-parallel off
refused "sequence parallelism over a TP that does not divide the sequence" \
    "sequence parallelism splits a rank's 1024 tokens.*--tp 6" \
    search --algo megatron -m gpt2 --set batch=32 -p 96 --machine a100-sxm-80g --tp 6 --pp 1 \
    --dp 16 --cp 1 --ep 1 --vpp 1 --micro-batch-size 1 --recompute none --sequence-parallel on \
    --zero 0 --attention materialized
# uneven stages (Megatron-Core's --decoder-first/last-pipeline-num-layers): Llama 3.1
# 405B's 126 layers on 16 stages as 7 + 14 x 8 + 7; refused without them, and where
# the rest does not split; the grid balances the ends (405B on 131,072 GPUs: PP 32
# at V 2, which even stages cannot hold, 126 = 4 + 30 x 4 + 2)
U=(search --algo megatron -m llama3.1-405b -p 16384 --machine h100-sxm --tp 8 --pp 16 --dp 128
   --cp 1 --ep 1 --vpp 1 --micro-batch-size 1 --recompute none --sequence-parallel on --zero 1)
"$SB" "${U[@]}" --first-stage-layers 7 --last-stage-layers 7 --format json > "$TMP/u.json"
check "--first/--last-stage-layers 7: 7 + 14 x 8 + 7, every layer once" js "$TMP/u.json" "
d['megatron']['first_stage_layers'] == 7 and d['megatron']['last_stage_layers'] == 7
and [s['layers'] for s in d['stage_details']] == [7] + [8] * 14 + [7]
and [s['first_layer'] for s in d['stage_details']] == [1] + [8 + 8 * i for i in range(15)]
and d['stage_details'][-1]['last_layer'] == 126"
refused "--pp 16 of 126 layers without the ends' layers" "does not divide the 126 layers: give" "${U[@]}"
refused "ends that leave layers not splitting evenly" "do not split evenly over the other 14" \
    "${U[@]}" --first-stage-layers 7 --last-stage-layers 9
refused "ends that leave no layers to the middle" "leave none of the 126 layers to the other 14" \
    "${U[@]}" --first-stage-layers 100 --last-stage-layers 26
refused "ends at --pp 1" "need --pp of at least 2" search --algo megatron -m llama3-8b -p 16 \
    --machine h100-sxm --pp 1 --first-stage-layers 4
"$SB" search --algo megatron -m llama3.1-405b -p 131072 --machine h100-sxm --format json > "$TMP/u2.json"
check "the grid: 405B on 131,072 GPUs, uneven ends under interleaving" python3 -c "
import json; d = json.load(open('$TMP/u2.json')); m = d['megatron']; s = d['stage_details']
assert sum(x['layers'] for x in s) == 126 and m['vpp'] > 1 and 126 % (m['pp'] * m['vpp']), m
assert (m['first_stage_layers'], m['last_stage_layers']) == (s[0]['layers'], s[-1]['layers'])
assert m['first_stage_layers'] != s[1]['layers'] or m['last_stage_layers'] != s[1]['layers']"
# the full space without --memory is held to no limit: an answer over the device
# says so on stderr (the grid's, 171 GiB here, and the op level's); with it, none
FS=(search -m llama3-8b --set layers=2 -p 8 --machine h100-sxm --space full --db none)
"$SB" "${FS[@]}" > /dev/null 2> "$TMP/fs.err"
check "full space, no --memory: an answer over the device's memory warned" \
    grep -q "over the device's 79.65 GiB: without --memory" "$TMP/fs.err"
"$SB" "${FS[@]}" --megatron-grid off > /dev/null 2> "$TMP/fs.err"
check "full space, no --memory, the op level's answer: warned" grep -q "over the device's" "$TMP/fs.err"
"$SB" "${FS[@]}" --memory 79.65GiB > /dev/null 2> "$TMP/fs.err"
check "full space, --memory: no warning" test "$(grep -c "over the device's" "$TMP/fs.err")" -eq 0
echo "megatron_cli: $fails failure(s)"
exit $((fails > 0))
