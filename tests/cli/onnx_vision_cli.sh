#!/usr/bin/env bash
# tests/cli/onnx_vision_cli.sh: the vision exports of tests/data/onnx and
# make.py's small ones through the command line, with the batch static and
# dynamic: make_vision.py's reduced ViT (vit_mini13/17 and their _dyn
# twins: the class token's Expand and the patches' Reshape read the batch
# from Shape chains), its 10-class ResNet-18 (dynamic batch), and make.py's
# dynamic-batch cnn, lstm, transformer and einsum. Each: `shardbench search
# -m FILE.onnx -p 8` prints a strategy, `mpirun -np 2 shardbench run
# --strategy best --steps 2` trains, and test_equiv on 2 ranks (the
# search's best and random strategies) computes the losses and weights of
# one rank at --set batch=4. The full-size vit13/vit17 are searched only
# (tests/cli/onnx_cli.sh). That the static and dynamic twins import to the
# same model: tests/unit/test_onnx_twins.c.
set -u
USAGE="usage: onnx_vision_cli.sh SHARDBENCH TEST_EQUIV DATA_DIR [MPIEXEC]"
SB=${1:?$USAGE}
EQUIV=${2:?$USAGE}
DATA=${3:?$USAGE}
MPIEXEC=${4:-mpiexec}
LIMIT=${ONNX_CLI_TIMEOUT:-120}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/onnx_vision_cli.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
fails=0 checks=0
pass() { checks=$((checks + 1)); echo "ok   $1"; }
fail() { checks=$((checks + 1)); fails=$((fails + 1)); echo "FAIL $1"; }

for f in vit_mini13 vit_mini13_dyn vit_mini17 vit_mini17_dyn resnet18_c10 cnn lstm transformer einsum; do
    onnx="$DATA/$f.onnx"
    rc=0
    "$SB" search -m "$onnx" -p 8 --db none > "$TMP/$f.out" 2> "$TMP/$f.err" || rc=$?
    if [ $rc = 0 ] && grep -q '^total cost' "$TMP/$f.out"; then
        pass "$f: search -p 8 prints a strategy"
    else
        fail "$f: search -p 8 (exit $rc): $(head -c 600 "$TMP/$f.err")"
        continue
    fi
    rc=0
    timeout -k 5 "$LIMIT" "$MPIEXEC" --oversubscribe -np 2 "$SB" run -m "$onnx" --strategy best --steps 2 \
        --db none > "$TMP/$f.run" 2> "$TMP/$f.rerr" || rc=$?
    if [ $rc = 0 ] && grep -q 'loss' "$TMP/$f.run"; then
        pass "$f: mpirun -np 2 run --strategy best --steps 2"
    else
        fail "$f: run (exit $rc): $(tail -c 600 "$TMP/$f.rerr")"
    fi
    # ResNet-18 keeps 11.2 M weights: fewer random strategies under ASan
    nrand=8
    case $f in resnet*) nrand=2 ;; esac
    rc=0
    timeout -k 5 "$LIMIT" "$MPIEXEC" --oversubscribe -np 2 "$EQUIV" "$onnx" --set batch=4 --seed 2 --flops 0.01 \
        --random $nrand > "$TMP/$f.eq" 2>&1 || rc=$?
    if [ $rc = 0 ] && grep -q '0 of .* strategies differ from one device' "$TMP/$f.eq"; then
        pass "$f: test_equiv -np 2: $(grep -c ' ok$' "$TMP/$f.eq") strategies equal one rank"
    else
        fail "$f: test_equiv (exit $rc): $(tail -c 800 "$TMP/$f.eq")"
    fi
done
echo "$((checks - fails)) passed, $fails failed"
[ $fails = 0 ]
