package kafka

import (
	"context"
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"

	pb "github.com/strand-io/strand/proto/strand/v1"
)

// Cluster membership, forwarded by the request layer to the
// active controller: DescribeQuorum 0-2 (the metadata log is Kafka's
// __cluster_metadata partition 0), AddRaftVoter 0-1, RemoveRaftVoter 0,
// UnregisterBroker 0. Strand keeps no directory ids: replica directory ids
// are zero, and a request's voter directory id is not checked.
func init() {
	register(kmsg.DescribeQuorum, 0, 2, handleDescribeQuorum)
	register(kmsg.AddRaftVoter, 0, 1, handleAddRaftVoter)
	register(kmsg.RemoveRaftVoter, 0, 0, handleRemoveRaftVoter)
	register(kmsg.UnregisterBroker, 0, 0, handleUnregisterBroker)
}

// metadataTopic is the name Kafka's DescribeQuorum gives the metadata log.
const metadataTopic = "__cluster_metadata"

func handleDescribeQuorum(ctx context.Context, c *Conn, r kmsg.Request) (kmsg.Response, error) {
	req := r.(*kmsg.DescribeQuorumRequest)
	resp := kmsg.NewPtrDescribeQuorumResponse()
	asked := false
	for _, t := range req.Topics {
		rt := kmsg.NewDescribeQuorumResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewDescribeQuorumResponseTopicPartition()
			rp.Partition = p.Partition
			if t.Topic != metadataTopic || p.Partition != 0 {
				rp.ErrorCode = code(pb.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION)
				rp.ErrorMessage = errMsg("the controller quorum's log is " + metadataTopic + " partition 0")
				rp.LeaderID = -1
			} else {
				asked = true
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if !asked {
		return resp, nil
	}
	q, err := c.H.DescribeQuorum(ctx, &pb.QuorumStatusRequest{})
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = splitCode(err)
		return resp, nil
	}
	if q.ErrorCode != pb.ErrorCode_NONE {
		resp.ErrorCode, resp.ErrorMessage = code(q.ErrorCode), errMsg(q.ErrorMessage)
		return resp, nil
	}
	states := func(rs []*pb.QuorumReplica) []kmsg.DescribeQuorumResponseTopicPartitionReplicaState {
		var out []kmsg.DescribeQuorumResponseTopicPartitionReplicaState
		for _, x := range rs {
			s := kmsg.NewDescribeQuorumResponseTopicPartitionReplicaState()
			s.ReplicaID, s.LogEndOffset = x.NodeId, x.LogEndOffset
			s.LastFetchTimestamp, s.LastCaughtUpTimestamp = x.LastFetchTimestampMs, x.LastCaughtUpTimestampMs
			out = append(out, s)
		}
		return out
	}
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			rp := &resp.Topics[i].Partitions[j]
			if rp.ErrorCode != 0 {
				continue
			}
			rp.LeaderID, rp.LeaderEpoch, rp.HighWatermark = q.LeaderId, q.LeaderEpoch, q.HighWatermark
			rp.CurrentVoters, rp.Observers = states(q.Voters), states(q.Observers)
		}
	}
	for _, v := range q.Voters {
		host, port, err := net.SplitHostPort(v.Address)
		if err != nil {
			continue
		}
		pn, _ := strconv.ParseUint(port, 10, 16)
		n := kmsg.NewDescribeQuorumResponseNode()
		n.NodeID = v.NodeId
		l := kmsg.NewDescribeQuorumResponseNodeListener()
		l.Name, l.Host, l.Port = "CONTROLLER", host, uint16(pn)
		n.Listeners = append(n.Listeners, l)
		resp.Nodes = append(resp.Nodes, n)
	}
	return resp, nil
}

// clusterMismatch: a request naming another cluster is
// INCONSISTENT_CLUSTER_ID, as Kafka answers it.
func clusterMismatch(c *Conn, id *string) bool {
	return id != nil && *id != "" && c.H.Repl != nil && *id != c.H.Repl.Image().ClusterID
}

func handleAddRaftVoter(ctx context.Context, c *Conn, r kmsg.Request) (kmsg.Response, error) {
	req := r.(*kmsg.AddRaftVoterRequest)
	resp := kmsg.NewPtrAddRaftVoterResponse()
	if clusterMismatch(c, req.ClusterID) {
		resp.ErrorCode, resp.ErrorMessage = code(pb.ErrorCode_INCONSISTENT_CLUSTER_ID), errMsg("cluster id "+*req.ClusterID+" is not this cluster's")
		return resp, nil
	}
	if len(req.Listeners) == 0 {
		resp.ErrorCode, resp.ErrorMessage = code(pb.ErrorCode_INVALID_REQUEST), errMsg("AddRaftVoter needs the new voter's controller listener")
		return resp, nil
	}
	l := req.Listeners[0]
	ar, err := c.H.AddVoter(ctx, &pb.AddVoterRequest{NodeId: req.VoterID, Address: net.JoinHostPort(l.Host, strconv.Itoa(int(l.Port)))})
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = splitCode(err)
		return resp, nil
	}
	resp.ErrorCode, resp.ErrorMessage = code(ar.ErrorCode), errMsg(ar.ErrorMessage)
	return resp, nil
}

func handleRemoveRaftVoter(ctx context.Context, c *Conn, r kmsg.Request) (kmsg.Response, error) {
	req := r.(*kmsg.RemoveRaftVoterRequest)
	resp := kmsg.NewPtrRemoveRaftVoterResponse()
	if clusterMismatch(c, req.ClusterID) {
		resp.ErrorCode, resp.ErrorMessage = code(pb.ErrorCode_INCONSISTENT_CLUSTER_ID), errMsg("cluster id "+*req.ClusterID+" is not this cluster's")
		return resp, nil
	}
	rr, err := c.H.RemoveVoter(ctx, &pb.RemoveVoterRequest{NodeId: req.VoterID})
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = splitCode(err)
		return resp, nil
	}
	resp.ErrorCode, resp.ErrorMessage = code(rr.ErrorCode), errMsg(rr.ErrorMessage)
	return resp, nil
}

func handleUnregisterBroker(ctx context.Context, c *Conn, r kmsg.Request) (kmsg.Response, error) {
	req := r.(*kmsg.UnregisterBrokerRequest)
	resp := kmsg.NewPtrUnregisterBrokerResponse()
	ur, err := c.H.UnregisterBroker(ctx, &pb.UnregisterBrokerRequest{BrokerId: req.BrokerID})
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = splitCode(err)
		return resp, nil
	}
	resp.ErrorCode, resp.ErrorMessage = code(ur.ErrorCode), errMsg(ur.ErrorMessage)
	return resp, nil
}
