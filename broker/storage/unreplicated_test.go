package storage

import (
	"reflect"
	"testing"

	"github.com/strand-io/strand/internal/planted"
	"github.com/strand-io/strand/record"
)

// firstUnstableAtMarker runs the core scenario of an LSO held at a marker
// the HW has not passed, on a producer-state manager: producer 1's
// transaction (offsets 10..11) is
// committed by a marker at 14 while producer 2's (12..13) stays open, and
// the HW reaches the marker's offset but not past it. It returns the first
// unstable offset then: 10 when the committed transaction still holds it,
// 12 when it passed the marker the ISR may not have.
func firstUnstableAtMarker() int64 {
	m := psBuild(
		psData(1, 0, 0, 2, 10, true),
		psData(2, 0, 0, 2, 12, true),
		psMarker(1, 1, 0, record.ControlCommit, 14),
	)
	m.OnHighWatermarkUpdated(14)
	fu, _ := m.FirstUnstableOffset()
	return fu
}

func TestUnreplicatedTxnHoldsFirstUnstableOffset(t *testing.T) {
	if fu := firstUnstableAtMarker(); fu != 10 {
		t.Fatalf("FirstUnstableOffset = %d with the HW at the commit marker, want 10 (the committed transaction's first offset)", fu)
	}

	m := psBuild(
		psData(1, 0, 0, 2, 10, true),
		psData(2, 0, 0, 2, 12, true),
	)
	want := func(fu int64, ok bool, when string) {
		t.Helper()
		if got, gotOK := m.FirstUnstableOffset(); got != fu || gotOK != ok {
			t.Fatalf("%s: FirstUnstableOffset = %d, %v; want %d, %v", when, got, gotOK, fu, ok)
		}
	}
	want(10, true, "both open")
	c := m.ApplyMarker(1, 1, 0, record.ControlCommit, 14, 0)
	if got := m.UnreplicatedTxns(); !reflect.DeepEqual(got, []CompletedTxn{*c}) {
		t.Fatalf("UnreplicatedTxns = %+v, want the commit %+v", got, *c)
	}
	if fu, ok := m.FirstUndecidedOffset(); !ok || fu != 12 {
		t.Fatalf("FirstUndecidedOffset = %d, %v; want 12 (only producer 2 is open)", fu, ok)
	}
	want(10, true, "after the commit")
	m.OnHighWatermarkUpdated(14)
	want(10, true, "HW at the commit marker")
	m.OnHighWatermarkUpdated(15)
	want(12, true, "HW past the commit marker")
	if n := len(m.UnreplicatedTxns()); n != 0 {
		t.Fatalf("%d unreplicated transactions left once the HW passed the marker", n)
	}
	m.ApplyMarker(2, 1, 0, record.ControlAbort, 15, 0)
	want(12, true, "after the abort")
	// An older, lower HW heard late forgets nothing more.
	m.OnHighWatermarkUpdated(3)
	want(12, true, "a late lower HW")
	m.OnHighWatermarkUpdated(16)
	want(-1, false, "HW past the abort marker")

	// Transactions complete in another order than they opened: each is
	// held until the HW passes its own marker.
	m.ApplyData(psBatch(3, 0, 0, 1, 20, true))
	m.ApplyData(psBatch(4, 0, 0, 1, 21, true))
	m.ApplyMarker(4, 1, 0, record.ControlCommit, 22, 0)
	m.ApplyMarker(3, 1, 0, record.ControlAbort, 23, 0)
	want(20, true, "two completed, none replicated")
	m.OnHighWatermarkUpdated(23)
	want(20, true, "producer 4's marker replicated, producer 3's not")
	if got := m.UnreplicatedTxns(); len(got) != 1 || got[0].ProducerID != 3 {
		t.Fatalf("UnreplicatedTxns = %+v, want producer 3's only", got)
	}

	// Snapshots do not keep them (Kafka does not either); Clear forgets them.
	dir := t.TempDir()
	if err := m.WriteSnapshot(dir, 24); err != nil {
		t.Fatal(err)
	}
	loaded, err := LoadSnapshot(SnapshotPath(dir, 24))
	if err != nil {
		t.Fatal(err)
	}
	if fu, ok := loaded.FirstUnstableOffset(); ok {
		t.Fatalf("a loaded snapshot has first unstable offset %d", fu)
	}
	m.Clear()
	if _, ok := m.FirstUnstableOffset(); ok || len(m.UnreplicatedTxns()) != 0 {
		t.Fatal("Clear left an unreplicated transaction")
	}
}

