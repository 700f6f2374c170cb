package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strand-io/strand/controller"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// UpdateFeatures 0-2 (Kafka 4.0's range): the request layer's answer on
// the wire. Version 0's allow_downgrade is a safe downgrade, as Kafka reads
// it; from version 1 the upgrade type is given. As Kafka's controller
// answers: a refusal is the top-level error with no result; a success has
// one NONE result per feature up to version 1 and none from version 2.
// ApiVersions reports the new finalized levels and epoch afterwards.
func init() {
	register(kmsg.UpdateFeatures, 0, 2, handleUpdateFeatures)
}

func handleUpdateFeatures(ctx context.Context, c *Conn, r kmsg.Request) (kmsg.Response, error) {
	req := r.(*kmsg.UpdateFeaturesRequest)
	resp := kmsg.NewPtrUpdateFeaturesResponse()
	preq := &pb.UpdateFeaturesRequest{TimeoutMs: req.TimeoutMillis, ValidateOnly: req.Version >= 1 && req.ValidateOnly}
	for _, u := range req.FeatureUpdates {
		typ := int32(u.UpgradeType)
		if req.Version == 0 {
			typ = controller.UpgradeTypeUpgrade
			if u.AllowDowngrade {
				typ = controller.UpgradeTypeSafeDowngrade
			}
		}
		preq.Updates = append(preq.Updates, &pb.FeatureUpdate{Feature: u.Feature, MaxVersionLevel: int32(u.MaxVersionLevel), UpgradeType: typ})
	}
	presp, err := c.H.UpdateFeatures(ctx, preq)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = splitCode(err)
		return resp, nil
	}
	resp.ErrorCode, resp.ErrorMessage = code(presp.ErrorCode), errMsg(presp.ErrorMessage)
	if presp.ErrorCode == pb.ErrorCode_NONE && req.Version <= 1 {
		for _, u := range req.FeatureUpdates {
			rr := kmsg.NewUpdateFeaturesResponseResult()
			rr.Feature = u.Feature
			resp.Results = append(resp.Results, rr)
		}
	}
	return resp, nil
}
