#!/bin/bash
# megatron_run.sh SHARDBENCH MPIEXEC: `search --algo megatron --save FILE`
# writes Megatron's layouts as an op-level strategy file that `run` trains
# with a one-rank run's losses (within 1e-5, relative): a reduced Llama on
# 4 ranks as TP 2 x PP 2 (sequence parallel, selective recompute, the
# distributed optimizer as ZeRO 1), TP 2 x CP 2 (full recompute) and
# TP 4 (the kv groups split), TP 2 x PP 2 of 1 + 3 layers; export reads the
# file (its pipeline, ZeRO stage, precision, a column-parallel weight);
# prune --machine lists megatron's best as a survivor that trains alike; --vpp 2 with --save is refused with status 2.
set -euo pipefail
sb=$1
mpiexec=$2
dir=$(mktemp -d "${TMPDIR:-/tmp}/sb_mtrun_XXXXXX")
trap 'rm -rf "$dir"' EXIT
set_args=(--set layers=4 --set batch=8 --set seq=16 --set embed=64 --set heads=8
          --set kv_heads=4 --set ff=128 --set vocab=256)
fail=0
# shellcheck source=tests/cli/run_losses.sh
source "$(dirname "${BASH_SOURCE[0]}")/run_losses.sh"
run_llama() {
    local np=$1
    shift
    "$mpiexec" --oversubscribe --allow-run-as-root -np "$np" "$sb" run -m llama3-8b \
        "${set_args[@]}" --db none --warmup 0 --lr 0.2 --format json "$@" 2>/dev/null
}
save() { # NAME DEGREES...: the configuration saved as $dir/NAME.strategy
    local name=$1
    shift
    "$sb" search --algo megatron -m llama3-8b "${set_args[@]}" -p 4 --machine h100-sxm \
        --ep 1 --vpp 1 --micro-batch-size 2 "$@" --save "$dir/$name.strategy" >/dev/null
}
save tp2pp2 --tp 2 --pp 2 --dp 1 --cp 1 --sequence-parallel on --recompute selective --zero 1
save tp2cp2 --tp 2 --pp 1 --dp 1 --cp 2 --sequence-parallel off --recompute full --zero 0
save tp4 --tp 4 --pp 1 --dp 1 --cp 1 --sequence-parallel on --recompute none --zero 0
# uneven stages (Megatron-Core's --decoder-first/last-pipeline-num-layers): 1 + 3 layers
save pp2uneven --tp 2 --pp 2 --dp 1 --cp 1 --sequence-parallel on --recompute none --zero 0 \
    --first-stage-layers 1 --last-stage-layers 3
grep -q '^stage 0 2 [^ ]* x\.1/' "$dir/pp2uneven.strategy" && grep -q '^stage 1 2 x\.2/' "$dir/pp2uneven.strategy" ||
    { echo "FAIL: --first-stage-layers 1 does not end stage 0 after layer 1: $(grep '^stage' "$dir/pp2uneven.strategy")"; fail=1; }
for key in '^pipeline 2 4 1f1b' '^zero 1' '^precision bf16' '^recompute x.1/a/w' \
           '^op x.1/a/q0 einsum 1,2,1,1,1,1 ' '^op x.1/n1 rmsnorm 1,2,1 ' '^op loss softmax_xent 1,1,2 '; do
    if ! grep -q "$key" "$dir/tp2pp2.strategy"; then
        echo "FAIL: tp2pp2.strategy lacks $key"
        fail=1
    fi
done
grep -q '^op x.1/a/q0 einsum 1,4,1,1,1,1 ' "$dir/tp4.strategy" ||
    { echo "FAIL: TP 4 does not split kvh 4 ways"; fail=1; }
grep -q '^op x.1/a/logits einsum 1,2,1,2,1,1 ' "$dir/tp2cp2.strategy" ||
    { echo "FAIL: CP 2 does not split the queries' seq"; fail=1; }
ref=$(run_llama 1 --strategy dp --steps 3 | losses)
for s in tp2pp2 tp2cp2 tp4 pp2uneven; do
    same "megatron $s on 4 ranks" "$(run_llama 4 --strategy "$dir/$s.strategy" --steps 3 | losses)" "$ref"
done
if ! "$sb" export "$dir/tp2pp2.strategy" --to jax >"$dir/export" 2>"$dir/err"; then
    echo "FAIL: export of the megatron strategy: $(cat "$dir/err")"
    fail=1
fi
for key in '^# pipeline: 2 stages, 4 micro-batches, schedule 1f1b' '^# ZeRO stage 1' \
           '^# precision: bf16' "weight x.1/a/wq.* PartitionSpec('x', None, None, None)"; do
    grep -q "$key" "$dir/export" || { echo "FAIL: export lacks $key"; fail=1; }
done
# prune lists megatron's best (one chunk per stage) beside the op-level
# survivors with a GPU machine file, and says why not for a model it cannot price
"$sb" prune -m llama3-8b "${set_args[@]}" -p 4 --machine h100-sxm --budget 2000 --within 100 \
    --out "$dir/pr" >"$dir/prune.out"
mfile=$(awk -F'\t' '$2 == "megatron" {print $1}' "$dir/pr/index.tsv")
if [ -z "$mfile" ] || ! grep -q '^algo megatron' "$dir/pr/$mfile"; then
    echo "FAIL: prune --machine lists no megatron survivor: $(cat "$dir/prune.out")"
    fail=1
else
    same "prune's megatron survivor on 4 ranks" \
        "$(run_llama 4 --strategy "$dir/pr/$mfile" --steps 3 | losses)" "$ref"
fi
"$sb" prune -m alexnet --set batch=8 -p 4 --machine h100-sxm --budget 200 --top 1 \
    --out "$dir/pa" >"$dir/prune.out"
grep -q '^# megatron: not a survivor: .*param' "$dir/prune.out" ||
    { echo "FAIL: prune of alexnet does not say why megatron is not a survivor"; fail=1; }
st=0
save bad --tp 2 --pp 2 --dp 1 --cp 1 --vpp 2 2>"$dir/err" || st=$?
if [ "$st" -eq 2 ] && grep -q "interleaved schedule (--vpp 2)" "$dir/err"; then
    echo "--vpp 2 --save: ok: refused"
else
    echo "FAIL: --vpp 2 --save: status $st, $(cat "$dir/err")"
    fail=1
fi
exit $fail
