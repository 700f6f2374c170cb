// Package channel is a node's side of the controller: Remote reaches the
// active controller (following NOT_CONTROLLER hints), Lifecycle registers
// and heartbeats a broker incarnation, and StreamSource follows the
// metadata log from a remote controller.
package channel

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/internal/wire"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// notControllerLeaderKey is the errdetails.ErrorInfo metadata key that
// carries the active controller's id in a NOT_CONTROLLER status.
const notControllerLeaderKey = "leader_id"

// NotControllerStatus is the gRPC status the Controller service answers
// with on a node that is not the active controller. The Kafka error code
// and the active controller's id (-1 when unknown) travel as an
// errdetails.ErrorInfo detail (domain wire.ErrorDomain, reason
// NOT_CONTROLLER, metadata leader_id), never in the message text, so a
// caller reads them back as fields (NotControllerLeader).
func NotControllerStatus(leader int32) error {
	e := errs.New(pb.ErrorCode_NOT_CONTROLLER, "not the active controller (leader %d)", leader)
	st := status.New(codes.FailedPrecondition, e.Error())
	withInfo, err := st.WithDetails(&errdetails.ErrorInfo{
		Reason:   pb.ErrorCode_NOT_CONTROLLER.String(),
		Domain:   wire.ErrorDomain,
		Metadata: map[string]string{notControllerLeaderKey: strconv.Itoa(int(leader))},
	})
	if err != nil {
		return st.Err()
	}
	return withInfo.Err()
}

// NotControllerLeader reports whether err is a NOT_CONTROLLER status made
// by NotControllerStatus and, if so, the active controller's id it names
// (-1 when the sender did not know one). Any other status, whatever its
// gRPC code or message, is not NOT_CONTROLLER.
func NotControllerLeader(err error) (int32, bool) {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.FailedPrecondition {
		return 0, false
	}
	for _, d := range st.Details() {
		info, ok := d.(*errdetails.ErrorInfo)
		if !ok || info.Domain != wire.ErrorDomain || info.Reason != pb.ErrorCode_NOT_CONTROLLER.String() {
			continue
		}
		v, present := info.Metadata[notControllerLeaderKey]
		if !present {
			return -1, true
		}
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			return -1, true
		}
		return int32(n), true
	}
	return 0, false
}

// AddressBook maps node ids to gRPC addresses.
type AddressBook func(id int32) string

// Remote reaches the active controller over gRPC from any node, following
// NOT_CONTROLLER hints and trying the voters in turn when it does not know.
type Remote struct {
	pool     *wire.Pool
	addr     AddressBook
	voters   func() []int32
	localLdr func() int32 // the local Raft's view of the leader, if this node is a voter
	hint     atomic.Int32
	rr       atomic.Uint32
}

// NewRemote returns a client. localLeader may be nil.
func NewRemote(pool *wire.Pool, addr AddressBook, voters func() []int32, localLeader func() int32) *Remote {
	r := &Remote{pool: pool, addr: addr, voters: voters, localLdr: localLeader}
	r.hint.Store(-1)
	return r
}

// LeaderHint is the last known active controller (-1 unknown).
func (r *Remote) LeaderHint() int32 {
	if r.localLdr != nil {
		if id := r.localLdr(); id >= 0 {
			return id
		}
	}
	return r.hint.Load()
}

func (r *Remote) target() int32 {
	if id := r.LeaderHint(); id >= 0 {
		return id
	}
	vs := r.voters()
	if len(vs) == 0 {
		return -1
	}
	return vs[int(r.rr.Add(1))%len(vs)]
}

// Call runs fn against the active controller until it answers, ctx ends,
// or fn fails with something other than "not the controller" or a
// transport error.
func (r *Remote) Call(ctx context.Context, fn func(ctx context.Context, c pb.ControllerClient) error) error {
	backoff := 50 * time.Millisecond
	// redirects counts the NOT_CONTROLLER hints followed at once since the
	// last pause: two controllers each naming the other (stale views of
	// the Raft leader, as after a partition heals) would otherwise send
	// the call back and forth as fast as they answer.
	redirects := 0
	for {
		id := r.target()
		var err error
		if addr := r.addrOrEmpty(id); addr != "" {
			var conn, cerr = r.pool.Get(addr)
			if cerr != nil {
				err = cerr
			} else {
				cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
				err = fn(cctx, pb.NewControllerClient(conn))
				cancel()
				if err == nil {
					r.hint.Store(id)
					return nil
				}
			}
		} else {
			err = errs.New(pb.ErrorCode_NOT_CONTROLLER, "no address known for controller %d", id)
		}
		if leader, ok := NotControllerLeader(err); ok {
			if leader >= 0 && leader != id {
				r.hint.Store(leader)
				if redirects++; redirects <= 3 {
					continue
				}
				// Still redirected: ask the hinted one again after a pause.
			} else {
				r.hint.Store(-1)
			}
			redirects = 0
		} else if st, ok := status.FromError(err); ok && st.Code() != codes.Unavailable && st.Code() != codes.DeadlineExceeded && st.Code() != codes.Canceled {
			return err // a real answer, not a routing problem
		} else {
			r.hint.Store(-1)
		}
		select {
		case <-ctx.Done():
			if err != nil {
				return errors.Join(errs.New(pb.ErrorCode_REQUEST_TIMED_OUT, "controller unreachable"), err)
			}
			return ctx.Err()
		case <-time.After(backoff):
		}
		if backoff < 250*time.Millisecond {
			backoff *= 2
		}
	}
}

func (r *Remote) addrOrEmpty(id int32) string {
	if id < 0 {
		return ""
	}
	return r.addr(id)
}

// AlterPartition implements replication.ControllerClient.
func (r *Remote) AlterPartition(ctx context.Context, req *pb.AlterPartitionRequest) (*pb.AlterPartitionResponse, error) {
	var out *pb.AlterPartitionResponse
	err := r.Call(ctx, func(ctx context.Context, c pb.ControllerClient) error {
		var err error
		out, err = c.AlterPartition(ctx, req)
		return err
	})
	return out, err
}

// AllocateProducerIds asks for the next block.
func (r *Remote) AllocateProducerIds(ctx context.Context, req *pb.AllocateProducerIdsRequest) (*pb.AllocateProducerIdsResponse, error) {
	var out *pb.AllocateProducerIdsResponse
	err := r.Call(ctx, func(ctx context.Context, c pb.ControllerClient) error {
		var err error
		out, err = c.AllocateProducerIds(ctx, req)
		return err
	})
	return out, err
}
