package broker

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/strand-io/strand/broker/storage"
	"github.com/strand-io/strand/clock"
	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/internal/planted"
	"github.com/strand-io/strand/record"
	"github.com/strand-io/strand/testkit/story"
)

// TestStories runs the partition-side protocol stories in
// testdata/stories (duplicate batches, producer fencing, transactions
// and the last stable offset, leader-epoch truncation) against real
// partitions over real logs. Run with -rewrite to regenerate the expected
// output after a deliberate change, and read the diff.
func TestStories(t *testing.T) {
	story.Walk(t, "testdata/stories", func(t *testing.T) func(*story.Command) string {
		return newWorld(t).run
	})
}

// TestStoriesCatchPlantedBug shows the stories fail when the behaviour
// they tell changes: with the LSO released as soon as a marker is
// appended (not once the high watermark passes it), commit_abort.txt no
// longer reads as written.
func TestStoriesCatchPlantedBug(t *testing.T) {
	defer planted.Set(planted.LSOPassesUnreplicatedMarker)()
	r := &story.Recorder{TB: t}
	story.RunFile(r, "testdata/stories/commit_abort.txt", newWorld(t).run)
	if len(r.Errors) == 0 {
		t.Fatal("commit_abort.txt passed with planted.LSOPassesUnreplicatedMarker on")
	}
	t.Logf("caught (%d mismatches), first:\n%s", len(r.Errors), r.Errors[0])
}

func newWorld(t *testing.T) *world {
	w := &world{t: t, dir: t.TempDir(), clk: clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)), parts: map[string]*Partition{}}
	t.Cleanup(w.close)
	return w
}

// world is a story's replicas, by name, each a Partition over its own log.
type world struct {
	t     *testing.T
	dir   string
	clk   *clock.Fake
	parts map[string]*Partition
}

func (w *world) close() {
	for _, p := range w.parts {
		p.Log.Abandon()
	}
}

// part is the replica named by the command's on= argument ("a" when absent),
// created empty the first time it is named.
func (w *world) part(c *story.Command, key string) *Partition {
	name := c.Str(key, "a")
	if p := w.parts[name]; p != nil {
		return p
	}
	cfg := storage.DefaultConfig()
	cfg.Files = storage.NewFileCache(4)
	k := storage.PartitionKey{Topic: "orders", Partition: 0}
	l, err := storage.Open(filepath.Join(w.dir, name, storage.DirName(k.Topic, k.Partition)), k, cfg, 0, w.clk)
	if err != nil {
		w.t.Fatalf("%s: open %s: %v", c.Pos, name, err)
	}
	p := NewPartition(k, l, 0)
	w.parts[name] = p
	return p
}

// code is how a story prints an outcome: the Kafka error name, or NONE.
func code(err error) string {
	if err == nil {
		return "NONE"
	}
	return errs.CodeOf(err).String()
}

func (w *world) run(c *story.Command) string {
	switch c.Name {
	case "become":
		return w.become(c)
	case "produce":
		return w.produce(c)
	case "marker":
		return w.marker(c)
	case "hw":
		p := w.part(c, "on")
		p.SetHighWatermark(c.Int(w.t, "to", 0), false)
		return w.offsets(p)
	case "offsets":
		return w.offsets(w.part(c, "on"))
	case "producers":
		return w.producers(w.part(c, "on"))
	case "fetch":
		return w.fetch(c)
	case "log":
		p := w.part(c, "on")
		return w.dump(p, p.Log.LogEndOffset())
	case "epochs":
		return w.epochs(w.part(c, "on"))
	case "replicate":
		return w.replicate(c)
	case "truncate-by-epoch":
		return w.truncateByEpoch(c)
	}
	w.t.Fatalf("%s: unknown command %q", c.Pos, c.Name)
	return ""
}

