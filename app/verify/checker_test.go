package verify

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// at is t0 plus s seconds.
func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

var (
	src0 = TP{"src", 0}
	src1 = TP{"src", 1}
	sink = TP{"sink", 0}
)

func wr(tp TP, v string, off, seq int64) Write {
	return Write{TP: tp, Value: v, Offset: off, ProducerSeq: seq}
}

func live(reader string, rc bool, tp TP, off int64, v string, s float64) Read {
	return Read{Reader: reader, ReadCommitted: rc, TP: tp, Offset: off, Value: v, Time: at(s)}
}

// finalReads is the final read-back of one record: read_uncommitted always,
// read_committed when committed.
func finalReads(tp TP, off int64, v string, committed bool) []Read {
	rs := []Read{{Reader: "final-ru", Final: true, TP: tp, Offset: off, Value: v, Time: at(100)}}
	if committed {
		rs = append(rs, Read{Reader: "final-rc", ReadCommitted: true, Final: true, TP: tp, Offset: off, Value: v, Time: at(100)})
	}
	return rs
}

// cleanHistory is a fresh history with no anomaly: two producers, an
// aborted txn, an Unknown txn whose write became visible, and a stage that
// processed part of the source, one of its txns aborted and retried.
//
//	src/0: 0 a(T1) 1 c(T2) 2 e(T3, aborted) 3 g(T4, unknown, unacked) 4 h(T5) 5 i(T5)
//	src/1: 0 b(T1) 1 d(T2) 2 f(T3, aborted) 3 j(T6)
//	sink/0: 0 t:a(S1) 1 t:c(S1) 2 t:b(S2, aborted) 3 t:b(S3) 4 t:d(S3)
//
// The stage group committed src/0 -> 2 and src/1 -> 2.
func cleanHistory() *History {
	h := &History{
		SourceTopic: "src",
		SinkTopic:   "sink",
		Transform:   TransformRule,
		Txns: []Txn{
			{ID: "T1", Producer: "p1", Outcome: Committed, Begin: at(1), CommitRequested: at(2), End: at(3),
				Writes: []Write{wr(src0, "a", 0, 0), wr(src1, "b", 0, 1)}},
			{ID: "T2", Producer: "p2", Outcome: Committed, Begin: at(1), CommitRequested: at(2), End: at(3),
				Writes: []Write{wr(src0, "c", 1, 0), wr(src1, "d", 1, 1)}},
			{ID: "T3", Producer: "p1", Outcome: Aborted, Begin: at(4), End: at(5),
				Writes: []Write{wr(src0, "e", 2, 2), wr(src1, "f", 2, 3)}},
			{ID: "T4", Producer: "p2", Outcome: Unknown, Begin: at(4), CommitRequested: at(5), End: at(6),
				Writes: []Write{wr(src0, "g", -1, 2)}},
			{ID: "T5", Producer: "p1", Outcome: Committed, Begin: at(6), CommitRequested: at(7), End: at(8),
				Writes: []Write{wr(src0, "h", 4, 4), wr(src0, "i", 5, 5)}},
			{ID: "T6", Producer: "p2", Outcome: Committed, Begin: at(6), CommitRequested: at(7), End: at(8),
				Writes: []Write{wr(src1, "j", 3, 3)}},
			{ID: "S1", Producer: "stage", Outcome: Committed, Begin: at(10), CommitRequested: at(11), End: at(12),
				Inputs:  []Read{live("stage", true, src0, 0, "a", 10), live("stage", true, src0, 1, "c", 10)},
				Writes:  []Write{wr(sink, "t:a", 0, 0), wr(sink, "t:c", 1, 1)},
				Offsets: Offsets{{src0, 2}}},
			{ID: "S2", Producer: "stage", Outcome: Aborted, Begin: at(13), End: at(14),
				Inputs:  []Read{live("stage", true, src1, 0, "b", 13)},
				Writes:  []Write{wr(sink, "t:b", 2, 2)},
				Offsets: Offsets{{src1, 1}}},
			{ID: "S3", Producer: "stage", Outcome: Committed, Begin: at(15), CommitRequested: at(16), End: at(17),
				Inputs:  []Read{live("stage", true, src1, 0, "b", 15), live("stage", true, src1, 1, "d", 15)},
				Writes:  []Write{wr(sink, "t:b", 3, 3), wr(sink, "t:d", 4, 4)},
				Offsets: Offsets{{src1, 2}}},
		},
		Reads: []Read{
			live("c1", true, src0, 0, "a", 4),
			live("c1", true, src1, 3, "j", 9),
			live("c2", false, src0, 2, "e", 4.5),
		},
		GroupOffsets: Offsets{{src0, 2}, {src1, 2}},
	}
	type rec struct {
		tp        TP
		off       int64
		v         string
		committed bool
	}
	for _, r := range []rec{
		{src0, 0, "a", true}, {src0, 1, "c", true}, {src0, 2, "e", false}, {src0, 3, "g", true}, {src0, 4, "h", true}, {src0, 5, "i", true},
		{src1, 0, "b", true}, {src1, 1, "d", true}, {src1, 2, "f", false}, {src1, 3, "j", true},
		{sink, 0, "t:a", true}, {sink, 1, "t:c", true}, {sink, 2, "t:b", false}, {sink, 3, "t:b", true}, {sink, 4, "t:d", true},
	} {
		h.Reads = append(h.Reads, finalReads(r.tp, r.off, r.v, r.committed)...)
	}
	return h
}

