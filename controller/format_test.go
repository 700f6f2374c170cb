package controller_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/strand-io/strand/clock"
	"github.com/strand-io/strand/controller"
	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/metadata"
	mt "github.com/strand-io/strand/metadata/metadatatest"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// TestStrandVersionKeepsOlderBinariesOut: a new cluster starts at this
// binary's strand.version and stamps its batches with it; a registration
// from a binary that predates the feature (no supported features named)
// is refused UNSUPPORTED_VERSION while the level is finalized, and
// accepted at level 0; finalizing the level is refused while such a broker
// is registered, naming it, and accepted once it runs a newer binary.
func TestStrandVersionKeepsOlderBinariesOut(t *testing.T) {
	addr := freeAddr(t)
	q := startLeader(t, quorumConfig(t.TempDir(), addr, []controller.Voter{{ID: 1, Addr: addr}}))
	t.Cleanup(func() { q.Close() })
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	c := activeController(t, q, clk)
	ctx := context.Background()
	sv := metadata.FeatureStrandVersion
	level := func() int32 { return c.Q.FSM.Image().Feature(sv) }
	if level() != metadata.StrandVersionMax {
		t.Fatalf("a new cluster's strand.version is %d, want %d", level(), metadata.StrandVersionMax)
	}
	legacy := func(id int32, inc string) error {
		_, err := c.RegisterBroker(ctx, &pb.RegisterBrokerRequest{NodeId: id, IncarnationId: inc, Address: "10.0.0.9:1", InterBrokerAddress: "10.0.0.9:2"})
		return err
	}
	err := legacy(9, "old")
	if errs.CodeOf(err) != pb.ErrorCode_UNSUPPORTED_VERSION || !strings.Contains(err.Error(), "strand.version") {
		t.Fatalf("an older binary's registration at strand.version %d: %v, want UNSUPPORTED_VERSION naming strand.version", level(), err)
	}
	if c.Q.FSM.Image().Brokers[9] != nil {
		t.Fatal("the refused broker was registered")
	}
	update := func(lvl int32, typ int32) *pb.UpdateFeaturesResponse {
		t.Helper()
		resp, err := c.UpdateFeatures(ctx, &pb.UpdateFeaturesRequest{Updates: []*pb.FeatureUpdate{{Feature: sv, MaxVersionLevel: lvl, UpgradeType: typ}}})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	if r := update(0, controller.UpgradeTypeSafeDowngrade); r.ErrorCode != pb.ErrorCode_NONE {
		t.Fatalf("downgrade to 0: %v %s", r.ErrorCode, r.ErrorMessage)
	}
	if err := legacy(9, "old"); err != nil {
		t.Fatalf("an older binary's registration at strand.version 0: %v", err)
	}
	r := update(metadata.StrandVersionMax, controller.UpgradeTypeUpgrade)
	if r.ErrorCode != pb.ErrorCode_INVALID_UPDATE_VERSION || !strings.Contains(r.ErrorMessage, "broker 9") || level() != 0 {
		t.Fatalf("finalizing with an older binary registered: %v %q (level %d), want INVALID_UPDATE_VERSION naming broker 9", r.ErrorCode, r.ErrorMessage, level())
	}
	// Broker 9 restarted on this binary (its old session lapsed): the
	// level may be finalized, and later batches carry it.
	clk.Advance(controller.DefaultConfig(1).SessionTimeout + time.Second)
	if _, code := register(c, 9, "new", "10.0.0.9:2"); code != pb.ErrorCode_NONE {
		t.Fatalf("broker 9 on this binary: %v", code)
	}
	if r := update(metadata.StrandVersionMax, controller.UpgradeTypeUpgrade); r.ErrorCode != pb.ErrorCode_NONE || level() != metadata.StrandVersionMax {
		t.Fatalf("finalizing once every broker supports it: %v %q (level %d)", r.ErrorCode, r.ErrorMessage, level())
	}
	from := c.Q.FSM.Image().Offset
	if _, code := register(c, 10, "new", "10.0.0.10:2"); code != pb.ErrorCode_NONE {
		t.Fatalf("broker 10: %v", code)
	}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	bs, err := c.Q.FSM.Since(sctx, from)
	if err != nil || len(bs) == 0 {
		t.Fatalf("batches after %d: %v %v", from, bs, err)
	}
	if got := bs[0].FormatVersion; got != metadata.StrandVersionMax {
		t.Fatalf("a batch proposed at strand.version %d is stamped %d", metadata.StrandVersionMax, got)
	}
}

// TestFSMStopsAtUnreadableMetadata: a batch stamped with a format above
// what this binary reads, or holding a record kind it does not know, is not
// applied in part: the FSM reports it (Unreadable) and refuses every later
// batch, so the image stays the last one it understood.
func TestFSMStopsAtUnreadableMetadata(t *testing.T) {
	newer := func(t *testing.T, index uint64) *raft.Log {
		data, err := proto.Marshal(&pb.MetadataBatch{Records: []*pb.MetadataRecord{mt.TopicRec("t", nil)}, FormatVersion: metadata.MetadataFormatMax + 1})
		if err != nil {
			t.Fatal(err)
		}
		return &raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: data}
	}
	unknownKind := func(t *testing.T, index uint64) *raft.Log {
		// A record whose only field is one this binary's schema lacks
		// (a record kind added later): field 2 of the batch, holding
		// field 999 of the record.
		var rec []byte
		rec = protowire.AppendTag(rec, 999, protowire.VarintType)
		rec = protowire.AppendVarint(rec, 1)
		var data []byte
		data = protowire.AppendTag(data, 2, protowire.BytesType)
		data = protowire.AppendBytes(data, rec)
		return &raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: data}
	}
	for name, bad := range map[string]func(*testing.T, uint64) *raft.Log{"newer format": newer, "unknown record kind": unknownKind} {
		t.Run(name, func(t *testing.T) {
			f := controller.NewFSM()
			if res := fsmApply(t, f, raftLog(t, 1, mt.TopicRec("a", nil))); res.Err != nil {
				t.Fatal(res.Err)
			}
			select {
			case <-f.Unreadable():
				t.Fatal("Unreadable before any unreadable batch")
			default:
			}
			res := fsmApply(t, f, bad(t, 2))
			var fe *metadata.FormatError
			if !errors.As(res.Err, &fe) {
				t.Fatalf("unreadable batch: %v, want a *metadata.FormatError", res.Err)
			}
			select {
			case <-f.Unreadable():
			default:
				t.Fatal("Unreadable not closed")
			}
			if res := fsmApply(t, f, raftLog(t, 3, mt.TopicRec("b", nil))); res.Err == nil {
				t.Fatal("a batch after the unreadable one was applied")
			}
			img := f.Image()
			if img.Offset != 1 || img.Topic("a") == nil || img.Topic("t") != nil || img.Topic("b") != nil {
				t.Fatalf("image after the unreadable batch: offset %d, topics %v", img.Offset, img.TopicNames())
			}
			if !strings.Contains(f.UnreadableErr().Error(), "run a newer Strand binary") {
				t.Fatalf("the error does not say what to do: %v", f.UnreadableErr())
			}
		})
	}
}

