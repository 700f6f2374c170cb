package txn

import (
	"fmt"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/internal/planted"
	"github.com/strand-io/strand/testkit/story"
)

// TestStories runs the coordinator-side protocol stories in
// testdata/stories through the state machine (Decide) and the transaction
// log encoding: every applied transition is appended to an in-memory
// __transaction_state partition as its key and value bytes, and a
// failover rebuilds a new coordinator's state from those bytes alone, as
// Coordinator.load does. Run with -rewrite to regenerate the expected
// output after a deliberate change, and read the diff.
func TestStories(t *testing.T) {
	story.Walk(t, "testdata/stories", func(t *testing.T) func(*story.Command) string {
		return newTxnWorld(t).run
	})
}

func newTxnWorld(t *testing.T) *txnWorld {
	return &txnWorld{t: t, txns: map[string]*Metadata{}, nextPID: 1000, now: 1_000_000}
}

// TestStoriesCatchPlantedBugs shows the stories fail when the behaviour
// they tell changes: a fence that writes PREPARE_EPOCH_FENCE to the log
// (fencing.txt), and an abort of an empty transaction refused
// (empty_abort.txt). Each planted bug must make its story differ.
func TestStoriesCatchPlantedBugs(t *testing.T) {
	for _, c := range []struct {
		bug   planted.Bug
		story string
	}{
		{planted.FenceWritesPrepareEpochFence, "fencing.txt"},
		{planted.EmptyAbortRefused, "empty_abort.txt"},
	} {
		t.Run(c.bug.String(), func(t *testing.T) {
			defer planted.Set(c.bug)()
			r := &story.Recorder{TB: t}
			story.RunFile(r, filepath.Join("testdata/stories", c.story), newTxnWorld(t).run)
			if len(r.Errors) == 0 {
				t.Fatalf("%s passed with planted.%s on", c.story, c.bug)
			}
			t.Logf("caught (%d mismatches), first:\n%s", len(r.Errors), r.Errors[0])
		})
	}
}

type logRecord struct{ key, value []byte }

// txnWorld is one coordinator's state over a transaction log that
// outlives it.
type txnWorld struct {
	t          *testing.T
	txns       map[string]*Metadata // the current coordinator's memory
	log        []logRecord          // the transaction log partition
	coordEpoch int
	nextPID    int64
	now        int64
}

func (w *txnWorld) run(c *story.Command) string {
	w.now += 10
	r := Request{TransactionalID: c.Str("id", "tx"), TxnVersion: int16(c.Int(w.t, "version", 2)), ProducerID: c.Int(w.t, "pid", -1),
		Epoch: int16(c.Int(w.t, "epoch", -1)), Now: w.now, NewProducerID: -1}
	switch c.Name {
	case "init":
		r.Kind, r.TimeoutMs = KindInitProducerId, int32(c.Int(w.t, "timeout", 60000))
	case "add":
		r.Kind = KindAddPartitions
		for _, s := range c.List("partitions") {
			i := strings.LastIndex(s, "-")
			n, err := strconv.Atoi(s[i+1:])
			if i < 0 || err != nil {
				w.t.Fatalf("%s: partition %q is not topic-N", c.Pos, s)
			}
			r.Partitions = append(r.Partitions, TopicPartition{s[:i], int32(n)})
		}
	case "end":
		r.Kind = KindEndTxn
		r.Commit = len(c.Words) > 0 && c.Words[0] == "commit"
	case "markers-written":
		// Every partition acknowledged the markers of the Prepare* state.
		m := w.txns[r.TransactionalID]
		if m == nil {
			w.t.Fatalf("%s: no metadata for %q", c.Pos, r.TransactionalID)
		}
		r.Kind, r.ProducerID, r.Epoch = KindMarkersDone, m.ProducerID, m.ProducerEpoch
	case "elapse":
		w.now += c.Int(w.t, "ms", 0)
		return fmt.Sprintf("the coordinator's clock moves %d ms", c.Int(w.t, "ms", 0))
	case "timeout-scan":
		r.Kind = KindTimeout
	case "state":
		return describeMeta(w.txns[r.TransactionalID])
	case "log":
		return w.dumpLog()
	case "failover":
		return w.failover()
	default:
		w.t.Fatalf("%s: unknown command %q", c.Pos, c.Name)
	}
	return w.decide(c, r)
}

