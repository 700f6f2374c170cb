package controller

import (
	"testing"

	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// TestValidateBrokerConfigs: Kafka's answers to a broker config alter: an
// unknown name or a bad value is INVALID_CONFIG, a read-only (static)
// config INVALID_REQUEST, a resource name that is neither "" nor a broker
// id INVALID_REQUEST; known dynamic configs with good values pass, for a
// broker and for the cluster-wide default, set or deleted.
func TestValidateBrokerConfigs(t *testing.T) {
	req := func(name string, set map[string]string, del ...string) *pb.IncrementalAlterConfigsRequest {
		return &pb.IncrementalAlterConfigsRequest{Resource: &pb.ConfigResource{Type: "broker", Name: name}, Set: set, Delete: del}
	}
	for _, c := range []struct {
		name string
		req  *pb.IncrementalAlterConfigsRequest
		want pb.ErrorCode
	}{
		{"rates", req("1", map[string]string{"leader.replication.throttled.rate": "1048576", "follower.replication.throttled.rate": "0"}), pb.ErrorCode_NONE},
		{"log defaults cluster-wide", req("", map[string]string{"log.retention.ms": "-1", "log.segment.bytes": "1048576", "log.cleanup.policy": "compact,delete",
			"log.cleaner.io.max.bytes.per.second": "1.5E7", "min.insync.replicas": "2"}), pb.ErrorCode_NONE},
		{"delete", req("3", nil, "log.retention.ms", "leader.replication.throttled.rate"), pb.ErrorCode_NONE},
		{"unknown", req("1", map[string]string{"log.retention.minutes.please": "1"}), pb.ErrorCode_INVALID_CONFIG},
		{"unknown delete", req("1", nil, "nope"), pb.ErrorCode_INVALID_CONFIG},
		{"not a number", req("1", map[string]string{"leader.replication.throttled.rate": "fast"}), pb.ErrorCode_INVALID_CONFIG},
		{"negative rate", req("1", map[string]string{"follower.replication.throttled.rate": "-1"}), pb.ErrorCode_INVALID_CONFIG},
		{"segment too small", req("", map[string]string{"log.segment.bytes": "1"}), pb.ErrorCode_INVALID_CONFIG},
		{"bad policy", req("", map[string]string{"log.cleanup.policy": "forever"}), pb.ErrorCode_INVALID_CONFIG},
		{"zero io rate", req("", map[string]string{"log.cleaner.io.max.bytes.per.second": "0"}), pb.ErrorCode_INVALID_CONFIG},
		{"read-only", req("1", map[string]string{"log.cleaner.threads": "4"}), pb.ErrorCode_INVALID_REQUEST},
		{"read-only delete", req("1", nil, "log.cleaner.dedupe.buffer.size"), pb.ErrorCode_INVALID_REQUEST},
		{"bad resource name", req("broker-1", map[string]string{"log.retention.ms": "1"}), pb.ErrorCode_INVALID_REQUEST},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := ValidateBrokerConfigs(c.req)
			if got := errs.CodeOf(err); err == nil && c.want != pb.ErrorCode_NONE || err != nil && got != c.want {
				t.Fatalf("got %v (%v), want %v", got, err, c.want)
			}
		})
	}
}
