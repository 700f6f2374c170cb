package main

// Real node on real time: the strand CLI under test dials its --bootstrap address
// over real TCP; it has no in-memory dialer that could reach MemNet.

import (
	"bytes"
	be "encoding/binary"
	"hash/crc32"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
	"github.com/strand-io/strand/testkit/testutil"
)

// The active segment's .index and .timeindex are kept in memory until the
// segment rolls, the log flushes or the node stops, and a .txnindex only
// exists once a transaction aborted: dump-log on those names explains it
// instead of failing on a missing file. A file of a segment that does not
// exist at all is still an error.
func TestDumpLogActiveSegmentIndexes(t *testing.T) {
	dir := t.TempDir()
	n := testutil.StartDev(t, dir)
	b := "--bootstrap=" + n.Addr()
	run(t, "", "topics", "create", "di", "--partitions", "1", b)
	run(t, "a\nb\n", "produce", "di", b)
	base := filepath.Join(dir, "di-0", "00000000000000000000")
	for _, suffix := range []string{".index", ".timeindex", ".txnindex"} {
		out, errOut, err := runErr(t, "", "dump-log", base+suffix)
		if err != nil || !strings.HasPrefix(out, "Dumping "+base+suffix) || strings.Contains(errOut, "no such file") {
			t.Errorf("dump-log %s: err %v, stdout %q, stderr %q", suffix, err, out, errOut)
		}
		want := "kept in memory"
		if suffix == ".txnindex" {
			want = "created with its first aborted transaction"
		}
		if !strings.Contains(errOut, want) {
			t.Errorf("dump-log %s: stderr %q does not explain (%q)", suffix, errOut, want)
		}
	}
	// Several files at once, the .log among them, as kafka-dump-log --files.
	out := run(t, "", "dump-log", "--files", base+".log,"+base+".index")
	mustContain(t, out, "baseOffset: 0 lastOffset: 1", "Dumping "+base+".index")
	other := filepath.Join(dir, "di-0", "00000000000000000099.index")
	if _, errOut, err := runErr(t, "", "dump-log", other); err == nil || !strings.Contains(errOut, "no such file") {
		t.Errorf("dump-log of a segment that does not exist: err %v, stderr %q", err, errOut)
	}
}

// A batch the cleaner gave a delete horizon (KIP-534: attribute bit 6,
// the horizon in the base timestamp) shows it as Kafka's DumpLogSegments
// does; other batches show OptionalLong.empty.
func TestDumpLogShowsDeleteHorizon(t *testing.T) {
	build := func(horizon int64) []byte {
		b, err := record.Build(record.BatchOptions{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, PartitionLeaderEpoch: -1},
			[]record.Record{{Key: []byte("k"), Value: nil, Timestamp: 1_700_000_000_000}})
		if err != nil {
			t.Fatal(err)
		}
		if horizon >= 0 {
			be.BigEndian.PutUint16(b[21:], be.BigEndian.Uint16(b[21:])|0x40)
			be.BigEndian.PutUint64(b[27:], uint64(horizon))
			be.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
		}
		return b
	}
	var out bytes.Buffer
	printBatches(&out, append(build(-1), build(1_700_086_400_000)...), false, false, nil)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "deleteHorizonMs: OptionalLong.empty ") ||
		!strings.Contains(lines[1], "deleteHorizonMs: OptionalLong[1700086400000] ") || !strings.Contains(lines[1], "isvalid: true") {
		t.Fatalf("dump-log printed:\n%s", out.String())
	}
}

// --offsets-decoder prints __consumer_offsets records decoded (an offset
// commit here, key and value), and goes with no other decoder.
func TestDumpLogOffsetsDecoder(t *testing.T) {
	key := be.BigEndian.AppendUint16(nil, 0)
	for _, s := range []string{"billing", "orders"} {
		key = be.BigEndian.AppendUint16(key, uint16(len(s)))
		key = append(key, s...)
	}
	key = be.BigEndian.AppendUint32(key, 3)
	val, err := proto.Marshal(&pb.OffsetCommitValue{Offset: 42, LeaderEpoch: 1, CommitTimestampMs: 5})
	if err != nil {
		t.Fatal(err)
	}
	b, err := record.Build(record.BatchOptions{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, []record.Record{{Key: key, Value: val}, {Key: key}})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	printBatches(&out, b, true, false, decodeOffsetsRecord)
	mustContain(t, out.String(), `key: {"type":"0","data":{"group":"billing","partition":3,"topic":"orders"}} payload: {"version":"0","data":{"offset":"42"`,
		`payload: <DELETE>`)
	if _, errOut, err := runErr(t, "", "dump-log", "--offsets-decoder", "--transaction-log-decoder", "x.log"); err == nil || !strings.Contains(errOut, "choose one") {
		t.Errorf("both decoders: err %v, stderr %q", err, errOut)
	}
}
