#!/usr/bin/env bash
# Writes the outputs a refactor must leave unchanged into OUTDIR, one file
# each: `search` (table, json, tsv) for every shipped model at p = 4..64, the
# saved strategy files, `candidates`, `export` in every form, and `paper
# --table2`; the search's own time masked. Compare two sweeps with diff -r.
#   scripts/sweep_outputs.sh OUTDIR [SHARDBENCH]   (default build/shardbench)
set -u
out=${1:?usage: sweep_outputs.sh OUTDIR [SHARDBENCH]}
sb=${2:-build/shardbench}
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
# seconds the run took are the only part allowed to differ
mask() { sed -E -e 's/("(search_|prune_)?seconds": )[0-9.e+-]+/\1T/' \
    -e 's/([0-9.]+ ?(s|ms)\))/T)/g' -e 's/(search|prune)(_| )(time|seconds)([ :=]+)[0-9.e+-]+/\1\2\3\4T/g' \
    -e 's/\t[0-9.]+e?-?[0-9]*$/\tT/' ; }
n=0
for mf in "$root"/models/*.model; do
  m=$(basename "$mf" .model)
  for p in 4 8 16 32 64; do
    base="$out/$m-p$p"
    for f in table json tsv; do
      "$sb" search -m "$m" -p "$p" --format "$f" --db none 2>&1 | mask > "$base.search.$f"
      n=$((n + 1))
    done
    "$sb" search -m "$m" -p "$p" --db none --save "$base.strategy" > /dev/null 2>&1
    [ -f "$base.strategy" ] && n=$((n + 1))
    "$sb" candidates -m "$m" -p "$p" 2>&1 | mask > "$base.candidates"
    n=$((n + 1))
    if [ -f "$base.strategy" ]; then
      for to in dtensor torch jax mtf; do
        "$sb" export "$base.strategy" --to "$to" > "$base.export.$to.text" 2>&1
        n=$((n + 1))
      done
      for to in torch jax; do
        for fm in py json; do
          "$sb" export "$base.strategy" --to "$to" --format "$fm" > "$base.export.$to.$fm" 2>&1
          n=$((n + 1))
        done
      done
    fi
  done
done
# the full space and the megatron grid on a GPU machine, small models
for m in transformer gpt2 llama3-8b; do
  for p in 8 64; do
    "$sb" search -m "$m" -p "$p" --machine h100-sxm --memory 80GiB --space full --format json \
        --db none --save "$out/$m-p$p.full.strategy" 2>&1 | mask > "$out/$m-p$p.full.json"
    n=$((n + 2))
  done
done
"$sb" paper --table2 2>&1 | mask > "$out/paper-table2"
n=$((n + 1))
echo "$n outputs in $out"
