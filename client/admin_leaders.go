package client

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"

	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// ElectLeaders, DeleteRecords and CreatePartitions.

// ElectionType picks the leader election ElectLeaders runs.
type ElectionType int

const (
	// ElectPreferred moves leadership to each partition's first replica
	// when it is live and in the ISR.
	ElectPreferred ElectionType = iota
	// ElectUnclean gives a partition without a leader a live replica,
	// outside the ISR if no ISR member is live.
	ElectUnclean
)

// String is Kafka's name of the election type (PREFERRED, UNCLEAN).
func (t ElectionType) String() string {
	if t == ElectUnclean {
		return "UNCLEAN"
	}
	return "PREFERRED"
}

// ElectLeaders runs leader elections for tps (every partition when tps is
// nil) through the active controller. The map holds each partition's
// outcome: nil when it was elected, else its error (ErrElectionNotNeeded
// when a valid leader already led it, PREFERRED_LEADER_NOT_AVAILABLE,
// ELIGIBLE_LEADERS_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION). With tps
// nil, partitions that needed no election are left out (as Kafka does).
// NOT_CONTROLLER and a starting node are retried until ctx ends.
func (a *Admin) ElectLeaders(ctx context.Context, typ ElectionType, tps []TopicPartition) (map[TopicPartition]error, error) {
	req := &pb.ElectLeadersRequest{TimeoutMs: int32(a.cfg.requestTimeout / time.Millisecond), AllPartitions: tps == nil}
	if typ == ElectUnclean {
		req.ElectionType = pb.ElectionType_ELECTION_TYPE_UNCLEAN
	}
	byTopic := map[string]*pb.ElectLeadersTopic{}
	for _, tp := range tps {
		t := byTopic[tp.Topic]
		if t == nil {
			t = &pb.ElectLeadersTopic{Topic: tp.Topic}
			byTopic[tp.Topic] = t
			req.Topics = append(req.Topics, t)
		}
		t.Partitions = append(t.Partitions, tp.Partition)
	}
	var resp *pb.ElectLeadersResponse
	err := a.cl.any(ctx, func(ctx context.Context, cc *grpc.ClientConn) error {
		var err error
		resp, err = pb.NewAdminClient(cc).ElectLeaders(ctx, req)
		if err == nil && controllerRoutingError(resp.ErrorCode) {
			return errs.FromCode(resp.ErrorCode, resp.ErrorMessage)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if resp.ErrorCode != pb.ErrorCode_NONE {
		return nil, errs.FromCode(resp.ErrorCode, resp.ErrorMessage)
	}
	out := make(map[TopicPartition]error, len(resp.Results))
	for _, r := range resp.Results {
		out[TopicPartition{r.Topic, r.Partition}] = errs.FromCode(r.ErrorCode, r.ErrorMessage)
	}
	return out, nil
}

// DeletedRecords is what DeleteRecords says of one partition.
type DeletedRecords struct {
	// LowWatermark is the partition's low watermark after the call: the
	// smallest log start offset among its live replicas, at least the
	// offset asked (the broker answers once the followers have followed).
	LowWatermark int64
	Err          error
}

// DeleteRecords deletes the records below the given offsets (OffsetLatest,
// -1, is the high watermark): each partition's leader moves its log start
// offset up, and records below it can no longer be read. Partitions whose
// leader moved or is unknown are retried until ctx ends; other errors
// (OFFSET_OUT_OF_RANGE past the high watermark, POLICY_VIOLATION on a
// compact-only topic, REQUEST_TIMED_OUT when the followers did not follow
// within the request timeout, …) are in the partition's Err.
func (a *Admin) DeleteRecords(ctx context.Context, offsets map[TopicPartition]int64) (map[TopicPartition]DeletedRecords, error) {
	out := map[TopicPartition]DeletedRecords{}
	pending := make([]TopicPartition, 0, len(offsets))
	for tp := range offsets {
		pending = append(pending, tp)
	}
	var lastErr error
	for attempt := 0; len(pending) > 0; attempt++ {
		byLeader := map[int32][]*pb.DeleteRecordsPartition{}
		var retry []TopicPartition
		var unknown []string
		for _, tp := range pending {
			leader, _ := a.cl.leader(tp)
			if leader < 0 {
				unknown = append(unknown, tp.Topic)
				retry = append(retry, tp)
				continue
			}
			byLeader[leader] = append(byLeader[leader], &pb.DeleteRecordsPartition{Topic: tp.Topic, Partition: tp.Partition, Offset: offsets[tp]})
		}
		if len(unknown) > 0 {
			if err := a.cl.refresh(ctx, unknown); err != nil {
				lastErr = keepLast(lastErr, err)
			}
		}
		for leader, parts := range byLeader {
			cc, err := a.cl.brokerConn(leader)
			var resp *pb.DeleteRecordsResponse
			if err == nil {
				rctx, cancel := context.WithTimeout(ctx, a.cfg.requestTimeout)
				resp, err = pb.NewAdminClient(cc).DeleteRecords(rctx, &pb.DeleteRecordsRequest{Partitions: parts, TimeoutMs: int32(a.cfg.requestTimeout / time.Millisecond)})
				cancel()
			}
			if err != nil {
				lastErr = keepLast(lastErr, err)
				for _, p := range parts {
					retry = append(retry, TopicPartition{p.Topic, p.Partition})
				}
				continue
			}
			for _, r := range resp.Partitions {
				tp := TopicPartition{r.Topic, r.Partition}
				e := errs.FromCode(r.ErrorCode, r.ErrorMessage)
				if e != nil && errs.IsRetriable(e) {
					lastErr = e
					a.cl.markStale(tp)
					retry = append(retry, tp)
					continue
				}
				out[tp] = DeletedRecords{LowWatermark: r.LowWatermark, Err: e}
			}
		}
		pending = retry
		if len(pending) == 0 {
			break
		}
		if a.cfg.sleep(ctx, backoff(&a.cfg, attempt)) != nil {
			return out, fmt.Errorf("delete records: %w", expired(ctx, lastErr))
		}
	}
	return out, nil
}

// CreatePartitions raises topic's partition count to count (new
// partitions placed by the controller). INVALID_PARTITIONS when count is
// not above the current count; UNKNOWN_TOPIC_OR_PARTITION for no such
// topic. NOT_CONTROLLER and a starting node are retried until ctx ends.
func (a *Admin) CreatePartitions(ctx context.Context, topic string, count int32) error {
	var resp *pb.CreatePartitionsResponse
	err := a.cl.any(ctx, func(ctx context.Context, cc *grpc.ClientConn) error {
		var err error
		resp, err = pb.NewAdminClient(cc).CreatePartitions(ctx, &pb.CreatePartitionsRequest{TimeoutMs: int32(a.cfg.requestTimeout / time.Millisecond),
			Topics: []*pb.CreatePartitionsTopic{{Name: topic, Count: count}}})
		if err == nil && len(resp.Topics) == 1 {
			// Not REQUEST_TIMED_OUT: a retried increase that happened would
			// answer INVALID_PARTITIONS.
			if code := resp.Topics[0].ErrorCode; code == pb.ErrorCode_NOT_CONTROLLER || code == pb.ErrorCode_BROKER_NOT_AVAILABLE {
				return errs.FromCode(code, resp.Topics[0].ErrorMessage)
			}
		}
		return err
	})
	if err != nil {
		return err
	}
	if len(resp.Topics) != 1 {
		return fmt.Errorf("strand: CreatePartitions answered %d topics", len(resp.Topics))
	}
	return errs.FromCode(resp.Topics[0].ErrorCode, resp.Topics[0].ErrorMessage)
}