// txn returns the txn with id.
func txn(t *testing.T, h *History, id string) *Txn {
	t.Helper()
	for i := range h.Txns {
		if h.Txns[i].ID == id {
			return &h.Txns[i]
		}
	}
	t.Fatalf("no txn %s", id)
	return nil
}

// dropReads removes the reads matching keep == false.
func dropReads(h *History, drop func(r Read) bool) {
	var out []Read
	for _, r := range h.Reads {
		if !drop(r) {
			out = append(out, r)
		}
	}
	h.Reads = out
}

func finalOf(v string) func(Read) bool {
	return func(r Read) bool { return r.Final && r.Value == v }
}

// expect asserts every counter of r: the ones in want have that count,
// all others 0.
func expect(t *testing.T, r Report, want map[string]int) {
	t.Helper()
	names := map[string]bool{}
	for _, c := range r.Checks() {
		names[c.Name] = true
		if c.Count != want[c.Name] {
			t.Errorf("%s = %d, want %d; examples: %q", c.Name, c.Count, want[c.Name], c.Examples)
		}
		if len(c.Examples) != min(c.Count, MaxExamples) {
			t.Errorf("%s: %d examples for count %d", c.Name, len(c.Examples), c.Count)
		}
	}
	for n := range want {
		if !names[n] {
			t.Errorf("no check named %q", n)
		}
	}
	if wantOK := len(want) == 0; r.OK() != wantOK {
		t.Errorf("OK() = %v, want %v", r.OK(), wantOK)
	}
	if t.Failed() {
		t.Log("\n" + r.Table())
	}
}

func TestCleanHistory(t *testing.T) {
	r := Check(cleanHistory())
	expect(t, r, nil)
	want := Totals{
		CommittedTxns: 6, AbortedTxns: 2, UnknownTxns: 1, UnknownVisible: 1, StageTxns: 3,
		CommittedRecords: 11, AbortedRecords: 3, UnknownRecords: 1,
		Reads: 3 + 5 + 2*15 - 3, FinalReads: 2*15 - 3,
	}
	if r.Totals != want {
		t.Errorf("totals = %+v, want %+v", r.Totals, want)
	}
	tab := r.Table()
	for _, s := range []string{"lost-writes", "offset-mismatch", "malformed-history", "verdict: OK", "1 unknown (1 proven visible)"} {
		if !strings.Contains(tab, s) {
			t.Errorf("table lacks %q:\n%s", s, tab)
		}
	}
}

