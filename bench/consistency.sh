#!/bin/bash
# bench/consistency.sh — augur-mf or augur-lda on N local nodes under each consistency
# model (--consistency: docs/workers.md, "Consistency"), with an added one-way delay on every
# data link (AU_NET_DELAY_US), one row per model: the median seconds per epoch (or sweep)
# after the first, the quality after the last (test RMSE, or log-likelihood per token),
# the reads that waited for the bound per epoch, and both against async in the same run.
# docs/benchmarks.md has the table.
#
#   bench/consistency.sh [--demo mf|lda] [--nodes N] [--delay-us D] [--epochs E] [--runs R]
#                        [--models "M..."] [--mode PLACEMENT] [--build DIR] [-- DEMO_FLAGS...]
# Defaults: mf, 4 nodes, 200 us, 10 epochs, 3 runs, models "async ssp:1 ssp:16 bsp",
# placement adaptive. The runs are outermost (run 1 of every model, then run 2, ...), so
# that each model sees the machine's drift alike.
set -u
nodes=4
delay=200
epochs=10
runs=3
build=build
models="async ssp:1 ssp:16 bsp"
mode=adaptive
demo=mf
usage() {
  sed -n '2,/^set -u/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
  exit "${1:-0}"
}
while [ $# -gt 0 ]; do
  case "$1" in
  --nodes) nodes=$2; shift 2 ;;
  --delay-us) delay=$2; shift 2 ;;
  --epochs) epochs=$2; shift 2 ;;
  --runs) runs=$2; shift 2 ;;
  --build) build=$2; shift 2 ;;
  --models) models=$2; shift 2 ;;
  --mode) mode=$2; shift 2 ;;
  --demo) demo=$2; shift 2 ;;
  --help | -h) usage 0 ;;
  --) shift; break ;;
  *) echo "consistency.sh: unknown flag '$1' (see --help)" >&2; exit 2 ;;
  esac
done
case "$demo" in mf | lda) ;; *) echo "consistency.sh: --demo mf or lda, got '$demo'" >&2; exit 2 ;; esac
for v in "$nodes" "$delay" "$epochs" "$runs"; do
  case "$v" in '' | *[!0-9]*) echo "consistency.sh: expected a whole number, got '$v'" >&2; exit 2 ;; esac
done
[ "$epochs" -ge 2 ] && [ "$runs" -ge 1 ] && [ "$nodes" -ge 2 ] ||
  { echo "consistency.sh: --epochs at least 2, --runs at least 1, --nodes at least 2" >&2; exit 2; }
augur=$build/tools/augur
prog=$build/demos/augur-$demo
for b in "$augur" "$prog"; do
  [ -x "$b" ] || { echo "consistency.sh: $b is missing: build first (make build, or --build DIR)" >&2; exit 2; }
done
data=(--threads 1)
[ $# -gt 0 ] && data=("$@")
if [ "$demo" = lda ]; then
  line=iteration count=--iterations quality=llh_per_token
else
  line=epoch count=--epochs quality=test_rmse
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
median() { sort -g | awk '{v[NR]=$1} END {if (NR) print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }
key() { tr ':' '_' <<<"$1"; }

echo "bench=consistency demo=$demo nodes=$nodes delay_us=$delay epochs=$epochs runs=$runs mode=$mode data=\"${data[*]}\""
for m in $models; do : >"$tmp/$(key "$m").secs" && : >"$tmp/$(key "$m").q" && : >"$tmp/$(key "$m").w"; done
for r in $(seq 1 "$runs"); do
  for m in $models; do
    k=$(key "$m")
    AU_NET_DELAY_US=$delay timeout 600 "$augur" run -n "$nodes" "$prog" --mode "$mode" \
      --consistency "$m" "$count" "$epochs" "${data[@]}" >"$tmp/out" 2>&1
    rc=$?
    if [ $rc -ne 0 ]; then
      echo "consistency.sh: $m failed (exit $rc):" >&2
      tail -5 "$tmp/out" >&2
      exit 1
    fi
    # per-epoch seconds after the first, the last epoch's quality, waits per epoch
    grep "^\[0\] $line=" "$tmp/out" | tail -n +2 | grep -o ' seconds=[^ ]*' | cut -d= -f2 |
      median >>"$tmp/$k.secs"
    grep "^\[0\] $line=$epochs " "$tmp/out" | grep -o "$quality=[^ ]*" | cut -d= -f2 >>"$tmp/$k.q"
    grep "^\[0\] $line=" "$tmp/out" | grep -o 'clock_waits=[^ ]*' | cut -d= -f2 |
      awk '{s += $1} END {print (NR ? s / NR : 0)}' >>"$tmp/$k.w"
  done
done
base_s=$(median <"$tmp/async.secs" 2>/dev/null)
base_q=$(median <"$tmp/async.q" 2>/dev/null)
for m in $models; do
  k=$(key "$m")
  s=$(median <"$tmp/$k.secs") q=$(median <"$tmp/$k.q") w=$(median <"$tmp/$k.w")
  printf 'model=%s seconds=%s %s=%s clock_waits=%.0f runs_seconds="%s" runs_%s="%s"' "$m" "$s" \
    "$quality" "$q" "$w" "$(paste -sd' ' "$tmp/$k.secs")" "$quality" "$(paste -sd' ' "$tmp/$k.q")"
  if [ -n "${base_s:-}" ]; then
    awk -v s="$s" -v b="$base_s" -v q="$q" -v bq="$base_q" -v n="$quality" \
      'BEGIN { printf " seconds_over_async=%.2f %s_over_async=%.4f", s / b, n, q / bq }'
  fi
  echo
done
