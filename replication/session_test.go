package replication

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/strand-io/strand/broker/storage"
	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/metadata"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

func fp(topic string, part int32, off int64) *pb.FetchPartition {
	return &pb.FetchPartition{Topic: topic, Partition: part, FetchOffset: off, CurrentLeaderEpoch: 3}
}

func code(err error) pb.ErrorCode {
	var e *errs.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return pb.ErrorCode_NONE
}

// served is what the leader would fetch for a session: topic-partition@offset.
func served(s *fetchSession) map[storage.PartitionKey]int64 {
	out := map[storage.PartitionKey]int64{}
	for _, p := range s.partitions() {
		out[storage.PartitionKey{Topic: p.Topic, Partition: p.Partition}] = p.FetchOffset
	}
	return out
}

func quiet(topic string, part int32, hw int64) *pb.FetchPartitionResponse {
	return &pb.FetchPartitionResponse{Topic: topic, Partition: part, HighWatermark: hw, LastStableOffset: hw, LogStartOffset: 0, CurrentLeaderId: 1, CurrentLeaderEpoch: 3}
}

func names(r *pb.FetchResponse) []string {
	var out []string
	for _, p := range r.Partitions {
		out = append(out, storage.PartitionKey{Topic: p.Topic, Partition: p.Partition}.String())
	}
	return out
}