// TestHeartbeatRecordsFeaturesAnOlderControllerDropped: a registration
// without features (written by a controller of an older binary during a
// rolling upgrade) gets the broker's features from its next heartbeat,
// under the same epoch and fencing, and the level can then be finalized.
func TestHeartbeatRecordsFeaturesAnOlderControllerDropped(t *testing.T) {
	addr := freeAddr(t)
	q := startLeader(t, quorumConfig(t.TempDir(), addr, []controller.Voter{{ID: 1, Addr: addr}}))
	t.Cleanup(func() { q.Close() })
	ctx := context.Background()
	// The older controller's registration: no features, and the cluster
	// made before strand.version existed.
	if _, err := q.Propose(ctx, &pb.MetadataRecord{Record: &pb.MetadataRecord_Cluster{Cluster: &pb.ClusterRecord{ClusterId: "old"}}},
		&pb.MetadataRecord{Record: &pb.MetadataRecord_RegisterBroker{RegisterBroker: &pb.RegisterBrokerRecord{
			NodeId: 2, IncarnationId: "i", Address: "10.0.0.2:1", InterBrokerAddress: "10.0.0.2:2", Fenced: true}}}); err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	c := activeController(t, q, clk)
	if lvl := q.FSM.Image().Feature(metadata.FeatureStrandVersion); lvl != 0 {
		t.Fatalf("an upgraded cluster's strand.version is %d, want 0 until finalized", lvl)
	}
	before := *q.FSM.Image().Brokers[2]
	if before.Features != nil {
		t.Fatal("the old registration has features")
	}
	up := &pb.UpdateFeaturesRequest{Updates: []*pb.FeatureUpdate{{Feature: metadata.FeatureStrandVersion, MaxVersionLevel: 1, UpgradeType: controller.UpgradeTypeUpgrade}}}
	if r, err := c.UpdateFeatures(ctx, up); err != nil || r.ErrorCode != pb.ErrorCode_INVALID_UPDATE_VERSION {
		t.Fatalf("finalize before the heartbeat: %v %v, want INVALID_UPDATE_VERSION", r, err)
	}
	if _, err := c.BrokerHeartbeat(ctx, &pb.BrokerHeartbeatRequest{NodeId: 2, BrokerEpoch: before.Epoch, WantFence: true, SupportedFeatures: metadata.SupportedRanges()}); err != nil {
		t.Fatal(err)
	}
	after := q.FSM.Image().Brokers[2]
	if after.Epoch != before.Epoch || after.Fenced != before.Fenced || after.IncarnationID != before.IncarnationID {
		t.Fatalf("the features' record changed the broker: %+v, was %+v", after, before)
	}
	if r := after.Supports(metadata.FeatureStrandVersion); r.Max != metadata.StrandVersionMax {
		t.Fatalf("strand.version supported up to %d after the heartbeat, want %d", r.Max, metadata.StrandVersionMax)
	}
	if r, err := c.UpdateFeatures(ctx, up); err != nil || r.ErrorCode != pb.ErrorCode_NONE {
		t.Fatalf("finalize after the heartbeat: %v %v", r, err)
	}
}
