package replication

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/strand-io/strand/broker"
	"github.com/strand-io/strand/broker/storage"
	"github.com/strand-io/strand/clock"
	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/internal/planted"
	"github.com/strand-io/strand/metadata"
	mt "github.com/strand-io/strand/metadata/metadatatest"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
)

// racer runs appendOne back to back, as a fetcher appends the batches it
// read just before it was removed from following p, or a producer's
// request in flight appends to a leader, counting the appends: it stops
// at the first that p refuses as NOT_LEADER_OR_FOLLOWER (p's role
// changed), or when halt is called; halt returns once it has stopped, and
// runs at the test's end too. done is closed when it stops.
func racer(t *testing.T, appendOne func() error, appended *atomic.Int64) (halt func(), done <-chan struct{}) {
	stop, stopped := make(chan struct{}), make(chan struct{})
	var once sync.Once
	halt = func() {
		once.Do(func() { close(stop) })
		<-stopped
	}
	t.Cleanup(halt)
	go func() {
		defer close(stopped)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := appendOne(); err != nil {
				if errs.CodeOf(err) != pb.ErrorCode_NOT_LEADER_OR_FOLLOWER {
					t.Errorf("append: %v", err)
				}
				return
			}
			appended.Add(1)
		}
	}()
	return halt, stopped
}

// started waits until a racer has appended three batches, failing the
// test if it stopped first or takes more than ten seconds.
func started(t *testing.T, appended *atomic.Int64, done <-chan struct{}) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for appended.Load() < 3 {
		select {
		case <-done:
			t.Fatalf("the appender stopped after %d appends", appended.Load())
		case <-deadline:
			t.Fatalf("the appender made %d appends in 10 s", appended.Load())
		case <-time.After(time.Millisecond):
		}
	}
}

// oneRecord is a batch of one record at offset base, of leader epoch epoch.
func oneRecord(base int64, epoch int32) ([]byte, error) {
	return record.Build(record.BatchOptions{BaseOffset: base, PartitionLeaderEpoch: epoch,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, FirstTimestamp: time.Now().UnixMilli()},
		[]record.Record{{Value: []byte("v")}})
}

// appendFollowed appends n records of epoch 3 to p, a follower at epoch 3
// (follower), one batch each, as its fetcher would.
func appendFollowed(t *testing.T, p *broker.Partition, n int) {
	t.Helper()
	for range n {
		b, err := oneRecord(p.Log.LogEndOffset(), 3)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.AppendAsFollower(b, 3); err != nil {
			t.Fatal(err)
		}
	}
}

// followerOfTen is a manager of node 1 and its replica of orders-0, a
// follower at epoch 3 holding offsets 0-9 of that epoch.
func followerOfTen(t *testing.T) (storage.PartitionKey, *Manager, *broker.Partition) {
	t.Helper()
	key := storage.PartitionKey{Topic: "orders", Partition: 0}
	m := New(DefaultConfig(1), nil, nil, nil, func() int64 { return 1 }, clock.Real)
	t.Cleanup(m.cancel)
	p := newTestPartition(t, key, clock.Real)
	follower(t, p)
	appendFollowed(t, p, 10)
	return key, m, p
}

// staleFetcher appends batches of leader epoch epoch to p as its follower.
func staleFetcher(t *testing.T, p *broker.Partition, epoch int32, appended *atomic.Int64) (halt func(), done <-chan struct{}) {
	return racer(t, func() error {
		b, err := oneRecord(p.Log.LogEndOffset(), epoch)
		if err == nil {
			_, err = p.AppendAsFollower(b, epoch)
		}
		return err
	}, appended)
}

// follower makes p a follower of broker 2 at leader epoch 3, its log
// holding that epoch.
func follower(t *testing.T, p *broker.Partition) {
	t.Helper()
	l := broker.Leadership{Role: broker.RoleFollower, Leader: 2, LeaderEpoch: 3, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}
	if err := p.SetLeadership(l, func() error { return p.Log.AssignEpoch(3) }); err != nil {
		t.Fatal(err)
	}
}

