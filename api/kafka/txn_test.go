package kafka_test

// Real cluster on real time: its franz-go and raw Kafka-wire clients dial TCP. They could dial
// MemNet's listeners through a custom dialer inside synctest, as testkit/sim's workload does; not moved yet.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/strand-io/strand/record"
	"github.com/strand-io/strand/testkit/testcluster"
	"github.com/strand-io/strand/testkit/wait"
)

// The transaction APIs through franz-go: transactional producers of both
// transaction versions (KIP-890's version 2, franz-go's default when
// ApiVersions finalizes transaction.version=2, and version 1, franz-go
// capped below Produce v12, EndTxn v5 and TxnOffsetCommit v5) against a
// three-node cluster's Kafka listeners, read back by read_committed
// consumers.

// txnProducer is a transactional franz-go producer. tv1 caps the versions
// so franz-go runs transaction version 1 (kgo's supportsKIP890p2 opts out
// when any of the three is capped below KIP-890's).
func txnProducer(t *testing.T, ctx context.Context, c *testcluster.Cluster, id, topic string, tv1 bool) *kgo.Client {
	t.Helper()
	opts := []kgo.Opt{kgo.SeedBrokers(c.KafkaAddrs()...), kgo.TransactionalID(id), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionTimeout(time.Minute)}
	if tv1 {
		v := kversion.Stable()
		v.SetMaxKeyVersion(int16(kmsg.Produce), 11)
		v.SetMaxKeyVersion(int16(kmsg.EndTxn), 4)
		v.SetMaxKeyVersion(int16(kmsg.TxnOffsetCommit), 4)
		opts = append(opts, kgo.MaxVersions(v))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	// Learn the brokers' versions and features before the first
	// transaction: franz-go picks the transaction version at its start.
	if err := cl.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	return cl
}

// txn runs one transaction: values to partitions (value i to partition
// parts[i%len(parts)]), then commit or abort. It returns the offsets the
// records got, by partition.
func txn(t *testing.T, ctx context.Context, cl *kgo.Client, commit bool, parts []int32, values ...string) map[int32][]int64 {
	t.Helper()
	offs := begin(t, ctx, cl, parts, values...)
	end(t, ctx, cl, commit)
	return offs
}

func begin(t *testing.T, ctx context.Context, cl *kgo.Client, parts []int32, values ...string) map[int32][]int64 {
	t.Helper()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	offs := map[int32][]int64{}
	for i, v := range values {
		r, err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v), Partition: parts[i%len(parts)]}).First()
		if err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
		offs[r.Partition] = append(offs[r.Partition], r.Offset)
	}
	return offs
}

func end(t *testing.T, ctx context.Context, cl *kgo.Client, commit bool) {
	t.Helper()
	how := kgo.TryAbort
	if commit {
		how = kgo.TryCommit
	}
	if err := cl.EndTransaction(ctx, how); err != nil {
		t.Fatalf("end transaction (commit %v): %v", commit, err)
	}
}

// readCommitted reads topic's partitions with read_committed up to a
// sentinel record appended (non-transactionally) to each after everything
// else, and returns the values before it, by partition.
func readCommitted(t *testing.T, ctx context.Context, c *testcluster.Cluster, topic string, parts int32) map[int32][]string {
	t.Helper()
	sentinel := fmt.Sprintf("sentinel-%d", time.Now().UnixNano())
	p, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()...), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for i := range parts {
		if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte(sentinel), Partition: i}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	got := map[int32][]string{}
	done := map[int32]bool{}
	for int32(len(done)) < parts {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read_committed read %v before every sentinel: %v", got, err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			switch {
			case string(r.Value) == sentinel:
				done[r.Partition] = true
			case !done[r.Partition]:
				got[r.Partition] = append(got[r.Partition], string(r.Value))
			}
		})
	}
	return got
}

// describeTxn is the coordinator's view of a transactional id.
func describeTxn(t *testing.T, ctx context.Context, cl *kgo.Client, id string) kmsg.DescribeTransactionsResponseTransactionState {
	t.Helper()
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{id}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.TransactionStates) != 1 || resp.TransactionStates[0].ErrorCode != 0 {
		t.Fatalf("DescribeTransactions %q: %+v", id, resp.TransactionStates)
	}
	return resp.TransactionStates[0]
}

