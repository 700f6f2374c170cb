package request_test

// Real node on real time: predates the simulation; could run on testcluster's
// MemNet inside synctest; not moved yet.

import (
	"testing"

	"github.com/strand-io/strand/authz"
	"github.com/strand-io/strand/internal/planted"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
)

// TestAuthorizeProduce: Write on each topic, answered per partition (a
// request to a topic allowed and one refused writes the first only);
// a topic that does not exist is refused the same way as one that does,
// so the answer does not tell; a transactional producer needs Write on
// its transactional id, else every partition is
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED and nothing is written.
func TestAuthorizeProduce(t *testing.T) {
	e := newAuthzEnv(t)
	e.fc.grant(alice, authz.OpWrite, authz.ResourceTopic, "a")
	ctx := as(e.ctx, alice)
	r, _ := e.h.Produce(ctx, &pb.ProduceRequest{Acks: 1, Partitions: []*pb.PartitionRecords{
		{Topic: "a", Records: batch(t, plainBatch, "1")}, {Topic: "b", Records: batch(t, plainBatch, "2")}, {Topic: "nope", Records: batch(t, plainBatch, "3")}}})
	if p := r.Partitions[0]; p.ErrorCode != pb.ErrorCode_NONE || p.BaseOffset != 0 {
		t.Fatalf("a (allowed): %v %q at %d", p.ErrorCode, p.ErrorMessage, p.BaseOffset)
	}
	for _, p := range r.Partitions[1:] {
		if p.ErrorCode != pb.ErrorCode_TOPIC_AUTHORIZATION_FAILED || p.BaseOffset != -1 {
			t.Fatalf("%s (refused): %v at %d, want TOPIC_AUTHORIZATION_FAILED at -1", p.Topic, p.ErrorCode, p.BaseOffset)
		}
	}
	if !e.fc.denied("Produce", authz.OpWrite, authz.ResourceTopic, "b") {
		t.Fatal("the denial of Write on b was not reported to the Checker")
	}
	lo, _ := e.raw.ListOffsets(e.ctx, &pb.ListOffsetsRequest{Partitions: []*pb.ListOffsetsPartition{{Topic: "b", Timestamp: -1, CurrentLeaderEpoch: -1}}})
	if lo.Partitions[0].Offset != 0 {
		t.Fatalf("b's log end is %d after a refused produce, want 0", lo.Partitions[0].Offset)
	}

	// Transactional: Write on the topic alone is not enough.
	ip := waitTxnCoordinator(t, e, "tx")
	txn := record.BatchOptions{ProducerID: ip.ProducerId, ProducerEpoch: int16(ip.ProducerEpoch), BaseSequence: 0, Transactional: true}
	req := &pb.ProduceRequest{Acks: -1, TimeoutMs: 5000, TransactionalId: "tx", Partitions: []*pb.PartitionRecords{{Topic: "a", Records: batch(t, txn, "t")}}}
	r, _ = e.h.Produce(ctx, req)
	if p := r.Partitions[0]; p.ErrorCode != pb.ErrorCode_TRANSACTIONAL_ID_AUTHORIZATION_FAILED {
		t.Fatalf("transactional produce without Write on tx: %v %q", p.ErrorCode, p.ErrorMessage)
	}
	e.fc.grant(alice, authz.OpWrite, authz.ResourceTransactionalID, "tx")
	r, w := e.h.Produce(ctx, req)
	if w != nil {
		w.Wait(ctx)
	}
	if p := r.Partitions[0]; p.ErrorCode != pb.ErrorCode_NONE {
		t.Fatalf("transactional produce with Write on tx and a: %v %q", p.ErrorCode, p.ErrorMessage)
	}
}

// TestAuthorizeProducePlanted: with the topic Write check skipped
// (planted), a principal with no grant writes: the test above would fail.
func TestAuthorizeProducePlanted(t *testing.T) {
	e := newAuthzEnv(t)
	defer planted.Set(planted.AuthzSkipProduceTopicWrite)()
	r, _ := e.h.Produce(as(e.ctx, bob), &pb.ProduceRequest{Acks: 1, Partitions: []*pb.PartitionRecords{{Topic: "b", Records: batch(t, plainBatch, "1")}}})
	if r.Partitions[0].ErrorCode != pb.ErrorCode_NONE {
		t.Fatalf("planted: bob's produce to b answered %v, want it written (the check skipped)", r.Partitions[0].ErrorCode)
	}
}

