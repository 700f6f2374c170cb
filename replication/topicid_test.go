package replication

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strand-io/strand/broker"
	"github.com/strand-io/strand/broker/storage"
	"github.com/strand-io/strand/clock"
	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/metadata"
	mt "github.com/strand-io/strand/metadata/metadatatest"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
)

func topicWithID(name, id string) *pb.MetadataRecord {
	return &pb.MetadataRecord{Record: &pb.MetadataRecord_Topic{Topic: &pb.TopicRecord{Name: name, TopicId: id}}}
}

func removeTopic(name, id string) *pb.MetadataRecord {
	return &pb.MetadataRecord{Record: &pb.MetadataRecord_RemoveTopic{RemoveTopic: &pb.RemoveTopicRecord{Name: name, TopicId: id}}}
}

// soloManager is a one-broker replication manager over its own data
// directory (dir "" makes one).
func soloManager(t *testing.T, dir string) (*Manager, *broker.Manager, string) {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	bc := broker.DefaultConfig(dir)
	bc.Log.Files = storage.NewFileCache(16)
	parts, err := broker.Open(bc, clock.Real)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = parts.Close() })
	m := New(DefaultConfig(1), parts, nil, nil, func() int64 { return 1 }, clock.Real)
	t.Cleanup(m.cancel)
	return m, parts, dir
}

