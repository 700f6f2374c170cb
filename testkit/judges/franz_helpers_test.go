package judges

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strand-io/strand/testkit/testutil"
	"github.com/strand-io/strand/testkit/wait"
)

// kgoLogger hands franz-go's log lines to the test logger (quiet unless
// STRAND_TEST_LOG is set), so a failing run can be replayed with the
// client's view of it.
type kgoLogger struct{ l *slog.Logger }

func (kgoLogger) Level() kgo.LogLevel { return kgo.LogLevelInfo }

func (k kgoLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	lvl := slog.LevelDebug
	switch level {
	case kgo.LogLevelError:
		lvl = slog.LevelError
	case kgo.LogLevelWarn:
		lvl = slog.LevelWarn
	case kgo.LogLevelInfo:
		lvl = slog.LevelInfo
	}
	k.l.Log(context.Background(), lvl, "kgo: "+msg, keyvals...)
}

// franzOpts are the options every franz-go client of these tests starts
// from: the cluster's Kafka listeners as seeds, and every connection
// dialled through the cluster's fault network as endpoint, so a test can
// cut one client off (c.Net.Isolate(endpoint)) as a crash would; over TLS
// and with SASL when the target says so.
func franzOpts(c *Target, endpoint string) []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.KafkaAddrs()...),
		kgo.ClientID(endpoint),
		kgo.Dialer(func(ctx context.Context, _, host string) (net.Conn, error) {
			conn, err := c.Net.Dial(ctx, endpoint, host)
			if err != nil {
				return nil, err
			}
			return c.dialTLS(ctx, conn, host)
		}),
		kgo.WithLogger(kgoLogger{testutil.Logger().With("client", endpoint)}),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
	}
	if m := c.saslMechanism(); m != nil {
		opts = append(opts, kgo.SASL(m))
	}
	return opts
}

// newFranz starts a franz-go client or fails the test.
func newFranz(t testing.TB, c *Target, endpoint string, extra ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append(franzOpts(c, endpoint), extra...)...)
	if err != nil {
		t.Fatalf("franz-go client %s: %v", endpoint, err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// endOffsets asks the partitions' leaders, through the Kafka listener, for
// the end of each partition of topic: the high watermark when committed is
// false, the last stable offset when it is true.
func endOffsets(ctx context.Context, cl *kgo.Client, topic string, partitions int32, committed bool) (map[int32]int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	if committed {
		req.IsolationLevel = 1
	}
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for p := int32(0); p < partitions; p++ {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition = p
		rp.Timestamp = -1 // latest
		rp.CurrentLeaderEpoch = -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				return nil, fmt.Errorf("list offsets %s[%d]: error code %d", t.Topic, p.Partition, p.ErrorCode)
			}
			out[p.Partition] = p.Offset
		}
	}
	if len(out) != int(partitions) {
		return nil, fmt.Errorf("list offsets %s: %d partitions answered, want %d", topic, len(out), partitions)
	}
	return out, nil
}

// readAll reads every partition of topic from its start up to its end as
// endOffsets gives it (read_committed when committed), with a fresh
// franz-go consumer, and returns the data records (control records are
// read to know where the consumer is, and left out). The end is taken
// once, before reading: callers read a topic nobody writes to any more.
func readAll(t testing.TB, ctx context.Context, c *Target, endpoint, topic string, partitions int32, committed bool) []*kgo.Record {
	t.Helper()
	iso := kgo.ReadUncommitted()
	if committed {
		iso = kgo.ReadCommitted()
	}
	cl := newFranz(t, c, endpoint, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(iso), kgo.KeepControlRecords(), kgo.FetchMaxWait(200*time.Millisecond))
	defer cl.Close()
	var ends map[int32]int64
	wait.EventuallyNil(t, 30*time.Second, "the end offsets of "+topic, func() (err error) {
		ends, err = endOffsets(ctx, cl, topic, partitions, committed)
		return err
	})
	next := map[int32]int64{}
	done := func() bool {
		for p, end := range ends {
			if next[p] < end {
				return false
			}
		}
		return true
	}
	var out []*kgo.Record
	for !done() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s: %v (read up to %v of %v)", topic, ctx.Err(), next, ends)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Logf("reading %s[%d]: %v", tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			next[r.Partition] = r.Offset + 1
			if !r.Attrs.IsControl() && r.Offset < ends[r.Partition] {
				out = append(out, r)
			}
		})
	}
	return out
}
