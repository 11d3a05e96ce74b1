#!/bin/bash
# ranks_cyclic.sh SHARDBENCH MPIEXEC: where the ranks lie on the nodes
# (search --ranks, a strategy file's `ranks cyclic N`, run's reordering).
# On a machine of nodes of 2 devices at p = 4:
#  - search --ranks auto costs the least of --ranks block and --ranks cyclic,
#    and its JSON names the order it took (block on this machine; cyclic on
#    one whose inter-node link is the faster, where cyclic is cheaper);
#  - a strategy that splits, its ranks cyclic in nodes of 2, run on 8 ranks,
#    gives a one-rank run's losses (within 1e-5, relative), and run places
#    strategy rank r on launch rank (r mod 4) * 2 + r / 4: 0 2 4 6 1 3 5 7;
#  - --ranks cyclic without nodes, a file's `ranks cyclic 3` at p = 8,
#    export of a cyclic strategy and --ranks in the full space fail with
#    status 2 and say why.
set -euo pipefail
sb=$1
mpiexec=$2
dir=$(mktemp -d "${TMPDIR:-/tmp}/ranks_cyclic.XXXXXX")
trap 'rm -rf "$dir"' EXIT
fail=0
# nodes of 2 devices, the inter-node link 8x slower than the intra-node one
cat >"$dir/two.machine" <<'M'
devices_per_node 2
nodes 2
tflops_fp32 0.01
tflops_tf32 0.01
tflops_bf16 0.01
mem_gib 16
mem_gbs 100
intra_gbs 16
intra_latency_us 1
inter_gbs 2
inter_latency_us 5
eff_gemm 1
eff_conv 1
eff_elementwise 1
M
set_args=(--set layers=2 --set batch=8 --set seq=8 --set vocab=32 --set embed=16 --set heads=2
          --set dk=8 --set ff=32)
js() { "$sb" search -m transformer "${set_args[@]}" -p 4 --machine "$dir/two.machine" \
           --profiles none --db none --format json "$@"; }
field() { python3 -c "import json,sys; j=json.load(sys.stdin); print($1)"; }
a=$(js | field "j['total_cost'], j['mesh_to_nodes']['rank_order']")
b=$(js --ranks block | field "j['total_cost']")
c=$(js --ranks cyclic | field "j['total_cost']")
mb=$(js --ranks block | field "j['mesh_to_nodes']['intra'], j['mesh_to_nodes']['inter'], j['mesh_to_nodes']['both']")
mc=$(js --ranks cyclic | field "j['mesh_to_nodes']['intra'], j['mesh_to_nodes']['inter'], j['mesh_to_nodes']['both']")
want=$(python3 -c "b, c = $b, $c; print(min(b, c), 'cyclic' if c < b else 'block')")
if [ "$(echo "$a" | tr -d '(),')" = "$(echo "$want" | tr -d '(),')" ]; then
    echo "auto: ok: $a (block $b, cyclic $c)"
else
    echo "auto: FAIL: $a, want the least of block $b and cyclic $c: $want"
    fail=1
fi
# the links the other way round (an inverted machine, for the test): cyclic wins
sed -e 's/^intra_gbs 16/intra_gbs 1/' -e 's/^intra_latency_us 1/intra_latency_us 20/' \
    -e 's/^inter_gbs 2/inter_gbs 16/' -e 's/^inter_latency_us 5/inter_latency_us 1/' \
    "$dir/two.machine" >"$dir/inv.machine"
ai=$("$sb" search -m transformer "${set_args[@]}" -p 4 --machine "$dir/inv.machine" --profiles none \
     --db none --format json | field "j['total_cost'], j['mesh_to_nodes']['rank_order']")
bi=$("$sb" search -m transformer "${set_args[@]}" -p 4 --machine "$dir/inv.machine" --profiles none \
     --db none --format json --ranks block | field "j['total_cost']")
ci=$("$sb" search -m transformer "${set_args[@]}" -p 4 --machine "$dir/inv.machine" --profiles none \
     --db none --format json --ranks cyclic | field "j['total_cost']")
if python3 -c "import sys; a, o = sys.argv[1].split(); b, c = float(sys.argv[2]), float(sys.argv[3])
sys.exit(not (o == 'cyclic' and float(a) == c < b))" "$ai" "$bi" "$ci"; then
    echo "auto, inverted links: ok: cyclic $ci under block $bi"
else
    echo "auto, inverted links: FAIL: auto $ai, block $bi, cyclic $ci (want cyclic, the least)"
    fail=1
fi
if [ "$mb" != "$mc" ]; then
    echo "mesh_to_nodes: ok: block $mb, cyclic $mc"
else
    echo "mesh_to_nodes: FAIL: block and cyclic place the split dims alike ($mb)"
    fail=1
fi

# shellcheck source=tests/cli/run_losses.sh
source "$(dirname "${BASH_SOURCE[0]}")/run_losses.sh"
# a strategy that splits: the search's best at --flops 0.01 (no machine), its ranks cyclic,
# on 8 ranks in nodes of 2 (4 nodes: n and N differ, so the placement is not its own inverse)
"$sb" search -m transformer "${set_args[@]}" -p 8 --flops 0.01 --db none \
    --save "$dir/s.strategy" >/dev/null
if ! grep '^op ' "$dir/s.strategy" | awk '{print $4}' | grep -q '[248]'; then
    echo "FAIL: the strategy splits no op"
    fail=1
fi
awk '/^shardbench-strategy/ { print "shardbench-strategy 2"; next }
     /^cost/ { print; print "ranks cyclic 2"; next } { print }' "$dir/s.strategy" >"$dir/c.strategy"
ref=$(run 1 --strategy dp --steps 3 | losses)
out=$(run 8 --strategy "$dir/c.strategy" --steps 3 2>"$dir/err")
same "run, ranks cyclic" "$(echo "$out" | losses)" "$ref"
if [ -z "$(echo "$out" | losses)" ]; then
    cat "$dir/err"
fi
if grep -q "strategy rank r on launch rank 0 2 4 6 1 3 5 7$" "$dir/err"; then
    echo "placement: ok: $(grep 'launch rank' "$dir/err")"
else
    echo "placement: FAIL: want strategy ranks on launch ranks 0 2 4 6 1 3 5 7:"
    cat "$dir/err"
    fail=1
fi

# refusals: refuse LABEL PATTERN CMD...: CMD exits 2 and its stderr matches PATTERN
refuse() {
    local label=$1 pattern=$2 msg st
    shift 2
    set +e
    msg=$("$@" 2>&1 >/dev/null)
    st=$?
    set -e
    if [ $st -eq 2 ] && echo "$msg" | grep -q -- "$pattern"; then
        echo "refusal ($label): ok"
    else
        echo "refusal ($label): FAIL: status $st: $msg"
        fail=1
    fi
}
refuse "no nodes" "ranks cyclic: needs a machine file" \
    "$sb" search -m transformer "${set_args[@]}" -p 4 --ranks cyclic --db none
sed 's/^ranks cyclic 2/ranks cyclic 3/' "$dir/c.strategy" >"$dir/bad.strategy"
refuse "ranks cyclic 3 at p = 8" "bad.strategy:.*ranks cyclic DEVICES_PER_NODE" \
    run 8 --strategy "$dir/bad.strategy" --steps 1
refuse "export of a cyclic strategy" "c.strategy: its ranks lie cyclically" \
    "$sb" export "$dir/c.strategy" --to dtensor
refuse "--ranks in the full space" "--ranks: the plain space only" js --memory 1GiB --ranks cyclic
exit $fail
