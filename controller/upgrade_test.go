package controller_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/strand-io/strand/clock"
	"github.com/strand-io/strand/controller"
	"github.com/strand-io/strand/metadata"
	mt "github.com/strand-io/strand/metadata/metadatatest"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// internalTopicRec is an internal topic's creation record with the configs
// given (what an older locator wrote).
func internalTopicRec(name string, cfg map[string]string) *pb.MetadataRecord {
	return &pb.MetadataRecord{Record: &pb.MetadataRecord_Topic{Topic: &pb.TopicRecord{Name: name, TopicId: "id-" + name, Configs: cfg, Internal: true}}}
}

// TestInternalTopicsSwitchToCompactOnUpgrade: a cluster whose internal
// topics were created before log compaction (cleanup.policy unset, or
// delete) ends with cleanup.policy=compact on both once a controller of
// this version becomes active after a restart, their other configs kept
// and user topics untouched; a later activation and a later restart
// propose nothing more.
func TestInternalTopicsSwitchToCompactOnUpgrade(t *testing.T) {
	dir := t.TempDir()
	addr := freeAddr(t)
	voters := []controller.Voter{{ID: 1, Addr: addr}}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	// The old cluster: topics as the old locator created them, no
	// controller of the new version ever active on this state.
	q := startLeader(t, quorumConfig(dir, addr, voters))
	old := map[string]string{"min.insync.replicas": "2", "segment.bytes": "104857600", "retention.ms": "-1"}
	if _, err := q.Propose(ctx,
		internalTopicRec(metadata.InternalTransactionTopic, old),
		mt.PartRec(metadata.InternalTransactionTopic, 0, []int32{1}, []int32{1}, 1, 0, 0),
		internalTopicRec(metadata.InternalOffsetsTopic, map[string]string{"cleanup.policy": "delete", "retention.ms": "-1"}),
		mt.PartRec(metadata.InternalOffsetsTopic, 0, []int32{1}, []int32{1}, 1, 0, 0),
		mt.TopicRec("user", map[string]string{"cleanup.policy": "delete"}),
	); err != nil {
		q.Close()
		t.Fatal(err)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}

	// Restarted with the new code: the controller's first activation
	// switches both internal topics.
	q = startLeader(t, quorumConfig(dir, addr, voters))
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	c := activeController(t, q, clk)
	img := q.FSM.Image()
	wantTxn := map[string]string{"min.insync.replicas": "2", "segment.bytes": "104857600", "retention.ms": "-1", "cleanup.policy": "compact"}
	if got := img.Topic(metadata.InternalTransactionTopic).Configs; !reflect.DeepEqual(got, wantTxn) {
		t.Errorf("%s configs after the upgrade = %v, want %v", metadata.InternalTransactionTopic, got, wantTxn)
	}
	wantOff := map[string]string{"retention.ms": "-1", "cleanup.policy": "compact"}
	if got := img.Topic(metadata.InternalOffsetsTopic).Configs; !reflect.DeepEqual(got, wantOff) {
		t.Errorf("%s configs after the upgrade = %v, want %v", metadata.InternalOffsetsTopic, got, wantOff)
	}
	if got := img.Topic("user").Configs["cleanup.policy"]; got != "delete" {
		t.Errorf("user topic's cleanup.policy = %q, want delete (only internal topics are switched)", got)
	}

	// Idempotent: another activation on the upgraded state writes nothing.
	offset := img.Offset
	c.Stop()
	activeController(t, q, clk)
	if got := q.FSM.Image().Offset; got != offset {
		t.Errorf("a second activation wrote metadata: offset %d → %d", offset, got)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	q = startLeader(t, quorumConfig(dir, addr, voters))
	defer q.Close()
	activeController(t, q, clk)
	img = q.FSM.Image()
	if got := img.Offset; got != offset {
		t.Errorf("activation after a restart wrote metadata: offset %d → %d", offset, got)
	}
	for _, name := range []string{metadata.InternalTransactionTopic, metadata.InternalOffsetsTopic} {
		if got := img.Topic(name).Configs["cleanup.policy"]; got != "compact" {
			t.Errorf("%s cleanup.policy after a restart = %q", name, got)
		}
	}
}

// TestInternalTopicUpgrades: which policies are switched.
func TestInternalTopicUpgrades(t *testing.T) {
	for _, c := range []struct {
		policy  string // "" is unset
		switch_ bool
	}{
		{"", true},
		{"delete", true},
		{"compact", false},
		{"compact,delete", false},
		{"delete, compact", false},
	} {
		cfg := map[string]string{}
		if c.policy != "" {
			cfg["cleanup.policy"] = c.policy
		}
		img := mt.Build(t, mt.Recs(internalTopicRec(metadata.InternalOffsetsTopic, cfg), mt.TopicRec("user", nil)))
		recs := controller.InternalTopicUpgrades(img)
		if got := len(recs) == 1; got != c.switch_ {
			t.Errorf("cleanup.policy %q: %d records, want a switch: %v", c.policy, len(recs), c.switch_)
			continue
		}
		if c.switch_ {
			cr := recs[0].GetConfig()
			if cr == nil || cr.ResourceName != metadata.InternalOffsetsTopic || cr.Name != "cleanup.policy" || cr.Value != "compact" || cr.Delete {
				t.Errorf("cleanup.policy %q: record %v", c.policy, recs[0])
			}
		}
	}
}
