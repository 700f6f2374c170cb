package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/coordinator"
	"github.com/strand-io/strand/coordinator/txn"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
)

func init() { extraCommands = append(extraCommands, demoCmd) }

// demoCmd runs the exactly-once demo: transaction A (c1..c3) committed, B
// (a1..a3) aborted, C (c4..c5) committed, on one partition, showing the HW
// and LSO while B is open, what each isolation level reads, the batches in
// the log and the transaction log records.
func demoCmd() *cobra.Command {
	var topic, txnID string
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the exactly-once demo against a cluster",
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := timeoutContext(cmd, 2*time.Minute)
			defer cancel()
			boot := bootstrap(cmd)
			adm, err := client.NewAdmin(secure(client.Bootstrap(boot...))...)
			if err != nil {
				return err
			}
			defer adm.Close()
			md, err := adm.Metadata(ctx, false)
			if err != nil {
				return err
			}
			live := 0
			for _, b := range md.Brokers {
				if !b.Fenced {
					live++
				}
			}
			rf, minISR := int32(min(3, live)), "1"
			if rf >= 3 {
				minISR = "2"
			}
			_ = adm.DeleteTopic(ctx, topic)
			if err := adm.CreateTopic(ctx, client.TopicSpec{Name: topic, Partitions: 1, ReplicationFactor: rf, Configs: map[string]string{"min.insync.replicas": minISR}}); err != nil {
				return fmt.Errorf("create %s: %w", topic, err)
			}
			fmt.Printf("== topic %s: 1 partition, replication factor %d, min.insync.replicas %s\n", topic, rf, minISR)
			p, err := client.NewProducer(secure(client.Bootstrap(boot...), client.TransactionalID(txnID), client.WithPartitioner(client.ManualPartitioner{}))...)
			if err != nil {
				return err
			}
			defer p.Close(context.Background())
			if err := p.InitTransactions(ctx); err != nil {
				return err
			}
			pid, epoch := p.ProducerID()
			fmt.Printf("== InitTransactions(%q): producer id %d, epoch %d\n", txnID, pid, epoch)
			tp := client.TopicPartition{Topic: topic, Partition: 0}
			marks := func() string {
				lo, err := adm.ListOffsets(ctx, []client.TopicPartition{tp}, client.OffsetLatest, client.ReadCommitted)
				if err != nil {
					return err.Error()
				}
				o := lo[tp]
				return fmt.Sprintf("HW %d, LSO %d", o.HighWatermark, o.LastStableOffset)
			}
			run := func(name string, commit bool, vals ...string) error {
				if err := p.BeginTransaction(); err != nil {
					return err
				}
				var recs []*client.Record
				for _, v := range vals {
					recs = append(recs, &client.Record{Topic: topic, Partition: 0, Value: []byte(v)})
				}
				if err := p.ProduceSync(ctx, recs...).FirstErr(); err != nil {
					return err
				}
				_, e := p.ProducerID()
				fmt.Printf("== transaction %s (epoch %d) wrote %s; while open: %s\n", name, e, strings.Join(vals, " "), marks())
				if commit {
					err = p.CommitTransaction(ctx)
				} else {
					err = p.AbortTransaction(ctx)
				}
				if err != nil {
					return err
				}
				fmt.Printf("   %s %s\n", map[bool]string{true: "committed", false: "aborted"}[commit], name)
				return nil
			}
			if err := run("A", true, "c1", "c2", "c3"); err != nil {
				return err
			}
			if err := run("B", false, "a1", "a2", "a3"); err != nil {
				return err
			}
			if err := run("C", true, "c4", "c5"); err != nil {
				return err
			}
			for i := 0; i < 200; i++ {
				lo, err := adm.ListOffsets(ctx, []client.TopicPartition{tp}, client.OffsetLatest, client.ReadCommitted)
				if err == nil && lo[tp].LastStableOffset == lo[tp].HighWatermark && lo[tp].HighWatermark == 11 {
					break
				}
				time.Sleep(25 * time.Millisecond)
			}
			fmt.Printf("== after the markers: %s\n", marks())
			for _, iso := range []client.IsolationLevel{client.ReadUncommitted, client.ReadCommitted} {
				vals, pos, err := readDemo(ctx, boot, tp, iso)
				if err != nil {
					return err
				}
				name := map[client.IsolationLevel]string{client.ReadUncommitted: "read_uncommitted", client.ReadCommitted: "read_committed"}[iso]
				fmt.Printf("== %s consumer reads %d records: %s (position %d)\n", name, len(vals), strings.Join(vals, " "), pos)
			}
			fmt.Printf("== the partition's batches (dump-log):\n")
			if err := fetchAndPrint(ctx, adm, boot, tp, false); err != nil {
				return err
			}
			// The id's partition of __transaction_state as it exists.
			md, merr := adm.Metadata(ctx, true, "__transaction_state")
			if merr != nil || len(md.Topics) != 1 || len(md.Topics[0].Partitions) == 0 {
				return fmt.Errorf("reading __transaction_state's partitions: %v", merr)
			}
			txnPart := coordinator.PartitionFor(txnID, int32(len(md.Topics[0].Partitions)))
			fmt.Printf("== __transaction_state-%d records of %q (dump-log --transaction-log-decoder):\n", txnPart, txnID)
			return fetchAndPrint(ctx, adm, boot, client.TopicPartition{Topic: "__transaction_state", Partition: txnPart}, true)
		},
	}
	cmd.Flags().StringVar(&topic, "topic", "payments", "topic to use (recreated)")
	cmd.Flags().StringVar(&txnID, "transactional-id", "order-writer", "transactional id")
	return cmd
}

