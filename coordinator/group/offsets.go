package group

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/internal/planted"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
)

// txnIDHeader is the record header carrying a pending commit's transactional id.
const txnIDHeader = "transactional.id"

func partitionErrors(offsets []*pb.PartitionOffset, err error) []*pb.PartitionError {
	code, msg := errs.Split(err)
	out := make([]*pb.PartitionError, len(offsets))
	for i, o := range offsets {
		out[i] = &pb.PartitionError{Topic: o.Topic, Partition: o.Partition, ErrorCode: code, ErrorMessage: msg}
	}
	return out
}

// checkCommit validates an offset commit against the group: a member of
// the current generation (its group.instance.id, if given, still its own),
// or (generation < 0) a group with no members, whatever member fields the
// request carries, the way Kafka's standalone consumers and admin clients
// commit (Kafka's ClassicGroup.validateOffsetCommit: an Empty group takes a
// commit at generation -1 before it looks at the member).
func checkCommit(g *group, groupID, memberID, instanceID string, generation int32) (*member, error) {
	if g == nil || len(g.members) == 0 && g.state != Dead {
		if generation < 0 {
			return nil, nil
		}
		who := memberID
		if who == "" {
			who = instanceID
		}
		return nil, errs.New(pb.ErrorCode_UNKNOWN_MEMBER_ID, "group %q has no members, so member %q of generation %d is unknown (commit with generation -1 outside a group)", groupID, who, generation)
	}
	m, err := checkMember(g, groupID, memberID, instanceID, generation)
	if err != nil {
		return nil, err
	}
	if g.state == CompletingRebalance {
		return nil, errs.New(pb.ErrorCode_REBALANCE_IN_PROGRESS, "group %q is waiting for its leader's assignment (generation %d); commit after SyncGroup", groupID, g.generation)
	}
	return m, nil
}

// offsetRecords builds the records of a commit or of a transactional
// commit. Both use the partition's type 0 key, as Kafka does: what makes a
// transactional one pending is its batch (transactional, with the
// producer), so its record and a plain commit of the same partition, or
// the partition's tombstone, supersede one another and compaction keeps
// only the latest (a key with the producer in it would keep one record per
// transaction forever, and outlive the group's tombstones).
func offsetRecords(groupID string, offsets []*pb.PartitionOffset, nowMs int64, txn *txnProducer) ([]record.Record, []offsetEntry, error) {
	recs := make([]record.Record, 0, len(offsets))
	entries := make([]offsetEntry, 0, len(offsets))
	for _, o := range offsets {
		if o.Topic == "" || !validKeyString(o.Topic) {
			return nil, nil, errs.New(pb.ErrorCode_INVALID_TOPIC_EXCEPTION, "topic name of %d bytes cannot be committed", len(o.Topic))
		}
		val, err := proto.Marshal(&pb.OffsetCommitValue{Offset: o.Offset, LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata, CommitTimestampMs: nowMs})
		if err != nil {
			return nil, nil, errs.New(pb.ErrorCode_UNKNOWN_SERVER_ERROR, "encode offset value: %v", err)
		}
		rec := record.Record{Key: offsetKey(groupID, o.Topic, o.Partition), Value: val}
		e := offsetEntry{offset: o.Offset, leaderEpoch: o.LeaderEpoch, metadata: o.Metadata, commitMs: nowMs}
		if txn != nil {
			rec.Headers = []record.RecordHeader{{Key: txnIDHeader, Value: []byte(txn.id)}}
			e.txnID = txn.id
		}
		recs = append(recs, rec)
		entries = append(entries, e)
	}
	return recs, entries, nil
}