// epochStartProblems: once promoted at epoch 4 (and no producer has
// written since), the epoch cache's start of epoch 4 is the log's end, so
// no batch of epoch 3 lies past it, and the leader state's EpochStart
// (from which an ISR expansion counts) is that start. It returns what
// differs.
func epochStartProblems(m *Manager, p *broker.Partition, appended int64) []string {
	var out []string
	leo := p.Log.LogEndOffset()
	_, end3 := p.Log.EndOffsetForEpoch(3)
	if end3 != leo {
		out = append(out, fmt.Sprintf("%s: epoch 4 starts at %d in the epoch cache, but the log holds epoch 3's batches up to %d (%d appended as follower): "+
			"OffsetForLeaderEpoch(3) answers %d and a follower truncates what the leader holds", p.Key, end3, leo, appended, end3))
	}
	le := m.leader(p.Key)
	le.mu.Lock()
	start := le.st.EpochStart
	le.mu.Unlock()
	if start != end3 {
		out = append(out, fmt.Sprintf("%s: the leader state's EpochStart %d, the epoch cache's start of epoch 4 %d", p.Key, start, end3))
	}
	if l := p.Leadership(); l.Role != broker.RoleLeader || l.LeaderEpoch != 4 {
		out = append(out, fmt.Sprintf("%s: leadership %+v after the promotion, want leader at epoch 4", p.Key, l))
	}
	return out
}

// checkPromotionRace runs race (one round of a stale appender against a
// promotion, returning what epochStartProblems found) rounds times, and
// no round may find a problem. Then with planted.EpochBeforeRoleChange on
// it runs rounds until one finds a problem, up to plantedRounds: the race
// does catch the bug (within a round or two on two CPUs; on one, within
// a few dozen).
func checkPromotionRace(t *testing.T, rounds, plantedRounds int, race func(round int) []string) {
	t.Helper()
	for _, plant := range []bool{false, true} {
		t.Run(map[bool]string{false: "fixed", true: "planted"}[plant], func(t *testing.T) {
			if plant {
				defer planted.Set(planted.EpochBeforeRoleChange)()
			}
			n := rounds
			if plant {
				n = plantedRounds
			}
			for round := range n {
				problems := race(round)
				if plant && len(problems) > 0 {
					t.Logf("found in round %d", round+1)
					return
				}
				for _, pr := range problems {
					t.Error(pr)
				}
			}
			if plant {
				t.Fatalf("with epoch-before-role-change planted, %d rounds found nothing: this test does not catch the bug", n)
			}
		})
	}
}

// TestPromotionFencesStaleFollowerAppends: a follower promoted to leader
// starts its new epoch and takes the leader role in one step under the
// partition's leadership lock. A fetcher that read batches of the old
// epoch before it was removed may be appending them meanwhile; before,
// the epoch's start was recorded first and the role changed after, and
// such batches landed past the new epoch's start (a code review
// found it: OffsetForLeaderEpoch then answered too low an end
// for the old epoch, and the leader counted an ISR expansion from the
// wrong offset).
// Each round races a stale fetcher against becomeLeader.
func TestPromotionFencesStaleFollowerAppends(t *testing.T) {
	clk := clock.Real
	m := New(DefaultConfig(1), nil, nil, nil, func() int64 { return 1 }, clk)
	t.Cleanup(m.cancel)
	checkPromotionRace(t, 10, 500, func(round int) []string {
		key := storage.PartitionKey{Topic: "orders", Partition: int32(round)}
		p := newTestPartition(t, key, clk)
		follower(t, p)

		var appended atomic.Int64
		halt, done := staleFetcher(t, p, 3, &appended)
		started(t, &appended, done)
		np := &metadata.Partition{Topic: key.Topic, Partition: key.Partition, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1, LeaderEpoch: 4, PartitionEpoch: 2}
		m.becomeLeader(p, np)
		halt()
		return epochStartProblems(m, p, appended.Load())
	})
}