// become role=leader|follower epoch=N: a replica takes a role
// at a leader epoch. A new leader starts its epoch at its log end.
func (w *world) become(c *story.Command) string {
	p := w.part(c, "on")
	epoch := int32(c.Int(w.t, "epoch", 0))
	l := Leadership{LeaderEpoch: epoch, ISR: []int32{1}}
	switch c.Str("role", "leader") {
	case "leader":
		l.Role = RoleLeader
		if err := p.Log.AssignEpoch(epoch); err != nil {
			w.t.Fatalf("%s: %v", c.Pos, err)
		}
	case "follower":
		l.Role = RoleFollower
	default:
		w.t.Fatalf("%s: role is leader or follower", c.Pos)
	}
	if err := p.SetLeadership(l, nil); err != nil {
		w.t.Fatalf("%s: %v", c.Pos, err)
	}
	return fmt.Sprintf("%s is %s at leader epoch %d, log end %d", c.Str("on", "a"), l.Role, epoch, p.Log.LogEndOffset())
}

// produce pid=P epoch=E seq=S n=N [txn] [acks=all]: a producer's batch of
// N records; pid=none is a producer without idempotence.
func (w *world) produce(c *story.Command) string {
	p := w.part(c, "on")
	pid, epoch, seq := int64(record.NoProducerID), int16(record.NoProducerEpoch), int32(record.NoSequence)
	if c.Str("pid", "none") != "none" {
		pid, epoch, seq = c.Int(w.t, "pid", 0), int16(c.Int(w.t, "epoch", 0)), int32(c.Int(w.t, "seq", 0))
	}
	n := int(c.Int(w.t, "n", 1))
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte("v"), Timestamp: w.clk.Now().UnixMilli()}
	}
	txn := false
	for _, word := range c.Words {
		txn = txn || word == "txn"
	}
	b, err := record.Build(record.BatchOptions{PartitionLeaderEpoch: record.NoPartitionLeader, ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq, Transactional: txn}, recs)
	if err != nil {
		w.t.Fatalf("%s: build: %v", c.Pos, err)
	}
	acks := int32(1)
	if c.Str("acks", "1") == "all" {
		acks = -1
	}
	res, _, err := p.AppendAsLeader(b, acks)
	switch {
	case err != nil:
		return fmt.Sprintf("error %s; log end %d", code(err), p.Log.LogEndOffset())
	case res.Duplicate:
		return fmt.Sprintf("duplicate of offsets %d..%d: nothing appended; log end %d", res.FirstOffset, res.LastOffset, p.Log.LogEndOffset())
	}
	return fmt.Sprintf("appended offsets %d..%d; log end %d", res.FirstOffset, res.LastOffset, p.Log.LogEndOffset())
}

// marker pid=P epoch=E type=commit|abort [coordinator-epoch=C]: a
// coordinator's WriteTxnMarkers for one partition (transaction version 2:
// epoch is the bumped epoch).
func (w *world) marker(c *story.Command) string {
	p := w.part(c, "on")
	typ := record.ControlCommit
	if c.Str("type", "commit") == "abort" {
		typ = record.ControlAbort
	}
	res, _, err := p.AppendMarker(c.Int(w.t, "pid", 0), int16(c.Int(w.t, "epoch", 0)), int32(c.Int(w.t, "coordinator-epoch", 0)), typ)
	switch {
	case err != nil:
		return fmt.Sprintf("error %s; log end %d", code(err), p.Log.LogEndOffset())
	case res.AlreadyDone && res.NothingToEnd:
		return fmt.Sprintf("nothing to end: no marker written; log end %d", p.Log.LogEndOffset())
	case res.AlreadyDone:
		return fmt.Sprintf("repeat of a marker already written: nothing appended; log end %d", p.Log.LogEndOffset())
	}
	out := fmt.Sprintf("%s marker at offset %d", strings.ToUpper(c.Str("type", "commit")), res.Offset)
	if t := res.Completed; t != nil {
		out += fmt.Sprintf(" ends the transaction %d..%d of pid %d", t.FirstOffset, t.LastOffset, t.ProducerID)
	}
	return out + fmt.Sprintf("; log end %d", p.Log.LogEndOffset())
}

