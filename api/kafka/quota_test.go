package kafka_test

// Real cluster on real time: its franz-go and raw Kafka-wire clients dial TCP. They could dial
// MemNet's listeners through a custom dialer inside synctest, as testkit/sim's workload does; not moved yet.
// (Throttles are read on the node's fake clock, so time itself is not the reason.)

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strand-io/strand/clock"
	"github.com/strand-io/strand/internal/auth"
	"github.com/strand-io/strand/node"
	"github.com/strand-io/strand/quota"
	"github.com/strand-io/strand/record"
	"github.com/strand-io/strand/testkit/testcluster"
)

// byHost is a TEST-ONLY session per connection: the principal by the
// client's loopback address (alice dials from 127.0.0.1, bob from 127.0.0.2).
func byHost(nc net.Conn) (auth.Session, bool) {
	host, _, _ := net.SplitHostPort(nc.RemoteAddr().String())
	users := map[string]string{"127.0.0.1": "alice", "127.0.0.2": "bob"}
	if u, ok := users[host]; ok {
		return auth.Session{Principal: auth.User(u), Host: host, Listener: auth.ListenerKafka}, true
	}
	return auth.Session{}, false
}

func quotaCluster(t *testing.T) (*testcluster.Cluster, *clock.Fake) {
	fake := clock.NewFake(time.Unix(1_700_000_000, 0))
	c := testcluster.New(t, testcluster.Options{Nodes: 1, Mutate: func(_ int32, cfg *node.Config) {
		cfg.Quotas.Clock = fake
		cfg.TestingKafkaSession = byHost
	}})
	return c, fake
}