// TestNewLeaderEpochFencesOldEpochAppends: a leader re-elected at a newer
// epoch: a produce request in flight appends at the old epoch (the leader
// stamps its batches with the epoch it finds) until the new one is in
// place, and not past its start.
func TestNewLeaderEpochFencesOldEpochAppends(t *testing.T) {
	clk := clock.Real
	m := New(DefaultConfig(1), nil, nil, nil, func() int64 { return 1 }, clk)
	t.Cleanup(m.cancel)
	for round := range 10 {
		key := storage.PartitionKey{Topic: "orders", Partition: int32(round)}
		p := newTestPartition(t, key, clk)
		np := &metadata.Partition{Topic: key.Topic, Partition: key.Partition, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1, LeaderEpoch: 3, PartitionEpoch: 1}
		m.becomeLeader(p, np)

		var appended atomic.Int64
		halt, done := racer(t, func() error {
			b, err := oneRecord(0, 0) // the leader assigns offsets and its epoch
			if err == nil {
				_, _, err = p.AppendAsLeader(b, 1)
			}
			return err
		}, &appended)
		started(t, &appended, done)
		np = np.Clone()
		np.LeaderEpoch, np.PartitionEpoch = 4, 2
		m.becomeLeader(p, np)
		halt()
		// The producer kept appending, now at epoch 4: epoch 3 ends where
		// epoch 4 starts, and no batch before it is of epoch 4.
		_, end3 := p.Log.EndOffsetForEpoch(3)
		le := m.leader(key)
		le.mu.Lock()
		start := le.st.EpochStart
		le.mu.Unlock()
		if start != end3 {
			t.Errorf("%s: the leader state's EpochStart %d, the epoch cache's start of epoch 4 %d", key, start, end3)
		}
		for _, e := range batchEpochs(t, p) {
			if e.epoch == 3 && e.offset >= end3 || e.epoch == 4 && e.offset < end3 {
				t.Errorf("%s: a batch of epoch %d at offset %d, epoch 4 starts at %d (%d appended)", key, e.epoch, e.offset, end3, appended.Load())
				break
			}
		}
	}
}

type batchEpoch struct {
	offset int64
	epoch  int32
}

// batchEpochs reads p's log: each batch's base offset and leader epoch.
func batchEpochs(t *testing.T, p *broker.Partition) []batchEpoch {
	t.Helper()
	var out []batchEpoch
	for off := p.Log.LogStartOffset(); off < p.Log.LogEndOffset(); {
		res, err := p.Log.Read(off, 1<<20, p.Log.LogEndOffset(), true)
		if err != nil {
			t.Fatal(err)
		}
		n := len(out)
		for b := res.Records; len(b) >= record.HeaderSize; {
			h, err := record.ParseHeader(b)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, batchEpoch{h.BaseOffset, h.PartitionLeaderEpoch})
			off = h.LastOffset() + 1
			b = b[h.Size():]
		}
		if len(out) == n {
			t.Fatalf("nothing read at offset %d", off)
		}
	}
	return out
}

// TestApplyPromotionFencesStaleFollowerAppends: the same through Apply,
// whose prepare step starts the new epochs of several promoted partitions
// at once ahead of becomeLeader; that start ends the follower role in the
// same step.
func TestApplyPromotionFencesStaleFollowerAppends(t *testing.T) {
	checkPromotionRace(t, 3, 100, func(int) []string { return applyPromotionRace(t) })
}

