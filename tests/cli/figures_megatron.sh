#!/usr/bin/env bash
# tests/cli/figures_megatron.sh SHARDBENCH SOURCE_DIR: the figures of a
# Megatron search's JSON (`search --algo megatron --plot DIR`, `plot
# --search`): memory per stage against the device, the step by cause, the
# interleaved 1F1B schedule, Megatron's layouts; its stage_details against
# the pricer's own figures; the interleaved schedule simulated on equal
# chunks against (M VPP + PP - 1)(f + b); an older JSON without
# stage_details; a field missing named. SVGs read back by
# tests/cli/svg_series.py (series, order, no colour repeated).
set -euo pipefail

SB=${1:?usage: figures_megatron.sh SHARDBENCH SOURCE_DIR}
SRC=${2:?usage: figures_megatron.sh SHARDBENCH SOURCE_DIR}
T=$(mktemp -d "${TMPDIR:-/tmp}/sb-figmt-test-XXXXXX")
trap 'rm -rf "$T"' EXIT
export SHARDBENCH_MODELS=${SHARDBENCH_MODELS:-$SRC/models}
export SHARDBENCH_PLOTS=${SHARDBENCH_PLOTS:-$SRC/plots}
CHECK="python3 $SRC/tests/cli/svg_series.py"
fail() { echo "FAIL: $*" >&2; exit 1; }
both() { for ext in png svg; do [ -s "$1.$ext" ] || fail "no $1.$ext"; done; }
MEM=(weights gradients 'optimizer state' activations buffers)
CAUSES=(compute 'tensor-parallel comm (exposed)' 'data-parallel comm (exposed)'
        'pipeline comm (exposed)' bubble optimizer)

# ---- a configuration given: 2 stages x 2 chunks, 16 micro-batches ---------------------
MT=(search -m transformer -p 8 --set layers=4 --machine h100-sxm --algo megatron --memory 80GiB
    --tp 2 --pp 2 --dp 2 --cp 1 --ep 1 --micro-batch-size 2 --recompute none --zero 1
    --sequence-parallel on)
"$SB" "${MT[@]}" --vpp 2 --format json --plot "$T/f" >"$T/mt.json" 2>"$T/f.err" ||
    fail "search --algo megatron --plot: $(cat "$T/f.err")"
grep -q "^4 figures (8 files) in $T/f, " "$T/f.err" || fail "megatron --plot: no count: $(cat "$T/f.err")"
for f in memory steptime schedule configs; do both "$T/f/$f-transformer-p8"; done
# stage_details as the pricer prices it: the fullest stage's memory is the JSON's
# memory per device, the last stage's seconds per micro-batch the step's compute, TP and PP
# communication over the micro-batches; chunks add up to their stage
python3 - "$T/mt.json" <<'PY' || fail "megatron stage_details disagree with its pricer"
import json, sys
j = json.load(open(sys.argv[1]))
d, M, tb = j["stage_details"], j["microbatches"], j["time_breakdown_seconds"]
assert len(d) == 2 and M == 16 and j["schedule"] == "interleaved-1f1b", (len(d), M, j["schedule"])
assert j["device_memory_bytes"] == 80 * 2**30, j["device_memory_bytes"]
keys = ("weights", "gradients", "optimizer", "activations", "buffers")
tot = [sum(x["memory_bytes"][k] for k in keys) for x in d]
pk = tot.index(max(tot))  # the last here: its fp32 logits
assert pk == len(d) - 1, tot
for k in keys:
    a, b = d[pk]["memory_bytes"][k], j["memory_bytes_per_device"][k]
    assert abs(a - b) <= 1e-6 * b + 1, (k, a, b)
last = d[-1]["forward_seconds"] + d[-1]["backward_seconds"]
want = (tb["compute"] + tb["tp_comm"] + tb["pp_comm"]) / M
assert abs(last - want) <= 1e-9 * want, (last, want)
for x in d:
    assert len(x["chunks"]) == 2 and x["layers"] == 2, x
    f = sum(c["forward_seconds"] for c in x["chunks"])
    assert abs(f - x["forward_seconds"]) <= 1e-9 * f, (f, x)
    assert 0 < x["forward_seconds"] < x["backward_seconds"], x
# chunk k of stage s holds layer k PP + s + 1 (1 layer a chunk here)
assert [c["first_layer"] for c in d[1]["chunks"]] == [2, 4], d[1]["chunks"]
PY
$CHECK "$T/f/memory-transformer-p8.svg" "${MEM[@]}" --also 'device memory 80' || fail "megatron memory figure"
grep -q "megatron's priced memory per device" "$T/f/memory-transformer-p8.svg" ||
    fail "megatron memory figure: the pricer's figure not beside"
$CHECK "$T/f/steptime-transformer-p8.svg" "${CAUSES[@]}" forward backward \
    'idle (bubble, DP reduction, optimizer)' || fail "megatron step-time figure"
$CHECK "$T/f/schedule-transformer-p8.svg" forward backward idle || fail "megatron schedule figure"
grep -q "interleaved 1F1B, 2 stages x 2 chunks x 16 micro-batches" "$T/f/schedule-transformer-p8.svg" ||
    fail "megatron schedule: not interleaved"
grep -q "pipeline [0-9.e-]* s as scheduled + DP reduction and optimizer" "$T/f/schedule-transformer-p8.svg" ||
    fail "megatron schedule: the step's parts not in the title"
