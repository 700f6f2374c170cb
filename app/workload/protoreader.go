package workload

import (
	"context"
	"errors"
	"sort"
	"time"

	"github.com/strand-io/strand/app/verify"
	"github.com/strand-io/strand/client"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
)

// The protocol-level read_committed reader follows every partition of the
// source topic with raw Fetch requests (isolation READ_COMMITTED) to its
// leader, decoding the record batches itself, so that it sees what a
// consumer library hides: which transaction each batch belongs to, the
// markers, and the high watermark of the very response that handed a
// batch out. For every producer transaction in a partition it records a
// verify.TxnSpan: where it starts, which response delivered its records
// first (and that response's HW), where its marker is, or that a newer
// epoch of the same producer came before any marker. The checker judges
// the spans; the records it delivers are live read_committed reads too.
//
// Why the HW test has no false positives: a leader hands a read_committed
// reader only records below its last stable offset, and the LSO may pass
// a transaction's first offset only once the HW has passed its marker. A
// marker below the HW is on every ISR member, so it survives every clean
// leader change at the same offset, and the reader, which reads each
// partition in offset order from one leader at a time, finds it there.
// The reader takes max(HW, LSO) as the response's HW: the partition reads
// the HW and then the LSO, which is computed against a HW read again, so
// the LSO may pass the HW it reported if the HW moved in between; it is
// still never above the HW at that later moment. And a leader releases a
// transaction for read_committed readers as it computes the HW that
// passes its marker, a moment before it publishes that HW, so a response
// can also hand out records with a HW one step behind: the reader keeps,
// per span, the highest HW the delivering leader (same id and leader
// epoch) reported afterwards (TxnSpan.LeaderHW), and the checker accepts
// a marker below it. Records it delivered are never truncated (they were
// below the HW), so its position is valid on any later leader. A batch of
// an aborted transaction (the response's aborted list) is not delivered
// and opens or continues its span without delivering it.

const protoReaderName = "proto-rc"

// protoPartition is the reader's state for one partition.
type protoPartition struct {
	tp     client.TopicPartition
	offset int64
	// open is the span of each producer's transaction that has data and
	// no marker yet.
	open map[int64]*openSpan
}

// openSpan is a span being read, with the leader (id and leader epoch)
// that delivered its records, for TxnSpan.LeaderHW.
type openSpan struct {
	verify.TxnSpan
	leader, leaderEpoch int32
}

// protoReader reads every source partition until stop, then until it has
// caught up with the last stable offset it last saw (at most 10 s more).
func (r *run) protoReader(ctx context.Context, stop <-chan struct{}) {
	done := make(chan struct{})
	n := int(r.cfg.Partitions)
	for i := 0; i < n; i++ {
		go func(part int32) {
			defer func() { done <- struct{}{} }()
			r.protoReadPartition(ctx, stop, client.TopicPartition{Topic: r.src, Partition: part})
		}(int32(i))
	}
	for i := 0; i < n; i++ {
		<-done
	}
}

