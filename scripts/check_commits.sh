#!/usr/bin/env bash
# scripts/check_commits.sh: every commit after the commit-message rule came
# in (BASE below) has a subject of at most 72 characters of the form
# `area: what` (the rule of .githooks/commit-msg; README.md, Contributing).
# Merge subjects git writes itself are let through.
# Exit 0 all good, 1 a subject breaks the rule (each named), 77 when the
# history does not reach BASE (a shallow clone: nothing can be checked).
# usage: check_commits.sh [SOURCE_DIR]
set -u
BASE=f9257a3b # the last commit before the rule (2026-12-05)
src=${1:-.}
if ! git -C "$src" rev-parse -q --verify "$BASE^{commit}" >/dev/null 2>&1; then
    echo "check_commits: $BASE is not in the history of $src (shallow clone?): nothing checked" >&2
    exit 77
fi
# Written on a branch whose work tree had no hook yet, merged before this
# check ran over merged branches (history is not rewritten after a merge):
EXEMPT="48c2fc20ea7931094d42403b9b596b6c9b33fde9"
bad=0 n=0
while IFS= read -r line; do
    id=${line%% *} subject=${line#* }
    n=$((n + 1))
    case $subject in Merge\ *) continue ;; esac
    case " $EXEMPT " in *" $id "*) continue ;; esac
    if [ "${#subject}" -gt 72 ]; then
        echo "check_commits: $id: subject of ${#subject} characters (at most 72): $subject"
        bad=1
    elif ! [[ $subject =~ ^[A-Za-z0-9][A-Za-z0-9_./+-]*(,\ ?[A-Za-z0-9_./+-]+)*:\ [^\ ] ]]; then
        echo "check_commits: $id: subject is not 'area: what': $subject"
        bad=1
    fi
done < <(git -C "$src" log --format='%H %s' "$BASE..HEAD")
[ "$bad" = 0 ] && echo "check_commits: $n commit subjects since $BASE follow the rule"
exit "$bad"
