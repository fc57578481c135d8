#!/usr/bin/env bash
# test_run.sh AUGUR_BIN — `augur run` with real processes: the cluster variables each rank
# sees, whole prefixed lines under concurrent output, exit statuses (success, first
# failure, signals, exec failure, usage, --timeout), signals to the launcher, and that no
# process it started outlives it. Prints "ok NAME" or "FAIL NAME" per check.
set -uo pipefail
augur=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
check() { # check NAME COMMAND...
  local name=$1
  shift
  if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fails=$((fails + 1)); fi
}
ms() { date +%s%3N; }
# Runs the launcher with a hard limit, so that a hanging launcher fails the test instead
# of hanging it (137 is then the status).
run() { timeout -s KILL 20 "$augur" run "$@"; }
# gone FILE...: every pid listed in the files no longer exists.
gone() {
  local f pid
  for f in "$@"; do
    [ -s "$f" ] || { echo "  (no pid in $f)"; return 1; }
    for pid in $(cat "$f"); do
      if kill -0 "$pid" 2>/dev/null; then echo "  (pid $pid from $f still runs)"; return 1; fi
    done
  done
  return 0
}
# wait_files N PREFIX: waits up to 5 s until N non-empty files PREFIX* exist.
wait_files() {
  local n=$1 prefix=$2 f count
  for _ in $(seq 1 100); do
    count=0
    for f in "$prefix"*; do [ -s "$f" ] && count=$((count + 1)); done
    [ $count -ge "$n" ] && return 0
    sleep 0.05
  done
  return 1
}

# --- the cluster variables --------------------------------------------------------------
export AU_SECRET=s3cret AU_RANK=99 AU_NODES=99
out=$(run -n 3 -- sh -c 'echo "rank=$AU_RANK nodes=$AU_NODES coord=$AU_COORD cluster=$AU_CLUSTER secret=$AU_SECRET"'); rc=$?
unset AU_SECRET AU_RANK AU_NODES
check "env: exit 0" test $rc -eq 0
check "env: 3 lines" test "$(wc -l <<<"$out")" -eq 3
for r in 0 1 2; do
  check "env: rank $r sees AU_RANK=$r AU_NODES=3" grep -q "^\[$r\] rank=$r nodes=3 coord=" <<<"$out"
done
check "env: AU_COORD is 127.0.0.1:PORT" \
  test "$(grep -c ' coord=127\.0\.0\.1:[1-9][0-9]* ' <<<"$out")" -eq 3
check "env: AU_CLUSTER is run-<pid>-<hex>" \
  test "$(grep -c ' cluster=run-[0-9]*-[0-9a-f]\{16\} ' <<<"$out")" -eq 3
check "env: one AU_COORD for all" test "$(grep -o 'coord=[^ ]*' <<<"$out" | sort -u | wc -l)" -eq 1
check "env: one AU_CLUSTER for all" \
  test "$(grep -o 'cluster=[^ ]*' <<<"$out" | sort -u | wc -l)" -eq 1
check "env: AU_SECRET passed on" test "$(grep -c ' secret=s3cret$' <<<"$out")" -eq 3
# without one, augur run makes a secret per job: 64 hex digits, the same for every rank,
# another for the next job
out=$(run -n 2 -- sh -c 'echo "secret=$AU_SECRET"')
check "env: a job secret is made" test "$(grep -c 'secret=[0-9a-f]\{64\}$' <<<"$out")" -eq 2
check "env: one job secret for all" test "$(grep -o 'secret=.*' <<<"$out" | sort -u | wc -l)" -eq 1
out3=$(run -n 1 -- sh -c 'echo "secret=$AU_SECRET"')
check "env: the next job gets another secret" \
  test "$(grep -o 'secret=.*' <<<"$out" | sort -u)" != "$(grep -o 'secret=.*' <<<"$out3")"