func (w *world) offsets(p *Partition) string {
	out := fmt.Sprintf("log start %d, log end %d, high watermark %d, last stable offset %d",
		p.Log.LogStartOffset(), p.Log.LogEndOffset(), p.HighWatermark(), p.LastStableOffset())
	if txns := p.Log.OngoingTxns(); len(txns) > 0 {
		sort.Slice(txns, func(i, j int) bool { return txns[i].FirstOffset < txns[j].FirstOffset })
		for _, o := range txns {
			out += fmt.Sprintf("\nopen transaction of pid %d (epoch %d) since offset %d", o.ProducerID, o.Epoch, o.FirstOffset)
		}
	}
	return out
}

func (w *world) producers(p *Partition) string {
	ps := p.Log.Producers()
	sort.Slice(ps, func(i, j int) bool { return ps[i].ProducerID < ps[j].ProducerID })
	var lines []string
	for _, e := range ps {
		var bs []string
		for _, b := range e.Batches {
			bs = append(bs, fmt.Sprintf("seq %d..%d@%d", b.FirstSeq, b.LastSeq, b.FirstOffset))
		}
		lines = append(lines, fmt.Sprintf("pid %d epoch %d last seq %d, batches kept: %s", e.ProducerID, e.Epoch, e.LastSequence(), strings.Join(bs, " ")))
	}
	if len(lines) == 0 {
		return "no producers"
	}
	return strings.Join(lines, "\n")
}

// fetch [from=O] isolation=read_committed|read_uncommitted: what a
// consumer reads (up to the HW, or the LSO under read_committed, with the
// aborted transactions of the range).
func (w *world) fetch(c *story.Command) string {
	p := w.part(c, "on")
	from := c.Int(w.t, "from", 0)
	committed := c.Str("isolation", "read_uncommitted") == "read_committed"
	bound := p.HighWatermark()
	if committed {
		bound = p.LastStableOffset()
	}
	var lines []string
	lines = append(lines, fmt.Sprintf("%s up to offset %d:", c.Str("isolation", "read_uncommitted"), bound))
	for off := from; off < bound; {
		res, err := p.Log.Read(off, 1<<20, bound, true)
		if err != nil {
			return fmt.Sprintf("error %s", code(err))
		}
		if len(res.Records) == 0 {
			break
		}
		for it := record.NewIter(res.Records); it.Next(); {
			h := it.Header()
			lines = append(lines, "  "+describeBatch(it.Batch(), h))
			off = h.NextOffset()
		}
	}
	if len(lines) == 1 {
		lines = append(lines, "  nothing")
	}
	if committed {
		aborted := p.Log.CollectAborted(from, bound)
		if len(aborted) == 0 {
			lines = append(lines, "aborted transactions: none")
		}
		for _, a := range aborted {
			lines = append(lines, fmt.Sprintf("aborted transaction: pid %d first offset %d (skip its batches; its ABORT marker is at %d)", a.ProducerID, a.FirstOffset, a.LastOffset))
		}
	}
	return strings.Join(lines, "\n")
}

// dump lists every batch of p below upTo.
func (w *world) dump(p *Partition, upTo int64) string {
	var lines []string
	for off := p.Log.LogStartOffset(); off < upTo; {
		res, err := p.Log.Read(off, 1<<20, upTo, true)
		if err != nil || len(res.Records) == 0 {
			lines = append(lines, fmt.Sprintf("read at %d: %s", off, code(err)))
			break
		}
		for it := record.NewIter(res.Records); it.Next(); {
			h := it.Header()
			lines = append(lines, describeBatch(it.Batch(), h))
			off = h.NextOffset()
		}
	}
	if len(lines) == 0 {
		return "empty"
	}
	return strings.Join(lines, "\n")
}

