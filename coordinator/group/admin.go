package group

import (
	"context"
	"encoding/binary"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
)

// The administrator's group requests: ListGroups, DeleteGroups and
// OffsetDelete. Deletions are tombstones (null values) in the group's
// __consumer_offsets partition, written with acks=all before memory
// changes; a reload applies them the same way (load.go): an offset
// tombstone removes the offset, a group tombstone removes a group left
// with no committed offsets.

// groupTypeClassic is the type ListGroups reports for a group of the
// classic protocol (groupTypeConsumer: of the consumer protocol).
const groupTypeClassic = "classic"

// ListGroups lists the groups of every __consumer_offsets partition this
// coordinator leads and has loaded, sorted by id, filtered by state and
// type ("classic" or "consumer"; Kafka's names, compared without case; an
// empty filter takes all). A partition still loading makes the answer
// COORDINATOR_LOAD_IN_PROGRESS, with the groups of the others.
func (c *Coordinator) ListGroups(ctx context.Context, req *pb.ListGroupsRequest) (*pb.ListGroupsResponse, error) {
	c.mu.Lock()
	shards := make([]*shard, 0, len(c.shards))
	for _, s := range c.shards {
		shards = append(shards, s)
	}
	c.mu.Unlock()
	match := func(filter []string, v string) bool {
		if len(filter) == 0 {
			return true
		}
		for _, f := range filter {
			if strings.EqualFold(f, v) {
				return true
			}
		}
		return false
	}
	resp := &pb.ListGroupsResponse{}
	var stillLoading []string
	for _, s := range shards {
		s.mu.Lock()
		switch s.status {
		case loading:
			stillLoading = append(stillLoading, fmt.Sprint(s.partition))
		case active:
			for _, g := range s.groups {
				typ, state, protocolType := groupTypeClassic, g.state.String(), g.protocolType
				if g.cg != nil {
					typ, state, protocolType = groupTypeConsumer, g.cg.state(), "consumer"
				}
				if g.state == Dead || !match(req.StatesFilter, state) || !match(req.TypesFilter, typ) {
					continue
				}
				resp.Groups = append(resp.Groups, &pb.ListedGroup{GroupId: g.id, ProtocolType: protocolType, State: state, GroupType: typ})
			}
		}
		s.mu.Unlock()
	}
	sort.Slice(resp.Groups, func(i, j int) bool { return resp.Groups[i].GroupId < resp.Groups[j].GroupId })
	if len(stillLoading) > 0 {
		sort.Strings(stillLoading)
		resp.ErrorCode = pb.ErrorCode_COORDINATOR_LOAD_IN_PROGRESS
		resp.ErrorMessage = fmt.Sprintf("broker %d is still loading %s partitions %s", c.cfg.NodeID, c.cfg.Topic.Name, strings.Join(stillLoading, ","))
	}
	return resp, nil
}

// DeleteGroups removes groups that have no members, with their committed
// offsets: one tombstone per offset and one for the group, then the group
// is gone (DescribeGroups reports it Dead, ListGroups leaves it out).
// Offsets committed while the tombstones were written stay, and so does
// the group then (empty), as a reload would have it.
//
// Errors per group: NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
// INVALID_GROUP_ID, GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP,
// COORDINATOR_NOT_AVAILABLE (the write failed).
func (c *Coordinator) DeleteGroups(ctx context.Context, req *pb.DeleteGroupsRequest) (*pb.DeleteGroupsResponse, error) {
	resp := &pb.DeleteGroupsResponse{}
	for _, id := range req.GroupIds {
		r := &pb.GroupResult{GroupId: id}
		resp.Groups = append(resp.Groups, r)
		if err := c.deleteGroup(ctx, id); err != nil {
			r.ErrorCode, r.ErrorMessage = errs.Split(err)
		}
	}
	return resp, nil
}

func (c *Coordinator) deleteGroup(ctx context.Context, id string) error {
	return c.change(ctx, id, func(s *shard, now time.Time) (*groupChange, error) {
		g := s.groups[id]
		switch {
		case g == nil || g.state == Dead:
			return nil, errs.New(pb.ErrorCode_GROUP_ID_NOT_FOUND, "group %q does not exist", id)
		case g.cg != nil && len(g.cg.members) > 0:
			return nil, errs.New(pb.ErrorCode_NON_EMPTY_GROUP, "consumer group %q has %d members (state %s); only a group with none can be deleted", id, len(g.cg.members), g.cg.state())
		case g.cg == nil && (len(g.members) > 0 || g.state != Empty):
			return nil, errs.New(pb.ErrorCode_NON_EMPTY_GROUP, "group %q has %d members (state %s); only a group with none can be deleted", id, len(g.members), g.state)
		case g.deleting:
			return nil, errs.New(pb.ErrorCode_COORDINATOR_NOT_AVAILABLE, "group %q is already being deleted; retry", id)
		}
		g.deleting = true
		// Every offset goes, committed or pending (Kafka's
		// deleteAllOffsets): one tombstone per partition drops both.
		parts := make([]tp, 0, len(g.offsets)+len(g.pending))
		for p := range g.offsets {
			parts = append(parts, p)
		}
		for p := range g.pending {
			if _, ok := g.offsets[p]; !ok {
				parts = append(parts, p)
			}
		}
		sortTPs(parts)
		recs := make([]record.Record, 0, len(parts)+1)
		for _, p := range parts {
			recs = append(recs, record.Record{Key: offsetKey(id, p.topic, p.partition)})
		}
		groupRecs := []record.Record{{Key: groupKey(id)}}
		if g.cg != nil {
			groupRecs = g.cg.groupTombstones(id, nil)
		}
		recs = append(recs, groupRecs...)
		ch := &groupChange{recs: recs, noReplay: true}
		ch.done = func(err error) {
			g.deleting = false
			if err != nil || s.status != active {
				return // on success while no longer active: whoever loads the partition applies the tombstones
			}
			// As a reload applies the tombstones: each removes its
			// partition's offsets unless written after it.
			for i, p := range parts {
				g.dropOffset(p, ch.first+int64(i))
			}
			if g.cg != nil {
				c.replayConsumer(s, groupRecs, c.clk.Now())
				if s.groups[id] == g && g.cg == nil && g.holdsOffsets() {
					return // offsets committed meanwhile keep the group, empty
				}
			}
			if s.groups[id] == g && !g.holdsOffsets() && len(g.members) == 0 && g.state == Empty && g.cg == nil {
				delete(s.groups, id)
				c.setState(g, Dead, c.clk.Now())
			}
		}
		return ch, nil
	})
}

