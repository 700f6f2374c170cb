package replication_test

// Real cluster on real time: a benchmark measures real throughput on real sockets,
// disks and CPUs; virtual time would make its numbers meaningless.

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/strand-io/strand/broker/storage/storagetest"
	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/testkit/testcluster"
)

// BenchmarkReassign measures how long moving one partition's replica onto
// a newly added broker takes, per GiB, without and with a replication
// throttle (what `strand reassign-partitions --throttle` sets). Each run
// builds a three-node cluster, fills one partition, adds a fourth
// broker-only node and reassigns the partition's last replica to it; the
// clock runs from the reassignment to its completion (the new replica in
// the ISR and the old one removed).
//
//	STRAND_BENCH_MB            MiB written to the partition (default 64)
//	STRAND_BENCH_THROTTLE_MB   the throttled run's rate in MiB/s (default 16)
//
// go test ./replication -run '^$' -bench Reassign -benchtime 1x
func BenchmarkReassign(b *testing.B) {
	mb := storagetest.EnvInt(b, "STRAND_BENCH_MB", 64)
	thr := storagetest.EnvInt(b, "STRAND_BENCH_THROTTLE_MB", 16)
	b.Run("unthrottled", func(b *testing.B) { benchReassign(b, mb, 0) })
	b.Run(fmt.Sprintf("throttled-%dMiBps", thr), func(b *testing.B) { benchReassign(b, mb, thr) })
}

func benchReassign(b *testing.B, mb, throttleMB int) {
	var total time.Duration
	for range b.N {
		b.StopTimer()
		c := testcluster.New(b, testcluster.Options{})
		c.CreateTopic("move", 1, 3, map[string]string{"segment.bytes": strconv.Itoa(64 << 20)})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		p, err := client.NewProducer(c.ClientOpts(client.BatchMaxSize(1<<20), client.Linger(5*time.Millisecond))...)
		if err != nil {
			b.Fatal(err)
		}
		val := make([]byte, 64<<10)
		n := mb * 16
		for i := 0; i < n; i += 64 {
			var recs []*client.Record
			for j := i; j < i+64 && j < n; j++ {
				recs = append(recs, &client.Record{Topic: "move", Value: val})
			}
			if err := p.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				b.Fatal(err)
			}
		}
		p.Close(ctx)
		c.AddNode(testcluster.NodeSpec{Broker: true})
		adm, err := client.NewAdmin(c.ClientOpts()...)
		if err != nil {
			b.Fatal(err)
		}
		if throttleMB > 0 {
			rate := strconv.Itoa(throttleMB << 20)
			if err := adm.AlterBrokerConfigs(ctx, client.BrokerDefault, map[string]string{
				"leader.replication.throttled.rate": rate, "follower.replication.throttled.rate": rate,
			}, nil); err != nil {
				b.Fatal(err)
			}
			if err := adm.AlterTopicConfigsSetDelete(ctx, "move", map[string]string{
				"leader.replication.throttled.replicas": "*", "follower.replication.throttled.replicas": "*",
			}, nil); err != nil {
				b.Fatal(err)
			}
		}
		reps := append([]int32(nil), c.Partition("move", 0).Replicas...)
		reps[len(reps)-1] = 4
		tp := client.TopicPartition{Topic: "move", Partition: 0}
		b.StartTimer()
		t0 := time.Now()
		res, err := adm.AlterPartitionReassignments(ctx, map[client.TopicPartition][]int32{tp: reps})
		if err == nil {
			err = res[tp]
		}
		if err != nil {
			b.Fatal(err)
		}
		if err := adm.WaitReassignments(ctx, tp); err != nil {
			b.Fatal(err)
		}
		d := time.Since(t0)
		b.StopTimer()
		total += d
		if !c.Partition("move", 0).IsReplica(4) {
			b.Fatalf("node 4 is not a replica after the move: %v", c.Partition("move", 0).Replicas)
		}
		adm.Close()
		cancel()
		c.Close()
	}
	per := total / time.Duration(b.N)
	b.ReportMetric(float64(mb)/per.Seconds(), "MiB/s")
	b.ReportMetric(per.Seconds()*1024/float64(mb), "s/GiB")
}
