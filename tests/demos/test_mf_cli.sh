#!/usr/bin/env bash
# test_mf_cli.sh AUGUR_MF — augur-mf as a user meets it: --help, bad flags and files give
# one clear line and exit status 2, malformed input names FILE:LINE, and a small real
# file trains, evaluates on --test and saves its factors.
set -uo pipefail
mf=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
check() { # check NAME CONDITION...
  local name=$1
  shift
  if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fails=$((fails + 1)); fi
}

out=$("$mf" --help); rc=$?
check "--help exits 0" test $rc -eq 0
for flag in --rank --epochs --optimizer --lr --decay --reg --biases --init-sd --exact --threads \
            --seed --test --test-ratio --format --save --rows --cols --ratings --true-rank --noise \
            --skew --mode --hot --sync-ms --trace --workers --batch --lookahead --stagger --no-stagger --checkpoint --checkpoint-every --checkpoint-keep --resume \
            --consistency; do
  # the flag itself, at the start of a help line (not --test inside --test-ratio)
  check "--help documents $flag" grep -qE -- "^ +$flag( |\$)" <<<"$out"
done

expect_error() { # expect_error NAME PATTERN ARGS...
  local name=$1 pattern=$2
  shift 2
  local err rc
  err=$("$mf" "$@" 2>&1 >/dev/null); rc=$?
  check "$name: exit 2" test $rc -eq 2
  check "$name: one line" test "$(printf '%s\n' "$err" | wc -l)" -eq 1
  check "$name: says '$pattern'" grep -q -- "$pattern" <<<"$err"
}
expect_error "unknown flag" "unknown flag '--bogus'" --bogus
expect_error "a hex number" "--test-ratio: expected a number in \[0, 0.9\], got '0x0.8'" --test-ratio 0x0.8
expect_error "--format without a file" "--format needs a TRAIN_FILE" --format csv
printf '1,2,3\n2,1,4\n' >"$tmp/t2.csv"
printf '9,9,3\n' >"$tmp/strangers.csv"
expect_error "a test file with no usable rating" "strangers.csv: no rating of a known row and column (1 skipped)" \
  "$tmp/t2.csv" --test "$tmp/strangers.csv"
expect_error "--checkpoint-every without --checkpoint" "--checkpoint-every needs --checkpoint DIR" \
  --checkpoint-every 2
expect_error "--resume of nothing" "--resume $tmp/nowhere: No such file" --resume "$tmp/nowhere"
expect_error "--hot without --mode hot" "--hot is for --mode hot" --hot 10
printf '1,2,3\n2,1,4\n' >"$tmp/tiny.csv"
expect_error "a generator flag with a file" "--rows shapes the generated data" "$tmp/tiny.csv" --rows 10
expect_error "--init-sd 0 (nothing would learn)" "--init-sd: expected a number in" --init-sd 0
expect_error "--workers past a node's" "--workers: expected a whole number in \\[1, 4096\\]" \
  --workers 4097
"$mf" --rows 200 --cols 100 --ratings 3000 --epochs 2 --reg 1e6 --save "$tmp/diverged" \
  >/dev/null 2>"$tmp/err"
check "diverged training: exit 1, said, nothing saved" \
  test $? -eq 1 -a "$(grep -c 'training diverged' "$tmp/err")" -eq 1 -a ! -e "$tmp/diverged/model.txt"
# what the run writes is checked before it trains; a write error on stdout is status 1
expect_error "--save where no directory can be" "--save /nonexistent/x: No such file" \
  --rows 200 --cols 100 --ratings 3000 --epochs 1 --save /nonexistent/x
expect_error "--checkpoint where no directory can be" "--checkpoint /nonexistent/x: No such file" \
  --rows 200 --cols 100 --ratings 3000 --epochs 1 --checkpoint /nonexistent/x
expect_error "--trace naming a directory" "--trace $tmp: a directory" --rows 200 --cols 100 --ratings 3000 --epochs 1 --trace "$tmp"
expect_error "--trace where no file can be" "--trace /nonexistent/x: /nonexistent: No such file" \
  --rows 200 --cols 100 --ratings 3000 --epochs 1 --trace /nonexistent/x
