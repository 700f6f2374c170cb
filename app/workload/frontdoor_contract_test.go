package workload

// Real cluster on real time: its franz-go and raw Kafka-wire clients dial TCP. They could dial
// MemNet's listeners through a custom dialer inside synctest, as testkit/sim's workload does; not moved yet.

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/node"
	"github.com/strand-io/strand/testkit/testcluster"
)

// TestKafkaDoorAbortedIsNotUnsent: franz-go fails a record with
// ErrAborting when its transaction aborts before the record's last try,
// even if an earlier try wrote it (the answer was lost). The workload
// marks a record Unsent on client.ErrAborted, and the checker then counts
// any read of it as Unwritten; so the Kafka door must not hand franz-go's
// ErrAborting over as client.ErrAborted. A drill through the Kafka door
// (leader killed while a produce was answered) found exactly that: one
// value of an early-aborted transaction read at an offset the history
// said nothing was sent to.
//
// Here a dialer turns every Produce answer into NOT_LEADER_OR_FOLLOWER
// once armed (what a leader answers for an acks=all append it made before
// losing its leadership): the broker wrote the record, franz-go keeps the
// batch for another try, and the abort fails it with ErrAborting.
func TestKafkaDoorAbortedIsNotUnsent(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Mutate: func(_ int32, cfg *node.Config) {
		cfg.TxnTopic.Partitions, cfg.OffsetsTopic.Partitions = 3, 3
	}})
	c.CreateTopic("t", 1, 3, nil)
	dropper := &produceDropper{dropped: make(chan struct{}, 1)}
	r := &run{cfg: Config{KafkaBootstrap: c.KafkaAddrs(), KafkaDial: dropper.dial(c), TransactionTimeout: 20 * time.Second}}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	p, err := r.newKafkaProducer(ctx, "door-abort")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	dropper.arm(true)
	done := make(chan error, 1)
	p.Produce(ctx, &client.Record{Topic: "t", Partition: 0, Value: []byte("v0")}, func(_ *client.Record, err error) { done <- err })
	select {
	case <-dropper.dropped: // the broker answered: the record is in the log
	case <-ctx.Done():
		t.Fatal("no Produce answer to rewrite")
	}
	abortErr := p.AbortTransaction(ctx)
	var perr error
	select {
	case perr = <-done:
	case <-ctx.Done():
		t.Fatal("the record's promise never completed")
	}
	dropper.arm(false)
	t.Logf("promise: %v; abort: %v", perr, abortErr)

	// What the log holds, read_uncommitted.
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()...), kgo.FetchIsolationLevel(kgo.ReadUncommitted()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"t": {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var inLog bool
	for !inLog && ctx.Err() == nil {
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		cl.PollFetches(pctx).EachRecord(func(rec *kgo.Record) { inLog = inLog || string(rec.Value) == "v0" })
		pcancel()
	}
	if !inLog {
		t.Fatal("the record whose answer was rewritten is not in the log: the case under test did not happen")
	}
	if perr == nil {
		t.Fatal("the record's promise succeeded although every answer said NOT_LEADER_OR_FOLLOWER")
	}
	if errors.Is(perr, client.ErrAborted) {
		t.Fatalf("a record the broker wrote failed as client.ErrAborted (never sent): %v", perr)
	}
}

// produceDropper dials the Kafka listeners and, while armed, turns every
// Produce answer into NOT_LEADER_OR_FOLLOWER, as a leader answers an
// acks=all produce it appended before it lost its leadership.
type produceDropper struct {
	mu      sync.Mutex
	armed   bool
	dropped chan struct{}
}

func (d *produceDropper) arm(on bool) {
	d.mu.Lock()
	d.armed = on
	d.mu.Unlock()
}

func (d *produceDropper) isArmed() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.armed
}

func (d *produceDropper) dial(c *testcluster.Cluster) func(ctx context.Context, network, host string) (net.Conn, error) {
	return func(ctx context.Context, _, host string) (net.Conn, error) {
		conn, err := c.Net.Dial(ctx, "client", host)
		if err != nil {
			return nil, err
		}
		return &dropConn{Conn: conn, d: d, produce: map[int32]int16{}}, nil
	}
}

// dropConn follows the frames both ways: a request's header names its API
// key, version and correlation id, an answer's its correlation id.
type dropConn struct {
	net.Conn
	d *produceDropper

	mu      sync.Mutex
	out     []byte          // request bytes not yet a whole frame
	produce map[int32]int16 // Produce requests in flight: correlation id → version
	in      []byte          // answer bytes read, not yet a whole frame
	ready   []byte          // whole answers, to hand out
}

func (c *dropConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	c.out = append(c.out, b...)
	for len(c.out) >= 4 {
		n := int(binary.BigEndian.Uint32(c.out))
		if len(c.out) < 4+n {
			break
		}
		if n >= 8 && binary.BigEndian.Uint16(c.out[4:]) == 0 { // API key 0: Produce
			c.produce[int32(binary.BigEndian.Uint32(c.out[8:]))] = int16(binary.BigEndian.Uint16(c.out[6:]))
		}
		c.out = bytes.Clone(c.out[4+n:])
	}
	c.mu.Unlock()
	return c.Conn.Write(b)
}

