package hostile

// Real node on real time: the hostile requests are raw bytes on a real TCP connection
// to the Kafka listener; could dial MemNet inside synctest; not moved yet.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/strand-io/strand/client"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/request"
	"github.com/strand-io/strand/testkit/testutil"
	"github.com/strand-io/strand/testkit/wait"
)

// The edges of what a request may carry: ids
// over Kafka's string limit, int16 fields out of range, enums out of
// range, offsets for partitions that do not exist, oversized offset
// metadata, topic names that collide, configs out of their range.

// untilSettled repeats call while it answers a code a coordinator answers
// while it is starting (up to 20 s) and returns the last answer.
func untilSettled(t testing.TB, call func(ctx context.Context) (pb.ErrorCode, string)) (pb.ErrorCode, string) {
	t.Helper()
	var code pb.ErrorCode
	var msg string
	_ = wait.Until(20*time.Second, "a settled coordinator", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		code, msg = call(ctx)
		switch code {
		case pb.ErrorCode_COORDINATOR_LOAD_IN_PROGRESS, pb.ErrorCode_COORDINATOR_NOT_AVAILABLE, pb.ErrorCode_NOT_COORDINATOR, pb.ErrorCode_CONCURRENT_TRANSACTIONS:
			return false
		}
		return true
	})
	return code, msg
}

// wantAnswer fails unless the answer has the code and its message holds want.
func wantAnswer(t testing.TB, what string, code pb.ErrorCode, msg string, wantCode pb.ErrorCode, want string) {
	t.Helper()
	if code != wantCode || !strings.Contains(msg, want) {
		t.Errorf("%s: answered %v %q, want %v with a message saying %q", what, code, firstBytes(msg, 300), wantCode, want)
	}
}

