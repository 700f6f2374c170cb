package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	pb "github.com/strand-io/strand/proto/strand/v1"
)

// DescribeLogDirs 1-4, as Kafka 4.0 serves it (version 0 is gone there;
// version 5, KIP-1066's cordoned directories, is newer than Kafka 4.0):
// the request layer's answer on the wire. A null topic list asks for
// every partition. The top-level error code exists from version 3, the
// directory's total and usable bytes from version 4.
func init() {
	register(kmsg.DescribeLogDirs, 1, 4, handleDescribeLogDirs)
}

func handleDescribeLogDirs(ctx context.Context, c *Conn, r kmsg.Request) (kmsg.Response, error) {
	req := r.(*kmsg.DescribeLogDirsRequest)
	resp := kmsg.NewPtrDescribeLogDirsResponse()
	preq := &pb.DescribeLogDirsRequest{All: req.Topics == nil}
	for _, t := range req.Topics {
		preq.Topics = append(preq.Topics, &pb.DescribableLogDirTopic{Topic: t.Topic, Partitions: t.Partitions})
	}
	presp, err := c.H.DescribeLogDirs(ctx, preq)
	if err != nil {
		resp.ErrorCode, _ = splitCode(err)
		return resp, nil
	}
	resp.ErrorCode = code(presp.ErrorCode)
	for _, d := range presp.Results {
		rd := kmsg.NewDescribeLogDirsResponseDir()
		rd.ErrorCode, rd.Dir, rd.TotalBytes, rd.UsableBytes = code(d.ErrorCode), d.LogDir, d.TotalBytes, d.UsableBytes
		for _, t := range d.Topics {
			rt := kmsg.NewDescribeLogDirsResponseDirTopic()
			rt.Topic = t.Name
			for _, p := range t.Partitions {
				rp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
				rp.Partition, rp.Size, rp.OffsetLag, rp.IsFuture = p.PartitionIndex, p.PartitionSize, p.OffsetLag, p.IsFutureKey
				rt.Partitions = append(rt.Partitions, rp)
			}
			rd.Topics = append(rd.Topics, rt)
		}
		resp.Dirs = append(resp.Dirs, rd)
	}
	return resp, nil
}
