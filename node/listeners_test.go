package node_test

// Real node on real time: binds every interface and checks the advertised host
// address, which needs the machine's real network interfaces.

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/strand-io/strand/node"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/testkit/testutil"
)

// TestInterBrokerAdvertiseDefaults: a node listening on every interface
// (as in a container) advertises its inter-broker listener at the host it
// advertises to clients, registers that address, and serves the internal
// RPCs there and not on the client listener.
func TestInterBrokerAdvertiseDefaults(t *testing.T) {
	cfg := testutil.DevConfig(t, t.TempDir())
	_, cport, _ := net.SplitHostPort(cfg.Listen)
	_, ibport, _ := net.SplitHostPort(cfg.InterBrokerListen)
	cfg.Listen, cfg.Advertise = "0.0.0.0:"+cport, "localhost:"+cport
	cfg.InterBrokerListen = "0.0.0.0:" + ibport
	n := testutil.StartNode(t, cfg)
	if want := "localhost:" + ibport; n.InterBrokerAddr() != want {
		t.Fatalf("inter-broker address %q, want %q", n.InterBrokerAddr(), want)
	}
	if b := n.Repl.Image().Brokers[1]; b.InterBrokerAddress != n.InterBrokerAddr() || b.Address != n.Addr() {
		t.Fatalf("registration %+v, want client %s and inter-broker %s", b, n.Addr(), n.InterBrokerAddr())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := pb.NewControllerClient(rawConn(t, n.InterBrokerAddr())).DescribeQuorum(ctx, &pb.DescribeQuorumRequest{}); err != nil {
		t.Fatalf("DescribeQuorum on the inter-broker listener: %v", err)
	}
	if _, err := pb.NewControllerClient(rawConn(t, n.Addr())).DescribeQuorum(ctx, &pb.DescribeQuorumRequest{}); status.Code(err) != codes.Unimplemented {
		t.Fatalf("DescribeQuorum on the client listener: %v, want UNIMPLEMENTED", err)
	}
	// Without an inter-broker address at all, a free port on the client
	// listener's host.
	cfg2 := testutil.DevConfig(t, t.TempDir())
	cfg2.InterBrokerListen = ""
	n2, err := node.Start(cfg2)
	if err != nil {
		t.Fatal(err)
	}
	defer n2.Stop()
	h, p, _ := net.SplitHostPort(n2.InterBrokerAddr())
	if port, _ := strconv.Atoi(p); h != "127.0.0.1" || port == 0 || n2.InterBrokerAddr() == n2.Addr() {
		t.Fatalf("default inter-broker address %q (client %q)", n2.InterBrokerAddr(), n2.Addr())
	}
}
