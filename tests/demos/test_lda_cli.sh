#!/usr/bin/env bash
# test_lda_cli.sh AUGUR_LDA [AUGUR] — augur-lda as a user meets it: --help, bad flags and
# files give one clear line and exit status 2, malformed input names FILE:LINE; small UCI,
# text and generated corpora train, print their topics and save; and, given the augur
# launcher, a 3-node run keeps the count tables exact (--check) and saves one file per node.
set -uo pipefail
lda=$1
augur=${2:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
check() { # check NAME CONDITION...
  local name=$1
  shift
  if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fails=$((fails + 1)); fi
}

out=$("$lda" --help); rc=$?
check "--help exits 0" test $rc -eq 0
for flag in --topics --alpha --beta --iterations --eval-every --mh-steps --threads --workers --batch \
            --lookahead --seed --mode --format --vocab --min-count --docs --vocab-size \
            --doc-length --planted-topics --zipf --length-sigma --top-words --save --trace --sync-ms \
            --checkpoint --checkpoint-every --resume --consistency --check; do
  # the flag itself, at the start of a help line (not --vocab inside --vocab-size)
  check "--help documents $flag" grep -qE -- "^ +$flag( |\$)" <<<"$out"
done

expect_error() { # expect_error NAME PATTERN ARGS...
  local name=$1 pattern=$2
  shift 2
  local err rc
  err=$("$lda" "$@" 2>&1 >/dev/null); rc=$?
  check "$name: exit 2" test $rc -eq 2
  check "$name: one line" test "$(printf '%s\n' "$err" | wc -l)" -eq 1
  check "$name: says '$pattern'" grep -q -- "$pattern" <<<"$err"
}
expect_error "unknown flag" "unknown flag '--bogus'" --bogus
printf '300000000\n3\n1\n1 1 2\n' >"$tmp/hugeD.txt"
expect_error "a UCI header of far more documents than entries" \
  "hugeD.txt:3: expected NNZ (line 3) near D = 300000000" "$tmp/hugeD.txt"
expect_error "--checkpoint-every without --checkpoint" "--checkpoint-every needs --checkpoint DIR" \
  --checkpoint-every 2
expect_error "--resume of nothing" "--resume $tmp/nowhere: No such file" --resume "$tmp/nowhere"
printf 'apple pear\npear plum\n' >"$tmp/tiny.txt"
expect_error "a generator flag with a file" "--docs shapes the generated data" "$tmp/tiny.txt" --docs 10
printf '\xef\xbb\xbfapple pear apple\npear plum\n' >"$tmp/bom.txt"
out=$("$lda" "$tmp/bom.txt" --topics 2 --iterations 1 --top-words 0 --save "$tmp/bom" 2>&1)
check "a UTF-8 BOM is not part of the first word" test "$(head -1 "$tmp/bom/vocab.txt")" = apple
printf '3\n2\n3\n1 1 2\n2 2 1\n3 1 1\n' >"$tmp/w.uci"
printf 'new york\nparis\n' >"$tmp/w.vocab"
expect_error "a vocabulary word with a space" "w.vocab:1: expected a word without spaces" \
  "$tmp/w.uci" --vocab "$tmp/w.vocab"
# what the run writes is checked before it trains; a write error on stdout is status 1
expect_error "--save where no directory can be" "--save /nonexistent/x: No such file" \
  --docs 100 --iterations 1 --top-words 0 --save /nonexistent/x
expect_error "--checkpoint where no directory can be" "--checkpoint /nonexistent/x: No such file" \
  --docs 100 --iterations 1 --top-words 0 --checkpoint /nonexistent/x
expect_error "--trace naming a directory" "--trace $tmp: a directory" --docs 100 --iterations 1 --top-words 0 --trace "$tmp"
"$lda" --docs 100 --iterations 1 --top-words 0 >/dev/full 2>"$tmp/err"
check "stdout on a full disk: exit 1, said" test $? -eq 1 -a "$(grep -c 'writing the output' "$tmp/err")" -eq 1
expect_error "trace without a file" "--trace: expected a path" --trace
expect_error "bad number" "--topics: expected" --topics abc
expect_error "too many topics" "--topics: expected a whole number in \[1, 65535\]" --topics 70000
expect_error "negative number" "--iterations: expected" --iterations -3
expect_error "missing value" "--alpha: expected" --alpha
expect_error "bad format" "--format: expected uci or text" --format xml
expect_error "unknown mode" "--mode: expected classic, replicate, relocate, hot or adaptive" \
  --mode sideways
expect_error "missing file" "$tmp/nope.txt" "$tmp/nope.txt"
expect_error "vocab without a file" "need a FILE" --vocab "$tmp/v.txt"
expect_error "impossible generator" "planted topics x vocabulary size must be at most" \
  --planted-topics 1000 --vocab-size 100000

# a small UCI corpus: two clear topics (words 1-4 and 5-8), with its vocabulary
{
  echo 40; echo 8; echo 160
  for d in $(seq 1 40); do
    base=$(( d % 2 ? 0 : 4 ))
    for w in 1 2 3 4; do echo "$d $((base + w)) $(( (d + w) % 3 + 2 ))"; done
  done
} >"$tmp/docword.small.txt"
printf 'apple\nbanana\ncherry\ndate\nengine\nfuel\ngear\nhorn\n' >"$tmp/vocab.small.txt"

printf '3\n8\n2\n1 1 1\n1 9 1\n' >"$tmp/docword.bad.txt"
expect_error "malformed uci" "$tmp/docword.bad.txt:5: expected 'docID wordID count' with" \
  "$tmp/docword.bad.txt"
printf 'apple\nbanana\n' >"$tmp/vocab.short.txt"
expect_error "short vocabulary" "$tmp/vocab.short.txt:2: expected 8 words" \
  "$tmp/docword.small.txt" --vocab "$tmp/vocab.short.txt"
expect_error "min-count is for text" "--min-count goes with text" "$tmp/docword.small.txt" \
  --min-count 3
printf 'some words here\nbroken \0 line\n' >"$tmp/nul.txt"
expect_error "NUL in text" "$tmp/nul.txt:2: expected text without NUL bytes" "$tmp/nul.txt" \
  --format text
printf 'cats purr\n' >"$tmp/plain.txt"
expect_error "vocab is for uci" "--vocab goes with uci" "$tmp/plain.txt" --vocab "$tmp/vocab.small.txt"
printf 'the of and\n' >"$tmp/stop.txt"
expect_error "nothing left" "no tokens" "$tmp/stop.txt" --min-count 1
# what the sampler holds: 2^31 - 1 tokens (int32 counts), checked on the line (4294967295
# of them grew to 24 GB), and a W far above NNZ refused at line 3 (W = 2^31 - 1 was an OOM
# kill: the W x K tables go by it)
printf '1\n3\n1\n1 1 4294967296\n' >"$tmp/bc.txt"
expect_error "a count beyond the int32 tables" "bc.txt:4: more than 2147483647 tokens in all" \
  --topics 2 --iterations 1 "$tmp/bc.txt"
printf '1\n2147483647\n1\n1 1 1\n' >"$tmp/bigW.txt"
expect_error "a UCI header of far more words than entries" \
  "bigW.txt:3: expected NNZ (line 3) near W = 2147483647" --topics 2 "$tmp/bigW.txt"
# a model larger than the machine's memory: said before the tables are made, exit 2
if [ "$(awk '/^MemTotal:/ { print ($2 < 250e6) }' /proc/meminfo)" = 1 ]; then # (275 GB)
  printf '1\n1048577\n1\n1 1 3\n' >"$tmp/wideW.txt"
  err=$("$lda" --topics 65535 --iterations 1 --top-words 0 "$tmp/wideW.txt" 2>&1 >/dev/null); rc=$?
  check "W x K beyond memory: refused, not killed ($rc)" test $rc -eq 2
  check "W x K beyond memory: says so" grep -q \
    "the model needs 27[0-9.]* GB (1048577 words x 65535 topics of int32 counts, 3 tokens: a node.s share), more than this machine's" \
    <<<"$err"
fi
# classic Mac line ends (\r alone) were one document: refused, naming the line and the \r
printf 'apple banana apple\rbanana apple cherry\r' >"$tmp/cr.txt"
expect_error "carriage returns as line ends" \
  "cr.txt:1: expected lines that end in \\\\n or \\\\r\\\\n, got a carriage return" "$tmp/cr.txt"
# --vocab: blank lines after the last word are fine; a word twice names both lines
printf '3\n3\n3\n1 1 2\n2 2 2\n3 3 2\n' >"$tmp/three.uci"
printf 'pear\nplum\nfig\n\n' >"$tmp/three.vocab"
"$lda" "$tmp/three.uci" --vocab "$tmp/three.vocab" --topics 2 --iterations 1 --top-words 3 \
  >"$tmp/out" 2>&1
rc=$?
check "a vocabulary's trailing blank line: exit 0, its words ($(tail -1 "$tmp/out"))" \
  test $rc -eq 0 -a "$(grep -c '^topic=.*words=.*fig' "$tmp/out")" -ge 1
printf 'pear\nplum\npear\n' >"$tmp/dup.vocab"
expect_error "a vocabulary word twice" "dup.vocab:3: expected each word once, got 'pear' again (line 1)" \
  "$tmp/three.uci" --vocab "$tmp/dup.vocab"

# infer on a damaged model: every row and token of model.txt, each row once under its
# vocab.txt word, topic:count within int32, each topic once; exit 2 naming FILE:LINE
awk 'BEGIN { split("apple pear plum fig kiwi lime date melon", w, " "); srand(3);
       for (d = 0; d < 60; d++) { line = ""; for (k = 0; k < 8; k++) line = line " " w[1 + int(rand() * 8)]; print line } }' \
  >"$tmp/fruit.txt"
