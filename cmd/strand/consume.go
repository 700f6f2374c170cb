package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/strand-io/strand/app/workload"
	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/errs"
)

func consumeCmd() *cobra.Command {
	var fromBeginning, printOffsets, printKey, printPartition bool
	var maxRecords int
	var timeout time.Duration
	var partition int32
	var offsetArg string
	var fromTimestamp int64
	var isolation, group string
	var props []string
	cmd := &cobra.Command{
		Use:   "consume TOPIC",
		Short: "Print record values, one per line (like kafka-console-consumer)",
		Long: `Print one record value per line and nothing else on stdout. --print-key,
--print-offsets and --print-partition add tab-separated columns in front;
--property print.timestamp|print.partition|print.offset|print.headers|print.key=true
add kafka-console-consumer's labelled columns (CreateTime:…, Partition:…,
Offset:…), separated by key.separator (a tab).

Without --group it reads every partition (or --partition) from the end,
--from-beginning, --offset (with --partition: a non-negative offset,
earliest (-2) or latest (-1)) or --from-timestamp (the first record at or
after that time, in ms since the epoch). With --group it reads the
partitions the group assigns it from the group's committed offsets (else
the end, or the beginning with --from-beginning) and, like a Kafka
consumer, commits the position of every partition it was assigned, read
from or not: after each batch it prints, when partitions are revoked, and
when it exits.

It exits after --max-records records, or when no record arrived for
--timeout (with --group: counted from the moment the group assigned it
partitions).

With --protocol kafka the records come through the Kafka listeners
(--kafka-bootstrap) with franz-go; a group member then commits the
positions of the partitions it has read from, as franz-go tracks them.

A partition error the consumer retries by itself (KAFKA_STORAGE_ERROR,
NOT_LEADER_OR_FOLLOWER, …) is written to stderr once each time it
changes ("strand: fetching orders-0: KAFKA_STORAGE_ERROR: … (retrying)"),
and once more when the partition is read again.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f := cmd.Flags()
			start, err := consumeStart(group, f.Changed("partition"), partition, f.Changed("offset"), offsetArg, fromBeginning, f.Changed("from-timestamp"), fromTimestamp)
			if err != nil {
				return err
			}
			format, err := newRecordFormat(props, printPartition, printOffsets, printKey)
			if err != nil {
				return err
			}
			proto, kafkaAddrs, err := protocolOf(cmd)
			if err != nil {
				return err
			}
			ctx, stop := signalContext()
			defer stop()
			topic := args[0]
			opts := secure(client.Bootstrap(bootstrap(cmd)...))
			iso := client.ReadUncommitted
			switch isolation {
			case "read_uncommitted":
			case "read_committed":
				iso = client.ReadCommitted
				opts = append(opts, client.Isolation(iso))
			default:
				return fmt.Errorf("--isolation-level: want read_uncommitted or read_committed, got %q", isolation)
			}
			if proto == workload.ProtocolKafka {
				return consumeKafka(ctx, cmd, kafkaAddrs, topic, group, start, iso, fromBeginning, maxRecords, timeout, format)
			}
			// The partition errors the consumer retries by itself
			// (KAFKA_STORAGE_ERROR, NOT_LEADER_OR_FOLLOWER, …) go to
			// stderr, so a partition that cannot be read is not silent.
			fetchErrs := newFetchErrorReport(os.Stderr)
			opts = append(opts, client.OnFetchError(func(tp client.TopicPartition, err error) { fetchErrs.report(tp.String(), err) }))
			var c *client.Consumer
			// In a group the idle timer starts when the group has assigned
			// this consumer its partitions (possibly none): joining takes
			// group.initial.rebalance.delay.ms and more.
			joined := group == ""
			last := time.Now()
			finished := false
			if group != "" {
				reset := client.ResetLatest
				if fromBeginning {
					reset = client.ResetEarliest
				}
				// Positions are committed by hand, not auto-committed: Poll
				// may return records past --max-records, which are not printed.
				opts = append(opts, client.GroupID(group), client.Topics(topic), client.AutoOffsetReset(reset), client.AutoCommit(0),
					client.OnPartitionsAssigned(func([]client.TopicPartition) {
						joined, last = true, time.Now()
					}),
					client.OnPartitionsRevoked(func(tps []client.TopicPartition) {
						if finished {
							return // committed already
						}
						// A rebalance (or Close) takes them away: commit where
						// this consumer got to, read from or not.
						cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
						defer cancel()
						if err := c.CommitOffsets(cctx, positions(c, tps)); err != nil {
							fmt.Fprintf(os.Stderr, "strand: committing the positions of revoked partitions of group %s: %v\n", group, err)
						}
					}))
			}
			c, err = client.NewConsumer(opts...)
			if err != nil {
				return err
			}
			defer c.Close(context.Background())
			if group == "" {
				assign, err := startPositions(ctx, cmd, topic, start, iso)
				if err != nil {
					return err
				}
				c.Assign(assign)
				last = time.Now()
			}
			out := bufio.NewWriter(os.Stdout)
			defer out.Flush()
			count := 0
			for maxRecords <= 0 || count < maxRecords {
				recs, err := c.Poll(ctx)
				if err != nil {
					if ctx.Err() != nil {
						break // Ctrl-C: commit and leave
					}
					return err
				}
				if len(recs) == 0 {
					if ctx.Err() != nil {
						break
					}
					if timeout > 0 && joined && time.Since(last) > timeout {
						break
					}
					continue
				}
				last = time.Now()
				for i, r := range recs {
					format.write(out, r)
					count++
					if maxRecords > 0 && count >= maxRecords {
						// What Poll returned past the last printed record is
						// read again by the next member of the group.
						rewind(c, recs[i+1:])
						break
					}
				}
				out.Flush()
				if group != "" {
					if err := c.CommitPolled(ctx); err != nil && ctx.Err() == nil {
						// A rebalance may be under way; the next commit (or
						// the one at exit) covers these positions.
						fmt.Fprintf(os.Stderr, "strand: commit of group %s failed, will retry: %v\n", group, err)
					}
				}
			}
			out.Flush()
			if group != "" {
				// Every assigned partition, printed from or not: the next run
				// must start where this one stopped, not at the log end.
				cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				err := c.CommitPolled(cctx)
				cancel()
				if err != nil {
					return fmt.Errorf("commit offsets of group %s: %w", group, err)
				}
				finished = true
			}
			if maxRecords > 0 && count < maxRecords && ctx.Err() == nil {
				return fmt.Errorf("got %d of %d records before --timeout %v", count, maxRecords, timeout)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&fromBeginning, "from-beginning", false, "start at the earliest offset (default: the end; with --group: where the group has no committed offset)")
	f.IntVar(&maxRecords, "max-records", 0, "exit after this many records (0: no limit)")
	f.DurationVar(&timeout, "timeout", 0, "exit when no record arrived for this long (0: wait forever; with --group: counted from the assignment)")
	f.Int32Var(&partition, "partition", -1, "read only this partition (not with --group)")
	f.StringVar(&offsetArg, "offset", "", "start offset with --partition: a non-negative offset, earliest (-2) or latest (-1, the default)")
	f.Int64Var(&fromTimestamp, "from-timestamp", -1, "start at the first record with a timestamp at or after this time (ms since the epoch; not with --group)")
	f.StringVar(&isolation, "isolation-level", "read_uncommitted", "read_uncommitted or read_committed")
	f.BoolVar(&printOffsets, "print-offsets", false, "print each record's offset first")
	f.BoolVar(&printKey, "print-key", false, "print each record's key first")
	f.BoolVar(&printPartition, "print-partition", false, "print each record's partition first")
	f.StringVar(&group, "group", "", "consume as a member of this consumer group")
	f.StringArrayVar(&props, "property", nil, "formatter property key=value (repeatable): print.timestamp, print.key, print.offset, print.partition, print.headers, print.value, key.separator, line.separator, headers.separator, null.literal")
	addProtocolFlags(cmd)
	return cmd
}

// startSpec is where a consumer without a group starts reading.
type startSpec struct {
	partition int32 // -1: every partition
	offset    int64 // client.OffsetEarliest, client.OffsetLatest or an offset
	timestamp int64 // >= 0: by timestamp (ListOffsets), instead of offset
}

// consumeStart checks consume's position flags as kafka-console-consumer
// does and says where to start. A group reads what it is assigned from its
// committed offsets, so --partition, --offset and --from-timestamp are
// refused with --group; an offset names one partition's position, so
// --offset needs --partition.
func consumeStart(group string, partitionSet bool, partition int32, offsetSet bool, offset string, fromBeginning, tsSet bool, ts int64) (startSpec, error) {
	spec := startSpec{partition: -1, offset: client.OffsetLatest, timestamp: -1}
	if fromBeginning {
		spec.offset = client.OffsetEarliest
	}
	if group != "" {
		if partitionSet || offsetSet {
			return spec, fmt.Errorf("--group cannot be used with --partition or --offset: a group member reads the partitions the group assigns it, from the group's committed offsets (use --from-beginning for a group without committed offsets)")
		}
		if tsSet {
			return spec, fmt.Errorf("--group cannot be used with --from-timestamp: a group member starts at the group's committed offsets")
		}
		return spec, nil
	}
	if partitionSet {
		if partition < 0 {
			return spec, fmt.Errorf("--partition: want a partition number (0 or more), got %d", partition)
		}
		spec.partition = partition
	}
	if offsetSet {
		if !partitionSet {
			return spec, fmt.Errorf("--offset needs --partition: an offset is a position in one partition")
		}
		if fromBeginning {
			return spec, fmt.Errorf("--from-beginning and --offset cannot be used together")
		}
		o, err := parseOffset(offset)
		if err != nil {
			return spec, err
		}
		spec.offset = o
	}
	if tsSet {
		if offsetSet || fromBeginning {
			return spec, fmt.Errorf("--from-timestamp cannot be used with --offset or --from-beginning")
		}
		if ts < 0 {
			return spec, fmt.Errorf("--from-timestamp: want a time in ms since the epoch, got %d", ts)
		}
		spec.timestamp = ts
	}
	return spec, nil
}

// parseOffset reads --offset as kafka-console-consumer does: a
// non-negative offset, 'earliest' (or -2) or 'latest' (or -1).
func parseOffset(s string) (int64, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "earliest", "-2":
		return client.OffsetEarliest, nil
	case "latest", "-1":
		return client.OffsetLatest, nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("--offset: want a non-negative offset, earliest (-2) or latest (-1), got %q", s)
	}
	return n, nil
}

// startPositions resolves a consumer's start without a group: the topic's
// partitions (or the one asked for) at the offset asked for, or at the
// offsets ListOffsets gives for the timestamp (the end where no record is
// that recent).
func startPositions(ctx context.Context, cmd *cobra.Command, topic string, spec startSpec, iso client.IsolationLevel) (map[client.TopicPartition]int64, error) {
	adm, err := newAdmin(cmd)
	if err != nil {
		return nil, err
	}
	defer adm.Close()
	mctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	md, err := adm.Metadata(mctx, true, topic)
	if err != nil {
		return nil, err
	}
	if len(md.Topics) != 1 || md.Topics[0].ErrorMessage != "" {
		msg := "not found"
		if len(md.Topics) == 1 {
			msg = md.Topics[0].ErrorMessage
		}
		return nil, fmt.Errorf("topic %s: %s", topic, msg)
	}
	assign := map[client.TopicPartition]int64{}
	for _, p := range md.Topics[0].Partitions {
		if spec.partition < 0 || p.Partition == spec.partition {
			assign[client.TopicPartition{Topic: topic, Partition: p.Partition}] = spec.offset
		}
	}
	if len(assign) == 0 {
		return nil, fmt.Errorf("topic %s has no partition %d", topic, spec.partition)
	}
	if spec.timestamp < 0 {
		return assign, nil
	}
	tps := make([]client.TopicPartition, 0, len(assign))
	for tp := range assign {
		tps = append(tps, tp)
	}
	found, err := adm.ListOffsets(mctx, tps, spec.timestamp, iso)
	if err != nil {
		return nil, fmt.Errorf("offsets of %s at timestamp %d: %w", topic, spec.timestamp, err)
	}
	for _, tp := range tps {
		o, ok := found[tp]
		switch {
		case !ok:
			return nil, fmt.Errorf("no offset of %s at timestamp %d", tp, spec.timestamp)
		case o.Err != nil:
			return nil, fmt.Errorf("offset of %s at timestamp %d: %w", tp, spec.timestamp, o.Err)
		case o.Offset < 0:
			assign[tp] = client.OffsetLatest // nothing that recent yet
		default:
			assign[tp] = o.Offset
		}
	}
	return assign, nil
}

// positions is the position of each partition that has one.
func positions(c *client.Consumer, tps []client.TopicPartition) map[client.TopicPartition]int64 {
	out := map[client.TopicPartition]int64{}
	for _, tp := range tps {
		if p := c.Position(tp); p >= 0 {
			out[tp] = p
		}
	}
	return out
}

// rewind moves each partition of recs (records Poll returned that were not
// printed) back to the first of them, so that its position, and the
// offset committed for it, is the next record to print.
func rewind(c *client.Consumer, recs []*client.Record) {
	first := map[client.TopicPartition]int64{}
	for _, r := range recs {
		tp := client.TopicPartition{Topic: r.Topic, Partition: r.Partition}
		if o, ok := first[tp]; !ok || r.Offset < o {
			first[tp] = r.Offset
		}
	}
	for tp, o := range first {
		_ = c.Seek(tp, o)
	}
}

// recordFormat prints records like kafka-console-consumer's default
// formatter: the enabled columns in the order timestamp, partition, offset,
// headers, key, value, separated by key.separator and ended by
// line.separator. Columns turned on by --property are labelled as Kafka
// prints them (CreateTime:…, Partition:…, Offset:…); those turned on by
// --print-partition, --print-offsets and --print-key are bare values.
type recordFormat struct {
	timestamp, partition, offset, headers, key, value bool
	// labelled: the column came from --property (Kafka's shape).
	labelPartition, labelOffset bool
	keySep, lineSep, headerSep  string
	null                        string // for a null key or value in a --property column
	bareKey                     bool   // --print-key alone: a null key prints empty
	bareValue                   bool   // no --property: a null value prints empty
}

func newRecordFormat(props []string, printPartition, printOffsets, printKey bool) (*recordFormat, error) {
	f := &recordFormat{partition: printPartition, offset: printOffsets, key: printKey, value: true, bareKey: printKey,
		keySep: "\t", lineSep: "\n", headerSep: ",", null: "null", bareValue: len(props) == 0}
	kv, err := parseProperties(props)
	if err != nil {
		return nil, err
	}
	for k, v := range kv {
		var b *bool
		switch k {
		case "print.timestamp":
			b = &f.timestamp
		case "print.partition":
			b, f.labelPartition = &f.partition, true
		case "print.offset":
			b, f.labelOffset = &f.offset, true
		case "print.headers":
			b = &f.headers
		case "print.key":
			b, f.bareKey = &f.key, false
		case "print.value":
			b = &f.value
		case "key.separator":
			f.keySep = v
		case "line.separator":
			f.lineSep = v
		case "headers.separator":
			f.headerSep = v
		case "null.literal":
			f.null = v
		default:
			fmt.Fprintf(os.Stderr, "strand: ignoring --property %s (the formatter knows print.timestamp, print.key, print.offset, print.partition, print.headers, print.value, key.separator, line.separator, headers.separator, null.literal)\n", k)
		}
		if b != nil {
			on, err := strconv.ParseBool(v)
			if err != nil {
				return nil, fmt.Errorf("--property %s=%s: want true or false", k, v)
			}
			*b = on
		}
	}
	return f, nil
}

func (f *recordFormat) write(w io.Writer, r *client.Record) {
	var cols []string
	if f.timestamp {
		cols = append(cols, "CreateTime:"+strconv.FormatInt(r.Timestamp.UnixMilli(), 10))
	}
	if f.partition {
		p := strconv.Itoa(int(r.Partition))
		if f.labelPartition {
			p = "Partition:" + p
		}
		cols = append(cols, p)
	}
	if f.offset {
		o := strconv.FormatInt(r.Offset, 10)
		if f.labelOffset {
			o = "Offset:" + o
		}
		cols = append(cols, o)
	}
	if f.headers {
		if len(r.Headers) == 0 {
			cols = append(cols, "NO_HEADERS")
		} else {
			hs := make([]string, len(r.Headers))
			for i, h := range r.Headers {
				hs[i] = h.Key + ":" + f.orNull(h.Value)
			}
			cols = append(cols, strings.Join(hs, f.headerSep))
		}
	}
	if f.key {
		if f.bareKey {
			cols = append(cols, string(r.Key))
		} else {
			cols = append(cols, f.orNull(r.Key))
		}
	}
	if f.value {
		if f.bareValue {
			cols = append(cols, string(r.Value))
		} else {
			cols = append(cols, f.orNull(r.Value))
		}
	}
	io.WriteString(w, strings.Join(cols, f.keySep)+f.lineSep)
}

func (f *recordFormat) orNull(b []byte) string {
	if b == nil {
		return f.null
	}
	return string(b)
}

// parseProperties reads repeated key=value flags.
func parseProperties(props []string) (map[string]string, error) {
	out := map[string]string{}
	for _, p := range props {
		k, v, ok := strings.Cut(p, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("--property %q: want key=value", p)
		}
		out[strings.TrimSpace(k)] = v
	}
	return out, nil
}

// fetchErrorReport writes the partition errors a consumer retries by
// itself to w: once each time a partition's error changes (a partition
// failing for a minute is one line, not one per fetch), and once when it
// is read again.
type fetchErrorReport struct {
	mu   sync.Mutex
	w    io.Writer
	last map[string]string // partition → the error last written
}

func newFetchErrorReport(w io.Writer) *fetchErrorReport {
	return &fetchErrorReport{w: w, last: map[string]string{}}
}

// report notes partition's fetch error (nil: it was fetched cleanly).
func (f *fetchErrorReport) report(partition string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil {
		if _, ok := f.last[partition]; ok {
			delete(f.last, partition)
			fmt.Fprintf(f.w, "strand: %s is read again\n", partition)
		}
		return
	}
	key := err.Error()
	var ke *errs.Error
	if errors.As(err, &ke) {
		key = ke.Code.String() // the message may vary from answer to answer
	}
	if f.last[partition] == key {
		return
	}
	f.last[partition] = key
	fmt.Fprintf(f.w, "strand: fetching %s: %v (retrying)\n", partition, err)
}
