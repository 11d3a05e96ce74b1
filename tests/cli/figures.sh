#!/usr/bin/env bash
# tests/cli/figures.sh SHARDBENCH SOURCE_DIR: every figure kind rendered and
# read back (tests/cli/svg_series.py): gnuplot's exit, PNG and SVG both, the
# expected series in the legend's fixed order, no colour repeated within a
# figure, the y = x line and the +-10% band of the fidelity figure, its
# MAPE; from a small database made here with sqlite3 (one run of the
# Transformer, 12 strategy kinds at p = 2, two at p = 1, predicted seconds
# known). Also the report's strategy table in the paper's Table II form:
# an op repeated over layers one row. Then the figures of a full-space
# search's JSON (`search --plot`, `plot --search`: memory, step time,
# schedule, configs), its stage_details against the search's own stage
# figures, a missing field named, and the scaling figure over searches
# (megatron's among them). Last, validate's figure of published runs.
set -euo pipefail

SB=${1:?usage: figures.sh SHARDBENCH SOURCE_DIR}
SRC=${2:?usage: figures.sh SHARDBENCH SOURCE_DIR}
T=$(mktemp -d "${TMPDIR:-/tmp}/sb-figures-test-XXXXXX")
trap 'rm -rf "$T"' EXIT
export SHARDBENCH_MODELS=${SHARDBENCH_MODELS:-$SRC/models}
export SHARDBENCH_PLOTS=${SHARDBENCH_PLOTS:-$SRC/plots}
CHECK="python3 $SRC/tests/cli/svg_series.py"
DB=$T/t.db
fail() { echo "FAIL: $*" >&2; exit 1; }
q() { sqlite3 -batch -noheader "$DB" "$1"; }
both() { # both files of a figure, non-empty
    for ext in png svg; do [ -s "$1.$ext" ] || fail "no $1.$ext"; done
}

# ---- a database: the schema from a search, then one run by hand ----------------------
"$SB" search -m transformer -p 2 --db "$DB" --format json >"$T/tr.json"
model=$(q "SELECT id FROM models WHERE name = 'transformer';")
q "INSERT INTO runs (id, host, git_commit, backend) VALUES (1, 'h', 'abc', 'cpu');"
# kind predicted-s median-s, in an order unlike the legend's
KINDS="rand5 0.30 0.36
rand4 0.28 0.27
rand3 0.26 0.30
rand2 0.24 0.22
rand1 0.22 0.25
cand3 0.20 0.19
cand2 0.18 0.20
cand1 0.16 0.17
pase 0.12 0.13
mcmc 0.15 0.14
expert 0.14 0.16
dp 0.10 0.11"
sid=0
while read -r kind pred med; do
    sid=$((sid + 1))
    q "INSERT INTO strategies (id, model_id, p, kind, predicted_cost, configs_json)
       VALUES ($sid, $model, 2, '$kind', ${pred}e9, CAST(readfile('$T/tr.json') AS TEXT));
       INSERT INTO measurements (run_id, strategy_id, step_median_s, step_min_s, step_max_s,
                                 steps, status, predicted_s)
       VALUES (1, $sid, $med, $med, $med, 3, 'ok', $pred);"
done <<<"$KINDS"
for kind in dp pase; do
    sid=$((sid + 1))
    q "INSERT INTO strategies (id, model_id, p, kind, predicted_cost, configs_json)
       VALUES ($sid, $model, 1, '$kind', 2e8, '{\"ops\":[]}');
       INSERT INTO measurements (run_id, strategy_id, step_median_s, step_min_s, step_max_s,
                                 steps, status, predicted_s)
       VALUES (1, $sid, 0.2, 0.2, 0.2, 3, 'ok', 0.2);"
done
ORDER=(dp expert mcmc pase cand1 cand2 cand3 rand1 rand2 rand3 rand4 rand5)

# ---- the run's figures ---------------------------------------------------------------
"$SB" plot --db "$DB" --run 1 --out "$T/figs" >"$T/plot.out" || { cat "$T/plot.out"; fail plot; }
F=$T/figs
for f in speedup-transformer fidelity-transformer-p2 trend-transformer-p2 fidelity-transformer-p1; do both "$F/$f"; done
$CHECK "$F/fidelity-transformer-p2.svg" "${ORDER[@]}" --also 'y = x' '±10%' baselines candidates random ||
    fail "fidelity figure"