// With the planted bug the committed transaction stops holding the first
// unstable offset as soon as its marker is applied.
func TestUnreplicatedTxnHoldsFirstUnstableOffsetCatchesPlantedBug(t *testing.T) {
	defer planted.Set(planted.LSOPassesUnreplicatedMarker)()
	if fu := firstUnstableAtMarker(); fu == 10 {
		t.Fatal("with lso-passes-unreplicated-marker planted the first unstable offset still stayed at 10")
	}
}

// A truncation keeps the unreplicated transactions whose marker it kept,
// including those completed before the snapshot the state is rebuilt from,
// and drops those whose marker it cut; the .txnindex's last stable offsets
// count open transactions only.
func TestTruncationKeepsUnreplicatedBelowTheCut(t *testing.T) {
	f := newFixture(t, testConfig())
	now := f.nowMs()
	f.appendLeader(txnb(1, 0, 0, 2, now)) // 0..1
	f.appendLeader(txnb(2, 0, 0, 1, now)) // 2
	f.marker(1, 1, record.ControlAbort)   // 3
	if err := f.l.Roll(); err != nil {    // snapshot at 4
		t.Fatal(err)
	}
	f.appendLeader(plain(2, now))         // 4..5
	f.marker(2, 1, record.ControlCommit)  // 6
	f.appendLeader(txnb(3, 0, 0, 1, now)) // 7
	f.marker(3, 1, record.ControlAbort)   // 8
	wantAborted := []AbortedTxn{
		{ProducerID: 1, FirstOffset: 0, LastOffset: 3, LastStableOffset: 2},
		{ProducerID: 3, FirstOffset: 7, LastOffset: 8, LastStableOffset: 9},
	}
	if got := f.l.AllAborted(); !reflect.DeepEqual(got, wantAborted) {
		t.Fatalf(".txnindex %+v, want %+v", got, wantAborted)
	}
	pids := func() []int64 {
		var out []int64
		for _, c := range f.l.UnreplicatedTxns() {
			out = append(out, c.ProducerID)
		}
		return out
	}
	if got := pids(); !reflect.DeepEqual(got, []int64{1, 2, 3}) {
		t.Fatalf("unreplicated %v, want [1 2 3]", got)
	}
	// Cut producer 3's marker: its transaction is open again; 1 and 2
	// (completed before the snapshot at 4, markers kept) still hold.
	if err := f.l.TruncateTo(8); err != nil {
		t.Fatal(err)
	}
	if got := pids(); !reflect.DeepEqual(got, []int64{1, 2}) {
		t.Fatalf("after truncating to 8: unreplicated %v, want [1 2]", got)
	}
	if fu, ok := f.l.FirstUndecidedOffset(); !ok || fu != 7 {
		t.Fatalf("after truncating to 8: first undecided %d %v, want 7", fu, ok)
	}
	if fu, ok := f.l.FirstUnstableOffset(); !ok || fu != 0 {
		t.Fatalf("after truncating to 8: first unstable %d %v, want 0", fu, ok)
	}
	f.l.OnHighWatermarkUpdated(4)
	if fu, ok := f.l.FirstUnstableOffset(); !ok || fu != 2 {
		t.Fatalf("HW 4: first unstable %d %v, want 2", fu, ok)
	}
	// Cut producer 2's marker as well: its transaction is open again, from
	// the snapshot at 4 replaying nothing.
	if err := f.l.TruncateTo(6); err != nil {
		t.Fatal(err)
	}
	if got := pids(); len(got) != 0 {
		t.Fatalf("after truncating to 6: unreplicated %v, want none", got)
	}
	if fu, ok := f.l.FirstUnstableOffset(); !ok || fu != 2 {
		t.Fatalf("after truncating to 6: first unstable %d %v, want 2 (open again)", fu, ok)
	}
}

