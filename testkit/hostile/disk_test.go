package hostile

// Real node on real time: damages the node's segment, index and checkpoint files on
// the real disk between stops; could use SimDisk inside synctest; not moved yet.

// Disk damage between restarts: a dev node
// writes acknowledged records across several small segments, stops (a
// crash or a clean stop), its files are damaged, and it starts again on
// the same data directory. Each case asserts what the restarted node
// serves, that every acknowledged record outside the damage is still
// readable, and the WARN and the metric that report the damage.

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/strand-io/strand/broker/storage"
	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/node"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
	"github.com/strand-io/strand/testkit/testutil"
	"github.com/strand-io/strand/testkit/wait"
)

const diskTopic = "disk"

// diskNode is a dev node whose data directory outlives its runs.
type diskNode struct {
	t    *testing.T
	cfg  node.Config
	logs *testutil.LogBuffer
	tg   *target
}

func startDisk(t *testing.T) *diskNode {
	t.Helper()
	d := &diskNode{t: t, cfg: testutil.DevConfig(t, t.TempDir()), logs: &testutil.LogBuffer{}}
	d.cfg.Logger = slog.New(slog.NewTextHandler(d.logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	d.start()
	return d
}

func (d *diskNode) start() {
	d.t.Helper()
	d.tg = &target{t: d.t, dev: testutil.StartNode(d.t, d.cfg)}
}

func (d *diskNode) partDir() string {
	return filepath.Join(d.cfg.DataDir, storage.DirName(diskTopic, 0))
}

// segments lists the partition's segment base offsets.
func (d *diskNode) segments() []int64 {
	d.t.Helper()
	ents, err := os.ReadDir(d.partDir())
	if err != nil {
		d.t.Fatal(err)
	}
	var out []int64
	for _, e := range ents {
		var b int64
		if n, _ := fmt.Sscanf(e.Name(), "%020d.log", &b); n == 1 && strings.HasSuffix(e.Name(), storage.LogSuffix) {
			out = append(out, b)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func (d *diskNode) segPath(base int64, suffix string) string {
	return filepath.Join(d.partDir(), storage.FileName(base)+suffix)
}

// produceAcked creates the topic with small segments and writes n
// records one batch each, every one acknowledged (acks=all); it returns
// the values by offset.
func (d *diskNode) produceAcked(n int) []string {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := d.tg.admin().CreateTopic(ctx, client.TopicSpec{Name: diskTopic, Partitions: 1, ReplicationFactor: 1,
		Configs: map[string]string{"segment.bytes": "1024", "index.interval.bytes": "200"}}); err != nil {
		d.t.Fatal(err)
	}
	p, err := client.NewProducer(d.tg.opts(client.WithPartitioner(client.ManualPartitioner{}))...)
	if err != nil {
		d.t.Fatal(err)
	}
	defer p.Close(ctx)
	var vals []string
	for i := 0; i < n; i++ {
		v := fmt.Sprintf("acked-%03d-%s", i, strings.Repeat("x", 150))
		if err := p.ProduceSync(ctx, &client.Record{Topic: diskTopic, Partition: 0, Value: []byte(v)}).FirstErr(); err != nil {
			d.t.Fatalf("produce %d: %v", i, err)
		}
		vals = append(vals, v)
	}
	if segs := d.segments(); len(segs) < 4 {
		d.t.Fatalf("only %d segments", len(segs))
	}
	return vals
}

// fetchAt fetches one partition of the disk topic at offset on a raw
// connection, as a consumer would.
func (d *diskNode) fetchAt(offset int64) *pb.FetchPartitionResponse {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cc := d.tg.raw(d.tg.dev.Addr())
	var p *pb.FetchPartitionResponse
	var err error
	if wait.Until(10*time.Second, "a partition leader to fetch from", func() bool {
		var resp *pb.FetchResponse
		resp, err = pb.NewConsumerClient(cc).Fetch(ctx, &pb.FetchRequest{ReplicaId: -1, MaxBytes: 1 << 20, Partitions: []*pb.FetchPartition{
			{Topic: diskTopic, Partition: 0, FetchOffset: offset, CurrentLeaderEpoch: -1, PartitionMaxBytes: 1 << 20}}})
		if err != nil || len(resp.Partitions) != 1 {
			return false
		}
		p = resp.Partitions[0]
		// Leadership is re-established after a start: wait it out.
		return p.ErrorCode != pb.ErrorCode_NOT_LEADER_OR_FOLLOWER && p.ErrorCode != pb.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION && p.ErrorCode != pb.ErrorCode_LEADER_NOT_AVAILABLE
	}) != nil {
		d.t.Fatalf("fetch at %d: %v", offset, err)
	}
	return p
}

// readFrom reads from offset up to the high watermark on raw fetches and
// returns the values by offset; an offset in skip answers the code given
// and is stepped over.
func (d *diskNode) readFrom(offset int64, skip map[int64]pb.ErrorCode) map[int64]string {
	d.t.Helper()
	out := map[int64]string{}
	for {
		p := d.fetchAt(offset)
		if want, ok := skip[offset]; ok {
			if p.ErrorCode != want {
				d.t.Fatalf("fetch at damaged offset %d: %v %q, want %v", offset, p.ErrorCode, p.ErrorMessage, want)
			}
			offset++
			continue
		}
		if p.ErrorCode != pb.ErrorCode_NONE {
			d.t.Fatalf("fetch at %d: %v %q", offset, p.ErrorCode, p.ErrorMessage)
		}
		if offset >= p.HighWatermark {
			return out
		}
		if len(p.Records) == 0 {
			d.t.Fatalf("fetch at %d below the HW %d returned nothing", offset, p.HighWatermark)
		}
		for it := record.NewIter(p.Records); it.Next(); {
			_, recs, err := record.Decode(it.Batch())
			if err != nil {
				d.t.Fatalf("decode at %d: %v", offset, err)
			}
			for _, r := range recs {
				out[r.Offset] = string(r.Value)
			}
			h := it.Header()
			offset = h.NextOffset()
		}
	}
}

// wantAll checks that every acknowledged value is read back at its
// offset, except the damaged ones.
func wantAll(t *testing.T, got map[int64]string, vals []string, damaged map[int64]pb.ErrorCode) {
	t.Helper()
	for off, v := range vals {
		if _, bad := damaged[int64(off)]; bad {
			continue
		}
		if got[int64(off)] != v {
			t.Fatalf("acknowledged record %d after the restart: %.20q, want %.20q", off, got[int64(off)], v)
		}
	}
}

// batchPos returns the byte position and size of the batch at offset in a segment file.
func batchPos(t *testing.T, path string, offset int64) (pos int64, size int) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pos, size, ok := record.FindBatch(data, offset)
	if !ok {
		t.Fatalf("no batch at offset %d in %s", offset, path)
	}
	return pos, size
}

// A byte flipped in a sealed middle segment before a kill -9 costs the
// batch it hit and nothing more: every segment is still there, every
// other acknowledged record is served, the damaged offset answers
// KAFKA_STORAGE_ERROR naming the file, and the WARN and
// strand_log_recovery_fenced_bytes_total report it.
func TestDiskBitFlipInSealedSegment(t *testing.T) {
	d := startDisk(t)
	vals := d.produceAcked(40)
	d.tg.dev.Kill()
	segs := d.segments()
	mid := segs[len(segs)/2]
	path := d.segPath(mid, storage.LogSuffix)
	victim := mid + 1
	pos, size := batchPos(t, path, victim)
	b, _ := os.ReadFile(path)
	b[pos+int64(size)-3] ^= 0x10 // inside the record's value
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}

	d.start()
	if got := d.segments(); fmt.Sprint(got) != fmt.Sprint(segs) {
		t.Fatalf("segments after recovery %v, want %v", got, segs)
	}
	damaged := map[int64]pb.ErrorCode{victim: pb.ErrorCode_KAFKA_STORAGE_ERROR}
	wantAll(t, d.readFrom(0, damaged), vals, damaged)
	p := d.fetchAt(victim)
	if !strings.Contains(p.ErrorMessage, filepath.Base(path)) || !strings.Contains(p.ErrorMessage, "CRC") {
		t.Fatalf("the refusal does not say which file and why: %q", p.ErrorMessage)
	}
	if got := d.tg.dev.Parts.LogStats().RecoveryFencedBytes.Load(); got != int64(size) {
		t.Fatalf("strand_log_recovery_fenced_bytes_total %d, want %d", got, size)
	}
	warn := d.logs.String()
	for _, want := range []string{"level=WARN", filepath.Base(path), fmt.Sprintf("fromOffset=%d", victim), fmt.Sprintf("bytes=%d", size)} {
		if !strings.Contains(warn, want) {
			t.Fatalf("no WARN with %q:\n%s", want, warn)
		}
	}
	d.tg.assertServes()
}

// A torn write at the end of the active segment (half a batch that was
// never acknowledged) is cut: every acknowledged record is served, the
// next record goes right after them, and the cut is a WARN and counted.
func TestDiskTornActiveTail(t *testing.T) {
	d := startDisk(t)
	vals := d.produceAcked(30)
	d.tg.dev.Kill()
	segs := d.segments()
	path := d.segPath(segs[len(segs)-1], storage.LogSuffix)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	torn := data[:len(data)/2] // a copy of the segment's first half: a batch cut mid-way
	if len(torn) < record.HeaderSize+10 {
		torn = data
	}
	torn = torn[:record.HeaderSize+10]
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(torn); err != nil {
		t.Fatal(err)
	}
	f.Close()

	d.start()
	wantAll(t, d.readFrom(0, nil), vals, nil)
	if got := d.tg.dev.Parts.LogStats().RecoveryTruncatedBytes.Load(); got != int64(len(torn)) {
		t.Fatalf("strand_log_recovery_truncated_bytes_total %d, want %d", got, len(torn))
	}
	if warn := d.logs.String(); !strings.Contains(warn, "torn tail") || !strings.Contains(warn, fmt.Sprintf("bytes=%d", len(torn))) {
		t.Fatalf("no WARN for the cut:\n%s", warn)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	pr, err := client.NewProducer(d.tg.opts(client.WithPartitioner(client.ManualPartitioner{}))...)
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close(ctx)
	if err := pr.ProduceSync(ctx, &client.Record{Topic: diskTopic, Partition: 0, Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	got := d.readFrom(int64(len(vals)), nil)
	if len(got) != 1 || got[int64(len(vals))] != "after" {
		t.Fatalf("the record after the restart: %v, want it at offset %d", got, len(vals))
	}
	d.tg.assertServes()
}

// A sealed segment's offset index cut short after a clean stop is rebuilt
// (with a WARN) and nothing is lost.
func TestDiskTruncatedIndex(t *testing.T) {
	d := startDisk(t)
	vals := d.produceAcked(40)
	if err := d.tg.dev.Stop(); err != nil {
		t.Fatal(err)
	}
	segs := d.segments()
	idx := d.segPath(segs[1], storage.IndexSuffix)
	st, err := os.Stat(idx)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(idx, st.Size()/2+3); err != nil {
		t.Fatal(err)
	}

	d.start()
	wantAll(t, d.readFrom(0, nil), vals, nil)
	if got := d.segments(); fmt.Sprint(got) != fmt.Sprint(segs) {
		t.Fatalf("segments %v, want %v", got, segs)
	}
	if warn := d.logs.String(); !strings.Contains(warn, "indexes do not match") || !strings.Contains(warn, filepath.Base(idx)) {
		t.Fatalf("no WARN for the rebuilt index:\n%s", warn)
	}
	d.tg.assertServes()
}

// A leader-epoch checkpoint that lies (an epoch 32000 inside the log, one
// beyond the log end) is not kept: the restarted
// node rebuilds the history from its batches with a WARN, serves every
// acknowledged record, and its new leader epoch goes into the history.
func TestDiskLyingEpochCheckpoint(t *testing.T) {
	d := startDisk(t)
	vals := d.produceAcked(20)
	if err := d.tg.dev.Stop(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(d.partDir(), storage.EpochCheckpointFile)
	lie := fmt.Sprintf("0\n3\n0 0\n32000 5\n32001 %d\n", len(vals)+100)
	if err := os.WriteFile(path, []byte(lie), 0o644); err != nil {
		t.Fatal(err)
	}

	d.start()
	wantAll(t, d.readFrom(0, nil), vals, nil)
	if warn := d.logs.String(); !strings.Contains(warn, "leader-epoch checkpoint") || !strings.Contains(warn, "level=WARN") {
		t.Fatalf("no WARN for the lying checkpoint:\n%s", warn)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	pr, err := client.NewProducer(d.tg.opts(client.WithPartitioner(client.ManualPartitioner{}))...)
	if err != nil {
		t.Fatal(err)
	}
	if err := pr.ProduceSync(ctx, &client.Record{Topic: diskTopic, Partition: 0, Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	pr.Close(ctx)
	p := d.fetchAt(int64(len(vals)))
	it := record.NewIter(p.Records)
	if p.ErrorCode != pb.ErrorCode_NONE || !it.Next() {
		t.Fatalf("fetch of the new record: %v %q", p.ErrorCode, p.ErrorMessage)
	}
	epoch := it.Header().PartitionLeaderEpoch
	d.tg.assertServes()
	if err := d.tg.dev.Stop(); err != nil {
		t.Fatal(err)
	}
	got, err := storage.ReadEpochCheckpoint(path)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(got); n == 0 || got[n-1].Epoch != epoch || got[n-1].Epoch >= 32000 {
		t.Fatalf("epoch history after the restart %v: want it to end with the epoch %d the new record was written in", got, epoch)
	}
	for _, e := range got {
		if e.Epoch >= 32000 || e.StartOffset > int64(len(vals)) {
			t.Fatalf("a lying entry survived: %v", got)
		}
	}
}
