package node_test

// Real node on real time: races a create against node.Start on real listeners;
// could run on testcluster's MemNet inside synctest; not moved yet.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/internal/planted"
	"github.com/strand-io/strand/internal/wire"
	"github.com/strand-io/strand/node"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/testkit/testcluster"
	"github.com/strand-io/strand/testkit/testutil"
	"github.com/strand-io/strand/testkit/wait"
)

// rawConn is a plain gRPC connection whose refusals carry their Kafka code.
func rawConn(t testing.TB, addr string) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient("passthrough:///"+addr, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, wire.ErrorCodeDialOptions()...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// startingRefusal checks that err is what a starting node answers a client.
func startingRefusal(err error, waitingFor string) error {
	if err == nil {
		return errors.New("a client request was answered while the node was not ready")
	}
	if errs.CodeOf(err) != pb.ErrorCode_BROKER_NOT_AVAILABLE || !errs.IsRetriable(err) || status.Code(err) != codes.Unavailable {
		return fmt.Errorf("a starting node refused a client request with %v (code %v, gRPC %v), want retriable BROKER_NOT_AVAILABLE as UNAVAILABLE", err, errs.CodeOf(err), status.Code(err))
	}
	if msg := err.Error(); !strings.Contains(msg, "node 1 is starting") || !strings.Contains(msg, "registered with the controller, unfenced and caught up") || !strings.Contains(msg, waitingFor) {
		return fmt.Errorf("the refusal does not say the node is starting and what it waits for (%q): %v", waitingFor, err)
	}
	return nil
}

// createWhileStarting starts a dev node and, racing its start, creates a
// topic through the SDK as soon as the port accepts connections. With
// held, the node's registration is refused until the SDK's CreateTopics
// has reached the node twice; the SDK must still be retrying then (and a
// raw call must get the starting node's refusal); once released, the
// create must succeed. It returns what went wrong.
func createWhileStarting(t *testing.T, held bool) error {
	cfg := testutil.DevConfig(t, t.TempDir())
	hold := testutil.NewRegistrationHold(held)
	cfg.UnaryInterceptors = []grpc.UnaryServerInterceptor{hold.Intercept}
	started := make(chan *node.Node, 1)
	startErr := make(chan error, 1)
	go func() {
		n, err := node.Start(cfg)
		if err != nil {
			startErr <- err
			return
		}
		started <- n
	}()
	t.Cleanup(func() {
		hold.Release()
		select {
		case n := <-started:
			n.Stop()
		case <-startErr:
		}
	})
	if err := wait.Until(10*time.Second, "the port to accept connections", func() bool {
		c, err := net.DialTimeout("tcp", cfg.Listen, 50*time.Millisecond)
		if err != nil {
			return false
		}
		c.Close()
		return true
	}); err != nil {
		return err
	}
	adm, err := client.NewAdmin(client.Bootstrap(cfg.Listen), client.RetryBackoff(10*time.Millisecond, 100*time.Millisecond), client.Logger(testutil.Logger()))
	if err != nil {
		return err
	}
	defer adm.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	created := make(chan error, 1)
	go func() {
		created <- adm.CreateTopic(ctx, client.TopicSpec{Name: "t1", Partitions: 2, ReplicationFactor: 1})
	}()
	if held {
		err := wait.Until(15*time.Second, "the SDK's CreateTopics to reach the node twice while its registration is held", func() bool {
			return len(created) > 0 || hold.Seen(pb.Admin_CreateTopics_FullMethodName) >= 2 && hold.Seen(pb.Controller_RegisterBroker_FullMethodName) >= 1
		})
		if err != nil {
			select {
			case cerr := <-created:
				return fmt.Errorf("CreateTopic returned while the node could not be ready: %v", cerr)
			default:
				return err
			}
		}
		select {
		case cerr := <-created:
			return fmt.Errorf("CreateTopic returned while the node could not be ready (registration held): %v", cerr)
		default:
		}
		_, merr := pb.NewMetadataClient(rawConn(t, cfg.Listen)).Metadata(ctx, &pb.MetadataRequest{})
		if err := startingRefusal(merr, "waiting to register with the active controller"); err != nil {
			return err
		}
		hold.Release()
	}
	select {
	case err := <-created:
		if err != nil {
			return fmt.Errorf("CreateTopic racing the node's start: %w", err)
		}
	case <-ctx.Done():
		return errors.New("CreateTopic did not return")
	}
	md, err := adm.Metadata(ctx, false, "t1")
	if err != nil {
		return err
	}
	if len(md.Topics) != 1 || len(md.Topics[0].Partitions) != 2 || md.Topics[0].Partitions[0].LeaderId != 1 {
		return fmt.Errorf("after CreateTopic the node describes t1 as %v", md.Topics)
	}
	return nil
}

// TestCreateTopicRacingNodeStart: a script that starts a node and creates a
// topic as soon as the port answers works every time (it used to
// fail with INVALID_REPLICATION_FACTOR "available brokers: 0").
// Half the starts hold the registration to make the window wide; the
// others race the plain start.
func TestCreateTopicRacingNodeStart(t *testing.T) {
	for i := range 6 {
		held := i%2 == 0
		if err := createWhileStarting(t, held); err != nil {
			t.Fatalf("start %d (registration held: %v): %v", i, held, err)
		}
	}
}

// TestCreateTopicRacingNodeStartCatchesServeBeforeReady: with the fix
// undone, the same scenario fails.
func TestCreateTopicRacingNodeStartCatchesServeBeforeReady(t *testing.T) {
	defer planted.Set(planted.ServeBeforeReady)()
	err := createWhileStarting(t, true)
	if err == nil {
		t.Fatal("with serve-before-ready planted, creating a topic while the node starts did not fail")
	}
	t.Logf("with serve-before-ready planted: %v", err)
}

// healthAndGate holds a dev node's registration and checks that health and
// the request gate agree: NOT_SERVING and every client RPC refused while
// not ready (what other nodes send still answered), SERVING once ready and
// from then on served, with the node listing itself as a live broker.
func healthAndGate(t *testing.T) error {
	cfg := testutil.DevConfig(t, t.TempDir())
	hold := testutil.NewRegistrationHold(true)
	cfg.UnaryInterceptors = []grpc.UnaryServerInterceptor{hold.Intercept}
	n, err := node.Start(cfg)
	if err != nil {
		return err
	}
	t.Cleanup(func() { n.Stop() })
	cc := rawConn(t, n.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := wait.Until(10*time.Second, "two held registrations", func() bool { return hold.Seen(pb.Controller_RegisterBroker_FullMethodName) >= 2 }); err != nil {
		return err
	}
	hc := healthpb.NewHealthClient(cc)
	if r, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil || r.Status != healthpb.HealthCheckResponse_NOT_SERVING {
		return fmt.Errorf("health before ready: %v %v, want NOT_SERVING", r, err)
	}
	_, err = pb.NewMetadataClient(cc).Metadata(ctx, &pb.MetadataRequest{})
	if err := startingRefusal(err, "waiting to register with the active controller"); err != nil {
		return fmt.Errorf("Metadata: %w", err)
	}
	_, err = pb.NewAdminClient(cc).CreateTopics(ctx, &pb.CreateTopicsRequest{Topics: []*pb.CreatableTopic{{Name: "early", NumPartitions: 1, ReplicationFactor: 1}}})
	if err := startingRefusal(err, "waiting to register"); err != nil {
		return fmt.Errorf("CreateTopics: %w", err)
	}
	_, err = pb.NewConsumerClient(cc).Fetch(ctx, &pb.FetchRequest{ReplicaId: -1, MaxBytes: 1 << 20, Partitions: []*pb.FetchPartition{{Topic: "x", Partition: 0, CurrentLeaderEpoch: -1}}})
	if err := startingRefusal(err, "waiting to register"); err != nil {
		return fmt.Errorf("consumer Fetch: %w", err)
	}
	st, err := pb.NewProducerClient(cc).Produce(ctx)
	if err == nil {
		_, err = st.Recv()
	}
	if err := startingRefusal(err, "waiting to register"); err != nil {
		return fmt.Errorf("Produce stream: %w", err)
	}
	// What other nodes send, on the inter-broker listener, is served meanwhile.
	ib := rawConn(t, n.InterBrokerAddr())
	if _, err := pb.NewControllerClient(ib).DescribeQuorum(ctx, &pb.DescribeQuorumRequest{}); err != nil {
		return fmt.Errorf("DescribeQuorum (controller RPC) while starting: %v", err)
	}
	if _, err := pb.NewConsumerClient(ib).Fetch(ctx, &pb.FetchRequest{ReplicaId: 2, Partitions: []*pb.FetchPartition{{Topic: "x", Partition: 0, CurrentLeaderEpoch: -1}}}); err != nil {
		return fmt.Errorf("follower Fetch while starting: %v", err)
	}
	if _, err := pb.NewConsumerClient(ib).OffsetForLeaderEpoch(ctx, &pb.OffsetForLeaderEpochRequest{ReplicaId: 2}); err != nil {
		return fmt.Errorf("follower OffsetForLeaderEpoch while starting: %v", err)
	}
	if _, err := pb.NewTransactionsClient(ib).WriteTxnMarkers(ctx, &pb.WriteTxnMarkersRequest{}); err != nil {
		return fmt.Errorf("WriteTxnMarkers while starting: %v", err)
	}
	if _, err := pb.NewTransactionsClient(ib).AddPartitionsToTxn(ctx, &pb.AddPartitionsToTxnRequest{}); err != nil {
		return fmt.Errorf("AddPartitionsToTxn while starting: %v", err)
	}
	if n.Ready() {
		return errors.New("the node says it is ready with its registration held")
	}

	hold.Release()
	w, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		return err
	}
	for {
		r, err := w.Recv()
		if err != nil {
			return fmt.Errorf("health watch: %v", err)
		}
		if r.Status == healthpb.HealthCheckResponse_SERVING {
			break
		}
	}
	// SERVING means served, by a node that lists itself as a live broker.
	md, err := pb.NewMetadataClient(cc).Metadata(ctx, &pb.MetadataRequest{})
	if err != nil {
		return fmt.Errorf("Metadata once SERVING: %v", err)
	}
	if len(md.Brokers) != 1 || md.Brokers[0].NodeId != 1 || md.Brokers[0].Fenced {
		return fmt.Errorf("once SERVING the node describes its brokers as %v, want itself unfenced", md.Brokers)
	}
	cr, err := pb.NewAdminClient(cc).CreateTopics(ctx, &pb.CreateTopicsRequest{Topics: []*pb.CreatableTopic{{Name: "t1", NumPartitions: 1, ReplicationFactor: 1}}})
	if err != nil || cr.Topics[0].ErrorCode != pb.ErrorCode_NONE {
		return fmt.Errorf("CreateTopics once SERVING: %v %v", err, cr)
	}
	return nil
}

// TestHealthFollowsReadiness: NOT_SERVING while a node cannot serve, and
// its client requests refused meanwhile; SERVING once it can, and served.
func TestHealthFollowsReadiness(t *testing.T) {
	if err := healthAndGate(t); err != nil {
		t.Fatal(err)
	}
}

// TestHealthFollowsReadinessCatchesServeBeforeReady: with the fix undone,
// the same checks fail.
func TestHealthFollowsReadinessCatchesServeBeforeReady(t *testing.T) {
	defer planted.Set(planted.ServeBeforeReady)()
	err := healthAndGate(t)
	if err == nil {
		t.Fatal("with serve-before-ready planted, the health and gate checks passed")
	}
	t.Logf("with serve-before-ready planted: %v", err)
}

// TestReadinessOfSplitRoles: a controller-only node is ready (SERVING) once
// it knows the active controller and has caught up; a broker-only node
// restarted while it cannot reach the controller is NOT_SERVING and
// refuses clients until it has registered, been unfenced and caught up.
func TestReadinessOfSplitRoles(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Nodes: 2, Roles: func(id int32) (bool, bool) { return id == 2, id == 1 }})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	health := func(id int32) healthpb.HealthCheckResponse_ServingStatus {
		r, err := healthpb.NewHealthClient(rawConn(t, c.Member(id).Node.Addr())).Check(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			t.Fatalf("health of node %d: %v", id, err)
		}
		return r.Status
	}
	if s := health(1); s != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("controller-only node: %v, want SERVING", s)
	}
	if s := health(2); s != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("broker-only node: %v, want SERVING", s)
	}
	c.Stop(2)
	c.Net.Cut(c.Member(1).Name(), c.Member(2).Name())
	c.Start(2)
	n2 := c.Member(2).Node
	if s := health(2); s != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("broker-only node that cannot reach the controller: %v, want NOT_SERVING", s)
	}
	_, err := pb.NewMetadataClient(rawConn(t, n2.Addr())).Metadata(ctx, &pb.MetadataRequest{})
	if errs.CodeOf(err) != pb.ErrorCode_BROKER_NOT_AVAILABLE || !strings.Contains(err.Error(), "node 2 is starting") || !strings.Contains(err.Error(), "waiting to register") {
		t.Fatalf("broker-only node that cannot reach the controller answered Metadata with %v", err)
	}
	c.Net.Heal(c.Member(2).Name())
	c.WaitReady(20 * time.Second)
	c.Eventually(5*time.Second, "node 2 SERVING", func() bool { return health(2) == healthpb.HealthCheckResponse_SERVING })
	adm, err := client.NewAdmin(c.ClientOpts()...)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	if err := adm.CreateTopic(ctx, client.TopicSpec{Name: "t1", Partitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
}
