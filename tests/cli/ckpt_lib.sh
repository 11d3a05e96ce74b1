# ckpt_lib.sh: what ckpt_resume.sh and ckpt_zero.sh share (sourced after
# they set sb, mpiexec and dir): run NP ARGS..., losses, resume.
# shellcheck shell=bash disable=SC2154,SC2034 # sb, mpiexec set and fail read by the sourcer
run() {
    local np=$1
    shift
    "$mpiexec" --oversubscribe --allow-run-as-root -np "$np" "$sb" run \
        -m transformer --set batch=4 --set vocab=16 --set seq=4 --set embed=8 --set heads=2 \
        --set dk=4 --set ff=16 --set layers=1 --db none --warmup 0 --lr 0.2 "$@"
}
losses() { sed -n 's/.*"losses":\[\([^]]*\)\].*/\1/p'; }
fail=0
# resume LABEL DIR ARGS...: 6 steps straight must give the same losses as 3
# steps + save into DIR, then fresh processes + restore + 3 steps (bit for
# bit: same P and strategy, CPU); the resumed losses go to $want.
resume() {
    local label=$1 ck=$2
    shift 2
    local straight resumed
    straight=$(run 2 "$@" --steps 6 --format json | losses)
    run 2 "$@" --steps 3 --checkpoint "$ck" --save-every 3 >/dev/null
    resumed=$(run 2 "$@" --steps 3 --restore "$ck" --format json | losses)
    want=$(echo "$straight" | cut -d, -f4-6)
    if [ -n "$want" ] && [ "$resumed" = "$want" ]; then
        echo "resume ($label, p=2): ok: losses $resumed"
    else
        echo "resume ($label, p=2): FAIL: straight [$straight], resumed [$resumed]"
        fail=1
    fi
}
