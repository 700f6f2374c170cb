// Package hostile holds tests in which a client that owes the cluster
// nothing — a raw gRPC connection to a client listener, sending whatever
// the protocol lets it name — tries to break exactly-once, exhaust a node
// or lose acknowledged data. Every case ends by checking that
// the node or cluster still serves everyone else.
//
// The package is test files only. harness_test.go is the reusable part:
// start a target (a dev node or an in-process cluster), dial its client
// listener raw, assert refusals, check that the target still serves, and
// bound goroutines and heap around a hostile load. Add cases in their own
// files.
package hostile

// The targets here start real nodes on real time: the hostile tests speak raw
// Kafka wire over real TCP; the clusters could run on MemNet inside synctest; not moved yet.

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/internal/wire"
	"github.com/strand-io/strand/metadata"
	"github.com/strand-io/strand/node"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/testkit/testcluster"
	"github.com/strand-io/strand/testkit/testutil"
	"github.com/strand-io/strand/testkit/wait"
)

// target is what a hostile case attacks: one dev node or an in-process
// cluster, reached through the client listeners.
type target struct {
	t       testing.TB
	dev     *node.Node           // set for a dev node
	cluster *testcluster.Cluster // set for a cluster
	conns   []*grpc.ClientConn   // raw connections, closed by dropRaw
}

// devTarget starts a one-node dev server (every role, replication factor
// 1) for the test; mutate adjusts its config first.
func devTarget(t testing.TB, mutate ...func(*node.Config)) *target {
	t.Helper()
	return &target{t: t, dev: testutil.StartDev(t, t.TempDir(), mutate...)}
}

// clusterTarget starts an in-process cluster of n combined nodes whose
// links go through the cluster's fault network.
func clusterTarget(t testing.TB, n int, mutate ...func(id int32, cfg *node.Config)) *target {
	t.Helper()
	opts := testcluster.Options{Nodes: n}
	if len(mutate) > 0 {
		opts.Mutate = func(id int32, cfg *node.Config) {
			for _, m := range mutate {
				m(id, cfg)
			}
		}
	}
	return &target{t: t, cluster: testcluster.New(t, opts)}
}

// nodes lists the running nodes.
func (tg *target) nodes() []*node.Node {
	if tg.dev != nil {
		return []*node.Node{tg.dev}
	}
	var out []*node.Node
	for _, m := range tg.cluster.Running() {
		out = append(out, m.Node)
	}
	return out
}

// clientAddrs lists the client listeners (what clients bootstrap from).
func (tg *target) clientAddrs() []string {
	var out []string
	for _, n := range tg.nodes() {
		out = append(out, n.Addr())
	}
	return out
}

// opts are the SDK options of a well-behaved client of the target.
func (tg *target) opts(extra ...client.Opt) []client.Opt {
	if tg.cluster != nil {
		return tg.cluster.ClientOpts(extra...)
	}
	return append([]client.Opt{client.Bootstrap(tg.clientAddrs()...), client.RetryBackoff(20*time.Millisecond, 200*time.Millisecond),
		client.Logger(testutil.Logger())}, extra...)
}

// raw dials addr with a plain gRPC connection (no SDK, no retries) whose
// errors carry their Kafka code, as a hostile client would hold one.
func (tg *target) raw(addr string) *grpc.ClientConn {
	tg.t.Helper()
	cc, err := grpc.NewClient("passthrough:///"+addr, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, wire.ErrorCodeDialOptions()...)...)
	if err != nil {
		tg.t.Fatal(err)
	}
	tg.t.Cleanup(func() { cc.Close() })
	tg.conns = append(tg.conns, cc)
	return cc
}

// dropRaw closes the raw connections dialled so far, as a hostile client
// going away does (before bounds.check, so that they do not count).
func (tg *target) dropRaw() {
	for _, cc := range tg.conns {
		cc.Close()
	}
	tg.conns = nil
}

// admin returns an SDK admin client, closed with the test.
func (tg *target) admin() *client.Admin {
	tg.t.Helper()
	a, err := client.NewAdmin(tg.opts()...)
	if err != nil {
		tg.t.Fatal(err)
	}
	tg.t.Cleanup(a.Close)
	return a
}

