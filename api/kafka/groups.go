package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	pb "github.com/strand-io/strand/proto/strand/v1"
)

// The classic consumer-group protocol and the administrator's group
// requests, answered by the group coordinator through the request layer.
//
// Versions: every version kmsg knows of JoinGroup (0-9: a member gets
// its id at once, so the MEMBER_ID_REQUIRED round trip of v4+ is never
// needed; v9's SkipAssignment is always false), SyncGroup (0-5),
// Heartbeat (0-4), LeaveGroup (0-5, v3+ batched members), OffsetCommit
// (0-9: v10 names topics by id, which Strand's offsets are not kept by),
// OffsetFetch (0-9, v8+ several groups; v10 is by topic id),
// DescribeGroups (0-6), ListGroups (0-5), DeleteGroups (0-2) and
// OffsetDelete (0).
func init() {
	register(kmsg.JoinGroup, 0, 9, handleJoinGroup)
	register(kmsg.SyncGroup, 0, 5, handleSyncGroup)
	register(kmsg.Heartbeat, 0, 4, handleHeartbeat)
	register(kmsg.LeaveGroup, 0, 5, handleLeaveGroup)
	register(kmsg.OffsetCommit, 0, 9, handleOffsetCommit)
	register(kmsg.OffsetFetch, 0, 9, handleOffsetFetch)
	register(kmsg.DescribeGroups, 0, 6, handleDescribeGroups)
	register(kmsg.ListGroups, 0, 5, handleListGroups)
	register(kmsg.DeleteGroups, 0, 2, handleDeleteGroups)
	register(kmsg.OffsetDelete, 0, 0, handleOffsetDelete)
}

// noCoordinator is the answer of a node running no group coordinator.
var noCoordinator = code(pb.ErrorCode_COORDINATOR_NOT_AVAILABLE)

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// clientHost is where the connection comes from, as Kafka names a
// member's host ("/" and the address).
func clientHost(c *Conn) string {
	if c.nc == nil {
		return ""
	}
	host, _ := hostPort(c.nc.RemoteAddr().String())
	return "/" + host
}

// nullable is s as a nullable string: nil when empty.
func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func handleJoinGroup(ctx context.Context, c *Conn, r kmsg.Request) (kmsg.Response, error) {
	req := r.(*kmsg.JoinGroupRequest)
	resp := kmsg.NewPtrJoinGroupResponse()
	resp.MemberID, resp.Generation = req.MemberID, -1
	if c.H.Groups == nil {
		resp.ErrorCode = noCoordinator
		return resp, nil
	}
	preq := &pb.JoinGroupRequest{GroupId: req.Group, SessionTimeoutMs: req.SessionTimeoutMillis, RebalanceTimeoutMs: req.RebalanceTimeoutMillis,
		MemberId: req.MemberID, GroupInstanceId: str(req.InstanceID), ProtocolType: req.ProtocolType, ClientId: c.ClientID, ClientHost: clientHost(c)}
	if req.Version < 1 {
		preq.RebalanceTimeoutMs = req.SessionTimeoutMillis
	}
	for _, p := range req.Protocols {
		preq.Protocols = append(preq.Protocols, &pb.GroupProtocol{Name: p.Name, Metadata: p.Metadata})
	}
	presp, err := c.H.JoinGroup(ctx, preq)
	if err != nil {
		resp.ErrorCode, _ = splitCode(err)
		return resp, nil
	}
	resp.ErrorCode = code(presp.ErrorCode)
	resp.Generation, resp.LeaderID = presp.GenerationId, presp.Leader
	if presp.MemberId != "" {
		resp.MemberID = presp.MemberId
	}
	if presp.ErrorCode == pb.ErrorCode_NONE {
		pt, proto := req.ProtocolType, presp.ProtocolName
		resp.ProtocolType, resp.Protocol = &pt, &proto
	}
	for _, m := range presp.Members {
		jm := kmsg.NewJoinGroupResponseMember()
		jm.MemberID, jm.InstanceID, jm.ProtocolMetadata = m.MemberId, nullable(m.GroupInstanceId), m.Metadata
		resp.Members = append(resp.Members, jm)
	}
	return resp, nil
}

