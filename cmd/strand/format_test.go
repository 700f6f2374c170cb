package main

// Real node on real time: the strand CLI under test dials its --bootstrap address
// over real TCP; it has no in-memory dialer that could reach MemNet.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/testkit/testutil"
)

// produceRecords writes recs with the SDK (exact keys, headers, timestamps).
func produceRecords(t *testing.T, addr string, recs ...*client.Record) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := client.NewProducer(client.Bootstrap(addr), client.WithPartitioner(client.ManualPartitioner{}))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	if err := p.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// kafka-console-consumer's formatter properties: labelled columns in
// Kafka's order (timestamp, partition, offset, headers, key, value)
// separated by key.separator; null keys print null.literal.
func TestConsumeFormatterProperties(t *testing.T) {
	n := testutil.StartDev(t, t.TempDir())
	b := "--bootstrap=" + n.Addr()
	run(t, "", "topics", "create", "fp", "--partitions", "2", b)
	ts := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	produceRecords(t, n.Addr(),
		&client.Record{Topic: "fp", Partition: 1, Key: []byte("k1"), Value: []byte("v1"), Timestamp: ts,
			Headers: []client.Header{{Key: "h1", Value: []byte("x")}, {Key: "h2", Value: []byte("y")}}},
		&client.Record{Topic: "fp", Partition: 1, Value: []byte("v2"), Timestamp: ts.Add(time.Millisecond)})
	out := run(t, "", "consume", "fp", "--partition", "1", "--from-beginning", "--max-records", "2", "--timeout", "10s",
		"--property", "print.timestamp=true", "--property", "print.partition=true", "--property", "print.offset=true",
		"--property", "print.headers=true", "--property", "print.key=true", b)
	want := fmt.Sprintf("CreateTime:%d\tPartition:1\tOffset:0\th1:x,h2:y\tk1\tv1\nCreateTime:%d\tPartition:1\tOffset:1\tNO_HEADERS\tnull\tv2\n",
		ts.UnixMilli(), ts.UnixMilli()+1)
	if out != want {
		t.Fatalf("printed\n%q\nwant\n%q", out, want)
	}
	out = run(t, "", "consume", "fp", "--partition", "1", "--from-beginning", "--max-records", "2", "--timeout", "10s",
		"--property", "print.key=true", "--property", "key.separator= | ", "--property", "print.value=false", b)
	if out != "k1\nnull\n" {
		t.Fatalf("print.key with print.value=false printed %q", out)
	}
	out = run(t, "", "consume", "fp", "--partition", "1", "--from-beginning", "--max-records", "1", "--timeout", "10s",
		"--property", "print.key=true", "--property", "key.separator= | ", b)
	if out != "k1 | v1\n" {
		t.Fatalf("key.separator printed %q", out)
	}
	// The older flags keep their bare columns.
	out = run(t, "", "consume", "fp", "--partition", "1", "--from-beginning", "--max-records", "2", "--timeout", "10s",
		"--print-partition", "--print-offsets", "--print-key", b)
	if out != "1\t0\tk1\tv1\n1\t1\t\tv2\n" {
		t.Fatalf("--print-partition --print-offsets --print-key printed %q", out)
	}
	if _, errOut, err := runErr(t, "", "consume", "fp", "--property", "print.key=maybe", b); err == nil || !strings.Contains(errOut, "want true or false") {
		t.Fatalf("print.key=maybe: %v %s", err, errOut)
	}
}

// --from-timestamp starts each partition at its first record at or after
// the time (ListOffsets by timestamp), and at the end where none is.
func TestConsumeFromTimestamp(t *testing.T) {
	n := testutil.StartDev(t, t.TempDir())
	b := "--bootstrap=" + n.Addr()
	run(t, "", "topics", "create", "ft", "--partitions", "2", b)
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	at := func(s int) time.Time { return base.Add(time.Duration(s) * time.Second) }
	produceRecords(t, n.Addr(),
		&client.Record{Topic: "ft", Partition: 0, Value: []byte("p0-10"), Timestamp: at(10)},
		&client.Record{Topic: "ft", Partition: 0, Value: []byte("p0-20"), Timestamp: at(20)},
		&client.Record{Topic: "ft", Partition: 0, Value: []byte("p0-30"), Timestamp: at(30)},
		&client.Record{Topic: "ft", Partition: 1, Value: []byte("p1-15"), Timestamp: at(15)},
		&client.Record{Topic: "ft", Partition: 1, Value: []byte("p1-25"), Timestamp: at(25)})
	out := run(t, "", "consume", "ft", "--from-timestamp", fmt.Sprint(at(20).UnixMilli()), "--max-records", "3", "--timeout", "10s", b)
	if got := strings.Join(sortedLines(out), " "); got != "p0-20 p0-30 p1-25" {
		t.Fatalf("--from-timestamp printed %q", got)
	}
	out = run(t, "", "consume", "ft", "--partition", "1", "--from-timestamp", fmt.Sprint(at(11).UnixMilli()), "--max-records", "2", "--timeout", "10s", b)
	if out != "p1-15\np1-25\n" {
		t.Fatalf("--partition 1 --from-timestamp printed %q", out)
	}
	if out := run(t, "", "consume", "ft", "--from-timestamp", fmt.Sprint(at(31).UnixMilli()), "--timeout", "1s", b); out != "" {
		t.Fatalf("--from-timestamp after the last record printed %q", out)
	}
}
