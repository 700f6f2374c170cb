package controller_test

// Real cluster on real time: predates the simulation; could run on testcluster's
// MemNet inside synctest; not moved yet.

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/testkit/testcluster"
)

// TestSeparateRoles: three controller-only nodes and two broker-only
// nodes. Brokers find the quorum by gossip, follow metadata over the
// FetchMetadata stream, and serve a replicated topic.
func TestSeparateRoles(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Nodes: 5, Roles: func(id int32) (bool, bool) { return id > 3, id <= 3 }})
	c.CreateTopic("split", 2, 2, nil)
	for _, id := range []int32{1, 2, 3} {
		if c.Member(id).Node.Parts != nil {
			t.Fatalf("controller-only node %d opened a partition table", id)
		}
	}
	for p := int32(0); p < 2; p++ {
		part := c.Partition("split", p)
		for _, r := range part.Replicas {
			if r <= 3 {
				t.Fatalf("partition %d placed on controller-only node %d", p, r)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	prod, err := client.NewProducer(c.ClientOpts(client.Bootstrap(c.Member(4).Cfg.Listen))...)
	if err != nil {
		t.Fatal(err)
	}
	var recs []*client.Record
	for i := 0; i < 50; i++ {
		recs = append(recs, &client.Record{Topic: "split", Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprint(i))})
	}
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	prod.Close(ctx)
	// The active controller moves; brokers keep following.
	old := c.ActiveController()
	c.Kill(old)
	c.Eventually(20*time.Second, "new active controller", func() bool { a := c.ActiveController(); return a >= 0 && a != old })
	c.CreateTopic("split2", 1, 2, nil)
}