// OffsetCommit stores committed offsets: written to the group's partition
// (acks=all), then visible to OffsetFetch. A valid commit of a member also
// counts as its heartbeat.
//
// The commit is validated when it is planned and again, under the shard
// lock, at the moment it is appended: a member fenced, removed or moved
// to another generation in between (or a change of the group written
// meanwhile, not yet in memory) refuses it with the error the check then
// gives, so the log never holds a commit its member could no longer make
// (Kafka validates and appends in one step of the partition's event
// loop). A change of the group in flight is waited for first.
//
// Errors per partition: NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
// COORDINATOR_NOT_AVAILABLE, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID,
// FENCED_INSTANCE_ID, REBALANCE_IN_PROGRESS, INVALID_COMMIT_OFFSET_SIZE.
func (c *Coordinator) OffsetCommit(ctx context.Context, req *pb.OffsetCommitRequest) (*pb.OffsetCommitResponse, error) {
	fail := func(err error) (*pb.OffsetCommitResponse, error) {
		return &pb.OffsetCommitResponse{Partitions: partitionErrors(req.Offsets, err)}, nil
	}
	validate := func(g *group) (*member, partitionCheck, error) {
		if g == nil && req.GenerationId >= 0 {
			// No group of that id (Kafka's validateOffsetCommit): from
			// version 9 on GROUP_ID_NOT_FOUND, which both protocols'
			// clients know; before, ILLEGAL_GENERATION as it always was.
			if req.BeforeMemberEpochs {
				return nil, nil, errs.New(pb.ErrorCode_ILLEGAL_GENERATION, "group %q has no members; generation %d is not current (commit with generation -1 outside a group)", req.GroupId, req.GenerationId)
			}
			return nil, nil, errs.New(pb.ErrorCode_GROUP_ID_NOT_FOUND, "Group %s not found.", req.GroupId)
		}
		if g != nil && g.cg != nil {
			check, err := checkConsumerCommit(g, req.MemberId, req.GenerationId, false, req.BeforeMemberEpochs, c.topicIDOf())
			return nil, check, err
		}
		m, err := checkCommit(g, req.GroupId, req.MemberId, req.GroupInstanceId, req.GenerationId)
		return m, nil, err
	}
	for {
		s, err := c.lockShardQuiet(ctx, req.GroupId)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return fail(err)
		}
		now := c.clk.Now()
		m, check, err := validate(s.groups[req.GroupId])
		if err != nil {
			s.mu.Unlock()
			return fail(err)
		}
		if m != nil {
			m.lastHeartbeat = now
		}
		// The partitions to commit, and the answers of those refused.
		offs, answers := req.Offsets, partitionErrors(req.Offsets, nil)
		if check != nil {
			offs = nil
			for i, o := range req.Offsets {
				if err := check(o.Topic, o.Partition); err != nil {
					answers[i].ErrorCode, answers[i].ErrorMessage = errs.Split(err)
					continue
				}
				offs = append(offs, o)
			}
		}
		if len(offs) == 0 {
			s.mu.Unlock()
			return &pb.OffsetCommitResponse{Partitions: answers}, nil
		}
		recs, entries, err := offsetRecords(req.GroupId, offs, now.UnixMilli(), nil)
		if err != nil {
			s.mu.Unlock()
			return fail(err)
		}
		g := s.group(req.GroupId, now, true)
		g.commitWrites++ // the group object outlives a conversion meanwhile
		s.mu.Unlock()
		recheck := func() error {
			if err := c.stillServing(s, req.GroupId); err != nil {
				return err
			}
			_, check, err := validate(s.groups[req.GroupId])
			if err != nil {
				return err
			}
			for _, o := range offs {
				if check == nil {
					break
				}
				if err := check(o.Topic, o.Partition); err != nil {
					return err
				}
			}
			return nil
		}
		first, err := c.w.write(ctx, s, recs, nil, recheck)
		s.mu.Lock()
		g.commitWrites--
		if err == errGroupBusy {
			s.mu.Unlock()
			continue // a change of the group was written meanwhile: validate against it
		}
		if err != nil {
			s.mu.Unlock()
			return fail(err)
		}
		for i, o := range offs {
			e := entries[i]
			e.logOffset = first + int64(i)
			g.applyCommitted(tp{o.Topic, o.Partition}, e)
		}
		s.mu.Unlock()
		return &pb.OffsetCommitResponse{Partitions: answers}, nil
	}
}

// errGroupBusy is a recheck's answer while a change of the group is being
// written: the caller waits for it and validates again.
var errGroupBusy = errors.New("a change of the group is being written")

// stillServing is the first part of a write's recheck (s.mu held): the
// shard still serves and no change of the group is in flight.
func (c *Coordinator) stillServing(s *shard, groupID string) error {
	if s.status != active {
		return errs.New(pb.ErrorCode_NOT_COORDINATOR, "broker %d stopped leading %s-%d", c.cfg.NodeID, c.cfg.Topic.Name, s.partition)
	}
	if s.lanes[groupID] != nil {
		return errGroupBusy
	}
	return nil
}

