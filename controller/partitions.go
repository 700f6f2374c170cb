package controller

import (
	"context"
	"fmt"

	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/metadata"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// CreatePartitions adds partitions to existing topics: one partition
// record per new partition, with the topic's replication factor, placed
// by the request's assignment or else round robin over the live brokers
// (continuing where the cluster's partitions stop, as topic creation
// does). A partition count is only ever raised. Each topic is proposed on
// its own, so one topic's refusal does not hold back the others.
func (c *Controller) CreatePartitions(ctx context.Context, req *pb.CreatePartitionsRequest) ([]*pb.CreatePartitionsResult, error) {
	if err := c.lockActive(); err != nil {
		return nil, err
	}
	defer c.mu.Unlock()
	var out []*pb.CreatePartitionsResult
	names := make([]string, len(req.Topics))
	for i, t := range req.Topics {
		names[i] = t.Name
	}
	// A topic named twice is refused at every occurrence and not grown,
	// as Kafka's controller refuses it.
	dup := Duplicates(names)
	for _, t := range req.Topics {
		res := &pb.CreatePartitionsResult{Name: t.Name}
		out = append(out, res)
		if dup[t.Name] {
			res.ErrorCode, res.ErrorMessage = errs.Split(DuplicateTopicError())
			continue
		}
		recs, err := c.partitionRecords(t)
		if err != nil {
			res.ErrorCode, res.ErrorMessage = errs.Split(err)
			continue
		}
		if req.ValidateOnly {
			continue
		}
		if _, err := c.proposeLocked(ctx, recs...); err != nil {
			if errs.CodeOf(err) == pb.ErrorCode_NOT_CONTROLLER {
				return nil, err
			}
			res.ErrorCode, res.ErrorMessage = errs.Split(err)
			continue
		}
		c.lg.Info("created partitions", "topic", t.Name, "partitions", t.Count, "added", len(recs))
	}
	return out, nil
}

// partitionRecords validates one topic's increase and returns its records.
func (c *Controller) partitionRecords(t *pb.CreatePartitionsTopic) ([]*pb.MetadataRecord, error) {
	img := c.Q.FSM.Image()
	topic := img.Topic(t.Name)
	if topic == nil {
		return nil, errs.New(pb.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, "topic '%s' does not exist", t.Name)
	}
	if topic.Internal {
		return nil, errs.New(pb.ErrorCode_INVALID_REQUEST, "topic '%s' is internal: its partition count is fixed", t.Name)
	}
	cur := int32(len(topic.Partitions))
	switch {
	case t.Count == cur:
		return nil, errs.New(pb.ErrorCode_INVALID_PARTITIONS, "topic '%s' already has %d partitions", t.Name, cur)
	case t.Count < cur:
		return nil, errs.New(pb.ErrorCode_INVALID_PARTITIONS, "topic '%s' has %d partitions; %d would remove some, and partitions can only be added", t.Name, cur, t.Count)
	case t.Count > 100000:
		return nil, errs.New(pb.ErrorCode_INVALID_PARTITIONS, "number of partitions must be at most 100000, got %d", t.Count)
	}
	add := int(t.Count - cur)
	rf := 0
	for _, p := range topic.Partitions {
		if p != nil {
			rf = len(p.Replicas)
			break
		}
	}
	var assign [][]int32
	if len(t.Assignments) > 0 {
		if len(t.Assignments) != add {
			return nil, errs.New(pb.ErrorCode_INVALID_REPLICA_ASSIGNMENT, "%d replica assignments for %d new partitions of topic '%s'", len(t.Assignments), add, t.Name)
		}
		for i, a := range t.Assignments {
			if err := checkAssignment(img, a.BrokerIds, rf); err != nil {
				return nil, errs.New(pb.ErrorCode_INVALID_REPLICA_ASSIGNMENT, "new partition %d of topic '%s': %v", int(cur)+i, t.Name, err)
			}
			assign = append(assign, append([]int32(nil), a.BrokerIds...))
		}
	} else {
		live := img.LiveBrokers()
		if rf > len(live) {
			return nil, errs.New(pb.ErrorCode_INVALID_REPLICATION_FACTOR, "topic '%s' has replication factor %d, more than the %d live brokers", t.Name, rf, len(live))
		}
		ids := make([]int32, len(live))
		for i, b := range live {
			ids[i] = b.ID
		}
		total := 0
		for _, tt := range img.Topics {
			total += len(tt.Partitions)
		}
		assign = Assign(ids, add, rf, total, total/len(ids))
	}
	if max := c.cfg.MaxBrokerPartitions; max > 0 {
		if err := checkBrokerPartitions(img, assign, max); err != nil {
			return nil, err
		}
	}
	recs := make([]*pb.MetadataRecord, 0, add)
	for i, reps := range assign {
		recs = append(recs, &pb.MetadataRecord{Record: &pb.MetadataRecord_Partition{Partition: &pb.PartitionRecord{
			Topic: t.Name, Partition: cur + int32(i), Replicas: reps, Isr: reps, Leader: reps[0],
		}}})
	}
	return recs, nil
}

// checkAssignment: rf distinct registered brokers.
func checkAssignment(img *metadata.Image, reps []int32, rf int) error {
	if len(reps) != rf {
		return fmt.Errorf("%d replicas, but the topic's replication factor is %d", len(reps), rf)
	}
	seen := map[int32]bool{}
	for _, id := range reps {
		if seen[id] {
			return fmt.Errorf("broker %d is listed twice", id)
		}
		seen[id] = true
		if img.Brokers[id] == nil {
			return fmt.Errorf("broker %d is not registered", id)
		}
	}
	return nil
}