out2=$(run -n 1 sh -c 'echo "$AU_COORD $AU_CLUSTER"')
check "env: a new cluster id per run" \
  test "$(cut -d' ' -f3 <<<"$out2")" != "$(grep -o 'cluster=[^ ]*' <<<"$out" | head -n 1 | cut -d= -f2)"
out=$(run -n 2 --port 45678 --bind 127.0.0.2 sh -c 'echo "$AU_COORD"')
check "env: --port and --bind make AU_COORD" test "$(grep -c '^\[[01]\] 127\.0\.0\.2:45678$' <<<"$out")" -eq 2
out=$(run -n 100 sh -c 'echo "r=$AU_RANK"')
check "env: 100 ranks, each once" \
  test "$(sort -u <<<"$out" | grep -c '^\[\([0-9]*\)\] r=\1$')" -eq 100

# --- output -----------------------------------------------------------------------------
# Each line is written in three pieces, so a relay that is not line-buffered would mix
# the ranks' lines. stdout and stderr both, at the same time.
run -n 4 sh -c 'i=0; while [ $i -lt 1000 ]; do printf "r%s " "$AU_RANK"; printf "n%d " $i;
  printf "end\n"; if [ $((i % 5)) = 0 ]; then printf "e%s " "$AU_RANK" >&2; printf "n%d\n" $i >&2; fi;
  i=$((i + 1)); done' >"$tmp/out" 2>"$tmp/err"; rc=$?
check "lines: exit 0" test $rc -eq 0
# Every stdout line must be "[R] rR nI end" with I counting 0, 1, ... per rank.
bad=$(awk '{
  if (NF != 4 || $1 !~ /^\[[0-3]\]$/ || $2 != "r" substr($1, 2, 1) || $3 !~ /^n[0-9]+$/ || $4 != "end") { bad++; next }
  r = substr($1, 2, 1); i = substr($3, 2) + 0
  if (i != next_i[r]) bad++
  next_i[r] = i + 1
} END { for (r = 0; r < 4; r++) if (next_i[r] != 1000) bad++; print bad + 0 }' "$tmp/out")
check "lines: 4000 stdout lines, whole, prefixed, in order" test "$bad" -eq 0 -a "$(wc -l <"$tmp/out")" -eq 4000
bad=$(awk '{
  if (NF != 3 || $1 !~ /^\[[0-3]\]$/ || $2 != "e" substr($1, 2, 1) || $3 !~ /^n[0-9]+$/) { bad++; next }
  r = substr($1, 2, 1); i = substr($3, 2) + 0
  if (i != next_i[r]) bad++
  next_i[r] = i + 5
} END { for (r = 0; r < 4; r++) if (next_i[r] != 1000) bad++; print bad + 0 }' "$tmp/err")
check "lines: 800 stderr lines, whole, prefixed, in order" test "$bad" -eq 0 -a "$(wc -l <"$tmp/err")" -eq 800

out=$(run -n 1 sh -c 'printf "no newline"')
check "lines: last line without newline" test "$out" = "[0] no newline"
# 100000 bytes without a newline: split into prefixed pieces, nothing lost.
run -n 1 sh -c 'head -c 100000 /dev/zero | tr "\0" x; echo; echo after' >"$tmp/long"
check "lines: long line split, not lost" \
  test "$(grep -v after "$tmp/long" | sed 's/^\[0\] //' | tr -d '\n' | wc -c)" -eq 100000
check "lines: long line pieces all prefixed" test "$(grep -vc '^\[0\] ' "$tmp/long")" -eq 0
check "lines: line after the long one" test "$(tail -n 1 "$tmp/long")" = "[0] after"
out=$(run -n 2 --no-prefix sh -c 'echo "plain $AU_RANK"' | sort)
check "lines: --no-prefix" test "$out" = $'plain 0\nplain 1'
out=$(run -n 1 sh -c 'exec >&-; sleep 0.2; echo still here >&2' 2>&1); rc=$?
check "lines: child closes stdout early" test $rc -eq 0 -a "$out" = "[0] still here"
out=$(echo hello | run -n 2 sh -c 'read -r x || x=none; echo "got $x"' | sort)
check "lines: stdin goes to rank 0 only" test "$out" = $'[0] got hello\n[1] got none'

