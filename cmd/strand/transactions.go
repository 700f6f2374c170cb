package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/strand-io/strand/client"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

func init() { extraCommands = append(extraCommands, transactionsCmd) }

// prettyTable prints like Kafka's ToolsUtils.prettyPrintTable: each cell
// left-aligned, padded to its column's widest value, then a tab.
func prettyTable(headers []string, rows [][]string) {
	w := make([]int, len(headers))
	for i, h := range headers {
		w[i] = len(h)
	}
	for _, r := range rows {
		for i, c := range r {
			if len(c) > w[i] {
				w[i] = len(c)
			}
		}
	}
	line := func(cells []string) {
		var b strings.Builder
		for i, c := range cells {
			b.WriteString(c + strings.Repeat(" ", w[i]-len(c)) + "\t")
		}
		fmt.Println(b.String())
	}
	line(headers)
	for _, r := range rows {
		line(r)
	}
}

// printOut prints rows as kafka-transactions' table, or with --format json
// as an array of objects keyed by the column headers, in column order.
// Cells are strings or integers (JSON strings and numbers); a nil cell is
// a missing value: None in the table, null in JSON.
func printOut(format string, headers []string, rows [][]any) error {
	if format == "json" {
		return printJSON(os.Stdout, headers, rows)
	}
	text := make([][]string, len(rows))
	for i, r := range rows {
		text[i] = make([]string, len(r))
		for j, c := range r {
			text[i][j] = cellText(c)
		}
	}
	prettyTable(headers, text)
	return nil
}

func cellText(c any) string {
	if c == nil {
		return "None"
	}
	return fmt.Sprint(c)
}

func printJSON(w io.Writer, headers []string, rows [][]any) error {
	var b bytes.Buffer
	b.WriteString("[")
	for i, r := range rows {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString("\n  {")
		for j, h := range headers {
			if j > 0 {
				b.WriteString(",")
			}
			k, _ := json.Marshal(h)
			v, err := json.Marshal(r[j])
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, "\n    %s: %s", k, v)
		}
		b.WriteString("\n  }")
	}
	if len(rows) > 0 {
		b.WriteString("\n")
	}
	b.WriteString("]\n")
	_, err := w.Write(b.Bytes())
	return err
}

// orNone is v, or nil (None) when negative.
func orNone(v int64) any {
	if v < 0 {
		return nil
	}
	return v
}