// OffsetDelete removes committed offsets of a group. A group with members
// keeps the offsets of the topics they consume: with the "consumer"
// protocol those partitions answer GROUP_SUBSCRIBED_TO_TOPIC (the others
// are deleted); under another protocol, whose subscriptions Strand cannot
// read, the whole request answers NON_EMPTY_GROUP. A partition with no
// committed offset answers NONE.
//
// Errors: NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, INVALID_GROUP_ID,
// GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, COORDINATOR_NOT_AVAILABLE; per
// partition NONE or GROUP_SUBSCRIBED_TO_TOPIC.
func (c *Coordinator) OffsetDelete(ctx context.Context, req *pb.OffsetDeleteRequest) (*pb.OffsetDeleteResponse, error) {
	fail := func(err error) (*pb.OffsetDeleteResponse, error) {
		code, msg := errs.Split(err)
		return &pb.OffsetDeleteResponse{ErrorCode: code, ErrorMessage: msg}, nil
	}
	s, err := c.lockShard(req.GroupId)
	if err != nil {
		return fail(err)
	}
	g := s.groups[req.GroupId]
	if g == nil || g.state == Dead {
		s.mu.Unlock()
		return fail(errs.New(pb.ErrorCode_GROUP_ID_NOT_FOUND, "group %q does not exist", req.GroupId))
	}
	var subscribed map[string]bool
	if g.cg != nil {
		// A consumer group keeps the offsets of the topics it subscribes
		// to (by name, or through a regular expression).
		subscribed = g.cg.subscribedTopics("", nil, g.cg.regexes)
	} else if len(g.members) > 0 {
		if g.protocolType != "consumer" {
			pt := g.protocolType
			s.mu.Unlock()
			return fail(errs.New(pb.ErrorCode_NON_EMPTY_GROUP, "group %q has members of protocol type %q; its offsets can be deleted once it is empty", req.GroupId, pt))
		}
		subscribed = map[string]bool{}
		for _, m := range g.members {
			for _, t := range subscriptionTopics(m.metadataFor(g.protocol)) {
				subscribed[t] = true
			}
		}
	}
	resp := &pb.OffsetDeleteResponse{}
	var recs []record.Record
	var del []tp
	for _, p := range req.Partitions {
		out := &pb.PartitionError{Topic: p.Topic, Partition: p.Partition}
		resp.Partitions = append(resp.Partitions, out)
		if subscribed[p.Topic] {
			out.ErrorCode = pb.ErrorCode_GROUP_SUBSCRIBED_TO_TOPIC
			out.ErrorMessage = fmt.Sprintf("a member of group %q consumes topic %q", req.GroupId, p.Topic)
			continue
		}
		if _, ok := g.offsets[tp{p.Topic, p.Partition}]; ok {
			del = append(del, tp{p.Topic, p.Partition})
			recs = append(recs, record.Record{Key: offsetKey(req.GroupId, p.Topic, p.Partition)})
		}
	}
	s.mu.Unlock()
	if len(recs) == 0 {
		return resp, nil
	}
	first, err := c.w.write(ctx, s, recs, nil, nil)
	if err != nil {
		return fail(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, p := range del {
		g.dropOffset(p, first+int64(i))
	}
	return resp, nil
}

// subscriptionTopics reads the topics of a "consumer" protocol
// subscription (Kafka's ConsumerProtocolSubscription: an int16 version,
// then an int32 count of int16-length topic names; the fields after them
// do not matter here). What does not decode names no topic.
func subscriptionTopics(b []byte) []string {
	if len(b) < 6 {
		return nil
	}
	n := int(int32(binary.BigEndian.Uint32(b[2:6])))
	b = b[6:]
	var out []string
	for i := 0; i < n; i++ {
		if len(b) < 2 {
			return out
		}
		l := int(int16(binary.BigEndian.Uint16(b)))
		if l < 0 || len(b) < 2+l {
			return out
		}
		out = append(out, string(b[2:2+l]))
		b = b[2+l:]
	}
	return out
}

func sortTPs(ps []tp) {
	sort.Slice(ps, func(i, j int) bool {
		if ps[i].topic != ps[j].topic {
			return ps[i].topic < ps[j].topic
		}
		return ps[i].partition < ps[j].partition
	})
}
