// Package coordinator holds what the transaction and group coordinators
// share: the producer-id manager. The coordinators themselves are in
// coordinator/txn and coordinator/group.
package coordinator

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// BlockSource hands out blocks of producer ids, each committed durably
// (through the controller quorum) before any id in it is used.
type BlockSource interface {
	AllocateBlock(ctx context.Context) (start int64, size int32, err error)
}

// ProducerIDManager hands out producer ids from blocks. It fetches the next
// block when the current one is 90% used, so callers rarely wait; with no
// id at hand it answers COORDINATOR_LOAD_IN_PROGRESS (retriable) instead of
// blocking the request.
type ProducerIDManager struct {
	src BlockSource
	lg  *slog.Logger

	mu       sync.Mutex
	next     int64
	end      int64 // exclusive
	pending  [2]int64
	hasPend  bool
	fetching bool
	lastErr  error
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
}

// NewProducerIDManager returns a manager drawing from src.
func NewProducerIDManager(src BlockSource, lg *slog.Logger) *ProducerIDManager {
	if lg == nil {
		lg = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &ProducerIDManager{src: src, lg: lg, ctx: ctx, cancel: cancel}
}

// Prefetch starts fetching a block now.
func (m *ProducerIDManager) Prefetch() {
	m.mu.Lock()
	m.maybeFetchLocked()
	m.mu.Unlock()
}

// Next returns an unused producer id.
func (m *ProducerIDManager) Next(ctx context.Context) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.next >= m.end && m.hasPend {
		m.next, m.end = m.pending[0], m.pending[1]
		m.hasPend = false
	}
	if m.next < m.end {
		id := m.next
		m.next++
		if remaining := m.end - m.next; remaining*10 < 1000 {
			m.maybeFetchLocked()
		}
		return id, nil
	}
	m.maybeFetchLocked()
	msg := "fetching the next producer id block from the controller"
	if m.lastErr != nil {
		msg += " (last attempt: " + m.lastErr.Error() + ")"
	}
	return -1, errs.New(pb.ErrorCode_COORDINATOR_LOAD_IN_PROGRESS, "%s", msg)
}

func (m *ProducerIDManager) maybeFetchLocked() {
	if m.fetching || m.hasPend || m.ctx.Err() != nil {
		return
	}
	m.fetching = true
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		for attempt := 0; m.ctx.Err() == nil; attempt++ {
			ctx, cancel := context.WithTimeout(m.ctx, 10*time.Second)
			start, size, err := m.src.AllocateBlock(ctx)
			cancel()
			m.mu.Lock()
			if err == nil {
				m.pending = [2]int64{start, start + int64(size)}
				m.hasPend, m.fetching, m.lastErr = true, false, nil
				m.mu.Unlock()
				m.lg.Debug("producer id block", "start", start, "size", size)
				return
			}
			m.lastErr = err
			m.mu.Unlock()
			t := time.NewTimer(time.Duration(min(attempt+1, 10)) * 100 * time.Millisecond)
			select {
			case <-m.ctx.Done():
			case <-t.C:
			}
			t.Stop()
		}
		m.mu.Lock()
		m.fetching = false
		m.mu.Unlock()
	}()
}

// Stop ends any fetch in progress.
func (m *ProducerIDManager) Stop() {
	m.cancel()
	m.wg.Wait()
}
