package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/strand-io/strand/record"
)

// A batch the log cleaner kept a tombstone in carries its delete horizon;
// dump-log prints it as kafka-dump-log does, and each record's sequence
// from its offset (a cleaned batch has gaps).
func TestDumpLogDeleteHorizon(t *testing.T) {
	orig, err := record.Build(record.BatchOptions{ProducerID: 5, BaseSequence: 10, PartitionLeaderEpoch: 0},
		[]record.Record{{Key: []byte("a"), Value: []byte("1"), Timestamp: 100}, {Key: []byte("b"), Timestamp: 101}})
	if err != nil {
		t.Fatal(err)
	}
	h, recs, err := record.Decode(orig)
	if err != nil {
		t.Fatal(err)
	}
	cleaned, err := record.BuildRetained(&h, recs[1:], 5000)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	printBatches(&out, append(orig, cleaned...), true, false, nil)
	lines := strings.Split(out.String(), "\n")
	if !strings.Contains(lines[0], "deleteHorizonMs: OptionalLong.empty ") {
		t.Errorf("batch without a horizon: %s", lines[0])
	}
	if !strings.Contains(lines[3], "deleteHorizonMs: OptionalLong[5000] ") || !strings.Contains(lines[3], "count: 1") {
		t.Errorf("cleaned batch: %s", lines[3])
	}
	if !strings.Contains(lines[4], "| offset: 1 CreateTime: 101 ") || !strings.Contains(lines[4], "sequence: 11 ") {
		t.Errorf("cleaned batch's record: %s", lines[4])
	}
}
