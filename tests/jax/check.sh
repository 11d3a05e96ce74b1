#!/bin/bash
# check.sh SHARDBENCH PYTHON [MPIRUN]: exports the Transformer, AlexNet and
# the Llama-style decoder of tests/data/models/llama-tiny.model, the
# pointwise ops' test model (swiglu-mlp) and the mixture of experts of
# moe-tiny at reduced sizes under pase-best at p = 4 and 8, MCMC at p = 4
# and data parallel at p = 8 as JAX modules (`export --to jax --format py`), runs them on
# 8 host CPU
# devices (check.py: shardings read back, losses against the unsharded
# model and shardbench's own run, XLA's collectives beside the cost
# model's), and checks the JSON and PyTorch forms' syntax and structure.
# Fails when PYTHON has no JAX. Writes $SB_JAX_OUT (default a temporary
# folder): the modules, comm.tsv (the fidelity table).
set -euo pipefail
SB=$(realpath "$1")
PY=$(cd "$(dirname "$2")" && pwd)/$(basename "$2") # absolute, the venv's own
MPIRUN=${3:-mpirun}
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${SB_JAX_OUT:-$(mktemp -d)}
mkdir -p "$OUT"
cd "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export XLA_FLAGS="--xla_force_host_platform_device_count=8 ${XLA_FLAGS:-}"
export JAX_PLATFORMS=cpu
"$PY" -c 'import jax; assert len(jax.devices()) == 8, jax.devices()' || {
    echo "check.sh: $PY has no JAX with 8 CPU devices (scripts/deps.sh sb_jax_venv makes one)" >&2
    exit 1
}

TRANSFORMER="-m transformer --set layers=1 --set batch=8 --set seq=16 --set embed=32 --set heads=4 --set dk=8 --set ff=64 --set vocab=64"
ALEXNET="-m alexnet --set batch=8 --set image=67 --set width_div=16 --set classes=16"
LLAMA_FILE="$HERE/../data/models/llama-tiny.model"
LLAMA="-m $LLAMA_FILE"
# act, mul (broadcast by name), expand, softcap: tests/data/models/swiglu-mlp.model
SWIGLU_FILE="$HERE/../data/models/swiglu-mlp.model"
SWIGLU="-m $SWIGLU_FILE --set batch=8"
MOE_FILE=$HERE/../data/models/moe-tiny.model
MOE="-m $MOE_FILE --set batch=8"
# --flops 0.001: compute priced high against communication, so that the
# search splits these small models the way it splits the full-size ones
SEARCH="--db none --flops 0.001"

mods=()
echo "{" > run_losses.json
sep=""
for name in transformer alexnet llama swiglu moe; do
    # XM: export's -m, for a model read from a file (a strategy names its
    # model, and only shipped ones are found by name)
    XM=""
    case $name in
    transformer) M=$TRANSFORMER ;;
    alexnet) M=$ALEXNET ;;
    llama) M=$LLAMA XM="-m $LLAMA_FILE" ;;
    swiglu) M=$SWIGLU XM="-m $SWIGLU_FILE" ;;
    moe) M=$MOE XM="-m $MOE_FILE" ;;
    esac
    # shardbench's own run (every strategy trains the same numbers; the
    # equivalence tests hold the runtime to that): 1 rank, and the pase
    # strategy at p = 4 on 4 ranks
    "$SB" search $M -p 4 $SEARCH --save $name-pase-p4.strategy > /dev/null
    l1=$("$MPIRUN" -np 1 "$SB" run $M --strategy dp --warmup 0 --steps 3 --format json --db none \
         | "$PY" -c 'import json,sys; print(json.dumps(json.load(sys.stdin)["losses"]))')
    l4=$("$MPIRUN" -np 4 "$SB" run $M --strategy $name-pase-p4.strategy --warmup 0 --steps 3 --format json --db none \
         | "$PY" -c 'import json,sys; print(json.dumps(json.load(sys.stdin)["losses"]))')
    key=$("$SB" export $name-pase-p4.strategy $XM --to jax --format json | "$PY" -c 'import json,sys; d=json.load(sys.stdin); print(d["model"]+" "+d["params"])')
    "$PY" - "$l1" "$l4" <<'PYEOF'
import json, sys
a, b = json.loads(sys.argv[1]), json.loads(sys.argv[2])
if any(abs(x - y) > 2e-5 * max(1, abs(y)) for x, y in zip(a, b)):
    sys.exit("shardbench run: np 1 %s, np 4 (pase) %s" % (a, b))
PYEOF
    echo "$sep\"$key\": $l1" >> run_losses.json
    sep=","
    # pase-best at both p; MCMC (a random walk: mixed splits) at p = 4,
    # data parallel at p = 8 (it splits every op's batch alike at any p):
    # 4 modules a model, each an XLA compilation of about 5 s
    for p in 4 8; do
        "$SB" search $M -p $p $SEARCH --save $name-pase-p$p.strategy > /dev/null
        if [ $p = 4 ]; then
            other=mcmc
            "$SB" search $M -p $p $SEARCH --algo mcmc --budget 20000 --seed 1 --save $name-mcmc-p$p.strategy > /dev/null
        else
            other=dp
            "$SB" search $M -p $p $SEARCH --algo dp --save $name-dp-p$p.strategy > /dev/null
        fi
        for algo in pase $other; do
            s=$name-$algo-p$p
            "$SB" export $s.strategy $XM --to jax --format py -o ${s//-/_}.py
            mods+=("${s//-/_}.py")
        done
    done
done
echo "}" >> run_losses.json

# the JSON and PyTorch forms: syntax and structure (PyTorch itself is not here)
for f in transformer-pase-p8 alexnet-mcmc-p4; do
    "$SB" export $f.strategy --to jax --format json -o $f.jax.json
    "$SB" export $f.strategy --to torch --format json -o $f.torch.json
    "$SB" export $f.strategy --to torch --format py -o ${f//-/_}_torch.py
    "$SB" export $f.strategy --to jax --format py -o - > ${f//-/_}_stdout.py
    cmp ${f//-/_}_stdout.py ${f//-/_}.py
    "$PY" -m py_compile ${f//-/_}_torch.py
    "$PY" "$HERE/structure.py" $f.jax.json $f.torch.json ${f//-/_}_torch.py
done
rm -f x.py
if "$SB" export transformer-dp-p4.strategy --to mtf --format py -o x.py 2> /dev/null || [ -e x.py ]; then
    echo "check.sh: --to mtf --format py was accepted" >&2
    exit 1
fi

"$PY" "$HERE/check.py" run_losses.json comm.tsv "${mods[@]}"
"$PY" "$HERE/comm_table.py" comm.tsv
echo "check.sh: outputs in $OUT"
