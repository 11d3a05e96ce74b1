#!/usr/bin/env bash
# tests/cli/bench_pipeline.sh SHARDBENCH SOURCE_DIR: the bench pipeline end to
# end on a tiny AlexNet at p = 2, into a temporary database:
#   bench (survivors given with --survivors: pase, bf and data parallel added
#   by bench), --resume, a bogus launcher (errors recorded, bench goes on), a
#   launcher that hangs (timeouts recorded); report (tables, numbers from the
#   database); plot (PNG and SVG files); regress on synthetic runs (a 20%
#   slowdown exits 1, 2% noise exits 0); clear errors for bad databases; a
#   pipelined survivor (stages, micro-batches, schedule, ZeRO, recomputation)
#   stored, printed and shown by report in extra columns.
# The bench process runs with leak checking; the MPI ranks without (OpenMPI
# keeps its allocations), through the launcher's `env`.
set -euo pipefail

SB=${1:?usage: bench_pipeline.sh SHARDBENCH SOURCE_DIR}
SRC=${2:?usage: bench_pipeline.sh SHARDBENCH SOURCE_DIR}
T=$(mktemp -d "${TMPDIR:-/tmp}/sb-bench-test-XXXXXX")
trap 'rm -rf "$T"' EXIT
export SHARDBENCH_MODELS=${SHARDBENCH_MODELS:-$SRC/models}
export SHARDBENCH_PLOTS=${SHARDBENCH_PLOTS:-$SRC/plots}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
MPI="env ASAN_OPTIONS=detect_leaks=0 mpirun --oversubscribe"
[ "$(id -u)" -eq 0 ] && MPI="$MPI --allow-run-as-root"
SETS=(--set batch=8 --set image=67 --set classes=16 --set width_div=16)
DB=$T/t.db
t0=$SECONDS

fail() { echo "FAIL: $*" >&2; exit 1; }
q() { sqlite3 -batch -noheader "$DB" "$1"; }
step() { echo "--- $* ($((SECONDS - t0)) s)"; }

# ---- survivors: the search's best, and a hand-made one (fc6 and fc7 split by
# output units); bench adds data parallel. The predicted cost of mp is left
# empty in the index: bench prices it with the cost model.
step survivors
S=$T/surv/alexnet-p2
mkdir -p "$S"
"$SB" search -m alexnet -p 2 "${SETS[@]}" --db none --save "$S/pase.strategy" >/dev/null
sed -E 's/^(op fc[67] dense) 1,1,1/\1 1,2,1/' "$S/pase.strategy" | grep -v '^cost' >"$S/mp.strategy"
cost() { awk '$1 == "cost" { print $2 }' "$1"; }
printf 'file\tkind\tpredicted_cost\tpredicted_mem_bytes\n' >"$S/index.tsv"
printf 'pase.strategy\tpase\t%s\t\n' "$(cost "$S/pase.strategy")" >>"$S/index.tsv"
printf 'mp.strategy\tmp\t\t\n' >>"$S/index.tsv"

# ---- bench ------------------------------------------------------------------------
step bench
# the launcher through a script that counts its launches: the 3 strategies
# of the one trial round train in one launch
printf '#!/bin/sh\necho launch >> "%s"\nexec %s "$@"\n' "$T/launches" "$MPI" >"$T/count.sh"
chmod +x "$T/count.sh"
"$SB" bench -m alexnet -p 2 "${SETS[@]}" --steps 2 --survivors "$T/surv" --db "$DB" \
    --launcher "$T/count.sh" >"$T/bench1.out" 2>&1 || { cat "$T/bench1.out"; fail "bench exited $?"; }
cat "$T/bench1.out"
[ "$(wc -l <"$T/launches")" = 1 ] || fail "one launch for the round expected, $(wc -l <"$T/launches") made"
[ "$(q 'SELECT count(*) FROM runs')" = 1 ] || fail "one run expected"
[ "$(q 'SELECT ended_at IS NOT NULL FROM runs WHERE id = 1')" = 1 ] || fail "run 1 not ended"
[ "$(q "SELECT count(*) FROM measurements WHERE run_id = 1 AND status = 'ok'")" = 3 ] ||
    fail "3 ok measurements expected: $(q 'SELECT status, message FROM measurements')"