func handleSyncGroup(ctx context.Context, c *Conn, r kmsg.Request) (kmsg.Response, error) {
	req := r.(*kmsg.SyncGroupRequest)
	resp := kmsg.NewPtrSyncGroupResponse()
	if c.H.Groups == nil {
		resp.ErrorCode = noCoordinator
		return resp, nil
	}
	preq := &pb.SyncGroupRequest{GroupId: req.Group, GenerationId: req.Generation, MemberId: req.MemberID, GroupInstanceId: str(req.InstanceID)}
	for _, a := range req.GroupAssignment {
		preq.Assignments = append(preq.Assignments, &pb.GroupAssignment{MemberId: a.MemberID, Assignment: a.MemberAssignment})
	}
	presp, err := c.H.SyncGroup(ctx, preq)
	if err != nil {
		resp.ErrorCode, _ = splitCode(err)
		return resp, nil
	}
	resp.ErrorCode = code(presp.ErrorCode)
	resp.MemberAssignment = presp.Assignment
	if presp.ErrorCode == pb.ErrorCode_NONE {
		resp.ProtocolType = req.ProtocolType
		if presp.ProtocolName != "" {
			name := presp.ProtocolName
			resp.Protocol = &name
		} else {
			resp.Protocol = req.Protocol
		}
	}
	if resp.MemberAssignment == nil {
		resp.MemberAssignment = []byte{}
	}
	return resp, nil
}

func handleHeartbeat(ctx context.Context, c *Conn, r kmsg.Request) (kmsg.Response, error) {
	req := r.(*kmsg.HeartbeatRequest)
	resp := kmsg.NewPtrHeartbeatResponse()
	if c.H.Groups == nil {
		resp.ErrorCode = noCoordinator
		return resp, nil
	}
	presp, err := c.H.Heartbeat(ctx, &pb.HeartbeatRequest{GroupId: req.Group, GenerationId: req.Generation, MemberId: req.MemberID, GroupInstanceId: str(req.InstanceID)})
	if err != nil {
		resp.ErrorCode, _ = splitCode(err)
		return resp, nil
	}
	resp.ErrorCode = code(presp.ErrorCode)
	return resp, nil
}

// groupWide are the errors that concern the group, not one member: a
// batched LeaveGroup (v3+) answers them at the top, as Kafka does.
func groupWide(c pb.ErrorCode) bool {
	switch c {
	case pb.ErrorCode_NOT_COORDINATOR, pb.ErrorCode_COORDINATOR_LOAD_IN_PROGRESS, pb.ErrorCode_COORDINATOR_NOT_AVAILABLE,
		pb.ErrorCode_INVALID_GROUP_ID, pb.ErrorCode_INVALID_REQUEST:
		return true
	}
	return false
}

// handleLeaveGroup: one member (v0-2) or several (v3+), each left in turn.
func handleLeaveGroup(ctx context.Context, c *Conn, r kmsg.Request) (kmsg.Response, error) {
	req := r.(*kmsg.LeaveGroupRequest)
	resp := kmsg.NewPtrLeaveGroupResponse()
	if c.H.Groups == nil {
		resp.ErrorCode = noCoordinator
		return resp, nil
	}
	leave := func(memberID, instanceID string) (pb.ErrorCode, error) {
		presp, err := c.H.LeaveGroup(ctx, &pb.LeaveGroupRequest{GroupId: req.Group, MemberId: memberID, GroupInstanceId: instanceID})
		if err != nil {
			return 0, err
		}
		return presp.ErrorCode, nil
	}
	if req.Version < 3 {
		ec, err := leave(req.MemberID, "")
		if err != nil {
			resp.ErrorCode, _ = splitCode(err)
			return resp, nil
		}
		resp.ErrorCode = code(ec)
		return resp, nil
	}
	for _, m := range req.Members {
		ec, err := leave(m.MemberID, str(m.InstanceID))
		if err != nil {
			resp.ErrorCode, _ = splitCode(err)
			resp.Members = nil
			return resp, nil
		}
		if groupWide(ec) {
			resp.ErrorCode, resp.Members = code(ec), nil
			return resp, nil
		}
		lm := kmsg.NewLeaveGroupResponseMember()
		lm.MemberID, lm.InstanceID, lm.ErrorCode = m.MemberID, m.InstanceID, code(ec)
		resp.Members = append(resp.Members, lm)
	}
	return resp, nil
}

