package txn

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
)

// TestLoadStopsAtANewerValueVersion: a transaction log value written by a
// newer binary (a version above valueVersion) fails the load, naming the
// id and what to do, rather than being skipped (the id would load at an
// older state) or read as the version this binary knows.
func TestLoadStopsAtANewerValueVersion(t *testing.T) {
	l := openLog(t, t.TempDir(), 1<<20)
	old, err := logBatch("tx-a", &pb.TransactionLogValue{ProducerId: 7, ProducerEpoch: 1, TransactionStatus: 1, TransactionTimeoutMs: 60000}, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if err := appendTo(l)(old); err != nil {
		t.Fatal(err)
	}
	if got, err := replayLog(l, warnTB(t)); err != nil || got["tx-a"] == nil {
		t.Fatalf("load before: %v %v", got, err)
	}
	v, err := EncodeValue(&pb.TransactionLogValue{ProducerId: 7, ProducerEpoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	binary.BigEndian.PutUint16(v, valueVersion+1)
	b, err := record.Build(record.BatchOptions{ProducerID: record.NoProducerID, ProducerEpoch: record.NoProducerEpoch, BaseSequence: record.NoSequence, PartitionLeaderEpoch: -1},
		[]record.Record{{Key: EncodeKey("tx-a"), Value: v, Timestamp: 2000}})
	if err != nil {
		t.Fatal(err)
	}
	if err := appendTo(l)(b); err != nil {
		t.Fatal(err)
	}
	_, err = replayLog(l, func(msg string, args ...any) { t.Errorf("warned and skipped: %s %v", msg, args) })
	var nv *NewerVersionError
	if !errors.As(err, &nv) || nv.Version != valueVersion+1 || !strings.Contains(err.Error(), `"tx-a"`) || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("load with a newer value: %v, want a NewerVersionError naming tx-a", err)
	}
	// An older or otherwise unknown version is still skipped with a warning.
	binary.BigEndian.PutUint16(v, 0)
	if _, err := DecodeValue(v); err == nil || errors.As(err, &nv) {
		t.Fatalf("version 0: %v, want an error that is not NewerVersionError", err)
	}
}
