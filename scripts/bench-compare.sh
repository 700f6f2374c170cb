#!/usr/bin/env bash
# bench-compare: Strand vs NATS JetStream R3, side by side, on this machine.
#
# For each workload it runs Strand and JetStream interleaved (the order of the
# pair alternates between rounds), ROUNDS rounds, and prints the medians as one
# markdown table (stdout, and $OUT). Every round starts fresh clusters with
# fresh data directories:
#   Strand:    DATA=<tmp> PORT_BASE=$S_PORT_BASE scripts/run.sh start (three
#              nodes), one topic per workload: 1 partition, RF 3,
#              min.insync.replicas=2 (+ flush.messages=1 for the fsync rows).
#              Producer: strand perf produce --acks all (idempotent),
#              max.in.flight.requests.per.connection=5, linger.ms=$LINGER_MS.
#   JetStream: three nats-server processes (ports J_PORT_BASE..+2, routes
#              +2000, http +4000), one R3 file stream per workload, the client
#              connected to the stream leader; default acks (PubAck after the
#              quorum has it); sync_interval: always for the fsync rows.
#              Producer: jsload (built below in a throwaway module under
#              $BENCH/jsload, not in Strand's go.mod), a sliding window of
#              $WINDOW publishes awaiting their ack.
# Rows: unthrottled produce of 1 KiB and 100 B records; the same with fsync
# per write; send->ack and send->consumer latency at a fixed offered load
# (RATE msgs/s for FIXED_SECS; the first second's messages, the clients'
# start-up, are left out of these latencies on both sides: Strand's
# --warmup-records, KIP-1052's, and jsload's -warmup); Strand only: 100 ms
# transactions against the idempotent producer (same record count and
# buffer.memory, order alternating by round), read_committed against read_uncommitted consumption
# (of the transactional topic, CONSUME_REPS times each), and send->consumer
# latency with transactions.
# Broker CPU is the utime+stime (/proc/<pid>/stat) of the three server
# processes over the run, divided by the MiB of payload produced. "Other" CPU
# (the machine-wide busy time minus brokers and load client) measures noise.
# The bare replication limit: at the start of every round, before
# the clusters start, cmd/strand-limit (a producer, a leader and two followers
# as separate processes over loopback TCP, window 5, appending to rolling
# segment files, acks=all) runs LIMIT_SECS at each of LIMIT_BATCHES (no fsync;
# the order rotates by round) and LIMIT_FSYNC_BATCHES (fdatasync per group),
# each after a sync like every measured run. The batch
# size Strand sends is measured on the brokers (/metrics: records produced /
# Produce requests, one batch per partition per request), and each Strand 1 KiB
# row is paired with the bare run nearest that size: "Strand / bare" is
# records/s over records/s, and broker CPU is compared per GB of payload.
#
# Knobs (environment): OUT, ROUNDS, WINDOW, LINGER_MS, RATE, FIXED_SECS,
# CONSUME_REPS, WARM_RECORDS, S_EXTRA_PROPS, S_PORT_BASE, J_PORT_BASE, BENCH_DIR and the
# record counts below (S_* for Strand, J_* for JetStream); LIMIT_SECS,
# LIMIT_BATCHES, LIMIT_FSYNC_BATCHES ("" skips the fsync bare runs),
# LIMIT_PORT_BASE (default S_PORT_BASE+50, three ports). Quick runs:
# SKIP_JS=1 leaves JetStream out (its rows print n/a); BARE_ONLY=1 runs only
# the bare baseline, ROUNDS times, and prints its table (no cluster starts). Logs of the last
# run: $BENCH/logs; raw values: $BENCH/last-results.tsv. It stops exactly the
# processes it started and removes its temporary directories on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
GO=${GO:-go}
BENCH=${BENCH_DIR:-$ROOT/.bench}
TOOLS=$BENCH/bin
OUT=${OUT:-$BENCH/results.md}
ROUNDS=${ROUNDS:-3}
WINDOW=${WINDOW:-256}
LINGER_MS=${LINGER_MS:-5}
RATE=${RATE:-10000}           # fixed offered load for the latency rows, msgs/s
FIXED_SECS=${FIXED_SECS:-10}
CONSUME_REPS=${CONSUME_REPS:-3}
S_PORT_BASE=${S_PORT_BASE:-9400}
J_PORT_BASE=${J_PORT_BASE:-14222}
LIMIT_PORT_BASE=${LIMIT_PORT_BASE:-$((S_PORT_BASE + 50))}
LIMIT_SECS=${LIMIT_SECS:-6}
LIMIT_BATCHES=${LIMIT_BATCHES:-16k 64k 256k}
LIMIT_FSYNC_BATCHES=${LIMIT_FSYNC_BATCHES-256k}  # Strand's fsync rows send about 250 KiB batches too
SKIP_JS=${SKIP_JS:-0}
BARE_ONLY=${BARE_ONLY:-0}
((BARE_ONLY)) && SKIP_JS=1
NATS_SERVER_VERSION=v2.15.2
NATSCLI_VERSION=v0.5.1
NATS_GO_VERSION=v1.55.0
# Record counts: a few seconds or more per run on an idle 2-core VM, so that
# a producer's start (metadata, producer id, connections, a cold cluster's
# first writes) is a small share of it. Both Strand 1 KiB rows run the same
# count (they compare batch sizes).
S_1K=${S_1K:-600000} J_1K=${J_1K:-550000}
S_1KW=${S_1KW:-600000}   # 1 KiB with 64 KiB batches (the window-matched row)
S_100=${S_100:-2000000} J_100=${J_100:-800000}
S_F1K=${S_F1K:-200000} J_F1K=${J_F1K:-150000}
S_F100=${S_F100:-500000} J_F100=${J_F100:-300000}
S_F1KW=${S_F1KW:-300000}  # fsync, 1 KiB with batch.size 64 KiB
S_TXN=${S_TXN:-600000}    # both the transactional run and its idempotent baseline
WARM_RECORDS=${WARM_RECORDS:-100000} # unmeasured warm-up of each fresh cluster (warm_both)
# buffer.memory of the transactional run and its baseline. Transactions
# last --transaction-duration-ms of sending plus the commit, which waits for
# the buffer to drain: with the default 32 MiB a "100 ms" transaction lasts
# most of a second, so this keeps them near 100 ms (the perf tool prints the
# measured average, which goes into the table).
TXN_BUFFER=${TXN_BUFFER:-2097152}
# Extra Strand producer properties for every perf produce, e.g.
# S_EXTRA_PROPS="buffer.memory=282624" (about 256 unacknowledged 1 KiB records).
S_EXTRA_PROPS=${S_EXTRA_PROPS:-}

SB=$ROOT/bin/strand
LIMIT_BIN=$TOOLS/strand-limit
JSLOAD=$TOOLS/jsload
NATS=$TOOLS/nats
NATS_SERVER=$TOOLS/nats-server
HZ=$(getconf CLK_TCK)
SBOOT="127.0.0.1:$((S_PORT_BASE + 5)),127.0.0.1:$((S_PORT_BASE + 15)),127.0.0.1:$((S_PORT_BASE + 25))"   # run.sh's gRPC listeners
# The Kafka listeners of scripts/run.sh's nodes (KAFKA_PORT offset 0 of each node's ports).
KBOOT="127.0.0.1:$S_PORT_BASE,127.0.0.1:$((S_PORT_BASE + 10)),127.0.0.1:$((S_PORT_BASE + 20))"

# shellcheck source=scripts/bench-lib.sh
. "$ROOT/scripts/bench-lib.sh"

