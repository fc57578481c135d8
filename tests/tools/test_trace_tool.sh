#!/usr/bin/env bash
# test_trace_tool.sh AUGUR_BIN — `augur trace summary` and `augur trace merge` on two node
# files written here with a known mix of events (what au_trace_stop writes: see
# runtime/trace.c), checked line by line: counts per kind and node, relocation / replica /
# park percentiles, the most-moved actors, dropped events; then malformed input (exit 2,
# "FILE: byte N: expected ..."), missing files (exit 1) and usage. Prints "ok NAME" or
# "FAIL NAME" per check.
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
# has TEXT LINE: TEXT has LINE as a whole line, runs of spaces counting as one
has() { tr -s ' ' <<<"$1" | grep -qxF -- "$2" || { echo "  (no line '$2')"; return 1; }; }
# Runs augur with a hard limit, so that a hang fails the test (137) instead of hanging it.
run() { timeout -s KILL 20 "$augur" "$@"; }

# --- fixtures: node 0 (pid 1) and node 1 (pid 2), on one host ---------------------------
meta() { # meta PID RANK
  local tid=$(($1 * 10000))
  printf '{"name":"process_name","ph":"M","pid":%d,"tid":%d,"args":{"name":"node %d"}},\n' "$1" "$tid" "$2"
  printf '{"name":"thread_name","ph":"M","pid":%d,"tid":%d,"args":{"name":"sched-0"}},\n' "$1" "$tid"
  printf '{"name":"thread_name","ph":"M","pid":%d,"tid":%d,"args":{"name":"main"}}' "$1" $((tid + 3))
}
# relocation EDGE PID TS_US ACTOR FLOW: a relocation_start (s) or _end (f) and its arrow
relocation() {
  local name=relocation_start ph='"ph":"s"' tid=$(($2 * 10000 + 3))
  [ "$1" = f ] && name=relocation_end && ph='"ph":"f","bp":"e"'
  printf ',\n{"name":"%s","cat":"augur","ph":"X","ts":%s,"dur":1.000,"pid":%d,"tid":%d,' "$name" "$3" "$2" "$tid"
  printf '"args":{"table":%s,"actor":%s,"to":1,"flow":"%s"}}' "${4%%:*}" "${4##*:}" "$5"
  [ "$5" = 0 ] || printf ',\n{"name":"relocation","cat":"augur.flow",%s,"id":"%s","ts":%s,"pid":%d,"tid":%d}' \
    "$ph" "$5" "$3" "$2" "$tid"
}
{
  printf '{"traceEvents":[\n'
  meta 1 0
  # 5 relocations leave node 0: actor 1:7 four times, 1:8 once (its end is not traced)
  relocation s 1 1000.000 1:7 a1
  relocation s 1 2000.000 1:7 a2
  relocation s 1 3000.000 1:7 a3
  relocation s 1 4000.000 1:7 a4
  relocation s 1 5000.000 1:8 a5
  # 10 parks of 10, 20, ... 100 us, each followed by its unpark
  for i in 1 2 3 4 5 6 7 8 9 10; do
    printf ',\n{"name":"park","cat":"augur","ph":"X","ts":%d.000,"dur":%d.000,"pid":1,"tid":10000,"args":{"sleeping":1}}' $((10000 + i * 1000)) $((i * 10))
    printf ',\n{"name":"unpark","cat":"augur","ph":"i","s":"t","ts":%d.000,"pid":1,"tid":10000,"args":{"ns":%d,"token":1}}' $((10000 + i * 1000 + i * 10)) $((i * 10000))
  done
  for i in 1 2 3; do
    printf ',\n{"name":"steal","cat":"augur","ph":"i","s":"t","ts":%d.500,"pid":1,"tid":10000,"args":{"victim":1}}' $((30000 + i))
  done
  # not ours: checked as JSON, otherwise ignored
  printf ',\n{"name":"other tool","cat":"x","ph":"i","ts":1,"pid":1,"tid":5,"args":{"deep":[1,{"a":null}],"s":"\\u00e9\\n"}}'
  printf '\n],\n"displayTimeUnit":"ns",\n"otherData":{"generator":"augur 0.1","host":"h1","rank":0,"nodes":2,"events":28,"dropped":0}}\n'
} >"$tmp/t.json.0"
{
  printf '{"traceEvents":[\n'
  meta 2 1
  # the four 1:7 relocations arrive 10, 20, 30 and 40 us after they left
  relocation f 2 1010.000 1:7 a1
  relocation f 2 2020.000 1:7 a2
  relocation f 2 3030.000 1:7 a3
  relocation f 2 4040.000 1:7 a4
  # one arrives whose start is not in these files, without a flow id
  relocation f 2 6000.000 2:9 0
  # replicas on node 1: 1:7 lives 50 us, then again 100 us; 1:8 is never dropped
  for ev in "replica_create 100 7" "replica_drop 150 7" "replica_create 200 7" \
    "replica_drop 300 7" "replica_create 400 8"; do
    set -- $ev
    printf ',\n{"name":"%s","cat":"augur","ph":"i","s":"t","ts":%d.000,"pid":2,"tid":20003,"args":{"table":1,"actor":%d,"owner":0,"bytes":4096}}' "$1" "$2" "$3"
  done
  printf ',\n{"name":"intent","cat":"augur","ph":"i","s":"t","ts":50.250,"pid":2,"tid":20003,"args":{"table":1,"actor":7,"node":1,"worker":0}}'
  printf ',\n{"name":"intent","cat":"augur","ph":"i","s":"t","ts":50.750,"pid":2,"tid":20003,"args":{"table":1,"actor":8,"node":1,"worker":0}}'
  printf '\n],\n"displayTimeUnit":"ns",\n"otherData":{"generator":"augur 0.1","host":"h1","rank":1,"nodes":2,"events":12,"dropped":5}}\n'
} >"$tmp/t.json.1"

