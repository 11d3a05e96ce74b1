#!/usr/bin/env bash
# tests/cli/cpuset_cli.sh: the CPUs and threads of `shardbench run` ranks.
#
#   tests/cli/cpuset_cli.sh SHARDBENCH [MPIEXEC]
#
# Reads the `# cpus ...` header line(s) of a tiny AlexNet run and checks:
# under `mpirun -np 1` (OpenMPI's default binding: one core) the rank ends
# on all the node's cores with as many threads; --keep-binding keeps one
# core and one thread; --bind-to core (explicit) is kept; an
# OPENBLAS_NUM_THREADS the user set wins over the share; two ranks get
# disjoint halves; no mpirun: all cores. Skipped (77) on a one-core node.
# Registered with ctest by tests/tests.cmake.
set -uo pipefail

SB=${1:?usage: cpuset_cli.sh SHARDBENCH [MPIEXEC]}
MPIEXEC=${2:-mpiexec}
LIMIT=${CPUSET_CLI_TIMEOUT:-60}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
unset OPENBLAS_NUM_THREADS OMP_NUM_THREADS GOTO_NUM_THREADS
# (an inherited OMPI_MCA_ binding would make every run "explicit")
unset OMPI_MCA_hwloc_base_binding_policy OMPI_MCA_rmaps_base_mapping_policy

TMP=$(mktemp -d "${TMPDIR:-/tmp}/cpuset_cli.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
RUN=(run -m alexnet --set batch=2 --set image=67 --set classes=16 --set width_div=16
     --strategy dp --steps 1 --warmup 0 --db none)
fails=0

check() { # check NAME CONDITION-COMMAND...
    local name=$1
    shift
    if "$@"; then echo "ok   $name"; else fails=$((fails + 1)); echo "FAIL $name"; fi
}
has() { grep -qF -- "$2" "$1"; }
go() { # go OUT LAUNCH-WORDS... -- ARGS...: one run; its stdout and stderr in OUT
    local out=$1
    shift
    local pre=()
    while [ "$1" != -- ]; do pre+=("$1"); shift; done
    shift
    timeout -k 5 "$LIMIT" "${pre[@]}" "$SB" "${RUN[@]}" "$@" > "$out" 2>&1
    local rc=$?
    [ "$rc" -eq 0 ] || { echo "    exit $rc:"; sed 's/^/    /' "$out"; }
    grep '^# .*cpus ' "$out" | sed 's/^/    /'
}

# the node's CPUs, as the run reports them without a launcher
go "$TMP/plain" -- 
n=$(sed -n 's/^# cpus [^ ]* ([0-9]* of \([0-9]*\),.*/\1/p' "$TMP/plain")
check "without mpirun: the header names the node's CPUs" test -n "$n"
[ -n "$n" ] || exit 1
if [ "$n" -lt 2 ]; then
    echo "one CPU: nothing to widen"
    exit 77
fi
check "without mpirun: $n of $n cpus, $n threads" \
    has "$TMP/plain" "($n of $n, share $n of 1 rank on the node), threads $n (share)"

go "$TMP/np1" "$MPIEXEC" -np 1 --
check "mpirun -np 1 (default binding): widened to $n of $n cpus" \
    has "$TMP/np1" "($n of $n, share $n of 1 rank on the node; widened from"
check "mpirun -np 1: $n threads" has "$TMP/np1" "threads $n (share)"

go "$TMP/keep" "$MPIEXEC" -np 1 -- --keep-binding
check "--keep-binding: 1 cpu, 1 thread" has "$TMP/keep" "(1 of $n, share $n of 1 rank"
check "--keep-binding: says it kept the default binding" has "$TMP/keep" "kept (--keep-binding)), threads 1 (share)"

go "$TMP/core" "$MPIEXEC" -np 1 --bind-to core --
check "--bind-to core (explicit): kept at 1 cpu, 1 thread" \
    has "$TMP/core" "(1 of $n, share $n of 1 rank on the node; a binding given to the launcher, kept), threads 1 (share)"

OPENBLAS_NUM_THREADS=1 go "$TMP/ob" "$MPIEXEC" -x OPENBLAS_NUM_THREADS -np 1 --
check "OPENBLAS_NUM_THREADS=1: widened, but 1 thread, the user's" \
    has "$TMP/ob" "($n of $n, share $n of 1 rank on the node; widened from"
check "OPENBLAS_NUM_THREADS=1: the header says whose count it is" \
    has "$TMP/ob" "threads 1 (OPENBLAS_NUM_THREADS)"

go "$TMP/np2" "$MPIEXEC" -np 2 --
h=$((n / 2))
check "mpirun -np 2: each rank $h of $n cpus, $h threads" \
    test "$(grep -c "($h of $n, share $h of 2 ranks on the node.*threads $h (share)" "$TMP/np2")" -eq 2
c0=$(sed -n 's/^# rank 0: cpus \([^ ]*\) .*/\1/p' "$TMP/np2")
c1=$(sed -n 's/^# rank 1: cpus \([^ ]*\) .*/\1/p' "$TMP/np2")
check "mpirun -np 2: the two ranks' CPUs differ ($c0 / $c1)" test -n "$c0" -a "$c0" != "$c1"

[ "$fails" -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
echo "all checks passed"
