package record

import (
	"bytes"
	"testing"
)

// BuildRetained keeps the batch's offsets, producer fields and each kept
// record's offset and timestamp, sets the delete horizon as KIP-534
// stores it, and builds Kafka's empty batch when nothing is kept.
func TestBuildRetained(t *testing.T) {
	for _, c := range []Compression{None, LZ4, Zstd} {
		recs := []Record{
			{Key: []byte("a"), Value: []byte("1"), Timestamp: 1000},
			{Key: []byte("b"), Value: nil, Timestamp: 900},
			{Key: []byte("c"), Value: []byte("3"), Timestamp: 1200},
		}
		orig, err := Build(BatchOptions{BaseOffset: 40, PartitionLeaderEpoch: 3, Compression: c, ProducerID: 7, ProducerEpoch: 2, BaseSequence: 5, Transactional: true}, recs)
		if err != nil {
			t.Fatal(err)
		}
		h, all, err := Decode(orig)
		if err != nil {
			t.Fatal(err)
		}
		for _, hz := range []int64{NoDeleteHorizon, 5000} {
			b, err := BuildRetained(&h, all[1:2], hz)
			if err != nil {
				t.Fatal(err)
			}
			nh, got, err := Decode(b)
			if err != nil {
				t.Fatalf("%v horizon %d: %v", c, hz, err)
			}
			if nh.BaseOffset != 40 || nh.LastOffset() != 42 || nh.RecordCount != 1 || nh.ProducerID != 7 || nh.ProducerEpoch != 2 ||
				nh.BaseSequence != 5 || !nh.IsTransactional() || nh.PartitionLeaderEpoch != 3 || nh.Compression() != c || nh.MaxTimestamp != 900 {
				t.Fatalf("%v horizon %d: header %+v", c, hz, nh)
			}
			if len(got) != 1 || got[0].Offset != 41 || got[0].Timestamp != 900 || !bytes.Equal(got[0].Key, []byte("b")) || got[0].Value != nil {
				t.Fatalf("%v horizon %d: records %+v", c, hz, got)
			}
			ms, ok := nh.DeleteHorizonMs()
			if (hz >= 0) != ok || ok && ms != hz {
				t.Fatalf("%v: horizon %d %v, want %d", c, ms, ok, hz)
			}
		}
		e, err := BuildRetained(&h, nil, NoDeleteHorizon)
		if err != nil {
			t.Fatal(err)
		}
		eh, none, err := Decode(e)
		if err != nil || len(none) != 0 || eh.RecordCount != 0 || eh.LastOffset() != 42 || eh.LastSequence() != 7 || eh.Compression() != None || eh.FirstTimestamp != 1200 {
			t.Fatalf("empty batch %+v %v", eh, err)
		}
	}
}