"$lda" "$tmp/fruit.txt" --topics 3 --iterations 2 --top-words 0 --save "$tmp/fm" >/dev/null 2>&1
check "infer: a model to damage" test -s "$tmp/fm/word_topic.txt"
"$lda" infer "$tmp/fm" "$tmp/fruit.txt" --iterations 2 >/dev/null 2>&1
check "infer: the model as saved: exit 0" test $? -eq 0
expect_infer_error() { # expect_infer_error NAME PATTERN SED_SCRIPT|+APPENDED
  local name=$1 pattern=$2 edit=$3 err rc
  rm -rf "$tmp/fmx"
  cp -r "$tmp/fm" "$tmp/fmx"
  if [ "${edit:0:1}" = + ]; then printf '%b' "${edit:1}" >>"$tmp/fmx/word_topic.txt"
  else sed -i "$edit" "$tmp/fmx/word_topic.txt"; fi
  err=$("$lda" infer "$tmp/fmx" "$tmp/fruit.txt" --iterations 2 2>&1 >/dev/null); rc=$?
  check "infer, $name: exit 2" test $rc -eq 2
  check "infer, $name: one line" test "$(printf '%s\n' "$err" | wc -l)" -eq 1
  check "infer, $name: says '$pattern'" grep -q -- "$pattern" <<<"$err"
}
# (a last line "1" without a newline was read on past its end, into the line before)
expect_infer_error "an id alone" \
  "fmx/word_topic.txt:11: expected 'id word topic:count ...' with an id below 8, got '1'" '+1'