# ---------------------------------------------------------------- ports
# 9092-9120: make run's cluster; N9092-N9120 (N = 1..3): the compose cluster's published ports.
forbidden() { local lo=$(($1 % 10000)) hi=$(($1 / 10000)); ((lo >= 9092 && lo <= 9120 && hi <= 3)); }
S_PORTS=() J_PORTS=()
for n in 0 10 20; do for o in 0 1 2 3 4 5; do S_PORTS+=($((S_PORT_BASE + n + o))); done; done
for i in 0 1 2; do J_PORTS+=($((J_PORT_BASE + i)) $((J_PORT_BASE + 2000 + i)) $((J_PORT_BASE + 4000 + i))); done
L_PORTS=("$LIMIT_PORT_BASE" $((LIMIT_PORT_BASE + 1)) $((LIMIT_PORT_BASE + 2)))
for p in "${S_PORTS[@]}" "${J_PORTS[@]}" "${L_PORTS[@]}"; do
  forbidden "$p" && { say "port $p is reserved for others (9092-9120, and N9092-N9120 for N = 1..3); pick another S_PORT_BASE/J_PORT_BASE/LIMIT_PORT_BASE"; exit 2; }
done

# ---------------------------------------------------------------- tools
say "== building bin/strand"
make -s build GO="$GO" >&2
REV=$(git rev-parse --short HEAD 2>/dev/null || echo unknown) # of the tree bin/strand was built from
[[ -z $(git status --porcelain -- '*.go' go.mod go.sum 2>/dev/null) ]] || REV="$REV (+ uncommitted Go changes)"
mkdir -p "$TOOLS"
say "== building cmd/strand-limit (the bare replication baseline)"
CGO_ENABLED=0 "$GO" build -trimpath -o "$LIMIT_BIN" ./cmd/strand-limit
export GOWORK=off
((SKIP_JS)) && say "== SKIP_JS: JetStream left out"
if ! ((SKIP_JS)) && ! { [[ -x $NATS_SERVER ]] && [[ $("$NATS_SERVER" --version) == *"$NATS_SERVER_VERSION"* ]]; }; then
  say "== installing nats-server $NATS_SERVER_VERSION into $TOOLS"
  GOBIN=$TOOLS GOFLAGS=-buildvcs=false "$GO" install "github.com/nats-io/nats-server/v2@$NATS_SERVER_VERSION"
fi
if ! ((SKIP_JS)) && ! { [[ -x $NATS ]] && [[ $("$NATS" --version) == *"${NATSCLI_VERSION#v}" ]]; }; then
  say "== installing natscli $NATSCLI_VERSION into $TOOLS"
  GOBIN=$TOOLS GOFLAGS=-buildvcs=false "$GO" install "github.com/nats-io/natscli/nats@$NATSCLI_VERSION"
fi

write_jsload() {
  cat <<'GOEOF'
// jsload: a JetStream load generator for scripts/bench-compare.sh, built in
// a throwaway module outside Strand's go.mod. It keeps up to -window
// publishes awaiting their PubAck at all times (a sliding window, like a
// Kafka producer's buffer), optionally paced open-loop at -rate msgs/s, and
// records each message's publish->ack time. With -e2e an ordered consumer on
// its own connection also records publish->delivery time (the first 8
// payload bytes carry the send time).
package main

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"log"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

type pending struct {
	f  jetstream.PubAckFuture
	t0 time.Time
}

func quantile(d []time.Duration, q float64) float64 {
	if len(d) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(d)))) - 1
	i = max(0, min(i, len(d)-1))
	return float64(d[i]) / float64(time.Microsecond)
}

func main() {
	url := flag.String("url", "nats://127.0.0.1:14222", "server URL (127.0.0.1 only)")
	stream := flag.String("stream", "", "existing stream")
	subject := flag.String("subject", "", "subject bound to the stream")
	size := flag.Int("size", 1024, "payload bytes (at least 8 with -e2e)")
	msgs := flag.Int("msgs", 0, "messages to publish (0: run for -duration)")
	dur := flag.Duration("duration", 0, "publish for this long (with -msgs 0)")
	window := flag.Int("window", 256, "max publishes awaiting an ack")
	rate := flag.Float64("rate", 0, "offered load in msgs/s (0: as fast as the window allows)")
	e2e := flag.Bool("e2e", false, "also measure publish->delivery through an ordered consumer")
	warmup := flag.Int("warmup", 0, "leave the first N messages out of the latencies (as strand perf --warmup-records)")
	timeout := flag.Duration("timeout", 180*time.Second, "overall deadline")
	flag.Parse()
	if *stream == "" || *subject == "" || (*msgs <= 0 && *dur <= 0) {
		log.Fatal("-stream, -subject and -msgs or -duration are required")
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()

	nc, err := nats.Connect(*url, nats.Name("jsload-pub"))
	if err != nil {
		log.Fatalf("connect: %v", err)
	}
	defer nc.Close()
	// The semaphore below bounds the window; the library's own limit only
	// has to stay out of the way.
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(*window+16))
	if err != nil {
		log.Fatal(err)
	}
	if _, err := js.Stream(ctx, *stream); err != nil {
		log.Fatalf("stream %q: %v", *stream, err)
	}

	var (
		e2eMu  sync.Mutex
		e2eLat []time.Duration
		recvN  atomic.Int64
		// messages stamped before steadyFrom (ns) are the warm-up
		steadyFrom atomic.Int64
	)
	if *warmup > 0 {
		steadyFrom.Store(math.MaxInt64)
	}
	if *e2e {
		if *size < 8 {
			log.Fatal("-e2e needs -size >= 8")
		}
		nc2, err := nats.Connect(*url, nats.Name("jsload-sub"))
		if err != nil {
			log.Fatalf("connect: %v", err)
		}
		defer nc2.Close()
		js2, err := jetstream.New(nc2)
		if err != nil {
			log.Fatal(err)
		}
		oc, err := js2.OrderedConsumer(ctx, *stream, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverNewPolicy})
		if err != nil {
			log.Fatalf("ordered consumer: %v", err)
		}
		cc, err := oc.Consume(func(m jetstream.Msg) {
			now := time.Now().UnixNano()
			if d := m.Data(); len(d) >= 8 {
				sent := int64(binary.BigEndian.Uint64(d))
				if sent >= steadyFrom.Load() {
					e2eMu.Lock()
					e2eLat = append(e2eLat, time.Duration(now-sent))
					e2eMu.Unlock()
				}
				recvN.Add(1)
			}
		})
		if err != nil {
			log.Fatalf("consume: %v", err)
		}
		defer cc.Stop()
		time.Sleep(300 * time.Millisecond) // let the first pull request reach the server
	}

	sem := make(chan struct{}, *window)
	q := make(chan pending, *window+16)
	ackLat := make([]time.Duration, 0, max(*msgs, 1<<16))
	done := make(chan error, 1)
	go func() { // acks arrive in publish order; collect them in that order
		for p := range q {
			select {
			case <-p.f.Ok():
				ackLat = append(ackLat, time.Since(p.t0))
				<-sem
			case err := <-p.f.Err():
				done <- fmt.Errorf("publish ack: %w", err)
				return
			case <-ctx.Done():
				done <- ctx.Err()
				return
			}
		}
		done <- nil
	}()

	payload := make([]byte, *size)
	for i := range payload {
		payload[i] = byte('a' + i%26)
	}
	start := time.Now()
	sent := 0
	for ; ; sent++ {
		if *msgs > 0 && sent >= *msgs || *msgs <= 0 && time.Since(start) >= *dur {
			break
		}
		if *rate > 0 { // open loop: hold back to the schedule, whatever the acks do
			due := start.Add(time.Duration(float64(sent+1) / *rate * float64(time.Second)))
			if d := time.Until(due); d > 0 {
				time.Sleep(d)
			}
		}
		t0 := time.Now()
		select {
		case sem <- struct{}{}: // blocks while the window is full
		case err := <-done:
			log.Fatalf("after %d publishes: %v", sent, err)
		case <-ctx.Done():
			log.Fatalf("deadline after %d publishes", sent)
		}
		if *e2e {
			ns := time.Now().UnixNano()
			if *warmup > 0 && sent == *warmup {
				steadyFrom.Store(ns)
			}
			binary.BigEndian.PutUint64(payload, uint64(ns))
		}
		f, err := js.PublishAsync(*subject, payload, jetstream.WithStallWait(10*time.Second))
		if err != nil {
			log.Fatalf("publish %d: %v", sent, err)
		}
		q <- pending{f, t0}
	}
	close(q)
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	el := time.Since(start).Seconds()
	if *warmup > 0 && *warmup < len(ackLat) {
		ackLat = ackLat[*warmup:] // acks arrive in publish order
	}
	slices.Sort(ackLat)
	r := float64(sent) / el
	fmt.Printf("RESULT msgs=%d secs=%.3f rate=%.1f mibps=%.2f window=%d offered=%.0f ack_p50_us=%.0f ack_p99_us=%.0f ack_p999_us=%.0f",
		sent, el, r, r*float64(*size)/(1<<20), *window, *rate,
		quantile(ackLat, 0.5), quantile(ackLat, 0.99), quantile(ackLat, 0.999))
	if *e2e {
		for i := 0; i < 100 && recvN.Load() < int64(sent); i++ {
			time.Sleep(50 * time.Millisecond)
		}
		e2eMu.Lock()
		l := slices.Clone(e2eLat)
		e2eMu.Unlock()
		slices.Sort(l)
		fmt.Printf(" e2e_n=%d e2e_p50_us=%.0f e2e_p99_us=%.0f e2e_p999_us=%.0f",
			recvN.Load(), quantile(l, 0.5), quantile(l, 0.99), quantile(l, 0.999))
	}
	fmt.Println()
}
GOEOF
}
jsdir=$BENCH/jsload
mkdir -p "$jsdir"
write_jsload >"$jsdir/main.go.new"
if ((SKIP_JS)) || { [[ -x $JSLOAD && -f $jsdir/main.go ]] && cmp -s "$jsdir/main.go" "$jsdir/main.go.new"; }; then
  rm "$jsdir/main.go.new"
