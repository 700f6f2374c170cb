package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strand-io/strand/app/perf"
	"github.com/strand-io/strand/client"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

func init() { extraCommands = append(extraCommands, perfCmd) }

func perfCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "perf", Short: "Load tools shaped like kafka-producer-perf-test / kafka-consumer-perf-test"}
	cmd.AddCommand(perfProduceCmd(), perfConsumeCmd(), perfE2ECmd(), perfScaleCmd())
	return cmd
}

// producerOpts turns Kafka-named producer properties into SDK options.
func producerOpts(props []string, acks string) ([]client.Opt, error) {
	var opts []client.Opt
	switch acks {
	case "all", "-1":
	case "1":
		opts = append(opts, client.RequiredAcks(client.LeaderAck), client.EnableIdempotence(client.IdempotenceOff))
	case "0":
		opts = append(opts, client.RequiredAcks(client.NoAck), client.EnableIdempotence(client.IdempotenceOff))
	default:
		return nil, fmt.Errorf("--acks: all, -1, 1 or 0, not %q", acks)
	}
	p, err := parseProducerProps(props)
	if err != nil {
		return nil, err
	}
	if p.linger >= 0 {
		opts = append(opts, client.Linger(p.linger))
	}
	if p.batch > 0 {
		opts = append(opts, client.BatchSize(p.batch))
	}
	if p.batchMax > 0 {
		opts = append(opts, client.BatchMaxSize(p.batchMax))
	}
	if p.inflight > 0 {
		opts = append(opts, client.MaxInFlight(p.inflight))
	}
	if p.buffer > 0 {
		opts = append(opts, client.BufferMemory(p.buffer))
	}
	if !p.idempotent {
		opts = append(opts, client.EnableIdempotence(client.IdempotenceOff))
	}
	if p.compression != "" {
		c, err := client.ParseCompression(p.compression)
		if err != nil {
			return nil, fmt.Errorf("compression.type: %w", err)
		}
		opts = append(opts, client.Compression(c))
	}
	return opts, nil
}

// producerProps are the producer properties perf produce takes
// (--producer-props), parsed once for either front door's producer.
type producerProps struct {
	linger                            time.Duration // -1: not given
	batch, batchMax, inflight, buffer int           // 0: not given
	idempotent                        bool
	compression                       string
}

func parseProducerProps(props []string) (producerProps, error) {
	p := producerProps{linger: -1, idempotent: true}
	for _, kv := range props {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return p, fmt.Errorf("--producer-props %q: want key=value", kv)
		}
		n, nerr := strconv.Atoi(v)
		switch k {
		case "linger.ms":
			p.linger = time.Duration(n) * time.Millisecond
		case "batch.size":
			p.batch = n
		case "batch.max.size":
			p.batchMax = n
		case "max.in.flight.requests.per.connection":
			p.inflight = n
		case "buffer.memory":
			p.buffer = n
		case "enable.idempotence":
			p.idempotent, nerr = v != "false", nil
		case "compression.type":
			p.compression, nerr = v, nil
		default:
			return p, fmt.Errorf("--producer-props: unknown property %q", k)
		}
		if nerr != nil {
			return p, fmt.Errorf("--producer-props %s: %v", k, nerr)
		}
	}
	return p, nil
}

