package request

import (
	"context"
	"fmt"

	"github.com/strand-io/strand/authz"
	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/internal/config"
	"github.com/strand-io/strand/metadata"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

func brokerInfos(img *metadata.Image, l Listener) []*pb.BrokerInfo {
	var out []*pb.BrokerInfo
	for _, b := range img.SortedBrokers() {
		addr := addressFor(b, l)
		if addr == "" {
			continue // no listener of this kind: Kafka lists only brokers a client can reach on it
		}
		out = append(out, &pb.BrokerInfo{NodeId: b.ID, Address: addr, Rack: b.Rack, Fenced: b.Fenced, BrokerEpoch: b.Epoch})
	}
	return out
}

// addressFor picks the address a client on this listener can dial ("":
// the broker has no listener of that kind).
func addressFor(b *metadata.Broker, l Listener) string {
	switch {
	case l == ListenerKafka:
		return b.KafkaAddress
	case l == ListenerExternal && b.ExternalAddress != "":
		return b.ExternalAddress
	}
	return b.Address
}

// TopicMetadata renders one topic from an image; messageMaxBytes is the
// broker's message.max.bytes, the topic's max.message.bytes default.
func TopicMetadata(img *metadata.Image, t *metadata.Topic, messageMaxBytes int) *pb.TopicMetadata {
	tm := &pb.TopicMetadata{Name: t.Name, IsInternal: t.Internal, TopicId: t.ID, Configs: t.Configs,
		MaxMessageBytes: int32(config.Int(t.Configs, config.MaxMessageBytes, int64(messageMaxBytes)))}
	for _, p := range t.Partitions {
		pm := &pb.PartitionMetadata{Partition: p.Partition, LeaderId: p.Leader, LeaderEpoch: p.LeaderEpoch,
			Replicas: p.Replicas, Isr: p.ISR, PartitionEpoch: p.PartitionEpoch}
		if p.Leader == metadata.NoLeader {
			pm.ErrorCode = pb.ErrorCode_LEADER_NOT_AVAILABLE
		}
		for _, r := range p.Replicas {
			if !img.IsLive(r) {
				pm.OfflineReplicas = append(pm.OfflineReplicas, r)
			}
		}
		tm.Partitions = append(tm.Partitions, pm)
	}
	return tm
}

// Metadata answers from the local image.
func (h *Handler) Metadata(ctx context.Context, req *pb.MetadataRequest) (*pb.MetadataResponse, error) {
	img := h.Repl.Image()
	resp := &pb.MetadataResponse{ClusterId: img.ClusterID, ControllerId: h.Remote.LeaderHint(), Brokers: brokerInfos(img, h.Listener), MetadataOffset: img.Offset}
	if len(req.TopicIds) > 0 {
		h.metadataByID(ctx, img, req.TopicIds, resp)
		return resp, nil
	}
	names := req.Topics
	all := len(names) == 0
	if all {
		for _, n := range img.TopicNames() {
			if req.IncludeInternal || !metadata.IsInternalTopic(n) {
				names = append(names, n)
			}
		}
	}
	// Kafka's handleTopicMetadataRequest: a topic needs Describe. Asked
	// for every topic, the answer lists only those the principal may
	// describe; a topic named and not describable is answered
	// TOPIC_AUTHORIZATION_FAILED without looking it up, so the answer
	// does not tell whether it exists. (Strand's Metadata never creates a
	// topic, so Kafka's Create check for auto-creation has no place here.)
	az := h.authz(ctx, "Metadata")
	if all {
		az = az.quietly() // a listing: the hidden topics are not denials to audit
	}
	for _, n := range names {
		// "" names no topic (the Kafka listener asks for it to get the
		// brokers only): nothing to authorize, nothing to hide.
		if n != "" && !az.topic(authz.OpDescribe, n) {
			if !all {
				code, msg := errs.Split(topicDenied(authz.OpDescribe, n))
				resp.Topics = append(resp.Topics, &pb.TopicMetadata{Name: n, ErrorCode: code, ErrorMessage: msg})
			}
			continue
		}
		t := img.Topic(n)
		if t == nil {
			// The message says why; the code travels beside it.
			resp.Topics = append(resp.Topics, &pb.TopicMetadata{Name: n, ErrorCode: pb.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, ErrorMessage: fmt.Sprintf("topic %q does not exist", n)})
			continue
		}
		resp.Topics = append(resp.Topics, TopicMetadata(img, t, h.MessageMaxBytes))
	}
	return resp, nil
}

// metadataByID answers topics asked for by id (Kafka's Metadata v12): each
// id once, an id no topic has UNKNOWN_TOPIC_ID, a topic the principal may
// not describe TOPIC_AUTHORIZATION_FAILED with its id and without its
// name (ids are not secret, names are), the others in full.
func (h *Handler) metadataByID(ctx context.Context, img *metadata.Image, ids []string, resp *pb.MetadataResponse) {
	az := h.authz(ctx, "Metadata")
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		t := img.TopicByID(id)
		switch {
		case t == nil:
			resp.Topics = append(resp.Topics, &pb.TopicMetadata{TopicId: id, ErrorCode: pb.ErrorCode_UNKNOWN_TOPIC_ID, ErrorMessage: "no topic has id " + id})
		case !az.topic(authz.OpDescribe, t.Name):
			resp.Topics = append(resp.Topics, &pb.TopicMetadata{TopicId: id, ErrorCode: pb.ErrorCode_TOPIC_AUTHORIZATION_FAILED,
				ErrorMessage: fmt.Sprintf("not authorized to %s the topic with id %s", authz.OpDescribe, id)})
		default:
			resp.Topics = append(resp.Topics, TopicMetadata(img, t, h.MessageMaxBytes))
		}
	}
}