else
  say "== building jsload (throwaway module $jsdir, nats.go $NATS_GO_VERSION)"
  mv "$jsdir/main.go.new" "$jsdir/main.go"
  (
    cd "$jsdir"
    export GOFLAGS="-mod=mod -buildvcs=false"
    [[ -f go.mod ]] || "$GO" mod init jsload >/dev/null 2>&1
    "$GO" get "github.com/nats-io/nats.go@$NATS_GO_VERSION" >/dev/null 2>&1
    CGO_ENABLED=0 "$GO" build -trimpath -o "$JSLOAD" .
  )
fi

# ---------------------------------------------------------------- state, cleanup
WORK=$(mktemp -d /tmp/bench-compare.XXXXXX)
RES=$WORK/results.tsv
LOGS=$BENCH/logs
rm -rf "$LOGS" && mkdir -p "$LOGS"
: >"$RES"
S_DATA="" S_PIDS=() J_TMP="" J_PIDS=()

strand_stop() {
  [[ -n $S_DATA ]] || return 0
  DATA=$S_DATA PORT_BASE=$S_PORT_BASE "$ROOT/scripts/run.sh" stop >/dev/null 2>&1 || true
  for n in 1 2 3; do [[ -f $S_DATA/node$n.log ]] && cp "$S_DATA/node$n.log" "$LOGS/r$r-strand-node$n.log"; done
  rm -rf "$S_DATA"
  S_DATA=""
}
js_stop() {
  local pid i
  for pid in "${J_PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${J_PIDS[@]}"; do
    for i in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  J_PIDS=()
  if [[ -n $J_TMP ]]; then
    for i in 1 2 3; do [[ -f $J_TMP/n$i.log ]] && cp "$J_TMP/n$i.log" "$LOGS/r$r-js-$J_MODE-n$i.log"; done
    rm -rf "$J_TMP"
  fi
  J_TMP=""
}
cleanup() {
  strand_stop
  js_stop
  rm -rf "$WORK"
}
# Load clients run under run_child (bench-lib.sh); the trap stops one first.
r=0
trap cleanup EXIT
trap 'stop_child; exit 130' INT TERM

cpu_per_mib() { awk -v d="$1" -v hz="$HZ" -v n="$2" -v s="$3" 'BEGIN { printf "%.4f", d / hz / (n * s / 1048576) }'; }
record() { printf '%s\t%s\t%s\n' "$1" "$2" "$r" >>"$RES"; } # key value round

# Noise: during each run, the CPU that neither the brokers nor the load
# client used (other processes on the machine, including an idle cluster),
# in cores. `times` must run in this shell, not in a subshell.
sys_busy() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9; exit }' /proc/stat; }
mbegin() {
  # Write back what earlier runs left dirty, so that a run does not pay for
  # its predecessor's writeback (gigabytes after the bulk rows, which showed
  # as 50-120 ms stalls in the fixed-load latency rows).
  sync
  M_BUSY=$(sys_busy)
  times >"$WORK/times"
  M_CHILD=$(child_ticks_file)
  M_T=$(date +%s.%N)
}
child_ticks_file() { awk -v hz="$HZ" 'END { t = 0; for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); t += a[1] * 60 + a[2] } printf "%.0f", t * hz }' "$WORK/times"; }
mend() { # key broker-ticks
  local busy child t
  busy=$(sys_busy)
  times >"$WORK/times"
  child=$(child_ticks_file)
  t=$(date +%s.%N)
  record "$1.other" "$(awk -v b=$((busy - M_BUSY)) -v br="$2" -v c=$((child - M_CHILD)) -v hz="$HZ" -v w="$(awk -v a="$M_T" -v b="$t" 'BEGIN { print b - a }')" \
    'BEGIN { x = (b - br - c) / hz / w; if (x < 0) x = 0; printf "%.2f", x }')"
}

