#!/usr/bin/env bash
# Fault drills end to end: build the image, start the three-node compose
# cluster on fresh volumes, run `strand verify` with every drill against
# it, tear it down. Without a working Docker (or with TARGET=process) the
# same drills run against a local process cluster instead (the network cut
# is then skipped: processes sharing 127.0.0.1 cannot be cut off).
#
#   scripts/drill.sh                      # DURATION=2m, every drill once
#   DURATION=30m REPEAT=1 scripts/drill.sh   # the soak: drills in a loop
#   PROTOCOL=kafka scripts/drill.sh       # the workload's records go through the
#                                         # Kafka listeners (franz-go), not gRPC
#   PLANTED_BUGS=marker-retry-unreplicated scripts/drill.sh
#                                         # rehearse the checker: the nodes run
#                                         # with that fixed bug put back
#
# The drill cluster is not the one users run: deploy/docker-compose.drill.yml
# (over deploy/docker-compose.yml) and, for processes, the environment below
# switch on the nodes' test-only fault endpoint (STRAND_TESTING_FAULTS=1, for
# the marker drills), the first-epoch knob (transactional ids start at epoch
# 32740, so producers cross the end of their epochs) and PLANTED_BUGS.
# With PLANTED_BUGS set the nodes run a build with -tags planted (the only
# kind that reads STRAND_PLANTED_BUGS): bin/strand-planted for processes,
# the image strand:planted for compose; bin/strand, the client, stays a
# release build.
#
# The compose cluster runs with TLS on every listener and client
# certificates required (make certs writes them to deploy/certs/); strand
# verify connects with deploy/certs/verify.properties (--command-config),
# through either front door. The process cluster stays plaintext.
#
# Exit status is strand verify's: 0 only when every anomaly count is zero
# and every drill succeeded.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-2m}
DRILLS=${DRILLS:-all}
TARGET=${TARGET:-auto}
OUT=${OUT:-data/drill}
PROTOCOL=${PROTOCOL:-grpc}
EXTRA=(--min-committed "${MIN_COMMITTED:-0}" --producers "${PRODUCERS:-3}")
[[ -n ${REPEAT:-} ]] && EXTRA+=(--repeat)
export PLANTED_BUGS=${PLANTED_BUGS:-}
mkdir -p "$OUT"
log() { printf '%s %s\n' "$(date -u +%H:%M:%S)" "$*"; }
[[ -n $PLANTED_BUGS ]] && log "the nodes run with planted bugs: $PLANTED_BUGS (strand verify must fail)"

compose() {
  if docker compose version >/dev/null 2>&1; then docker compose "$@"; else docker-compose "$@"; fi
}

if [[ $TARGET == auto ]]; then
  if docker info >/dev/null 2>&1 && (docker compose version >/dev/null 2>&1 || command -v docker-compose >/dev/null); then
    TARGET=compose
  else
    TARGET=process
  fi
fi

make -s build
if [[ -n $PLANTED_BUGS ]]; then
  # The nodes' binary: a release build refuses STRAND_PLANTED_BUGS.
  make -s build GOTAGS=planted BIN=bin/strand-planted
  export BIN=bin/strand-planted STRAND_IMAGE=strand:planted
fi
# verify GRPC_BOOTSTRAP KAFKA_BOOTSTRAP [more flags]
verify() {
  bin/strand verify --bootstrap "$1" --protocol "$PROTOCOL" --kafka-bootstrap "$2" --duration "$DURATION" --drill "$DRILLS" \
    --target "$TARGET" --json "$OUT/result.json" --history "$OUT/history.json" "${EXTRA[@]}" "${@:3}"
}