// settled waits until id's last transaction is complete (its markers
// written) and returns its state.
func settled(t *testing.T, ctx context.Context, cl *kgo.Client, id string) kmsg.DescribeTransactionsResponseTransactionState {
	t.Helper()
	var st kmsg.DescribeTransactionsResponseTransactionState
	wait.Eventually(t, 30*time.Second, "the transaction of "+id+" completes", func() bool {
		st = describeTxn(t, ctx, cl, id)
		return st.State == "CompleteCommit" || st.State == "CompleteAbort" || st.State == "Empty"
	})
	return st
}

func values(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}

// TestTxnCommitAbortVisibility: a producer of each transaction version
// commits, aborts and commits again; a read_committed reader sees exactly
// the committed records. Version 2 bumps the epoch at every end (the
// coordinator's epoch grows by one per transaction); version 1 keeps it
// (the markers carry the producer's unbumped epoch, and its next
// transaction continues its sequence at that epoch). A coordinator that
// ignored the client's version fails either way: bumping a version 1
// client's epoch fences it on its next transaction; not bumping a
// version 2 client's leaves the epoch where it was.
func TestTxnCommitAbortVisibility(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	for _, tc := range []struct {
		name string
		tv1  bool
	}{{"tv2", false}, {"tv1", true}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			topic, id := "vis-"+tc.name, "vis-"+tc.name
			c.CreateTopic(topic, 2, 3, nil)
			cl := txnProducer(t, ctx, c, id, topic, tc.tv1)
			parts := []int32{0, 1}
			txn(t, ctx, cl, true, parts, values("a", 4)...)
			first := settled(t, ctx, cl, id)
			txn(t, ctx, cl, false, parts, values("b", 4)...)
			txn(t, ctx, cl, true, parts, values("c", 4)...)
			last := settled(t, ctx, cl, id)

			wantEpoch := first.ProducerEpoch + 2
			if tc.tv1 {
				wantEpoch = first.ProducerEpoch
			}
			if last.ProducerID != first.ProducerID || last.ProducerEpoch != wantEpoch || last.State != "CompleteCommit" {
				t.Fatalf("after three transactions the coordinator has %d/%d %s; want %d/%d CompleteCommit (from %d/%d)",
					last.ProducerID, last.ProducerEpoch, last.State, first.ProducerID, wantEpoch, first.ProducerID, first.ProducerEpoch)
			}
			got := readCommitted(t, ctx, c, topic, 2)
			want := map[int32][]string{0: {"a-0", "a-2", "c-0", "c-2"}, 1: {"a-1", "a-3", "c-1", "c-3"}}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("read_committed read %v, want %v", got, want)
			}
		})
	}
}

// lso is a partition's last stable offset (ListOffsets, read_committed,
// latest), asked of its leader.
func lso(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, p int32) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.IsolationLevel = 1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = p, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resps := cl.RequestSharded(ctx, req)
	for _, r := range resps {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		for _, t2 := range r.Resp.(*kmsg.ListOffsetsResponse).Topics {
			for _, p2 := range t2.Partitions {
				if err := kerr.ErrorForCode(p2.ErrorCode); err != nil {
					t.Fatalf("ListOffsets %s/%d: %v", topic, p, err)
				}
				return p2.Offset
			}
		}
	}
	t.Fatalf("ListOffsets %s/%d: no answer", topic, p)
	return -1
}

