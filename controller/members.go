package controller

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// Cluster membership: controller quorum changes (KIP-853 on
// hashicorp/raft's configuration changes) and broker unregistration.
//
// A new controller joins as follows: it starts with --roles controller
// (or broker,controller) and a --controller-voters list that does not
// name it. StartQuorum then bootstraps nothing: its Raft has an empty
// configuration, it never campaigns, and it waits. The operator runs
// AddVoter (strand cluster add-voter, or Kafka's AddRaftVoter) on the
// active controller with the new node's id and Raft address; the leader
// appends the new configuration (raft.AddVoter, guarded by the index of
// the configuration it checked), replicates the log to the node, and from
// then on it votes. RemoveVoter is raft.RemoveServer with the same guard.
// One change is in flight at a time (hashicorp/raft refuses a second one
// until the first is committed). A removed node is being retired and
// should be stopped: with both roles, its broker reads metadata from its
// own Raft log, which no longer grows.

// configuration reads the latest Raft configuration and its index.
func (q *Quorum) configuration() (raft.Configuration, uint64, error) {
	f := q.Raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return raft.Configuration{}, 0, err
	}
	return f.Configuration(), f.Index(), nil
}

func serverID(id int32) raft.ServerID { return raft.ServerID(strconv.Itoa(int(id))) }

func raftChangeErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return errNotController
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return errs.New(pb.ErrorCode_REQUEST_TIMED_OUT, "controller quorum change timed out: %v", err)
	case strings.Contains(err.Error(), "configuration changed since"):
		return errs.New(pb.ErrorCode_REQUEST_TIMED_OUT, "another controller quorum change is in flight; retry: %v", err)
	}
	return err
}

// waitChange waits for a configuration change's future, or for ctx.
// hashicorp/raft futures have no channel, so a goroutine owned by this call
// waits on f.Error(); it ends when the future resolves, which raft always
// does (committed, enqueue timeout, leadership lost, or shutdown), even
// after ctx gave up on it. A ctx that ends first answers
// REQUEST_TIMED_OUT: the change may still commit, as in Kafka.
func waitChange(ctx context.Context, f raft.Future) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return raftChangeErr(err)
	case <-ctx.Done():
		return errs.New(pb.ErrorCode_REQUEST_TIMED_OUT, "controller quorum change not committed before the request's deadline (it may still commit): %v", ctx.Err())
	}
}

func changeTimeout(ctx context.Context) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		return time.Until(dl)
	}
	return 10 * time.Second
}

// AddVoter makes node id at addr (its Raft address) a voter. A node that
// is a non-voter is promoted; one already a voter is DUPLICATE_VOTER; an
// address nothing answers on is REQUEST_TIMED_OUT.
func (q *Quorum) AddVoter(ctx context.Context, id int32, addr string) error {
	if id < 0 {
		return errs.New(pb.ErrorCode_INVALID_REQUEST, "voter id %d: node ids are not negative", id)
	}
	if _, _, err := net.SplitHostPort(addr); err != nil || addr == "" {
		return errs.New(pb.ErrorCode_INVALID_REQUEST, "voter %d: address %q is not host:port", id, addr)
	}
	conf, idx, err := q.configuration()
	if err != nil {
		return err
	}
	for _, s := range conf.Servers {
		if s.ID == serverID(id) && s.Suffrage == raft.Voter {
			return errs.New(pb.ErrorCode_DUPLICATE_VOTER, "node %d is already a voter of the controller quorum (at %s)", id, s.Address)
		}
	}
	// Kafka adds only a replica it hears from; the closest here: the
	// node's Raft listener must answer, so a typo in the address does not
	// become a voter the quorum then waits for.
	if err := q.probe(ctx, addr); err != nil {
		return errs.New(pb.ErrorCode_REQUEST_TIMED_OUT, "node %d's controller listener %s does not answer (%v): start it with the controller role first", id, addr, err)
	}
	return waitChange(ctx, q.Raft.AddVoter(serverID(id), raft.ServerAddress(addr), idx, changeTimeout(ctx)))
}

// probe dials addr as Raft would (through the configured dialer).
func (q *Quorum) probe(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	dial := q.cfg.Dial
	if dial == nil {
		var d net.Dialer
		dial = func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
	}
	conn, err := dial(ctx, addr)
	if err != nil {
		return err
	}
	return conn.Close()
}

