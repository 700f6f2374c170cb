package client

import (
	"context"
	"fmt"
	"sort"

	"google.golang.org/grpc"

	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// TransactionListing is one row of ListTransactions.
type TransactionListing struct {
	TransactionalID string
	Coordinator     int32
	ProducerID      int64
	State           string
}

// ListTransactionsFilter narrows ListTransactions (Kafka's filters).
type ListTransactionsFilter struct {
	States      []string
	ProducerIDs []int64
	// DurationMs keeps transactions running longer than this.
	DurationMs int64
	// Pattern is a regular expression on the transactional id.
	Pattern string
}

// ListTransactions asks every broker for the transactional ids it
// coordinates. A broker that answers a retriable code
// (COORDINATOR_LOAD_IN_PROGRESS: its list would miss what it is loading)
// is asked again until ctx ends; then the error matches ctx's error and
// that code. Other codes are returned.
func (a *Admin) ListTransactions(ctx context.Context, f ListTransactionsFilter) ([]TransactionListing, error) {
	md, err := a.Metadata(ctx, false)
	if err != nil {
		return nil, err
	}
	var out []TransactionListing
	for _, b := range md.Brokers {
		if b.Fenced {
			continue
		}
		cc, err := a.cl.conn(b.Address)
		if err != nil {
			return nil, err
		}
		// A broker answers one page at a time (its answer stays under the
		// message limit however many ids it coordinates): ask for the next
		// page after the last id of this one while it says there is more.
		after := ""
		for {
			var r *pb.ListTransactionsResponse
			err = retry(ctx, &a.cfg, func() error {
				rctx, cancel := context.WithTimeout(ctx, a.cfg.requestTimeout)
				defer cancel()
				var err error
				r, err = pb.NewTransactionsClient(cc).ListTransactions(rctx, &pb.ListTransactionsRequest{StateFilters: f.States, ProducerIdFilters: f.ProducerIDs,
					DurationFilterMs: f.DurationMs, TransactionalIdPattern: f.Pattern, AfterTransactionalId: after})
				if err == nil {
					// COORDINATOR_LOAD_IN_PROGRESS: the broker is still loading
					// a partition of __transaction_state, so its list would
					// miss what that partition holds.
					err = errs.FromCode(r.ErrorCode, "")
				}
				return err
			})
			if err != nil {
				return nil, fmt.Errorf("ListTransactions on broker %d: %w", b.NodeId, err)
			}
			for _, t := range r.Transactions {
				out = append(out, TransactionListing{TransactionalID: t.TransactionalId, Coordinator: r.CoordinatorId, ProducerID: t.ProducerId, State: t.State})
			}
			if !r.More || len(r.Transactions) == 0 {
				break
			}
			after = r.Transactions[len(r.Transactions)-1].TransactionalId
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].TransactionalID < out[j].TransactionalID })
	return out, nil
}