# --- exit status ------------------------------------------------------------------------
run -n 4 true; rc=$?
check "status: all succeed → 0" test $rc -eq 0

t0=$(ms)
run -n 4 sh -c 'if [ "$AU_RANK" = 1 ]; then sleep 0.5; exit 3; fi
  echo $$ >"'"$tmp"'/pid.$AU_RANK"; sleep 30 & echo $! >>"'"$tmp"'/pid.$AU_RANK"; wait' \
  2>"$tmp/err"; rc=$?
t1=$(ms)
check "first failure: exit 3" test $rc -eq 3
check "first failure: within 3 s" test $((t1 - t0)) -lt 3000
check "first failure: says so" \
  grep -qx 'augur run: rank 1 exited with status 3; stopping the others' "$tmp/err"
check "first failure: one line" test "$(wc -l <"$tmp/err")" -eq 1
check "first failure: sleepers and their children gone" gone "$tmp"/pid.0 "$tmp"/pid.2 "$tmp"/pid.3
rm -f "$tmp"/pid.*

run -n 2 sh -c 'if [ "$AU_RANK" = 0 ]; then sleep 0.5; kill -9 $$; fi; exec sleep 30' 2>"$tmp/err"; rc=$?
check "killed child: exit 137" test $rc -eq 137
check "killed child: says so" \
  grep -qx 'augur run: rank 0 was killed by signal 9 (Killed); stopping the others' "$tmp/err"

# A rank that ignores SIGTERM is killed after --grace.
t0=$(ms)
run -n 2 --grace 0.5 sh -c 'if [ "$AU_RANK" = 0 ]; then sleep 0.5; exit 5; fi
  trap "" TERM; echo $$ >"'"$tmp"'/pid.1"; while :; do sleep 0.1; done' 2>/dev/null; rc=$?
t1=$(ms)
check "grace: exit 5" test $rc -eq 5
check "grace: SIGKILL after 0.5 s" test $((t1 - t0)) -ge 1000 -a $((t1 - t0)) -lt 3500
check "grace: TERM-ignoring rank gone" gone "$tmp/pid.1"
rm -f "$tmp"/pid.*

out=$(run -n 2 no-such-program-xyz 2>&1); rc=$?
check "no program: exit 127" test $rc -eq 127
check "no program: says so" \
  grep -q "augur run: cannot run 'no-such-program-xyz': No such file or directory" <<<"$out"

t0=$(ms)
run -n 3 --timeout 1 sh -c 'echo $$ >"'"$tmp"'/pid.$AU_RANK"; exec sleep 30' 2>"$tmp/err"; rc=$?
t1=$(ms)
check "timeout: exit 124" test $rc -eq 124
check "timeout: after 1 s" test $((t1 - t0)) -ge 900 -a $((t1 - t0)) -lt 3000
check "timeout: says so" grep -q '^augur run: timed out after 1 s' "$tmp/err"
check "timeout: ranks gone" gone "$tmp"/pid.0 "$tmp"/pid.1 "$tmp"/pid.2
rm -f "$tmp"/pid.*

# A rank exits 0 but leaves a background process holding its stdout: the launcher still
# finishes (after a short drain) and stops what was left behind.
t0=$(ms)
out=$(run -n 2 sh -c 'sleep 30 & echo $! >"'"$tmp"'/pid.$AU_RANK"; echo started' 2>"$tmp/err"); rc=$?
t1=$(ms)
check "grandchild: exit 0" test $rc -eq 0
check "grandchild: within 3 s" test $((t1 - t0)) -lt 3000
check "grandchild: output relayed" test "$(grep -c '^\[[01]\] started$' <<<"$out")" -eq 2
check "grandchild: says it stops them" grep -q 'left processes running; stopping them' "$tmp/err"
check "grandchild: background process gone" gone "$tmp"/pid.0 "$tmp"/pid.1
rm -f "$tmp"/pid.*

