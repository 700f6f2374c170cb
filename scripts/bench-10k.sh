#!/usr/bin/env bash
# 10 000 partitions on three nodes: a fresh three-process cluster
# (scripts/run.sh with its own PORT_BASE and DATA), then
#   1. create TOPICS topics of PARTS partitions each, RF 3 (lowered, and
#      said so, when the nodes' open-file limit does not allow that many
#      replicas: a node holds at most a quarter of it), all at once;
#      the time until the controller acknowledged the last one, then the
#      metadata propagation time: from that acknowledgement until every
#      node's metadata (a Metadata request to that node alone) lists every
#      partition with a leader and the nodes together lead them all
#      (strand_leader_partitions summed over the three /metrics);
#   2. idle CPU (utime+stime of the three processes, in cores) over IDLE_SECS
#      after SETTLE_SECS, resident memory and open files per node;
#   3. kill -9 of a node that is not the active controller (it leads about
#      a third of the partitions): the time until a survivor's metadata
#      names a live leader for every partition; then the node started again
#      and the time until no partition is under-replicated on any node.
#
#   scripts/bench-10k.sh           10 topics × 1 000 partitions
#   QUICK=1 scripts/bench-10k.sh   2 topics × 1 000 (a smoke run)
#   TOPICS=5 scripts/bench-10k.sh  5 000 partitions: the most RF 3 allows
#                                  with 20 000 open files a node
#
# Settings (environment): RF (3), PORT_BASE (24000), DATA (a fresh directory under
# /tmp, removed at the end unless KEEP=1), TOPICS, PARTS, IDLE_SECS (30),
# SETTLE_SECS (20), OUT (a file the markdown table fragment is written
# to; default .bench/bench-10k.md), SERVER_CONFIG (broker settings for
# every node, passed on to run.sh). It stops only the nodes it started.
set -euo pipefail
cd "$(dirname "$0")/.."
export BIN=${BIN:-bin/strand}
GO=${GO:-go}
export PORT_BASE=${PORT_BASE:-24000}
OWN_DATA=0
if [[ -z ${DATA:-} ]]; then
  DATA=$(mktemp -d /tmp/strand-bench-10k.XXXXXX)
  OWN_DATA=1
fi
export DATA
if [[ ${QUICK:-0} == 1 ]]; then TOPICS=${TOPICS:-2}; else TOPICS=${TOPICS:-10}; fi
PARTS=${PARTS:-1000}
RF=${RF:-3}
IDLE_SECS=${IDLE_SECS:-30}
SETTLE_SECS=${SETTLE_SECS:-20}
OUT=${OUT:-.bench/bench-10k.md}
TOTAL=$((TOPICS * PARTS))
mkdir -p "$(dirname "$OUT")"

port() { echo $((PORT_BASE + ($1 - 1) * 10)); }
grpc() { echo "127.0.0.1:$(($(port "$1") + 5))"; }
metrics() { echo "127.0.0.1:$(($(port "$1") + 3))"; }
BOOT="$(grpc 1),$(grpc 2),$(grpc 3)"
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
log() { echo "== $*" >&2; }

# Many partitions mean many segment and index files: raise the soft limit
# on open files to the hard one for the nodes this script starts.
NOFILE_BEFORE=$(ulimit -n)
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
NOFILE=$(ulimit -n)
# A node hosts at most a quarter of its descriptor limit in partition
# replicas (max.broker.partitions, node/fdlimit.go). When RF copies of
# TOTAL partitions over three nodes do not fit, the replication factor is
# lowered to what fits, and the table says so.
PER_NODE_MAX=$((NOFILE / 4))
while ((RF > 1 && (TOTAL * RF + 2) / 3 > PER_NODE_MAX)); do RF=$((RF - 1)); done
if (((TOTAL * RF + 2) / 3 > PER_NODE_MAX)); then
  echo "$TOTAL partitions do not fit in three nodes with $NOFILE open files each (at most $PER_NODE_MAX replicas a node)" >&2
  exit 1
fi

cleanup() {
  local j
  for j in $(jobs -p); do kill "$j" 2>/dev/null || true; done
  DATA=$DATA PORT_BASE=$PORT_BASE scripts/run.sh stop >/dev/null 2>&1 || true
  if [[ $OWN_DATA == 1 && -z ${KEEP:-} ]]; then rm -rf "$DATA"; fi
}
trap cleanup EXIT

[[ -x $BIN ]] || $GO build -o "$BIN" ./cmd/strand