func dialFrom(t *testing.T, local, addr string) net.Conn {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func produceReq(t *testing.T, topic string, bytes int) *kmsg.ProduceRequest {
	b, err := record.Build(record.BatchOptions{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, []record.Record{{Value: make([]byte, bytes)}})
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks, req.TimeoutMillis = -1, 5000 // acks=all: the answer is deferred, its throttle set once complete
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = b
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func metadataReq() *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(9)
	return req
}

// answerWithin reads one answer from conn within d: its correlation id and
// body, or ok=false.
func answerWithin(t *testing.T, conn net.Conn, d time.Duration) (int32, []byte, bool) {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(d))
	defer conn.SetReadDeadline(time.Time{})
	corr, body, err := readAnswer(conn)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return 0, nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return corr, body, true
}

// TestKafkaProduceOverQuotaThrottles: a produce over producer_byte_rate is
// answered at once with a positive ThrottleTimeMs, and the connection is
// muted: the next request on it is answered only once the throttle time
// has passed on the node's (fake) clock. Another principal on another
// connection is answered meanwhile, unthrottled.
func TestKafkaProduceOverQuotaThrottles(t *testing.T) {
	c, fake := quotaCluster(t)
	c.CreateTopic("q", 1, 1, nil)
	n := c.Member(1).Node
	n.Quotas().SetUsers(map[string]quota.Values{"alice": {quota.ProducerByteRate: 1000}}, nil)
	addr := c.KafkaAddrs()[0]
	alice, bob := dialFrom(t, "127.0.0.1", addr), dialFrom(t, "127.0.0.2", addr)

	// 20 kB over the minimum 10 s span is 2000 B/s, twice the quota:
	// throttled for (2000−1000)/1000 × 10 s = 10 s.
	if _, err := alice.Write(encode(produceReq(t, "q", 20000), 1)); err != nil {
		t.Fatal(err)
	}
	corr, body, ok := answerWithin(t, alice, 10*time.Second)
	if !ok || corr != 1 {
		t.Fatalf("produce not answered at once (corr %d, ok %v)", corr, ok)
	}
	resp := kmsg.NewPtrProduceResponse()
	resp.SetVersion(9)
	if err := resp.ReadFrom(body[1:]); err != nil { // [1:]: the flexible header's tags
		t.Fatal(err)
	}
	if ec := resp.Topics[0].Partitions[0].ErrorCode; ec != 0 {
		t.Fatalf("produce error %d", ec)
	}
	if resp.ThrottleMillis < 10000 || resp.ThrottleMillis > 10200 { // the batch header adds a few bytes
		t.Fatalf("ThrottleTimeMs %d, want about 10000 (10 s span × (2000−1000)/1000)", resp.ThrottleMillis)
	}
	if _, err := alice.Write(encode(metadataReq(), 2)); err != nil {
		t.Fatal(err)
	}
	// Bob, over no quota of his, is answered while alice is muted, however
	// much he sends.
	for i := range 3 {
		if _, err := bob.Write(encode(produceReq(t, "q", 20000), int32(10+i))); err != nil {
			t.Fatal(err)
		}
		if _, _, ok := answerWithin(t, bob, 10*time.Second); !ok {
			t.Fatal("bob's produce waited on alice's throttle")
		}
	}
	if _, _, ok := answerWithin(t, alice, 500*time.Millisecond); ok {
		t.Fatal("alice's next request answered before her throttle time passed")
	}
	fake.Advance(5 * time.Second)
	if _, _, ok := answerWithin(t, alice, 300*time.Millisecond); ok {
		t.Fatal("answered after 5 s of a 10 s throttle")
	}
	fake.Advance(5200 * time.Millisecond)
	if corr, _, ok := answerWithin(t, alice, 10*time.Second); !ok || corr != 2 {
		t.Fatalf("after the throttle time: corr %d, ok %v", corr, ok)
	}
	if n.KafkaMetrics().Throttled() < 1 {
		t.Error("strand_kafka_throttled_requests_total not counted")
	}
	if r := n.Quotas().Rate(quota.Produce, "alice", ""); r <= 0 {
		t.Errorf("alice's produce byte rate %v", r)
	}
}

// TestKafkaRequestPercentageThrottles: handler time over
// request_percentage throttles every answer with the field (Metadata here).
func TestKafkaRequestPercentageThrottles(t *testing.T) {
	c, _ := quotaCluster(t)
	n := c.Member(1).Node
	// A quota so small any handler time exceeds it.
	n.Quotas().SetUsers(nil, quota.Values{quota.RequestPercentage: 1e-9})
	alice := dialFrom(t, "127.0.0.1", c.KafkaAddrs()[0])
	if _, err := alice.Write(encode(metadataReq(), 1)); err != nil {
		t.Fatal(err)
	}
	_, body, ok := answerWithin(t, alice, 10*time.Second)
	if !ok {
		t.Fatal("metadata not answered")
	}
	resp := kmsg.NewPtrMetadataResponse()
	resp.SetVersion(9)
	if err := resp.ReadFrom(body[1:]); err != nil {
		t.Fatal(err)
	}
	// Kafka caps the request quota's throttle at one window (1 s).
	if resp.ThrottleMillis <= 0 || resp.ThrottleMillis > 1000 {
		t.Fatalf("ThrottleTimeMs %d, want in (0, 1000]", resp.ThrottleMillis)
	}
}

func readAnswer(conn net.Conn) (int32, []byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		return 0, nil, err
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(conn, body); err != nil {
		return 0, nil, err
	}
	return int32(binary.BigEndian.Uint32(body)), body[4:], nil
}

// TestKafkaClientQuotasAdmin: AlterClientQuotas and DescribeClientQuotas
// through franz-go's kadm: user, client-id and user + client-id quotas
// (names and defaults) round-trip with Kafka's filter semantics; Kafka's
// refusals (an unknown key, a rate not positive or not whole, a type named
// twice, an empty name, ip with user; an ip entity, not served:
// INVALID_REQUEST) leave the other entries applied; and what is stored is
// what the broker enforces, by user and by the request header's client id.
func TestKafkaClientQuotasAdmin(t *testing.T) {
	c, _ := quotaCluster(t)
	c.CreateTopic("qa", 1, 1, nil)
	n := c.Member(1).Node
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()[0]))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	name := func(s string) *string { return &s }
	user := func(n *string) kadm.ClientQuotaEntity { return kadm.ClientQuotaEntity{{Type: "user", Name: n}} }
	clientID := func(n *string) kadm.ClientQuotaEntity { return kadm.ClientQuotaEntity{{Type: "client-id", Name: n}} }
	userClient := func(u, c *string) kadm.ClientQuotaEntity {
		return kadm.ClientQuotaEntity{{Type: "user", Name: u}, {Type: "client-id", Name: c}}
	}
	set := func(k string, v float64) kadm.AlterClientQuotaOp { return kadm.AlterClientQuotaOp{Key: k, Value: v} }
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{
		{Entity: user(name("alice")), Ops: []kadm.AlterClientQuotaOp{set("producer_byte_rate", 1000), set("consumer_byte_rate", 2000)}},
		{Entity: user(nil), Ops: []kadm.AlterClientQuotaOp{set("request_percentage", 200)}},
		{Entity: clientID(name("test")), Ops: []kadm.AlterClientQuotaOp{set("producer_byte_rate", 3000)}},
		{Entity: clientID(nil), Ops: []kadm.AlterClientQuotaOp{set("consumer_byte_rate", 4000)}},
		{Entity: userClient(name("alice"), name("test")), Ops: []kadm.AlterClientQuotaOp{set("producer_byte_rate", 500)}},
		{Entity: userClient(nil, nil), Ops: []kadm.AlterClientQuotaOp{set("request_percentage", 50)}},
		// Refused:
		{Entity: user(name("bob")), Ops: []kadm.AlterClientQuotaOp{set("producer_byte_rte", 1)}},
		{Entity: user(name("carol")), Ops: []kadm.AlterClientQuotaOp{set("producer_byte_rate", -5)}},
		{Entity: user(name("dave")), Ops: []kadm.AlterClientQuotaOp{set("consumer_byte_rate", 1.5)}},
		{Entity: kadm.ClientQuotaEntity{{Type: "ip", Name: name("10.0.0.1")}}, Ops: []kadm.AlterClientQuotaOp{set("connection_creation_rate", 10)}},
		{Entity: kadm.ClientQuotaEntity{{Type: "ip", Name: name("10.0.0.1")}, {Type: "user", Name: name("erin")}}, Ops: []kadm.AlterClientQuotaOp{set("producer_byte_rate", 1)}},
		{Entity: clientID(name("")), Ops: []kadm.AlterClientQuotaOp{set("producer_byte_rate", 1)}},
		{Entity: kadm.ClientQuotaEntity{{Type: "group", Name: name("g")}}, Ops: []kadm.AlterClientQuotaOp{set("producer_byte_rate", 1)}},
		{Entity: kadm.ClientQuotaEntity{}, Ops: []kadm.AlterClientQuotaOp{set("producer_byte_rate", 1)}},
		{Entity: clientID(name("x")), Ops: []kadm.AlterClientQuotaOp{set("producer_byte_rate", 1), set("producer_byte_rate", 2)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 15 {
		t.Fatalf("%d results, want 15", len(res))
	}
	for i, r := range res {
		wantOK := i < 6
		if (r.Err == nil) != wantOK || (!wantOK && !errors.Is(r.Err, kerr.InvalidRequest)) {
			t.Errorf("entry %d (%v): %v %q, want ok=%v or INVALID_REQUEST", i, r.Entity, r.Err, r.ErrMessage, wantOK)
		}
	}
	type comp = kadm.DescribeClientQuotaComponent
	describe := func(strict bool, comps ...comp) map[string]map[string]float64 {
		t.Helper()
		d, err := adm.DescribeClientQuotas(ctx, strict, comps)
		if err != nil {
			t.Fatalf("describe %v: %v", comps, err)
		}
		out := map[string]map[string]float64{}
		for _, q := range d {
			vals := map[string]float64{}
			for _, v := range q.Values {
				vals[v.Key] = v.Value
			}
			out[strings.Trim(q.Entity.String(), "{}")] = vals
		}
		return out
	}
	keys := func(m map[string]map[string]float64) []string {
		var out []string
		for k := range m {
			out = append(out, k)
		}
		slices.Sort(out)
		return out
	}
	for _, tc := range []struct {
		strict bool
		comps  []comp
		want   []string
	}{
		// Not strict: every entity with a user part.
		{false, []comp{{Type: "user", MatchType: 2}}, []string{"user=<default>", "user=<default>, client-id=<default>", "user=alice", "user=alice, client-id=test"}},
		// Strict: only entities of the user part alone.
		{true, []comp{{Type: "user", MatchType: 2}}, []string{"user=<default>", "user=alice"}},
		{false, []comp{{Type: "user", MatchType: 0, MatchName: name("alice")}}, []string{"user=alice", "user=alice, client-id=test"}},
		{true, []comp{{Type: "user", MatchType: 1}}, []string{"user=<default>"}},
		{true, []comp{{Type: "client-id", MatchType: 2}}, []string{"client-id=<default>", "client-id=test"}},
		{false, []comp{{Type: "client-id", MatchType: 1}}, []string{"client-id=<default>", "user=<default>, client-id=<default>"}},
		{true, []comp{{Type: "user", MatchType: 0, MatchName: name("alice")}, {Type: "client-id", MatchType: 2}}, []string{"user=alice, client-id=test"}},
		{true, []comp{{Type: "user", MatchType: 1}, {Type: "client-id", MatchType: 1}}, []string{"user=<default>, client-id=<default>"}},
		{false, nil, []string{"client-id=<default>", "client-id=test", "user=<default>", "user=<default>, client-id=<default>", "user=alice", "user=alice, client-id=test"}},
		{true, nil, nil},
		{false, []comp{{Type: "ip", MatchType: 2}}, nil},
	} {
		if got := keys(describe(tc.strict, tc.comps...)); !slices.Equal(got, tc.want) {
			t.Errorf("describe strict=%v %v: %v, want %v", tc.strict, tc.comps, got, tc.want)
		}
	}
	if got := describe(true, comp{Type: "user", MatchType: 0, MatchName: name("alice")}, comp{Type: "client-id", MatchType: 0, MatchName: name("test")}); got["user=alice, client-id=test"]["producer_byte_rate"] != 500 {
		t.Errorf("alice/test's values: %v", got)
	}
	// Kafka's refusals of a filter.
	for _, tc := range []struct {
		comps []comp
		want  error
	}{
		{[]comp{{Type: "user", MatchType: 2}, {Type: "user", MatchType: 1}}, kerr.InvalidRequest},
		{[]comp{{Type: "ip", MatchType: 2}, {Type: "user", MatchType: 2}}, kerr.InvalidRequest},
		{[]comp{{Type: "user", MatchType: 1, MatchName: name("alice")}}, kerr.InvalidRequest},
		{[]comp{{Type: "user", MatchType: 0}}, kerr.InvalidRequest},
		{[]comp{{Type: "user", MatchType: 7}}, kerr.InvalidRequest},
		{[]comp{{Type: "", MatchType: 2}}, kerr.InvalidRequest},
		{[]comp{{Type: "group", MatchType: 2}}, kerr.UnsupportedVersion},
	} {
		if _, err := adm.DescribeClientQuotas(ctx, false, tc.comps); !errors.Is(err, tc.want) {
			t.Errorf("describe %v: %v, want %v", tc.comps, err, tc.want)
		}
	}

	// Enforced as stored, by user and client id.
	for _, tc := range []struct {
		user, client, key string
		want              float64
	}{
		{"alice", "test", "producer_byte_rate", 500},   // user + client
		{"alice", "other", "producer_byte_rate", 1000}, // user
		{"alice", "other", "consumer_byte_rate", 2000}, // user
		{"zed", "other", "request_percentage", 50},     // default user + default client
		{"zed", "test", "producer_byte_rate", 3000},    // client-id
		{"zed", "other", "consumer_byte_rate", 4000},   // default client-id
	} {
		if q, ok := n.Quotas().Quota(tc.user, tc.client, tc.key); !ok || q != tc.want {
			t.Errorf("%s in force for %s/%s: %v %v, want %v", tc.key, tc.user, tc.client, q, ok, tc.want)
		}
	}
	// alice (127.0.0.1) with client id "test" (this test's header) is held
	// to 500 B/s; bob, of the same client id, to client test's 3000 B/s.
	produce := func(conn net.Conn, bytes int) int32 {
		t.Helper()
		if _, err := conn.Write(encode(produceReq(t, "qa", bytes), 1)); err != nil {
			t.Fatal(err)
		}
		_, body, ok := answerWithin(t, conn, 10*time.Second)
		if !ok {
			t.Fatal("produce not answered")
		}
		resp := kmsg.NewPtrProduceResponse()
		resp.SetVersion(9)
		if err := resp.ReadFrom(body[1:]); err != nil {
			t.Fatal(err)
		}
		return resp.ThrottleMillis
	}
	if ms := produce(dialFrom(t, "127.0.0.1", c.KafkaAddrs()[0]), 10000); ms <= 0 {
		t.Errorf("alice/test: 10 kB over 500 B/s answered throttle %d", ms)
	}
	bob := dialFrom(t, "127.0.0.2", c.KafkaAddrs()[0])
	if ms := produce(bob, 20000); ms != 0 {
		t.Errorf("bob/test: 20 kB within client test's 3000 B/s throttled %d", ms)
	}
	if ms := produce(bob, 20000); ms <= 0 {
		t.Errorf("bob/test: 40 kB over client test's 3000 B/s answered throttle %d", ms)
	}

	res, err = adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: userClient(name("alice"), name("test")), Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Remove: true}}}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("remove: %v %v", err, res)
	}
	if got := describe(true, comp{Type: "user", MatchType: 0, MatchName: name("alice")}, comp{Type: "client-id", MatchType: 2}); len(got) != 0 {
		t.Errorf("after removing alice/test's only key: %v", got)
	}
	if q, ok := n.Quotas().Quota("alice", "test", "producer_byte_rate"); !ok || q != 1000 {
		t.Errorf("after the removal alice/test is held to %v %v, want her user quota 1000", q, ok)
	}
}

