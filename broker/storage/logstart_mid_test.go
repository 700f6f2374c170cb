package storage

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
	"github.com/strand-io/strand/testkit/wait"
)

// nRecordBatch is a replicated batch of n records at base, epoch 0.
func nRecordBatch(t *testing.T, base int64, n int, ts int64) []byte {
	t.Helper()
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{Value: []byte{byte('a' + i)}, Timestamp: ts + int64(i)}
	}
	b, err := record.Build(record.BatchOptions{BaseOffset: base, PartitionLeaderEpoch: 0, ProducerID: record.NoProducerID,
		ProducerEpoch: record.NoProducerEpoch, BaseSequence: record.NoSequence}, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestFollowerAppendStraddlingLogStart: a follower restarted at a leader's
// log start inside a batch (DeleteRecords) gets the whole batch from the
// leader for its first fetch. The append must be accepted: the empty log
// restarts at the batch's base, the log start stays inside the batch
// (offsets below it unreadable), and that survives a reopen and a crash.
func TestFollowerAppendStraddlingLogStart(t *testing.T) {
	f := newFixture(t, testConfig())
	if err := f.l.TruncateFullyAndStartAt(5); err != nil {
		t.Fatal(err)
	}
	if _, err := f.l.AppendAsFollower(nRecordBatch(t, 0, 10, f.nowMs())); err != nil {
		t.Fatalf("append of batch 0-9 to an empty log at 5: %v", err)
	}
	check := func(when string) {
		t.Helper()
		if ls, leo := f.l.LogStartOffset(), f.l.LogEndOffset(); ls != 5 || leo != 10 {
			t.Fatalf("%s: log [%d, %d), want [5, 10)", when, ls, leo)
		}
		_, err := f.l.Read(4, 1<<20, 100, true)
		wantCode(t, err, pb.ErrorCode_OFFSET_OUT_OF_RANGE)
		for _, off := range []int64{5, 9} {
			res, err := f.l.Read(off, 1<<20, 100, true)
			if err != nil || len(res.Records) == 0 || res.LogStart != 5 {
				t.Fatalf("%s: read at %d: %+v, %v", when, off, res, err)
			}
		}
	}
	check("after the append")
	// The next batch follows on.
	if _, err := f.l.AppendAsFollower(nRecordBatch(t, 10, 3, f.nowMs())); err != nil {
		t.Fatal(err)
	}
	if f.l.LogEndOffset() != 13 {
		t.Fatalf("log end %d, want 13", f.l.LogEndOffset())
	}
	if err := f.l.TruncateTo(10); err != nil {
		t.Fatal(err)
	}
	check("after a truncation to 10")
	f.reopenClean()
	check("after a clean reopen")
	f.crash(0)
	check("after a crash")

	// A refused straddling append (its second batch does not follow the
	// first) leaves the log empty at its start, not ending below it.
	h := newFixture(t, testConfig())
	if err := h.l.TruncateFullyAndStartAt(5); err != nil {
		t.Fatal(err)
	}
	bad := append(nRecordBatch(t, 0, 10, h.nowMs()), nRecordBatch(t, 3, 2, h.nowMs())...)
	_, err := h.l.AppendAsFollower(bad)
	wantCode(t, err, pb.ErrorCode_CORRUPT_MESSAGE)
	if ls, leo := h.l.LogStartOffset(), h.l.LogEndOffset(); ls != 5 || leo != 5 {
		t.Fatalf("after a refused straddling append: log [%d, %d), want [5, 5)", ls, leo)
	}

	// A batch that does not reach the log end is still refused.
	g := newFixture(t, testConfig())
	if err := g.l.TruncateFullyAndStartAt(5); err != nil {
		t.Fatal(err)
	}
	_, err = g.l.AppendAsFollower(nRecordBatch(t, 0, 5, g.nowMs()))
	wantCode(t, err, pb.ErrorCode_CORRUPT_MESSAGE)
}

// TestTruncateToAtMidBatchLogStart: a truncation whose batch-aligned cut
// would fall below a log start inside the batch empties the log at the log
// start instead; the log end never drops below the start.
func TestTruncateToAtMidBatchLogStart(t *testing.T) {
	f := newFixture(t, testConfig())
	f.appendLeader(plain(10, f.nowMs()))
	f.appendLeader(plain(10, f.nowMs()))
	if _, err := f.l.AdvanceLogStart(15); err != nil {
		t.Fatal(err)
	}
	if err := f.l.TruncateTo(12); err != nil {
		t.Fatal(err)
	}
	if ls, leo := f.l.LogStartOffset(), f.l.LogEndOffset(); ls != 15 || leo != 15 {
		t.Fatalf("after TruncateTo(12): log [%d, %d), want [15, 15)", ls, leo)
	}
	f.reopenClean()
	if ls, leo := f.l.LogStartOffset(), f.l.LogEndOffset(); ls != 15 || leo != 15 {
		t.Fatalf("after reopen: log [%d, %d), want [15, 15)", ls, leo)
	}
	// A cut inside the batch holding the start, above the start, too.
	g := newFixture(t, testConfig())
	g.appendLeader(plain(10, g.nowMs()))
	g.appendLeader(plain(10, g.nowMs()))
	if _, err := g.l.AdvanceLogStart(15); err != nil {
		t.Fatal(err)
	}
	if err := g.l.TruncateTo(17); err != nil {
		t.Fatal(err)
	}
	if ls, leo := g.l.LogStartOffset(), g.l.LogEndOffset(); ls != 15 || leo != 15 {
		t.Fatalf("after TruncateTo(17): log [%d, %d), want [15, 15)", ls, leo)
	}
}

// TestAdvanceLogStartCheckpointWithoutLock: the log start checkpoint's
// fsyncs run without the log's lock (ARCHITECTURE.md, lock order): while the
// checkpoint write is stuck (a FIFO as its temporary file), LogEndOffset
// and an append still go through, the new start is not visible before the
// checkpoint is durable, and a failed checkpoint leaves the start as it was.
func TestAdvanceLogStartCheckpointWithoutLock(t *testing.T) {
	f := newFixture(t, testConfig())
	f.appendLeader(plain(10, f.nowMs()))
	f.appendLeader(plain(10, f.nowMs()))
	// A FIFO as the checkpoint's temporary file: opening it for writing
	// blocks until a reader opens it.
	tmp := filepath.Join(f.dir, LogStartCheckpointFile) + ".tmp"
	if err := syscall.Mkfifo(tmp, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := f.l.AdvanceLogStart(15)
		done <- err
	}()
	wait.Eventually(t, 5*time.Second, "AdvanceLogStart blocked opening the FIFO", func() bool { return blockedInOpen("AdvanceLogStart") })
	free := make(chan struct{})
	go func() {
		defer close(free)
		if ls := f.l.LogStartOffset(); ls != 0 {
			t.Errorf("log start %d visible before its checkpoint is written", ls)
		}
		_ = f.l.LogEndOffset()
		if _, err := f.l.AppendAsLeader(buildBatch(t, plain(1, f.nowMs())), 0); err != nil {
			t.Errorf("append during the checkpoint write: %v", err)
		}
	}()
	blocked := false
	select {
	case <-free:
	case <-time.After(2 * time.Second):
		blocked = true
	}
	// Unblock the writer: open the FIFO for reading and drain it.
	r, err := os.OpenFile(tmp, os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		buf := make([]byte, 64)
		for {
			if _, err := r.Read(buf); err != nil {
				r.Close()
				return
			}
		}
	}()
	// A FIFO cannot be fsynced: this advance fails, and leaves the start.
	if err := <-done; err == nil {
		t.Fatal("AdvanceLogStart with a FIFO as its checkpoint succeeded")
	}
	<-free
	if blocked {
		t.Fatal("the log's lock was held while the log start checkpoint was written")
	}
	if ls := f.l.LogStartOffset(); ls != 0 {
		t.Fatalf("log start %d after a failed checkpoint, want 0", ls)
	}
	os.Remove(tmp)
	if ls, err := f.l.AdvanceLogStart(15); err != nil || ls != 15 {
		t.Fatalf("AdvanceLogStart(15) = %d, %v", ls, err)
	}
	f.reopenClean()
	if ls := f.l.LogStartOffset(); ls != 15 {
		t.Fatalf("after reopen: log start %d, want 15", ls)
	}
}

// TestTruncateFullyCheckpointFirst: TruncateFullyAndStartAt below an old,
// higher checkpointed log start must write the new start before it replaces
// the segments and report a failed write; otherwise the next Open brings
// the old start back and hides records appended from the new one.
func TestTruncateFullyCheckpointFirst(t *testing.T) {
	f := newFixture(t, testConfig())
	f.appendLeader(plain(10, f.nowMs()))
	f.appendLeader(plain(10, f.nowMs()))
	if _, err := f.l.AdvanceLogStart(15); err != nil {
		t.Fatal(err)
	}
	// Make the checkpoint write fail: its temporary file cannot be created.
	tmp := filepath.Join(f.dir, LogStartCheckpointFile) + ".tmp"
	if err := os.Mkdir(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	err := f.l.TruncateFullyAndStartAt(3)
	wantCode(t, err, pb.ErrorCode_KAFKA_STORAGE_ERROR)
	if ls, leo := f.l.LogStartOffset(), f.l.LogEndOffset(); ls != 15 || leo != 20 {
		t.Fatalf("after a failed TruncateFullyAndStartAt: log [%d, %d), want it unchanged [15, 20)", ls, leo)
	}
	if err := os.Remove(tmp); err != nil {
		t.Fatal(err)
	}
	if err := f.l.TruncateFullyAndStartAt(3); err != nil {
		t.Fatal(err)
	}
	if _, err := f.l.AppendAsFollower(nRecordBatch(t, 3, 4, f.nowMs())); err != nil {
		t.Fatal(err)
	}
	f.crash(0)
	if ls, leo := f.l.LogStartOffset(), f.l.LogEndOffset(); ls != 3 || leo != 7 {
		t.Fatalf("after a crash: log [%d, %d), want [3, 7)", ls, leo)
	}
}

// blockedInOpen reports whether a goroutine running fn sits in an open
// system call (the FIFO's open blocks until a reader comes).
func blockedInOpen(fn string) bool {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for _, g := range strings.Split(string(buf), "\n\n") {
		header, _, _ := strings.Cut(g, "\n")
		if strings.Contains(header, "[syscall") && strings.Contains(g, "."+fn+"(") && strings.Contains(g, "os.OpenFile(") {
			return true
		}
	}
	return false
}
