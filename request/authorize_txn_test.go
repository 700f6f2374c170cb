package request_test

// Real node on real time: predates the simulation; could run on testcluster's
// MemNet inside synctest; not moved yet.

import (
	"context"
	"fmt"
	"testing"

	"github.com/strand-io/strand/authz"
	"github.com/strand-io/strand/internal/auth"
	"github.com/strand-io/strand/internal/planted"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// TestAuthorizeInitProducerId: the exactly-once specifics of authorization.
// With a transactional id InitProducerId needs Write on it
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); without one IdempotentWrite on
// the cluster or Write on at least one topic (CLUSTER_AUTHORIZATION_FAILED).
func TestAuthorizeInitProducerId(t *testing.T) {
	e := newAuthzEnv(t)
	waitTxnCoordinator(t, e, "tx")
	init := func(p, id string) *pb.InitProducerIdResponse {
		r, err := e.h.InitProducerId(as(e.ctx, p), &pb.InitProducerIdRequest{TransactionalId: id, TransactionTimeoutMs: 60000, ProducerId: -1, ProducerEpoch: -1})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	// Write on a topic is not Write on the transactional id.
	e.fc.grant(alice, authz.OpWrite, authz.ResourceTopic, "a")
	if r := init(alice, "tx"); r.ErrorCode != pb.ErrorCode_TRANSACTIONAL_ID_AUTHORIZATION_FAILED || r.ProducerId != -1 {
		t.Fatalf("transactional InitProducerId without Write on tx: %v", r)
	}
	e.fc.grant(alice, authz.OpWrite, authz.ResourceTransactionalID, "tx")
	if r := init(alice, "tx"); r.ErrorCode != pb.ErrorCode_NONE || r.ProducerId < 0 {
		t.Fatalf("transactional InitProducerId with Write on tx: %v", r)
	}
	// Idempotent: alice has Write on topic a.
	if r := init(alice, ""); r.ErrorCode != pb.ErrorCode_NONE || r.ProducerId < 0 {
		t.Fatalf("idempotent InitProducerId with Write on a topic: %v", r)
	}
	// bob has nothing: refused, and the IdempotentWrite denial is audited.
	if r := init(bob, ""); r.ErrorCode != pb.ErrorCode_CLUSTER_AUTHORIZATION_FAILED || r.ProducerId != -1 {
		t.Fatalf("idempotent InitProducerId with no grant: %v", r)
	}
	if !e.fc.denied("InitProducerId", authz.OpIdempotentWrite, authz.ResourceCluster, authz.ClusterName) {
		t.Fatal("the IdempotentWrite denial was not reported")
	}
	// IdempotentWrite on the cluster alone is enough.
	e.fc.grant(bob, authz.OpIdempotentWrite, authz.ResourceCluster, authz.ClusterName)
	if r := init(bob, ""); r.ErrorCode != pb.ErrorCode_NONE {
		t.Fatalf("idempotent InitProducerId with IdempotentWrite: %v", r)
	}
}

// txnOffsetCommitGroupChecked reports what is wrong (nil: nothing) with
// the group check of TxnOffsetCommit: a producer with Write on its
// transactional id and Read on the topic, but not Read on the group,
// must be refused GROUP_AUTHORIZATION_FAILED in the response's error and
// in every partition.
func txnOffsetCommitGroupChecked(e *authzEnv, ip *pb.InitProducerIdResponse) error {
	r, err := e.h.TxnOffsetCommit(as(e.ctx, alice), &pb.TxnOffsetCommitRequest{TransactionalId: "tx", GroupId: "other", ProducerId: ip.ProducerId,
		ProducerEpoch: ip.ProducerEpoch, GenerationId: -1, Offsets: []*pb.PartitionOffset{{Topic: "a", Offset: 1}}})
	if err != nil {
		return err
	}
	if r.ErrorCode != pb.ErrorCode_GROUP_AUTHORIZATION_FAILED || partitionCodes(r.Partitions)["a"] != pb.ErrorCode_GROUP_AUTHORIZATION_FAILED {
		return fmt.Errorf("TxnOffsetCommit to a group without Read on it answered %v, partitions %v; want GROUP_AUTHORIZATION_FAILED", r.ErrorCode, r.Partitions)
	}
	return nil
}

// TestAuthorizeTxnOffsetCommit: Write on the transactional id
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), Read on the group
// (GROUP_AUTHORIZATION_FAILED), Read on each topic (per partition).
func TestAuthorizeTxnOffsetCommit(t *testing.T) {
	e := newAuthzEnv(t)
	ip := waitTxnCoordinator(t, e, "tx")
	waitGroupCoordinator(t, e, "g")
	waitGroupCoordinator(t, e, "other")
	e.fc.grant(alice, authz.OpRead, authz.ResourceTopic, "a").grant(alice, authz.OpRead, authz.ResourceGroup, "g")
	ctx := as(e.ctx, alice)
	req := &pb.TxnOffsetCommitRequest{TransactionalId: "tx", GroupId: "g", ProducerId: ip.ProducerId, ProducerEpoch: ip.ProducerEpoch,
		GenerationId: -1, Offsets: []*pb.PartitionOffset{{Topic: "a", Offset: 1}, {Topic: "b", Offset: 1}}}
	r, _ := e.h.TxnOffsetCommit(ctx, req)
	if c := partitionCodes(r.Partitions); r.ErrorCode != pb.ErrorCode_TRANSACTIONAL_ID_AUTHORIZATION_FAILED || c["a"] != pb.ErrorCode_TRANSACTIONAL_ID_AUTHORIZATION_FAILED || c["b"] != pb.ErrorCode_TRANSACTIONAL_ID_AUTHORIZATION_FAILED {
		t.Fatalf("TxnOffsetCommit without Write on tx: %v", r)
	}
	e.fc.grant(alice, authz.OpWrite, authz.ResourceTransactionalID, "tx")
	if err := txnOffsetCommitGroupChecked(e, ip); err != nil {
		t.Fatal(err)
	}
	r, _ = e.h.TxnOffsetCommit(ctx, req)
	if c := partitionCodes(r.Partitions); c["a"] != pb.ErrorCode_NONE || c["b"] != pb.ErrorCode_TOPIC_AUTHORIZATION_FAILED {
		t.Fatalf("TxnOffsetCommit a (allowed), b (refused): %v", r)
	}
}

