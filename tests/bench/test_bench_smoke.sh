#!/usr/bin/env bash
# test_bench_smoke.sh NAME BUILD_DIR — runs one benchmark of bench/ on a problem small
# enough for a test (a second or two) and checks that it exits 0 and prints the key=value
# lines that docs/benchmarks.md quotes, with the benchmark's own correctness checks (its
# exit status, and the counters that must be 0). Speed is not checked: that is bench/'s
# business, on the realistic shapes.
set -uo pipefail
name=$1
b=$2/bench/augur-bench-$name
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
check() { # check NAME COMMAND...
  local what=$1
  shift
  if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fails=$((fails + 1)); fi
}
case $name in
ids) args=(--pushes 200000 --budget 8 --runs 1)
     keys=(pushes_ratio_many_over_few= "rows_below_admit=0 runs_over_budget=0") ;;
maps) args=(--keys 10000 --lookups 100000); keys=(u64map_ns_per_get= ck_ht_over_u64map=) ;;
queues) args=(--messages 20000); keys=(mailbox_ns= ck_fifo_over_mailbox=) ;;
ckpt) args=(--keys 10000 --dim 8 --runs 1 --dir "$tmp/ck"); keys=(full_bytes= incremental_over_full=) ;;
lda) args=(--docs 2000 --iterations 2 --topics 20 --max-threads 1)
     keys=(augur_tokens_per_s= dense_tokens_per_s= ratio=) ;;
mf) args=(--shape default --epochs 1 --quality-epochs 0 --max-threads 1)
    keys=(augur_updates_per_s= baseline_updates_per_s= ratio=) ;;
sched) args=(--threads 2); keys=(pingpong_msgs_per_s= fanout_msgs_per_s= wake_latency_p90_us=) ;;
net) args=(--only small); keys=(ratio_vs_raw_tcp=) ;;
*) echo "unknown benchmark $name"; exit 2 ;;
esac
"$b" --help >"$tmp/help" 2>&1
check "$name --help exits 0" test $? -eq 0
check "$name --help says how to call it" grep -q "^usage: augur-bench-$name" "$tmp/help"
timeout 120 "$b" "${args[@]}" >"$tmp/out" 2>&1
rc=$?
cat "$tmp/out"
check "$name ${args[*]}: exits 0" test $rc -eq 0
for k in "${keys[@]}"; do check "$name prints $k" grep -q -- "$k" "$tmp/out"; done
if [ "$name" = ids ]; then # one stream: its own median, no ratio
  timeout 120 "$b" "${args[@]}" --stream few >"$tmp/one" 2>&1
  check "ids --stream few: exits 0" test $? -eq 0
  check "ids --stream few: prints its median" grep -q median_pushes_per_s_few= "$tmp/one"
  check "ids --stream few: runs no many stream" bash -c "! grep -q stream=many '$tmp/one'"
fi
"$b" --bogus >/dev/null 2>"$tmp/err"
check "$name --bogus: exits nonzero with a message" test $? -ne 0 -a -s "$tmp/err"
[ $fails -eq 0 ] && { echo "all checks passed"; exit 0; }
echo "$fails check(s) failed"
exit 1
