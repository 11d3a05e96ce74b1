#!/usr/bin/env bash
# tests/cli/gpu_attention.sh: perf/gpu_attention without a GPU (perf/README.md).
# --plan: every row's model times recomputed here from the machine file (the
# attention curves interpolated in log2 of the sequence length, the tiles' waves
# over the SMs against the measurement's 2,048, or on a machine
# without them the GEMM model's tiles, waves and K term; the larger of math and
# memory; the kernel overhead). The measuring path against a stand-in peer (a
# script given as --python that answers the protocol with times of a known
# rate): the table, the results database, the fragment (which loads as a
# machine file and is read by validate); a peer that fails, exits 77, answers
# a point not asked for, or reports faster than the peak. Bad options exit 2.
#   usage: gpu_attention.sh PERF_GPU_ATTENTION SOURCE_DIR SHARDBENCH
set -u
BIN=$1 SRC=$2 SBCLI=$3
TMP=$(mktemp -d "${TMPDIR:-/tmp}/sb-gpu-attn.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
SB=$BIN
# shellcheck source=tests/cli/check_lib.sh
. "$SRC/tests/cli/check_lib.sh"

recompute() { # recompute MACHINE TABLE: every row's model ms by the op model's formula
    awk -v mf="$1" '
        BEGIN { while ((getline l < mf) > 0) { sub(/#.*/, "", l); split(l, w, " "); f[w[1]] = w[2] } }
        function ceil(x) { return x == int(x) ? x : int(x) + 1 }
        function curve(spec, x,   n, i, pt, xs, ys, r) {
            n = split(spec, pt, ","); for (i = 1; i <= n; i++) { split(pt[i], r, ":"); xs[i] = r[1]; ys[i] = r[2] }
            if (x <= xs[1]) return ys[1]
            for (i = 2; i <= n; i++) if (x <= xs[i]) return ys[i-1] + log(x / xs[i-1]) / log(xs[i] / xs[i-1]) * (ys[i] - ys[i-1])
            return ys[n] }
        function product(bh, M, N, K, spec,   fl, math, tm, tn, tiles, eff, mem) {
            fl = 2 * bh * M * N * K
            if (spec != "") { # the curve; its tiles of 128 queries in waves against the 2048 measured
                tiles = bh * ceil(M / 128)
                wv = (tiles / (ceil(tiles / f["sms"]) * f["sms"])) / (2048 / (ceil(2048 / f["sms"]) * f["sms"]))
                math = fl / (curve(spec, M) * 1e12 * wv) }
            else {
                tm = ceil(M / 128); tn = ceil(N / 256); tiles = tm * tn * bh
                eff = f["gemm_eff_large"] * (M * N / (tm * 128 * tn * 256)) * tiles / (ceil(tiles / f["sms"]) * f["sms"])
                eff *= (K / (K + 128)) / (2048 / 2176) > 1 ? 1 : (K / (K + 128)) / (2048 / 2176)
                math = fl / (f["tflops_bf16"] * 1e12 * eff) }
            mem = bh * (2 * M * K + N * K) * 2 / (f["mem_gbs"] * 1e9 * f["hbm_eff"])
            return (math > mem ? math : mem) + f["kernel_us"] * 1e-6 }
        /^[0-9]/ {
            s = $1; bh = $2 * 16; keys = $3 == "causal" ? s / 2 : s
            wf = 2 * product(bh, s, keys, 128, f["attn_fwd_tflops"]) * 1e3
            wb = 5 * product(bh, s, keys, 128, f["attn_bwd_tflops"]) * 1e3
            n++
            if ($4 < wf * 0.999 || $4 > wf * 1.001 || $8 < wb * 0.999 || $8 > wb * 1.001) {
                bad++; print "row " n ": " $4 " and " $8 " ms, the formula gives " wf " and " wb > "/dev/stderr" } }
        END { exit (n == 12 && bad == 0) ? 0 : 1 }' "$2"
}

for m in h100-sxm a100-sxm-80g; do
    "$BIN" --plan --machine "$SRC/machines/$m.machine" > "$TMP/$m.txt" 2> "$TMP/$m.err"
    check "$m: --plan exits 0" test $? -eq 0
    check "$m: every row's model time is the op model's formula" recompute "$SRC/machines/$m.machine" "$TMP/$m.txt"
done
check "the points: 512 x 32 to 16384 x 1, causal and not" \
    bash -c "grep -qE '^512 +32 +causal ' '$TMP/h100-sxm.txt' && grep -qE '^16384 +1 +none ' '$TMP/h100-sxm.txt'"
check "nothing measured under --plan" grep -qE '^8192 +2 +causal +[0-9.]+ +- ' "$TMP/h100-sxm.txt"
# h100-sxm's curves priced: the causal 8192 row's forward near its 529 TFLOP/s point
check "h100-sxm: the causal forward at 8192 near the file's 529 TFLOP/s" \
    awk '/^8192 +2 +causal/ { exit !($6 > 500 && $6 <= 529) }' "$TMP/h100-sxm.txt"

# a stand-in peer: answers every point at RATE TFLOP/s (FlashAttention's count), or misbehaves
cat > "$TMP/peer" <<'EOF'
#!/usr/bin/env python3
import json, os, sys
mode, rate = os.environ.get("PEER_MODE", "ok"), float(os.environ.get("PEER_RATE", "400"))
if mode == "nogpu":
    print(json.dumps({"error": "no GPU: a stand-in"})); sys.exit(77)
pts = sys.argv[sys.argv.index("--points") + 1].split(",")
print(json.dumps({"ready": True, "device": "Stand-in GPU", "torch": "0.0", "cudnn": 1}))
if mode == "junk":
    print("a library's chatter")
if mode == "errexit0":
    print(json.dumps({"error": "something went wrong, yet exit 0"}))
for i, p in enumerate(pts):
    causal = p.endswith("c"); s, b = map(int, p.rstrip("c").split("x"))
    if mode == "fail" and i == 3:
        print(json.dumps({"error": "seq %d: out of memory" % s})); sys.exit(1)
    if mode == "short" and i == 3:
        continue
    if mode == "extra" and i == 0:
        s += 1
    fl = 4.0 * b * 16 * s * s * 128 * (0.5 if causal else 1.0)
    r = rate * (1.2 if not causal else 1.0)
    f, bw = fl / (r * 1e12), 2.5 * fl / (0.9 * r * 1e12)
    if mode == "bwdfast":
        bw /= 10
    line = json.dumps({"seq": s, "batch": b, "heads": 8 if mode == "heads" else 16, "dim": 128,
                       "causal": int(causal), "fwd_s": f, "fwd_min": f, "fwd_max": f, "bwd_s": bw,
                       "bwd_min": bw, "bwd_max": bw, "batches": 3})
    print(line)
    if mode == "dup" and i == 0:
        print(line)
EOF
chmod +x "$TMP/peer"
M="$SRC/machines/h100-sxm.machine"
PEER_RATE=400 "$BIN" --machine "$M" --python "$TMP/peer" --seconds 0.05 --db "$TMP/r.db" \
    --fragment "$TMP/frag.machine" > "$TMP/ok.txt" 2> "$TMP/ok.err"
check "a peer's measurements: exit 0 ($?)" test $? -eq 0
check "the measured columns filled (400 and 480 TFLOP/s forward)" \
    bash -c "grep -qE '^8192 +2 +causal .* 400\.0 ' '$TMP/ok.txt' && grep -qE '^8192 +2 +none .* 480\.0 ' '$TMP/ok.txt'"
check "the fragment: causal rates, the backward's 0.9 of the forward" \
    grep -qx 'attn_fwd_tflops 512:400,1024:400,2048:400,4096:400,8192:400,16384:400' "$TMP/frag.machine"
check "the fragment's backward line" \
    grep -qx 'attn_bwd_tflops 512:360,1024:360,2048:360,4096:360,8192:360,16384:360' "$TMP/frag.machine"
check "the fragment names the device and the unmasked figures" \
    bash -c "grep -q 'on Stand-in GPU' '$TMP/frag.machine' && grep -q '^# without the mask: forward 512:480' '$TMP/frag.machine'"
cat > "$TMP/db.py" <<'EOF'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
rows = c.execute("select s.kind, s.configs_json, m.step_median_s, m.predicted_s, m.status "
                 "from measurements m join strategies s on m.strategy_id = s.id "
                 "where s.kind in ('attn-fwd', 'attn-bwd')").fetchall()
assert len(rows) == 24, len(rows)
if sys.argv[2] == "ok":
    want = 4.0 * 2 * 16 * 8192 * 8192 * 128 * 0.5 / 400e12
    got = [r for r in rows if r[0] == "attn-fwd" and '"seq":8192' in r[1] and '"causal":1' in r[1]]
    assert len(got) == 1 and abs(got[0][2] - want) < 1e-12 * want and got[0][3] != got[0][2], got
assert all(r[4] == sys.argv[2] for r in rows), [r[4] for r in rows]
EOF
check "24 figures stored (attn-fwd and attn-bwd a point), the stand-in's times" python3 "$TMP/db.py" "$TMP/r.db" ok
# the fragment, comments and all, in place of the shipped curves: a machine file validate reads
mkdir -p "$TMP/m"
{ grep -v '^attn_[fb]wd_tflops' "$M"; cat "$TMP/frag.machine"; } > "$TMP/m/h100-sxm.machine"
SHARDBENCH_MACHINES="$TMP/m" "$SBCLI" validate --data "$SRC/tests/data/published-runs-h100-dgxc.tsv" \
    --target-mape 1e6 --target-max 1e6 > "$TMP/v.txt" 2> "$TMP/v.err"
check "the fragment's lines load in a machine file: validate runs with them ($?)" grep -q '^38 runs' "$TMP/v.txt"

PEER_MODE=nogpu "$BIN" --machine "$M" --python "$TMP/peer" --db none > /dev/null 2> "$TMP/e"
check "a peer with nothing to measure: exit 77 ($?)" test $? -eq 77
check "... and why" grep -q 'nothing measured: no GPU: a stand-in' "$TMP/e"
PEER_MODE=fail "$BIN" --machine "$M" --python "$TMP/peer" --db none --fragment "$TMP/f2" > "$TMP/o" 2> "$TMP/e"
check "a peer that fails: exit 1 ($?)" test $? -eq 1
check "... naming the point, no fragment" bash -c "grep -q 'out of memory' '$TMP/e' && [ ! -e '$TMP/f2' ]"
check "... the points measured before it printed" grep -qE '^2048 +8 +causal .* 400\.0 ' "$TMP/o"
for mode in errexit0 junk short dup heads; do
    PEER_MODE=$mode "$BIN" --machine "$M" --python "$TMP/peer" --db none --fragment "$TMP/f-$mode" \
        > /dev/null 2> "$TMP/e-$mode"
    check "a peer that misbehaves ($mode): exit 1 ($?), no fragment" \
        bash -c "[ $? -eq 1 ] && [ ! -e '$TMP/f-$mode' ]"
done
check "... an error line read though the peer exits 0" grep -q 'yet exit 0' "$TMP/e-errexit0"
check "... a line that is not JSON named" grep -q "not JSON: a library's chatter" "$TMP/e-junk"
check "... 11 of 12 points" grep -q '11 of 12 points' "$TMP/e-short"
PEER_MODE=bwdfast "$BIN" --machine "$M" --python "$TMP/peer" --db "$TMP/bf.db" --fragment "$TMP/f4" > /dev/null 2> "$TMP/e"
check "a backward faster than the bf16 peak alone: exit 1 ($?), no fragment" bash -c "[ $? -eq 1 ] && [ ! -e '$TMP/f4' ]"
check "... stored as errors" python3 "$TMP/db.py" "$TMP/bf.db" error
PEER_MODE=extra "$BIN" --machine "$M" --python "$TMP/peer" --db none > /dev/null 2> "$TMP/e"
check "a point not asked for: exit 1 ($?)" test $? -eq 1
check "... says so" grep -q 'a point it was not asked for' "$TMP/e"
PEER_RATE=5000 "$BIN" --machine "$M" --python "$TMP/peer" --db none --fragment "$TMP/f3" > /dev/null 2> "$TMP/e"
check "faster than the bf16 peak: exit 1 ($?), no fragment" bash -c "[ $? -eq 1 ] && [ ! -e '$TMP/f3' ]"
check "... not a measurement" grep -q 'not a measurement' "$TMP/e"
# the real peer: where python3 has PyTorch with a GPU it measures (exit 0); elsewhere
# (CI, this project's build machines) nothing can be measured: exit 77
want=77
python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2> /dev/null && want=0
"$BIN" --machine "$M" --db none --seconds 0.05 > /dev/null 2> "$TMP/e"
check "the real peer: exit $want ($?)" test $? -eq "$want"

refused "--seconds 0" "'0' is not a number of seconds" --plan --seconds 0
refused "--seconds x" "'x' is not a number of seconds" --plan --seconds x
refused "an unknown option" "unknown or incomplete option '--fast'" --plan --fast
refused "an unknown machine" "unknown machine 'nosuch'" --plan --machine nosuch
grep -vE '^(sms|gemm_eff_large|hbm_eff|attn_)' "$M" > "$TMP/plain.machine"
refused "a machine without the op model" "has no GPU op model figures" --plan --machine "$TMP/plain.machine"
echo "gpu_attention: $fails failure(s)"
exit $((fails > 0))
