package client

import (
	"context"
	"strconv"

	"google.golang.org/grpc"

	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// BrokerDefault names the cluster-wide default broker entity (Kafka's
// --entity-default, resource name "") where a broker id is expected.
const BrokerDefault int32 = -1

// BrokerConfigEntry is one broker config as DescribeBrokerConfigs reports
// it: the value in force, its source ("dynamic_broker",
// "dynamic_default_broker", "broker" for the node's static configuration,
// "default"), and every source that sets it, the one in force first.
type BrokerConfigEntry = pb.ConfigEntry

func brokerResource(id int32) *pb.ConfigResource {
	if id < 0 {
		return &pb.ConfigResource{Type: "broker"}
	}
	return &pb.ConfigResource{Type: "broker", Name: strconv.Itoa(int(id))}
}

// DescribeBrokerConfigs returns broker id's configs with their sources in
// Kafka's precedence (DYNAMIC_BROKER_CONFIG > DYNAMIC_DEFAULT_BROKER_CONFIG
// > STATIC_BROKER_CONFIG > DEFAULT_CONFIG); the call goes to that broker,
// which alone knows its static configuration. With BrokerDefault it
// returns the cluster-wide dynamic defaults only.
func (a *Admin) DescribeBrokerConfigs(ctx context.Context, id int32) ([]*BrokerConfigEntry, error) {
	req := &pb.DescribeConfigsRequest{Resources: []*pb.ConfigResource{brokerResource(id)}}
	var resp *pb.DescribeConfigsResponse
	call := func(ctx context.Context, cc *grpc.ClientConn) error {
		var err error
		resp, err = pb.NewAdminClient(cc).DescribeConfigs(ctx, req)
		return err
	}
	var err error
	if id < 0 {
		err = a.cl.any(ctx, call)
	} else {
		err = a.onBroker(ctx, id, call)
	}
	if err != nil {
		return nil, err
	}
	r := resp.Results[0]
	return r.Entries, errs.FromCode(r.ErrorCode, r.ErrorMessage)
}

// onBroker runs call on broker id's connection, refreshing the client's
// metadata first when it does not know the broker yet.
func (a *Admin) onBroker(ctx context.Context, id int32, call func(context.Context, *grpc.ClientConn) error) error {
	cc, err := a.cl.brokerConn(id)
	if err != nil {
		if rerr := a.cl.refresh(ctx, nil); rerr != nil {
			return rerr
		}
		if cc, err = a.cl.brokerConn(id); err != nil {
			return err
		}
	}
	rctx, cancel := context.WithTimeout(ctx, a.cl.cfg.requestTimeout)
	defer cancel()
	return call(rctx, cc)
}

// AlterBrokerConfigs sets and deletes dynamic configs of broker id, or
// with BrokerDefault the cluster-wide defaults (Kafka's
// IncrementalAlterConfigs SET and DELETE). Unknown names and bad values
// are INVALID_CONFIG; read-only (static) configs INVALID_REQUEST. A change
// takes effect on the running brokers as the metadata reaches them.
func (a *Admin) AlterBrokerConfigs(ctx context.Context, id int32, set map[string]string, del []string) error {
	return a.alterConfigs(ctx, &pb.IncrementalAlterConfigsRequest{Resource: brokerResource(id), Set: set, Delete: del})
}

// AlterTopicConfigsSetDelete sets and deletes a topic's configs in one
// alter (a deleted config goes back to the broker's default).
func (a *Admin) AlterTopicConfigsSetDelete(ctx context.Context, topic string, set map[string]string, del []string) error {
	return a.alterConfigs(ctx, &pb.IncrementalAlterConfigsRequest{Resource: &pb.ConfigResource{Type: "topic", Name: topic}, Set: set, Delete: del})
}

func (a *Admin) alterConfigs(ctx context.Context, req *pb.IncrementalAlterConfigsRequest) error {
	var resp *pb.IncrementalAlterConfigsResponse
	err := a.cl.any(ctx, func(ctx context.Context, cc *grpc.ClientConn) error {
		var err error
		resp, err = pb.NewAdminClient(cc).IncrementalAlterConfigs(ctx, req)
		if err == nil && controllerRoutingError(resp.ErrorCode) {
			return errs.FromCode(resp.ErrorCode, resp.ErrorMessage)
		}
		return err
	})
	if err != nil {
		return err
	}
	return errs.FromCode(resp.ErrorCode, resp.ErrorMessage)
}
