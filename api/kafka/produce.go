package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strand-io/strand/metadata"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

func init() {
	// Version 3 is the first to carry v2 record batches (the only format
	// Strand stores); 10 answers where a partition's leader went
	// (KIP-951); 12 is KIP-890's (a transactional producer that sends it
	// adds partitions implicitly); 13 names topics by id (KIP-516).
	register(kmsg.Produce, 3, 13, handleProduce)
}

// handleProduce appends in the order the request names partitions. An
// acks=0 request is not answered; acks=-1 is answered once its appends
// are replicated (the connection's writer waits, in order, while the
// reader goes on). From v13 topics are named by id: an id no topic has
// is answered UNKNOWN_TOPIC_ID, and the id goes with the name to the
// request layer, which writes only into the topic of that id (a topic
// deleted and created again under the name since is UNKNOWN_TOPIC_ID
// too), as Kafka 4.1 answers.
func handleProduce(ctx context.Context, c *Conn, r kmsg.Request) (kmsg.Response, error) {
	req := r.(*kmsg.ProduceRequest)
	preq := &pb.ProduceRequest{Acks: int32(req.Acks), TimeoutMs: req.TimeoutMillis}
	if req.TransactionID != nil {
		preq.TransactionalId = *req.TransactionID
	}
	if req.Version < 12 {
		// A transactional producer below KIP-890's version added its
		// partitions itself (AddPartitionsToTxn): the leader only checks.
		preq.TransactionVersion = 1
	}
	img := c.image()
	unknown := make([]bool, len(req.Topics)) // by the request's topics: an id no topic has
	for ti, t := range req.Topics {
		name, id := t.Topic, ""
		if req.Version >= 13 {
			name, id = topicName(img, t.TopicID), topicIDString(t.TopicID)
			if name == "" {
				unknown[ti] = true
				continue
			}
		}
		for _, p := range t.Partitions {
			preq.Partitions = append(preq.Partitions, &pb.PartitionRecords{Topic: name, TopicId: id, Partition: p.Partition, Records: p.Records})
		}
	}
	presp, wait := c.H.Produce(ctx, preq)
	if req.Acks == 0 {
		if wait != nil {
			wait.Wait(ctx)
		}
		return nil, nil
	}
	if wait == nil {
		return produceResponse(req, unknown, presp, c.image()), nil
	}
	resp := &deferred{Response: kmsg.NewPtrProduceResponse()}
	resp.wait = func(ctx context.Context) {
		wait.Wait(ctx)
		resp.Response = produceResponse(req, unknown, presp, c.image())
	}
	return resp, nil
}

// produceResponse answers every partition of req, in its order, from the
// request layer's answer (which has them in the same order, less the
// partitions of the topics unknown marks: ids no topic had). A topic is
// answered by what it was asked by: its name below v13, its id from v13.
func produceResponse(req *kmsg.ProduceRequest, unknown []bool, presp *pb.ProduceResponse, img *metadata.Image) *kmsg.ProduceResponse {
	resp := kmsg.NewPtrProduceResponse()
	var leaders []int32
	i := 0
	for ti, t := range req.Topics {
		rt := kmsg.NewProduceResponseTopic()
		if req.Version >= 13 {
			rt.TopicID = t.TopicID
		} else {
			rt.Topic = t.Topic
		}
		for _, p := range t.Partitions {
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition = p.Partition
			if unknown[ti] {
				rp.ErrorCode = code(pb.ErrorCode_UNKNOWN_TOPIC_ID)
				rp.ErrorMessage = errMsg("no topic has id " + topicIDString(t.TopicID))
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			pr := presp.Partitions[i]
			i++
			rp.ErrorCode, rp.ErrorMessage = answerCode(kmsg.Produce, req.Version, pr.ErrorCode), errMsg(pr.ErrorMessage)
			if req.Version >= 13 && pr.ErrorCode == pb.ErrorCode_TOPIC_AUTHORIZATION_FAILED {
				// Asked by id: the refusal does not tell the name (the
				// message names the topic), as Kafka's carries no message.
				rp.ErrorMessage = nil
			}
			rp.BaseOffset, rp.LogAppendTime, rp.LogStartOffset = pr.BaseOffset, pr.LogAppendTimeMs, pr.LogStartOffset
			for _, re := range pr.RecordErrors {
				er := kmsg.NewProduceResponseTopicPartitionErrorRecord()
				er.RelativeOffset, er.ErrorMessage = re.BatchIndex, errMsg(re.Message)
				rp.ErrorRecords = append(rp.ErrorRecords, er)
			}
			if req.Version >= 10 && pr.ErrorCode == pb.ErrorCode_NOT_LEADER_OR_FOLLOWER {
				// KIP-951: where the partition went, so the client need not
				// refresh its metadata first.
				if id, epoch := currentLeader(img, pr.Topic, pr.Partition, pr.CurrentLeaderId, pr.CurrentLeaderEpoch); id >= 0 {
					rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = id, epoch
					leaders = append(leaders, id)
				}
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	for _, b := range leaderEndpoints(img, leaders) {
		resp.Brokers = append(resp.Brokers, kmsg.ProduceResponseBroker{NodeID: b.NodeID, Host: b.Host, Port: b.Port, Rack: b.Rack})
	}
	return resp
}
