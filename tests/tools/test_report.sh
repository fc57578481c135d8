#!/usr/bin/env bash
# test_report.sh BUILD_DIR — `augur report`: a page from fixtures whose every element is
# known (curves, bytes, an ownership timeline with known moves and a replica), a page from
# real 2-node runs of augur-mf (one traced), nothing in either loaded from the network,
# bad input refused with what was wrong; then the page rendered in headless Chromium
# (Debian's chromium, installed by scripts/install-deps.sh report): its DOM has the SVG
# elements, and its screenshot has the plots' colours (a blank page's has none). Exit 77
# (ctest's skip) when chromium is missing and every other check passed.
set -uo pipefail
build=$1
augur=$build/tools/augur
pngstat=$build/tests/pngstat
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
check() { # check NAME COMMAND...
  local name=$1
  shift
  if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fails=$((fails + 1)); fi
}
count() { grep -o -- "$1" "$2" | wc -l; } # count PATTERN FILE: occurrences
run() { timeout -s KILL 60 "$augur" "$@"; }

# --- fixtures ----------------------------------------------------------------------------
# two runs through augur run (rank prefixes; rank 1's lines must be ignored), one of which
# was restarted (epoch 2 printed twice: the later one counts)
cat >"$tmp/a.out" <<'EOF'
[0] model rank=16 nodes=2 mode=adaptive optimizer=adagrad
[1] epoch=1 train_rmse=9 test_rmse=9 seconds=9 local=0 bytes_sent=9
[0] epoch=1 train_rmse=0.9 test_rmse=0.95 seconds=0.5 local=0.9 bytes_sent=3000 bytes_fetch=1000 bytes_push=0 bytes_move=2000 bytes_replica=0 bytes_control=0
[0] epoch=2 train_rmse=0.7 test_rmse=0.99 seconds=0.4 local=0.95 bytes_sent=1000 bytes_fetch=500 bytes_push=0 bytes_move=500 bytes_replica=0 bytes_control=0
augur run: starting the job again (restart 1 of 3, AU_RESTART=1)
[0] epoch=2 train_rmse=0.6 test_rmse=0.8 seconds=0.4 local=0.95 bytes_sent=1000 bytes_fetch=500 bytes_push=0 bytes_move=500 bytes_replica=0 bytes_control=0
[0] epoch=3 train_rmse=0.5 test_rmse=0.7 seconds=0.4 local=0.97 bytes_sent=1000 bytes_fetch=500 bytes_push=0 bytes_move=500 bytes_replica=0 bytes_control=0
EOF
cat >"$tmp/b.out" <<'EOF'
model rank=16 nodes=2 mode=classic
epoch=1 train_rmse=0.8 test_rmse=0.9 seconds=1.5 local=0.5 bytes_sent=8000 bytes_fetch=4000 bytes_push=4000 bytes_move=0 bytes_replica=0 bytes_control=0
epoch=2 train_rmse=0.6 test_rmse=0.8 seconds=1.4 local=0.5 bytes_sent=8000 bytes_fetch=4000 bytes_push=4000 bytes_move=0 bytes_replica=0 bytes_control=0
epoch=3 train_rmse=0.5 test_rmse=0.75 seconds=1.4 local=0.5 bytes_sent=8000 bytes_fetch=4000 bytes_push=4000 bytes_move=0 bytes_replica=0 bytes_control=0
EOF
# a 2-node trace: actor 0:5 moves 0 -> 1 (start 100 us, end 110 us) and back (300/320);
# actor 0:7 moves once; node 1 holds a replica of 0:9 from 150 to 250 us; rank 0 spans two
# epochs
ev() { # ev PID NAME TS_US ARGS [DUR_US]
  printf ',\n{"name":"%s","cat":"augur","ph":"X","ts":%s,"dur":%s,"pid":%d,"tid":%d,"args":{%s}}' \
    "$2" "$3" "${5:-1}" "$1" $(($1 * 10000)) "$4"
}
{
  printf '{"traceEvents":[\n{"name":"process_name","ph":"M","pid":1,"tid":10000,"args":{"name":"node 0"}}'
  ev 1 epoch 50 '"n":1' 200
  ev 1 epoch 250 '"n":2' 150
  ev 1 relocation_start 100 '"table":0,"actor":5,"to":1,"flow":"1"'
  ev 1 relocation_start 120 '"table":0,"actor":7,"to":1,"flow":"2"'
  ev 1 relocation_end 320 '"table":0,"actor":5,"to":0,"flow":"3"'
  printf '],\n"otherData":{"rank":0,"nodes":2}}\n'
} >"$tmp/t.json.0"
{
  printf '{"traceEvents":[\n{"name":"process_name","ph":"M","pid":2,"tid":20000,"args":{"name":"node 1"}}'
  ev 2 relocation_end 110 '"table":0,"actor":5,"to":1,"flow":"1"'
  ev 2 relocation_end 130 '"table":0,"actor":7,"to":1,"flow":"2"'
  ev 2 replica_create 150 '"table":0,"actor":9,"owner":0,"bytes":64'
  ev 2 replica_drop 250 '"table":0,"actor":9,"owner":0'
  ev 2 relocation_start 300 '"table":0,"actor":5,"to":0,"flow":"3"'
  printf '],\n"otherData":{"rank":1,"nodes":2}}\n'
} >"$tmp/t.json.1"

