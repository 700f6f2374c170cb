package hostile

// Real node on real time: the hostile requests are raw bytes on a real TCP connection
// to the Kafka listener; could dial MemNet inside synctest; not moved yet.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"

	"github.com/strand-io/strand/api"
	"github.com/strand-io/strand/broker"
	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/node"
	"github.com/strand-io/strand/testkit/wait"
)

// Connections are capped per address and in total
// (max.connections.per.ip, max.connections), idle ones are closed
// (connections.max.idle.ms), and clients that ping too often are dropped.

// h2Preface is what every HTTP/2 client sends first: the connection
// preface and an empty SETTINGS frame. A connection that has sent it is an
// established gRPC connection with no RPC in flight.
var h2Preface = append([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), 0, 0, 0, 4, 0, 0, 0, 0, 0)

// dialRaw opens a TCP connection from src to addr and sends the HTTP/2
// preface when preface is set; nil when the node refused it (a reset
// already during the dial or the first write).
func dialRaw(t *testing.T, src, addr string, preface bool) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return nil
	}
	if preface {
		if _, err := c.Write(h2Preface); err != nil {
			c.Close()
			return nil
		}
	}
	return c
}

// closedWithin reports whether the node closed c within d: reads end in
// EOF or a reset (frames it sent before are skipped).
func closedWithin(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

// openFDs counts this process's open descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd here: %v", err)
	}
	return len(ents)
}

// optsFrom are SDK options whose connections come from source address src.
func (tg *target) optsFrom(src string, extra ...client.Opt) []client.Opt {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	dial := grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) { return d.DialContext(ctx, "tcp", a) })
	return tg.opts(append([]client.Opt{client.DialOptions(dial)}, extra...)...)
}

// produceFrom writes values to partition 0 of topic, acks=all, from src.
func (tg *target) produceFrom(src, topic string, values ...string) {
	tg.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p, err := client.NewProducer(tg.optsFrom(src, client.WithPartitioner(client.ManualPartitioner{}))...)
	if err != nil {
		tg.t.Fatal(err)
	}
	defer p.Close(ctx)
	for _, v := range values {
		if err := p.ProduceSync(ctx, &client.Record{Topic: topic, Partition: 0, Value: []byte(v)}).FirstErr(); err != nil {
			tg.t.Fatalf("produce from %s: %v", src, err)
		}
	}
}