expect_infer_error "a row of another word" \
  "fmx/word_topic.txt:11: expected word 5 to be '[a-z]*' (vocab.txt line 6), got 'zzzzzzzz'" \
  '+5 zzzzzzzz 0:1000\n1'
expect_infer_error "a row twice" "fmx/word_topic.txt:4: expected each word's row once, got word 0" \
  '3p'
expect_infer_error "rows cut short" \
  "fmx: expected 8 word rows (model.txt's words=), got 2 in word_topic.txt (a file cut short?)" '5,$d'
expect_infer_error "a topic twice" \
  "word_topic.txt:3: expected topic:count with a topic below 3, a count below 2^31 and each topic once, got '0:2147483647'" \
  's/^0 \([a-z]*\) .*/0 \1 0:2147483647 0:2147483647/'
expect_infer_error "a topic beyond K" "word_topic.txt:3: expected topic:count with a topic below 3, .*, got '7:5'" \
  's/^0 \([a-z]*\) .*/0 \1 7:5/'
expect_infer_error "a count beyond int32" "word_topic.txt:3: expected topic:count .*, got '0:99999999999'" \
  's/^0 \([a-z]*\) .*/0 \1 0:99999999999/'
expect_infer_error "tokens that are not model.txt's" \
  "fmx: expected 480 tokens (model.txt's tokens=), got 4[0-9]* in the rows of word_topic.txt" \
  '3s/ [0-9]*:[0-9]*$//'