// TestTxnVersionsInterleaved: a version 1 and a version 2 producer run
// overlapping transactions on the same partitions, each ending while the
// other's is open, in both orders, committing and aborting. While a
// transaction is open its first offset holds the partition's last stable
// offset, whatever the other producer commits after it; once both ended
// the LSO is the log end; and a read_committed reader sees exactly the
// committed records, in log order.
func TestTxnVersionsInterleaved(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	const topic = "mixed"
	c.CreateTopic(topic, 2, 3, nil)
	parts := []int32{0, 1}
	v1 := txnProducer(t, ctx, c, "mixed-v1", topic, true)
	v2 := txnProducer(t, ctx, c, "mixed-v2", topic, false)
	type entry struct {
		off int64
		val string
	}
	var committed []entry
	part := map[string]int32{}
	keep := func(offs map[int32][]int64, vals []string, commit bool) {
		for i, v := range vals {
			part[v] = parts[i%len(parts)]
		}
		if !commit {
			return
		}
		for p, os := range offs {
			n := 0
			for i, v := range vals {
				if parts[i%len(parts)] == p {
					committed = append(committed, entry{os[n], v})
					n++
				}
			}
		}
	}
	producers := []*kgo.Client{v1, v2}
	names := []string{"v1", "v2"}
	for round := range 6 {
		// Who opens first alternates; the one that opened first ends last,
		// so the other's end happens under it.
		a, b := round%2, 1-round%2
		va, vb := values(fmt.Sprintf("%s-r%d", names[a], round), 4), values(fmt.Sprintf("%s-r%d", names[b], round), 4)
		commitA, commitB := round%3 != 1, round%3 != 2
		offA := begin(t, ctx, producers[a], parts, va...)
		offB := begin(t, ctx, producers[b], parts, vb...)
		end(t, ctx, producers[b], commitB)
		keep(offB, vb, commitB)
		// b is ended; a's transaction is open on both partitions, since
		// before b's records: its first offset is the LSO.
		for _, p := range parts {
			// acks=all: the high watermark is past every record already.
			if got, want := lso(t, ctx, v2, topic, p), offA[p][0]; got != want {
				t.Fatalf("round %d: partition %d LSO %d, want %d (the first offset of %s's open transaction)", round, p, got, want, names[a])
			}
		}
		end(t, ctx, producers[a], commitA)
		keep(offA, va, commitA)
	}
	settled(t, ctx, v1, "mixed-v1")
	settled(t, ctx, v2, "mixed-v2")
	got := readCommitted(t, ctx, c, topic, 2)
	sort.Slice(committed, func(i, j int) bool { return committed[i].off < committed[j].off })
	want := map[int32][]string{}
	for _, e := range committed {
		want[part[e.val]] = append(want[part[e.val]], e.val)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("read_committed read\n%v\nwant\n%v", got, want)
	}
}

