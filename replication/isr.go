package replication

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/strand-io/strand/broker/storage"
	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// isrLoop proposes ISR changes: shrinks found on a timer (every half of
// replica.lag.time.max.ms, like Kafka) and expansions signalled by follower
// fetches, sent to the controller as one AlterPartition per round.
func (m *Manager) isrLoop() {
	defer m.wg.Done()
	period := m.cfg.ReplicaLagTimeMax / 2
	if period <= 0 {
		period = time.Second
	}
	t := m.clk.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-t.C():
		case <-m.alterQ:
		}
		m.proposeISRChanges(m.ctx)
	}
}

func (m *Manager) signalAlter() {
	select {
	case m.alterQ <- struct{}{}:
	default:
	}
}

// isrEligible is Kafka's isReplicaIsrEligible (KIP-841) as far as this
// broker's metadata image knows: the follower's broker is registered and
// not fenced (a controlled shutdown fences it here). Its fetches carry the
// broker epoch of its registration, checked on every fetch (fetch.go).
func (m *Manager) isrEligible(id int32) bool { return m.Image().IsLive(id) }

func (m *Manager) proposeISRChanges(ctx context.Context) {
	now := m.clk.Now()
	m.mu.Lock()
	entries := make([]*leaderEntry, 0, len(m.leaders))
	for _, le := range m.leaders {
		entries = append(entries, le)
	}
	m.mu.Unlock()
	req := &pb.AlterPartitionRequest{BrokerId: m.cfg.NodeID, BrokerEpoch: m.brokerEpoch()}
	byKey := map[storage.PartitionKey]*leaderEntry{}
	for _, le := range entries {
		le.mu.Lock()
		if le.st != nil {
			hw := le.p.HighWatermark()
			if next := le.st.ISRChange(hw, now, m.cfg.ReplicaLagTimeMax, m.isrEligible); next != nil {
				le.st.Pending = next
				le.p.UpdateISR(le.st.ISR, le.st.MaximalISR(), le.st.PartitionEpoch)
				req.Partitions = append(req.Partitions, &pb.AlterPartitionItem{Topic: le.p.Key.Topic, Partition: le.p.Key.Partition,
					LeaderEpoch: le.st.LeaderEpoch, NewIsr: next, PartitionEpoch: le.st.PartitionEpoch})
				byKey[le.p.Key] = le
				// Logged once per proposal that differs from the last one
				// (a refused proposal may be made again on the next fetch).
				lvl := slog.LevelInfo
				if slices.Equal(le.lastProposed, next) {
					lvl = slog.LevelDebug
				}
				le.lastProposed = next
				m.lg.Log(ctx, lvl, "proposing ISR change", "partition", le.p.Key.String(), "isr", le.st.ISR, "new", next)
			}
		}
		le.mu.Unlock()
	}
	if len(req.Partitions) == 0 {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	resp, err := m.ctrl.AlterPartition(cctx, req)
	cancel()
	if err == nil && resp.ErrorCode != pb.ErrorCode_NONE {
		err = errs.FromCode(resp.ErrorCode, resp.ErrorMessage)
	}
	results := map[storage.PartitionKey]*pb.AlterPartitionResult{}
	if err == nil {
		for _, r := range resp.Partitions {
			results[storage.PartitionKey{Topic: r.Topic, Partition: r.Partition}] = r
		}
	} else {
		m.lg.Warn("AlterPartition failed; will retry", "err", err)
	}
	for key, le := range byKey {
		le.mu.Lock()
		if le.st != nil {
			le.st.Pending = nil
			if r := results[key]; r != nil && r.ErrorCode == pb.ErrorCode_NONE && r.LeaderEpoch == le.st.LeaderEpoch && r.PartitionEpoch > le.st.PartitionEpoch {
				if len(r.Isr) < len(le.st.ISR) {
					m.isrShrinks.Add(1)
				} else if len(r.Isr) > len(le.st.ISR) {
					m.isrExpands.Add(1)
				}
				le.st.ISR = r.Isr
				le.st.PartitionEpoch = r.PartitionEpoch
				le.lastProposed, le.lastRefusal = nil, ""
			} else if r != nil && r.ErrorCode != pb.ErrorCode_NONE {
				// Once per refusal that differs from the last one: a
				// leader whose image lags the controller's may be refused
				// the same change on every fetch until it catches up.
				lvl, why := slog.LevelWarn, r.ErrorCode.String()+": "+r.ErrorMessage
				if why == le.lastRefusal {
					lvl = slog.LevelDebug
				}
				le.lastRefusal = why
				m.lg.Log(ctx, lvl, "ISR change refused", "partition", key.String(), "code", r.ErrorCode.String(), "msg", r.ErrorMessage)
			}
			le.p.UpdateISR(le.st.ISR, le.st.MaximalISR(), le.st.PartitionEpoch)
			m.advanceHWLocked(le)
		}
		le.mu.Unlock()
	}
}