# words x topics beyond memory: said before the counts (or the vocabulary) are allocated
rm -rf "$tmp/fmx"
cp -r "$tmp/fm" "$tmp/fmx"
sed -i 's/^words=.*/words=2147483647/; s/^topics=.*/topics=65535/' "$tmp/fmx/model.txt"
err=$("$lda" infer "$tmp/fmx" "$tmp/fruit.txt" 2>&1); rc=$?
check "infer, a model beyond memory: exit 2, said" \
  test $rc -eq 2 -a "$(grep -c '^augur-lda: the model (words x topics counts) needs [0-9.]* GB, more than' <<<"$err")" -eq 1
# a text whose first line is a number was taken for UCI: say to give --format text
printf '1984\nbig brother apple\n' >"$tmp/num.txt"
err=$("$lda" infer "$tmp/fm" "$tmp/num.txt" 2>&1); rc=$?
check "infer, a text taken for UCI: exit 2, the hint" \
  test $rc -eq 2 -a "$(grep -c 'num.txt:2: expected the vocabulary size W.*give --format text' <<<"$err")" -eq 1
err=$("$lda" infer "$tmp/fm" "$tmp/num.txt" --format uci 2>&1); rc=$?
check "infer, --format uci: no hint" test $rc -eq 2 -a "$(grep -c 'format text' <<<"$err")" -eq 0
"$lda" infer "$tmp/fm" "$tmp/num.txt" --format text >/dev/null 2>&1
check "infer, --format text: reads it" test $? -eq 0
err=$("$lda" "$tmp/num.txt" --iterations 1 2>&1 >/dev/null); rc=$?
check "training, a text taken for UCI: exit 2, the hint" \
  test $rc -eq 2 -a "$(grep -c 'num.txt:2: expected the vocabulary size W.*give --format text' <<<"$err")" -eq 1
err=$("$lda" "$tmp/num.txt" --trace "$tmp/nowhere/t" --iterations 1 2>&1 >/dev/null); rc=$?
check "--trace where no file can be: exit 2, said before loading" \
  test $rc -eq 2 -a "$(grep -c -- "--trace $tmp/nowhere/t: $tmp/nowhere: No such file" <<<"$err")" -eq 1

out=$("$lda" "$tmp/docword.small.txt" --vocab "$tmp/vocab.small.txt" --topics 2 --iterations 20 \
  --top-words 4 --threads 2 --save "$tmp/model" 2>&1); rc=$?
echo "$out"
check "uci run: exit 0" test $rc -eq 0
check "uci run: data line" grep -q '^data=.*docword.small.txt docs=40 vocab=8 tokens=' <<<"$out"
check "uci run: 20 iteration lines" test "$(grep -c '^iteration=' <<<"$out")" -eq 20
check "uci run: iteration keys" grep -q \
  '^iteration=20 llh_per_token=-[0-9.]* seconds=[0-9.]* tokens_per_s=[0-9.e+]* moved=[0-9.]* local=1.000' \
  <<<"$out"
check "uci run: CPU seconds per iteration" grep -q '^iteration=20 .* cpu_seconds=[0-9.]* ' <<<"$out"
check "uci run: topics in words" grep -q '^topic=1 tokens=[0-9]* words=[a-z]\+,[a-z]\+,' <<<"$out"
# the two planted groups come out as the two topics
fruit=$(grep -c '^topic=[01] .*words=\(apple\|banana\|cherry\|date\),\(apple\|banana\|cherry\|date\),\(apple\|banana\|cherry\|date\),\(apple\|banana\|cherry\|date\)$' <<<"$out")
check "uci run: one topic is the fruit" test "$fruit" -eq 1
check "uci run: counts saved" test -s "$tmp/model/word_topic.txt"
check "uci run: saved rows name their words" grep -q '^4 engine ' "$tmp/model/word_topic.txt"
check "uci run: vocabulary saved" test "$(wc -l <"$tmp/model/vocab.txt")" -eq 8
check "uci run: totals saved" test "$(grep -vc '^#' "$tmp/model/totals.txt")" -eq 2

printf 'Cats purr; cats sleep.\nEngines roar, engines burn fuel!\n\ncats purr and sleep\nfuel burns in engines\n' \
  >"$tmp/text.txt"
