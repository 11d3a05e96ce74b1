#!/usr/bin/env bash
# tests/cli/hf_cli.sh SHARDBENCH DATA: the Hugging Face reader end to end.
# `import --from hf` writes a model file that parses (through a temporary
# and a rename: a refused import leaves the old file whole), names the
# defaults and what it approximates; refusals exit 2 naming the key;
# `search -m hf:` and `candidates -m hf:` print parameter_count and
# active_parameter_count equal to expected.tsv (transformers' count).
set -euo pipefail
sb=$1
data=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "hf_cli: $*" >&2; exit 1; }

"$sb" import --from hf "$data/llama-3.2-1b" -o "$tmp/l.model" --set num_hidden_layers=2 >"$tmp/out"
grep -q "defaults: seq=8192, batch=512" "$tmp/out" || fail "no defaults: $(cat "$tmp/out")"
grep -q "rope_scaling llama3" "$tmp/out" || fail "the rope scaling is not named"
grep -q "^tie wout = x0$" "$tmp/l.model" || fail "no tie in the written model"
"$sb" search -m "$tmp/l.model" -p 2 --format json >/dev/null || fail "the written model does not search"
cp "$tmp/l.model" "$tmp/keep"
printf '{"architectures": ["LlamaForCausalLM"], "vocab_size": 10, "hidden_size": "x"}' >"$tmp/bad.json"
rc=0
"$sb" import --from hf "$tmp/bad.json" -o "$tmp/l.model" 2>"$tmp/err" || rc=$?
[ "$rc" = 2 ] || fail "bad config: exit $rc, expected 2"
grep -q "key 'hidden_size': expected an integer, found a string" "$tmp/err" || fail "$(cat "$tmp/err")"
cmp -s "$tmp/l.model" "$tmp/keep" || fail "a refused import changed the old file"
for f in "$tmp"/*.tmp*; do [ -e "$f" ] && fail "a temporary file is left: $f"; done
printf 'not json' >"$tmp/config.json"
rc=0
"$sb" search -m "hf:$tmp" -p 2 2>"$tmp/err" || rc=$?
[ "$rc" = 2 ] && grep -q "not a JSON config" "$tmp/err" || fail "not JSON: exit $rc: $(cat "$tmp/err")"
rc=0
"$sb" search -m "hf:$data/gpt2" -p 2 --set num_key_value_heads=2 2>"$tmp/err" || rc=$?
[ "$rc" = 2 ] && grep -q "unknown parameter 'num_key_value_heads'" "$tmp/err" || fail "unknown key: $(cat "$tmp/err")"
# a --set value held to its key's range as the config's own is (a head count of 0
# divided by zero, a negative layer count wrote a model without layers), the
# tokens of a step bounded, a config's strings shown with their controls escaped
for bad in "llama-3.2-1b num_key_value_heads=0" "gpt2 n_head=0" "llama-3.2-1b num_hidden_layers=-1" \
           "deepseek-v3 moe_layer_freq=0" "qwen3-30b-a3b decoder_sparse_step=-2"; do
    set -- $bad
    rc=0
    "$sb" search -m "hf:$data/$1" -p 2 --set "$2" 2>"$tmp/err" || rc=$?
    [ "$rc" = 2 ] && grep -q "key '${2%%=*}': --set ${2#*=}: must be in" "$tmp/err" ||
        fail "--set $2: exit $rc: $(cat "$tmp/err")"
done
rc=0
"$sb" search -m "hf:$data/llama-3.2-1b" -p 2 --set seq=4000000000 --set batch=4000000000 2>"$tmp/err" || rc=$?
[ "$rc" = 2 ] && grep -q "too many tokens" "$tmp/err" || fail "seq x batch: exit $rc: $(cat "$tmp/err")"
python3 - "$data/llama-3.2-1b/config.json" "$tmp/esc.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["evil\u001b[31mRED\nhf: fake line"] = 1
json.dump(d, open(sys.argv[2], "w"))
PY
"$sb" search -m "hf:$tmp/esc.json" -p 2 --db none >/dev/null 2>"$tmp/err" || fail "escaped key: $(cat "$tmp/err")"
grep -q $'\x1b' "$tmp/err" && fail "a config's escape sequence reached the terminal"
grep -q "^hf: fake line" "$tmp/err" && fail "a config's key forged a line"
python3 - "$data/llama-3.2-1b/config.json" "$tmp/esc2.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["architectures"] = ["X\u001b[2J\nshardbench: fake"]
json.dump(d, open(sys.argv[2], "w"))
PY
rc=0
"$sb" search -m "hf:$tmp/esc2.json" -p 2 --db none >/dev/null 2>"$tmp/err" || rc=$?
[ "$rc" = 2 ] || fail "an unknown architecture: exit $rc"
grep -q "^shardbench: fake" "$tmp/err" && fail "a config's architecture forged an error line"
grep -q $'\x1b' "$tmp/err" && fail "a config's architecture reached the terminal raw"

export SHARDBENCH_HF_QUIET=1
while IFS=$'\t' read -r name total active; do
    case $name in '#'*) continue ;; esac
    got=$("$sb" search -m "hf:$data/$name" -p 8 --format json | python3 -c \
        'import sys, json; j = json.load(sys.stdin); print(j["parameter_count"], j["active_parameter_count"])')
    [ "$got" = "$total $active" ] || fail "$name: search says $got, transformers $total $active"
done <"$data/expected.tsv"
got=$("$sb" candidates -m "hf:$data/mixtral-8x7b-v0.1" -p 8 --format json | python3 -c \
    'import sys, json; j = json.load(sys.stdin); print(j["parameter_count"], j["active_parameter_count"])')
[ "$got" = "46702792704 12879925248" ] || fail "candidates: $got"
echo "hf_cli: ok"
