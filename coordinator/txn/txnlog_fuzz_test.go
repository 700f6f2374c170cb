package txn

import (
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/strand-io/strand/proto/strand/v1"
)

// FuzzTxnLogKey: DecodeKey never panics; a key it decodes encodes back
// to the same bytes.
func FuzzTxnLogKey(f *testing.F) {
	f.Add(EncodeKey("txn-1"))
	f.Add(EncodeKey(""))
	f.Add([]byte{0, 0, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		id, err := DecodeKey(b)
		if err != nil {
			return
		}
		if got := EncodeKey(id); string(got) != string(b) {
			t.Fatalf("key %q re-encodes as %x, was %x", id, got, b)
		}
	})
}

// FuzzTxnLogValue: DecodeValue (what a coordinator loads from
// __transaction_state) and DecodeJSON (strand dump-log) never panic; a
// value that decodes encodes to a value that decodes to the same message.
func FuzzTxnLogValue(f *testing.F) {
	v, _ := EncodeValue(&pb.TransactionLogValue{ProducerId: 7, ProducerEpoch: 3, TransactionTimeoutMs: 60000, TransactionStatus: 2,
		TransactionPartitions: []*pb.TxnLogPartitions{{Topic: "t", PartitionIds: []int32{0, 1}}}})
	f.Add(EncodeKey("txn-1"), v)
	f.Add([]byte{}, []byte{0, 1})
	f.Fuzz(func(t *testing.T, key, b []byte) {
		_ = DecodeJSON(key, b)
		m, err := DecodeValue(b)
		if err != nil || m == nil {
			return
		}
		again, err := EncodeValue(m)
		if err != nil {
			t.Fatalf("a decoded value does not encode: %v", err)
		}
		m2, err := DecodeValue(again)
		if err != nil || !proto.Equal(m, m2) {
			t.Fatalf("round trip: %v, %v vs %v", err, m2, m)
		}
	})
}