out=$("$lda" "$tmp/text.txt" --format text --min-count 1 --topics 2 --iterations 3 --top-words 2 2>&1)
rc=$?
check "text run: exit 0" test $rc -eq 0
# cats purr sleep engines roar burn fuel burns: "and", "in" are stop words
check "text run: stop words gone" grep -q '^data=.* docs=5 vocab=8 tokens=15 ' <<<"$out"
check "text run: topic words" grep -q '^topic=0 tokens=[0-9]* words=[a-z]\+,[a-z]\+$' <<<"$out"

# --eval-every 3 over 7 iterations: the log-likelihood after 3, 6 and the last, 7
out=$("$lda" --docs 200 --vocab-size 100 --doc-length 20 --topics 4 --iterations 7 --eval-every 3 \
  --top-words 0 2>&1)
check "eval-every: llh on iterations 3 6 7" test "$(grep '^iteration=.* llh_per_token=' <<<"$out" |
  cut -d' ' -f1 | tr '\n' ' ')" = "iteration=3 iteration=6 iteration=7 "
check "eval-every: 7 iteration lines" test "$(grep -c '^iteration=' <<<"$out")" -eq 7
expect_error "eval-every 0" "--eval-every: expected" --eval-every 0

out=$("$lda" --docs 400 --vocab-size 300 --doc-length 30 --planted-topics 5 --topics 5 \
  --iterations 8 --top-words 3 --check 2>&1); rc=$?
[ $rc -eq 0 ] || echo "$out"
check "generated run: exit 0" test $rc -eq 0
check "generated run: check ok" grep -q '^check=ok negative=0 row_sums=0 totals=0 recount=0 docs=0 ' <<<"$out"
check "generated run: words shown as ids" grep -q '^topic=4 tokens=[0-9]* words=w[0-9]\+,w[0-9]\+,w' <<<"$out"
first=$(grep -o '^init llh_per_token=[-0-9.]*' <<<"$out" | cut -d= -f2)
last=$(grep '^iteration=8 ' <<<"$out" | grep -o 'llh_per_token=[-0-9.]*' | cut -d= -f2)
check "generated run: llh rises ($first -> $last)" awk -v a="$first" -v b="$last" 'BEGIN { exit !(b > a + 0.5) }'

