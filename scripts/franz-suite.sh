#!/usr/bin/env bash
# franz-suite: franz-go's own integration suite (the tests of
# github.com/twmb/franz-go/pkg/kgo, at the version go.mod pins) against a
# fresh three-node Strand cluster (make franz-suite; make test runs it).
#
# It builds the server and the suite's test binary, starts three `strand
# server` processes through scripts/run.sh on free loopback ports (DATA in
# a temporary directory) and a one-node cluster with SCRAM on its Kafka
# listener, points the suite at them (KGO_SEEDS, KGO_TEST_RF=3,
# KGO_TEST_RECORDS, KGO_TEST_SCRAM_SEEDS) and prints every test's and
# subtest's outcome and duration. The nodes are stopped on every way out.
#
# It fails when the suite fails or times out, when a node is gone by the
# end or (race-enabled server) reported a data race, and when the tests
# that ran are not the expected ones: scripts/franz-suite.tests lists, for
# the pinned version, each test that must pass, each that skips against
# Strand (with why) and the KIP-848 ones. A KIP-848 test may skip only while
# the broker does not advertise ConsumerGroupHeartbeat v1 (ApiVersions key
# 68, asked before the run); with STRAND_FRANZ_REQUIRE_848=1 the broker must
# advertise it and every KIP-848 test must pass. A test the list does not
# name is reported, not failed (a new version's tests: FRANZ_WRITE_LIST=1
# rewrites the list from a passing run; read it before committing it). A
# few tests with a known flaw of their own (the list's rerun lines: the
# failure's text, and why) run again when they fail in just that way; see
# "Reruns" below.
#
# Environment:
#   FRANZ_RECORDS=100000  KGO_TEST_RECORDS: what TestGroupETL and TestTxnEtl
#                         push through their chains of three groups
#                         (franz-go's default is 500 000)
#   FRANZ_SERVER_RACE=1   the nodes run a race-enabled build (bin/strand-race);
#                         0 runs bin/strand
#   FRANZ_CHAOS=1         KGO_TEST_CHAOS: TestGroupETL's clients drop each
#                         connection 0.5 to 1.5 s after dialing it
#   FRANZ_PARALLEL=4      go test -parallel
#   FRANZ_TIMEOUT=15m     go test -timeout
#   FRANZ_RUN=REGEX       go test -run (then the list is not checked); keep
#                         TestGroupETL and TestTxnEtl whole: with four of
#                         their six subtests left out they wait forever
#   KGO_LOG_LEVEL=info    the suite's client logs (debug, info, none)
#   SERVER_CONFIG=FILE    broker settings (Kafka's names) for the three nodes,
#                         as scripts/run.sh takes them
#   PLANTED_BUGS=a,b      the nodes run with those fixed bugs put back
#                         (internal/planted: rehearse that the suite fails);
#                         the server is then built with -tags planted
#                         (bin/strand-race-planted, bin/strand-planted), the
#                         only build that reads STRAND_PLANTED_BUGS
#   STRAND_FRANZ_REQUIRE_848=1
#                         KIP-848 must be served and its tests must pass
#   OUT=data/franz-suite  where the results go: output.txt (the suite's
#                         output; rerun.txt, the reruns'), events.json (go
#                         test -json's events),
#                         results.tsv (test, outcome, seconds) and, when the
#                         run fails, the nodes' logs (node1.log … node3.log,
#                         scram.log)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
GO=${GO:-go}
OUT=${OUT:-$ROOT/data/franz-suite}
RECORDS=${FRANZ_RECORDS:-100000}
SERVER_RACE=${FRANZ_SERVER_RACE:-1}
CHAOS=${FRANZ_CHAOS:-1}
PARALLEL=${FRANZ_PARALLEL:-4}
TIMEOUT=${FRANZ_TIMEOUT:-15m}
RUN=${FRANZ_RUN:-}
REQUIRE_848=${STRAND_FRANZ_REQUIRE_848:-0}
LIST=$ROOT/scripts/franz-suite.tests
PKG=github.com/twmb/franz-go/pkg/kgo
export STRAND_PLANTED_BUGS=${PLANTED_BUGS:-}

