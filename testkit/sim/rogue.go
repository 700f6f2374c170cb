package sim

import (
	"context"
	"math/rand/v2"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/strand-io/strand/client"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
)

// rogue is a hostile client in the run: every so often it looks up the
// open transactions of a partition of the workload's source topic
// (DescribeProducers) and produces a forged ABORT marker for one of them
// at its producer's epoch, as if it were the transaction coordinator.
// Only the coordinator's WriteTxnMarkers may write markers: a leader must
// refuse a client's control batch (INVALID_RECORD). Were one accepted,
// the checker would see the victim's committed records hidden from
// read_committed (its COMMIT comes after a forged ABORT), so the rogue
// needs no oracle of its own.
type rogue struct {
	s      *simulator
	topic  string
	parts  int32
	rng    *rand.Rand
	tried  int
	forged int // markers a leader accepted
}

func (r *rogue) run(ctx context.Context) {
	adm, err := client.NewAdmin(r.s.c.ClientOpts(client.RequestTimeout(2 * time.Second))...)
	if err != nil {
		return
	}
	defer adm.Close()
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(200+r.rng.IntN(800)) * time.Millisecond):
		}
		r.once(ctx, adm)
	}
}

func (r *rogue) once(ctx context.Context, adm *client.Admin) {
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	tp := client.TopicPartition{Topic: r.topic, Partition: int32(r.rng.IntN(int(r.parts)))}
	st, err := adm.DescribeProducers(cctx, tp, -1)
	if err != nil || st == nil {
		return
	}
	var open []*pb.ProducerState
	for _, p := range st.ActiveProducers {
		if p.CurrentTxnStartOffset >= 0 {
			open = append(open, p)
		}
	}
	if len(open) == 0 {
		return
	}
	victim := open[r.rng.IntN(len(open))]
	part := r.s.c.Partition(tp.Topic, tp.Partition)
	if part == nil || part.Leader < 0 {
		return
	}
	addr := r.s.c.Member(part.Leader).Cfg.Listen
	dial := r.s.c.Net.Dialer("rogue")
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) { return dial(ctx, a) }))
	if err != nil {
		return
	}
	defer conn.Close()
	stream, err := pb.NewProducerClient(conn).Produce(cctx)
	if err != nil {
		return
	}
	batch := record.BuildControlBatch(victim.ProducerId, int16(victim.ProducerEpoch), record.ControlAbort, victim.CoordinatorEpoch, time.Now().UnixMilli())
	r.tried++
	if err := stream.Send(&pb.ProduceRequest{CorrelationId: 1, Acks: -1, TimeoutMs: 2000,
		Partitions: []*pb.PartitionRecords{{Topic: tp.Topic, Partition: tp.Partition, Records: batch}}}); err != nil {
		return
	}
	resp, err := stream.Recv()
	if err != nil || len(resp.Partitions) == 0 {
		return
	}
	if c := resp.Partitions[0].ErrorCode; c == pb.ErrorCode_NONE {
		r.forged++
		r.s.tr.add(part.Leader, "rogue: forged ABORT for producer %d epoch %d on %s ACCEPTED at offset %d", victim.ProducerId, victim.ProducerEpoch, tp, resp.Partitions[0].BaseOffset)
	} else {
		r.s.tr.add(0, "rogue: forged ABORT for producer %d on %s refused %v", victim.ProducerId, tp, c)
	}
}