// TestTxnZombieFenced: a second instance of a transactional id
// (InitProducerId again) fences the first: the zombie's open transaction
// is aborted, its commit refused with PRODUCER_FENCED (or, to clients too
// old for that code, INVALID_PRODUCER_EPOCH), and only the new instance's
// records are read_committed.
func TestTxnZombieFenced(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	for _, tc := range []struct {
		name string
		tv1  bool
	}{{"tv2", false}, {"tv1", true}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			topic, id := "zombie-"+tc.name, "zombie-"+tc.name
			c.CreateTopic(topic, 1, 3, nil)
			parts := []int32{0}
			zombie := txnProducer(t, ctx, c, id, topic, tc.tv1)
			txn(t, ctx, zombie, true, parts, "z-ok")
			old := settled(t, ctx, zombie, id)
			begin(t, ctx, zombie, parts, "z-open")

			fresh := txnProducer(t, ctx, c, id, topic, tc.tv1)
			txn(t, ctx, fresh, true, parts, "fresh")
			// The fence aborted the zombie's transaction one epoch up, the
			// new instance got the next; its commit bumped once more under
			// version 2, not under version 1.
			now := describeTxn(t, ctx, fresh, id)
			want := old.ProducerEpoch + 3
			if tc.tv1 {
				want = old.ProducerEpoch + 2
			}
			if now.ProducerID != old.ProducerID || now.ProducerEpoch != want {
				t.Fatalf("the new instance is at %d/%d after its commit, want %d/%d (the zombie was at epoch %d)", now.ProducerID, now.ProducerEpoch, old.ProducerID, want, old.ProducerEpoch)
			}

			err := zombie.EndTransaction(ctx, kgo.TryCommit)
			if !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerEpoch) {
				t.Fatalf("the zombie's commit answered %v, want PRODUCER_FENCED or INVALID_PRODUCER_EPOCH", err)
			}
			// The same refusal at the wire: EndTxn at the zombie's epoch,
			// answered as Kafka does for each version.
			for _, v := range []int16{1, 2, 4, 5} {
				req := kmsg.NewPtrEndTxnRequest()
				req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = id, old.ProducerID, old.ProducerEpoch, true
				resp, err := req.RequestWith(ctx, capped(t, c, kmsg.EndTxn, v))
				if err != nil {
					t.Fatal(err)
				}
				if resp.Version != v {
					t.Fatalf("EndTxn sent at v%d, not v%d", resp.Version, v)
				}
				want := kerr.ProducerFenced
				if v < 2 {
					want = kerr.InvalidProducerEpoch
				}
				if got := kerr.ErrorForCode(resp.ErrorCode); got != want {
					t.Fatalf("EndTxn v%d at the zombie's epoch answered %v, want %v", v, got, want)
				}
			}
			// And the zombie's adds, likewise.
			z := &rawTxn{t: t, ctx: ctx, c: c, id: id, pid: old.ProducerID, epoch: old.ProducerEpoch, topic: topic, leader: c.Partition(topic, 0).Leader, seq: 2}
			// Its late batch: the partition has seen the newer epoch.
			pv := int16(12)
			if tc.tv1 {
				pv = 11
			}
			wantCode(t, fmt.Sprintf("the zombie's Produce v%d", pv), z.produce(pv, "z-late"), kerr.InvalidProducerEpoch)
			for _, v := range []int16{1, 2, 3} {
				want := kerr.ProducerFenced
				if v < 2 {
					want = kerr.InvalidProducerEpoch
				}
				wantCode(t, fmt.Sprintf("the zombie's AddPartitionsToTxn v%d", v), z.addPartition(v), want)
				wantCode(t, fmt.Sprintf("the zombie's AddOffsetsToTxn v%d", v), z.addOffsets(v, "zombie-group"), want)
			}
			settled(t, ctx, fresh, id)
			got := readCommitted(t, ctx, c, topic, 1)
			if want := map[int32][]string{0: {"z-ok", "fresh"}}; fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("read_committed read %v, want %v", got, want)
			}
		})
	}
}

// capped is a plain client that sends key at version v at most (franz-go
// picks a request's version itself).
func capped(t *testing.T, c *testcluster.Cluster, key kmsg.Key, v int16) *kgo.Client {
	t.Helper()
	vs := kversion.Stable()
	vs.SetMaxKeyVersion(int16(key), v)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()...), kgo.MaxVersions(vs))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// rawTxn sends the transaction APIs one by one, each at the version the
// test names, as a client of either transaction version would.
type rawTxn struct {
	t      *testing.T
	ctx    context.Context
	c      *testcluster.Cluster
	id     string
	pid    int64
	epoch  int16
	seq    int32
	topic  string
	leader int32
	// partition is the partition of topic produced to and added (0
	// unless set).
	partition int32
}

func (r *rawTxn) initProducerID(v int16, pid int64, epoch int16) *kmsg.InitProducerIDResponse {
	r.t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	if r.id != "" {
		req.TransactionalID = &r.id
	}
	req.TransactionTimeoutMillis, req.ProducerID, req.ProducerEpoch = 60000, pid, epoch
	resp, err := req.RequestWith(r.ctx, capped(r.t, r.c, kmsg.InitProducerID, v))
	if err != nil {
		r.t.Fatal(err)
	}
	return resp
}