run report -o "$tmp/f.html" --title 'fixture <report>' "$tmp/a.out" --label second "$tmp/b.out" \
  "$tmp/t.json.0" "$tmp/t.json.1" >"$tmp/f.log" 2>&1
check "fixtures: exit 0, two runs and one timeline" grep -q '^report=.* runs=2 traces=1$' "$tmp/f.log"
f=$tmp/f.html
check "... the title escaped" grep -q '<title>fixture &lt;report&gt;</title>' "$f"
# charts with data: test, train, seconds, local (no llh): 4 charts x 2 runs
check "... four charts" test "$(count '<svg class="chart"' "$f")" -eq 4
check "... a line per run in each: 8" test "$(count '<polyline class="series"' "$f")" -eq 8
check "... no llh chart (no run printed llh_per_token)" test "$(count 'data-metric="llh_per_token"' "$f")" -eq 0
# run a: 3 points (the restarted epoch 2 once, with its later value), rank 1 ignored
check "... run a: 3 epochs, the redone one replaced" grep -q 'a.out (adaptive) epoch 2: test_rmse=0.8<' "$f"
check "... rank 1's line not drawn" test "$(count 'test_rmse=9<' "$f")" -eq 0
check "... --label names the next run" grep -q '<td>second</td>' "$f"
# bytes: a: fetch 2000, move 3000; b: fetch 12000, push 12000
check "... bytes bars: a's fetch and move, b's fetch and push" \
  test "$(count '<rect class="bar"' "$f")" -eq 4
check "... b's fetch 11.7 KiB" grep -q '<title>fetch: 11.7 KiB</title>' "$f"
check "... a's total 4.9 KiB" grep -q '>4.9 KiB<' "$f"
# timeline: rows 0:5 (2 moves), 0:7 (1), 0:9 (0 moves, a replica)
check "... timeline rows by moves: 0:5, 0:7, 0:9" \
  test "$(grep -o '>0:[0-9] ([0-9])<' "$f" | tr -d '<>\n')" = "0:5 (2)0:7 (1)0:9 (0)"
# 0:5 owned by node 0, in flight 100-110, node 1, in flight 300-320, node 0 again: 3 bars;
# 0:7: node 0 then node 1: 2; 0:9 (no moves, owner 0 from its replica): 1
check "... owner bars: 3 + 2 + 1" test "$(count '<rect class="own"' "$f")" -eq 6
check "... node 0's bars: 0:5 twice, 0:7 and 0:9 once; node 1's: 0:5 and 0:7" \
  test "$(grep -c 'class="own".*fill="#1f77b4"><title>node 0<' "$f")" -eq 4 -a \
  "$(grep -c 'class="own".*fill="#ff7f0e"><title>node 1<' "$f")" -eq 2
check "... one replica band, node 1's colour" \
  test "$(grep -c '<rect class="replica".*fill="#ff7f0e"><title>replica on node 1' "$f")" -eq 1
check "... two epoch spans behind" test "$(count '<rect class="span"' "$f")" -eq 2
check "... nothing loaded from elsewhere" \
  test "$(grep -c -i -E 'https?://|<script|<link| src=|@import|url\(' "$f")" -eq 0

