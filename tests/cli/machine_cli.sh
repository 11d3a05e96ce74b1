#!/usr/bin/env bash
# tests/cli/machine_cli.sh: --machine on the command line: search of the
# Transformer at p = 64 on h200-sxm gives a finite total different from the
# reference model's; --flops, --bw or --calibration with --machine, an
# unknown machine and a bad file are refused (exit 2) with a message;
# mesh_to_nodes (JSON) and the table's mesh line for grids of one op whose
# placement on 8-device nodes is known by hand.
#
#   tests/cli/machine_cli.sh SHARDBENCH SOURCE_DIR
set -uo pipefail

SB=${1:?usage: machine_cli.sh SHARDBENCH SOURCE_DIR}
SRC=${2:?usage: machine_cli.sh SHARDBENCH SOURCE_DIR}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/machine_cli.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
# shared checks: check, refused, js (and fails=0)
# shellcheck source=tests/cli/check_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/check_lib.sh"
total() { sed -n 's/^total cost \([^ ]*\) FLOP.*/\1/p' "$1"; }

"$SB" search -m transformer -p 64 --db none --machine h200-sxm > "$TMP/h200" 2> "$TMP/h200.err"
check "search --machine h200-sxm exits 0" test $? -eq 0
"$SB" search -m transformer -p 64 --db none > "$TMP/ref" 2> "$TMP/ref.err"
h=$(total "$TMP/h200")
r=$(total "$TMP/ref")
echo "h200 total $h, reference total $r"
check "h200 total is a finite number" awk -v x="$h" 'BEGIN { exit !(x + 0 > 0 && x !~ /nan|inf/) }'
check "h200 total differs from the reference" test "$h" != "$r"
check "reference total is the paper's" test "$r" = 521017024512.00

"$SB" search -m transformer -p 8 --db none --machine "$SRC/machines/a100-sxm-80g.machine" \
    > /dev/null 2>&1
check "--machine FILE path" test $? -eq 0

refused() { # refused NAME WANT ARGS...
    local name=$1 want=$2
    shift 2
    "$SB" "$@" > "$TMP/out" 2> "$TMP/err"
    local rc=$?
    check "$name: exit 2" test $rc -eq 2
    check "$name: says '$want'" grep -qF -- "$want" "$TMP/err"
}
for cmd in search candidates prune; do
    refused "$cmd --flops --machine" "give it or --flops/--bw, not both" \
        $cmd -m alexnet -p 4 --machine h200-sxm --flops 5
done
"$SB" candidates -m alexnet -p 16 --top 3 --machine h200-sxm > "$TMP/cand" 2>&1
check "candidates --machine exits 0" test $? -eq 0
refused "search --bw --machine" "give it or --flops/--bw, not both" \
    search -m alexnet -p 4 --db none --bw 5 --machine h200-sxm
refused "search --calibration --machine" "or --calibration" \
    search -m alexnet -p 4 --db none --machine h200-sxm --calibration "$SRC/tests/data/calibration/ok.txt"
refused "unknown machine" "unknown machine 'tpu-v9'" search -m alexnet -p 4 --db none --machine tpu-v9
printf 'devices_per_node 8\nnodes 0\n' > "$TMP/bad.machine"
refused "bad machine file" "bad.machine:2: nodes 0 is out of range" \
    search -m alexnet -p 4 --db none --machine "$TMP/bad.machine"

# --format json: a time and the peak per device; time = total cost / F
"$SB" search -m alexnet -p 16 --machine h200-sxm --db none --format json > "$TMP/m.json"
check "search --machine --format json has predicted_step_seconds = total_cost / F" \
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); t=d['predicted_step_seconds']; \
assert t > 0 and abs(t - d['total_cost'] / (d['flops_tflops'] * 1e12)) <= 1e-9 * t; \
assert d['peak_bytes_per_device'] > 0" "$TMP/m.json"
"$SB" search -m alexnet -p 16 --db none --format json > "$TMP/ref.json"
check "the reference model's JSON has no predicted_step_seconds (its cost is FLOP)" \
    python3 -c "import json,sys; assert 'predicted_step_seconds' not in json.load(open(sys.argv[1]))" "$TMP/ref.json"

