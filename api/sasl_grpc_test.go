package api_test

// Real cluster on real time: the SASL/SCRAM token is checked against the node's
// wall clock and real gRPC/Kafka connections over TCP; not moved to MemNet yet.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/internal/auth"
	"github.com/strand-io/strand/internal/planted"
	"github.com/strand-io/strand/internal/wire"
	"github.com/strand-io/strand/node"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/testkit/testcluster"
)

// TestSDKSCRAM: on a SASL_PLAINTEXT gRPC client listener, the SDK with
// WithSCRAM and the right password administers, produces and consumes,
// authenticating again once its token nears expiry and after the node
// restarted (and forgot it); a wrong password, an unknown mechanism, a
// call without a token and a forged token are refused with
// SASL_AUTHENTICATION_FAILED, at once.
func TestSDKSCRAM(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Nodes: 1, ListenerProtocols: map[string]string{auth.ListenerClient: "SASL_PLAINTEXT"},
		Mutate: func(_ int32, cfg *node.Config) { cfg.SASL.TokenLifetime = 3 * time.Second }})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// The credential is made through the (PLAINTEXT) Kafka listener.
	kcl, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer kcl.Close()
	if _, err := kadm.NewClient(kcl).AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "alice-secret"}}); err != nil {
		t.Fatal(err)
	}
	c.Eventually(10*time.Second, "alice's credential in the image", func() bool {
		_, ok := c.Member(1).Node.Repl.Image().ScramCredential("alice", 2)
		return ok
	})

	alice := client.WithSCRAM("SCRAM-SHA-512", "alice", "alice-secret")
	adm, err := client.NewAdmin(c.ClientOpts(alice)...)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	if err := adm.CreateTopic(ctx, client.TopicSpec{Name: "g", Partitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatalf("CreateTopic as alice: %v", err)
	}
	creds, failed, err := adm.DescribeUserScramCredentials(ctx, "alice", "nobody")
	if err != nil || len(creds["alice"]) != 1 || creds["alice"][0] != (client.ScramCredentialInfo{Mechanism: "SCRAM-SHA-512", Iterations: 4096}) ||
		!errors.Is(failed["nobody"], &errs.Error{Code: pb.ErrorCode_RESOURCE_NOT_FOUND}) {
		t.Fatalf("DescribeUserScramCredentials: %v %v %v", creds, failed, err)
	}
	p, err := client.NewProducer(c.ClientOpts(alice)...)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	p.Produce(ctx, &client.Record{Topic: "g", Value: []byte("v")}, func(_ *client.Record, err error) { errc <- err })
	if err := <-errc; err != nil {
		t.Fatalf("produce as alice: %v", err)
	}
	p.Close(ctx)
	cons, err := client.NewConsumer(c.ClientOpts(alice)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close(ctx)
	cons.Assign(map[client.TopicPartition]int64{{Topic: "g", Partition: 0}: client.OffsetEarliest})
	for got := false; !got; {
		recs, err := cons.Poll(ctx)
		if err != nil {
			t.Fatalf("consume as alice: %v", err)
		}
		got = len(recs) > 0
	}

	for _, tc := range []struct {
		name string
		opt  client.Opt
		code pb.ErrorCode
	}{
		{"wrong password", client.WithSCRAM("SCRAM-SHA-512", "alice", "wrong"), pb.ErrorCode_SASL_AUTHENTICATION_FAILED},
		{"other mechanism", client.WithSCRAM("SCRAM-SHA-256", "alice", "alice-secret"), pb.ErrorCode_SASL_AUTHENTICATION_FAILED},
		{"unknown mechanism", client.WithSCRAM("PLAIN", "alice", "alice-secret"), pb.ErrorCode_UNSUPPORTED_SASL_MECHANISM},
		{"no credential", nil, pb.ErrorCode_SASL_AUTHENTICATION_FAILED},
	} {
		opts := c.ClientOpts()
		if tc.opt != nil {
			opts = c.ClientOpts(tc.opt)
		}
		bad, err := client.NewAdmin(opts...)
		if err != nil {
			t.Fatal(err)
		}
		rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
		start := time.Now()
		_, err = bad.DescribeCluster(rctx)
		rcancel()
		bad.Close()
		if time.Since(start) > 10*time.Second {
			t.Errorf("%s: the refusal was retried for %v", tc.name, time.Since(start))
		}
		if errs.CodeOf(err) != tc.code && !errors.Is(err, &errs.Error{Code: tc.code}) {
			t.Fatalf("%s: %v, want %v", tc.name, err, tc.code)
		}
	}

	// A forged token, by hand.
	cc, err := grpc.NewClient("passthrough:///"+c.Bootstrap()[0], grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithContextDialer(c.Net.Dialer("client")))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	fctx := metadata.AppendToOutgoingContext(ctx, "strand-sasl-token", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
	_, err = pb.NewAdminClient(cc).DescribeUserScramCredentials(fctx, &pb.DescribeUserScramCredentialsRequest{})
	if status.Code(err) != codes.Unauthenticated || errs.CodeOf(wire.FromStatus(err)) != pb.ErrorCode_SASL_AUTHENTICATION_FAILED {
		t.Fatalf("forged token: %v", err)
	}
	// With the token check planted away, the same call is served.
	func() {
		defer planted.Set(planted.SaslTokenUnchecked)()
		if _, err := pb.NewAdminClient(cc).DescribeCluster(ctx, &pb.DescribeClusterRequest{}); err != nil {
			t.Fatalf("planted: %v", err)
		}
	}()

	// The token (3 s) has expired meanwhile: the SDK authenticates again.
	// A real sleep: the token's lifetime runs on the node's wall clock, and
	// nothing observable short of a refused call marks its expiry.
	time.Sleep(3 * time.Second)
	if _, _, err := adm.DescribeUserScramCredentials(ctx, "alice"); err != nil {
		t.Fatalf("after the token expired: %v", err)
	}
	// A restarted node has forgotten every token it issued.
	c.Stop(1)
	c.Start(1)
	c.WaitReady(30 * time.Second)
	if _, _, err := adm.DescribeUserScramCredentials(ctx, "alice"); err != nil {
		t.Fatalf("after a restart: %v", err)
	}
}