func TestFetchSessionLifecycle(t *testing.T) {
	c := newSessionCache(1000)

	// No session: nothing remembered.
	if s, _, err := beginT(c, &pb.FetchRequest{ReplicaId: 2, Partitions: []*pb.FetchPartition{fp("a", 0, 5)}}); s != nil || err != nil {
		t.Fatalf("sessionless fetch: session %v, err %v", s, err)
	}
	if c.len() != 0 {
		t.Fatalf("a sessionless fetch opened a session")
	}

	// Open: a full fetch; every partition is answered in full the first time.
	s, added, err := beginT(c, &pb.FetchRequest{ReplicaId: 2, SessionEpoch: 1, Partitions: []*pb.FetchPartition{fp("a", 0, 5), fp("b", 0, 0), fp("b", 1, 0)}})
	if err != nil || s == nil || s.id == 0 {
		t.Fatalf("open: session %v, err %v", s, err)
	}
	if len(added) != 3 {
		t.Fatalf("open: added %v", added)
	}
	resp := &pb.FetchResponse{Partitions: []*pb.FetchPartitionResponse{quiet("a", 0, 5), quiet("b", 0, 0), quiet("b", 1, 0)}}
	s.trim(resp, added)
	s.release()
	if len(resp.Partitions) != 3 || resp.SessionId != s.id {
		t.Fatalf("open answer: %v, session %d", names(resp), resp.SessionId)
	}
	id := s.id

	// Incremental: only a's position moved; the leader still serves all
	// three, and answers only what changed.
	s, added, err = beginT(c, &pb.FetchRequest{ReplicaId: 2, SessionId: id, SessionEpoch: 2, Partitions: []*pb.FetchPartition{fp("a", 0, 9)}})
	if err != nil || s == nil || s.id != id {
		t.Fatalf("epoch 2: session %v, err %v", s, err)
	}
	if len(added) != 0 {
		t.Fatalf("epoch 2 added %v", added)
	}
	if got := served(s); len(got) != 3 || got[storage.PartitionKey{Topic: "a"}] != 9 || got[storage.PartitionKey{Topic: "b", Partition: 1}] != 0 {
		t.Fatalf("epoch 2 serves %v", got)
	}
	withRecords := quiet("b", 0, 0)
	withRecords.Records = []byte{1}
	hwMoved := quiet("a", 0, 9)
	resp = &pb.FetchResponse{Partitions: []*pb.FetchPartitionResponse{hwMoved, withRecords, quiet("b", 1, 0)}}
	s.trim(resp, added)
	s.release()
	if got := names(resp); len(got) != 2 || got[0] != "a-0" || got[1] != "b-0" {
		t.Fatalf("epoch 2 answered %v; want a-0 (HW moved) and b-0 (records)", got)
	}

	// Nothing changed: an empty answer. An error is always answered.
	s, _, err = beginT(c, &pb.FetchRequest{ReplicaId: 2, SessionId: id, SessionEpoch: 3})
	if err != nil {
		t.Fatal(err)
	}
	failed := quiet("b", 1, 0)
	failed.ErrorCode = pb.ErrorCode_NOT_LEADER_OR_FOLLOWER
	resp = &pb.FetchResponse{Partitions: []*pb.FetchPartitionResponse{quiet("a", 0, 9), quiet("b", 0, 0), failed}}
	s.trim(resp, nil)
	s.release()
	if got := names(resp); len(got) != 1 || got[0] != "b-1" {
		t.Fatalf("epoch 3 answered %v; want only the error of b-1", got)
	}
	// A new leader epoch is news too.
	s, _, _ = beginT(c, &pb.FetchRequest{ReplicaId: 2, SessionId: id, SessionEpoch: 4})
	moved := quiet("a", 0, 9)
	moved.CurrentLeaderEpoch = 4
	resp = &pb.FetchResponse{Partitions: []*pb.FetchPartitionResponse{moved, quiet("b", 0, 0)}}
	s.trim(resp, nil)
	s.release()
	if got := names(resp); len(got) != 1 || got[0] != "a-0" {
		t.Fatalf("epoch 4 answered %v; want a-0 (leader epoch moved)", got)
	}

	// Forget one, add one: the added one is answered in full.
	s, added, err = beginT(c, &pb.FetchRequest{ReplicaId: 2, SessionId: id, SessionEpoch: 5,
		Forgotten: []*pb.TopicPartition{{Topic: "b", Partition: 1}}, Partitions: []*pb.FetchPartition{fp("c", 0, 0)}})
	if err != nil {
		t.Fatal(err)
	}
	if got := served(s); len(got) != 3 || got[storage.PartitionKey{Topic: "c"}] != 0 {
		t.Fatalf("epoch 5 serves %v", got)
	}
	if _, ok := served(s)[storage.PartitionKey{Topic: "b", Partition: 1}]; ok {
		t.Fatal("forgotten b-1 is still served")
	}
	still := quiet("a", 0, 9)
	still.CurrentLeaderEpoch = 4
	resp = &pb.FetchResponse{Partitions: []*pb.FetchPartitionResponse{still, quiet("b", 0, 0), quiet("c", 0, 0)}}
	s.trim(resp, added)
	s.release()
	if got := names(resp); len(got) != 1 || got[0] != "c-0" {
		t.Fatalf("epoch 5 answered %v; want the new c-0", got)
	}

	// A replayed or skipped epoch is refused, and the session stays usable.
	for _, e := range []int32{5, 7} {
		if _, _, err := beginT(c, &pb.FetchRequest{ReplicaId: 2, SessionId: id, SessionEpoch: e}); code(err) != pb.ErrorCode_INVALID_FETCH_SESSION_EPOCH {
			t.Fatalf("epoch %d: err %v; want INVALID_FETCH_SESSION_EPOCH", e, err)
		}
	}
	if s, _, err = beginT(c, &pb.FetchRequest{ReplicaId: 2, SessionId: id, SessionEpoch: 6}); err != nil {
		t.Fatalf("epoch 6 after refusals: %v", err)
	}
	s.release()

	// Another broker cannot use it; an unknown id is not found.
	if _, _, err := beginT(c, &pb.FetchRequest{ReplicaId: 3, SessionId: id, SessionEpoch: 7}); code(err) != pb.ErrorCode_FETCH_SESSION_ID_NOT_FOUND {
		t.Fatalf("other replica: err %v", err)
	}
	if _, _, err := beginT(c, &pb.FetchRequest{ReplicaId: 2, SessionId: id + 1, SessionEpoch: 2}); code(err) != pb.ErrorCode_FETCH_SESSION_ID_NOT_FOUND {
		t.Fatalf("unknown id: err %v", err)
	}

	// A follower's new session replaces its old one.
	s2, _, err := beginT(c, &pb.FetchRequest{ReplicaId: 2, SessionEpoch: 1, Partitions: []*pb.FetchPartition{fp("a", 0, 9)}})
	if err != nil || s2 == nil || s2.id == id {
		t.Fatalf("reopen: %v %v", s2, err)
	}
	s2.release()
	if c.len() != 1 {
		t.Fatalf("%d sessions after a reopen; want 1", c.len())
	}
	if _, _, err := beginT(c, &pb.FetchRequest{ReplicaId: 2, SessionId: id, SessionEpoch: 7}); code(err) != pb.ErrorCode_FETCH_SESSION_ID_NOT_FOUND {
		t.Fatalf("replaced session still answers: %v", err)
	}

	// Close.
	if s, _, err := beginT(c, &pb.FetchRequest{ReplicaId: 2, SessionId: s2.id, SessionEpoch: -1}); s != nil || err != nil {
		t.Fatalf("close: %v %v", s, err)
	}
	if c.len() != 0 {
		t.Fatal("close left the session open")
	}
}