# --calibration FILE with a machine file is --machine FILE
"$SB" search -m alexnet -p 16 --db none --calibration "$SRC/machines/h200-sxm.machine" \
    > "$TMP/alias" 2>&1
"$SB" search -m alexnet -p 16 --db none --machine h200-sxm > "$TMP/alias-m" 2>&1
check "--calibration MACHINE-FILE gives --machine's total" \
    test "$(total "$TMP/alias")" = "$(total "$TMP/alias-m")" -a -n "$(total "$TMP/alias-m")"
refused "--calibration MACHINE-FILE --flops" "give it or --flops/--bw, not both" \
    search -m alexnet -p 4 --db none --calibration "$SRC/machines/h200-sxm.machine" --flops 5

# mesh_to_nodes: one relu over a x b, split a x b ways on 16 devices (the
# only 16-way config), ranks row-major (b fastest), 8 a node on h200-sxm
printf 'model grid\nparam a = 16\nparam b = 1\ncutoff 1\ninput x[a=a, b=b]\ny = act(x, fn=relu)\n' \
    > "$TMP/grid.model"
mesh() { # mesh A B WANT-OP-PLACEMENT WANT-SUMMARY: the op's and the top-level mesh_to_nodes
    "$SB" search -m "$TMP/grid.model" -p 16 --set a="$1" --set b="$2" --machine h200-sxm \
        --db none --format json > "$TMP/grid.json" 2> "$TMP/grid.err"
    check "mesh_to_nodes of a $1 x $2 grid: $3" python3 -c "import json,sys; d=json.load(open(sys.argv[1])); \
op=d['ops'][0]; assert op['config'] == [int(sys.argv[2]), int(sys.argv[3])], op['config']; \
got=json.dumps(op['mesh_to_nodes'], sort_keys=True); assert got == sys.argv[4], got; \
s=d['mesh_to_nodes']; got=json.dumps(s, sort_keys=True); assert got == sys.argv[5], got" \
        "$TMP/grid.json" "$1" "$2" "$3" "$4"
}
mesh 16 1 '{"a": "both"}' \
    '{"both": 1, "devices_per_node": 8, "inter": 0, "intra": 0, "ops_across_nodes": 1, "ops_inside_one_node": 0, "rank_order": "block"}'
mesh 8 2 '{"a": "both", "b": "intra"}' \
    '{"both": 1, "devices_per_node": 8, "inter": 0, "intra": 1, "ops_across_nodes": 1, "ops_inside_one_node": 0, "rank_order": "block"}'
mesh 2 8 '{"a": "inter", "b": "intra"}' \
    '{"both": 0, "devices_per_node": 8, "inter": 1, "intra": 1, "ops_across_nodes": 1, "ops_inside_one_node": 0, "rank_order": "block"}'
"$SB" search -m "$TMP/grid.model" -p 16 --set a=2 --set b=8 --machine h200-sxm --db none > "$TMP/grid.txt"
check "the table says where the split dims lie" \
    grep -qF "mesh to nodes (8 devices a node, ranks in blocks): split dims intra 1, inter 1, both 0; 0 of 1 ops inside one node" "$TMP/grid.txt"
"$SB" search -m "$TMP/grid.model" -p 16 --set a=2 --set b=8 --db none --format json > "$TMP/grid-ref.json"
check "the reference model's JSON has no mesh_to_nodes" \
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert 'mesh_to_nodes' not in d; \
assert 'mesh_to_nodes' not in d['ops'][0]" "$TMP/grid-ref.json"
check "the reference table has no mesh line" bash -c "! grep -q 'mesh to nodes' '$TMP/ref'"

echo "$fails failed"
test "$fails" -eq 0