# --- summary ----------------------------------------------------------------------------
out=$(run trace summary "$tmp/t.json.0" "$tmp/t.json.1"); rc=$?
check "summary: exit 0" test $rc -eq 0
check "summary: file line, node 0" has "$out" "file=$tmp/t.json.0 rank=0 events=28 dropped=0 host=h1"
check "summary: file line, node 1" has "$out" "file=$tmp/t.json.1 rank=1 events=12 dropped=5 host=h1"
check "summary: total" has "$out" "total files=2 nodes=2 events=40 dropped=5"
check "summary: node 0 events" has "$out" "node=0 events=28"
check "summary: node 1 events" has "$out" "node=1 events=12"
check "summary: dropped warning" grep -q '^warning: 5 events were dropped' <<<"$out"
check "summary: no host warning" test "$(grep -c 'different hosts' <<<"$out")" -eq 0
for kc in intent=2 relocation_start=5 relocation_end=5 replica_create=3 replica_sync=0 \
  replica_drop=2 remote_access=0 forward=0 steal=3 park=10 unpark=10; do
  check "summary: kind ${kc%=*}" has "$out" "kind=${kc%=*} count=${kc#*=}"
done
check "summary: other tools' events are not counted" test "$(grep -c '^kind=other' <<<"$out")" -eq 0
check "summary: relocation latencies" has "$out" \
  "duration=relocation count=4 start_only=1 end_only=1 p50_us=20.000 p90_us=40.000 p99_us=40.000 max_us=40.000"
check "summary: replica lifetimes" has "$out" \
  "duration=replica count=2 undropped=1 drop_only=0 p50_us=50.000 p90_us=100.000 p99_us=100.000 max_us=100.000"
check "summary: park durations" has "$out" \
  "duration=park count=10 p50_us=50.000 p90_us=90.000 p99_us=100.000 max_us=100.000"
