#!/usr/bin/env bash
# Starts a local three-node Strand cluster (three processes on 127.0.0.1,
# data under ./data), creates a replicated topic, produces and consumes.
#
#   scripts/run.sh               start the nodes, then the demo (make run)
#   scripts/run.sh start         (re)start all three nodes only
#   scripts/run.sh stop          stop all nodes
#   scripts/run.sh start-node N  start node N again from $DATA/nodeN.cmd (after a kill)
#   scripts/run.sh stop-node N   stop node N alone (SIGTERM: a controlled shutdown)
#   scripts/run.sh status        which nodes run, with their pids
#
# Node N's ports start at port(N) = PORT_BASE + 10(N-1) (9092, 9102, 9112):
# its Kafka listener there (what Kafka clients bootstrap from), Raft at +1,
# gossip at +2, metrics at +3, inter-broker at +4 and its gRPC listener (the
# strand CLI's and the Go SDK's bootstrap) at +5 (9097, 9107, 9117).
#
# DATA and PORT_BASE (default 9092) let several clusters live side by side
# (the drill and the benchmarks use their own); SERVER_CONFIG names a file
# of broker settings for every node. $DATA/nodeN.pid always names node N's
# running process (it is removed when the node is stopped, and replaced
# when the node is started); $DATA/nodeN.cmd is its NUL-separated command
# line, which start-node and the drills start it again with.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-bin/strand}
DATA=${DATA:-data/cluster}
NODES=(1 2 3)
PORT_BASE=${PORT_BASE:-9092}
port() { echo $((PORT_BASE + ($1 - 1) * 10)); }      # 9092, 9102, 9112
kafka() { echo "127.0.0.1:$(port "$1")"; }             # Kafka clients
addr() { echo "127.0.0.1:$(($(port "$1") + 5))"; }    # gRPC: the CLI, the SDK, health checks
raft() { echo "127.0.0.1:$(($(port "$1") + 1))"; }
gossip() { echo "127.0.0.1:$(($(port "$1") + 2))"; }
interbroker() { echo "127.0.0.1:$(($(port "$1") + 4))"; }   # what the nodes dial each other on
VOTERS=$(for n in "${NODES[@]}"; do printf '%s@%s,' "$n" "$(raft "$n")"; done)
VOTERS=${VOTERS%,}
BOOT=$(for n in "${NODES[@]}"; do printf '%s,' "$(addr "$n")"; done)
BOOT=${BOOT%,}
KBOOT=$(for n in "${NODES[@]}"; do printf '%s,' "$(kafka "$n")"; done)
KBOOT=${KBOOT%,}
mkdir -p "$DATA"

usage() {
  echo "usage: scripts/run.sh [start | stop | start-node N | stop-node N | status]" >&2
  exit 2
}

# running_pid N prints node N's pid if its pid file names a live process
# started from its recorded command line (not a pid the kernel reused).
running_pid() {
  local f=$DATA/node$1.pid pid
  [[ -f $f ]] || return 1
  pid=$(cat "$f")
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  kill -0 "$pid" 2>/dev/null || return 1
  if [[ -f $DATA/node$1.cmd && -r /proc/$pid/cmdline ]]; then
    [[ $(tr '\0' '\n' <"/proc/$pid/cmdline") == "$(tr '\0' '\n' <"$DATA/node$1.cmd")" ]] || return 1
  fi
  echo "$pid"
}

# stop_node N: SIGTERM (a controlled shutdown: leaderships move first),
# SIGKILL after 10 s; the pid file goes either way.
stop_node() {
  local n=$1 pid
  if pid=$(running_pid "$n"); then
    kill -TERM "$pid"
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    echo "stopped node $n"
  fi
  rm -f "$DATA/node$n.pid"
}

stop() {
  for n in "${NODES[@]}"; do stop_node "$n"; done
}

# launch N ARGS…: start node N in its own session, record its pid.
launch() {
  local n=$1
  shift
  setsid "$@" >>"$DATA/node$n.log" 2>&1 </dev/null &
  echo $! >"$DATA/node$n.pid"
}

# wait_healthy N ADDR
wait_healthy() {
  if ! "$BIN" health --addr "$2" --wait 60s; then
    echo "node $1 did not become healthy; see $DATA/node$1.log" >&2
    exit 1
  fi
}

# start_node N: start node N again with the command line it was last started with.
start_node() {
  local n=$1 pid listen="" i
  local f=$DATA/node$n.cmd
  [[ -f $f ]] || { echo "no $f: start the cluster with scripts/run.sh start first" >&2; exit 1; }
  if pid=$(running_pid "$n"); then
    echo "node $n already runs (pid $pid)" >&2
    exit 1
  fi
  local args=()
  mapfile -d '' args <"$f"
  for ((i = 0; i < ${#args[@]} - 1; i++)); do
    [[ ${args[i]} == --listen ]] && listen=${args[i + 1]}
  done
  launch "$n" "${args[@]}"
  wait_healthy "$n" "${listen:-$(addr "$n")}"
  echo "started node $n (pid $(cat "$DATA/node$n.pid"))"
}

node_arg() {
  [[ ${1:-} =~ ^[0-9]+$ ]] || usage
  for n in "${NODES[@]}"; do [[ $n == "$1" ]] && return 0; done
  echo "no node $1 (nodes: ${NODES[*]})" >&2
  exit 2
}

case ${1:-} in
stop) stop; exit 0 ;;
stop-node) node_arg "${2:-}"; stop_node "$2"; exit 0 ;;
start-node) node_arg "${2:-}"; start_node "$2"; exit 0 ;;
status)
  for n in "${NODES[@]}"; do
    if pid=$(running_pid "$n"); then echo "node $n: running (pid $pid)"; else echo "node $n: stopped"; fi
  done
  exit 0
  ;;
"" | start) ;;
*) usage ;;
esac
stop >/dev/null 2>&1 || true

for n in "${NODES[@]}"; do
  join=$(for m in "${NODES[@]}"; do [[ $m == "$n" ]] || printf '%s,' "$(gossip "$m")"; done)
  args=("$(realpath "$BIN")" server --node-id "$n" --listen "$(addr "$n")" --kafka-listen "$(kafka "$n")" --inter-broker-listen "$(interbroker "$n")" --controller-listen "$(raft "$n")"
    --gossip-listen "$(gossip "$n")" --join "${join%,}" --controller-voters "$VOTERS"
    --metrics-listen "127.0.0.1:$(($(port "$n") + 3))" --data-dir "$(realpath -m "$DATA/node$n")")
  [[ -n ${SERVER_CONFIG:-} ]] && args+=(--config "$(realpath "$SERVER_CONFIG")")   # broker settings file (experiments)
  printf '%s\0' "${args[@]}" >"$DATA/node$n.cmd"     # for start-node and drills: how to start it again
  launch "$n" "${args[@]}"
done
for n in "${NODES[@]}"; do wait_healthy "$n" "$(addr "$n")"; done
echo "== three nodes serving: gRPC $BOOT, Kafka $KBOOT (logs and pids under $DATA/)"
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
echo "== point the CLI at --bootstrap $BOOT and Kafka clients at $KBOOT; stop with: make stop"