# shellcheck source=scripts/bench-lib.sh
. "$ROOT/scripts/bench-lib.sh"
log() { say "$(date -u +%H:%M:%S) $*"; }

VERSION=$($GO list -m -f '{{.Version}}' github.com/twmb/franz-go)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/franz-suite.XXXXXX")
export DATA=$WORK/cluster
LOGS=(node1 node2 node3 scram) # $DATA/NAME.log: the three nodes, the SCRAM node
CLUSTER_UP=0
SCRAM_PID=""
KEEP_LOGS=1 # until the run has passed
mkdir -p "$OUT"
for l in "${LOGS[@]}"; do rm -f "$OUT/$l.log"; done
rm -f "$OUT/rerun.txt"

# stop_scram: SIGTERM to the SCRAM node, SIGKILL after 10 s (as run.sh stops a node).
stop_scram() {
  [[ -n $SCRAM_PID ]] || return 0
  kill -TERM "$SCRAM_PID" 2>/dev/null || true
  for _ in $(seq 1 100); do kill -0 "$SCRAM_PID" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$SCRAM_PID" 2>/dev/null || true
  wait "$SCRAM_PID" 2>/dev/null || true
  SCRAM_PID=""
}
stop_cluster() {
  ((CLUSTER_UP)) || return 0
  log "stopping the cluster"
  stop_scram
  scripts/run.sh stop >/dev/null 2>&1 || true
  CLUSTER_UP=0
}
cleanup() {
  stop_child
  stop_cluster
  if ((KEEP_LOGS)) && [[ -d $DATA ]]; then
    local l kept=()
    for l in "${LOGS[@]}"; do
      [[ -f $DATA/$l.log ]] || continue
      cp "$DATA/$l.log" "$OUT/$l.log"
      kept+=("$OUT/$l.log")
    done
    ((${#kept[@]} == 0)) || say "the nodes' logs: ${kept[*]}"
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# pick_base: a PORT_BASE whose ports nobody listens on (TCP, and with ss
# UDP for gossip): scripts/run.sh's 18 from it, and the SCRAM node's at
# +30…+39.
# They lie below the ephemeral range (no outgoing connection holds one)
# and clear of the fixed ports of make run (9092…), the drills (9600…),
# the benchmarks (9700…) and compose (19092…).
pick_base() {
  local base used="" p ok _
  if command -v ss >/dev/null; then
    used=$(ss -Hltun | awk '{ n = split($5, a, ":"); print a[n] }' | sort -u)
  fi
  for _ in $(seq 1 50); do
    base=$((10000 + RANDOM % 900 * 10)) # 10000…18990, its last port below 19092
    ok=1
    for p in $(node_ports "$base") $(seq $((base + 30)) $((base + 39))); do
      # a port that takes a connection is in use (all there is to go by without ss)
      if grep -qx "$p" <<<"$used" || (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then ok=0; break; fi
    done
    if ((ok)); then echo "$base"; return 0; fi
  done
  say "found no free ports for a cluster"
  return 1
}

# api_max_version HOST PORT KEY: the highest version of Kafka API KEY the
# broker at HOST:PORT lists in ApiVersions (asked at v0, which every broker
# answers), or -1 when it does not list KEY.
api_max_version() {
  local fd len bytes
  exec {fd}<>"/dev/tcp/$1/$2"
  # size 21, ApiVersions (18) v0, correlation id 1, client id "franz-suite"
  printf '\x00\x00\x00\x15\x00\x12\x00\x00\x00\x00\x00\x01\x00\x0bfranz-suite' >&"$fd"
  len=$(timeout 10 dd bs=1 count=4 status=none <&"$fd" | od -An -v -tu1 |
    awk '{ for (i = 1; i <= NF; i++) v = v * 256 + $i } END { print v + 0 }')
  if ((len < 10)); then
    exec {fd}>&-
    say "no ApiVersions answer from $1:$2"
    return 1
  fi
  bytes=$(timeout 10 dd bs=1 count="$len" status=none <&"$fd" | od -An -v -tu1)
  exec {fd}>&-
  # correlation id (4), error code (2), count (4), then key, min, max (2 each)
  awk -v key="$3" '{ for (i = 1; i <= NF; i++) b[n++] = $i }
    END {
      if (b[4] * 256 + b[5] != 0) { print "ApiVersions answered error " b[4] * 256 + b[5] > "/dev/stderr"; exit 1 }
      c = ((b[6] * 256 + b[7]) * 256 + b[8]) * 256 + b[9]
      for (j = 0; j < c; j++) {
        o = 10 + 6 * j
        if (b[o] * 256 + b[o + 1] == key) { print b[o + 4] * 256 + b[o + 5]; exit }
      }
      print "-1"
    }' <<<"$bytes"
}

# The server and the suite's test binary, built before the cluster starts.
# With PLANTED_BUGS the build carries the switches (-tags planted) and is
# named apart from the release build, which refuses STRAND_PLANTED_BUGS.
TAGS="" SUFFIX=""
[[ -n $STRAND_PLANTED_BUGS ]] && TAGS=planted SUFFIX=-planted
if [[ $SERVER_RACE == 1 ]]; then
  log "building bin/strand-race$SUFFIX (the nodes run with the race detector)"
  CGO_ENABLED=1 $GO build -race -tags "$TAGS" -o "bin/strand-race$SUFFIX" ./cmd/strand
  export BIN=bin/strand-race$SUFFIX
else
  log "building bin/strand$SUFFIX"
  make -s build GO="$GO" GOTAGS="$TAGS" BIN="bin/strand$SUFFIX"
  export BIN=bin/strand$SUFFIX
fi
log "building franz-go $VERSION's $PKG tests"
$GO test -c -o "$WORK/kgo.test" "$PKG"
PKGDIR=$($GO list -f '{{.Dir}}' "$PKG")

PORT_BASE=$(pick_base)
export PORT_BASE
KBOOT=127.0.0.1:$PORT_BASE,127.0.0.1:$((PORT_BASE + 10)),127.0.0.1:$((PORT_BASE + 20))
log "starting three nodes under $DATA (Kafka listeners $KBOOT)${STRAND_PLANTED_BUGS:+ with planted bugs: $STRAND_PLANTED_BUGS}"
CLUSTER_UP=1
if ! scripts/run.sh start >"$WORK/start.log" 2>&1; then
  cat "$WORK/start.log" >&2
  exit 1
fi

# The SCRAM node: a one-node cluster (--dev) whose Kafka listener is
# SASL_PLAINTEXT, with one SCRAM-SHA-256 user, for TestSCRAMAuth and
# TestSCRAMAuthBadCredentials (KGO_TEST_SCRAM_SEEDS, KGO_TEST_SCRAM). Its
# gRPC listener stays PLAINTEXT, for the health check and the credential.
SCRAM_KAFKA=127.0.0.1:$((PORT_BASE + 30))
SCRAM_ADDR=127.0.0.1:$((PORT_BASE + 35))
SCRAM_USER=kgo:kgo-secret-$RANDOM
printf 'listener.security.protocol.map: KAFKA:SASL_PLAINTEXT\nsasl.enabled.mechanisms: SCRAM-SHA-256\n' >"$WORK/scram.conf"
setsid "$ROOT/$BIN" server --dev --data-dir "$WORK/scram" --kafka-listen "$SCRAM_KAFKA" --listen "$SCRAM_ADDR" \
  --metrics-listen "127.0.0.1:$((PORT_BASE + 38))" --config "$WORK/scram.conf" >>"$DATA/scram.log" 2>&1 </dev/null &
SCRAM_PID=$!
log "starting the SCRAM node (Kafka listener $SCRAM_KAFKA, SASL_PLAINTEXT)"
"$BIN" health --addr "$SCRAM_ADDR" --wait 60s >/dev/null
"$BIN" configs --bootstrap "$SCRAM_ADDR" --alter --entity-type users --entity-name "${SCRAM_USER%%:*}" \
  --add-config "SCRAM-SHA-256=[iterations=4096,password=${SCRAM_USER#*:}]" >/dev/null

CGH=$(api_max_version 127.0.0.1 "$PORT_BASE" 68)
if ((CGH >= 1)); then
  log "the broker advertises ConsumerGroupHeartbeat v$CGH: the KIP-848 tests must run and pass"
else
  log "the broker does not advertise ConsumerGroupHeartbeat v1: the KIP-848 tests skip"
fi
if [[ $REQUIRE_848 == 1 ]] && ((CGH < 1)); then
  if ((CGH < 0)); then has="does not list it"; else has="lists v0 at most"; fi
  say "FAIL: STRAND_FRANZ_REQUIRE_848=1, but the broker does not advertise ConsumerGroupHeartbeat v1 (ApiVersions key 68: it $has)"
  exit 1
fi

# suite ARGS…: the suite's test binary in its package's directory (as go
# test runs it) with the environment that points it at the nodes.
suite() {
  cd "$PKGDIR"
  export KGO_SEEDS=$KBOOT KGO_TEST_RF=3 KGO_TEST_RECORDS=$RECORDS KGO_LOG_LEVEL=${KGO_LOG_LEVEL:-info} \
    KGO_TEST_SCRAM_SEEDS=$SCRAM_KAFKA KGO_TEST_SCRAM=$SCRAM_USER
  if [[ $CHAOS == 1 ]]; then export KGO_TEST_CHAOS=1; else unset KGO_TEST_CHAOS; fi
  exec "$WORK/kgo.test" -test.v=test2json -test.count=1 -test.timeout="$TIMEOUT" -test.parallel="$PARALLEL" "$@"
}

runargs=()
[[ -n $RUN ]] && runargs+=(-test.run="$RUN")
log "running the suite: $RECORDS records, chaos $CHAOS, parallel $PARALLEL, timeout $TIMEOUT${RUN:+, -run $RUN}"
start=$SECONDS
rc=0
# The suite runs with -test.v=test2json (test2json's framing); each
# top-level test is printed as it ends, and go tool test2json makes the
# events afterwards.
(suite "${runargs[@]}") >"$OUT/output.txt" 2>&1 &
CHILD=$!
tail -n +1 -f --pid="$CHILD" "$OUT/output.txt" 2>/dev/null |
  sed -un 's/^\x16--- \(PASS\|FAIL\|SKIP\): \([^ /]* (.*\)$/  \1 \2/p' >&2 &
TAILER=$!
wait "$CHILD" || rc=$?
CHILD=""
wait "$TAILER" 2>/dev/null || true
took=$((SECONDS - start))

$GO tool test2json -t -p "$PKG" <"$OUT/output.txt" >"$OUT/events.json"
# results.tsv: test, outcome, seconds for every test and subtest that ended.
awk '/"Action":"(pass|fail|skip)"/ && /"Test":/ {
    match($0, /"Action":"[a-z]+"/); a = substr($0, RSTART + 10, RLENGTH - 11)
    match($0, /"Test":"[^"]*"/); t = substr($0, RSTART + 8, RLENGTH - 9)
    e = ""; if (match($0, /"Elapsed":[0-9.]+/)) e = substr($0, RSTART + 10, RLENGTH - 10)
    print t "\t" a "\t" e }' "$OUT/events.json" | sort >"$OUT/results.tsv"

# said TEST: what TEST itself logged (its t.Log and t.Error lines), less
# its clean-up chatter.
said() {
  awk -v t="\"Test\":\"$1\"" 'index($0, t) && /"Action":"output"/ && match($0, /"Output":" +[a-z0-9_]+_test\.go:[0-9]+: .*\\n"/) {
      o = substr($0, RSTART + 10, RLENGTH - 13)
      if (o ~ /deleting (topic|group)|completed in|NOT DELETING/) next
      sub(/^ +/, "", o); gsub(/\\"/, "\"", o); gsub(/\\t/, "  ", o); print o }' "$OUT/events.json"
}

# Reruns: a test the list names in a line
#   rerun NAME when "TEXT"  # why
#   rerun NAME when "TEXT" with "CAUSE"  # why
#   rerun NAME when "TEXT" up to N times  # why
# that failed saying TEXT (a known flaw of the test itself, not of the
# broker; with CAUSE, only where a client of the very group whose consumer
# reported TEXT logged CAUSE, e.g. that it was fenced and abandoned its
# partitions) makes its top-level test run again alone, at most three times
# (or the N its line gives: a short test whose flaw strikes often), while
# the nodes still run (a whole top-level test: TestGroupETL's and
# TestTxnEtl's subtests cannot run alone, as one left out keeps its slot of
# their semaphore). When every failure is such a test, or a test holding
# one that logged nothing of its own, and each rerun passes, the run counts
# as passed and the flakes are reported. Any other failure is final.
declare -A rerun_when=() rerun_tries=() matched=()
while read -r kind t rest; do
  if [[ $kind == rerun && $rest =~ ^when\ \"([^\"]+)\"(\ with\ \"([^\"]+)\")?(\ up\ to\ ([0-9]+)\ times)? ]]; then
    rerun_when[$t]+="${BASH_REMATCH[1]}"$'\x1f'"${BASH_REMATCH[3]}"$'\n'
    if [[ -n ${BASH_REMATCH[5]} ]]; then rerun_tries[${t%%/*}]=${BASH_REMATCH[5]}; fi
  fi
done < <(grep '^rerun ' "$LIST" 2>/dev/null || true)
# caused TEXT CAUSE: every group whose test consumer reported TEXT (franz-go's
# "testConsumer sendErr group=G: TEXT") has a client line "group: G, ..."
# saying CAUSE, and there is at least one such group.
caused() {
  local groups g
  mapfile -t groups < <(grep -F "$1" "$OUT/output.txt" | sed -n 's/.*testConsumer sendErr group=\([^:]*\): .*/\1/p' | sort -u)
  ((${#groups[@]} > 0)) || return 1
  for g in "${groups[@]}"; do
    grep -F "group: $g," "$OUT/output.txt" | grep -qF "$2" || return 1
  done
}
# flaked_as TEST: TEST failed in a way one of its rerun lines names; sets
# matched[TEST] to that line's TEXT.
flaked_as() {
  local entry text cause
  while IFS= read -r entry; do
    [[ -n $entry ]] || continue
    text=${entry%%$'\x1f'*} cause=${entry#*$'\x1f'}
    said "$1" | grep -qF "$text" || continue
    if [[ -n $cause ]] && ! caused "$text" "$cause"; then continue; fi
    matched[$1]="$text"${cause:+ after \"$cause\"}
    return 0
  done <<<"${rerun_when[$1]:-}"
  return 1
}
mapfile -t failed < <(awk -F'\t' '$2 == "fail" { print $1 }' "$OUT/results.tsv")
FLAKES=()
if ((rc != 0 && ${#failed[@]} > 0)) && ! grep -q '^panic: ' "$OUT/output.txt"; then
  flaked=()
  for t in "${failed[@]}"; do
    if flaked_as "$t"; then flaked+=("$t"); fi
  done
  covered=$((${#flaked[@]} > 0))
  for t in "${failed[@]}"; do
    [[ -n ${rerun_when[$t]:-} ]] && continue
    inside=0
    for f in "${flaked[@]}"; do [[ $f == "$t"/* ]] && inside=1; done
    if ((!inside)) || [[ -n $(said "$t") ]]; then covered=0; fi
  done
  for t in "${failed[@]}"; do
    if [[ -n ${rerun_when[$t]:-} ]] && [[ ! " ${flaked[*]} " == *" $t "* ]]; then covered=0; fi
  done
  if ((covered)); then
    declare -A tops=()
    for f in "${flaked[@]}"; do tops[${f%%/*}]=1; done
    for top in "${!tops[@]}"; do
      ok=0 tries=${rerun_tries[$top]:-3}
      for ((k = 1; k <= tries; k++)); do
        log "rerunning $top (try $k of $tries): $(for f in "${flaked[@]}"; do [[ ${f%%/*} == "$top" ]] && printf '%s said "%s"; ' "$f" "${matched[$f]}"; done)"
        if (suite -test.run="^$top\$") >>"$OUT/rerun.txt" 2>&1; then ok=$k; break; fi
      done
      if ((ok == 0)); then covered=0; break; fi
      for f in "${flaked[@]}"; do
        [[ ${f%%/*} == "$top" ]] && FLAKES+=("$f failed saying \"${matched[$f]}\"; $top then passed on rerun $ok (the list says why)")
      done
    done
    if ((covered)); then
      rc=0
      printf '%s\n' "${failed[@]}" >"$WORK/flaked"
      awk -F'\t' -v OFS='\t' 'FNR == NR { f[$1] = 1; next } $1 in f { $2 = "pass" } { print }' "$WORK/flaked" "$OUT/results.tsv" >"$WORK/results.tsv"
      mv "$WORK/results.tsv" "$OUT/results.tsv"
    else
      FLAKES=()
    fi
  fi
fi

# Every node must have lived through the suite: the clients may ride out a
# node that died, the cluster must not need to.
gone=$(scripts/run.sh status | awk '$3 == "stopped" { printf "%snode %s", sep, $2; sep = ", " }' | tr -d :)
if ! kill -0 "$SCRAM_PID" 2>/dev/null; then gone+=${gone:+, }"the SCRAM node"; fi
stop_cluster

say ""
say "== franz-go $VERSION $PKG against three Strand nodes$([[ $SERVER_RACE == 1 ]] && echo ' (race-enabled)'): $RECORDS records, chaos $CHAOS, ${took}s"
awk -F'\t' '{ printf "  %-4s %8ss  %s\n", $2, $3, $1 }' "$OUT/results.tsv" >&2
read -r npass nfail nskip < <(awk -F'\t' '{ c[$2]++ } END { print c["pass"] + 0, c["fail"] + 0, c["skip"] + 0 }' "$OUT/results.tsv")
say "== $npass passed, $nfail failed, $nskip skipped (tests and subtests)"

PROBLEMS=()
problem() {
  say "FAIL: $*"
  PROBLEMS+=("$*")
}
((rc == 0)) || problem "the suite exited $rc"
if ((nfail)); then
  problem "$nfail tests failed: $(awk -F'\t' '$2 == "fail" { printf "%s%s", sep, $1; sep = " " }' "$OUT/results.tsv")"
  # What each failed test said, at most 20 lines a test.
  while IFS=$'\t' read -r t a _; do
    [[ $a == fail ]] || continue
    msgs=$(said "$t" | head -20)
    [[ -n $msgs ]] || msgs="(it logged nothing itself; see $OUT/output.txt)"
    awk -v t="$t" '{ print "  " t ": " $0 }' <<<"$msgs" >&2
  done <"$OUT/results.tsv"
fi
for f in "${FLAKES[@]}"; do warn "$f"; done
if grep -q '^panic: test timed out' "$OUT/output.txt"; then problem "the suite hit its $TIMEOUT timeout"; fi
[[ -z $gone ]] || problem "no longer running when the suite ended: $gone"
raced=()
for l in "${LOGS[@]}"; do
  if grep -q 'WARNING: DATA RACE' "$DATA/$l.log" 2>/dev/null; then raced+=("$l.log"); fi
done
((${#raced[@]} == 0)) || problem "the race detector reported a data race in ${raced[*]}"
# A chain of the ETL tests whose commit met STALE_MEMBER_EPOCH skips its
# checks and still passes (franz-go's escape for brokers before KIP-1251).
while IFS= read -r t; do
  warn "$t passed without its exactly-once checks (a commit met STALE_MEMBER_EPOCH)"
done < <(grep 'skipping validation' "$OUT/events.json" | sed -n 's/.*"Test":"\([^"]*\)".*/\1/p' | sort -u)

is848() { [[ $1 =~ (^|/)848(/|$)|^Test848 ]]; }
if [[ -n $RUN ]]; then
  say "FRANZ_RUN is set: the list of tests ($LIST) is not checked"
elif [[ ${FRANZ_WRITE_LIST:-0} == 1 ]]; then
  if ((${#PROBLEMS[@]})); then
    problem "FRANZ_WRITE_LIST=1, but the run failed: $LIST is not rewritten"
  else
    # A skip keeps the reason the list gave it (a new one takes its own
    # message), and the rerun lines stay as they are.
    declare -A because=()
    reruns=""
    if [[ -f $LIST ]]; then
      while read -r kind t rest; do
        [[ $kind == skip && $rest == '#'* ]] && because[$t]=${rest#'# '}
      done <"$LIST"
      reruns=$(grep '^rerun ' "$LIST" || true)
    fi
    {
      echo "# What each test of franz-go's pkg/kgo does against a three-node Strand cluster"
      echo "# (scripts/franz-suite.sh checks it; FRANZ_WRITE_LIST=1 rewrites it from a passing run)."
      echo "#   pass NAME   runs and passes"
      echo "#   848 NAME    a KIP-848 test: runs and passes once the broker advertises"
      echo "#               ConsumerGroupHeartbeat v1, skips before"
      echo "#   skip NAME   skips against Strand (why, after #)"
      echo "#   rerun NAME when \"TEXT\"   when NAME fails saying TEXT (a flaw of the test, why after #),"
      echo "#               its top-level test runs again alone, at most three times, and passing then counts;"
      echo "#               with ' with \"CAUSE\"' after it, only where a client of the group that reported TEXT logged CAUSE;"
      echo "#               with ' up to N times' at its end, at most N times"
      echo "version $VERSION"
      while IFS=$'\t' read -r t a _; do
        if is848 "$t"; then
          echo "848 $t"
        elif [[ $a == skip ]]; then
          why=${because[$t]:-}
          [[ -n $why ]] || why=$(grep -F "\"Test\":\"$t\"" "$OUT/events.json" | sed -n 's/.*"Output":"[^"]*_test\.go:[0-9]*: \(.*\)\\n"}$/\1/p' | head -1 || true)
          echo "skip $t  # ${why:-skipped}"
        else
          echo "pass $t"
        fi
      done <"$OUT/results.tsv"
      [[ -z $reruns ]] || echo "$reruns"
    } >"$LIST"
    log "wrote $LIST"
  fi
else
  listed=$(awk '$1 == "version" { print $2 }' "$LIST")
  if [[ $listed != "$VERSION" ]]; then
    problem "$LIST is for franz-go $listed, go.mod pins $VERSION: check a run's outcomes and rewrite it (FRANZ_WRITE_LIST=1)"
  else
    declare -A got=() named=()
    while IFS=$'\t' read -r t a _; do got[$t]=$a; done <"$OUT/results.tsv"
    while read -r kind t _; do
      [[ $kind == pass || $kind == skip || $kind == 848 ]] || continue
      named[$t]=1
      a=${got[$t]:-absent}
      case $kind in
      pass) [[ $a == pass ]] || problem "$t: $a (it must run and pass)" ;;
      848)
        if [[ $a == skip ]] && ((CGH >= 1)); then
          problem "$t: skip, but the broker advertises ConsumerGroupHeartbeat v$CGH: a KIP-848 test must run and pass"
        elif [[ $a != pass && $a != skip ]]; then
          problem "$t: $a (a KIP-848 test must pass or, before the broker serves KIP-848, skip)"
        fi
        ;;
      skip) [[ $a != pass ]] || say "note: $t passed; $LIST says it skips (make it a pass line)" ;;
      esac
    done <"$LIST"
    for t in "${!got[@]}"; do
      [[ -n ${named[$t]:-} ]] || warn "$t: ${got[$t]}, but $LIST does not name it"
    done
  fi
fi
if ((CGH >= 1)) && [[ $REQUIRE_848 != 1 ]] && ((${#PROBLEMS[@]} == 0)); then
  say "note: the broker serves KIP-848 and its tests passed: STRAND_FRANZ_REQUIRE_848=1 can be turned on"
fi

if ((${#PROBLEMS[@]})); then
  say "== franz-suite FAILED: ${#PROBLEMS[@]} problems (the suite's output: $OUT/output.txt)"
  exit 1
fi
KEEP_LOGS=0
say "== franz-suite passed in ${took}s"
