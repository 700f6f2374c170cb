#!/usr/bin/env bash
# bench-scale: Strand's partition- and client-scale probes, on
# this machine, as one markdown table (stdout, and $OUT).
#
# It starts a fresh three-node cluster (scripts/run.sh, DATA=<tmp>,
# PORT_BASE=$S_PORT_BASE) and creates, RF 3 with min.insync.replicas=2:
#   scale-p1     1 partition
#   scale-pN     $PARTS partitions (1 000)
#   scale-many   $PRODUCERS × $PER_PRODUCER partitions
# (a) One producer, keyless 1 KiB records, acks=all (idempotent),
#     max.in.flight 5, linger.ms $LINGER_MS: scale-p1 against scale-pN,
#     interleaved (the order of the pair alternates by round), $ROUNDS rounds
#     of $RECORDS records each; medians of records/s, p50/p99 send → ack
#     and the brokers' CPU (utime+stime of the three processes) per MiB.
# (b) strand perf scale: $PRODUCERS producers, each on its own
#     $PER_PRODUCER partitions of scale-many, for $SCALE_SECS s, and
#     $CONSUMERS consumers in $N_GROUPS groups subscribed to it: aggregate
#     produce and consume rates, per-client min/max.
# Then it stops its cluster and runs scripts/bench-10k.sh (10 000
# partitions) and scripts/bench-cleaner.sh (the cleaner's cost) if they
# exist, each with OUT set to a file of this run and QUICK passed on, and
# appends what they wrote.
#
# QUICK=1: a smoke run (one round, fewer records, 10 producers, 3
# consumers, 5 s). Knobs (environment): OUT, ROUNDS, RECORDS, PARTS,
# PRODUCERS, PER_PRODUCER, CONSUMERS, N_GROUPS, SCALE_SECS, LINGER_MS,
# S_PORT_BASE, BENCH_DIR. Logs of the last run: $BENCH/scale-logs. It stops
# exactly the processes it started and removes its temporary directories
# on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
GO=${GO:-go}
BENCH=${BENCH_DIR:-$ROOT/.bench}
OUT=${OUT:-$BENCH/scale.md}
QUICK=${QUICK:-0}
if [[ $QUICK == 1 ]]; then
  ROUNDS=${ROUNDS:-1} RECORDS=${RECORDS:-50000} PRODUCERS=${PRODUCERS:-10} CONSUMERS=${CONSUMERS:-3} SCALE_SECS=${SCALE_SECS:-5}
fi
ROUNDS=${ROUNDS:-3}
RECORDS=${RECORDS:-300000}
PARTS=${PARTS:-1000}
PRODUCERS=${PRODUCERS:-100}
PER_PRODUCER=${PER_PRODUCER:-10}
CONSUMERS=${CONSUMERS:-30}
N_GROUPS=${N_GROUPS:-3}
SCALE_SECS=${SCALE_SECS:-20}
LINGER_MS=${LINGER_MS:-5}
S_PORT_BASE=${S_PORT_BASE:-9700}
SB=$ROOT/bin/strand
HZ=$(getconf CLK_TCK)
SBOOT="127.0.0.1:$((S_PORT_BASE + 5)),127.0.0.1:$((S_PORT_BASE + 15)),127.0.0.1:$((S_PORT_BASE + 25))"

# shellcheck source=scripts/bench-lib.sh
. "$ROOT/scripts/bench-lib.sh"
# shellcheck disable=SC2046
ports_free $(node_ports "$S_PORT_BASE") || { say "pick another S_PORT_BASE"; exit 1; }

build_strand

WORK=$(mktemp -d /tmp/bench-scale.XXXXXX)
RES=$WORK/results.tsv
LOGS=$BENCH/scale-logs
rm -rf "$LOGS" && mkdir -p "$LOGS"
: >"$RES"
S_DATA="" S_PIDS=()

strand_stop() {
  [[ -n $S_DATA ]] || return 0
  DATA=$S_DATA PORT_BASE=$S_PORT_BASE "$ROOT/scripts/run.sh" stop >/dev/null 2>&1 || true
  for n in 1 2 3; do [[ -f $S_DATA/node$n.log ]] && cp "$S_DATA/node$n.log" "$LOGS/strand-node$n.log"; done
  rm -rf "$S_DATA"
  S_DATA=""
}
# Clients run under run_child (bench-lib.sh); the trap stops one first.
cleanup() {
  stop_child
  strand_stop
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'stop_child; exit 130' INT TERM

record() { printf '%s\t%s\n' "$1" "$2" >>"$RES"; }

T0=$(date +%s)
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)

