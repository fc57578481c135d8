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
            --skew --mode --hot --sync-ms --trace --workers --batch --lookahead --stagger --no-stagger; do
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
expect_error "bad number" "--rank: expected" --rank abc
expect_error "negative number" "--epochs: expected" --epochs -3
expect_error "missing value" "--lr: expected" --lr
expect_error "bad format" "--format: expected" --format xml
expect_error "bad optimizer" "--optimizer: expected" --optimizer adam
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
out=$("$mf" "$tmp/ratings.csv" --test "$tmp/test.csv" --epochs 3 --rank 4 --save "$tmp/f.txt" 2>&1); rc=$?
echo "$out"
check "csv run: exit 0" test $rc -eq 0
check "csv run: 3 epoch lines" test "$(grep -c '^epoch=' <<<"$out")" -eq 3
check "csv run: epoch line keys" grep -q 'epoch=3 train_rmse=[0-9.]* test_rmse=[0-9.]* seconds=[0-9.]* updates_per_s=[0-9.e+]* local=1.000' <<<"$out"
check "csv run: unknown test id skipped" grep -q 'test_skipped=1' <<<"$out"
check "csv run: factors saved with external ids" grep -q '^col 1001 ' "$tmp/f.txt"
check "csv run: 60 rows saved" test "$(grep -c '^row ' "$tmp/f.txt")" -eq 60
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

if [ $fails -ne 0 ]; then echo "$fails check(s) failed"; exit 1; fi
echo "all checks passed"