if [ -n "$augur" ]; then
  args=(--docs 900 --vocab-size 600 --doc-length 40 --topics 12 --iterations 4 --threads 2
        --batch 3000 --top-words 2 --check)
  out=$(timeout 120 "$augur" run -n 3 "$lda" "${args[@]}" --mode classic --save "$tmp/three" 2>&1)
  rc=$?
  echo "$out" | grep -v '^\[0\] topic='
  check "3 nodes: exit 0" test $rc -eq 0
  check "3 nodes: rank 0 prints" test "$(grep -c '^\[0\] iteration=' <<<"$out")" -eq 4
  check "3 nodes: others stay quiet" test "$(grep -c '^\[[12]\] iteration=' <<<"$out")" -eq 0
  check "3 nodes: counts exact" grep -q '^\[0\] check=ok negative=0 row_sums=0 totals=0 recount=0 docs=0 ' \
    <<<"$out"
  check "3 nodes: rows fetched remotely" grep -q '^\[0\] iteration=4 .*local=0\.[0-9]' <<<"$out"
  check "3 nodes: one file per node" test -s "$tmp/three/word_topic.txt.0" -a \
    -s "$tmp/three/word_topic.txt.1" -a -s "$tmp/three/word_topic.txt.2"
  tokens=$(grep -o '^\[0\] data=.* tokens=[0-9]*' <<<"$out" | grep -o '[0-9]*$')
  # the counts and the rows a --save DIR holds over all nodes' files
  saved_counts() { cat "$1"/word_topic.txt.* | grep -v '^#' | tr ' ' '\n' | grep ':' | cut -d: -f2 |
    awk '{ s += $1 } END { print s }'; }
  saved_rows() { cat "$1"/word_topic.txt.* | grep -vc '^#'; }
  saved=$(saved_counts "$tmp/three")
  check "3 nodes: saved counts add up to the tokens ($saved of $tokens)" test -n "$tokens" -a "$saved" = "$tokens"
  rows=$(saved_rows "$tmp/three")
  check "3 nodes: every word row saved once" test "$rows" -eq 600

  # the other placements: counts exact and every row saved once (owners only, never a
  # replica as well), and a trace file per node; each saved over the one before, where the
  # topic totals' row (one node writes them) may have been elsewhere: one totals file
  rm -rf "$tmp/m"
  for mode in adaptive replicate relocate hot; do
    rm -rf "$tmp/trace".*
    out=$(timeout 120 "$augur" run -n 3 "$lda" "${args[@]}" --mode $mode --save "$tmp/m" \
      --trace "$tmp/trace" 2>&1)
    rc=$?
    check "3 nodes, $mode: exit 0" test $rc -eq 0
    check "3 nodes, $mode: counts exact" \
      grep -q '^\[0\] check=ok negative=0 row_sums=0 totals=0 recount=0 docs=0 ' <<<"$out"
    saved=$(saved_counts "$tmp/m")
    check "3 nodes, $mode: saved counts add up ($saved of $tokens)" test -n "$tokens" -a "$saved" = "$tokens"
    rows=$(saved_rows "$tmp/m")
    check "3 nodes, $mode: every word row saved once ($rows)" test "$rows" -eq 600
    check "3 nodes, $mode: one totals file ($(ls "$tmp/m" | grep totals | tr '\n' ' '))" \
      test "$(ls "$tmp/m" | grep -c '^totals\.txt')" -eq 1
    check "3 nodes, $mode: a trace per node" test -s "$tmp/trace.0" -a -s "$tmp/trace.1" -a \
      -s "$tmp/trace.2"
  done

  # the consistency models: counts exact in every placement that allows them, reads that
  # waited counted, and relocate refused under a bound with a message that says why
  for cons in bsp ssp:1; do
    for mode in classic adaptive replicate hot; do
      out=$(AU_NET_DELAY_US=100 timeout 120 "$augur" run -n 3 "$lda" "${args[@]}" --mode $mode \
        --consistency $cons 2>&1)
      rc=$?
      check "3 nodes, $mode, $cons: exit 0" test $rc -eq 0
      check "3 nodes, $mode, $cons: counts exact" \
        grep -q '^\[0\] check=ok negative=0 row_sums=0 totals=0 recount=0 docs=0 ' <<<"$out"
      check "3 nodes, $mode, $cons: reads waited for the bound" \
        grep -q '^\[0\] iteration=.* clock_waits=[1-9]' <<<"$out"
    done
  done
  out=$(timeout 60 "$augur" run -n 2 "$lda" "${args[@]}" --mode relocate --consistency bsp 2>&1)
  check "relocate under bsp: refused" test $? -ne 0
  check "relocate under bsp: says why" grep -q -- '--mode relocate needs --consistency async' \
    <<<"$out"
fi