# ---------------------------------------------------------------- cluster
say "== starting a three-node cluster (ports from $S_PORT_BASE)"
S_DATA=$(mktemp -d /tmp/bench-scale-data.XXXXXX)
if ! DATA=$S_DATA PORT_BASE=$S_PORT_BASE BIN=$SB "$ROOT/scripts/run.sh" start >"$LOGS/strand-start.log" 2>&1; then
  cat "$LOGS/strand-start.log" >&2
  exit 1
fi
for n in 1 2 3; do S_PIDS+=("$(cat "$S_DATA/node$n.pid")"); done

topic() { # name partitions: create, then wait until every partition has three in-sync replicas
  local t=$1 np=$2 i have=0
  for i in $(seq 1 30); do
    "$SB" topics create "$t" --partitions "$np" --replication-factor 3 --config min.insync.replicas=2 \
      --bootstrap "$SBOOT" >>"$LOGS/topics.log" 2>&1 && break
    sleep 1
  done
  for i in $(seq 1 120); do
    have=$("$SB" topics describe "$t" --bootstrap "$SBOOT" 2>/dev/null | grep -Ec 'Isr: [0-9]+,[0-9]+,[0-9]+' || true)
    ((have >= np)) && return 0
    sleep 1
  done
  warn "topic $t: $have of $np partitions fully in sync after 2 minutes"
}
say "== creating topics"
topic scale-p1 1
topic scale-pN "$PARTS"
topic scale-many $((PRODUCERS * PER_PRODUCER))

PROPS=(--producer-props max.in.flight.requests.per.connection=5 --producer-props "linger.ms=$LINGER_MS")
produce() { # key topic records
  local key=$1 t=$2 n=$3 log c0 c1 line
  log=$LOGS/$key.log
  c0=$(cpu_ticks "${S_PIDS[@]}")
  if ! run_child timeout 300 "$SB" perf produce --topic "$t" --num-records "$n" --record-size 1024 --acks all \
    "${PROPS[@]}" --bootstrap "$SBOOT" >"$log" 2>&1; then
    warn "$key failed: $(tail -1 "$log")"
    return 0
  fi
  c1=$(cpu_ticks "${S_PIDS[@]}")
  line=$(grep ' records sent, .* 99th' "$log" | tail -1 || true)
  [[ -n $line ]] || { warn "$key: no summary line"; return 0; }
  record "${key%.r*}.rate" "$(sed -E 's/^[0-9]+ records sent, ([0-9.]+) records\/sec.*/\1/' <<<"$line")"
  record "${key%.r*}.p50" "$(sed -E 's/.* ([0-9.]+) ms 50th.*/\1/' <<<"$line")"
  record "${key%.r*}.p99" "$(sed -E 's/.* ([0-9.]+) ms 99th,.*/\1/' <<<"$line")"
  record "${key%.r*}.cpu" "$(awk -v d=$((c1 - c0)) -v hz="$HZ" -v n="$n" 'BEGIN { printf "%.4f", d / hz / (n * 1024 / 1048576) }')"
}

say "== warm-up (unmeasured)"
produce warm-p1.r0 scale-p1 $((RECORDS / 5))
produce warm-pN.r0 scale-pN $((RECORDS / 5))
sed -i '/^warm-/d' "$RES"

# ---------------------------------------------------------------- (a)
for r in $(seq 1 "$ROUNDS"); do
  say "== round $r of $ROUNDS: one producer, 1 vs $PARTS partitions"
  if ((r % 2)); then
    produce p1.r$r scale-p1 "$RECORDS"
    produce pN.r$r scale-pN "$RECORDS"
  else
    produce pN.r$r scale-pN "$RECORDS"
    produce p1.r$r scale-p1 "$RECORDS"
  fi
done

