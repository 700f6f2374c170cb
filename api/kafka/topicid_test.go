package kafka_test

// Real cluster on real time: its franz-go and raw Kafka-wire clients dial TCP. They could dial
// MemNet's listeners through a custom dialer inside synctest, as testkit/sim's workload does; not moved yet.

import (
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strand-io/strand/record"
	"github.com/strand-io/strand/testkit/kafkareq"
	"github.com/strand-io/strand/testkit/testcluster"
)

// topicIDOf asks Metadata for a topic's id.
func topicIDOf(ctx context.Context, t *testing.T, cl *kgo.Client, topic string) [16]byte {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, mt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 || resp.Topics[0].TopicID == ([16]byte{}) {
		t.Fatalf("metadata of %s: %+v", topic, resp.Topics)
	}
	return resp.Topics[0].TopicID
}

// recreateTopic deletes a topic and creates it again under its name,
// waiting until every running broker has the new one.
func recreateTopic(ctx context.Context, t *testing.T, c *testcluster.Cluster, cl *kgo.Client, name string, partitions int32) {
	t.Helper()
	old := c.Image().Topic(name).ID
	resp, err := kadm.NewClient(cl).DeleteTopics(ctx, name)
	if err != nil || resp.Error() != nil {
		t.Fatalf("delete %s: %v %v", name, err, resp.Error())
	}
	c.Eventually(20*time.Second, name+" gone on every broker", func() bool {
		for _, m := range c.Running() {
			if m.Node.Repl != nil && m.Node.Repl.Image().Topic(name) != nil {
				return false
			}
		}
		return true
	})
	c.CreateTopic(name, partitions, int32(len(c.Running())), nil)
	if c.Image().Topic(name).ID == old {
		t.Fatalf("%s created again with its old id", name)
	}
}

func randomID(t *testing.T) [16]byte {
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		t.Fatal(err)
	}
	return id
}

// topicAnswer is what a fetch answered for one topic, by partition.
type topicAnswer map[int32]kmsg.FetchResponseTopicPartition

func answersByID(resp *kmsg.FetchResponse) map[[16]byte]topicAnswer {
	out := map[[16]byte]topicAnswer{}
	for _, rt := range resp.Topics {
		if out[rt.TopicID] == nil {
			out[rt.TopicID] = topicAnswer{}
		}
		for _, rp := range rt.Partitions {
			out[rt.TopicID][rp.Partition] = rp
		}
	}
	return out
}

