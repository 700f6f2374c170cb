package hostile

// Real node on real time: the hostile requests are raw bytes on a real TCP connection
// to the Kafka listener; could dial MemNet inside synctest; not moved yet.

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/internal/wire"
	"github.com/strand-io/strand/metadata"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// rawFrom dials addr from the local address src, as a process on another
// host of the network would (on Linux every 127.0.0.0/8 address is a
// loopback address a socket can bind).
func (tg *target) rawFrom(src, addr string) *grpc.ClientConn {
	tg.t.Helper()
	probe, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.ParseIP(src)})
	if err != nil {
		tg.t.Skipf("cannot bind %s here: %v", src, err)
	}
	probe.Close()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	cc, err := grpc.NewClient("passthrough:///"+addr, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) { return d.DialContext(ctx, "tcp", a) })}, wire.ErrorCodeDialOptions()...)...)
	if err != nil {
		tg.t.Fatal(err)
	}
	tg.t.Cleanup(func() { cc.Close() })
	tg.conns = append(tg.conns, cc)
	return cc
}

// notAPeer reports whether err is the inter-broker listener's refusal of
// an address that is no node's.
func notAPeer(err error) bool {
	return status.Code(err) == codes.PermissionDenied && errs.CodeOf(err) == pb.ErrorCode_CLUSTER_AUTHORIZATION_FAILED
}

// TestInterBrokerListenerServesOnlyPeers: the inter-broker listener of a
// node whose cluster lives on 127.0.0.1 refuses every call from
// 127.0.0.2 (another host, as far as the node can tell), except a
// RegisterBroker whose own address is 127.0.0.2 — which the controller
// then refuses as a duplicate of the live node 1. Calls from the node's
// own address are served. Nothing changes; the node serves clients.
func TestInterBrokerListenerServesOnlyPeers(t *testing.T) {
	tg := devTarget(t)
	tg.createTopic("kept", 1, 1)
	n := tg.dev
	img := n.Repl.Image()
	before := brokerStates(img)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stranger := tg.rawFrom("127.0.0.2", n.InterBrokerAddr())
	calls := controllerCalls(ctx, pb.NewControllerClient(stranger), img, "kept")
	for name, err := range replicaCalls(ctx, pb.NewConsumerClient(stranger), pb.NewTransactionsClient(stranger), img, "kept") {
		calls[name] = err
	}
	for name, err := range calls {
		if !notAPeer(err) {
			t.Errorf("%s from 127.0.0.2 on the inter-broker listener: %v (gRPC %v, code %v), want PERMISSION_DENIED with CLUSTER_AUTHORIZATION_FAILED",
				name, err, status.Code(err), errs.CodeOf(err))
		}
	}
	c := pb.NewControllerClient(stranger)
	// A registration in its own name gets past the filter (a new broker
	// must register before anyone knows its address), and is then a
	// duplicate of the live node 1.
	resp, err := c.RegisterBroker(ctx, &pb.RegisterBrokerRequest{NodeId: 1, IncarnationId: "stranger", Address: "127.0.0.2:1", InterBrokerAddress: "127.0.0.2:2", ClusterId: img.ClusterID})
	if err != nil || resp.ErrorCode != pb.ErrorCode_DUPLICATE_BROKER_REGISTRATION {
		t.Errorf("RegisterBroker of node 1 in 127.0.0.2's own name: %v %v, want DUPLICATE_BROKER_REGISTRATION", resp, err)
	}
	// In another host's name it is refused at the door.
	_, err = c.RegisterBroker(ctx, &pb.RegisterBrokerRequest{NodeId: 7, IncarnationId: "stranger", Address: "127.0.0.1:1", InterBrokerAddress: "127.0.0.1:2", ClusterId: img.ClusterID})
	if !notAPeer(err) {
		t.Errorf("RegisterBroker from 127.0.0.2 in 127.0.0.1's name: %v, want CLUSTER_AUTHORIZATION_FAILED", err)
	}
	// The node's own address is a peer's.
	if _, err := pb.NewControllerClient(tg.raw(n.InterBrokerAddr())).DescribeQuorum(ctx, &pb.DescribeQuorumRequest{}); err != nil {
		t.Errorf("DescribeQuorum from the cluster's address: %v", err)
	}
	tg.settle(n.Repl.Image)
	now := n.Repl.Image()
	for id, s := range before {
		if got := brokerStates(now)[id]; got != s {
			t.Errorf("broker %d changed: %+v, was %+v", id, got, s)
		}
	}
	if len(now.Brokers) != len(before) {
		t.Errorf("brokers registered from 127.0.0.2: %v", now.Brokers)
	}
	if now.ACLs.Len() != 0 {
		t.Errorf("ACLs created from 127.0.0.2: %v", now.ACLs.All())
	}
	tg.dropRaw()
	tg.assertServes()
}

