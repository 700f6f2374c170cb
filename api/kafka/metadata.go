package kafka

import (
	"context"
	"encoding/base64"
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"

	pb "github.com/strand-io/strand/proto/strand/v1"
)

func init() {
	register(kmsg.Metadata, 0, 12, handleMetadata)
	register(kmsg.FindCoordinator, 0, 5, handleFindCoordinator)
}

// hostPort splits a broker address for the wire (port 0 when it has none).
func hostPort(addr string) (string, int32) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return addr, 0
	}
	n, _ := strconv.Atoi(p)
	return h, int32(n)
}

// topicID is a Strand topic id (a UUID in Kafka's base64 form) as the
// wire carries it; zero when it does not decode.
func topicID(id string) [16]byte {
	var out [16]byte
	if b, err := base64.RawURLEncoding.DecodeString(id); err == nil && len(b) == 16 {
		copy(out[:], b)
	}
	return out
}

// handleMetadata: brokers with their Kafka listeners, and the topics
// asked for (every topic, internal ones included as Kafka lists them,
// when the list is null, or empty at version 0). From v12 topics may be
// asked for by id, as Kafka 4 answers them: when any id is given the
// names are not looked at, an id no topic has is answered
// UNKNOWN_TOPIC_ID, and a topic the principal may not describe is
// answered by its id without its name. At v10 and v11, where the schema
// already has the fields, a topic without a name or with an id makes the
// request INVALID_REQUEST.
func handleMetadata(ctx context.Context, c *Conn, r kmsg.Request) (kmsg.Response, error) {
	req := r.(*kmsg.MetadataRequest)
	preq := &pb.MetadataRequest{IncludeInternal: true}
	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	var noName []kmsg.MetadataRequestTopic // neither a name nor an id
	if !all {
		for _, t := range req.Topics {
			if t.Topic == nil || t.TopicID != ([16]byte{}) {
				if req.Version < 12 {
					return metadataInvalid(req), nil
				}
				if t.TopicID != ([16]byte{}) {
					preq.TopicIds = append(preq.TopicIds, topicIDString(t.TopicID))
				} else {
					noName = append(noName, t)
				}
				continue
			}
			preq.Topics = append(preq.Topics, *t.Topic)
		}
		if len(preq.TopicIds) > 0 {
			preq.Topics = nil // Kafka: by ids, the names are not looked at
		}
	}
	resp := kmsg.NewPtrMetadataResponse()
	var presp *pb.MetadataResponse
	if all || len(preq.Topics) > 0 || len(preq.TopicIds) > 0 {
		var err error
		if presp, err = c.H.Metadata(ctx, preq); err != nil {
			return nil, err
		}
	} else {
		// An empty list (or entries naming nothing): the brokers, and no
		// topics.
		var err error
		if presp, err = c.H.Metadata(ctx, &pb.MetadataRequest{Topics: []string{""}}); err != nil {
			return nil, err
		}
		presp.Topics = nil
	}
	for _, b := range presp.Brokers {
		if b.Fenced {
			// Kafka's Metadata lists the live brokers only: a client
			// handed a fenced one (dead, or shutting down) may pick it
			// for its next metadata or coordinator request and wait out
			// a connection timeout there.
			continue
		}
		host, port := hostPort(b.Address)
		mb := kmsg.NewMetadataResponseBroker()
		mb.NodeID, mb.Host, mb.Port = b.NodeId, host, port
		if b.Rack != "" {
			rack := b.Rack
			mb.Rack = &rack
		}
		resp.Brokers = append(resp.Brokers, mb)
	}
	cluster := presp.ClusterId
	resp.ClusterID = &cluster
	resp.ControllerID = presp.ControllerId
	if resp.ControllerID <= 0 {
		resp.ControllerID = -1
	}
	for _, t := range presp.Topics {
		mt := kmsg.NewMetadataResponseTopic()
		if t.Name != "" { // asked by an id: no name for an unknown or undescribable topic
			name := t.Name
			mt.Topic = &name
		}
		mt.ErrorCode = code(t.ErrorCode)
		mt.TopicID = topicID(t.TopicId)
		mt.IsInternal = t.IsInternal
		mt.AuthorizedOperations = -2147483648
		for _, p := range t.Partitions {
			mp := kmsg.NewMetadataResponseTopicPartition()
			mp.Partition, mp.Leader, mp.LeaderEpoch = p.Partition, p.LeaderId, p.LeaderEpoch
			mp.ErrorCode = code(p.ErrorCode)
			mp.Replicas, mp.ISR, mp.OfflineReplicas = nonNil(p.Replicas), nonNil(p.Isr), nonNil(p.OfflineReplicas)
			mt.Partitions = append(mt.Partitions, mp)
		}
		resp.Topics = append(resp.Topics, mt)
	}
	if len(preq.TopicIds) == 0 {
		for range noName {
			mt := kmsg.NewMetadataResponseTopic()
			mt.ErrorCode = code(pb.ErrorCode_UNKNOWN_TOPIC_ID)
			resp.Topics = append(resp.Topics, mt)
		}
	}
	return resp, nil
}

