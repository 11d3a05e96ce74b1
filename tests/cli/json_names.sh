#!/usr/bin/env bash
# tests/cli/json_names.sh: model names that JSON and strategy files must carry,
# and names taken from file names checked as a `model` line's.
#
#   tests/cli/json_names.sh SHARDBENCH [MPIEXEC]
#
# A model file named plain"q.model (its name holds a double quote; without
# a `model` line the name is the file's with any character a `model` line
# refuses replaced by '_': plain_q, issue 39) through `search --format
# json`, `candidates --format json`, `run --format json` and `bench` (the
# measurement's stored configs and the run's JSON): every output is valid
# JSON with that name (checked with SQLite's JSON functions). A model file
# named "my net#1.model" (my_net_1): `search --save` then `run --strategy`
# of that file, and `export` with the name read back, also when the file
# gives it in double quotes. Registered by tests/tests.cmake.
set -uo pipefail

SB=${1:?usage: json_names.sh SHARDBENCH [MPIEXEC]}
MPIEXEC=${2:-mpiexec}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/json_names.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
SRC=$(cd "$(dirname "$0")/../.." && pwd)
fails=0
pass() { echo "ok   $1"; }
fail() { fails=$((fails + 1)); echo "FAIL $1"; }
check() { local name=$1; shift; if "$@"; then pass "$name"; else fail "$name"; fi; }
sql() { sqlite3 -batch -noheader "$@"; }
# jis FILE PATH VALUE: FILE is valid JSON and its value at PATH is VALUE
jis() { test "$(sql :memory: "SELECT json_valid(readfile('$1')) || '|' || json_extract(readfile('$1'), '$2');")" = "1|$3"; }
S=(--set batch=8 --set vocab=64 --set units=16 --set seq=8)

# model files without a `model` line: the name is the file's base name, checked
q="$TMP/plain\"q.model"
sp="$TMP/my net#1.model"
grep -v '^model ' "$SRC/models/rnnlm.model" > "$q"
cp "$q" "$sp"

"$SB" search -m "$q" -p 2 "${S[@]}" --format json --db none > "$TMP/s.json"
check "search --format json: the name with '_' for its quote" jis "$TMP/s.json" '$.model' 'plain_q'
"$SB" candidates -m "$q" -p 2 "${S[@]}" --top 3 --format json > "$TMP/c.json"
check "candidates --format json: the name with '_' for its quote" jis "$TMP/c.json" '$.model' 'plain_q'
timeout -k 5 60 "$MPIEXEC" --oversubscribe --allow-run-as-root -np 2 "$SB" run -m "$q" "${S[@]}" \
    --strategy dp --steps 1 --format json --db none > "$TMP/r.json"
check "run --format json: the name with '_' for its quote" jis "$TMP/r.json" '$.model' 'plain_q'

db="$TMP/b.db"
timeout -k 5 120 "$SB" bench -m "$q" -p 1 "${S[@]}" --steps 1 --warmup 0 --search-algos pase \
    --db "$db" --launcher "$MPIEXEC --oversubscribe --allow-run-as-root" > "$TMP/bench.out" 2>&1
check "bench: exits 0" test $? = 0
check "bench: measurements of plain_q, all ok, configs JSON valid" test "$(sql "$db" \
    "SELECT count(*) = sum(x.status = 'ok') AND count(*) > 0
            AND sum(json_valid(s.configs_json)) = count(*)
            AND sum(json_extract(s.configs_json, '$.model') = 'plain_q') = count(*)
     FROM measurements x JOIN strategies s ON s.id = x.strategy_id
     JOIN models m ON m.id = s.model_id WHERE m.name = 'plain_q';")" = 1

"$SB" search -m "$sp" -p 2 "${S[@]}" --db none --save "$TMP/sp.strategy" > /dev/null
check "strategy file: the checked name, bare" grep -qx 'model my_net_1' "$TMP/sp.strategy"
sed -i 's/^model .*/model "my_net_1"/' "$TMP/sp.strategy" # the quoted form reads the same
timeout -k 5 60 "$MPIEXEC" --oversubscribe --allow-run-as-root -np 2 "$SB" run -m "$sp" "${S[@]}" \
    --strategy "$TMP/sp.strategy" --steps 1 --format json --db none > "$TMP/sp.json"
check "run from its own strategy (its name quoted)" jis "$TMP/sp.json" '$.model' 'my_net_1'
"$SB" export "$TMP/sp.strategy" --to jax -m "$sp" > "$TMP/sp.jax"
check "export reads the quoted name" grep -q '^# model my_net_1 ' "$TMP/sp.jax"
sed 's/^model .*/model "my net#2"/' "$TMP/sp.strategy" > "$TMP/other.strategy"
out=$("$SB" export "$TMP/other.strategy" --to jax -m "$sp" 2>&1 >/dev/null; \
      timeout 60 "$MPIEXEC" --oversubscribe --allow-run-as-root -np 1 "$SB" run -m "$sp" "${S[@]}" \
      --strategy "$TMP/other.strategy" --steps 1 --db none 2>&1)
check "another quoted name is refused" grep -q "strategy is for model 'my net#2', not 'my_net_1'" <<< "$out"

echo "$fails failed"
test "$fails" = 0
