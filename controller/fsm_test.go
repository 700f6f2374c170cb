package controller_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/strand-io/strand/metadata"
	mt "github.com/strand-io/strand/metadata/metadatatest"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/strand-io/strand/controller"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

func raftLog(t *testing.T, index uint64, rs ...*pb.MetadataRecord) *raft.Log {
	t.Helper()
	data, err := proto.Marshal(&pb.MetadataBatch{Records: rs})
	if err != nil {
		t.Fatal(err)
	}
	return &raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: data}
}

func fsmApply(t *testing.T, f *controller.FSM, l *raft.Log) controller.ApplyResult {
	t.Helper()
	v := f.Apply(l)
	res, ok := v.(controller.ApplyResult)
	if !ok {
		t.Fatalf("Apply returned %T, want ApplyResult", v)
	}
	return res
}

// newFSMWith applies each record list as the raft entry at index i+1.
func newFSMWith(t *testing.T, batches ...[]*pb.MetadataRecord) *controller.FSM {
	t.Helper()
	f := controller.NewFSM()
	for i, rs := range batches {
		if res := fsmApply(t, f, raftLog(t, uint64(i+1), rs...)); res.Err != nil {
			t.Fatalf("setup entry %d: %v", i+1, res.Err)
		}
	}
	return f
}

func offsetsOf(bs []*pb.MetadataBatch) []int64 {
	out := []int64{}
	for _, b := range bs {
		out = append(out, b.Offset)
	}
	return out
}

func TestFSMApply(t *testing.T) {
	type entry struct {
		index   uint64
		recs    []*pb.MetadataRecord
		data    []byte // overrides recs when set
		wantErr bool
	}
	cases := []struct {
		name    string
		entries []entry
		check   func(t *testing.T, im *metadata.Image)
		offsets []int64 // batches kept for followers
	}{
		{
			name: "offsets are raft indexes and broker epochs are filled in",
			entries: []entry{
				{index: 3, recs: mt.Recs(mt.RegisterRec(1, 0, true))},
				{index: 7, recs: mt.Recs(mt.RegisterRec(2, 0, false), mt.UnfenceRec(1, 3))},
			},
			check: func(t *testing.T, im *metadata.Image) {
				if im.Offset != 7 || im.Brokers[1].Epoch != 3 || im.Brokers[2].Epoch != 7 || im.Brokers[1].Fenced {
					t.Fatalf("image offset %d brokers %+v %+v", im.Offset, im.Brokers[1], im.Brokers[2])
				}
			},
			offsets: []int64{3, 7},
		},
		{
			name: "an explicit broker epoch is kept",
			entries: []entry{
				{index: 5, recs: mt.Recs(mt.RegisterRec(1, 2, false))},
			},
			check: func(t *testing.T, im *metadata.Image) {
				if im.Brokers[1].Epoch != 2 {
					t.Fatalf("epoch = %d", im.Brokers[1].Epoch)
				}
			},
			offsets: []int64{5},
		},
		{
			name: "a refused batch changes nothing",
			entries: []entry{
				{index: 1, recs: mt.Recs(mt.RegisterRec(1, 0, false), mt.TopicRec("t", nil))},
				{index: 2, recs: mt.Recs(mt.ProducerIdsRec(1000), mt.TopicRec("t", nil)), wantErr: true},
				{index: 3, recs: mt.Recs(mt.FenceRec(1, 2)), wantErr: true},
				{index: 4, recs: mt.Recs(mt.FeatureRec("f", 1))},
			},
			check: func(t *testing.T, im *metadata.Image) {
				if im.Offset != 4 || im.NextProducerID != 0 || im.Brokers[1].Fenced || im.Feature("f") != 1 {
					t.Fatalf("image = %+v", im)
				}
			},
			offsets: []int64{1, 4},
		},
		{
			name: "undecodable entry refused",
			entries: []entry{
				{index: 1, recs: mt.Recs(mt.ClusterRec("c"))},
				{index: 2, data: []byte{0xff, 0xff, 0xff}, wantErr: true},
			},
			check: func(t *testing.T, im *metadata.Image) {
				if im.Offset != 1 || im.ClusterID != "c" {
					t.Fatalf("image = %+v", im)
				}
			},
			offsets: []int64{1},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := controller.NewFSM()
			if im := f.Image(); im.Offset != -1 {
				t.Fatalf("new FSM at offset %d", im.Offset)
			}
			for _, e := range c.entries {
				l := raftLog(t, e.index, e.recs...)
				if e.data != nil {
					l.Data = e.data
				}
				before := f.Image()
				snap := mt.DeepCopy(before)
				changed := f.Changed()
				res := fsmApply(t, f, l)
				if e.wantErr {
					if res.Err == nil {
						t.Fatalf("entry %d accepted", e.index)
					}
					if f.Image() != before || !reflect.DeepEqual(before, snap) {
						t.Fatalf("refused entry %d changed the image", e.index)
					}
					select {
					case <-changed:
						t.Fatalf("refused entry %d signalled a change", e.index)
					default:
					}
					continue
				}
				if res.Err != nil || res.Offset != int64(e.index) {
					t.Fatalf("entry %d: result %+v", e.index, res)
				}
				select {
				case <-changed:
				default:
					t.Fatalf("entry %d did not signal a change", e.index)
				}
			}
			c.check(t, f.Image())
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			got, err := f.Since(ctx, -1)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(offsetsOf(got), c.offsets) {
				t.Fatalf("kept batches %v, want %v", offsetsOf(got), c.offsets)
			}
			// The kept batches rebuild the same image.
			img := metadata.EmptyImage()
			for _, b := range got {
				next, _, err := metadata.Apply(img, b)
				if err != nil {
					t.Fatalf("replaying batch %d: %v", b.Offset, err)
				}
				img = next
			}
			if !reflect.DeepEqual(img, f.Image()) {
				t.Fatalf("replay = %+v, want %+v", img, f.Image())
			}
		})
	}
}