if [ -n "$augur" ]; then
  # A corpus FILE on a cluster: each node reads its part of the bytes (read=parts) and the
  # nodes agree on what one node reading it whole finds: documents, vocabulary (text:
  # numbered by first appearance, --min-count over the whole file), tokens
  awk 'BEGIN { srand(5); for (d = 0; d < 600; d++) { n = 5 + d % 17; line = "";
         for (k = 0; k < n; k++) { w = int(rand() * rand() * 400); line = line (k ? " " : "") "w" sprintf("%c%c", 97 + w % 26, 97 + int(w / 26)) }
         print line; if (d % 97 == 3) print "" } }' >"$tmp/corpus.txt"
  awk 'BEGIN { srand(6); nnz = 0; for (d = 1; d <= 500; d++) for (w = 1 + d % 7; w <= 300; w += 11 + d % 13) { e[++nnz] = d " " w " " 1 + (d + w) % 3 }
         print 500; print 300; print nnz; for (i = 1; i <= nnz; i++) print e[i] }' >"$tmp/docword.txt"
  for f in corpus.txt docword.txt; do
    pargs=("$tmp/$f" --topics 6 --iterations 3 --top-words 0 --check)
    one=$("$lda" "${pargs[@]}" --save "$tmp/one.$f" 2>&1)
    out=$(timeout 120 "$augur" run -n 3 "$lda" "${pargs[@]}" --save "$tmp/parts.$f" 2>&1)
    rc=$?
    echo "$out" | grep '^\[0\]'
    check "$f on 3 nodes: exit 0" test $rc -eq 0
    check "$f on 3 nodes: read in parts" grep -q '^\[0\] data=.* read=parts$' <<<"$out"
    want=$(grep -o '^data=.* tokens=[0-9]*' <<<"$one")
    check "$f on 3 nodes: the same documents, words and tokens as one node ($want)" \
      grep -qF "[0] $want " <<<"$out"
    check "$f on 3 nodes: counts exact" grep -q '^\[0\] check=ok ' <<<"$out"
  done
  check "corpus.txt on 3 nodes: the vocabulary one node finds" \
    cmp -s "$tmp/one.corpus.txt/vocab.txt" "$tmp/parts.corpus.txt/vocab.txt"
  saved_docs() { cat "$@" | grep -v '^#' | cut -d' ' -f1 | sort -n | tr '\n' ' '; }
  check "corpus.txt on 3 nodes: every document's topics saved once, as one node numbers them" \
    test "$(saved_docs "$tmp/parts.corpus.txt"/doc_topic.txt.*)" = "$(saved_docs "$tmp/one.corpus.txt/doc_topic.txt")" -a \
    "$(grep -vc '^#' "$tmp/one.corpus.txt/doc_topic.txt")" -eq 607
  # infer: a saved model's topics for documents, and their held-out log-likelihood
  "$lda" "$tmp/corpus.txt" --topics 6 --iterations 30 --top-words 0 --save "$tmp/m30" >/dev/null
  inf=$("$lda" infer "$tmp/m30" "$tmp/corpus.txt" --iterations 30 2>&1); rc=$?
  tail -1 <<<"$inf"
  docs=$(grep -c '^doc=' <<<"$inf")
  check "infer: exit 0, a line per document ($docs)" test $rc -eq 0 -a "$docs" -eq 607
  # a document's top topic is the one that training gave most of its tokens
  same=$(grep -v '^#' "$tmp/m30/doc_topic.txt" | awk 'NR == FNR { best = -1; for (i = 3; i <= NF; i++) { split($i, a, ":"); if (a[2] > best) { best = a[2]; top = a[1] } } if (NF > 2) t[$1] = top; next }
    /^doc=/ { split($1, d, "="); split($3, k, "[=,:]"); if (d[2] in t) { n++; if (t[d[2]] == k[2]) s++ } } END { printf "%d %d", s, n }' - <(grep '^doc=' <<<"$inf"))
  check "infer: the top topic of training for most documents ($same)" \
    awk -v a="${same% *}" -v b="${same#* }" 'BEGIN { exit !(b > 500 && a >= 0.7 * b) }'
  llh=$(grep -o 'llh_per_token=[-0-9.]*' <<<"$inf" | cut -d= -f2)
  check "infer: held-out llh/token $llh beats the uniform word (-log 363)" \
    awk -v l="$llh" 'BEGIN { exit !(l != "" && l > -log(363)) }'
  # a one-node save over a 3-node one: the directory holds one model (the per-node files
  # go), and infer reads it as it reads the same save in a clean directory
  timeout 120 "$augur" run -n 3 "$lda" "$tmp/corpus.txt" --topics 6 --iterations 2 --top-words 0 \
    --save "$tmp/mix" >/dev/null 2>&1
  check "save over another node count: 3 nodes' files first" test -s "$tmp/mix/word_topic.txt.2"
  "$lda" "$tmp/corpus.txt" --topics 6 --iterations 30 --top-words 0 --save "$tmp/mix" >/dev/null
  check "save over another node count: no per-node file left" \
    test -z "$(ls "$tmp/mix" | grep -E '\.[0-9]+$')"
  mkdir "$tmp/clean"
  cp "$tmp/mix"/{model,vocab,word_topic,doc_topic}.txt "$tmp/clean"
  check "save over another node count: infer reads the one model" \
    test "$("$lda" infer "$tmp/mix" "$tmp/corpus.txt" --iterations 5 | md5sum)" = \
    "$("$lda" infer "$tmp/clean" "$tmp/corpus.txt" --iterations 5 | md5sum)"
  # a save that fails (here a temporary name that cannot be made) leaves the one before
  cp -r "$tmp/m30" "$tmp/m30.before"
  mkdir "$tmp/m30/doc_topic.txt.tmp"
  "$lda" "$tmp/corpus.txt" --topics 6 --iterations 1 --top-words 0 --save "$tmp/m30" \
    >/dev/null 2>"$tmp/err"; rc=$?
  check "failed save: exit 1, naming the file" \
    test $rc -eq 1 -a "$(grep -c 'doc_topic.txt.tmp' "$tmp/err")" -eq 1
  check "failed save: the previous save is as it was" \
    diff -r -x doc_topic.txt.tmp "$tmp/m30.before" "$tmp/m30"
  rmdir "$tmp/m30/doc_topic.txt.tmp"
  printf 'wab wab zzzz qqqq\n' >"$tmp/new.txt"
  inf=$("$lda" infer "$tmp/m30" "$tmp/new.txt" 2>&1)
  check "infer: words the model lacks counted ($(tail -1 <<<"$inf"))" \
    grep -q '^infer docs=1 tokens=2 unknown=2 ' <<<"$inf"
  err=$("$lda" infer "$tmp/nothing" "$tmp/new.txt" 2>&1); rc=$?
  check "infer: no model there, exit 2, named" test $rc -eq 2 -a "$(grep -c "$tmp/nothing/model.txt" <<<"$err")" -eq 1
  check "infer --help" "$lda" infer --help
  # entries not together by document cannot be cut: every node reads the file whole
  { head -3 "$tmp/docword.txt"; tail -n +4 "$tmp/docword.txt" | sort -r; } >"$tmp/unsorted.txt"
  out=$(timeout 120 "$augur" run -n 3 "$lda" "$tmp/unsorted.txt" --topics 6 --iterations 2 \
    --top-words 0 --check 2>&1)
  rc=$?
  check "unsorted UCI on 3 nodes: exit 0, read whole" \
    test $rc -eq 0 -a "$(grep -c '^\[0\] data=.* read=whole$' <<<"$out")" -eq 1
  check "unsorted UCI on 3 nodes: counts exact" grep -q '^\[0\] check=ok ' <<<"$out"
  # a bad line in the middle part: named there by its byte, every node stops with 2
  n=$(wc -l <"$tmp/docword.txt")
  sed "$((n / 2))s/.*/7 x 1/" "$tmp/docword.txt" >"$tmp/bad.txt"
  out=$(timeout 120 "$augur" run -n 3 "$lda" "$tmp/bad.txt" --iterations 1 2>&1)
  rc=$?
  echo "$out" | grep 'augur-lda:'
  check "bad line on 3 nodes: exit 2" test $rc -eq 2
  check "bad line on 3 nodes: named by its byte" \
    grep -q "^\[1\] augur-lda: $tmp/bad.txt: the line at byte [0-9]*: expected 'docID wordID count', got '7 x 1'" <<<"$out"
  check "bad line on 3 nodes: the others say why they stop" \
    test "$(grep -c 'another node could not read its part of' <<<"$out")" -eq 2
fi

# a checkpoint whose topics file is of the earlier format (without the samplers' states)
ck=$tmp/ck1
"$lda" --threads 1 --top-words 0 --docs 500 --iterations 2 --checkpoint "$ck" >/dev/null 2>&1
printf 'AUGURLD1' | dd of="$ck/ckpt-2/docs-0.bin" bs=1 count=8 conv=notrunc 2>/dev/null
err=$("$lda" --threads 1 --top-words 0 --docs 500 --iterations 3 --resume "$ck" 2>&1 >/dev/null)
rc=$?
check "a format-1 checkpoint: exit 2, says so" test $rc -eq 2 -a "$(grep -c 'docs-0.bin: format 1, from an earlier augur-lda' <<<"$err")" -eq 1
# a checkpoint of a corpus with more documents: its last document's tokens have no home
"$lda" --threads 1 --top-words 0 --docs 100 --iterations 2 --checkpoint "$tmp/ck100" >/dev/null 2>&1
err=$("$lda" --threads 1 --top-words 0 --docs 99 --iterations 3 --resume "$tmp/ck100" 2>&1 >/dev/null)
rc=$?
check "a checkpoint of more documents: exit 2, says so" \
  test $rc -eq 2 -a "$(grep -c 'tokens belong to no document here (another corpus?)' <<<"$err")" -eq 1

if [ $fails -ne 0 ]; then echo "$fails check(s) failed"; exit 1; fi
echo "all checks passed"
