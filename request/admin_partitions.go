package request

import (
	"context"
	"time"

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