func TestSince(t *testing.T) {
	f := newFSMWith(t,
		mt.Recs(mt.RegisterRec(1, 0, false)),
		mt.Recs(mt.RegisterRec(2, 0, false)),
		mt.Recs(mt.TopicRec("t", nil)),
		mt.Recs(mt.PartRec("t", 0, []int32{1, 2}, []int32{1, 2}, 1, 0, 0)),
		mt.Recs(mt.ProducerIdsRec(1000)),
	)
	cases := []struct {
		offset int64
		want   []int64
	}{
		{-1, []int64{1, 2, 3, 4, 5}},
		{0, []int64{1, 2, 3, 4, 5}},
		{2, []int64{3, 4, 5}},
		{4, []int64{5}},
	}
	for _, c := range cases {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		got, err := f.Since(ctx, c.offset)
		cancel()
		if err != nil {
			t.Fatalf("Since(%d): %v", c.offset, err)
		}
		if !reflect.DeepEqual(offsetsOf(got), c.want) {
			t.Fatalf("Since(%d) = %v, want %v", c.offset, offsetsOf(got), c.want)
		}
		for _, b := range got {
			if b.Snapshot {
				t.Fatalf("Since(%d) returned a snapshot", c.offset)
			}
		}
	}
	for _, off := range []int64{5, 6} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		got, err := f.Since(ctx, off)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || got != nil {
			t.Fatalf("Since(%d) at the end = %v, %v; want deadline exceeded", off, offsetsOf(got), err)
		}
	}
}