[ "$(q "SELECT group_concat(kind) FROM (SELECT kind FROM strategies ORDER BY kind)")" = "dp,mp,pase" ] ||
    fail "kinds dp, mp, pase expected"
[ "$(q "SELECT count(DISTINCT predicted_cost) FROM strategies WHERE predicted_cost > 0")" = 3 ] ||
    fail "3 distinct predicted costs expected"
[ "$(q 'SELECT count(*) FROM correlations WHERE run_id = 1 AND n = 3')" = 1 ] ||
    fail "correlation of run 1 not stored"
[ "$(q "SELECT count(*) FROM search_runs WHERE run_id = 1 AND algo IN ('pase', 'bf')")" = 2 ] ||
    fail "the run's searches not stored"
q "SELECT command_line, devices, versions FROM runs WHERE id = 1" | grep -q "bench -m alexnet" ||
    fail "command line not stored"
grep -q "Spearman rho" "$T/bench1.out" || fail "rho not printed"

# ---- resume: one more survivor; the three measured are skipped ------------------------
step resume
printf 'pase.strategy\tpase-again\t%s\t\n' "$(cost "$S/pase.strategy")" >>"$S/index.tsv"
"$SB" bench -m alexnet -p 2 "${SETS[@]}" --steps 2 --survivors "$T/surv" --db "$DB" \
    --launcher "$MPI" --resume 1 >"$T/bench2.out" 2>&1 || { cat "$T/bench2.out"; fail "resume"; }
cat "$T/bench2.out"
[ "$(grep -c 'skipped$' "$T/bench2.out")" = 3 ] || fail "resume should skip 3"
[ "$(q 'SELECT count(*) FROM runs')" = 1 ] || fail "resume must not start a run"
[ "$(q 'SELECT count(*) FROM measurements WHERE run_id = 1')" = 4 ] || fail "4 measurements expected"
[ "$(q 'SELECT n FROM correlations WHERE run_id = 1')" = 4 ] || fail "correlation not updated"
"$SB" bench -m alexnet -p 2 --db "$DB" --resume 99 --survivors "$T/surv" >/dev/null 2>"$T/err" &&
    fail "resume of an unknown run must fail"
grep -q "no run with id 99" "$T/err" || fail "unclear error: $(cat "$T/err")"

# ---- a bogus launcher: every strategy recorded as an error, the bench goes on ----------
step bogus launcher
"$SB" bench -m alexnet -p 2 "${SETS[@]}" --steps 2 --survivors "$T/surv" --db "$DB" \
    --search-algos none --launcher "/nonexistent/mpirun -x" >"$T/bench3.out" 2>&1 ||
    { cat "$T/bench3.out"; fail "bogus launcher: bench must go on and exit 0"; }
[ "$(q "SELECT count(*) FROM measurements WHERE run_id = 2 AND status = 'error' AND message LIKE '%cannot run%/nonexistent/mpirun%'")" = 4 ] ||
    fail "4 error measurements expected: $(q 'SELECT status, message FROM measurements WHERE run_id = 2')"

# ---- a launcher that hangs: timeouts recorded -------------------------------------------
step timeout
# the sleep runs under a name of this test's own, so that another program's
# `sleep 30` on the machine is not taken for a launcher left behind
ln -s "$(command -v sleep)" "$T/hang-sleep"
printf '#!/bin/sh\nexec %s 30\n' "$T/hang-sleep" >"$T/hang.sh"
chmod +x "$T/hang.sh"
"$SB" bench -m alexnet -p 2 "${SETS[@]}" --steps 2 --survivors "$T/surv" --db "$DB" \
    --search-algos none --launcher "$T/hang.sh" --timeout 0.5 >"$T/bench4.out" 2>&1 ||
    { cat "$T/bench4.out"; fail "timeouts: bench must go on"; }
