#!/usr/bin/env bash
# tests/cli/hostile_io.sh: the command line under hostile files and values.
#
#   tests/cli/hostile_io.sh SHARDBENCH MPIEXEC
#
# - another program's SQLite file given as --db: refused, left byte for
#   byte, taken with --adopt-db (its tables kept);
# - `run` whose measurement cannot be stored (not a database, a newer
#   schema, a locked file): the exit status says so (2, 2, 1);
# - non-finite and out-of-range numbers refused (exit 2); a run whose loss
#   becomes infinite stops, is recorded `diverged` and exits 1;
# - a write that fails (file size limit; a full tmpfs when mounting one is
#   allowed) leaves the old file whole: import -o, search --dot, prune;
# - /dev/zero, a FIFO and a directory as strategy files (run, export): refused at once;
# - a new database in a folder that refuses writes: "permission denied",
#   naming the folder;
# - names holding '`' and '|' stay one cell of the Markdown report;
# - a bench killed by SIGKILL: its launcher and ranks end with it, and the
#   next bench removes the work folder it left.
# Registered with ctest by tests/tests.cmake; about 30 s on two cores
# in a Sanitize build. Needs sqlite3 (the shell), mpirun and bash.
set -uo pipefail

SB=${1:?usage: hostile_io.sh SHARDBENCH MPIEXEC}
MPIEXEC=${2:-mpiexec}
LIMIT=30 # seconds for any one command: a hang fails, not blocks
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
export OPENBLAS_NUM_THREADS=1
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}

T=$(mktemp -d "${TMPDIR:-/tmp}/hostile_io.XXXXXX")
MOUNTS=()
BGPIDS=()
cleanup() {
    for p in "${BGPIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
    for m in "${MOUNTS[@]}"; do umount "$m" 2>/dev/null; done
    rm -rf "$T"
}
trap cleanup EXIT
SMALL=(--set batch=4 --set image=67 --set classes=16 --set width_div=16)
RNN=(--set batch=8 --set vocab=64 --set units=16 --set seq=4 --set layers=1)
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
sql() { sqlite3 -batch -noheader "$@"; }
sb() { timeout -k 5 "$LIMIT" "$SB" "$@"; }
mpi() { # mpi NP ARGS...
    local np=$1
    shift
    timeout -k 5 "$LIMIT" "$MPIEXEC" --oversubscribe --allow-run-as-root -np "$np" "$SB" "$@"
}
# A tmpfs at $1 with options $2 (root only; fails elsewhere).
tmpfs_at() {
    mkdir -p "$1"
    [ "$(id -u)" -eq 0 ] && mount -t tmpfs -o "$2" tmpfs "$1" 2>/dev/null && MOUNTS+=("$1")
}

# ---- another program's database ------------------------------------------------
their="$T/their.db"
sql "$their" "CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL);
              INSERT INTO invoices (total) VALUES (12.5); CREATE TABLE customers (name TEXT);"
cp "$their" "$T/their.orig"
sb search -m alexnet -p 2 "${SMALL[@]}" --db "$their" >/dev/null 2>"$T/e"
rc=$?
check "search into another program's database: exit 2 (got $rc)" test "$rc" -eq 2
check "... the message names the file and what it holds" \
    grep -qF "$their: not a shardbench database: it holds 2 tables of another program (customers, invoices)" "$T/e"
check "... and the file is left byte for byte" cmp -s "$their" "$T/their.orig"
mpi 1 run -m alexnet "${SMALL[@]}" --strategy dp --steps 1 --db "$their" >/dev/null 2>"$T/e"
rc=$?
check "run into another program's database: exit 2 (got $rc)" test "$rc" -eq 2
check "... measurement not stored, said" has "$T/e" "(measurement not stored)"
check "... the file left byte for byte" cmp -s "$their" "$T/their.orig"
sb search -m alexnet -p 2 "${SMALL[@]}" --db "$their" --adopt-db >/dev/null 2>"$T/e"
rc=$?
check "search --adopt-db: exit 0 (got $rc)" test "$rc" -eq 0
check "... their rows kept beside one search" \
    test "$(sql "$their" "SELECT (SELECT total FROM invoices) || ' ' || (SELECT count(*) FROM search_runs);")" = "12.5 1"