func TestUnknownTxnNotSeenIsNotLost(t *testing.T) {
	h := cleanHistory()
	dropReads(h, finalOf("g"))
	r := Check(h)
	expect(t, r, nil)
	if r.Totals.UnknownVisible != 0 {
		t.Errorf("UnknownVisible = %d, want 0", r.Totals.UnknownVisible)
	}
}

func TestUnknownTxnProvenByLiveRead(t *testing.T) {
	// g is seen only by a live read_committed read; that proves T4
	// committed, so g missing from the final read is a lost write.
	h := cleanHistory()
	dropReads(h, finalOf("g"))
	h.Reads = append(h.Reads, live("c1", true, src0, 3, "g", 6))
	expect(t, Check(h), map[string]int{"lost-writes": 1})
}

func TestUnknownTxnSeenOnlyUncommittedProvesNothing(t *testing.T) {
	h := cleanHistory()
	dropReads(h, finalOf("g"))
	h.Reads = append(h.Reads, live("c2", false, src0, 3, "g", 6))
	r := Check(h)
	expect(t, r, nil)
	if r.Totals.UnknownVisible != 0 {
		t.Errorf("UnknownVisible = %d, want 0", r.Totals.UnknownVisible)
	}
}

func TestLostWrite(t *testing.T) {
	t.Run("vanished", func(t *testing.T) {
		// j was seen live, then is missing from the final read-back.
		h := cleanHistory()
		dropReads(h, finalOf("j"))
		r := Check(h)
		expect(t, r, map[string]int{"lost-writes": 1})
		if !strings.Contains(r.LostWrites.Examples[0], "earlier seen by live read_committed read by c1") {
			t.Errorf("example %q does not say who saw it", r.LostWrites.Examples[0])
		}
	})
	t.Run("never seen", func(t *testing.T) {
		h := cleanHistory()
		dropReads(h, func(r Read) bool { return r.Value == "j" })
		r := Check(h)
		expect(t, r, map[string]int{"lost-writes": 1})
		if !strings.Contains(r.LostWrites.Examples[0], "never read by anyone") {
			t.Errorf("example %q", r.LostWrites.Examples[0])
		}
	})
	t.Run("only in read_uncommitted", func(t *testing.T) {
		h := cleanHistory()
		dropReads(h, func(r Read) bool { return r.ReadCommitted && r.Value == "j" })
		r := Check(h)
		expect(t, r, map[string]int{"lost-writes": 1})
		if !strings.Contains(r.LostWrites.Examples[0], "present only in the final read_uncommitted read") {
			t.Errorf("example %q", r.LostWrites.Examples[0])
		}
	})
}

func TestDuplicate(t *testing.T) {
	t.Run("read_committed", func(t *testing.T) {
		// a second copy of a at src/0@6, in both final reads.
		h := cleanHistory()
		h.Reads = append(h.Reads, finalReads(src0, 6, "a", true)...)
		expect(t, Check(h), map[string]int{"duplicates": 1})
	})
	t.Run("read_uncommitted", func(t *testing.T) {
		h := cleanHistory()
		h.Reads = append(h.Reads, finalReads(src1, 4, "d", false)...)
		expect(t, Check(h), map[string]int{"duplicates": 1})
	})
	t.Run("aborted retry copy is not a duplicate", func(t *testing.T) {
		// Already in the clean history: t:b at sink@2 (S2, aborted) and
		// sink@3 (S3) in the final read_uncommitted read. Without the
		// acknowledged offsets, attribution must still tell them apart.
		h := cleanHistory()
		for _, id := range []string{"S2", "S3"} {
			for i := range txn(t, h, id).Writes {
				txn(t, h, id).Writes[i].Offset = -1
			}
		}
		expect(t, Check(h), nil)
	})
}

func TestAbortedVisible(t *testing.T) {
	h := cleanHistory()
	h.Reads = append(h.Reads, live("c1", true, src0, 2, "e", 6))
	r := Check(h)
	// Not visible-before-commit too: aborted writes are counted only here.
	expect(t, r, map[string]int{"aborted-visible": 1})
	if !strings.Contains(r.AbortedVisible.Examples[0], `"e"`) {
		t.Errorf("example %q", r.AbortedVisible.Examples[0])
	}
}