func appendValue(t *testing.T, m *Manager, topic, topicID, value string) *Append {
	t.Helper()
	b, err := record.Build(record.BatchOptions{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, []record.Record{{Value: []byte(value)}})
	if err != nil {
		t.Fatal(err)
	}
	return m.AppendLeaderTopic(topic, topicID, 0, b, 1)
}

func fetchValues(t *testing.T, m *Manager, fp *pb.FetchPartition) (pb.ErrorCode, []string) {
	t.Helper()
	resp := m.Fetch(context.Background(), &pb.FetchRequest{ReplicaId: -1, MaxBytes: 1 << 20, Partitions: []*pb.FetchPartition{fp}})
	if len(resp.Partitions) != 1 {
		t.Fatalf("fetch answered %d partitions", len(resp.Partitions))
	}
	r := resp.Partitions[0]
	if r.TopicId != fp.TopicId {
		t.Fatalf("fetch answered topic id %q for %q", r.TopicId, fp.TopicId)
	}
	var vals []string
	for it := record.NewIter(r.Records); it.Next(); {
		_, recs, err := record.Decode(it.Batch())
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range recs {
			vals = append(vals, string(rec.Value))
		}
	}
	return r.ErrorCode, vals
}

// TestTopicIDCheckedWhereThePartitionIsRead: a topic deleted and created
// again under its name between the moment a client (or a front door)
// looked its id up and the read: the read names the old id and finds the
// new topic's log under the name. It is refused INCONSISTENT_TOPIC_ID
// (Kafka's fetch) and an append UNKNOWN_TOPIC_ID (Kafka's produce), not
// served the new topic's records or written into the new topic.
func TestTopicIDCheckedWhereThePartitionIsRead(t *testing.T) {
	m, _, _ := soloManager(t, "")
	img := mt.Build(t, mt.Recs(mt.ClusterRec("c1"), mt.RegisterRec(1, 1, false)),
		mt.Recs(topicWithID("t", "old"), mt.PartRec("t", 0, []int32{1}, []int32{1}, 1, 0, 0)))
	m.Apply(img, metadata.SnapshotDelta(metadata.EmptyImage(), img))
	if a := appendValue(t, m, "t", "old", "old-0"); a.Err != nil {
		t.Fatal(a.Err)
	}
	next, d, err := metadata.Apply(img, mt.BatchAt(3, removeTopic("t", "old"), topicWithID("t", "new"), mt.PartRec("t", 0, []int32{1}, []int32{1}, 1, 0, 0)))
	if err != nil {
		t.Fatal(err)
	}
	m.Apply(next, d)
	for i, v := range []string{"new-0", "new-1"} {
		if a := appendValue(t, m, "t", "new", v); a.Err != nil || a.Result.FirstOffset != int64(i) {
			t.Fatalf("append %s to the new topic: offset %d, %v", v, a.Result.FirstOffset, a.Err)
		}
	}

	// The old topic's consumer stood at offset 1.
	code, vals := fetchValues(t, m, &pb.FetchPartition{Topic: "t", TopicId: "old", Partition: 0, FetchOffset: 1, CurrentLeaderEpoch: -1})
	if code != pb.ErrorCode_INCONSISTENT_TOPIC_ID || len(vals) != 0 {
		t.Fatalf("fetch by the old id: %v with %q, want INCONSISTENT_TOPIC_ID and no records", code, vals)
	}
	code, vals = fetchValues(t, m, &pb.FetchPartition{Topic: "t", TopicId: "new", Partition: 0, FetchOffset: 1, CurrentLeaderEpoch: -1})
	if code != pb.ErrorCode_NONE || len(vals) != 1 || vals[0] != "new-1" {
		t.Fatalf("fetch by the new id: %v with %q, want new-1", code, vals)
	}
	// No id: by name, as a client below Fetch v13 reads.
	if code, vals = fetchValues(t, m, &pb.FetchPartition{Topic: "t", Partition: 0, FetchOffset: 0, CurrentLeaderEpoch: -1}); code != pb.ErrorCode_NONE || len(vals) != 2 {
		t.Fatalf("fetch by name: %v with %q", code, vals)
	}

	end := m.Partitions().Get(storage.PartitionKey{Topic: "t", Partition: 0}).Log.LogEndOffset()
	if a := appendValue(t, m, "t", "old", "late"); a.Err == nil || errs.CodeOf(a.Err) != pb.ErrorCode_UNKNOWN_TOPIC_ID {
		t.Fatalf("append by the old id: %v, want UNKNOWN_TOPIC_ID", a.Err)
	}
	if got := m.Partitions().Get(storage.PartitionKey{Topic: "t", Partition: 0}).Log.LogEndOffset(); got != end {
		t.Fatalf("the refused append moved the new topic's log end from %d to %d", end, got)
	}
}

// strayDirs lists the stray logs set aside in dir.
func strayDirs(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && storage.IsAsideDirName(e.Name(), storage.StrayDirSuffix) {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestApplySetsAsideLogOfTopicRecreatedWhileAway: a broker that was down
// while its topic was deleted and created again under the same name
// finds its old log on disk; the new topic's metadata (a new id) must not
// adopt it as the new topic's replica. The log's partition.metadata says
// which topic it was; the old log is set aside as stray (renamed
// <topic>-<partition>.<id>-stray, its records kept for the operator, as
// Kafka 3.7+ does) and the new one starts empty. A restart loads the new
// topic's log and not the stray one, which stays.
func TestApplySetsAsideLogOfTopicRecreatedWhileAway(t *testing.T) {
	m, parts, dir := soloManager(t, "")
	img := mt.Build(t, mt.Recs(mt.ClusterRec("c1"), mt.RegisterRec(1, 1, false)),
		mt.Recs(topicWithID("t", "old"), mt.PartRec("t", 0, []int32{1}, []int32{1}, 1, 0, 0)))
	m.Apply(img, metadata.SnapshotDelta(metadata.EmptyImage(), img))
	for _, v := range []string{"old-0", "old-1", "old-2"} {
		if a := appendValue(t, m, "t", "", v); a.Err != nil {
			t.Fatal(a.Err)
		}
	}
	m.cancel()
	if err := parts.Close(); err != nil {
		t.Fatal(err)
	}

	// Back, with metadata where t is another topic.
	m2, parts2, _ := soloManager(t, dir)
	key := storage.PartitionKey{Topic: "t", Partition: 0}
	if id := parts2.Get(key).TopicID(); id != "old" {
		t.Fatalf("the reopened log says topic id %q, want old (from partition.metadata)", id)
	}
	now := mt.Build(t, mt.Recs(mt.ClusterRec("c1"), mt.RegisterRec(1, 1, false)),
		mt.Recs(topicWithID("t", "new"), mt.PartRec("t", 0, []int32{1}, []int32{1}, 1, 0, 0)))
	m2.Apply(now, metadata.SnapshotDelta(metadata.EmptyImage(), now))
	p := parts2.Get(key)
	if p == nil {
		t.Fatal("no replica of the new topic")
	}
	if end, id := p.Log.LogEndOffset(), p.TopicID(); end != 0 || id != "new" {
		t.Fatalf("the new topic's replica: log end %d, topic id %q; want an empty log of topic new", end, id)
	}
	if code, vals := fetchValues(t, m2, &pb.FetchPartition{Topic: "t", Partition: 0, CurrentLeaderEpoch: -1}); code != pb.ErrorCode_NONE || len(vals) != 0 {
		t.Fatalf("reading the new topic: %v with %q, want nothing of the old topic", code, vals)
	}
	if got, err := storage.ReadPartitionMetadata(nil, p.Log.Dir()); err != nil || got != "new" {
		t.Fatalf("partition.metadata now says %q (%v), want new", got, err)
	}
	stray := strayDirs(t, dir)
	if len(stray) != 1 || !strings.HasPrefix(stray[0], "t-0.") {
		t.Fatalf("stray logs %q, want one t-0.<id>-stray", stray)
	}
	if id, err := storage.ReadPartitionMetadata(nil, filepath.Join(dir, stray[0])); err != nil || id != "old" {
		t.Fatalf("the stray log's partition.metadata: %q (%v), want old", id, err)
	}
	if appendValue(t, m2, "t", "new", "new-0").Err != nil {
		t.Fatal("append to the new topic")
	}
	m2.cancel()
	if err := parts2.Close(); err != nil {
		t.Fatal(err)
	}

	_, parts3, _ := soloManager(t, dir)
	all := parts3.All()
	if len(all) != 1 || all[0].Key != key || all[0].TopicID() != "new" || all[0].Log.LogEndOffset() != 1 {
		t.Fatalf("after a restart: %d partitions loaded, want the new topic's t-0 alone", len(all))
	}
	if got := strayDirs(t, dir); len(got) != 1 || got[0] != stray[0] {
		t.Fatalf("the stray log after a restart: %q, want %q kept", got, stray)
	}
}

// TestSnapshotSetsAsideStrayButDeletesMovedReplica: a snapshot that no
// longer places a partition here deletes its log when the previous image
// placed it here (the replica was moved away, as a delta would), but sets
// aside as stray a log found on disk at start that the cluster does not
// place here (its topic unknown), as Kafka's startup does.
func TestSnapshotSetsAsideStrayButDeletesMovedReplica(t *testing.T) {
	m, parts, dir := soloManager(t, "")
	if _, err := parts.GetOrCreateTopic(storage.PartitionKey{Topic: "gone", Partition: 0}, "gid", nil); err != nil {
		t.Fatal(err)
	}
	img := mt.Build(t, mt.Recs(mt.ClusterRec("c1"), mt.RegisterRec(1, 1, false), mt.RegisterRec(2, 1, false)),
		mt.Recs(topicWithID("t", "tid"), mt.PartRec("t", 0, []int32{1}, []int32{1}, 1, 0, 0)))
	m.Apply(img, metadata.SnapshotDelta(metadata.EmptyImage(), img))
	if parts.Get(storage.PartitionKey{Topic: "gone", Partition: 0}) != nil {
		t.Fatal("the log of a topic the cluster does not know is still served")
	}
	if got := strayDirs(t, dir); len(got) != 1 || !strings.HasPrefix(got[0], "gone-0.") {
		t.Fatalf("stray logs %q, want gone-0.<id>-stray", got)
	}

	moved := mt.Build(t, mt.Recs(mt.ClusterRec("c1"), mt.RegisterRec(1, 1, false), mt.RegisterRec(2, 1, false)),
		mt.Recs(topicWithID("t", "tid"), mt.PartRec("t", 0, []int32{2}, []int32{2}, 2, 0, 0)))
	m.Apply(moved, metadata.SnapshotDelta(img, moved))
	if parts.Get(storage.PartitionKey{Topic: "t", Partition: 0}) != nil {
		t.Fatal("the moved replica is still served")
	}
	if got := strayDirs(t, dir); len(got) != 1 {
		t.Fatalf("stray logs %q: the moved replica was set aside, not deleted", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "t-0")); !os.IsNotExist(err) {
		t.Fatalf("the moved replica's directory: %v, want it deleted", err)
	}
}

// TestApplyRecordsTopicIDOfOldLog: a log created before topic ids were
// recorded (no partition.metadata) takes its topic's id from metadata and
// keeps its records.
func TestApplyRecordsTopicIDOfOldLog(t *testing.T) {
	m, parts, _ := soloManager(t, "")
	key := storage.PartitionKey{Topic: "t", Partition: 0}
	p, err := parts.GetOrCreate(key, nil)
	if err != nil {
		t.Fatal(err)
	}
	img := mt.Build(t, mt.Recs(mt.ClusterRec("c1"), mt.RegisterRec(1, 1, false)),
		mt.Recs(topicWithID("t", "tid"), mt.PartRec("t", 0, []int32{1}, []int32{1}, 1, 0, 0)))
	m.Apply(img, metadata.SnapshotDelta(metadata.EmptyImage(), img))
	if a := appendValue(t, m, "t", "tid", "v"); a.Err != nil {
		t.Fatal(a.Err)
	}
	if got := parts.Get(key); got != p || got.TopicID() != "tid" {
		t.Fatalf("the old log was replaced, or has topic id %q", got.TopicID())
	}
	if id, err := storage.ReadPartitionMetadata(nil, p.Log.Dir()); err != nil || id != "tid" {
		t.Fatalf("partition.metadata says %q (%v), want tid", id, err)
	}
}
