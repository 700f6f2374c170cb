package request

import (
	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/internal/config"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// validateAlterConfigs answers a validate-only IncrementalAlterConfigs
// from this broker's image, by the controller's rules (a topic resource
// that exists, values config.ValidateTopic accepts) without forwarding
// it: nothing changes.
func (h *Handler) validateAlterConfigs(req *pb.IncrementalAlterConfigsRequest) *pb.IncrementalAlterConfigsResponse {
	r := req.GetResource()
	fail := func(err error) *pb.IncrementalAlterConfigsResponse {
		code, msg := errs.Split(err)
		return &pb.IncrementalAlterConfigsResponse{ErrorCode: code, ErrorMessage: msg}
	}
	if r.GetType() != "topic" {
		return fail(errs.New(pb.ErrorCode_INVALID_REQUEST, "only topic configs can be altered, not %q", r.GetType()))
	}
	if h.Repl == nil || h.Repl.Image().Topic(r.Name) == nil {
		return fail(errs.New(pb.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, "topic '%s' does not exist", r.Name))
	}
	for k, v := range req.Set {
		if err := config.ValidateTopic(k, v); err != nil {
			return fail(errs.New(pb.ErrorCode_INVALID_CONFIG, "%v", err))
		}
	}
	return &pb.IncrementalAlterConfigsResponse{}
}