// topicIDOf looks a topic's id up in the current image ("" for none).
func (c *Coordinator) topicIDOf() func(string) string {
	im := c.image()
	return func(name string) string {
		if t := im.Topics[name]; t != nil {
			return t.ID
		}
		return ""
	}
}

// OffsetFetch answers committed offsets (-1 where none). With
// require_stable a partition with a transactional commit pending (written
// or being written, its marker not yet seen) answers
// UNSTABLE_OFFSET_COMMIT, naming the producer holding it; without it the
// last committed offset is answered. An empty partition list means every
// partition the group has an offset for.
func (c *Coordinator) OffsetFetch(ctx context.Context, req *pb.OffsetFetchRequest) (*pb.OffsetFetchResponse, error) {
	s, err := c.lockShard(req.GroupId)
	if err != nil {
		code, msg := errs.Split(err)
		return &pb.OffsetFetchResponse{ErrorCode: code, ErrorMessage: msg}, nil
	}
	defer s.mu.Unlock()
	g := s.groups[req.GroupId]
	if err := checkConsumerFetch(g, req.MemberId, req.MemberEpoch); err != nil {
		code, msg := errs.Split(err)
		return &pb.OffsetFetchResponse{ErrorCode: code, ErrorMessage: msg}, nil
	}
	var want []tp
	for _, p := range req.Partitions {
		want = append(want, tp{p.Topic, p.Partition})
	}
	if len(req.Partitions) == 0 && g != nil {
		seen := map[tp]bool{}
		for p := range g.offsets {
			seen[p] = true
		}
		if req.RequireStable {
			for p := range g.pending {
				seen[p] = true
			}
		}
		for p := range seen {
			want = append(want, p)
		}
		sort.Slice(want, func(i, j int) bool {
			if want[i].topic != want[j].topic {
				return want[i].topic < want[j].topic
			}
			return want[i].partition < want[j].partition
		})
	}
	now := c.clk.Now()
	resp := &pb.OffsetFetchResponse{}
	for _, p := range want {
		out := &pb.OffsetFetchPartition{Topic: p.topic, Partition: p.partition, Offset: -1, LeaderEpoch: -1}
		resp.Partitions = append(resp.Partitions, out)
		if g == nil {
			continue
		}
		if req.RequireStable && g.hasPending(p) {
			out.ErrorCode, out.ErrorMessage = pb.ErrorCode_UNSTABLE_OFFSET_COMMIT, pendingWhy(g, p, now)
			continue
		}
		if e, ok := g.offsets[p]; ok {
			out.Offset, out.LeaderEpoch, out.Metadata = e.offset, e.leaderEpoch, e.metadata
		}
	}
	return resp, nil
}

// pendingWhy names the transactions holding a partition's offset.
func pendingWhy(g *group, p tp, now time.Time) string {
	var holders []string
	for pid, e := range g.pending[p] {
		holders = append(holders, fmt.Sprintf("producerId=%d transactional.id=%q (offset %d, pending for %v)", pid, e.txnID, e.offset, now.Sub(time.UnixMilli(e.commitMs)).Round(time.Millisecond)))
	}
	sort.Strings(holders)
	if n := g.pendingWrites[p]; n > 0 {
		holders = append(holders, fmt.Sprintf("%d transactional commit(s) being written", n))
	}
	return fmt.Sprintf("group %q has a transactional offset commit of %s-%d waiting for its transaction's marker: %s", g.id, p.topic, p.partition, strings.Join(holders, ", "))
}

