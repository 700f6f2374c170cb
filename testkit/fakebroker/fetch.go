package fakebroker

import (
	"context"
	"fmt"
	"time"

	pb "github.com/strand-io/strand/proto/strand/v1"
)

// Fetch serves the batches appended, from the one holding each
// partition's fetch offset. With nothing to return it waits, as a broker
// does, up to max.wait.ms for an append.
func (b *Broker) Fetch(ctx context.Context, req *pb.FetchRequest) (*pb.FetchResponse, error) {
	if code := b.refused("FetchTop"); code != pb.ErrorCode_NONE {
		return &pb.FetchResponse{ErrorCode: code, ErrorMessage: RefusalMessage}, nil
	}
	var wait <-chan time.Time
	for {
		resp, changed, any := b.fetchOnce(req)
		if any || req.MaxWaitMs <= 0 {
			return resp, nil
		}
		if wait == nil {
			t := time.NewTimer(time.Duration(req.MaxWaitMs) * time.Millisecond)
			defer t.Stop()
			wait = t.C
		}
		select {
		case <-changed:
		case <-wait:
			return resp, nil
		case <-ctx.Done():
			return resp, nil
		}
	}
}

// fetchOnce answers req from what is there now; any says whether the
// answer has records or errors (nothing to wait for).
func (b *Broker) fetchOnce(req *pb.FetchRequest) (resp *pb.FetchResponse, changed <-chan struct{}, any bool) {
	resp = &pb.FetchResponse{}
	for _, p := range req.Partitions {
		pr := &pb.FetchPartitionResponse{Topic: p.Topic, Partition: p.Partition, CurrentLeaderId: NodeID}
		if code := b.refused("Fetch"); code != pb.ErrorCode_NONE {
			pr.ErrorCode, pr.ErrorMessage, pr.HighWatermark, pr.LastStableOffset, pr.LogStartOffset = code, RefusalMessage, -1, -1, -1
			resp.Partitions = append(resp.Partitions, pr)
			any = true
			continue
		}
		b.mu.Lock()
		pp := b.partitionLocked(p.Topic, p.Partition)
		switch {
		case pp == nil:
			pr.ErrorCode, pr.ErrorMessage = pb.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, fmt.Sprintf("%s-%d is not on this broker", p.Topic, p.Partition)
			pr.HighWatermark, pr.LastStableOffset, pr.LogStartOffset = -1, -1, -1
			any = true
		case p.FetchOffset < 0 || p.FetchOffset > pp.end:
			pr.ErrorCode, pr.ErrorMessage = pb.ErrorCode_OFFSET_OUT_OF_RANGE, fmt.Sprintf("offset %d is outside [0, %d]", p.FetchOffset, pp.end)
			pr.HighWatermark, pr.LastStableOffset, pr.LogEndOffset = pp.end, pp.end, pp.end
			any = true
		default:
			pr.HighWatermark, pr.LastStableOffset, pr.LogEndOffset = pp.end, pp.end, pp.end
			limit := int(p.PartitionMaxBytes)
			if limit <= 0 {
				limit = 1 << 20
			}
			for _, bt := range pp.batches {
				if bt.Header.NextOffset() <= p.FetchOffset {
					continue
				}
				if len(pr.Records) > 0 && len(pr.Records)+len(bt.data) > limit {
					break
				}
				pr.Records = append(pr.Records, bt.data...)
			}
			any = any || len(pr.Records) > 0
		}
		changed = b.changed
		b.mu.Unlock()
		resp.Partitions = append(resp.Partitions, pr)
	}
	if changed == nil {
		b.mu.Lock()
		changed = b.changed
		b.mu.Unlock()
	}
	return resp, changed, any
}

// ListOffsets answers the earliest (-2) offset 0 and otherwise the log end.
func (b *Broker) ListOffsets(ctx context.Context, req *pb.ListOffsetsRequest) (*pb.ListOffsetsResponse, error) {
	resp := &pb.ListOffsetsResponse{}
	for _, p := range req.Partitions {
		if code := b.refused("ListOffsets"); code != pb.ErrorCode_NONE {
			resp.Partitions = append(resp.Partitions, &pb.ListOffsetsPartitionResponse{Topic: p.Topic, Partition: p.Partition, ErrorCode: code, ErrorMessage: RefusalMessage, Offset: -1, Timestamp: -1})
			continue
		}
		pr := &pb.ListOffsetsPartitionResponse{Topic: p.Topic, Partition: p.Partition, Timestamp: -1}
		b.mu.Lock()
		if pp := b.partitionLocked(p.Topic, p.Partition); pp == nil {
			pr.ErrorCode, pr.ErrorMessage, pr.Offset = pb.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, fmt.Sprintf("%s-%d is not on this broker", p.Topic, p.Partition), -1
		} else {
			pr.HighWatermark, pr.LastStableOffset, pr.LogEndOffset = pp.end, pp.end, pp.end
			if p.Timestamp != -2 {
				pr.Offset = pp.end
			}
		}
		b.mu.Unlock()
		resp.Partitions = append(resp.Partitions, pr)
	}
	return resp, nil
}
