package request_test

// Real node on real time: predates the simulation; could run on testcluster's
// MemNet inside synctest; not moved yet.

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/strand-io/strand/authz"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
	"github.com/strand-io/strand/request"
	"github.com/strand-io/strand/testkit/testutil"
	"github.com/strand-io/strand/testkit/wait"
)

// recreate deletes topic name and creates it again, and returns the
// old and the new id once this node's image has the new one.
func recreate(ctx context.Context, t *testing.T, h *request.Handler, name string) (oldID, newID string) {
	t.Helper()
	oldID = h.Repl.Image().Topic(name).ID
	dt, err := h.DeleteTopics(ctx, &pb.DeleteTopicsRequest{Names: []string{name}, TimeoutMs: 30000})
	if err != nil || dt.Topics[0].ErrorCode != pb.ErrorCode_NONE {
		t.Fatalf("DeleteTopics: %v %v", dt, err)
	}
	wait.Eventually(t, 30*time.Second, "the topic is gone", func() bool { return h.Repl.Image().Topic(name) == nil })
	createTopic(ctx, t, h, name)
	newID = h.Repl.Image().Topic(name).ID
	if newID == oldID || newID == "" {
		t.Fatalf("the topic created again has id %q (the old one %q)", newID, oldID)
	}
	return oldID, newID
}

func createTopic(ctx context.Context, t *testing.T, h *request.Handler, name string) {
	t.Helper()
	ct, err := h.CreateTopics(ctx, &pb.CreateTopicsRequest{Topics: []*pb.CreatableTopic{{Name: name, NumPartitions: 1, ReplicationFactor: 1}}, TimeoutMs: 30000})
	if err != nil || ct.Topics[0].ErrorCode != pb.ErrorCode_NONE {
		t.Fatalf("CreateTopics: %v %v", ct, err)
	}
	wait.Eventually(t, 30*time.Second, "the topic's leader is up", func() bool {
		p, err := h.Repl.Partition(name, 0)
		return err == nil && p.Leadership().Leader == h.NodeID && h.Repl.Image().Topic(name) != nil
	})
}

func fetchedValues(t *testing.T, r *pb.FetchPartitionResponse) []string {
	t.Helper()
	var out []string
	for it := record.NewIter(r.Records); it.Next(); {
		_, recs, err := record.Decode(it.Batch())
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range recs {
			out = append(out, string(rec.Value))
		}
	}
	return out
}

