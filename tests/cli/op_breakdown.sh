#!/usr/bin/env bash
# tests/cli/op_breakdown.sh: the op-level searches' JSON with a machine file gives
# time_breakdown_seconds with exactly --algo megatron's keys (compute, tp_comm,
# dp_comm, pp_comm, bubble, optimizer; shardbench/breakdown.h), none negative,
# summing to predicted_step_seconds, for the plain and the full space; the
# data-parallel overlap (--dp-overlap, on by default with a GPU machine) hides
# weight-gradient time (pp_comm: the slowest stage's sends, 0 when it is the last);
# memory-bound ops priced by bytes (by hand); Adam by default; no machine, no
# breakdown and --dp-overlap refused.
#
#   tests/cli/op_breakdown.sh SHARDBENCH
set -uo pipefail

SB=${1:?usage: op_breakdown.sh SHARDBENCH}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/op_breakdown.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
# shellcheck source=tests/cli/check_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/check_lib.sh"

KEYS="['bubble', 'compute', 'dp_comm', 'optimizer', 'pp_comm', 'tp_comm']"
SUMS="sorted(d['time_breakdown_seconds']) == $KEYS
and all(v >= 0 for v in d['time_breakdown_seconds'].values())
and abs(sum(d['time_breakdown_seconds'].values()) - d['predicted_step_seconds'])
    <= 1e-9 * d['predicted_step_seconds']"

"$SB" search -m gpt3-175b --set layers=4 --set batch=64 -p 8 --machine h200-sxm --space full \
    --stages 1 --format json --db none --algo megatron > "$TMP/mt.json" 2> /dev/null
check "--algo megatron's keys are the ones checked here" js "$TMP/mt.json" \
    "sorted(d['time_breakdown_seconds']) == $KEYS"

"$SB" search -m transformer -p 64 --machine h200-sxm --format json --db none > "$TMP/plain.json"
check "plain space: exit 0" test $? -eq 0
check "plain space: megatron's keys, none negative, summing to the step" js "$TMP/plain.json" "
$SUMS and d['time_breakdown_seconds']['compute'] > 0 and d['time_breakdown_seconds']['tp_comm'] > 0
and d['time_breakdown_seconds']['pp_comm'] == 0 and d['time_breakdown_seconds']['bubble'] == 0"

F=(search -m llama3-8b --set layers=8 --set batch=64 -p 64 --machine h200-sxm --space full
   --memory 80GiB --stages 4 --format json --db none)
"$SB" "${F[@]}" > "$TMP/full.json"
check "full space, 4 stages: exit 0" test $? -eq 0
check "full space: megatron's keys, none negative, summing to the step" js "$TMP/full.json" "
$SUMS and len(d['stages']) == 4
and d['time_breakdown_seconds']['bubble'] > 0 and d['time_breakdown_seconds']['dp_comm'] > 0"
"$SB" "${F[@]}" --dp-overlap off > "$TMP/full-off.json"
check "--dp-overlap off: the same keys and sum" js "$TMP/full-off.json" "$SUMS"
check "--dp-overlap off exposes more weight-gradient time and a step no shorter" python3 -c "
import json; a = json.load(open('$TMP/full.json')); b = json.load(open('$TMP/full-off.json'))
assert b['time_breakdown_seconds']['dp_comm'] > a['time_breakdown_seconds']['dp_comm']
assert b['predicted_step_seconds'] >= a['predicted_step_seconds']"

# Memory-bound ops by bytes on a GPU (docs/megatron.md), by hand at p=1 (no
# collective): a forward and a backward kernel moving (fwd + bwd) words of
# the precision (bf16: 2 bytes) per element over mem_gbs x hbm_eff, plus
# kernel_us each; FLOP at F. add 3 + 2, softmax 2 + 3, layer norm 2 + 4.
MF=$(dirname "${BASH_SOURCE[0]}")/../../machines/h200-sxm.machine
# (--attention materialized: fused, the attention's softmax is inside the
# fused kernel and costs nothing at p=1, checked after this)
"$SB" search -m transformer -p 1 --machine h200-sxm --format json --db none \
    --attention materialized > "$TMP/p1.json"
check "memory-bound ops priced by bytes (add, softmax, norm), by hand" python3 -c "
import json, math
mf = dict(l.split()[:2] for l in open('$MF') if l.strip() and not l.startswith('#'))
bw, eff, kus = float(mf['mem_gbs']) * 1e9, float(mf['hbm_eff']), float(mf['kernel_us'])
d = json.load(open('$TMP/p1.json')); F = d['flops_tflops'] * 1e12
words = {'add': 5, 'softmax': 5, 'norm': 6}
seen = set()
for o in d['ops']:
    if o['type'] in words:
        e = math.prod(x['size'] for x in o['dims'])
        want = (e * words[o['type']] * 2 / (bw * eff) + 2 * kus * 1e-6) * F
        assert abs(o['cost'] - want) <= 1e-9 * want, (o['name'], o['cost'], want)
        seen.add(o['type'])
assert seen == set(words), seen"
"$SB" search -m transformer -p 1 --machine h200-sxm --format json --db none > "$TMP/p1f.json"
check "fused attention (the default): its softmax costs nothing at p=1" js "$TMP/p1f.json" "
[o['cost'] for o in d['ops'] if o['type'] == 'softmax'] and
all(o['cost'] == 0 for o in d['ops'] if o['type'] == 'softmax')"
check "a GPU machine's optimizer is Adam (as --algo megatron)" js "$TMP/full.json" \
    "d['optimizer'] == 'adam'"

"$SB" search -m transformer -p 64 --format json --db none > "$TMP/ref.json"
check "no machine: no breakdown (the reference model's JSON as it was)" js "$TMP/ref.json" \
    "'time_breakdown_seconds' not in d"
refused "--dp-overlap without a machine" "needs a GPU machine" \
    search -m transformer -p 8 --dp-overlap on --db none
refused "--dp-overlap maybe" "not on or off" \
    search -m transformer -p 8 --machine h200-sxm --dp-overlap maybe --db none
exit $((fails > 0))
