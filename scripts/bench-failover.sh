#!/usr/bin/env bash
# bench-failover: how long exactly-once commits stop when a node fails, on
# this machine, as one markdown table (stdout, and $OUT).
#
# It starts a fresh three-node process cluster (scripts/run.sh, DATA=<tmp>,
# PORT_BASE=$F_PORT_BASE) and runs `strand bench-failover` on it: one
# transactional producer per front door (the SDK over gRPC, franz-go over
# the Kafka listener) commits one-record transactions in a loop while each
# fault is put on the node it names, $REPS times (kill -9 of the
# transaction coordinator's node, of the active controller's, of the
# partition leader's; SIGSTOP of the coordinator's node for 20 s and for
# 1 s, and five 1 s stops a second apart; a controlled shutdown and
# restart of it). Per door and fault: the
# time from the fault to the first commit of a transaction begun after it,
# and the longest gap between commits, median and worst.
#
# Knobs (environment): REPS (5), FAULTS (all), DOORS (sdk,kafka), OUT, TRACE=1
# (print the steps of every transaction slower than 300 ms),
# F_PORT_BASE (9800), BENCH_DIR. QUICK=1: one repetition of each. The cut
# faults (a node cut off one way or both) need the compose cluster's
# network: `strand bench-failover --target compose` there. Logs of the
# last run: $BENCH/failover-logs. It stops exactly the processes it started.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
GO=${GO:-go}
BENCH=${BENCH_DIR:-$ROOT/.bench}
OUT=${OUT:-$BENCH/failover.md}
QUICK=${QUICK:-0}
REPS=${REPS:-5}
[[ $QUICK == 1 ]] && REPS=1
F_PORT_BASE=${F_PORT_BASE:-9800}
SB=$ROOT/bin/strand
GBOOT="127.0.0.1:$((F_PORT_BASE + 5)),127.0.0.1:$((F_PORT_BASE + 15)),127.0.0.1:$((F_PORT_BASE + 25))"
KBOOT="127.0.0.1:$F_PORT_BASE,127.0.0.1:$((F_PORT_BASE + 10)),127.0.0.1:$((F_PORT_BASE + 20))"

# shellcheck source=scripts/bench-lib.sh
. "$ROOT/scripts/bench-lib.sh"
# shellcheck disable=SC2046
ports_free $(node_ports "$F_PORT_BASE") || { say "pick another F_PORT_BASE"; exit 1; }

build_strand
LOGS=$BENCH/failover-logs
rm -rf "$LOGS" && mkdir -p "$LOGS" "$(dirname "$OUT")"
F_DATA=$(mktemp -d /tmp/bench-failover-data.XXXXXX)
cleanup() {
  DATA=$F_DATA PORT_BASE=$F_PORT_BASE "$ROOT/scripts/run.sh" stop >/dev/null 2>&1 || true
  for n in 1 2 3; do [[ -f $F_DATA/node$n.log ]] && cp "$F_DATA/node$n.log" "$LOGS/strand-node$n.log"; done
  rm -rf "$F_DATA"
}
trap cleanup EXIT

say "== starting a three-node cluster (ports from $F_PORT_BASE)"
if ! DATA=$F_DATA PORT_BASE=$F_PORT_BASE BIN=$SB "$ROOT/scripts/run.sh" start >"$LOGS/strand-start.log" 2>&1; then
  cat "$LOGS/strand-start.log" >&2
  exit 1
fi
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
T0=$(date +%s)
args=(bench-failover --target process --data-dir "$F_DATA" --bootstrap "$GBOOT" --kafka-bootstrap "$KBOOT" --reps "$REPS")
[[ -n ${FAULTS:-} ]] && args+=(--faults "$FAULTS")
[[ -n ${DOORS:-} ]] && args+=(--doors "$DOORS")
[[ ${TRACE:-0} == 1 ]] && args+=(--trace)
"$SB" "${args[@]}" | tee "$LOGS/bench.log"
{
  echo "bench-failover at $REV, $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, load average at start $LOAD_START, at end $(cut -d' ' -f1-3 /proc/loadavg), $(( $(date +%s) - T0 )) s"
  sed -n '/^| door/,$p' "$LOGS/bench.log"
} >"$OUT"
say "== table in $OUT"