func TestSinceBlocksUntilApply(t *testing.T) {
	cases := []struct {
		name    string
		refused bool // a refused entry comes first and must not wake with nothing
	}{
		{"plain", false},
		{"refused entry first", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFSMWith(t, mt.Recs(mt.RegisterRec(1, 0, false)), mt.Recs(mt.TopicRec("t", nil)))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			type result struct {
				bs  []*pb.MetadataBatch
				err error
			}
			done := make(chan result, 1)
			go func() {
				bs, err := f.Since(ctx, 2)
				done <- result{bs, err}
			}()
			select {
			case r := <-done:
				t.Fatalf("Since returned before any new entry: %v %v", offsetsOf(r.bs), r.err)
			default:
			}
			next := uint64(3)
			if c.refused {
				if res := fsmApply(t, f, raftLog(t, next, mt.TopicRec("t", nil))); res.Err == nil {
					t.Fatal("duplicate topic accepted")
				}
				select {
				case r := <-done:
					t.Fatalf("Since returned after a refused entry: %v %v", offsetsOf(r.bs), r.err)
				default:
				}
				next++
			}
			if res := fsmApply(t, f, raftLog(t, next, mt.FeatureRec("f", 1))); res.Err != nil {
				t.Fatal(res.Err)
			}
			r := <-done
			if r.err != nil {
				t.Fatalf("Since: %v", r.err)
			}
			if !reflect.DeepEqual(offsetsOf(r.bs), []int64{int64(next)}) || r.bs[0].Snapshot {
				t.Fatalf("Since = %v, want [%d]", offsetsOf(r.bs), next)
			}
			if fl := r.bs[0].Records[0].GetFeatureLevel(); fl == nil || fl.Name != "f" {
				t.Fatalf("batch = %v", r.bs[0])
			}
		})
	}
}

// memSink is a raft.SnapshotSink over a buffer.
type memSink struct {
	bytes.Buffer
	closed, cancelled bool
}

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Close() error  { s.closed = true; return nil }
func (s *memSink) Cancel() error { s.cancelled = true; return nil }

var _ raft.SnapshotSink = (*memSink)(nil)

// persist snapshots f into bytes.
func persist(t *testing.T, f *controller.FSM) []byte {
	t.Helper()
	s, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	var sink memSink
	if err := s.Persist(&sink); err != nil {
		t.Fatalf("Persist: %v", err)
	}
	if !sink.closed || sink.cancelled {
		t.Fatalf("sink closed %v cancelled %v", sink.closed, sink.cancelled)
	}
	return sink.Bytes()
}

func TestSnapshotRestore(t *testing.T) {
	cases := []struct {
		name    string
		batches [][]*pb.MetadataRecord
	}{
		{"empty", nil},
		{"brokers only", [][]*pb.MetadataRecord{mt.Recs(mt.RegisterRec(1, 0, false)), mt.Recs(mt.RegisterRec(2, 0, true))}},
		{"full", [][]*pb.MetadataRecord{
			mt.Recs(mt.ClusterRec("cid"), mt.RegisterRec(1, 0, false), mt.RegisterRec(2, 0, false)),
			mt.Recs(mt.TopicRec("t", map[string]string{"k": "v"}), mt.PartRec("t", 0, []int32{1, 2}, []int32{1, 2}, 1, 0, 0), mt.PartRec("t", 1, []int32{2, 1}, []int32{2}, 2, 3, 4)),
			mt.Recs(mt.FenceRec(2, 1), mt.ChangeRec("t", 1, metadata.NoLeader, []int32{2}, 4, 5)),
			mt.Recs(mt.ProducerIdsRec(3000), mt.FeatureRec(metadata.FeatureTransactionVersion, 2), mt.ConfigRec("broker", "", "a", "b", false)),
			mt.Recs(mt.TopicRec("gone", nil), mt.PartRec("gone", 0, []int32{1}, []int32{1}, 1, 0, 0)),
			mt.Recs(mt.RemoveTopicRec("gone")),
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := newFSMWith(t, c.batches...)
			data := persist(t, src)
			// Restore into an FSM with unrelated state: it is replaced.
			dst := newFSMWith(t, mt.Recs(mt.RegisterRec(9, 0, false), mt.TopicRec("other", nil)))
			changed := dst.Changed()
			if err := dst.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
				t.Fatalf("Restore: %v", err)
			}
			select {
			case <-changed:
			default:
				t.Fatal("Restore did not signal a change")
			}
			if !reflect.DeepEqual(dst.Image(), src.Image()) {
				t.Fatalf("restored %+v\nwant     %+v", dst.Image(), src.Image())
			}
			// The restored FSM applies the next entries like the source does.
			next := uint64(len(c.batches) + 1)
			add := mt.Recs(mt.RegisterRec(5, 0, false))
			r1, r2 := fsmApply(t, src, raftLog(t, next, add...)), fsmApply(t, dst, raftLog(t, next, add...))
			if r1.Err != nil || r2.Err != nil {
				t.Fatalf("apply after restore: %v, %v", r1.Err, r2.Err)
			}
			if !reflect.DeepEqual(dst.Image(), src.Image()) {
				t.Fatal("images diverged after restore")
			}
		})
	}
}

