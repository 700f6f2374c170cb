#!/usr/bin/env bash
# Starts a local Strand node under ./data and runs a short demo on it.
# `scripts/run.sh stop` stops what it started.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-bin/strand}
DATA=${DATA:-data}
ADDR=127.0.0.1:9092
mkdir -p "$DATA"

stop() {
  if [[ -f $DATA/node1.pid ]]; then
    pid=$(cat "$DATA/node1.pid")
    if kill -0 "$pid" 2>/dev/null; then
      kill -TERM "$pid"
      for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    fi
    rm -f "$DATA/node1.pid"
    echo "stopped node 1"
  fi
}
if [[ ${1:-} == stop ]]; then stop; exit 0; fi
stop >/dev/null 2>&1 || true

"$BIN" server --dev --node-id 1 --listen $ADDR --data-dir "$DATA/node1" >"$DATA/node1.log" 2>&1 &
echo $! >"$DATA/node1.pid"
if ! "$BIN" health --addr $ADDR --wait 30s; then
  echo "node did not become healthy; see $DATA/node1.log" >&2
  exit 1
fi
echo "== node 1 serving on $ADDR (log: $DATA/node1.log)"
"$BIN" topics create demo --partitions 3 --bootstrap $ADDR 2>/dev/null || true
"$BIN" topics describe demo --bootstrap $ADDR
echo "== producing 10 records"
seq 1 10 | "$BIN" produce demo --bootstrap $ADDR
echo "== consuming them back"
"$BIN" consume demo --from-beginning --max-records 10 --timeout 10s --print-partition --print-offsets --bootstrap $ADDR
echo "== point the CLI at --bootstrap $ADDR; stop with: make stop"