// TestFetchByTopicID: Fetch from v13 names topics by id (KIP-516), in
// the request, the answer and the session, as Kafka 4 serves it: an id no
// topic has is answered UNKNOWN_TOPIC_ID; a session opened by ids keeps
// them (a request by names on it is refused FETCH_SESSION_TOPIC_ID_ERROR,
// and the other way round); when the topic is deleted and created again
// under its name, the session's partition is answered
// INCONSISTENT_TOPIC_ID and a full fetch by the old id UNKNOWN_TOPIC_ID,
// never the new topic's records.
func TestFetchByTopicID(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Nodes: 1})
	c.CreateTopic("ids", 2, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()[0]), kgo.DefaultProduceTopic("ids"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	produce := func(cl *kgo.Client, p int32, vals ...string) {
		t.Helper()
		for _, v := range vals {
			if err := cl.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce(cl, 0, "old-0", "old-1", "old-2")
	id := topicIDOf(ctx, t, cl, "ids")
	broker := cl.Broker(1)

	type ask struct {
		id     [16]byte
		parts  map[int32]int64
		forget []int32
	}
	fetch := func(byName bool, sess, epoch int32, asks ...ask) *kmsg.FetchResponse {
		t.Helper()
		req := kmsg.NewPtrFetchRequest()
		req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 20, 1, 1<<20
		req.SessionID, req.SessionEpoch = sess, epoch
		for _, a := range asks {
			if len(a.parts) > 0 {
				rt := kmsg.NewFetchRequestTopic()
				rt.Topic, rt.TopicID = "ids", a.id
				for p, off := range a.parts {
					rp := kmsg.NewFetchRequestTopicPartition()
					rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, off, 1<<20
					rt.Partitions = append(rt.Partitions, rp)
				}
				req.Topics = append(req.Topics, rt)
			}
			if len(a.forget) > 0 {
				req.ForgottenTopics = append(req.ForgottenTopics, kmsg.FetchRequestForgottenTopic{Topic: "ids", TopicID: a.id, Partitions: a.forget})
			}
		}
		var r kmsg.Request = req
		if byName {
			r = kafkareq.AtMost(req, 12)
		}
		resp, err := broker.Request(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		fr := resp.(*kmsg.FetchResponse)
		if !byName && fr.Version < 13 {
			t.Fatalf("fetch sent at v%d, want v13 or later", fr.Version)
		}
		return fr
	}

	// Without a session: the topic by its id, and ids no topic has.
	unknown := randomID(t)
	full := answersByID(fetch(false, 0, -1, ask{id: id, parts: map[int32]int64{0: 0}}, ask{id: unknown, parts: map[int32]int64{0: 0}}, ask{id: [16]byte{}, parts: map[int32]int64{1: 0}}))
	if p := full[id][0]; p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
		t.Fatalf("sessionless fetch by id: %+v, want partition 0's records", full[id])
	}
	if p := full[unknown][0]; p.ErrorCode != kerr.UnknownTopicID.Code || len(p.RecordBatches) != 0 {
		t.Fatalf("fetch by an id no topic has: %+v, want UNKNOWN_TOPIC_ID", full[unknown])
	}
	if p := full[[16]byte{}][1]; p.ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("fetch by the zero id: %+v, want UNKNOWN_TOPIC_ID", full[[16]byte{}])
	}

	// A session by ids.
	first := fetch(false, 0, 0, ask{id: id, parts: map[int32]int64{0: 0, 1: 0}})
	if first.ErrorCode != 0 || first.SessionID == 0 || len(answersByID(first)[id]) != 2 {
		t.Fatalf("opening fetch by ids: error %d, session %d, %+v", first.ErrorCode, first.SessionID, answersByID(first))
	}
	sid := first.SessionID
	if got := answersByID(fetch(false, sid, 1, ask{id: id, parts: map[int32]int64{0: 3}})); len(got) != 0 {
		t.Fatalf("incremental fetch by ids with nothing new answered %+v", got)
	}
	// The same session asked by names: refused, and the session is kept.
	if r := fetch(true, sid, 2, ask{id: id, parts: map[int32]int64{1: 0}}); r.ErrorCode != kerr.FetchSessionTopicIDError.Code {
		t.Fatalf("a request by names on a session by ids answered %d, want FETCH_SESSION_TOPIC_ID_ERROR (%d)", r.ErrorCode, kerr.FetchSessionTopicIDError.Code)
	}
	// Forgotten by id.
	if r := fetch(false, sid, 2, ask{id: id, forget: []int32{1}}); r.ErrorCode != 0 {
		t.Fatalf("forgetting partition 1 by id: error %d", r.ErrorCode)
	}
	produce(cl, 1, "p1")
	if got := answersByID(fetch(false, sid, 3)); len(got) != 0 {
		t.Fatalf("after forgetting partition 1 the session answered %+v", got)
	}

	// A session by names, asked by ids: refused as well.
	named := fetch(true, 0, 0, ask{parts: map[int32]int64{0: 0}})
	if named.ErrorCode != 0 || named.SessionID == 0 {
		t.Fatalf("opening fetch by names: error %d session %d", named.ErrorCode, named.SessionID)
	}
	if r := fetch(false, named.SessionID, 1, ask{id: id, parts: map[int32]int64{0: 3}}); r.ErrorCode != kerr.FetchSessionTopicIDError.Code {
		t.Fatalf("a request by ids on a session by names answered %d, want FETCH_SESSION_TOPIC_ID_ERROR", r.ErrorCode)
	}

	// The topic is deleted and created again; its new partition 0 has
	// more records than the consumer of the old one had read (3).
	recreateTopic(ctx, t, c, cl, "ids", 2)
	fresh, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()[0]), kgo.DefaultProduceTopic("ids"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	produce(fresh, 0, "new-0", "new-1", "new-2", "new-3", "new-4")
	newID := topicIDOf(ctx, t, fresh, "ids")
	inc := answersByID(fetch(false, sid, 4))
	if p, ok := inc[id][0]; !ok || p.ErrorCode != kerr.InconsistentTopicID.Code || len(p.RecordBatches) != 0 {
		t.Fatalf("the session's partition of the deleted topic answered %+v, want INCONSISTENT_TOPIC_ID without records", inc)
	}
	full = answersByID(fetch(false, 0, -1, ask{id: id, parts: map[int32]int64{0: 3}}))
	if p := full[id][0]; p.ErrorCode != kerr.UnknownTopicID.Code || len(p.RecordBatches) != 0 {
		t.Fatalf("a full fetch by the old id: %+v, want UNKNOWN_TOPIC_ID without records", full)
	}
	full = answersByID(fetch(false, 0, -1, ask{id: newID, parts: map[int32]int64{0: 3}}))
	if p := full[newID][0]; p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
		t.Fatalf("a fetch by the new id: %+v, want the new topic's records", full)
	}
}

