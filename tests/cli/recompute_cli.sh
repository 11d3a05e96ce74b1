#!/bin/bash
# shellcheck disable=SC2034 # the outputs are read by the checks' eval
# recompute_cli.sh SHARDBENCH MPIEXEC: activation recomputation end to end.
# search --recompute all lists every op but the loss (text and JSON); a
# plain search's JSON has no recompute key; within a limit that no
# strategy fits without recomputation (60 KiB: the least is 76.8 KB) auto
# fits by recomputing and none fails; the saved strategy's recompute lines
# reach run, whose losses equal the same strategy's without recomputation
# and whose peak per rank is lower; run --recompute refuses the loss.
# In the full space: search --stages 2 --recompute all saves a pipeline
# with a recompute line per op, run runs it on 2 ranks (one a stage) with
# the losses of the same pipeline without recomputation and a lower peak
# on every rank; --recompute auto with a pipeline chooses per stage: within
# the recomputing pipeline's peak as the limit (none fits it without) it
# recomputes (JSON stages[].recompute, the table's "chosen" line) and fits,
# and without a limit it recomputes nothing.
set -uo pipefail
sb=$1
mpiexec=$2
dir=$(mktemp -d /tmp/sb_recompute_XXXXXX)
trap 'rm -rf "$dir"' EXIT
S=(-m transformer --set batch=4 --set vocab=16 --set seq=4 --set embed=8 --set heads=2
   --set dk=4 --set ff=16 --set layers=1)
fail=0
check() { if eval "$2"; then echo "$1: ok"; else echo "$1: FAIL"; fail=1; fi; }