# grant_verify BOOTSTRAP: the compose cluster runs the StandardAuthorizer
# with allow.everyone.if.no.acl.found=false (deploy/server.drill.conf), so
# User:CN=verify (deploy/certs/verify.properties) may do only what these
# ACLs allow. The admin (User:CN=admin, a super user) adds exactly what the
# workload and the drills send as verify; every name the workload makes
# starts with "verify-" (topics verify-<run>-src/-dst, group
# verify-<run>-stage, transactional ids verify-<run>-p<i>/-s<i>/-w<i>):
#   topics verify-*        Create (CreateTopics), Write (Produce),
#                          Read (Fetch, TxnOffsetCommit, DescribeProducers),
#                          Describe (Metadata, ListOffsets, AddPartitionsToTxn)
#   groups verify-*        Read (Join/Sync/Heartbeat/Leave, TxnOffsetCommit,
#                          OffsetFetch, AddOffsetsToTxn), Describe (FindCoordinator)
#   txn ids verify-*       Write (InitProducerId, AddPartitionsToTxn,
#                          AddOffsetsToTxn, EndTxn, TxnOffsetCommit),
#                          Describe (FindCoordinator, DescribeTransactions,
#                          ListTransactions)
#   __transaction_state,   Describe: the drills ask Metadata for their
#   __consumer_offsets     leaders to pick the coordinator to kill
#   cluster                Describe only (DescribeCluster: the controller,
#                          for kill-controller); no ClusterAction, no Alter
# The fault endpoint the marker drills POST to (/debug/faults/, served only
# with STRAND_TESTING_FAULTS=1) answers only a super user or a broker once
# the HTTP listener speaks TLS: strand verify calls it with the admin's
# certificate (--fault-command-config), never verify's.
grant_verify() {
  local acls=(bin/strand acls --bootstrap "$1" --command-config deploy/certs/admin.properties --add --allow-principal User:CN=verify)
  "${acls[@]}" --resource-pattern-type prefixed --topic verify- --operation Create --operation Write --operation Read --operation Describe >/dev/null
  "${acls[@]}" --resource-pattern-type prefixed --group verify- --operation Read --operation Describe >/dev/null
  "${acls[@]}" --resource-pattern-type prefixed --transactional-id verify- --operation Write --operation Describe >/dev/null
  "${acls[@]}" --topic __transaction_state --topic __consumer_offsets --operation Describe >/dev/null
  "${acls[@]}" --cluster --operation Describe >/dev/null
  log "ACLs of User:CN=verify:"
  bin/strand acls --bootstrap "$1" --command-config deploy/certs/admin.properties --list --principal User:CN=verify | tee "$OUT/acls.txt"
}

case $TARGET in
compose)
  F=(-f deploy/docker-compose.yml -f deploy/docker-compose.drill.yml)
  down() { compose "${F[@]}" down -v --remove-orphans >/dev/null 2>&1 || true; }
  trap 'log "tearing the compose cluster down"; compose "${F[@]}" logs --no-color >"$OUT/compose.log" 2>&1 || true; down' EXIT
  log "building the image (FROM scratch)${PLANTED_BUGS:+ with -tags planted: $STRAND_IMAGE}"
  if [[ -n $PLANTED_BUGS ]]; then make -s image GOTAGS=planted IMAGE="$STRAND_IMAGE"; else make -s image; fi
  # TLS on every listener (deploy/server.conf): the nodes' keystores, the
  # CA and the gossip key, and the CLI's --command-config files.
  make -s certs
  down
  log "starting the compose cluster"
  compose "${F[@]}" up -d
  BOOT=127.0.0.1:${STRAND_NODE1_PORT:-19097},127.0.0.1:${STRAND_NODE2_PORT:-29097},127.0.0.1:${STRAND_NODE3_PORT:-39097}   # the gRPC listeners
  for a in ${BOOT//,/ }; do bin/strand health --addr "$a" --wait 120s --command-config deploy/certs/admin.properties >/dev/null; done
  KBOOT=127.0.0.1:${STRAND_NODE1_KAFKA_PORT:-19092},127.0.0.1:${STRAND_NODE2_KAFKA_PORT:-29092},127.0.0.1:${STRAND_NODE3_KAFKA_PORT:-39092}
  grant_verify "$BOOT"
  log "three nodes healthy (TLS, client certificates required, ACLs on); running strand verify ($PROTOCOL) as User:CN=verify for $DURATION with drills: $DRILLS"
  verify "$BOOT" "$KBOOT" --command-config deploy/certs/verify.properties --fault-command-config deploy/certs/admin.properties
  ;;
process)
  export DATA=$OUT/cluster PORT_BASE=${PORT_BASE:-9600}
  # Nodes started again by a drill inherit strand verify's environment.
  export STRAND_TESTING_FAULTS=1 STRAND_PLANTED_BUGS=$PLANTED_BUGS SERVER_CONFIG=$OUT/drill.conf
  printf 'strand.testing.transaction.first.producer.epoch: 32740\n' >"$SERVER_CONFIG"
  trap 'log "stopping the process cluster"; scripts/run.sh stop >/dev/null 2>&1 || true' EXIT
  rm -rf "$DATA"
  log "starting a process cluster under $DATA (ports from $PORT_BASE)"
  scripts/run.sh start >/dev/null
  BOOT=127.0.0.1:$((PORT_BASE + 5)),127.0.0.1:$((PORT_BASE + 15)),127.0.0.1:$((PORT_BASE + 25))   # run.sh's gRPC listeners
  KBOOT=127.0.0.1:$PORT_BASE,127.0.0.1:$((PORT_BASE + 10)),127.0.0.1:$((PORT_BASE + 20))            # run.sh's Kafka listeners
  log "three nodes healthy; running strand verify ($PROTOCOL) for $DURATION with drills: $DRILLS"
  verify "$BOOT" "$KBOOT" --data-dir "$DATA"
  ;;
*)
  echo "TARGET must be auto, compose or process" >&2
  exit 2
  ;;
esac
