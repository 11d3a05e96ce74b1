#!/usr/bin/env bash
# tests/cli/hostile_input.sh: hostile input of the third reliability round
# (issue 39), through the command line.
#
#   tests/cli/hostile_input.sh SHARDBENCH MPIEXEC SOURCE_DIR
#
# - a FIFO or a folder where `run --restore` reads the checkpoint index or a
#   shard, `run --data`'s record file, `search --calibration`: exit 2 at
#   once, naming the kind (a FIFO used to hang the ranks);
# - a checkpoint index whose checksum is valid but whose shapes overflow
#   (2^62 x 2^62 elements): refused as corrupt, no UBSan report;
# - a version-1 strategy file with version-2 lines, a repeated `zero`,
#   `recompute loss`: exit 2 naming file:line;
# - `search -p 5 --stages 5` at batch 4 without --microbatches finds a
#   pipeline (and so do -p 6 --stages 6, -p 10 --stages 5);
# - a nightly whose baseline build prints garbage: exit 2, no verdict; a
#   nightly whose gnuplot scripts are missing: exit 2 before any launch;
# - a model file without a `model` line, its file name holding an escape
#   sequence, a newline, quotes and ';': the name is the file's with those
#   replaced by '_', no control byte reaches the output;
# - bench's closing `report:` hint: the database path shell-quoted (pasted
#   into a shell, it runs nothing else);
# - `run --recompute ''` and `--recompute a,`, `--memory 0x10GiB`,
#   `--memory ' 80GiB'`, `--lr ' 0.1'`, `--lr 0x1p-3`: exit 2;
# - `search --help` names every model of models/; `paper --table2 --db`
#   taken as `paper` takes it (the results database: here its profiles).
# Each command runs under `timeout`, so a hang fails. Registered by
# tests/tests.cmake; about 60 s on two cores in a Sanitize build.
set -uo pipefail

SB=${1:?usage: hostile_input.sh SHARDBENCH MPIEXEC SOURCE_DIR}
MPIEXEC=${2:-mpiexec}
SRC=${3:?usage: hostile_input.sh SHARDBENCH MPIEXEC SOURCE_DIR}
LIMIT=60
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
export OPENBLAS_NUM_THREADS=1
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
export SHARDBENCH_MODELS=${SHARDBENCH_MODELS:-$SRC/models}
export SHARDBENCH_PLOTS=${SHARDBENCH_PLOTS:-$SRC/plots}

T=$(mktemp -d "${TMPDIR:-/tmp}/hostile_input.XXXXXX")
trap 'rm -rf "$T"' EXIT
fails=0
checks=0
pass() { checks=$((checks + 1)); echo "ok   $1"; }
fail() { checks=$((checks + 1)); fails=$((fails + 1)); echo "FAIL $1"; }
check() { # check NAME CONDITION-COMMAND...
    local name=$1
    shift
    if "$@"; then pass "$name"; else fail "$name"; fi
}
has() { grep -qF -- "$2" "$1"; } # has FILE TEXT
show() { sed 's/^/    | /' "$1" | head -${2:-8}; }
sql() { sqlite3 -batch -noheader "$@"; }
sb() { timeout -k 5 "$LIMIT" "$SB" "$@"; }
mpi() { # mpi NP ARGS...
    local np=$1
    shift
    timeout -k 5 "$LIMIT" "$MPIEXEC" --oversubscribe --allow-run-as-root -np "$np" "$SB" "$@"
}
TR=(-m transformer --set batch=4 --set vocab=16 --set seq=4 --set embed=8 --set heads=2
    --set dk=4 --set ff=16 --set layers=1)
SMALL=(--set batch=4 --set image=67 --set classes=16 --set width_div=16)

# expect_refused NAME EXPECTED-TEXT COMMAND...: exit 2 and the text on stderr
expect_refused() {
    local name=$1 text=$2
    shift 2
    "$@" >"$T/o" 2>"$T/e"
    local rc=$?
    check "$name: exit 2 (got $rc)" test "$rc" -eq 2
    check "... says '$text'" has "$T/e" "$text"
    has "$T/e" "$text" || show "$T/e"
}