// FindCoordinator locates the coordinator of a transactional id or group.
// Its answer's code is returned as it is, retriable or not
// (COORDINATOR_NOT_AVAILABLE while the internal topic is being created).
func (a *Admin) FindCoordinator(ctx context.Context, typ pb.CoordinatorType, key string) (*pb.Coordinator, error) {
	var co *pb.Coordinator
	err := a.cl.any(ctx, func(ctx context.Context, cc *grpc.ClientConn) error {
		r, err := pb.NewMetadataClient(cc).FindCoordinator(ctx, &pb.FindCoordinatorRequest{KeyType: typ, Keys: []string{key}})
		if err == nil {
			co = r.Coordinators[0]
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return co, errs.FromCode(co.ErrorCode, co.ErrorMessage)
}

// DescribeTransaction asks a transactional id's coordinator for its state.
// FindCoordinator's errors, and the coordinator's answer for the id
// (TRANSACTIONAL_ID_NOT_FOUND, NOT_COORDINATOR, …), are returned.
func (a *Admin) DescribeTransaction(ctx context.Context, id string) (*pb.TransactionState, error) {
	co, err := a.FindCoordinator(ctx, pb.CoordinatorType_TRANSACTION, id)
	if err != nil {
		return nil, err
	}
	cc, err := a.cl.conn(co.Address)
	if err != nil {
		return nil, err
	}
	var r *pb.DescribeTransactionsResponse
	err = retry(ctx, &a.cfg, func() error {
		var err error
		r, err = pb.NewTransactionsClient(cc).DescribeTransactions(ctx, &pb.DescribeTransactionsRequest{TransactionalIds: []string{id}})
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(r.Transactions) != 1 {
		return nil, fmt.Errorf("DescribeTransactions answered %d transactions", len(r.Transactions))
	}
	st := r.Transactions[0]
	return st, errs.FromCode(st.ErrorCode, st.ErrorMessage)
}

// DescribeProducers lists a partition's active producers, asking its leader
// (or broker, when >= 0). The partition's answer (NOT_LEADER_OR_FOLLOWER,
// UNKNOWN_TOPIC_OR_PARTITION, TOPIC_AUTHORIZATION_FAILED, …) is returned
// with it. Looking the leader up, the topic's error in the metadata fails
// the call as Kafka's admin client fails it (TOPIC_AUTHORIZATION_FAILED
// for a topic the principal may not describe, UNKNOWN_TOPIC_OR_PARTITION,
// …); LEADER_NOT_AVAILABLE when the partition has no leader.
func (a *Admin) DescribeProducers(ctx context.Context, tp TopicPartition, broker int32) (*pb.PartitionProducers, error) {
	if broker < 0 {
		md, err := a.Metadata(ctx, true, tp.Topic)
		if err != nil {
			return nil, err
		}
		for _, t := range md.Topics {
			switch t.ErrorCode {
			case pb.ErrorCode_NONE, pb.ErrorCode_LEADER_NOT_AVAILABLE, pb.ErrorCode_BROKER_NOT_AVAILABLE:
			default:
				if t.Name == tp.Topic {
					return nil, errs.New(t.ErrorCode, "the metadata of %s: %s", tp, t.ErrorMessage)
				}
			}
		}
		broker, _ = a.cl.leader(tp)
		if broker < 0 {
			return nil, errs.New(pb.ErrorCode_LEADER_NOT_AVAILABLE, "%s has no leader", tp)
		}
	} else if _, err := a.Metadata(ctx, true); err != nil {
		return nil, err
	}
	cc, err := a.cl.brokerConn(broker)
	if err != nil {
		return nil, err
	}
	var r *pb.DescribeProducersResponse
	err = retry(ctx, &a.cfg, func() error {
		var err error
		r, err = pb.NewTransactionsClient(cc).DescribeProducers(ctx, &pb.DescribeProducersRequest{Partitions: []*pb.TopicPartition{{Topic: tp.Topic, Partition: tp.Partition}}})
		return err
	})
	if err != nil {
		return nil, err
	}
	pp := r.Partitions[0]
	return pp, errs.FromCode(pp.ErrorCode, pp.ErrorMessage)
}

// AbortTransaction aborts the open transaction that starts at startOffset
// in tp, straight at the partition's leader (Transactions.AbortTransaction,
// kafka-transactions abort): it works even when the transaction's
// coordinator is unavailable — the cure for a hanging transaction that pins
// the LSO. The leader writes an ABORT marker at the producer's current
// epoch, and refuses (INVALID_TXN_STATE) a transaction that is not open
// there, starts elsewhere, or has been open on it for less than
// transaction.max.timeout.ms (its coordinator may still end it; aborting
// it here would tear it). DescribeProducers' errors, a plain error when no
// transaction starts at startOffset, and the leader's answer are returned.
func (a *Admin) AbortTransaction(ctx context.Context, tp TopicPartition, startOffset int64) error {
	pp, err := a.DescribeProducers(ctx, tp, -1)
	if err != nil {
		return err
	}
	var target *pb.ProducerState
	for _, p := range pp.ActiveProducers {
		if p.CurrentTxnStartOffset == startOffset {
			target = p
		}
	}
	if target == nil {
		return fmt.Errorf("could not find any open transactions starting at offset %d on partition %s", startOffset, tp)
	}
	leader, _ := a.cl.leader(tp)
	cc, err := a.cl.brokerConn(leader)
	if err != nil {
		return err
	}
	r, err := pb.NewTransactionsClient(cc).AbortTransaction(ctx, &pb.AbortTransactionRequest{
		Topic: tp.Topic, Partition: tp.Partition, ProducerId: target.ProducerId, ProducerEpoch: target.ProducerEpoch, StartOffset: startOffset,
	})
	if err != nil {
		return rpcErr(ctx, err)
	}
	return errs.FromCode(r.ErrorCode, r.ErrorMessage)
}
