package request

import (
	"context"
	"sort"

	"github.com/strand-io/strand/authz"
	"github.com/strand-io/strand/broker/storage"
	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// DescribeLogDirs describes this broker's log directories as Kafka's
// KafkaApis and ReplicaManager.describeLogDirs do: Describe on the cluster
// is needed (else CLUSTER_AUTHORIZATION_FAILED and no directory); each
// directory lists the partitions asked (all when all is set) that it
// holds, by topic, with their log's size, their offset lag (how far the
// log end is behind the high watermark: 0 but for a future replica, which
// Strand never has) and is_future false; a topic none of whose partitions
// it holds is left out. A directory that cannot be read is
// KAFKA_STORAGE_ERROR.
func (h *Handler) DescribeLogDirs(ctx context.Context, req *pb.DescribeLogDirsRequest) (*pb.DescribeLogDirsResponse, error) {
	if err := h.authorizeCluster(ctx, "DescribeLogDirs", authz.OpDescribe); err != nil {
		code, msg := errs.Split(err)
		return &pb.DescribeLogDirsResponse{ErrorCode: code, ErrorMessage: msg}, nil
	}
	var want map[storage.PartitionKey]bool
	if !req.All {
		want = map[storage.PartitionKey]bool{}
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				want[storage.PartitionKey{Topic: t.Topic, Partition: p}] = true
			}
		}
	}
	parts := h.Repl.Partitions()
	byTopic := map[string][]*pb.LogDirPartition{}
	for _, p := range parts.All() {
		if want != nil && !want[p.Key] {
			continue
		}
		lag := max(p.HighWatermark()-p.Log.LogEndOffset(), 0)
		byTopic[p.Key.Topic] = append(byTopic[p.Key.Topic], &pb.LogDirPartition{
			PartitionIndex: p.Key.Partition, PartitionSize: p.Log.Size(), OffsetLag: lag})
	}
	names := make([]string, 0, len(byTopic))
	for n := range byTopic {
		names = append(names, n)
	}
	sort.Strings(names)
	resp := &pb.DescribeLogDirsResponse{}
	for _, d := range parts.LogDirs() {
		res := &pb.LogDirResult{LogDir: d.Path, TotalBytes: d.TotalBytes, UsableBytes: d.UsableBytes}
		resp.Results = append(resp.Results, res)
		if d.Err != nil {
			res.ErrorCode, res.ErrorMessage = pb.ErrorCode_KAFKA_STORAGE_ERROR, "log directory "+d.Path+" cannot be read: "+d.Err.Error()
			continue
		}
		for _, n := range names {
			ps := byTopic[n]
			sort.Slice(ps, func(i, j int) bool { return ps[i].PartitionIndex < ps[j].PartitionIndex })
			res.Topics = append(res.Topics, &pb.LogDirTopic{Name: n, Partitions: ps})
		}
	}
	return resp, nil
}
