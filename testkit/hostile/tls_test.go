package hostile

// Real cluster on real time: real TLS (and SASL) handshakes over TCP; MemNet's
// listeners serve no TLS.

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/internal/certs"
	"github.com/strand-io/strand/internal/planted"
	"github.com/strand-io/strand/internal/wire"
	"github.com/strand-io/strand/node"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/testkit/testcluster"
	"github.com/strand-io/strand/testkit/testutil"
	"github.com/strand-io/strand/testkit/wait"
)

// Transport security: a 3-node cluster with TLS on every
// listener (client, Kafka, inter-broker, Raft, HTTP) and client
// certificates required. Records go through it with acks=all and RF 3
// over gRPC and over the Kafka protocol; clients that cannot prove
// themselves are refused; on the inter-broker listener and the Raft
// transport only broker principals are served.

// tlsClientConn dials addr over gRPC with cfg (nil: plaintext).
func tlsClientConn(t *testing.T, addr string, cfg *tls.Config) *grpc.ClientConn {
	t.Helper()
	creds := insecure.NewCredentials()
	if cfg != nil {
		creds = credentials.NewTLS(cfg)
	}
	cc, err := grpc.NewClient("passthrough:///"+addr, append([]grpc.DialOption{grpc.WithTransportCredentials(creds)}, wire.ErrorCodeDialOptions()...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// metadataErr asks addr for metadata over cfg.
func metadataErr(t *testing.T, addr string, cfg *tls.Config) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err := pb.NewMetadataClient(tlsClientConn(t, addr, cfg)).Metadata(ctx, &pb.MetadataRequest{})
	return err
}

// anyCert makes cfg present pair whatever CAs the server names (crypto/tls
// would otherwise present no certificate the server's CAs did not issue,
// and the test would try nothing).
func anyCert(t *testing.T, cfg *tls.Config, pair *certs.Pair) *tls.Config {
	t.Helper()
	kp, err := tls.X509KeyPair(pair.KeystorePEM(), pair.KeystorePEM())
	if err != nil {
		t.Fatal(err)
	}
	cfg.Certificates = nil
	cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &kp, nil }
	return cfg
}

func TestTLSCluster(t *testing.T) {
	metricsAddr := testutil.FreeAddr(t)
	c := testcluster.New(t, testcluster.Options{Nodes: 3, TLS: &testcluster.TLSOptions{}, Mutate: func(id int32, cfg *node.Config) {
		if id == 1 {
			cfg.MetricsListen = metricsAddr
		}
	}})
	ct := c.TLS
	addr := c.Member(1).Cfg.Listen
	alice := ct.Client(t, "alice")

	t.Run("produce and consume, acks=all, RF 3, over gRPC", func(t *testing.T) {
		c.CreateTopic("secure", 1, 3, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		p, err := client.NewProducer(c.ClientOpts(client.RequiredAcks(client.AllISRAcks), client.WithPartitioner(client.ManualPartitioner{}))...)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close(ctx)
		var recs []*client.Record
		for i := range 10 {
			recs = append(recs, &client.Record{Topic: "secure", Partition: 0, Value: fmt.Appendf(nil, "v%d", i)})
		}
		if err := p.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		cons, err := client.NewConsumer(c.ClientOpts()...)
		if err != nil {
			t.Fatal(err)
		}
		defer cons.Close(ctx)
		tp := client.TopicPartition{Topic: "secure", Partition: 0}
		cons.Assign(map[client.TopicPartition]int64{tp: client.OffsetEarliest})
		var got []string
		for len(got) < 10 {
			rs, err := cons.Poll(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rs {
				got = append(got, string(r.Value))
			}
		}
		if got[0] != "v0" || got[9] != "v9" {
			t.Fatalf("read %v", got)
		}
		// Replicated to all three over the TLS inter-broker listeners.
		wait.Eventually(t, 10*time.Second, "every replica has the ten records", func() bool {
			for id := int32(1); id <= 3; id++ {
				if l := c.Log(id, "secure", 0); l == nil || l.LogEndOffset() < 10 {
					return false
				}
			}
			return true
		})
	})

	t.Run("gossip encrypted with the cluster's key", func(t *testing.T) {
		wait.Eventually(t, 10*time.Second, "every node gossiping with the other two", func() bool {
			for _, m := range c.Running() {
				if m.Node.Gossip == nil || len(m.Node.Gossip.Members()) != 3 {
					return false
				}
			}
			return true
		})
	})

	t.Run("produce and consume over the Kafka listener with TLS", func(t *testing.T) {
		cfg := ct.ClientConfig(t, alice)
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()...), kgo.DialTLSConfig(cfg), kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"secure": {0: kgo.NewOffset().AtStart()}}))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "secure", Partition: 0, Value: []byte("kafka")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		seen := false
		for !seen {
			fs := cl.PollFetches(ctx)
			if err := ctx.Err(); err != nil {
				t.Fatal("the record produced over Kafka TLS was not read back")
			}
			fs.EachRecord(func(r *kgo.Record) { seen = seen || string(r.Value) == "kafka" })
		}
		// A plaintext Kafka client gets nothing from the TLS listener.
		plain, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()[0]), kgo.RequestRetries(0))
		if err != nil {
			t.Fatal(err)
		}
		defer plain.Close()
		pctx, pcancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer pcancel()
		if err := plain.Ping(pctx); err == nil {
			t.Fatal("a plaintext Kafka client was answered on a TLS listener")
		}
	})

	t.Run("clients that prove nothing are refused", func(t *testing.T) {
		if err := metadataErr(t, addr, ct.ClientConfig(t, alice)); err != nil {
			t.Fatalf("alice is refused: %v", err)
		}
		if err := metadataErr(t, addr, nil); err == nil {
			t.Error("a plaintext client was answered on a TLS listener")
		}
		if err := metadataErr(t, addr, ct.ClientConfig(t, nil)); err == nil {
			t.Error("a client without a certificate was answered (ssl.client.auth=required)")
		}
		other, _ := certs.NewCA("other-ca", time.Time{}, time.Time{})
		eve, _ := other.Issue(certs.Spec{CommonName: "alice", Client: true})
		if err := metadataErr(t, addr, anyCert(t, ct.ClientConfig(t, nil), eve)); err == nil {
			t.Error("another CA's certificate was taken")
		}
		now := time.Now()
		old, _ := ct.CA.Issue(certs.Spec{CommonName: "old", Client: true, NotBefore: now.Add(-48 * time.Hour), NotAfter: now.Add(-time.Hour)})
		if err := metadataErr(t, addr, anyCert(t, ct.ClientConfig(t, nil), old)); err == nil {
			t.Error("an expired certificate was taken")
		}
		bob := ct.Client(t, "bob")
		if err := metadataErr(t, addr, ct.ClientConfig(t, bob)); err != nil {
			t.Fatalf("bob before revocation: %v", err)
		}
		if err := ct.Revoke(bob.Cert); err != nil {
			t.Fatal(err)
		}
		wait.Eventually(t, 5*time.Second, "bob's revoked certificate refused", func() bool {
			return metadataErr(t, addr, ct.ClientConfig(t, bob)) != nil
		})
		if err := metadataErr(t, addr, ct.ClientConfig(t, alice)); err != nil {
			t.Fatalf("alice after bob's revocation: %v", err)
		}
	})

	t.Run("the inter-broker listener serves broker principals only", func(t *testing.T) {
		ib := c.Member(1).Node.InterBrokerAddr()
		img := c.Image()
		mallory := tlsClientConn(t, ib, ct.ClientConfig(t, ct.Client(t, "mallory")))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for name, err := range controllerCalls(ctx, pb.NewControllerClient(mallory), img, "secure") {
			if !notAPeer(err) {
				t.Errorf("mallory's Controller %s: %v, want CLUSTER_AUTHORIZATION_FAILED", name, err)
			}
		}
		for name, err := range replicaCalls(ctx, pb.NewConsumerClient(mallory), pb.NewTransactionsClient(mallory), img, "secure") {
			if !notAPeer(err) {
				t.Errorf("mallory's %s: %v, want CLUSTER_AUTHORIZATION_FAILED", name, err)
			}
		}
		// A node's certificate (CN=broker) is served.
		node := tlsClientConn(t, ib, ct.ClientConfig(t, ct.Client(t, "broker")))
		if _, err := pb.NewControllerClient(node).DescribeQuorum(ctx, &pb.DescribeQuorumRequest{}); notAPeer(err) || status.Code(err) == codes.Unavailable {
			t.Errorf("a broker's DescribeQuorum: %v", err)
		}
		_, err := pb.NewConsumerClient(node).Fetch(ctx, &pb.FetchRequest{ReplicaId: 2, MaxBytes: 1 << 20,
			Partitions: []*pb.FetchPartition{{Topic: "no-such-topic", Partition: 0, CurrentLeaderEpoch: -1, PartitionMaxBytes: 1 << 20}}})
		if notAPeer(err) || status.Code(err) == codes.Unavailable {
			t.Errorf("a broker's follower Fetch: %v", err)
		}
		// The check is what refused mallory.
		restore := planted.Set(planted.BrokerPrincipalUnchecked)
		_, err = pb.NewControllerClient(mallory).DescribeQuorum(ctx, &pb.DescribeQuorumRequest{})
		restore()
		if notAPeer(err) {
			t.Errorf("with the check planted away mallory is still refused: %v", err)
		}
	})

	t.Run("the Raft transport takes broker principals only", func(t *testing.T) {
		raft := c.Member(1).Cfg.ControllerListen
		ask := func(cfg *tls.Config) (uint64, error) {
			d := &net.Dialer{Timeout: 3 * time.Second}
			cfg.ServerName = "127.0.0.1"
			conn, err := tls.DialWithDialer(d, "tcp", raft, cfg)
			if err != nil {
				return 0, err
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(3 * time.Second))
			if _, err := conn.Write([]byte{0xE1}); err != nil { // the AddVoter catch-up query
				return 0, err
			}
			var b [8]byte
			if _, err := io.ReadFull(conn, b[:]); err != nil {
				return 0, err
			}
			return binary.BigEndian.Uint64(b[:]), nil
		}
		if idx, err := ask(ct.ClientConfig(t, ct.Client(t, "broker"))); err != nil || idx == 0 {
			t.Fatalf("a broker's log-end query: %d, %v", idx, err)
		}
		if _, err := ask(ct.ClientConfig(t, ct.Client(t, "mallory"))); err == nil {
			t.Fatal("mallory's connection to the Raft transport was answered")
		}
		if _, err := ask(ct.ClientConfig(t, nil)); err == nil {
			t.Fatal("a Raft connection without a certificate was answered")
		}
		d := &net.Dialer{Timeout: 3 * time.Second}
		conn, err := d.Dial("tcp", raft)
		if err == nil {
			conn.SetDeadline(time.Now().Add(3 * time.Second))
			conn.Write([]byte{0xE1})
			var b [8]byte
			if _, err := io.ReadFull(conn, b[:]); err == nil {
				t.Fatal("a plaintext Raft query was answered")
			}
			conn.Close()
		}
	})

	t.Run("HTTP listener over TLS", func(t *testing.T) {
		hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: ct.ClientConfig(t, alice)}}
		resp, err := hc.Get("https://" + metricsAddr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), "strand_") {
			t.Fatalf("GET /metrics: %d", resp.StatusCode)
		}
		if _, err := (&http.Client{Timeout: 3 * time.Second}).Get("http://" + metricsAddr + "/metrics"); err == nil {
			// A TLS server answers a plaintext request with a 400, not
			// the metrics; either way no metrics were served.
			t.Log("plaintext GET answered (with crypto/tls's 400)")
		}
	})

	t.Run("a rotated keystore is served without a restart", func(t *testing.T) {
		serial := func() string {
			cfg := ct.ClientConfig(t, alice)
			cfg.ServerName = "127.0.0.1"
			conn, err := tls.Dial("tcp", addr, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
		}
		before := serial()
		next, err := ct.CA.Issue(certs.Spec{CommonName: "broker", Hosts: []string{"127.0.0.1", "localhost"}, Server: true, Client: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := testcluster.WriteFileAtomic(ct.KeystoreFile(1), next.KeystorePEM()); err != nil {
			t.Fatal(err)
		}
		wait.Eventually(t, 5*time.Second, "the new keystore served", func() bool { return serial() == next.Cert.SerialNumber.String() })
		if before == next.Cert.SerialNumber.String() {
			t.Fatal("the same serial")
		}
		// The cluster still works through the new certificate.
		if err := metadataErr(t, addr, ct.ClientConfig(t, alice)); err != nil {
			t.Fatal(err)
		}
	})
}
