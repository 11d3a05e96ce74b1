# tests/cli/check_lib.sh: the checks the command-line test scripts share,
# sourced after they set SB (the shardbench binary) and TMP (their scratch
# folder). Each check prints "ok   NAME" or "FAIL NAME" and counts the
# failures in $fails; a script ends with `exit $((fails > 0))`.
# shellcheck shell=bash disable=SC2034,SC2154 # fails read and SB, TMP set by the sourcer
fails=0
check() { # check NAME CONDITION-COMMAND...
    local name=$1
    shift
    if "$@"; then echo "ok   $name"; else fails=$((fails + 1)); echo "FAIL $name"; fi
}
refused() { # refused NAME TEXT ARGS...: exit 2 and TEXT (a grep pattern) on stderr
    local name=$1 text=$2
    shift 2
    "$SB" "$@" > "$TMP/out" 2> "$TMP/err"
    local rc=$?
    check "$name: exit 2 ($rc)" test "$rc" -eq 2
    check "$name: says '$text'" grep -q -- "$text" "$TMP/err"
}
js() { # js FILE PYTHON-EXPR-ON-d: the expression true of the JSON in FILE
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if ($2) else 1)" "$1"
}
