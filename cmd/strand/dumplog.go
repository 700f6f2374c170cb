package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/strand-io/strand/broker/storage"
	"github.com/strand-io/strand/coordinator/group"
	"github.com/strand-io/strand/coordinator/txn"
	"github.com/strand-io/strand/record"
)

func dumpLogCmd() *cobra.Command {
	var printData, deep, txnDecoder, offsetsDecoder bool
	var files []string
	cmd := &cobra.Command{
		Use:   "dump-log FILE…",
		Short: "Print segment files in kafka-dump-log's format",
		Long: `Print .log segments one line per batch in kafka-dump-log's format; with
--deep-iteration (implied by --print-data-log) one line per record too.
Also reads .index, .timeindex, .txnindex and producer .snapshot files.
--transaction-log-decoder decodes __transaction_state records,
--offsets-decoder __consumer_offsets records (offsets, classic groups and
consumer groups).`,
		RunE: func(cmd *cobra.Command, args []string) error {
			all := append(files, args...)
			if len(all) == 0 {
				return fmt.Errorf("name at least one file")
			}
			out := os.Stdout
			var decode recordDecoder
			switch {
			case txnDecoder && offsetsDecoder:
				return fmt.Errorf("--transaction-log-decoder and --offsets-decoder: choose one")
			case txnDecoder:
				decode = decodeTxnLogRecord
			case offsetsDecoder:
				decode = decodeOffsetsRecord
			}
			for _, f := range all {
				for _, p := range strings.Split(f, ",") {
					if err := dumpFile(out, p, printData || deep || decode != nil, printData, decode); err != nil {
						return err
					}
				}
			}
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&files, "files", nil, "files to dump (comma-separated; positional arguments work too)")
	cmd.Flags().BoolVar(&printData, "print-data-log", false, "print keys and values (implies --deep-iteration)")
	cmd.Flags().BoolVar(&deep, "deep-iteration", false, "print every record, not just batches")
	cmd.Flags().BoolVar(&txnDecoder, "transaction-log-decoder", false, "decode __transaction_state records")
	cmd.Flags().BoolVar(&offsetsDecoder, "offsets-decoder", false, "decode __consumer_offsets records")
	return cmd
}

// recordDecoder renders an internal topic's record (nil: none; the
// record prints as its key and value bytes with --print-data-log).
type recordDecoder func(key, value []byte) string

func dumpFile(w io.Writer, path string, deep, data bool, decode recordDecoder) error {
	fmt.Fprintf(w, "Dumping %s\n", path)
	if note, ok := missingIndexNote(path); ok {
		fmt.Fprintln(os.Stderr, note)
		return nil
	}
	switch {
	case strings.HasSuffix(path, storage.LogSuffix):
		return dumpSegment(w, path, deep, data, decode)
	case strings.HasSuffix(path, storage.IndexSuffix):
		es, err := storage.ReadOffsetIndex(path)
		for _, e := range es {
			fmt.Fprintf(w, "offset: %d position: %d\n", e.Offset, e.Position)
		}
		return reportTrailing(err)
	case strings.HasSuffix(path, storage.TimeIndexSuffix):
		es, err := storage.ReadTimeIndex(path)
		for _, e := range es {
			fmt.Fprintf(w, "timestamp: %d offset: %d\n", e.Timestamp, e.Offset)
		}
		return reportTrailing(err)
	case strings.HasSuffix(path, storage.TxnIndexSuffix):
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		es, err := storage.ParseTxnIndex(b)
		if err != nil {
			return err
		}
		for _, a := range es {
			fmt.Fprintf(w, "version: 0 producerId: %d firstOffset: %d lastOffset: %d lastStableOffset: %d\n", a.ProducerID, a.FirstOffset, a.LastOffset, a.LastStableOffset)
		}
		return nil
	case strings.HasSuffix(path, storage.SnapshotSuffix):
		es, err := storage.ReadSnapshotEntries(path)
		if err != nil {
			return err
		}
		for _, e := range es {
			fmt.Fprintf(w, "producerId: %d producerEpoch: %d coordinatorEpoch: %d currentTxnFirstOffset: %d lastTimestamp: %d", e.ProducerID, e.Epoch, e.CoordinatorEpoch, e.CurrentTxnFirstOffset, e.LastTimestamp)
			for _, b := range e.Batches {
				fmt.Fprintf(w, " firstSequence: %d lastSequence: %d lastOffset: %d offsetDelta: %d timestamp: %d", b.FirstSeq, b.LastSeq, b.LastOffset, b.LastOffset-b.FirstOffset, b.MaxTimestamp)
			}
			fmt.Fprintln(w)
		}
		return nil
	}
	fmt.Fprintf(os.Stderr, "Ignoring unknown file %s\n", path)
	return nil
}

// missingIndexNote explains an index file that is not on disk next to its
// segment's .log: the offset and time indexes of the active segment live in
// memory (they are written when the segment rolls, when the log is flushed
// and when the node stops, not on every append), and a .txnindex is created
// with the segment's first aborted transaction, as Kafka's is. Without the
// .log there is nothing to explain: the caller reports the missing file.
func missingIndexNote(path string) (string, bool) {
	var suffix string
	for _, s := range []string{storage.IndexSuffix, storage.TimeIndexSuffix, storage.TxnIndexSuffix} {
		if strings.HasSuffix(path, s) {
			suffix = s
		}
	}
	if suffix == "" {
		return "", false
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		return "", false
	}
	logPath := strings.TrimSuffix(path, suffix) + storage.LogSuffix
	if _, err := os.Stat(logPath); err != nil {
		return "", false
	}
	if suffix == storage.TxnIndexSuffix {
		return fmt.Sprintf("%s does not exist: no transaction aborted in this segment (a segment's .txnindex is created with its first aborted transaction)", path), true
	}
	return fmt.Sprintf("%s is not on disk yet: the active segment's offset and time indexes are kept in memory and written when the segment rolls, when the log is flushed (flush.ms, flush.messages) and when the node stops; its batches are in %s", path, logPath), true
}

func reportTrailing(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	return nil
}

func dumpSegment(w io.Writer, path string, deep, data bool, decode recordDecoder) error {
	buf, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	base := strings.TrimSuffix(filepath.Base(path), storage.LogSuffix)
	var start int64
	fmt.Sscanf(base, "%d", &start)
	fmt.Fprintf(w, "Log starting offset: %d\n", start)
	rest := printBatches(w, buf, deep, data, decode)
	if rest > 0 {
		fmt.Fprintf(os.Stderr, "Found %d invalid bytes at the end of %s\n", rest, filepath.Base(path))
	}
	return nil
}

// deleteHorizon prints a batch's delete horizon as kafka-dump-log does
// (Java's OptionalLong): the log cleaner sets one on batches it kept
// tombstones or a transaction marker in (KIP-534).
func deleteHorizon(h *record.Header) string {
	if ms, ok := h.DeleteHorizonMs(); ok {
		return fmt.Sprintf("OptionalLong[%d]", ms)
	}
	return "OptionalLong.empty"
}

// printBatches prints kafka-dump-log lines for the batches in buf and
// returns how many trailing bytes are not a whole batch.
func printBatches(w io.Writer, buf []byte, deep, data bool, decode recordDecoder) int {
	it := record.NewIter(buf)
	pos := 0
	for it.Next() {
		h := it.Header()
		b := it.Batch()
		_, verr := record.Validate(b)
		ts := "CreateTime"
		if h.LogAppendTime() {
			ts = "LogAppendTime"
		}
		fmt.Fprintf(w, "baseOffset: %d lastOffset: %d count: %d baseSequence: %d lastSequence: %d producerId: %d producerEpoch: %d partitionLeaderEpoch: %d isTransactional: %t isControl: %t deleteHorizonMs: %s position: %d %s: %d size: %d magic: %d compresscodec: %s crc: %d isvalid: %t\n",
			h.BaseOffset, h.LastOffset(), h.RecordCount, h.BaseSequence, h.LastSequence(), h.ProducerID, h.ProducerEpoch, h.PartitionLeaderEpoch,
			h.IsTransactional(), h.IsControl(), deleteHorizon(&h), pos, ts, h.MaxTimestamp, h.Size(), h.Magic, h.Compression(), h.CRC, verr == nil)
		pos = it.Pos()
		if !deep || verr != nil {
			continue
		}
		_, recs, err := record.Decode(b)
		if err != nil {
			fmt.Fprintf(w, "| failed to decode records: %v\n", err)
			continue
		}
		for _, r := range recs {
			seq := int32(-1)
			if h.BaseSequence >= 0 {
				// By offset delta, not position: a cleaned batch keeps its
				// records' offsets, and so their sequences, with gaps.
				seq = record.IncrementSequence(h.BaseSequence, int32(r.Offset-h.BaseOffset))
			}
			keys := make([]string, len(r.Headers))
			for j, hd := range r.Headers {
				keys[j] = hd.Key
			}
			fmt.Fprintf(w, "| offset: %d %s: %d keySize: %d valueSize: %d sequence: %d headerKeys: [%s]", r.Offset, ts, r.Timestamp, size(r.Key), size(r.Value), seq, strings.Join(keys, ","))
			if h.IsControl() {
				if typ, ce, err := record.ParseControlRecord(r); err == nil {
					fmt.Fprintf(w, " endTxnMarker: %s coordinatorEpoch: %d", typ, ce)
				}
			} else if decode != nil {
				fmt.Fprint(w, " "+decode(r.Key, r.Value))
			} else if data {
				fmt.Fprintf(w, " key: %s payload: %s", orNull(r.Key), orNull(r.Value))
			}
			fmt.Fprintln(w)
		}
	}
	if err := it.Err(); err != nil {
		fmt.Fprintf(os.Stderr, "%v\n", err)
	}
	return len(it.Rest())
}

func size(b []byte) int {
	if b == nil {
		return -1
	}
	return len(b)
}

// decodeTxnLogRecord renders a __transaction_state record (4.x JSON shape).
var decodeTxnLogRecord = txn.DecodeJSON

// decodeOffsetsRecord renders a __consumer_offsets record (4.x JSON shape).
var decodeOffsetsRecord = group.DecodeJSON

func orNull(b []byte) string {
	if b == nil {
		return "null"
	}
	return string(b)
}
