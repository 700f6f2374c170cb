package verify

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// faultHistory is cleanHistory with the transaction faults, all handled
// right: producer ids and epochs, a fence at the end of the epochs that
// moved to a new producer id, a zombie fence, an early abort with one
// record unsent, spans of the protocol reader (one delivered with a HW one
// step behind its leader's), and the marker drill counted.
func faultHistory() *History {
	h := cleanHistory()
	pid := func(id int64, e int16) *PID { return &PID{ID: id, Epoch: e} }
	txn0 := func(id string) *Txn {
		for i := range h.Txns {
			if h.Txns[i].ID == id {
				return &h.Txns[i]
			}
		}
		panic(id)
	}
	txn0("T1").PID = pid(10, MaxProducerEpoch-1)
	txn0("T3").PID = pid(10, MaxProducerEpoch)
	txn0("T3").Fence = FenceEpochEnd
	txn0("T5").PID = pid(11, 1)
	txn0("T2").PID = pid(20, 7)
	txn0("T6").PID = pid(20, 9)
	h.Incarnations = []Incarnation{
		{Producer: "p1", PID: PID{10, MaxProducerEpoch - 1}, Time: at(0.5)},
		{Producer: "p2", PID: PID{20, 7}, Time: at(0.5)},
		{Producer: "p1", PID: PID{11, 1}, Time: at(4.5), Fence: FenceEpochEnd, Fenced: pid(10, MaxProducerEpoch)},
		{Producer: "p2", PID: PID{20, 9}, Time: at(5.5), Fence: FenceZombie, Fenced: pid(20, 8)},
	}
	h.Txns = append(h.Txns,
		Txn{ID: "T7", Producer: "p2", Outcome: Aborted, Begin: at(5), End: at(5.5), PID: pid(20, 8), Fence: FenceZombie,
			CommitRequested: at(5.4), Writes: []Write{wr(src1, "k", -1, 4)}},
		Txn{ID: "T8", Producer: "p1", Outcome: Aborted, Begin: at(9), End: at(9.1), PID: pid(11, 2), EarlyAbort: true,
			Writes: []Write{{TP: src0, Value: "l", Offset: -1, ProducerSeq: 6, Unsent: true}, wr(src1, "m", -1, 7)}},
		Txn{ID: "T9", Producer: "p1", Outcome: Aborted, Begin: at(9.2), End: at(9.3), PID: pid(11, 3), EarlyAbort: true,
			Writes: []Write{{TP: src1, Value: "n", Offset: -1, ProducerSeq: 8, Unsent: true}}},
	)
	h.Spans = []TxnSpan{
		{TP: src0, Reader: "proto-rc", ProducerID: 10, Epoch: 1, FirstOffset: 0, Delivered: 0, DeliveredHW: 2, LeaderHW: 2, Marker: 1, Commit: true, Orphaned: -1},
		// Handed out with a HW one step behind: its leader reported 9 next.
		{TP: src0, Reader: "proto-rc", ProducerID: 11, Epoch: 1, FirstOffset: 4, Delivered: 4, DeliveredHW: 6, LeaderHW: 9, Marker: 6, Commit: true, Orphaned: -1},
		// Aborted: nothing delivered.
		{TP: src1, Reader: "proto-rc", ProducerID: 10, Epoch: 2, FirstOffset: 2, Delivered: -1, DeliveredHW: -1, LeaderHW: -1, Marker: 3, Orphaned: -1},
	}
	h.Drills = []string{"kill-leader", "marker-failover"}
	return h
}

func TestFaultHistoryClean(t *testing.T) {
	r := Check(faultHistory())
	expect(t, r, nil)
	tot := r.Totals
	want := struct{ epochEnd, zombie, rot, early, empty, unsent, failovers, spans, delivered int }{1, 1, 1, 2, 1, 2, 1, 3, 2}
	got := struct{ epochEnd, zombie, rot, early, empty, unsent, failovers, spans, delivered int }{tot.EpochEndFences, tot.ZombieFences,
		tot.Rotations, tot.EarlyAborts, tot.EmptyAborts, tot.UnsentWrites, tot.MarkerFailovers, tot.Spans, tot.SpansDelivered}
	if got != want || tot.MaxEpoch != MaxProducerEpoch {
		t.Errorf("totals %+v (max epoch %d), want %+v", got, tot.MaxEpoch, want)
	}
	tab := r.Table()
	for _, s := range []string{"1 fences at the epoch end, 1 zombie fences, 1 producer-id rotations (epochs up to 32766)",
		"2 early aborts (1 with nothing sent, 2 records unsent)", "1 marker-failover", "3 transactions followed"} {
		if !strings.Contains(tab, s) {
			t.Errorf("table lacks %q:\n%s", s, tab)
		}
	}
}