func (c *dropConn) Read(b []byte) (int, error) {
	for {
		c.mu.Lock()
		if len(c.ready) > 0 {
			n := copy(b, c.ready)
			c.ready = c.ready[n:]
			c.mu.Unlock()
			return n, nil
		}
		c.mu.Unlock()
		buf := make([]byte, 64<<10)
		n, err := c.Conn.Read(buf)
		c.mu.Lock()
		c.in = append(c.in, buf[:n]...)
		for len(c.in) >= 8 {
			size := int(binary.BigEndian.Uint32(c.in))
			if len(c.in) < 4+size {
				break
			}
			frame := c.in[:4+size]
			corr := int32(binary.BigEndian.Uint32(frame[4:]))
			if v, ok := c.produce[corr]; ok {
				delete(c.produce, corr)
				if c.d.isArmed() {
					frame = notLeader(frame, v)
					select {
					case c.d.dropped <- struct{}{}:
					default:
					}
				}
			}
			c.ready = append(c.ready, frame...)
			c.in = bytes.Clone(c.in[4+size:])
		}
		pending := len(c.ready)
		c.mu.Unlock()
		if err != nil && pending == 0 {
			return 0, err
		}
	}
}

// notLeader rewrites a Produce answer (frame: size, correlation id, the
// header's tags from v9, the body) so that every partition failed with
// NOT_LEADER_OR_FOLLOWER.
func notLeader(frame []byte, version int16) []byte {
	head := 8
	if version >= 9 {
		head++ // the header's empty tag section
	}
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = version
	if err := resp.ReadFrom(frame[head:]); err != nil {
		panic(fmt.Sprintf("decoding a Produce v%d answer: %v", version, err))
	}
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			p := &resp.Topics[i].Partitions[j]
			p.ErrorCode, p.BaseOffset = kerr.NotLeaderForPartition.Code, -1
		}
	}
	out := append([]byte(nil), frame[:head]...)
	out = resp.AppendTo(out)
	binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	return out
}

// TestStageSessionFailedRecordAborts: through either front door, a stage
// transaction one of whose records failed must not commit (the
// stageSession contract, and the SDK's TransactSession's: "a failed record
// makes End abort"). franz-go's GroupTransactSession leaves that to its
// caller: a record that failed before it was ever sent (its leader down,
// the dial refused) fails alone, and End(TryCommit) commits the rest. A
// Kafka-door drill found exactly that: a committed stage transaction with
// 7 of its 10 outputs, the 3 to the killed leader's partition missing and
// their inputs below the group's committed offset.
//
// Here the failed record names a partition the sink topic does not have,
// which both clients fail before sending anything.
func TestStageSessionFailedRecordAborts(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Mutate: func(_ int32, cfg *node.Config) {
		cfg.GroupConfig.InitialRebalanceDelay = 0
		cfg.TxnTopic.Partitions, cfg.OffsetsTopic.Partitions = 3, 3
	}})
	c.CreateTopic("src", 1, 3, nil)
	c.CreateTopic("dst", 1, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	seed, err := client.NewProducer(c.ClientOpts()...)
	if err != nil {
		t.Fatal(err)
	}
	defer seed.Close(ctx)
	if err := seed.ProduceSync(ctx, &client.Record{Topic: "src", Value: []byte("in")}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	for _, door := range []string{ProtocolGRPC, ProtocolKafka} {
		t.Run(door, func(t *testing.T) {
			r := &run{cfg: Config{Protocol: door, Bootstrap: c.Bootstrap(), ClientOpts: c.ClientOpts(),
				KafkaBootstrap: c.KafkaAddrs(), TransactionTimeout: 20 * time.Second,
				KafkaDial: func(ctx context.Context, _, host string) (net.Conn, error) { return c.Net.Dial(ctx, "client", host) }},
				src: "src", dst: "dst", group: "stage-" + door}
			s, err := r.newStageSession(ctx, "stage-"+door)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close(ctx)
			for {
				pctx, pcancel := context.WithTimeout(ctx, time.Second)
				recs, err := s.Poll(pctx)
				pcancel()
				if len(recs) > 0 {
					break
				}
				if ctx.Err() != nil {
					t.Fatalf("nothing consumed: %v", err)
				}
			}
			if err := s.Begin(); err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			errs := make([]error, 2)
			for i, part := range []int32{0, 7} { // dst has no partition 7
				wg.Add(1)
				s.Produce(ctx, &client.Record{Topic: "dst", Partition: part, Value: []byte("out")}, func(_ *client.Record, err error) {
					errs[i] = err
					wg.Done()
				})
			}
			committed, err := s.End(ctx, client.TryCommit)
			wg.Wait()
			t.Logf("records: %v; end: committed %v, %v", errs, committed, err)
			if errs[1] == nil {
				t.Fatal("a record to a partition the topic does not have succeeded")
			}
			if committed {
				t.Fatalf("End committed a transaction one of whose records failed (%v)", errs[1])
			}
		})
	}
}