# ---- 1. special files where the runtime reads ----------------------------------------
ck="$T/ck"
mpi 2 run "${TR[@]}" --strategy dp --db none --warmup 0 --steps 2 --checkpoint "$ck" --save-every 2 >/dev/null 2>"$T/e"
step=$(ls -d "$ck"/step-* 2>/dev/null | head -1)
check "a checkpoint to spoil was made" test -n "$step" -a -f "$step/ckpt.index"
if [ -n "$step" ]; then
    cp -r "$ck" "$T/ck.orig"
    rm "$step/ckpt.index" && mkfifo "$step/ckpt.index"
    expect_refused "run --restore with a FIFO as the checkpoint index" "is a pipe (FIFO)" \
        mpi 2 run "${TR[@]}" --strategy dp --db none --warmup 0 --steps 1 --restore "$ck"
    rm "$step/ckpt.index" && mkdir "$step/ckpt.index"
    expect_refused "run --restore with a folder as the checkpoint index" "is a directory" \
        mpi 2 run "${TR[@]}" --strategy dp --db none --warmup 0 --steps 1 --restore "$ck"
    rm -rf "$ck" && cp -r "$T/ck.orig" "$ck"
    for shard in "$step"/ckpt.*; do [ "${shard##*.}" != index ] && break; done
    rm "$shard" && mkfifo "$shard"
    expect_refused "run --restore with a FIFO as a checkpoint shard" "is a pipe (FIFO)" \
        mpi 2 run "${TR[@]}" --strategy dp --db none --warmup 0 --steps 1 --restore "$ck"
    rm -rf "$ck" && cp -r "$T/ck.orig" "$ck"
fi
if command -v python3 >/dev/null; then # the indexes are made by a few lines of Python
# An index whose checksum is valid but whose shapes overflow: a tensor of
# 2^62 x 2^62 elements and one shard of that box, whose bytes (volume x 4)
# wrap to 0 in 64 bits, and 0 bytes claimed: every other check agrees.
mkdir -p "$T/big"
mkdir -p "$T/twice"
python3 - "$T/big/ckpt.index" "$T/twice/ckpt.index" <<'PY'
import struct, sys
def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF
def s(t): return struct.pack('<I', len(t)) + t
big = 1 << 62
b = b'SBCKINDX' + struct.pack('<IIQQI', 1, 1, 1, 4096, 1) + s(b'ckpt.shard-00000-of-00001')
b += struct.pack('<I', 1) + s(b'fc8/w') + struct.pack('<II', 0, 2) + struct.pack('<QQ', big, big)
b += s(b'') + struct.pack('<II', 1, 0) + struct.pack('<QQQQ', 0, big, 0, big)
b += struct.pack('<QQII', 0, 0, 0, 0)
open(sys.argv[1], 'wb').write(b + struct.pack('<I', crc32c(b)))
# a tensor named twice (each of 4 elements in its own shard): which one is meant?
t = s(b'fc8/w') + struct.pack('<II', 0, 1) + struct.pack('<Q', 4) + s(b'')
t += struct.pack('<I', 1) + struct.pack('<I', 0) + struct.pack('<QQ', 0, 4)
t += struct.pack('<QQII', 0, 16, 0, 1) + struct.pack('<I', 0)
b = b'SBCKINDX' + struct.pack('<IIQQI', 1, 1, 1, 4096, 1) + s(b'ckpt.shard-00000-of-00001')
b += struct.pack('<I', 2) + t + t
open(sys.argv[2], 'wb').write(b + struct.pack('<I', crc32c(b)))
PY
mpi 1 run "${TR[@]}" --strategy dp --db none --warmup 0 --steps 1 --restore "$T/big" >"$T/o" 2>"$T/e"
rc=$?
check "a checkpoint index with overflowing shapes (valid checksum): exit 2 (got $rc)" test "$rc" -eq 2
check "... said to be corrupt" has "$T/e" "checkpoint index '$T/big/ckpt.index' is corrupt"
check "... no sanitizer report" test "$(grep -c 'runtime error\|AddressSanitizer' "$T/e")" -eq 0
has "$T/e" "is corrupt" || show "$T/e"
mpi 1 run "${TR[@]}" --strategy dp --db none --warmup 0 --steps 1 --restore "$T/twice" >"$T/o" 2>"$T/e"
rc=$?
check "a checkpoint index naming a tensor twice (valid checksum): exit 2 (got $rc)" test "$rc" -eq 2
check "... said to be corrupt" has "$T/e" "checkpoint index '$T/twice/ckpt.index' is corrupt"
else
    echo "skip the crafted checkpoint indexes (no python3)"