func TestHangingTxns(t *testing.T) {
	h := faultHistory()
	h.OpenAtEnd = []OpenPartition{{TP: src0, HighWatermark: 9, LastStableOffset: 4, Waited: 40, Blocking: "producerId=11 epoch 1 open since offset 4"}}
	h.Spans = append(h.Spans, TxnSpan{TP: src1, ProducerID: 20, Epoch: 7, FirstOffset: 1, Delivered: 1, DeliveredHW: 4, LeaderHW: 4, Marker: -1, Orphaned: 3})
	r := Check(h)
	expect(t, r, map[string]int{"hanging-txns": 2})
	if !strings.Contains(r.HangingTxns.Examples[0], "LSO 4 < HW 9") || !strings.Contains(r.HangingTxns.Examples[1], "offset 3") {
		t.Errorf("examples %q", r.HangingTxns.Examples)
	}
}

func TestReadCommittedBeforeReplicated(t *testing.T) {
	for name, c := range map[string]struct {
		span TxnSpan
		want int
	}{
		"marker at the HW, never reported replicated": {TxnSpan{TP: src0, ProducerID: 5, Delivered: 3, DeliveredHW: 6, LeaderHW: 6, Marker: 6, Orphaned: -1}, 1},
		"marker above the HW, read from a new leader": {TxnSpan{TP: src0, ProducerID: 5, Delivered: 3, DeliveredHW: 6, LeaderHW: 7, Marker: 12, Orphaned: -1}, 1},
		"marker below the HW":                         {TxnSpan{TP: src0, ProducerID: 5, Delivered: 3, DeliveredHW: 8, LeaderHW: 8, Marker: 6, Orphaned: -1}, 0},
		"the leader's HW was a step behind":           {TxnSpan{TP: src0, ProducerID: 5, Delivered: 3, DeliveredHW: 6, LeaderHW: 7, Marker: 6, Orphaned: -1}, 0},
		"aborted, nothing delivered":                  {TxnSpan{TP: src0, ProducerID: 5, Delivered: -1, DeliveredHW: -1, LeaderHW: -1, Marker: 6, Orphaned: -1}, 0},
		"no marker read":                              {TxnSpan{TP: src0, ProducerID: 5, Delivered: 3, DeliveredHW: 4, LeaderHW: 4, Marker: -1, Orphaned: -1}, 0},
	} {
		t.Run(name, func(t *testing.T) {
			h := faultHistory()
			h.Spans = append(h.Spans, c.span)
			want := map[string]int{}
			if c.want > 0 {
				want["read-committed-before-replicated"] = c.want
			}
			expect(t, Check(h), want)
		})
	}
}

func TestEpochAnomalies(t *testing.T) {
	for name, c := range map[string]struct {
		plant func(h *History)
		want  int
	}{
		"epoch wrapped by a fence": {func(h *History) {
			h.Incarnations[2].PID = PID{10, -32768}
			txn(t, h, "T5").PID = &PID{10, -32768}
			txn(t, h, "T8").PID = &PID{10, -32767}
		}, 2}, // out of range once for producer id 10, and no new producer id
		"epoch 32767 handed out": {func(h *History) { txn(t, h, "T1").PID.Epoch = MaxProducerEpoch + 1 }, 1},
		"fenced commit succeeded": {func(h *History) {
			t7 := txn(t, h, "T7")
			t7.Outcome = Committed
			h.Reads = append(h.Reads, finalReads(src1, 4, "k", true)...)
			t7.Writes[0].Offset = 4
		}, 1},
	} {
		t.Run(name, func(t *testing.T) {
			h := faultHistory()
			c.plant(h)
			expect(t, Check(h), map[string]int{"epoch-anomalies": c.want})
		})
	}
}

func TestAbortFailed(t *testing.T) {
	h := faultHistory()
	txn(t, h, "T9").AbortErr = "INVALID_TXN_STATE: cannot abort"
	r := Check(h)
	expect(t, r, map[string]int{"abort-failed": 1})
	if !strings.Contains(r.AbortFailed.Examples[0], "early abort, 1 of 1 records unsent") {
		t.Errorf("example %q", r.AbortFailed.Examples[0])
	}
}

func TestUnsentWriteSeen(t *testing.T) {
	h := faultHistory()
	// The client said "never sent", yet a reader saw it.
	h.Reads = append(h.Reads, live("c2", false, src0, 6, "l", 9.5))
	expect(t, Check(h), map[string]int{"unwritten": 1})
	h = faultHistory()
	txn(t, h, "T8").Writes[0].Offset = 6
	expect(t, Check(h), map[string]int{"malformed-history": 1})
}

func TestFaultHistoryJSONRoundTrip(t *testing.T) {
	h := faultHistory()
	h.OpenAtEnd = []OpenPartition{{TP: src0, HighWatermark: 9, LastStableOffset: 4, Waited: 40, Blocking: "x"}}
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
	for _, s := range []string{`"unsent":true`, `"fence":"epoch-end"`, `"early_abort":true`, `"leader_hw":9`, `"open_at_end":[`, `"incarnations":[`} {
		if !strings.Contains(string(b), s) {
			t.Errorf("JSON lacks %s", s)
		}
	}
}
