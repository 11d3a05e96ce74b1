#!/usr/bin/env bash
# tests/cli/gpu_model_plan.sh: perf/gpu_model --plan, the side of the GPU op
# model that needs no GPU (perf/README.md): the GEMMs of the published H100
# runs' layers, each priced as docs/megatron.md writes the op model. Every
# printed row is recomputed here from its M, N, K and the machine file's
# figures (tflops_bf16 and gemm_eff_large, fp8 rows tflops_fp8 and
# gemm_eff_large_fp8; sms, mem_gbs, hbm_eff, kernel_us;
# 128 x 256 tiles, waves over the SMs, the K term, the larger of math and
# memory time); the shapes of two layers and a head are checked
# against the sizes validate uses; bad options exit 2 naming the value.
#   usage: gpu_model_plan.sh PERF_GPU_MODEL SOURCE_DIR
set -u
BIN=$1 SRC=$2
TMP=$(mktemp -d "${TMPDIR:-/tmp}/sb-gpu-model.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
SB=$BIN
# shellcheck source=tests/cli/check_lib.sh
. "$SRC/tests/cli/check_lib.sh"

for m in h100-sxm a100-sxm-80g; do
    "$BIN" --plan --machine "$SRC/machines/$m.machine" > "$TMP/$m.txt" 2> "$TMP/$m.err"
    check "$m: --plan exits 0" test $? -eq 0
    rows=$(grep -c -E '^(llama|gpt3)' "$TMP/$m.txt")
    check "$m: prints the runs' GEMMs ($rows rows, at least 40)" test "$rows" -ge 40
    # the op model, recomputed: time = 2MNK / (peak eff) + kernel, eff = gemm_eff tile wave k
    awk -v mf="$SRC/machines/$m.machine" '
        BEGIN { while ((getline l < mf) > 0) { split(l, w, " "); f[w[1]] = w[2] } }
        function ceil(x) { return x == int(x) ? x : int(x) + 1 }
        /^(llama|gpt3)/ {
            p = $(NF-8); M = $(NF-7); N = $(NF-6); K = $(NF-5); got = $(NF-4)
            peak = p == "fp8" ? f["tflops_fp8"] : f["tflops_bf16"]
            eff = p == "fp8" ? f["gemm_eff_large_fp8"] : f["gemm_eff_large"]
            tm = ceil(M / 128); tn = ceil(N / 256)
            tile = M * N / (tm * 128 * tn * 256); tiles = tm * tn
            wave = tiles / (ceil(tiles / f["sms"]) * f["sms"])
            k = (K / (K + 128)) / (2048 / 2176); if (k > 1) k = 1
            math = 2 * M * N * K / (peak * 1e12 * eff * tile * wave * k)
            mem = (M * K + K * N + M * N) * 2 / (f["mem_gbs"] * 1e9 * f["hbm_eff"])
            want = ((math > mem ? math : mem) + f["kernel_us"] * 1e-6) * 1e3
            n++; if (got < want * 0.999 || got > want * 1.001) { bad++; print "row " n ": " got " ms, the formula gives " want > "/dev/stderr" }
        }
        END { exit (n > 0 && bad == 0) ? 0 : 1 }' "$TMP/$m.txt"
    check "$m: every row's model_ms is the op model's formula" test $? -eq 0
done
# the shapes are the layers validate prices: Llama 3.1 70B at TP 4, CP 2 (4096
# tokens of a micro-batch; QKV (8192 + 2 x 1024) / 4 = 2560), GPT-3 175B at TP 4
t=$TMP/h100-sxm.txt
check "70B qkv fprop is 4096 x 2560 x 8192" grep -qE '^llama3.1-70b tp4 cp2 qkv fprop +bf16 +4096 +2560 +8192 ' "$t"
check "70B fc2 wgrad is 7168 x 8192 x 4096" grep -qE '^llama3.1-70b tp4 cp2 fc2 wgrad +bf16 +7168 +8192 +4096 ' "$t"
check "GPT-3 fc1 fprop is 2048 x 12288 x 12288" grep -qE '^gpt3-175b tp4 fc1 fprop +bf16 +2048 +12288 +12288 ' "$t"
check "the 8B logits GEMM is 4096 x 128256 x 4096" grep -qE '^llama3.1-8b tp1 cp2 logits fprop +bf16 +4096 +128256 +4096 ' "$t"
check "the 8B logits dgrad is 4096 x 4096 x 128256" grep -qE '^llama3.1-8b tp1 cp2 logits dgrad +bf16 +4096 +4096 +128256 ' "$t"
check "fp8 rows where the machine has an fp8 peak (h100-sxm)" grep -qE '^llama3.1-70b tp4 cp2 fc1 fprop +fp8 +4096 +14336 +8192 ' "$t"
check "no fp8 logits (the head stays bf16)" bash -c "! grep -qE 'logits [a-z]+ +fp8' '$t'"
check "no fp8 rows without an fp8 peak (a100-sxm-80g)" bash -c "! grep -qE ' fp8 ' '$TMP/a100-sxm-80g.txt'"
check "nothing measured under --plan" grep -qE '^llama3.1-8b tp1 cp2 qkv fprop .* - +- +-$' "$t"

# refused (check_lib.sh) runs $SB, here perf/gpu_model
refused "--seconds 0" "'0' is not a number of seconds" --plan --seconds 0
refused "--soak x" "'x' is not a number of seconds" --plan --soak x
refused "unknown machine" "unknown machine 'no-such-gpu'" --plan --machine no-such-gpu
refused "unknown option" "unknown or incomplete option '--bogus'" --plan --bogus
grep -v -E '^(sms|gemm_eff_large)' "$SRC/machines/h100-sxm.machine" > "$TMP/no-op-model.machine"
refused "a machine file without the op model's figures" "no GPU op model figures" --plan --machine "$TMP/no-op-model.machine"
# measuring needs a GPU: without one, exit 77 and say so (on a GPU machine
# tests/gpu/run.sh runs the measurement itself)
if command -v nvidia-smi > /dev/null && nvidia-smi -L 2> /dev/null | grep -q GPU; then
    echo "note: a GPU is here: the no-GPU exit is not checked (tests/gpu/run.sh measures)"
else
    "$BIN" --db none --seconds 0.05 --soak 0 > "$TMP/out" 2> "$TMP/err"
    rc=$?
    check "no GPU: exit 77 ($rc)" test "$rc" -eq 77
    check "no GPU: says so" grep -q "no GPU" "$TMP/err"
fi
exit $((fails > 0))