func TestVisibleBeforeCommit(t *testing.T) {
	t.Run("before commit requested", func(t *testing.T) {
		h := cleanHistory()
		h.Reads = append(h.Reads, live("c1", true, src0, 4, "h", 6.5)) // T5 requested commit at 7
		expect(t, Check(h), map[string]int{"visible-before-commit": 1})
	})
	t.Run("commit never requested", func(t *testing.T) {
		h := cleanHistory()
		txn(t, h, "T4").CommitRequested = time.Time{}
		h.Reads = append(h.Reads, live("c1", true, src0, 3, "g", 7))
		expect(t, Check(h), map[string]int{"visible-before-commit": 1})
	})
	t.Run("read at the commit request is fine", func(t *testing.T) {
		h := cleanHistory()
		h.Reads = append(h.Reads, live("c1", true, src0, 4, "h", 7))
		expect(t, Check(h), nil)
	})
	t.Run("read_uncommitted may read early", func(t *testing.T) {
		h := cleanHistory()
		h.Reads = append(h.Reads, live("c2", false, src0, 4, "h", 6.5))
		expect(t, Check(h), nil)
	})
}

func TestOutOfOrder(t *testing.T) {
	// The broker stored p1's h (seq 4) and i (seq 5) swapped, and acked
	// them where it stored them.
	h := cleanHistory()
	t5 := txn(t, h, "T5")
	t5.Writes[0].Offset, t5.Writes[1].Offset = 5, 4
	for i := range h.Reads {
		switch r := &h.Reads[i]; r.Value {
		case "h":
			r.Offset = 5
		case "i":
			r.Offset = 4
		}
	}
	r := Check(h)
	expect(t, r, map[string]int{"out-of-order": 1})
	if !strings.Contains(r.OutOfOrder.Examples[0], "producer p1 in src/0") {
		t.Errorf("example %q", r.OutOfOrder.Examples[0])
	}
}

func TestInconsistentOffsets(t *testing.T) {
	t.Run("two values read at one offset", func(t *testing.T) {
		h := cleanHistory()
		h.Reads = append(h.Reads, live("c2", false, src1, 1, "b", 9)) // d lives at src/1@1
		expect(t, Check(h), map[string]int{"inconsistent-offsets": 1})
	})
	t.Run("acked where another value is read", func(t *testing.T) {
		h := cleanHistory()
		txn(t, h, "T6").Writes[0].Offset = 2 // f lives at src/1@2; j is read at 3
		expect(t, Check(h), map[string]int{"inconsistent-offsets": 1})
	})
	t.Run("unproven unknown ack is no evidence", func(t *testing.T) {
		h := cleanHistory()
		h.Txns = append(h.Txns, Txn{ID: "T7", Producer: "p2", Outcome: Unknown, Begin: at(8), CommitRequested: at(9), End: at(10),
			Writes: []Write{wr(src1, "k", 1, 4)}})
		expect(t, Check(h), nil)
	})
	t.Run("aborted ack is no evidence", func(t *testing.T) {
		h := cleanHistory()
		txn(t, h, "T3").Writes[1].Offset = 1 // f "acked" at d's offset, read at 2
		expect(t, Check(h), nil)
	})
}

