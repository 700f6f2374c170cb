package judges_test

// Real cluster on real time: the judges are Kafka clients from outside this code
// (librdkafka, kcat, kafka-python, sarama, franz-go) that dial real TCP sockets.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/strand-io/strand/client"
)

// TestSarama: sarama's idempotent producer writes records across three
// partitions, and a sarama consumer group reads every one back exactly
// once and commits where it stopped.
func TestSarama(t *testing.T) {
	c, _ := kafkaCluster(t)
	addrs := c.KafkaAddrs()
	const topic, group, n = "sarama", "sarama-group", 300
	c.CreateTopic(topic, 3, 3, nil)

	cfg := sarama.NewConfig()
	cfg.ClientID = "judge-sarama"
	cfg.Version = sarama.DefaultVersion
	cfg.Producer.Idempotent = true
	cfg.Net.MaxOpenRequests = 1
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Producer.Flush.Messages = 25 // several batches, so sequence numbers run on
	prod, err := sarama.NewSyncProducer(addrs, cfg)
	if err != nil {
		t.Fatalf("sarama producer: %v", err)
	}
	var msgs []*sarama.ProducerMessage
	for i := range n {
		msgs = append(msgs, &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(fmt.Sprintf("key-%d", i)),
			Value: sarama.StringEncoder(fmt.Sprintf("value-%d", i))})
	}
	if err := prod.SendMessages(msgs); err != nil {
		var pe sarama.ProducerErrors
		if errors.As(err, &pe) && len(pe) > 0 {
			t.Fatalf("sarama producer: %d of %d failed, first: %v", len(pe), n, pe[0].Err)
		}
		t.Fatalf("sarama producer: %v", err)
	}
	if err := prod.Close(); err != nil {
		t.Fatal(err)
	}
	// Idempotence: each partition holds its records once, at offsets 0, 1, 2, ...
	ends := map[int32]int64{}
	offsets := map[int32][]int64{}
	for _, m := range msgs {
		offsets[m.Partition] = append(offsets[m.Partition], m.Offset)
	}
	for p, offs := range offsets {
		sort.Slice(offs, func(i, j int) bool { return offs[i] < offs[j] })
		for i, o := range offs {
			if o != int64(i) {
				t.Fatalf("partition %d: records written at offsets %v, want 0..%d", p, offs, len(offs)-1)
			}
		}
		ends[p] = int64(len(offs))
	}

	ccfg := sarama.NewConfig()
	ccfg.ClientID = "judge-sarama"
	ccfg.Version = sarama.DefaultVersion
	ccfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	ccfg.Consumer.Offsets.AutoCommit.Interval = 100 * time.Millisecond
	ccfg.Consumer.Group.Session.Timeout = 10 * time.Second
	ccfg.Consumer.Group.Heartbeat.Interval = time.Second
	cg, err := sarama.NewConsumerGroup(addrs, group, ccfg)
	if err != nil {
		t.Fatalf("sarama consumer group: %v", err)
	}
	h := &collector{want: n, done: make(chan struct{}), seen: map[string]int{}}
	ctx, cancel := context.WithCancel(context.Background())
	consumeErr := make(chan error, 1)
	go func() { // owned here: stops when ctx is cancelled below
		for ctx.Err() == nil {
			if err := cg.Consume(ctx, []string{topic}, h); err != nil {
				consumeErr <- err
				return
			}
		}
		consumeErr <- nil
	}()
	select {
	case <-h.done:
	case err := <-consumeErr:
		cancel()
		t.Fatalf("sarama consumer group stopped before reading %d records: %v", n, err)
	case <-time.After(60 * time.Second):
		cancel()
		<-consumeErr
		t.Fatalf("sarama consumer group read %d distinct records of %d in 60 s", h.distinct(), n)
	}
	cancel()
	if err := <-consumeErr; err != nil {
		t.Errorf("sarama consumer group: %v", err)
	}
	if err := cg.Close(); err != nil { // commits the marked offsets
		t.Errorf("sarama consumer group close: %v", err)
	}
	h.mu.Lock()
	for i := range n {
		if v := fmt.Sprintf("value-%d", i); h.seen[v] != 1 {
			t.Errorf("%s read %d times, want once", v, h.seen[v])
		}
	}
	h.mu.Unlock()

	var tps []client.TopicPartition
	for p := range ends {
		tps = append(tps, client.TopicPartition{Topic: topic, Partition: p})
	}
	got := committed(t, c, group, tps...)
	for _, tp := range tps {
		if got[tp] != ends[tp.Partition] {
			t.Errorf("group committed %d on partition %d, want its end %d", got[tp], tp.Partition, ends[tp.Partition])
		}
	}
}

// collector is a sarama consumer group handler that counts each value it
// reads and closes done once it has read want distinct values.
type collector struct {
	want int
	done chan struct{}

	mu   sync.Mutex
	seen map[string]int
}

func (h *collector) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *collector) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *collector) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for msg := range claim.Messages() {
		sess.MarkMessage(msg, "")
		h.mu.Lock()
		h.seen[string(msg.Value)]++
		if len(h.seen) == h.want && h.seen[string(msg.Value)] == 1 {
			close(h.done)
		}
		h.mu.Unlock()
	}
	return nil
}

func (h *collector) distinct() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.seen)
}