func handleOffsetCommit(ctx context.Context, c *Conn, r kmsg.Request) (kmsg.Response, error) {
	req := r.(*kmsg.OffsetCommitRequest)
	resp := kmsg.NewPtrOffsetCommitResponse()
	preq := &pb.OffsetCommitRequest{GroupId: req.Group, GenerationId: req.Generation, MemberId: req.MemberID, GroupInstanceId: str(req.InstanceID),
		BeforeMemberEpochs: req.Version < 9}
	if req.Version < 1 {
		preq.GenerationId = -1 // v0 commits outside any generation
	}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			epoch := p.LeaderEpoch
			if req.Version < 6 {
				epoch = -1
			}
			preq.Offsets = append(preq.Offsets, &pb.PartitionOffset{Topic: t.Topic, Partition: p.Partition, Offset: p.Offset, LeaderEpoch: epoch, Metadata: str(p.Metadata)})
		}
	}
	// Every partition's answer, in request order: the request layer
	// answers in order; a failure with no answer is every partition's.
	codes := make([]int16, len(preq.Offsets))
	switch {
	case c.H.Groups == nil:
		for i := range codes {
			codes[i] = noCoordinator
		}
	default:
		presp, err := c.H.OffsetCommit(ctx, preq)
		if err != nil {
			ec, _ := splitCode(err)
			for i := range codes {
				codes[i] = ec
			}
			break
		}
		for i := range codes {
			if i < len(presp.Partitions) {
				codes[i] = code(presp.Partitions[i].ErrorCode)
			} else {
				codes[i] = code(pb.ErrorCode_UNKNOWN_SERVER_ERROR)
			}
		}
	}
	i := 0
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, codes[i]
			i++
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// offsetFetchGroup is one group's committed offsets, grouped by topic
// (in the order answered), and the group's error.
type offsetFetchGroup struct {
	code   int16
	topics []kmsg.OffsetFetchResponseGroupTopic
}

// fetchGroupOffsets reads one group's offsets: topics nil for every
// partition the group has committed.
func fetchGroupOffsets(ctx context.Context, c *Conn, group string, topics map[string][]int32, order []string, all, stable bool, memberID string, memberEpoch int32) offsetFetchGroup {
	preq := &pb.OffsetFetchRequest{GroupId: group, RequireStable: stable, MemberId: memberID, MemberEpoch: memberEpoch}
	if !all {
		for _, t := range order {
			for _, p := range topics[t] {
				preq.Partitions = append(preq.Partitions, &pb.TopicPartition{Topic: t, Partition: p})
			}
		}
		if len(preq.Partitions) == 0 {
			// Nothing asked; Kafka still checks Describe on the group.
			code, _ := splitCode(c.H.AuthorizeOffsetFetch(ctx, group))
			return offsetFetchGroup{code: code}
		}
	}
	var out offsetFetchGroup
	if c.H.Groups == nil {
		out.code = noCoordinator
		return out
	}
	presp, err := c.H.OffsetFetch(ctx, preq)
	if err != nil {
		out.code, _ = splitCode(err)
		return out
	}
	out.code = code(presp.ErrorCode)
	at := map[string]int{}
	for _, p := range presp.Partitions {
		i, ok := at[p.Topic]
		if !ok {
			i = len(out.topics)
			at[p.Topic] = i
			t := kmsg.NewOffsetFetchResponseGroupTopic()
			t.Topic = p.Topic
			out.topics = append(out.topics, t)
		}
		rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
		md := p.Metadata
		rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata, rp.ErrorCode = p.Partition, p.Offset, p.LeaderEpoch, &md, code(p.ErrorCode)
		out.topics[i].Partitions = append(out.topics[i].Partitions, rp)
	}
	return out
}

