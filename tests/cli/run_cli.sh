#!/usr/bin/env bash
# tests/cli/run_cli.sh: integration tests of `mpirun -np P shardbench run`.
#
#   tests/cli/run_cli.sh SHARDBENCH [MPIEXEC]
#
# Runs the real command under mpirun on a tiny AlexNet and checks what a
# user sees: the JSON report (parsed and checked with SQLite's JSON
# functions, so no other tool is needed), the results database, and the
# errors: a strategy saved for another P, a strategy of another model, an
# unknown --set parameter, a model that does not exist, a ZeRO stage out of
# range (--zero 3 must train as --zero 0 does, with a lower peak; ZeRO
# with checkpoints saves). Each error must
# come as one message from rank 0 with every rank exiting 2, within a
# timeout (no hang). Registered with ctest by tests/tests.cmake; about
# 10-20 s on two cores. Needs sqlite3 (the shell) and bash.
set -uo pipefail

SB=${1:?usage: run_cli.sh SHARDBENCH [MPIEXEC]}
MPIEXEC=${2:-mpiexec}
LIMIT=${RUN_CLI_TIMEOUT:-20}   # seconds for any one mpirun: a hang fails, not blocks
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OPENBLAS_NUM_THREADS=1
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}

TMP=$(mktemp -d "${TMPDIR:-/tmp}/run_cli.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
SMALL=(--set batch=4 --set image=67 --set classes=16 --set width_div=16)
fails=0
checks=0

pass() { checks=$((checks + 1)); echo "ok   $1"; }
fail() { checks=$((checks + 1)); fails=$((fails + 1)); echo "FAIL $1"; }
check() { # check NAME CONDITION-COMMAND...
    local name=$1
    shift
    if "$@"; then pass "$name"; else fail "$name"; fi
}
sql() { sqlite3 -batch -noheader "$@"; }
mpi() { # mpi NP ARGS...: shardbench run under mpirun, with the time limit
    local np=$1
    shift
    timeout -k 5 "$LIMIT" "$MPIEXEC" --oversubscribe --allow-run-as-root -np "$np" "$SB" "$@"
}
# One value of the JSON in file $1 at path $2 ('$.a.b'), via SQLite.
jget() { sql :memory: "SELECT json_extract(readfile('$1'), '$2');"; }

# ---- a data-parallel run: JSON report and database --------------------------

db="$TMP/runs.db"
mpi 2 run -m alexnet "${SMALL[@]}" --strategy dp --steps 2 --format json --db "$db" \
    > "$TMP/dp.json" 2> "$TMP/dp.err"
rc=$?
check "dp run exits 0 (got $rc)" test "$rc" -eq 0
[ "$rc" -eq 0 ] || sed 's/^/    /' "$TMP/dp.err"
check "dp run prints exactly one line of JSON" test "$(wc -l < "$TMP/dp.json")" -eq 1
check "the report is valid JSON" \
    test "$(sql :memory: "SELECT json_valid(readfile('$TMP/dp.json'));")" = 1
check "losses: 3 (1 warm-up + 2 steps)" test "$(jget "$TMP/dp.json" '$.losses' | tr -cd , | wc -c)" -eq 2
check "losses are numbers near ln(16) = 2.77" test "$(sql :memory: \
    "SELECT count(*) FROM json_each(json_extract(readfile('$TMP/dp.json'), '$.losses'))
     WHERE type = 'real' AND value > 2.0 AND value < 3.5;")" = 3
check "warmup is 1" test "$(jget "$TMP/dp.json" '$.warmup')" = 1
check "step_seconds: 0 < min <= median <= max" test "$(sql :memory: \
    "WITH j(v) AS (SELECT readfile('$TMP/dp.json'))
     SELECT json_extract(v,'$.step_seconds.min') > 0
        AND json_extract(v,'$.step_seconds.min') <= json_extract(v,'$.step_seconds.median')
        AND json_extract(v,'$.step_seconds.median') <= json_extract(v,'$.step_seconds.max')
     FROM j;")" = 1
check "samples_per_second = batch / median" test "$(sql :memory: \
    "WITH j(v) AS (SELECT readfile('$TMP/dp.json'))
     SELECT abs(json_extract(v,'$.samples_per_second') * json_extract(v,'$.step_seconds.median') - 4) < 1e-3
     FROM j;")" = 1
# (at batch 4 the model's cutoff of 4 leaves the batch unsplit: 'dp' runs every
# op on rank 0 and rank 1 holds nothing, so only rank 0's peak must be > 0)
check "peak_bytes_per_rank: 2 entries, rank 0's positive" test "$(sql :memory: \
    "WITH j(v) AS (SELECT readfile('$TMP/dp.json'))
     SELECT json_array_length(v, '$.peak_bytes_per_rank') = 2
        AND json_extract(v, '$.peak_bytes_per_rank[0]') > 0
        AND json_extract(v, '$.peak_bytes_per_rank[1]') >= 0 FROM j;")" = 1
check "ops: 14 entries with compute, comm and other seconds" test "$(sql :memory: \
    "SELECT count(*) FROM json_each(json_extract(readfile('$TMP/dp.json'), '$.ops'))
     WHERE json_type(value, '$.compute_seconds') IN ('real', 'integer')
       AND json_type(value, '$.comm_seconds') IN ('real', 'integer')
       AND json_type(value, '$.other_seconds') IN ('real', 'integer')
       AND json_extract(value, '$.compute_seconds') >= 0
       AND json_extract(value, '$.other_seconds') >= 0;")" = 14
# the executor's own work around the ops (buffers taken and zeroed, inputs
# generated) is booked to them: some of it on rank 0, which runs every op
check "ops: the executor's work around them is booked (other_seconds > 0)" test "$(sql :memory: \
    "SELECT sum(json_extract(value, '$.other_seconds')) > 0
     FROM json_each(json_extract(readfile('$TMP/dp.json'), '$.ops'));")" = 1
check "the database has the run, ended" \
    test "$(sql "$db" "SELECT count(*) FROM runs WHERE ended_at IS NOT NULL;")" = 1
check "the database has one 'ok' measurement of 2 steps for alexnet, p=2, dp" test "$(sql "$db" \
    "SELECT count(*) FROM measurements me JOIN strategies s ON s.id = me.strategy_id
     JOIN models m ON m.id = s.model_id
     WHERE me.status = 'ok' AND me.steps = 2 AND me.step_median_s > 0 AND m.name = 'alexnet'
       AND s.p = 2 AND s.kind = 'dp';")" = 1
check "the stored median is the printed one" test "$(sql "$db" \
    "SELECT abs(step_median_s - json_extract(readfile('$TMP/dp.json'), '$.step_seconds.median')) < 1e-6
     FROM measurements;")" = 1

# ---- errors: one message from rank 0, every rank exits 2, no hang ---------------

# Runs shardbench under mpirun with every rank wrapped so that its own exit
# status is written to $TMP/NAME.rank.R (the wrapper exits 0, so mpirun does
# not kill the other ranks before they report). Sets rc (mpirun's own).
ranked() { # ranked NAME NP ARGS...
    local name=$1 np=$2
    shift 2
    rm -f "$TMP/$name".rank.*
    timeout -k 5 "$LIMIT" "$MPIEXEC" --oversubscribe --allow-run-as-root -np "$np" \
        sh -c '"$@"; echo $? > "'"$TMP/$name"'.rank.${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-x}}"' \
        sh "$SB" "$@" > "$TMP/$name.out" 2> "$TMP/$name.err"
    rc=$?
}
expect_error() { # expect_error NAME NP PATTERN ARGS...
    local name=$1 np=$2 pattern=$3
    shift 3
    ranked "$name" "$np" "$@"
    check "$name: no hang (mpirun rc $rc, not 124/137)" test "$rc" -ne 124 -a "$rc" -ne 137
    local r codes=""
    for ((r = 0; r < np; r++)); do
        codes+="$(cat "$TMP/$name.rank.$r" 2>/dev/null || echo none) "
    done
    check "$name: every rank exits 2 (got: $codes)" test "$codes" = "$(printf '2 %.0s' $(seq "$np"))"
    local msgs
    msgs=$(grep -c '^shardbench: ' "$TMP/$name.err")
    check "$name: one message (got $msgs)" test "$msgs" -eq 1
    if grep -q '^shardbench: .*'"$pattern" "$TMP/$name.err"; then
        pass "$name: message names the fault"
    else
        fail "$name: message names the fault (/$pattern/)"
    fi
    sed -n 's/^shardbench: /    message: /p' "$TMP/$name.err"
    check "$name: no report on stdout" test ! -s "$TMP/$name.out"
}

"$SB" search -m alexnet -p 4 "${SMALL[@]}" --save "$TMP/p4.strategy" --db none > /dev/null
check "search --save for p=4 exits 0" test $? -eq 0
expect_error "p=4 strategy on 2 ranks" 2 'p=4' \
    run -m alexnet "${SMALL[@]}" --strategy "$TMP/p4.strategy" --db "$TMP/err.db"

"$SB" search -m rnnlm -p 2 --set vocab=24 --set units=8 --set seq=4 --set layers=2 \
    --set batch=4 --save "$TMP/rnnlm.strategy" --db none > /dev/null
check "search --save of rnnlm exits 0" test $? -eq 0
expect_error "strategy of another model" 2 "rnnlm" \
    run -m alexnet "${SMALL[@]}" --strategy "$TMP/rnnlm.strategy" --db "$TMP/err.db"

expect_error "unknown --set parameter" 2 "nosuch" \
    run -m alexnet "${SMALL[@]}" --set nosuch=3 --strategy dp --db "$TMP/err.db"

expect_error "model that does not exist" 2 "no-such-model" \
    run -m no-such-model --strategy dp --db "$TMP/err.db"

expect_error "--gemm-precision bf16 on the cpu backend" 1 "fp32 only" \
    run -m alexnet "${SMALL[@]}" --strategy dp --gemm-precision bf16 --db "$TMP/err.db"
expect_error "--gemm-precision that does not exist" 1 "fp8" \
    run -m alexnet "${SMALL[@]}" --strategy dp --gemm-precision fp8 --db "$TMP/err.db"
# --precision is the training recipe everywhere (search's meaning): run trains fp32
expect_error "run --precision bf16 (a mixed recipe) names --gemm-precision" 1 "gemm-precision" \
    run -m alexnet "${SMALL[@]}" --strategy dp --precision bf16 --db "$TMP/err.db"
expect_error "run --precision that does not exist" 1 "fp4" \
    run -m alexnet "${SMALL[@]}" --strategy dp --precision fp4 --db "$TMP/err.db"
expect_error "--comm on the cpu backend" 1 "only the cuda backend" \
    run -m alexnet "${SMALL[@]}" --strategy dp --comm nccl --db "$TMP/err.db"

# mpirun itself reports the failure too
mpi 2 run -m no-such-model --strategy dp --db none > /dev/null 2>&1
rc=$?
check "mpirun exits non-zero on an error (got $rc)" test "$rc" -ne 0 -a "$rc" -ne 124

# ---- --optimizer adam: trains, and differs from sgd; bad values refused ---------

mpi 2 run -m alexnet "${SMALL[@]}" --strategy dp --steps 2 --format json --db none \
    --optimizer adam > "$TMP/adam.json" 2> "$TMP/adam.err"
rc=$?
check "run --optimizer adam exits 0 (got $rc)" test "$rc" -eq 0
[ "$rc" -eq 0 ] || sed 's/^/    /' "$TMP/adam.err"
check "adam's last loss differs from sgd's (same seed, same first loss)" test \
    "$(sql :memory: "SELECT json_extract(readfile('$TMP/adam.json'), '$.losses[0]') =
                            json_extract(readfile('$TMP/dp.json'), '$.losses[0]')
                        AND json_extract(readfile('$TMP/adam.json'), '$.losses[2]') <>
                            json_extract(readfile('$TMP/dp.json'), '$.losses[2]');")" = 1
expect_error "adam with a beta2 of 1" 2 "--beta2: '1' is not a number in \[0, 1)" \
    run -m alexnet "${SMALL[@]}" --strategy dp --optimizer adam --beta2 1 --db none
expect_error "an unknown optimizer" 2 "--optimizer: 'lion' is not sgd or adam" \
    run -m alexnet "${SMALL[@]}" --strategy dp --optimizer lion --db none
# adam under ZeRO with checkpoints: saved (the moments gathered from their
# slices; resuming them: ckpt_zero.sh)
mpi 2 run -m alexnet "${SMALL[@]}" --strategy dp --optimizer adam --zero 1 --checkpoint "$TMP/cka" \
    --db none > /dev/null 2>&1
rc=$?
check "adam under ZeRO with checkpoints exits 0 (got $rc)" test "$rc" -eq 0
check "adam under ZeRO: the checkpoint holds the moments" grep -q "adam_m" "$(ls "$TMP"/cka/step-*/ckpt.index | head -1)"

# ---- --zero: the same training, less memory; bad values refused --------------------
# (batch 16: data parallelism splits it at the model's cutoff, so every
# weight is replicated on both ranks)

for z in 0 3; do
    mpi 2 run -m alexnet "${SMALL[@]}" --set batch=16 --strategy dp --steps 2 --format json \
        --db none --zero $z > "$TMP/zero$z.json" 2> "$TMP/zero$z.err"
    rc=$?
    check "run --zero $z exits 0 (got $rc)" test "$rc" -eq 0
    [ "$rc" -eq 0 ] || sed 's/^/    /' "$TMP/zero$z.err"
done
check "--zero 3: the losses of --zero 0 (within 1e-6)" test "$(sql :memory: "
    SELECT count(*) FROM json_each(json_extract(readfile('$TMP/zero3.json'), '$.losses')) AS a
      JOIN json_each(json_extract(readfile('$TMP/zero0.json'), '$.losses')) AS b ON a.key = b.key
     WHERE abs(a.value - b.value) <= 1e-6 * abs(b.value);")" = 3
check "--zero 3: a lower peak than --zero 0 on both ranks" test "$(sql :memory: "
    SELECT count(*) FROM json_each(json_extract(readfile('$TMP/zero3.json'), '$.peak_bytes_per_rank')) AS a
      JOIN json_each(json_extract(readfile('$TMP/zero0.json'), '$.peak_bytes_per_rank')) AS b
        ON a.key = b.key
     WHERE a.value < b.value;")" = 2
expect_error "a ZeRO stage of 4" 2 "--zero: '4' is not a ZeRO stage 0, 1, 2 or 3" \
    run -m alexnet "${SMALL[@]}" --strategy dp --zero 4 --db none
mpi 2 run -m alexnet "${SMALL[@]}" --strategy dp --zero 3 --checkpoint "$TMP/ckz" --db none \
    > /dev/null 2>&1
rc=$?
check "zero 3 with checkpoints exits 0 (got $rc)" test "$rc" -eq 0

# ---- --strategy best on 3 ranks ----------------------------------------------------

mpi 3 run -m alexnet "${SMALL[@]}" --strategy best --steps 1 --format json --db "$db" \
    > "$TMP/best.json" 2> "$TMP/best.err"
rc=$?
check "best on 3 ranks exits 0 (got $rc)" test "$rc" -eq 0
[ "$rc" -eq 0 ] || sed 's/^/    /' "$TMP/best.err"
check "best: valid JSON with p = 3" test "$(sql :memory: \
    "SELECT json_valid(readfile('$TMP/best.json')) AND json_extract(readfile('$TMP/best.json'), '$.p') = 3;")" = 1
check "best: 2 losses, 3 ranks' peaks" test "$(sql :memory: \
    "WITH j(v) AS (SELECT readfile('$TMP/best.json'))
     SELECT json_array_length(v, '$.losses') = 2 AND json_array_length(v, '$.peak_bytes_per_rank') = 3
     FROM j;")" = 1
check "best: the database has a second 'ok' measurement (pase, p=3)" test "$(sql "$db" \
    "SELECT count(*) FROM measurements me JOIN strategies s ON s.id = me.strategy_id
     WHERE me.status = 'ok' AND s.p = 3 AND s.kind = 'pase';")" = 1
# the same seed and data on any strategy: the first loss equals the dp run's
check "best: first loss equals the dp run's (same data, any strategy)" test "$(sql :memory: \
    "SELECT abs(json_extract(readfile('$TMP/best.json'), '$.losses[0]')
              - json_extract(readfile('$TMP/dp.json'), '$.losses[0]')) < 1e-4;")" = 1

# ---- several --strategy in one launch (bench's trial rounds) ---------------------

"$SB" search -m alexnet -p 2 "${SMALL[@]}" --flops 0.01 --db none --save "$TMP/two.strategy" > /dev/null
mpi 2 run -m alexnet "${SMALL[@]}" --strategy dp --strategy "$TMP/two.strategy" --steps 2 \
    --format json --db none > "$TMP/multi.json" 2> "$TMP/multi.err"
rc=$?
check "two strategies in one launch exit 0 (got $rc)" test "$rc" -eq 0
[ "$rc" -eq 0 ] || sed 's/^/    /' "$TMP/multi.err"
check "  ... one JSON line each, in order" test "$(sed -n 's/.*"strategy":"\([^"]*\)".*/\1/p' "$TMP/multi.json" | tr '\n' ' ')" = "dp $TMP/two.strategy "
sed -n 1p "$TMP/multi.json" > "$TMP/multi1.json"
sed -n 2p "$TMP/multi.json" > "$TMP/multi2.json"
check "  ... the dp line's losses equal the dp run's alone" test "$(sql :memory: \
    "SELECT abs(json_extract(readfile('$TMP/multi1.json'), '$.losses[2]')
              - json_extract(readfile('$TMP/dp.json'), '$.losses[2]')) < 1e-6;")" = 1
mpi 2 run -m alexnet "${SMALL[@]}" --strategy "$TMP/two.strategy" --steps 2 --format json \
    --db none > "$TMP/two.json" 2> /dev/null
check "  ... the file's line's losses equal its run alone" test "$(sql :memory: \
    "SELECT abs(json_extract(readfile('$TMP/multi2.json'), '$.losses[2]')
              - json_extract(readfile('$TMP/two.json'), '$.losses[2]')) < 1e-6;")" = 1
mpi 2 run -m alexnet "${SMALL[@]}" --strategy dp --strategy "$TMP/none.strategy" --strategy dp \
    --steps 1 --format json --db none > "$TMP/multibad.json" 2> "$TMP/multibad.err"
rc=$?
check "a missing second strategy: exit 2 (got $rc)" test "$rc" -eq 2
check "  ... after the first one's line, and no third" test "$(grep -c '"strategy"' "$TMP/multibad.json")" -eq 1
check "  ... names the file" grep -q "none.strategy" "$TMP/multibad.err"
expect_error "--checkpoint with two strategies" 2 "take one --strategy" run -m alexnet "${SMALL[@]}" \
    --strategy dp --strategy dp --checkpoint "$TMP/ck2"

# ---- calibrate: the calibrated cost model's constants, then search with them --

cal="$TMP/cal.txt"
mpi 2 calibrate --out "$cal" --machine-out "$TMP/cal.machine" --size 64 --elems 4096 --words 4096 \
    --reps 2 > "$TMP/cal.out" 2>&1
rc=$?
check "calibrate on 2 ranks exits 0 (got $rc)" test "$rc" -eq 0
[ "$rc" -eq 0 ] || sed 's/^/    /' "$TMP/cal.out"
for key in tflops gbs word_bytes elem_ratio latency_us conv_ratio; do
    check "calibration file has a positive $key" \
        awk -v k="$key" '$1 == k && $2 + 0 >= 0 && ($2 + 0 > 0 || k == "latency_us") { f = 1 } END { exit !f }' "$cal"
done
"$SB" search -m alexnet -p 4 "${SMALL[@]}" --calibration "$cal" --db none > "$TMP/calsearch.out" 2>&1
rc=$?
check "search --calibration exits 0 (got $rc)" test "$rc" -eq 0
check "search --calibration says calibrated and predicts a step time" \
    grep -q "predicted step time" "$TMP/calsearch.out"
"$SB" search -m alexnet -p 4 "${SMALL[@]}" --machine "$TMP/cal.machine" --db none > "$TMP/calmachine.out" 2>&1
check "search --machine of calibrate's machine file exits 0 and predicts a step time" \
    grep -q "predicted step time" "$TMP/calmachine.out"
"$SB" search -m alexnet -p 4 "${SMALL[@]}" --calibration "$cal" --flops 3 --db none > /dev/null 2> "$TMP/calboth.err"
rc=$?
check "search --calibration with --flops: exit 2 (got $rc)" test "$rc" -eq 2
check "  ... says not both" grep -q "not both" "$TMP/calboth.err"
printf 'tflops 1\ngbs two\n' > "$TMP/badcal.txt"
"$SB" prune -m alexnet -p 2 "${SMALL[@]}" --calibration "$TMP/badcal.txt" --out "$TMP/pr" > /dev/null 2> "$TMP/badcal.err"
rc=$?
check "prune with a bad calibration file: exit 2 (got $rc)" test "$rc" -eq 2
check "  ... names file and line" grep -q "badcal.txt:2: gbs 'two'" "$TMP/badcal.err"
expect_error "calibrate on one rank" 1 "P >= 2" calibrate --out "$TMP/cal1.txt"
mpi 2 calibrate --no-such-option > /dev/null 2> "$TMP/calopt.err"
rc=$?
check "calibrate with a bad option on 2 ranks: refused (got $rc)" test "$rc" -ne 0 -a "$rc" -ne 124
check "  ... said once, not once per rank ($(grep -c "no-such-option" "$TMP/calopt.err"))" \
    test "$(grep -c "no-such-option" "$TMP/calopt.err")" -eq 1

echo "run_cli: $((checks - fails)) of $checks checks passed"
[ "$fails" -eq 0 ]