// TestAuthorizeTxnOffsetCommitPlanted: with the group check skipped
// (planted), the check above reports the bug.
func TestAuthorizeTxnOffsetCommitPlanted(t *testing.T) {
	e := newAuthzEnv(t)
	ip := waitTxnCoordinator(t, e, "tx")
	waitGroupCoordinator(t, e, "other")
	e.fc.grant(alice, authz.OpRead, authz.ResourceTopic, "a").grant(alice, authz.OpWrite, authz.ResourceTransactionalID, "tx")
	defer planted.Set(planted.AuthzSkipTxnOffsetCommitGroup)()
	if err := txnOffsetCommitGroupChecked(e, ip); err == nil {
		t.Fatal("with the group check skipped, TxnOffsetCommit was still refused: the test cannot catch the bug")
	}
}

// TestAuthorizeTransactions: EndTxn and AddOffsetsToTxn need Write on
// the transactional id (and AddOffsetsToTxn Read on the group); a
// client's AddPartitionsToTxn Write on the id and each topic (a topic
// refused TOPIC_AUTHORIZATION_FAILED, the others OPERATION_NOT_ATTEMPTED),
// a broker's (inter-broker listener, verify-only) ClusterAction;
// WriteTxnMarkers ClusterAction or Alter on the cluster; AbortTransaction
// Alter on the cluster; DescribeTransactions and ListTransactions show
// only the ids the principal may Describe; DescribeProducers needs Read
// on the topic.
func TestAuthorizeTransactions(t *testing.T) {
	e := newAuthzEnv(t)
	ip := waitTxnCoordinator(t, e, "tx")
	waitTxnCoordinator(t, e, "tx2")
	ctx := as(e.ctx, alice)

	et, _ := e.h.EndTxn(ctx, &pb.EndTxnRequest{TransactionalId: "tx", ProducerId: ip.ProducerId, ProducerEpoch: ip.ProducerEpoch, Committed: false})
	if et.ErrorCode != pb.ErrorCode_TRANSACTIONAL_ID_AUTHORIZATION_FAILED {
		t.Fatalf("EndTxn without Write: %v", et)
	}
	ao, _ := e.h.AddOffsetsToTxn(ctx, &pb.AddOffsetsToTxnRequest{TransactionalId: "tx", ProducerId: ip.ProducerId, ProducerEpoch: ip.ProducerEpoch, GroupId: "g"})
	if ao.ErrorCode != pb.ErrorCode_TRANSACTIONAL_ID_AUTHORIZATION_FAILED {
		t.Fatalf("AddOffsetsToTxn without Write: %v", ao)
	}
	apt := func(ctx context.Context, verify bool) []*pb.PartitionError {
		r, err := e.h.AddPartitionsToTxn(ctx, &pb.AddPartitionsToTxnRequest{Transactions: []*pb.AddPartitionsToTxnTransaction{{TransactionalId: "tx",
			ProducerId: ip.ProducerId, ProducerEpoch: ip.ProducerEpoch, VerifyOnly: verify, TransactionVersion: 1,
			Partitions: []*pb.TopicPartition{{Topic: "a"}, {Topic: "b"}}}}})
		if err != nil || len(r.Results) != 1 {
			t.Fatal(r, err)
		}
		return r.Results[0].Partitions
	}
	if c := partitionCodes(apt(ctx, false)); c["a"] != pb.ErrorCode_TRANSACTIONAL_ID_AUTHORIZATION_FAILED || c["b"] != pb.ErrorCode_TRANSACTIONAL_ID_AUTHORIZATION_FAILED {
		t.Fatalf("client AddPartitionsToTxn without Write on tx: %v", c)
	}
	e.fc.grant(alice, authz.OpWrite, authz.ResourceTransactionalID, "tx").grant(alice, authz.OpWrite, authz.ResourceTopic, "a")
	if c := partitionCodes(apt(ctx, false)); c["a"] != pb.ErrorCode_OPERATION_NOT_ATTEMPTED || c["b"] != pb.ErrorCode_TOPIC_AUTHORIZATION_FAILED {
		t.Fatalf("client AddPartitionsToTxn, b refused: %v", c)
	}
	if c := partitionCodes(apt(ctx, true)); c["a"] != pb.ErrorCode_CLUSTER_AUTHORIZATION_FAILED || c["b"] != pb.ErrorCode_CLUSTER_AUTHORIZATION_FAILED {
		t.Fatalf("verify-only AddPartitionsToTxn from a client: %v", c)
	}
	brokerCtx := auth.NewContext(e.ctx, auth.Session{Principal: auth.User("CN=broker"), Listener: auth.ListenerInterBroker, Broker: true})
	if c := partitionCodes(apt(brokerCtx, false)); c["a"] != pb.ErrorCode_CLUSTER_AUTHORIZATION_FAILED {
		t.Fatalf("AddPartitionsToTxn on the inter-broker listener without ClusterAction: %v", c)
	}
	e.fc.grant("User:CN=broker", authz.OpClusterAction, authz.ResourceCluster, authz.ClusterName)
	if c := partitionCodes(apt(brokerCtx, false)); c["a"] == pb.ErrorCode_CLUSTER_AUTHORIZATION_FAILED || c["b"] == pb.ErrorCode_TOPIC_AUTHORIZATION_FAILED {
		t.Fatalf("a broker's AddPartitionsToTxn with ClusterAction: %v", c)
	}
	if et, _ = e.h.EndTxn(ctx, &pb.EndTxnRequest{TransactionalId: "tx", ProducerId: ip.ProducerId, ProducerEpoch: ip.ProducerEpoch, Committed: false}); et.ErrorCode == pb.ErrorCode_TRANSACTIONAL_ID_AUTHORIZATION_FAILED {
		t.Fatalf("EndTxn with Write: %v", et)
	}
	ao, _ = e.h.AddOffsetsToTxn(ctx, &pb.AddOffsetsToTxnRequest{TransactionalId: "tx", ProducerId: ip.ProducerId, ProducerEpoch: ip.ProducerEpoch, GroupId: "g"})
	if ao.ErrorCode != pb.ErrorCode_GROUP_AUTHORIZATION_FAILED {
		t.Fatalf("AddOffsetsToTxn without Read on g: %v", ao)
	}

	// Markers and the administrator's abort.
	wm, _ := e.h.WriteTxnMarkers(ctx, &pb.WriteTxnMarkersRequest{Markers: []*pb.TxnMarker{{TransactionalId: "tx", ProducerId: ip.ProducerId, ProducerEpoch: ip.ProducerEpoch + 1,
		Partitions: []*pb.TopicPartition{{Topic: "a"}}, TransactionVersion: 2}}})
	if wm.Markers[0].Partitions[0].ErrorCode != pb.ErrorCode_CLUSTER_AUTHORIZATION_FAILED {
		t.Fatalf("WriteTxnMarkers from a client: %v", wm)
	}
	if ab, _ := e.h.AbortTransaction(ctx, &pb.AbortTransactionRequest{Topic: "a", ProducerId: ip.ProducerId, ProducerEpoch: ip.ProducerEpoch}); ab.ErrorCode != pb.ErrorCode_CLUSTER_AUTHORIZATION_FAILED {
		t.Fatalf("AbortTransaction without Alter on the cluster: %v", ab)
	}
	e.fc.grant(alice, authz.OpAlter, authz.ResourceCluster, authz.ClusterName)
	if ab, _ := e.h.AbortTransaction(ctx, &pb.AbortTransactionRequest{Topic: "a", ProducerId: ip.ProducerId, ProducerEpoch: ip.ProducerEpoch}); ab.ErrorCode == pb.ErrorCode_CLUSTER_AUTHORIZATION_FAILED {
		t.Fatalf("AbortTransaction with Alter on the cluster: %v", ab)
	}

	// Describing.
	e.fc.grant(alice, authz.OpDescribe, authz.ResourceTransactionalID, "tx")
	dt, _ := e.h.DescribeTransactions(ctx, &pb.DescribeTransactionsRequest{TransactionalIds: []string{"tx", "tx2"}})
	codes := map[string]pb.ErrorCode{}
	for _, s := range dt.Transactions {
		codes[s.TransactionalId] = s.ErrorCode
		if s.TransactionalId == "tx2" && (s.State != "" || s.ProducerId != -1) {
			t.Fatalf("tx2 (refused) described: %v", s)
		}
	}
	if len(dt.Transactions) != 2 || codes["tx"] != pb.ErrorCode_NONE || codes["tx2"] != pb.ErrorCode_TRANSACTIONAL_ID_AUTHORIZATION_FAILED {
		t.Fatalf("DescribeTransactions tx, tx2: %v", dt.Transactions)
	}
	lt, _ := e.h.ListTransactions(ctx, &pb.ListTransactionsRequest{DurationFilterMs: -1})
	if len(lt.Transactions) != 1 || lt.Transactions[0].TransactionalId != "tx" {
		t.Fatalf("ListTransactions: %v, want tx only", lt.Transactions)
	}
	dp, _ := e.h.DescribeProducers(ctx, &pb.DescribeProducersRequest{Partitions: []*pb.TopicPartition{{Topic: "b"}, {Topic: "nope"}}})
	if dp.Partitions[0].ErrorCode != pb.ErrorCode_TOPIC_AUTHORIZATION_FAILED || dp.Partitions[1].ErrorCode != pb.ErrorCode_TOPIC_AUTHORIZATION_FAILED {
		t.Fatalf("DescribeProducers b, nope without Read: %v", dp.Partitions)
	}
	e.fc.grant(alice, authz.OpRead, authz.ResourceTopic, "b")
	if dp, _ = e.h.DescribeProducers(ctx, &pb.DescribeProducersRequest{Partitions: []*pb.TopicPartition{{Topic: "b"}}}); dp.Partitions[0].ErrorCode != pb.ErrorCode_NONE {
		t.Fatalf("DescribeProducers b with Read: %v", dp.Partitions)
	}
}