// handleOffsetFetch: one group (v0-7) or several (v8+); a null topic list
// (v2+) asks for every partition the group has committed.
func handleOffsetFetch(ctx context.Context, c *Conn, r kmsg.Request) (kmsg.Response, error) {
	req := r.(*kmsg.OffsetFetchRequest)
	resp := kmsg.NewPtrOffsetFetchResponse()
	if req.Version >= 8 {
		for _, g := range req.Groups {
			topics, order := map[string][]int32{}, []string(nil)
			for _, t := range g.Topics {
				if _, ok := topics[t.Topic]; !ok {
					order = append(order, t.Topic)
				}
				topics[t.Topic] = append(topics[t.Topic], t.Partitions...)
			}
			memberID, memberEpoch := "", int32(-1)
			if req.Version >= 9 {
				memberID, memberEpoch = str(g.MemberID), g.MemberEpoch
			}
			got := fetchGroupOffsets(ctx, c, g.Group, topics, order, g.Topics == nil, req.RequireStable, memberID, memberEpoch)
			rg := kmsg.NewOffsetFetchResponseGroup()
			rg.Group, rg.ErrorCode, rg.Topics = g.Group, got.code, got.topics
			resp.Groups = append(resp.Groups, rg)
		}
		return resp, nil
	}
	topics, order := map[string][]int32{}, []string(nil)
	for _, t := range req.Topics {
		if _, ok := topics[t.Topic]; !ok {
			order = append(order, t.Topic)
		}
		topics[t.Topic] = append(topics[t.Topic], t.Partitions...)
	}
	got := fetchGroupOffsets(ctx, c, req.Group, topics, order, req.Topics == nil && req.Version >= 2, req.Version >= 7 && req.RequireStable, "", -1)
	resp.ErrorCode = got.code
	for _, t := range got.topics {
		rt := kmsg.NewOffsetFetchResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetFetchResponseTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata, rp.ErrorCode = p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if req.Version < 2 && got.code != 0 {
		// No top-level error before v2: every partition asked carries it.
		resp.Topics = nil
		for _, t := range order {
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = t
			for _, p := range topics[t] {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				empty := ""
				rp.Partition, rp.Offset, rp.Metadata, rp.ErrorCode = p, -1, &empty, got.code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
	return resp, nil
}

// handleDescribeGroups: from v6 a group that does not exist is
// GROUP_ID_NOT_FOUND (KIP-1043); before, it is reported Dead. A group of
// the consumer protocol is not described here, as in Kafka (Dead, and
// GROUP_ID_NOT_FOUND from v6): ConsumerGroupDescribe describes it.
func handleDescribeGroups(ctx context.Context, c *Conn, r kmsg.Request) (kmsg.Response, error) {
	req := r.(*kmsg.DescribeGroupsRequest)
	resp := kmsg.NewPtrDescribeGroupsResponse()
	var groups []*pb.GroupDescription
	if c.H.Groups != nil {
		presp, err := c.H.DescribeGroups(ctx, &pb.DescribeGroupsRequest{GroupIds: req.Groups})
		if err != nil {
			ec, msg := splitCode(err)
			for _, id := range req.Groups {
				g := kmsg.NewDescribeGroupsResponseGroup()
				g.Group, g.ErrorCode, g.ErrorMessage = id, ec, msg
				resp.Groups = append(resp.Groups, g)
			}
			return resp, nil
		}
		groups = presp.Groups
	}
	for i, id := range req.Groups {
		g := kmsg.NewDescribeGroupsResponseGroup()
		g.Group = id
		if i >= len(groups) {
			g.ErrorCode = noCoordinator
			resp.Groups = append(resp.Groups, g)
			continue
		}
		d := groups[i]
		if d.GroupType == "consumer" {
			// As Kafka: DescribeGroups describes classic groups only.
			g.State = "Dead"
			if req.Version >= 6 {
				g.ErrorCode = code(pb.ErrorCode_GROUP_ID_NOT_FOUND)
				g.ErrorMessage = errMsg("Group " + id + " is not a classic group.")
			}
			resp.Groups = append(resp.Groups, g)
			continue
		}
		g.ErrorCode, g.State, g.ProtocolType, g.Protocol = code(d.ErrorCode), d.State, d.ProtocolType, d.Protocol
		if d.ErrorCode == pb.ErrorCode_NONE && d.State == "Dead" && req.Version >= 6 {
			g.ErrorCode = code(pb.ErrorCode_GROUP_ID_NOT_FOUND)
			g.ErrorMessage = errMsg("group '" + id + "' does not exist")
		}
		for _, m := range d.Members {
			gm := kmsg.NewDescribeGroupsResponseGroupMember()
			gm.MemberID, gm.InstanceID, gm.ClientID, gm.ClientHost = m.MemberId, nullable(m.GroupInstanceId), m.ClientId, m.ClientHost
			gm.ProtocolMetadata, gm.MemberAssignment = nonNilBytes(m.Metadata), nonNilBytes(m.Assignment)
			g.Members = append(g.Members, gm)
		}
		resp.Groups = append(resp.Groups, g)
	}
	return resp, nil
}

func nonNilBytes(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

func handleListGroups(ctx context.Context, c *Conn, r kmsg.Request) (kmsg.Response, error) {
	req := r.(*kmsg.ListGroupsRequest)
	resp := kmsg.NewPtrListGroupsResponse()
	presp, err := c.H.ListGroups(ctx, &pb.ListGroupsRequest{StatesFilter: req.StatesFilter, TypesFilter: req.TypesFilter})
	if err != nil {
		resp.ErrorCode, _ = splitCode(err)
		return resp, nil
	}
	resp.ErrorCode = code(presp.ErrorCode)
	for _, g := range presp.Groups {
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group, lg.ProtocolType, lg.GroupState, lg.GroupType = g.GroupId, g.ProtocolType, g.State, g.GroupType
		resp.Groups = append(resp.Groups, lg)
	}
	return resp, nil
}

func handleDeleteGroups(ctx context.Context, c *Conn, r kmsg.Request) (kmsg.Response, error) {
	req := r.(*kmsg.DeleteGroupsRequest)
	resp := kmsg.NewPtrDeleteGroupsResponse()
	presp, err := c.H.DeleteGroups(ctx, &pb.DeleteGroupsRequest{GroupIds: req.Groups})
	for i, id := range req.Groups {
		g := kmsg.NewDeleteGroupsResponseGroup()
		g.Group = id
		switch {
		case err != nil:
			g.ErrorCode, g.ErrorMessage = splitCode(err)
		case i < len(presp.Groups):
			g.ErrorCode, g.ErrorMessage = code(presp.Groups[i].ErrorCode), errMsg(presp.Groups[i].ErrorMessage)
		default:
			g.ErrorCode = code(pb.ErrorCode_UNKNOWN_SERVER_ERROR)
		}
		resp.Groups = append(resp.Groups, g)
	}
	return resp, nil
}

func handleOffsetDelete(ctx context.Context, c *Conn, r kmsg.Request) (kmsg.Response, error) {
	req := r.(*kmsg.OffsetDeleteRequest)
	resp := kmsg.NewPtrOffsetDeleteResponse()
	preq := &pb.OffsetDeleteRequest{GroupId: req.Group}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			preq.Partitions = append(preq.Partitions, &pb.TopicPartition{Topic: t.Topic, Partition: p.Partition})
		}
	}
	presp, err := c.H.OffsetDelete(ctx, preq)
	if err != nil {
		resp.ErrorCode, _ = splitCode(err)
		return resp, nil
	}
	resp.ErrorCode = code(presp.ErrorCode)
	if presp.ErrorCode != pb.ErrorCode_NONE {
		return resp, nil
	}
	i := 0
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition = p.Partition
			if i < len(presp.Partitions) {
				rp.ErrorCode = code(presp.Partitions[i].ErrorCode)
			}
			i++
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}