pid() { cat "$DATA/node$1.pid"; }
metric() { curl -sf "http://$(metrics "$1")/metrics" | awk -v m="$2" '$1 == m { v = $2 } END { print v }'; }
cputicks() { # utime+stime of node N in clock ticks
  awk '{ print $14 + $15 }' "/proc/$(pid "$1")/stat"
}
rss_mib() { awk '/^VmRSS/ { printf "%.0f", $2 / 1024 }' "/proc/$(pid "$1")/status"; }
fds() { ls "/proc/$(pid "$1")/fd" | wc -l; }
controller() {
  local n
  for n in 1 2 3; do [[ $(metric "$n" strand_controller_active) == 1 ]] && { echo "$n"; return; }; done
  echo 0
}

# led N: partitions with a live leader (not -1, not node $2) in node N's
# metadata of the bench topics; nothing printed if node N does not answer.
led() {
  local names=()
  for ((t = 0; t < TOPICS; t++)); do names+=("p10k-$t"); done
  "$BIN" topics describe "${names[@]}" --bootstrap "$(grpc "$1")" --bootstrap-wait 1s 2>/dev/null |
    awk -v dead="${2:--2}" '$0 ~ /Partition: / { for (i = 1; i <= NF; i++) if ($i == "Leader:") l = $(i + 1); if (l != "none" && l != -1 && l != dead) n++ } END { print n + 0 }'
}
leaders_sum() {
  local s=0 n v
  for n in "$@"; do v=$(metric "$n" strand_leader_partitions); s=$((s + ${v:-0})); done
  echo "$s"
}
under_replicated() {
  local s=0 n v
  for n in 1 2 3; do v=$(metric "$n" strand_under_replicated_partitions); s=$((s + ${v:-0})); done
  echo "$s"
}

log "starting three nodes (PORT_BASE=$PORT_BASE, DATA=$DATA, open files soft limit $NOFILE_BEFORE -> $NOFILE)"
scripts/run.sh start >/dev/null
# __transaction_state and __consumer_offsets are not created yet: the counts below are the bench topics'.
BASE_LED=$(leaders_sum 1 2 3)

log "creating $TOPICS topics × $PARTS partitions, RF $RF (a node may hold $PER_NODE_MAX replicas)"
T0=$(now)
ACKS=$DATA/acks
: >"$ACKS"
for ((t = 0; t < TOPICS; t++)); do
  (
    set +e
    "$BIN" topics create "p10k-$t" --partitions "$PARTS" --replication-factor "$RF" --bootstrap "$BOOT" 2>"$DATA/create.err.$t" |
      while read -r line; do [[ $line == Created* ]] && echo "ok $(now)" >>"$ACKS"; done
    rc=${PIPESTATUS[0]}
    # A create that outlived the client's request timeout is retried, and
    # the retry finds the topic the first attempt made: that answer is the
    # acknowledgement too (the names are fresh).
    if grep -q TOPIC_ALREADY_EXISTS "$DATA/create.err.$t"; then
      echo "ok $(now)" >>"$ACKS"
    elif ((rc != 0)); then
      echo "failed" >>"$ACKS"
    fi
  ) &
done
# The CLI prints its line on the controller's acknowledgement, then waits
# for every broker to list the topic; the acknowledgements are what counts.
while (($(grep -c "^ok" "$ACKS") < TOPICS)); do
  if grep -q "^failed" "$ACKS"; then
    echo "a create failed:" >&2; cat "$DATA"/create.err.* >&2; exit 1
  fi
  sleep 0.05
done
LAST_ACK=$(awk '$1 == "ok" { print $2 }' "$ACKS" | sort -n | tail -1)
CREATE_S=$(awk -v a="$T0" -v b="$LAST_ACK" 'BEGIN { printf "%.2f", b - a }')
log "acknowledged after ${CREATE_S}s"

declare -A SEEN
while :; do
  all=1
  for n in 1 2 3; do
    [[ -n ${SEEN[$n]:-} ]] && continue
    if [[ $(led "$n") == "$TOTAL" ]]; then SEEN[$n]=$(since "$LAST_ACK"); else all=0; fi
  done
  if ((all)) && (($(leaders_sum 1 2 3) - BASE_LED >= TOTAL)); then break; fi
  if (($(awk -v a="$LAST_ACK" -v b="$(now)" 'BEGIN { print (b - a > 300) }'))); then
    echo "metadata did not reach every node in 300 s" >&2; exit 1
  fi
  sleep 0.1
done
wait
PROP_S=$(since "$LAST_ACK")
log "every node lists and leads all $TOTAL partitions ${PROP_S}s after the last acknowledgement (node 1/2/3 metadata: ${SEEN[1]}/${SEEN[2]}/${SEEN[3]} s)"

