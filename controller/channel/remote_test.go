package channel

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/internal/wire"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

func TestNotControllerStatusCarriesCodeAndLeaderAsFields(t *testing.T) {
	for _, leader := range []int32{3, -1, 0} {
		err := NotControllerStatus(leader)
		st, _ := status.FromError(err)
		if st.Code() != codes.FailedPrecondition {
			t.Fatalf("code = %v, want FailedPrecondition", st.Code())
		}
		var info *errdetails.ErrorInfo
		for _, d := range st.Details() {
			if i, ok := d.(*errdetails.ErrorInfo); ok {
				info = i
			}
		}
		if info == nil || info.Reason != "NOT_CONTROLLER" || info.Domain != wire.ErrorDomain {
			t.Fatalf("details = %v, want an ErrorInfo with reason NOT_CONTROLLER", st.Details())
		}
		got, ok := NotControllerLeader(err)
		if !ok || got != leader {
			t.Fatalf("NotControllerLeader = %d, %v; want %d, true", got, ok, leader)
		}
		// The client's interceptor turns the status into an *errs.Error
		// that still is the status: both readings must agree.
		coded := wire.FromStatus(err)
		if errs.CodeOf(coded) != pb.ErrorCode_NOT_CONTROLLER {
			t.Fatalf("errs.CodeOf = %v, want NOT_CONTROLLER", errs.CodeOf(coded))
		}
		if got, ok := NotControllerLeader(coded); !ok || got != leader {
			t.Fatalf("NotControllerLeader(FromStatus) = %d, %v; want %d, true", got, ok, leader)
		}
	}
}

func TestNotControllerLeaderIgnoresOtherStatuses(t *testing.T) {
	other, _ := status.New(codes.FailedPrecondition, "wrong state").WithDetails(&errdetails.ErrorInfo{
		Reason: "INVALID_REPLICA_ASSIGNMENT", Domain: wire.ErrorDomain, Metadata: map[string]string{"leader_id": "2"}})
	foreign, _ := status.New(codes.FailedPrecondition, "x").WithDetails(&errdetails.ErrorInfo{
		Reason: "NOT_CONTROLLER", Domain: "example.com", Metadata: map[string]string{"leader_id": "2"}})
	notFailedPrecondition, _ := status.New(codes.Unavailable, "x").WithDetails(&errdetails.ErrorInfo{
		Reason: "NOT_CONTROLLER", Domain: wire.ErrorDomain, Metadata: map[string]string{"leader_id": "2"}})
	for name, err := range map[string]error{
		// The old text encoding: a message is never parsed for a code.
		"text only":          status.Error(codes.FailedPrecondition, "NOT_CONTROLLER leader=2"),
		"other reason":       other.Err(),
		"other domain":       foreign.Err(),
		"other grpc code":    notFailedPrecondition.Err(),
		"plain error":        errors.New("NOT_CONTROLLER leader=2"),
		"local errs.Error":   errs.New(pb.ErrorCode_NOT_CONTROLLER, "no address"),
		"nil":                nil,
		"unrelated precond.": status.Error(codes.FailedPrecondition, "topic is being deleted"),
	} {
		if leader, ok := NotControllerLeader(err); ok {
			t.Errorf("%s: taken for NOT_CONTROLLER (leader %d)", name, leader)
		}
	}
}

// fakeController answers AllocateProducerIds with answer(node).
type fakeController struct {
	pb.UnimplementedControllerServer
	calls  atomic.Int32
	answer func() (*pb.AllocateProducerIdsResponse, error)
}

func (f *fakeController) AllocateProducerIds(context.Context, *pb.AllocateProducerIdsRequest) (*pb.AllocateProducerIdsResponse, error) {
	f.calls.Add(1)
	return f.answer()
}

// serveFakes serves each fake on its own in-memory listener named
// "node-<id>" and returns a pool that dials them.
func serveFakes(t *testing.T, fakes map[int32]*fakeController) (*wire.Pool, AddressBook) {
	t.Helper()
	listeners := map[string]*bufconn.Listener{}
	for id, f := range fakes {
		lis := bufconn.Listen(1 << 20)
		srv := grpc.NewServer()
		pb.RegisterControllerServer(srv, f)
		done := make(chan struct{})
		go func() { defer close(done); _ = srv.Serve(lis) }()
		t.Cleanup(func() { srv.Stop(); <-done })
		listeners[addrOf(id)] = lis
	}
	pool := wire.NewPool(func(ctx context.Context, addr string) (net.Conn, error) {
		lis, ok := listeners[addr]
		if !ok {
			return nil, errors.New("no such node")
		}
		return lis.DialContext(ctx)
	}, wire.ErrorCodeDialOptions()...)
	t.Cleanup(pool.Close)
	return pool, addrOf
}

