package replication

import (
	"context"
	"log/slog"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/strand-io/strand/broker/storage"
	"github.com/strand-io/strand/clock"
	"github.com/strand-io/strand/metadata"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// countingHandler counts log records by level and message.
type countingHandler struct {
	mu sync.Mutex
	n  map[string]int
}

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.n[r.Level.String()+" "+r.Message]++
	h.mu.Unlock()
	return nil
}
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countingHandler) WithGroup(string) slog.Handler      { return h }

func (h *countingHandler) count(key string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n[key]
}

// scriptedController answers AlterPartition with refuse's code (NONE:
// the change is committed at the next partition epoch), counting calls.
type scriptedController struct {
	mu     sync.Mutex
	calls  int
	refuse pb.ErrorCode
}

func (c *scriptedController) AlterPartition(_ context.Context, req *pb.AlterPartitionRequest) (*pb.AlterPartitionResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	resp := &pb.AlterPartitionResponse{}
	for _, it := range req.Partitions {
		r := &pb.AlterPartitionResult{Topic: it.Topic, Partition: it.Partition, ErrorCode: c.refuse}
		if c.refuse == pb.ErrorCode_NONE {
			r.LeaderId, r.LeaderEpoch, r.Isr, r.PartitionEpoch = 1, it.LeaderEpoch, it.NewIsr, it.PartitionEpoch+1
		} else {
			r.ErrorMessage = "broker 2 is fenced and cannot join the ISR"
		}
		resp.Partitions = append(resp.Partitions, r)
	}
	return resp, nil
}

func (c *scriptedController) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls
}

// TestFencedFollowerNotProposedForISR: a follower that fetches while its
// broker is fenced (just restarted, not yet unfenced) is caught up, but a
// leader does not propose it for the ISR (Kafka's isReplicaIsrEligible,
// KIP-841): over 1000 fetches, no AlterPartition and no log line. Once the
// image has it unfenced, the next fetch's proposal adds it. A proposal the
// controller still refuses (its view ahead of the leader's image) is
// logged once, however many fetches repeat it.
func TestFencedFollowerNotProposedForISR(t *testing.T) {
	key := storage.PartitionKey{Topic: "orders", Partition: 0}
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	p := newTestPartition(t, key, clk)
	logs := &countingHandler{n: map[string]int{}}
	cfg := DefaultConfig(1)
	cfg.Logger = slog.New(logs)
	ctrl := &scriptedController{refuse: pb.ErrorCode_INELIGIBLE_REPLICA}
	m := New(cfg, nil, ctrl, nil, func() int64 { return 1 }, clk)
	t.Cleanup(m.cancel)
	image := func(fenced bool) {
		img := metadata.EmptyImage()
		img.Brokers = map[int32]*metadata.Broker{1: {ID: 1, Epoch: 1}, 2: {ID: 2, Epoch: 5, Fenced: fenced}}
		m.img.Store(img)
	}
	image(true)
	np := &metadata.Partition{Topic: key.Topic, Partition: 0, Replicas: []int32{1, 2}, ISR: []int32{1}, Leader: 1, LeaderEpoch: 3, PartitionEpoch: 1}
	m.becomeLeader(p, np)
	// fetches is n follower fetches from broker 2 at the log end, each
	// followed by the ISR round the fetch signals (the isrLoop's work).
	fetches := func(n int) {
		for range n {
			m.onFollowerFetch(key, 2, 0, 0)
			select {
			case <-m.alterQ:
				m.proposeISRChanges(context.Background())
			default:
			}
		}
	}
	fetches(1000)
	if c := ctrl.count(); c != 0 {
		t.Errorf("%d AlterPartition requests for a fenced follower over 1000 fetches, want 0", c)
	}
	if n := logs.count("INFO proposing ISR change") + logs.count("WARN ISR change refused"); n != 0 {
		t.Errorf("%d log lines for a fenced follower over 1000 fetches, want 0", n)
	}
	// A round the ticker starts proposes nothing either.
	m.proposeISRChanges(context.Background())
	if c := ctrl.count(); c != 0 {
		t.Errorf("a ticker round proposed the fenced follower (%d requests)", c)
	}

	// The image says unfenced, the controller still refuses: every fetch
	// may propose again, but the refusal is logged once.
	image(false)
	fetches(1000)
	if c := ctrl.count(); c == 0 {
		t.Fatal("no AlterPartition once the follower is unfenced in the image")
	}
	if w, i := logs.count("WARN ISR change refused"), logs.count("INFO proposing ISR change"); w != 1 || i != 1 {
		t.Errorf("%d AlterPartition requests refused alike logged %d WARN and %d INFO lines, want 1 and 1", ctrl.count(), w, i)
	}

	// The controller agrees: the expansion is committed.
	ctrl.mu.Lock()
	ctrl.refuse = pb.ErrorCode_NONE
	ctrl.mu.Unlock()
	fetches(1)
	le := m.leader(key)
	le.mu.Lock()
	isr := le.st.ISR
	le.mu.Unlock()
	if !reflect.DeepEqual(isr, []int32{1, 2}) {
		t.Fatalf("ISR %v after the controller accepted, want [1 2]", isr)
	}
	if _, exp := m.ISRChanges(); exp != 1 {
		t.Errorf("%d expansions counted, want 1", exp)
	}
}