// TestFranzConsumerOfRecreatedTopic: a franz-go consumer (it fetches by
// topic id when the broker serves Fetch v13+) reads a topic, which is
// then deleted and created again under its name with more records than
// the consumer had read. Its next fetches at its old position must be
// refused (UNKNOWN_TOPIC_ID or INCONSISTENT_TOPIC_ID, which franz-go
// surfaces), never answered with the new topic's records. (By name, as
// below v13, the broker cannot tell the topics apart and serves them.)
// The consumer is paused across the change and does not refresh its
// metadata meanwhile, so what it is answered is decided by the broker.
func TestFranzConsumerOfRecreatedTopic(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Nodes: 1})
	c.CreateTopic("re", 1, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	producer := func() *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()...), kgo.DefaultProduceTopic("re"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	prod := producer()
	for i := range 5 {
		if err := prod.ProduceSync(ctx, kgo.StringRecord("old-"+string(rune('0'+i)))).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()...), kgo.ConsumeTopics("re"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.MetadataMinAge(time.Minute), kgo.MetadataMaxAge(time.Hour),
		kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	read := 0
	for read < 5 {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of the old topic's 5 records", read)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if !strings.HasPrefix(string(r.Value), "old-") {
				t.Fatalf("read %q from the old topic", r.Value)
			}
			read++
		})
	}
	cons.PauseFetchTopics("re")

	recreateTopic(ctx, t, c, prod, "re", 1)
	fresh := producer()
	for i := range 10 {
		if err := fresh.ProduceSync(ctx, kgo.StringRecord("new-"+string(rune('0'+i)))).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	cons.ResumeFetchTopics("re")
	pctx, pcancel := context.WithTimeout(ctx, 45*time.Second)
	defer pcancel()
	var told error
	for told == nil {
		fs := cons.PollFetches(pctx)
		if pctx.Err() != nil {
			t.Fatal("the consumer of the deleted topic was told nothing (no UNKNOWN_TOPIC_ID or INCONSISTENT_TOPIC_ID) in 45 s")
		}
		fs.EachRecord(func(r *kgo.Record) {
			t.Fatalf("the consumer of the deleted topic was fed the new topic's record %q at offset %d", r.Value, r.Offset)
		})
		fs.EachError(func(topic string, p int32, err error) {
			if errors.Is(err, kerr.UnknownTopicID) || errors.Is(err, kerr.InconsistentTopicID) {
				told = err
				return
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Logf("fetch %s/%d: %v", topic, p, err)
			}
		})
	}
	t.Logf("the consumer was told: %v", told)
}

// TestProduceByTopicID: Produce v13 (Kafka 4.1) names topics by id: the
// records go to the topic of that id, the answer names the topic by the
// id it was asked by, an id no topic has is answered UNKNOWN_TOPIC_ID,
// and after the topic is deleted and created again under its name a
// produce by the old id is answered UNKNOWN_TOPIC_ID and writes nothing
// into the new topic.
func TestProduceByTopicID(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Nodes: 1})
	c.CreateTopic("pid", 1, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()[0]))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	id := topicIDOf(ctx, t, cl, "pid")
	batch := batchOf(t, "v")
	produce := func(ids ...[16]byte) *kmsg.ProduceResponse {
		t.Helper()
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis = -1, 5000
		for _, id := range ids {
			rt := kmsg.NewProduceRequestTopic()
			rt.TopicID = id
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Records = batch
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
		}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Version < 13 {
			t.Fatalf("produce sent at v%d, want v13", resp.Version)
		}
		if len(resp.Topics) != len(ids) {
			t.Fatalf("produce answered %d topics for %d", len(resp.Topics), len(ids))
		}
		for i, rt := range resp.Topics {
			if rt.TopicID != ids[i] || rt.Topic != "" || len(rt.Partitions) != 1 {
				t.Fatalf("topic %d answered as %q %x with %d partitions, want by id %x", i, rt.Topic, rt.TopicID, len(rt.Partitions), ids[i])
			}
		}
		return resp
	}
	unknown := randomID(t)
	resp := produce(unknown, id)
	if ec := resp.Topics[0].Partitions[0].ErrorCode; ec != kerr.UnknownTopicID.Code {
		t.Fatalf("produce to an id no topic has: %d, want UNKNOWN_TOPIC_ID", ec)
	}
	if p := resp.Topics[1].Partitions[0]; p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Fatalf("produce by id: code %d at %d, want 0 at 0", p.ErrorCode, p.BaseOffset)
	}

	recreateTopic(ctx, t, c, cl, "pid", 1)
	if p := produce(id).Topics[0].Partitions[0]; p.ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("produce by the deleted topic's id: %d, want UNKNOWN_TOPIC_ID", p.ErrorCode)
	}
	if end := c.Log(1, "pid", 0).LogEndOffset(); end != 0 {
		t.Fatalf("the new topic's log end is %d after a produce by the old id, want 0", end)
	}
}

