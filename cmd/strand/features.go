package main

import (
	"context"
	"errors"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/strand-io/strand/proto/strand/v1"
)

func dial(addr string) (*grpc.ClientConn, error) {
	return grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
}

// anyBroker calls fn against the first bootstrap broker that answers.
func anyBroker(ctx context.Context, addrs []string, fn func(*grpc.ClientConn) error) error {
	var last error = errors.New("no bootstrap servers")
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
	}
	return last
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
