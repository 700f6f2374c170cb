package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/strand-io/strand/client"
)

func consumeCmd() *cobra.Command {
	var fromBeginning, printOffsets, printKey, printPartition bool
	var maxRecords int
	var timeout time.Duration
	var partition int32
	var offset int64
	var isolation, group string
	cmd := &cobra.Command{
		Use:   "consume TOPIC",
		Short: "Print record values, one per line (like kafka-console-consumer)",
		Long: `Print one record value per line and nothing else on stdout. --print-key,
--print-offsets and --print-partition add tab-separated columns in front.
It exits after --max-records records, or when no record arrived for --timeout.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signalContext()
			defer stop()
			topic := args[0]
			opts := []client.Opt{client.Bootstrap(bootstrap(cmd)...)}
			switch isolation {
			case "read_uncommitted":
			case "read_committed":
				opts = append(opts, client.Isolation(client.ReadCommitted))
			default:
				return fmt.Errorf("--isolation-level: want read_uncommitted or read_committed, got %q", isolation)
			}
			if group != "" {
				reset := client.ResetLatest
				if fromBeginning {
					reset = client.ResetEarliest
				}
				// Commit only what is printed: auto-commit would also commit
				// records Poll returned past --max-records.
				opts = append(opts, client.GroupID(group), client.Topics(topic), client.AutoOffsetReset(reset), client.AutoCommit(0))
			}
			c, err := client.NewConsumer(opts...)
			if err != nil {
				return err
			}
			defer c.Close(context.Background())
			if group == "" {
				adm, err := newAdmin(cmd)
				if err != nil {
					return err
				}
				mctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				md, err := adm.Metadata(mctx, true, topic)
				cancel()
				adm.Close()
				if err != nil {
					return err
				}
				if len(md.Topics) != 1 || md.Topics[0].ErrorMessage != "" {
					return fmt.Errorf("topic %s: %s", topic, md.Topics[0].ErrorMessage)
				}
				start := client.OffsetLatest
				if fromBeginning {
					start = client.OffsetEarliest
				}
				if offset >= 0 {
					start = offset
				}
				assign := map[client.TopicPartition]int64{}
				for _, p := range md.Topics[0].Partitions {
					if partition < 0 || p.Partition == partition {
						assign[client.TopicPartition{Topic: topic, Partition: p.Partition}] = start
					}
				}
				if len(assign) == 0 {
					return fmt.Errorf("topic %s has no partition %d", topic, partition)
				}
				c.Assign(assign)
			}
			out := bufio.NewWriter(os.Stdout)
			defer out.Flush()
			count := 0
			printed := map[client.TopicPartition]int64{}
			last := time.Now()
			for maxRecords <= 0 || count < maxRecords {
				recs, err := c.Poll(ctx)
				if err != nil {
					if errors.Is(err, context.Canceled) {
						return nil
					}
					return err
				}
				if len(recs) == 0 {
					if timeout > 0 && time.Since(last) > timeout {
						break
					}
					continue
				}
				last = time.Now()
				for _, r := range recs {
					if printPartition {
						fmt.Fprintf(out, "%d\t", r.Partition)
					}
					if printOffsets {
						fmt.Fprintf(out, "%d\t", r.Offset)
					}
					if printKey {
						fmt.Fprintf(out, "%s\t", r.Key)
					}
					out.Write(r.Value)
					out.WriteByte('\n')
					count++
					printed[client.TopicPartition{Topic: r.Topic, Partition: r.Partition}] = r.Offset + 1
					if maxRecords > 0 && count >= maxRecords {
						break
					}
				}
				out.Flush()
				if group != "" && len(printed) > 0 {
					if err := c.CommitOffsets(ctx, printed); err != nil {
						return fmt.Errorf("commit offsets of group %s: %w", group, err)
					}
				}
			}
			if maxRecords > 0 && count < maxRecords {
				return fmt.Errorf("got %d of %d records before --timeout %v", count, maxRecords, timeout)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&fromBeginning, "from-beginning", false, "start at the earliest offset (default: the end)")
	f.IntVar(&maxRecords, "max-records", 0, "exit after this many records (0: no limit)")
	f.DurationVar(&timeout, "timeout", 0, "exit when no record arrived for this long (0: wait forever)")
	f.Int32Var(&partition, "partition", -1, "read only this partition")
	f.Int64Var(&offset, "offset", -1, "start at this offset (with --partition)")
	f.StringVar(&isolation, "isolation-level", "read_uncommitted", "read_uncommitted or read_committed")
	f.BoolVar(&printOffsets, "print-offsets", false, "print each record's offset first")
	f.BoolVar(&printKey, "print-key", false, "print each record's key first")
	f.BoolVar(&printPartition, "print-partition", false, "print each record's partition first")
	f.StringVar(&group, "group", "", "consume as a member of this consumer group")
	return cmd
}
