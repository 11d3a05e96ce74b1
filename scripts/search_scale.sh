#!/bin/bash
# search_scale.sh: times searches at scale, one row per search: the search's
# wall and CPU seconds (user + sys) and peak RSS (GNU time), its predicted
# step and exit status. Not a test: the searches take seconds to minutes.
#
#   scripts/search_scale.sh [-b BIN] [-o DIR] [-a ARGS] "MODEL P ALGO" ...
#
# ALGO: full (the full-space search, --memory) or megatron (--algo megatron).
# Every search runs with --machine h100-sxm --memory 80GiB --format json
# --db none and ARGS (default none); each JSON (search seconds masked) and
# stderr go to DIR (default search-scale/) for byte comparison between
# builds. The table (TSV) goes to stdout.
set -u
BIN=build/shardbench OUT=search-scale ARGS=""
while getopts b:o:a: f; do
    case $f in
    b) BIN=$OPTARG ;;
    o) OUT=$OPTARG ;;
    a) ARGS=$OPTARG ;;
    *) echo "usage: $0 [-b BIN] [-o DIR] [-a ARGS] 'MODEL P ALGO' ..." >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
[ -x /usr/bin/time ] || { echo "$0: needs GNU time (/usr/bin/time)" >&2; exit 2; }
mkdir -p "$OUT"
printf 'model\tP\talgo\twall_s\tcpu_s\trss_mb\tstep_s\trc\n'
for row in "$@"; do
    read -r model p algo <<<"$row"
    case $algo in
    full) extra="" ;;
    megatron) extra="--algo megatron" ;;
    *) echo "$0: algo '$algo': not full or megatron" >&2; exit 2 ;;
    esac
    tag=$(basename "$model" | tr ':/' '__')-$p-$algo
    tm=$(mktemp)
    # shellcheck disable=SC2086
    /usr/bin/time -f '%e %U %S %M' -o "$tm" "$BIN" search -m "$model" -p "$p" $extra \
        --machine h100-sxm --memory 80GiB --format json --db none $ARGS \
        >"$OUT/$tag.json" 2>"$OUT/$tag.err"
    rc=$?
    read -r wall usr sys rss < <(tail -n 1 "$tm")
    rm -f "$tm"
    sed -i -E 's/"(search_|stage_)?seconds": *[0-9.eE+-]+/"\1seconds": 0/g' "$OUT/$tag.json"
    step=$(python3 -c 'import json,sys
try: print("%.4g" % json.load(open(sys.argv[1]))["predicted_step_seconds"])
except Exception: print("-")' "$OUT/$tag.json")
    printf '%s\t%s\t%s\t%s\t%.2f\t%d\t%s\t%s\n' "$(basename "$model")" "$p" "$algo" "$wall" \
        "$(echo "$usr + $sys" | bc)" $((rss / 1024)) "$step" "$rc"
done
