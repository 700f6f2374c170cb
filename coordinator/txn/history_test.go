package txn

import (
	"fmt"
	"io"
	"log/slog"
	"sort"
	"testing"

	"github.com/strand-io/strand/broker/storage"
	"github.com/strand-io/strand/record"
)

// txnHistory drives the coordinator's own state machine (Decide, begin,
// apply) for transactional ids and hands every batch the coordinator
// would append to __transaction_state, built by logBatch, to out. Markers
// go to the data partitions, not here, so none is written.
type txnHistory struct {
	txns    map[string]*Metadata
	nextPID int64
	now     int64
	out     func(batch []byte) error
}

func newTxnHistory(out func([]byte) error) *txnHistory {
	return &txnHistory{txns: map[string]*Metadata{}, nextPID: 1000, now: 1_700_000_000_000, out: out}
}

// do decides r for id and, if it writes, appends and applies the write.
func (h *txnHistory) do(id string, r Request) (Decision, error) {
	h.now++
	r.TransactionalID, r.Now = id, h.now
	if r.NewProducerID == 0 {
		r.NewProducerID = -1
	}
	for {
		m := h.txns[id]
		d := Decide(m, r)
		if d.NeedProducerID {
			pid := h.nextPID
			h.nextPID++
			if r.Kind == KindInitProducerId && (m == nil || m.State == Dead) {
				h.txns[id] = newMetadata(id, pid, r.TimeoutMs, h.now)
			} else {
				r.NewProducerID = pid
			}
			continue
		}
		if d.Err != nil && d.Write == nil {
			return d, d.Err
		}
		if d.Write == nil {
			return d, nil
		}
		if !m.begin(d.Write) {
			return d, fmt.Errorf("%s: transition to %v refused", id, d.Write.state)
		}
		v := d.Write.value()
		if d.Write.state == Dead {
			v = nil
		}
		b, err := logBatch(id, v, h.now)
		if err != nil {
			return d, err
		}
		if err := h.out(b); err != nil {
			return d, err
		}
		m.apply()
		if m.State == Dead {
			delete(h.txns, id)
		}
		return d, d.Err
	}
}

// init is InitProducerId for id.
func (h *txnHistory) init(id string) error {
	_, err := h.do(id, Request{Kind: KindInitProducerId, TxnVersion: 2, ProducerID: -1, Epoch: -1, TimeoutMs: 60_000})
	return err
}

// transaction runs one version 2 transaction of id over parts to its end:
// the partitions added, EndTxn, and the markers reported written.
func (h *txnHistory) transaction(id string, commit bool, parts []TopicPartition) error {
	m := h.txns[id]
	if _, err := h.do(id, Request{Kind: KindAddPartitions, TxnVersion: 2, ProducerID: m.ProducerID, Epoch: m.ProducerEpoch, Partitions: parts}); err != nil {
		return fmt.Errorf("add: %w", err)
	}
	m = h.txns[id]
	if _, err := h.do(id, Request{Kind: KindEndTxn, TxnVersion: 2, ProducerID: m.ProducerID, Epoch: m.ProducerEpoch, Commit: commit}); err != nil {
		return fmt.Errorf("end: %w", err)
	}
	m = h.txns[id]
	if _, err := h.do(id, Request{Kind: KindMarkersDone, TxnVersion: 2, ProducerID: m.ProducerID, Epoch: m.ProducerEpoch}); err != nil {
		return fmt.Errorf("markers done: %w", err)
	}
	return nil
}

// expire runs the expiration scan's request for id at time now.
func (h *txnHistory) expire(id string, now int64, expirationMs int64) error {
	h.now = now - 1
	_, err := h.do(id, Request{Kind: KindExpire, ExpirationMs: expirationMs})
	return err
}

// describeIDs renders loaded ids for comparison.
func describeIDs(txns map[string]*Metadata) map[string]string {
	out := make(map[string]string, len(txns))
	for id, m := range txns {
		parts := sortedPartitions(m.Partitions)
		out[id] = fmt.Sprintf("pid=%d prev=%d next=%d epoch=%d last=%d timeout=%d state=%v parts=%v start=%d update=%d reason=%q v=%d",
			m.ProducerID, m.PrevProducerID, m.NextProducerID, m.ProducerEpoch, m.LastProducerEpoch, m.TimeoutMs, m.State, parts,
			m.StartTimeMs, m.LastUpdateMs, m.Reason, m.TxnVersion)
	}
	return out
}

// openLog opens a log in a fresh directory with segments of segmentBytes.
func openLog(tb testing.TB, dir string, segmentBytes int64) *storage.Log {
	tb.Helper()
	cfg := storage.DefaultConfig()
	cfg.SegmentBytes, cfg.RetentionMs = segmentBytes, -1
	l, err := storage.Open(dir, storage.PartitionKey{Topic: "__transaction_state", Partition: 0}, cfg, 0, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { l.Close() })
	return l
}

// appendTo appends coordinator batches to l as its leader.
func appendTo(l *storage.Log) func([]byte) error {
	return func(b []byte) error {
		_, err := l.AppendAsLeader(b, 0)
		return err
	}
}

// lastPerKey is Kafka's cleaner on a transaction log (no transactional
// data, no markers in it): only the last record of each key, and with
// dropTombstones (past the delete horizon) no tombstone.
func lastPerKey(tb testing.TB, l *storage.Log, dropTombstones bool) [][]byte {
	tb.Helper()
	type rec struct {
		key   string
		value []byte
	}
	var all []rec
	if err := readLog(l, func(k, v []byte) { all = append(all, rec{string(k), v}) }); err != nil {
		tb.Fatal(err)
	}
	last := map[string]int{}
	for i, r := range all {
		last[r.key] = i
	}
	var out [][]byte
	for i, r := range all {
		if last[r.key] != i || (r.value == nil && dropTombstones) {
			continue
		}
		b, err := record.Build(record.BatchOptions{ProducerID: record.NoProducerID, ProducerEpoch: record.NoProducerEpoch, BaseSequence: record.NoSequence, PartitionLeaderEpoch: -1},
			[]record.Record{{Key: []byte(r.key), Value: r.value}})
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

var discardLog = slog.New(slog.NewTextHandler(io.Discard, nil))

func warnTB(tb testing.TB) func(string, ...any) {
	return func(msg string, args ...any) { tb.Errorf("replay: %s %v", msg, args) }
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