// TestKafkaConsumerFetchOverQuota: a consumer fetch answering more bytes
// than the principal's consumer_byte_rate allows carries a positive
// ThrottleTimeMs; the same fetch by a principal without a quota does not.
func TestKafkaConsumerFetchOverQuota(t *testing.T) {
	c, _ := quotaCluster(t)
	c.CreateTopic("qf", 1, 1, nil)
	n := c.Member(1).Node
	addr := c.KafkaAddrs()[0]
	bob := dialFrom(t, "127.0.0.2", addr)
	if _, err := bob.Write(encode(produceReq(t, "qf", 50000), 1)); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := answerWithin(t, bob, 10*time.Second); !ok {
		t.Fatal("produce not answered")
	}
	n.Quotas().SetUsers(map[string]quota.Values{"alice": {quota.ConsumerByteRate: 1000}}, nil)
	fetch := func(conn net.Conn) *kmsg.FetchResponse {
		t.Helper()
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(11)
		req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 100, 1, 1<<20
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = "qf"
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.PartitionMaxBytes, fp.CurrentLeaderEpoch, fp.LogStartOffset = 1<<20, -1, -1
		ft.Partitions = append(ft.Partitions, fp)
		req.Topics = append(req.Topics, ft)
		if _, err := conn.Write(encode(req, 5)); err != nil {
			t.Fatal(err)
		}
		_, body, ok := answerWithin(t, conn, 10*time.Second)
		if !ok {
			t.Fatal("fetch not answered")
		}
		resp := kmsg.NewPtrFetchResponse()
		resp.SetVersion(11)
		if err := resp.ReadFrom(body); err != nil {
			t.Fatal(err)
		}
		return resp
	}
	if r := fetch(bob); r.ThrottleMillis != 0 || len(r.Topics[0].Partitions[0].RecordBatches) == 0 {
		t.Fatalf("bob's fetch: throttle %d, %d bytes", r.ThrottleMillis, len(r.Topics[0].Partitions[0].RecordBatches))
	}
	alice := dialFrom(t, "127.0.0.1", addr)
	// 50 kB over 10 s against 1000 B/s: (5000−1000)/1000 × 10 s = 40 s.
	if r := fetch(alice); r.ThrottleMillis < 39000 {
		t.Fatalf("alice's fetch over consumer_byte_rate: throttle %d ms, want about 40000", r.ThrottleMillis)
	}
}
