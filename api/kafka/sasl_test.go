package kafka_test

// Real cluster on real time: real SASL handshakes over TCP from franz-go and
// librdkafka-based clients; MemNet's listeners are in-memory only.

import (
	"bytes"
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/internal/auth"
	"github.com/strand-io/strand/internal/planted"
	iscram "github.com/strand-io/strand/internal/scram"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/testkit/testcluster"
)

// saslCluster is one node whose Kafka listener is SASL_PLAINTEXT, with
// alice (SCRAM-SHA-256, 8192 iterations) and bob (SCRAM-SHA-512) made
// through the SDK on the (PLAINTEXT) gRPC listener.
func saslCluster(t *testing.T) *testcluster.Cluster {
	t.Helper()
	c := testcluster.New(t, testcluster.Options{Nodes: 1, ListenerProtocols: map[string]string{auth.ListenerKafka: "SASL_PLAINTEXT"}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm, err := client.NewAdmin(c.ClientOpts()...)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	res, err := adm.AlterUserScramCredentials(ctx, []client.ScramUpsertion{
		{User: "alice", Mechanism: "SCRAM-SHA-256", Password: "alice-secret", Iterations: 8192},
		{User: "bob", Mechanism: "SCRAM-SHA-512", Password: "bob-secret"},
	}, nil)
	if err != nil || res["alice"] != nil || res["bob"] != nil {
		t.Fatalf("AlterUserScramCredentials: %v %v", res, err)
	}
	c.CreateTopic("s", 1, 1, nil)
	return c
}

// TestKafkaSASLScram: franz-go authenticates with SCRAM-SHA-256 and -512
// and produces and consumes; a wrong password is refused with
// SASL_AUTHENTICATION_FAILED.
func TestKafkaSASLScram(t *testing.T) {
	c := saslCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name string
		mech kgo.Opt
	}{
		{"alice SCRAM-SHA-256", kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism())},
		{"bob SCRAM-SHA-512", kgo.SASL(scram.Auth{User: "bob", Pass: "bob-secret"}.AsSha512Mechanism())},
	} {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()...), tc.mech, kgo.ConsumeTopics("s"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "s", Value: []byte(tc.name)}).FirstErr(); err != nil {
			t.Fatalf("%s: produce: %v", tc.name, err)
		}
		got := map[string]bool{}
		for !got[tc.name] {
			fs := cl.PollFetches(ctx)
			if err := fs.Err0(); err != nil {
				t.Fatalf("%s: fetch: %v", tc.name, err)
			}
			fs.EachRecord(func(r *kgo.Record) { got[string(r.Value)] = true })
		}
		cl.Close()
	}

	for _, tc := range []struct {
		name string
		mech kgo.Opt
	}{
		{"wrong password", kgo.SASL(scram.Auth{User: "alice", Pass: "nope"}.AsSha256Mechanism())},
		{"unknown user", kgo.SASL(scram.Auth{User: "mallory", Pass: "alice-secret"}.AsSha256Mechanism())},
		{"right password, other mechanism", kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism())},
	} {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()...), tc.mech)
		if err != nil {
			t.Fatal(err)
		}
		rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
		_, err = kmsg.NewPtrMetadataRequest().RequestWith(rctx, cl)
		rcancel()
		cl.Close()
		if !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Fatalf("%s: Metadata error %v, want SASL_AUTHENTICATION_FAILED", tc.name, err)
		}
	}
}