fi

mkfifo "$T/data.fifo"
expect_refused "run --data FIFO" "is a pipe (FIFO)" \
    mpi 1 run "${TR[@]}" --strategy dp --db none --warmup 0 --steps 1 --data "$T/data.fifo"
mkfifo "$T/cal.fifo"
expect_refused "search --calibration FIFO" "is a pipe (FIFO)" \
    sb search "${TR[@]}" -p 2 --db none --calibration "$T/cal.fifo"

# ---- 2. strategy files: versions, repeated keys, recompute loss ------------------------
sb search "${TR[@]}" -p 4 --space full --stages 2 --microbatches 2 --zero 1 --flops 0.01 \
    --db none --save "$T/v2.strategy" >/dev/null 2>&1
check "a version-2 strategy file was made" grep -q '^pipeline 2 2' "$T/v2.strategy"
sed '1s/.*/shardbench-strategy 1/' "$T/v2.strategy" >"$T/v1x.strategy"
pl=$(grep -n '^pipeline' "$T/v1x.strategy" | cut -d: -f1)
expect_refused "a version-1 file with a pipeline line" \
    "$T/v1x.strategy:$pl: 'pipeline' is not a line of strategy format version 1" \
    mpi 4 run "${TR[@]}" --db none --warmup 0 --steps 1 --strategy "$T/v1x.strategy"
awk '{ print } /^zero/ { print "zero 2" }' "$T/v2.strategy" >"$T/zz.strategy"
z=$(grep -n '^zero' "$T/zz.strategy" | head -1 | cut -d: -f1)
expect_refused "a repeated zero line" "$T/zz.strategy:$((z + 1)): 'zero' given twice (first on line $z)" \
    mpi 4 run "${TR[@]}" --db none --warmup 0 --steps 1 --strategy "$T/zz.strategy"
awk '{ print } /^zero/ { print "recompute loss" }' "$T/v2.strategy" >"$T/rl.strategy"
expect_refused "recompute loss in a strategy file" "$T/rl.strategy:$((z + 1)): op 'loss'" \
    mpi 4 run "${TR[@]}" --db none --warmup 0 --steps 1 --strategy "$T/rl.strategy"
has "$T/e" "cannot be recomputed" || fail "... not said to be not recomputable"

# ---- 3. --stages S without --microbatches --------------------------------------------------
for ps in "5 5" "6 6" "10 5"; do
    set -- $ps
    sb search -m transformer --set batch=4 -p "$1" --stages "$2" --space full --db none \
        --format json >"$T/o" 2>"$T/e"
    rc=$?
    check "search -p $1 --stages $2 at batch 4: a pipeline found (exit $rc)" test "$rc" -eq 0
    check "... of $2 stages" test "$(grep -o '"time_per_microbatch"' "$T/o" | wc -l)" -eq "$2"
    [ "$rc" -eq 0 ] || show "$T/e"
done

# ---- 4. a model named by its file name -------------------------------------------------------
evil="$T/x"$'\e[31m'"red"$'\n'"line\"q;rm.model"
grep -v '^model ' "$SRC/models/transformer.model" >"$evil"
sb search -m "$evil" --set batch=4 --set layers=1 -p 2 --db "$T/names.db" >"$T/o" 2>"$T/e"
rc=$?
check "search of a model file named with ESC, newline, quote, ';': exit 0 (got $rc)" test "$rc" -eq 0
check "... no escape byte in its output" test "$(cat "$T/o" "$T/e" | tr -cd '\033' | wc -c)" -eq 0
check "... the name with those replaced by '_'" has "$T/o" 'x__31mred_line_q_rm'
check "... and so stored" test "$(sql "$T/names.db" "SELECT count(*) FROM models WHERE name = 'x__31mred_line_q_rm'")" = 1
bad="$T/nomodel"$'\e'".model"
mkfifo "$bad"
sb search -m "$bad" -p 2 --db none >"$T/o" 2>"$T/e"
check "an error naming such a path carries no escape byte" test "$(tr -cd '\033' <"$T/e" | wc -c)" -eq 0
check "... but shows it as \\x1b" has "$T/e" 'nomodel\x1b.model'

