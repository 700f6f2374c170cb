package node_test

// Real node on real time: predates the simulation; could run on testcluster's
// MemNet inside synctest; not moved yet.

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/internal/auth"
	metadatapkg "github.com/strand-io/strand/metadata"
	"github.com/strand-io/strand/node"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/quota"
	"github.com/strand-io/strand/record"
	"github.com/strand-io/strand/testkit/testutil"
)

// headerSession is a TEST-ONLY session: the principal named by the call's
// x-test-principal metadata.
func headerSession(ctx context.Context) (auth.Session, bool) {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get("x-test-principal"); len(v) == 1 {
		return auth.Session{Principal: auth.User(v[0])}, true
	}
	return auth.Session{}, false
}

// TestGRPCProduceStreamThrottled: on the gRPC produce stream, a request
// over the principal's producer_byte_rate is answered with
// throttle_time_ms, and the stream's next request is not read until that
// time has passed; another principal's stream is not slowed meanwhile.
func TestGRPCProduceStreamThrottled(t *testing.T) {
	n := testutil.StartDev(t, t.TempDir(), func(cfg *node.Config) { cfg.TestingGRPCSession = headerSession })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	adm, err := client.NewAdmin(client.Bootstrap(n.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	if err := adm.CreateTopic(ctx, client.TopicSpec{Name: "g", Partitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	n.Quotas().SetUsers(map[string]quota.Values{"alice": {quota.ProducerByteRate: 10000}}, nil)
	conn, err := grpc.NewClient(n.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	stream := func(user string) pb.Producer_ProduceClient {
		s, err := pb.NewProducerClient(conn).Produce(metadata.AppendToOutgoingContext(ctx, "x-test-principal", user))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	req := func(corr int64, size int) *pb.ProduceRequest {
		b, err := record.Build(record.BatchOptions{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, []record.Record{{Value: make([]byte, size)}})
		if err != nil {
			t.Fatal(err)
		}
		return &pb.ProduceRequest{CorrelationId: corr, Acks: 1, TimeoutMs: 5000, Partitions: []*pb.PartitionRecords{{Topic: "g", Records: b}}}
	}
	alice, bob := stream("alice"), stream("bob")
	// 110 kB over the minimum 10 s span: 11000 B/s against 10000, so
	// (11000−10000)/10000 × 10 s = 1 s.
	if err := alice.Send(req(1, 110000)); err != nil {
		t.Fatal(err)
	}
	r1, err := alice.Recv()
	if err != nil {
		t.Fatal(err)
	}
	answered := time.Now()
	if r1.Partitions[0].ErrorCode != pb.ErrorCode_NONE || r1.ThrottleTimeMs < 1000 || r1.ThrottleTimeMs > 1100 {
		t.Fatalf("first answer: %v, throttle %d ms, want about 1000", r1.Partitions[0].ErrorCode, r1.ThrottleTimeMs)
	}
	if err := alice.Send(req(2, 10)); err != nil {
		t.Fatal(err)
	}
	if err := bob.Send(req(1, 110000)); err != nil {
		t.Fatal(err)
	}
	rb, err := bob.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(answered); d > 700*time.Millisecond || rb.ThrottleTimeMs != 0 {
		t.Errorf("bob answered after %v with throttle %d ms: slowed by alice's throttle", d, rb.ThrottleTimeMs)
	}
	if _, err := alice.Recv(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(answered); d < 900*time.Millisecond {
		t.Fatalf("alice's next request answered %v after a 1 s throttle", d)
	}
}

// TestGRPCUnaryRequestPercentage: a unary call of a principal over its
// request_percentage is answered only after the throttle time (capped at
// one window, 1 s); another principal's calls are not held back.
func TestGRPCUnaryRequestPercentage(t *testing.T) {
	n := testutil.StartDev(t, t.TempDir(), func(cfg *node.Config) { cfg.TestingGRPCSession = headerSession })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n.Quotas().SetUsers(map[string]quota.Values{"alice": {quota.RequestPercentage: 1e-9}}, nil)
	conn, err := grpc.NewClient(n.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	call := func(user string) time.Duration {
		start := time.Now()
		if _, err := pb.NewMetadataClient(conn).Metadata(metadata.AppendToOutgoingContext(ctx, "x-test-principal", user), &pb.MetadataRequest{}); err != nil {
			t.Fatal(err)
		}
		return time.Since(start)
	}
	if d := call("bob"); d > 700*time.Millisecond {
		t.Errorf("bob's Metadata took %v", d)
	}
	if d := call("alice"); d < 900*time.Millisecond || d > 5*time.Second {
		t.Errorf("alice's Metadata over request_percentage answered after %v, want the 1 s cap", d)
	}
}

// TestGRPCClientIDQuota: the SDK sends its ClientID with every call, and
// a client-id quota holds that client (whoever its user), not another.
func TestGRPCClientIDQuota(t *testing.T) {
	n := testutil.StartDev(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n.Quotas().Set(map[quota.Entity]quota.Values{{ClientID: metadatapkg.QuotaNamed("ops")}: {quota.RequestPercentage: 1e-9}})
	admin := func(id string) *client.Admin {
		adm, err := client.NewAdmin(client.Bootstrap(n.Addr()), client.ClientID(id))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { adm.Close() })
		return adm
	}
	call := func(adm *client.Admin) time.Duration {
		start := time.Now()
		if _, err := adm.Metadata(ctx, false); err != nil {
			t.Fatal(err)
		}
		return time.Since(start)
	}
	other, ops := admin("other"), admin("ops")
	call(other)
	if d := call(other); d > 700*time.Millisecond {
		t.Errorf("client other's Metadata took %v", d)
	}
	call(ops)
	if d := call(ops); d < 900*time.Millisecond || d > 5*time.Second {
		t.Errorf("client ops's Metadata over its request_percentage answered after %v, want the 1 s cap", d)
	}
	if r := n.Quotas().Rate(quota.Request, "", "ops"); r <= 0 {
		t.Errorf("client ops's request rate %v", r)
	}
}