// decide runs r through the state machine as Coordinator does: a new
// producer id when one is asked for (on an unknown id, the metadata is
// created with it first), then the write appended to the log and applied.
func (w *txnWorld) decide(c *story.Command, r Request) string {
	var lines []string
	m := w.txns[r.TransactionalID]
	d := Decide(m, r)
	if d.NeedProducerID {
		pid := w.nextPID
		w.nextPID++
		lines = append(lines, fmt.Sprintf("allocate producer id %d", pid))
		if r.Kind == KindInitProducerId && (m == nil || m.State == Dead) {
			m = newMetadata(r.TransactionalID, pid, r.TimeoutMs, r.Now)
			w.txns[r.TransactionalID] = m
		} else {
			r.NewProducerID = pid
		}
		d = Decide(m, r)
	}
	if d.Write != nil {
		if !m.begin(d.Write) {
			w.t.Fatalf("%s: %s -> %s refused by begin", c.Pos, m.State, d.Write.state)
		}
		v, err := EncodeValue(d.Write.value())
		if err != nil {
			w.t.Fatal(err)
		}
		w.log = append(w.log, logRecord{EncodeKey(r.TransactionalID), v})
		m.apply()
		lines = append(lines, fmt.Sprintf("log offset %d: %s", len(w.log)-1, describeMeta(m)))
	}
	switch {
	case d.Err != nil:
		lines = append(lines, "answer "+errs.CodeOf(d.Err).String())
	case r.Kind == KindInitProducerId || r.Kind == KindEndTxn:
		lines = append(lines, fmt.Sprintf("answer NONE: producer id %d epoch %d", d.ProducerID, d.Epoch))
	case r.Kind == KindAddPartitions:
		lines = append(lines, "answer NONE")
	case d.Write == nil:
		lines = append(lines, "nothing to do")
	}
	if d.SendMarkers {
		lines = append(lines, w.markers(m))
	}
	return strings.Join(lines, "\n")
}

// markers describes the WriteTxnMarkers the coordinator sends for m's
// Prepare* state.
func (w *txnWorld) markers(m *Metadata) string {
	typ := "ABORT"
	if m.State == PrepareCommit {
		typ = "COMMIT"
	}
	var tps []string
	for _, tp := range sortedPartitions(m.Partitions) {
		tps = append(tps, fmt.Sprintf("%s-%d", tp.Topic, tp.Partition))
	}
	if len(tps) == 0 {
		return fmt.Sprintf("no partitions: the %s completes without markers", strings.ToLower(typ))
	}
	return fmt.Sprintf("send %s markers (producer id %d, epoch %d, coordinator epoch %d) to %s",
		typ, m.ProducerID, m.ProducerEpoch, w.coordEpoch, strings.Join(tps, " "))
}

func describeMeta(m *Metadata) string {
	if m == nil {
		return "unknown transactional id"
	}
	var tps []string
	for _, tp := range sortedPartitions(m.Partitions) {
		tps = append(tps, fmt.Sprintf("%s-%d", tp.Topic, tp.Partition))
	}
	out := fmt.Sprintf("%s %s producer id %d epoch %d (last epoch %d)", m.TransactionalID, m.State, m.ProducerID, m.ProducerEpoch, m.LastProducerEpoch)
	if len(tps) > 0 {
		out += " partitions " + strings.Join(tps, " ")
	}
	if m.Reason != reasonNone {
		out += " reason " + m.Reason
	}
	if m.NextProducerID >= 0 {
		out += fmt.Sprintf(" next producer id %d", m.NextProducerID)
	}
	return out
}

func (w *txnWorld) dumpLog() string {
	var lines []string
	for i, rec := range w.log {
		id, err := DecodeKey(rec.key)
		if err != nil {
			w.t.Fatal(err)
		}
		v, err := DecodeValue(rec.value)
		if err != nil {
			w.t.Fatal(err)
		}
		lines = append(lines, fmt.Sprintf("%d: %s", i, describeMeta(fromValue(id, v))))
	}
	if len(lines) == 0 {
		return "empty"
	}
	return strings.Join(lines, "\n")
}

// failover drops the coordinator's memory and loads a new coordinator
// (the next coordinator epoch) from the log bytes: the last record of
// each id is its state. It reports what the new coordinator resumes and
// whether the replayed state equals what the old one had in memory.
func (w *txnWorld) failover() string {
	old := w.txns
	w.txns = map[string]*Metadata{}
	w.coordEpoch++
	for _, rec := range w.log {
		id, err := DecodeKey(rec.key)
		if err != nil {
			w.t.Fatal(err)
		}
		v, err := DecodeValue(rec.value)
		if err != nil {
			w.t.Fatal(err)
		}
		if v == nil {
			delete(w.txns, id)
			continue
		}
		w.txns[id] = fromValue(id, v)
	}
	ids := make([]string, 0, len(w.txns))
	for id := range w.txns {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	lines := []string{fmt.Sprintf("coordinator epoch %d loads %d records", w.coordEpoch, len(w.log))}
	for _, id := range ids {
		m := w.txns[id]
		same := "same as the old coordinator's memory"
		if !sameState(old[id], m) {
			same = "DIFFERS from the old coordinator's memory: " + describeMeta(old[id])
		}
		lines = append(lines, fmt.Sprintf("loaded %s; %s", describeMeta(m), same))
		if m.State.IsPrepare() {
			lines = append(lines, "resume: "+w.markers(m))
		}
	}
	return strings.Join(lines, "\n")
}

// sameState compares the persisted fields of two metadata.
func sameState(a, b *Metadata) bool {
	if a == nil || b == nil {
		return a == b
	}
	strip := func(m *Metadata) Metadata {
		c := *m
		c.pending, c.waiters, c.settled = nil, nil, nil
		return c
	}
	return reflect.DeepEqual(strip(a), strip(b))
}