func transactionsCmd() *cobra.Command {
	var format string
	cmd := &cobra.Command{Use: "transactions", Short: "Inspect and repair transactions (like kafka-transactions)",
		Long: `Inspect and repair transactions, with kafka-transactions' subcommands and
column headers. describe-producers: the last sequence should only go up and
wrap back to 0 at MaxInt32; the coordinator epoch should stay fixed or rarely
increase. blocking answers "who holds this partition's LSO" in one go.`}
	cmd.PersistentFlags().StringVar(&format, "format", "text", "text or json")

	list := &cobra.Command{Use: "list", Short: "List transactional ids and their states",
		RunE: func(cmd *cobra.Command, args []string) error {
			return withAdmin(cmd, 30*time.Second, func(ctx context.Context, adm *client.Admin) error {
				dur, _ := cmd.Flags().GetInt64("duration-filter")
				pattern, _ := cmd.Flags().GetString("transactional-id-pattern")
				ls, err := adm.ListTransactions(ctx, client.ListTransactionsFilter{DurationMs: dur, Pattern: pattern})
				if err != nil {
					return err
				}
				var rows [][]any
				for _, l := range ls {
					rows = append(rows, []any{l.TransactionalID, l.Coordinator, l.ProducerID, l.State})
				}
				return printOut(format, []string{"TransactionalId", "Coordinator", "ProducerId", "TransactionState"}, rows)
			})
		}}
	list.Flags().Int64("duration-filter", 0, "only transactions running longer than this many ms")
	list.Flags().String("transactional-id-pattern", "", "only ids matching this regular expression")

	describe := &cobra.Command{Use: "describe", Short: "Describe one transactional id",
		RunE: func(cmd *cobra.Command, args []string) error {
			id, _ := cmd.Flags().GetString("transactional-id")
			if id == "" {
				return fmt.Errorf("--transactional-id is required")
			}
			return withAdmin(cmd, 30*time.Second, func(ctx context.Context, adm *client.Admin) error {
				st, err := adm.DescribeTransaction(ctx, id)
				if err != nil {
					return err
				}
				var parts []string
				for _, p := range st.Partitions {
					parts = append(parts, fmt.Sprintf("%s-%d", p.Topic, p.Partition))
				}
				var dur any
				if st.TransactionStartTimeMs >= 0 {
					dur = time.Now().UnixMilli() - st.TransactionStartTimeMs
				}
				return printOut(format, []string{"CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState", "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs", "TopicPartitions"},
					[][]any{{st.CoordinatorId, st.TransactionalId, st.ProducerId, st.ProducerEpoch, st.State, st.TransactionTimeoutMs, orNone(st.TransactionStartTimeMs), dur, strings.Join(parts, ",")}})
			})
		}}
	describe.Flags().String("transactional-id", "", "the transactional id")

	producers := &cobra.Command{Use: "describe-producers", Short: "List a partition's active producers",
		RunE: func(cmd *cobra.Command, args []string) error {
			tp, err := tpFlags(cmd)
			if err != nil {
				return err
			}
			broker, _ := cmd.Flags().GetInt32("broker-id")
			return withAdmin(cmd, 30*time.Second, func(ctx context.Context, adm *client.Admin) error {
				pp, err := adm.DescribeProducers(ctx, tp, broker)
				if err != nil {
					return err
				}
				var rows [][]any
				for _, p := range pp.ActiveProducers {
					rows = append(rows, []any{p.ProducerId, p.ProducerEpoch, p.CoordinatorEpoch, p.LastSequence, p.LastTimestamp, orNone(p.CurrentTxnStartOffset)})
				}
				return printOut(format, []string{"ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp", "CurrentTransactionStartOffset"}, rows)
			})
		}}
	addTP(producers)
	producers.Flags().Int32("broker-id", -1, "ask this replica instead of the leader")

	hanging := &cobra.Command{Use: "find-hanging", Short: "Find open transactions the coordinator no longer drives",
		RunE: func(cmd *cobra.Command, args []string) error {
			topic, _ := cmd.Flags().GetString("topic")
			part, _ := cmd.Flags().GetInt32("partition")
			maxMin, _ := cmd.Flags().GetInt64("max-transaction-timeout")
			if topic == "" {
				return fmt.Errorf("--topic is required")
			}
			return withAdmin(cmd, 60*time.Second, func(ctx context.Context, adm *client.Admin) error {
				rows, err := findHanging(ctx, adm, topic, part, maxMin)
				if err != nil {
					return err
				}
				return printOut(format, []string{"Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset", "LastTimestamp", "Duration(min)"}, rows)
			})
		}}
	hanging.Flags().String("topic", "", "topic to scan")
	hanging.Flags().Int32("partition", -1, "only this partition")
	hanging.Flags().Int64("max-transaction-timeout", 15, "transactions open longer than this many minutes are suspects")

	abort := &cobra.Command{Use: "abort", Short: "Abort the open transaction starting at an offset, straight at the partition leader",
		RunE: func(cmd *cobra.Command, args []string) error {
			tp, err := tpFlags(cmd)
			if err != nil {
				return err
			}
			start, _ := cmd.Flags().GetInt64("start-offset")
			if start < 0 {
				return fmt.Errorf("--start-offset is required")
			}
			return withAdmin(cmd, 30*time.Second, func(ctx context.Context, adm *client.Admin) error {
				return adm.AbortTransaction(ctx, tp, start)
			})
		}}
	addTP(abort)
	abort.Flags().Int64("start-offset", -1, "the first offset of the transaction to abort")

	blocking := &cobra.Command{Use: "blocking", Short: "Show the LSO, the HW and the open transaction holding the LSO of a partition",
		RunE: func(cmd *cobra.Command, args []string) error {
			tp, err := tpFlags(cmd)
			if err != nil {
				return err
			}
			return withAdmin(cmd, 30*time.Second, func(ctx context.Context, adm *client.Admin) error {
				return printBlocking(ctx, adm, tp, format)
			})
		}}
	addTP(blocking)
	cmd.AddCommand(list, describe, producers, hanging, abort, blocking)
	return cmd
}

func addTP(c *cobra.Command) {
	c.Flags().String("topic", "", "topic")
	c.Flags().Int32("partition", -1, "partition")
}

func tpFlags(cmd *cobra.Command) (client.TopicPartition, error) {
	topic, _ := cmd.Flags().GetString("topic")
	part, _ := cmd.Flags().GetInt32("partition")
	if topic == "" || part < 0 {
		return client.TopicPartition{}, fmt.Errorf("--topic and --partition are required")
	}
	return client.TopicPartition{Topic: topic, Partition: part}, nil
}

var _ = pb.CoordinatorType_TRANSACTION