func (r *run) protoReadPartition(ctx context.Context, stop <-chan struct{}, tp client.TopicPartition) {
	st := &protoPartition{tp: tp, open: map[int64]*openSpan{}}
	leader := int32(-1)
	var stopAt time.Time
	lso := int64(-1)
	for ctx.Err() == nil {
		if stopAt.IsZero() {
			select {
			case <-stop:
				stopAt = time.Now().Add(10 * time.Second)
			default:
			}
		}
		if !stopAt.IsZero() && (st.offset >= lso || time.Now().After(stopAt)) {
			return
		}
		if leader < 0 {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			l, err := r.leaderOf(cctx, tp)
			cancel()
			if err != nil || l < 0 {
				sleep(ctx, 200*time.Millisecond)
				continue
			}
			leader = l
		}
		conn, err := r.admin.BrokerConn(leader)
		if err != nil {
			leader = -1
			sleep(ctx, 200*time.Millisecond)
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		resp, err := pb.NewConsumerClient(conn).Fetch(cctx, &pb.FetchRequest{ReplicaId: -1, MaxWaitMs: 200, MinBytes: 1, MaxBytes: 1 << 20,
			IsolationLevel: pb.IsolationLevel_READ_COMMITTED,
			Partitions:     []*pb.FetchPartition{{Topic: tp.Topic, Partition: tp.Partition, FetchOffset: st.offset, CurrentLeaderEpoch: -1, PartitionMaxBytes: 1 << 20}}})
		cancel()
		if err != nil || len(resp.Partitions) != 1 {
			leader = -1
			sleep(ctx, 200*time.Millisecond)
			continue
		}
		pr := resp.Partitions[0]
		if pr.ErrorCode != pb.ErrorCode_NONE {
			// NOT_LEADER_OR_FOLLOWER and the like: find the leader again.
			// (OFFSET_OUT_OF_RANGE cannot be right: the position never
			// passes a HW; it is retried, and shows as lost reads.)
			leader = -1
			sleep(ctx, 200*time.Millisecond)
			continue
		}
		lso = pr.LastStableOffset
		r.protoApply(st, pr, time.Now())
	}
}

// leaderOf asks the metadata for tp's leader (-1: none, or tp not listed).
func (r *run) leaderOf(ctx context.Context, tp client.TopicPartition) (int32, error) {
	l, err := r.admin.Leader(ctx, tp)
	if errors.Is(err, client.ErrUnknownTopicOrPartition) {
		return -1, nil
	}
	return l, err
}

// protoApply takes one partition's Fetch answer: it delivers the records
// of transactions not in the aborted list, and moves the spans along.
func (r *run) protoApply(st *protoPartition, pr *pb.FetchPartitionResponse, now time.Time) {
	hw := max(pr.HighWatermark, pr.LastStableOffset)
	for _, s := range st.open {
		if s.Delivered >= 0 && s.leader == pr.CurrentLeaderId && s.leaderEpoch == pr.CurrentLeaderEpoch {
			s.LeaderHW = max(s.LeaderHW, hw)
		}
	}
	aborted := append([]*pb.AbortedTransaction(nil), pr.AbortedTransactions...)
	sort.Slice(aborted, func(i, j int) bool { return aborted[i].FirstOffset < aborted[j].FirstOffset })
	abortedPIDs := map[int64]bool{}
	tp := verify.TP{Topic: st.tp.Topic, Partition: st.tp.Partition}
	var reads []verify.Read
	var done []verify.TxnSpan
	for it := record.NewIter(pr.Records); it.Next(); {
		h := it.Header()
		if h.NextOffset() <= st.offset {
			continue // a batch the position is already past
		}
		for len(aborted) > 0 && aborted[0].FirstOffset <= h.LastOffset() {
			abortedPIDs[aborted[0].ProducerId] = true
			aborted = aborted[1:]
		}
		st.offset = h.NextOffset()
		if h.IsControl() {
			typ, _, err := record.ReadControlBatch(it.Batch())
			if err != nil {
				r.logf("%s: %s: unreadable marker at %d: %v", protoReaderName, st.tp, h.BaseOffset, err)
				continue
			}
			if typ == record.ControlAbort {
				delete(abortedPIDs, h.ProducerID)
			}
			if s := st.open[h.ProducerID]; s != nil {
				s.Marker, s.Commit = h.BaseOffset, typ == record.ControlCommit
				done = append(done, s.TxnSpan)
				delete(st.open, h.ProducerID)
			}
			continue
		}
		skip := h.IsTransactional() && abortedPIDs[h.ProducerID]
		if h.IsTransactional() && h.ProducerID >= 0 {
			s := st.open[h.ProducerID]
			if s != nil && s.Epoch != h.ProducerEpoch {
				// A transaction at a newer epoch while the older one had no
				// marker: its marker never came here.
				s.Orphaned = h.BaseOffset
				done = append(done, s.TxnSpan)
				s = nil
			}
			if s == nil {
				s = &openSpan{TxnSpan: verify.TxnSpan{TP: tp, Reader: protoReaderName, ProducerID: h.ProducerID, Epoch: h.ProducerEpoch, FirstOffset: h.BaseOffset,
					Delivered: -1, DeliveredHW: -1, LeaderHW: -1, Marker: -1, Orphaned: -1, Time: now}}
				st.open[h.ProducerID] = s
			}
			if !skip && s.Delivered < 0 {
				s.Delivered, s.DeliveredHW, s.LeaderHW = h.BaseOffset, hw, hw
				s.leader, s.leaderEpoch = pr.CurrentLeaderId, pr.CurrentLeaderEpoch
			}
		}
		if skip {
			continue
		}
		_, recs, err := record.Decode(it.Batch())
		if err != nil {
			r.logf("%s: %s: undecodable batch at %d: %v", protoReaderName, st.tp, h.BaseOffset, err)
			continue
		}
		for _, rec := range recs {
			reads = append(reads, verify.Read{Reader: protoReaderName, ReadCommitted: true, Time: now, TP: tp,
				Offset: rec.Offset, Value: string(rec.Value)})
		}
	}
	if len(reads) == 0 && len(done) == 0 {
		return
	}
	r.mu.Lock()
	r.reads = append(r.reads, reads...)
	r.spans = append(r.spans, done...)
	r.mu.Unlock()
}