# The reader goes away: the launcher stops the ranks instead of running on.
t0=$(ms)
run -n 2 sh -c 'while :; do echo y; done' | head -n 5 >/dev/null
rc=${PIPESTATUS[0]}
t1=$(ms)
check "closed stdout: exit 141" test "$rc" -eq 141
check "closed stdout: within 3 s" test $((t1 - t0)) -lt 3000

# a line of exactly twice the launcher's buffer: split in two, no empty third line
out=$(run -n 1 --no-prefix sh -c 'head -c 65536 /dev/zero | tr "\0" a; echo' | awk '{ print length($0) }' | tr '\n' ' ')
check "a line of 2 x 32768 bytes: two lines, no empty one ($out)" test "$out" = "32768 32768 "
# output that cannot be written (a full disk): exit 1, said
run -n 2 sh -c 'echo x' >/dev/full 2>"$tmp/err"; rc=$?
check "stdout on a full disk: exit 1, said" \
  test $rc -eq 1 -a "$(grep -c "writing the ranks' output: No space left" "$tmp/err")" -eq 1
# output nobody reads (a reader that does not read): --timeout and SIGTERM still stop it
mkfifo "$tmp/fifo"
sleep 25 <"$tmp/fifo" &
reader=$!
run -n 2 --timeout 1 yes >"$tmp/fifo" 2>/dev/null; rc=$?
check "blocked output: --timeout stops the job (124)" test $rc -eq 124
kill $reader 2>/dev/null; wait $reader 2>/dev/null
sleep 25 <"$tmp/fifo" &
reader=$!
"$augur" run -n 2 sh -c 'echo $$ >"'"$tmp"'/bpid.$AU_RANK"; exec yes' >"$tmp/fifo" 2>/dev/null &
launcher=$!
wait_files 2 "$tmp"/bpid.
sleep 0.5 # the pipe fills
kill -TERM $launcher
wait $launcher 2>/dev/null; rc=$?
check "blocked output: SIGTERM stops the job (143)" test $rc -eq 143
check "blocked output: ranks gone" gone "$tmp"/bpid.0 "$tmp"/bpid.1
kill $reader 2>/dev/null; wait $reader 2>/dev/null
# a signal while the job is already stopping (a rank failed, another ignores SIGTERM):
# the launcher dies of it, with no restart
"$augur" run -n 2 --grace 5 --restarts 2 sh -c 'if [ "$AU_RANK" = 1 ]; then sleep 0.3; exit 5; fi
  trap "" TERM; echo $$ >"'"$tmp"'/spid"; while :; do sleep 0.1; done' >/dev/null 2>"$tmp/err" &
launcher=$!
wait_files 1 "$tmp"/spid
sleep 1 # rank 1 has failed: the launcher waits out --grace for rank 0
kill -TERM $launcher
wait $launcher 2>/dev/null; rc=$?
check "SIGTERM while stopping: the launcher dies of it (143)" test $rc -eq 143
check "SIGTERM while stopping: no restart" test "$(grep -c 'starting the job again' "$tmp/err")" -eq 0

