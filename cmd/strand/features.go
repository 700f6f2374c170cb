package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/internal/wire"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// dial connects to one node. Calls refused with a Kafka error code (a node
// that is still starting answers BROKER_NOT_AVAILABLE) fail with that
// *errs.Error.
func dial(addr string) (*grpc.ClientConn, error) {
	opts := append([]grpc.DialOption{grpc.WithTransportCredentials(security.transportCreds()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64 << 20))}, wire.ErrorCodeDialOptions()...)
	return grpc.NewClient("passthrough:///"+addr, opts...)
}

// anyBroker calls fn against the bootstrap brokers in turn until one
// answers. After a round in which some broker failed retriably (it was
// unreachable, or still starting), it tries again with backoff until ctx
// ends; otherwise it returns the last error.
func anyBroker(ctx context.Context, addrs []string, fn func(*grpc.ClientConn) error) error {
	var last error = errors.New("no bootstrap servers")
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		retriable := false
		for _, a := range addrs {
			cc, err := dial(a)
			if err != nil {
				last = err
				continue
			}
			err = fn(cc)
			cc.Close()
			if err == nil {
				return nil
			}
			last = err
			retriable = retriable || errs.IsRetriable(err) || status.Code(err) == codes.Unavailable
		}
		if !retriable {
			return last
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (last error: %w)", ctx.Err(), last)
		case <-t.C:
		}
	}
}

func describeFeatures(ctx context.Context, addrs []string) ([]*pb.Feature, error) {
	var out []*pb.Feature
	err := anyBroker(ctx, addrs, func(cc *grpc.ClientConn) error {
		r, err := pb.NewMetadataClient(cc).DescribeFeatures(ctx, &pb.DescribeFeaturesRequest{})
		if err == nil {
			out = r.Features
		}
		return err
	})
	return out, err
}

// updateFeatures sends one UpdateFeatures to the cluster (any broker
// forwards it to the active controller). A refusal comes back as an
// *errs.Error with the controller's message.
func updateFeatures(ctx context.Context, addrs []string, req *pb.UpdateFeaturesRequest) error {
	return anyBroker(ctx, addrs, func(cc *grpc.ClientConn) error {
		r, err := pb.NewAdminClient(cc).UpdateFeatures(ctx, req)
		if err != nil {
			return err
		}
		if r.ErrorCode != pb.ErrorCode_NONE {
			return errs.FromCode(r.ErrorCode, r.ErrorMessage)
		}
		return nil
	})
}