func TestTornTxn(t *testing.T) {
	t.Run("committed half visible", func(t *testing.T) {
		// T1's b is missing from the final read_committed read: a lost
		// write (T1 committed) and a torn txn (a is visible).
		h := cleanHistory()
		dropReads(h, func(r Read) bool { return r.Final && r.ReadCommitted && r.Value == "b" })
		r := Check(h)
		expect(t, r, map[string]int{"torn-txns": 1, "lost-writes": 1})
		if !strings.Contains(r.TornTxns.Examples[0], "txn T1 (committed): 1 of 2") {
			t.Errorf("example %q", r.TornTxns.Examples[0])
		}
	})
	t.Run("aborted half visible", func(t *testing.T) {
		// T3's e is visible, f is not: an aborted read and a torn txn.
		h := cleanHistory()
		h.Reads = append(h.Reads, Read{Reader: "final-rc", ReadCommitted: true, Final: true, TP: src0, Offset: 2, Value: "e", Time: at(100)})
		expect(t, Check(h), map[string]int{"torn-txns": 1, "aborted-visible": 1})
	})
	t.Run("unknown half visible", func(t *testing.T) {
		// T4's g is visible, which proves T4 committed, so its g2 is
		// lost as well as T4 being torn.
		h := cleanHistory()
		t4 := txn(t, h, "T4")
		t4.Writes = append(t4.Writes, wr(src1, "g2", -1, 10))
		expect(t, Check(h), map[string]int{"torn-txns": 1, "lost-writes": 1})
	})
}

func TestOffsetMismatch(t *testing.T) {
	t.Run("group offset skips an input", func(t *testing.T) {
		// src/0 committed to 4 although g@3 was never processed.
		h := cleanHistory()
		h.GroupOffsets = Offsets{{src0, 4}, {src1, 2}}
		expect(t, Check(h), map[string]int{"offset-mismatch": 1})
	})
	t.Run("stage txn sends an offset past its inputs", func(t *testing.T) {
		h := cleanHistory()
		// src/0@2 (e) is aborted, but src/0@3 (g) is visible: 4 skips it.
		txn(t, h, "S1").Offsets = Offsets{{src0, 4}}
		expect(t, Check(h), map[string]int{"offset-mismatch": 1})
	})
	t.Run("stage txn's offset skips only an aborted record", func(t *testing.T) {
		// src/1@2 is f (aborted): a read_committed position moves past it,
		// so S3 may send 3 instead of 2.
		h := cleanHistory()
		txn(t, h, "S3").Offsets = Offsets{{src1, 3}}
		h.GroupOffsets = Offsets{{src0, 2}, {src1, 3}}
		expect(t, Check(h), map[string]int{})
	})
	t.Run("stage txn's offset skips a committed record", func(t *testing.T) {
		// Sending 4 skips j at src/1@3: flagged by the transaction rule
		// and by the group-offset rule (j below 4 without an output).
		h := cleanHistory()
		txn(t, h, "S3").Offsets = Offsets{{src1, 4}}
		h.GroupOffsets = Offsets{{src0, 2}, {src1, 4}}
		expect(t, Check(h), map[string]int{"offset-mismatch": 2})
	})
	t.Run("stage txn sends an offset behind its inputs", func(t *testing.T) {
		h := cleanHistory()
		s3 := txn(t, h, "S3")
		s3.Offsets[0].Offset--
		expect(t, Check(h), map[string]int{"offset-mismatch": 1})
	})
	t.Run("stage txn sends no offset for its inputs", func(t *testing.T) {
		h := cleanHistory()
		txn(t, h, "S3").Offsets = nil
		expect(t, Check(h), map[string]int{"offset-mismatch": 1})
	})
	t.Run("output of a record above the committed offset", func(t *testing.T) {
		// S5 processed h and committed, but the group offset of src/0
		// stayed at 2.
		h := cleanHistory()
		h.Txns = append(h.Txns, Txn{ID: "S5", Producer: "stage", Outcome: Committed, Begin: at(18), CommitRequested: at(19), End: at(20),
			Inputs:  []Read{live("stage", true, src0, 4, "h", 18)},
			Writes:  []Write{wr(sink, "t:h", 5, 5)},
			Offsets: Offsets{{src0, 5}}})
		h.Reads = append(h.Reads, finalReads(sink, 5, "t:h", true)...)
		expect(t, Check(h), map[string]int{"offset-mismatch": 1})
	})
	t.Run("input processed twice", func(t *testing.T) {
		// S4 consumed a again and committed its output again. That is a
		// duplicate (t:a twice in the sink) and an offset mismatch (a,
		// below the committed offset, has two outputs instead of one):
		// both rules describe the same event, so both count it.
		h := cleanHistory()
		h.Txns = append(h.Txns, Txn{ID: "S4", Producer: "stage", Outcome: Committed, Begin: at(18), CommitRequested: at(19), End: at(20),
			Inputs:  []Read{live("stage", true, src0, 0, "a", 18)},
			Writes:  []Write{wr(sink, "t:a", 5, 5)},
			Offsets: Offsets{{src0, 1}}})
		h.Reads = append(h.Reads, finalReads(sink, 5, "t:a", true)...)
		expect(t, Check(h), map[string]int{"offset-mismatch": 1, "duplicates": 1})
	})
}