check "summary: most moved first" has "$out" "moved rank=1 actor=1:7 relocations=4"
check "summary: most moved second" has "$out" "moved rank=2 actor=1:8 relocations=1"
check "summary: most moved third" has "$out" "moved rank=3 actor=2:9 relocations=1"
out2=$(run trace summary --top 1 "$tmp/t.json.0" "$tmp/t.json.1")
check "summary: --top 1" test "$(grep -c '^moved ' <<<"$out2")" -eq 1
# one node alone: its relocations have no ends
out2=$(run trace summary "$tmp/t.json.0")
check "summary: one file, starts only" has "$out2" "duration=relocation count=0 start_only=5 end_only=0"

# different hosts: a warning
sed 's/"host":"h1"/"host":"h2"/' "$tmp/t.json.1" >"$tmp/h2.json"
out2=$(run trace summary "$tmp/t.json.0" "$tmp/h2.json")
check "summary: hosts warning" grep -q '^warning: the files come from different hosts' <<<"$out2"

# --- merge: one file, the same summary --------------------------------------------------
run trace merge -o "$tmp/all.json" "$tmp/t.json.0" "$tmp/t.json.1"; rc=$?
check "merge: exit 0" test $rc -eq 0
check "merge: no .part left" test ! -e "$tmp/all.json.part"
merged=$(run trace summary "$tmp/all.json"); rc=$?
check "merge: its output reads back" test $rc -eq 0
check "merge: same kinds and durations" \
  test "$(grep -E '^(kind|duration|moved|node)=?' <<<"$merged")" = "$(grep -E '^(kind|duration|moved|node)=?' <<<"$out")"
check "merge: dropped carried over" has "$merged" "total files=1 nodes=2 events=40 dropped=5"
if command -v python3 >/dev/null; then
  check "merge: valid JSON (python)" python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$tmp/all.json"
fi
run trace merge -o "$tmp/none.json" "$tmp/t.json.0" "$tmp/missing.json" 2>/dev/null; rc=$?
check "merge: missing input -> exit 1, no output" test $rc -eq 1 -a ! -e "$tmp/none.json" -a ! -e "$tmp/none.json.part"

# --- malformed input: exit 2 and FILE: byte N -------------------------------------------
# bad NAME EXPECTED-STDERR: summary of $tmp/NAME exits 2 and says exactly that
bad() {
  local err rc
  err=$(run trace summary "$tmp/t.json.0" "$tmp/$1" 2>&1 >/dev/null); rc=$?
  [ $rc -eq 2 ] || { echo "  (exit $rc, stderr: $err)"; return 1; }
  [ "$err" = "$tmp/$2" ] || { echo "  (stderr: $err)"; return 1; }
}
head -c 300 "$tmp/t.json.1" >"$tmp/cut.json"
printf '' >"$tmp/empty.json"
printf '{"traceEvents":[],"x":tru}' >"$tmp/tru.json"
printf '{"traceEvents":[{"name":"a",}]}' >"$tmp/comma.json"
printf '{"traceEvents":[1]}' >"$tmp/notobj.json"
printf '{"traceEvents":[{"name":"steal","cat":"augur","ph":"i"}]}' >"$tmp/nots.json"
printf '{"traceEvents":[]} x' >"$tmp/after.json"
printf '{"traceEvents":[{"name":"a\x01"}]}' >"$tmp/ctl.json"
printf '{"traceEvents":[{"ts":01}]}' >"$tmp/zero.json"
printf '{"otherData":{}}' >"$tmp/noevents.json"
printf '{"traceEvents":{}}' >"$tmp/evobj.json"
printf '{"traceEvents":[{"name":"\\q"}]}' >"$tmp/esc.json"
check "malformed: truncated" bad cut.json "cut.json: byte 301: unexpected end of file, expected '\"' to close the string"
check "malformed: empty" bad empty.json "empty.json: byte 1: unexpected end of file, expected '{' or '[' (a Chrome trace-event JSON file)"
check "malformed: bad literal" bad tru.json "tru.json: byte 23: expected a value"
check "malformed: trailing comma" bad comma.json "comma.json: byte 29: expected '\"' (an object key)"
check "malformed: event not an object" bad notobj.json "notobj.json: byte 17: expected '{' (an event is an object)"
check "malformed: augur event without ts" bad nots.json \
  "nots.json: byte 17: expected an augur event (\"cat\":\"augur\") with a \"name\", a \"ph\" and a numeric \"ts\""