// DescribeFeatures lists the supported features with their finalized
// levels; the epoch is the metadata offset of this broker's image.
func (h *Handler) DescribeFeatures(ctx context.Context, _ *pb.DescribeFeaturesRequest) (*pb.DescribeFeaturesResponse, error) {
	img := h.Repl.Image()
	resp := &pb.DescribeFeaturesResponse{}
	for _, name := range metadata.SupportedFeatureNames() {
		r := metadata.SupportedFeatures[name]
		resp.Features = append(resp.Features, &pb.Feature{Name: name, SupportedMinVersion: r.Min, SupportedMaxVersion: r.Max,
			FinalizedVersionLevel: img.Feature(name), Epoch: img.Offset})
	}
	return resp, nil
}

// FindCoordinator maps each key to the broker leading its partition of
// the internal topic, creating the topic on first need.
func (h *Handler) FindCoordinator(ctx context.Context, req *pb.FindCoordinatorRequest) (*pb.FindCoordinatorResponse, error) {
	resp := &pb.FindCoordinatorResponse{}
	az := h.authz(ctx, "FindCoordinator")
	for _, k := range req.Keys {
		if err := checkString("coordinator key", k); err != nil {
			code, msg := errs.Split(err)
			resp.Coordinators = append(resp.Coordinators, &pb.Coordinator{Key: shortID(k), NodeId: -1, ErrorCode: code, ErrorMessage: msg})
			continue
		}
		// Kafka's getCoordinator: Describe on the group or the
		// transactional id.
		var denied error
		switch req.KeyType {
		case pb.CoordinatorType_TRANSACTION:
			if !az.txnID(authz.OpDescribe, k) {
				denied = txnIDDenied(authz.OpDescribe, k)
			}
		default:
			if !az.group(authz.OpDescribe, k) {
				denied = groupDenied(authz.OpDescribe, k)
			}
		}
		if denied != nil {
			code, msg := errs.Split(denied)
			resp.Coordinators = append(resp.Coordinators, &pb.Coordinator{Key: k, NodeId: -1, ErrorCode: code, ErrorMessage: msg})
			continue
		}
		if h.Locator == nil {
			resp.Coordinators = append(resp.Coordinators, &pb.Coordinator{Key: k, NodeId: -1, ErrorCode: pb.ErrorCode_COORDINATOR_NOT_AVAILABLE, ErrorMessage: "this node runs no coordinator"})
			continue
		}
		co := h.Locator.Find(ctx, req.KeyType, k)
		if b := h.Repl.Image().Brokers[co.NodeId]; b != nil && co.ErrorCode == pb.ErrorCode_NONE {
			co.Address = addressFor(b, h.Listener)
		}
		resp.Coordinators = append(resp.Coordinators, co)
	}
	return resp, nil
}
