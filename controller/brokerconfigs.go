package controller

import (
	"context"
	"errors"
	"sort"
	"strconv"

	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/internal/config"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// ValidateBrokerConfigs checks an IncrementalAlterConfigs of a broker
// resource (name "" for the cluster-wide default, or a broker id) by
// Kafka's rules: a read-only config is INVALID_REQUEST, an unknown name or
// a bad value INVALID_CONFIG. The request layer calls it too, for
// validate_only.
func ValidateBrokerConfigs(req *pb.IncrementalAlterConfigsRequest) error {
	name := req.GetResource().GetName()
	if name != "" {
		if id, err := strconv.ParseInt(name, 10, 32); err != nil || id < 0 {
			return errs.New(pb.ErrorCode_INVALID_REQUEST, "broker config resource name %q is not a broker id (or the empty name, the cluster-wide default)", name)
		}
	}
	keys := make([]string, 0, len(req.Set)+len(req.Delete))
	for k := range req.Set {
		keys = append(keys, k)
	}
	keys = append(keys, req.Delete...)
	sort.Strings(keys)
	for _, k := range keys {
		v, set := req.Set[k]
		if !set {
			// A delete needs only a known, alterable name.
			if config.BrokerReadOnly[k] {
				return errs.New(pb.ErrorCode_INVALID_REQUEST, "%v", config.ErrBrokerReadOnly{Name: k})
			}
			if !isKnownDynamic(k) {
				return errs.New(pb.ErrorCode_INVALID_CONFIG, "unknown dynamic broker config %q (known: %v)", k, config.DynamicBrokerKeys())
			}
			continue
		}
		if err := config.ValidateBroker(k, v); err != nil {
			var ro config.ErrBrokerReadOnly
			if errors.As(err, &ro) {
				return errs.New(pb.ErrorCode_INVALID_REQUEST, "%v", err)
			}
			return errs.New(pb.ErrorCode_INVALID_CONFIG, "%v", err)
		}
	}
	return nil
}

func isKnownDynamic(k string) bool {
	for _, d := range config.DynamicBrokerKeys() {
		if d == k {
			return true
		}
	}
	return false
}

// alterBrokerConfigsLocked writes broker config records (resource type
// "broker", name "" or "<id>"); c.mu is held.
func (c *Controller) alterBrokerConfigsLocked(ctx context.Context, req *pb.IncrementalAlterConfigsRequest) error {
	if err := ValidateBrokerConfigs(req); err != nil {
		return err
	}
	name := req.GetResource().GetName()
	keys := make([]string, 0, len(req.Set))
	for k := range req.Set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var recs []*pb.MetadataRecord
	for _, k := range keys {
		recs = append(recs, &pb.MetadataRecord{Record: &pb.MetadataRecord_Config{Config: &pb.ConfigRecord{
			ResourceType: "broker", ResourceName: name, Name: k, Value: config.NormalizeBroker(k, req.Set[k])}}})
	}
	for _, k := range req.Delete {
		if _, set := req.Set[k]; set {
			continue
		}
		recs = append(recs, &pb.MetadataRecord{Record: &pb.MetadataRecord_Config{Config: &pb.ConfigRecord{
			ResourceType: "broker", ResourceName: name, Name: k, Delete: true}}})
	}
	if len(recs) == 0 {
		return nil
	}
	_, err := c.proposeLocked(ctx, recs...)
	return err
}