# MAPE of the points above, as the title must say it
mape=$(awk '{ d = ($2 - $3) / $3; s += d < 0 ? -d : d } END { printf "%.1f%%", 100 * s / NR }' <<<"$KINDS")
grep -q "MAPE = $mape (n = 12)" "$F/fidelity-transformer-p2.svg" || fail "fidelity title lacks MAPE = $mape"
grep -q "Spearman ρ = " "$F/fidelity-transformer-p2.svg" || fail "fidelity title lacks rho"
$CHECK "$F/speedup-transformer.svg" "${ORDER[@]}" || fail "speedup figure"
$CHECK "$F/trend-transformer-p2.svg" "${ORDER[@]}" || fail "trend figure"
# the same kind keeps its colour from figure to figure
c1=$(grep -A12 '<title>rand2</title>' "$F/speedup-transformer.svg" | grep -o "rgb([^)]*)" | sed -n 1p)
c2=$(grep -A12 '<title>rand2</title>' "$F/fidelity-transformer-p2.svg" | grep -o "rgb([^)]*)" | sed -n 1p)
[ -n "$c1" ] && [ "$c1" = "$c2" ] || fail "rand2 in $c1 in speedup, $c2 in fidelity"

# the reference model predicts no seconds: no fidelity figure, said so
q "UPDATE measurements SET predicted_s = NULL;"
"$SB" plot --db "$DB" --run 1 --out "$T/figs2" >"$T/plot2.out" || fail "plot without predicted seconds"
grep -q "fidelity-transformer-p2: no strategy has predicted seconds" "$T/plot2.out" ||
    fail "no word on the missing fidelity figure: $(cat "$T/plot2.out")"
[ ! -e "$T/figs2/fidelity-transformer-p2.svg" ] || fail "a fidelity figure without predicted seconds"

# ---- the report's Table II form ---------------------------------------------------------
# dp (the fastest at p = 2) has the search's strategy: 204 ops, 6 + 6 layers
"$SB" report --db "$DB" --run 1 --table strategies >"$T/t2.md"
grep -qF "| transformer | 2 | dp (0.1100 s) | x.1 … x.6 / a / qkv | einsum |" "$T/t2.md" ||
    fail "Table II lacks the row x.1 … x.6 / a / qkv: $(grep qkv "$T/t2.md")"
grep -qF "| y.1 … y.6 / c / o / logits |" "$T/t2.md" || fail "Table II lacks y.1 … y.6 / c / o / logits"
rows=$(grep -c "^| transformer | 2 | dp " "$T/t2.md")
[ "$rows" -lt 60 ] || fail "Table II has $rows rows for 204 ops: layers not grouped"
grep -q "x\.2/a/qkv" "$T/t2.md" && fail "Table II lists layer 2's qkv on its own"
# layer 4's qkv split otherwise: three rows, layers 1-3, 4, 5-6
python3 - "$T/tr.json" "$T/tr4.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
for op in j["ops"]:
    if op["name"] == "x.4/a/qkv":
        op["config"] = [1] * (len(op["config"]) - 1) + [2]
json.dump(j, open(sys.argv[2], "w"))
PY
q "UPDATE strategies SET configs_json = CAST(readfile('$T/tr4.json') AS TEXT) WHERE kind = 'dp' AND p = 2;"
"$SB" report --db "$DB" --run 1 --table strategies >"$T/t2b.md"
for r in "x.1 … x.3 / a / qkv" "x.4/a/qkv" "x.5 … x.6 / a / qkv"; do
    grep -qF "| $r |" "$T/t2b.md" || fail "Table II lacks the row $r: $(grep qkv "$T/t2b.md")"
done

# ---- one search's figures ---------------------------------------------------------------
SJ=$T/s8.json
"$SB" search -m transformer -p 8 --set layers=2 --space full --stages 2 --microbatches 4 \
    --format json --db none --plot "$T/sf" >"$SJ" 2>"$T/sf.err" || { cat "$T/sf.err"; fail "search --plot"; }