# ---- run: a measurement not stored is a failure ----------------------------------
printf 'not a database at all, just text\n' >"$T/text.db"
mpi 1 run -m alexnet "${SMALL[@]}" --strategy dp --steps 1 --db "$T/text.db" >/dev/null 2>"$T/e"
rc=$?
check "run --db TEXTFILE: exit 2 (got $rc)" test "$rc" -eq 2
check "... says not a database, not stored" grep -q "not a database.*measurement not stored" "$T/e"
sql "$T/newer.db" "CREATE TABLE t (x); PRAGMA user_version = 99;"
mpi 1 run -m alexnet "${SMALL[@]}" --strategy dp --steps 1 --db "$T/newer.db" >/dev/null 2>"$T/e"
rc=$?
check "run --db NEWER: exit 2 (got $rc)" test "$rc" -eq 2
check "... says newer" has "$T/e" "schema version 99 is newer"
locked="$T/locked.db"
sb search -m alexnet -p 2 "${SMALL[@]}" --db "$locked" >/dev/null 2>&1
# the holder waits out the probes below (its own busy timeout) and holds the
# lock 20 s: the probes (up to 10 s) and run's busy wait (5 s) fit inside
{ echo "BEGIN EXCLUSIVE; INSERT INTO models (name, params, nops) VALUES ('lock', '', 1);"; sleep 20; echo "ROLLBACK;"; } |
    sqlite3 -cmd ".timeout 5000" "$locked" &
BGPIDS+=($!)
# until the lock is held (a probe that wants to write is refused), at most 10 s
held=0
for _ in $(seq 50); do
    sqlite3 -cmd ".timeout 0" "$locked" "BEGIN IMMEDIATE; ROLLBACK;" >/dev/null 2>&1 || { held=1; break; }
    sleep 0.2
done
check "the database is locked by another program" test "$held" -eq 1
mpi 1 run -m alexnet "${SMALL[@]}" --strategy dp --steps 1 --db "$locked" >/dev/null 2>"$T/e"
rc=$?
check "run --db LOCKED: exit 1 as cli/README says (got $rc)" test "$rc" -eq 1
check "... says locked" has "$T/e" "database is locked"

# ---- numbers: non-finite and out of range refused; divergence ----------------------
for v in inf -inf nan 1e999 0 -1 1e39 1e-45; do
    sb run -m alexnet --strategy dp --db none --lr "$v" >/dev/null 2>"$T/e"
    rc=$?
    check "run --lr $v: exit 2 (got $rc)" test "$rc" -eq 2
done
check "... naming the value and the range" has "$T/e" "--lr: '1e-45' is not a number from"
for o in "--flops inf" "--bw nan" "--time-limit inf" "--temperature nan" "--device-mem inf" \
    "--max-table-mb 1e999"; do
    # shellcheck disable=SC2086
    sb search -m alexnet -p 2 --db none --algo mcmc $o >/dev/null 2>&1
    rc=$?
    check "search $o: exit 2 (got $rc)" test "$rc" -eq 2
done
for o in "--timeout inf" "--timeout nan" "--within inf"; do
    # shellcheck disable=SC2086
    sb bench -m alexnet -p 2 --db "$T/b.db" $o >/dev/null 2>&1
    rc=$?
    check "bench $o: exit 2 (got $rc)" test "$rc" -eq 2
done
sb regress --db "$locked" --baseline 1 --candidate 1 --threshold nan >/dev/null 2>&1
rc=$?
check "regress --threshold nan: refused (got $rc)" test "$rc" -ne 0 -a "$rc" -ne 1
div="$T/div.db"
mpi 2 run -m rnnlm "${RNN[@]}" --strategy dp --steps 40 --lr 3e38 --db "$div" >"$T/o" 2>"$T/e"
rc=$?
check "a run whose loss becomes infinite: exit 1 (got $rc)" test "$rc" -eq 1
check "... says it diverged" has "$T/e" "training diverged: the loss is"
check "... no summary printed" test "$(grep -c 'step time' "$T/o")" -eq 0
check "... recorded as diverged, with its message" test "$(sql "$div" \
    "SELECT count(*) FROM measurements WHERE status = 'diverged' AND message LIKE 'training diverged%'")" = 1
check "... and nothing recorded ok" test "$(sql "$div" "SELECT count(*) FROM measurements WHERE status = 'ok'")" = 0

# a bench whose run diverges records it so: the launcher adds --lr 3e38
printf '#!/bin/sh\nexec %s --oversubscribe --allow-run-as-root "$@" --lr 3e38\n' \
    "$(command -v "$MPIEXEC")" >"$T/lr-launcher.sh"
chmod +x "$T/lr-launcher.sh"
TMPDIR="$T" timeout -k 5 120 "$SB" bench -m rnnlm -p 1 "${RNN[@]}" --db "$T/bdiv.db" \
    --search-algos none --steps 40 --top 1 --launcher "$T/lr-launcher.sh" >"$T/bdiv.out" 2>&1
check "bench: a run that diverges is recorded diverged" test "$(sql "$T/bdiv.db" \
    "SELECT count(*) FROM measurements WHERE status = 'diverged'")" -ge 1 ||
    cat "$T/bdiv.out"

