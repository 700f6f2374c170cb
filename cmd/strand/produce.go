package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/strand-io/strand/client"
)

func produceCmd() *cobra.Command {
	var keySep, txnID string
	var partition int32
	var abort bool
	cmd := &cobra.Command{
		Use:   "produce TOPIC",
		Short: "Write lines from stdin as records (acks=all, idempotent)",
		Long: `Write each line of stdin as one record's value (acks=all, idempotent).
With --key-separator, the text before the first separator is the key.
With --transactional-id, all of the input is one transaction, committed at
the end of input, or aborted with --abort.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signalContext()
			defer stop()
			opts := []client.Opt{client.Bootstrap(bootstrap(cmd)...)}
			if partition >= 0 {
				opts = append(opts, client.WithPartitioner(client.ManualPartitioner{}))
			}
			if txnID != "" {
				opts = append(opts, client.TransactionalID(txnID))
			}
			p, err := client.NewProducer(opts...)
			if err != nil {
				return err
			}
			if txnID != "" {
				if err := beginTxn(ctx, p); err != nil {
					return err
				}
			}
			var failed atomic.Int64
			var firstErr error
			var once sync.Once
			sc := bufio.NewScanner(os.Stdin)
			sc.Buffer(make([]byte, 1<<20), 16<<20)
			n := 0
			for sc.Scan() {
				line := sc.Text()
				rec := &client.Record{Topic: args[0], Value: []byte(line), Partition: partition}
				if keySep != "" {
					if k, v, ok := strings.Cut(line, keySep); ok {
						rec.Key, rec.Value = []byte(k), []byte(v)
					}
				}
				p.Produce(ctx, rec, func(r *client.Record, err error) {
					if err != nil {
						failed.Add(1)
						once.Do(func() { firstErr = err })
					}
				})
				n++
			}
			if err := sc.Err(); err != nil {
				return err
			}
			fctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			defer cancel()
			if err := p.Flush(fctx); err != nil {
				return err
			}
			if txnID != "" {
				if err := endTxn(fctx, p, !abort && failed.Load() == 0); err != nil {
					return err
				}
			}
			p.Close(fctx)
			if f := failed.Load(); f > 0 {
				return fmt.Errorf("%d of %d records failed; first error: %v", f, n, firstErr)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&keySep, "key-separator", "", "split each line into key and value at this separator")
	cmd.Flags().Int32Var(&partition, "partition", -1, "write every record to this partition")
	cmd.Flags().StringVar(&txnID, "transactional-id", "", "write all input as one transaction")
	cmd.Flags().BoolVar(&abort, "abort", false, "abort the transaction instead of committing it")
	return cmd
}