# a path flag whose value is missing does not take the next flag as its path
(cd "$tmp" && "$mf" --rows 200 --cols 100 --ratings 3000 --epochs 1 --save --biases >/dev/null 2>&1)
check "--save --biases: no directory named --biases" test ! -e "$tmp/--biases"
expect_error "--save followed by a flag" "--save: expected a path, got the flag '--biases'" \
  --rows 200 --cols 100 --ratings 3000 --epochs 1 --save --biases
expect_error "--checkpoint followed by a flag" "--checkpoint: expected a path, got the flag '--resume'" \
  --epochs 1 --checkpoint --resume x
expect_error "--test ''" "--test: expected a path, got ''" --epochs 1 --test ''
# a model no machine of this size holds (rows and columns x rank 1024 x 4 bytes x 2 for
# AdaGrad above MemTotal) is refused before it is allocated, not OOM-killed later
mem=$(($(awk '/^MemTotal:/ { print $2 }' /proc/meminfo) * 1024))
big=$((mem / 16384 + 100000))
expect_error "a model larger than the memory" "needs [0-9.]* GB, more than this machine's" \
  --rank 1024 --rows $big --cols $big --ratings $((2 * big)) --epochs 1
"$mf" --rows 200 --cols 100 --ratings 3000 --epochs 1 >/dev/full 2>"$tmp/err"
check "stdout on a full disk: exit 1, said" test $? -eq 1 -a "$(grep -c 'writing the output' "$tmp/err")" -eq 1
expect_error "bad number" "--rank: expected" --rank abc
expect_error "negative number" "--epochs: expected" --epochs -3
expect_error "missing value" "--lr: expected" --lr
expect_error "bad format" "--format: expected" --format xml
expect_error "bad optimizer" "--optimizer: expected" --optimizer adam
expect_error "bad consistency" "--consistency: expected async, ssp:S" --consistency ssp:x
expect_error "relocate under bsp" "--mode relocate needs --consistency async" \
  --mode relocate --consistency bsp --epochs 1
AUGUR_MF_ISA=avx1024 expect_error "bad AUGUR_MF_ISA" "AUGUR_MF_ISA=avx1024: expected" --epochs 1
expect_error "missing file" "$tmp/nope.txt" "$tmp/nope.txt"

printf '0 0 1.5\n1 1 2.5\n2 x 3.0\n' >"$tmp/bad.txt"
expect_error "malformed line" "$tmp/bad.txt:3:" "$tmp/bad.txt" --format triples

# a small real data set: MovieLens-style CSV with a header, train + test files
{
  echo "userId,movieId,rating,timestamp"
  for u in $(seq 1 60); do
    for m in $(seq 1 40); do
      if (( (u * 7 + m * 3) % 4 != 0 )); then echo "$u,$((m + 1000)),$(( (u + m) % 5 + 1 )).0,964982703"; fi
    done
  done
} >"$tmp/ratings.csv"
{
  echo "userId,movieId,rating,timestamp"
  echo "1,1001,3.0,1"
  echo "999,1001,3.0,1"
} >"$tmp/test.csv"
out=$("$mf" "$tmp/ratings.csv" --test "$tmp/test.csv" --epochs 3 --rank 4 --save "$tmp/model" 2>&1); rc=$?
echo "$out"
check "csv run: exit 0" test $rc -eq 0
check "csv run: 3 epoch lines" test "$(grep -c '^epoch=' <<<"$out")" -eq 3
check "csv run: epoch line keys" grep -q 'epoch=3 train_rmse=[0-9.]* test_rmse=[0-9.]* seconds=[0-9.]* updates_per_s=[0-9.e+]* local=1.000' <<<"$out"
check "csv run: unknown test id skipped" grep -q 'test_skipped=1' <<<"$out"
check "csv run: model saved" grep -q "^saved=$tmp/model rows=60 cols=40$" <<<"$out"
check "csv run: the file's ids" test "$(head -1 "$tmp/model/col_ids.txt")" -ge 1001 -a \
  "$(sort -n "$tmp/model/col_ids.txt" | tail -1)" = 1040 -a "$(wc -l <"$tmp/model/row_ids.txt")" -eq 60
