package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/strand-io/strand/app/workload"
	"github.com/strand-io/strand/client"
)

func produceCmd() *cobra.Command {
	var keySep, txnID, acks, codec string
	var partition int32
	var abort bool
	var props, headerArgs []string
	cmd := &cobra.Command{
		Use:   "produce TOPIC",
		Short: "Write lines from stdin as records (acks=all, idempotent)",
		Long: `Write each line of stdin as one record's value (acks=all, idempotent by
default; --acks 1 or 0 turns idempotence off, as Kafka's producer does).
With --key-separator, the text before the first separator is the key (a
line without it is all value). kafka-console-producer's --property
parse.key=true splits at key.separator (a tab by default) and refuses a
line without it (unless ignore.error=true). Every --header key=value is
added to each record. With --transactional-id, all of the input is one
transaction, committed at the end of input, or aborted with --abort.
With --protocol kafka the records go through the Kafka listeners
(--kafka-bootstrap) with franz-go instead of the SDK.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			split, err := newLineSplitter(props, keySep)
			if err != nil {
				return err
			}
			headers, err := parseHeaders(headerArgs)
			if err != nil {
				return err
			}
			opts, err := producerOpts(nil, acks)
			if err != nil {
				return err
			}
			if txnID != "" && acks != "all" && acks != "-1" {
				return fmt.Errorf("--acks %s: a transactional producer needs acks=all", acks)
			}
			c, err := client.ParseCompression(codec)
			if err != nil {
				return fmt.Errorf("--compression-codec: %w", err)
			}
			proto, kafkaAddrs, err := protocolOf(cmd)
			if err != nil {
				return err
			}
			opts = append(opts, client.Compression(c))
			ctx, stop := signalContext()
			defer stop()
			opts = append(opts, secure(client.Bootstrap(bootstrap(cmd)...))...)
			if partition >= 0 {
				opts = append(opts, client.WithPartitioner(client.ManualPartitioner{}))
			}
			if txnID != "" {
				opts = append(opts, client.TransactionalID(txnID))
			}
			var p lineProducer
			if proto == workload.ProtocolKafka {
				p, err = newKafkaLineProducer(kafkaAddrs, acks, codec, partition, txnID)
			} else {
				var sp *client.Producer
				sp, err = client.NewProducer(opts...)
				p = strandLineProducer{sp}
			}
			if err != nil {
				return err
			}
			if txnID != "" {
				if err := p.Begin(ctx); err != nil {
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
				key, value, err := split.split(sc.Text(), n+1)
				if err != nil {
					if txnID != "" {
						_ = p.End(ctx, false)
					}
					p.Close(ctx)
					return err
				}
				rec := &client.Record{Topic: args[0], Key: key, Value: value, Partition: partition, Headers: headers}
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
				if err := p.End(fctx, !abort && failed.Load() == 0); err != nil {
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
	cmd.Flags().StringArrayVar(&props, "property", nil, "line reader property key=value (repeatable): parse.key, key.separator, ignore.error")
	cmd.Flags().StringArrayVar(&headerArgs, "header", nil, "a header key=value for every record (repeatable)")
	cmd.Flags().StringVar(&acks, "acks", "all", "all (-1), 1 or 0; 1 and 0 turn idempotence off")
	cmd.Flags().StringVar(&codec, "compression-codec", "none", "none, gzip, snappy, lz4 or zstd")
	addProtocolFlags(cmd)
	return cmd
}

// lineSplitter turns a line of input into a record's key and value.
type lineSplitter struct {
	sep         string
	parseKey    bool // kafka-console-producer's parse.key: the separator is required
	ignoreError bool // …unless ignore.error: then the line is all value
}

func newLineSplitter(props []string, keySep string) (*lineSplitter, error) {
	s := &lineSplitter{sep: keySep}
	kv, err := parseProperties(props)
	if err != nil {
		return nil, err
	}
	for k, v := range kv {
		switch k {
		case "parse.key", "ignore.error":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return nil, fmt.Errorf("--property %s=%s: want true or false", k, v)
			}
			if k == "parse.key" {
				s.parseKey = b
			} else {
				s.ignoreError = b
			}
		case "key.separator":
			if v == "" {
				return nil, fmt.Errorf("--property key.separator: the separator is empty")
			}
			s.sep = v
		default:
			fmt.Fprintf(os.Stderr, "strand: ignoring --property %s (the line reader knows parse.key, key.separator, ignore.error)\n", k)
		}
	}
	if s.parseKey && s.sep == "" {
		s.sep = "\t" // Kafka's default key.separator
	}
	return s, nil
}

// split returns the key (nil when there is none) and the value of line
// number n.
func (s *lineSplitter) split(line string, n int) ([]byte, []byte, error) {
	if s.sep == "" {
		return nil, []byte(line), nil
	}
	k, v, ok := strings.Cut(line, s.sep)
	switch {
	case ok:
		return []byte(k), []byte(v), nil
	case s.parseKey && !s.ignoreError:
		return nil, nil, fmt.Errorf("no key separator %q on line %d: %q (parse.key=true needs one on every line; ignore.error=true makes such a line all value)", s.sep, n, line)
	}
	return nil, []byte(line), nil
}

// parseHeaders reads --header key=value flags.
func parseHeaders(args []string) ([]client.Header, error) {
	var out []client.Header
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--header %q: want key=value", a)
		}
		out = append(out, client.Header{Key: k, Value: []byte(v)})
	}
	return out, nil
}