// RemoveVoter takes node id out of the quorum. Unknown ids are
// VOTER_NOT_FOUND; the last voter cannot be removed (INVALID_REQUEST).
func (q *Quorum) RemoveVoter(ctx context.Context, id int32) error {
	conf, idx, err := q.configuration()
	if err != nil {
		return err
	}
	found, voters := false, 0
	for _, s := range conf.Servers {
		if s.Suffrage == raft.Voter {
			voters++
		}
		if s.ID == serverID(id) && s.Suffrage == raft.Voter {
			found = true
		}
	}
	if !found {
		return errs.New(pb.ErrorCode_VOTER_NOT_FOUND, "node %d is not a voter of the controller quorum", id)
	}
	if voters == 1 {
		return errs.New(pb.ErrorCode_INVALID_REQUEST, "node %d is the last voter of the controller quorum and cannot be removed", id)
	}
	return waitChange(ctx, q.Raft.RemoveServer(serverID(id), idx, changeTimeout(ctx)))
}

// Members lists the Raft configuration split by suffrage.
func (q *Quorum) Members() (voters, nonvoters []Voter) {
	conf, _, err := q.configuration()
	if err != nil {
		return nil, nil
	}
	for _, s := range conf.Servers {
		n, _ := strconv.Atoi(string(s.ID))
		v := Voter{ID: int32(n), Addr: string(s.Address)}
		if s.Suffrage == raft.Voter {
			voters = append(voters, v)
		} else {
			nonvoters = append(nonvoters, v)
		}
	}
	return voters, nonvoters
}

// fetchState is what the active controller knows of a replica of the
// metadata log that is not itself: a broker's heartbeat carries the
// metadata offset it has applied.
type fetchState struct {
	offset            int64
	fetched, caughtUp time.Time
}

// noteFetch records a broker's heartbeat offset; c.mu is held.
func (c *Controller) noteFetch(id int32, offset int64) {
	if c.fetches == nil {
		c.fetches = map[int32]fetchState{}
	}
	now := c.clk.Now()
	st := c.fetches[id]
	st.offset, st.fetched = offset, now
	if offset >= int64(c.Q.Raft.CommitIndex()) {
		st.caughtUp = now
	}
	c.fetches[id] = st
}

// AddVoter adds a controller quorum voter (active controller only).
func (c *Controller) AddVoter(ctx context.Context, req *pb.AddVoterRequest) error {
	if err := c.lockActive(); err != nil {
		return err
	}
	// Not under c.mu: the probe and the wait for the change to commit
	// would stall heartbeats, AlterPartition and the tick. Raft's index
	// guard (the configuration's index checked) serialises changes.
	c.mu.Unlock()
	err := c.Q.AddVoter(ctx, req.NodeId, req.Address)
	if errors.Is(err, errNotController) {
		c.stepDownIfNotLeader()
		return c.notController()
	}
	if err == nil {
		c.lg.Info("added controller quorum voter", "node", req.NodeId, "address", req.Address)
	}
	return err
}

// stepDownIfNotLeader marks the controller inactive after a quorum change
// found it no longer the Raft leader (called without c.mu; if it leads
// again by now, the tick decides).
func (c *Controller) stepDownIfNotLeader() {
	c.mu.Lock()
	if !c.Q.IsLeader() {
		c.active = false
	}
	c.mu.Unlock()
}

// RemoveVoter removes a controller quorum voter (active controller only).
// Removing the active controller itself is allowed: it steps down once the
// new configuration is committed.
func (c *Controller) RemoveVoter(ctx context.Context, req *pb.RemoveVoterRequest) error {
	if err := c.lockActive(); err != nil {
		return err
	}
	// Not under c.mu: the probe and the wait for the change to commit
	// would stall heartbeats, AlterPartition and the tick. Raft's index
	// guard (the configuration's index checked) serialises changes.
	c.mu.Unlock()
	err := c.Q.RemoveVoter(ctx, req.NodeId)
	if errors.Is(err, errNotController) {
		c.stepDownIfNotLeader()
		return c.notController()
	}
	if err == nil {
		c.lg.Info("removed controller quorum voter", "node", req.NodeId)
	}
	return err
}

