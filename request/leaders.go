package request

import (
	"context"
	"fmt"
	"time"

	"github.com/strand-io/strand/authz"
	"github.com/strand-io/strand/broker"
	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/metadata"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// Leader elections and record deletion: ElectLeaders and DeleteRecords.

// ElectLeaders forwards to the active controller; a failure to reach it is
// the request-wide error (REQUEST_TIMED_OUT when it had no code).
func (h *Handler) ElectLeaders(ctx context.Context, req *pb.ElectLeadersRequest) (*pb.ElectLeadersResponse, error) {
	// Kafka: Alter on the cluster, else the request's error and every
	// partition named refused.
	if err := h.authorizeCluster(ctx, "ElectLeaders", authz.OpAlter); err != nil {
		code, msg := errs.Split(err)
		out := &pb.ElectLeadersResponse{ErrorCode: code, ErrorMessage: msg}
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				out.Results = append(out.Results, &pb.ElectLeadersResult{Topic: t.Topic, Partition: p, ErrorCode: code, ErrorMessage: msg})
			}
		}
		return out, nil
	}
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
	// As CreatePartitions does: wait (within the request timeout, at most
	// maxLeadersWait) until this broker's image has the new leaders, so a
	// Metadata call that follows shows them.
	waitUntil(ctx, leadersWait(req.TimeoutMs), func() bool {
		return electionsVisible(before, h.Repl.Image(), resp.Results)
	})
	return resp, nil
}

// maxLeadersWait bounds how long ElectLeaders and DeleteRecords hold an
// answer, whatever timeout the request asks (an INT32 of milliseconds
// allows about 24 days): 30 s, the default request.timeout.ms of Kafka's
// admin client, which also applies to a request asking for none. A wait
// cut short answers as a timeout would: ElectLeaders with the election's
// results, DeleteRecords with REQUEST_TIMED_OUT for what is still pending.
const maxLeadersWait = 30 * time.Second

// leadersPoll is how often a wait looks again (nothing wakes it: the
// image and the followers' log starts move without a signal to it).
const leadersPoll = 10 * time.Millisecond

// leadersWait is the wait a request's timeout_ms allows: it, at most
// maxLeadersWait; none or negative is maxLeadersWait.
func leadersWait(timeoutMs int32) time.Duration {
	d := time.Duration(timeoutMs) * time.Millisecond
	if d <= 0 || d > maxLeadersWait {
		d = maxLeadersWait
	}
	return d
}

// waitUntil polls done every leadersPoll until it holds, d has passed or
// ctx ends, and reports whether it held. It sleeps on a timer beside ctx,
// so a cancelled request stops waiting at once.
func waitUntil(ctx context.Context, d time.Duration, done func() bool) bool {
	if done() {
		return true
	}
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(leadersPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-deadline.C:
			return done()
		case <-tick.C:
			if done() {
				return true
			}
		}
	}
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
// Kafka refuses it). A partition named twice is answered once, with the
// offset of its last entry (dedupeDeleteRecords). As Kafka's
// DelayedDeleteRecords does, the answer waits (up to the request's
// timeout, at most maxLeadersWait; REQUEST_TIMED_OUT after it) until
// the partition's low watermark, the smallest log start offset among its
// replicas on live brokers (replication.Manager.LowWatermark: followers
// report theirs in their fetches, having followed the leader's), has
// reached the offset; the low watermark answered is that one.
func (h *Handler) DeleteRecords(ctx context.Context, req *pb.DeleteRecordsRequest) (*pb.DeleteRecordsResponse, error) {
	out := &pb.DeleteRecordsResponse{}
	want := map[*pb.DeleteRecordsResult]int64{}
	az := h.authz(ctx, "DeleteRecords")
	for _, it := range dedupeDeleteRecords(req.Partitions) {
		res := &pb.DeleteRecordsResult{Topic: it.Topic, Partition: it.Partition, LowWatermark: -1}
		out.Partitions = append(out.Partitions, res)
		if !az.topic(authz.OpDelete, it.Topic) {
			// Kafka: Delete on the topic, asked before it is looked up.
			res.ErrorCode, res.ErrorMessage = errs.Split(topicDenied(authz.OpDelete, it.Topic))
			continue
		}
		off, err := h.deleteRecords(it)
		if err != nil {
			res.ErrorCode, res.ErrorMessage = errs.Split(err)
			continue
		}
		want[res] = off
	}
	d := leadersWait(req.TimeoutMs)
	waitUntil(ctx, d, func() bool {
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
		return len(want) == 0
	})
	for res, off := range want {
		low, _ := h.Repl.LowWatermark(res.Topic, res.Partition)
		res.ErrorCode, res.ErrorMessage = pb.ErrorCode_REQUEST_TIMED_OUT,
			fmt.Sprintf("the log start offset of %s-%d moved to %d on the leader, but its replicas' low watermark is %d after %v", res.Topic, res.Partition, off, low, d)
	}
	return out, nil
}

// dedupeDeleteRecords keeps one entry per partition, as Kafka does (its
// handler collects the request into a map from partition to offset): the
// partition answers once, at its first place, with the offset of its last
// entry.
func dedupeDeleteRecords(parts []*pb.DeleteRecordsPartition) []*pb.DeleteRecordsPartition {
	type tp struct {
		topic     string
		partition int32
	}
	at := make(map[tp]int, len(parts))
	out := make([]*pb.DeleteRecordsPartition, 0, len(parts))
	for _, it := range parts {
		k := tp{it.Topic, it.Partition}
		if i, ok := at[k]; ok {
			out[i] = it
			continue
		}
		at[k] = len(out)
		out = append(out, it)
	}
	return out
}

func (h *Handler) deleteRecords(it *pb.DeleteRecordsPartition) (int64, error) {
	if err := checkString("topic name", it.Topic); err != nil {
		return -1, err
	}
	if h.Repl.Image().Partition(it.Topic, it.Partition) != nil {
		if err := internalDeleteRecordsError(it.Topic); err != nil {
			return -1, err
		}
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