for f in memory steptime schedule configs; do both "$T/sf/$f-transformer-p8"; done
grep -q "^4 figures (8 files) in $T/sf, " "$T/sf.err" || fail "search --plot: no count: $(cat "$T/sf.err")"
# stage_details: the memory parts sum to each stage's peak, forward + backward
# to its time per micro-batch (in seconds at F)
python3 - "$SJ" <<'PY' || fail "stage_details disagree with the search's stages"
import json, sys
j = json.load(open(sys.argv[1]))
d, st, F = j["stage_details"], j["stages"], j["flops_tflops"] * 1e12
assert len(d) == len(st) == 2, (len(d), len(st))
assert j["device_memory_bytes"] == 80 * 2**30, j["device_memory_bytes"]
for x, s in zip(d, st):
    mem = sum(x["memory_bytes"][k] for k in ("weights", "gradients", "optimizer", "activations", "buffers"))
    assert abs(mem - s["peak_bytes"]) <= 1e-6 * s["peak_bytes"], (mem, s["peak_bytes"])
    t = x["forward_seconds"] + x["backward_seconds"]
    assert abs(t - s["time_per_microbatch"] / F) <= 1e-9 * t, (t, s["time_per_microbatch"] / F)
    assert 0 < x["forward_seconds"] < x["backward_seconds"], x
    assert x["first_op"] == s["ops"][0] and x["last_op"] == s["ops"][-1], (x, s["ops"])
PY
$CHECK "$T/sf/memory-transformer-p8.svg" weights gradients 'optimizer state' activations buffers \
    --also 'device memory 80' || fail "memory figure"
$CHECK "$T/sf/steptime-transformer-p8.svg" forward backward 'idle (bubble)' || fail "step-time figure"
# no time_breakdown_seconds in the op-level JSON: the title says what is drawn instead
grep -q "no time_breakdown_seconds in the JSON: not the step by cause" "$T/sf/steptime-transformer-p8.svg" ||
    fail "the step-time figure's title does not say the breakdown by cause is missing"
$CHECK "$T/sf/schedule-transformer-p8.svg" forward backward idle || fail "schedule figure"
$CHECK "$T/sf/configs-transformer-p8.svg" split || fail "configs figure"
grep -qF "x.1 … x.2 / a / qkv" "$T/sf/configs-transformer-p8.svg" || fail "configs figure lacks the row x.1 … x.2 / a / qkv"
# with the whole step's breakdown (issue 36's key): its six causes first
python3 - "$SJ" "$T/s8b.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
j["time_breakdown_seconds"] = {"compute": 0.05, "tp_comm": 0.01, "dp_comm": 0.01,
                               "pp_comm": 0.005, "bubble": 0.03, "optimizer": 0.002}
json.dump(j, open(sys.argv[2], "w"))
PY
"$SB" plot --search "$T/s8b.json" --out "$T/sf2" >"$T/sf2.out" || fail "plot --search"
$CHECK "$T/sf2/steptime-transformer-p8.svg" compute 'tensor-parallel comm (exposed)' \
    'data-parallel comm (exposed)' 'pipeline comm (exposed)' bubble optimizer forward backward \
    'idle (bubble)' || fail "step-time figure with the breakdown"
grep -q "left: the step by cause" "$T/sf2/steptime-transformer-p8.svg" &&
    ! grep -q "no time_breakdown_seconds" "$T/sf2/steptime-transformer-p8.svg" ||
    fail "the step-time figure with time_breakdown_seconds: its title"
# many micro-batches: the schedule in slices of the step
"$SB" search -m transformer -p 8 --set layers=2 --set batch=256 --space full --stages 2 --microbatches 128 \
    --format json --db none >"$T/s128.json"
"$SB" plot --search "$T/s128.json" --out "$T/sf3" >/dev/null || fail "plot --search, M = 128"
grep -q "the share of each slice of the step" "$T/sf3/schedule-transformer-p8.svg" ||
    fail "the schedule of 128 micro-batches is not in slices"