// TestKafkaSASLWire: on a SASL_PLAINTEXT listener ApiVersions is answered
// before authentication and any other request closes the connection;
// PLAIN is refused (UNSUPPORTED_SASL_MECHANISM, then closed); a wrong
// SCRAM proof is answered SASL_AUTHENTICATION_FAILED with Kafka's message,
// then closed; SaslHandshake v0 (raw tokens) is answered UNSUPPORTED_VERSION.
func TestKafkaSASLWire(t *testing.T) {
	c := saslCluster(t)
	addr := c.KafkaAddrs()[0]
	dial := func() net.Conn {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	handshake := func(conn net.Conn, mech string, version int16) *kmsg.SASLHandshakeResponse {
		t.Helper()
		req := kmsg.NewPtrSASLHandshakeRequest()
		req.SetVersion(version)
		req.Mechanism = mech
		_, body, err := roundTrip(t, conn, encode(req, 1))
		if err != nil {
			t.Fatalf("SaslHandshake %s: %v", mech, err)
		}
		resp := kmsg.NewPtrSASLHandshakeResponse()
		resp.SetVersion(version)
		if err := resp.ReadFrom(body); err != nil {
			t.Fatal(err)
		}
		return resp
	}
	authenticate := func(conn net.Conn, msg []byte) *kmsg.SASLAuthenticateResponse {
		t.Helper()
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.SetVersion(2)
		req.SASLAuthBytes = msg
		_, body, err := roundTrip(t, conn, encode(req, 2))
		if err != nil {
			t.Fatalf("SaslAuthenticate: %v", err)
		}
		resp := kmsg.NewPtrSASLAuthenticateResponse()
		resp.SetVersion(2)
		if err := resp.ReadFrom(body[1:]); err != nil { // response header v1: a tag byte
			t.Fatal(err)
		}
		return resp
	}
	metadata := func() []byte {
		m := kmsg.NewPtrMetadataRequest()
		m.SetVersion(9)
		return encode(m, 3)
	}

	t.Run("request before authentication", func(t *testing.T) {
		// With the gate left open (planted), Metadata is answered.
		restore := planted.Set(planted.SaslGateOpen)
		conn := dial()
		if _, _, err := roundTrip(t, conn, metadata()); err != nil {
			restore()
			t.Fatalf("planted open gate: %v", err)
		}
		restore()
		conn = dial()
		apiv := kmsg.NewPtrApiVersionsRequest()
		if _, _, err := roundTrip(t, conn, encode(apiv, 1)); err != nil {
			t.Fatalf("ApiVersions before authentication: %v", err)
		}
		closedByServer(t, conn, metadata())
		// ApiVersions again and again cannot hold an unauthenticated
		// connection open: one, a retry (KIP-511), then the close.
		conn = dial()
		for i := 0; i < 2; i++ {
			if _, _, err := roundTrip(t, conn, encode(apiv, 1)); err != nil {
				t.Fatalf("ApiVersions %d before authentication: %v", i+1, err)
			}
		}
		closedByServer(t, conn, encode(apiv, 1))
		// After the handshake, still nothing but SaslAuthenticate.
		conn = dial()
		if r := handshake(conn, "SCRAM-SHA-256", 1); r.ErrorCode != 0 {
			t.Fatalf("handshake: %d", r.ErrorCode)
		}
		closedByServer(t, conn, metadata())
	})

	t.Run("PLAIN on SASL_PLAINTEXT", func(t *testing.T) {
		conn := dial()
		r := handshake(conn, "PLAIN", 1)
		if r.ErrorCode != int16(pb.ErrorCode_UNSUPPORTED_SASL_MECHANISM) {
			t.Fatalf("PLAIN handshake: code %d", r.ErrorCode)
		}
		for _, m := range r.SupportedMechanisms {
			if m == "PLAIN" {
				t.Fatalf("PLAIN offered on SASL_PLAINTEXT: %v", r.SupportedMechanisms)
			}
		}
		closedByServer(t, conn, metadata())
		// franz-go's PLAIN is refused too.
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl); !errors.Is(err, kerr.UnsupportedSaslMechanism) {
			t.Fatalf("franz-go PLAIN: %v", err)
		}
	})

	t.Run("wrong SCRAM proof", func(t *testing.T) {
		conn := dial()
		if r := handshake(conn, "SCRAM-SHA-256", 1); r.ErrorCode != 0 {
			t.Fatalf("handshake: %d", r.ErrorCode)
		}
		cl := iscram.SHA256.NewClient("alice", "wrong", "")
		first, _, _ := cl.Step(nil)
		r := authenticate(conn, first)
		if r.ErrorCode != 0 {
			t.Fatalf("client-first: %d", r.ErrorCode)
		}
		final, _, err := cl.Step(r.SASLAuthBytes)
		if err != nil {
			t.Fatal(err)
		}
		r = authenticate(conn, final)
		want := "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256"
		if r.ErrorCode != int16(pb.ErrorCode_SASL_AUTHENTICATION_FAILED) || r.ErrorMessage == nil || *r.ErrorMessage != want {
			t.Fatalf("wrong proof: code %d message %v", r.ErrorCode, r.ErrorMessage)
		}
		closedByServer(t, conn, metadata())
	})

	t.Run("right SCRAM proof by hand", func(t *testing.T) {
		conn := dial()
		handshake(conn, "SCRAM-SHA-256", 1)
		cl := iscram.SHA256.NewClient("alice", "alice-secret", "")
		first, _, _ := cl.Step(nil)
		final, _, err := cl.Step(authenticate(conn, first).SASLAuthBytes)
		if err != nil {
			t.Fatal(err)
		}
		r := authenticate(conn, final)
		if r.ErrorCode != 0 || r.SessionLifetimeMillis != 0 {
			t.Fatalf("right proof: %+v", r)
		}
		if _, done, err := cl.Step(r.SASLAuthBytes); !done || err != nil {
			t.Fatalf("server signature: %v", err)
		}
		if _, _, err := roundTrip(t, conn, metadata()); err != nil {
			t.Fatalf("Metadata after authentication: %v", err)
		}
	})

	t.Run("handshake v0", func(t *testing.T) {
		conn := dial()
		if r := handshake(conn, "SCRAM-SHA-256", 0); r.ErrorCode != int16(pb.ErrorCode_UNSUPPORTED_VERSION) {
			t.Fatalf("v0 handshake: %d", r.ErrorCode)
		}
		// Raw tokens would follow: the connection is closed.
		closedByServer(t, conn, metadata())
	})

	// ApiVersions lists SaslHandshake 0-1, as Kafka does: librdkafka
	// negotiates a mechanism only when the range holds 0 (then sends v1).
	t.Run("ApiVersions lists SaslHandshake 0-1", func(t *testing.T) {
		conn := dial()
		_, body, err := roundTrip(t, conn, encode(kmsg.NewPtrApiVersionsRequest(), 1))
		if err != nil {
			t.Fatal(err)
		}
		resp := kmsg.NewPtrApiVersionsResponse()
		if err := resp.ReadFrom(body); err != nil {
			t.Fatal(err)
		}
		found := false
		for _, k := range resp.ApiKeys {
			if k.ApiKey == int16(kmsg.SASLHandshake) {
				found = true
				if k.MinVersion != 0 || k.MaxVersion != 1 {
					t.Errorf("SaslHandshake versions %d-%d, want 0-1", k.MinVersion, k.MaxVersion)
				}
			}
		}
		if !found {
			t.Error("ApiVersions does not list SaslHandshake")
		}
	})
}