// checkTxnCommit validates a TxnOffsetCommit's group fields (KIP-447) by
// Kafka's rules for a classic group (its validateOffsetCommit with
// isTransactional): unlike OffsetCommit, the group's state does not
// matter, so a member of the current generation may commit while the
// group is CompletingRebalance (it got the generation from JoinGroup; the
// offsets are of partitions it read in the generation before, and they
// become visible only if its transaction commits).
//
//   - Generation < 0 and no group, or an Empty one: accepted, whatever
//     the member fields (nobody to fence; a "simple" group).
//   - Generation < 0, no member id, no group.instance.id: accepted in any
//     state (a producer that does not name its consumer, before KIP-447).
//   - Otherwise the request must name a current member (its
//     group.instance.id, if given, still its own: else FENCED_INSTANCE_ID)
//     of the current generation (else ILLEGAL_GENERATION).
//
// A group that does not exist answers ILLEGAL_GENERATION, whatever the
// member fields (Kafka's validateTransactionalOffsetCommit). A consumer
// group checks the member's epoch (checkConsumerCommit).
func checkTxnCommit(g *group, req *pb.TxnOffsetCommitRequest) error {
	if planted.On(planted.TxnOffsetCommitMemberRulesUnlikeKafka) {
		return checkTxnCommitBeforeKafkaRules(g, req)
	}
	if g != nil && g.cg != nil {
		_, err := checkConsumerCommit(g, req.MemberId, req.GenerationId, true, false, nil)
		return err
	}
	switch {
	case g != nil && g.state == Dead:
		// Kafka's answer; Strand's handlers do not reach a Dead group
		// (its shard is gone: NOT_COORDINATOR).
		return errs.New(pb.ErrorCode_COORDINATOR_NOT_AVAILABLE, "group %q is Dead on this coordinator", req.GroupId)
	case req.GenerationId < 0 && (g == nil || g.state == Empty):
		return nil
	case req.GenerationId < 0 && req.MemberId == "" && req.GroupInstanceId == "":
		return nil
	case g == nil:
		return errs.New(pb.ErrorCode_ILLEGAL_GENERATION, "group %q does not exist; generation %d is not current", req.GroupId, req.GenerationId)
	}
	if _, err := checkMember(g, req.GroupId, req.MemberId, req.GroupInstanceId, req.GenerationId); err != nil {
		return err
	}
	if planted.On(planted.TxnOffsetCommitRefusedWhileCompleting) && g.state == CompletingRebalance {
		return errs.New(pb.ErrorCode_REBALANCE_IN_PROGRESS, "group %q is waiting for its leader's assignment (generation %d)", g.id, g.generation)
	}
	return nil
}

// checkTxnCommitBeforeKafkaRules is checkTxnCommit as it was before it
// followed Kafka (planted.TxnOffsetCommitMemberRulesUnlikeKafka): a
// generation without a member id was enough, a member id with generation
// -1 was looked up even in an empty group, and CompletingRebalance was
// refused.
func checkTxnCommitBeforeKafkaRules(g *group, req *pb.TxnOffsetCommitRequest) error {
	if req.MemberId == "" && req.GroupInstanceId == "" && req.GenerationId < 0 {
		return nil
	}
	if req.MemberId == "" {
		if g == nil || req.GenerationId != g.generation {
			cur := int32(-1)
			if g != nil {
				cur = g.generation
			}
			return errs.New(pb.ErrorCode_ILLEGAL_GENERATION, "group %q is at generation %d, the transactional commit is for generation %d", req.GroupId, cur, req.GenerationId)
		}
		return nil
	}
	m, err := checkMember(g, req.GroupId, req.MemberId, "", req.GenerationId)
	if err != nil {
		return err
	}
	if req.GroupInstanceId != "" && m.instanceID != req.GroupInstanceId {
		return errs.New(pb.ErrorCode_UNKNOWN_MEMBER_ID, "member %q of group %q has group.instance.id %q, not %q", m.id, g.id, m.instanceID, req.GroupInstanceId)
	}
	if g.state == CompletingRebalance {
		return errs.New(pb.ErrorCode_REBALANCE_IN_PROGRESS, "group %q is waiting for its leader's assignment (generation %d)", g.id, g.generation)
	}
	return nil
}