// produce sends one transactional record at the next sequence and
// returns the partition's error code (the sequence moves on only when it
// was written).
func (r *rawTxn) produce(v int16, value string) int16 {
	r.t.Helper()
	batch, err := record.Build(record.BatchOptions{ProducerID: r.pid, ProducerEpoch: r.epoch, BaseSequence: r.seq, Transactional: true,
		PartitionLeaderEpoch: -1, FirstTimestamp: time.Now().UnixMilli()}, []record.Record{{Value: []byte(value)}})
	if err != nil {
		r.t.Fatal(err)
	}
	req := kmsg.NewPtrProduceRequest()
	req.TransactionID, req.Acks, req.TimeoutMillis = &r.id, -1, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = r.topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = r.partition, batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	cl := capped(r.t, r.c, kmsg.Produce, v)
	if err := cl.Ping(r.ctx); err != nil {
		r.t.Fatal(err)
	}
	resp, err := cl.Broker(int(r.leader)).Request(r.ctx, req)
	if err != nil {
		r.t.Fatal(err)
	}
	pr := resp.(*kmsg.ProduceResponse)
	if pr.Version != v {
		r.t.Fatalf("Produce sent at v%d, not v%d", pr.Version, v)
	}
	code := pr.Topics[0].Partitions[0].ErrorCode
	if code == 0 {
		r.seq++
	}
	return code
}