func applyPromotionRace(t *testing.T) []string {
	bc := broker.DefaultConfig(t.TempDir())
	bc.Log.Files = storage.NewFileCache(16)
	parts, err := broker.Open(bc, clock.Real)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = parts.Close() })
	m := New(DefaultConfig(1), parts, nil, nil, func() int64 { return 1 }, clock.Real)
	t.Cleanup(m.cancel)

	const n = 8
	recs := mt.Recs(mt.TopicRec("orders", nil))
	for i := range int32(n) {
		recs = append(recs, mt.PartRec("orders", i, []int32{1, 2}, []int32{1, 2}, 2, 3, 1))
	}
	img := mt.Build(t, mt.Recs(mt.ClusterRec("c1"), mt.RegisterRec(1, 1, false), mt.RegisterRec(2, 1, false)), recs)

	var appended [n]atomic.Int64
	var halts []func()
	var dones []<-chan struct{}
	var ps []*broker.Partition
	var changes []*pb.MetadataRecord
	for i := range int32(n) {
		p, err := parts.GetOrCreate(storage.PartitionKey{Topic: "orders", Partition: i}, nil)
		if err != nil {
			t.Fatal(err)
		}
		follower(t, p)
		ps = append(ps, p)
		halt, done := staleFetcher(t, p, 3, &appended[i])
		halts, dones = append(halts, halt), append(dones, done)
		changes = append(changes, mt.ChangeRec("orders", i, 1, []int32{1, 2}, 4, 2))
	}
	for i := range appended {
		started(t, &appended[i], dones[i])
	}
	next, d, err := metadata.Apply(img, mt.BatchAt(3, changes...))
	if err != nil {
		t.Fatal(err)
	}
	m.Apply(next, d)
	for _, halt := range halts {
		halt()
	}
	var problems []string
	for i, p := range ps {
		problems = append(problems, epochStartProblems(m, p, appended[i].Load())...)
	}
	return problems
}

// slowLeader answers OffsetForLeaderEpoch only once answer is closed, as
// an old leader that is slow to answer does; asked is closed when the
// request arrives.
type slowLeader struct {
	pb.ConsumerClient
	asked, answer chan struct{}
	resp          *pb.OffsetForLeaderEpochPartitionResponse
}