func TestUnwritten(t *testing.T) {
	h := cleanHistory()
	h.Reads = append(h.Reads, live("c2", false, src0, 9, "ghost", 9))
	expect(t, Check(h), map[string]int{"unwritten": 1})
}

func TestMalformed(t *testing.T) {
	for name, plant := range map[string]func(t *testing.T, h *History){
		"wrong transform":     func(t *testing.T, h *History) { h.Transform = "output = input" },
		"bad outcome":         func(t *testing.T, h *History) { txn(t, h, "T3").Outcome = "maybe" },
		"committed no commit": func(t *testing.T, h *History) { txn(t, h, "T5").CommitRequested = time.Time{} },
		"live read no time":   func(t *testing.T, h *History) { h.Reads[0].Time = time.Time{} },
		"reused seq":          func(t *testing.T, h *History) { txn(t, h, "T6").Writes[0].ProducerSeq = 2 },
		"reused value": func(t *testing.T, h *History) {
			h.Txns = append(h.Txns, Txn{ID: "T8", Producer: "p2", Outcome: Aborted, Begin: at(8), End: at(9),
				Writes: []Write{wr(src0, "a", -1, 20)}})
		},
	} {
		t.Run(name, func(t *testing.T) {
			h := cleanHistory()
			plant(t, h)
			expect(t, Check(h), map[string]int{"malformed-history": 1})
		})
	}
	t.Run("nil", func(t *testing.T) {
		expect(t, Check(nil), map[string]int{"malformed-history": 1})
	})
}

func TestExamplesCapped(t *testing.T) {
	h := cleanHistory()
	dropReads(h, func(r Read) bool { return r.Final })
	r := Check(h)
	// Every effectively committed write is lost; T4 is still proven by
	// nothing now (only final reads saw g), so it does not count.
	if r.LostWrites.Count != 11 || len(r.LostWrites.Examples) != MaxExamples {
		t.Errorf("lost writes = %d with %d examples, want 11 with %d", r.LostWrites.Count, len(r.LostWrites.Examples), MaxExamples)
	}
	tab := r.Table()
	for _, s := range []string{"FAIL", "... and 6 more", "verdict: FAIL"} {
		if !strings.Contains(tab, s) {
			t.Errorf("table lacks %q:\n%s", s, tab)
		}
	}
}

func TestDeterministic(t *testing.T) {
	h := cleanHistory()
	dropReads(h, func(r Read) bool { return r.Final && r.Topic == "src" })
	h.Reads = append(h.Reads, live("c2", false, src1, 1, "b", 9), live("c2", false, src0, 9, "ghost", 9))
	first := Check(h)
	for range 20 {
		if r := Check(h); !reflect.DeepEqual(r, first) {
			t.Fatalf("reports differ:\n%s\n%s", first.Table(), r.Table())
		}
	}
}

func TestHistoryJSONRoundTrip(t *testing.T) {
	h := cleanHistory()
	b, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	var back History
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(h, &back) {
		t.Fatalf("round trip changed the history:\n%s", b)
	}
	b2, err := json.Marshal(&back)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != string(b2) {
		t.Fatalf("re-encoding differs:\n%s\n%s", b, b2)
	}
	for _, s := range []string{`"outcome":"unknown"`, `"topic":"src","partition":1`, `"producer_seq":`, `"offsets":[{"topic":"src","partition":0,"offset":2}]`} {
		if !strings.Contains(string(b), s) {
			t.Errorf("JSON lacks %s", s)
		}
	}
	if strings.Contains(string(b), `"commit_requested":"0001`) {
		t.Error("zero CommitRequested is encoded")
	}
	if !reflect.DeepEqual(Check(h), Check(&back)) {
		t.Error("verdict changed across the round trip")
	}
	if _, err := json.Marshal(Check(h)); err != nil {
		t.Errorf("report does not encode: %v", err)
	}
}

