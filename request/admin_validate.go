package request

import (
	"sort"

	"github.com/strand-io/strand/controller"
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
	if r.GetType() == "broker" {
		if err := controller.ValidateBrokerConfigs(req); err != nil {
			return fail(err)
		}
		return &pb.IncrementalAlterConfigsResponse{}
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
	if err := config.ValidateTopicSet(config.Merged(h.Repl.Image().Topic(r.Name).Configs, req.Set, req.Delete)); err != nil {
		return fail(errs.New(pb.ErrorCode_INVALID_CONFIG, "%v", err))
	}
	return &pb.IncrementalAlterConfigsResponse{}
}

// replaceConfigs turns a whole-config alter (Kafka's AlterConfigs) into
// an incremental one: the keys set on the topic now and absent from the
// request are deleted. The topic's current keys are this broker's image's.
func (h *Handler) replaceConfigs(req *pb.IncrementalAlterConfigsRequest) *pb.IncrementalAlterConfigsRequest {
	out := &pb.IncrementalAlterConfigsRequest{Resource: req.Resource, Set: req.Set, ValidateOnly: req.ValidateOnly}
	if h.Repl != nil && req.GetResource().GetType() == "broker" {
		for k := range h.brokerDynamic(req.Resource.Name) {
			if _, keep := req.Set[k]; !keep {
				out.Delete = append(out.Delete, k)
			}
		}
		sort.Strings(out.Delete)
		return out
	}
	if h.Repl == nil || req.GetResource().GetType() != "topic" {
		return out
	}
	t := h.Repl.Image().Topic(req.Resource.Name)
	if t == nil {
		return out
	}
	for k := range t.Configs {
		if _, keep := req.Set[k]; !keep {
			out.Delete = append(out.Delete, k)
		}
	}
	sort.Strings(out.Delete)
	return out
}
