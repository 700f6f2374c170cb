package api

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/internal/planted"
	"github.com/strand-io/strand/internal/wire"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// TestStartupGateLetsHealthThrough: a closed gate (it stands on the client
// listeners) refuses every call but the health service's with a retriable
// BROKER_NOT_AVAILABLE, including those only peers send, which a client
// listener does not serve anyway; an open gate passes everything.
func TestStartupGateLetsHealthThrough(t *testing.T) {
	g := NewStartupGate(func() string { return "node 7 is starting: waiting to register" })
	client := []struct {
		method string
		req    any
	}{
		{pb.Metadata_Metadata_FullMethodName, &pb.MetadataRequest{}},
		{pb.Admin_CreateTopics_FullMethodName, &pb.CreateTopicsRequest{}},
		{pb.Producer_Produce_FullMethodName, nil},
		{pb.Consumer_Fetch_FullMethodName, &pb.FetchRequest{ReplicaId: -1}},
		{pb.Consumer_ListOffsets_FullMethodName, &pb.ListOffsetsRequest{}},
		{pb.Consumer_OffsetForLeaderEpoch_FullMethodName, &pb.OffsetForLeaderEpochRequest{ReplicaId: -1}},
		{pb.Transactions_InitProducerId_FullMethodName, &pb.InitProducerIdRequest{}},
		{pb.Transactions_EndTxn_FullMethodName, &pb.EndTxnRequest{}},
		{pb.Groups_JoinGroup_FullMethodName, &pb.JoinGroupRequest{}},
		{"/strand.v1.Unknown/Call", nil},
		{pb.Controller_RegisterBroker_FullMethodName, &pb.RegisterBrokerRequest{}},
		{pb.Controller_BrokerHeartbeat_FullMethodName, &pb.BrokerHeartbeatRequest{}},
		{pb.Controller_AllocateProducerIds_FullMethodName, &pb.AllocateProducerIdsRequest{}},
		{pb.Controller_FetchMetadata_FullMethodName, nil},
		{pb.Controller_CreateTopics_FullMethodName, &pb.CreateTopicsRequest{}},
		{pb.Consumer_Fetch_FullMethodName, &pb.FetchRequest{ReplicaId: 2}},
		{pb.Consumer_OffsetForLeaderEpoch_FullMethodName, &pb.OffsetForLeaderEpochRequest{ReplicaId: 0}},
		{pb.Transactions_WriteTxnMarkers_FullMethodName, &pb.WriteTxnMarkersRequest{}},
		{pb.Transactions_AddPartitionsToTxn_FullMethodName, &pb.AddPartitionsToTxnRequest{}},
	}
	health := []struct {
		method string
		req    any
	}{
		{healthpb.Health_Check_FullMethodName, &healthpb.HealthCheckRequest{}},
		{healthpb.Health_Watch_FullMethodName, nil},
	}
	for _, c := range client {
		err := g.admit(c.method, c.req)
		if errs.CodeOf(err) != pb.ErrorCode_BROKER_NOT_AVAILABLE || !errs.IsRetriable(err) || status.Code(err) != codes.Unavailable ||
			!strings.Contains(err.Error(), "node 7 is starting: waiting to register") {
			t.Errorf("closed gate, client call %s: %v", c.method, err)
		}
		// What a client reads off the wire.
		if back := wire.FromStatus(status.Convert(err).Err()); errs.CodeOf(back) != pb.ErrorCode_BROKER_NOT_AVAILABLE || back.Error() != err.Error() {
			t.Errorf("closed gate, client call %s: read back as %v", c.method, back)
		}
	}
	for _, c := range health {
		if err := g.admit(c.method, c.req); err != nil {
			t.Errorf("closed gate, health call %s: %v", c.method, err)
		}
	}
	func() {
		defer planted.Set(planted.ServeBeforeReady)()
		if err := g.admit(pb.Admin_CreateTopics_FullMethodName, &pb.CreateTopicsRequest{}); err != nil {
			t.Errorf("serve-before-ready planted: the closed gate still refuses: %v", err)
		}
	}()
	g.Open()
	for _, c := range append(client, health...) {
		if err := g.admit(c.method, c.req); err != nil {
			t.Errorf("open gate, %s: %v", c.method, err)
		}
	}
}
