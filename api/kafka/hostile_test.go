package kafka_test

// Real cluster on real time: its franz-go and raw Kafka-wire clients dial TCP. They could dial
// MemNet's listeners through a custom dialer inside synctest, as testkit/sim's workload does; not moved yet.

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strand-io/strand/testkit/testcluster"
)

// frame is a request as the wire carries it: size, header v1 (or v2
// when flexible), body.
func frame(key, version int16, corr int32, body []byte, flexible bool) []byte {
	b := binary.BigEndian.AppendUint32(nil, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, 4)
	b = append(b, "test"...)
	if flexible {
		b = append(b, 0)
	}
	b = append(b, body...)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

func encode(req kmsg.Request, corr int32) []byte {
	return frame(req.Key(), req.GetVersion(), corr, req.AppendTo(nil), req.IsFlexible())
}

// roundTrip sends one frame and reads one answer (its correlation id and body).
func roundTrip(t *testing.T, conn net.Conn, f []byte) (int32, []byte, error) {
	t.Helper()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write(f); err != nil {
		return 0, nil, err
	}
	r := bufio.NewReader(conn)
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return 0, nil, err
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(r, body); err != nil {
		return 0, nil, err
	}
	return int32(binary.BigEndian.Uint32(body)), body[4:], nil
}

// closedByServer: the server closed the connection without an answer.
func closedByServer(t *testing.T, conn net.Conn, f []byte) {
	t.Helper()
	_, _, err := roundTrip(t, conn, f)
	if err == nil {
		t.Fatal("the server answered; it should have closed the connection")
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("the server neither answered nor closed the connection")
	}
}

// TestHostileFrames: what breaks the protocol closes that connection
// (with the reason counted) and nothing else: a connection beside it and
// a franz-go client keep working.
func TestHostileFrames(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Nodes: 1})
	c.CreateTopic("h", 1, 1, nil)
	addr := c.KafkaAddrs()[0]
	dial := func() net.Conn {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	bystander := dial()
	apiv := kmsg.NewPtrApiVersionsRequest()
	apiv.SetVersion(3)
	apiv.ClientSoftwareName, apiv.ClientSoftwareVersion = "test", "1"
	if corr, _, err := roundTrip(t, bystander, encode(apiv, 7)); err != nil || corr != 7 {
		t.Fatalf("ApiVersions: corr %d, %v", corr, err)
	}

	metrics := c.Member(1).Node.KafkaMetrics()
	cases := []struct {
		name, reason string
		frame        []byte
	}{
		{"a size over socket.request.max.bytes", "oversized", binary.BigEndian.AppendUint32(nil, 200<<20)},
		{"a negative size", "oversized", binary.BigEndian.AppendUint32(nil, 0xffffff00)},
		{"a header cut short", "malformed", append(binary.BigEndian.AppendUint32(nil, 9), frame(18, 0, 1, nil, false)[4:13]...)},
		{"an unknown API key", "unknown_api", frame(9999, 0, 1, nil, false)},
		{"an API not served (ControlledShutdown)", "unknown_api", frame(int16(kmsg.ControlledShutdown), 3, 1, nil, false)},
		{"a Produce version below v2 batches", "unsupported_version", frame(int16(kmsg.Produce), 2, 1, nil, false)},
		{"a Metadata body that does not decode", "malformed", frame(int16(kmsg.Metadata), 9, 1, []byte{0xff, 0xff, 0xff}, true)},
		{"a client id overrunning the frame", "malformed", func() []byte {
			f := frame(int16(kmsg.Metadata), 1, 1, nil, false)
			binary.BigEndian.PutUint16(f[12:], 500)
			return f
		}()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := metrics.Closed(tc.reason)
			closedByServer(t, dial(), tc.frame)
			if got := metrics.Closed(tc.reason); got != before+1 {
				t.Fatalf("strand_kafka_connections_closed_total{reason=%q} went %v -> %v, want +1", tc.reason, before, got)
			}
		})
	}

	// A newer ApiVersions than served is answered at version 0 with
	// UNSUPPORTED_VERSION and the versions served (KIP-511), not closed.
	corr, body, err := roundTrip(t, dial(), frame(int16(kmsg.ApiVersions), 99, 5, nil, true))
	if err != nil || corr != 5 {
		t.Fatalf("ApiVersions v99: corr %d, %v", corr, err)
	}
	av := kmsg.NewPtrApiVersionsResponse()
	av.SetVersion(0)
	if err := av.ReadFrom(body); err != nil {
		t.Fatal(err)
	}
	if av.ErrorCode != 35 || len(av.ApiKeys) == 0 {
		t.Fatalf("ApiVersions v99 answered error %d with %d APIs, want UNSUPPORTED_VERSION (35) and the list", av.ErrorCode, len(av.ApiKeys))
	}

	// A version outside the range whose answer has a top-level error code
	// at that version is answered UNSUPPORTED_VERSION (Fetch 18 is Kafka
	// 4.1's, which this listener does not serve).
	corr, body, err = roundTrip(t, dial(), frame(int16(kmsg.Fetch), 18, 6, nil, true))
	if err != nil || corr != 6 {
		t.Fatalf("Fetch v18: corr %d, %v", corr, err)
	}
	fr := kmsg.NewPtrFetchResponse()
	fr.SetVersion(18)
	if err := fr.ReadFrom(body[1:]); err != nil { // body[0]: the flexible header's empty tags
		t.Fatal(err)
	}
	if fr.ErrorCode != 35 {
		t.Fatalf("Fetch v18 answered error %d, want UNSUPPORTED_VERSION (35)", fr.ErrorCode)
	}

	// The bystander connection and a real client are unaffected.
	if corr, _, err := roundTrip(t, bystander, encode(apiv, 8)); err != nil || corr != 8 {
		t.Fatalf("the bystander's ApiVersions after the hostile frames: corr %d, %v", corr, err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("h"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("still here")}).FirstErr(); err != nil {
		t.Fatalf("produce after the hostile frames: %v", err)
	}
}

