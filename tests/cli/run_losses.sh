# run_losses.sh: sourced by the scripts that compare `shardbench run`'s losses
# with a one-rank run's (pipeline_run.sh, ranks_cyclic.sh). Needs $sb, $mpiexec
# and the array set_args; sets fail=1 when a comparison fails.
# shellcheck shell=bash disable=SC2154,SC2034 # set and read by the sourcer
#
# run NP ARGS...: the reduced transformer trained on NP ranks, one JSON line
run() {
    local np=$1
    shift
    "$mpiexec" --oversubscribe --allow-run-as-root -np "$np" "$sb" run -m transformer \
        "${set_args[@]}" --db none --warmup 0 --lr 0.2 --format json "$@"
}
# losses: the losses list of run's JSON on stdin
losses() { sed -n 's/.*"losses":\[\([^]]*\)\].*/\1/p'; }
# same LABEL GOT WANT: the loss lists agree within 1e-5 (relative)
same() {
    if [ -n "$2" ] && awk -v a="$2" -v b="$3" 'BEGIN {
            n = split(a, x, ","); m = split(b, y, ",");
            if (n != m || n == 0) exit 1;
            for (i = 1; i <= n; i++) { d = x[i] - y[i]; if (d < 0) d = -d;
                s = y[i] < 0 ? -y[i] : y[i]; if (d > 1e-5 * s) exit 1 }
        }'; then
        echo "$1: ok: losses $2"
    else
        echo "$1: FAIL: losses [$2], one rank [$3]"
        fail=1
    fi
}
