#!/usr/bin/env bash
# Starts a local three-node Strand cluster (three processes on 127.0.0.1,
# data under ./data), creates a replicated topic, produces and consumes.
# `scripts/run.sh stop` stops what it started; `scripts/run.sh start` only
# starts the nodes. DATA and PORT_BASE (default 9092) let several clusters
# live side by side (the drill and the benchmarks use their own);
# SERVER_CONFIG names a file of broker settings for every node.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-bin/strand}
DATA=${DATA:-data/cluster}
NODES=(1 2 3)
PORT_BASE=${PORT_BASE:-9092}
port() { echo $((PORT_BASE + ($1 - 1) * 10)); }      # 9092, 9102, 9112
addr() { echo "127.0.0.1:$(port "$1")"; }
raft() { echo "127.0.0.1:$(($(port "$1") + 1))"; }
gossip() { echo "127.0.0.1:$(($(port "$1") + 2))"; }
VOTERS=$(for n in "${NODES[@]}"; do printf '%s@%s,' "$n" "$(raft "$n")"; done)
VOTERS=${VOTERS%,}
BOOT=$(for n in "${NODES[@]}"; do printf '%s,' "$(addr "$n")"; done)
BOOT=${BOOT%,}
mkdir -p "$DATA"

stop() {
  for n in "${NODES[@]}"; do
    f=$DATA/node$n.pid
    [[ -f $f ]] || continue
    pid=$(cat "$f")
    if kill -0 "$pid" 2>/dev/null; then kill -TERM "$pid"; fi
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    rm -f "$f"
    echo "stopped node $n"
  done
}
if [[ ${1:-} == stop ]]; then stop; exit 0; fi
stop >/dev/null 2>&1 || true

for n in "${NODES[@]}"; do
  join=$(for m in "${NODES[@]}"; do [[ $m == "$n" ]] || printf '%s,' "$(gossip "$m")"; done)
  args=("$(realpath "$BIN")" server --node-id "$n" --listen "$(addr "$n")" --controller-listen "$(raft "$n")"
    --gossip-listen "$(gossip "$n")" --join "${join%,}" --controller-voters "$VOTERS"
    --metrics-listen "127.0.0.1:$(($(port "$n") + 3))" --data-dir "$(realpath -m "$DATA/node$n")")
  [[ -n ${SERVER_CONFIG:-} ]] && args+=(--config "$(realpath "$SERVER_CONFIG")")   # broker settings file (experiments)
  printf '%s\0' "${args[@]}" >"$DATA/node$n.cmd"     # for drills: how to start it again
  setsid "${args[@]}" >>"$DATA/node$n.log" 2>&1 < /dev/null &
  echo $! >"$DATA/node$n.pid"
done
for n in "${NODES[@]}"; do
  if ! "$BIN" health --addr "$(addr "$n")" --wait 60s; then
    echo "node $n did not become healthy; see $DATA/node$n.log" >&2
    exit 1
  fi
done
echo "== three nodes serving: $BOOT (logs and pids under $DATA/)"
if [[ ${1:-} == start ]]; then exit 0; fi
"$BIN" cluster describe --bootstrap "$BOOT"
"$BIN" topics create demo --partitions 3 --replication-factor 3 --config min.insync.replicas=2 --bootstrap "$BOOT" 2>/dev/null || true
"$BIN" topics describe demo --bootstrap "$BOOT"
echo "== producing 10 records (acks=all, idempotent)"
seq 1 10 | "$BIN" produce demo --bootstrap "$BOOT"
echo "== consuming them back (partition, offset, value)"
"$BIN" consume demo --from-beginning --max-records 10 --timeout 10s --print-partition --print-offsets --bootstrap "$BOOT"
echo
echo "== exactly-once demo (strand demo)"
"$BIN" demo --bootstrap "$BOOT"
echo
echo "== point the CLI at --bootstrap $BOOT; stop with: make stop"
