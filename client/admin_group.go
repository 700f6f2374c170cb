package client

import (
	"context"
	"fmt"

	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// CommittedOffsets returns a group's committed offsets for tps (-1 when
// none), asking for stable offsets: a partition with a transactional
// commit still pending (UNSTABLE_OFFSET_COMMIT) is retried until it
// settles or ctx ends, as is every retriable answer (the coordinator
// moving or loading); then the error matches ctx's error and the last
// answer. Other answers are returned at once.
func (a *Admin) CommittedOffsets(ctx context.Context, group string, tps []TopicPartition) (map[TopicPartition]int64, error) {
	req := &pb.OffsetFetchRequest{GroupId: group, RequireStable: true}
	for _, tp := range tps {
		req.Partitions = append(req.Partitions, &pb.TopicPartition{Topic: tp.Topic, Partition: tp.Partition})
	}
	var last error
	for attempt := 0; ; attempt++ {
		co, err := a.FindCoordinator(ctx, pb.CoordinatorType_GROUP, group)
		var resp *pb.OffsetFetchResponse
		if err == nil {
			cc, cerr := a.cl.conn(co.Address)
			if cerr != nil {
				return nil, cerr
			}
			resp, err = pb.NewGroupsClient(cc).OffsetFetch(ctx, req)
			if err == nil {
				err = errs.FromCode(resp.ErrorCode, resp.ErrorMessage)
			}
			if err == nil {
				out := map[TopicPartition]int64{}
				for _, p := range resp.Partitions {
					if e := errs.FromCode(p.ErrorCode, p.ErrorMessage); e != nil {
						err = e
						break
					}
					out[TopicPartition{p.Topic, p.Partition}] = p.Offset
				}
				if err == nil {
					return out, nil
				}
			}
		}
		last = keepLast(last, err)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("offsets of group %s: %w", group, expired(ctx, last))
		}
		if !errs.IsRetriable(err) && !ctxOnly(err) {
			return nil, fmt.Errorf("offsets of group %s: %w", group, err)
		}
		if a.cfg.sleep(ctx, backoff(&a.cfg, attempt)) != nil {
			return nil, fmt.Errorf("offsets of group %s: %w", group, expired(ctx, last))
		}
	}
}
