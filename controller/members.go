package controller

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
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
// adds it as a non-voter (raft.AddNonvoter, guarded by the index of the
// configuration it checked), replicates the log to it, and once the node
// reports (on its Raft listener) that it holds what was committed when it
// was added, promotes it (raft.AddVoter, same guard); from then on it
// votes. One that does not catch up before the request's deadline is
// removed again (REQUEST_TIMED_OUT). RemoveVoter is raft.RemoveServer with the same guard.
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

// changeTimeout is the enqueue timeout handed to a raft configuration
// change: the time ctx has left, at least 1ms (hashicorp/raft reads 0 as
// "wait forever", and a deadline already past gives 0 or less).
func changeTimeout(ctx context.Context) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		return max(time.Until(dl), time.Millisecond)
	}
	return 10 * time.Second
}

// catchUpPoll is how often AddVoter asks a new node how far its log is.
const catchUpPoll = 50 * time.Millisecond

// AddVoter makes node id at addr (its Raft address) a voter. A node that
// is a non-voter is promoted; one already a voter is DUPLICATE_VOTER; an
// address nothing answers on is REQUEST_TIMED_OUT.
//
// As Kafka 4 adds only a caught-up observer, the node first joins as a
// non-voter (raft.AddNonvoter, index guard): the leader replicates the log
// to it while commits still need only the old voters. hashicorp/raft does
// not expose a follower's match index, so the node is asked itself: its
// Raft listener answers a log-end query (quorum.go, streamLayer). Once its
// log end reaches the leader's commit index as of its admission (it holds
// everything committed before it was added), it is promoted with
// raft.AddVoter (index guard again). If it does not catch up before ctx
// ends, the non-voter this call added is removed again and the answer is
// REQUEST_TIMED_OUT.
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
	nonvoter := false
	for _, s := range conf.Servers {
		if s.ID == serverID(id) && s.Suffrage == raft.Voter {
			return errs.New(pb.ErrorCode_DUPLICATE_VOTER, "node %d is already a voter of the controller quorum (at %s)", id, s.Address)
		}
		if s.ID == serverID(id) && string(s.Address) == addr {
			nonvoter = true
		}
	}
	// Kafka adds only a replica it hears from; the closest here: the
	// node's Raft listener must answer, so a typo in the address does not
	// become a voter the quorum then waits for.
	if err := q.probe(ctx, addr); err != nil {
		return errs.New(pb.ErrorCode_REQUEST_TIMED_OUT, "node %d's controller listener %s does not answer (%v): start it with the controller role first", id, addr, err)
	}
	added := false
	if !nonvoter {
		if err := waitChange(ctx, q.Raft.AddNonvoter(serverID(id), raft.ServerAddress(addr), idx, changeTimeout(ctx))); err != nil {
			return err
		}
		added = true
	}
	target := q.Raft.CommitIndex()
	if err := q.waitCaughtUp(ctx, addr, target); err != nil {
		if added {
			q.removeNonvoter(id)
		}
		return errs.New(pb.ErrorCode_REQUEST_TIMED_OUT, "node %d did not catch up with the controller quorum's log (index %d) before the request's deadline (%v); it was not made a voter", id, target, err)
	}
	conf, idx, err = q.configuration()
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(conf.Servers, func(s raft.Server) bool { return s.ID == serverID(id) && string(s.Address) == addr }) {
		return errs.New(pb.ErrorCode_REQUEST_TIMED_OUT, "node %d left the controller quorum's configuration while catching up (another change?); retry", id)
	}
	return waitChange(ctx, q.Raft.AddVoter(serverID(id), raft.ServerAddress(addr), idx, changeTimeout(ctx)))
}

// waitCaughtUp polls the node at addr until its Raft log end reaches
// target, or ctx ends.
func (q *Quorum) waitCaughtUp(ctx context.Context, addr string, target uint64) error {
	t := time.NewTicker(catchUpPoll)
	defer t.Stop()
	var last error
	for {
		end, err := q.peerLastIndex(ctx, addr)
		if err == nil && end >= target {
			return nil
		}
		if err != nil {
			last = err
		} else {
			last = fmt.Errorf("its log ends at %d", end)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w; last: %v", ctx.Err(), last)
		case <-t.C:
		}
	}
}

// peerLastIndex asks the Raft listener at addr for its log's last index
// (streamLayer's lastIndexQuery).
func (q *Quorum) peerLastIndex(ctx context.Context, addr string) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	conn, err := q.dialer()(ctx, addr)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	if _, err := conn.Write([]byte{lastIndexQuery}); err != nil {
		return 0, err
	}
	var b [8]byte
	if _, err := io.ReadFull(conn, b[:]); err != nil {
		return 0, err
	}
	return binary.BigEndian.Uint64(b[:]), nil
}

// removeNonvoter takes back a non-voter AddVoter added and that did not
// catch up. The request's ctx has ended, so this has a few seconds of its
// own; if it fails (another change, lost leadership) the non-voter stays,
// which costs the voters nothing: it is logged.
func (q *Quorum) removeNonvoter(id int32) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conf, idx, err := q.configuration()
	if err == nil {
		for _, s := range conf.Servers {
			if s.ID == serverID(id) && s.Suffrage != raft.Voter {
				err = waitChange(ctx, q.Raft.RemoveServer(serverID(id), idx, changeTimeout(ctx)))
				break
			}
		}
	}
	if err != nil {
		q.logger().Warn("could not remove the non-voter that did not catch up", "node", id, "err", err)
	}
}

func (q *Quorum) logger() *slog.Logger {
	if q.cfg.Logger != nil {
		return q.cfg.Logger
	}
	return slog.Default()
}

func (q *Quorum) dialer() func(ctx context.Context, addr string) (net.Conn, error) {
	if q.cfg.Dial != nil {
		return q.cfg.Dial
	}
	var d net.Dialer
	return func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
}

// probe dials addr as Raft would (through the configured dialer).
func (q *Quorum) probe(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	conn, err := q.dialer()(ctx, addr)
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
	return writeFileAtomic(filepath.Join(dir, firstStartFile), []byte(votersString(vs)+"\n"))
}

// firstStart reads the voter list this Raft state was first started with.
// known is false when the file is missing, empty (torn by a crash while an
// older version wrote it in place) or unreadable.
func firstStart(dir string) (voters string, known bool, err error) {
	b, err := os.ReadFile(filepath.Join(dir, firstStartFile))
	if err != nil {
		return "", false, err
	}
	v := strings.TrimSpace(string(b))
	if v == "" {
		return "", false, errors.New("empty")
	}
	return v, true, nil
}

// writeFileAtomic writes data to path through a temp file, fsync and
// rename, then fsyncs the directory, so a crash leaves either no file or
// the whole one (as broker/storage's helper of the same name, which the
// controller's floor cannot import).
func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