func addrOf(id int32) string { return "node-" + string(rune('0'+id)) }

func TestRemoteFollowsNotControllerToTheLeader(t *testing.T) {
	follower := &fakeController{answer: func() (*pb.AllocateProducerIdsResponse, error) {
		return nil, NotControllerStatus(2)
	}}
	leader := &fakeController{answer: func() (*pb.AllocateProducerIdsResponse, error) {
		return &pb.AllocateProducerIdsResponse{ProducerIdStart: 1000, ProducerIdLen: 10}, nil
	}}
	pool, book := serveFakes(t, map[int32]*fakeController{1: follower, 2: leader})
	r := NewRemote(pool, book, func() []int32 { return []int32{1} }, nil)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := r.AllocateProducerIds(ctx, &pb.AllocateProducerIdsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if res.ProducerIdStart != 1000 {
		t.Fatalf("start = %d, want 1000", res.ProducerIdStart)
	}
	if follower.calls.Load() != 1 || leader.calls.Load() != 1 {
		t.Fatalf("calls: follower %d, leader %d; want 1 each", follower.calls.Load(), leader.calls.Load())
	}
	if r.LeaderHint() != 2 {
		t.Fatalf("hint = %d, want 2", r.LeaderHint())
	}
}

func TestRemoteReturnsUnrelatedFailedPrecondition(t *testing.T) {
	// Text that looks like the old encoding, without the structured
	// detail: a real answer from the controller, returned as it is, not
	// a redirect to node 2.
	only := &fakeController{answer: func() (*pb.AllocateProducerIdsResponse, error) {
		return nil, status.Error(codes.FailedPrecondition, "NOT_CONTROLLER leader=2")
	}}
	other := &fakeController{answer: func() (*pb.AllocateProducerIdsResponse, error) {
		return &pb.AllocateProducerIdsResponse{}, nil
	}}
	pool, book := serveFakes(t, map[int32]*fakeController{1: only, 2: other})
	r := NewRemote(pool, book, func() []int32 { return []int32{1} }, nil)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := r.AllocateProducerIds(ctx, &pb.AllocateProducerIdsRequest{})
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("err = %v, want the FailedPrecondition answer", err)
	}
	if other.calls.Load() != 0 {
		t.Fatalf("node 2 called %d times: a message text was read as a redirect", other.calls.Load())
	}
}

// TestRemotePausesBetweenRedirectRounds: two controllers that each name
// the other as the leader (stale views of the Raft leader, as after a
// partition heals) must not bounce a call between them with no pause:
// after a few redirects followed at once, Call waits its backoff before
// the next round. The cluster simulation found the loop: on virtual time
// it never blocked, so the clock stood still. Without the pause the two
// answer thousands of times in the window below; with it, a few dozen.
func TestRemotePausesBetweenRedirectRounds(t *testing.T) {
	one := &fakeController{answer: func() (*pb.AllocateProducerIdsResponse, error) { return nil, NotControllerStatus(2) }}
	two := &fakeController{answer: func() (*pb.AllocateProducerIdsResponse, error) { return nil, NotControllerStatus(1) }}
	pool, book := serveFakes(t, map[int32]*fakeController{1: one, 2: two})
	r := NewRemote(pool, book, func() []int32 { return []int32{1, 2} }, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := r.AllocateProducerIds(ctx, &pb.AllocateProducerIdsRequest{}); err == nil {
		t.Fatal("a call that only ever met redirects succeeded")
	}
	// Rounds of at most four calls, at least 50 ms apart: 80 allows for
	// a slow machine's clock and is far below the thousands of a loop.
	if n := one.calls.Load() + two.calls.Load(); n > 80 {
		t.Fatalf("%d calls in one second between two controllers naming each other: no pause between redirect rounds", n)
	}
}
