package request

import (
	"context"
	"time"

	"github.com/strand-io/strand/authz"
	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// CreatePartitions forwards to the active controller, then waits (within
// the request timeout) until this broker's image has every topic's new
// partitions, so a Metadata call that follows sees them.
func (h *Handler) CreatePartitions(ctx context.Context, req *pb.CreatePartitionsRequest) (*pb.CreatePartitionsResponse, error) {
	for _, t := range req.Topics {
		if err := checkString("topic name", t.Name); err != nil {
			out := &pb.CreatePartitionsResponse{}
			code, msg := errs.Split(err)
			for _, t := range req.Topics {
				out.Topics = append(out.Topics, &pb.CreatePartitionsResult{Name: shortID(t.Name), ErrorCode: code, ErrorMessage: msg})
			}
			return out, nil
		}
	}
	// Kafka: Alter on each topic; a topic refused is answered
	// TOPIC_AUTHORIZATION_FAILED, the others are grown.
	az := h.authz(ctx, "CreatePartitions")
	if !az.open() {
		var ok []*pb.CreatePartitionsTopic
		denied := make([]bool, len(req.Topics))
		for i, t := range req.Topics {
			if az.topic(authz.OpAlter, t.Name) {
				ok = append(ok, t)
			} else {
				denied[i] = true
			}
		}
		if len(ok) < len(req.Topics) {
			inner := &pb.CreatePartitionsResponse{}
			if len(ok) > 0 {
				sub := &pb.CreatePartitionsRequest{Topics: ok, TimeoutMs: req.TimeoutMs, ValidateOnly: req.ValidateOnly}
				var err error
				if inner, err = h.createPartitions(ctx, sub); err != nil {
					return nil, err
				}
			}
			out := &pb.CreatePartitionsResponse{}
			j := 0
			for i, t := range req.Topics {
				if denied[i] {
					code, msg := errs.Split(topicDenied(authz.OpAlter, t.Name))
					out.Topics = append(out.Topics, &pb.CreatePartitionsResult{Name: t.Name, ErrorCode: code, ErrorMessage: msg})
					continue
				}
				if j < len(inner.Topics) {
					out.Topics = append(out.Topics, inner.Topics[j])
					j++
				}
			}
			return out, nil
		}
	}
	return h.createPartitions(ctx, req)
}

// createPartitions forwards an authorized CreatePartitions and waits for
// its partitions.
func (h *Handler) createPartitions(ctx context.Context, req *pb.CreatePartitionsRequest) (*pb.CreatePartitionsResponse, error) {
	resp, err := toController(ctx, h, func(ctx context.Context, c pb.ControllerClient) (*pb.CreatePartitionsResponse, error) {
		return c.CreatePartitions(ctx, req)
	})
	if err != nil {
		out := &pb.CreatePartitionsResponse{}
		code, msg := timedOutIfUnknown(errs.Split(err))
		for _, t := range req.Topics {
			out.Topics = append(out.Topics, &pb.CreatePartitionsResult{Name: t.Name, ErrorCode: code, ErrorMessage: msg})
		}
		return out, nil
	}
	if req.ValidateOnly {
		return resp, nil
	}
	want := map[string]int{}
	for i, r := range resp.Topics {
		if r.ErrorCode == pb.ErrorCode_NONE && i < len(req.Topics) {
			want[r.Name] = int(req.Topics[i].Count)
		}
	}
	d := time.Duration(req.TimeoutMs) * time.Millisecond
	if d <= 0 {
		d = 30 * time.Second
	}
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		img := h.Repl.Image()
		ready := true
		for name, n := range want {
			if t := img.Topic(name); t == nil || len(t.Partitions) < n {
				ready = false
			}
		}
		if ready {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	return resp, nil
}