check "malformed: text after the trace" bad after.json "after.json: byte 20: expected the end of the file after the trace"
check "malformed: control character" bad ctl.json "ctl.json: byte 27: expected a character, not control character 0x01, in a string"
check "malformed: leading zero" bad zero.json "zero.json: byte 24: expected ',' or '}' in an object"
check "malformed: no traceEvents" bad noevents.json "noevents.json: byte 1: expected a \"traceEvents\" array in the top-level object"
check "malformed: traceEvents not an array" bad evobj.json "evobj.json: byte 16: expected '[' (traceEvents is an array of events)"
check "malformed: bad escape" bad esc.json "esc.json: byte 27: expected an escape (one of \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)"
# deep nesting and garbage: an error, never a crash
{ printf '{"traceEvents":[{"args":'; head -c 100000 /dev/zero | tr '\0' '['; } >"$tmp/deep.json"
run trace summary "$tmp/deep.json" >/dev/null 2>"$tmp/err"; rc=$?
check "malformed: deep nesting -> exit 2" test $rc -eq 2
check "malformed: deep nesting says why" grep -q 'deep.json: byte 86: expected at most 64 nested arrays and objects' "$tmp/err"
head -c 65536 /dev/urandom >"$tmp/random.json"
run trace summary "$tmp/random.json" >/dev/null 2>"$tmp/err"; rc=$?
check "malformed: random bytes -> exit 2" test $rc -eq 2
check "malformed: random bytes say where" grep -q "random.json: byte [0-9]*: " "$tmp/err"
# every prefix of a valid file is rejected cleanly (exit 2, never a signal)
ok=1
size=$(wc -c <"$tmp/t.json.1")
for n in $(seq 0 37 $((size - 2))); do
  head -c "$n" "$tmp/t.json.1" >"$tmp/prefix.json"
  run trace summary "$tmp/prefix.json" >/dev/null 2>&1
  rc=$?
  [ $rc -eq 2 ] || { echo "  (prefix of $n bytes: exit $rc)"; ok=0; break; }
done
check "malformed: every prefix -> exit 2" test $ok -eq 1

# --- files and usage ----------------------------------------------------------------------
run trace summary "$tmp/missing.json" >/dev/null 2>"$tmp/err"; rc=$?
check "missing file: exit 1" test $rc -eq 1
check "missing file: says so" grep -q "augur trace: cannot open $tmp/missing.json: No such file" "$tmp/err"
run trace >/dev/null 2>&1; rc=$?
check "usage: no action -> 2" test $rc -eq 2
run trace summary >/dev/null 2>&1; rc=$?
check "usage: no file -> 2" test $rc -eq 2
run trace bogus >/dev/null 2>&1; rc=$?
check "usage: unknown action -> 2" test $rc -eq 2
run trace summary --frob "$tmp/t.json.0" >/dev/null 2>&1; rc=$?
check "usage: unknown option -> 2" test $rc -eq 2
run trace merge "$tmp/t.json.0" >/dev/null 2>&1; rc=$?
check "usage: merge without -o -> 2" test $rc -eq 2
help=$(run trace --help); rc=$?
check "help: --help exits 0" test $rc -eq 0
check "help: --help shows usage" grep -q '^usage: augur trace summary' <<<"$help"
check "help: augur help trace is the same" test "$(run help trace)" = "$help"
check "help: listed in augur --help" grep -q '^  trace ' <<<"$(run --help)"

if [ $fails -ne 0 ]; then
  echo "$fails check(s) failed"
  exit 1
fi
echo "all checks passed"