check "csv run: P.txt is 60 lines of 4 numbers" test "$(awk 'NF == 4' "$tmp/model/P.txt" | wc -l)" -eq 60
check "csv run: Q.npy is a NumPy array (40, 4) of float32" \
  grep -qa "'descr': '<f4', 'fortran_order': False, 'shape': (40, 4)" "$tmp/model/Q.npy"
qsize=$(stat -c %s "$tmp/model/Q.npy")
check "csv run: Q.npy: a header padded to 64 bytes, then 40 x 4 floats" \
  test $(((qsize - 40 * 4 * 4) % 64)) -eq 0 -a $qsize -gt $((40 * 4 * 4))
check "csv run: model.txt" grep -qx 'rank=4' "$tmp/model/model.txt"
# a save that fails (here a temporary name that cannot be made: the last data file's)
# leaves the one before it whole, no temporary file behind
cp -r "$tmp/model" "$tmp/model.before"
mkdir "$tmp/model/.Q.npy.tmp"
"$mf" "$tmp/ratings.csv" --epochs 1 --rank 6 --save "$tmp/model" >/dev/null 2>"$tmp/err"; rc=$?
check "failed save: exit 1, naming the file" test $rc -eq 1 -a "$(grep -c '\.Q\.npy\.tmp' "$tmp/err")" -eq 1
check "failed save: the previous model is as it was" \
  diff -r -x .Q.npy.tmp "$tmp/model.before" "$tmp/model"
rmdir "$tmp/model/.Q.npy.tmp"
check "failed save: no temporary file left" test -z "$(ls -A "$tmp/model" | grep '\.tmp$')"
"$mf" "$tmp/ratings.csv" --epochs 1 --rank 4 --biases --save "$tmp/bmodel" >/dev/null 2>&1
check "a save with biases: bias files" test "$(ls "$tmp/bmodel" | grep -c bias)" -eq 4
"$mf" "$tmp/ratings.csv" --epochs 1 --rank 4 --save "$tmp/bmodel" >/dev/null 2>&1
check "a save without biases over one with: no bias file left" test -z "$(ls "$tmp/bmodel" | grep bias)"
# where NumPy is there: np.load and np.loadtxt read the files as they are, and agree
py=""
for p in python3 /usr/bin/python3; do
  if command -v "$p" >/dev/null && "$p" -c 'import numpy' 2>/dev/null; then py=$p; break; fi
done
if [ -n "$py" ]; then
  check "csv run: NumPy reads the model (np.load, np.loadtxt)" "$py" -c "
import numpy as np, sys
d = sys.argv[1]
P, Q, Pt, Qt = np.load(d + '/P.npy'), np.load(d + '/Q.npy'), np.loadtxt(d + '/P.txt'), np.loadtxt(d + '/Q.txt')
r, rt = np.load(d + '/row_ids.npy'), np.loadtxt(d + '/row_ids.txt', dtype=np.uint64)
assert P.shape == (60, 4) and Q.shape == (40, 4) and P.dtype == np.float32, (P.shape, Q.shape)
assert abs(P - Pt).max() < 1e-6 and abs(Q - Qt).max() < 1e-6 and (r == rt).all() and r.dtype == np.uint64
" "$tmp/model"
else
  echo "skip: no NumPy here to read the model with"
fi

# predict: the saved model on the test file gives the run's test RMSE
want=$(grep '^epoch=3 ' <<<"$out" | grep -o 'test_rmse=[0-9.]*' | cut -d= -f2)
pout=$("$mf" predict "$tmp/model" "$tmp/test.csv" 2>&1); rc=$?
echo "$pout"
check "predict: exit 0, one line per known rating" test $rc -eq 0 -a "$(grep -c '^1 1001 3 ' <<<"$pout")" -eq 1
got=$(grep -o 'rmse=[0-9.]*' <<<"$pout" | cut -d= -f2)
# (predict prints 6 decimals, training 4: the 6-decimal value must round to training's,
# allowing its own last-digit rounding — 0.0689504 prints as 0.068950 and 0.0690, and
# rounding 0.068950 again gives 0.0689)
check "predict: the run's test RMSE to the printed digits ($want, $got)" \
  awk -v w="$want" -v g="$got" 'BEGIN { exit !(w != "" && g != "" && g >= w - 0.0000505 && g <= w + 0.0000505) }'