# --- bad input ------------------------------------------------------------------------------
printf 'epoch=1 test_rmse=0.5\nepoch=x test_rmse=0.4\n' >"$tmp/bad.out"
run report -o "$tmp/x.html" "$tmp/bad.out" 2>"$tmp/err"
check "a bad epoch number: exit 2, FILE:LINE" test $? -eq 2 -a \
  "$(grep -c "bad.out:2: epoch=x is not a count" "$tmp/err")" -eq 1
printf 'epoch=1 test_rmse=0.5oops\n' >"$tmp/bad2.out"
run report -o "$tmp/x.html" "$tmp/bad2.out" 2>"$tmp/err"
check "a bad value: exit 2, names it" test $? -eq 2 -a "$(grep -c "bad2.out:1: test_rmse=0.5oops is not a number" "$tmp/err")" -eq 1
printf 'hello\nworld\n' >"$tmp/none.out"
run report -o "$tmp/x.html" "$tmp/none.out" 2>"$tmp/err"
check "no epoch lines: exit 2" test $? -eq 2 -a "$(grep -c "none.out: no epoch=N or iteration=N lines" "$tmp/err")" -eq 1
head -c 200 "$tmp/t.json.0" >"$tmp/cut.json"
run report -o "$tmp/x.html" "$tmp/cut.json" 2>"$tmp/err"
check "a cut trace: exit 2, byte N" test $? -eq 2 -a "$(grep -c "cut.json: byte [0-9]*: " "$tmp/err")" -eq 1
: >"$tmp/empty.out"
run report -o "$tmp/x.html" "$tmp/empty.out" 2>"$tmp/err"
check "an empty file: exit 2" test $? -eq 2 -a "$(grep -c "empty.out: empty" "$tmp/err")" -eq 1
# ranges the doubles can hardly tell apart: a page, at once (ticks by count, not by adding)
printf 'epoch=1 train_rmse=1\nepoch=2 train_rmse=1.0000000000000002\n' >"$tmp/flat.out"
printf 'epoch=100000000000000000 train_rmse=1\nepoch=100000000000000032 train_rmse=2\n' >"$tmp/far.out"
for f in flat far; do
  timeout -s KILL 10 "$augur" report -o "$tmp/$f.html" "$tmp/$f.out" >/dev/null 2>&1
  check "a $f range: exit 0, a page of under 100 kB" test $? -eq 0 -a "$(stat -c %s "$tmp/$f.html")" -lt 100000
done
run report -o "$tmp/x.html" "$tmp/missing.out" 2>"$tmp/err"
check "a missing file: exit 1" test $? -eq 1
run report -o "$tmp/x.html" 2>"$tmp/err"
check "no FILE: exit 2" test $? -eq 2
run report --top 0 "$tmp/a.out" 2>"$tmp/err"
check "--top 0: exit 2" test $? -eq 2
run report -o "$tmp/no/such/dir/x.html" "$tmp/a.out" 2>"$tmp/err"
check "an -o that cannot be written: exit 1" test $? -eq 1
check "--help: exit 0" eval 'run report --help >/dev/null'

# --- real runs: augur-mf on 2 nodes, adaptive (traced) and classic -------------------------
mf=$build/demos/augur-mf
margs=(--epochs 3 --threads 1 --ratings 200000 --rows 4000 --cols 1000)
timeout 120 "$augur" run -n 2 "$mf" "${margs[@]}" --trace "$tmp/mf.json" >"$tmp/adaptive.out" 2>&1
check "augur-mf adaptive with --trace: exit 0" test $? -eq 0
timeout 120 "$augur" run -n 2 "$mf" "${margs[@]}" --mode classic >"$tmp/classic.out" 2>&1
check "augur-mf classic: exit 0" test $? -eq 0
# the parameter server's bytes by purpose add up to bytes_sent (augur-mf sends nothing else)
sums() {
  grep '^\[0\] epoch=' "$1" | awk '{ for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
    if (v["bytes_sent"] != v["bytes_fetch"] + v["bytes_push"] + v["bytes_move"] + v["bytes_replica"] + v["bytes_control"]) bad++
    if (v["bytes_sent"] > 0) some++ }
    END { print (NR == 3 && some == 3 && !bad) ? "yes" : "no" }'
}
check "adaptive: every epoch's bytes by purpose add up to bytes_sent (> 0)" test "$(sums "$tmp/adaptive.out")" = yes
check "classic: the same" test "$(sums "$tmp/classic.out")" = yes
run report -o "$tmp/r.html" "$tmp/adaptive.out" "$tmp/classic.out" "$tmp"/mf.json.* >"$tmp/r.log" 2>&1
check "report of the runs: exit 0" grep -q '^report=.* runs=2 traces=1$' "$tmp/r.log"
r=$tmp/r.html
check "... 8 lines (4 charts x 2 runs)" test "$(count '<polyline class="series"' "$r")" -eq 8
check "... classic's bytes: fetch and push" \
  test "$(grep -c '<rect class="bar".*<title>fetch: ' "$r")" -ge 1 -a "$(grep -c '<title>push: ' "$r")" -ge 1
