#!/bin/bash
# smallest_fit.sh: per model, the smallest power-of-two P (1 .. PMAX) at
# which the full-space search finds a strategy within --memory 80GiB on
# h100-sxm (issue 37's done-when), by scripts/search_scale.sh at P = 1, 2,
# 4, ... until one fits. Prints search_scale.sh's row of that P (or of
# PMAX when none fits); every row tried goes to DIR/tried.tsv.
#
#   scripts/smallest_fit.sh [-b BIN] [-o DIR] [-m PMAX] MODEL ...
set -u
BIN=build/shardbench OUT=smallest-fit PMAX=4096
while getopts b:o:m: f; do
    case $f in
    b) BIN=$OPTARG ;;
    o) OUT=$OPTARG ;;
    m) PMAX=$OPTARG ;;
    *) echo "usage: $0 [-b BIN] [-o DIR] [-m PMAX] MODEL ..." >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
here=$(dirname "$0")
mkdir -p "$OUT"
printf 'model\tP\talgo\twall_s\tcpu_s\trss_mb\tstep_s\trc\n'
for model in "$@"; do
    p=1
    while :; do
        row=$("$here/search_scale.sh" -b "$BIN" -o "$OUT" "$model $p full" | tail -n 1)
        printf '%s\n' "$row" >>"$OUT/tried.tsv"
        rc=$(printf '%s' "$row" | cut -f 8)
        if [ "$rc" = 0 ] || [ "$p" -ge "$PMAX" ]; then
            printf '%s\n' "$row"
            break
        fi
        p=$((p * 2))
    done
done