func firstBytes(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// coordinatorReady asks for the coordinator of key until one answers, as
// a client does before its first coordinator request (the first ask
// creates the internal topic).
func coordinatorReady(t testing.TB, cc grpc.ClientConnInterface, typ pb.CoordinatorType, key string) {
	t.Helper()
	code, msg := untilSettled(t, func(ctx context.Context) (pb.ErrorCode, string) {
		r, err := pb.NewMetadataClient(cc).FindCoordinator(ctx, &pb.FindCoordinatorRequest{KeyType: typ, Keys: []string{key}}, grpc.WaitForReady(true))
		if err != nil {
			t.Fatal(err)
		}
		return r.Coordinators[0].ErrorCode, r.Coordinators[0].ErrorMessage
	})
	if code != pb.ErrorCode_NONE {
		t.Fatalf("FindCoordinator: %v %s", code, msg)
	}
}

func initPID(t testing.TB, tc pb.TransactionsClient, txnID string) *pb.InitProducerIdResponse {
	t.Helper()
	var r *pb.InitProducerIdResponse
	code, msg := untilSettled(t, func(ctx context.Context) (pb.ErrorCode, string) {
		var err error
		r, err = tc.InitProducerId(ctx, &pb.InitProducerIdRequest{TransactionalId: txnID, TransactionTimeoutMs: 60000, ProducerId: -1, ProducerEpoch: -1}, grpc.WaitForReady(true))
		if err != nil {
			t.Fatal(err)
		}
		return r.ErrorCode, r.ErrorMessage
	})
	if code != pb.ErrorCode_NONE {
		t.Fatalf("InitProducerId for a %d-byte id: %v %s", len(txnID), code, firstBytes(msg, 300))
	}
	return r
}

// TestLongIdsRefusedStateReadableAfterRestart: ids one byte over Kafka's
// 32767-byte string limit (and a 1 MiB one) are refused INVALID_REQUEST
// wherever a client can name one — transactional id, group id, member id,
// group instance id, client id — and leave nothing behind; an id of
// exactly 32767 bytes is served. After a restart the node reads its whole
// state back: the longest transactional id, its committed records and the
// group's committed offset.
func TestLongIdsRefusedStateReadableAfterRestart(t *testing.T) {
	dir := t.TempDir()
	cfg := testutil.DevConfig(t, dir)
	n := testutil.StartNode(t, cfg)
	tg := &target{t: t, dev: n}
	tg.createTopic("kept", 1, 1)

	// A good transactional producer whose id is exactly at the limit.
	longest := strings.Repeat("t", request.MaxStringBytes)
	v := newVictim(tg, "kept", longest)
	v.begin("a", "b")
	if err := v.end(true); err != nil {
		t.Fatal(err)
	}
	adm := tg.admin()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	gcc := tg.raw(n.Addr())
	coordinatorReady(t, gcc, pb.CoordinatorType_GROUP, "readers")
	gc := pb.NewGroupsClient(gcc)
	code, msg := untilSettled(t, func(ctx context.Context) (pb.ErrorCode, string) {
		r, err := gc.OffsetCommit(ctx, &pb.OffsetCommitRequest{GroupId: "readers", GenerationId: -1,
			Offsets: []*pb.PartitionOffset{{Topic: "kept", Partition: 0, Offset: 2, LeaderEpoch: -1}}}, grpc.WaitForReady(true))
		if err != nil {
			t.Fatal(err)
		}
		return r.Partitions[0].ErrorCode, r.Partitions[0].ErrorMessage
	})
	if code != pb.ErrorCode_NONE {
		t.Fatalf("a good offset commit: %v %s", code, msg)
	}

	bound := measure(t)
	tc := pb.NewTransactionsClient(tg.raw(n.Addr()))
	for _, size := range []int{request.MaxStringBytes + 1, 1 << 20} {
		long := strings.Repeat("x", size)
		want := fmt.Sprintf("is %d bytes; Kafka's protocol allows at most 32767", size)
		r, err := tc.InitProducerId(ctx, &pb.InitProducerIdRequest{TransactionalId: long, TransactionTimeoutMs: 60000, ProducerId: -1, ProducerEpoch: -1})
		if err != nil {
			t.Fatal(err)
		}
		wantAnswer(t, "InitProducerId with a long transactional id", r.ErrorCode, r.ErrorMessage, pb.ErrorCode_INVALID_REQUEST, want)
		oc, err := gc.OffsetCommit(ctx, &pb.OffsetCommitRequest{GroupId: long, GenerationId: -1,
			Offsets: []*pb.PartitionOffset{{Topic: "kept", Partition: 0, Offset: 1, LeaderEpoch: -1}}})
		if err != nil {
			t.Fatal(err)
		}
		wantAnswer(t, "OffsetCommit with a long group id", oc.Partitions[0].ErrorCode, oc.Partitions[0].ErrorMessage, pb.ErrorCode_INVALID_REQUEST, "group id "+want)
		for what, req := range map[string]*pb.JoinGroupRequest{
			"member id":         {GroupId: "g", MemberId: long},
			"group instance id": {GroupId: "g", GroupInstanceId: long},
			"client id":         {GroupId: "g", ClientId: long},
			"group id":          {GroupId: long},
		} {
			req.SessionTimeoutMs, req.ProtocolType, req.Protocols = 10000, "consumer", []*pb.GroupProtocol{{Name: "range"}}
			jr, err := gc.JoinGroup(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			wantAnswer(t, "JoinGroup with a long "+what, jr.ErrorCode, jr.ErrorMessage, pb.ErrorCode_INVALID_REQUEST, what+" "+want)
		}
		tr, err := gc.TxnOffsetCommit(ctx, &pb.TxnOffsetCommitRequest{TransactionalId: long, GroupId: "readers", ProducerId: 1, ProducerEpoch: 0, GenerationId: -1,
			Offsets: []*pb.PartitionOffset{{Topic: "kept", Partition: 0, Offset: 1}}})
		if err != nil {
			t.Fatal(err)
		}
		wantAnswer(t, "TxnOffsetCommit with a long transactional id", tr.ErrorCode, tr.ErrorMessage, pb.ErrorCode_INVALID_REQUEST, want)
	}
	tg.dropRaw()
	bound.check(40, 16<<20)

	// Restart: everything stored reads back.
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	n = testutil.StartNode(t, cfg)
	tg = &target{t: t, dev: n}
	adm = tg.admin()
	var ts *pb.TransactionState
	code, msg = untilSettled(t, func(ctx context.Context) (pb.ErrorCode, string) {
		var err error
		ts, err = adm.DescribeTransaction(ctx, longest)
		if err != nil {
			return pb.ErrorCode_COORDINATOR_LOAD_IN_PROGRESS, err.Error()
		}
		return ts.ErrorCode, ts.ErrorMessage
	})
	if code != pb.ErrorCode_NONE || ts.State != "CompleteCommit" {
		t.Fatalf("after the restart the 32767-byte transactional id describes as %v %q (state %q), want CompleteCommit", code, msg, ts.GetState())
	}
	if got := tg.readAll("kept", 0, client.ReadCommitted, 2); len(got) != 2 {
		t.Fatalf("after the restart read_committed reads %q, want [a b]", got)
	}
	offs, err := adm.CommittedOffsets(ctx, "readers", []client.TopicPartition{{Topic: "kept", Partition: 0}})
	if err != nil || offs[client.TopicPartition{Topic: "kept", Partition: 0}] != 2 {
		t.Fatalf("after the restart the group's offset is %v (%v), want 2", offs, err)
	}
	tg.assertServes()
}

// TestListTransactionsPaged: with 40 transactional ids of 30 000 bytes
// (1.2 MB of ids) a ListTransactions answer is a page no larger than
// request.ListPageBytes, the pages together list every id once, and the SDK
// follows them.
func TestListTransactionsPaged(t *testing.T) {
	tg := devTarget(t)
	cc := tg.raw(tg.dev.Addr())
	coordinatorReady(t, cc, pb.CoordinatorType_TRANSACTION, "00-")
	tc := pb.NewTransactionsClient(cc)
	const ids = 40
	want := map[string]bool{}
	for i := 0; i < ids; i++ {
		id := fmt.Sprintf("%02d-", i) + strings.Repeat("p", 30000)
		initPID(t, tc, id)
		want[id] = true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	seen, pages, after := map[string]bool{}, 0, ""
	for {
		r, err := tc.ListTransactions(ctx, &pb.ListTransactionsRequest{AfterTransactionalId: after, DurationFilterMs: -1})
		if err != nil {
			t.Fatal(err)
		}
		if r.ErrorCode != pb.ErrorCode_NONE {
			t.Fatalf("ListTransactions: %v", r.ErrorCode)
		}
		pages++
		if size := proto.Size(r); size > request.ListPageBytes {
			t.Fatalf("page %d is %d bytes, over the %d-byte page budget", pages, size, request.ListPageBytes)
		}
		for _, l := range r.Transactions {
			if seen[l.TransactionalId] {
				t.Fatalf("page %d lists %.10s… again", pages, l.TransactionalId)
			}
			seen[l.TransactionalId] = true
		}
		if !r.More {
			break
		}
		after = r.Transactions[len(r.Transactions)-1].TransactionalId
	}
	if len(seen) != ids || pages < 2 {
		t.Fatalf("%d pages listed %d ids, want all %d over at least 2 pages", pages, len(seen), ids)
	}
	all, err := tg.admin().ListTransactions(ctx, client.ListTransactionsFilter{DurationMs: -1})
	if err != nil || len(all) != ids {
		t.Fatalf("SDK ListTransactions: %d listings (%v), want %d", len(all), err, ids)
	}
	tg.assertServes()
}

// TestOutOfRangeFieldsRefused: fields that are INT16/INT8 on Kafka's wire
// (producer epochs, the replication factor) carrying 40 000, and an
// isolation level outside the enum, are refused INVALID_REQUEST instead of
// being cut (40 000 would wrap to -25 536) or read as read_uncommitted.
func TestOutOfRangeFieldsRefused(t *testing.T) {
	tg := devTarget(t)
	tg.createTopic("kept", 1, 1)
	v := newVictim(tg, "kept", "edge-victim")
	v.begin("acked")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cc := tg.raw(tg.dev.Addr())
	tc, gc, cons, adm := pb.NewTransactionsClient(cc), pb.NewGroupsClient(cc), pb.NewConsumerClient(cc), pb.NewAdminClient(cc)
	const want = "40000 does not fit Kafka's INT16 field [-32768, 32767]"

	er, err := tc.EndTxn(ctx, &pb.EndTxnRequest{TransactionalId: "edge-victim", ProducerId: 1, ProducerEpoch: 40000, Committed: false})
	if err != nil {
		t.Fatal(err)
	}
	wantAnswer(t, "EndTxn at epoch 40000", er.ErrorCode, er.ErrorMessage, pb.ErrorCode_INVALID_REQUEST, "producer epoch "+want)
	ir, err := tc.InitProducerId(ctx, &pb.InitProducerIdRequest{TransactionalId: "edge-victim", TransactionTimeoutMs: 60000, ProducerId: 1, ProducerEpoch: 40000})
	if err != nil {
		t.Fatal(err)
	}
	wantAnswer(t, "InitProducerId at epoch 40000", ir.ErrorCode, ir.ErrorMessage, pb.ErrorCode_INVALID_REQUEST, "producer epoch "+want)
	tr, err := gc.TxnOffsetCommit(ctx, &pb.TxnOffsetCommitRequest{TransactionalId: "edge-victim", GroupId: "g", ProducerId: 1, ProducerEpoch: 40000, GenerationId: -1,
		Offsets: []*pb.PartitionOffset{{Topic: "kept", Partition: 0, Offset: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	wantAnswer(t, "TxnOffsetCommit at epoch 40000", tr.ErrorCode, tr.ErrorMessage, pb.ErrorCode_INVALID_REQUEST, "producer epoch "+want)
	ar, err := tc.AbortTransaction(ctx, &pb.AbortTransactionRequest{Topic: "kept", Partition: 0, ProducerId: 1, ProducerEpoch: 40000, StartOffset: 0})
	if err != nil {
		t.Fatal(err)
	}
	wantAnswer(t, "AbortTransaction at epoch 40000", ar.ErrorCode, ar.ErrorMessage, pb.ErrorCode_INVALID_REQUEST, "producer epoch "+want)
	cr, err := adm.CreateTopics(ctx, &pb.CreateTopicsRequest{Topics: []*pb.CreatableTopic{{Name: "wide", NumPartitions: 1, ReplicationFactor: 40000}}})
	if err != nil {
		t.Fatal(err)
	}
	wantAnswer(t, "CreateTopics with replication factor 40000", cr.Topics[0].ErrorCode, cr.Topics[0].ErrorMessage, pb.ErrorCode_INVALID_REQUEST, "replication factor "+want)

	fr, err := cons.Fetch(ctx, &pb.FetchRequest{ReplicaId: -1, MaxWaitMs: 10, MaxBytes: 1 << 20, IsolationLevel: pb.IsolationLevel(7),
		Partitions: []*pb.FetchPartition{{Topic: "kept", Partition: 0, PartitionMaxBytes: 1 << 20}}})
	if err != nil {
		t.Fatal(err)
	}
	wantAnswer(t, "Fetch at isolation level 7", fr.ErrorCode, fr.ErrorMessage, pb.ErrorCode_INVALID_REQUEST, "isolation level 7 is neither")
	if len(fr.Partitions) != 0 {
		t.Errorf("Fetch at isolation level 7 served %d partitions", len(fr.Partitions))
	}
	lr, err := cons.ListOffsets(ctx, &pb.ListOffsetsRequest{IsolationLevel: pb.IsolationLevel(-1), Partitions: []*pb.ListOffsetsPartition{{Topic: "kept", Partition: 0, Timestamp: -1, CurrentLeaderEpoch: -1}}})
	if err != nil {
		t.Fatal(err)
	}
	wantAnswer(t, "ListOffsets at isolation level -1", lr.Partitions[0].ErrorCode, lr.Partitions[0].ErrorMessage, pb.ErrorCode_INVALID_REQUEST, "isolation level -1 is neither")

	// The victim's transaction was not touched: it commits and reads back.
	if err := v.end(true); err != nil {
		t.Fatalf("victim's commit after the hostile requests: %v", err)
	}
	if got := tg.readAll("kept", 0, client.ReadCommitted, 1); len(got) != 1 || got[0] != "acked" {
		t.Fatalf("read_committed reads %q, want [acked]", got)
	}
	tg.assertServes()
}

// TestCommitsForMissingPartitions: OffsetCommit, TxnOffsetCommit and
// AddPartitionsToTxn naming partitions that do not exist answer
// UNKNOWN_TOPIC_OR_PARTITION for them (AddPartitionsToTxn adds nothing and
// answers the rest OPERATION_NOT_ATTEMPTED, as Kafka does); offset
// metadata over offset.metadata.max.bytes (4096) answers
// OFFSET_METADATA_TOO_LARGE; the valid partitions of the same commit are
// committed, and nothing is stored for the refused ones.
func TestCommitsForMissingPartitions(t *testing.T) {
	tg := devTarget(t)
	tg.createTopic("kept", 2, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cc := tg.raw(tg.dev.Addr())
	coordinatorReady(t, cc, pb.CoordinatorType_GROUP, "g")
	coordinatorReady(t, cc, pb.CoordinatorType_TRANSACTION, "edge-txn")
	gc := pb.NewGroupsClient(cc)
	var r *pb.OffsetCommitResponse
	untilSettled(t, func(ctx context.Context) (pb.ErrorCode, string) {
		var err error
		r, err = gc.OffsetCommit(ctx, &pb.OffsetCommitRequest{GroupId: "g", GenerationId: -1, Offsets: []*pb.PartitionOffset{
			{Topic: "kept", Partition: 0, Offset: 5, Metadata: strings.Repeat("m", 4096)},
			{Topic: "nope", Partition: 0, Offset: 5},
			{Topic: "kept", Partition: 7, Offset: 5},
			{Topic: "kept", Partition: 1, Offset: 6, Metadata: strings.Repeat("m", 4097)},
		}}, grpc.WaitForReady(true))
		if err != nil {
			t.Fatal(err)
		}
		return r.Partitions[0].ErrorCode, r.Partitions[0].ErrorMessage
	})
	if len(r.Partitions) != 4 {
		t.Fatalf("OffsetCommit answered %d partitions, want 4", len(r.Partitions))
	}
	wantAnswer(t, "OffsetCommit kept-0 with 4096 bytes of metadata", r.Partitions[0].ErrorCode, r.Partitions[0].ErrorMessage, pb.ErrorCode_NONE, "")
	wantAnswer(t, "OffsetCommit nope-0", r.Partitions[1].ErrorCode, r.Partitions[1].ErrorMessage, pb.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, "partition 0 of topic 'nope' does not exist")
	wantAnswer(t, "OffsetCommit kept-7", r.Partitions[2].ErrorCode, r.Partitions[2].ErrorMessage, pb.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, "partition 7 of topic 'kept' does not exist")
	wantAnswer(t, "OffsetCommit kept-1 with 4097 bytes of metadata", r.Partitions[3].ErrorCode, r.Partitions[3].ErrorMessage, pb.ErrorCode_OFFSET_METADATA_TOO_LARGE,
		"the metadata of kept-1 is 4097 bytes, more than offset.metadata.max.bytes=4096")
	fr, err := gc.OffsetFetch(ctx, &pb.OffsetFetchRequest{GroupId: "g"})
	if err != nil {
		t.Fatal(err)
	}
	if len(fr.Partitions) != 1 || fr.Partitions[0].Topic != "kept" || fr.Partitions[0].Partition != 0 || fr.Partitions[0].Offset != 5 {
		t.Fatalf("the group holds %v, want only kept-0 at 5", fr.Partitions)
	}

	// A transactional commit for partitions that do not exist.
	tc := pb.NewTransactionsClient(cc)
	pid := initPID(t, tc, "edge-txn")
	tr, err := gc.TxnOffsetCommit(ctx, &pb.TxnOffsetCommitRequest{TransactionalId: "edge-txn", GroupId: "g", ProducerId: pid.ProducerId, ProducerEpoch: pid.ProducerEpoch,
		GenerationId: -1, Offsets: []*pb.PartitionOffset{{Topic: "nope", Partition: 3, Offset: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Partitions) != 1 {
		t.Fatalf("TxnOffsetCommit answered %d partitions", len(tr.Partitions))
	}
	wantAnswer(t, "TxnOffsetCommit nope-3", tr.Partitions[0].ErrorCode, tr.Partitions[0].ErrorMessage, pb.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, "partition 3 of topic 'nope' does not exist")

	// AddPartitionsToTxn is sent by brokers (inter-broker listener).
	ib := pb.NewTransactionsClient(tg.raw(tg.dev.InterBrokerAddr()))
	ar, err := ib.AddPartitionsToTxn(ctx, &pb.AddPartitionsToTxnRequest{Transactions: []*pb.AddPartitionsToTxnTransaction{{
		TransactionalId: "edge-txn", ProducerId: pid.ProducerId, ProducerEpoch: pid.ProducerEpoch,
		Partitions: []*pb.TopicPartition{{Topic: "kept", Partition: 0}, {Topic: "nope", Partition: 0}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	ps := ar.Results[0].Partitions
	wantAnswer(t, "AddPartitionsToTxn kept-0 beside a missing one", ps[0].ErrorCode, ps[0].ErrorMessage, pb.ErrorCode_OPERATION_NOT_ATTEMPTED, "none was added")
	wantAnswer(t, "AddPartitionsToTxn nope-0", ps[1].ErrorCode, ps[1].ErrorMessage, pb.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, "partition 0 of topic 'nope' does not exist")
	ts, err := tg.admin().DescribeTransaction(ctx, "edge-txn")
	if err != nil || len(ts.Partitions) != 0 || ts.State != "Empty" {
		t.Fatalf("edge-txn after the refused adds: %v (%v), want Empty with no partitions", ts, err)
	}
	tg.assertServes()
}

// TestTopicEdges: a name that collides with an existing one once '.' is
// read as '_' is refused INVALID_TOPIC_EXCEPTION; INT configs at int64 max
// and configs under their floor are refused INVALID_CONFIG at create and
// at alter; min.insync.replicas above the replication factor is accepted
// at create as at alter (Kafka 4.x), and an acks=all write then answers
// NOT_ENOUGH_REPLICAS.
func TestTopicEdges(t *testing.T) {
	tg := devTarget(t)
	adm := tg.admin()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tg.createTopic("coll.x", 1, 1)
	err := adm.CreateTopic(ctx, client.TopicSpec{Name: "coll_x", Partitions: 1, ReplicationFactor: 1})
	wantErr(t, "create coll_x beside coll.x", err, client.ErrInvalidTopic, "Topic 'coll_x' collides with existing topic: coll.x")

	maxInt64 := strconv.FormatInt(1<<63-1, 10)
	for k, v := range map[string]string{"segment.bytes": maxInt64, "max.message.bytes": maxInt64, "min.insync.replicas": maxInt64, "retention.ms": "-2"} {
		err := adm.CreateTopic(ctx, client.TopicSpec{Name: "cfg", Partitions: 1, ReplicationFactor: 1, Configs: map[string]string{k: v}})
		wantErr(t, "create with "+k+"="+v, err, client.ErrInvalidConfig, "for configuration "+k)
		err = adm.AlterTopicConfigs(ctx, "coll.x", map[string]string{k: v})
		wantErr(t, "alter "+k+"="+v, err, client.ErrInvalidConfig, "for configuration "+k)
	}
	if err := adm.AlterTopicConfigs(ctx, "coll.x", map[string]string{"retention.ms": maxInt64}); err != nil {
		t.Errorf("retention.ms at int64 max (a LONG in Kafka) refused: %v", err)
	}

	if err := adm.CreateTopic(ctx, client.TopicSpec{Name: "strict", Partitions: 1, ReplicationFactor: 1, Configs: map[string]string{"min.insync.replicas": "2"}}); err != nil {
		t.Fatalf("create with min.insync.replicas=2 > RF 1: %v (alter accepts it, as Kafka does both)", err)
	}
	if err := adm.AlterTopicConfigs(ctx, "strict", map[string]string{"min.insync.replicas": "3"}); err != nil {
		t.Fatalf("alter min.insync.replicas=3 > RF 1: %v", err)
	}
	p, err := client.NewProducer(tg.opts(client.WithPartitioner(client.ManualPartitioner{}), client.RequestTimeout(time.Second), client.DeliveryTimeout(3*time.Second))...)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	err = p.ProduceSync(ctx, &client.Record{Topic: "strict", Partition: 0, Value: []byte("x")}).FirstErr()
	wantErr(t, "acks=all write with min.insync.replicas above the RF", err, client.ErrNotEnoughReplicas, "fewer than min.insync.replicas=3")
	tg.assertServes()
}

func wantErr(t testing.TB, what string, err error, sentinel error, want string) {
	t.Helper()
	if !errorsIs(err, sentinel) || !strings.Contains(fmt.Sprint(err), want) {
		t.Errorf("%s: got %v, want %v saying %q", what, err, sentinel, want)
	}
}

// TestMessagesHideOthersProducerIDs: a client naming a transactional id it
// does not own, with its own producer id, is refused
// INVALID_PRODUCER_ID_MAPPING without learning the owner's producer id.
func TestMessagesHideOthersProducerIDs(t *testing.T) {
	tg := devTarget(t)
	tg.createTopic("kept", 1, 1)
	newVictim(tg, "kept", "owned")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	desc, err := tg.admin().DescribeTransaction(ctx, "owned")
	if err != nil {
		t.Fatal(err)
	}
	tc := pb.NewTransactionsClient(tg.raw(tg.dev.Addr()))
	mine := initPID(t, tc, "") // an idempotent producer id of the attacker's own
	er, err := tc.EndTxn(ctx, &pb.EndTxnRequest{TransactionalId: "owned", ProducerId: mine.ProducerId, ProducerEpoch: 0, Committed: true})
	if err != nil {
		t.Fatal(err)
	}
	// The whole message, so that no number in it can be the owner's.
	want := fmt.Sprintf("transactional id %q does not belong to producerId=%d", "owned", mine.ProducerId)
	if er.ErrorCode != pb.ErrorCode_INVALID_PRODUCER_ID_MAPPING || er.ErrorMessage != want {
		t.Errorf("EndTxn for another's transactional id (owner's producer id %d): answered %v %q, want INVALID_PRODUCER_ID_MAPPING %q",
			desc.ProducerId, er.ErrorCode, er.ErrorMessage, want)
	}
	tg.assertServes()
}

func errorsIs(err, target error) bool { return errors.Is(err, target) }