func TestOutputForAndOffsets(t *testing.T) {
	if got := OutputFor("x1"); got != "t:x1" {
		t.Errorf("OutputFor = %q", got)
	}
	o := Offsets{{src0, 1}, {src1, 7}, {src0, 3}}
	if v, ok := o.Get(src0); !ok || v != 3 {
		t.Errorf("Get(src0) = %d, %v; want the last entry, 3", v, ok)
	}
	if _, ok := o.Get(sink); ok {
		t.Error("Get(sink) found an entry")
	}
}

// simulate builds a larger clean history from a simulated log: producers'
// transactions (committed, aborted, unknown either way) with control
// markers taking offsets, live consumers of both isolation levels, and a
// stage that processes batches with aborted attempts and retries.
func simulate(seed uint64) *History {
	rng := rand.New(rand.NewPCG(seed, 1))
	type entry struct {
		v       string
		visible bool
		marker  bool
	}
	logs := map[TP][]entry{}
	srcTPs := []TP{{"src", 0}, {"src", 1}, {"src", 2}}
	sinkTPs := []TP{{"sink", 0}, {"sink", 1}}
	clock := 0.0
	tick := func() time.Time { clock += 0.01; return at(clock) }
	h := &History{SourceTopic: "src", SinkTopic: "sink", Transform: TransformRule}
	seqs := map[string]int64{}
	// ends a transaction in the log: marks its records and adds markers.
	end := func(idx map[TP][]int, committed bool) {
		for tp, is := range idx {
			for _, i := range is {
				logs[tp][i].visible = committed
			}
			logs[tp] = append(logs[tp], entry{marker: true})
		}
	}
	pos := map[TP]int{}
	consume := func(name string, rc bool) {
		for _, tp := range append(append([]TP{}, srcTPs...), sinkTPs...) {
			k := TP{name + "/" + tp.Topic, tp.Partition}
			for ; pos[k] < len(logs[tp]); pos[k]++ {
				e := logs[tp][pos[k]]
				if e.marker || (rc && !e.visible) {
					continue
				}
				h.Reads = append(h.Reads, Read{Reader: name, ReadCommitted: rc, TP: tp, Offset: int64(pos[k]), Value: e.v, Time: tick()})
			}
		}
	}
	n := 0
	for i := range 200 {
		p := []string{"p0", "p1", "p2", "p3"}[rng.IntN(4)]
		tx := Txn{ID: "T" + strconv.Itoa(i), Producer: p, Begin: tick()}
		roll := rng.Float64()
		committed := roll < 0.8
		switch {
		case roll < 0.7:
			tx.Outcome = Committed
		case roll < 0.8, roll >= 0.9:
			tx.Outcome = Unknown
		default:
			tx.Outcome = Aborted
		}
		idx := map[TP][]int{}
		for range 1 + rng.IntN(3) {
			tp := srcTPs[rng.IntN(len(srcTPs))]
			n++
			v := "v" + strconv.Itoa(n)
			off := int64(len(logs[tp]))
			logs[tp] = append(logs[tp], entry{v: v})
			idx[tp] = append(idx[tp], int(off))
			if tx.Outcome == Unknown && rng.IntN(2) == 0 {
				off = -1
			}
			tx.Writes = append(tx.Writes, Write{TP: tp, Value: v, Offset: off, ProducerSeq: seqs[p]})
			seqs[p]++
		}
		if tx.Outcome != Aborted {
			tx.CommitRequested = tick()
		}
		end(idx, committed)
		tx.End = tick()
		h.Txns = append(h.Txns, tx)
		if rng.IntN(5) == 0 {
			consume("live-rc", true)
		}
		if rng.IntN(7) == 0 {
			consume("live-ru", false)
		}
	}
	// The stage: per source partition, batches of up to 3 committed
	// records, stopping before the last few; an attempt aborts with
	// probability 1/4 and is retried.
	k := 0
	for _, tp := range srcTPs {
		next, committedOff := 0, 0
		limit := len(logs[tp]) * 4 / 5
		for next < limit {
			var inputs []Read
			last := next
			for i := next; i < limit && len(inputs) < 3; i++ {
				e := logs[tp][i]
				last = i
				if e.marker || !e.visible {
					continue
				}
				inputs = append(inputs, Read{Reader: "stage", ReadCommitted: true, TP: tp, Offset: int64(i), Value: e.v, Time: tick()})
			}
			if len(inputs) == 0 {
				next = last + 1
				continue
			}
			for {
				k++
				tx := Txn{ID: "S" + strconv.Itoa(k), Producer: "stage", Begin: tick(), Inputs: inputs,
					Offsets: Offsets{{tp, inputs[len(inputs)-1].Offset + 1}}}
				idx := map[TP][]int{}
				for _, in := range inputs {
					out := sinkTPs[in.Partition%2]
					off := int64(len(logs[out]))
					logs[out] = append(logs[out], entry{v: OutputFor(in.Value)})
					idx[out] = append(idx[out], int(off))
					tx.Writes = append(tx.Writes, Write{TP: out, Value: OutputFor(in.Value), Offset: off, ProducerSeq: seqs["stage"]})
					seqs["stage"]++
				}
				ok := rng.IntN(4) != 0
				if ok {
					tx.Outcome = Committed
					tx.CommitRequested = tick()
				} else {
					tx.Outcome = Aborted
				}
				end(idx, ok)
				tx.End = tick()
				h.Txns = append(h.Txns, tx)
				if ok {
					break
				}
			}
			next = int(inputs[len(inputs)-1].Offset) + 1
			committedOff = next
		}
		if committedOff > 0 {
			h.GroupOffsets = append(h.GroupOffsets, TPOffset{tp, int64(committedOff)})
		}
	}
	consume("live-rc", true)
	for _, tp := range append(append([]TP{}, srcTPs...), sinkTPs...) {
		for off, e := range logs[tp] {
			if e.marker {
				continue
			}
			h.Reads = append(h.Reads, finalReads(tp, int64(off), e.v, e.visible)...)
		}
	}
	return h
}

