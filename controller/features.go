package controller

import (
	"context"
	"fmt"

	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/metadata"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// Kafka's upgrade types (FeatureUpdate.UpgradeType).
const (
	UpgradeTypeUpgrade         = 1
	UpgradeTypeSafeDowngrade   = 2
	UpgradeTypeUnsafeDowngrade = 3
)

// UpdateFeatures changes finalized feature levels by Kafka's
// FeatureControlManager rules: each update is checked against the level
// in force (a feature never finalized is at 0) and the levels this
// version supports (metadata.SupportedFeatures). A level below 0 or
// outside the supported range, an unknown upgrade type, a lower level
// asked as an upgrade, or a higher one asked as a downgrade is
// INVALID_UPDATE_VERSION, and then no update of the request is made. Safe
// and unsafe downgrades are the same for the features Strand has (only
// Kafka's metadata.version tells them apart). The updates are committed
// in one batch, or checked only (validate_only); a commit that fails other
// than by losing the controllership is FEATURE_UPDATE_FAILED. A feature
// named twice takes its last update, as Kafka's controller reads the
// request into a map.
func (c *Controller) UpdateFeatures(ctx context.Context, req *pb.UpdateFeaturesRequest) (*pb.UpdateFeaturesResponse, error) {
	if err := c.lockActive(); err != nil {
		return nil, err
	}
	defer c.mu.Unlock()
	img := c.Q.FSM.Image()
	last := map[string]*pb.FeatureUpdate{}
	var order []string
	for _, u := range req.Updates {
		if _, ok := last[u.Feature]; !ok {
			order = append(order, u.Feature)
		}
		last[u.Feature] = u
	}
	var recs []*pb.MetadataRecord
	for _, name := range order {
		u := last[name]
		rec, err := featureRecord(img, u)
		if err != nil {
			code, msg := errs.Split(err)
			return &pb.UpdateFeaturesResponse{ErrorCode: code, ErrorMessage: "no feature was updated, because of this one: " + msg}, nil
		}
		if rec != nil {
			recs = append(recs, rec)
		}
	}
	if req.ValidateOnly || len(recs) == 0 {
		return &pb.UpdateFeaturesResponse{}, nil
	}
	if _, err := c.proposeLocked(ctx, recs...); err != nil {
		if errs.CodeOf(err) == pb.ErrorCode_NOT_CONTROLLER {
			return nil, err
		}
		return &pb.UpdateFeaturesResponse{ErrorCode: pb.ErrorCode_FEATURE_UPDATE_FAILED, ErrorMessage: fmt.Sprintf("the feature updates could not be committed: %v", err)}, nil
	}
	for _, r := range recs {
		fl := r.GetFeatureLevel()
		c.lg.Info("finalized feature level", "feature", fl.Name, "from", img.Feature(fl.Name), "to", fl.Level)
	}
	return &pb.UpdateFeaturesResponse{}, nil
}

// featureRecord checks one update against img and returns its record
// (nil when nothing changes).
func featureRecord(img *metadata.Image, u *pb.FeatureUpdate) (*pb.MetadataRecord, error) {
	bad := func(format string, a ...any) error {
		return errs.New(pb.ErrorCode_INVALID_UPDATE_VERSION, "feature %s at level %d: %s", u.Feature, u.MaxVersionLevel, fmt.Sprintf(format, a...))
	}
	if u.UpgradeType < UpgradeTypeUpgrade || u.UpgradeType > UpgradeTypeUnsafeDowngrade {
		return nil, bad("upgrade type %d is not one the controller knows (1 upgrade, 2 safe downgrade, 3 unsafe downgrade)", u.UpgradeType)
	}
	cur, set := img.Features[u.Feature]
	if u.MaxVersionLevel < 0 {
		return nil, bad("a feature level cannot be below 0")
	}
	r, known := metadata.SupportedFeatures[u.Feature]
	switch {
	case !known && u.MaxVersionLevel != 0:
		return nil, bad("this cluster does not support the feature")
	case known && (u.MaxVersionLevel < r.Min || u.MaxVersionLevel > r.Max):
		return nil, bad("this cluster supports levels %d to %d", r.Min, r.Max)
	}
	// Every registered broker, fenced or not, must support the level, as
	// Kafka's controller checks: a broker that does not is one whose
	// binary cannot read what the level lets the cluster write.
	if known && u.MaxVersionLevel != 0 {
		for _, b := range img.SortedBrokers() {
			if br := b.Supports(u.Feature); u.MaxVersionLevel < br.Min || u.MaxVersionLevel > br.Max {
				return nil, bad("broker %d does not support it (its binary supports levels %d to %d): upgrade it first", b.ID, br.Min, br.Max)
			}
		}
	}
	switch {
	case u.MaxVersionLevel < cur && u.UpgradeType == UpgradeTypeUpgrade:
		return nil, bad("it is at %d: lowering it needs the safe or unsafe downgrade type", cur)
	case u.MaxVersionLevel > cur && u.UpgradeType != UpgradeTypeUpgrade:
		return nil, bad("it is at %d: a downgrade cannot raise it", cur)
	}
	if !known || (set && u.MaxVersionLevel == cur) {
		// An unknown feature disabled, or a level unchanged: nothing to
		// write (Kafka removes the first and rewrites the second).
		return nil, nil
	}
	return &pb.MetadataRecord{Record: &pb.MetadataRecord_FeatureLevel{FeatureLevel: &pb.FeatureLevelRecord{Name: u.Feature, Level: u.MaxVersionLevel}}}, nil
}
