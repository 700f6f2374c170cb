package controller_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/strand-io/strand/clock"
	"github.com/strand-io/strand/controller"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// TestAddVoterDoesNotHoldControllerLock: AddVoter probes the new voter's
// address and waits for the configuration change without the controller's
// lock, so heartbeats, AlterPartition and the tick (here IsActive, which
// takes the same lock) go on meanwhile. The probe of an address whose dial
// hangs takes its full 3 s; the lock must be free long before that.
func TestAddVoterDoesNotHoldControllerLock(t *testing.T) {
	addr := freeAddr(t)
	hang := "127.0.0.1:1" // a dial to it hangs until its context ends
	cfg := quorumConfig(t.TempDir(), addr, []controller.Voter{{ID: 1, Addr: addr}})
	probing := make(chan struct{}, 1)
	cfg.Dial = func(ctx context.Context, a string) (net.Conn, error) {
		if a == hang {
			select {
			case probing <- struct{}{}:
			default:
			}
			<-ctx.Done()
			return nil, ctx.Err()
		}
		var d net.Dialer
		return d.DialContext(ctx, "tcp", a)
	}
	q := startLeader(t, cfg)
	defer q.Close()
	c := activeController(t, q, clock.NewFake(time.Unix(1_700_000_000, 0)))

	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done <- c.AddVoter(ctx, &pb.AddVoterRequest{NodeId: 2, Address: hang})
	}()
	select { // AddVoter is in its probe
	case <-probing:
	case <-time.After(5 * time.Second):
		t.Fatal("AddVoter never dialed the new voter")
	}
	active := make(chan bool, 1)
	go func() { active <- c.IsActive() }()
	select {
	case ok := <-active:
		if !ok {
			t.Fatal("controller not active")
		}
	case <-time.After(time.Second):
		t.Fatal("IsActive blocked while AddVoter probed: AddVoter holds the controller's lock")
	}
	select {
	case err := <-done:
		wantCode(t, "AddVoter of a hanging address", err, pb.ErrorCode_REQUEST_TIMED_OUT)
	case <-time.After(10 * time.Second):
		t.Fatal("AddVoter did not return")
	}
}