func TestSimulatedCleanHistories(t *testing.T) {
	for seed := range uint64(20) {
		h := simulate(seed)
		r := Check(h)
		if !r.OK() {
			t.Fatalf("seed %d:\n%s", seed, r.Table())
		}
		if r.Totals.CommittedTxns < 150 || r.Totals.AbortedTxns == 0 || r.Totals.UnknownVisible == 0 || r.Totals.StageTxns == 0 {
			t.Fatalf("seed %d: history too thin: %+v", seed, r.Totals)
		}
	}
}

func TestSimulatedPlantedLoss(t *testing.T) {
	// Dropping one committed source record from the final
	// read_committed read of a simulated history is found.
	h := simulate(7)
	for i, rd := range h.Reads {
		if rd.Final && rd.ReadCommitted && rd.Topic == "src" {
			o, _ := h.GroupOffsets.Get(rd.TP)
			if rd.Offset < o {
				continue // keep the stage rules out of it
			}
			tx := writerOf(h, rd.Value)
			if tx.Outcome != Committed || len(tx.Writes) != 1 {
				continue
			}
			h.Reads = append(h.Reads[:i], h.Reads[i+1:]...)
			expect(t, Check(h), map[string]int{"lost-writes": 1})
			return
		}
	}
	t.Fatal("no suitable record")
}

func writerOf(h *History, v string) *Txn {
	for i := range h.Txns {
		for _, w := range h.Txns[i].Writes {
			if w.Value == v {
				return &h.Txns[i]
			}
		}
	}
	return nil
}
