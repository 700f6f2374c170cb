#!/usr/bin/env bash
# The rolling-upgrade drill (make drill-upgrade): a three-node process
# cluster starts on an older Strand (OLD, a fixed commit built from this
# repository's history) and is replaced one node at a time by the current
# build, under transactional load through both front doors (two strand
# verify runs: the Go SDK over gRPC, and franz-go over the Kafka
# listeners). Each replacement is what an operator does: a controlled
# shutdown (SIGTERM), the other binary, the same data directory, then
# wait until every partition's ISR is full again. Node 2 is rolled back
# to the old binary and forward again before the last node goes, and
# finalizing strand.version is refused while an old binary is registered.
# Once every node runs the current build the level is finalized (strand
# features upgrade, as kafka-features upgrade), and the old binary, started
# on node 3's data, is then refused by the controller with a message naming
# the feature. Both verify runs must report 0 lost, 0 duplicated, 0
# aborted-visible and 0 hanging, and no time without a commit longer than
# MAX_GAP. The franz-go clients run with the settings the README's
# Failover section gives (with franz-go's defaults, metadata at most 5 s
# old and 10 s added to request timeouts, a stopping node costs them more).
#
#   scripts/drill-upgrade.sh               # OLD=the commit below, DURATION=150s
#   OLD=<commit> scripts/drill-upgrade.sh  # from another older commit
#
# The drill needs the old commit in this clone's history (a shallow clone
# needs `git fetch --unshallow`). The old binary is cached as
# bin/strand-<commit>.
set -euo pipefail
cd "$(dirname "$0")/.."
# The last build before the failover work (Kafka's heartbeat and Raft
# timeouts, no early fence, no quorum hand-over at a clean stop) and
# before strand.version.
OLD=${OLD:-d6d95f9b2aa4f51d9c567ec8c634c31fe44dfbe7}
DURATION=${DURATION:-150s}
MAX_GAP=${MAX_GAP:-3s}
OUT=${OUT:-data/drill-upgrade}
export DATA=$OUT/cluster PORT_BASE=${PORT_BASE:-9800}
log() { printf '%s %s\n' "$(date -u +%H:%M:%S)" "$*"; }
die() { log "FAIL: $*"; exit 1; }

make -s build
NEW=$(realpath bin/strand)
if ! git cat-file -e "$OLD^{commit}" 2>/dev/null; then
  echo "the old commit $OLD is not in this clone's history (a shallow clone? run git fetch --unshallow)" >&2
  exit 2
fi
short=$(git rev-parse --short=12 "$OLD")
OLDBIN=$(realpath -m "bin/strand-$short")
if [[ ! -x $OLDBIN ]]; then
  log "building the old binary from $short"
  src=$(mktemp -d)
  git archive "$OLD" | tar -x -C "$src"
  (cd "$src" && CGO_ENABLED=0 go build -trimpath -o "$OLDBIN" ./cmd/strand)
  rm -rf "$src"
fi

mkdir -p "$OUT"
rm -rf "$DATA"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  scripts/run.sh stop >/dev/null 2>&1 || true
}
trap cleanup EXIT
BOOT=127.0.0.1:$((PORT_BASE + 5)),127.0.0.1:$((PORT_BASE + 15)),127.0.0.1:$((PORT_BASE + 25))
KBOOT=127.0.0.1:$PORT_BASE,127.0.0.1:$((PORT_BASE + 10)),127.0.0.1:$((PORT_BASE + 20))

log "starting three nodes on the old binary ($short) under $DATA"
BIN=$OLDBIN scripts/run.sh start >/dev/null
"$NEW" features describe --bootstrap "$BOOT" | tee "$OUT/features-before.txt"

# verify PROTOCOL: one exactly-once workload through one front door.
stamp=$(date -u +%H%M%S)
for proto in grpc kafka; do
  "$NEW" verify --bootstrap "$BOOT" --kafka-bootstrap "$KBOOT" --protocol "$proto" --run-id "upgrade-$proto-$stamp" \
    --duration "$DURATION" --target process --data-dir "$DATA" --producers 3 --min-committed 200 \
    --max-commit-gap "$MAX_GAP" --kafka-failover-settings --json "$OUT/$proto.json" >"$OUT/verify-$proto.log" 2>&1 &
  pids+=($!)
done
log "strand verify through gRPC and through the Kafka listeners for $DURATION (logs: $OUT/verify-*.log)"
sleep 15

# whole: wait until every broker is alive and no partition is under-replicated.
whole() {
  local i out
  for i in $(seq 1 120); do
    out=$("$NEW" topics describe --bootstrap "$BOOT" --under-replicated-partitions 2>/dev/null) && [[ -z $out ]] &&
      [[ $("$NEW" cluster describe --bootstrap "$BOOT" 2>/dev/null | grep -c fenced) == 0 ]] && return 0
    sleep 0.5
  done
  die "the cluster did not become whole within 60 s"
}

