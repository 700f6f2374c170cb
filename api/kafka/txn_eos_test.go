package kafka_test

// Real cluster on real time: its franz-go and raw Kafka-wire clients dial TCP. They could dial
// MemNet's listeners through a custom dialer inside synctest, as testkit/sim's workload does; not moved yet.

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/strand-io/strand/testkit/testcluster"
	"github.com/strand-io/strand/testkit/wait"
)

// TestTxnConsumeTransformProduce: franz-go's GroupTransactSession, a
// consumer group member whose produced records and consumed offsets commit
// in one transaction (exactly once), under both transaction versions:
// version 2 commits its offsets with TxnOffsetCommit v5 (the offsets
// partition added implicitly), version 1 adds it first with
// AddOffsetsToTxn and commits with TxnOffsetCommit v4 (the group
// coordinator only verifies). Each transaction's offsets and records
// become visible together: the group's committed offset is the end of the
// input, and read_committed reads every input record transformed exactly
// once.
func TestTxnConsumeTransformProduce(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	for _, tc := range []struct {
		name string
		tv1  bool
	}{{"tv2", false}, {"tv1", true}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			in, out, group := "eos-in-"+tc.name, "eos-out-"+tc.name, "eos-"+tc.name
			c.CreateTopic(in, 2, 3, nil)
			c.CreateTopic(out, 2, 3, nil)
			const n = 40
			p, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()...), kgo.DefaultProduceTopic(in), kgo.RecordPartitioner(kgo.ManualPartitioner()))
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			for i := range n {
				if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("in-%d", i)), Partition: int32(i % 2)}).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}

			opts := []kgo.Opt{kgo.SeedBrokers(c.KafkaAddrs()...), kgo.TransactionalID("eos-" + tc.name), kgo.ConsumerGroup(group),
				kgo.ConsumeTopics(in), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
				kgo.DefaultProduceTopic(out), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionTimeout(time.Minute)}
			if tc.tv1 {
				v := kversion.Stable()
				v.SetMaxKeyVersion(int16(kmsg.Produce), 11)
				v.SetMaxKeyVersion(int16(kmsg.EndTxn), 4)
				v.SetMaxKeyVersion(int16(kmsg.TxnOffsetCommit), 4)
				opts = append(opts, kgo.MaxVersions(v))
			}
			sess, err := kgo.NewGroupTransactSession(opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer sess.Close()
			if err := sess.Client().Ping(ctx); err != nil {
				t.Fatal(err)
			}
			consumed := 0
			for consumed < n {
				fs := sess.PollFetches(ctx)
				if err := ctx.Err(); err != nil {
					t.Fatalf("consumed %d of %d: %v", consumed, n, err)
				}
				fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
				if fs.NumRecords() == 0 {
					continue
				}
				if err := sess.Begin(); err != nil {
					t.Fatal(err)
				}
				fs.EachRecord(func(r *kgo.Record) {
					sess.Produce(ctx, &kgo.Record{Value: []byte("out-" + string(r.Value)), Partition: r.Partition}, func(_ *kgo.Record, err error) {
						if err != nil {
							t.Errorf("produce: %v", err)
						}
					})
				})
				committed, err := sess.End(ctx, kgo.TryCommit)
				if err != nil || !committed {
					t.Fatalf("end of a transaction of %d records: committed %v, %v", fs.NumRecords(), committed, err)
				}
				consumed += fs.NumRecords()
			}

			// require_stable: answered UNSTABLE_OFFSET_COMMIT until the last
			// transaction's offset commit is settled by its marker.
			committedAt := map[int32]int64{}
			wait.Eventually(t, 20*time.Second, "the group's offsets are stable", func() bool {
				req := kmsg.NewPtrOffsetFetchRequest()
				req.Group, req.RequireStable = group, true
				rt := kmsg.NewOffsetFetchRequestTopic()
				rt.Topic, rt.Partitions = in, []int32{0, 1}
				req.Topics = append(req.Topics, rt)
				resp, err := req.RequestWith(ctx, p)
				if err != nil {
					t.Fatal(err)
				}
				var topics []kmsg.OffsetFetchResponseTopic
				if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
					if errors.Is(err, kerr.UnstableOffsetCommit) {
						return false
					}
					t.Fatalf("OffsetFetch: %v", err)
				}
				topics = resp.Topics
				for _, rt := range topics {
					for _, rp := range rt.Partitions {
						if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
							if errors.Is(err, kerr.UnstableOffsetCommit) {
								return false
							}
							t.Fatalf("OffsetFetch %s/%d: %v", rt.Topic, rp.Partition, err)
						}
						committedAt[rp.Partition] = rp.Offset
					}
				}
				return true
			})
			if want := map[int32]int64{0: n / 2, 1: n / 2}; fmt.Sprint(committedAt) != fmt.Sprint(want) {
				t.Fatalf("the group's committed offsets of %s are %v, want %v", in, committedAt, want)
			}
			got := readCommitted(t, ctx, c, out, 2)
			for part := int32(0); part < 2; part++ {
				var want []string
				for i := int(part); i < n; i += 2 {
					want = append(want, fmt.Sprintf("out-in-%d", i))
				}
				if fmt.Sprint(got[part]) != fmt.Sprint(want) {
					t.Fatalf("read_committed read %v from %s/%d, want %v", got[part], out, part, want)
				}
			}
		})
	}
}
