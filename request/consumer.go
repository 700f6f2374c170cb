package request

import (
	"context"
	"fmt"

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
	for _, fp := range req.Partitions {
		if fp.FetchOffset < 0 {
			bad = append(bad, &pb.FetchPartitionResponse{Topic: fp.Topic, Partition: fp.Partition, ErrorCode: pb.ErrorCode_OFFSET_OUT_OF_RANGE,
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

// ListOffsets answers earliest, latest (HW or LSO) or by timestamp, with
// HW, LSO and whether the last offset is a control record.
func (h *Handler) ListOffsets(ctx context.Context, req *pb.ListOffsetsRequest) (*pb.ListOffsetsResponse, error) {
	resp := &pb.ListOffsetsResponse{}
	bad := checkIsolation(req.IsolationLevel)
	for _, it := range req.Partitions {
		out := &pb.ListOffsetsPartitionResponse{Topic: it.Topic, Partition: it.Partition, Offset: -1, Timestamp: -1, LeaderEpoch: -1}
		resp.Partitions = append(resp.Partitions, out)
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
	switch ts := it.Timestamp; {
	case ts == -2:
		out.Offset = out.LogStartOffset
	case ts == -1:
		out.Offset = upper
	case ts == -3:
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
		}
	}
	return nil
}

// OffsetForLeaderEpoch serves follower truncation.
func (h *Handler) OffsetForLeaderEpoch(ctx context.Context, req *pb.OffsetForLeaderEpochRequest) (*pb.OffsetForLeaderEpochResponse, error) {
	return h.Repl.OffsetForLeaderEpoch(req), nil
}