func (s *slowLeader) OffsetForLeaderEpoch(ctx context.Context, in *pb.OffsetForLeaderEpochRequest, _ ...grpc.CallOption) (*pb.OffsetForLeaderEpochResponse, error) {
	close(s.asked)
	select {
	case <-s.answer:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return &pb.OffsetForLeaderEpochResponse{Partitions: []*pb.OffsetForLeaderEpochPartitionResponse{s.resp}}, nil
}

// TestRemovedFetcherLeavesTheNewLeadersLog: a fetcher's work on a
// partition other than appends (the truncation by leader epoch once the
// old leader answers, a restart at the leader's log start, the leader's
// HW) happens only while the replica still follows that epoch. Here the
// replica is promoted while its fetcher waits for the old leader's
// OffsetForLeaderEpoch answer, or holds a fetch answer: the new leader's
// log, with records written at its epoch, and its HW stay as they are.
// Before, the late truncation cut the new leader's log (and its
// acknowledged records with it).
//
// With planted.RemovedFetcherTruncates on (the subtests under "planted")
// the late work runs unguarded as before, and each case must see the new
// leader's log or HW moved: the check catches the bug.
func TestRemovedFetcherLeavesTheNewLeadersLog(t *testing.T) {
	for _, tc := range []string{"truncation", "log start restart", "high watermark", "planted/truncation", "planted/log start restart", "planted/high watermark"} {
		t.Run(tc, func(t *testing.T) {
			tc, plant := strings.CutPrefix(tc, "planted/")
			if plant {
				defer planted.Set(planted.RemovedFetcherTruncates)()
			}
			key, m, p := followerOfTen(t) // offsets 0-9 at epoch 3, from the old leader
			f := newFetcher(m, 2)
			st := &fetchState{p: p, leaderEpoch: 3, truncate: true, leaderHW: -1}
			f.parts[key] = st

			promote := func() {
				f.remove(key) // as unfollow does
				np := &metadata.Partition{Topic: key.Topic, Partition: 0, Replicas: []int32{1, 2}, ISR: []int32{1}, Leader: 1, LeaderEpoch: 4, PartitionEpoch: 2}
				m.becomeLeader(p, np)
				for range 2 { // offsets 10-11 at epoch 4, acknowledged with ISR [1]
					b, err := oneRecord(0, 0)
					if err != nil {
						t.Fatal(err)
					}
					if _, _, err := p.AppendAsLeader(b, -1); err != nil {
						t.Fatal(err)
					}
				}
				le := m.leader(key)
				le.mu.Lock()
				m.advanceHWLocked(le)
				le.mu.Unlock()
			}

			switch tc {
			case "truncation":
				// The old leader says epoch 3 ended at 5 (it lost 5-9).
				c := &slowLeader{asked: make(chan struct{}), answer: make(chan struct{}),
					resp: &pb.OffsetForLeaderEpochPartitionResponse{Topic: key.Topic, LeaderEpoch: 3, EndOffset: 5}}
				type result struct {
					done bool
					err  error
				}
				got := make(chan result, 1)
				go func() {
					done, err := f.truncateOne(c, st)
					got <- result{done, err}
				}()
				<-c.asked
				promote()
				close(c.answer)
				if r := <-got; r.err != nil {
					t.Fatalf("truncateOne: %v", r.err)
				}
			case "log start restart":
				promote()
				f.handle(st, &pb.FetchPartitionResponse{Topic: key.Topic, ErrorCode: pb.ErrorCode_OFFSET_OUT_OF_RANGE, LogStartOffset: 100, HighWatermark: -1})
			case "high watermark":
				promote()
				f.handle(st, &pb.FetchPartitionResponse{Topic: key.Topic, HighWatermark: 3, LogStartOffset: 0})
			}
			leo, start, hw := p.Log.LogEndOffset(), p.Log.LogStartOffset(), p.HighWatermark()
			if plant {
				if leo == 12 && start == 0 && hw == 12 {
					t.Fatal("with removed-fetcher-truncates planted the new leader's log and HW were left as they were: this check does not catch the bug")
				}
				return
			}
			if leo != 12 || start != 0 || hw != 12 {
				t.Fatalf("the new leader's log is [%d, %d) with HW %d after its removed fetcher's late work, want [0, 12) with HW 12", start, leo, hw)
			}
		})
	}
}

// TestNewLeaderLaggingHWAnswersOffsetNotAvailable: a replica promoted
// while its HW lags its log end (its followers have not fetched since)
// answers OFFSET_NOT_AVAILABLE for the latest offset until its HW reaches
// where it began the epoch, as Kafka does (KIP-207): until then the
// latest offset it would give is below what the previous leader gave.
func TestNewLeaderLaggingHWAnswersOffsetNotAvailable(t *testing.T) {
	key, m, p := followerOfTen(t) // offsets 0-9 at epoch 3; the old leader's HW reached 6 here
	p.SetHighWatermark(6, true)
	if err := m.HWLagging(key, 3, p.HighWatermark()); err != nil {
		t.Fatalf("a follower: %v, want nil (only a leader answers ListOffsets)", err)
	}
	np := &metadata.Partition{Topic: key.Topic, Partition: 0, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1, LeaderEpoch: 4, PartitionEpoch: 2}
	m.becomeLeader(p, np)
	if hw := p.HighWatermark(); hw != 6 {
		t.Fatalf("new leader's HW %d, want 6 (replica 2 has not fetched at epoch 4)", hw)
	}
	err := m.HWLagging(key, 4, p.HighWatermark())
	if errs.CodeOf(err) != pb.ErrorCode_OFFSET_NOT_AVAILABLE {
		t.Fatalf("HW 6 below the epoch's start 10: %v, want OFFSET_NOT_AVAILABLE", err)
	}
	if err := m.HWLagging(key, 3, p.HighWatermark()); err != nil {
		t.Fatalf("asked for another epoch than the one it leads: %v, want nil", err)
	}
	p.SetHighWatermark(10, false) // replica 2 fetched from 10
	if err := m.HWLagging(key, 4, p.HighWatermark()); err != nil {
		t.Fatalf("HW at the epoch's start: %v, want nil", err)
	}
}
