package console

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/strand-io/strand/metadata"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// fakeBroker answers from canned state: partitions it leads (HW, LSO,
// producers), the transactions and groups it coordinates.
type fakeBroker struct {
	hw, lso   map[tpKey]int64
	producers map[tpKey][]*pb.ProducerState
	txns      []*pb.TransactionState
	groups    []*pb.GroupDescription
	offsets   map[string][]*pb.OffsetFetchPartition
	hang      bool          // every call waits for its context
	delay     time.Duration // every call takes this long (or until its context ends)
	block     chan struct{} // if set, every call waits for it to close (or its context)
	listOffs  atomic.Int64  // ListOffsets calls
	fetches   atomic.Int64  // OffsetFetch calls
	inFetch   atomic.Int64  // OffsetFetch calls in flight
	maxFetch  atomic.Int64  // the most OffsetFetch calls ever in flight at once
	inCalls   atomic.Int64  // calls in flight
}

func (f *fakeBroker) wait(ctx context.Context) error {
	if f.delay > 0 {
		select {
		case <-time.After(f.delay):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if f.block != nil {
		f.inCalls.Add(1)
		defer f.inCalls.Add(-1)
		select {
		case <-f.block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if f.hang {
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

func (f *fakeBroker) ListOffsets(ctx context.Context, in *pb.ListOffsetsRequest, _ ...grpc.CallOption) (*pb.ListOffsetsResponse, error) {
	f.listOffs.Add(1)
	if err := f.wait(ctx); err != nil {
		return nil, err
	}
	out := &pb.ListOffsetsResponse{}
	for _, p := range in.Partitions {
		k := tpKey{p.Topic, p.Partition}
		hw, ok := f.hw[k]
		if !ok {
			out.Partitions = append(out.Partitions, &pb.ListOffsetsPartitionResponse{Topic: p.Topic, Partition: p.Partition, ErrorCode: pb.ErrorCode_NOT_LEADER_OR_FOLLOWER})
			continue
		}
		off := hw
		if in.IsolationLevel == pb.IsolationLevel_READ_COMMITTED {
			off = f.lso[k]
		}
		out.Partitions = append(out.Partitions, &pb.ListOffsetsPartitionResponse{Topic: p.Topic, Partition: p.Partition, Offset: off, HighWatermark: hw, LastStableOffset: f.lso[k]})
	}
	return out, nil
}

func (f *fakeBroker) DescribeProducers(ctx context.Context, in *pb.DescribeProducersRequest, _ ...grpc.CallOption) (*pb.DescribeProducersResponse, error) {
	if err := f.wait(ctx); err != nil {
		return nil, err
	}
	out := &pb.DescribeProducersResponse{}
	for _, p := range in.Partitions {
		k := tpKey{p.Topic, p.Partition}
		out.Partitions = append(out.Partitions, &pb.PartitionProducers{Topic: p.Topic, Partition: p.Partition, ActiveProducers: f.producers[k], HighWatermark: f.hw[k], LastStableOffset: f.lso[k]})
	}
	return out, nil
}

func (f *fakeBroker) ListTransactions(ctx context.Context, in *pb.ListTransactionsRequest, _ ...grpc.CallOption) (*pb.ListTransactionsResponse, error) {
	if err := f.wait(ctx); err != nil {
		return nil, err
	}
	out := &pb.ListTransactionsResponse{}
	for _, t := range f.txns {
		out.Transactions = append(out.Transactions, &pb.TransactionListing{TransactionalId: t.TransactionalId, ProducerId: t.ProducerId, State: t.State})
	}
	return out, nil
}

func (f *fakeBroker) DescribeTransactions(ctx context.Context, in *pb.DescribeTransactionsRequest, _ ...grpc.CallOption) (*pb.DescribeTransactionsResponse, error) {
	if err := f.wait(ctx); err != nil {
		return nil, err
	}
	return &pb.DescribeTransactionsResponse{Transactions: f.txns}, nil
}

func (f *fakeBroker) ListGroups(ctx context.Context, in *pb.ListGroupsRequest, _ ...grpc.CallOption) (*pb.ListGroupsResponse, error) {
	if err := f.wait(ctx); err != nil {
		return nil, err
	}
	out := &pb.ListGroupsResponse{}
	for _, g := range f.groups {
		out.Groups = append(out.Groups, &pb.ListedGroup{GroupId: g.GroupId, State: g.State, ProtocolType: g.ProtocolType})
	}
	return out, nil
}

func (f *fakeBroker) DescribeGroups(ctx context.Context, in *pb.DescribeGroupsRequest, _ ...grpc.CallOption) (*pb.DescribeGroupsResponse, error) {
	if err := f.wait(ctx); err != nil {
		return nil, err
	}
	return &pb.DescribeGroupsResponse{Groups: f.groups}, nil
}

func (f *fakeBroker) OffsetFetch(ctx context.Context, in *pb.OffsetFetchRequest, _ ...grpc.CallOption) (*pb.OffsetFetchResponse, error) {
	f.fetches.Add(1)
	n := f.inFetch.Add(1)
	defer f.inFetch.Add(-1)
	for {
		m := f.maxFetch.Load()
		if n <= m || f.maxFetch.CompareAndSwap(m, n) {
			break
		}
	}
	if err := f.wait(ctx); err != nil {
		return nil, err
	}
	return &pb.OffsetFetchResponse{Partitions: f.offsets[in.GroupId]}, nil
}

const evil = `<script>alert("x")</script>`

var now = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// testImage: brokers 1..3 (3 fenced); topic "orders" with two partitions
// led by 1 and 2, partition 1 being reassigned from [2 1] to [2 4]; a
// topic with a hostile name.
func testImage() *metadata.Image {
	im := metadata.EmptyImage()
	im.ClusterID = "cid-1"
	im.Offset = 42
	for id := int32(1); id <= 4; id++ {
		im.Brokers[id] = &metadata.Broker{ID: id, Address: "b" + string('0'+rune(id)) + ":9092", Fenced: id == 3}
	}
	im.Topics["orders"] = &metadata.Topic{Name: "orders", ID: "t1", Partitions: []*metadata.Partition{
		{Topic: "orders", Partition: 0, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1, LeaderEpoch: 3},
		{Topic: "orders", Partition: 1, Replicas: []int32{2, 1, 4}, ISR: []int32{2, 1}, Leader: 2, LeaderEpoch: 5,
			AddingReplicas: []int32{4}, RemovingReplicas: []int32{1}},
	}}
	im.Topics[evil] = &metadata.Topic{Name: evil, ID: "t2", Partitions: []*metadata.Partition{
		{Topic: evil, Partition: 0, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1},
	}}
	return im
}

func testConsole(t *testing.T, brokers map[int32]*fakeBroker) *Console {
	im := testImage()
	return New(Config{
		NodeID:           2,
		Image:            func() *metadata.Image { return im },
		ActiveController: func() int32 { return 1 },
		Voters:           []Voter{{1, "r1:9093"}, {2, "r2:9093"}, {3, "r3:9093"}},
		Broker: func(b *metadata.Broker) (BrokerAPI, error) {
			if f := brokers[b.ID]; f != nil {
				return f, nil
			}
			return nil, errors.New("connection refused")
		},
		Timeout: 300 * time.Millisecond,
		Now:     func() time.Time { return now },
		Logger:  nil,
	})
}

func defaultBrokers() map[int32]*fakeBroker {
	o0, o1, e0 := tpKey{"orders", 0}, tpKey{"orders", 1}, tpKey{evil, 0}
	start := now.Add(-90 * time.Second).UnixMilli()
	return map[int32]*fakeBroker{
		1: {
			hw: map[tpKey]int64{o0: 10, e0: 1}, lso: map[tpKey]int64{o0: 4, e0: 1},
			producers: map[tpKey][]*pb.ProducerState{o0: {
				{ProducerId: 7000, ProducerEpoch: 2, CurrentTxnStartOffset: 4},
				{ProducerId: 7001, ProducerEpoch: 0, CurrentTxnStartOffset: 6},
				{ProducerId: 7002, ProducerEpoch: 0, CurrentTxnStartOffset: -1},
			}},
			txns: []*pb.TransactionState{
				{TransactionalId: "tx-" + evil, ProducerId: 7000, ProducerEpoch: 2, State: "Ongoing", TransactionStartTimeMs: start,
					Partitions: []*pb.TopicPartition{{Topic: "orders", Partition: 0}}},
				{TransactionalId: "tx-done", ProducerId: 7003, ProducerEpoch: 1, State: "CompleteCommit", TransactionStartTimeMs: -1},
			},
			groups: []*pb.GroupDescription{{GroupId: "g-" + evil, State: "Stable", ProtocolType: "consumer",
				Members: []*pb.GroupMember{{MemberId: "m-1", ClientId: "c<1>", ClientHost: "/127.0.0.1"}}}},
			offsets: map[string][]*pb.OffsetFetchPartition{"g-" + evil: {
				{Topic: "orders", Partition: 0, Offset: 7},
				{Topic: "orders", Partition: 1, Offset: 20},
			}},
		},
		2: {hw: map[tpKey]int64{o1: 25}, lso: map[tpKey]int64{o1: 25}},
		4: {},
	}
}

func get(t *testing.T, c *Console, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	c.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	body, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(body)
}

func mustContain(t *testing.T, body string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(body, w) {
			t.Errorf("page lacks %q:\n%s", w, body)
		}
	}
}

func TestEscapesEverything(t *testing.T) {
	c := testConsole(t, defaultBrokers())
	for _, path := range []string{"/topics", "/topics/" + pathEscape(evil), "/topics/" + pathEscape(evil) + "/0", "/topics/orders/0",
		"/groups", "/groups/" + pathEscape("g-"+evil), "/transactions"} {
		code, body := get(t, c, path)
		if code != http.StatusOK {
			t.Fatalf("%s: %d\n%s", path, code, body)
		}
		if strings.Contains(body, "<script>") {
			t.Errorf("%s: unescaped <script> in the page:\n%s", path, body)
		}
		if strings.Contains(body, "c<1>") {
			t.Errorf("%s: unescaped client id", path)
		}
	}
	_, body := get(t, c, "/topics")
	mustContain(t, body, "&lt;script&gt;", `href="/topics/%3Cscript%3Ealert%28%22x%22%29%3C%2Fscript%3E"`)
}

func pathEscape(s string) string {
	return strings.NewReplacer("<", "%3C", ">", "%3E", `"`, "%22", "/", "%2F", "(", "%28", ")", "%29").Replace(s)
}

func TestUnknownIs404(t *testing.T) {
	c := testConsole(t, defaultBrokers())
	for _, path := range []string{"/topics/nope", "/topics/orders/9", "/topics/orders/x", "/groups/nope", "/nope"} {
		if code, body := get(t, c, path); code != http.StatusNotFound {
			t.Errorf("%s: %d, want 404\n%s", path, code, body)
		}
	}
}

func TestClusterPage(t *testing.T) {
	c := testConsole(t, defaultBrokers())
	code, body := get(t, c, "/?refresh=2")
	if code != 200 {
		t.Fatal(code)
	}
	mustContain(t, body, `<meta http-equiv="refresh" content="2">`, `<strong id="active-controller">1</strong>`, `<span id="fenced">3</span>`,
		"b1:9092", "r3:9093", "cid-1", "(this node)")
	if _, body := get(t, c, "/?refresh=0"); strings.Contains(body, "http-equiv") {
		t.Error("refresh=0 still refreshes")
	}
}

func TestTopicPageLSO(t *testing.T) {
	c := testConsole(t, defaultBrokers())
	_, body := get(t, c, "/topics/orders")
	// Partition 0: HW 10, LSO 4, lag 6; two open transactions, the
	// oldest known one started 90s ago.
	mustContain(t, body, `<td class="num hw">10</td><td class="num lso">4</td><td class="num lsolag warn">6</td>`,
		`<td class="num opentxns">2 <span class="bad hanging">(1 possibly hanging)</span></td><td class="oldest">1m30s</td>`, `href="/topics/orders/0"`,
		`<td class="num hw">25</td><td class="num lso">25</td><td class="num lsolag">0</td>`)
	_, body = get(t, c, "/topics/orders/0")
	mustContain(t, body, `<strong id="lsolag">6</strong>`, `<td class="num pid">7000</td>`, "tx-&lt;script&gt;", "1m30s", `id="others"`, `<td class="num pid">7001</td>`)
	// 7001's transaction is known to no coordinator: possibly hanging; 7000's is not.
	mustContain(t, body, "possibly: no coordinator knows producer 7001")
	if strings.Count(body, "possibly:") != 1 {
		t.Errorf("want exactly one possibly hanging transaction:\n%s", body)
	}
	_, topicBody := get(t, c, "/topics/orders")
	mustContain(t, topicBody, "(1 possibly hanging)")
	if i, j := strings.Index(body, `id="holders"`), strings.Index(body, "7001"); i < 0 || j < i || strings.Index(body, `id="others"`) > j {
		t.Errorf("producer 7001 (first offset 6) is not listed apart from the holder")
	}
	_, body = get(t, c, "/topics/orders/1")
	mustContain(t, body, `id="no-holder"`)
}

func TestGroupsPages(t *testing.T) {
	c := testConsole(t, defaultBrokers())
	_, body := get(t, c, "/groups")
	// Lag: (10-7) + (25-20) = 8.
	mustContain(t, body, `<td class="num lag">8</td>`, "g-&lt;script&gt;", "Stable")
	_, body = get(t, c, "/groups/"+pathEscape("g-"+evil))
	mustContain(t, body, `<strong id="total-lag">8</strong>`, `<td class="num committed">7</td><td class="num end">10</td>`, "m-1", "c&lt;1&gt;")
}

func TestTransactionsPage(t *testing.T) {
	c := testConsole(t, defaultBrokers())
	_, body := get(t, c, "/transactions")
	mustContain(t, body, `id="txns-Ongoing"`, `id="txns-CompleteCommit"`, "tx-done", "orders-0", "1m30s")
	if strings.Index(body, "txns-Ongoing") > strings.Index(body, "txns-CompleteCommit") {
		t.Error("Ongoing is not listed before CompleteCommit")
	}
}

// TestReassignmentsPage feeds the page a hand-built image: orders-1 moves
// from [2 1] to [2 4]; 4 is adding and not yet in the ISR.
func TestReassignmentsPage(t *testing.T) {
	c := testConsole(t, defaultBrokers())
	_, body := get(t, c, "/reassignments")
	mustContain(t, body, `id="r-orders-1"`, `<td class="target">2,4</td>`, `<td class="removing">1</td>`,
		"4: catching up</div>", "0/1 adding replicas caught up", ">25<")
	if strings.Contains(body, "r-orders-0") {
		t.Error("orders-0 is not being reassigned")
	}
	// Served by the leader: the adding replica's log end, as the leader knows it.
	c.cfg.FollowerLogEnds = func(topic string, partition int32) (map[int32]int64, int64, bool) {
		if topic != "orders" || partition != 1 {
			return nil, -1, false
		}
		return map[int32]int64{1: 25, 4: 18}, 25, true
	}
	_, body = get(t, c, "/reassignments")
	mustContain(t, body, "4: catching up, at offset 18 of 25 (7 behind)")
	// Nothing is being moved.
	im := metadata.EmptyImage()
	c.cfg.Image = func() *metadata.Image { return im }
	_, body = get(t, c, "/reassignments")
	mustContain(t, body, "no reassignment is running")
}

// TestBrokerDown: a broker that never answers costs a page its timeout,
// and the page says what is missing.
func TestBrokerDown(t *testing.T) {
	bs := defaultBrokers()
	bs[1].hang = true
	c := testConsole(t, bs)
	for _, path := range []string{"/topics/orders", "/groups", "/transactions"} {
		start := time.Now()
		code, body := get(t, c, path)
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("%s took %v", path, took)
		}
		if code != 200 {
			t.Errorf("%s: %d", path, code)
		}
		mustContain(t, body, `id="errors"`, "broker 1")
	}
	_, body := get(t, c, "/topics/orders")
	mustContain(t, body, `<td class="num hw">25</td>`) // broker 2 still answered
	// A group not found while a coordinator is silent is not a 404.
	if code, body := get(t, c, "/groups/somewhere"); code != http.StatusServiceUnavailable {
		t.Errorf("group lookup with broker 1 down: %d, want 503\n%s", code, body)
	}
}

// TestClusterPageCurrentVoters: the voters table shows CurrentVoters (the
// Raft configuration after AddVoter/RemoveVoter) over the configured
// Voters, and the configured ones while CurrentVoters knows none.
func TestClusterPageCurrentVoters(t *testing.T) {
	c := testConsole(t, defaultBrokers())
	var cur []Voter
	c.cfg.CurrentVoters = func() []Voter { return cur }
	if _, body := get(t, c, "/"); !strings.Contains(body, "r3:9093") {
		t.Errorf("no current voters known: the configured voter 3 is not shown:\n%s", body)
	}
	cur = []Voter{{1, "r1:9093"}, {4, "r4:9093"}}
	_, body := get(t, c, "/")
	mustContain(t, body, "r4:9093")
	if strings.Contains(body, "r3:9093") {
		t.Errorf("the configured voter 3, removed from the quorum, is still shown:\n%s", body)
	}
}