// TestAuthorizeFetchAndOffsets: a consumer's Fetch needs Read on each
// topic, ListOffsets and OffsetForLeaderEpoch Describe, all per
// partition; a follower's Fetch and OffsetForLeaderEpoch need
// ClusterAction on the cluster.
func TestAuthorizeFetchAndOffsets(t *testing.T) {
	e := newAuthzEnv(t)
	for _, tp := range []string{"a", "b"} {
		r, _ := e.raw.Produce(e.ctx, &pb.ProduceRequest{Acks: 1, Partitions: []*pb.PartitionRecords{{Topic: tp, Records: batch(t, plainBatch, "v")}}})
		if r.Partitions[0].ErrorCode != pb.ErrorCode_NONE {
			t.Fatal(r.Partitions[0])
		}
	}
	e.fc.grant(alice, authz.OpRead, authz.ResourceTopic, "a").grant(alice, authz.OpDescribe, authz.ResourceTopic, "a")
	ctx := as(e.ctx, alice)
	fetch := func(replica int32) *pb.FetchResponse {
		f, err := e.h.Fetch(ctx, &pb.FetchRequest{ReplicaId: replica, MaxBytes: 1 << 20, Partitions: []*pb.FetchPartition{
			{Topic: "a", FetchOffset: 0, PartitionMaxBytes: 1 << 20, CurrentLeaderEpoch: -1},
			{Topic: "b", FetchOffset: 0, PartitionMaxBytes: 1 << 20, CurrentLeaderEpoch: -1}}})
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	f := fetch(-1)
	codes := map[string]pb.ErrorCode{}
	for _, p := range f.Partitions {
		codes[p.Topic] = p.ErrorCode
		if p.Topic == "a" && len(p.Records) == 0 {
			t.Fatal("a (allowed) fetched nothing")
		}
		if p.Topic == "b" && len(p.Records) != 0 {
			t.Fatal("b (refused) returned records")
		}
	}
	if codes["a"] != pb.ErrorCode_NONE || codes["b"] != pb.ErrorCode_TOPIC_AUTHORIZATION_FAILED || f.ErrorCode != pb.ErrorCode_NONE {
		t.Fatalf("consumer fetch: %v (request %v), want a NONE, b TOPIC_AUTHORIZATION_FAILED", codes, f.ErrorCode)
	}
	// A follower without ClusterAction: nothing is read.
	f = fetch(7)
	if f.ErrorCode != pb.ErrorCode_CLUSTER_AUTHORIZATION_FAILED || len(f.Partitions) != 2 {
		t.Fatalf("follower fetch without ClusterAction: %v, %d partitions", f.ErrorCode, len(f.Partitions))
	}
	for _, p := range f.Partitions {
		if p.ErrorCode != pb.ErrorCode_TOPIC_AUTHORIZATION_FAILED || len(p.Records) != 0 {
			t.Fatalf("follower fetch without ClusterAction, %s: %v, %d bytes", p.Topic, p.ErrorCode, len(p.Records))
		}
	}
	if !e.fc.denied("Fetch", authz.OpClusterAction, authz.ResourceCluster, authz.ClusterName) {
		t.Fatal("the follower's denial was not reported")
	}

	lo, _ := e.h.ListOffsets(ctx, &pb.ListOffsetsRequest{Partitions: []*pb.ListOffsetsPartition{{Topic: "a", Timestamp: -1, CurrentLeaderEpoch: -1}, {Topic: "b", Timestamp: -1, CurrentLeaderEpoch: -1}, {Topic: "nope", Timestamp: -1, CurrentLeaderEpoch: -1}}})
	if lo.Partitions[0].ErrorCode != pb.ErrorCode_NONE || lo.Partitions[0].Offset != 1 ||
		lo.Partitions[1].ErrorCode != pb.ErrorCode_TOPIC_AUTHORIZATION_FAILED || lo.Partitions[1].Offset != -1 ||
		lo.Partitions[2].ErrorCode != pb.ErrorCode_TOPIC_AUTHORIZATION_FAILED {
		t.Fatalf("ListOffsets: %v", lo.Partitions)
	}

	oe := func(replica int32) *pb.OffsetForLeaderEpochResponse {
		r, _ := e.h.OffsetForLeaderEpoch(ctx, &pb.OffsetForLeaderEpochRequest{ReplicaId: replica, Partitions: []*pb.OffsetForLeaderEpochPartition{
			{Topic: "a", CurrentLeaderEpoch: -1, LeaderEpoch: 0}, {Topic: "b", CurrentLeaderEpoch: -1, LeaderEpoch: 0}}})
		return r
	}
	r := oe(-1)
	if r.Partitions[0].ErrorCode != pb.ErrorCode_NONE || r.Partitions[0].EndOffset != 1 || r.Partitions[1].ErrorCode != pb.ErrorCode_TOPIC_AUTHORIZATION_FAILED {
		t.Fatalf("consumer OffsetForLeaderEpoch: %v", r.Partitions)
	}
	r = oe(7)
	if r.Partitions[0].ErrorCode != pb.ErrorCode_TOPIC_AUTHORIZATION_FAILED || r.Partitions[1].ErrorCode != pb.ErrorCode_TOPIC_AUTHORIZATION_FAILED {
		t.Fatalf("follower OffsetForLeaderEpoch without ClusterAction: %v", r.Partitions)
	}
	// With ClusterAction (a broker) the follower reads both.
	e.fc.grant(alice, authz.OpClusterAction, authz.ResourceCluster, authz.ClusterName)
	// (Replica 7 is no broker: replication answers that, not the authorizer.)
	if f = fetch(7); f.ErrorCode == pb.ErrorCode_CLUSTER_AUTHORIZATION_FAILED {
		t.Fatalf("follower fetch with ClusterAction: %v", f.ErrorCode)
	}
	for _, p := range f.Partitions {
		if p.ErrorCode == pb.ErrorCode_TOPIC_AUTHORIZATION_FAILED || p.ErrorCode == pb.ErrorCode_CLUSTER_AUTHORIZATION_FAILED {
			t.Fatalf("follower fetch with ClusterAction, %s: %v", p.Topic, p.ErrorCode)
		}
	}
	if r = oe(7); r.Partitions[0].ErrorCode != pb.ErrorCode_NONE || r.Partitions[1].ErrorCode != pb.ErrorCode_NONE {
		t.Fatalf("follower OffsetForLeaderEpoch with ClusterAction: %v", r.Partitions)
	}
}

// TestAuthorizeMetadataAndFindCoordinator: Metadata of all topics lists
// only those the principal may Describe; a topic named and not
// describable answers TOPIC_AUTHORIZATION_FAILED whether it exists or
// not (the same answer for both); FindCoordinator needs Describe on the
// group or the transactional id.
func TestAuthorizeMetadataAndFindCoordinator(t *testing.T) {
	e := newAuthzEnv(t)
	e.fc.grant(alice, authz.OpDescribe, authz.ResourceTopic, "a").
		grant(alice, authz.OpDescribe, authz.ResourceGroup, "g").
		grant(alice, authz.OpDescribe, authz.ResourceTransactionalID, "tx")
	ctx := as(e.ctx, alice)
	md, _ := e.h.Metadata(ctx, &pb.MetadataRequest{})
	if len(md.Topics) != 1 || md.Topics[0].Name != "a" || len(md.Brokers) != 1 {
		t.Fatalf("all topics: %v, brokers %v; want a only", md.Topics, md.Brokers)
	}
	// A listing hides what the principal may not see without auditing it
	// as a denial (Kafka's logIfDenied=false); a named topic is audited.
	if !e.fc.quietly("Metadata", authz.OpDescribe, authz.ResourceTopic, "b") {
		t.Fatal("the all-topics listing's hidden topic b was audited as a denial")
	}
	e.fc.reset()
	md, _ = e.h.Metadata(ctx, &pb.MetadataRequest{Topics: []string{"a", "b", "nope"}})
	if !e.fc.denied("Metadata", authz.OpDescribe, authz.ResourceTopic, "b") || e.fc.quietly("Metadata", authz.OpDescribe, authz.ResourceTopic, "b") {
		t.Fatal("the named topic b was not audited as a denial")
	}
	if len(md.Topics) != 3 || md.Topics[0].ErrorCode != pb.ErrorCode_NONE || len(md.Topics[0].Partitions) != 1 {
		t.Fatalf("named: %v", md.Topics)
	}
	b, nope := md.Topics[1], md.Topics[2]
	if b.ErrorCode != pb.ErrorCode_TOPIC_AUTHORIZATION_FAILED || nope.ErrorCode != pb.ErrorCode_TOPIC_AUTHORIZATION_FAILED ||
		len(b.Partitions) != 0 || b.TopicId != "" || b.IsInternal {
		t.Fatalf("named b (exists) and nope (does not): %v / %v, want both TOPIC_AUTHORIZATION_FAILED and nothing else", b, nope)
	}
	if b.ErrorMessage != "not authorized to Describe topic \"b\"" || nope.ErrorMessage != "not authorized to Describe topic \"nope\"" {
		t.Fatalf("messages tell more than the refusal: %q / %q", b.ErrorMessage, nope.ErrorMessage)
	}
	fc, _ := e.h.FindCoordinator(ctx, &pb.FindCoordinatorRequest{KeyType: pb.CoordinatorType_GROUP, Keys: []string{"g", "h"}})
	if fc.Coordinators[1].ErrorCode != pb.ErrorCode_GROUP_AUTHORIZATION_FAILED || fc.Coordinators[1].NodeId != -1 ||
		fc.Coordinators[0].ErrorCode == pb.ErrorCode_GROUP_AUTHORIZATION_FAILED {
		t.Fatalf("FindCoordinator groups: %v", fc.Coordinators)
	}
	fc, _ = e.h.FindCoordinator(ctx, &pb.FindCoordinatorRequest{KeyType: pb.CoordinatorType_TRANSACTION, Keys: []string{"tx", "other"}})
	if fc.Coordinators[1].ErrorCode != pb.ErrorCode_TRANSACTIONAL_ID_AUTHORIZATION_FAILED || fc.Coordinators[0].ErrorCode == pb.ErrorCode_TRANSACTIONAL_ID_AUTHORIZATION_FAILED {
		t.Fatalf("FindCoordinator transactions: %v", fc.Coordinators)
	}
}