func TestSnapshotRestoreBad(t *testing.T) {
	cases := []struct {
		name string
		data []byte
	}{
		{"garbage", []byte{0xff, 0xff, 0xff, 0xff}},
		{"invalid records", func() []byte {
			b, _ := proto.Marshal(&pb.MetadataBatch{Offset: 3, Records: mt.Recs(mt.PartRec("nope", 0, nil, nil, 1, 0, 0))})
			return b
		}()},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFSMWith(t, mt.Recs(mt.RegisterRec(1, 0, false)))
			before := f.Image()
			if err := f.Restore(io.NopCloser(bytes.NewReader(c.data))); err == nil {
				t.Fatal("bad snapshot restored")
			}
			if f.Image() != before {
				t.Fatal("failed Restore changed the image")
			}
		})
	}
}

func TestSinceAfterRestoreReturnsSnapshot(t *testing.T) {
	src := newFSMWith(t,
		mt.Recs(mt.ClusterRec("cid"), mt.RegisterRec(1, 0, false)),
		mt.Recs(mt.TopicRec("t", nil), mt.PartRec("t", 0, []int32{1}, []int32{1}, 1, 0, 0)),
		mt.Recs(mt.ProducerIdsRec(1000)),
	)
	f := controller.NewFSM()
	if err := f.Restore(io.NopCloser(bytes.NewReader(persist(t, src)))); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, off := range []int64{-1, 0, 2} {
		got, err := f.Since(ctx, off)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || !got[0].Snapshot || got[0].Offset != 3 {
			t.Fatalf("Since(%d) = %v, want one snapshot batch at 3", off, got)
		}
		img, _, err := metadata.Apply(metadata.EmptyImage(), got[0])
		if err != nil || !reflect.DeepEqual(img, src.Image()) {
			t.Fatalf("Since(%d) snapshot rebuilds %+v (%v), want %+v", off, img, err, src.Image())
		}
	}
	// At the snapshot's offset there is nothing yet: block until the next entry.
	done := make(chan []*pb.MetadataBatch, 1)
	go func() {
		bs, err := f.Since(ctx, 3)
		if err != nil {
			t.Error(err)
		}
		done <- bs
	}()
	select {
	case bs := <-done:
		t.Fatalf("Since(3) returned %v before any new entry", offsetsOf(bs))
	default:
	}
	if res := fsmApply(t, f, raftLog(t, 4, mt.RegisterRec(2, 0, false))); res.Err != nil {
		t.Fatal(res.Err)
	}
	bs := <-done
	if !reflect.DeepEqual(offsetsOf(bs), []int64{4}) || bs[0].Snapshot {
		t.Fatalf("Since(3) = %v, want [4]", offsetsOf(bs))
	}
	// A follower still behind the snapshot gets the whole (new) image.
	got, err := f.Since(ctx, 1)
	if err != nil || len(got) != 1 || !got[0].Snapshot || got[0].Offset != 4 {
		t.Fatalf("Since(1) after apply = %v, %v", got, err)
	}
	img, _, err := metadata.Apply(metadata.EmptyImage(), got[0])
	if err != nil || !reflect.DeepEqual(img, f.Image()) || img.Brokers[2].Epoch != 4 {
		t.Fatalf("snapshot rebuilds %+v (%v), want %+v", img, err, f.Image())
	}
}

