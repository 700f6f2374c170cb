package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"

	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/internal/planted"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// The group coordinator connection of a groupMember: discovery
// (FindCoordinator GROUP) and the retry rule every Groups RPC follows.

// coordinator finds the group's coordinator (FindCoordinator GROUP),
// retrying while none is available.
func (g *groupMember) coordinator(ctx context.Context) (*pb.Coordinator, error) {
	g.mu.Lock()
	co := g.coord
	g.mu.Unlock()
	if co != nil {
		return co, nil
	}
	for attempt := 0; ; attempt++ {
		var found *pb.Coordinator
		err := g.c.cl.any(ctx, func(ctx context.Context, cc *grpc.ClientConn) error {
			resp, err := pb.NewMetadataClient(cc).FindCoordinator(ctx, &pb.FindCoordinatorRequest{KeyType: pb.CoordinatorType_GROUP, Keys: []string{g.cfg.groupID}})
			if err == nil && len(resp.Coordinators) == 1 {
				found = resp.Coordinators[0]
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		if found == nil {
			return nil, errors.New("FindCoordinator answered no coordinator")
		}
		ferr := errs.FromCode(found.ErrorCode, found.ErrorMessage)
		if ferr == nil {
			g.mu.Lock()
			g.coord = found
			g.mu.Unlock()
			return found, nil
		}
		if !retriableCoordinator(found.ErrorCode) {
			return nil, fmt.Errorf("finding the coordinator of group %q: %w", g.cfg.groupID, ferr)
		}
		if g.cfg.sleep(ctx, backoff(g.cfg, attempt)) != nil {
			return nil, fmt.Errorf("finding the coordinator of group %q: %w", g.cfg.groupID, expired(ctx, ferr))
		}
	}
}

func retriableCoordinator(code pb.ErrorCode) bool {
	return code == pb.ErrorCode_COORDINATOR_NOT_AVAILABLE || code == pb.ErrorCode_NOT_COORDINATOR || code == pb.ErrorCode_COORDINATOR_LOAD_IN_PROGRESS
}

func (g *groupMember) forgetCoordinator(co *pb.Coordinator) {
	g.mu.Lock()
	if g.coord == co {
		g.coord = nil
	}
	g.mu.Unlock()
}

// call runs one Groups RPC against the coordinator, rediscovering it on
// NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE / transport errors, and
// retrying those and every other retriable answer until ctx ends, except
// the two the group's callers act on (REBALANCE_IN_PROGRESS,
// MEMBER_ID_REQUIRED): as Kafka's consumer retries a retriable error.
// Any other code is returned as an *errs.Error; once ctx ends, the error
// matches ctx's and the last one retried.
func (g *groupMember) call(ctx context.Context, timeout time.Duration, what string, fn func(ctx context.Context, gc pb.GroupsClient) (pb.ErrorCode, string, error)) error {
	var last error
	for attempt := 0; ; attempt++ {
		co, err := g.coordinator(ctx)
		if err != nil {
			if ctx.Err() != nil && last != nil {
				return fmt.Errorf("%s: %w", what, expired(ctx, keepLast(last, err)))
			}
			return err
		}
		cc, err := g.c.cl.conn(co.Address)
		if err != nil {
			return err
		}
		rctx, cancel := context.WithTimeout(ctx, timeout)
		code, msg, err := fn(rctx, pb.NewGroupsClient(cc))
		cancel()
		if planted.On(planted.ClientIgnoresInstanceFencing) && code == pb.ErrorCode_FENCED_INSTANCE_ID {
			code = pb.ErrorCode_UNKNOWN_MEMBER_ID
		}
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return fmt.Errorf("%s: %w", what, expired(ctx, keepLast(last, err)))
			}
			g.forgetCoordinator(co)
			last = keepLast(last, fmt.Errorf("%s to node %d: %w", what, co.NodeId, err))
		case code == pb.ErrorCode_NONE:
			return nil
		case retriableCoordinator(code):
			if code != pb.ErrorCode_COORDINATOR_LOAD_IN_PROGRESS {
				g.forgetCoordinator(co)
			}
			last = errs.FromCode(code, msg)
		case code == pb.ErrorCode_REBALANCE_IN_PROGRESS, code == pb.ErrorCode_MEMBER_ID_REQUIRED:
			return errs.FromCode(code, msg)
		case errs.IsRetriable(errs.FromCode(code, msg)):
			last = errs.FromCode(code, msg)
		default:
			return errs.FromCode(code, msg)
		}
		if g.cfg.sleep(ctx, backoff(g.cfg, attempt)) != nil {
			return fmt.Errorf("%s: %w", what, expired(ctx, last))
		}
	}
}

// coded is a Groups answer with a top-level error code.
type coded interface {
	GetErrorCode() pb.ErrorCode
	GetErrorMessage() string
}

// rpc adapts a Groups call to call's shape, keeping the answer in out.
func rpc[R coded](out *R, f func(context.Context, pb.GroupsClient) (R, error)) func(context.Context, pb.GroupsClient) (pb.ErrorCode, string, error) {
	return func(ctx context.Context, gc pb.GroupsClient) (pb.ErrorCode, string, error) {
		r, err := f(ctx, gc)
		if err != nil {
			return 0, "", err
		}
		*out = r
		return r.GetErrorCode(), r.GetErrorMessage(), nil
	}
}