func (r *rawTxn) addPartition(v int16) int16 {
	r.t.Helper()
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = r.id, r.pid, r.epoch
	rt := kmsg.NewAddPartitionsToTxnRequestTopic()
	rt.Topic, rt.Partitions = r.topic, []int32{r.partition}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(r.ctx, capped(r.t, r.c, kmsg.AddPartitionsToTxn, v))
	if err != nil {
		r.t.Fatal(err)
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

func (r *rawTxn) addOffsets(v int16, group string) int16 {
	r.t.Helper()
	req := kmsg.NewPtrAddOffsetsToTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = r.id, r.pid, r.epoch, group
	resp, err := req.RequestWith(r.ctx, capped(r.t, r.c, kmsg.AddOffsetsToTxn, v))
	if err != nil {
		r.t.Fatal(err)
	}
	return resp.ErrorCode
}

// commitOffset commits offset 1 of the topic's partition 0 for group
// (standalone: no member, generation -1) in the transaction. The first
// commit of any group creates __consumer_offsets; until the transaction
// coordinator's metadata has it, adding (or verifying) its partition is
// answered UNKNOWN_TOPIC_OR_PARTITION, retriable (nothing is added or
// written), which this retries.
func (r *rawTxn) commitOffset(v int16, group string) int16 {
	r.t.Helper()
	var code int16
	wait.Eventually(r.t, 20*time.Second, "__consumer_offsets known to the transaction coordinator", func() bool {
		code = r.commitOffsetOnce(v, group)
		return kerr.ErrorForCode(code) != kerr.UnknownTopicOrPartition
	})
	return code
}

func (r *rawTxn) commitOffsetOnce(v int16, group string) int16 {
	r.t.Helper()
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = r.id, group, r.pid, r.epoch
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = r.topic
	rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = 0, 1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(r.ctx, capped(r.t, r.c, kmsg.TxnOffsetCommit, v))
	if err != nil {
		r.t.Fatal(err)
	}
	if resp.Version != v {
		r.t.Fatalf("TxnOffsetCommit sent at v%d, not v%d", resp.Version, v)
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

func (r *rawTxn) endTxn(v int16, commit bool) *kmsg.EndTxnResponse {
	r.t.Helper()
	return r.endTxnWith(capped(r.t, r.c, kmsg.EndTxn, v), commit)
}

// endTxnWith sends EndTxn through cl (capped at the version wanted).
func (r *rawTxn) endTxnWith(cl *kgo.Client, commit bool) *kmsg.EndTxnResponse {
	r.t.Helper()
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = r.id, r.pid, r.epoch, commit
	resp, err := req.RequestWith(r.ctx, cl)
	if err != nil {
		r.t.Fatal(err)
	}
	return resp
}

func wantCode(t *testing.T, what string, got int16, want error) {
	t.Helper()
	if err := kerr.ErrorForCode(got); err != want {
		t.Fatalf("%s answered %v, want %v", what, err, want)
	}
}

// partitionsOf lists a described transaction's partitions as topic/partition.
func partitionsOf(st kmsg.DescribeTransactionsResponseTransactionState) []string {
	var out []string
	for _, t := range st.Topics {
		for _, p := range t.Partitions {
			out = append(out, fmt.Sprintf("%s/%d", t.Topic, p))
		}
	}
	sort.Strings(out)
	return out
}

// TestTxnInitProducerID: without a transactional id, a fresh producer id
// at epoch 0, also for an idempotent producer naming its current one (as
// Kafka: the idempotent producer bumps its epoch itself, KIP-360). With
// one: the epoch bumped at each start; a producer re-initialising with its
// current id and epoch (KIP-360) gets the next epoch, a retry of that
// request the same answer, and an older epoch or another producer id is
// fenced (INVALID_PRODUCER_EPOCH before InitProducerId v4).
func TestTxnInitProducerID(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	idem := &rawTxn{t: t, ctx: ctx, c: c}
	a := idem.initProducerID(5, -1, -1)
	wantCode(t, "idempotent InitProducerId", a.ErrorCode, nil)
	b := idem.initProducerID(5, a.ProducerID, a.ProducerEpoch)
	wantCode(t, "idempotent InitProducerId naming its producer", b.ErrorCode, nil)
	if a.ProducerID < 0 || a.ProducerEpoch != 0 || b.ProducerID < 0 || b.ProducerID == a.ProducerID || b.ProducerEpoch != 0 {
		t.Fatalf("idempotent producers got %d/%d then %d/%d; want two fresh ids at epoch 0", a.ProducerID, a.ProducerEpoch, b.ProducerID, b.ProducerEpoch)
	}

	// An empty transactional id is no id: Kafka refuses it.
	bad := kmsg.NewPtrInitProducerIDRequest()
	bad.TransactionalID, bad.TransactionTimeoutMillis = new(string), 60000
	direct := capped(t, c, kmsg.InitProducerID, 5)
	if err := direct.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	// Sent to a broker: FindCoordinator already refuses an empty key.
	if resp, err := direct.Broker(1).Request(ctx, bad); err != nil {
		t.Fatal(err)
	} else {
		wantCode(t, "InitProducerId with an empty transactional id", resp.(*kmsg.InitProducerIDResponse).ErrorCode, kerr.InvalidRequest)
	}

	r := &rawTxn{t: t, ctx: ctx, c: c, id: "kip360"}
	first := r.initProducerID(5, -1, -1)
	wantCode(t, "InitProducerId", first.ErrorCode, nil)
	pid := first.ProducerID
	steps := []struct {
		v      int16
		pid    int64
		epoch  int16
		code   error
		answer int16
	}{
		{5, -1, -1, nil, first.ProducerEpoch + 1},                       // a new instance: bumped
		{4, pid, first.ProducerEpoch + 1, nil, first.ProducerEpoch + 2}, // KIP-360: current id and epoch
		{4, pid, first.ProducerEpoch + 1, nil, first.ProducerEpoch + 2}, // its retry: the same answer
		{4, pid, first.ProducerEpoch, kerr.ProducerFenced, -1},          // older than the last two
		{3, pid, first.ProducerEpoch, kerr.InvalidProducerEpoch, -1},
		{4, pid + 1000, first.ProducerEpoch + 2, kerr.ProducerFenced, -1}, // not its producer id
	}
	for i, s := range steps {
		resp := r.initProducerID(s.v, s.pid, s.epoch)
		what := fmt.Sprintf("step %d: InitProducerId v%d with %d/%d", i, s.v, s.pid, s.epoch)
		wantCode(t, what, resp.ErrorCode, s.code)
		if s.code == nil && (resp.ProducerID != pid || resp.ProducerEpoch != s.answer) {
			t.Fatalf("%s: got %d/%d, want %d/%d", what, resp.ProducerID, resp.ProducerEpoch, pid, s.answer)
		}
	}
}

// TestTxnVersion1Requests: a transaction version 1 client, request by
// request. Its Produce (below v12) to a partition it did not add is
// refused (the leader only verifies): TRANSACTION_ABORTABLE from v11,
// INVALID_TXN_STATE before, as Kafka answers; AddPartitionsToTxn
// adds it (as the client's own add: the transaction is version 1), as
// AddOffsetsToTxn adds the group's offsets partition, which a
// TxnOffsetCommit below v5 needs first. EndTxn below v5 keeps the epoch,
// and the next transaction at that epoch continues the sequence.
func TestTxnVersion1Requests(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c.CreateTopic("raw1", 1, 3, nil)
	r := &rawTxn{t: t, ctx: ctx, c: c, id: "raw1", topic: "raw1", leader: c.Partition("raw1", 0).Leader}
	init := r.initProducerID(4, -1, -1)
	wantCode(t, "InitProducerId", init.ErrorCode, nil)
	r.pid, r.epoch = init.ProducerID, init.ProducerEpoch
	plain := capped(t, c, kmsg.Produce, 12)

	// Adding no partition starts no transaction.
	empty := kmsg.NewPtrAddPartitionsToTxnRequest()
	empty.TransactionalID, empty.ProducerID, empty.ProducerEpoch = r.id, r.pid, r.epoch
	if resp, err := empty.RequestWith(ctx, plain); err != nil || len(resp.Topics) != 0 {
		t.Fatalf("AddPartitionsToTxn of nothing: %v %+v", err, resp)
	}
	if st := describeTxn(t, ctx, plain, r.id); st.State != "Empty" {
		t.Fatalf("after adding no partition the transaction is %s, want Empty", st.State)
	}
	wantCode(t, "Produce v10 to a partition not added", r.produce(10, "unadded"), kerr.InvalidTxnState)
	wantCode(t, "Produce v11 to a partition not added", r.produce(11, "unadded"), kerr.TransactionAbortable)
	wantCode(t, "AddPartitionsToTxn v3", r.addPartition(3), nil)
	wantCode(t, "Produce v11", r.produce(11, "one"), nil)
	wantCode(t, "TxnOffsetCommit v3 before AddOffsetsToTxn", r.commitOffset(3, "g1"), kerr.InvalidTxnState)
	wantCode(t, "TxnOffsetCommit v4 before AddOffsetsToTxn", r.commitOffset(4, "g1"), kerr.TransactionAbortable)
	wantCode(t, "AddOffsetsToTxn v3", r.addOffsets(3, "g1"), nil)
	wantCode(t, "TxnOffsetCommit v4", r.commitOffset(4, "g1"), nil)
	st := describeTxn(t, ctx, plain, r.id)
	if parts := partitionsOf(st); st.State != "Ongoing" || len(parts) != 2 || parts[1] != "raw1/0" || parts[0][:len("__consumer_offsets/")] != "__consumer_offsets/" {
		t.Fatalf("the open transaction is %s with %v; want Ongoing with raw1/0 and a __consumer_offsets partition", st.State, parts)
	}
	wantCode(t, "EndTxn v4 commit", r.endTxn(4, true).ErrorCode, nil)
	if st := settled(t, ctx, plain, r.id); st.ProducerID != r.pid || st.ProducerEpoch != r.epoch || st.State != "CompleteCommit" {
		t.Fatalf("after a version 1 commit the coordinator has %d/%d %s; want %d/%d CompleteCommit", st.ProducerID, st.ProducerEpoch, st.State, r.pid, r.epoch)
	}
	// The repeat of an end that completed is answered NONE (version 1).
	wantCode(t, "EndTxn v4 commit repeated", r.endTxn(4, true).ErrorCode, nil)

	// The next transaction, same epoch: the sequence goes on from 1.
	wantCode(t, "AddPartitionsToTxn v3, second transaction", r.addPartition(3), nil)
	wantCode(t, "Produce v11 at sequence 1", r.produce(11, "two"), nil)
	wantCode(t, "EndTxn v4 abort", r.endTxn(4, false).ErrorCode, nil)
	settled(t, ctx, plain, r.id)

	// DescribeProducers: the producer at its one epoch, last sequence 1,
	// nothing open.
	dreq := kmsg.NewPtrDescribeProducersRequest()
	dt := kmsg.NewDescribeProducersRequestTopic()
	dt.Topic, dt.Partitions = "raw1", []int32{0}
	dreq.Topics = append(dreq.Topics, dt)
	shards := plain.RequestSharded(ctx, dreq)
	if len(shards) != 1 || shards[0].Err != nil {
		t.Fatalf("DescribeProducers: %+v", shards)
	}
	dp := shards[0].Resp.(*kmsg.DescribeProducersResponse).Topics[0].Partitions[0]
	wantCode(t, "DescribeProducers", dp.ErrorCode, nil)
	if len(dp.ActiveProducers) != 1 || dp.ActiveProducers[0].ProducerID != r.pid || dp.ActiveProducers[0].ProducerEpoch != int32(r.epoch) ||
		dp.ActiveProducers[0].LastSequence != 1 || dp.ActiveProducers[0].CurrentTxnStartOffset != -1 {
		t.Fatalf("DescribeProducers: %+v; want producer %d at epoch %d, last sequence 1, no open transaction", dp.ActiveProducers, r.pid, r.epoch)
	}

	got := readCommitted(t, ctx, c, "raw1", 1)
	if want := map[int32][]string{0: {"one"}}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("read_committed read %v, want %v", got, want)
	}

	// ListTransactions: by state, with an unknown state filter reported.
	lreq := kmsg.NewPtrListTransactionsRequest()
	lreq.StateFilters = []string{"CompleteAbort", "Bogus"}
	var listed []string
	for _, sh := range plain.RequestSharded(ctx, lreq) {
		if sh.Err != nil {
			t.Fatal(sh.Err)
		}
		lr := sh.Resp.(*kmsg.ListTransactionsResponse)
		wantCode(t, "ListTransactions", lr.ErrorCode, nil)
		if fmt.Sprint(lr.UnknownStateFilters) != "[Bogus]" {
			t.Fatalf("ListTransactions unknown state filters %v, want [Bogus]", lr.UnknownStateFilters)
		}
		for _, ts := range lr.TransactionStates {
			listed = append(listed, fmt.Sprintf("%s %d %s", ts.TransactionalID, ts.ProducerID, ts.TransactionState))
		}
	}
	if want := fmt.Sprintf("[raw1 %d CompleteAbort]", r.pid); fmt.Sprint(listed) != want {
		t.Fatalf("ListTransactions listed %v, want %s", listed, want)
	}
}

// TestTxnVersion2Requests: a transaction version 2 client, request by
// request: Produce v12 and TxnOffsetCommit v5 add their partitions
// themselves (no AddPartitionsToTxn, no AddOffsetsToTxn), and EndTxn v5
// answers the bumped epoch, which the next transaction runs at from
// sequence 0.
func TestTxnVersion2Requests(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c.CreateTopic("raw2", 1, 3, nil)
	r := &rawTxn{t: t, ctx: ctx, c: c, id: "raw2", topic: "raw2", leader: c.Partition("raw2", 0).Leader}
	init := r.initProducerID(5, -1, -1)
	wantCode(t, "InitProducerId", init.ErrorCode, nil)
	r.pid, r.epoch = init.ProducerID, init.ProducerEpoch
	plain := capped(t, c, kmsg.Produce, 12)

	wantCode(t, "Produce v12", r.produce(12, "one"), nil)
	wantCode(t, "TxnOffsetCommit v5", r.commitOffset(5, "g2"), nil)
	st := describeTxn(t, ctx, plain, r.id)
	if parts := partitionsOf(st); st.State != "Ongoing" || len(parts) != 2 || parts[1] != "raw2/0" {
		t.Fatalf("the open transaction is %s with %v; want Ongoing with raw2/0 and a __consumer_offsets partition", st.State, parts)
	}
	end := r.endTxn(5, true)
	wantCode(t, "EndTxn v5 commit", end.ErrorCode, nil)
	if end.ProducerID != r.pid || end.ProducerEpoch != r.epoch+1 {
		t.Fatalf("EndTxn v5 answered %d/%d, want %d/%d (the epoch bumped)", end.ProducerID, end.ProducerEpoch, r.pid, r.epoch+1)
	}
	r.epoch, r.seq = end.ProducerEpoch, 0
	wantCode(t, "Produce v12 at the new epoch", r.produce(12, "two"), nil)
	wantCode(t, "EndTxn v5 commit", r.endTxn(5, true).ErrorCode, nil)
	settled(t, ctx, plain, r.id)
	got := readCommitted(t, ctx, c, "raw2", 1)
	if want := map[int32][]string{0: {"one", "two"}}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("read_committed read %v, want %v", got, want)
	}
}