$CHECK "$T/sf3/schedule-transformer-p8.svg" forward backward idle || fail "schedule figure, M = 128"
# the schedule by hand: 4 equal stages (forward 1 s, backward 2 s), 8
# micro-batches: both schedules take (M + S - 1)(f + b) = 33 s, stage 0
# busy 24 of them (idle 27%)
for sched in gpipe 1f1b; do
    python3 - "$T/hand-$sched.json" "$sched" <<'PY'
import json, sys
st = [{"stage": s, "devices": 1, "first_op": "a", "last_op": "a", "forward_seconds": 1.0,
       "backward_seconds": 2.0, "memory_bytes": {"weights": 1, "gradients": 1, "optimizer": 0,
       "activations": 2, "buffers": 1}} for s in range(4)]
ops = [{"name": "a", "type": "dense", "dims": [{"name": "batch", "size": 8}], "config": [1]}]
json.dump({"model": "hand", "p": 4, "microbatches": 8, "schedule": sys.argv[2],
           "predicted_step_seconds": 33.0, "device_memory_bytes": 2**30, "stage_details": st,
           "ops": ops}, open(sys.argv[1], "w"))
PY
    "$SB" plot --search "$T/hand-$sched.json" --out "$T/hand-$sched" >/dev/null || fail "plot --search $sched"
    grep -q "one step 33 s as scheduled (cost model 33 s)" "$T/hand-$sched/schedule-hand-p4.svg" ||
        fail "$sched: the step is not 33 s: $(grep -o 'one step [^(]*' "$T/hand-$sched/schedule-hand-p4.svg")"
    grep -q "stage 0: idle 27%" "$T/hand-$sched/schedule-hand-p4.svg" || fail "$sched: stage 0 not idle 27%"
    grep -q "stage 3: idle 27%" "$T/hand-$sched/schedule-hand-p4.svg" || fail "$sched: stage 3 not idle 27%"
