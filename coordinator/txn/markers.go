package txn

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/internal/wire"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// markerJob is the markers of one transaction still to be written.
type markerJob struct {
	owner            *owned
	transactionalID  string
	producerID       int64
	epoch            int16 // the marker epoch (the bumped one)
	committed        bool
	coordinatorEpoch int32
	txnVersion       int16 // the marker's epoch rule: 2 for the bumped epoch
	remaining        map[TopicPartition]bool
}

// markerSender writes transaction markers: it groups what is due per
// destination broker (the partition's current leader) into one
// WriteTxnMarkers request, retries each partition until it answers, and
// completes a transaction when its last partition has.
type markerSender struct {
	c    *Coordinator
	pool *wire.Pool

	mu   sync.Mutex
	jobs map[*markerJob]bool
	kick chan struct{}

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

func newMarkerSender(c *Coordinator, pool *wire.Pool) *markerSender {
	ctx, cancel := context.WithCancel(c.ctx)
	return &markerSender{c: c, pool: pool, jobs: map[*markerJob]bool{}, kick: make(chan struct{}, 1), ctx: ctx, cancel: cancel, done: make(chan struct{})}
}

func (s *markerSender) start() { go s.run() }

func (s *markerSender) stop() {
	s.cancel()
	<-s.done
}

func (s *markerSender) enqueue(j *markerJob) {
	s.mu.Lock()
	s.jobs[j] = true
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// Pending is the number of partitions with a marker still to write (the
// marker queue size operators watch).
func (s *markerSender) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for j := range s.jobs {
		n += len(j.remaining)
	}
	return n
}

type markerItem struct {
	job *markerJob
	tp  TopicPartition
}

func (s *markerSender) run() {
	defer close(s.done)
	backoff := 20 * time.Millisecond
	for {
		progress := s.round()
		wait := time.Hour
		s.mu.Lock()
		if len(s.jobs) > 0 {
			wait = backoff
		}
		s.mu.Unlock()
		if progress {
			backoff = 20 * time.Millisecond
		} else if backoff < time.Second {
			backoff *= 2
		}
		t := time.NewTimer(wait)
		select {
		case <-s.ctx.Done():
			t.Stop()
			return
		case <-s.kick:
		case <-t.C:
		}
		t.Stop()
	}
}

// round sends one request per destination broker with everything due.
func (s *markerSender) round() bool {
	img := s.c.repl.Image()
	byBroker := map[int32][]markerItem{}
	s.mu.Lock()
	for j := range s.jobs {
		if j.owner.ctx.Err() != nil {
			delete(s.jobs, j) // the new coordinator resends them
			continue
		}
		for tp := range j.remaining {
			p := img.Partition(tp.Topic, tp.Partition)
			if p == nil {
				// The topic is gone: there is nothing to mark.
				delete(j.remaining, tp)
				continue
			}
			if p.Leader < 0 {
				continue
			}
			byBroker[p.Leader] = append(byBroker[p.Leader], markerItem{j, tp})
		}
		if len(j.remaining) == 0 {
			delete(s.jobs, j)
			s.finish(j)
		}
	}
	s.mu.Unlock()
	if len(byBroker) == 0 {
		return false
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	progress := false
	for id, items := range byBroker {
		b := img.Brokers[id]
		if b == nil {
			continue
		}
		wg.Add(1)
		go func(addr string, items []markerItem) {
			defer wg.Done()
			if s.send(addr, items) {
				mu.Lock()
				progress = true
				mu.Unlock()
			}
		}(b.PeerAddress(), items) // markers go to the leader's inter-broker listener
	}
	wg.Wait()
	return progress
}

// send writes items to one broker and settles what it answered.
func (s *markerSender) send(addr string, items []markerItem) bool {
	byJob := map[*markerJob][]TopicPartition{}
	for _, it := range items {
		byJob[it.job] = append(byJob[it.job], it.tp)
	}
	req := &pb.WriteTxnMarkersRequest{}
	order := make([]*markerJob, 0, len(byJob))
	for j, tps := range byJob {
		order = append(order, j)
		sort.Slice(tps, func(a, b int) bool {
			return tps[a].Topic < tps[b].Topic || tps[a].Topic == tps[b].Topic && tps[a].Partition < tps[b].Partition
		})
		m := &pb.TxnMarker{ProducerId: j.producerID, ProducerEpoch: int32(j.epoch), Committed: j.committed, CoordinatorEpoch: j.coordinatorEpoch,
			TransactionVersion: int32(j.txnVersion), TransactionalId: j.transactionalID}
		for _, tp := range tps {
			m.Partitions = append(m.Partitions, &pb.TopicPartition{Topic: tp.Topic, Partition: tp.Partition})
		}
		req.Markers = append(req.Markers, m)
	}
	conn, err := s.pool.Get(addr)
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
	defer cancel()
	resp, err := pb.NewTransactionsClient(conn).WriteTxnMarkers(ctx, req)
	if err != nil {
		s.c.lg.Debug("WriteTxnMarkers failed; retrying", "broker", addr, "err", err)
		return false
	}
	progress := false
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, r := range resp.Markers {
		if i >= len(order) {
			break
		}
		j := order[i]
		for _, pr := range r.Partitions {
			tp := TopicPartition{pr.Topic, pr.Partition}
			switch pr.ErrorCode {
			case pb.ErrorCode_NONE:
				// Written and in the ISR, a repeat of one that is, or
				// nothing to end there (the transaction's batch never
				// reached the partition): done either way.
				delete(j.remaining, tp)
				progress = true
			case pb.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION:
				// The broker does not know the partition (its metadata may
				// lag); only the coordinator's own metadata losing the topic
				// (round) drops it. Retried like any other error.
				s.c.lg.Debug("marker's partition unknown to its leader; retrying", "transactionalId", j.transactionalID, "partition", tp)
			case pb.ErrorCode_INVALID_PRODUCER_EPOCH, pb.ErrorCode_TRANSACTION_COORDINATOR_FENCED:
				// A newer epoch or coordinator has written here: this marker is moot.
				s.c.lg.Warn("marker refused as stale", "transactionalId", j.transactionalID, "partition", tp, "err", errs.FromCode(pr.ErrorCode, pr.ErrorMessage))
				delete(j.remaining, tp)
				progress = true
			default:
				s.c.lg.Debug("marker not written yet", "transactionalId", j.transactionalID, "partition", tp, "code", pr.ErrorCode.String())
			}
		}
		if len(j.remaining) == 0 && s.jobs[j] {
			delete(s.jobs, j)
			s.finish(j)
		}
	}
	return progress
}

// finish completes a job's transaction (s.mu held; completion runs apart).
func (s *markerSender) finish(j *markerJob) {
	s.c.wg.Add(1)
	go func() {
		defer s.c.wg.Done()
		s.c.complete(j)
	}()
}
