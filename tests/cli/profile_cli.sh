#!/usr/bin/env bash
# tests/cli/profile_cli.sh: the predictive cost model end to end.
# - `profile`'s refusals (no model, an unknown option) exit 2 with a message;
# - `mpirun -np 2 shardbench profile` stores a profile (op configs, fits,
#   collectives) for its machine name and rank count;
# - search --machine FILE then prices with it ("cost model: predictive",
#   predicted_step_seconds in the JSON, another total than the analytic one),
#   --profiles none and another P fall back to the analytic terms, said so;
# - bench --profile 1 --random 2: profiles again while it holds the database
#   open, measures the random strategies with predicted seconds, and leaves
#   the database intact (a bench whose own open()/close() of the file
#   dropped its SQLite locks let the profile reset the WAL under it);
# - `profile --strategy FILE` profiles a strategy of one's own too, and a
#   file that is no strategy fails naming it, with nothing stored;
# - bench --profile without --machine: exit 2;
# - ranks that share a core (3 ranks on the one CPU taskset leaves them):
#   the profile says it prices each op on its busiest core, and stores
#   op seconds; unbound ranks on their own cores do not say so.
#
#   tests/cli/profile_cli.sh SHARDBENCH MPIEXEC SOURCE_DIR
set -uo pipefail

SB=${1:?usage: profile_cli.sh SHARDBENCH MPIEXEC SOURCE_DIR}
MPI=${2:?usage}
SRC=${3:?usage}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
T=$(mktemp -d "${TMPDIR:-/tmp}/profile_cli.XXXXXX")
trap 'rm -rf "$T"' EXIT
SMALL=(--set batch=4 --set image=67 --set classes=16 --set width_div=16)
fails=0
check() { # check NAME COMMAND...
    local name=$1
    shift
    if "$@"; then echo "ok   $name"; else fails=$((fails + 1)); echo "FAIL $name"; fi
}

"$SB" profile > "$T/o" 2> "$T/e"
check "profile without -m: exit 2 ($?)" test $? -eq 2
check "profile without -m: says -m is required" grep -q -- "-m MODEL is required" "$T/e"
"$SB" profile -m alexnet --bogus > "$T/o" 2> "$T/e"
check "profile --bogus: exit 2" test $? -eq 2
check "profile --bogus: names the option" grep -q -- "--bogus" "$T/e"

cp "$SRC/machines/h200-sxm.machine" "$T/box.machine"
DB=$T/r.db
"$MPI" -np 2 --bind-to none "$SB" profile -m alexnet "${SMALL[@]}" --machine box --db "$DB" \
    --steps 2 > "$T/o" 2> "$T/e"
rc=$?
check "profile on 2 ranks: exit 0 ($rc)" test "$rc" -eq 0
[ "$rc" -eq 0 ] || cat "$T/e"
check "profile: prints what it stored" grep -q "^profile 1: alexnet on 2 ranks, machine box" "$T/o"
check "profile: one profiles row for box at 2 ranks" \
    test "$(sqlite3 "$DB" "SELECT count(*) FROM profiles WHERE machine='box' AND ranks=2")" = 1
check "profile: every op config of the strategies stored, with seconds" \
    test "$(sqlite3 "$DB" "SELECT count(*) FROM op_profiles WHERE compute_s > 0")" -ge 10
check "profile: the all-reduce's alpha-beta over 2 ranks" \
    test "$(sqlite3 "$DB" "SELECT count(*) FROM coll_profiles WHERE kind='allreduce' AND grp=2")" = 1
check "profile: prints each strategy's step and what the fits leave (dp first)" \
    grep -q "^dp  *[0-9.]* " "$T/o"
check "profile: the relayouts' local copy fitted and stored (relay_local_s >= 0)" \
    test "$(sqlite3 "$DB" "SELECT count(*) FROM profiles WHERE relay_local_s >= 0")" = 1
check "profile, unbound ranks: no shared cores" bash -c "! grep -q '^shared cores' '$T/o'"

# 3 ranks bound to one CPU (the first this process may use): they take
# turns on it, and the op figures come from its CPU seconds
cpu=$(taskset -pc $$ | sed 's/.*: *//; s/[-,].*//')
taskset -c "$cpu" "$MPI" -np 3 --bind-to none "$SB" profile -m alexnet "${SMALL[@]}" --machine box \
    --db "$T/shared.db" --steps 2 --strategies 4 --no-collectives > "$T/o" 2> "$T/e"