func TestFetchSessionRefusals(t *testing.T) {
	c := newSessionCache(1000)
	if _, _, err := beginT(c, &pb.FetchRequest{ReplicaId: -1, SessionEpoch: 1}); code(err) != pb.ErrorCode_INVALID_REQUEST {
		t.Fatalf("consumer session: %v; want INVALID_REQUEST", err)
	}
	if _, _, err := beginT(c, &pb.FetchRequest{ReplicaId: 2, SessionEpoch: -5}); code(err) != pb.ErrorCode_INVALID_FETCH_SESSION_EPOCH {
		t.Fatalf("epoch -5: %v", err)
	}
	if e := nextSessionEpoch(math.MaxInt32); e != 2 {
		t.Fatalf("epoch after MaxInt32 = %d; want 2 (past the reserved -1, 0 and 1)", e)
	}
	off := newSessionCache(0)
	if s, _, err := beginT(off, &pb.FetchRequest{ReplicaId: 2, SessionEpoch: 1}); s != nil || err != nil || off.len() != 0 {
		t.Fatalf("slots 0: session %v, err %v; want a declined (full) fetch", s, err)
	}
}

// TestFetchSessionAnswersInFullAfterAnError: a follower takes nothing from
// an error answer, so the state that answer carried (here a new HW) must
// be sent again once the partition answers without error.
func TestFetchSessionAnswersInFullAfterAnError(t *testing.T) {
	c := newSessionCache(1000)
	s, added, err := beginT(c, &pb.FetchRequest{ReplicaId: 2, SessionEpoch: 1, Partitions: []*pb.FetchPartition{fp("a", 0, 5)}})
	if err != nil {
		t.Fatal(err)
	}
	s.trim(&pb.FetchResponse{Partitions: []*pb.FetchPartitionResponse{quiet("a", 0, 5)}}, added)
	s.release()

	s, _, _ = beginT(c, &pb.FetchRequest{ReplicaId: 2, SessionId: s.id, SessionEpoch: 2})
	failed := quiet("a", 0, 9) // the HW moved, but the read failed
	failed.ErrorCode = pb.ErrorCode_KAFKA_STORAGE_ERROR
	resp := &pb.FetchResponse{Partitions: []*pb.FetchPartitionResponse{failed}}
	s.trim(resp, nil)
	s.release()
	if len(resp.Partitions) != 1 {
		t.Fatal("an error answer was left out")
	}

	s, _, _ = beginT(c, &pb.FetchRequest{ReplicaId: 2, SessionId: s.id, SessionEpoch: 3})
	resp = &pb.FetchResponse{Partitions: []*pb.FetchPartitionResponse{quiet("a", 0, 9)}}
	s.trim(resp, nil)
	s.release()
	if got := names(resp); len(got) != 1 || got[0] != "a-0" {
		t.Fatalf("after an error the HW 9 was not sent again: answered %v", got)
	}
}

// sessionImage is a metadata image with brokers 1–9 (epoch 0) and topics
// a and b of 8 partitions each.
func sessionImage() *metadata.Image {
	img := metadata.EmptyImage()
	for id := int32(1); id < 10; id++ {
		img.Brokers[id] = &metadata.Broker{ID: id}
	}
	for _, name := range []string{"a", "b"} {
		img.Topics[name] = &metadata.Topic{Name: name, Partitions: make([]*metadata.Partition, 8)}
	}
	return img
}

func beginT(c *sessionCache, req *pb.FetchRequest) (*fetchSession, map[storage.PartitionKey]bool, error) {
	return c.begin(req, sessionImage())
}