# ---------------------------------------------------------------- (b)
say "== $PRODUCERS producers × $PER_PRODUCER partitions, $CONSUMERS consumers in $N_GROUPS groups, ${SCALE_SECS} s"
c0=$(cpu_ticks "${S_PIDS[@]}")
if run_child timeout $((SCALE_SECS + 240)) "$SB" perf scale --topic scale-many --producers "$PRODUCERS" \
  --partitions-per-producer "$PER_PRODUCER" --consumers "$CONSUMERS" --groups "$N_GROUPS" --record-size 1024 \
  --duration "${SCALE_SECS}s" "${PROPS[@]}" --bootstrap "$SBOOT" >"$LOGS/scale.log" 2>&1; then
  c1=$(cpu_ticks "${S_PIDS[@]}")
  pl=$(grep ' producers: ' "$LOGS/scale.log" | tail -1 || true)
  cl=$(grep ' consumers in ' "$LOGS/scale.log" | grep 'consumed' | tail -1 || true)
  if [[ -n $pl ]]; then
    record many.rate "$(sed -E 's/.* s, ([0-9.]+) records\/sec.*/\1/' <<<"$pl")"
    record many.pmin "$(sed -E 's/.*per producer min ([0-9]+),.*/\1/' <<<"$pl")"
    record many.pmax "$(sed -E 's/.*per producer min [0-9]+, max ([0-9]+),.*/\1/' <<<"$pl")"
    record many.pratio "$(sed -E 's/.*min\/max ([0-9.]+); send.*/\1/' <<<"$pl")"
    record many.p50 "$(sed -E 's/.*p50 ([0-9.]+) ms.*/\1/' <<<"$pl")"
    record many.p99 "$(sed -E 's/.*p99 ([0-9.]+) ms.*/\1/' <<<"$pl")"
    n=$(sed -E 's/^[0-9]+ producers: ([0-9]+) records.*/\1/' <<<"$pl")
    ((n > 0)) && record many.cpu "$(awk -v d=$((c1 - c0)) -v hz="$HZ" -v n="$n" 'BEGIN { printf "%.4f", d / hz / (n * 1024 / 1048576) }')"
  else
    warn "perf scale printed no producer summary"
  fi
  if [[ -n $cl ]]; then
    record cons.rate "$(sed -E 's/.* s, ([0-9.]+) records\/sec aggregate.*/\1/' <<<"$cl")"
    record cons.cmin "$(sed -E 's/.*per consumer min ([0-9]+),.*/\1/' <<<"$cl")"
    record cons.cmax "$(sed -E 's/.*per consumer min [0-9]+, max ([0-9]+),.*/\1/' <<<"$cl")"
    record cons.cratio "$(sed -E 's/.*min\/max ([0-9.]+)\..*/\1/' <<<"$cl")"
  fi
  grep '^group ' "$LOGS/scale.log" >"$WORK/groups.txt" || true
else
  warn "perf scale failed: $(tail -1 "$LOGS/scale.log")"
fi
strand_stop

# ---------------------------------------------------------------- the others' probes
EXTRA=()
# bench-10k runs twice: 10 000 partitions at the highest RF this machine's
# open-file limit allows (RF 1 with 20 000 descriptors a node), then, when
# that was below 3, 5 000 partitions at RF 3 (the most that fits), whose
# kill -9 measures a failover.
run_probe() { # name log-suffix [env...]
  local s=$1 tag=$2
  shift 2
  [[ -x $ROOT/scripts/$s.sh ]] || return 1
  say "== scripts/$s.sh $*"
  if run_child env OUT="$WORK/$s$tag.md" QUICK="$QUICK" GO="$GO" "$@" "$ROOT/scripts/$s.sh" >"$LOGS/$s$tag.log" 2>&1 && [[ -s $WORK/$s$tag.md ]]; then
    EXTRA+=("$WORK/$s$tag.md")
  else
    warn "scripts/$s.sh $* failed: $(tail -1 "$LOGS/$s$tag.log")"
  fi
}
if run_probe bench-10k ""; then
  if ((QUICK != 1)) && ! grep -q 'RF 3)' "$WORK/bench-10k.md" 2>/dev/null; then
    run_probe bench-10k -rf3 TOPICS=5 || true
  fi
fi
run_probe bench-cleaner "" || true
ELAPSED=$(($(date +%s) - T0))
LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)