json=$("$sb" search "${S[@]}" -p 2 --db none --recompute all --format json)
n=$(echo "$json" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(len(d["recompute"]), len(d["ops"]), "loss" in d["recompute"])')
check "search --recompute all: every op but the loss in the JSON ($n)" '[ "$n" = "38 39 False" ]'
text=$("$sb" search "${S[@]}" -p 2 --db none --recompute all)
check "search --recompute all: the table says so" 'echo "$text" | grep -q "^recompute (--recompute all): 38 of 39 ops: src_embed, "'
plain=$("$sb" search "${S[@]}" -p 2 --db none --format json)
check "plain search: no recompute key" '! echo "$plain" | grep -q recompute'
none=$("$sb" search "${S[@]}" -p 2 --db none --memory 60KiB --space plain 2>&1)
check "--memory 60KiB --space plain without recomputation: nothing fits" 'echo "$none" | grep -q "no strategy of .transformer. at p=2 fits"'
auto=$("$sb" search "${S[@]}" -p 2 --db none --memory 60KiB --recompute auto --save "$dir/a.strategy")
check "--memory 60KiB --recompute auto: fits by recomputing" 'echo "$auto" | grep -q "^recompute (--recompute auto): [1-9][0-9]* of 39 ops" && echo "$auto" | grep -q "within --memory"'
check "the saved strategy has recompute lines" 'grep -q "^recompute " "$dir/a.strategy"'
run() {
    "$mpiexec" --oversubscribe --allow-run-as-root -np 2 "$sb" run "${S[@]}" --db none --steps 3 \
        --warmup 0 --strategy "$dir/a.strategy" "$@"
}
with=$(run --format json 2>&1)
without=$(run --recompute none --format json 2>&1)
field() { python3 -c 'import json,sys; d=json.loads(sys.stdin.read().strip().splitlines()[-1]); print(*d[sys.argv[1]])' "$1"; }
lw=$(echo "$with" | field losses)
lo=$(echo "$without" | field losses)
check "run of the saved strategy: the same losses as without recomputation [$lw]" '[ -n "$lw" ] && [ "$lw" = "$lo" ]'
pw=$(echo "$with" | field peak_bytes_per_rank)
po=$(echo "$without" | field peak_bytes_per_rank)
check "run: lower peak per rank ([$pw] < [$po] bytes)" 'python3 -c "import sys; a=list(map(int, sys.argv[1].split())); b=list(map(int, sys.argv[2].split())); sys.exit(not (a and max(a) < max(b)))" "$pw" "$po"'
bad=$(run --recompute loss 2>&1)
rc=$?
check "run --recompute loss: refused (status $rc)" '[ $rc -eq 2 ] && echo "$bad" | grep -q "op .loss. (softmax_xent) cannot be recomputed"'

# the full space: a pipeline of 2 stages, every op but the loss recomputed
pj=$("$sb" search "${S[@]}" -p 2 --db none --stages 2 --microbatches 2 --schedule gpipe \
     --recompute all --format json --save "$dir/p.strategy")
n=$(echo "$pj" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(len(d["recompute"]), len(d["stages"]), "loss" in d["recompute"])')
check "search --stages 2 --recompute all: 38 ops recomputed over 2 stages ($n)" '[ "$n" = "38 2 False" ]'
check "the saved pipeline: version 2, the pipeline line, 38 recompute lines" 'grep -q "^shardbench-strategy 2" "$dir/p.strategy" && grep -q "^pipeline 2 2 gpipe" "$dir/p.strategy" && [ "$(grep -c "^recompute " "$dir/p.strategy")" = 38 ]'
pt=$("$sb" search "${S[@]}" -p 2 --db none --stages 2 --microbatches 2 --schedule gpipe --recompute all)
check "the table lists the recomputed ops" 'echo "$pt" | grep -q "^recompute (--recompute all): 38 of 39 ops: src_embed, "'
pn=$("$sb" search "${S[@]}" -p 2 --db none --stages 2 --microbatches 2 --schedule gpipe --format json)
prc=$(echo "$pj" | python3 -c 'import json,sys; print(json.load(sys.stdin)["peak_bytes_per_device"])')
pnone=$(echo "$pn" | python3 -c 'import json,sys; print(json.load(sys.stdin)["peak_bytes_per_device"])')
check "predicted peak lower with recomputation ($prc < $pnone bytes)" '[ "$prc" -lt "$pnone" ]'
lim=$prc # the recomputing optimum's peak: under the least without recomputation
PA=(-p 2 --db none --stages 2 --microbatches 2 --schedule gpipe --memory "${lim}B")
aj=$("$sb" search "${S[@]}" "${PA[@]}" --recompute auto --format json)
n=$(echo "$aj" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(len(d["recompute"]) > 0, any(s["recompute"] for s in d["stages"]), d["peak_bytes_per_device"] <= '"$lim"', d["recompute_searched"])')
check "--recompute auto --stages 2 within ${lim} B: recomputes a stage, fits ($n)" '[ "$n" = "True True True True" ]'
at=$("$sb" search "${S[@]}" "${PA[@]}" --recompute auto)
check "  ... the table says what it chose" 'echo "$at" | grep -q "^chosen within --memory: ZeRO stage [0-3] (of 0-3; .*recomputing stages [12] of 2 ([01]" && echo "$at" | grep -q "^recompute (--recompute auto): [1-9][0-9]* of 39 ops"'
"$sb" search "${S[@]}" "${PA[@]}" --recompute none > /dev/null 2> "$dir/rn.err"
rn=$?
check "  ... --recompute none at that limit: nothing fits (exit $rn)" '[ $rn -eq 2 ] && grep -q "fits .* per device: the least memory" "$dir/rn.err"'
na=$("$sb" search "${S[@]}" -p 2 --db none --stages 2 --microbatches 2 --schedule gpipe --recompute auto --format json)
check "--recompute auto --stages 2 without a limit: nothing recomputed, the same as none" '[ "$(echo "$na" | python3 -c "import json,sys; print(json.load(sys.stdin)[\"recompute\"])")" = "[]" ] && [ "$(echo "$na" | python3 -c "import json,sys; print(json.load(sys.stdin)[\"total_cost\"])")" = "$(echo "$pn" | python3 -c "import json,sys; print(json.load(sys.stdin)[\"total_cost\"])")" ]'
runp() {
    "$mpiexec" --oversubscribe --allow-run-as-root -np 2 "$sb" run "${S[@]}" --db none --steps 3 \
        --warmup 0 --strategy "$dir/p.strategy" --format json "$@" 2>&1
}
pwith=$(runp)
pwithout=$(runp --recompute none)
lw=$(echo "$pwith" | field losses)
lo=$(echo "$pwithout" | field losses)
check "run of the saved pipeline: the losses without recomputation [$lw]" '[ -n "$lw" ] && [ "$lw" = "$lo" ]'
pw=$(echo "$pwith" | field peak_bytes_per_rank)
po=$(echo "$pwithout" | field peak_bytes_per_rank)
echo "pipeline peak per rank: predicted $prc (recomputing) / $pnone bytes; measured [$pw] / [$po]"
check "run of the saved pipeline: lower peak on every rank ([$pw] < [$po] bytes)" 'python3 -c "import sys; a=list(map(int, sys.argv[1].split())); b=list(map(int, sys.argv[2].split())); sys.exit(not (len(a) == 2 and all(x < y for x, y in zip(a, b))))" "$pw" "$po"'
exit $fail
