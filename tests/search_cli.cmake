# The baseline commands end to end: search --algo for every algorithm,
# candidates (table and JSON), prune (strategy files + index.tsv header that
# `shardbench bench` reads) and export of a survivor; bad input exits 2.
add_test(NAME test_search_cli
  COMMAND bash -c "set -e
    B=$<TARGET_FILE:shardbench>; D=$(mktemp -d); trap 'rm -rf $D' EXIT
    S='--set batch=8 --set vocab=64 --set units=16 --set seq=8'
    for a in pase bf dp expert mcmc candidates; do
      $B search -m rnnlm -p 4 $S --algo $a --budget 2000 --db $D/r.db | grep -q '^total cost'
    done
    test $(sqlite3 $D/r.db 'SELECT count(*) FROM search_runs') = 6
    $B candidates -m rnnlm -p 4 $S --top 3 | grep -q '^1 '
    $B candidates -m rnnlm -p 4 $S --format json | grep -q '\"candidates\":\\['
    $B prune -m rnnlm -p 4 $S --within 100 --budget 2000 --out $D/s > /dev/null
    test \"$(head -1 $D/s/index.tsv)\" = \"$(printf 'file\\tkind\\tpredicted_cost\\tpredicted_mem_bytes')\"
    test -f $D/s/01-pase.strategy
    for f in dtensor torch jax mtf; do $B export $D/s/01-pase.strategy --to $f | grep -q '^op loss'; done
    rc=0; $B search -m rnnlm -p 4 --algo nope 2>/dev/null || rc=$?; test $rc = 2
    rc=0; $B export $D/s/index.tsv --to jax 2>/dev/null || rc=$?; test $rc = 2
    rc=0; $B prune -m rnnlm -p 4 $S --device-mem 0.000001 --out $D/t > /dev/null 2>&1 || rc=$?; test $rc = 2")
set_tests_properties(test_search_cli PROPERTIES
  ENVIRONMENT "SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models;ASAN_OPTIONS=detect_leaks=0")

# search --threads: more than the CPUs this process may use is capped there
# and said (taskset to one CPU: the cap is 1); the same strategy as 1 thread;
# --threads 0 and a bad count.
add_test(NAME search_threads
  COMMAND bash -c "set -e
    B=$<TARGET_FILE:shardbench>
    a=$(taskset -c 0 $B search -m transformer -p 16 --threads 8 --db none --format tsv 2>err.txt | grep -v second)
    grep -q -- '--threads 8: this process may use 1 CPU; 1 thread' err.txt
    b=$($B search -m transformer -p 16 --threads 1 --db none --format tsv | grep -v second)
    test \"$a\" = \"$b\"
    $B search -m transformer -p 16 --threads 0 --db none --format tsv > /dev/null
    rc=0; $B search -m transformer -p 16 --threads x --db none 2>/dev/null || rc=$?; test $rc = 2")
set_tests_properties(search_threads PROPERTIES
  ENVIRONMENT "SHARDBENCH_MODELS=${CMAKE_SOURCE_DIR}/models;ASAN_OPTIONS=detect_leaks=0"
  WORKING_DIRECTORY ${CMAKE_BINARY_DIR})