// UnregisterBroker removes a broker's registration, as Kafka's controller
// does for UnregisterBroker: BROKER_ID_NOT_REGISTERED for an unknown id;
// otherwise the broker is fenced (it leaves every ISR, its leaderships
// move) and its registration is removed in one batch. Its replicas stay in
// the partitions' replica lists (Kafka keeps them too; reassign them to
// drain the broker). A broker that is still running learns on its next
// heartbeat that it is not registered and registers again, as in Kafka:
// unregistering is for brokers that are gone for good.
func (c *Controller) UnregisterBroker(ctx context.Context, req *pb.UnregisterBrokerRequest) error {
	if err := c.lockActive(); err != nil {
		return err
	}
	defer c.mu.Unlock()
	img := c.Q.FSM.Image()
	cur := img.Brokers[req.BrokerId]
	if cur == nil {
		return errs.New(pb.ErrorCode_BROKER_ID_NOT_REGISTERED, "broker %d is not registered", req.BrokerId)
	}
	recs := FenceChanges(img, cur.ID)
	recs = append(recs, &pb.MetadataRecord{Record: &pb.MetadataRecord_UnregisterBroker{UnregisterBroker: &pb.UnregisterBrokerRecord{NodeId: cur.ID, BrokerEpoch: cur.Epoch}}})
	if _, err := c.proposeLocked(ctx, recs...); err != nil {
		return err
	}
	delete(c.leases, cur.ID)
	delete(c.heard, cur.ID)
	delete(c.fetches, cur.ID)
	c.lg.Info("unregistered broker", "broker", cur.ID, "epoch", cur.Epoch)
	return nil
}

// QuorumStatus is Kafka's DescribeQuorum as the active controller answers
// it: the leader, its epoch (the Raft term), the high watermark (the commit
// index), and per replica its log end offset and last fetch and caught-up
// times. The leader reports its own Raft log; every other replica is known
// by the metadata offset its broker's heartbeats carry (a controller-only
// voter, which sends none, reports -1).
func (c *Controller) QuorumStatus(_ context.Context) (*pb.QuorumStatusResponse, error) {
	if err := c.lockActive(); err != nil {
		return nil, err
	}
	defer c.mu.Unlock()
	img := c.Q.FSM.Image()
	st := c.Q.Raft.Stats()
	term, _ := strconv.ParseInt(st["term"], 10, 32)
	resp := &pb.QuorumStatusResponse{ClusterId: img.ClusterID, LeaderId: c.cfg.NodeID, LeaderEpoch: int32(term), HighWatermark: int64(c.Q.Raft.CommitIndex())}
	now := c.clk.Now().UnixMilli()
	replica := func(v Voter) *pb.QuorumReplica {
		r := &pb.QuorumReplica{NodeId: v.ID, Address: v.Addr, LogEndOffset: -1, LastFetchTimestampMs: -1, LastCaughtUpTimestampMs: -1}
		if v.ID == c.cfg.NodeID {
			r.LogEndOffset, r.LastFetchTimestampMs, r.LastCaughtUpTimestampMs = int64(c.Q.Raft.LastIndex()), now, now
			return r
		}
		if f, ok := c.fetches[v.ID]; ok {
			r.LogEndOffset, r.LastFetchTimestampMs = f.offset, f.fetched.UnixMilli()
			if !f.caughtUp.IsZero() {
				r.LastCaughtUpTimestampMs = f.caughtUp.UnixMilli()
			}
		}
		return r
	}
	voters, nonvoters := c.Q.Members()
	seen := map[int32]bool{}
	for _, v := range voters {
		seen[v.ID] = true
		resp.Voters = append(resp.Voters, replica(v))
	}
	for _, v := range nonvoters {
		seen[v.ID] = true
		resp.Observers = append(resp.Observers, replica(v))
	}
	for _, b := range img.SortedBrokers() {
		if !seen[b.ID] {
			resp.Observers = append(resp.Observers, replica(Voter{ID: b.ID, Addr: b.InterBrokerAddress}))
		}
	}
	return resp, nil
}

// firstStartFile records the --controller-voters a node's Raft state was
// first started with (members.go): after AddVoter or RemoveVoter the
// configuration differs from that list, and a restart with the same
// command line is still this cluster's.
const firstStartFile = "first-start-voters"

func votersString(vs []Voter) string {
	parts := make([]string, 0, len(vs))
	for _, v := range vs {
		parts = append(parts, strconv.Itoa(int(v.ID))+"@"+v.Addr)
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

func recordFirstStart(dir string, vs []Voter) error {
	return os.WriteFile(filepath.Join(dir, firstStartFile), []byte(votersString(vs)+"\n"), 0o644)
}

// sameAsFirstStart: vs is the voter list this Raft state was first started
// with, so the state is this cluster's even if its voters changed since.
func sameAsFirstStart(dir string, vs []Voter) bool {
	b, err := os.ReadFile(filepath.Join(dir, firstStartFile))
	return err == nil && strings.TrimSpace(string(b)) == votersString(vs)
}
