package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/strand-io/strand/app/perf"
	"github.com/strand-io/strand/client"
)

// perfScaleCmd is `strand perf scale`: many producers and many consumers
// in groups at once, on one topic, reporting the aggregate rate and how
// evenly the clients got served (scripts/bench-scale.sh's client-scale probe).
func perfScaleCmd() *cobra.Command {
	var topic, acks, groupPrefix string
	var producers, partsPer, consumers, groups, size int
	var duration, drain, joinTimeout time.Duration
	var props []string
	cmd := &cobra.Command{
		Use:   "scale",
		Short: "Many producers and consumer groups at once: aggregate throughput and per-client fairness",
		Long: `Start --consumers consumers in --groups consumer groups (the same number
in each) subscribed to --topic, wait until every consumer has partitions,
then run --producers producers for --duration, unthrottled, each writing
--record-size records round-robin over its own --partitions-per-producer
partitions (producer i: partitions i*k … i*k+k-1, so the topic needs at
least producers × k partitions). After the producers stop, the consumers
read for up to --drain more. It reports the aggregate produce rate, each
group's consume rate, and per-client min / max records with their ratio
(1 is perfectly even; near 0, a client was starved).`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if topic == "" || producers <= 0 || partsPer <= 0 || size <= 0 {
				return fmt.Errorf("--topic, --producers, --partitions-per-producer and --record-size are required")
			}
			if consumers > 0 && (groups <= 0 || consumers%groups != 0) {
				return fmt.Errorf("--consumers must be a multiple of --groups")
			}
			ctx, stop := signalContext()
			defer stop()
			md, err := perfTopic(ctx, cmd, topic)
			if err != nil {
				return err
			}
			if n := len(md.Topics[0].Partitions); n < producers*partsPer {
				return fmt.Errorf("topic %s has %d partitions; %d producers × %d need %d", topic, n, producers, partsPer, producers*partsPer)
			}
			popts, err := producerOpts(props, acks)
			if err != nil {
				return err
			}
			if pp, _ := parseProducerProps(props); pp.buffer == 0 {
				// 32 MiB each would be gigabytes for a hundred producers.
				popts = append(popts, client.BufferMemory(1<<20))
			}
			boot := bootstrap(cmd)

			// Consumers first, and every one with partitions before any record.
			cctx, cancel := context.WithCancel(ctx)
			defer cancel()
			run := fmt.Sprintf("%s-%d", groupPrefix, time.Now().UnixNano())
			cons := make([]*client.Consumer, consumers)
			counts := make([]atomic.Int64, consumers)
			var assigned atomic.Int64
			for i := range cons {
				var once sync.Once
				c, err := client.NewConsumer(secure(client.Bootstrap(boot...), client.GroupID(fmt.Sprintf("%s-g%d", run, i%groups)),
					client.Topics(topic), client.AutoOffsetReset(client.ResetLatest), client.MaxPollRecords(10000),
					client.OnPartitionsAssigned(func(tps []client.TopicPartition) {
						if len(tps) > 0 {
							once.Do(func() { assigned.Add(1) })
						}
					}))...)
				if err != nil {
					return err
				}
				cons[i] = c
				defer c.Close(context.Background())
			}
			var cwg sync.WaitGroup
			for i, c := range cons {
				cwg.Add(1)
				go func() {
					defer cwg.Done()
					for cctx.Err() == nil {
						recs, err := c.Poll(cctx)
						if err != nil {
							if cctx.Err() == nil {
								fmt.Printf("consumer %d: %v\n", i, err)
								time.Sleep(100 * time.Millisecond)
							}
							continue
						}
						counts[i].Add(int64(len(recs)))
					}
				}()
			}
			defer func() { cancel(); cwg.Wait() }()
			joinStart := time.Now()
			for consumers > 0 && assigned.Load() < int64(consumers) {
				if time.Since(joinStart) > joinTimeout {
					return fmt.Errorf("%d of %d consumers have partitions after %s", assigned.Load(), consumers, joinTimeout)
				}
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(100 * time.Millisecond):
				}
			}
			if consumers > 0 {
				fmt.Printf("%d consumers in %d groups have partitions after %.1f s.\n", consumers, groups, time.Since(joinStart).Seconds())
				time.Sleep(time.Second) // let each resolve its start offsets
			}
			for i := range counts {
				counts[i].Store(0)
			}

			// Producers.
			payload := make([]byte, size)
			for i := range payload {
				payload[i] = byte('a' + i%26)
			}
			prods := make([]*client.Producer, producers)
			for i := range prods {
				p, err := client.NewProducer(append(secure(client.Bootstrap(boot...), client.WithPartitioner(client.ManualPartitioner{})), popts...)...)
				if err != nil {
					return err
				}
				prods[i] = p
				defer p.Close(context.Background())
			}
			// Each producer's start (metadata, producer id, connections)
			// before the clock starts: one record each, acknowledged.
			var wwg sync.WaitGroup
			werr := make([]error, producers)
			for i, p := range prods {
				wwg.Add(1)
				go func() {
					defer wwg.Done()
					p.Produce(ctx, &client.Record{Topic: topic, Partition: int32(i * partsPer), Value: payload}, func(_ *client.Record, err error) { werr[i] = err })
					if err := p.Flush(ctx); err != nil && werr[i] == nil {
						werr[i] = err
					}
				}()
			}
			wwg.Wait()
			if err := errors.Join(werr...); err != nil {
				return fmt.Errorf("warming the producers up: %w", err)
			}
			for i := range counts {
				counts[i].Store(0)
			}
			acked := make([]atomic.Int64, producers)
			var failed atomic.Int64
			var firstErr firstError
			lat := perf.NewHistogram()
			var latMu sync.Mutex
			pctx, pcancel := context.WithTimeout(ctx, duration)
			defer pcancel()
			start := time.Now()
			var pwg sync.WaitGroup
			for i, p := range prods {
				pwg.Add(1)
				go func() {
					defer pwg.Done()
					// Round-robin over its partitions, a run of records on each
					// of a grown batch's worth (batch.max.size, 256 KiB), as the
					// SDK's sticky partitioner stays on a partition while its
					// batch grows; runs of 16 KiB made every batch 16 KiB, and
					// a broker pays per batch.
					per := max(1, 262144/size)
					for k := 0; pctx.Err() == nil; k++ {
						sent := time.Now()
						part := int32(i*partsPer + (k/per)%partsPer)
						p.Produce(pctx, &client.Record{Topic: topic, Partition: part, Value: payload}, func(_ *client.Record, err error) {
							if err != nil {
								if !(pctx.Err() != nil && isCanceled(err)) {
									failed.Add(1)
									firstErr.set(err)
								}
								return
							}
							acked[i].Add(1)
							latMu.Lock()
							lat.Record(time.Since(sent))
							latMu.Unlock()
						})
					}
				}()
			}
			pwg.Wait()
			fctx, fcancel := context.WithTimeout(ctx, 30*time.Second)
			for _, p := range prods {
				_ = p.Flush(fctx)
			}
			fcancel()
			elapsed := time.Since(start).Seconds()
			var total int64
			pc := make([]int64, producers)
			for i := range acked {
				pc[i] = acked[i].Load()
				total += pc[i]
			}
			// Consumers: until each group has what was produced, or --drain.
			dl := time.Now().Add(drain)
			groupSum := func(g int) (n int64) {
				for i := g; i < consumers; i += groups {
					n += counts[i].Load()
				}
				return n
			}
			for time.Now().Before(dl) && ctx.Err() == nil {
				all := true
				for g := 0; g < groups; g++ {
					all = all && groupSum(g) >= total
				}
				if all {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			celapsed := time.Since(start).Seconds()
			cancel()
			cwg.Wait()

			mn, mx := minMax(pc)
			fmt.Printf("%d producers: %d records acknowledged in %.1f s, %.1f records/sec (%.2f MB/sec) aggregate; per producer min %d, max %d, min/max %.2f; send → ack p50 %.2f ms, p99 %.2f ms.\n",
				producers, total, elapsed, float64(total)/elapsed, float64(total)*float64(size)/elapsed/(1<<20), mn, mx, ratio(mn, mx),
				ms(lat.Quantile(0.5)), ms(lat.Quantile(0.99)))
			if consumers > 0 {
				cc := make([]int64, consumers)
				var ctotal int64
				for i := range counts {
					cc[i] = counts[i].Load()
					ctotal += cc[i]
				}
				cmn, cmx := minMax(cc)
				fmt.Printf("%d consumers in %d groups: %d records consumed in %.1f s, %.1f records/sec aggregate; per consumer min %d, max %d, min/max %.2f.\n",
					consumers, groups, ctotal, celapsed, float64(ctotal)/celapsed, cmn, cmx, ratio(cmn, cmx))
				for g := 0; g < groups; g++ {
					fmt.Printf("group %d: %d of %d records.\n", g, groupSum(g), total)
				}
			}
			if f := failed.Load(); f > 0 {
				return fmt.Errorf("%d records failed; first: %v", f, firstErr.get())
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&topic, "topic", "", "topic (at least producers × partitions-per-producer partitions)")
	f.IntVar(&producers, "producers", 100, "producers")
	f.IntVar(&partsPer, "partitions-per-producer", 10, "partitions each producer writes to")
	f.IntVar(&consumers, "consumers", 30, "consumers (0: none)")
	f.IntVar(&groups, "groups", 3, "consumer groups the consumers are split into")
	f.IntVar(&size, "record-size", 1024, "record size in bytes")
	f.DurationVar(&duration, "duration", 20*time.Second, "how long the producers run")
	f.DurationVar(&drain, "drain", 20*time.Second, "how long the consumers may take to catch up after the producers stop")
	f.DurationVar(&joinTimeout, "join-timeout", 60*time.Second, "how long the consumers may take to get partitions")
	f.StringVar(&acks, "acks", "all", "all, 1 or 0")
	f.StringVar(&groupPrefix, "group-prefix", "perf-scale", "consumer group names start with this (a run's own suffix follows)")
	f.StringArrayVar(&props, "producer-props", nil, "producer properties key=value, as for perf produce (buffer.memory defaults to 1 MiB here)")
	return cmd
}

func minMax(v []int64) (mn, mx int64) {
	if len(v) == 0 {
		return 0, 0
	}
	s := append([]int64(nil), v...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[0], s[len(s)-1]
}

func ratio(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// isCanceled: a record refused because the run's time was up while it
// waited for buffer.memory, not a failure.
func isCanceled(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