rc=$?
check "profile, 3 ranks on CPU $cpu: exit 0 ($rc)" test "$rc" -eq 0
[ "$rc" -eq 0 ] || cat "$T/e"
check "profile, 3 ranks on one CPU: says the ops are priced on their core" \
    grep -q "^shared cores: up to 3 ranks a core" "$T/o"
check "profile, 3 ranks on one CPU: op configs stored with seconds" \
    test "$(sqlite3 "$T/shared.db" "SELECT count(*) FROM op_profiles WHERE compute_s > 0")" -ge 10

# --strategy FILE: a strategy of one's own, profiled after the seeded ones
"$SB" search -m alexnet -p 2 "${SMALL[@]}" --db none --save "$T/mine.strategy" > /dev/null 2>&1
"$MPI" -np 2 --bind-to none "$SB" profile -m alexnet "${SMALL[@]}" --machine other --db "$T/o.db" \
    --steps 1 --strategies 2 --no-collectives --strategy "$T/mine.strategy" > "$T/o2" 2> "$T/e"
check "profile --strategy FILE: exit 0" test $? -eq 0
check "profile --strategy FILE: 3 strategies (2 seeded, then the file)" \
    test "$(sqlite3 "$T/o.db" "SELECT strategies FROM profiles")" = 3
check "profile --strategy FILE: its row in the table" grep -q "mine.strategy" "$T/o2"
echo "not a strategy" > "$T/bad.strategy"
"$MPI" -np 2 --bind-to none "$SB" profile -m alexnet "${SMALL[@]}" --machine other --db "$T/o.db" \
    --steps 1 --strategies 2 --no-collectives --strategy "$T/bad.strategy" > "$T/o3" 2> "$T/e"
rc=$?
check "profile --strategy BAD: fails ($rc), nothing stored" \
    test "$rc" -ne 0 -a "$(sqlite3 "$T/o.db" "SELECT count(*) FROM profiles")" = 1
check "profile --strategy BAD: names the file" grep -q "bad.strategy" "$T/e"

"$SB" search -m alexnet -p 2 "${SMALL[@]}" --machine "$T/box.machine" --profiles "$DB" --db none \
    > "$T/s" 2> "$T/e"
check "search with the profile: exit 0" test $? -eq 0
check "search with the profile: says predictive" grep -q "cost model: predictive, profiles of box at 2 ranks" "$T/s"
"$SB" search -m alexnet -p 2 "${SMALL[@]}" --machine "$T/box.machine" --profiles "$DB" --db none \
    --format json > "$T/j" 2> "$T/e"
pred=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["predicted_step_seconds"])' "$T/j")
check "search JSON: predicted_step_seconds $pred is a time of this machine (1e-4..10 s)" \
    python3 -c "import sys; sys.exit(not 1e-4 < $pred < 10)"
"$SB" search -m alexnet -p 2 "${SMALL[@]}" --machine "$T/box.machine" --profiles none --db none \
    --format json > "$T/j0" 2> "$T/e"
pred0=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["predicted_step_seconds"])' "$T/j0")
check "search --profiles none: the analytic h200 time ($pred0) is not the profile's ($pred)" \
    python3 -c "import sys; sys.exit(not abs($pred0 - $pred) > 1e-3 * $pred)"
"$SB" search -m alexnet -p 4 "${SMALL[@]}" --machine "$T/box.machine" --profiles "$DB" --db none \
    > "$T/s4" 2> "$T/e"
check "search at P=4 (no profile there): the analytic terms, said so" \
    grep -q "analytic terms (no profile of box at 4 ranks" "$T/s4"

# paper --table2 prices its machine column with the profiles too (the paper's
# sizes: every config estimated from the small ones, the fits of alexnet at
# other sizes), and says so; --profiles none keeps the analytic terms
"$SB" paper --table2 -m alexnet -p 2 --machine "$T/box.machine" --profiles "$DB" > "$T/t2" 2> "$T/e"
check "paper --table2 with profiles: exit 0" test $? -eq 0
check "paper --table2: its machine column is the predictive model, fits at other sizes" \
    grep -q "machine file column: cost model: predictive, profiles of box at 2 ranks.*other sizes" "$T/t2"
"$SB" paper --table2 -m alexnet -p 2 --machine "$T/box.machine" --profiles "$DB" --format json \
    > "$T/t2j" 2> "$T/e"
check "paper --table2 JSON: machine.predictive true" python3 -c \
    'import json,sys; sys.exit(not json.load(open(sys.argv[1]))["alexnet"]["machine"]["predictive"])' "$T/t2j"
