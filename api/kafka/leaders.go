package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	pb "github.com/strand-io/strand/proto/strand/v1"
)

// ElectLeaders 0-2 (KIP-460) and DeleteRecords 0-2.
func init() {
	register(kmsg.ElectLeaders, 0, 2, handleElectLeaders)
	register(kmsg.DeleteRecords, 0, 2, handleDeleteRecords)
}

// handleElectLeaders: null topics elect every partition. Version 0 knows
// only preferred elections and answers NONE where a later version answers
// ELECTION_NOT_NEEDED (as Kafka does).
func handleElectLeaders(ctx context.Context, c *Conn, r kmsg.Request) (kmsg.Response, error) {
	req := r.(*kmsg.ElectLeadersRequest)
	resp := kmsg.NewPtrElectLeadersResponse()
	preq := &pb.ElectLeadersRequest{TimeoutMs: req.TimeoutMillis, AllPartitions: req.Topics == nil}
	switch {
	case req.Version == 0 || req.ElectionType == 0:
		preq.ElectionType = pb.ElectionType_ELECTION_TYPE_PREFERRED
	case req.ElectionType == 1:
		preq.ElectionType = pb.ElectionType_ELECTION_TYPE_UNCLEAN
	default:
		resp.ErrorCode = code(pb.ErrorCode_INVALID_REQUEST)
		return resp, nil
	}
	for _, t := range req.Topics {
		preq.Topics = append(preq.Topics, &pb.ElectLeadersTopic{Topic: t.Topic, Partitions: t.Partitions})
	}
	presp, err := c.H.ElectLeaders(ctx, preq)
	if err != nil {
		resp.ErrorCode, _ = splitCode(err)
		return resp, nil
	}
	if presp.ErrorCode != pb.ErrorCode_NONE {
		if req.Version == 0 {
			// v0 has no top-level error: every partition carries it.
			for _, t := range req.Topics {
				rt := kmsg.NewElectLeadersResponseTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewElectLeadersResponseTopicPartition()
					rp.Partition, rp.ErrorCode, rp.ErrorMessage = p, code(presp.ErrorCode), errMsg(presp.ErrorMessage)
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			}
			return resp, nil
		}
		resp.ErrorCode = code(presp.ErrorCode)
		return resp, nil
	}
	idx := map[string]int{}
	for _, res := range presp.Results {
		i, ok := idx[res.Topic]
		if !ok {
			i = len(resp.Topics)
			idx[res.Topic] = i
			rt := kmsg.NewElectLeadersResponseTopic()
			rt.Topic = res.Topic
			resp.Topics = append(resp.Topics, rt)
		}
		rp := kmsg.NewElectLeadersResponseTopicPartition()
		rp.Partition = res.Partition
		ec := res.ErrorCode
		if ec == pb.ErrorCode_ELECTION_NOT_NEEDED && req.Version == 0 {
			ec = pb.ErrorCode_NONE
		}
		if ec != pb.ErrorCode_NONE {
			rp.ErrorCode, rp.ErrorMessage = code(ec), errMsg(res.ErrorMessage)
		}
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, rp)
	}
	return resp, nil
}

// handleDeleteRecords: each partition is answered by this broker if it
// leads it (NOT_LEADER_OR_FOLLOWER otherwise; clients send each partition
// to its leader), once however often it is named.
func handleDeleteRecords(ctx context.Context, c *Conn, r kmsg.Request) (kmsg.Response, error) {
	req := r.(*kmsg.DeleteRecordsRequest)
	resp := kmsg.NewPtrDeleteRecordsResponse()
	preq := &pb.DeleteRecordsRequest{TimeoutMs: req.TimeoutMillis}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			preq.Partitions = append(preq.Partitions, &pb.DeleteRecordsPartition{Topic: t.Topic, Partition: p.Partition, Offset: p.Offset})
		}
	}
	presp, err := c.H.DeleteRecords(ctx, preq)
	// The request layer answers a partition named twice once, as Kafka
	// does: match the answers by partition, not by place.
	type tp struct {
		topic     string
		partition int32
	}
	answers := map[tp]*pb.DeleteRecordsResult{}
	if err == nil {
		for _, a := range presp.Partitions {
			answers[tp{a.Topic, a.Partition}] = a
		}
	}
	seen := map[tp]bool{}
	for _, t := range req.Topics {
		rt := kmsg.NewDeleteRecordsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			k := tp{t.Topic, p.Partition}
			if seen[k] {
				continue
			}
			seen[k] = true
			rp := kmsg.NewDeleteRecordsResponseTopicPartition()
			rp.Partition, rp.LowWatermark = p.Partition, -1
			switch a := answers[k]; {
			case err != nil:
				rp.ErrorCode, _ = splitCode(err)
			case a != nil:
				rp.LowWatermark, rp.ErrorCode = a.LowWatermark, code(a.ErrorCode)
			default:
				rp.ErrorCode = code(pb.ErrorCode_UNKNOWN_SERVER_ERROR)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		if len(rt.Partitions) > 0 || len(t.Partitions) == 0 {
			resp.Topics = append(resp.Topics, rt)
		}
	}
	return resp, nil
}
