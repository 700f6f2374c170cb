package controller_test

import (
	"context"
	"testing"
	"time"

	"github.com/strand-io/strand/clock"
	"github.com/strand-io/strand/controller"
	"github.com/strand-io/strand/metadata"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/testkit/wait"
)

// UpdateFeatures by Kafka's FeatureControlManager rules: upgrades and
// (safe or unsafe) downgrades of transaction.version within the supported
// levels, validate_only changing nothing, and INVALID_UPDATE_VERSION for a
// downgrade asked as an upgrade, an upgrade asked as a downgrade, a level
// outside the supported range or below 0, an unknown upgrade type or an
// unknown feature; one bad update in a request leaves the others undone.
func TestUpdateFeatures(t *testing.T) {
	c := topicController(t, 1, 1, nil)
	tv := metadata.FeatureTransactionVersion
	level := func() int32 { return c.Q.FSM.Image().Feature(tv) }
	if level() != metadata.TransactionVersionDefault {
		t.Fatalf("bootstrap transaction.version %d", level())
	}
	const up, safe, unsafe = controller.UpgradeTypeUpgrade, controller.UpgradeTypeSafeDowngrade, controller.UpgradeTypeUnsafeDowngrade
	for _, tc := range []struct {
		name     string
		updates  []*pb.FeatureUpdate
		validate bool
		code     pb.ErrorCode
		after    int32
	}{
		{"downgrade as an upgrade", []*pb.FeatureUpdate{{Feature: tv, MaxVersionLevel: 1, UpgradeType: up}}, false, pb.ErrorCode_INVALID_UPDATE_VERSION, 2},
		{"validate only", []*pb.FeatureUpdate{{Feature: tv, MaxVersionLevel: 1, UpgradeType: safe}}, true, pb.ErrorCode_NONE, 2},
		{"safe downgrade", []*pb.FeatureUpdate{{Feature: tv, MaxVersionLevel: 1, UpgradeType: safe}}, false, pb.ErrorCode_NONE, 1},
		{"upgrade as a downgrade", []*pb.FeatureUpdate{{Feature: tv, MaxVersionLevel: 2, UpgradeType: unsafe}}, false, pb.ErrorCode_INVALID_UPDATE_VERSION, 1},
		{"beyond the supported", []*pb.FeatureUpdate{{Feature: tv, MaxVersionLevel: 3, UpgradeType: up}}, false, pb.ErrorCode_INVALID_UPDATE_VERSION, 1},
		{"below 0", []*pb.FeatureUpdate{{Feature: tv, MaxVersionLevel: -1, UpgradeType: unsafe}}, false, pb.ErrorCode_INVALID_UPDATE_VERSION, 1},
		{"unknown type", []*pb.FeatureUpdate{{Feature: tv, MaxVersionLevel: 2, UpgradeType: 0}}, false, pb.ErrorCode_INVALID_UPDATE_VERSION, 1},
		{"unknown feature", []*pb.FeatureUpdate{{Feature: "no.such.version", MaxVersionLevel: 1, UpgradeType: up}}, false, pb.ErrorCode_INVALID_UPDATE_VERSION, 1},
		{"unknown feature disabled", []*pb.FeatureUpdate{{Feature: "no.such.version", MaxVersionLevel: 0, UpgradeType: safe}}, false, pb.ErrorCode_NONE, 1},
		{"one bad of two", []*pb.FeatureUpdate{{Feature: tv, MaxVersionLevel: 2, UpgradeType: up}, {Feature: "no.such.version", MaxVersionLevel: 3, UpgradeType: up}}, false, pb.ErrorCode_INVALID_UPDATE_VERSION, 1},
		{"unsafe downgrade to disabled", []*pb.FeatureUpdate{{Feature: tv, MaxVersionLevel: 0, UpgradeType: unsafe}}, false, pb.ErrorCode_NONE, 0},
		{"upgrade", []*pb.FeatureUpdate{{Feature: tv, MaxVersionLevel: 2, UpgradeType: up}}, false, pb.ErrorCode_NONE, 2},
		{"unchanged", []*pb.FeatureUpdate{{Feature: tv, MaxVersionLevel: 2, UpgradeType: up}}, false, pb.ErrorCode_NONE, 2},
	} {
		resp, err := c.UpdateFeatures(context.Background(), &pb.UpdateFeaturesRequest{Updates: tc.updates, ValidateOnly: tc.validate})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if resp.ErrorCode != tc.code || level() != tc.after {
			t.Errorf("%s: %v %q, transaction.version %d; want %v, %d", tc.name, resp.ErrorCode, resp.ErrorMessage, level(), tc.code, tc.after)
		}
	}
	// A feature disabled stays so when another controller becomes active
	// (its bootstrap finalizes transaction.version only where it was
	// never set).
	if resp, err := c.UpdateFeatures(context.Background(), &pb.UpdateFeaturesRequest{Updates: []*pb.FeatureUpdate{{Feature: tv, MaxVersionLevel: 0, UpgradeType: safe}}}); err != nil || resp.ErrorCode != pb.ErrorCode_NONE {
		t.Fatalf("disable: %v %v", resp, err)
	}
	c.Stop()
	clk := clock.NewFake(time.Unix(1_800_000_000, 0))
	next := controller.New(controller.DefaultConfig(1), c.Q, clk)
	next.Start()
	defer next.Stop()
	wait.Eventually(t, 10*time.Second, "the next controller to become active", func() bool {
		if next.IsActive() {
			return true
		}
		clk.Advance(250 * time.Millisecond)
		return false
	})
	if level() != 0 {
		t.Fatalf("transaction.version %d after a new controller's bootstrap, want 0 (disabled)", level())
	}
}