// TestRegistrationOfLiveBrokerIsRefused: a RegisterBroker for a live
// broker's id at another address, sent where registrations go (the active
// controller's inter-broker listener), is refused with
// DUPLICATE_BROKER_REGISTRATION and changes nothing; once that broker is
// gone and its session expired (it is fenced), the same registration is
// accepted.
func TestRegistrationOfLiveBrokerIsRefused(t *testing.T) {
	tg := clusterTarget(t, 3)
	// The active controller may change while the cluster settles (an
	// election answers NOT_CONTROLLER meanwhile): ask whichever is active
	// until one answers.
	var active int32
	tg.cluster.Eventually(30*time.Second, "an active controller", func() bool {
		active = tg.cluster.ActiveController()
		return active >= 0
	})
	victim := int32(1)
	if victim == active {
		victim = 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	img := tg.cluster.Image()
	req := &pb.RegisterBrokerRequest{NodeId: victim, IncarnationId: "impostor", Address: "127.0.0.1:1", InterBrokerAddress: "127.0.0.1:2", ClusterId: img.ClusterID,
		SupportedFeatures: metadata.SupportedRanges()}
	register := func() (*pb.RegisterBrokerResponse, error) {
		var resp *pb.RegisterBrokerResponse
		var err error
		tg.cluster.Eventually(30*time.Second, "a registration answered by the active controller", func() bool {
			a := tg.cluster.ActiveController()
			if a < 0 || a == victim && tg.cluster.NodeOf(victim) == nil {
				return false
			}
			resp, err = pb.NewControllerClient(tg.raw(tg.cluster.InterBrokerAddrs()[a])).RegisterBroker(ctx, req)
			return err != nil || resp.ErrorCode != pb.ErrorCode_NOT_CONTROLLER
		})
		return resp, err
	}
	resp, err := register()
	if err != nil || resp.ErrorCode != pb.ErrorCode_DUPLICATE_BROKER_REGISTRATION {
		t.Fatalf("registration of live broker %d at another address: %v %v, want DUPLICATE_BROKER_REGISTRATION", victim, resp, err)
	}
	if got, was := tg.cluster.Image().Brokers[victim], img.Brokers[victim]; got.Epoch != was.Epoch || got.Address != was.Address || got.Fenced {
		t.Fatalf("refused registration changed broker %d: %+v, was %+v", victim, got, was)
	}
	tg.cluster.Kill(victim)
	tg.cluster.Eventually(30*time.Second, "the killed broker fenced", func() bool {
		b := tg.cluster.Image().Brokers[victim]
		return b != nil && b.Fenced
	})
	resp, err = register()
	if err != nil || resp.ErrorCode != pb.ErrorCode_NONE {
		t.Fatalf("registration after broker %d's session expired: %v %v", victim, resp, err)
	}
	tg.cluster.Eventually(10*time.Second, "the new registration applied", func() bool {
		b := tg.cluster.Image().Brokers[victim]
		return b != nil && b.Epoch == resp.BrokerEpoch && b.InterBrokerAddress == "127.0.0.1:2"
	})
}