check "predict: the unknown row skipped" grep -q '^predict ratings=1 skipped=1 rmse=' <<<"$pout"
# nothing to score: an error, as training's --test (it printed rmse=nan and exited 0)
printf '9999,9999,3\n' >"$tmp/unknown.csv"
uout=$("$mf" predict "$tmp/model" "$tmp/unknown.csv" 2>&1); rc=$?
check "predict of unknown ratings only: exit 2, says so" \
  test $rc -eq 2 -a "$(grep -c 'unknown.csv: no rating of a known row and column (1 skipped)' <<<"$uout")" -eq 1
# each prediction is mean + P[row] . Q[col], from the text files
p1=$(awk -v r=0 'NR == FNR { if ($1 == 1) row = FNR; next } FNR == row { print }' "$tmp/model/row_ids.txt" "$tmp/model/P.txt")
q1=$(awk 'NR == FNR { if ($1 == 1001) col = FNR; next } FNR == col { print }' "$tmp/model/col_ids.txt" "$tmp/model/Q.txt")
mean=$(grep '^mean=' "$tmp/model/model.txt" | cut -d= -f2)
byhand=$(awk -v p="$p1" -v q="$q1" -v m="$mean" 'BEGIN { n = split(p, a, " "); split(q, b, " "); s = m; for (i = 1; i <= n; i++) s += a[i] * b[i]; printf "%.4f", s }')
check "predict: mean + P[row] . Q[col] ($byhand)" \
  awk -v h="$byhand" -v g="$(grep '^1 1001 ' <<<"$pout" | cut -d' ' -f4)" 'BEGIN { exit !(g - h < 0.0002 && h - g < 0.0002) }'

# recommend: the best items, best first, those rated left out with --exclude
rout=$("$mf" recommend "$tmp/model" --user 7 --top 5 2>&1); rc=$?
echo "$rout"
check "recommend: exit 0, 5 lines" test $rc -eq 0 -a "$(grep -c '^rank=[1-5] item=10[0-4][0-9] score=' <<<"$rout")" -eq 5
check "recommend: best first" test "$(grep -o 'score=[-0-9.]*' <<<"$rout" | cut -d= -f2 | sort -gr | tr '\n' ' ')" = \
  "$(grep -o 'score=[-0-9.]*' <<<"$rout" | cut -d= -f2 | tr '\n' ' ')"
rout=$("$mf" recommend "$tmp/model" --user 7 --top 40 --exclude "$tmp/ratings.csv" 2>&1); rc=$?
rated=$(grep -c '^7,' "$tmp/ratings.csv")
check "recommend --exclude: the $((40 - rated)) items user 7 did not rate" \
  test $rc -eq 0 -a "$(grep -c '^rank=' <<<"$rout")" -eq $((40 - rated))
check "recommend --exclude: none of them rated" \
  test -z "$(grep -o 'item=[0-9]*' <<<"$rout" | cut -d= -f2 | while read -r i; do grep "^7,$i," "$tmp/ratings.csv"; done)"
err=$("$mf" recommend "$tmp/model" --user 12345 2>&1); rc=$?
check "recommend: an unknown user, exit 2" test $rc -eq 2
check "recommend: ... says so" grep -q -- '--user 12345: no such row' <<<"$err"
err=$("$mf" predict "$tmp/nomodel" "$tmp/test.csv" 2>&1); rc=$?
check "predict: no model there, exit 2, named" test $rc -eq 2 -a "$(grep -c "$tmp/nomodel/model.txt" <<<"$err")" -eq 1
check "predict --help" "$mf" predict --help
check "recommend --help" "$mf" recommend --help
check "csv run: adagrad by default, the ISA named" grep -q 'optimizer=adagrad .*isa=' <<<"$out"