# ---------------------------------------------------------------- Strand
strand_start() {
  ports_free "${S_PORTS[@]}" || exit 1
  S_DATA=$(mktemp -d /tmp/bench-strand.XXXXXX)
  if ! DATA=$S_DATA PORT_BASE=$S_PORT_BASE BIN=$SB "$ROOT/scripts/run.sh" start >"$LOGS/r$r-strand-start.log" 2>&1; then
    cat "$LOGS/r$r-strand-start.log" >&2
    exit 1
  fi
  S_PIDS=()
  for n in 1 2 3; do S_PIDS+=("$(cat "$S_DATA/node$n.pid")"); done
}
strand_topic() { # name [config...]
  local t=$1 c i
  shift
  local cfg=(--config min.insync.replicas=2)
  for c in "$@"; do cfg+=(--config "$c"); done
  for i in $(seq 1 20); do
    "$SB" topics create "$t" --partitions 1 --replication-factor 3 "${cfg[@]}" --bootstrap "$SBOOT" >/dev/null 2>&1 && break
    sleep 0.5
  done
  for i in $(seq 1 60); do
    "$SB" topics describe "$t" --bootstrap "$SBOOT" 2>/dev/null | grep -Eq 'Isr: [0-9]+,[0-9]+,[0-9]+' && return 0
    sleep 0.5
  done
  warn "round $r: Strand topic $t not created or not fully in sync"
  return 1
}
SPROPS=(--producer-props max.in.flight.requests.per.connection=5 --producer-props "linger.ms=$LINGER_MS")
for kv in $S_EXTRA_PROPS; do SPROPS+=(--producer-props "$kv"); done
s_produce() { # key topic records size [perf flags...]
  local key=$1 topic=$2 n=$3 size=$4 log c0 c1 line
  shift 4
  log=$LOGS/r$r-$key.log
  local b0 b1
  b0=$(s_batches "$topic")
  mbegin
  c0=$(cpu_ticks "${S_PIDS[@]}")
  if ! run_child timeout 300 "$SB" perf produce --topic "$topic" --num-records "$n" --record-size "$size" --acks all \
    "${SPROPS[@]}" "$@" --bootstrap "${S_BOOT_FOR:-$SBOOT}" >"$log" 2>&1; then
    warn "round $r: $key failed: $(tail -1 "$log")"
    return 0
  fi
  c1=$(cpu_ticks "${S_PIDS[@]}")
  mend "$key" $((c1 - c0))
  b1=$(s_batches "$topic")
  batch_sent "$key" "$b0" "$b1"
  line=$(grep ' records sent, .* 99th' "$log" | tail -1 || true)
  # N records sent, R records/sec (M MB/sec), A ms avg latency, X ms max latency, P ms 50th, P ms 95th, P ms 99th, P ms 99.9th.
  read -r rate p50 p99 p999 < <(awk -F', ' '{ split($2, a, " "); split($5, b, " "); split($7, c, " "); split($8, d, " ");
    print a[1], b[1], c[1], d[1] }' <<<"$line") || true
  record "$key.rate" "$rate"
  record "$key.p50" "$p50"
  record "$key.p99" "$p99"
  record "$key.p999" "$p999"
  record "$key.cpu" "$(cpu_per_mib $((c1 - c0)) "$n" "$size")"
  say "   strand    $key: $rate msgs/s  p50 $p50 ms  p99 $p99 ms  cpu $(cpu_per_mib $((c1 - c0)) "$n" "$size") s/MiB"
  # N transactions committed, T ms avg transaction, C ms avg commit (...
  line=$(grep ' transactions committed, ' "$log" | tail -1 || true)
  if [[ -n $line ]]; then
    read -r txms cms < <(awk -F', ' '{ split($2, a, " "); split($3, b, " "); print a[1], b[1] }' <<<"$line") || true
    record "$key.txn_ms" "$txms"
    record "$key.commit_ms" "$cms"
    say "              $line"
  fi
}
# The batches a producer sent, from the three brokers' /metrics (run.sh's
# metrics listener at each node's port + 3): records and bytes produced to
# the topic, and Produce requests (the SDK sends one batch per partition
# per request, and these topics have one partition).
s_batches() { # topic -> "records requests bytes", summed over the nodes
  local t=$1 n out=""
  for n in 0 10 20; do
    out+=$(curl -sf --max-time 5 "http://127.0.0.1:$((S_PORT_BASE + n + 3))/metrics" 2>/dev/null || true)
    out+=$'\n'
  done
  awk -v t="$t" '
    index($0, "strand_broker_topic_messages_in_total{topic=\"" t "\"}") == 1 { m += $2 }
    index($0, "strand_broker_topic_bytes_in_total{topic=\"" t "\"}") == 1 { b += $2 }
    index($0, "strand_requests_total{request=\"Produce\"}") == 1 { q += $2 }
    END { printf "%.0f %.0f %.0f\n", m, q, b }' <<<"$out"
}
batch_sent() { # key before after -> records .batch_records and .batch_bytes (average per batch)
  local m0 q0 y0 m1 q1 y1
  read -r m0 q0 y0 <<<"$2"
  read -r m1 q1 y1 <<<"$3"
  if ((q1 > q0 && m1 > m0)); then
    record "$1.batch_records" "$(awk -v m=$((m1 - m0)) -v q=$((q1 - q0)) 'BEGIN { printf "%.1f", m / q }')"
    record "$1.batch_bytes" "$(awk -v y=$((y1 - y0)) -v q=$((q1 - q0)) 'BEGIN { printf "%.0f", y / q }')"
  fi
}