// metadataInvalid is Kafka's answer to a Metadata v10 or v11 request
// naming a topic by id or by no name: every topic asked INVALID_REQUEST,
// no brokers (MetadataRequest.getErrorResponse).
func metadataInvalid(req *kmsg.MetadataRequest) *kmsg.MetadataResponse {
	resp := kmsg.NewPtrMetadataResponse()
	resp.ControllerID = -1
	for _, t := range req.Topics {
		mt := kmsg.NewMetadataResponseTopic()
		name := ""
		if t.Topic != nil {
			name = *t.Topic
		}
		mt.Topic, mt.TopicID, mt.ErrorCode = &name, t.TopicID, code(pb.ErrorCode_INVALID_REQUEST)
		resp.Topics = append(resp.Topics, mt)
	}
	return resp
}

func nonNil(s []int32) []int32 {
	if s == nil {
		return []int32{}
	}
	return s
}

// handleFindCoordinator: one key (versions 0-3) or many (4+), group or
// transaction coordinators, at their brokers' Kafka listeners.
func handleFindCoordinator(ctx context.Context, c *Conn, r kmsg.Request) (kmsg.Response, error) {
	req := r.(*kmsg.FindCoordinatorRequest)
	resp := kmsg.NewPtrFindCoordinatorResponse()
	keys := req.CoordinatorKeys
	if req.Version < 4 {
		keys = []string{req.CoordinatorKey}
	}
	var out []kmsg.FindCoordinatorResponseCoordinator
	switch req.CoordinatorType {
	case 0, 1:
		kt := pb.CoordinatorType_GROUP
		if req.CoordinatorType == 1 {
			kt = pb.CoordinatorType_TRANSACTION
		}
		presp, err := c.H.FindCoordinator(ctx, &pb.FindCoordinatorRequest{KeyType: kt, Keys: keys})
		if err != nil {
			return nil, err
		}
		for i, co := range presp.Coordinators {
			fc := kmsg.NewFindCoordinatorResponseCoordinator()
			fc.Key = keys[i]
			fc.NodeID, fc.ErrorCode, fc.ErrorMessage = co.NodeId, code(co.ErrorCode), errMsg(co.ErrorMessage)
			if co.ErrorCode == pb.ErrorCode_NONE {
				fc.Host, fc.Port = hostPort(co.Address)
				if co.Address == "" {
					// The coordinator has no Kafka listener: not reachable from here.
					fc.NodeID, fc.ErrorCode = -1, code(pb.ErrorCode_COORDINATOR_NOT_AVAILABLE)
					fc.ErrorMessage = errMsg("the coordinator's broker has no Kafka listener")
				}
			} else {
				fc.NodeID = -1
			}
			out = append(out, fc)
		}
	default:
		for _, k := range keys {
			fc := kmsg.NewFindCoordinatorResponseCoordinator()
			fc.Key, fc.NodeID = k, -1
			fc.ErrorCode = code(pb.ErrorCode_INVALID_REQUEST)
			fc.ErrorMessage = errMsg("coordinator type must be 0 (group) or 1 (transaction)")
			out = append(out, fc)
		}
	}
	if req.Version >= 4 {
		resp.Coordinators = out
		return resp, nil
	}
	one := out[0]
	resp.ErrorCode, resp.ErrorMessage, resp.NodeID, resp.Host, resp.Port = one.ErrorCode, one.ErrorMessage, one.NodeID, one.Host, one.Port
	return resp, nil
}