# a database of an older build holding names with escape sequences: the
# report shows them as \x1b, in Markdown and in CSV
rdb="$T/r.db"
sb search -m alexnet -p 2 "${SMALL[@]}" --db "$rdb" >/dev/null 2>&1
sql "$rdb" "INSERT INTO runs (id, started_at, host, git_commit, backend, command_line)
              VALUES (7, '2026-01-01T00:00:00Z', 'h' || char(27) || '[2J', 'abc', 'cpu',
                      'run ' || char(27) || ']0;x' || char(7));
            INSERT INTO models (id, name, params, nops) VALUES (91, 'm' || char(27) || '[31m', 'a=1', 1);
            INSERT INTO strategies (id, model_id, p, kind, configs_json) VALUES (91, 91, 2, 'k', '{}');
            INSERT INTO measurements (run_id, strategy_id, step_median_s, step_min_s, step_max_s,
              steps, status, message) VALUES (7, 91, 0.5, 0.4, 0.6, 3, 'error', 'e' || char(27) || 'c');"
for fmt in "" "--format csv"; do
    sb report --db "$rdb" --run 7 $fmt >"$T/o" 2>"$T/e"
    rc=$?
    check "report ${fmt:-(Markdown)} of names holding ESC: exit 0 (got $rc), no control byte" \
        test "$rc" -eq 0 -a "$(tr -cd '\000-\010\013-\037\177' <"$T/o" | wc -c)" -eq 0
    check "... the name shown as m\\x1b[31m" grep -qF 'm\x1b[31m' "$T/o"
done

# ---- 4b. a model whose memory (bytes per device) is past 2^63 ---------------------------------
# 3000 activations of 2^50 elements each: the memory model counts in double,
# and the JSON gives such a count as a real (it was cast to a 64-bit integer:
# UBSan "outside the range of representable values", exit 1)
printf 'model big\nparam n = 33554432\ninput x[b=n, f=n]\nrepeat 3000\n  x = add(x, x)\nend\ny = dense(x, units=n)\nloss = softmax_xent(y)\n' >"$T/big.model"
for args in "search -p 4 --db none" "search -p 8 --space full --db none" "candidates -p 8"; do
    sb $args -m "$T/big.model" --format json >"$T/o" 2>"$T/e"
    rc=$?
    check "$args of a model of 2^64+ bytes: exit 0 (got $rc), no sanitizer report" \
        test "$rc" -eq 0 -a "$(grep -c 'runtime error' "$T/e")" -eq 0
    check "... valid JSON" test "$(sql :memory: "SELECT json_valid(readfile('$T/o'))")" = 1
    grep -c 'runtime error' "$T/e" >/dev/null && show "$T/e" 3
done
check "... its peak bytes past 2^63 as a number" test "$(sql :memory: \
    "SELECT json_extract(readfile('$T/o'), '\$.candidates[0].mem_bytes') > 9.3e18")" = 1

# ---- 5. bench's closing hint, pasted ---------------------------------------------------------
hdb="$T/a b;touch $T/pwned;.db"
sb bench -m alexnet -p 1 "${SMALL[@]}" --db "$hdb" --search-algos none --steps 1 --warmup 0 \
    --top 1 --launcher "$MPIEXEC --oversubscribe --allow-run-as-root" >"$T/o" 2>"$T/e"