# ---------------------------------------------------------------- the bare limit
# One run of cmd/strand-limit; its processes are this script's children and
# count as the load client in "other" CPU. The program prints one JSON line
# and removes its data directory (in /tmp) itself.
bare_run() { # size [fsync]
  local sz=$1 fs=${2:-} key log line
  key=bare.$sz${fs:+.fsync}
  log=$LOGS/r$r-$key.log
  ports_free "${L_PORTS[@]}" || { warn "round $r: $key: ports ${L_PORTS[*]} busy"; return 0; }
  mbegin
  if ! run_child timeout $((LIMIT_SECS + 150)) "$LIMIT_BIN" -batch "$sz" -duration "${LIMIT_SECS}s" -port-base "$LIMIT_PORT_BASE" \
    -sync=false ${fs:+-fsync} >"$log" 2>&1; then
    warn "round $r: $key failed: $(tail -1 "$log")"
    return 0
  fi
  mend "$key" 0
  line=$(grep '^{' "$log" | tail -1 || true)
  record "$key.rate" "$(jq -r .records_s <<<"$line")"
  record "$key.mbs" "$(jq -r .mb_s <<<"$line")"
  record "$key.p50" "$(jq -r .p50_ack_ms <<<"$line")"
  record "$key.p99" "$(jq -r .p99_ack_ms <<<"$line")"
  record "$key.bcpu" "$(jq -r .broker_cpu_s_per_gb <<<"$line")"
  record "$key.pcpu" "$(jq -r .producer_cpu_s_per_gb <<<"$line")"
  say "   bare      $key: $(jq -r '"\(.mb_s|floor) MB/s, \(.records_s|floor) records/s, p50 \(.p50_ack_ms) ms, p99 \(.p99_ack_ms) ms, broker \(.broker_cpu_s_per_gb*100|floor/100) CPU-s/GB"' <<<"$line")"
}
# Every size of LIMIT_BATCHES (the order rotates by round), then
# LIMIT_FSYNC_BATCHES with fdatasync per group.
bare_runs() {
  local sizes i n
  read -r -a sizes <<<"$LIMIT_BATCHES"
  n=${#sizes[@]}
  for i in $(seq 0 $((n - 1))); do bare_run "${sizes[$(((i + r - 1) % n))]}"; done
  read -r -a sizes <<<"$LIMIT_FSYNC_BATCHES"
  for i in "${sizes[@]}"; do bare_run "$i" fsync; done
}

s_e2e() { # key topic [perf flags...]
  local key=$1 topic=$2 log p50 p99 p999 sent recv c0 c1
  shift 2
  log=$LOGS/r$r-$key.log
  mbegin
  c0=$(cpu_ticks "${S_PIDS[@]}")
  if ! run_child timeout 300 "$SB" perf e2e --topic "$topic" --throughput "$RATE" --duration "${FIXED_SECS}s" --record-size 1024 \
    "$@" --bootstrap "$SBOOT" >"$log" 2>&1; then
    warn "round $r: $key failed: $(tail -1 "$log")"
    return 0
  fi
  c1=$(cpu_ticks "${S_PIDS[@]}")
  mend "$key" $((c1 - c0))
  read -r p50 p99 p999 < <(sed -n 's/^Percentiles: 50th = \([0-9.]*\), 99th = \([0-9.]*\), 99.9th = \([0-9.]*\).*/\1 \2 \3/p' "$log") || true
  read -r sent recv < <(sed -n 's/^(\([0-9]*\) records at .* offered, \([0-9]*\) received)/\1 \2/p' "$log") || true
  record "$key.p50" "$p50"
  record "$key.p99" "$p99"
  record "$key.p999" "$p999"
  record "$key.rate" "$(awk -v n="$sent" -v s="$FIXED_SECS" 'BEGIN { printf "%.1f", n / s }')"
  [[ $sent == "$recv" ]] || warn "round $r: $key received $recv of $sent records"
  say "   strand    $key: p50 $p50 ms  p99 $p99 ms  ($sent sent, $recv received)"
}
s_consume() { # key topic records isolation
  local key=$1 topic=$2 n=$3 iso=$4 log line c0 c1
  log=$LOGS/r$r-$key.log
  mbegin
  c0=$(cpu_ticks "${S_PIDS[@]}")
  if ! run_child timeout 120 "$SB" perf consume --topic "$topic" --messages "$n" --isolation-level "$iso" --hide-header \
    --bootstrap "$SBOOT" >>"$log" 2>&1; then
    warn "round $r: $key failed: $(tail -1 "$log")"
    return 0
  fi
  c1=$(cpu_ticks "${S_PIDS[@]}")
  mend "$key" $((c1 - c0))
  line=$(grep -E '^[0-9]{4}-' "$log" | tail -1 || true)
  # start, end, MB, MB.sec, nMsg, nMsg.sec, rebalance.ms, fetch.ms, fetch.MB.sec, fetch.nMsg.sec
  read -r total fetch msgs < <(awk -F', ' '{ print $6, $10, $5 }' <<<"$line") || true
  [[ $msgs == "$n" ]] || warn "round $r: $key consumed $msgs of $n"
  record "$key.rate" "$fetch"
  record "$key.rate_total" "$total"
  say "   strand    $key: $fetch msgs/s (fetch phase; $total incl. start-up)"
}

# ---------------------------------------------------------------- JetStream
J_MODE=default
jport() { echo $((J_PORT_BASE + $1 - 1)); }
js_start() { # default | always
  ((SKIP_JS)) && return 0
  J_MODE=$1
  ports_free "${J_PORTS[@]}" || exit 1
  J_TMP=$(mktemp -d /tmp/bench-js.XXXXXX)
  local i ok routes="" sync=""
  for i in 1 2 3; do routes+="nats-route://127.0.0.1:$((J_PORT_BASE + 2000 + i - 1)), "; done
  [[ $J_MODE == always ]] && sync="sync_interval: always"
  for i in 1 2 3; do
    mkdir -p "$J_TMP/n$i"
    cat >"$J_TMP/n$i.conf" <<EOF
server_name: n$i
listen: 127.0.0.1:$(jport $i)
http: 127.0.0.1:$((J_PORT_BASE + 4000 + i - 1))
jetstream {
  store_dir: "$J_TMP/n$i"
  max_memory_store: 512MB
  max_file_store: 16GB
  $sync
}
cluster {
  name: benchcmp
  listen: 127.0.0.1:$((J_PORT_BASE + 2000 + i - 1))
  routes: [ ${routes%, } ]
}
EOF
    "$NATS_SERVER" -c "$J_TMP/n$i.conf" >"$J_TMP/n$i.log" 2>&1 &
    J_PIDS+=($!)
  done
  for i in 1 2 3; do
    ok=0
    for _ in $(seq 1 120); do
      if curl -sf "http://127.0.0.1:$((J_PORT_BASE + 4000 + i - 1))/healthz" >/dev/null 2>&1; then ok=1; break; fi
      kill -0 "${J_PIDS[$((i - 1))]}" 2>/dev/null || break
      sleep 0.5
    done
    [[ $ok == 1 ]] || { say "nats-server n$i not healthy:"; tail -20 "$J_TMP/n$i.log" >&2; exit 1; }
  done
}
J_ALL="nats://127.0.0.1:$(jport 1),nats://127.0.0.1:$(jport 2),nats://127.0.0.1:$(jport 3)"
jnats() { "$NATS" --no-context --timeout=10s -s "$J_ALL" "$@"; }
J_URL=""
js_stream() { # name: R3 file stream on subject <name>.x; sets J_URL to its leader
  local s=$1 i info="" leader="" cur=0
  for i in $(seq 1 30); do
    jnats stream add "$s" --subjects "$s.x" --storage file --replicas 3 --retention limits --discard old \
      --max-bytes 8GB --max-msg-size=1MB --dupe-window 2m --defaults >/dev/null 2>&1 && break
    sleep 1
  done
  for i in $(seq 1 60); do
    info=$(jnats stream info "$s" --json 2>/dev/null || true)
    leader=$(jq -r '.cluster.leader // empty' <<<"$info" 2>/dev/null || true)
    cur=$(jq -r '[.cluster.replicas[]? | select(.current == true)] | length' <<<"$info" 2>/dev/null || echo 0)
    [[ -n $leader && $cur == 2 ]] && break
    sleep 0.5
  done
  if [[ -z $leader || $cur != 2 ]]; then
    warn "round $r: JetStream stream $s not created or replicas not current"
    return 1
  fi
  J_URL="nats://127.0.0.1:$(jport "${leader#n}")"
}
kv() { sed -n "s/.* $1=\\([^ ]*\\).*/\\1/p" <<<"$2"; }
us2ms() { awk -v u="$1" 'BEGIN { printf "%.2f", u / 1000 }'; }
j_run() { # key records size [jsload flags...]   (records 0: -duration FIXED_SECS)
  ((SKIP_JS)) && return 0
  local key=$1 n=$2 size=$3 stream log c0 c1 line rate
  shift 3
  stream=${key//./-}
  log=$LOGS/r$r-$key.log
  js_stream "$stream" || return 0
  local args=(-url "$J_URL" -stream "$stream" -subject "$stream.x" -size "$size" -window "$WINDOW")
  if ((n > 0)); then args+=(-msgs "$n"); else args+=(-duration "${FIXED_SECS}s"); fi
  mbegin
  c0=$(cpu_ticks "${J_PIDS[@]}")
  if ! run_child timeout 300 "$JSLOAD" "${args[@]}" "$@" >"$log" 2>&1; then
    warn "round $r: $key failed: $(tail -1 "$log")"
    jnats stream rm "$stream" -f >/dev/null 2>&1 || true
    return 0
  fi
  c1=$(cpu_ticks "${J_PIDS[@]}")
  mend "$key" $((c1 - c0))
  jnats stream rm "$stream" -f >/dev/null 2>&1 || true
  line=$(grep '^RESULT' "$log" | tail -1 || true)
  rate=$(kv rate "$line")
  local msgs
  msgs=$(kv msgs "$line")
  record "$key.rate" "$rate"
  record "$key.p50" "$(us2ms "$(kv ack_p50_us "$line")")"
  record "$key.p99" "$(us2ms "$(kv ack_p99_us "$line")")"
  record "$key.p999" "$(us2ms "$(kv ack_p999_us "$line")")"
  record "$key.cpu" "$(cpu_per_mib $((c1 - c0)) "$msgs" "$size")"
  if [[ $line == *e2e_n=* ]]; then
    record "$key.e2e_p50" "$(us2ms "$(kv e2e_p50_us "$line")")"
    record "$key.e2e_p99" "$(us2ms "$(kv e2e_p99_us "$line")")"
    record "$key.e2e_p999" "$(us2ms "$(kv e2e_p999_us "$line")")"
    [[ $(kv e2e_n "$line") == "$msgs" ]] || warn "round $r: $key received $(kv e2e_n "$line") of $msgs"
  fi
  say "   jetstream $key: ${line#RESULT }  cpu $(cpu_per_mib $((c1 - c0)) "$msgs" "$size") s/MiB"
}
# An unmeasured run on each freshly started cluster before the first
# measured ones (WARM_RECORDS of 1 KiB; 0 turns it off). In the run of
# 2026-12-03 18:49, Strand's 1 KiB run went first after both clusters had
# started in two rounds (94 k and 99 k msgs/s) and after JetStream's run in
# the third (143 k); on a single cluster, a run straight after start-up was
# 8-10 % slower than one after a short warm-up. Both systems get the same.
warm_both() {
  ((WARM_RECORDS > 0)) || return 0
  if strand_topic warm0; then
    timeout 120 "$SB" perf produce --topic warm0 --num-records "$WARM_RECORDS" --record-size 1024 --acks all "${SPROPS[@]}" \
      --bootstrap "$SBOOT" >"$LOGS/r$r-s.warm.log" 2>&1 || warn "round $r: Strand warm-up failed"
  fi
  if ! ((SKIP_JS)) && js_stream j-warm; then
    timeout 120 "$JSLOAD" -url "$J_URL" -stream j-warm -subject j-warm.x -size 1024 -window "$WINDOW" -msgs "$WARM_RECORDS" \
      >"$LOGS/r$r-j.warm.log" 2>&1 || warn "round $r: JetStream warm-up failed"
    jnats stream rm j-warm -f >/dev/null 2>&1 || true
  fi
}

pair() { # strand-command ; jetstream-command — in alternating order
  local s=$1 j=$2
  if ((r % 2 == 1)); then eval "$s"; eval "$j"; else eval "$j"; eval "$s"; fi
}

# ---------------------------------------------------------------- rounds
T0=$(date +%s)
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
for r in $(seq 1 "$ROUNDS"); do
  say "== round $r/$ROUNDS (load average $(cut -d' ' -f1-3 /proc/loadavg); $(($(date +%s) - T0)) s elapsed)"
  record "round$r.loadavg" "$(cut -d' ' -f1 /proc/loadavg)"
  # The bare limit first, with no cluster running; Strand's rows follow in
  # the same round.
  bare_runs
  ((BARE_ONLY)) && continue
  strand_start
  for t in p1k p1kw p100 lat lat0 e2e k1k p1k2; do strand_topic "$t" || true; done
  js_start default
  warm_both
  # The second Strand run matches JetStream's window in bytes: 5 batches of
  # 64 KiB in flight hold about 320 unacknowledged 1 KiB records (256 for
  # JetStream); with the default 16 KiB batches they hold 80.
  # The 16 KiB and 64 KiB runs swap places every round: the second run on a
  # fresh cluster was the slower one often enough to make batch.size=65536
  # look slower when it always came second.
  p1k='s_produce s.p1k p1k "$S_1K" 1024'
  p1kw='s_produce s.p1kw p1kw "$S_1KW" 1024 --producer-props batch.size=65536'
  if ((r % 2 == 1)); then p1ks="$p1k; $p1kw"; else p1ks="$p1kw; $p1k"; fi
  pair "$p1ks" 'j_run j.p1k "$J_1K" 1024'
  # The Kafka listener: franz-go with the same producer properties, on
  # its own topic, right before or after the SDK's run of the same size
  # (the order alternates by round, as the SDK and JetStream pair does).
  kafka_row='S_BOOT_FOR=$KBOOT s_produce s.k1k k1k "$S_1K" 1024 --protocol kafka'
  sdk_row='s_produce s.p1k2 p1k2 "$S_1K" 1024'
  if ((r % 2 == 1)); then eval "$kafka_row"; eval "$sdk_row"; else eval "$sdk_row"; eval "$kafka_row"; fi
  pair 's_produce s.p100 p100 "$S_100" 100' 'j_run j.p100 "$J_100" 100'
  # At the fixed load Strand runs twice: with the bench's linger.ms (a
  # record may wait up to that long for its batch to fill) and with
  # linger.ms=0 (a batch goes as soon as the window has room, Kafka's
  # latency setting); the order of the two alternates by round.
  lat5='s_produce s.lat lat $((RATE * FIXED_SECS)) 1024 --throughput "$RATE" --warmup-records "$RATE"'
  lat0='s_produce s.lat0 lat0 $((RATE * FIXED_SECS)) 1024 --throughput "$RATE" --warmup-records "$RATE" --producer-props linger.ms=0'
  if ((r % 2 == 1)); then lats="$lat5; $lat0"; else lats="$lat0; $lat5"; fi
  pair "$lats" 'j_run j.lat 0 1024 -rate "$RATE" -warmup "$RATE"'
  pair 's_e2e s.e2e e2e --isolation-level read_committed --warmup-records "$RATE"' 'j_run j.e2e 0 1024 -rate "$RATE" -e2e -warmup "$RATE"'
  js_stop

  # Strand only: transactions and isolation levels (the idempotent baseline
  # runs right before the transactional one, same settings).
  for t in idem txn txe2e warm; do strand_topic "$t" || true; done
  # One small transaction first, so that the baseline and the transactional
  # run see the same cluster: the first transactional id creates
  # __transaction_state (50 partitions, RF 3), whose creation and start-up
  # would otherwise land in the transactional run alone.
  echo warm | timeout 60 "$SB" produce warm --transactional-id warm --bootstrap "$SBOOT" >/dev/null 2>&1 ||
    warn "round $r: transactional warm-up failed"
  # Same record count and buffer for both; the order alternates by round.
  idem='s_produce s.idem idem "$S_TXN" 1024 --producer-props buffer.memory=$TXN_BUFFER'
  txn='s_produce s.txn txn "$S_TXN" 1024 --producer-props buffer.memory=$TXN_BUFFER --transactional-id perf --transaction-duration-ms 100'
  if ((r % 2 == 1)); then eval "$idem"; eval "$txn"; else eval "$txn"; eval "$idem"; fi
  for rep in $(seq 1 "$CONSUME_REPS"); do
    if (((r + rep) % 2 == 0)); then order=(read_committed read_uncommitted); else order=(read_uncommitted read_committed); fi
    for iso in "${order[@]}"; do s_consume "s.${iso#read_}" txn "$S_TXN" "$iso"; done
  done
  s_e2e s.txe2e txe2e --transactional-id e2e --transaction-duration-ms 100 --isolation-level read_committed --warmup-records "$RATE"

  # fsync per write: Strand flush.messages=1, JetStream sync_interval: always.
  for t in f1k f1kw f100; do strand_topic "$t" flush.messages=1 || true; done
  js_start always
  pair 's_produce s.f1k f1k "$S_F1K" 1024; s_produce s.f1kw f1kw "$S_F1KW" 1024 --producer-props batch.size=65536' 'j_run j.f1k "$J_F1K" 1024'
  pair 's_produce s.f100 f100 "$S_F100" 100' 'j_run j.f100 "$J_F100" 100'
  js_stop
  strand_stop
done
ELAPSED=$(($(date +%s) - T0))
LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)

# ---------------------------------------------------------------- table
# stat KEY -> "median n min max" over the rounds ("" if none)
mib() { local m; m=$(med "$1.rate"); [[ -n $m ]] && num "$(awk -v m="$m" -v s="$2" 'BEGIN { print m * s / 1048576 }')" || echo n/a; }
lat() { local a b; a=$(med "$1$2_p50"); b=$(med "$1$2_p99"); [[ -n $a && -n $b ]] && echo "$(num "$a") / $(num "$b")" || echo n/a; }
verdict() { [[ $1 == n/a || $2 == n/a ]] && { echo "n/a"; return; }; awk -v a="$1" -v b="$2" 'BEGIN { print (a >= b) ? "met" : "**not met**" }'; }

if ((SKIP_JS)); then NS_VER="not run (SKIP_JS)"; else NS_VER=$("$NATS_SERVER" --version | sed 's/^nats-server: //'); fi
R1K=$(ratio "$(med s.p1k.rate)" "$(med j.p1k.rate)")
R1KW=$(ratio "$(med s.p1kw.rate)" "$(med j.p1k.rate)")
RF1K=$(ratio "$(med s.f1k.rate)" "$(med j.f1k.rate)")
RF1KW=$(ratio "$(med s.f1kw.rate)" "$(med j.f1k.rate)")
RF100=$(ratio "$(med s.f100.rate)" "$(med j.f100.rate)")
RTXN=$(ratio "$(med s.txn.rate)" "$(med s.idem.rate)")
# The Kafka listener against the SDK: the median of each round's ratio (the
# two runs are beside each other, so the machine's drift between rounds
# cancels out), of throughput and of broker CPU per MiB (what the door
# costs the brokers, less noisy than a rate on a shared machine).
pair_ratio() { # keyA keyB -> median over rounds of A/B
  paste <(awk -F'\t' -v k="$1" '$1 == k { print $2 }' "$RES") <(awk -F'\t' -v k="$2" '$1 == k { print $2 }' "$RES") |
    awk -F'\t' '$1 != "" && $2 > 0 { print $1 / $2 }' | sort -g |
    awk '{ v[NR] = $1 } END { if (NR == 0) { print "n/a"; exit } printf "%.2f\n", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
RKAFKA=$(pair_ratio s.k1k.rate s.p1k2.rate)
RKCPU=$(pair_ratio s.k1k.cpu s.p1k2.cpu)
RRC=$(ratio "$(med s.committed.rate)" "$(med s.uncommitted.rate)")
RLAT=$(ratio "$(med s.lat.p99)" "$(med j.lat.p99)")
RE2E=$(ratio "$(med s.e2e.p99)" "$(med j.e2e.e2e_p99)")
pct() { [[ $1 == n/a ]] && echo n/a || awk -v x="$1" 'BEGIN { printf "%.0f%%", x * 100 }'; }
noise() { awk -F'\t' -v p="$1" 'index($1, p) == 1 && $1 ~ /\.other$/ { n++; t += $2; if ($2 > m) m = $2 }
  END { if (n) printf "%.2f cores on average (max %.2f)", t / n, m; else printf "n/a" }' "$RES"; }
inv() { [[ $1 == n/a ]] && echo n/a || awk -v x="$1" 'BEGIN { print (x <= 1) ? 1 : 0 }'; }

# The bare limit: pairing each Strand 1 KiB row with the bare run nearest
# (by ratio) the batch it sent.
bsize() { awk -v s="$1" 'BEGIN { m = 1; if (s ~ /[kK]$/) m = 1024; else if (s ~ /[mM]$/) m = 1048576; sub(/[kKmM]$/, "", s); print s * m }'; }
bare_for() { # strand-key [fsync] -> the bare key paired with it ("" if none)
  local br list=$LIMIT_BATCHES best="" bd="" d sz
  [[ ${2:-} == fsync ]] && list=$LIMIT_FSYNC_BATCHES
  br=$(med "$1.batch_records")
  [[ -n $br ]] || return 0
  for sz in $list; do
    d=$(awk -v a="$br" -v b="$(bsize "$sz")" 'BEGIN { d = log(a * 1024 / b); print (d < 0) ? -d : d }')
    if [[ -z $bd ]] || awk -v d="$d" -v e="$bd" 'BEGIN { exit !(d < e) }'; then best=$sz bd=$d; fi
  done
  [[ -n $best ]] && echo "bare.$best${2:+.fsync}"
}
round_ratio() { # keyA keyB -> median over the rounds holding both of A/B
  awk -F'\t' -v a="$1" -v b="$2" '$1 == a && $2 != "" { x[$3] = $2 } $1 == b && $2 != "" { y[$3] = $2 }
    END { n = 0; for (k in x) if ((k in y) && y[k] > 0) v[n++] = x[k] / y[k]; if (!n) { print "n/a"; exit }
      for (i = 0; i < n; i++) for (j = i + 1; j < n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
      printf "%.2f", (n % 2) ? v[int(n / 2)] : (v[n / 2 - 1] + v[n / 2]) / 2 }' "$RES"
}
s_cpu_gb() { local m; m=$(med "$1.cpu"); [[ -n $m ]] && awk -v m="$m" 'BEGIN { print m * 1e9 / 1048576 }'; }
# publish_table: $WORK/table.md to $OUT and stdout, the raw values beside it.
publish_table() {
  mkdir -p "$(dirname "$OUT")"
  cp "$WORK/table.md" "$OUT"
  cp "$RES" "$BENCH/last-results.tsv"
  cat "$WORK/table.md"
  say "== wrote $OUT (raw values: $BENCH/last-results.tsv, logs: $LOGS/)"
}
bare_table() {
  local sz k
  echo "The bare replication limit (\`cmd/strand-limit\`, ${LIMIT_SECS} s per run, at the start of every round with no cluster running):" \
    "a producer, a leader and two followers as separate processes over loopback TCP, 1 KiB records, window 5, the leader stamping offsets and CRC-32C," \
    "forwarding each group to both followers and appending it to 256 MiB segments (two kept), acks=all. MB = 10^6 bytes of payload; CPU per GB of payload."
  echo
  echo "| bare run | MB/s | records/s | p50 / p99 ack ms | broker (leader + followers) CPU s/GB | producer CPU s/GB |"
  echo "| --- | ---: | ---: | ---: | ---: | ---: |"
  for sz in $LIMIT_BATCHES; do
    k=bare.$sz
    echo "| $sz batches | $(num "$(med "$k.mbs")") | $(rate_cell "$k") | $(latp "$k") | $(num "$(med "$k.bcpu")") | $(num "$(med "$k.pcpu")") |"
  done
  for sz in $LIMIT_FSYNC_BATCHES; do
    k=bare.$sz.fsync
    echo "| $sz batches, fdatasync per group | $(num "$(med "$k.mbs")") | $(rate_cell "$k") | $(latp "$k") | $(num "$(med "$k.bcpu")") | $(num "$(med "$k.pcpu")") |"
  done
}
vs_bare_row() { # label strand-key [fsync]
  local bk br bb sg bg
  bk=$(bare_for "$2" "${3:-}")
  br=$(med "$2.batch_records") bb=$(med "$2.batch_bytes")
  [[ -n $bk ]] || { echo "| $1 | n/a | | $(rate_cell "$2") | | | | | |"; return; }
  sg=$(s_cpu_gb "$2") bg=$(med "$bk.bcpu")
  echo "| $1 | $(num "$br") records ($(num "$bb") B) | ${bk#bare.} | $(rate_cell "$2") | $(rate_cell "$bk") |" \
    "$(ratio "$(med "$2.rate")" "$(med "$bk.rate")") ($(round_ratio "$2.rate" "$bk.rate")) | $(num "$sg") | $(num "$bg") | $(ratio "$sg" "$bg") |"
}
B1K=$(bare_for s.p1k)
RBARE=$(ratio "$(med s.p1k.rate)" "$([[ -n $B1K ]] && med "$B1K.rate")")
RBCPU=$(ratio "$(s_cpu_gb s.p1k)" "$([[ -n $B1K ]] && med "$B1K.bcpu")")
RBCPU_T=$([[ $RBCPU == n/a ]] && echo n/a || awk -v x="$RBCPU" 'BEGIN { print (x <= 2) ? 1 : 0 }')
R64=$(ratio "$(med s.p1kw.rate)" "$(med s.p1k.rate)")
if ((BARE_ONLY)); then
  {
    echo "## The bare replication limit (\`make bench-compare\` with BARE_ONLY=1)"
    echo
    echo "$(date -u '+%Y-%m-%d %H:%M UTC') · nproc $(nproc) · $("$GO" version | cut -d' ' -f3) · Strand $REV · medians of $ROUNDS rounds, ± is half the min–max range ·" \
      "load average $LOAD_START at the start, $LOAD_END at the end · ${ELAPSED} s · other processes used $(noise bare.) during the runs"
    echo
    bare_table
  } >"$WORK/table.md"
  publish_table
  exit 0
fi

{
  echo "## Strand vs NATS JetStream R3 (\`make bench-compare\`)"
  echo
  echo "$(date -u '+%Y-%m-%d %H:%M UTC') · \`uname -m\` $(uname -m) · nproc $(nproc) · $("$GO" version | cut -d' ' -f3) ·" \
    "Strand $REV · nats-server $NS_VER (natscli $NATSCLI_VERSION, nats.go $NATS_GO_VERSION) ·" \
    "medians of $ROUNDS rounds, ± is half the min–max range · load average $LOAD_START at the start, $LOAD_END at the end · ${ELAPSED} s"
  echo
  echo "One producer, one partition/stream, three replicas on one machine (servers and client share all cores)." \
    "Strand: \`perf produce --acks all\` (idempotent), min.insync.replicas=2, max.in.flight=5, linger.ms=$LINGER_MS, batch.size 16 KiB, batch.max.size 256 KiB (batches grow while the window is full)," \
    "buffer.memory 32 MiB (the transactional row and its idempotent baseline: $((TXN_BUFFER / 1024)) KiB, so that a transaction lasts about 100 ms)${S_EXTRA_PROPS:+, and $S_EXTRA_PROPS}. JetStream: R3 file stream, async publish with a sliding window of $WINDOW, default acks (quorum)." \
    "Each round starts both clusters afresh and gives each an unmeasured run of $WARM_RECORDS 1 KiB records before the first measured ones." \
    "Latencies in ms (p50 / p99) are send → ack, except the end-to-end row (send → consumer)." \
    "CPU is the three brokers' utime+stime per MiB of payload produced." \
    "Strand's p50/p99 in the unthrottled rows include the time a record waits in the 32 MiB producer buffer" \
    "(kafka-producer-perf-test's definition); JetStream's window holds at most $WINDOW messages." \
    "The machine was shared: processes other than the brokers and the load client used $(noise s.) during the Strand runs" \
    "and $(noise j.) during the JetStream runs (the idle cluster of the other system counts as other)."
  echo
  echo "| workload | Strand msgs/s | JetStream msgs/s | Strand / JetStream | Strand MiB/s | JetStream MiB/s | Strand p50 / p99 ms | JetStream p50 / p99 ms | Strand CPU s/MiB | JetStream CPU s/MiB |"
  echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
  row() { # label skey jkey size
    echo "| $1 | $(rate_cell "$2") | $(rate_cell "$3") | $(ratio "$(med "$2.rate")" "$(med "$3.rate")") | $(mib "$2" "$4") | $(mib "$3" "$4") | $(latp "$2") | $(latp "$3") | $(cpu "$2") | $(cpu "$3") |"
  }
  row "1 KiB, acks=all / R3 default acks" s.p1k j.p1k 1024
  row "1 KiB, Strand batch.size 64 KiB" s.p1kw j.p1k 1024
  row "100 B, acks=all / R3 default acks" s.p100 j.p100 100
  row "1 KiB, fsync per write (flush.messages=1 / sync_interval always)" s.f1k j.f1k 1024
  row "1 KiB, fsync per write, Strand batch.size 64 KiB" s.f1kw j.f1k 1024
  row "100 B, fsync per write" s.f100 j.f100 100
  row "1 KiB at $(num "$RATE") msgs/s offered: send → ack" s.lat j.lat 1024
  row "1 KiB at $(num "$RATE") msgs/s offered: send → ack, Strand linger.ms=0" s.lat0 j.lat 1024
  echo "| 1 KiB at $(num "$RATE") msgs/s offered: send → consumer (Strand read_committed) | $(rate_cell s.e2e) | $(rate_cell j.e2e) | | | | $(latp s.e2e) | $(lat j.e2e .e2e) | | |"
  echo
  echo "Strand only (1 KiB records):"
  echo
  echo "| workload | msgs/s | baseline | baseline msgs/s | ratio | p50 / p99 ms |"
  echo "| --- | ---: | --- | ---: | ---: | ---: |"
  echo "| transactional, 100 ms transactions (measured: $(num "$(med s.txn.txn_ms)") ms each, of which $(num "$(med s.txn.commit_ms)") ms commit) | $(rate_cell s.txn) | idempotent, same settings | $(rate_cell s.idem) | $RTXN | $(latp s.txn) vs $(latp s.idem) |"
  echo "| franz-go $(go list -m -f '{{.Version}}' github.com/twmb/franz-go 2>/dev/null) → the Kafka listener, idempotent, same producer properties | $(rate_cell s.k1k) | Strand's SDK over gRPC (run beside it) | $(rate_cell s.p1k2) | $RKAFKA (median of per-round ratios; broker CPU $(cpu s.k1k) vs $(cpu s.p1k2) s/MiB, ${RKCPU}×) | $(latp s.k1k) vs $(latp s.p1k2) |"
  echo "| consume read_committed (the transactional topic, fetch phase) | $(rate_cell s.committed) | read_uncommitted | $(rate_cell s.uncommitted) | $RRC | |"
  echo "| send → read_committed consumer, 100 ms transactions, $(num "$RATE") msgs/s offered | | idempotent producer | | | $(latp s.txe2e) vs $(latp s.e2e) |"
  echo
  bare_table
  echo
  echo "Strand against the bare limit in the same run: each Strand 1 KiB row is paired with the bare run nearest the average batch it sent" \
    "(the brokers' records produced / Produce requests, one batch per request on these one-partition topics; bytes on the wire include record framing)." \
    "Strand / bare is records/s over records/s: the ratio of the medians, and in brackets the median of the per-round ratios." \
    "Strand's broker CPU is its three brokers' per GB of payload; the bare figure is the leader's and followers'."
  echo
  echo "| Strand row | batch Strand sent (avg) | bare run | Strand msgs/s | bare records/s | Strand / bare | Strand broker CPU s/GB | bare broker CPU s/GB | CPU Strand / bare |"
  echo "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |"
  vs_bare_row "1 KiB, acks=all, batch.size 16 KiB" s.p1k
  vs_bare_row "1 KiB, acks=all, batch.size 64 KiB" s.p1kw
  vs_bare_row "1 KiB, acks=all (the run beside the Kafka listener's)" s.p1k2
  vs_bare_row "1 KiB, fsync per write" s.f1k fsync
  vs_bare_row "1 KiB, fsync per write, batch.size 64 KiB" s.f1kw fsync
  echo
  echo "Targets:"
  echo
  echo "| target | measured | |"
  echo "| --- | ---: | --- |"
  echo "| 1 KiB acks=all RF3: ≥ 55% of the bare limit at the batch size Strand sends (${B1K#bare.}) | $(pct "$RBARE") | $(verdict "$RBARE" 0.55) |"
  echo "| … broker CPU per GB ≤ 2× the bare baseline's | ${RBCPU}× | $(verdict "$RBCPU_T" 1) |"
  echo "| batch.size 64 KiB at least as fast as 16 KiB | ${R64}× | $(verdict "$R64" 1) |"
  echo "| 1 KiB acks=all RF3: ≥ 3× JetStream async msgs/s (default 16 KiB batches) | ${R1K}× | $(verdict "$R1K" 3) |"
  echo "| … with batch.size 64 KiB | ${R1KW}× | $(verdict "$R1KW" 3) |"
  echo "| … with p99 ≤ JetStream's at equal load ($(num "$RATE") msgs/s, send → ack) | $(med s.lat.p99) vs $(med j.lat.p99) ms | $(verdict "$(inv "$RLAT")" 1) |"
  echo "| … p50 and p99 ≤ JetStream's at that load, linger.ms=$LINGER_MS | $(med s.lat.p50) / $(med s.lat.p99) vs $(med j.lat.p50) / $(med j.lat.p99) ms | $(verdict "$(inv "$(ratio "$(med s.lat.p50)" "$(med j.lat.p50)")")" 1) (p50), $(verdict "$(inv "$RLAT")" 1) (p99) |"
  echo "| … p50 and p99 ≤ JetStream's at that load, linger.ms=0 | $(med s.lat0.p50) / $(med s.lat0.p99) vs $(med j.lat.p50) / $(med j.lat.p99) ms | $(verdict "$(inv "$(ratio "$(med s.lat0.p50)" "$(med j.lat.p50)")")" 1) (p50), $(verdict "$(inv "$(ratio "$(med s.lat0.p99)" "$(med j.lat.p99)")")" 1) (p99) |"
  echo "| … end to end (send → consumer) at that load | $(med s.e2e.p99) vs $(med j.e2e.e2e_p99) ms | $(verdict "$(inv "$RE2E")" 1) |"
  echo "| transactional ≥ 95% of idempotent | $(pct "$RTXN") | $(verdict "$RTXN" 0.95) |"
  echo "| Kafka listener (franz-go) ≥ 90% of the SDK's throughput | $(pct "$RKAFKA") | $(verdict "$RKAFKA" 0.90) |"
  echo "| … and its broker CPU per MiB ≤ 1.1× the SDK's | ${RKCPU}× | $(verdict "$(awk -v x="$RKCPU" 'BEGIN { if (x == "n/a") print "n/a"; else print (x <= 1.1) ? 1 : 0 }')" 1) |"
  echo "| read_committed ≥ 90% of read_uncommitted | $(pct "$RRC") | $(verdict "$RRC" 0.90) |"
  echo "| fsync per write ≥ 2× JetStream sync_interval always (1 KiB) | ${RF1K}× | $(verdict "$RF1K" 2) |"
  echo "| … with batch.size 64 KiB | ${RF1KW}× | $(verdict "$RF1KW" 2) |"
  echo "| … (100 B) | ${RF100}× | $(verdict "$RF100" 2) |"
  if ((${#WARNINGS[@]} > 0)); then
    echo
    echo "Warnings:"
    for w in "${WARNINGS[@]}"; do echo "- $w"; done
  fi
} >"$WORK/table.md"
publish_table
