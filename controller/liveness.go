package controller

import (
	"context"
	"time"

	pb "github.com/strand-io/strand/proto/strand/v1"
)

// Fencing a broker that is gone, early.
//
// A broker's session ends when it has not heartbeated for
// broker.session.timeout.ms (9 s, Kafka's default). Waiting that long
// after a kill -9 stops every exactly-once pipeline whose coordinator or
// partition leader lived there, and every acks=all produce whose ISR holds
// it. So the active controller also fences a broker once it has been
// silent for broker.unreachable.session.timeout.ms (1.75 s) AND a direct
// probe (Config.Probe: one gossip ping, begun after the broker's last
// heartbeat) went unanswered. A dead or stopped process answers neither;
// one whose heartbeats are merely late (a busy controller, a slow network
// path for gRPC) answers the ping, and keeps its full session. A stall
// shorter than the silence limit minus one heartbeat interval (1.5 s with
// the 250 ms default) fences nothing: the broker heartbeats again before
// its silence reaches the limit.
//
// Probes begin once a broker has been silent for half the limit, so that
// by the time the limit is reached one has had its 300 ms to go
// unanswered. probeLoop owns them; each runs in its own goroutine,
// counted in c.wg, and ends within memberlist's probe timeout.

// probeEvery is how often probeLoop looks at the leases.
const probeEvery = 100 * time.Millisecond

func (c *Controller) probeLoop(ctx context.Context) {
	defer c.wg.Done()
	if c.cfg.Probe == nil || c.cfg.UnreachableSessionTimeout <= 0 {
		return
	}
	tick := c.clk.NewTicker(probeEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C():
			c.probeSilent(ctx)
		}
	}
}

// probeSilent starts a probe of every unfenced broker silent for half the
// limit (none of it already in flight) and fences those silent for the
// whole limit whose last probe, begun after their last heartbeat, went
// unanswered.
func (c *Controller) probeSilent(ctx context.Context) {
	if err := c.lockActive(); err != nil {
		return
	}
	defer c.mu.Unlock()
	limit := c.cfg.UnreachableSessionTimeout
	img := c.Q.FSM.Image()
	now := c.clk.Now()
	for _, b := range img.SortedBrokers() {
		if b.Fenced || b.ID == c.cfg.NodeID {
			continue
		}
		last, ok := c.leases[b.ID]
		if !ok {
			continue
		}
		silent := now.Sub(last)
		if silent < limit/2 {
			continue
		}
		if failed, ok := c.unreachable[b.ID]; ok && !failed.Before(last) && silent >= limit {
			c.lg.Warn("broker silent and unreachable; fencing before its session timeout", "broker", b.ID, "epoch", b.Epoch,
				"silentFor", silent.Round(time.Millisecond), "limit", limit, "sessionTimeout", c.cfg.SessionTimeout)
			recs := append([]*pb.MetadataRecord{{Record: &pb.MetadataRecord_FenceBroker{FenceBroker: &pb.FenceBrokerRecord{NodeId: b.ID, BrokerEpoch: b.Epoch}}}},
				FenceChanges(img, b.ID)...)
			if _, err := c.proposeLocked(ctx, recs...); err != nil {
				c.lg.Warn("fence broker", "broker", b.ID, "err", err)
				return
			}
			delete(c.heard, b.ID)
			delete(c.unreachable, b.ID)
			img = c.Q.FSM.Image()
			continue
		}
		if !c.probing[b.ID] {
			c.probing[b.ID] = true
			c.wg.Add(1)
			go c.probe(b.ID, now)
		}
	}
}

// probe asks broker id whether it is there and records the answer.
func (c *Controller) probe(id int32, began time.Time) {
	defer c.wg.Done()
	ok := c.cfg.Probe(id)
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.probing, id)
	if ok {
		delete(c.unreachable, id)
	} else {
		c.unreachable[id] = began
	}
}

// inheritLeaderLeaseLocked runs as this node becomes the active
// controller. Every broker's lease starts afresh then, since nothing tells
// this controller when the others last heartbeated, except for the node
// that led the quorum before: Raft's last contact with it is the last
// sign of life this node has, so its lease starts there. When that node
// was killed, it is fenced as soon as it would have been had it been any
// other broker, not a whole silence limit after the election.
func (c *Controller) inheritLeaderLeaseLocked(now time.Time) {
	id := c.lastLeader
	if id < 0 || id == c.cfg.NodeID {
		return
	}
	if _, ok := c.leases[id]; !ok {
		return
	}
	lc := c.Q.Raft.LastContact()
	if lc.IsZero() {
		return
	}
	// Raft's clock is the wall clock; carry the age over, not the instant.
	if age := time.Since(lc); age > 0 {
		c.leases[id] = now.Add(-age)
	}
}