# swap N BINARY: a controlled shutdown of node N, then N again on BINARY.
swap() {
  local n=$1 bin=$2 f=$DATA/node$1.cmd args=()
  scripts/run.sh stop-node "$n" >/dev/null
  mapfile -d '' args <"$f"
  args[0]=$bin
  printf '%s\0' "${args[@]}" >"$f"
  scripts/run.sh start-node "$n" >/dev/null
  whole
  log "node $n runs $([[ $bin == "$NEW" ]] && echo "the current build" || echo "the old binary ($short)"); every ISR is full"
  sleep 8
}

swap 1 "$NEW"
swap 2 "$NEW"
swap 2 "$OLDBIN" # rolled back before finalizing
if "$NEW" features upgrade --bootstrap "$BOOT" --feature strand.version=1 >"$OUT/finalize-early.txt" 2>&1; then
  cat "$OUT/finalize-early.txt"
  die "strand.version was finalized while nodes 2 and 3 ran the old binary"
fi
grep -q "Could not upgrade strand.version to 1" "$OUT/finalize-early.txt" || { cat "$OUT/finalize-early.txt"; die "the early finalize did not say why it was refused"; }
log "finalizing with old binaries registered is refused: $(head -1 "$OUT/finalize-early.txt")"
swap 2 "$NEW"
swap 3 "$NEW"
"$NEW" features upgrade --bootstrap "$BOOT" --feature strand.version=1 | tee "$OUT/finalize.txt"
# The broker that answers describe may apply the finalize a moment after
# the one that forwarded it: look for up to 10 s.
for _ in $(seq 1 20); do
  "$NEW" features describe --bootstrap "$BOOT" >"$OUT/features-after.txt"
  grep -q "Feature: strand.version.*FinalizedVersionLevel: 1" "$OUT/features-after.txt" && break
  sleep 0.5
done
cat "$OUT/features-after.txt"
grep -q "Feature: strand.version.*FinalizedVersionLevel: 1" "$OUT/features-after.txt" || die "strand.version is not finalized at 1"
sleep 8

# The old binary on node 3's data, after the finalize: the active
# controller refuses its registration (UNSUPPORTED_VERSION, naming the
# feature), so it never becomes healthy; the binary before the feature
# logs the refusal only at debug level, so the controller's log says it.
# Then node 3 goes back to the current build.
log "starting the old binary on node 3 after the finalize (it must be refused)"
scripts/run.sh stop-node 3 >/dev/null
mapfile -d '' args <"$DATA/node3.cmd"
args[0]=$OLDBIN
setsid "${args[@]}" >"$OUT/old-after-finalize.log" 2>&1 </dev/null &
oldpid=$!
refused=""
for _ in $(seq 1 60); do
  if grep -h "refused a broker registration" "$DATA/node1.log" "$DATA/node2.log" | grep -q "broker 3 cannot register.*strand.version"; then refused=1; break; fi
  sleep 0.5
done
healthy=""
"$NEW" health --addr "127.0.0.1:$((PORT_BASE + 25))" --wait 3s >/dev/null 2>&1 && healthy=1
kill -TERM "$oldpid" 2>/dev/null || true
for _ in $(seq 1 100); do kill -0 "$oldpid" 2>/dev/null || break; sleep 0.1; done
kill -KILL "$oldpid" 2>/dev/null || true
[[ -n $refused ]] || die "no controller refused the old binary's registration naming strand.version (see $DATA/node1.log, node2.log)"
[[ -z $healthy ]] || die "the old binary on node 3 became healthy after strand.version was finalized"
log "refused: $(grep -h "refused a broker registration" "$DATA/node1.log" "$DATA/node2.log" | grep -o 'broker 3 cannot register[^"]*' | head -1)"
scripts/run.sh start-node 3 >/dev/null
whole
log "node 3 runs the current build again"

log "waiting for both verify runs"
status=0
for i in 0 1; do
  proto=$([[ $i == 0 ]] && echo grpc || echo kafka)
  if wait "${pids[$i]}"; then
    log "verify ($proto): passed"
  else
    status=1
    log "verify ($proto): FAILED"
  fi
  grep -E "FAIL|^txns:|longest time without a commit|^run " "$OUT/verify-$proto.log" | sed "s/^/  [$proto] /" || true
done
pids=()
[[ $status == 0 ]] || { for f in "$OUT"/verify-*.log; do tail -n 40 "$f"; done; die "a verify run failed (logs in $OUT)"; }
log "rolling upgrade from $short: nothing lost, duplicated, visible when aborted or left hanging; commits never stopped longer than $MAX_GAP"
