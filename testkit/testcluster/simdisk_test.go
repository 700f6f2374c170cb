package testcluster

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/strand-io/strand/client"
)

// A MemNet cluster on simulated disks, inside a synctest bubble: the
// brokers' logs live on each node's simdisk (none in the real directory),
// and a node killed (its disk crashed: what it had not fsynced is gone)
// restarts, recovers and serves every record acknowledged before.
func TestClusterOnSimDisks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New(t, Options{MemNet: true, SimDisk: true})
		defer c.Close()
		c.CreateTopic("d", 1, 3, map[string]string{"min.insync.replicas": "2"})
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		p, err := client.NewProducer(c.ClientOpts(client.WithPartitioner(client.ManualPartitioner{}))...)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close(ctx)
		var recs []*client.Record
		for i := range 10 {
			recs = append(recs, &client.Record{Topic: "d", Partition: 0, Value: []byte(strconv.Itoa(i))})
		}
		if err := p.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		m := c.Member(1)
		if es, err := m.Disk.ReadDir(filepath.Join(m.Dir, "d-0")); err != nil || len(es) == 0 {
			t.Fatalf("node 1's simulated disk holds no log of d-0: %v %v", es, err)
		}
		if _, err := os.Stat(filepath.Join(m.Dir, "d-0")); !os.IsNotExist(err) {
			t.Fatalf("d-0 is on the real disk: %v", err)
		}
		c.Kill(1)
		c.Start(1)
		c.WaitReady(time.Minute)
		cons, err := client.NewConsumer(c.ClientOpts()...)
		if err != nil {
			t.Fatal(err)
		}
		defer cons.Close(ctx)
		cons.Assign(map[client.TopicPartition]int64{{Topic: "d", Partition: 0}: client.OffsetEarliest})
		for n := 0; n < 10; {
			got, err := cons.Poll(ctx)
			if err != nil {
				t.Fatal(err)
			}
			n += len(got)
		}
		cons.Close(ctx)
		p.Close(ctx)
		c.Close()
		time.Sleep(10 * time.Second) // as in TestClusterOnVirtualTime
	})
}