// createTopic creates a topic and waits until every partition has a leader.
func (tg *target) createTopic(name string, partitions, rf int32) {
	tg.t.Helper()
	if tg.cluster != nil {
		tg.cluster.CreateTopic(name, partitions, rf, nil)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := tg.admin().CreateTopic(ctx, client.TopicSpec{Name: name, Partitions: partitions, ReplicationFactor: rf}); err != nil {
		tg.t.Fatal(err)
	}
}

// settle waits until the metadata image shows whatever the calls made
// before it changed: it creates a topic and waits for image to have it.
// Metadata records apply in order, so by then every earlier change has
// applied too.
func (tg *target) settle(image func() *metadata.Image) {
	tg.t.Helper()
	name := fmt.Sprintf("settle-%d", probeSeq.Add(1))
	tg.createTopic(name, 1, 1)
	wait.Eventually(tg.t, 20*time.Second, "topic "+name+" in the image", func() bool { return image().Topic(name) != nil })
}

// refused reports whether err is how a listener turns down an RPC it does
// not serve: UNIMPLEMENTED (the service or method is not there), or
// PERMISSION_DENIED with CLUSTER_AUTHORIZATION_FAILED (a method the
// listener serves to clients, asked for in a peer's name).
func refused(err error) bool {
	switch status.Code(err) {
	case codes.Unimplemented:
		return true
	case codes.PermissionDenied:
		return errs.CodeOf(err) == pb.ErrorCode_CLUSTER_AUTHORIZATION_FAILED
	}
	return false
}

// wantRefused fails the test unless err is a refusal (refused).
func wantRefused(t testing.TB, what string, err error) {
	t.Helper()
	if !refused(err) {
		t.Errorf("%s on a client listener: got %v (gRPC %v, code %v), want it refused (UNIMPLEMENTED, or PERMISSION_DENIED with CLUSTER_AUTHORIZATION_FAILED)",
			what, err, status.Code(err), errs.CodeOf(err))
	}
}

var probeSeq atomic.Int64

// assertServes checks that the target still serves a well-behaved client:
// every broker is listed live at the address its node advertises, and a
// record written with acks=all is read back from a fresh topic.
func (tg *target) assertServes() {
	tg.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	want := map[int32]string{}
	for _, n := range tg.nodes() {
		want[n.ID()] = n.Addr()
	}
	adm := tg.admin()
	md, err := adm.Metadata(ctx, false)
	if err != nil {
		tg.t.Fatalf("still serving? Metadata: %v", err)
	}
	for _, b := range md.Brokers {
		if addr, ok := want[b.NodeId]; ok && (b.Address != addr || b.Fenced) {
			tg.t.Errorf("still serving? Metadata lists broker %d at %s (fenced %v), want %s unfenced", b.NodeId, b.Address, b.Fenced, addr)
		}
	}
	topic := fmt.Sprintf("probe-%d", probeSeq.Add(1))
	tg.createTopic(topic, 1, int32(len(want)))
	p, err := client.NewProducer(tg.opts(client.WithPartitioner(client.ManualPartitioner{}))...)
	if err != nil {
		tg.t.Fatal(err)
	}
	defer p.Close(ctx)
	if err := p.ProduceSync(ctx, &client.Record{Topic: topic, Partition: 0, Value: []byte("probe")}).FirstErr(); err != nil {
		tg.t.Fatalf("still serving? produce: %v", err)
	}
	got := tg.readAll(topic, 0, client.ReadCommitted, 1)
	if len(got) != 1 || got[0] != "probe" {
		tg.t.Fatalf("still serving? read back %q, want [probe]", got)
	}
}

// readAll reads partition p of topic from the start up to its end (the
// LSO for read_committed, the HW otherwise) and returns the values. It
// reads again until at least min values are there, for up to 10 s, and
// then returns what the last read found.
func (tg *target) readAll(topic string, p int32, iso client.IsolationLevel, min int) []string {
	tg.t.Helper()
	var out []string
	_ = wait.Until(10*time.Second, "enough values", func() bool {
		out = tg.readOnce(topic, p, iso)
		return len(out) >= min
	})
	return out
}

func (tg *target) readOnce(topic string, p int32, iso client.IsolationLevel) []string {
	tg.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tp := client.TopicPartition{Topic: topic, Partition: p}
	lo, err := tg.admin().ListOffsets(ctx, []client.TopicPartition{tp}, client.OffsetLatest, iso)
	if err != nil {
		tg.t.Fatal(err)
	}
	end := lo[tp].Offset
	c, err := client.NewConsumer(tg.opts(client.Isolation(iso), client.FetchMaxWait(50*time.Millisecond))...)
	if err != nil {
		tg.t.Fatal(err)
	}
	defer c.Close(context.Background())
	c.Assign(map[client.TopicPartition]int64{tp: client.OffsetEarliest})
	var out []string
	for c.Position(tp) < end {
		recs, err := c.Poll(ctx)
		if err != nil {
			tg.t.Fatalf("read %s up to %d (%d values so far: %q): %v", tp, end, len(out), out, err)
		}
		for _, r := range recs {
			out = append(out, string(r.Value))
		}
	}
	return out
}

// bounds records the goroutine count and the live heap before a hostile
// load; check then waits (up to 20 s) for them to come back within the
// slack given, and fails the test if they do not: a refused request must
// leave nothing behind.
type bounds struct {
	t          testing.TB
	goroutines int
	heap       uint64
}

func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

func measure(t testing.TB) *bounds {
	return &bounds{t: t, goroutines: runtime.NumGoroutine(), heap: liveHeap()}
}

func (b *bounds) check(goroutineSlack int, heapSlack uint64) {
	b.t.Helper()
	var g int
	var h uint64
	if wait.Until(20*time.Second, "goroutines and heap to settle", func() bool {
		g, h = runtime.NumGoroutine(), liveHeap()
		return g <= b.goroutines+goroutineSlack && h <= b.heap+heapSlack
	}) != nil {
		buf := make([]byte, 1<<20)
		n := runtime.Stack(buf, true)
		b.t.Fatalf("after the hostile load: %d goroutines (before %d, slack %d), live heap %d bytes (before %d, slack %d)\n%s",
			g, b.goroutines, goroutineSlack, h, b.heap, heapSlack, firstLines(string(buf[:n]), 200))
	}
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}
