package api_test

// Real node on real time: predates the simulation; could run on testcluster's
// MemNet inside synctest; not moved yet.

import (
	"context"
	"testing"

	pb "github.com/strand-io/strand/proto/strand/v1"
)

// TestEndTxnErrorCarriesNoProducer: an EndTxn answered with an error names
// no producer id or epoch (-1, as Kafka), not 0/0 (which is a real id).
func TestEndTxnErrorCarriesNoProducer(t *testing.T) {
	h := newHarness(t, "e", 1)
	r, err := pb.NewTransactionsClient(h.conn).EndTxn(context.Background(), &pb.EndTxnRequest{TransactionalId: "never-initialised", ProducerId: 5, ProducerEpoch: 0, Committed: true})
	if err != nil {
		t.Fatal(err)
	}
	if r.ErrorCode == pb.ErrorCode_NONE || r.ProducerId != -1 || r.ProducerEpoch != -1 {
		t.Fatalf("EndTxn for an unknown id: %v %q producer %d/%d, want an error with -1/-1", r.ErrorCode, r.ErrorMessage, r.ProducerId, r.ProducerEpoch)
	}
}
