package controller

import (
	"context"
	"fmt"

	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/metadata"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// Leader elections: ElectLeaders (KIP-460) and Kafka's leader imbalance
// rule for auto.leader.rebalance.enable.

// PreferredElection decides a preferred election for one partition: the
// record moving leadership to its first replica, or the error Kafka
// answers: ELECTION_NOT_NEEDED when that replica already leads,
// PREFERRED_LEADER_NOT_AVAILABLE when it is not live or not in the ISR.
func PreferredElection(im *metadata.Image, p *metadata.Partition) (*pb.MetadataRecord, error) {
	if len(p.Replicas) == 0 {
		return nil, errs.New(pb.ErrorCode_PREFERRED_LEADER_NOT_AVAILABLE, "partition %s-%d has no replicas", p.Topic, p.Partition)
	}
	pref := p.Replicas[0]
	switch {
	case p.Leader == pref:
		return nil, errs.New(pb.ErrorCode_ELECTION_NOT_NEEDED, "leader election not needed for topic partition %s-%d: broker %d, its preferred replica, already leads", p.Topic, p.Partition, pref)
	case !im.IsLive(pref):
		return nil, errs.New(pb.ErrorCode_PREFERRED_LEADER_NOT_AVAILABLE, "failed to elect leader for partition %s-%d under strategy PreferredReplicaPartitionLeaderElectionStrategy: preferred replica %d is not live", p.Topic, p.Partition, pref)
	case !p.InISR(pref):
		return nil, errs.New(pb.ErrorCode_PREFERRED_LEADER_NOT_AVAILABLE, "failed to elect leader for partition %s-%d under strategy PreferredReplicaPartitionLeaderElectionStrategy: preferred replica %d is not in the ISR %v", p.Topic, p.Partition, pref, p.ISR)
	}
	return changeRecord(p, pref, p.ISR, "preferred"), nil
}

// UncleanElection decides an unclean election for one partition: only a
// partition without a leader gets one (else ELECTION_NOT_NEEDED). A live
// ISR member is taken first (a clean election); else the first live
// replica outside the ISR, which becomes the whole ISR; else
// ELIGIBLE_LEADERS_NOT_AVAILABLE.
func UncleanElection(im *metadata.Image, p *metadata.Partition) (*pb.MetadataRecord, error) {
	if p.Leader != metadata.NoLeader {
		return nil, errs.New(pb.ErrorCode_ELECTION_NOT_NEEDED, "leader election not needed for topic partition %s-%d: broker %d leads it", p.Topic, p.Partition, p.Leader)
	}
	if l := electLeader(p.Replicas, p.ISR, im.IsLive, metadata.NoLeader); l != metadata.NoLeader {
		return changeRecord(p, l, p.ISR, "unclean-request"), nil
	}
	for _, r := range p.Replicas {
		if im.IsLive(r) {
			return changeRecord(p, r, []int32{r}, "unclean-request"), nil
		}
	}
	return nil, errs.New(pb.ErrorCode_ELIGIBLE_LEADERS_NOT_AVAILABLE, "no live replica of partition %s-%d (replicas %v) can be elected", p.Topic, p.Partition, p.Replicas)
}

// LeaderImbalance is, per broker, the fraction of the partitions whose
// preferred leader (first replica) it is that another broker leads:
// Kafka's leader.imbalance.per.broker.percentage measure. Brokers that
// prefer no partition are absent.
func LeaderImbalance(im *metadata.Image) map[int32]float64 {
	total, notLed := map[int32]int{}, map[int32]int{}
	forEachPartition(im, func(_ *metadata.Topic, p *metadata.Partition) {
		if len(p.Replicas) == 0 {
			return
		}
		pref := p.Replicas[0]
		total[pref]++
		if p.Leader != pref {
			notLed[pref]++
		}
	})
	out := make(map[int32]float64, len(total))
	for b, n := range total {
		out[b] = float64(notLed[b]) / float64(n)
	}
	return out
}

// ImbalanceChanges is the auto rebalance Kafka runs every
// leader.imbalance.check.interval.seconds: for each broker whose leader
// imbalance is above percent (leader.imbalance.per.broker.percentage),
// the partitions it prefers but does not lead move back to it, where it
// is live and in the ISR. A broker at or under the threshold is left as
// it is.
func ImbalanceChanges(im *metadata.Image, percent int) []*pb.MetadataRecord {
	imb := LeaderImbalance(im)
	var out []*pb.MetadataRecord
	forEachPartition(im, func(_ *metadata.Topic, p *metadata.Partition) {
		if len(p.Replicas) == 0 {
			return
		}
		if imb[p.Replicas[0]]*100 <= float64(percent) {
			return
		}
		if rec, err := PreferredElection(im, p); err == nil {
			out = append(out, rec)
		}
	})
	return out
}

// ElectLeaders runs the elections a client asked for, one record per
// partition that changes, all committed together. Partitions that need
// none or cannot have one get their error. With all_partitions every
// partition is considered, and (as Kafka does) only those elected or
// failing with something other than ELECTION_NOT_NEEDED are reported.
func (c *Controller) ElectLeaders(ctx context.Context, req *pb.ElectLeadersRequest) ([]*pb.ElectLeadersResult, error) {
	if err := c.lockActive(); err != nil {
		return nil, err
	}
	defer c.mu.Unlock()
	img := c.Q.FSM.Image()
	elect := PreferredElection
	kind := "preferred"
	switch req.ElectionType {
	case pb.ElectionType_ELECTION_TYPE_PREFERRED:
	case pb.ElectionType_ELECTION_TYPE_UNCLEAN:
		elect, kind = UncleanElection, "unclean"
	default:
		return nil, errs.New(pb.ErrorCode_INVALID_REQUEST, "unknown election type %d", req.ElectionType)
	}
	type target struct {
		topic string
		part  int32
	}
	var targets []target
	if req.AllPartitions {
		forEachPartition(img, func(_ *metadata.Topic, p *metadata.Partition) {
			targets = append(targets, target{p.Topic, p.Partition})
		})
	} else {
		seen := map[target]bool{}
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				if tg := (target{t.Topic, p}); !seen[tg] {
					seen[tg] = true
					targets = append(targets, tg)
				}
			}
		}
	}
	var out []*pb.ElectLeadersResult
	var recs []*pb.MetadataRecord
	var changed []*pb.ElectLeadersResult
	for _, tg := range targets {
		res := &pb.ElectLeadersResult{Topic: tg.topic, Partition: tg.part}
		p := img.Partition(tg.topic, tg.part)
		if p == nil {
			res.ErrorCode, res.ErrorMessage = pb.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, fmt.Sprintf("partition %s-%d does not exist", tg.topic, tg.part)
			out = append(out, res)
			continue
		}
		rec, err := elect(img, p)
		if err != nil {
			res.ErrorCode, res.ErrorMessage = errs.Split(err)
			if req.AllPartitions && res.ErrorCode == pb.ErrorCode_ELECTION_NOT_NEEDED {
				continue
			}
			out = append(out, res)
			continue
		}
		recs = append(recs, rec)
		changed = append(changed, res)
		out = append(out, res)
	}
	if len(recs) > 0 {
		if _, err := c.proposeLocked(ctx, recs...); err != nil {
			if errs.CodeOf(err) == pb.ErrorCode_NOT_CONTROLLER {
				return nil, err
			}
			code, msg := errs.Split(err)
			for _, r := range changed {
				r.ErrorCode, r.ErrorMessage = code, msg
			}
		} else {
			c.lg.Info("leader election on request", "type", kind, "partitions", len(recs))
		}
	}
	return out, nil
}
