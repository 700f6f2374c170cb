#!/usr/bin/env bash
# bench-cleaner: what the log cleaner costs a producer.
#
# A producer of keyed 1 KiB records (--key-space KEYS, so most records are
# overwritten and the cleaner has work) to a compacted topic (1 partition,
# RF 3, min.insync.replicas=2, cleanup.policy=compact, segment.bytes
# SEGMENT_BYTES, min.cleanable.dirty.ratio DIRTY_RATIO), acks=all,
# idempotent, through Strand's SDK; once against a cluster whose brokers
# run the cleaner (log.cleaner.enable: true, log.cleaner.backoff.ms 1000)
# and once against one that does not (log.cleaner.enable: false). ROUNDS
# pairs, the order alternating (on, off, off, on, …); every run starts a
# fresh three-node cluster (scripts/run.sh) on fresh data.
#
# Per run: producer throughput (strand perf produce's final line), broker
# CPU (utime+stime of the three server processes, /proc/<pid>/stat) per MiB
# produced, and the cleaner's own work from the brokers' "cleaned log" lines
# (passes, MiB read, MiB written, seconds) so the reader can see it ran.
# Prints a markdown table fragment (stdout and $OUT) with the medians and
# the ratio on/off of the producer's throughput.
#
# Knobs: OUT, ROUNDS (3), RECORDS (400000; QUICK=1: 120000), KEYS (10000),
# SEGMENT_BYTES (4 MiB), DIRTY_RATIO (0.1), PORT_BASE (25100), BENCH_DIR,
# CLEANER_EXTRA (more broker settings, "key: value" lines, for the "on" runs).
# It stops exactly the nodes it started and removes its data on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
GO=${GO:-go}
BENCH=${BENCH_DIR:-$(mktemp -d /tmp/bench-cleaner.XXXXXX)}
OUT=${OUT:-$BENCH/results.md}
ROUNDS=${ROUNDS:-3}
if [[ ${QUICK:-0} == 1 ]]; then RECORDS=${RECORDS:-120000}; else RECORDS=${RECORDS:-400000}; fi
KEYS=${KEYS:-10000}
SEGMENT_BYTES=${SEGMENT_BYTES:-4194304}
DIRTY_RATIO=${DIRTY_RATIO:-0.1}
PORT_BASE=${PORT_BASE:-25100}
CLEANER_EXTRA=${CLEANER_EXTRA:-}
SB=$ROOT/bin/strand
HZ=$(getconf CLK_TCK)
BOOT="127.0.0.1:$((PORT_BASE + 5)),127.0.0.1:$((PORT_BASE + 15)),127.0.0.1:$((PORT_BASE + 25))"
TOPIC=compacted

# shellcheck source=scripts/bench-lib.sh
. "$ROOT/scripts/bench-lib.sh"
# shellcheck disable=SC2046
ports_free $(node_ports "$PORT_BASE") || { say "pick another PORT_BASE"; exit 2; }