// A reopened log replays markers as unreplicated; the HW its partition
// tells it releases those below.
func TestReopenedLogHoldsReplayedMarkersUntilTold(t *testing.T) {
	f := newFixture(t, testConfig())
	now := f.nowMs()
	f.appendLeader(txnb(1, 0, 0, 2, now)) // 0..1
	f.marker(1, 1, record.ControlCommit)  // 2
	l := f.crash(0)
	if fu, ok := l.FirstUnstableOffset(); !ok || fu != 0 {
		t.Fatalf("after recovery: first unstable %d %v, want 0", fu, ok)
	}
	if !l.OnHighWatermarkUpdated(3) {
		t.Fatal("OnHighWatermarkUpdated(3) reported no change")
	}
	if fu, ok := l.FirstUnstableOffset(); ok {
		t.Fatalf("HW 3: first unstable %d", fu)
	}
	if l.OnHighWatermarkUpdated(3) {
		t.Fatal("a repeated OnHighWatermarkUpdated(3) reported a change")
	}
}

// A truncation above a marker the HW already passed leaves that
// transaction released: the rebuilt producer state replays the marker but
// must not hold the last stable offset back at the transaction again (it
// did, until the partition next reported its HW; a replica promoted in
// between published an LSO at the start of the log).
func TestTruncationKeepsReleasedTxnsReleased(t *testing.T) {
	f := newFixture(t, testConfig())
	now := f.nowMs()
	f.appendLeader(txnb(1, 0, 0, 2, now)) // 0..1
	f.marker(1, 1, record.ControlCommit)  // 2
	f.appendLeader(txnb(2, 0, 0, 1, now)) // 3
	f.marker(2, 1, record.ControlAbort)   // 4
	f.appendLeader(plain(2, now))         // 5..6
	f.l.OnHighWatermarkUpdated(4)         // producer 1's marker passed, producer 2's not
	if fu, ok := f.l.FirstUnstableOffset(); !ok || fu != 3 {
		t.Fatalf("HW 4: first unstable %d %v, want 3", fu, ok)
	}
	if err := f.l.TruncateTo(5); err != nil {
		t.Fatal(err)
	}
	if fu, ok := f.l.FirstUnstableOffset(); !ok || fu != 3 {
		t.Fatalf("after truncating to 5: first unstable %d %v, want 3 (producer 1's commit at 2 was released by HW 4)", fu, ok)
	}
	f.l.OnHighWatermarkUpdated(5)
	if fu, ok := f.l.FirstUnstableOffset(); ok {
		t.Fatalf("HW 5: first unstable %d, want none", fu)
	}
}

// After a restart a truncation replays the log from an older snapshot: it
// holds back the markers it replays that no HW heard has passed (here the
// HW checkpoint, at the marker), and releases them once the HW passes.
func TestTruncationAfterRestartHoldsReplayedMarkers(t *testing.T) {
	f := newFixture(t, testConfig())
	now := f.nowMs()
	f.appendLeader(txnb(1, 0, 0, 2, now)) // 0..1
	f.marker(1, 1, record.ControlCommit)  // 2
	f.appendLeader(plain(2, now))         // 3..4
	l := f.reopenClean()                  // snapshot at 5
	l.OnHighWatermarkUpdated(2)           // the HW checkpoint: the marker at 2 not passed
	if err := l.TruncateTo(4); err != nil {
		t.Fatal(err)
	}
	if fu, ok := l.FirstUnstableOffset(); !ok || fu != 0 {
		t.Fatalf("after truncating to 4: first unstable %d %v, want 0 (producer 1's commit at 2 is not below the HW 2)", fu, ok)
	}
	l.OnHighWatermarkUpdated(3)
	if fu, ok := l.FirstUnstableOffset(); ok {
		t.Fatalf("HW 3: first unstable %d, want none", fu)
	}
}
