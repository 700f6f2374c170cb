package replication_test

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

func TestReplicatesToEveryReplica(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	c.CreateTopic("r3", 3, 3, map[string]string{"min.insync.replicas": "2"})
	p, err := client.NewProducer(c.ClientOpts()...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var recs []*client.Record
	for i := 0; i < 300; i++ {
		recs = append(recs, &client.Record{Topic: "r3", Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprint(i))})
	}
	if err := p.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	p.Close(ctx)
	for part := int32(0); part < 3; part++ {
		c.Eventually(10*time.Second, "replicas converge", func() bool {
			var leo []int64
			for id := int32(1); id <= 3; id++ {
				l := c.Log(id, "r3", part)
				if l == nil {
					return false
				}
				leo = append(leo, l.LogEndOffset())
			}
			return leo[0] == leo[1] && leo[1] == leo[2] && leo[0] > 0
		})
	}
}
