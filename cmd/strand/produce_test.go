package main

// Real node on real time: the strand CLI under test dials its --bootstrap address
// over real TCP; it has no in-memory dialer that could reach MemNet.

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strand-io/strand/testkit/testutil"
)

// kafka-console-producer's line reader properties (parse.key,
// key.separator, ignore.error) and --header on every record.
func TestProduceParseKeyAndHeaders(t *testing.T) {
	n := testutil.StartDev(t, t.TempDir())
	b := "--bootstrap=" + n.Addr()
	run(t, "", "topics", "create", "pk", "--partitions", "1", b)
	run(t, "k1\tv1\nk2\tv2:x\n", "produce", "pk", "--property", "parse.key=true", "--header", "a=1", "--header", "b=", b)
	run(t, "k3:v3\n", "produce", "pk", "--property", "parse.key=true", "--property", "key.separator=:", b)
	fmtProps := []string{"--property", "print.key=true", "--property", "print.headers=true"}
	out := run(t, "", append([]string{"consume", "pk", "--from-beginning", "--max-records", "3", "--timeout", "10s", b}, fmtProps...)...)
	if want := "a:1,b:\tk1\tv1\na:1,b:\tk2\tv2:x\nNO_HEADERS\tk3\tv3\n"; out != want {
		t.Fatalf("consumed %q, want %q", out, want)
	}
	// parse.key refuses a line without the separator, naming it…
	_, errOut, err := runErr(t, "k4\tv4\nno separator here\n", "produce", "pk", "--property", "parse.key=true", b)
	if err == nil || !strings.Contains(errOut, "no key separator") || !strings.Contains(errOut, "line 2") {
		t.Fatalf("a line without the key separator: err %v, stderr %q", err, errOut)
	}
	// …unless ignore.error=true: then the line is all value, without a key.
	run(t, "only value\n", "produce", "pk", "--property", "parse.key=true", "--property", "ignore.error=true", b)
	out = run(t, "", append([]string{"consume", "pk", "--partition", "0", "--offset", "4", "--max-records", "1", "--timeout", "10s", b}, fmtProps...)...)
	if out != "NO_HEADERS\tnull\tonly value\n" {
		t.Fatalf("ignore.error line consumed as %q", out)
	}
	if _, errOut, err := runErr(t, "x\n", "produce", "pk", "--header", "novalue", b); err == nil || !strings.Contains(errOut, "want key=value") {
		t.Fatalf("--header novalue: err %v, stderr %q", err, errOut)
	}
}

// --acks (all/-1/1/0, 1 and 0 without idempotence) and --compression-codec
// (none/gzip/snappy/lz4/zstd): the batches on disk carry the codec.
func TestProduceAcksAndCompressionCodec(t *testing.T) {
	dir := t.TempDir()
	n := testutil.StartDev(t, dir)
	b := "--bootstrap=" + n.Addr()
	run(t, "", "topics", "create", "ac", "--partitions", "4", b)
	cases := []struct{ acks, codec string }{{"1", "zstd"}, {"0", "gzip"}, {"-1", "lz4"}, {"all", "snappy"}}
	for p, c := range cases {
		run(t, "r1\nr2\n", "produce", "ac", "--partition", fmt.Sprint(p), "--acks", c.acks, "--compression-codec", c.codec, b)
	}
	for p, c := range cases {
		out := run(t, "", "consume", "ac", "--partition", fmt.Sprint(p), "--offset", "earliest", "--max-records", "2", "--timeout", "10s", b)
		if out != "r1\nr2\n" {
			t.Fatalf("partition %d (acks %s) holds %q", p, c.acks, out)
		}
		dump := run(t, "", "dump-log", filepath.Join(dir, fmt.Sprintf("ac-%d", p), "00000000000000000000.log"))
		mustContain(t, dump, "compresscodec: "+c.codec)
		if c.acks == "0" || c.acks == "1" {
			mustContain(t, dump, "producerId: -1") // not idempotent
		}
	}
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"--acks", "2"}, "--acks"},
		{[]string{"--compression-codec", "brotli"}, "none, gzip, snappy, lz4 or zstd"},
		{[]string{"--transactional-id", "t", "--acks", "1"}, "needs acks=all"},
	} {
		if _, errOut, err := runErr(t, "x\n", append([]string{"produce", "ac", b}, bad.args...)...); err == nil || !strings.Contains(errOut, bad.want) {
			t.Errorf("produce %v: err %v, stderr %q, want %q", bad.args, err, errOut, bad.want)
		}
	}
}