// TestConnectionFloodIsCapped: 200 idle HTTP/2 connections from
// 127.0.0.1 against max.connections.per.ip=20. The 180 over the cap are
// closed as soon as they are accepted and counted; the node holds at most
// the cap in descriptors; a client from 127.0.0.2 is served meanwhile;
// checkpoints keep being written; and when the flood goes, goroutines and
// heap come back and every acknowledged record is still there.
func TestConnectionFloodIsCapped(t *testing.T) {
	const perIP, flood = 20, 200
	var dataDir string
	tg := devTarget(t, func(c *node.Config) {
		dataDir = c.DataDir
		c.MaxConnections = 60
		c.MaxConnectionsPerIP = perIP
		c.BrokerConfig.CheckpointInterval = 50 * time.Millisecond
	})
	n := tg.dev
	// The setup's clients come from 127.0.0.2 and are closed before the
	// flood, so that 127.0.0.1's slots are all the flood's.
	adm, err := client.NewAdmin(tg.optsFrom("127.0.0.2")...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := adm.CreateTopic(ctx, client.TopicSpec{Name: "conns", Partitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	adm.Close()
	tg.produceFrom("127.0.0.2", "conns", "before")
	cm := n.ConnMetrics()
	// The SDK clients above are gone once their connections close.
	wait.Eventually(t, 10*time.Second, "the setup's connections closed", func() bool { return cm.Current("client") == 0 })
	b := measure(t)
	fdsBefore := openFDs(t)

	conns := make([]net.Conn, 0, flood)
	for i := 0; i < flood; i++ {
		if c := dialRaw(t, "127.0.0.1", n.Addr(), true); c != nil {
			conns = append(conns, c)
		}
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	wait.Eventually(t, 10*time.Second, "every connection over the cap refused", func() bool {
		return cm.Rejected("client", api.RejectMaxPerIP) == flood-perIP
	})
	if got := cm.Current("client"); got != perIP {
		t.Fatalf("%d connections open on the client listener, want max.connections.per.ip=%d", got, perIP)
	}
	// Which ones the node closed, seen from the client's side.
	var closed sync.WaitGroup
	var mu sync.Mutex
	refused := flood - len(conns) // reset already while dialling
	for _, c := range conns {
		closed.Add(1)
		go func() {
			defer closed.Done()
			if closedWithin(c, 500*time.Millisecond) {
				mu.Lock()
				refused++
				mu.Unlock()
			}
		}()
	}
	closed.Wait()
	if refused != flood-perIP {
		t.Errorf("%d of %d connections closed by the node, want the %d over max.connections.per.ip=%d", refused, flood, flood-perIP, perIP)
	}
	// The node's own descriptors: the client side of the flood holds
	// len(conns); the rest of the growth is the node's.
	if grown := openFDs(t) - fdsBefore - len(conns); grown > perIP+10 {
		t.Errorf("the node holds %d more descriptors during a flood of %d connections, want at most max.connections.per.ip=%d (+10)", grown, flood, perIP)
	}
	t.Logf("flood of %d: %d refused, %d held by the node; descriptors +%d (client side %d); goroutines %d -> %d, live heap %d -> %d KiB",
		flood, refused, cm.Current("client"), openFDs(t)-fdsBefore, len(conns), b.goroutines, runtime.NumGoroutine(), b.heap>>10, liveHeap()>>10)
	// Each held connection costs the node three goroutines (gRPC's
	// reader, writer and keepalive).
	if g := runtime.NumGoroutine() - b.goroutines; g > 5*perIP {
		t.Errorf("%d more goroutines while the flood is held, want at most %d", g, 5*perIP)
	}
	// An idle connection pins no read buffer (api.ConnLimiter hands gRPC
	// the *net.TCPConn): about 17 KiB each, against 280 KiB when wrapped.
	if h := int64(liveHeap()) - int64(b.heap); h > 64<<10*perIP {
		t.Errorf("live heap grew %d KiB while %d idle connections are held, want at most 64 KiB each", h>>10, perIP)
	}

	// Another address is served while 127.0.0.1 is at its cap, and the
	// node keeps writing its checkpoints.
	ck := filepath.Join(dataDir, broker.HighWatermarkFile)
	var st os.FileInfo
	st, err = os.Stat(ck)
	if err != nil {
		t.Fatal(err)
	}
	tg.produceFrom("127.0.0.2", "conns", "during")
	wait.Eventually(t, 5*time.Second, "a checkpoint written during the flood", func() bool {
		st2, err := os.Stat(ck)
		return err == nil && st2.ModTime().After(st.ModTime())
	})
	// 127.0.0.1 itself is refused while its connections are held.
	if c := dialRaw(t, "127.0.0.1", n.Addr(), true); c != nil {
		if !closedWithin(c, 2*time.Second) {
			t.Error("a new connection from 127.0.0.1 was kept while it is at its cap")
		}
		c.Close()
	}

	for _, c := range conns {
		c.Close()
	}
	conns = nil
	wait.Eventually(t, 10*time.Second, "the flood's slots freed", func() bool { return cm.Current("client") == 0 })
	b.check(30, 16<<20)
	tg.assertServes()
	if got := tg.readAll("conns", 0, client.ReadCommitted, 2); fmt.Sprint(got) != "[before during]" {
		t.Fatalf("read back %q, want [before during]", got)
	}
}

// TestMaxConnectionsCapsEveryAddress: max.connections counts the client
// listener's connections from all addresses together; once it is
// reached, any new one is closed, whoever sends it, and counted.
func TestMaxConnectionsCapsEveryAddress(t *testing.T) {
	const total = 10
	tg := devTarget(t, func(c *node.Config) { c.MaxConnections = total; c.MaxConnectionsPerIP = 100 })
	n := tg.dev
	cm := n.ConnMetrics()
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := 0; i < total; i++ {
		c := dialRaw(t, "127.0.0.1", n.Addr(), true)
		if c == nil {
			t.Fatalf("connection %d of %d refused", i+1, total)
		}
		conns = append(conns, c)
	}
	wait.Eventually(t, 5*time.Second, "the cap reached", func() bool { return cm.Current("client") == total })
	for _, src := range []string{"127.0.0.1", "127.0.0.2"} {
		if c := dialRaw(t, src, n.Addr(), true); c != nil {
			if !closedWithin(c, 2*time.Second) {
				t.Errorf("a connection from %s over max.connections=%d was kept", src, total)
			}
			c.Close()
		}
	}
	wait.Eventually(t, 5*time.Second, "both refusals counted", func() bool { return cm.Rejected("client", api.RejectMaxConnections) == 2 })
	for _, c := range conns {
		c.Close()
	}
	conns = nil
	wait.Eventually(t, 10*time.Second, "the slots freed", func() bool { return cm.Current("client") == 0 })
	tg.assertServes()
}

// TestIdleConnectionsAreClosed: with connections.max.idle.ms=300, a
// socket that never sends the HTTP/2 preface, an established gRPC
// connection with no RPC, and the SDK's own connections are all closed by
// the node; the SDK then reconnects by itself and a produce succeeds.
func TestIdleConnectionsAreClosed(t *testing.T) {
	const idle = 300 * time.Millisecond
	tg := devTarget(t, func(c *node.Config) { c.ConnectionsMaxIdle = idle })
	n := tg.dev
	cm := n.ConnMetrics()
	tg.createTopic("idle", 1, 1)

	silent := dialRaw(t, "127.0.0.1", n.Addr(), false)
	if silent == nil {
		t.Fatal("dial refused")
	}
	defer silent.Close()
	start := time.Now()
	if !closedWithin(silent, 5*time.Second) {
		t.Fatal("a socket that sent nothing was kept open for 5 s")
	}
	t.Logf("silent socket closed after %v", time.Since(start).Round(time.Millisecond))

	cc := tg.raw(n.Addr())
	cc.Connect()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for s := cc.GetState(); s != connectivity.Ready; s = cc.GetState() {
		if !cc.WaitForStateChange(ctx, s) {
			t.Fatal("the raw connection never became ready")
		}
	}
	start = time.Now()
	if !cc.WaitForStateChange(ctx, connectivity.Ready) {
		t.Fatal("an idle gRPC connection was kept open for 10 s")
	}
	t.Logf("idle gRPC connection closed after %v (state %v)", time.Since(start).Round(time.Millisecond), cc.GetState())

	// The SDK: a producer that has fetched metadata, left idle until the
	// node has closed every connection, then produces.
	p, err := client.NewProducer(tg.opts(client.WithPartitioner(client.ManualPartitioner{}))...)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	if err := p.ProduceSync(ctx, &client.Record{Topic: "idle", Partition: 0, Value: []byte("one")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	adm := tg.admin()
	if _, err := adm.Metadata(ctx, false); err != nil {
		t.Fatal(err)
	}
	// The admin client's connection has no RPC in flight: it is closed.
	wait.Eventually(t, 5*time.Second, "idle SDK connections closed", func() bool { return cm.Current("client") <= 1 })
	if _, err := adm.Metadata(ctx, false); err != nil {
		t.Fatalf("admin after its idle connection was closed: %v", err)
	}
	if err := p.ProduceSync(ctx, &client.Record{Topic: "idle", Partition: 0, Value: []byte("two")}).FirstErr(); err != nil {
		t.Fatalf("produce after the idle timeout: %v", err)
	}
	if got := tg.readAll("idle", 0, client.ReadCommitted, 2); fmt.Sprint(got) != "[one two]" {
		t.Fatalf("read back %q, want [one two]", got)
	}
}

// TestPingFloodIsDropped: a client that pings with no RPC in flight is
// answered GOAWAY ENHANCE_YOUR_CALM "too_many_pings" and disconnected
// (api.KeepaliveMinTime).
func TestPingFloodIsDropped(t *testing.T) {
	tg := devTarget(t)
	n := tg.dev
	c := dialRaw(t, "127.0.0.1", n.Addr(), true)
	if c == nil {
		t.Fatal("dial refused")
	}
	defer c.Close()
	ping := []byte{0, 0, 8, 6, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8}
	for i := 0; i < 10; i++ {
		if _, err := c.Write(ping); err != nil {
			break // already dropped
		}
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	hdr := make([]byte, 9)
	for {
		if _, err := io.ReadFull(c, hdr); err != nil {
			t.Fatalf("connection ended without GOAWAY: %v", err)
		}
		length := int(hdr[0])<<16 | int(hdr[1])<<8 | int(hdr[2])
		body := make([]byte, length)
		if _, err := io.ReadFull(c, body); err != nil {
			t.Fatalf("connection ended mid-frame: %v", err)
		}
		if hdr[3] != 7 { // not GOAWAY
			continue
		}
		code := binary.BigEndian.Uint32(body[4:8])
		if code != 0xb || string(body[8:]) != "too_many_pings" {
			t.Fatalf("GOAWAY code %#x %q, want ENHANCE_YOUR_CALM (0xb) too_many_pings", code, body[8:])
		}
		break
	}
	if !closedWithin(c, 5*time.Second) {
		t.Fatal("the connection stayed open after GOAWAY")
	}
	tg.assertServes()
}
