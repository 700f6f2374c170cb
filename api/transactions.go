package api

import (
	"context"

	"github.com/strand-io/strand/internal/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// idempotentOnly serves InitProducerId for idempotent producers when no
// transaction coordinator runs here.
type idempotentOnly struct {
	pb.UnimplementedTransactionsServer
	d *Deps
}

// InitProducerId hands out a fresh producer id (epoch 0) from this broker's block.
func (s *idempotentOnly) InitProducerId(ctx context.Context, req *pb.InitProducerIdRequest) (*pb.InitProducerIdResponse, error) {
	if req.TransactionalId != "" {
		return &pb.InitProducerIdResponse{ErrorCode: pb.ErrorCode_COORDINATOR_NOT_AVAILABLE, ErrorMessage: "this node runs no transaction coordinator", ProducerId: -1, ProducerEpoch: -1}, nil
	}
	return InitIdempotent(ctx, s.d, req), nil
}

// InitIdempotent answers InitProducerId without a transactional id.
func InitIdempotent(ctx context.Context, d *Deps, req *pb.InitProducerIdRequest) *pb.InitProducerIdResponse {
	id, err := d.PIDs.Next(ctx)
	if err != nil {
		code, msg := errs.Split(err)
		return &pb.InitProducerIdResponse{ErrorCode: code, ErrorMessage: msg, ProducerId: -1, ProducerEpoch: -1}
	}
	return &pb.InitProducerIdResponse{ProducerId: id, ProducerEpoch: 0}
}
