package txn

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/strand-io/strand/broker/storage/storagetest"
)

// TestLoadOfCompactedTxnLogMatches: ids taken through committed and
// aborted transactions, one left mid-commit (PrepareCommit), some expired
// (their tombstones written) and one expired then initialised again, all
// by the coordinator's own state machine and record encoding, load the
// same from the whole log as from the log compacted (the last record of
// each id; tombstones kept, then gone past the delete horizon); an
// expired id is gone in every case.
func TestLoadOfCompactedTxnLogMatches(t *testing.T) {
	whole := openLog(t, t.TempDir(), 4096)
	h := newTxnHistory(appendTo(whole))
	parts := []TopicPartition{{"orders", 0}, {"orders", 1}}
	for i := 0; i < 6; i++ {
		id := fmt.Sprintf("tx-%d", i)
		if err := h.init(id); err != nil {
			t.Fatal(err)
		}
		for n := 0; n < 10; n++ {
			if err := h.transaction(id, n%4 != 3, parts[:1+n%2]); err != nil {
				t.Fatalf("%s transaction %d: %v", id, n, err)
			}
		}
	}
	// tx-0 stops between its PREPARE_COMMIT and its markers.
	m := h.txns["tx-0"]
	if _, err := h.do("tx-0", Request{Kind: KindAddPartitions, TxnVersion: 2, ProducerID: m.ProducerID, Epoch: m.ProducerEpoch, Partitions: parts}); err != nil {
		t.Fatal(err)
	}
	m = h.txns["tx-0"]
	if _, err := h.do("tx-0", Request{Kind: KindEndTxn, TxnVersion: 2, ProducerID: m.ProducerID, Epoch: m.ProducerEpoch, Commit: true}); err != nil {
		t.Fatal(err)
	}
	// tx-1, tx-2 and tx-3 expire (transactional.id.expiration.ms, 7 days);
	// tx-3 is then initialised again.
	later := h.now + 8*24*3600*1000
	for _, id := range []string{"tx-1", "tx-2", "tx-3"} {
		if err := h.expire(id, later, 7*24*3600*1000); err != nil {
			t.Fatalf("expire %s: %v", id, err)
		}
	}
	if err := h.init("tx-3"); err != nil {
		t.Fatal(err)
	}
	if err := h.transaction("tx-3", true, parts); err != nil {
		t.Fatal(err)
	}

	got, err := replayLog(whole, warnTB(t))
	if err != nil {
		t.Fatal(err)
	}
	want := describeIDs(got)
	if !reflect.DeepEqual(want, describeIDs(h.txns)) {
		t.Fatalf("the whole log loads\n%v\nthe coordinator had\n%v", want, describeIDs(h.txns))
	}
	if keys := sortedKeys(want); !reflect.DeepEqual(keys, []string{"tx-0", "tx-3", "tx-4", "tx-5"}) {
		t.Fatalf("loaded ids %v, want the expired ones gone", keys)
	}
	if want["tx-0"] == "" || got["tx-0"].State != PrepareCommit {
		t.Fatalf("tx-0 loaded as %q, want PrepareCommit (its markers resumed)", want["tx-0"])
	}
	for _, pastHorizon := range []bool{false, true} {
		compacted := openLog(t, t.TempDir(), 4096)
		for _, b := range lastPerKey(t, whole, pastHorizon) {
			if err := appendTo(compacted)(b); err != nil {
				t.Fatal(err)
			}
		}
		loaded, err := replayLog(compacted, warnTB(t))
		if err != nil {
			t.Fatal(err)
		}
		if d := describeIDs(loaded); !reflect.DeepEqual(d, want) {
			t.Errorf("compacted (past the delete horizon: %v) loads\n%v\nthe whole log\n%v", pastHorizon, d, want)
		}
		if compacted.Size() >= whole.Size()/5 {
			t.Errorf("compacted (past the delete horizon: %v): %d bytes of %d", pastHorizon, compacted.Size(), whole.Size())
		}
	}
	// And cleaned by the log cleaner itself.
	t.Run("storage.Log.Clean", func(t *testing.T) {
		size := whole.Size()
		st, err := storagetest.CleanAll(whole, 4096, time.Now())
		if err != nil {
			t.Fatalf("storage.Log.Clean: %v", err)
		}
		loaded, err := replayLog(whole, warnTB(t))
		if err != nil {
			t.Fatal(err)
		}
		if d := describeIDs(loaded); !reflect.DeepEqual(d, want) {
			t.Errorf("cleaned (%+v) loads\n%v\nthe whole log\n%v", st, d, want)
		}
		if whole.Size() >= size/5 {
			t.Errorf("cleaned: %d bytes of %d (%+v)", whole.Size(), size, st)
		}
		// Passes a day later remove the tombstones of the expired ids: the
		// log may then end in a gap (its last batches gone, the active
		// segment empty), which the load must read past.
		later := time.Now().Add(24*time.Hour + time.Minute)
		for _, at := range []time.Time{later, later.Add(24*time.Hour + time.Minute)} {
			if st, err = storagetest.CleanAll(whole, 4096, at); err != nil {
				t.Fatalf("storage.Log.Clean at %v: %v", at, err)
			}
		}
		if loaded, err = replayLog(whole, warnTB(t)); err != nil {
			t.Fatalf("load after the passes past the horizon (%+v): %v", st, err)
		}
		if d := describeIDs(loaded); !reflect.DeepEqual(d, want) {
			t.Errorf("cleaned past the horizon (%+v) loads\n%v\nthe whole log\n%v", st, d, want)
		}
	})
}
