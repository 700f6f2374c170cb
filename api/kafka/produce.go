package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	pb "github.com/strand-io/strand/proto/strand/v1"
)

func init() {
	// Version 3 is the first to carry v2 record batches (the only format
	// Strand stores); 12 is KIP-890's (a transactional producer that
	// sends it adds partitions implicitly). 13 names topics by id.
	register(kmsg.Produce, 3, 12, handleProduce)
}

// handleProduce appends in the order the request names partitions. An
// acks=0 request is not answered; acks=-1 is answered once its appends
// are replicated (the connection's writer waits, in order, while the
// reader goes on).
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
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			preq.Partitions = append(preq.Partitions, &pb.PartitionRecords{Topic: t.Topic, Partition: p.Partition, Records: p.Records})
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
		return produceResponse(req, presp), nil
	}
	resp := &deferred{Response: kmsg.NewPtrProduceResponse()}
	resp.wait = func(ctx context.Context) {
		wait.Wait(ctx)
		resp.Response = produceResponse(req, presp)
	}
	return resp, nil
}

// produceResponse answers every partition of req, in its order, from the
// request layer's answer (which has them in the same order).
func produceResponse(req *kmsg.ProduceRequest, presp *pb.ProduceResponse) *kmsg.ProduceResponse {
	resp := kmsg.NewPtrProduceResponse()
	i := 0
	for _, t := range req.Topics {
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic = t.Topic
		for range t.Partitions {
			pr := presp.Partitions[i]
			i++
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition = pr.Partition
			rp.ErrorCode, rp.ErrorMessage = answerCode(kmsg.Produce, req.Version, pr.ErrorCode), errMsg(pr.ErrorMessage)
			rp.BaseOffset, rp.LogAppendTime, rp.LogStartOffset = pr.BaseOffset, pr.LogAppendTimeMs, pr.LogStartOffset
			for _, re := range pr.RecordErrors {
				er := kmsg.NewProduceResponseTopicPartitionErrorRecord()
				er.RelativeOffset, er.ErrorMessage = re.BatchIndex, errMsg(re.Message)
				rp.ErrorRecords = append(rp.ErrorRecords, er)
			}
			if pr.ErrorCode == pb.ErrorCode_NOT_LEADER_OR_FOLLOWER && pr.CurrentLeaderId >= 0 {
				// KIP-951: where the partition went, so the client need not
				// refresh its metadata first.
				rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = pr.CurrentLeaderId, pr.CurrentLeaderEpoch
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