check "... the timeline: owner bars, 3 epoch spans" \
  test "$(count '<rect class="own"' "$r")" -ge 1 -a "$(count '<rect class="span"' "$r")" -eq 3
check "... nothing loaded from elsewhere" \
  test "$(grep -c -i -E 'https?://|<script|<link| src=|@import|url\(' "$r")" -eq 0

# --- in a browser ---------------------------------------------------------------------------
chrome=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$chrome" ] || [ ! -x "$pngstat" ]; then
  echo "SKIP the browser checks: no chromium, or no pngstat (libpng-dev); scripts/install-deps.sh report installs both"
  [ $fails -eq 0 ] && exit 77
  echo "$fails check(s) failed"
  exit 1
fi
browse() { # browse ARGS... : headless, its own profile, no sandbox (root)
  timeout -s KILL 90 "$chrome" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --hide-scrollbars \
    --user-data-dir="$tmp/chrome" --no-first-run "$@" 2>>"$tmp/chrome.log"
}
browse --dump-dom "file://$r" >"$tmp/dom.html"
check "chromium's DOM: the page's 8 lines, 5 SVGs (4 charts, the bytes), a timeline" \
  test "$(count '<polyline class="series"' "$tmp/dom.html")" -eq 8 -a \
  "$(count '<svg class="chart"' "$tmp/dom.html")" -eq 4 -a "$(count '<svg class="bytes"' "$tmp/dom.html")" -eq 1 -a \
  "$(count '<svg class="timeline"' "$tmp/dom.html")" -eq 1
browse --window-size=1000,3200 --screenshot="$tmp/shot.png" "file://$r" >/dev/null
printf '<!DOCTYPE html><html><body></body></html>\n' >"$tmp/blank.html"
browse --window-size=1000,3200 --screenshot="$tmp/blank.png" "file://$tmp/blank.html" >/dev/null
# run 0's colour (#1f77b4) and run 1's (#ff7f0e): lines, legends, node bars
"$pngstat" "$tmp/shot.png" '#1f77b4' '#ff7f0e' >"$tmp/shot.txt"
"$pngstat" "$tmp/blank.png" '#1f77b4' '#ff7f0e' >"$tmp/blank.txt"
cat "$tmp/shot.txt" "$tmp/blank.txt"
px() { grep -o "$1=[0-9]*" "$2" | head -1 | cut -d= -f2; }
pxc() { grep "color=$1 " "$2" | grep -o 'count=[0-9]*' | cut -d= -f2; }
check "the screenshot is not blank (>= 2% of its pixels drawn)" \
  test "${px_nonwhite:=$(px nonwhite "$tmp/shot.txt")}" -ge $((1000 * 3200 / 50))
check "... both runs' colours drawn (>= 2000 pixels each)" \
  test "$(pxc '#1f77b4' "$tmp/shot.txt")" -ge 2000 -a "$(pxc '#ff7f0e' "$tmp/shot.txt")" -ge 2000
check "... while a blank page's screenshot has none" \
  test "$(px nonwhite "$tmp/blank.txt")" -eq 0 -a "$(pxc '#1f77b4' "$tmp/blank.txt")" -eq 0

[ $fails -eq 0 ] && echo "all checks passed" && exit 0
echo "$fails check(s) failed"
exit 1
