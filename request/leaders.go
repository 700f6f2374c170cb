package request

import (
	"context"
	"fmt"
	"time"

	"github.com/strand-io/strand/broker"
	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/metadata"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// Issue 21 (leaders): ElectLeaders and DeleteRecords.

// ElectLeaders forwards to the active controller; a failure to reach it is
// the request-wide error (REQUEST_TIMED_OUT when it had no code).
func (h *Handler) ElectLeaders(ctx context.Context, req *pb.ElectLeadersRequest) (*pb.ElectLeadersResponse, error) {
	for _, t := range req.Topics {
		if err := checkString("topic name", t.Topic); err != nil {
			code, msg := errs.Split(err)
			return &pb.ElectLeadersResponse{ErrorCode: code, ErrorMessage: msg}, nil
		}
	}
	before := h.Repl.Image()
	resp, err := toController(ctx, h, func(ctx context.Context, c pb.ControllerClient) (*pb.ElectLeadersResponse, error) {
		return c.ElectLeaders(ctx, req)
	})
	if err != nil {
		code, msg := timedOutIfUnknown(errs.Split(err))
		return &pb.ElectLeadersResponse{ErrorCode: code, ErrorMessage: msg}, nil
	}
	// As CreatePartitions does: wait (within the request timeout) until
	// this broker's image has the new leaders, so a Metadata call that
	// follows shows them.
	d := time.Duration(req.TimeoutMs) * time.Millisecond
	if d <= 0 {
		d = 30 * time.Second
	}
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if electionsVisible(before, h.Repl.Image(), resp.Results) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	return resp, nil
}

// electionsVisible reports whether img (this broker's image now) shows
// every successful election of results as a leader epoch above the one in
// before (this broker's image when the request arrived). A partition img
// does not have counts as visible: the answer carries no metadata offset to
// wait for, and one this broker never had (its image lags the
// controller's) or no longer has (deleted since) would otherwise hold the
// answer for the whole timeout though the election succeeded.
func electionsVisible(before, img *metadata.Image, results []*pb.ElectLeadersResult) bool {
	for _, r := range results {
		if r.ErrorCode != pb.ErrorCode_NONE {
			continue
		}
		old, cur := before.Partition(r.Topic, r.Partition), img.Partition(r.Topic, r.Partition)
		if cur == nil {
			continue
		}
		if old != nil && cur.LeaderEpoch <= old.LeaderEpoch {
			return false
		}
	}
	return true
}

// DeleteRecords moves the log start offset of partitions this broker
// leads up to the offsets asked (-1: the high watermark). An offset above
// the high watermark is OFFSET_OUT_OF_RANGE; a partition led elsewhere is
// NOT_LEADER_OR_FOLLOWER; a compact-only topic is POLICY_VIOLATION (as
// Kafka refuses it). As Kafka's DelayedDeleteRecords does, the answer
// waits (up to the request's timeout, REQUEST_TIMED_OUT after it) until
// the partition's low watermark, the smallest log start offset among its
// replicas on live brokers (replication.Manager.LowWatermark: followers
// report theirs in their fetches, having followed the leader's), has
// reached the offset; the low watermark answered is that one.
func (h *Handler) DeleteRecords(ctx context.Context, req *pb.DeleteRecordsRequest) (*pb.DeleteRecordsResponse, error) {
	out := &pb.DeleteRecordsResponse{}
	want := map[*pb.DeleteRecordsResult]int64{}
	for _, it := range req.Partitions {
		res := &pb.DeleteRecordsResult{Topic: it.Topic, Partition: it.Partition, LowWatermark: -1}
		out.Partitions = append(out.Partitions, res)
		off, err := h.deleteRecords(it)
		if err != nil {
			res.ErrorCode, res.ErrorMessage = errs.Split(err)
			continue
		}
		want[res] = off
	}
	d := time.Duration(req.TimeoutMs) * time.Millisecond
	if d <= 0 {
		d = 30 * time.Second
	}
	deadline := time.Now().Add(d)
	for len(want) > 0 {
		for res, off := range want {
			low, err := h.Repl.LowWatermark(res.Topic, res.Partition)
			switch {
			case err != nil:
				res.ErrorCode, res.ErrorMessage = errs.Split(err)
			case low >= off:
				res.LowWatermark = low
			default:
				continue
			}
			delete(want, res)
		}
		if len(want) == 0 {
			break
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			for res, off := range want {
				low, _ := h.Repl.LowWatermark(res.Topic, res.Partition)
				res.ErrorCode, res.ErrorMessage = pb.ErrorCode_REQUEST_TIMED_OUT,
					fmt.Sprintf("the log start offset of %s-%d moved to %d on the leader, but its replicas' low watermark is %d after %v", res.Topic, res.Partition, off, low, d)
			}
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	return out, nil
}

func (h *Handler) deleteRecords(it *pb.DeleteRecordsPartition) (int64, error) {
	if err := checkString("topic name", it.Topic); err != nil {
		return -1, err
	}
	p, err := h.Repl.Partition(it.Topic, it.Partition)
	if err != nil {
		return -1, err
	}
	if l := p.Leadership(); l.Role != broker.RoleLeader {
		return -1, errs.New(pb.ErrorCode_NOT_LEADER_OR_FOLLOWER, "broker %d is not the leader of %s (leader %d)", h.NodeID, p.Key, l.Leader)
	}
	if !p.Log.Config().Cleanup.Delete() {
		return -1, errs.New(pb.ErrorCode_POLICY_VIOLATION, "records of partition %s can't be deleted: its cleanup.policy is compact", p.Key)
	}
	hw := p.HighWatermark()
	off := it.Offset
	if off == -1 {
		off = hw
	}
	if off < 0 || off > hw {
		return -1, errs.New(pb.ErrorCode_OFFSET_OUT_OF_RANGE, "cannot delete records of %s below offset %d: it is outside [0, %d] (the high watermark)", p.Key, it.Offset, hw)
	}
	// The leader's own start moves now (checkpointed); the answer waits
	// for the followers (DeleteRecords).
	if _, err := p.Log.AdvanceLogStart(off); err != nil {
		return -1, err
	}
	return off, nil
}