// TestUnservedAPIsAbsent: every API ApiVersions lists decodes at every
// version it lists, and one it does not list is refused, so a client
// that trusts the list never sends what is not served.
func TestUnservedAPIsAbsent(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Nodes: 1})
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()[0]))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	listed := map[int16]kmsg.ApiVersionsResponseApiKey{}
	for _, k := range resp.ApiKeys {
		listed[k.ApiKey] = k
	}
	for _, must := range []kmsg.Key{kmsg.ApiVersions, kmsg.Metadata, kmsg.Produce, kmsg.Fetch, kmsg.ListOffsets, kmsg.FindCoordinator, kmsg.OffsetForLeaderEpoch} {
		k, ok := listed[int16(must)]
		if !ok {
			t.Fatalf("ApiVersions does not list %s", must.Name())
		}
		if k.MaxVersion < 4 && must != kmsg.FindCoordinator {
			t.Fatalf("%s listed only up to v%d", must.Name(), k.MaxVersion)
		}
	}
	for _, never := range []kmsg.Key{kmsg.LeaderAndISR, kmsg.StopReplica, kmsg.UpdateMetadata, kmsg.ControlledShutdown, kmsg.WriteTxnMarkers, kmsg.BrokerRegistration, kmsg.BrokerHeartbeat} {
		if _, ok := listed[int16(never)]; ok {
			t.Fatalf("ApiVersions lists %s, an inter-broker API this listener must not serve", never.Name())
		}
	}
	var fv *kmsg.ApiVersionsResponseFinalizedFeature
	for i := range resp.FinalizedFeatures {
		if resp.FinalizedFeatures[i].Name == "transaction.version" {
			fv = &resp.FinalizedFeatures[i]
		}
	}
	if fv == nil || fv.MaxVersionLevel != 2 {
		t.Fatalf("finalized features %+v: want transaction.version 2 (KIP-890 clients look for it)", resp.FinalizedFeatures)
	}
}