log "settling ${SETTLE_SECS}s, then idle CPU over ${IDLE_SECS}s"
sleep "$SETTLE_SECS"
HZ=$(getconf CLK_TCK)
declare -A C0 C1
for n in 1 2 3; do C0[$n]=$(cputicks "$n"); done
sleep "$IDLE_SECS"
for n in 1 2 3; do C1[$n]=$(cputicks "$n"); done
IDLE_TOTAL=0
IDLE_PER=()
for n in 1 2 3; do
  c=$(awk -v a="${C0[$n]}" -v b="${C1[$n]}" -v hz="$HZ" -v s="$IDLE_SECS" 'BEGIN { printf "%.3f", (b - a) / hz / s }')
  IDLE_PER+=("$c")
  IDLE_TOTAL=$(awk -v a="$IDLE_TOTAL" -v b="$c" 'BEGIN { printf "%.3f", a + b }')
done
RSS=()
FDS=()
for n in 1 2 3; do RSS+=("$(rss_mib "$n")"); FDS+=("$(fds "$n")"); done
log "idle: ${IDLE_TOTAL} cores (${IDLE_PER[*]}), RSS ${RSS[*]} MiB, open files ${FDS[*]}"

FAILOVER_ROW="| kill -9 of a node | not measured: RF $RF |"
RESTART_ROW=""
if ((RF >= 2)); then
  CTRL=$(controller)
  VICTIM=0
  for n in 1 2 3; do [[ $n != "$CTRL" ]] && { VICTIM=$n; break; }; done
  SURV=()
  for n in 1 2 3; do [[ $n != "$VICTIM" ]] && SURV+=("$n"); done
  VICTIM_LED=$(metric "$VICTIM" strand_leader_partitions)
  log "kill -9 node $VICTIM (leads $VICTIM_LED partitions; controller: node $CTRL)"
  kill -KILL "$(pid "$VICTIM")"
  TK=$(now)
  while [[ $(led "${SURV[0]}" "$VICTIM") != "$TOTAL" ]]; do
    if (($(awk -v a="$TK" -v b="$(now)" 'BEGIN { print (b - a > 300) }'))); then
      echo "partitions without a live leader 300 s after the kill" >&2; exit 1
    fi
    sleep 0.1
  done
  FAILOVER_S=$(since "$TK")
  log "every partition has a live leader again after ${FAILOVER_S}s"
  while (($(leaders_sum "${SURV[@]}") - BASE_LED < TOTAL)); do sleep 0.1; done
  FAILOVER_LED_S=$(since "$TK")
  log "and the survivors lead them all after ${FAILOVER_LED_S}s"

  rm -f "$DATA/node$VICTIM.pid"
  TR=$(now)
  scripts/run.sh start-node "$VICTIM" >/dev/null
  UP_S=$(since "$TR")
  while (($(under_replicated) > 0)) || [[ $("$BIN" topics describe --under-replicated-partitions --bootstrap "$(grpc "${SURV[0]}")" 2>/dev/null | grep -c "Partition: ") != 0 ]]; do
    if (($(awk -v a="$TR" -v b="$(now)" 'BEGIN { print (b - a > 300) }'))); then
      echo "partitions still under-replicated 300 s after the restart" >&2; exit 1
    fi
    sleep 0.2
  done
  ISR_S=$(since "$TR")
  FDS_AFTER=$(fds "$VICTIM")
  log "node $VICTIM healthy after ${UP_S}s, every ISR full after ${ISR_S}s (open files ${FDS_AFTER})"

  FAILOVER_ROW="| kill -9 of node $VICTIM (led $VICTIM_LED) → every partition led by a live node (survivors lead all) | ${FAILOVER_S} s (${FAILOVER_LED_S} s) |"
  RESTART_ROW="| node $VICTIM restarted: healthy / every ISR full | ${UP_S} s / ${ISR_S} s |"
fi

{
  echo "| $TOTAL partitions ($TOPICS × $PARTS, RF $RF), 3 nodes, open files limit $NOFILE (≤ $PER_NODE_MAX replicas a node) | |"
  echo "| --- | ---: |"
  echo "| create: all acknowledged | ${CREATE_S} s |"
  echo "| metadata propagation: last acknowledgement → every node lists and leads all (node 1/2/3 lists) | ${PROP_S} s (${SEEN[1]} / ${SEEN[2]} / ${SEEN[3]} s) |"
  echo "| idle CPU over ${IDLE_SECS} s, all three nodes (per node) | ${IDLE_TOTAL} cores (${IDLE_PER[*]}) |"
  echo "| RSS per node | ${RSS[0]} / ${RSS[1]} / ${RSS[2]} MiB |"
  echo "| open files per node | ${FDS[0]} / ${FDS[1]} / ${FDS[2]} |"
  echo "$FAILOVER_ROW"
  [[ -z $RESTART_ROW ]] || echo "$RESTART_ROW"
} >"$OUT"
cat "$OUT"
