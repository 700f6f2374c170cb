package kafka_test

// Real cluster on real time: real SASL handshakes over TCP from franz-go, and the
// failed-authentication delay is measured on the wall clock.

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strand-io/strand/internal/auth"
	"github.com/strand-io/strand/node"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/testkit/testcluster"
)

// delayCluster is one node whose Kafka listener is SASL_PLAINTEXT with
// connection.failed.authentication.delay.ms = delay.
func delayCluster(t *testing.T, delay time.Duration) *testcluster.Cluster {
	return testcluster.New(t, testcluster.Options{Nodes: 1, ListenerProtocols: map[string]string{auth.ListenerKafka: "SASL_PLAINTEXT"},
		Mutate: func(_ int32, cfg *node.Config) { cfg.SASL.FailedAuthenticationDelay = delay }})
}

// failSCRAM sends, on a new connection, a SaslHandshake for SCRAM-SHA-256
// and a SaslAuthenticate whose client-first message does not parse, and
// returns the connection with the second request's answer pending.
func failSCRAM(t *testing.T, addr string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.SetVersion(1)
	hs.Mechanism = "SCRAM-SHA-256"
	if _, _, err := roundTrip(t, conn, encode(hs, 1)); err != nil {
		t.Fatal(err)
	}
	au := kmsg.NewPtrSASLAuthenticateRequest()
	au.SetVersion(2)
	au.SASLAuthBytes = []byte("not a client-first message")
	if _, err := conn.Write(encode(au, 2)); err != nil {
		t.Fatal(err)
	}
	return conn
}

// readAuthAnswer reads the SaslAuthenticate answer within d: its code.
func readAuthAnswer(t *testing.T, conn net.Conn, d time.Duration) (int16, error) {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(d))
	r := bufio.NewReader(conn)
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return 0, err
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(r, body); err != nil {
		return 0, err
	}
	resp := kmsg.NewPtrSASLAuthenticateResponse()
	resp.SetVersion(2)
	if err := resp.ReadFrom(body[5:]); err != nil { // correlation id, the header's tag byte
		t.Fatal(err)
	}
	// Then the server closes the connection.
	if _, err := r.ReadByte(); !errors.Is(err, io.EOF) {
		t.Errorf("after the refusal: %v, want the connection closed", err)
	}
	return resp.ErrorCode, nil
}

// TestKafkaFailedAuthenticationDelayed: with
// connection.failed.authentication.delay.ms at 400 ms, a failed SCRAM
// exchange and a refused mechanism are answered, and their connections
// closed, 400 ms later; three attempts one after another take three
// delays (a password guesser is slowed); a connection beside them is
// served meanwhile; and with a delay of a minute, stopping the node does
// not wait for it.
func TestKafkaFailedAuthenticationDelayed(t *testing.T) {
	c := delayCluster(t, 400*time.Millisecond)
	addr := c.KafkaAddrs()[0]
	start := time.Now()
	for i := range 3 {
		conn := failSCRAM(t, addr)
		sent := time.Now()
		if i == 0 {
			// Another connection is answered while this one waits.
			other, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := roundTrip(t, other, encode(kmsg.NewPtrApiVersionsRequest(), 1)); err != nil {
				t.Fatal(err)
			}
			other.Close()
			if d := time.Since(sent); d > 300*time.Millisecond {
				t.Errorf("ApiVersions on another connection answered after %v", d)
			}
		}
		code, err := readAuthAnswer(t, conn, 5*time.Second)
		if err != nil || code != int16(pb.ErrorCode_SASL_AUTHENTICATION_FAILED) {
			t.Fatalf("attempt %d: %d %v", i, code, err)
		}
		if d := time.Since(sent); d < 400*time.Millisecond {
			t.Errorf("attempt %d refused after %v, want the 400ms delay", i, d)
		}
	}
	if d := time.Since(start); d < 1200*time.Millisecond {
		t.Errorf("three failed attempts took %v, want at least three delays", d)
	}
	// A mechanism not offered is an authentication failure too.
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.SetVersion(1)
	hs.Mechanism = "PLAIN"
	sent := time.Now()
	if _, _, err := roundTrip(t, conn, encode(hs, 1)); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(sent); d < 400*time.Millisecond {
		t.Errorf("PLAIN on SASL_PLAINTEXT refused after %v, want the 400ms delay", d)
	}

	long := delayCluster(t, time.Minute)
	conn = failSCRAM(t, long.KafkaAddrs()[0])
	long.Eventually(10*time.Second, "the refusal decided (its connection counted closed) and waiting", func() bool {
		return long.Member(1).Node.KafkaMetrics().Closed("sasl_failed") >= 1
	})
	stopped := time.Now()
	long.Stop(1)
	t.Logf("stopped in %v", time.Since(stopped))
	if d := time.Since(stopped); d > 20*time.Second {
		t.Errorf("stopping the node took %v with a refusal waiting out a minute's delay", d)
	}
	if _, err := readAuthAnswer(t, conn, 5*time.Second); err == nil {
		t.Log("the refusal was written at shutdown")
	} else if ne := (net.Error)(nil); errors.As(err, &ne) && ne.Timeout() {
		t.Errorf("the delayed connection outlived its node's stop")
	}
}