func describeBatch(batch []byte, h record.Header) string {
	if h.IsControl() {
		typ, _, err := record.ReadControlBatch(batch)
		name := "COMMIT"
		if err != nil {
			name = "bad control batch"
		} else if typ == record.ControlAbort {
			name = "ABORT"
		}
		return fmt.Sprintf("%d %s marker pid %d epoch %d (leader epoch %d)", h.BaseOffset, name, h.ProducerID, h.ProducerEpoch, h.PartitionLeaderEpoch)
	}
	kind := "data"
	if h.IsTransactional() {
		kind = "transactional"
	}
	who := "no producer id"
	if h.HasProducerID() {
		who = fmt.Sprintf("pid %d epoch %d seq %d", h.ProducerID, h.ProducerEpoch, h.BaseSequence)
	}
	return fmt.Sprintf("%d..%d %s, %s (leader epoch %d)", h.BaseOffset, h.NextOffset()-1, kind, who, h.PartitionLeaderEpoch)
}

func (w *world) epochs(p *Partition) string {
	var parts []string
	for _, e := range p.Log.Epochs() {
		parts = append(parts, fmt.Sprintf("epoch %d from %d", e.Epoch, e.StartOffset))
	}
	return fmt.Sprintf("%s; log end %d", strings.Join(parts, ", "), p.Log.LogEndOffset())
}

// replicate from=L on=F [upto=O]: follower F fetches from its log end up
// to O (default: L's log end) and appends what leader L answers.
func (w *world) replicate(c *story.Command) string {
	leader, follower := w.part(c, "from"), w.part(c, "on")
	upTo := c.Int(w.t, "upto", leader.Log.LogEndOffset())
	from := follower.Log.LogEndOffset()
	if from >= upTo {
		return fmt.Sprintf("nothing to fetch; %s log end %d", c.Str("on", "a"), from)
	}
	res, err := leader.Log.Read(from, 1<<20, upTo, true)
	if err != nil {
		return fmt.Sprintf("fetch at %d: error %s", from, code(err))
	}
	app, err := follower.AppendAsFollower(res.Records, follower.Leadership().LeaderEpoch)
	if err != nil {
		return fmt.Sprintf("append: error %s", code(err))
	}
	return fmt.Sprintf("%s appended offsets %d..%d from %s; log end %d", c.Str("on", "a"), app.FirstOffset, app.LastOffset, c.Str("from", "a"), follower.Log.LogEndOffset())
}

// truncate-by-epoch on=F leader=L: KIP-101/KIP-279. The follower asks
// the leader for the end offset of its own latest epoch; the leader answers
// with the largest epoch it has at or below it and where that epoch ended.
// The follower truncates to that offset, or, if the leader's epoch is
// older than the one asked for, to the end of that epoch in its own log,
// whichever is lower.
func (w *world) truncateByEpoch(c *story.Command) string {
	follower, leader := w.part(c, "on"), w.part(c, "leader")
	asked := follower.Log.LatestEpoch()
	lEpoch, lEnd := leader.Log.EndOffsetForEpoch(asked)
	lines := []string{fmt.Sprintf("OffsetForLeaderEpoch(epoch %d) -> leader answers epoch %d end offset %d", asked, lEpoch, lEnd)}
	target := lEnd
	if lEpoch >= 0 && lEpoch < asked {
		fEpoch, fEnd := follower.Log.EndOffsetForEpoch(lEpoch)
		lines = append(lines, fmt.Sprintf("older than asked: the follower's own largest epoch at or below %d is %d, ending at %d", lEpoch, fEpoch, fEnd))
		target = min(target, fEnd)
	}
	before := follower.Log.LogEndOffset()
	if lEpoch < 0 {
		target = follower.HighWatermark()
		lines = append(lines, fmt.Sprintf("no common epoch: truncate to the high watermark %d", target))
	}
	if err := follower.SetLeadership(follower.Leadership(), func() error { return follower.Log.TruncateTo(target) }); err != nil {
		return fmt.Sprintf("truncate: error %s", code(err))
	}
	lines = append(lines, fmt.Sprintf("truncate %d..%d: log end %d -> %d", min(target, before), before-1, before, follower.Log.LogEndOffset()))
	if target >= before {
		lines[len(lines)-1] = fmt.Sprintf("nothing to truncate: log end %d", before)
	}
	return strings.Join(lines, "\n")
}