# --- signals to the launcher ------------------------------------------------------------
for sig in TERM INT; do
  [ $sig = INT ] && set -m # a background job's SIGINT is ignored without job control
  t0=$(ms)
  "$augur" run -n 3 sh -c 'echo $$ >"'"$tmp"'/pid.$AU_RANK"; sleep 30 & echo $! >>"'"$tmp"'/pid.$AU_RANK"; wait' \
    >/dev/null 2>"$tmp/err" &
  launcher=$!
  wait_files 3 "$tmp"/pid.
  sleep 0.1 # the pid files exist: let the background sleeps start
  kill -$sig $launcher
  wait $launcher 2>/dev/null; rc=$?
  t1=$(ms)
  set +m
  want=$((128 + $(kill -l $sig)))
  check "SIG$sig: launcher dies of it ($want)" test $rc -eq $want
  check "SIG$sig: within 3 s" test $((t1 - t0)) -lt 3000
  check "SIG$sig: says so" grep -q "^augur run: received SIG$sig; stopping all 3 ranks" "$tmp/err"
  check "SIG$sig: ranks and their children gone" gone "$tmp"/pid.0 "$tmp"/pid.1 "$tmp"/pid.2
  rm -f "$tmp"/pid.*
done

# --- usage ------------------------------------------------------------------------------
expect_usage() { # expect_usage NAME PATTERN ARGS...
  local name=$1 pattern=$2 err rc
  shift 2
  err=$("$augur" "$@" 2>&1 >/dev/null); rc=$?
  check "usage $name: exit 2" test $rc -eq 2
  check "usage $name: one line" test "$(printf '%s\n' "$err" | wc -l)" -eq 1
  check "usage $name: says '$pattern'" grep -qF -- "$pattern" <<<"$err"
}
expect_usage "missing -n" "missing -n N" run true
expect_usage "-n 0" "-n: expected a number of processes from 1 to 1024, got '0'" run -n 0 true
expect_usage "-n abc" "got 'abc'" run -n abc true
expect_usage "-n 5000" "got '5000'" run -n 5000 true
expect_usage "--hosts an ssh option" "--hosts: '-v' is not a host name" run --hosts -v true
expect_usage "--hosts a bare IPv6 address" "is not a host name or address (IPv6 in brackets)" \
  run --hosts ::1 true
expect_usage "--hosts unbalanced brackets" "--hosts: '[:' is not a host name" run --hosts '[::1' true
expect_usage "--hosts an empty entry" "--hosts: '' is not a host name" run --hosts a,,b true
expect_usage "-n without value" "-n: expected a value" run -n
expect_usage "missing PROGRAM" "missing PROGRAM" run -n 2
expect_usage "missing PROGRAM after --" "missing PROGRAM" run -n 2 --
expect_usage "unknown option" "unknown option '--bogus'" run -n 2 --bogus true
expect_usage "bad --timeout" "--timeout: expected" run -n 2 --timeout -1 true
expect_usage "bad --port" "--port: expected" run -n 2 --port 70000 true
expect_usage "bad --bind" "--bind: expected an IPv4 address" run -n 2 --bind localhost true
expect_usage "unknown command" "unknown command 'bogus'" bogus
err=$("$augur" 2>&1 >/dev/null); rc=$?
check "usage no command: exit 2" test $rc -eq 2
check "usage no command: usage on stderr" grep -q '^usage: augur COMMAND' <<<"$err"

out=$("$augur" --help); rc=$?
check "augur --help: exit 0" test $rc -eq 0
check "augur --help: lists run" grep -q '^  run ' <<<"$out"
out=$("$augur" run --help); rc=$?
check "augur run --help: exit 0" test $rc -eq 0
for word in -n --port --bind --timeout --grace --no-prefix AU_RANK AU_NODES AU_COORD \
            AU_CLUSTER AU_SECRET 124 127 SIGTERM SIGKILL; do
  check "augur run --help: documents $word" grep -q -- "$word" <<<"$out"
done
check "augur help run: same text" test "$("$augur" help run)" = "$out"
out=$(run -n 1 -- sh -c 'echo "$0 $1"' -n --help)
check "options end at PROGRAM" test "$out" = "[0] -n --help"

if [ $fails -ne 0 ]; then echo "$fails check(s) failed"; exit 1; fi
echo "all checks passed"