func perfProduceCmd() *cobra.Command {
	var topic, acks, txnID string
	var num int64
	var size int
	var throughput float64
	var txnMs int
	var props []string
	var warmup, keySpace int64
	var cpuProfile, protocol string
	cmd := &cobra.Command{
		Use:   "produce",
		Short: "Produce records at a target rate and report throughput and latency",
		Long: `Produce --num-records records of --record-size bytes, paced open-loop at
--throughput records/s (-1: as fast as possible), and report like
kafka-producer-perf-test: a line every 5 s and a final line with the average,
maximum and percentile latencies (send to acknowledgement, per record).
With --transactional-id every --transaction-duration-ms the transaction is
committed and a new one begun. With --warmup-records N (KIP-1052) a second
final line, "steady state", leaves out the first N records: the producer's
start (metadata, producer id, connections) is in them. With --key-space N
record i has the key "k" followed by i mod N in 10 digits (a compacted
topic refuses keyless records); without it records have no key. With --protocol
kafka the records go through the Kafka listener with franz-go (the same
producer properties; --bootstrap then names Kafka listeners).`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if topic == "" || num <= 0 || size <= 0 {
				return fmt.Errorf("--topic, --num-records and --record-size are required")
			}
			if warmup < 0 || warmup >= num {
				return fmt.Errorf("--warmup-records must be at least 0 and less than --num-records")
			}
			if keySpace < 0 {
				return fmt.Errorf("--key-space must be at least 0")
			}
			if txnID != "" && txnMs <= 0 {
				txnMs = 3000
			}
			if cpuProfile != "" {
				stopProfile, err := startCPUProfile(cpuProfile)
				if err != nil {
					return err
				}
				defer stopProfile()
			}
			ctx, stop := signalContext()
			defer stop()
			var p perfSink
			switch protocol {
			case "grpc", "":
				if _, err := perfTopic(ctx, cmd, topic); err != nil {
					return err
				}
				opts, err := producerOpts(props, acks)
				if err != nil {
					return err
				}
				opts = append(opts, secure(client.Bootstrap(bootstrap(cmd)...))...)
				if txnID != "" {
					opts = append(opts, client.TransactionalID(txnID))
				}
				sp, err := client.NewProducer(opts...)
				if err != nil {
					return err
				}
				p = sdkSink{sp}
			case "kafka":
				opts, err := kafkaProducerOpts(bootstrapList(cmd), props, acks, txnID)
				if err != nil {
					return err
				}
				cl, err := kgo.NewClient(opts...)
				if err != nil {
					return err
				}
				p = kafkaSink{cl}
			default:
				return fmt.Errorf("--protocol: grpc or kafka, not %q", protocol)
			}
			defer p.Close()
			if txnID != "" {
				if err := p.InitTransactions(ctx); err != nil {
					return err
				}
				if err := p.BeginTransaction(); err != nil {
					return err
				}
			}
			payload := make([]byte, size)
			for i := range payload {
				payload[i] = byte('a' + i%26)
			}
			total, window, steady := perf.NewHistogram(), perf.NewHistogram(), perf.NewHistogram()
			var acked, failed, steadyAcked atomic.Int64
			var steadyStart time.Time
			var firstErr firstError
			throttle := perf.NewThrottle(throughput)
			start := time.Now()
			done := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(1)
			go func() { // progress every 5 s
				defer wg.Done()
				t := time.NewTicker(5 * time.Second)
				defer t.Stop()
				last, lastAcked := time.Now(), int64(0)
				for {
					select {
					case <-done:
						return
					case now := <-t.C:
						a := acked.Load()
						secs := now.Sub(last).Seconds()
						n := a - lastAcked
						fmt.Printf("%d records sent, %.1f records/sec (%.2f MB/sec), %.1f ms avg latency, %.1f ms max latency.\n",
							n, float64(n)/secs, float64(n)*float64(size)/secs/(1<<20), ms(window.Mean()), ms(window.Max()))
						window.Reset()
						last, lastAcked = now, a
					}
				}
			}()
			txnStart := time.Now()
			commits := newCommitTimer()
			for i := int64(0); i < num && ctx.Err() == nil; i++ {
				throttle.Wait()
				sent := time.Now()
				inSteady := warmup > 0 && i >= warmup
				if warmup > 0 && i == warmup {
					steadyStart = sent
				}
				var key []byte
				if keySpace > 0 {
					key = fmt.Appendf(nil, "k%010d", i%keySpace)
				}
				p.Produce(ctx, topic, key, payload, func(err error) {
					if err != nil {
						failed.Add(1)
						firstErr.set(err)
						return
					}
					d := time.Since(sent)
					total.Record(d)
					window.Record(d)
					if inSteady {
						steady.Record(d)
						steadyAcked.Add(1)
					}
					acked.Add(1)
				})
				if txnID != "" && time.Since(txnStart) >= time.Duration(txnMs)*time.Millisecond {
					if err := commits.commit(ctx, p); err != nil {
						return err
					}
					if err := p.BeginTransaction(); err != nil {
						return err
					}
					txnStart = time.Now()
				}
			}
			if txnID != "" {
				if err := commits.commit(ctx, p); err != nil {
					return err
				}
			}
			if err := p.Flush(ctx); err != nil {
				return err
			}
			elapsed := time.Since(start).Seconds()
			close(done)
			wg.Wait()
			printPerfSummary("records sent", acked.Load(), elapsed, size, total)
			if warmup > 0 && !steadyStart.IsZero() {
				printPerfSummary("steady state records sent", steadyAcked.Load(), elapsed-steadyStart.Sub(start).Seconds(), size, steady)
			}
			if txnID != "" {
				commits.print(os.Stdout, elapsed)
			}
			if f := failed.Load(); f > 0 {
				return fmt.Errorf("%d records failed; first: %v", f, firstErr.get())
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&topic, "topic", "", "topic to produce to")
	f.Int64Var(&num, "num-records", 0, "number of records")
	f.IntVar(&size, "record-size", 0, "record size in bytes")
	f.Float64Var(&throughput, "throughput", -1, "records/s to offer (-1: unthrottled)")
	f.StringVar(&acks, "acks", "all", "all, 1 or 0")
	f.StringVar(&txnID, "transactional-id", "", "produce in transactions")
	f.IntVar(&txnMs, "transaction-duration-ms", 0, "commit every this many ms (default 3000 with --transactional-id)")
	f.StringArrayVar(&props, "producer-props", nil, "producer properties key=value (linger.ms, batch.size, batch.max.size, max.in.flight.requests.per.connection, buffer.memory, compression.type, enable.idempotence)")
	f.Int64Var(&warmup, "warmup-records", 0, "also report the steady state: all but the first N records")
	f.Int64Var(&keySpace, "key-space", 0, "give record i the key k<i mod N> (0: no keys)")
	f.StringVar(&cpuProfile, "cpu-profile", "", "write a Go CPU profile of the producer process to this file")
	f.StringVar(&protocol, "protocol", "grpc", "grpc (Strand's SDK) or kafka (franz-go on the Kafka listener)")
	return cmd
}

// perfTopic returns the metadata of the topic a perf command works on, or
// an error when the topic does not exist: Strand creates no topic on first
// use, so a producer would retry the records until delivery.timeout.ms and
// a consumer would wait for records that never come.
func perfTopic(ctx context.Context, cmd *cobra.Command, topic string) (*pb.MetadataResponse, error) {
	adm, err := newAdmin(cmd)
	if err != nil {
		return nil, err
	}
	defer adm.Close()
	md, err := adm.Metadata(ctx, true, topic)
	if err != nil {
		return nil, err
	}
	if len(md.Topics) != 1 {
		return nil, fmt.Errorf("topic %s: the metadata answer holds %d topics", topic, len(md.Topics))
	}
	switch t := md.Topics[0]; t.ErrorCode {
	case pb.ErrorCode_NONE:
		return md, nil
	case pb.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION:
		return nil, fmt.Errorf("topic %s does not exist (create it first: strand topics create %s)", topic, topic)
	default:
		return nil, fmt.Errorf("topic %s: %s: %s", topic, t.ErrorCode, t.ErrorMessage)
	}
}

// startCPUProfile profiles this process into path until the returned func runs.
func startCPUProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// printPerfSummary prints kafka-producer-perf-test's final line for n
// records of size bytes acknowledged over secs, with h's latencies.
// commitTimer commits a perf run's transactions and times the two parts
// of each commit: waiting for the transaction's records (the producer's
// flush) and EndTxn (the coordinator's PREPARE_COMMIT write). While either
// runs the loop sends nothing, so their sum over the run is what
// transactions cost against an idempotent run.
type commitTimer struct {
	flush, end, total *perf.Histogram
	spent             time.Duration
	now               func() time.Time
}

func newCommitTimer() *commitTimer {
	return &commitTimer{flush: perf.NewHistogram(), end: perf.NewHistogram(), total: perf.NewHistogram(), now: time.Now}
}

// txnCommitter is the part of client.Producer a commit uses.
type txnCommitter interface {
	Flush(ctx context.Context) error
	CommitTransaction(ctx context.Context) error
}

func (c *commitTimer) commit(ctx context.Context, p txnCommitter) error {
	t0 := c.now()
	if err := p.Flush(ctx); err != nil {
		return fmt.Errorf("commit: waiting for the transaction's records: %w", err)
	}
	t1 := c.now()
	if err := p.CommitTransaction(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	t2 := c.now()
	c.flush.Record(t1.Sub(t0))
	c.end.Record(t2.Sub(t1))
	c.total.Record(t2.Sub(t0))
	c.spent += t2.Sub(t0)
	return nil
}

// print reports the commits: count, the average transaction from begin to
// committed, commit latency, and the share of the run's wall time spent
// committing. A producer whose buffer.memory holds more than
// --transaction-duration-ms of sending makes transactions longer than that:
// the commit waits for the buffer to drain, and the average shows it.
func (c *commitTimer) print(w io.Writer, secs float64) {
	n := c.total.Count()
	if n == 0 {
		fmt.Fprintln(w, "0 transactions committed.")
		return
	}
	fmt.Fprintf(w, "%d transactions committed, %.1f ms avg transaction, %.2f ms avg commit (%.2f ms waiting for records, %.2f ms EndTxn), %.2f ms 99th, %.2f ms max; %.1f%% of the run spent committing.\n",
		n, 1000*secs/float64(n), ms(c.total.Mean()), ms(c.flush.Mean()), ms(c.end.Mean()),
		ms(c.total.Quantile(0.99)), ms(c.total.Max()), 100*c.spent.Seconds()/secs)
}

func printPerfSummary(what string, n int64, secs float64, size int, h *perf.Histogram) {
	fmt.Printf("%d %s, %.1f records/sec (%.2f MB/sec), %.2f ms avg latency, %.2f ms max latency, %.2f ms 50th, %.2f ms 95th, %.2f ms 99th, %.2f ms 99.9th.\n",
		n, what, float64(n)/secs, float64(n)*float64(size)/secs/(1<<20), ms(h.Mean()), ms(h.Max()),
		ms(h.Quantile(0.5)), ms(h.Quantile(0.95)), ms(h.Quantile(0.99)), ms(h.Quantile(0.999)))
}

func isolationOpt(level string) (client.Opt, error) {
	switch level {
	case "read_uncommitted":
		return client.Isolation(client.ReadUncommitted), nil
	case "read_committed":
		return client.Isolation(client.ReadCommitted), nil
	}
	return nil, fmt.Errorf("--isolation-level: read_uncommitted or read_committed, not %q", level)
}

func perfConsumeCmd() *cobra.Command {
	var topic, isolation string
	var messages int64
	var timeout time.Duration
	var hideHeader bool
	cmd := &cobra.Command{
		Use:   "consume",
		Short: "Consume records from the start and report throughput (like kafka-consumer-perf-test)",
		RunE: func(cmd *cobra.Command, args []string) error {
			if topic == "" || messages <= 0 {
				return fmt.Errorf("--topic and --messages are required")
			}
			iso, err := isolationOpt(isolation)
			if err != nil {
				return err
			}
			ctx, stop := signalContext()
			defer stop()
			md, err := perfTopic(ctx, cmd, topic)
			if err != nil {
				return err
			}
			c, err := client.NewConsumer(secure(client.Bootstrap(bootstrap(cmd)...), iso, client.MaxPollRecords(10000))...)
			if err != nil {
				return err
			}
			defer c.Close(context.Background())
			assign := map[client.TopicPartition]int64{}
			for _, p := range md.Topics[0].Partitions {
				assign[client.TopicPartition{Topic: topic, Partition: p.Partition}] = client.OffsetEarliest
			}
			c.Assign(assign)
			start := time.Now()
			var n, bytes int64
			var fetchStart time.Time
			last := time.Now()
			for n < messages {
				recs, err := c.Poll(ctx)
				if err != nil {
					return err
				}
				if len(recs) == 0 {
					if time.Since(last) > timeout {
						break
					}
					continue
				}
				if fetchStart.IsZero() {
					fetchStart = time.Now()
				}
				last = time.Now()
				for _, r := range recs {
					n++
					bytes += int64(len(r.Value) + len(r.Key))
				}
			}
			end := time.Now()
			if fetchStart.IsZero() {
				fetchStart = end
			}
			secs, fsecs := end.Sub(start).Seconds(), end.Sub(fetchStart).Seconds()
			mb := float64(bytes) / (1 << 20)
			if !hideHeader {
				fmt.Println("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")
			}
			stamp := func(t time.Time) string {
				return t.Format("2006-01-02 15:04:05") + fmt.Sprintf(":%03d", t.Nanosecond()/1e6)
			}
			fmt.Printf("%s, %s, %.4f, %.4f, %d, %.4f, %d, %d, %.4f, %.4f\n", stamp(start), stamp(end), mb, mb/secs, n, float64(n)/secs,
				fetchStart.Sub(start).Milliseconds(), end.Sub(fetchStart).Milliseconds(), mb/max(fsecs, 1e-9), float64(n)/max(fsecs, 1e-9))
			if n < messages {
				fmt.Fprintf(os.Stderr, "consumed %d of %d records before --timeout\n", n, messages)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&topic, "topic", "", "topic to consume")
	f.Int64Var(&messages, "messages", 0, "records to consume")
	f.StringVar(&isolation, "isolation-level", "read_uncommitted", "read_uncommitted or read_committed")
	f.DurationVar(&timeout, "timeout", 10*time.Second, "stop when nothing arrived for this long")
	f.BoolVar(&hideHeader, "hide-header", false, "do not print the header line")
	return cmd
}

// perfE2ECmd measures produce → read_committed consume latency at a fixed
// offered load (like kafka-e2e-latency, but open-loop and transactional).
func perfE2ECmd() *cobra.Command {
	var topic, txnID, isolation, acks string
	var props []string
	var rate float64
	var duration time.Duration
	var warmup int64
	var size, txnMs int
	cmd := &cobra.Command{
		Use:   "e2e",
		Short: "End-to-end latency from produce to a consumer, at a fixed offered load",
		RunE: func(cmd *cobra.Command, args []string) error {
			if topic == "" {
				return fmt.Errorf("--topic is required")
			}
			iso, err := isolationOpt(isolation)
			if err != nil {
				return err
			}
			ctx, stop := signalContext()
			defer stop()
			boot := bootstrap(cmd)
			popts, err := producerOpts(props, acks)
			if err != nil {
				return err
			}
			popts = append(secure(client.Bootstrap(boot...)), popts...)
			if txnID != "" {
				popts = append(popts, client.TransactionalID(txnID))
			}
			p, err := client.NewProducer(popts...)
			if err != nil {
				return err
			}
			defer p.Close(context.Background())
			adm, err := newAdmin(cmd)
			if err != nil {
				return err
			}
			md, err := perfTopic(ctx, cmd, topic)
			if err != nil {
				adm.Close()
				return err
			}
			var tps []client.TopicPartition
			assign := map[client.TopicPartition]int64{}
			for _, pt := range md.Topics[0].Partitions {
				tp := client.TopicPartition{Topic: topic, Partition: pt.Partition}
				tps = append(tps, tp)
			}
			ends, err := adm.ListOffsets(ctx, tps, client.OffsetLatest, client.ReadUncommitted)
			adm.Close()
			if err != nil {
				return err
			}
			for _, tp := range tps {
				assign[tp] = ends[tp].HighWatermark
			}
			c, err := client.NewConsumer(secure(client.Bootstrap(boot...), iso, client.FetchMaxWait(100*time.Millisecond))...)
			if err != nil {
				return err
			}
			defer c.Close(context.Background())
			c.Assign(assign)
			hist := perf.NewHistogram()
			var sentN, recvN atomic.Int64
			// Records sent before steadyFrom (ns) are the warm-up: received
			// and counted, but left out of the latencies.
			var steadyFrom atomic.Int64
			if warmup > 0 {
				steadyFrom.Store(math.MaxInt64)
			}
			cctx, cancel := context.WithCancel(ctx)
			defer cancel()
			recvDone := make(chan struct{})
			go func() {
				defer close(recvDone)
				for cctx.Err() == nil {
					recs, err := c.Poll(cctx)
					if err != nil {
						return
					}
					now := time.Now().UnixNano()
					for _, r := range recs {
						if len(r.Value) >= 8 {
							var ns int64
							for i := 0; i < 8; i++ {
								ns = ns<<8 | int64(r.Value[i])
							}
							recvN.Add(1)
							if ns >= steadyFrom.Load() {
								hist.Record(time.Duration(now - ns))
							}
						}
					}
				}
			}()
			if txnID != "" {
				if err := p.InitTransactions(ctx); err != nil {
					return err
				}
				if err := p.BeginTransaction(); err != nil {
					return err
				}
				if txnMs <= 0 {
					txnMs = 100
				}
			}
			throttle := perf.NewThrottle(rate)
			deadline := time.Now().Add(duration)
			txnStart := time.Now()
			for time.Now().Before(deadline) && ctx.Err() == nil {
				throttle.Wait()
				v := make([]byte, max(size, 8))
				ns := time.Now().UnixNano()
				ns0 := ns
				for i := 7; i >= 0; i-- {
					v[i] = byte(ns)
					ns >>= 8
				}
				if warmup > 0 && sentN.Load() == warmup {
					steadyFrom.Store(ns0)
				}
				p.Produce(ctx, &client.Record{Topic: topic, Value: v}, nil)
				sentN.Add(1)
				if txnID != "" && time.Since(txnStart) >= time.Duration(txnMs)*time.Millisecond {
					if err := p.CommitTransaction(ctx); err != nil {
						return err
					}
					if err := p.BeginTransaction(); err != nil {
						return err
					}
					txnStart = time.Now()
				}
			}
			if txnID != "" {
				if err := p.CommitTransaction(ctx); err != nil {
					return err
				}
			}
			_ = p.Flush(ctx)
			for i := 0; i < 100 && recvN.Load() < sentN.Load(); i++ {
				time.Sleep(50 * time.Millisecond)
			}
			cancel()
			<-recvDone
			fmt.Printf("Avg latency: %.4f ms\n", ms(hist.Mean()))
			fmt.Printf("Percentiles: 50th = %.2f, 99th = %.2f, 99.9th = %.2f (ms)\n", ms(hist.Quantile(0.5)), ms(hist.Quantile(0.99)), ms(hist.Quantile(0.999)))
			fmt.Printf("(%d records at %.0f records/s offered, %d received)\n", sentN.Load(), rate, recvN.Load())
			if warmup > 0 {
				fmt.Printf("(latencies leave out the first %d records, the warm-up)\n", warmup)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&topic, "topic", "", "topic")
	f.Float64Var(&rate, "throughput", 1000, "records/s to offer")
	f.DurationVar(&duration, "duration", 30*time.Second, "how long to run")
	f.IntVar(&size, "record-size", 1024, "record size in bytes (at least 8)")
	f.StringVar(&txnID, "transactional-id", "", "produce in transactions")
	f.IntVar(&txnMs, "transaction-duration-ms", 0, "commit every this many ms (default 100 with --transactional-id)")
	f.StringVar(&isolation, "isolation-level", "read_committed", "the consumer's isolation level")
	f.StringVar(&acks, "acks", "all", "acks: all, 1 or 0")
	f.StringArrayVar(&props, "producer-props", nil, "producer properties key=value, as for perf produce")
	f.Int64Var(&warmup, "warmup-records", 0, "leave the first N records (the producer's and consumer's start) out of the latencies")
	return cmd
}

// firstError keeps the first of the errors reported by concurrent
// callbacks. (An atomic.Value panics when a later error has another
// concrete type than the first one: it did in perf produce.)
type firstError struct{ p atomic.Pointer[error] }

func (f *firstError) set(err error) {
	if err != nil {
		f.p.CompareAndSwap(nil, &err)
	}
}

func (f *firstError) get() error {
	if e := f.p.Load(); e != nil {
		return *e
	}
	return nil
}