say "== building bin/strand"
make -s build GO="$GO" >&2
mkdir -p "$BENCH"
DATA=""
cleanup() {
  [[ -n $DATA && -d $DATA ]] && DATA=$DATA PORT_BASE=$PORT_BASE scripts/run.sh stop >/dev/null 2>&1 || true
  [[ -n $DATA ]] && rm -rf "$DATA"
  [[ -z ${BENCH_DIR:-} ]] && [[ $OUT != "$BENCH"/* ]] && rm -rf "$BENCH"
  return 0
}
trap cleanup EXIT


RESULTS=$BENCH/results.tsv
: >"$RESULTS"
# run MODE ROUND: one fresh cluster, one producer run; appends a line to $RESULTS.
run() {
  local mode=$1 round=$2 conf pids=() c0 c1 out rate passes read written took
  DATA=$BENCH/data-$mode-$round
  rm -rf "$DATA"
  mkdir -p "$DATA"
  conf=$DATA/server.conf
  if [[ $mode == on ]]; then
    printf 'log.cleaner.enable: true\nlog.cleaner.backoff.ms: 1000\n%s\n' "$CLEANER_EXTRA" >"$conf"
  else
    printf 'log.cleaner.enable: false\n' >"$conf"
  fi
  DATA=$DATA PORT_BASE=$PORT_BASE SERVER_CONFIG=$conf scripts/run.sh start >&2
  for n in 1 2 3; do pids+=("$(cat "$DATA/node$n.pid")"); done
  "$SB" topics create "$TOPIC" --partitions 1 --replication-factor 3 --bootstrap "$BOOT" \
    --config min.insync.replicas=2 --config cleanup.policy=compact --config segment.bytes="$SEGMENT_BYTES" \
    --config min.cleanable.dirty.ratio="$DIRTY_RATIO" >&2
  c0=$(cpu_ticks "${pids[@]}")
  out=$("$SB" perf produce --bootstrap "$BOOT" --topic "$TOPIC" --num-records "$RECORDS" --record-size 1024 \
    --key-space "$KEYS" --producer-props linger.ms=5 --producer-props max.in.flight.requests.per.connection=5)
  c1=$(cpu_ticks "${pids[@]}")
  rate=$(grep -E '^[0-9]+ records sent,' <<<"$out" | tail -1 | sed -E 's/^[0-9]+ records sent, ([0-9.]+) records\/sec.*/\1/')
  # The cleaner's passes during the run, from every node's log.
  read -r passes read written took < <(cat "$DATA"/node*.log | awk '
    /cleaned log/ {
      p++
      for (i = 1; i <= NF; i++) {
        split($i, kv, "=")
        if (kv[1] == "bytesRead") r += kv[2]
        if (kv[1] == "bytesWritten") w += kv[2]
        if (kv[1] == "took") {
          v = kv[2]; s = 0
          if (v ~ /ms$/) { sub(/ms$/, "", v); s = v / 1000 }
          else if (v ~ /µs$/) { sub(/µs$/, "", v); s = v / 1e6 }
          else if (v ~ /m[0-9.]+s$/) { split(v, mm, "m"); sub(/s$/, "", mm[2]); s = mm[1] * 60 + mm[2] }
          else if (v ~ /s$/) { sub(/s$/, "", v); s = v }
          t += s
        }
      }
    }
    END { printf "%d %d %d %.3f\n", p, r, w, t }')
  DATA=$DATA PORT_BASE=$PORT_BASE scripts/run.sh stop >&2
  rm -rf "$DATA"
  DATA=""
  local mib cpu
  mib=$(awk -v n="$RECORDS" 'BEGIN { printf "%.1f", n * 1024 / 1048576 }')
  cpu=$(awk -v t=$((c1 - c0)) -v hz="$HZ" -v m="$mib" 'BEGIN { printf "%.2f", t / hz / m * 1000 }')
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$mode" "$round" "$rate" "$cpu" "$passes" "$read" "$written" "$took" >>"$RESULTS"
  say "-- cleaner $mode, round $round: $rate records/s, broker CPU ${cpu} ms/MiB, cleaner $passes passes, read $read B, wrote $written B, ${took}s"
}

for ((r = 1; r <= ROUNDS; r++)); do
  if ((r % 2 == 1)); then run on "$r"; run off "$r"; else run off "$r"; run on "$r"; fi
done

# mode_med MODE COLUMN: the median of a column over the runs of one mode.
mode_med() {
  awk -F'\t' -v m="$1" -v c="$2" '$1 == m { print $c }' "$RESULTS" | sort -g |
    awk '{ v[NR] = $1 } END { if (NR == 0) { print "n/a"; exit } if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
# ratios: per-pair on/off throughput ratios, then their median.
pairs=$(awk -F'\t' '{ r[$1, $2] = $3 } END { for (i = 1; ; i++) { if (!((("on", i) in r) && (("off", i) in r))) break; printf "%.3f ", r["on", i] / r["off", i] } }' "$RESULTS")
ratio=$(tr ' ' '\n' <<<"$pairs" | grep . | sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
mibf() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }
verdict=$(awk -v r="$ratio" 'BEGIN { print (r >= 0.90 ? "met" : "missed") }')
{
  echo "| cleaner (1 KiB keyed records, $KEYS keys, compacted topic, segment.bytes $SEGMENT_BYTES, min.cleanable.dirty.ratio $DIRTY_RATIO, $RECORDS records, RF 3, acks=all; medians of $ROUNDS interleaved pairs) | on | off | on/off |"
  echo "| --- | ---: | ---: | ---: |"
  echo "| producer throughput, records/s | $(mode_med on 3) | $(mode_med off 3) | $ratio (pairs: ${pairs% }) |"
  echo "| broker CPU, ms per MiB produced (3 nodes) | $(mode_med on 4) | $(mode_med off 4) | |"
  echo "| cleaner passes (3 nodes) | $(mode_med on 5) | $(mode_med off 5) | |"
  echo "| cleaner MiB read / written | $(mibf "$(mode_med on 6)") / $(mibf "$(mode_med on 7)") | $(mibf "$(mode_med off 6)") / $(mibf "$(mode_med off 7)") | |"
  echo "| cleaner time, s (sum of passes) | $(mode_med on 8) | $(mode_med off 8) | |"
  echo "| target: cleaner costs the producer ≤ 10% (on/off ≥ 0.90) | | | $verdict |"
} | tee "$OUT"
say "raw values: $RESULTS"
