#!/usr/bin/env bash
# test_kge_cli.sh AUGUR_KGE [AUGUR] — augur-kge as a user meets it: --help, bad flags and
# files give one clear line and exit status 2, malformed triples name FILE:LINE; a small
# triples file trains and saves; a small generated graph learns (test MRR); and, given the
# augur launcher, 3-node runs in every mode learn as well and print one set of figures.
set -uo pipefail
kge=$1
augur=${2:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
check() { # check NAME CONDITION...
  local name=$1
  shift
  if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fails=$((fails + 1)); fi
}

out=$("$kge" --help); rc=$?
check "--help exits 0" test $rc -eq 0
for flag in --model --rank --epochs --lr --reg --init-sd --batch --negatives --lookahead \
            --threads --workers --seed --mode --hot --entity-table --sync-ms --trace --eval-every --eval-triples \
            --test-triples --checkpoint --checkpoint-every --checkpoint-keep --resume \
            --save --valid --test --entities --pairs --symmetric --edges \
            --clusters --valid-size --test-size; do
  check "--help documents $flag" grep -qE -- "^ +$flag( |\$)" <<<"$out"
done

expect_error() { # expect_error NAME PATTERN ARGS...
  local name=$1 pattern=$2
  shift 2
  local err rc
  err=$("$kge" "$@" 2>&1 >/dev/null); rc=$?
  check "$name: exit 2" test $rc -eq 2
  check "$name: one line" test "$(printf '%s\n' "$err" | wc -l)" -eq 1
  check "$name: says '$pattern'" grep -q -- "$pattern" <<<"$err"
}
expect_error "unknown flag" "unknown flag '--bogus'" --bogus
expect_error "--checkpoint-every without --checkpoint" "--checkpoint-every needs --checkpoint DIR" \
  --checkpoint-every 2
expect_error "--resume of nothing" "--resume $tmp/nowhere: No such file" --resume "$tmp/nowhere"
expect_error "bad model" "--model: expected complex or distmult" --model transe
expect_error "--save followed by a flag" "--save: expected a path, got the flag '--help'" --save --help
expect_error "--valid ''" "--valid: expected a path, got ''" --valid ''
expect_error "--trace where no file can be" "--trace /nonexistent/x: /nonexistent: No such file" \
  --trace /nonexistent/x
expect_error "bad number" "--rank: expected" --rank abc
expect_error "missing value" "--lr: expected" --lr
expect_error "unknown mode" "--mode: expected classic, replicate, relocate, hot or adaptive" \
  --mode sideways
expect_error "unknown entity table" "--entity-table: expected dense or ids" --entity-table hash
expect_error "missing file" "$tmp/nope.txt" "$tmp/nope.txt"
expect_error "valid without a file" "need a TRAIN_FILE" --valid "$tmp/v.txt"
expect_error "a model larger than the memory" "needs [0-9.]* GB, more than this machine's" \
  --entities 4000000 --rank 1024 --epochs 1 --threads 1
expect_error "impossible generator" "--edges must be at most --entities" --entities 1000 --edges 2000 --clusters 10
printf 'a\tr\tb\nb\tr\n' >"$tmp/bad.txt"
expect_error "malformed triple" "$tmp/bad.txt:2: expected 'head<TAB>relation<TAB>tail', got 'b\\\\tr'" \
  "$tmp/bad.txt"
expect_error "--init-sd 0 (nothing would learn)" "--init-sd: expected a number in" --init-sd 0
expect_error "--workers past a node's" "--workers: expected a whole number in \\[1, 4096\\]" \
  --workers 4097
expect_error "a generator flag with a file" "--valid-size shapes the generated graph" \
  "$tmp/bad.txt" --valid-size 10
expect_error "--hot without --mode hot" "--hot is for --mode hot" --hot 10
expect_error "a blank before a number" "--seed: expected a whole number, got ' -1'" --seed ' -1'
# what the run writes is checked before it trains
expect_error "--save where no directory can be" "--save /nonexistent/x: No such file" \
  --save /nonexistent/x
expect_error "--checkpoint where no directory can be" "--checkpoint /nonexistent/x: No such file" \
  --checkpoint /nonexistent/x
mkdir -p "$tmp/tracedir"
expect_error "--trace naming a directory" "--trace $tmp/tracedir: a directory" --trace "$tmp/tracedir"

# a small file: a ring of 30 entities, "next" and its inverse "prev"
for i in $(seq 0 29); do
  j=$(( (i + 1) % 30 ))
  printf 'n%d\tnext\tn%d\nn%d\tprev\tn%d\n' $i $j $j $i
done >"$tmp/train.txt"
printf 'n0\tnext\tn1\nn5\tprev\tn4\nzz\tnext\tn0\n' >"$tmp/test.txt"
out=$("$kge" "$tmp/train.txt" --test "$tmp/test.txt" --rank 8 --epochs 3 --batch 16 --negatives 8 \
      --threads 1 --save "$tmp/model" 2>"$tmp/err"); rc=$?
check "file: exit 0" test $rc -eq 0
check "file: counts" grep -q "entities=30 relations=2 train=60 valid=0 test=2" <<<"$out"
check "file: says it skipped the unknown name" grep -q "skipped 0 validation and 1 test" "$tmp/err"
check "file: three epochs" test "$(grep -c '^epoch=' <<<"$out")" -eq 3
check "file: test line" grep -qE '^test triples=2 mrr=[0-9.]+ hits1=' <<<"$out"
check "file: saved 30 entities" test "$(wc -l <"$tmp/model/entities.tsv")" -eq 30
check "file: saved rows have name and 16 values" \
  test "$(head -1 "$tmp/model/entities.tsv" | awk -F'\t' '{print $1, NF}')" = "n0 17"
check "file: saved relations" test "$(cut -f1 "$tmp/model/relations.tsv" | tr '\n' ' ')" = "next prev "
# a save that fails leaves the one before it whole (here its temporary file cannot be made)
cp -r "$tmp/model" "$tmp/model.before"
mkdir "$tmp/model/entities.tsv.tmp"
"$kge" "$tmp/train.txt" --rank 4 --epochs 1 --batch 16 --negatives 8 --threads 1 \
  --save "$tmp/model" >/dev/null 2>"$tmp/err"; rc=$?
check "failed save: exit 1, naming the file" \
  test $rc -eq 1 -a "$(grep -c 'entities.tsv.tmp: Is a directory' "$tmp/err")" -eq 1
check "failed save: the previous save is as it was" diff -r -x entities.tsv.tmp "$tmp/model.before" "$tmp/model"
check "failed save: no temporary file left" test ! -e "$tmp/model/relations.tsv.tmp"
printf 'zz\tnext\tn0\n' >"$tmp/strangers.txt"
expect_error "a test file with no usable triple" \
  "strangers.txt: none of its 1 triples has only names the training file has" \
  "$tmp/train.txt" --test "$tmp/strangers.txt"

# a small generated graph learns
gen=(--entities 2000 --edges 1500 --clusters 40 --valid-size 200 --test-size 200 --rank 32
     --batch 128 --negatives 64 --epochs 12 --eval-every 4)
out=$("$kge" "${gen[@]}" --threads 2 2>&1); rc=$?
check "generated: exit 0" test $rc -eq 0
mrr=$(sed -nE 's/^test .* mrr=([0-9.]+) .*/\1/p' <<<"$out")
check "generated: test mrr $mrr > 0.5" awk -v m="${mrr:-0}" 'BEGIN { exit !(m > 0.5) }'
check "generated: validation mrr every 4 epochs" test "$(grep -c 'valid_mrr=' <<<"$out")" -eq 3

# checkpoints: 2 epochs, then --resume to 4, trains exactly as 4 epochs at once (one
# worker: the order and negatives of an epoch are functions of the seed and the epoch)
one=("${gen[@]}" --threads 1 --eval-every 0)
whole=$("$kge" "${one[@]}" --epochs 4 2>&1)
"$kge" "${one[@]}" --epochs 2 --checkpoint "$tmp/ck" >"$tmp/first" 2>&1
check "checkpoint: exit 0" test $? -eq 0
check "checkpoint: one line per epoch" test "$(grep -c '^checkpoint=.* epochs=[12] ' "$tmp/first")" -eq 2
check "checkpoint: the description beside the tables" grep -q "model=complex rank=32 entities=2000" \
  "$tmp/ck/ckpt-2/kge.meta"
again=$("$kge" "${one[@]}" --epochs 4 --resume "$tmp/ck" 2>&1); rc=$?
check "resume: exit 0" test $rc -eq 0
check "resume: says from where" grep -q "^resumed=$tmp/ck epochs=2" <<<"$again"
check "resume: trains epochs 3 and 4 only" test "$(grep -c '^epoch=' <<<"$again")" -eq 2
tail_of() { grep -E '^(epoch=[34]|test) ' | sed -E 's/ seconds=.*//; s/ triples_per_s=.*//'; }
check "resume: epochs 3-4 and the test MRR as in one 4-epoch run" \
  test "$(tail_of <<<"$again")" = "$(tail_of <<<"$whole")"
echo "whole: $(tail_of <<<"$whole" | tr '\n' ' ')"
echo "again: $(tail_of <<<"$again" | tr '\n' ' ')"
# augur run --restarts sets AU_RESTART: with --checkpoint, the job goes on from there
again=$(AU_RESTART=1 "$kge" "${one[@]}" --epochs 3 --checkpoint "$tmp/ck" 2>&1)
check "AU_RESTART: resumes from --checkpoint" grep -q "^resumed=$tmp/ck epochs=2" <<<"$again"
expect_error "resume, another rank" "written by --model complex --rank 32, this run is --model complex --rank 16" \
  "${gen[@]}" --rank 16 --resume "$tmp/ck"
expect_error "resume, other data" "written for other data (2000 entities" \
  "${gen[@]}" --entities 2500 --resume "$tmp/ck"
expect_error "resume, no checkpoint" "no checkpoint there" "${gen[@]}" --resume "$tmp"
expect_error "resume, other triples over the same names" \
  "written for other training triples over the same names" "${gen[@]}" --edges 1400 --resume "$tmp/ck"

# entities in an id table keyed by the names' ids: learns, holds every entity it trained
# (never more than there are, none evicted), and resumes exactly from its checkpoint
out=$("$kge" "${gen[@]}" --threads 2 --entity-table ids 2>&1); rc=$?
check "ids: exit 0" test $rc -eq 0
check "ids: says so" grep -q "entity_table=ids " <<<"$out"
mrr=$(sed -nE 's/^test .* mrr=([0-9.]+) .*/\1/p' <<<"$out")
check "ids: test mrr $mrr > 0.5" awk -v m="${mrr:-0}" 'BEGIN { exit !(m > 0.5) }'
rows=$(sed -nE 's/^epoch=12 .* entity_rows=([0-9]+) entity_evicted=0( .*|$)/\1/p' <<<"$out")
check "ids: rows for trained entities, none evicted ($rows)" \
  test "${rows:-0}" -gt 1000 -a "${rows:-9999}" -le 2000
whole=$("$kge" "${one[@]}" --epochs 4 --entity-table ids 2>&1)
"$kge" "${one[@]}" --epochs 2 --entity-table ids --checkpoint "$tmp/cki" >"$tmp/first" 2>&1
check "ids: checkpoint, exit 0" test $? -eq 0
again=$("$kge" "${one[@]}" --epochs 4 --entity-table ids --resume "$tmp/cki" 2>&1); rc=$?
check "ids: resume, exit 0" test $rc -eq 0
check "ids: epochs 3-4 and the test MRR as in one 4-epoch run" \
  test -n "$(tail_of <<<"$whole")" -a "$(tail_of <<<"$again")" = "$(tail_of <<<"$whole")"
echo "whole: $(tail_of <<<"$whole" | tr '\n' ' ')"
echo "again: $(tail_of <<<"$again" | tr '\n' ' ')"
expect_error "resume, dense checkpoint into an id table" \
  "written with --entity-table dense, this run is --entity-table ids" \
  "${one[@]}" --epochs 4 --entity-table ids --resume "$tmp/ck"
expect_error "resume, id-table checkpoint into a dense table" \
  "written with --entity-table ids, this run is --entity-table dense" \
  "${one[@]}" --epochs 4 --resume "$tmp/cki"

if [ -n "$augur" ]; then
  # written by 2 nodes, resumed by 1
  rm -rf "$tmp/ck2"
  timeout 120 "$augur" run -n 2 "$kge" "${one[@]}" --epochs 2 --checkpoint "$tmp/ck2" >"$tmp/two" 2>&1
  check "2 nodes: checkpoint, exit 0" test $? -eq 0
  again=$("$kge" "${one[@]}" --epochs 4 --resume "$tmp/ck2" 2>&1); rc=$?
  check "2 nodes' checkpoint, 1 node resumes: exit 0" test $rc -eq 0
  mrr=$(sed -nE 's/^test .* mrr=([0-9.]+) .*/\1/p' <<<"$again")
  check "2 nodes' checkpoint, 1 node resumes: test mrr $mrr > 0.3" \
    awk -v m="${mrr:-0}" 'BEGIN { exit !(m > 0.3) }'
  for mode in classic replicate relocate hot adaptive; do
    out=$(AU_NET_DELAY_US=100 timeout 120 "$augur" run -n 3 "$kge" "${gen[@]}" --threads 1 \
          --mode $mode 2>&1); rc=$?
    check "3 nodes $mode: exit 0" test $rc -eq 0
    check "3 nodes $mode: nodes=3" grep -q "nodes=3 " <<<"$out"
    check "3 nodes $mode: one test line" test "$(grep -c 'test triples=200 ' <<<"$out")" -eq 1
    train=$(sed -nE 's/.*data=generated .* train=([0-9]+) .*/\1/p' <<<"$out")
    check "3 nodes $mode: every epoch trained all $train triples" \
      test "$(grep -c "epoch=[0-9]* triples=${train:-x} " <<<"$out")" -eq 12
    mrr=$(sed -nE 's/.*test .* mrr=([0-9.]+) .*/\1/p' <<<"$out")
    # (random embeddings score about 0.007; one run in three here dipped below 0.5)
    check "3 nodes $mode: test mrr $mrr > 0.4" awk -v m="${mrr:-0}" 'BEGIN { exit !(m > 0.4) }'
  done
  # entities in an id table across nodes, both tables placed by --mode (replicas of the
  # id table read where they are, its pushes go to the owners: local stays below 0.9)
  for mode in classic replicate relocate hot adaptive; do
    out=$(AU_NET_DELAY_US=100 timeout 120 "$augur" run -n 3 "$kge" "${gen[@]}" --threads 1 \
          --mode $mode --entity-table ids 2>&1); rc=$?
    check "3 nodes, ids, $mode: exit 0" test $rc -eq 0
    train=$(sed -nE 's/.*data=generated .* train=([0-9]+) .*/\1/p' <<<"$out")
    check "3 nodes, ids, $mode: every epoch trained all $train triples, no entity evicted" \
      test "$(grep -c "epoch=[0-9]* triples=${train:-x} .* entity_evicted=0" <<<"$out")" -eq 12
    check "3 nodes, ids, $mode: entities fetched from other nodes" \
      grep -q "\[0\] epoch=1 .* local=0\.[0-8]" <<<"$out"
    [ $mode = relocate ] && check "3 nodes, ids, relocate: actors moved" \
      grep -q "\[0\] epoch=1 .* moves=[1-9]" <<<"$out"
    case $mode in replicate | hot | adaptive)
      # (in some epoch: under load adaptive's first epoch may end before its first replica)
      check "3 nodes, ids, $mode: replicas held (either table's)" grep -q "\[0\] epoch=[0-9]* .* replicas=[1-9]" <<<"$out"
      ;;
    esac
    mrr=$(sed -nE 's/.*test .* mrr=([0-9.]+) .*/\1/p' <<<"$out")
    check "3 nodes, ids, $mode: test mrr $mrr > 0.4" awk -v m="${mrr:-0}" 'BEGIN { exit !(m > 0.4) }'
  done
fi

if [ $fails -ne 0 ]; then echo "$fails check(s) failed"; exit 1; fi
echo "all checks passed"
