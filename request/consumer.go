package request

import (
	"context"
	"fmt"

	"github.com/strand-io/strand/authz"
	"github.com/strand-io/strand/broker"
	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// Fetch validates and hands over to replication (consumers and
// followers: a front door decides who may send replica_id >= 0).
func (h *Handler) Fetch(ctx context.Context, req *pb.FetchRequest) (*pb.FetchResponse, error) {
	if err := checkIsolation(req.IsolationLevel); err != nil {
		code, msg := errs.Split(err)
		return &pb.FetchResponse{ErrorCode: code, ErrorMessage: msg}, nil
	}
	var bad []*pb.FetchPartitionResponse
	var good []*pb.FetchPartition
	// Kafka's handleFetchRequest: a follower needs ClusterAction on the
	// cluster, a consumer Read on each topic. A follower refused is
	// answered as Kafka answers it (every partition
	// TOPIC_AUTHORIZATION_FAILED), with CLUSTER_AUTHORIZATION_FAILED as the
	// request's error to say why.
	az := h.authz(ctx, "Fetch")
	var resp0 *pb.FetchResponse
	if req.ReplicaId >= 0 && !az.cluster(authz.OpClusterAction) {
		err := clusterDenied(authz.OpClusterAction)
		resp0 = &pb.FetchResponse{}
		resp0.ErrorCode, resp0.ErrorMessage = errs.Split(err)
		for _, fp := range req.Partitions {
			resp0.Partitions = append(resp0.Partitions, fetchRefused(fp, topicDenied(authz.OpClusterAction, fp.Topic)))
		}
		return resp0, nil
	}
	for _, fp := range req.Partitions {
		if req.ReplicaId < 0 && !az.topic(authz.OpRead, fp.Topic) {
			bad = append(bad, fetchRefused(fp, topicDenied(authz.OpRead, fp.Topic)))
			continue
		}
		if fp.FetchOffset < 0 {
			bad = append(bad, &pb.FetchPartitionResponse{Topic: fp.Topic, TopicId: fp.TopicId, Partition: fp.Partition, ErrorCode: pb.ErrorCode_OFFSET_OUT_OF_RANGE,
				ErrorMessage: fmt.Sprintf("negative fetch offset %d", fp.FetchOffset), HighWatermark: -1, LastStableOffset: -1, LogStartOffset: -1})
			continue
		}
		good = append(good, fp)
	}
	if req.MaxWaitMs > 60000 {
		req.MaxWaitMs = 60000
	}
	var resp *pb.FetchResponse
	if len(good) > 0 || req.SessionEpoch != 0 { // an incremental session fetch may name no partition
		req.Partitions = good
		resp = h.Repl.FetchInto(ctx, req, h.readBuffer)
	} else {
		resp = &pb.FetchResponse{}
	}
	resp.Partitions = append(resp.Partitions, bad...)
	h.fetched(resp, req.ReplicaId >= 0)
	return resp, nil
}

// fetchRefused is a fetch partition's answer of err.
func fetchRefused(fp *pb.FetchPartition, err error) *pb.FetchPartitionResponse {
	code, msg := errs.Split(err)
	return &pb.FetchPartitionResponse{Topic: fp.Topic, TopicId: fp.TopicId, Partition: fp.Partition, ErrorCode: code, ErrorMessage: msg,
		HighWatermark: -1, LastStableOffset: -1, LogStartOffset: -1}
}

// ListOffsets answers earliest, latest (HW or LSO) or by timestamp, with
// HW, LSO and whether the last offset is a control record.
func (h *Handler) ListOffsets(ctx context.Context, req *pb.ListOffsetsRequest) (*pb.ListOffsetsResponse, error) {
	resp := &pb.ListOffsetsResponse{}
	bad := checkIsolation(req.IsolationLevel)
	az := h.authz(ctx, "ListOffsets")
	for _, it := range req.Partitions {
		out := &pb.ListOffsetsPartitionResponse{Topic: it.Topic, Partition: it.Partition, Offset: -1, Timestamp: -1, LeaderEpoch: -1}
		resp.Partitions = append(resp.Partitions, out)
		if !az.topic(authz.OpDescribe, it.Topic) {
			out.ErrorCode, out.ErrorMessage = errs.Split(topicDenied(authz.OpDescribe, it.Topic))
			continue
		}
		if bad != nil {
			out.ErrorCode, out.ErrorMessage = errs.Split(bad)
			continue
		}
		if err := h.listOne(req, it, out); err != nil {
			out.ErrorCode, out.ErrorMessage = errs.Split(err)
		}
	}
	return resp, nil
}

func (h *Handler) listOne(req *pb.ListOffsetsRequest, it *pb.ListOffsetsPartition, out *pb.ListOffsetsPartitionResponse) error {
	p, err := h.Repl.Partition(it.Topic, it.Partition)
	if err != nil {
		return err
	}
	l := p.Leadership()
	if l.Role != broker.RoleLeader {
		return errs.New(pb.ErrorCode_NOT_LEADER_OR_FOLLOWER, "broker %d is not the leader of %s (leader %d)", h.NodeID, p.Key, l.Leader)
	}
	if err := broker.CheckLeaderEpoch(p.Key, l.LeaderEpoch, it.CurrentLeaderEpoch); err != nil {
		return err
	}
	hw, lso := p.HighWatermark(), p.LastStableOffset()
	out.HighWatermark, out.LastStableOffset = hw, lso
	out.LogStartOffset, out.LogEndOffset = p.Log.LogStartOffset(), p.Log.LogEndOffset()
	out.LastOffsetIsControl = p.Log.LastBatchIsControl(hw)
	out.LeaderEpoch = l.LeaderEpoch
	upper := hw
	if req.IsolationLevel == pb.IsolationLevel_READ_COMMITTED {
		upper = lso
	}
	// A new leader's HW may lag where it began its epoch: Kafka's rule
	// (KIP-207) answers a latest offset, or a timestamp found at none of
	// the offsets it may serve, with the retriable OFFSET_NOT_AVAILABLE
	// until it catches up (replication.Manager.HWLagging).
	lagging := func() error { return h.Repl.HWLagging(p.Key, l.LeaderEpoch, hw) }
	switch ts := it.Timestamp; {
	case ts == -2:
		out.Offset = out.LogStartOffset
	case ts == -1:
		if err := lagging(); err != nil {
			return err
		}
		out.Offset = upper
	case ts == -3:
		if err := lagging(); err != nil {
			// Kafka looks at the whole log: while the HW lags, a record of
			// the largest timestamp at or above what it may serve is not
			// answered with an older one below.
			if off, _, ok, lerr := p.Log.MaxTimestampOffset(p.Log.LogEndOffset()); lerr == nil && (!ok || off >= upper) {
				return err
			}
		}
		off, t, ok, err := p.Log.MaxTimestampOffset(upper)
		if err != nil {
			return err
		}
		if ok {
			out.Offset, out.Timestamp = off, t
		}
	case ts < 0:
		return errs.New(pb.ErrorCode_INVALID_REQUEST, "timestamp %d is not a valid query", ts)
	default:
		off, t, ok, err := p.Log.OffsetForTimestamp(ts, upper)
		if err != nil {
			return err
		}
		if ok {
			out.Offset, out.Timestamp = off, t
		} else if err := lagging(); err != nil {
			return err
		}
	}
	return nil
}

// OffsetForLeaderEpoch serves follower truncation (and a consumer's
// check of its position after a leader change). A follower
// (replica_id >= 0) needs ClusterAction on the cluster, a consumer
// Describe on each topic; a partition refused is answered
// TOPIC_AUTHORIZATION_FAILED, as Kafka answers a partition it may not
// describe. (Kafka asks a consumer for ClusterAction first, without an
// audit line; the Checker has no silent question, and only brokers hold
// ClusterAction, so a consumer is asked for Describe only.)
func (h *Handler) OffsetForLeaderEpoch(ctx context.Context, req *pb.OffsetForLeaderEpochRequest) (*pb.OffsetForLeaderEpochResponse, error) {
	az := h.authz(ctx, "OffsetForLeaderEpoch")
	if az.open() || (req.ReplicaId >= 0 && az.cluster(authz.OpClusterAction)) {
		return h.Repl.OffsetForLeaderEpoch(req), nil
	}
	denied := make([]error, len(req.Partitions))
	var ok []*pb.OffsetForLeaderEpochPartition
	for i, p := range req.Partitions {
		switch {
		case req.ReplicaId >= 0:
			denied[i] = topicDenied(authz.OpClusterAction, p.Topic)
		case !az.topic(authz.OpDescribe, p.Topic):
			denied[i] = topicDenied(authz.OpDescribe, p.Topic)
		default:
			ok = append(ok, p)
		}
	}
	inner := &pb.OffsetForLeaderEpochResponse{}
	if len(ok) > 0 {
		inner = h.Repl.OffsetForLeaderEpoch(&pb.OffsetForLeaderEpochRequest{ReplicaId: req.ReplicaId, Partitions: ok})
	}
	out := &pb.OffsetForLeaderEpochResponse{}
	j := 0
	for i, p := range req.Partitions {
		if denied[i] != nil {
			code, msg := errs.Split(denied[i])
			out.Partitions = append(out.Partitions, &pb.OffsetForLeaderEpochPartitionResponse{Topic: p.Topic, Partition: p.Partition,
				ErrorCode: code, ErrorMessage: msg, LeaderEpoch: -1, EndOffset: -1})
			continue
		}
		if j < len(inner.Partitions) {
			out.Partitions = append(out.Partitions, inner.Partitions[j])
			j++
		}
	}
	return out, nil
}