[ "$(q "SELECT count(*) FROM measurements WHERE run_id = 3 AND status = 'timeout'")" = 4 ] ||
    fail "4 timeouts expected"
sleep 0.2
for c in /proc/[0-9]*/cmdline; do
    if tr '\0' ' ' <"$c" 2>/dev/null | grep -q "^/bin/sh $T/hang.sh\|^$T/hang-sleep 30 "; then
        fail "a timed-out launcher is still running: $c"
    fi
done

# ---- report ---------------------------------------------------------------------------
step report
"$SB" report --db "$DB" --run 1 >"$T/report.md"
for h in "# shardbench report: run 1" "## Search time per model, P and algorithm (Table I form)" \
    "## Best strategy per layer group at p = 2 (Table II form)" \
    "## Speedup over data parallel (Fig. 6 as a table)" "## Cost-model fidelity" \
    "| model | params | p | algo | search s |" "| alexnet | 2 | "; do
    grep -qF -- "$h" "$T/report.md" || fail "report lacks '$h'"
done
# every measured strategy, with its median as stored
while IFS='|' read -r kind med; do
    grep -qE "^\| alexnet \| 2 \| $kind \| [0-9]+ \| .* \| ok \| $med \|" "$T/report.md" ||
        fail "report lacks $kind with median $med"