"$SB" paper --table2 -m alexnet -p 2 --machine "$T/box.machine" --profiles none --format json \
    > "$T/t2n" 2> "$T/e"
check "paper --table2 --profiles none: machine.predictive false" python3 -c \
    'import json,sys; sys.exit(json.load(open(sys.argv[1]))["alexnet"]["machine"]["predictive"])' "$T/t2n"

"$SB" bench -m alexnet -p 2 "${SMALL[@]}" --machine "$T/box.machine" --profile 1 --random 2 \
    --steps 1 --warmup 1 --top 2 --search-algos none --db "$DB" > "$T/b" 2> "$T/e"
rc=$?
check "bench --profile 1 --random 2: exit 0 ($rc)" test "$rc" -eq 0
[ "$rc" -eq 0 ] || cat "$T/e"
check "bench: profiled before measuring" grep -q "alexnet p=2: profiled (launch 1 of 1 of" "$T/b"
check "bench: priced by the profiles" grep -q "alexnet p=2: cost model: predictive" "$T/b"
check "bench: the database is intact (integrity_check)" \
    test "$(sqlite3 "$DB" "PRAGMA integrity_check")" = ok
check "bench: two profiles of box at 2 ranks now" \
    test "$(sqlite3 "$DB" "SELECT count(*) FROM profiles WHERE ranks=2")" = 2
check "bench: rand1 and rand2 measured with predicted seconds" \
    test "$(sqlite3 "$DB" "SELECT count(*) FROM measurements x JOIN strategies s ON s.id = x.strategy_id WHERE s.kind IN ('rand1','rand2') AND x.predicted_s > 0 AND x.status = 'ok'")" = 2

# --profile 2 --trials 2: launch 2 between the trial rounds, then every
# strategy priced again by the profiles as they are after it
"$SB" bench -m alexnet -p 2 "${SMALL[@]}" --machine "$T/box.machine" --profile 2 --trials 2 \
    --steps 1 --warmup 1 --top 2 --search-algos none --db "$DB" > "$T/b2" 2> "$T/e"
rc=$?
check "bench --profile 2 --trials 2: exit 0 ($rc)" test "$rc" -eq 0
[ "$rc" -eq 0 ] || cat "$T/e"
check "bench: launch 1, trial round 1, launch 2, trial round 2, in that order" python3 -c '
import sys
t = open(sys.argv[1]).read()
i = [t.find(s) for s in ("profiled (launch 1 of 2 of", "[trial 1/2]", "profiled (launch 2 of 2 of",
                         "[trial 2/2]", "priced again after the last profile launch")]
sys.exit(not (min(i) >= 0 and i == sorted(i)))' "$T/b2"
run2=$(sed -n 's/^run \([0-9][0-9]*\) in .*/\1/p' "$T/b2" | head -n 1)
"$SB" search -m alexnet -p 2 "${SMALL[@]}" --machine "$T/box.machine" --profiles "$DB" --algo dp \
    --db none --format json > "$T/dp2.json" 2> "$T/e"
# data parallel is one fixed strategy: priced now (search --algo dp) by the
# same profiles as the bench's last pricing, it has the price bench stored
# (prune is not asked: whether it lists dp depends on the measured figures)
check "bench: dp's stored price is the profiles' price after the last launch (as search --algo dp gives it now)" \
    python3 -c '
import json, sqlite3, sys
db, run, js = sys.argv[1:4]
now = json.load(open(js))["total_cost"]
c = sqlite3.connect(db)
rows = c.execute("SELECT DISTINCT s.predicted_cost, x.predicted_s FROM measurements x JOIN strategies s "
                 "ON s.id = x.strategy_id WHERE x.run_id = ? AND s.kind = ?", (run, "dp")).fetchall()
ok = len(rows) == 1 and abs(rows[0][0] / now - 1) < 1e-9 and rows[0][1] > 0
print(rows, now) if not ok else None
sys.exit(not ok)' "$DB" "$run2" "$T/dp2.json"

"$SB" bench -m alexnet -p 2 "${SMALL[@]}" --profile 1 --db "$T/x.db" > "$T/o" 2> "$T/e"
check "bench --profile without --machine: exit 2" test $? -eq 2
check "bench --profile without --machine: says why" grep -q "give --machine" "$T/e"

echo "profile_cli: $fails failure(s)"
[ "$fails" -eq 0 ]