done
# a field missing: named, exit 2, no figure
python3 -c "
import json, sys; j = json.load(open('$SJ')); del j['stage_details']; json.dump(j, open('$T/nod.json', 'w'))"
rc=0; "$SB" plot --search "$T/nod.json" --out "$T/sf4" >/dev/null 2>"$T/err" || rc=$?
[ "$rc" -eq 2 ] || fail "plot --search without stage_details: exit $rc"
grep -q 'no "stage_details": the memory figure needs it' "$T/err" || fail "unclear: $(cat "$T/err")"
ls "$T/sf4"/*.png >/dev/null 2>&1 && fail "a figure drawn without stage_details"
python3 -c "
import json, sys; j = json.load(open('$SJ')); del j['stage_details'][1]['memory_bytes']['buffers']; json.dump(j, open('$T/nob.json', 'w'))"
rc=0; "$SB" plot --search "$T/nob.json" --out "$T/sf5" >/dev/null 2>"$T/err" || rc=$?
[ "$rc" -eq 2 ] && grep -q 'stage_details\[1\].memory_bytes.buffers' "$T/err" ||
    fail "a missing memory part not named: $rc $(cat "$T/err")"
rc=0; "$SB" search -m transformer -p 8 --space plain --db none --plot "$T/sf6" >/dev/null 2>"$T/err" || rc=$?
[ "$rc" -eq 2 ] && grep -q "plot of a plain strategy needs --machine" "$T/err" ||
    fail "search --plot plain without a machine: $rc"
# a plain strategy on a GPU machine: one stage of every op on all P devices,
# its memory parts, the step by cause and one micro-batch (search --plot, and
# plot --search of its JSON)
"$SB" search -m transformer -p 8 --set layers=2 --machine h100-sxm --format json --db none \
    --plot "$T/sf7" >"$T/plain.json" 2>"$T/sf7.err" || fail "search --plot plain: $(cat "$T/sf7.err")"
for f in memory steptime schedule configs; do both "$T/sf7/$f-transformer-p8"; done
python3 - "$T/plain.json" <<'PY' || fail "the plain strategy's stage_details"
import json, sys
j = json.load(open(sys.argv[1]))
d = j["stage_details"]
assert len(d) == 1 and d[0]["devices"] == 8 and j["microbatches"] == 1, d
step = d[0]["forward_seconds"] + d[0]["backward_seconds"]
assert abs(step / j["predicted_step_seconds"] - 1) < 1e-9, (step, j["predicted_step_seconds"])
assert abs(sum(j["time_breakdown_seconds"].values()) / j["predicted_step_seconds"] - 1) < 1e-9
m = d[0]["memory_bytes"]
assert abs(sum(m.values()) / j["peak_bytes_per_device"] - 1) < 1e-9, (m, j["peak_bytes_per_device"])
PY
"$SB" plot --search "$T/plain.json" --out "$T/sf8" >/dev/null 2>"$T/err" || fail "plot --search plain: $(cat "$T/err")"
$CHECK "$T/sf8/memory-transformer-p8.svg" weights gradients 'optimizer state' activations buffers ||
    fail "plain memory figure"

# ---- scaling over searches of one model ------------------------------------------------
for p in 2 4 8; do
    "$SB" search -m transformer -p $p --set layers=2 --machine h100-sxm --memory 80GiB \
        --format json --db none >"$T/full-$p.json" 2>/dev/null
    # (a plain search's JSON on a machine says its device memory: the same 80 GiB)
    "$SB" search -m transformer -p $p --set layers=2 --machine h100-sxm --algo dp --format json \
        --device-mem 80 --db none >"$T/dp-$p.json" 2>/dev/null
done
"$SB" plot --scaling --out "$T/sc" "$T"/full-*.json "$T"/dp-*.json >"$T/sc.out" || fail "plot --scaling"
both "$T/sc/scaling-transformer"
# the searches carry predicted_mfu (issue 36): the MFU of each on the right axis
$CHECK "$T/sc/scaling-transformer.svg" dp pase-full --also 'pase-full MFU' || fail "scaling figure, MFU"
# without it (an older search's JSON): tokens/s alone, and a word saying so
for p in 2 4 8; do
    python3 -c "
import json; j = json.load(open('$T/full-$p.json')); j.pop('predicted_mfu', None)
json.dump(j, open('$T/nomfu-$p.json', 'w'))"
done
"$SB" plot --scaling --out "$T/scn" "$T"/nomfu-*.json >"$T/scn.out" || fail "plot --scaling, no MFU"
$CHECK "$T/scn/scaling-transformer.svg" pase-full || fail "scaling figure without MFU"
grep -q "no predicted_mfu in these searches" "$T/scn.out" || fail "scaling: no word on the missing MFU"
rc=0; "$SB" plot --scaling --out "$T/sc2" "$T/full-2.json" "$T/full-2.json" >/dev/null 2>"$T/err" || rc=$?
[ "$rc" -eq 2 ] && grep -q "both pase-full at p = 2" "$T/err" || fail "a point given twice: $rc"
"$SB" search -m alexnet -p 2 --machine h100-sxm --format json --db none >"$T/alex.json" 2>/dev/null
rc=0; "$SB" plot --scaling --out "$T/sc3" "$T/full-2.json" "$T/alex.json" >/dev/null 2>"$T/err" || rc=$?
[ "$rc" -eq 2 ] && grep -q "the scaling figure is of one model" "$T/err" || fail "two models: $rc"

# megatron's searches (search --algo megatron) beside them: a series of their own,
# named by the JSON's algo
for p in 2 4 8; do
    "$SB" search -m transformer -p $p --set layers=2 --machine h100-sxm --algo megatron --memory 80GiB \
        --format json --db none >"$T/mt-$p.json"
done
"$SB" plot --scaling --out "$T/scm" "$T"/full-*.json "$T"/dp-*.json "$T"/mt-*.json >"$T/scm.out" ||
    fail "plot --scaling with megatron"
$CHECK "$T/scm/scaling-transformer.svg" dp megatron pase-full --also 'megatron MFU' ||
    fail "scaling figure with megatron"
grep -q "megatron at p = 8: tp [0-9]* pp [0-9]* dp [0-9]*" "$T/scm.out" ||
    fail "scaling: megatron's degrees not said: $(cat "$T/scm.out")"
python3 -c "
import json; j = json.load(open('$T/mt-4.json')); j['algo'] = 'megatron-x'
json.dump(j, open('$T/mtx-4.json', 'w'))"
"$SB" plot --scaling --out "$T/scx" "$T/mt-2.json" "$T/mtx-4.json" >/dev/null || fail "plot --scaling, algo renamed"
$CHECK "$T/scx/scaling-transformer.svg" megatron megatron-x || fail "the series is not the JSON's algo"

# ---- the cost model against published runs (validate --format json) ----------------
"$SB" validate --data "$SRC/tests/data/published-runs.tsv" --format json >"$T/v.json" ||
    fail "validate --format json"
"$SB" plot --validate "$T/v.json" --out "$T/vf" >"$T/vf.out" || fail "plot --validate"
both "$T/vf/validate"
$CHECK "$T/vf/validate.svg" K22_Table_5 SC21_Table_1 --also 'y = x' '±15%' || fail "validate figure"
# every run labelled, MAPE and max error as validate computed them
for id in $(python3 -c "import json; print(*[r['id'] for r in json.load(open('$T/v.json'))['runs']])"); do
    grep -q ">$id<" "$T/vf/validate.svg" || fail "validate figure: no label $id"
done
t=$(python3 -c "import json; j = json.load(open('$T/v.json'))
print('MAPE = %.1f%%, max error = %.1f%% (n = %d)' % (j['mape_percent'], j['max_error_percent'], len(j['runs'])))")
grep -qF "$t" "$T/vf/validate.svg" || fail "validate figure's title lacks: $t"
# validate-gemm: the GEMM rate each run implies, a colour per machine and precision,
# the machine file's rate a line, every run an x tic
both "$T/vf/validate-gemm"
$CHECK "$T/vf/validate-gemm.svg" "a100-sxm-80g_fp16 (implied)" --also "a100-sxm-80g_fp16 (machine file)" ||
    fail "validate-gemm figure"
for id in $(python3 -c "import json; print(*[r['id'] for r in json.load(open('$T/v.json'))['runs']])"); do
    grep -q ">$id<" "$T/vf/validate-gemm.svg" || fail "validate-gemm figure: no tic $id"
done
grep -qF "implies (n = 18)" "$T/vf/validate-gemm.svg" || fail "validate-gemm: the title lacks n = 18"
rc=0; "$SB" validate --data "$SRC/tests/data/published-runs-h100-dgxc.tsv" --format json >"$T/vd.json" 2>/dev/null || rc=$?
[ "$rc" -le 1 ] || fail "validate --format json (DGX Cloud): exit $rc"
"$SB" plot --validate "$T/vd.json" --out "$T/vd" >/dev/null 2>&1 || fail "plot --validate (DGX Cloud)"
# 38 runs (over 20): the scatter's points unlabelled; validate-error names each
for id in $(python3 -c "import json; print(*[r['id'] for r in json.load(open('$T/vd.json'))['runs']])"); do
    grep -q ">$id<" "$T/vd/validate.svg" && fail "validate figure (DGX Cloud): 38 runs, yet $id labelled"
    grep -q ">$id<" "$T/vd/validate-error.svg" || fail "validate-error (DGX Cloud): no tic $id"
done
# validate-error: a bar per run, a colour per source, the band at the largest error
# allowed, and in the title how many runs lie in it (computed here from the JSON)
for d in v:vf vd:vd; do
    both "$T/${d#*:}/validate-error"
    within=$(python3 -c "import json; j = json.load(open('$T/${d%:*}.json')); r = j['runs']
e = [100 * (x['predicted_step_seconds'] - x['published_step_seconds']) / x['published_step_seconds'] for x in r]
print('%d of %d within ±%g%%' % (sum(abs(v) <= j['target_max_percent'] for v in e), len(r), j['target_max_percent']))")
    grep -qF "$within" "$T/${d#*:}/validate-error.svg" ||
        fail "validate-error (${d%:*}): the title lacks: $within"
done
$CHECK "$T/vd/validate-error.svg" DGXC_24.05 DGXC_24.09 --also '±15%' || fail "validate-error (DGX Cloud): sources"
# bars per source: 10 of DGX Cloud 24.05 (GPT-3 175B), 28 of 24.09
bars() { python3 -c "
import sys
s = open(sys.argv[1]).read(); a = s.find('<g id=\"gnuplot_plot_%s\"' % sys.argv[2])
b = s.find('<g id=\"gnuplot_plot_', a + 1)
print(s[a:b if b > 0 else len(s)].count('<polygon') - 1 if a >= 0 else -1)" "$1" "$2"; }
[ "$(bars "$T/vd/validate-error.svg" 2)" = 10 ] && [ "$(bars "$T/vd/validate-error.svg" 3)" = 28 ] ||
    fail "validate-error: bars $(bars "$T/vd/validate-error.svg" 2) and $(bars "$T/vd/validate-error.svg" 3), not 10 and 28"
# a validate without its targets: the other figures, and why not this one
python3 -c "
import json; j = json.load(open('$T/v.json')); del j['target_max_percent']
json.dump(j, open('$T/vnot.json', 'w'))"
"$SB" plot --validate "$T/vnot.json" --out "$T/vt" >"$T/vt.out" 2>&1 || fail "plot --validate, no targets"
[ ! -e "$T/vt/validate-error.svg" ] && grep -q "validate-error: not drawn: no target" "$T/vt.out" &&
    both "$T/vt/validate" || fail "validate-error without targets: $(cat "$T/vt.out")"
grep -q '±10%' "$T/vt/validate.svg" || fail "validate without target_max_percent: not the 10% band"
# labels up to 20 runs, none over: the first 20 and 21 runs of the DGX Cloud table
for k in 20 21; do
    # (one awk, no pipe: head closing early would SIGPIPE grep under pipefail)
    awk -v n=$((k + 1)) '/^#/ { print; next } c++ < n' "$SRC/tests/data/published-runs-h100-dgxc.tsv" >"$T/d$k.tsv"
    rc=0; "$SB" validate --data "$T/d$k.tsv" --plot "$T/d$k" >/dev/null 2>&1 || rc=$?
    [ "$rc" -le 1 ] || fail "validate --plot of $k runs: exit $rc"
done
grep -q '>dgxc-llama31-8b-bf16-8<' "$T/d20/validate.svg" || fail "20 runs: a label missing"
grep -q '>dgxc-llama31-8b-bf16-8<' "$T/d21/validate.svg" && fail "21 runs: labelled"
$CHECK "$T/vd/validate-gemm.svg" "h100-sxm_bf16 (implied)" "h100-sxm_fp8 (implied)" \
    --also "h100-sxm_bf16 (machine file)" "h100-sxm_fp8 (machine file)" || fail "validate-gemm: bf16 and fp8"
# a run no rate meets (implied null): left out and counted in the title
python3 -c "
import json; j = json.load(open('$T/v.json')); j['runs'][2]['implied_gemm_tflops'] = None
json.dump(j, open('$T/vnull.json', 'w'))"
"$SB" plot --validate "$T/vnull.json" --out "$T/vn" >/dev/null 2>&1 || fail "plot --validate, an implied null"
grep -qF "(n = 17; 1 met by no rate)" "$T/vn/validate-gemm.svg" || fail "validate-gemm: a null not counted"
# points in the series' plot group: 17, not 18; its run still a tic
gemm_points() { python3 -c "
import re, sys
g = re.search(r'<g id=\"gnuplot_plot_1\" ><title>[^<]*\(implied\)</title>(.*?)</g>', open(sys.argv[1]).read(), re.S)
print(len(re.findall(r\"<use xlink:href='#gpPt\", g.group(1))) if g else -1)" "$1"; }
[ "$(gemm_points "$T/vf/validate-gemm.svg")" = 18 ] && [ "$(gemm_points "$T/vn/validate-gemm.svg")" = 17 ] ||
    fail "validate-gemm: points $(gemm_points "$T/vf/validate-gemm.svg") and $(gemm_points "$T/vn/validate-gemm.svg"), not 18 and 17"
id2=$(python3 -c "import json; print(json.load(open('$T/v.json'))['runs'][2]['id'])")
grep -q ">$id2<" "$T/vn/validate-gemm.svg" || fail "validate-gemm: the null run $id2 lost its tic"
# every rate null: still drawn, the machine file's line and the series in the key
python3 -c "
import json; j = json.load(open('$T/v.json'))
for r in j['runs']: r['implied_gemm_tflops'] = None
json.dump(j, open('$T/vall.json', 'w'))"
"$SB" plot --validate "$T/vall.json" --out "$T/va" >/dev/null 2>&1 || fail "plot --validate, every rate null"
$CHECK "$T/va/validate-gemm.svg" "a100-sxm-80g_fp16 (machine file)" --also "a100-sxm-80g_fp16 (implied)" ||
    fail "validate-gemm, every rate null"
# one source (one run): the figure of predicted against published still drawn
awk '/^#/ { print; next } c++ < 2' "$SRC/tests/data/published-runs.tsv" >"$T/one.tsv"  # (no pipe into head: SIGPIPE under pipefail)
rc=0; "$SB" validate --data "$T/one.tsv" --plot "$T/v1" >/dev/null 2>"$T/v1.err" || rc=$?
[ "$rc" -le 1 ] && both "$T/v1/validate" || fail "validate --plot of one source: exit $rc: $(cat "$T/v1.err")"
# a validate older than the GEMM fields: the first figure alone, and why
python3 -c "
import json; j = json.load(open('$T/v.json'))
for r in j['runs']: del r['gemm_tflops']
json.dump(j, open('$T/vold.json', 'w'))"
"$SB" plot --validate "$T/vold.json" --out "$T/vo" >"$T/vo.out" 2>&1 || fail "plot --validate, an older JSON"
both "$T/vo/validate"
[ ! -e "$T/vo/validate-gemm.svg" ] || fail "validate-gemm drawn without gemm_tflops"
grep -q "validate-gemm: not drawn: runs\[0\]" "$T/vo.out" || fail "validate-gemm not drawn, not said: $(cat "$T/vo.out")"
# a field missing: named, exit 2, no figure
for drop in "runs 3 published_step_seconds" "top mape_percent" "runs 0 id"; do
    set -- $drop
    python3 - "$T/v.json" "$T/vbad.json" "$@" <<'PY2'
import json, sys
j = json.load(open(sys.argv[1]))
if sys.argv[3] == "top":
    del j[sys.argv[4]]
else:
    del j["runs"][int(sys.argv[4])][sys.argv[5]]
json.dump(j, open(sys.argv[2], "w"))
PY2
    want=$([ "$1" = top ] && echo "$2 missing" || echo "runs\\[$2\\].$3 missing")
    rm -rf "$T/vf2"
    rc=0; "$SB" plot --validate "$T/vbad.json" --out "$T/vf2" >/dev/null 2>"$T/err" || rc=$?
    [ "$rc" -eq 2 ] && grep -q "$want" "$T/err" || fail "validate without $drop: exit $rc: $(cat "$T/err")"
    ls "$T/vf2"/*.svg >/dev/null 2>&1 && fail "a validate figure drawn without $drop"
done
# validate --plot DIR: the same figure, the JSON on stdout left whole
"$SB" validate --data "$SRC/tests/data/published-runs.tsv" --format json --plot "$T/vp" \
    >"$T/vp.json" 2>"$T/vp.err" || fail "validate --plot: $(cat "$T/vp.err")"
python3 -c "import json; assert len(json.load(open('$T/vp.json'))['runs']) == 18" ||
    fail "validate --plot: stdout is not validate's JSON"
both "$T/vp/validate"
grep -qF "$t" "$T/vp/validate.svg" || fail "validate --plot: the title lacks: $t"
python3 -c "
import json; j = json.load(open('$T/v.json')); j['runs'] = []; json.dump(j, open('$T/v0.json', 'w'))"
rc=0; "$SB" plot --validate "$T/v0.json" --out "$T/vf3" >/dev/null 2>"$T/err" || rc=$?
[ "$rc" -eq 2 ] && grep -q '"runs" is empty' "$T/err" || fail "an empty validate figure: $rc"

echo "figures: ok"
