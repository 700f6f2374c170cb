package request

import (
	"context"

	"github.com/strand-io/strand/authz"
	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// UpdateFeatures changes finalized feature levels: Alter on the cluster is
// needed (else CLUSTER_AUTHORIZATION_FAILED, as Kafka's ControllerApis
// answers), then the active controller decides (controller/features.go).
// Once it has committed them, the answer waits (within the request's
// timeout) until this broker's image has the new levels, so an ApiVersions
// that follows on this broker reports them.
func (h *Handler) UpdateFeatures(ctx context.Context, req *pb.UpdateFeaturesRequest) (*pb.UpdateFeaturesResponse, error) {
	if err := h.authorizeCluster(ctx, "UpdateFeatures", authz.OpAlter); err != nil {
		code, msg := errs.Split(err)
		return &pb.UpdateFeaturesResponse{ErrorCode: code, ErrorMessage: msg}, nil
	}
	for _, u := range req.Updates {
		if err := checkString("feature name", u.Feature); err != nil {
			code, msg := errs.Split(err)
			return &pb.UpdateFeaturesResponse{ErrorCode: code, ErrorMessage: msg}, nil
		}
	}
	resp, err := toController(ctx, h, func(ctx context.Context, c pb.ControllerClient) (*pb.UpdateFeaturesResponse, error) {
		return c.UpdateFeatures(ctx, req)
	})
	if err != nil {
		code, msg := timedOutIfUnknown(errs.Split(err))
		return &pb.UpdateFeaturesResponse{ErrorCode: code, ErrorMessage: msg}, nil
	}
	if resp.ErrorCode == pb.ErrorCode_NONE && !req.ValidateOnly {
		want := map[string]int32{}
		for _, u := range req.Updates {
			want[u.Feature] = u.MaxVersionLevel
		}
		waitUntil(ctx, leadersWait(req.TimeoutMs), func() bool {
			img := h.Repl.Image()
			for name, level := range want {
				if img.Feature(name) != level {
					return false
				}
			}
			return true
		})
	}
	return resp, nil
}