# every vector loop this CPU runs trains the same file to the same error (one worker: one order)
ref=""
for isa in scalar sse2 avx2 avx512; do
  out=$(AUGUR_MF_ISA=$isa "$mf" "$tmp/ratings.csv" --epochs 3 --rank 20 --threads 1 2>&1); rc=$?
  if [ $rc -eq 2 ] && grep -q "does not run it" <<<"$out"; then echo "skip $isa: $out"; continue; fi
  check "AUGUR_MF_ISA=$isa: exit 0" test $rc -eq 0
  check "AUGUR_MF_ISA=$isa: named" grep -q "isa=$isa" <<<"$out"
  rmse=$(grep '^epoch=3 ' <<<"$out" | sed 's/.*test_rmse=\([0-9.]*\).*/\1/')
  check "AUGUR_MF_ISA=$isa: a test_rmse after epoch 3" test -n "$rmse"
  if [ "$isa" = scalar ]; then ref=$rmse; fi
  check "AUGUR_MF_ISA=$isa: test_rmse $rmse = scalar's $ref" test "$rmse" = "$ref"
done

# --checkpoint-keep: one checkpoint in 10 is full (epochs 1, 11, 21); keeping the last 2
# full ones leaves epochs 11-23, keeping 1 leaves 21-23; the latest still resumes
ck=$(mktemp -d)
small=(--rows 2000 --cols 500 --ratings 100000 --threads 2)
for keep in 2 1; do
  out=$("$mf" "${small[@]}" --epochs 23 --checkpoint "$ck/k$keep" --checkpoint-keep $keep 2>&1)
  first=$((keep == 2 ? 11 : 21))
  left=$(ls "$ck/k$keep" | grep '^ckpt-' | sed 's/ckpt-//' | sort -n | tr '\n' ' ')
  check "--checkpoint-keep $keep: ckpt-$first..23 left ($left)" test "$left" = "$(seq -s ' ' $first 23) "
  check "--checkpoint-keep $keep: the removals said" grep -q "^checkpoint=.* epochs=21 .* removed=10$" <<<"$out"
done
out=$("$mf" "${small[@]}" --epochs 24 --resume "$ck/k1" 2>&1)
check "--checkpoint-keep 1: the latest resumes" grep -q '^resumed=.* epochs=23 ' <<<"$out"
out=$("$mf" "${small[@]}" --epochs 3 --checkpoint "$ck/k0" --checkpoint-keep 0 2>&1)
check "--checkpoint-keep 0 keeps all" test "$(ls "$ck/k0" | grep -c '^ckpt-')" -eq 3
# a resume must be of the same model: --rank 17 has the width of --rank 16 --biases, and a
# file with the same number of columns under other ids is other data
"$mf" "$tmp/ratings.csv" --epochs 1 --rank 16 --biases --checkpoint "$ck/shape" >/dev/null 2>&1
expect_error "resume, another rank of the same width" \
  "written by --rank 16 --biases --optimizer adagrad, this run is --rank 17 --optimizer adagrad" \
  "$tmp/ratings.csv" --epochs 2 --rank 17 --resume "$ck/shape"
awk -F, '{ printf "%s,%d,%s\n", $1, $2 + 5000, $3 }' "$tmp/ratings.csv" >"$tmp/othercols.csv"
expect_error "resume, other columns" "written for other columns" \
  "$tmp/othercols.csv" --epochs 2 --rank 16 --biases --resume "$ck/shape"
out=$("$mf" "$tmp/ratings.csv" --epochs 2 --rank 16 --biases --resume "$ck/shape" 2>&1)
check "resume, the same model: goes on" grep -q '^resumed=.* epochs=1' <<<"$out"
rm -rf "$ck"
expect_error "--checkpoint-keep x" "--checkpoint-keep" --checkpoint-keep x

if [ $fails -ne 0 ]; then echo "$fails check(s) failed"; exit 1; fi
echo "all checks passed"