hint=$(sed -n 's/^report: //p' "$T/o")
check "bench printed its report hint" test -n "$hint"
(cd "$T" && eval "set -- $hint" && [ "$4" = "$hdb" ] && [ $# -eq 6 ]) >/dev/null 2>&1
check "... the database one word when pasted ($hint)" test $? -eq 0
(cd "$T" && eval "${hint/shardbench/true}") >/dev/null 2>&1
check "... and pasted it runs nothing else" test ! -e "$T/pwned"

# a survivors index listing one strategy file twice: refused naming the first line
mkdir -p "$T/surv"
sb prune -m alexnet -p 1 "${SMALL[@]}" --out "$T/surv/alexnet-p1" >/dev/null 2>&1
idx="$T/surv/alexnet-p1/index.tsv"
check "prune wrote a survivors index" test -f "$idx"
sed -n 2p "$idx" >>"$idx"
sb bench -m alexnet -p 1 "${SMALL[@]}" --db "$T/s.db" --survivors "$T/surv" --steps 1 \
    --warmup 0 --top 1 --launcher "$MPIEXEC --oversubscribe --allow-run-as-root" >"$T/o" 2>"$T/e"
rc=$?
# bench goes on past a (model, P) it cannot bench and exits 1 at the end
check "bench --survivors with a file listed twice: that (model, P) not benched (exit $rc)" \
    test "$rc" -eq 1
check "... naming the first line" has "$T/e" \
    "$idx:$(wc -l <"$idx"): file '$(sed -n 2p "$idx" | cut -f1)' of kind '$(sed -n 2p "$idx" | cut -f2)' given twice (first on line 2)"
check "... nothing measured" test "$(sql "$T/s.db" 'SELECT count(*) FROM measurements')" = 0

# ---- 6. nightly: a baseline build that measures nothing; no gnuplot scripts ---------------------
NARGS=(-m alexnet -p 1 "${SMALL[@]}" --steps 1 --warmup 0 --top 1 --keep-builds none
       --launcher "$MPIEXEC --oversubscribe --allow-run-as-root")
printf '#!/bin/sh\necho "this is no JSON"\n' >"$T/garbage.sh"
chmod +x "$T/garbage.sh"
ndb="$T/night.db"
sb nightly "${NARGS[@]}" --db "$ndb" --trials 1 --out "$T/n1" >"$T/o" 2>"$T/e"
check "a first night (exit $?)" test -f "$T/n1/report.md"
sb nightly "${NARGS[@]}" --db "$ndb" --trials 2 --extra 0 --baseline-build "$T/garbage.sh" \
    --out "$T/n2" >"$T/o" 2>"$T/e"
rc=$?
check "a night whose baseline build prints garbage: exit 2 (got $rc)" test "$rc" -eq 2
check "... says the baseline measured nothing" has "$T/e" "produced no measurement"
has "$T/e" "produced no measurement" || show "$T/e"
check "... no verdict stored for it" \
    test "$(sql "$ndb" 'SELECT count(*) FROM nightly_verdicts')" = 1
check "... no 'no regression' said" test "$(grep -c 'no regression' "$T/o")" -eq 0
# a night killed by SIGKILL: the database whole, no verdict; the next night
# removes the work folder it left (named with its pid)
# (killed once it has made its work folder and started measuring, not after
# a fixed time: a quiet machine finished the whole night in 2.5 s)
mkdir -p "$T/ntmp"
TMPDIR="$T/ntmp" "$SB" nightly "${NARGS[@]}" --db "$ndb" --trials 40 --extra 0 \
    --out "$T/nk" >"$T/o" 2>&1 &
npid=$!
for _ in $(seq 600); do
    ls -d "$T/ntmp"/shardbench-nightly-* >/dev/null 2>&1 && break
    kill -0 "$npid" 2>/dev/null || break
    sleep 0.1
done
sleep 1
kill -KILL "$npid" 2>/dev/null
wait "$npid"
rc=$?
check "a night killed by SIGKILL (exit $rc)" test "$rc" -eq 137
left=$(ls -d "$T/ntmp"/shardbench-nightly-* 2>/dev/null)
check "... left its work folder, named with its pid" test -n "$left"
check "... the database whole" test "$(sql "$ndb" 'PRAGMA integrity_check')" = ok
check "... and no verdict of it" test "$(sql "$ndb" 'SELECT count(*) FROM nightly_verdicts')" = 1
TMPDIR="$T/ntmp" sb nightly "${NARGS[@]}" --db "$ndb" --trials 1 --extra 0 --out "$T/nk2" >"$T/o" 2>"$T/e"
check "the next night removes it" test -z "$(ls -d "$T/ntmp"/shardbench-nightly-* 2>/dev/null)"
check "... and says so" has "$T/e" "nightly: removed $left, left by nightly process"
runs=$(sql "$ndb" 'SELECT count(*) FROM runs')
mkdir -p "$T/away/bin" && cp "$SB" "$T/away/bin/shardbench" # no ../plots beside it
(cd "$T/away" && env -u SHARDBENCH_PLOTS timeout -k 5 "$LIMIT" "$T/away/bin/shardbench" nightly \
    "${NARGS[@]}" --db "$ndb" --trials 1 --out "$T/n3" >"$T/o" 2>"$T/e")
rc=$?
check "a night without its gnuplot scripts: exit 2 (got $rc)" test "$rc" -eq 2
check "... said before measuring" has "$T/e" "cannot find the gnuplot scripts"
check "... no run started" test "$(sql "$ndb" 'SELECT count(*) FROM runs')" = "$runs"

# ---- 7. the smaller cases ---------------------------------------------------------------------
expect_refused "run --recompute ''" "empty op name" \
    mpi 1 run "${TR[@]}" --strategy dp --db none --steps 1 --recompute ''
expect_refused "run --recompute x.1/a/r," "empty op name" \
    mpi 1 run "${TR[@]}" --strategy dp --db none --steps 1 --recompute 'x.1/a/r,'
for v in 0x10GiB ' 80GiB' inf nan 1e400 '8 GiB' '80GiB,'; do
    expect_refused "search --memory '$v'" "--memory: '$v' is not a memory size" \
        sb search "${TR[@]}" -p 2 --db none --memory "$v"
done
for v in ' 0.1' 0x1p-3 infinity; do
    expect_refused "run --lr '$v'" "--lr: '$v'" mpi 1 run "${TR[@]}" --strategy dp --db none --steps 1 --lr "$v"
done
# counts and seeds: digits only (strtol/strtoull took ' 5', '+5', and '-1' as 2^64 - 1)
for a in "--seed -1" "--seed ' 7'" "--steps ' 5'" "--steps 0x5" "--data-seed +1" "--zero ' 1'"; do
    eval "mpi 1 run \"\${TR[@]}\" --strategy dp --db none $a" >"$T/o" 2>"$T/e"
    rc=$?
    check "run $a: exit 2 (got $rc)" test "$rc" -eq 2
done
for a in "--seed ' -1'" "--steps 0x5" "--strategies 1e3" "--machine \$'a\\x1b[31mb'"; do
    eval "sb profile -m alexnet \"\${SMALL[@]}\" --db \"$T/p.db\" $a" >"$T/o" 2>"$T/e"
    rc=$?
    check "profile $a: exit 2 (got $rc)" test "$rc" -eq 2
    check "... no escape byte printed" test "$(cat "$T/o" "$T/e" | tr -cd '\033' | wc -c)" -eq 0
done
for a in "--random 1e3" "--random 0x10" "--profile ' 3'" "--profile 1.0" "--trials +2"; do
    eval "sb bench -m alexnet -p 2 \"\${SMALL[@]}\" --db \"$T/b.db\" $a" >"$T/o" 2>"$T/e"
    rc=$?
    check "bench $a: exit 2 at once (got $rc)" test "$rc" -eq 2
done
sb search --help >"$T/o" 2>&1
missing=
for f in "$SRC"/models/*.model; do
    n=$(basename "$f" .model)
    tr -s ' \n' ' ' <"$T/o" | grep -qE "[ (,]${n}[,) ]" || missing="$missing $n"
done
check "search --help names every model of models/ (missing:${missing:- none})" test -z "$missing"
sb paper --table2 -m alexnet --db none >"$T/o" 2>"$T/e"
rc=$?
check "paper --table2 --db none: taken as paper takes it (exit $rc)" test "$rc" -eq 0
expect_refused "paper --table2 --db A --profiles B" "--db and --profiles name one database" \
    sb paper --table2 -m alexnet --db "$T/a.db" --profiles "$T/b.db"

echo "hostile_input: $((checks - fails)) of $checks checks passed"
[ "$fails" -eq 0 ]
