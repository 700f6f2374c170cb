package main

// Real node on real time: the strand CLI under test dials its --bootstrap address
// over real TCP; it has no in-memory dialer that could reach MemNet.

import (
	"strings"
	"testing"

	"github.com/strand-io/strand/node"
	"github.com/strand-io/strand/testkit/testutil"
)

// startKafkaDev starts a one-node dev server with a Kafka listener and
// returns the gRPC and Kafka flags that reach it.
func startKafkaDev(t *testing.T) (grpc, kafka string) {
	t.Helper()
	n := testutil.StartDev(t, t.TempDir(), func(cfg *node.Config) { cfg.KafkaListen = "127.0.0.1:0" })
	if n.KafkaAddr() == "" {
		t.Fatal("the dev node has no Kafka listener")
	}
	return "--bootstrap=" + n.Addr(), "--kafka-bootstrap=" + n.KafkaAddr()
}

// produce and consume with --protocol kafka move records through the
// Kafka listener with franz-go; what one door wrote the other reads, keys,
// headers, partitions and offsets alike.
func TestProduceConsumeThroughKafka(t *testing.T) {
	b, k := startKafkaDev(t)
	run(t, "", "topics", "create", "kd", "--partitions", "2", b)
	kafka := []string{"--protocol", "kafka", k}
	run(t, "k1:v1\nk2:v2\n", append([]string{"produce", "kd", "--partition", "1", "--key-separator", ":", "--header", "h=x", b}, kafka...)...)
	run(t, "k3:v3\n", "produce", "kd", "--partition", "1", "--key-separator", ":", b) // through gRPC
	props := []string{"--property", "print.key=true", "--property", "print.headers=true", "--property", "print.offset=true"}
	want := "Offset:0\th:x\tk1\tv1\nOffset:1\th:x\tk2\tv2\nOffset:2\tNO_HEADERS\tk3\tv3\n"
	viaKafka := run(t, "", append(append([]string{"consume", "kd", "--partition", "1", "--offset", "earliest", "--max-records", "3", "--timeout", "20s", b}, kafka...), props...)...)
	if viaKafka != want {
		t.Errorf("consumed through the Kafka listener:\n%q\nwant\n%q", viaKafka, want)
	}
	viaGRPC := run(t, "", append([]string{"consume", "kd", "--partition", "1", "--offset", "earliest", "--max-records", "3", "--timeout", "20s", b}, props...)...)
	if viaGRPC != want {
		t.Errorf("consumed through gRPC:\n%q\nwant\n%q", viaGRPC, want)
	}
	// --offset with --partition starts there through Kafka too.
	if out := run(t, "", append([]string{"consume", "kd", "--partition", "1", "--offset", "2", "--max-records", "1", "--timeout", "20s", b}, kafka...)...); out != "v3\n" {
		t.Errorf("from offset 2: %q", out)
	}
	// Every codec through the Kafka door reads back.
	for _, codec := range []string{"gzip", "snappy", "lz4", "zstd"} {
		run(t, codec+"\n", append([]string{"produce", "kd", "--partition", "0", "--compression-codec", codec, b}, kafka...)...)
	}
	if out := run(t, "", append([]string{"consume", "kd", "--partition", "0", "--offset", "earliest", "--max-records", "4", "--timeout", "20s", b}, kafka...)...); out != "gzip\nsnappy\nlz4\nzstd\n" {
		t.Errorf("compressed through Kafka: %q", out)
	}
	// The flags are checked.
	if _, errOut, err := runErr(t, "x\n", "produce", "kd", "--protocol", "amqp", b); err == nil || !strings.Contains(errOut, "want grpc or kafka") {
		t.Errorf("--protocol amqp: err %v, stderr %q", err, errOut)
	}
}

// A transaction through the Kafka door: an aborted one is invisible to a
// read_committed consumer (of either door), a committed one is visible;
// and a group consumer through Kafka commits where it got to, so the next
// run of the group goes on from there.
func TestTransactionsAndGroupsThroughKafka(t *testing.T) {
	b, k := startKafkaDev(t)
	kafka := []string{"--protocol", "kafka", k}
	run(t, "", "topics", "create", "kt", "--partitions", "1", b)
	run(t, "gone\n", append([]string{"produce", "kt", "--transactional-id", "kt-writer", "--abort", b}, kafka...)...)
	run(t, "kept\n", append([]string{"produce", "kt", "--transactional-id", "kt-writer", b}, kafka...)...)
	for _, door := range [][]string{kafka, nil} {
		args := append([]string{"consume", "kt", "--from-beginning", "--isolation-level", "read_committed", "--max-records", "1", "--timeout", "20s", b}, door...)
		if out := run(t, "", args...); out != "kept\n" {
			t.Errorf("read_committed through %v: %q, want only the committed record", door, out)
		}
	}

	run(t, "", "topics", "create", "kg", "--partitions", "2", b)
	run(t, "a\nb\nc\nd\n", append([]string{"produce", "kg", b}, kafka...)...)
	group := append([]string{"consume", "kg", "--group", "kg-readers", "--from-beginning", "--timeout", "20s", b}, kafka...)
	first := sortedLines(run(t, "", append(group, "--max-records", "4")...))
	if strings.Join(first, ",") != "a,b,c,d" {
		t.Fatalf("first group run read %v", first)
	}
	run(t, "e\n", append([]string{"produce", "kg", b}, kafka...)...)
	if out := run(t, "", append(group, "--max-records", "1")...); out != "e\n" {
		t.Errorf("second group run read %q, want only what came after the first run's commit", out)
	}
}