func batchOf(t *testing.T, values ...string) []byte {
	t.Helper()
	var recs []record.Record
	for _, v := range values {
		recs = append(recs, record.Record{Value: []byte(v), Timestamp: time.Now().UnixMilli()})
	}
	b, err := record.Build(record.BatchOptions{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestMetadataByTopicIDKafka: Metadata v12 asked by topic ids, as Kafka 4
// answers it: the topic in full with its name, an id no topic has
// UNKNOWN_TOPIC_ID with a null name, and the names beside ids not looked
// at; at v10 and v11, whose schema has the fields but whose Kafka does
// not take ids, a topic by id or without a name is INVALID_REQUEST.
func TestMetadataByTopicIDKafka(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Nodes: 1})
	c.CreateTopic("m1", 2, 1, nil)
	c.CreateTopic("m2", 1, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()[0]))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	id1 := topicIDOf(ctx, t, cl, "m1")
	unknown := randomID(t)
	ask := func(max int16, topics ...kmsg.MetadataRequestTopic) *kmsg.MetadataResponse {
		t.Helper()
		req := kmsg.NewPtrMetadataRequest()
		req.Topics = topics
		resp, err := cl.Broker(1).Request(ctx, kafkareq.AtMost(req, max))
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*kmsg.MetadataResponse)
	}
	byID := func(id [16]byte) kmsg.MetadataRequestTopic { return kmsg.MetadataRequestTopic{TopicID: id} }
	byName := func(n string) kmsg.MetadataRequestTopic { return kmsg.MetadataRequestTopic{Topic: kmsg.StringPtr(n)} }

	resp := ask(12, byID(id1), byID(unknown), byName("m2"))
	if resp.Version != 12 || len(resp.Brokers) != 1 {
		t.Fatalf("v%d answer with %d brokers", resp.Version, len(resp.Brokers))
	}
	got := map[[16]byte]kmsg.MetadataResponseTopic{}
	for _, mt := range resp.Topics {
		got[mt.TopicID] = mt
	}
	if len(resp.Topics) != 2 {
		t.Fatalf("answered %d topics, want m1 and the unknown id (names beside ids are not looked at): %+v", len(resp.Topics), resp.Topics)
	}
	if m := got[id1]; m.ErrorCode != 0 || m.Topic == nil || *m.Topic != "m1" || len(m.Partitions) != 2 {
		t.Fatalf("m1 by id: %+v", m)
	}
	if m := got[unknown]; m.ErrorCode != kerr.UnknownTopicID.Code || m.Topic != nil {
		t.Fatalf("an unknown id: %+v, want UNKNOWN_TOPIC_ID and a null name", m)
	}
	for _, v := range []int16{10, 11} {
		for _, topics := range [][]kmsg.MetadataRequestTopic{{byID(id1)}, {{}}, {byName("m2"), byID(id1)}} {
			resp := ask(v, topics...)
			if resp.Version != v || len(resp.Topics) != len(topics) || len(resp.Brokers) != 0 {
				t.Fatalf("v%d by id: v%d %+v", v, resp.Version, resp)
			}
			for _, mt := range resp.Topics {
				if mt.ErrorCode != kerr.InvalidRequest.Code {
					t.Fatalf("v%d by id or without a name: %+v, want INVALID_REQUEST", v, resp.Topics)
				}
			}
		}
	}
	// By name, as ever.
	if resp := ask(12, byName("m2")); len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 || resp.Topics[0].TopicID == ([16]byte{}) {
		t.Fatalf("m2 by name: %+v", resp.Topics)
	}
}