# ---------------------------------------------------------------- table
verdict() { [[ $1 == n/a ]] && { echo n/a; return; }; awk -v a="$1" -v b="$2" -v le="${3:-}" 'BEGIN { ok = le ? a <= b : a >= b; print ok ? "met" : "**not met**" }'; }

RTP=$(ratio "$(med pN.rate)" "$(med p1.rate)")
RP99=$(ratio "$(med pN.p99)" "$(med p1.p99)")
RMANY=$(ratio "$(med many.rate)" "$(med p1.rate)")
PR=$(m=$(med many.pratio); [[ -n $m ]] && awk -v m="$m" 'BEGIN { printf "%.2f", m }') || true
CR=$(m=$(med cons.cratio); [[ -n $m ]] && awk -v m="$m" 'BEGIN { printf "%.2f", m }') || true
{
  echo "## Partition and client scale (\`make bench-scale\`)"
  echo
  echo "$(date -u '+%Y-%m-%d %H:%M UTC') · \`uname -m\` $(uname -m) · nproc $(nproc) · $("$GO" version | cut -d' ' -f3) · Strand $REV ·" \
    "medians of $ROUNDS interleaved rounds, ± is half the min–max range · load average $LOAD_START at the start, $LOAD_END at the end · ${ELAPSED} s$( [[ $QUICK == 1 ]] && echo " · QUICK=1 (smoke run)")"
  echo
  echo "Three nodes on one machine, RF 3, min.insync.replicas=2. One producer: \`perf produce --acks all\` (idempotent), keyless 1 KiB records," \
    "max.in.flight 5, linger.ms $LINGER_MS, $RECORDS records per run, the default (sticky) partitioner. Latencies are send → ack in ms," \
    "including the time a record waits in the producer's buffer. CPU is the three brokers' utime+stime per MiB of payload."
  echo
  echo "| workload | msgs/s | p50 / p99 ms | broker CPU s/MiB |"
  echo "| --- | ---: | ---: | ---: |"
  echo "| one producer, 1 partition | $(rate_cell p1) | $(latp p1) | $(cpu p1) |"
  echo "| one producer, $(num "$PARTS") partitions | $(rate_cell pN) | $(latp pN) | $(cpu pN) |"
  echo "| $PRODUCERS producers × $PER_PRODUCER partitions each, ${SCALE_SECS} s (\`perf scale\`) | $(rate_cell many) | $(latp many) | $(cpu many) |"
  echo "| $CONSUMERS consumers in $N_GROUPS groups reading them (aggregate of all groups) | $(rate_cell cons) | | |"
  echo
  echo "| target | measured | |"
  echo "| --- | ---: | --- |"
  echo "| $(num "$PARTS") partitions ≥ 90% of one partition's msgs/s | $RTP | $(verdict "$RTP" 0.90) |"
  echo "| … p99 ≤ 2× one partition's | $RP99 ($(num "$(med pN.p99)") vs $(num "$(med p1.p99)") ms) | $(verdict "$RP99" 2 le) |"
  echo "| $PRODUCERS producers' aggregate ≥ the single producer's (1 partition) | $RMANY | $(verdict "$RMANY" 1) |"
  echo "| no producer starved: min / max records per producer | ${PR:-n/a} ($(num "$(med many.pmin)") / $(num "$(med many.pmax)")) | |"
  echo "| no consumer starved: min / max records per consumer | ${CR:-n/a} ($(num "$(med cons.cmin)") / $(num "$(med cons.cmax)")) | |"
  if [[ -s $WORK/groups.txt ]]; then
    echo
    echo "Records each group consumed of those acknowledged: $(paste -sd';' "$WORK/groups.txt" | sed 's/\.;/;/g; s/;/; /g')"
  fi
  for f in "${EXTRA[@]}"; do
    echo
    cat "$f"
  done
  if ((${#WARNINGS[@]} > 0)); then
    echo
    echo "Warnings:"
    for w in "${WARNINGS[@]}"; do echo "- $w"; done
  fi
} >"$WORK/table.md"
mkdir -p "$(dirname "$OUT")"
cp "$WORK/table.md" "$OUT"
cp "$RES" "$BENCH/scale-results.tsv"
cat "$WORK/table.md"
say "== wrote $OUT (raw values: $BENCH/scale-results.tsv, logs: $LOGS/)"
