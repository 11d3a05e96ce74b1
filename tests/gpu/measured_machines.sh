#!/usr/bin/env bash
# tests/gpu/measured_machines.sh: a machines folder with a GPU's measured
# figures, for `validate` (docs/validation.md, "What is left"): every file of
# machines/ copied into DIR, and in MACHINE's copy each key a fragment gives
# (perf/gpu_model's and perf/gpu_attention's --fragment files) replaced by the
# fragment's line, its comments kept with it (the replaced lines' own comments
# stay where they were). tests/gpu/run.sh calls it after
# measuring; by hand:
#
#   bash tests/gpu/measured_machines.sh DIR h100-sxm gpu-model.machine gpu-attention.machine
#   SHARDBENCH_MACHINES=DIR shardbench validate --data tests/data/published-runs-h100-dgxc.tsv
#
# A missing or empty fragment, or one that gives no key, is refused (exit 2);
# MACHINE's copy is written through a temporary file and a rename.
set -euo pipefail
me=tests/gpu/measured_machines.sh
dir=${1:?usage: measured_machines.sh DIR MACHINE FRAGMENT...}
name=${2:?usage: measured_machines.sh DIR MACHINE FRAGMENT...}
shift 2
[ $# -gt 0 ] || { echo "$me: no fragment given" >&2; exit 2; }
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
base=$root/machines/$name.machine
[ -f "$base" ] || { echo "$me: no machine file $base" >&2; exit 2; }
mkdir -p "$dir"
cp "$root"/machines/*.machine "$dir"/
tmp=$(mktemp "$dir/.$name.XXXXXX")
trap 'rm -f "$tmp" "$tmp.new" "$tmp.keys"' EXIT
cp "$base" "$tmp"
keys_of() { awk '/^[ \t]*[a-z][a-z0-9_]*[ \t]/ {print $1}' "$@"; } # a key line's first word
for frag in "$@"; do
    [ -s "$frag" ] || { echo "$me: fragment $frag is missing or empty" >&2; exit 2; }
    keys_of "$frag" >"$tmp.keys"
    [ -s "$tmp.keys" ] || { echo "$me: fragment $frag gives no key" >&2; exit 2; }
    # one pass: the lines of the fragment's keys dropped, then the fragment appended
    awk 'NR == FNR { drop[$1] = 1; next } !($1 in drop)' "$tmp.keys" "$tmp" >"$tmp.new"
    { echo; echo "# ---- measured: $(basename "$frag") ----"; cat "$frag"; } >>"$tmp.new"
    mv "$tmp.new" "$tmp"
done
mv "$tmp" "$dir/$name.machine"
echo "$me: $dir/$name.machine:" "$(keys_of "$@" | paste -sd ' ')" measured
