package replication_test

// Real cluster on real time: a replication throttle is real bytes per real second;
// virtual time would say nothing about the rate.

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/internal/config"
	"github.com/strand-io/strand/node"
	"github.com/strand-io/strand/testkit/testcluster"
	"github.com/strand-io/strand/testkit/wait"
)

// TestReplicationThrottle: a broker catching up after a restart is held
// to the replication throttle on a throttled partition (leader side: the
// leader's leader.replication.throttled.rate; follower side: its own
// follower.replication.throttled.rate), while an unthrottled partition
// catches up at full speed; removing the rate (a dynamic broker config,
// no restart) lets the throttled one finish.
func TestReplicationThrottle(t *testing.T) {
	const (
		records = 600
		size    = 1000
		rate    = 100_000 // bytes/s
	)
	for _, side := range []string{"leader", "follower"} {
		t.Run(side, func(t *testing.T) {
			c := testcluster.New(t, testcluster.Options{Mutate: func(_ int32, cfg *node.Config) {
				cfg.ReplicationConfig.FetchMaxBytes = 16 << 10 // replica.fetch.max.bytes: the most one fetch overshoots by
			}})
			c.CreateTopic("thr", 1, 3, nil)
			c.CreateTopic("free", 1, 3, nil)
			adm, err := client.NewAdmin(c.ClientOpts()...)
			if err != nil {
				t.Fatal(err)
			}
			defer adm.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			if err := adm.AlterTopicConfigsSetDelete(ctx, "thr", map[string]string{config.LeaderThrottledReplicas: "*", config.FollowerThrottledReplicas: "0:3"}, nil); err != nil {
				t.Fatal(err)
			}
			rateID, rateName := client.BrokerDefault, config.LeaderThrottledRate
			if side == "follower" {
				rateID, rateName = 3, config.FollowerThrottledRate
			}
			if err := adm.AlterBrokerConfigs(ctx, rateID, map[string]string{rateName: fmt.Sprint(rate)}, nil); err != nil {
				t.Fatal(err)
			}

			c.Stop(3)
			for _, topic := range []string{"thr", "free"} {
				c.Eventually(20*time.Second, "broker 3 out of the ISR of "+topic, func() bool {
					p := c.Partition(topic, 0)
					return p != nil && !p.InISR(3) && p.Leader != 3 && p.Leader >= 0
				})
			}
			p, err := client.NewProducer(c.ClientOpts()...)
			if err != nil {
				t.Fatal(err)
			}
			var recs []*client.Record
			for i := 0; i < records; i++ {
				for _, topic := range []string{"thr", "free"} {
					recs = append(recs, &client.Record{Topic: topic, Value: make([]byte, size)})
				}
			}
			if err := p.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			p.Close(ctx)

			start := time.Now()
			c.Start(3)
			leo := func(topic string) int64 {
				if l := c.Log(3, topic, 0); l != nil {
					return l.LogEndOffset()
				}
				return -1
			}
			// The unthrottled partition is not held back.
			c.Eventually(15*time.Second, "the unthrottled partition caught up", func() bool { return leo("free") == records })
			freeTook := time.Since(start)
			// The throttled one: at the rate, the ~600 KB take about 5 s
			// (the quota lets about a second's bytes through at first, and
			// one fetch may overshoot by 16 KiB). Lower bound with slack: 3 s.
			// A bounded wait for what must not happen: the rate is real
			// bytes per real second on this cluster's sockets.
			held := 3 * time.Second
			if wait.Until(held-time.Since(start), "the throttled partition to catch up", func() bool { return leo("thr") >= records }) == nil {
				t.Fatalf("the throttled partition caught up in %v (%d records of %d bytes at %d B/s; the unthrottled one took %v)", time.Since(start), records, size, rate, freeTook)
			}
			if n := leo("thr"); n <= 0 {
				t.Fatalf("the throttled partition made no progress in %v (LEO %d): throttled is not stopped", held, n)
			}
			// Lifting the throttle takes effect without a restart.
			if err := adm.AlterBrokerConfigs(ctx, rateID, nil, []string{rateName}); err != nil {
				t.Fatal(err)
			}
			c.Eventually(5*time.Second, "the throttled partition caught up once the rate is removed", func() bool { return leo("thr") == records })
			// The bytes moved under the throttle are counted.
			var counted int64
			for _, m := range c.Running() {
				_, _, lb, fb := m.Node.Repl.ReplicationThrottle()
				if side == "leader" {
					counted += lb
				} else {
					counted += fb
				}
			}
			if counted <= 0 {
				t.Fatalf("no bytes counted under the %s throttle", side)
			}
			t.Logf("%s side: unthrottled caught up in %v; throttled held past %v; %d bytes counted", side, freeTook, held, counted)
		})
	}
}