// TestFetchSessionCacheBounds: a full cache evicts a session unused for
// 120 s and declines a new session otherwise; a session naming more
// partitions than the metadata holds (plus the slack) is declined, and
// one growing past that is closed; a broker gone from the metadata loses
// its session when the next one opens.
func TestFetchSessionCacheBounds(t *testing.T) {
	now := time.Unix(1000, 0)
	c := newSessionCache(2)
	c.now = func() time.Time { return now }
	open := func(replica int32, parts ...*pb.FetchPartition) *fetchSession {
		t.Helper()
		s, _, err := beginT(c, &pb.FetchRequest{ReplicaId: replica, SessionEpoch: 1, Partitions: parts})
		if err != nil {
			t.Fatalf("open for %d: %v", replica, err)
		}
		if s != nil {
			s.release()
		}
		return s
	}
	s2 := open(2, fp("a", 0, 0))
	s3 := open(3, fp("a", 0, 0))
	if s2 == nil || s3 == nil {
		t.Fatal("sessions declined with free slots")
	}
	if s := open(4, fp("a", 0, 0)); s != nil || c.len() != 2 {
		t.Fatalf("a third session in 2 slots, none stale: %v (%d sessions)", s, c.len())
	}
	// 3 keeps fetching; 2 goes quiet for longer than the eviction time.
	now = now.Add(sessionEvictAfter + time.Second)
	s, _, err := beginT(c, &pb.FetchRequest{ReplicaId: 3, SessionId: s3.id, SessionEpoch: 2})
	if err != nil || s == nil {
		t.Fatalf("incremental fetch of 3: %v %v", s, err)
	}
	s.release()
	if s := open(4, fp("a", 0, 0)); s == nil {
		t.Fatal("a new session did not evict the stale one")
	}
	if _, _, err := beginT(c, &pb.FetchRequest{ReplicaId: 2, SessionId: s2.id, SessionEpoch: 2}); code(err) != pb.ErrorCode_FETCH_SESSION_ID_NOT_FOUND {
		t.Fatalf("evicted session of 2: %v, want FETCH_SESSION_ID_NOT_FOUND", err)
	}

	// More partitions than exist: declined at open, closed when grown.
	max := maxSessionPartitions(sessionImage())
	var many []*pb.FetchPartition
	for i := range max + 1 {
		many = append(many, fp("made-up", int32(i), 0))
	}
	c2 := newSessionCache(1000)
	if s, _, err := beginT(c2, &pb.FetchRequest{ReplicaId: 2, SessionEpoch: 1, Partitions: many}); s != nil || err != nil || c2.len() != 0 {
		t.Fatalf("open with %d partitions (max %d): %v %v, want declined", len(many), max, s, err)
	}
	s, _, err = beginT(c2, &pb.FetchRequest{ReplicaId: 2, SessionEpoch: 1, Partitions: many[:10]})
	if err != nil || s == nil {
		t.Fatalf("open: %v %v", s, err)
	}
	s.release()
	if _, _, err := beginT(c2, &pb.FetchRequest{ReplicaId: 2, SessionId: s.id, SessionEpoch: 2, Partitions: many[10:]}); code(err) != pb.ErrorCode_FETCH_SESSION_ID_NOT_FOUND || c2.len() != 0 {
		t.Fatalf("growing past %d partitions: %v (%d sessions), want the session closed", max, err, c2.len())
	}
	if _, parts := c2.stats(); parts != 0 {
		t.Fatalf("%d partitions held after the session closed", parts)
	}

	// Broker 3 leaves the metadata: its session goes when 5 opens one.
	img := sessionImage()
	delete(img.Brokers, 3)
	s, _, err = c.begin(&pb.FetchRequest{ReplicaId: 5, SessionEpoch: 1}, img)
	if err != nil || s == nil {
		t.Fatalf("open for 5: %v %v", s, err)
	}
	s.release()
	if _, _, err := c.begin(&pb.FetchRequest{ReplicaId: 3, SessionId: s3.id, SessionEpoch: 3}, img); code(err) != pb.ErrorCode_FETCH_SESSION_ID_NOT_FOUND {
		t.Fatalf("session of unregistered broker 3: %v, want FETCH_SESSION_ID_NOT_FOUND", err)
	}
}