# ---- a failed write leaves the old file whole ----------------------------------------
onnx=$(dirname "$0")/../data/onnx/transformer.onnx
printf 'old model\n' >"$T/out.model"
(trap '' XFSZ; ulimit -f 1; exec timeout "$LIMIT" "$SB" import "$onnx" -o "$T/out.model" -q) 2>"$T/e"
rc=$?
check "import -o past the file size limit: fails (got $rc)" test "$rc" -ne 0
check "... the old file intact" test "$(cat "$T/out.model")" = "old model"
check "... no temporary file left" test -z "$(compgen -G "$T/out.model.tmp*")"
printf 'old dot\n' >"$T/g.dot"
(trap '' XFSZ; ulimit -f 4; exec timeout "$LIMIT" "$SB" search -m inception3 -p 2 --db none --dot "$T/g.dot") >/dev/null 2>&1
rc=$?
check "search --dot past the limit: fails (got $rc)" test "$rc" -ne 0
check "... the old file intact" test "$(cat "$T/g.dot")" = "old dot"
if tmpfs_at "$T/full" size=64k; then
    sb import "$onnx" -o "$T/full/t.model" -q
    cp "$T/full/t.model" "$T/t.model.orig"
    printf 'old dot\n' >"$T/full/g.dot"
    mkdir "$T/full/surv" && printf 'old index\n' >"$T/full/surv/index.tsv"
    dd if=/dev/zero of="$T/full/fill" bs=1k count=100 2>/dev/null
    sb import "$onnx" -o "$T/full/t.model" -q 2>"$T/e"
    rc=$?
    check "import -o on a full disk: fails (got $rc)" test "$rc" -ne 0
    check "... the old file intact" cmp -s "$T/full/t.model" "$T/t.model.orig"
    sb search -m inception3 -p 2 --db none --dot "$T/full/g.dot" >/dev/null 2>&1
    rc=$?
    check "search --dot on a full disk: fails (got $rc)" test "$rc" -ne 0
    check "... the old file intact" test "$(cat "$T/full/g.dot")" = "old dot"
    sb prune -m alexnet -p 2 "${SMALL[@]}" --out "$T/full/surv" >/dev/null 2>&1
    check "prune --out on a full disk: the old index.tsv intact" \
        test "$(cat "$T/full/surv/index.tsv")" = "old index"
    check "... no temporary files left" test -z "$(find "$T/full" -name '*.tmp-*')"
else
    echo "skip full-disk checks (cannot mount a tmpfs)"
fi

# ---- special files as strategies ------------------------------------------------------
mkfifo "$T/fifo.strategy"
mkdir "$T/dir.strategy"
for f in /dev/zero "$T/fifo.strategy" "$T/dir.strategy"; do
    mpi 1 run -m alexnet "${SMALL[@]}" --strategy "$f" --db none >/dev/null 2>"$T/e"
    rc=$?
    check "run --strategy $f: exit 2 at once (got $rc)" test "$rc" -eq 2
    check "... not a regular file, said" grep -qF "$f: " "$T/e"
    has "$T/e" "not a regular file" || cat "$T/e"
    sb export "$f" --to dtensor >/dev/null 2>"$T/e"
    rc=$?
    check "export $f: exit 2 at once (got $rc)" test "$rc" -eq 2
    check "... not a regular file, said" grep -qF "$f: " "$T/e"
done

# ---- a new database in a folder that refuses writes -----------------------------------
ro="$T/ro"
if [ "$(id -u)" -ne 0 ]; then
    mkdir "$ro" && chmod 555 "$ro" && rok=1
elif tmpfs_at "$ro" ro,size=64k; then
    rok=1
else
    rok=0
    echo "skip read-only folder checks (root, and cannot mount a tmpfs)"
fi
if [ "$rok" -eq 1 ]; then
    sb search -m alexnet -p 2 "${SMALL[@]}" --db "$ro/new.db" >/dev/null 2>"$T/e"
    rc=$?
    check "new database in a read-only folder: exit 2 (got $rc)" test "$rc" -eq 2
    check "... says permission denied and names the folder" \
        grep -qF "permission denied: folder $ro is not writable" "$T/e"
    check "... not 'No such file'" test "$(grep -c 'No such file' "$T/e")" -eq 0
    chmod 755 "$ro" 2>/dev/null
fi