// TestTopicIDAtTheRequestLayer: what a front door hands the request layer
// after translating a Kafka client's topic id to a name: the name and the
// id. The topic is deleted and created again between that translation and
// the read (here: before the request is made, with the old id), so the
// name finds the new topic. The consumer of the old topic at its old
// position is answered INCONSISTENT_TOPIC_ID, never the new topic's
// records; a producer of the old topic UNKNOWN_TOPIC_ID, and nothing is
// written into the new topic.
func TestTopicIDAtTheRequestLayer(t *testing.T) {
	n := testutil.StartDev(t, t.TempDir())
	h := n.Handler()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	plain := record.BatchOptions{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
	createTopic(ctx, t, h, "again")
	if r := produce(ctx, t, h, &pb.ProduceRequest{Acks: -1, TimeoutMs: 5000, Partitions: []*pb.PartitionRecords{{Topic: "again", Records: batch(t, plain, "old-0", "old-1")}}}); r.ErrorCode != pb.ErrorCode_NONE {
		t.Fatalf("produce to the old topic: %v %s", r.ErrorCode, r.ErrorMessage)
	}
	oldID, newID := recreate(ctx, t, h, "again")
	for _, vals := range [][]string{{"new-0", "new-1"}, {"new-2"}} {
		if r := produce(ctx, t, h, &pb.ProduceRequest{Acks: -1, TimeoutMs: 5000, Partitions: []*pb.PartitionRecords{{Topic: "again", TopicId: newID, Records: batch(t, plain, vals...)}}}); r.ErrorCode != pb.ErrorCode_NONE {
			t.Fatalf("produce to the new topic by its id: %v %s", r.ErrorCode, r.ErrorMessage)
		}
	}

	// The old topic's consumer had read offsets 0 and 1.
	fetch := func(id string) *pb.FetchPartitionResponse {
		t.Helper()
		resp, err := h.Fetch(ctx, &pb.FetchRequest{ReplicaId: -1, MaxBytes: 1 << 20, Partitions: []*pb.FetchPartition{
			{Topic: "again", TopicId: id, FetchOffset: 2, CurrentLeaderEpoch: -1, PartitionMaxBytes: 1 << 20}}})
		if err != nil || len(resp.Partitions) != 1 {
			t.Fatalf("fetch: %v %v", resp, err)
		}
		return resp.Partitions[0]
	}
	if r := fetch(oldID); r.ErrorCode != pb.ErrorCode_INCONSISTENT_TOPIC_ID || len(r.Records) > 0 || r.TopicId != oldID {
		t.Fatalf("fetch by the old id at the old position: %v %q with %q (topic id %q); want INCONSISTENT_TOPIC_ID, no records", r.ErrorCode, r.ErrorMessage, fetchedValues(t, r), r.TopicId)
	}
	if r := fetch(newID); r.ErrorCode != pb.ErrorCode_NONE || len(fetchedValues(t, r)) != 1 {
		t.Fatalf("fetch by the new id: %v %q with %q; want new-2", r.ErrorCode, r.ErrorMessage, fetchedValues(t, r))
	}

	r := produce(ctx, t, h, &pb.ProduceRequest{Acks: -1, TimeoutMs: 5000, Partitions: []*pb.PartitionRecords{{Topic: "again", TopicId: oldID, Records: batch(t, plain, "late")}}})
	if r.ErrorCode != pb.ErrorCode_UNKNOWN_TOPIC_ID {
		t.Fatalf("produce by the old id: %v %s, want UNKNOWN_TOPIC_ID", r.ErrorCode, r.ErrorMessage)
	}
	if r := fetch(""); len(fetchedValues(t, r)) != 1 {
		t.Fatalf("the new topic holds %q past offset 2, want only new-2 (nothing of the refused produce)", fetchedValues(t, r))
	}
}

// TestMetadataByTopicID: Metadata asking for topics by id (Kafka's v12):
// each id answered once, a topic the principal may describe in full with
// its name, one it may not TOPIC_AUTHORIZATION_FAILED by its id without
// its name (ids are not secret, names are), an id no topic has
// UNKNOWN_TOPIC_ID; names given beside ids are not looked at, as in
// Kafka.
func TestMetadataByTopicID(t *testing.T) {
	e := newAuthzEnv(t)
	e.fc.grant(alice, authz.OpDescribe, authz.ResourceTopic, "a")
	img := e.raw.Repl.Image()
	idA, idB := img.Topic("a").ID, img.Topic("b").ID
	md, err := e.h.Metadata(as(e.ctx, alice), &pb.MetadataRequest{Topics: []string{"b"}, TopicIds: []string{idA, idB, "nope", idA}})
	if err != nil {
		t.Fatal(err)
	}
	if len(md.Topics) != 3 {
		t.Fatalf("answered %d topics for three ids (one twice): %v", len(md.Topics), md.Topics)
	}
	a, b, nope := md.Topics[0], md.Topics[1], md.Topics[2]
	if a.ErrorCode != pb.ErrorCode_NONE || a.Name != "a" || a.TopicId != idA || len(a.Partitions) != 1 {
		t.Fatalf("a by id: %v", a)
	}
	if b.ErrorCode != pb.ErrorCode_TOPIC_AUTHORIZATION_FAILED || b.Name != "" || b.TopicId != idB || len(b.Partitions) != 0 || strings.Contains(b.ErrorMessage, `"b"`) {
		t.Fatalf("b by id, not describable: %v; want TOPIC_AUTHORIZATION_FAILED by id, no name", b)
	}
	if nope.ErrorCode != pb.ErrorCode_UNKNOWN_TOPIC_ID || nope.Name != "" || nope.TopicId != "nope" {
		t.Fatalf("an id no topic has: %v", nope)
	}
	if !e.fc.denied("Metadata", authz.OpDescribe, authz.ResourceTopic, "b") {
		t.Fatal("b's refusal was not audited")
	}
}

// TestDeleteTopicsByStaleID: DeleteTopics v6 names a topic by id; the
// front door finds its name, and the controller deletes the name only
// while it still has that id. A topic deleted and created again under
// the name between the two (here: before the request, with the old id)
// is answered UNKNOWN_TOPIC_ID and left alone, not deleted in the old
// one's place.
func TestDeleteTopicsByStaleID(t *testing.T) {
	n := testutil.StartDev(t, t.TempDir())
	h := n.Handler()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	createTopic(ctx, t, h, "d")
	oldID, newID := recreate(ctx, t, h, "d")
	dt, err := h.DeleteTopics(ctx, &pb.DeleteTopicsRequest{Names: []string{"d"}, TopicIds: map[string]string{"d": oldID}, TimeoutMs: 30000})
	if err != nil || len(dt.Topics) != 1 || dt.Topics[0].ErrorCode != pb.ErrorCode_UNKNOWN_TOPIC_ID {
		t.Fatalf("delete d by its old id: %v %v, want UNKNOWN_TOPIC_ID", dt, err)
	}
	if tp := h.Repl.Image().Topic("d"); tp == nil || tp.ID != newID {
		t.Fatalf("the new topic d was deleted by the old one's id")
	}
	dt, err = h.DeleteTopics(ctx, &pb.DeleteTopicsRequest{Names: []string{"d"}, TopicIds: map[string]string{"d": newID}, TimeoutMs: 30000})
	if err != nil || dt.Topics[0].ErrorCode != pb.ErrorCode_NONE {
		t.Fatalf("delete d by its id: %v %v", dt, err)
	}
	wait.Eventually(t, 30*time.Second, "d deleted", func() bool { return h.Repl.Image().Topic("d") == nil })
}