func readDemo(ctx context.Context, boot []string, tp client.TopicPartition, iso client.IsolationLevel) ([]string, int64, error) {
	c, err := client.NewConsumer(secure(client.Bootstrap(boot...), client.Isolation(iso), client.FetchMaxWait(100*time.Millisecond))...)
	if err != nil {
		return nil, 0, err
	}
	defer c.Close(ctx)
	c.Assign(map[client.TopicPartition]int64{tp: client.OffsetEarliest})
	var vals []string
	for i := 0; i < 50; i++ {
		recs, err := c.Poll(ctx)
		if err != nil {
			return nil, 0, err
		}
		for _, r := range recs {
			vals = append(vals, string(r.Value))
		}
		if c.Position(tp) >= 11 {
			break
		}
	}
	return vals, c.Position(tp), nil
}

// fetchAndPrint fetches a partition's batches from its leader and prints
// them like dump-log.
func fetchAndPrint(ctx context.Context, adm *client.Admin, boot []string, tp client.TopicPartition, txnDecoder bool) error {
	md, err := adm.Metadata(ctx, true, tp.Topic)
	if err != nil {
		return err
	}
	var leader int32 = -1
	for _, p := range md.Topics[0].Partitions {
		if p.Partition == tp.Partition {
			leader = p.LeaderId
		}
	}
	addr := ""
	for _, b := range md.Brokers {
		if b.NodeId == leader {
			addr = b.Address
		}
	}
	if addr == "" {
		return fmt.Errorf("%s has no leader", tp)
	}
	cc, err := dial(addr)
	if err != nil {
		return err
	}
	defer cc.Close()
	r, err := pb.NewConsumerClient(cc).Fetch(ctx, &pb.FetchRequest{ReplicaId: -1, MaxBytes: 8 << 20, Partitions: []*pb.FetchPartition{{Topic: tp.Topic, Partition: tp.Partition, FetchOffset: 0, CurrentLeaderEpoch: -1, PartitionMaxBytes: 8 << 20}}})
	if err != nil {
		return err
	}
	if fp := r.Partitions[0]; fp.ErrorCode != pb.ErrorCode_NONE {
		return fmt.Errorf("fetch %s: %s", tp, fp.ErrorMessage)
	}
	if !txnDecoder {
		printBatches(os.Stdout, r.Partitions[0].Records, true, true, nil)
		return nil
	}
	// Transaction log: just the decoded records.
	for it := record.NewIter(r.Partitions[0].Records); it.Next(); {
		_, recs, err := record.Decode(it.Batch())
		if err != nil {
			return err
		}
		for _, rec := range recs {
			fmt.Printf("offset: %d %s\n", rec.Offset, txn.DecodeJSON(rec.Key, rec.Value))
		}
	}
	return nil
}