// TestSinceHistoryTrim applies more batches than the FSM keeps: a follower
// older than the kept history gets a snapshot, a newer one the batches.
func TestSinceHistoryTrim(t *testing.T) {
	if testing.Short() {
		t.Skip("applies 20001 entries")
	}
	const n = 20001
	f := controller.NewFSM()
	for i := uint64(1); i <= n; i++ {
		if res := fsmApply(t, f, raftLog(t, i, mt.ProducerIdsRec(int64(i)*1000))); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	all, err := f.Since(ctx, -1)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 1 || !all[0].Snapshot || all[0].Offset != n {
		t.Fatalf("Since(-1) after trimming = %d batches, want one snapshot", len(all))
	}
	// Since(off) is a snapshot exactly for off older than the kept history:
	// find that boundary by bisection.
	isSnap := func(off int64) bool {
		got, err := f.Since(ctx, off)
		if err != nil {
			t.Fatal(err)
		}
		return len(got) == 1 && got[0].Snapshot
	}
	lo, hi := int64(-1), int64(n-1) // isSnap(lo) is true, isSnap(hi) false
	if isSnap(hi) {
		t.Fatalf("Since(%d) returned a snapshot for the newest batch", hi)
	}
	for hi-lo > 1 {
		m := (lo + hi) / 2
		if isSnap(m) {
			lo = m
		} else {
			hi = m
		}
	}
	got, err := f.Since(ctx, hi)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(got)) != n-hi {
		t.Fatalf("Since(%d) = %d batches, want %d", hi, len(got), n-hi)
	}
	for i, b := range got {
		if b.Snapshot || b.Offset != hi+1+int64(i) {
			t.Fatalf("Since(%d)[%d] = offset %d snapshot %v", hi, i, b.Offset, b.Snapshot)
		}
	}
	if kept := len(got); kept < 1000 || kept >= n {
		t.Fatalf("kept %d batches of %d", kept, n)
	}
}

func TestParseVoters(t *testing.T) {
	cases := []struct {
		in      string
		want    []controller.Voter
		wantErr string
	}{
		{in: "1@127.0.0.1:9093", want: []controller.Voter{{ID: 1, Addr: "127.0.0.1:9093"}}},
		{in: "1@a:1,2@b:2,3@c:3", want: []controller.Voter{{1, "a:1"}, {2, "b:2"}, {3, "c:3"}}},
		{in: " 2@b:2 , 0@a:1 ,", want: []controller.Voter{{2, "b:2"}, {0, "a:1"}}},
		{in: "5@[::1]:7000", want: []controller.Voter{{5, "[::1]:7000"}}},
		{in: "", wantErr: "no controller voters"},
		{in: " , ,", wantErr: "no controller voters"},
		{in: "a:1", wantErr: "want id@host:port"},
		{in: "@a:1", wantErr: "want id@host:port"},
		{in: "x@a:1", wantErr: "bad node id"},
		{in: "-1@a:1", wantErr: "bad node id"},
		{in: "99999999999@a:1", wantErr: "bad node id"},
		{in: "1@a", wantErr: "missing port"},
		{in: "1@a:1,1@b:2", wantErr: "listed twice"},
		{in: "1@a:1,2", wantErr: "want id@host:port"},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			got, err := controller.ParseVoters(c.in)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("ParseVoters(%q) = %v, %v; want error containing %q", c.in, got, err, c.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, c.want) {
				t.Fatalf("ParseVoters(%q) = %v, %v; want %v", c.in, got, err, c.want)
			}
		})
	}
}