// TestKafkaScramCredentialsAPIs: AlterUserScramCredentials and
// DescribeUserScramCredentials through the Kafka listener (kadm), with
// Kafka's per-user errors; the description carries no salt or key.
func TestKafkaScramCredentialsAPIs(t *testing.T) {
	c := saslCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()...), kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	alt, err := adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "nobody", Mechanism: kadm.ScramSha256}},
		[]kadm.UpsertSCRAM{{User: "carol", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "carol-secret"}})
	if err != nil {
		t.Fatal(err)
	}
	codes := map[string]error{}
	for u, r := range alt {
		codes[u] = r.Err
	}
	if codes["carol"] != nil || !errors.Is(codes["nobody"], kerr.ResourceNotFound) {
		t.Fatalf("AlterUserSCRAMs: %v", codes)
	}
	// What kadm checks before sending, sent raw: too few iterations, an
	// unknown mechanism, a user named twice.
	raw := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	salt := []byte("0123456789abcdef")
	for _, u := range []struct {
		name       string
		mech       int8
		iterations int32
	}{{"dave", 1, 100}, {"erin", 3, 4096}, {"frank", 1, 4096}, {"frank", 2, 4096}} {
		up := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
		up.Name, up.Mechanism, up.Iterations, up.Salt = u.name, u.mech, u.iterations, salt
		up.SaltedPassword = iscram.SHA256.SaltedPassword("pw", salt, 4096)
		raw.Upsertions = append(raw.Upsertions, up)
	}
	rresp, err := raw.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]pb.ErrorCode{"dave": pb.ErrorCode_UNACCEPTABLE_CREDENTIAL, "erin": pb.ErrorCode_UNSUPPORTED_SASL_MECHANISM, "frank": pb.ErrorCode_DUPLICATE_RESOURCE}
	if len(rresp.Results) != len(want) {
		t.Fatalf("raw alter: %+v", rresp.Results)
	}
	for _, r := range rresp.Results {
		if r.ErrorCode != int16(want[r.User]) {
			t.Fatalf("raw alter %s: code %d, want %v", r.User, r.ErrorCode, want[r.User])
		}
	}
	// carol can log in at once.
	ccl, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()...), kgo.SASL(scram.Auth{User: "carol", Pass: "carol-secret"}.AsSha512Mechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer ccl.Close()
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, ccl); err != nil {
		t.Fatalf("carol: %v", err)
	}

	req := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
	for _, u := range []string{"alice", "bob", "nobody", "carol", "carol"} {
		ru := kmsg.NewDescribeUserSCRAMCredentialsRequestUser()
		ru.Name = u
		req.Users = append(req.Users, ru)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || resp.ErrorCode != 0 || len(resp.Results) != 4 {
		t.Fatalf("DescribeUserSCRAMCredentials: %+v %v", resp, err)
	}
	for _, r := range resp.Results {
		switch r.User {
		case "alice":
			if r.ErrorCode != 0 || len(r.CredentialInfos) != 1 || r.CredentialInfos[0].Mechanism != 1 || r.CredentialInfos[0].Iterations != 8192 {
				t.Fatalf("alice: %+v", r)
			}
		case "bob":
			if r.ErrorCode != 0 || len(r.CredentialInfos) != 1 || r.CredentialInfos[0].Mechanism != 2 || r.CredentialInfos[0].Iterations != 4096 {
				t.Fatalf("bob: %+v", r)
			}
		case "nobody":
			if r.ErrorCode != int16(pb.ErrorCode_RESOURCE_NOT_FOUND) {
				t.Fatalf("nobody: %+v", r)
			}
		case "carol": // named twice
			if r.ErrorCode != int16(pb.ErrorCode_DUPLICATE_RESOURCE) {
				t.Fatalf("carol: %+v", r)
			}
		}
	}
	// Nothing secret on the wire.
	wireBytes := resp.AppendTo(nil)
	stored, ok := c.Image().ScramCredential("alice", 1)
	if !ok {
		t.Fatal("alice not in the image")
	}
	for _, secret := range [][]byte{stored.Salt, stored.StoredKey, stored.ServerKey} {
		if bytes.Contains(wireBytes, secret) {
			t.Fatal("DescribeUserScramCredentials carries a salt or key")
		}
	}
	all, err := adm.DescribeUserSCRAMs(ctx)
	if err != nil || len(all) != 3 {
		t.Fatalf("describe all: %v %v", all, err)
	}
}