# ---- names with '`' and '|' in the Markdown report --------------------------------------
rep="$T/rep.db"
sb search -m alexnet -p 2 "${SMALL[@]}" --db "$rep" >/dev/null 2>&1
sql "$rep" "INSERT INTO runs (id, started_at, host, git_commit, backend, command_line)
              VALUES (1, '2026-01-01T00:00:00Z', 'h|ost', 'abc', 'cpu', 'run \`x\` | y');
            INSERT INTO models (id, name, params, nops) VALUES (90, 'my\`net|v2', 'a=1', 1);
            INSERT INTO strategies (id, model_id, p, kind, configs_json)
              VALUES (90, 90, 2, 'k|\`', '{}');
            INSERT INTO measurements (run_id, strategy_id, step_median_s, step_min_s,
              step_max_s, steps, status, message)
              VALUES (1, 90, 0.5, 0.4, 0.6, 3, 'error', 'bad | worse \` x');"
sb report --db "$rep" --run 1 >"$T/rep.md" 2>"$T/e"
rc=$?
check "report of odd names: exit 0 (got $rc)" test "$rc" -eq 0
row=$(grep -F 'my\`net\|v2' "$T/rep.md" | head -1)
check "... the model name escaped in its cell" test -n "$row"
# cells: '|' not escaped by a backslash, per row, equal to the header's
cells() { sed 's/\\|//g' | tr -cd '|\n' | awk '{ print length($0) }'; }
hdr=$(awk -v pat='my\\`net\\|v2' 'index($0, pat) { print sep; exit } /^\|[-:|]+$/ { sep = $0 }' \
    "$T/rep.md" | cells)
check "... the row has as many cells as its table ($(echo "$row" | cells) vs $hdr)" \
    test "$(echo "$row" | cells)" = "$hdr"
check "... the command line stays one code span" grep -qF -- '- command: ``run `x` | y``' "$T/rep.md"

# ---- a bench killed by SIGKILL ------------------------------------------------------------
# The launcher is mpirun under a name of this test's own, so that nothing
# else on the machine is taken for what the bench left behind.
mkdir "$T/tmp" "$T/bin"
ln -s "$(command -v "$MPIEXEC")" "$T/bin/hostile-mpirun"
cp "$(dirname "$0")/../../models/rnnlm.model" "$T/hostile-rnn.model"
TMPDIR="$T/tmp" "$SB" bench -m "$T/hostile-rnn.model" -p 1 "${RNN[@]}" --db "$T/k.db" \
    --search-algos none --steps 1000000 --top 1 --timeout 600 \
    --launcher "$T/bin/hostile-mpirun --oversubscribe --allow-run-as-root" >"$T/bench.out" 2>&1 &
bench=$!
BGPIDS+=("$bench")
left() { ps -eo pid=,args= | grep -F -- "$T/" | grep -v -e grep -e "^ *$bench " | grep -E 'hostile-mpirun|hostile-rnn' ; }
ranks() { ps -eo args= | awk -v sb="$SB run " -v m="$T/hostile-rnn.model" 'index($0, sb) == 1 && index($0, m)'; }
# A rank re-executes itself once at start (its thread binding), and ps reads
# an empty command line in that instant: so the ranks count as started when
# two polls in a row see them, and the check reads what the loop saw.
seen=; prev=
for _ in $(seq 600); do # up to 120 s on a loaded machine
    now=$(ranks)
    [ -n "$now" ] && [ -n "$prev" ] && { seen=$now; break; }
    prev=$now
    sleep 0.2
done
check "the bench started its ranks" test -n "$seen"
[ -n "$seen" ] || { echo "    the bench's output:"; sed 's/^/    /' "$T/bench.out"; ps -eo pid=,args= | grep -F -- "$T/" | grep -v grep | sed 's/^/    ps: /'; }
sleep 0.5
kill -9 "$bench"
wait "$bench" 2>/dev/null
for _ in $(seq 50); do [ -z "$(left)" ] && break; sleep 0.2; done
check "SIGKILL of the bench: its launcher and ranks are gone within 10 s" test -z "$(left)"
[ -z "$(left)" ] || { left; left | awk '{ print $1 }' | xargs -r kill -9; }
stale=$(ls -d "$T/tmp/shardbench-bench-$bench"-* 2>/dev/null)
check "the killed bench left its work folder, named with its pid" test -n "$stale"
TMPDIR="$T/tmp" timeout -k 5 120 "$SB" bench -m "$T/hostile-rnn.model" -p 1 "${RNN[@]}" \
    --db "$T/k.db" --search-algos none --steps 1 --top 1 --timeout 0.2 \
    --launcher "$T/bin/hostile-mpirun --oversubscribe --allow-run-as-root" >"$T/bench2.out" 2>&1
check "the next bench removes it" test ! -e "$stale"
check "... and says so" grep -qF "removed $stale, left by bench process $bench" "$T/bench2.out"
check "... and leaves no work folder of its own" test -z "$(ls -d "$T/tmp"/shardbench-bench-* 2>/dev/null)"

echo "hostile_io: $((checks - fails)) of $checks checks passed"
[ "$fails" -eq 0 ]