// TxnOffsetCommit stages offsets in a transaction (KIP-447): the group's
// partition is first added to the transaction (so its coordinator will
// send this partition a marker; its errors are the answer), under a
// verification guard the write then presents (txn_verify.go: a marker in
// between refuses the write INVALID_TXN_STATE), then the offsets are
// written in a transactional batch of the producer. They stay
// pending — invisible to OffsetFetch, UNSTABLE_OFFSET_COMMIT with
// require_stable — until OnTxnMarker: COMMIT makes them the committed
// offsets, ABORT drops them.
//
// Errors: NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
// COORDINATOR_NOT_AVAILABLE, INVALID_PRODUCER_EPOCH, PRODUCER_FENCED,
// ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID,
// CONCURRENT_TRANSACTIONS, TRANSACTION_ABORTABLE, INVALID_TXN_STATE,
// INVALID_REQUEST.
func (c *Coordinator) TxnOffsetCommit(ctx context.Context, req *pb.TxnOffsetCommitRequest) (*pb.TxnOffsetCommitResponse, error) {
	fail := func(err error) (*pb.TxnOffsetCommitResponse, error) {
		code, msg := errs.Split(err)
		return &pb.TxnOffsetCommitResponse{ErrorCode: code, ErrorMessage: msg, Partitions: partitionErrors(req.Offsets, err)}, nil
	}
	if req.TransactionalId == "" || req.ProducerId < 0 || req.ProducerEpoch < 0 || req.ProducerEpoch > 1<<15-1 {
		return fail(errs.New(pb.ErrorCode_INVALID_REQUEST, "a transactional commit needs a transactional id, a producer id and an epoch (got %q, %d, %d)", req.TransactionalId, req.ProducerId, req.ProducerEpoch))
	}
	s, err := c.lockShard(req.GroupId)
	if err != nil {
		return fail(err)
	}
	err = checkTxnCommit(s.groups[req.GroupId], req)
	s.mu.Unlock()
	if err != nil {
		return fail(err)
	}
	if c.txn == nil {
		return fail(errs.New(pb.ErrorCode_COORDINATOR_NOT_AVAILABLE, "this broker has no transaction client to add %s-%d to transaction %q", c.cfg.Topic.Name, s.partition, req.TransactionalId))
	}
	txn := &txnProducer{pid: req.ProducerId, epoch: int16(req.ProducerEpoch), id: req.TransactionalId}
	if err := c.verifyTxnWrite(ctx, s, txn, req.TransactionVersion); err != nil {
		return fail(err)
	}
	now := c.clk.Now()
	recs, entries, err := offsetRecords(req.GroupId, req.Offsets, now.UnixMilli(), txn)
	if err != nil {
		return fail(err)
	}
	if len(recs) == 0 {
		return &pb.TxnOffsetCommitResponse{}, nil
	}

	s.mu.Lock()
	if s.status != active {
		s.mu.Unlock()
		return fail(errs.New(pb.ErrorCode_NOT_COORDINATOR, "broker %d stopped leading %s-%d", c.cfg.NodeID, c.cfg.Topic.Name, s.partition))
	}
	if err := checkTxnCommit(s.groups[req.GroupId], req); err != nil {
		s.mu.Unlock()
		return fail(err)
	}
	g := s.group(req.GroupId, now, true)
	for _, o := range req.Offsets {
		g.pendingWrites[tp{o.Topic, o.Partition}]++
	}
	w := s.watches[txn.pid]
	if w == nil {
		w = &txnWatch{}
		s.watches[txn.pid] = w
	}
	w.writers++
	s.mu.Unlock()

	// Checked again as it is appended (as OffsetCommit is).
	recheck := func() error {
		if err := c.stillServing(s, req.GroupId); err != nil {
			return err
		}
		return checkTxnCommit(s.groups[req.GroupId], req)
	}
	first, werr := c.w.write(ctx, s, recs, txn, recheck)
	for werr == errGroupBusy {
		var s2 *shard
		if s2, werr = c.lockShardQuiet(ctx, req.GroupId); werr != nil {
			break
		}
		s2.mu.Unlock()
		first, werr = c.w.write(ctx, s, recs, txn, recheck)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range req.Offsets {
		p := tp{o.Topic, o.Partition}
		if g.pendingWrites[p]--; g.pendingWrites[p] <= 0 {
			delete(g.pendingWrites, p)
		}
	}
	w.writers--
	if w.writers == 0 && s.watches[txn.pid] == w {
		delete(s.watches, txn.pid)
	}
	if werr != nil {
		return fail(werr)
	}
	for i, o := range req.Offsets {
		p, e := tp{o.Topic, o.Partition}, entries[i]
		e.logOffset = first + int64(i)
		switch {
		case !w.settled:
			s.addPending(g, p, txn.pid, e)
		case w.committed:
			// The marker came while this write waited for the ISR.
			g.applyCommitted(p, e)
		}
	}
	return &pb.TxnOffsetCommitResponse{Partitions: partitionErrors(req.Offsets, nil)}, nil
}