done < <(q "SELECT s.kind, printf('%.4f', x.step_median_s) FROM measurements x
            JOIN strategies s ON s.id = x.strategy_id WHERE x.run_id = 1")
rho=$(q "SELECT CASE WHEN rho IS NULL THEN '' ELSE printf('%.3f', rho) END FROM correlations WHERE run_id = 1")
if [ -n "$rho" ]; then
    grep -qE "\| 4 \| $rho \| - \| - \| stored by bench \|" "$T/report.md" || fail "report lacks rho $rho (and no MAPE under the reference model)"
fi
"$SB" report --db "$DB" --run 1 --format csv --table speedup >"$T/speedup.csv"
head -1 "$T/speedup.csv" | grep -qx "model,params,p,kind,strategies,failed,best median s,best min s,speedup over dp" ||
    fail "csv header: $(head -1 "$T/speedup.csv")"
grep -q '^alexnet,"batch=8,classes=16,image=67,width_div=16",2,dp,1,0,.*,1.000$' "$T/speedup.csv" ||
    fail "dp speedup 1.000 expected in csv"
"$SB" report --db "$DB" --run 2 | grep -q "| error | - | - | - | 0 | - | .*cannot run" ||
    fail "report of run 2 lacks the errors"

# ---- plot -------------------------------------------------------------------------------
step plot
"$SB" plot --db "$DB" --run 1 --out "$T/figs" >"$T/plot.out" || { cat "$T/plot.out"; fail "plot"; }
for f in speedup-alexnet search-alexnet trend-alexnet-p2; do
    [ -s "$T/figs/$f.png" ] && [ -s "$T/figs/$f.svg" ] || fail "$f.png/.svg missing or empty"
    [ "$(head -c 4 "$T/figs/$f.png" | od -An -tx1 | tr -d ' \n')" = 89504e47 ] ||
        fail "$f.png is not a PNG"
    grep -q "<svg" "$T/figs/$f.svg" || fail "$f.svg is not an SVG"
done
# the reference model priced this bench: FLOP, no seconds to put against the
# measured ones (tests/cli/figures.sh draws the fidelity figure)
grep -q "fidelity-alexnet-p2: no strategy has predicted seconds" "$T/plot.out" ||
    fail "plot does not say why there is no fidelity figure"
"$SB" plot --db "$DB" --run 1 --out "$T/figs2" --scripts /nonexistent 2>"$T/err" &&
    fail "plot without scripts must fail"
grep -q "cannot find the gnuplot scripts" "$T/err" || fail "unclear error: $(cat "$T/err")"

# ---- regress on synthetic runs ------------------------------------------------------------
step regress
# runs 10 (baseline), 11 (strategy 1 20% slower), 12 (2% noise) of strategies 1..3, five
# launches each (bench --trials 5); run 15: one launch only
q "INSERT INTO runs (id, host, git_commit, backend) VALUES (10, 'h', 'base', 'cpu'),
     (11, 'h', 'slow', 'cpu'), (12, 'h', 'noisy', 'cpu'), (15, 'h', 'once', 'cpu');
   INSERT INTO measurements (run_id, strategy_id, step_median_s, step_min_s, step_max_s, steps, status)
   VALUES (10, 1, 0.10000, 0.09700, 0.10400, 5, 'ok'),
          (10, 1, 0.10100, 0.09797, 0.10504, 5, 'ok'),
          (10, 1, 0.09900, 0.09603, 0.10296, 5, 'ok'),
          (10, 1, 0.10200, 0.09894, 0.10608, 5, 'ok'),
          (10, 1, 0.09800, 0.09506, 0.10192, 5, 'ok'),
          (10, 2, 0.20000, 0.19400, 0.20800, 5, 'ok'),
          (10, 2, 0.20200, 0.19594, 0.21008, 5, 'ok'),
          (10, 2, 0.19800, 0.19206, 0.20592, 5, 'ok'),
          (10, 2, 0.20400, 0.19788, 0.21216, 5, 'ok'),
          (10, 2, 0.19600, 0.19012, 0.20384, 5, 'ok'),
          (10, 3, 0.05000, 0.04850, 0.05200, 5, 'ok'),
          (10, 3, 0.05050, 0.04899, 0.05252, 5, 'ok'),
          (10, 3, 0.04950, 0.04802, 0.05148, 5, 'ok'),
          (10, 3, 0.05100, 0.04947, 0.05304, 5, 'ok'),
          (10, 3, 0.04900, 0.04753, 0.05096, 5, 'ok'),
          (11, 1, 0.12120, 0.11756, 0.12605, 5, 'ok'),
          (11, 1, 0.11940, 0.11582, 0.12418, 5, 'ok'),
          (11, 1, 0.12180, 0.11815, 0.12667, 5, 'ok'),
          (11, 1, 0.11880, 0.11524, 0.12355, 5, 'ok'),
          (11, 1, 0.12000, 0.11640, 0.12480, 5, 'ok'),
          (11, 2, 0.20200, 0.19594, 0.21008, 5, 'ok'),
          (11, 2, 0.19900, 0.19303, 0.20696, 5, 'ok'),
          (11, 2, 0.20300, 0.19691, 0.21112, 5, 'ok'),
          (11, 2, 0.19800, 0.19206, 0.20592, 5, 'ok'),
          (11, 2, 0.20000, 0.19400, 0.20800, 5, 'ok'),
          (11, 3, 0.05050, 0.04899, 0.05252, 5, 'ok'),
          (11, 3, 0.04975, 0.04826, 0.05174, 5, 'ok'),
          (11, 3, 0.05075, 0.04923, 0.05278, 5, 'ok'),
          (11, 3, 0.04950, 0.04802, 0.05148, 5, 'ok'),
          (11, 3, 0.05000, 0.04850, 0.05200, 5, 'ok'),
          (12, 1, 0.10100, 0.09797, 0.10504, 5, 'ok'),
          (12, 1, 0.09950, 0.09652, 0.10348, 5, 'ok'),
          (12, 1, 0.10150, 0.09845, 0.10556, 5, 'ok'),
          (12, 1, 0.09900, 0.09603, 0.10296, 5, 'ok'),
          (12, 1, 0.10000, 0.09700, 0.10400, 5, 'ok'),
          (12, 2, 0.20604, 0.19986, 0.21428, 5, 'ok'),
          (12, 2, 0.20298, 0.19689, 0.21110, 5, 'ok'),
          (12, 2, 0.20706, 0.20085, 0.21534, 5, 'ok'),
          (12, 2, 0.20196, 0.19590, 0.21004, 5, 'ok'),
          (12, 2, 0.20400, 0.19788, 0.21216, 5, 'ok'),
          (12, 3, 0.05000, 0.04850, 0.05199, 5, 'ok'),
          (12, 3, 0.04925, 0.04777, 0.05122, 5, 'ok'),
          (12, 3, 0.05024, 0.04874, 0.05225, 5, 'ok'),
          (12, 3, 0.04900, 0.04753, 0.05097, 5, 'ok'),
          (12, 3, 0.04950, 0.04802, 0.05148, 5, 'ok'),
          (15, 1, 0.2, 0.19, 0.21, 5, 'ok');"
set +e
"$SB" regress --db "$DB" --baseline 10 --candidate 11 >"$T/reg1.md"; r1=$?
"$SB" regress --db "$DB" --baseline 10 --candidate 12 >"$T/reg2.md"; r2=$?
"$SB" regress --db "$DB" --baseline 11 --candidate 10 --threshold 0.05 >"$T/reg3.md"; r3=$?
"$SB" regress --db "$DB" --baseline 10 --candidate 77 2>"$T/err"; r4=$?
"$SB" regress --db "$DB" --baseline 10 --candidate 15 >"$T/reg7.md"; r7=$?
set -e
cat "$T/reg1.md"
[ $r1 = 1 ] || fail "20% slowdown: exit 1 expected, got $r1"
grep -q "| 1 | 5, 0.1000 | 5, 0.1200 | 1.200 \[1.1[0-9]*, 1.2[0-9]*\] | 0.00397 | - (0) | \*\*REGRESSION\*\* |" "$T/reg1.md" ||
    fail "regression row missing"
grep -q "\*\*1 confirmed regression\*\*" "$T/reg1.md" || fail "summary missing"
[ $r2 = 0 ] || { cat "$T/reg2.md"; fail "2% noise: exit 0 expected, got $r2"; }
[ "$(grep -c 'within noise |' "$T/reg2.md")" = 3 ] || fail "noise rows"
grep -q "^no regression$" "$T/reg2.md" || fail "no 'no regression' line"
[ $r3 = 0 ] || fail "an improvement is not a regression (exit $r3)"
grep -q "| improvement |" "$T/reg3.md" || fail "improvement not reported"
[ $r4 = 2 ] || fail "unknown run: exit 2 expected, got $r4"
grep -q "no run with id 77" "$T/err" || fail "unclear error: $(cat "$T/err")"
# one launch (twice as slow) is no evidence: not enough data, exit 0
[ $r7 = 0 ] || { cat "$T/reg7.md"; fail "one launch: exit 0 expected, got $r7"; }
grep -q "| 1, 0.2000 | 2.000 | - | - (0) | not enough data |" "$T/reg7.md" ||
    { cat "$T/reg7.md"; fail "one launch: not enough data expected"; }
# a strategy that ran and now fails is a regression
q "INSERT INTO runs (id, host, git_commit, backend) VALUES (13, 'h', 'broken', 'cpu');
   INSERT INTO measurements (run_id, strategy_id, steps, status, message)
   VALUES (13, 1, 0, 'error', 'rank 1: boom');"
set +e
"$SB" regress --db "$DB" --baseline 10 --candidate 13 >"$T/reg5.md"; r5=$?
set -e
[ $r5 = 1 ] || fail "a new failure must exit 1"
grep -q "now fails" "$T/reg5.md" || fail "new failure not reported"

# the same configs under another kind label (pase-again, strategy 4) are the same strategy
q "INSERT INTO runs (id, host, git_commit, backend) VALUES (14, 'h', 'relabelled', 'cpu');
   INSERT INTO measurements (run_id, strategy_id, step_median_s, step_min_s, steps, status)
   VALUES (14, 4, 0.101, 0.098, 5, 'ok'), (14, 4, 0.100, 0.098, 5, 'ok'),
          (14, 4, 0.102, 0.098, 5, 'ok'), (14, 4, 0.099, 0.098, 5, 'ok');"
"$SB" regress --db "$DB" --baseline 10 --candidate 14 >"$T/reg6.md" || fail "relabelled: exit $?"
grep -q "| pase | 1 | 5, 0.1000 | 4, 0.1005 | 1.005 \[.*within noise |" "$T/reg6.md" ||
    { cat "$T/reg6.md"; fail "relabelled strategy not matched"; }

# ---- damaged, foreign, newer and missing databases: clear errors, files untouched ---------
step bad databases
head -c 3000 "$DB" >"$T/trunc.db"
printf 'not a database at all, just text padding padding\n' >"$T/text.db"
sqlite3 "$T/newer.db" "PRAGMA user_version = 99; CREATE TABLE x (a);"
for case in "trunc.db:damaged" "text.db:not a database" "newer.db:newer than this" \
            "missing.db:cannot open"; do
    f=${case%%:*} want=${case#*:}
    sum=$(if [ -e "$T/$f" ]; then cksum <"$T/$f"; else echo none; fi)
    for cmd in "report --run 1" "plot --run 1 --out $T/figs3" "regress --baseline 1 --candidate 1"; do
        # shellcheck disable=SC2086
        if "$SB" $cmd --db "$T/$f" >/dev/null 2>"$T/err"; then fail "$cmd on $f succeeded"; fi
        grep -q "$want" "$T/err" || fail "$cmd on $f: unclear error: $(cat "$T/err")"
        grep -q "^shardbench: .*$f" "$T/err" || fail "$cmd on $f: error does not name the file"
    done
    [ "$sum" = "$(if [ -e "$T/$f" ]; then cksum <"$T/$f"; else echo none; fi)" ] ||
        fail "$f was changed (or created)"
done
"$SB" bench -m alexnet -p 2 --survivors "$T/surv" --db "$T/text.db" >/dev/null 2>"$T/err" &&
    fail "bench on a foreign file must fail"
grep -q "not a database" "$T/err" || fail "bench: unclear error: $(cat "$T/err")"

# ---- a pipelined survivor: stages, micro-batches, schedule, ZeRO and recomputation
# stored (the search's JSON keys), printed by bench, shown by report as columns;
# a run of plain strategies (run 1 above) keeps its columns as they were
step pipeline survivor
PS=$T/psurv/alexnet-p2
mkdir -p "$PS"
"$SB" search -m alexnet -p 2 "${SETS[@]}" --db none --stages 2 --microbatches 2 --schedule gpipe \
    --zero 1 --recompute all --save "$PS/pipe.strategy" >/dev/null
printf 'file\tkind\tpredicted_cost\tpredicted_mem_bytes\npipe.strategy\tpipe\t\t\n' >"$PS/index.tsv"
PDB=$T/pipe.db
"$SB" bench -m alexnet -p 2 "${SETS[@]}" --steps 2 --survivors "$T/psurv" --db "$PDB" \
    --search-algos none --launcher "$MPI" >"$T/bench5.out" 2>&1 || { cat "$T/bench5.out"; fail "pipeline bench"; }
pq() { sqlite3 -batch -noheader "$PDB" "$1"; }
[ "$(pq "SELECT count(*) FROM measurements WHERE status = 'ok'")" = 2 ] ||
    fail "pipe and dp ok expected: $(pq 'SELECT status, message FROM measurements')"
[ "$(pq "SELECT json_array_length(configs_json, '\$.stages') || ' ' || json_extract(configs_json, '\$.microbatches') || ' ' || json_extract(configs_json, '\$.schedule') || ' ' || json_extract(configs_json, '\$.zero') || ' ' || json_array_length(configs_json, '\$.recompute') FROM strategies WHERE kind = 'pipe'")" = "2 2 gpipe 1 13" ] ||
    fail "pipe's stored extras: $(pq "SELECT configs_json FROM strategies WHERE kind = 'pipe'")"
[ "$(pq "SELECT predicted_cost > 0 FROM strategies WHERE kind = 'pipe'")" = 1 ] ||
    fail "pipe priced at the file's cost"
grep -q "pipe .*ok .*pipe.strategy  S=2 M=2 gpipe zero 1 recompute 13$" "$T/bench5.out" ||
    fail "bench's line lacks the pipeline: $(grep pipe "$T/bench5.out")"
"$SB" report --db "$PDB" --run 1 >"$T/report5.md"
grep -qF "| peak MB | message | stages | micro-batches | schedule | zero | recomputed ops |" "$T/report5.md" ||
    fail "report's measurements lack the extra columns"
grep -qE "^\| alexnet \| 2 \| pipe \| [0-9]+ \| .* \| ok \| .* \| 2 \| 2 \| gpipe \| 1 \| 13 \|$" "$T/report5.md" ||
    fail "report lacks pipe's S, M, schedule, zero, recompute"
grep -qE "^\| alexnet \| 2 \| dp \| [0-9]+ \| .* \| ok \| .* \| 1 \| 1 \| - \| 0 \| 0 \|$" "$T/report5.md" ||
    fail "report lacks dp's plain extras"
# Table II shows the fastest strategy: with dp's measurement dropped (a copy),
# the pipeline, whose rows then carry the extra columns
cp "$PDB" "$T/pipe-only.db"
sqlite3 "$T/pipe-only.db" "DELETE FROM measurements WHERE strategy_id IN (SELECT id FROM strategies WHERE kind = 'dp')"
"$SB" report --db "$T/pipe-only.db" --run 1 --table strategies >"$T/report6.md"
grep -qF "| iteration dims | config | stages | micro-batches | schedule | zero | recomputed ops |" "$T/report6.md" ||
    fail "report's Table II lacks the extra columns"
grep -qE "^\| alexnet \| 2 \| pipe \(.*\| 2 \| 2 \| gpipe \| 1 \| 13 \|$" "$T/report6.md" ||
    fail "report's Table II lacks pipe's S, M, schedule, zero, recompute"
"$SB" report --db "$PDB" --run 1 --format csv --table measurements | sed -n 1p |
    grep -qx "model,p,kind,strategy,predicted FLOP,status,median s,min s,max s,steps,peak MB,message,stages,micro-batches,schedule,zero,recomputed ops" ||
    fail "csv header of the measurements with extras"
! grep -q "micro-batches" "$T/report.md" || fail "a plain run's report must keep its columns"

# ---- trial rounds in rotated orders ----------------------------------------------------
step rotated rounds
# 3 rounds of the first bench's survivors, each one launch: round t starts
# t/3 of the way through round 1's order (n strategies: by floor(t n / 3))
printf '#!/bin/sh\nfor w in "$@"; do case $w in *.strategy) printf "%%s " "${w##*/}";; esac; done >> "%s"\necho >> "%s"\nexec %s "$@"\n' \
    "$T/orders" "$T/orders" "$MPI" >"$T/order.sh"
chmod +x "$T/order.sh"
"$SB" bench -m alexnet -p 2 "${SETS[@]}" --steps 1 --trials 3 --survivors "$T/surv" \
    --search-algos none --db "$T/rot.db" --launcher "$T/order.sh" >"$T/bench7.out" 2>&1 ||
    { cat "$T/bench7.out"; fail "rotated bench"; }
[ "$(wc -l <"$T/orders")" = 3 ] || { cat "$T/orders"; fail "3 round launches expected"; }
awk 'NR == 1 { n = NF; for (i = 1; i <= n; i++) w[i - 1] = $i; if (n < 3) bad = 1; next }
     { off = int((NR - 1) * n / 3); for (i = 0; i < n; i++) if ($(i + 1) != w[(i + off) % n]) bad = 1 }
     END { exit bad }' "$T/orders" || { cat "$T/orders"; fail "rounds 2 and 3 must be round 1 rotated"; }
[ "$(sqlite3 -batch -noheader "$T/rot.db" "SELECT count(*) FROM measurements WHERE status = 'ok'")" = \
    "$(($(awk 'NR == 1 { print NF }' "$T/orders") * 3))" ] || fail "every strategy measured in each round"

step "all passed"
