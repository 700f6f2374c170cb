package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// Readiness and shutdown: when a node starts serving clients, and how
// it stops (cleanly, or killed as a crash would).

// WaitReady blocks until the node is ready (Ready). The first time the
// node is, it starts serving clients before WaitReady returns. WaitReady
// asks again each time it is called, so after a fencing it waits for the
// node to be unfenced again.
func (n *Node) WaitReady(ctx context.Context) error {
	for {
		if n.Ready() {
			n.serveClients()
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %d not ready: %w", n.cfg.NodeID, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// serveClients opens the start-up gate and turns health SERVING, the first
// time the node is ready (whoever sees it ready, the node's own watcher or
// a WaitReady caller, finds clients served). The gate first: whoever sees
// SERVING is served.
func (n *Node) serveClients() {
	n.readyOnce.Do(func() {
		n.gate.Open()
		n.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
		n.lg.Info("node ready: serving clients")
	})
}

// Ready reports whether the node can serve clients now:
//
//   - with the broker role (alone or with the controller): the broker is
//     registered with the active controller (it has a broker epoch), the
//     controller has unfenced it, and the broker has applied the metadata
//     log up to its own registration and unfencing, so its image lists it
//     as a live broker (a node with both roles needs nothing more of its
//     controller: its broker's metadata is its controller's log, and the
//     registration needed an active controller);
//   - controller-only: the quorum has a leader this node knows, and the
//     node has applied its Raft log up to the commit index it learned
//     once it knew the leader. Such a node registers no client service;
//     readiness is what its health check reports.
func (n *Node) Ready() bool {
	if n.Lifecycle == nil {
		return n.controllerReady()
	}
	epoch := n.Lifecycle.Epoch()
	if epoch <= 0 || n.Lifecycle.Fenced() || n.AppliedOffset() < epoch {
		return false
	}
	b := n.Repl.Image().Brokers[n.cfg.NodeID]
	return b != nil && b.Epoch == epoch && !b.Fenced
}

func (n *Node) controllerReady() bool {
	if n.Quorum.LeaderID() < 0 {
		return false
	}
	target := n.ctrlCatchUp.Load()
	if target == 0 {
		if target = n.Quorum.Raft.CommitIndex(); target == 0 {
			return false
		}
		n.ctrlCatchUp.Store(target)
	}
	return n.Quorum.Raft.AppliedIndex() >= target
}

// notReadyMessage is what a starting node answers client requests with
// (after BROKER_NOT_AVAILABLE): what it is and what it waits for.
func (n *Node) notReadyMessage() string {
	what := "it serves clients once its broker is registered with the controller, unfenced and caught up with the metadata log"
	if n.Lifecycle == nil {
		what = "a controller-only node is ready once it knows the active controller and has caught up with the metadata log"
	}
	return fmt.Sprintf("node %d is starting: %s; %s", n.cfg.NodeID, what, n.waitingFor())
}

func (n *Node) waitingFor() string {
	if n.Lifecycle == nil {
		if n.Quorum.LeaderID() < 0 {
			return "waiting for the controller quorum to elect a leader"
		}
		return "catching up with the metadata log"
	}
	epoch := n.Lifecycle.Epoch()
	switch {
	case epoch <= 0:
		if leader := n.Remote.LeaderHint(); leader >= 0 {
			return fmt.Sprintf("waiting to register with the active controller (node %d)", leader)
		}
		return "waiting to register with the active controller (none known yet)"
	case n.AppliedOffset() < epoch:
		return fmt.Sprintf("registered with broker epoch %d, catching up with the metadata log", epoch)
	case n.Lifecycle.Fenced():
		return fmt.Sprintf("registered with broker epoch %d and caught up, waiting for the controller to unfence it", epoch)
	default:
		return fmt.Sprintf("unfenced with broker epoch %d, applying its unfencing from the metadata log", epoch)
	}
}

// Stop shuts the node down cleanly: a controlled shutdown first (its
// partitions move), then every log closed cleanly.
func (n *Node) Stop() error { return n.shutdown(true) }

// StorageFailed is closed when an fsync of one of this broker's logs
// fails; StorageErr says which. The node's storage is then not trusted:
// like Kafka with every log directory failed, the node should stop, so
// that leadership moves and recovery re-checks the logs at the restart
// (`strand server` does). Nil without the broker role.
func (n *Node) StorageFailed() <-chan struct{} {
	if n.Parts == nil {
		return nil
	}
	return n.Parts.LogStats().StorageFailed()
}

// MetadataUnreadable is closed when this node's controller meets metadata
// it cannot read: written in a format newer than this binary's (a cluster
// finalized to a strand.version this binary does not support). The node
// should stop, as `strand server` does: it cannot follow the cluster any
// further. Nil without the controller role.
func (n *Node) MetadataUnreadable() <-chan struct{} {
	if n.Quorum == nil {
		return nil
	}
	return n.Quorum.FSM.Unreadable()
}

// MetadataErr is the batch MetadataUnreadable reported, or nil.
func (n *Node) MetadataErr() error {
	if n.Quorum == nil {
		return nil
	}
	return n.Quorum.FSM.UnreadableErr()
}

// StorageErr is the failed fsync StorageFailed reported, or nil.
func (n *Node) StorageErr() error {
	if n.Parts == nil {
		return nil
	}
	return n.Parts.LogStats().StorageErr()
}

// resignQuorumLeadership hands the controller quorum's leadership to
// another voter before a clean stop, as a Kafka controller resigns: left
// to an election, the others would wait out
// controller.quorum.fetch.timeout.ms, and records this leader committed
// in its last moments (the fencing of its own broker among them) would
// reach the other brokers only once a new leader had been elected. It
// waits at most 2 s; a transfer that fails leaves the election to do it.
func (n *Node) resignQuorumLeadership() {
	if n.Quorum == nil || !n.Quorum.IsLeader() {
		return
	}
	voters := 0
	if cf := n.Quorum.Raft.GetConfiguration(); cf.Error() == nil {
		for _, sv := range cf.Configuration().Servers {
			if sv.Suffrage == raft.Voter {
				voters++
			}
		}
	}
	if voters < 2 {
		return // no one to hand it to
	}
	f := n.Quorum.Raft.LeadershipTransfer()
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	t := time.NewTimer(2 * time.Second)
	defer t.Stop()
	select {
	case err := <-done:
		if err != nil {
			n.lg.Warn("handing the controller quorum's leadership over before stopping", "err", err)
			return
		}
		n.lg.Info("handed the controller quorum's leadership over before stopping", "leader", n.Quorum.LeaderID())
	case <-t.C:
		n.lg.Warn("handing the controller quorum's leadership over before stopping: no answer within 2 s")
	}
}

// Kill stops the node as a crash would: no controlled shutdown, logs left
// without a clean close (tests; the data stays like the page cache keeps it).
func (n *Node) Kill() { n.shutdown(false) }

func (n *Node) shutdown(clean bool) error {
	if !n.stopped.CompareAndSwap(false, true) {
		return nil
	}
	var errsOut []error
	if clean {
		n.resignQuorumLeadership()
	}
	if n.Lifecycle != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		n.Lifecycle.Stop(ctx, clean)
		cancel()
	}
	if n.health != nil {
		n.health.Shutdown()
	}
	n.stopHTTP()
	n.saslTokens.Close() // a delayed SASL refusal must not hold up the graceful stops below
	if n.extGRPC != nil {
		n.extGRPC.Stop()
	}
	if n.kafka != nil {
		n.kafka.Close()
	} else if n.kafkaLn != nil {
		n.kafkaLn.Close()
	}
	var stops sync.WaitGroup
	for _, s := range []struct {
		srv *grpc.Server
		ln  net.Listener
	}{{n.grpc, n.ln}, {n.ibGRPC, n.ibLn}} {
		switch {
		case s.srv != nil && clean:
			stops.Add(1)
			go func() {
				defer stops.Done()
				done := make(chan struct{})
				go func() { s.srv.GracefulStop(); close(done) }()
				select {
				case <-done:
				case <-time.After(3 * time.Second):
					s.srv.Stop()
				}
			}()
		case s.srv != nil:
			s.srv.Stop()
		case s.ln != nil:
			s.ln.Close()
		}
	}
	stops.Wait()
	if n.cancel != nil {
		n.cancel()
	}
	n.suspectCancel()
	n.wg.Wait() // the metadata follower is done: nothing calls Repl.Apply now
	if n.Repl != nil {
		n.Repl.Stop()
	}
	if n.PIDs != nil {
		n.PIDs.Stop()
	}
	if n.Groups != nil {
		n.Groups.Stop()
	}
	if n.TxnCoord != nil {
		n.TxnCoord.Stop()
	}
	if n.Parts != nil {
		if clean {
			if err := n.Parts.Close(); err != nil {
				errsOut = append(errsOut, err)
			}
		} else {
			n.Parts.Abandon()
		}
	}
	if n.Controller != nil {
		n.Controller.Stop()
	}
	if n.Quorum != nil {
		if err := n.Quorum.Close(); err != nil {
			errsOut = append(errsOut, err)
		}
	}
	if n.Gossip != nil {
		if clean {
			n.Gossip.Stop()
		} else {
			n.Gossip.Kill()
		}
	}
	if n.pool != nil {
		n.pool.Close()
	}
	if n.clientPool != nil {
		n.clientPool.Close()
	}
	if n.markerPool != nil {
		n.markerPool.Close()
	}
	return errors.Join(errsOut...)
}
