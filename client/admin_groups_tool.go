package client

import (
	"context"
	"fmt"
	"sort"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// The administrator's view of consumer groups (what kafka-consumer-groups
// does): list, describe, read and set committed offsets outside a group,
// delete groups and offsets. Each group call goes to the group's
// coordinator; a coordinator that moved or is loading
// (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
// COORDINATOR_NOT_AVAILABLE) or cannot be reached is found again and
// asked again until ctx ends, when the error matches ctx's error and the
// last failure. Other answers are returned.

// GroupListing is one group of ListGroups.
type GroupListing struct {
	Group        string
	ProtocolType string
	State        string
	Coordinator  int32
}

// ListGroups asks every broker for the groups it coordinates, those in
// states only when states is not empty (Kafka's names: "Stable", "Empty",
// …), sorted by id. A broker still loading a __consumer_offsets
// partition (COORDINATOR_LOAD_IN_PROGRESS: its list would miss that
// partition's groups) is asked again until ctx ends.
func (a *Admin) ListGroups(ctx context.Context, states ...string) ([]GroupListing, error) {
	md, err := a.Metadata(ctx, false)
	if err != nil {
		return nil, err
	}
	var out []GroupListing
	for _, b := range md.Brokers {
		if b.Fenced {
			continue
		}
		cc, err := a.cl.conn(b.Address)
		if err != nil {
			return nil, err
		}
		var r *pb.ListGroupsResponse
		err = retry(ctx, &a.cfg, func() error {
			rctx, cancel := context.WithTimeout(ctx, a.cfg.requestTimeout)
			defer cancel()
			var err error
			if r, err = pb.NewGroupsClient(cc).ListGroups(rctx, &pb.ListGroupsRequest{StatesFilter: states}); err == nil {
				err = errs.FromCode(r.ErrorCode, r.ErrorMessage)
			}
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("ListGroups on broker %d: %w", b.NodeId, err)
		}
		for _, g := range r.Groups {
			out = append(out, GroupListing{Group: g.GroupId, ProtocolType: g.ProtocolType, State: g.State, Coordinator: b.NodeId})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	return out, nil
}

// GroupMemberDescription is one member of a described group.
type GroupMemberDescription struct {
	MemberID   string
	InstanceID string
	ClientID   string
	ClientHost string
	// Assignment is the member's partitions in the current generation,
	// decoded from the consumer protocol (this SDK's or Kafka's: their
	// assignments share the layout); nil when it could not be decoded.
	Assignment []TopicPartition
	// Isolation is the isolation.level the member advertised in its
	// JoinGroup metadata; IsolationKnown is false for members that do not
	// advertise one (Kafka's consumer protocol has no such field).
	Isolation      IsolationLevel
	IsolationKnown bool
	// Metadata is the member's JoinGroup metadata of the group's protocol.
	Metadata []byte
}

// GroupDescription is DescribeGroups' answer for one group. A group that
// does not exist has State "Dead" and no members.
type GroupDescription struct {
	Group        string
	State        string
	ProtocolType string
	// Protocol is the assignment strategy the members agreed on.
	Protocol    string
	Generation  int32
	Coordinator *pb.Coordinator
	Members     []GroupMemberDescription
}

// DescribeGroup asks a group's coordinator for its state and members.
func (a *Admin) DescribeGroup(ctx context.Context, group string) (*GroupDescription, error) {
	var d *pb.GroupDescription
	co, err := a.groupCall(ctx, group, "DescribeGroups", func(ctx context.Context, gc pb.GroupsClient) error {
		r, err := gc.DescribeGroups(ctx, &pb.DescribeGroupsRequest{GroupIds: []string{group}})
		if err != nil {
			return err
		}
		if len(r.Groups) != 1 {
			return fmt.Errorf("DescribeGroups answered %d groups", len(r.Groups))
		}
		d = r.Groups[0]
		return errs.FromCode(d.ErrorCode, "")
	})
	if err != nil {
		return nil, err
	}
	out := &GroupDescription{Group: d.GroupId, State: d.State, ProtocolType: d.ProtocolType, Protocol: d.Protocol, Generation: d.GenerationId, Coordinator: co}
	for _, m := range d.Members {
		md := GroupMemberDescription{MemberID: m.MemberId, InstanceID: m.GroupInstanceId, ClientID: m.ClientId, ClientHost: m.ClientHost, Metadata: m.Metadata}
		if d.ProtocolType == "consumer" {
			if tps, err := decodeAssignment(m.Assignment); err == nil {
				md.Assignment = sortTPList(tps)
			}
			md.Isolation, md.IsolationKnown = MemberIsolation(d.ProtocolType, m.Metadata)
		}
		out.Members = append(out.Members, md)
	}
	return out, nil
}

// GroupOffsets returns a group's committed offsets: of tps, or of every
// partition it has committed when tps is empty. Unlike CommittedOffsets it
// does not wait for pending transactional commits (requireStable false,
// as kafka-consumer-groups reads them).
func (a *Admin) GroupOffsets(ctx context.Context, group string, tps []TopicPartition) (map[TopicPartition]int64, error) {
	req := &pb.OffsetFetchRequest{GroupId: group}
	for _, tp := range tps {
		req.Partitions = append(req.Partitions, &pb.TopicPartition{Topic: tp.Topic, Partition: tp.Partition})
	}
	out := map[TopicPartition]int64{}
	_, err := a.groupCall(ctx, group, "OffsetFetch", func(ctx context.Context, gc pb.GroupsClient) error {
		r, err := gc.OffsetFetch(ctx, req)
		if err != nil {
			return err
		}
		if err := errs.FromCode(r.ErrorCode, r.ErrorMessage); err != nil {
			return err
		}
		clear(out)
		for _, p := range r.Partitions {
			if err := errs.FromCode(p.ErrorCode, p.ErrorMessage); err != nil {
				return err
			}
			if p.Offset >= 0 {
				out[TopicPartition{p.Topic, p.Partition}] = p.Offset
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("offsets of group %s: %w", group, err)
	}
	return out, nil
}

// SetGroupOffsets commits offsets for a group from outside it (generation
// -1, no member id), as kafka-consumer-groups --reset-offsets does. The
// coordinator accepts it only while the group has no members (else
// UNKNOWN_MEMBER_ID or ILLEGAL_GENERATION). The offsets go in requests of
// at most MaxOffsetCommitPartitions partitions each (a reset of a group
// reading many partitions is not one unbounded request). The map has each
// partition's result: nil, or its refusal; err is a failure to get an
// answer for some request (the partitions of the requests answered before
// it have their results in the map).
func (a *Admin) SetGroupOffsets(ctx context.Context, group string, offsets map[TopicPartition]int64) (map[TopicPartition]error, error) {
	out := make(map[TopicPartition]error, len(offsets))
	for _, chunk := range chunkOffsets(offsets, MaxOffsetCommitPartitions) {
		req := &pb.OffsetCommitRequest{GroupId: group, GenerationId: -1, Offsets: chunk}
		res := map[TopicPartition]error{}
		_, err := a.groupCall(ctx, group, "OffsetCommit", func(ctx context.Context, gc pb.GroupsClient) error {
			r, err := gc.OffsetCommit(ctx, req)
			if err != nil {
				return err
			}
			clear(res)
			for _, p := range r.Partitions {
				e := errs.FromCode(p.ErrorCode, p.ErrorMessage)
				if coordinatorMoved(e) {
					return e // the whole request goes to the coordinator again
				}
				res[TopicPartition{p.Topic, p.Partition}] = e
			}
			return nil
		})
		if err != nil {
			return out, fmt.Errorf("commit offsets of group %s: %w", group, err)
		}
		for _, p := range chunk {
			tp := TopicPartition{p.Topic, p.Partition}
			e, ok := res[tp]
			if !ok {
				e = fmt.Errorf("OffsetCommit of group %s did not answer %s-%d", group, tp.Topic, tp.Partition)
			}
			out[tp] = e
		}
	}
	return out, nil
}

// MaxOffsetCommitPartitions is the most partitions SetGroupOffsets puts in
// one OffsetCommit request.
const MaxOffsetCommitPartitions = 1000

// chunkOffsets orders offsets by topic and partition and cuts them into
// requests' entries of at most n partitions each.
func chunkOffsets(offsets map[TopicPartition]int64, n int) [][]*pb.PartitionOffset {
	if n <= 0 {
		n = MaxOffsetCommitPartitions
	}
	tps := make([]TopicPartition, 0, len(offsets))
	for tp := range offsets {
		tps = append(tps, tp)
	}
	sort.Slice(tps, func(i, j int) bool {
		if tps[i].Topic != tps[j].Topic {
			return tps[i].Topic < tps[j].Topic
		}
		return tps[i].Partition < tps[j].Partition
	})
	var out [][]*pb.PartitionOffset
	for len(tps) > 0 {
		k := min(n, len(tps))
		chunk := make([]*pb.PartitionOffset, 0, k)
		for _, tp := range tps[:k] {
			chunk = append(chunk, &pb.PartitionOffset{Topic: tp.Topic, Partition: tp.Partition, Offset: offsets[tp], LeaderEpoch: -1})
		}
		out = append(out, chunk)
		tps = tps[k:]
	}
	return out
}

// DeleteGroups deletes groups with no members, and their offsets. The
// answer has each group's result: nil, or its code (GROUP_ID_NOT_FOUND,
// NON_EMPTY_GROUP, …); err is a failure to get an answer for some group.
func (a *Admin) DeleteGroups(ctx context.Context, groups ...string) (map[string]error, error) {
	out := map[string]error{}
	for _, g := range groups {
		var res error
		_, err := a.groupCall(ctx, g, "DeleteGroups", func(ctx context.Context, gc pb.GroupsClient) error {
			r, err := gc.DeleteGroups(ctx, &pb.DeleteGroupsRequest{GroupIds: []string{g}})
			if err != nil {
				return err
			}
			if len(r.Groups) != 1 {
				return fmt.Errorf("DeleteGroups answered %d groups", len(r.Groups))
			}
			res = errs.FromCode(r.Groups[0].ErrorCode, r.Groups[0].ErrorMessage)
			if coordinatorMoved(res) {
				return res
			}
			return nil
		})
		if err != nil {
			return out, fmt.Errorf("delete group %s: %w", g, err)
		}
		out[g] = res
	}
	return out, nil
}

// DeleteGroupOffsets deletes a group's committed offsets of tps
// (OffsetDelete). err is the group's answer (GROUP_ID_NOT_FOUND,
// NON_EMPTY_GROUP, …) or a failure to get one; the map has each
// partition's result: nil, GROUP_SUBSCRIBED_TO_TOPIC (a member still reads
// the topic) or UNKNOWN_TOPIC_OR_PARTITION.
func (a *Admin) DeleteGroupOffsets(ctx context.Context, group string, tps []TopicPartition) (map[TopicPartition]error, error) {
	req := &pb.OffsetDeleteRequest{GroupId: group}
	for _, tp := range tps {
		req.Partitions = append(req.Partitions, &pb.TopicPartition{Topic: tp.Topic, Partition: tp.Partition})
	}
	out := map[TopicPartition]error{}
	_, err := a.groupCall(ctx, group, "OffsetDelete", func(ctx context.Context, gc pb.GroupsClient) error {
		r, err := gc.OffsetDelete(ctx, req)
		if err != nil {
			return err
		}
		if err := errs.FromCode(r.ErrorCode, r.ErrorMessage); err != nil {
			return err
		}
		clear(out)
		for _, p := range r.Partitions {
			out[TopicPartition{p.Topic, p.Partition}] = errs.FromCode(p.ErrorCode, p.ErrorMessage)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("delete offsets of group %s: %w", group, err)
	}
	return out, nil
}

// coordinatorMoved: the group's coordinator must be found again.
func coordinatorMoved(err error) bool {
	switch errs.CodeOf(err) {
	case pb.ErrorCode_NOT_COORDINATOR, pb.ErrorCode_COORDINATOR_LOAD_IN_PROGRESS, pb.ErrorCode_COORDINATOR_NOT_AVAILABLE:
		return true
	}
	return false
}

// groupCall runs fn against group's coordinator, finding it again and
// retrying while fn's error is retriable (coordinatorMoved, another
// retriable code, an unreachable broker) until ctx ends. It returns the
// coordinator that answered.
func (a *Admin) groupCall(ctx context.Context, group, what string, fn func(ctx context.Context, gc pb.GroupsClient) error) (*pb.Coordinator, error) {
	var last error
	for attempt := 0; ; attempt++ {
		co, err := a.FindCoordinator(ctx, pb.CoordinatorType_GROUP, group)
		if err == nil {
			var cc *grpc.ClientConn
			if cc, err = a.cl.conn(co.Address); err == nil {
				rctx, cancel := context.WithTimeout(ctx, a.cfg.requestTimeout)
				err = fn(rctx, pb.NewGroupsClient(cc))
				cancel()
				if err == nil {
					return co, nil
				}
			}
		}
		last = keepLast(last, err)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s: %w", what, expired(ctx, last))
		}
		if !errs.IsRetriable(err) && !ctxOnly(err) && status.Code(err) != codes.Unavailable {
			return nil, err
		}
		if a.cfg.sleep(ctx, backoff(&a.cfg, attempt)) != nil {
			return nil, fmt.Errorf("%s: %w", what, expired(ctx, last))
		}
	}
}