$CHECK "$T/f/configs-transformer-p8.svg" split || fail "megatron configs figure"
for r in "layers 1 … 4 / qkv (column-parallel)" "layers 1 … 4 / mlp down (row-parallel)" \
    "layers 1 … 4 / norms, dropouts (sequence-parallel)" "logits, loss (vocab-parallel)"; do
    grep -qF ">$r<" "$T/f/configs-transformer-p8.svg" || fail "megatron layouts: no row $r"
done
# the JSON alone (plot --search) draws the same four; without interleaving, 1F1B
"$SB" "${MT[@]}" --vpp 1 --format json >"$T/mt1.json"
"$SB" plot --search "$T/mt1.json" --out "$T/f1" >"$T/f1.out" || fail "plot --search of megatron, vpp 1"
grep -q "1F1B, 2 stages x 16 micro-batches" "$T/f1/schedule-transformer-p8.svg" || fail "megatron vpp 1: not 1F1B"

# ---- the interleaved schedule by hand: PP stages x VPP chunks of forward 1 s,
# backward 2 s: every rank busy M VPP (1 + 2) s and idle (PP - 1)(1 + 2) s
# (Narayanan et al. 2021: the bubble (PP - 1)/VPP of a whole stage's
# micro-batch); rank r's warm-up Megatron-LM's 2 (PP - r - 1) + (VPP - 1) PP
# (VPP = 1: PP - r - 1). Case: PP VPP M step idle% warm-up(0) warm-up(PP-1)
for case in "2 2 4 27 11 4 2" "4 2 8 57 16 10 4" "4 3 8 81 11 14 8" "2 1 4 15 20 1 0"; do
    set -- $case
    python3 - "$T/hand.json" "$1" "$2" "$3" <<'PY'
import json, sys
pp, vpp, M = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
mem = {"weights": 1, "gradients": 1, "optimizer": 0, "activations": 2, "buffers": 1}
st = [{"stage": s, "forward_seconds": 1.0 * vpp, "backward_seconds": 2.0 * vpp,
       "chunks": [{"forward_seconds": 1.0, "backward_seconds": 2.0} for k in range(vpp)],
       "memory_bytes": mem} for s in range(pp)]
json.dump({"model": "hand", "p": pp, "algo": "megatron", "params": {"layers": pp * vpp},
           "megatron": {"tp": 1, "pp": pp, "dp": 1, "cp": 1, "ep": 1, "vpp": vpp,
                        "sequence_parallel": False},
           "microbatches": M, "predicted_step_seconds": 30.0, "device_memory_bytes": 2**30,
           "time_breakdown_seconds": {"compute": 24, "tp_comm": 0, "dp_comm": 0.5, "pp_comm": 0,
                                      "bubble": 3, "optimizer": 0.25},
           "stage_details": st}, open(sys.argv[1], "w"))
PY
    rm -rf "$T/h"
    "$SB" plot --search "$T/hand.json" --out "$T/h" >/dev/null || fail "plot --search, hand $case"
    g=$T/h/schedule-hand-p$1.svg
    grep -q "pipeline $4 s as scheduled + DP reduction and optimizer 0.75 s = $(awk "BEGIN { print $4 + 0.75 }") s" "$g" ||
        fail "pp $1 vpp $2 M $3: not $4 s: $(grep -o 'pipeline [^<]*' "$g")"
    grep -q "stage 0: idle $5%, warm-up $6<" "$g" && grep -q "stage $(($1 - 1)): idle $5%, warm-up $7<" "$g" ||
        fail "pp $1 vpp $2 M $3: not idle $5%, warm-up $6 and $7: $(grep -o 'stage [0-9]*: idle [^<]*' "$g")"
done

# ---- an older megatron JSON (no stage_details): the fullest stage's memory as the
# JSON gives it, the step by cause, the schedule skipped and said so
python3 -c "
import json; j = json.load(open('$T/mt.json')); del j['stage_details']; json.dump(j, open('$T/old.json', 'w'))"
"$SB" plot --search "$T/old.json" --out "$T/o" >"$T/o.out" || fail "plot --search of an older megatron JSON"
grep -q "schedule-transformer-p8: .* has no stage_details .*: skipped" "$T/o.out" || fail "no word on the schedule"
[ ! -e "$T/o/schedule-transformer-p8.svg" ] || fail "a schedule drawn without stage_details"
grep -q "the fullest stage's memory_bytes_per_device only" "$T/o/memory-transformer-p8.svg" ||
    fail "the one-bar memory figure is not labelled"
$CHECK "$T/o/memory-transformer-p8.svg" "${MEM[@]}" --also 'device memory 80' || fail "older JSON: memory figure"
$CHECK "$T/o/steptime-transformer-p8.svg" "${CAUSES[@]}" || fail "older JSON: step-time figure"
both "$T/o/configs-transformer-p8"
# a chunk's seconds missing: named, exit 2
python3 -c "
import json; j = json.load(open('$T/mt.json')); del j['stage_details'][1]['chunks'][1]['backward_seconds']
json.dump(j, open('$T/bad.json', 'w'))"
rc=0; "$SB" plot --search "$T/bad.json" --out "$T/b" >/dev/null 2>"$T/err" || rc=$?
[ "$rc" -eq 2 ] && grep -q 'stage_details\[1\].chunks\[1\].backward_seconds' "$T/err" ||
    fail "a missing chunk field not named: $rc $(cat "$T/err")"
echo "figures_megatron: ok"
