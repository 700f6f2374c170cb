package client

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"

	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// Admin manages topics and reads cluster state.
//
// Every call tries the brokers it knows in turn until one answers, and
// retries connection failures and a node that is still starting
// (BROKER_NOT_AVAILABLE) until ctx ends: then its error matches ctx's
// error (context.DeadlineExceeded or context.Canceled) and the last
// failure. A broker's answer is returned as it is (an *Error with its
// code), except those a method says it retries.
type Admin struct {
	cfg config
	cl  *cluster
}

// NewAdmin returns an admin client; it refuses to be made without
// Bootstrap.
func NewAdmin(opts ...Opt) (*Admin, error) {
	cfg := newConfig(opts)
	if len(cfg.bootstrap) == 0 {
		return nil, fmt.Errorf("strand: no bootstrap servers (use client.Bootstrap)")
	}
	a := &Admin{cfg: cfg}
	a.cl = newCluster(&a.cfg)
	return a, nil
}

// Close releases connections.
func (a *Admin) Close() { a.cl.close() }

// TopicSpec describes a topic to create.
type TopicSpec struct {
	Name              string
	Partitions        int32
	ReplicationFactor int32
	Configs           map[string]string
}

// controllerRoutingError reports the per-item answers of an admin request
// forwarded to the active controller that cluster.any retries like
// transport errors: the request did not reach the controller
// (NOT_CONTROLLER), timed out on the way (REQUEST_TIMED_OUT: a retried
// create may then find the topic it made, TOPIC_ALREADY_EXISTS), or the
// node was not ready (BROKER_NOT_AVAILABLE). Other retriable codes are
// answers: UNKNOWN_TOPIC_OR_PARTITION from DeleteTopics means no such topic.
func controllerRoutingError(code pb.ErrorCode) bool {
	return code == pb.ErrorCode_NOT_CONTROLLER || code == pb.ErrorCode_REQUEST_TIMED_OUT || code == pb.ErrorCode_BROKER_NOT_AVAILABLE
}

// CreateTopic creates one topic and waits until the broker that answered
// knows its leaders. A node that is still starting, or a request that did
// not reach the active controller (NOT_CONTROLLER, REQUEST_TIMED_OUT), is
// retried with backoff until ctx ends. Other answers are returned:
// TOPIC_ALREADY_EXISTS (ErrTopicAlreadyExists; also when a retried
// request had created it), INVALID_TOPIC_EXCEPTION, INVALID_PARTITIONS,
// INVALID_REPLICATION_FACTOR (more replicas than live brokers),
// INVALID_CONFIG, ….
func (a *Admin) CreateTopic(ctx context.Context, spec TopicSpec) error {
	var resp *pb.CreateTopicsResponse
	err := a.cl.any(ctx, func(ctx context.Context, cc *grpc.ClientConn) error {
		var err error
		resp, err = pb.NewAdminClient(cc).CreateTopics(ctx, &pb.CreateTopicsRequest{TimeoutMs: int32(a.cfg.requestTimeout / time.Millisecond),
			Topics: []*pb.CreatableTopic{{Name: spec.Name, NumPartitions: spec.Partitions, ReplicationFactor: spec.ReplicationFactor, Configs: spec.Configs}}})
		if err == nil && len(resp.Topics) == 1 {
			if code := resp.Topics[0].ErrorCode; controllerRoutingError(code) {
				return errs.FromCode(code, resp.Topics[0].ErrorMessage)
			}
		}
		return err
	})
	if err != nil {
		return err
	}
	if len(resp.Topics) != 1 {
		return fmt.Errorf("strand: CreateTopics answered %d topics", len(resp.Topics))
	}
	return errs.FromCode(resp.Topics[0].ErrorCode, resp.Topics[0].ErrorMessage)
}

// DeleteTopic deletes a topic. NOT_CONTROLLER and a starting node are
// retried until ctx ends; UNKNOWN_TOPIC_OR_PARTITION (no such topic) and
// other answers are returned.
func (a *Admin) DeleteTopic(ctx context.Context, name string) error {
	var resp *pb.DeleteTopicsResponse
	err := a.cl.any(ctx, func(ctx context.Context, cc *grpc.ClientConn) error {
		var err error
		resp, err = pb.NewAdminClient(cc).DeleteTopics(ctx, &pb.DeleteTopicsRequest{Names: []string{name}})
		// Not REQUEST_TIMED_OUT: a delete that happened would be retried
		// into UNKNOWN_TOPIC_OR_PARTITION.
		if err == nil && len(resp.Topics) == 1 {
			if code := resp.Topics[0].ErrorCode; code == pb.ErrorCode_NOT_CONTROLLER || code == pb.ErrorCode_BROKER_NOT_AVAILABLE {
				return errs.FromCode(code, resp.Topics[0].ErrorMessage)
			}
		}
		return err
	})
	if err != nil {
		return err
	}
	if len(resp.Topics) != 1 {
		return fmt.Errorf("strand: DeleteTopics answered %d topics", len(resp.Topics))
	}
	return errs.FromCode(resp.Topics[0].ErrorCode, resp.Topics[0].ErrorMessage)
}

// Metadata returns the cluster's metadata for topics (all when none;
// internal topics too when internal). A topic's or partition's error
// (UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE) is in the answer, not
// in err, which is only a failure to get one before ctx ended.
func (a *Admin) Metadata(ctx context.Context, internal bool, topics ...string) (*pb.MetadataResponse, error) {
	var resp *pb.MetadataResponse
	err := a.cl.any(ctx, func(ctx context.Context, cc *grpc.ClientConn) error {
		var err error
		resp, err = pb.NewMetadataClient(cc).Metadata(ctx, &pb.MetadataRequest{Topics: topics, IncludeInternal: internal})
		return err
	})
	if err == nil {
		a.cl.apply(resp)
	}
	return resp, err
}

// Leader returns the leader of tp from fresh metadata (-1 while it has
// none); UNKNOWN_TOPIC_OR_PARTITION when the metadata does not list tp.
func (a *Admin) Leader(ctx context.Context, tp TopicPartition) (int32, error) {
	md, err := a.Metadata(ctx, false, tp.Topic)
	if err != nil {
		return -1, err
	}
	for _, t := range md.Topics {
		for _, p := range t.Partitions {
			if t.Name == tp.Topic && p.Partition == tp.Partition {
				return p.LeaderId, nil
			}
		}
	}
	return -1, errs.New(pb.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, "%s is not in the metadata", tp)
}

// BrokerConn returns the client's connection to broker id (known from the
// last Metadata answer), for tools that speak the wire protocol directly,
// such as strand verify's protocol-level read_committed reader.
func (a *Admin) BrokerConn(id int32) (*grpc.ClientConn, error) { return a.cl.brokerConn(id) }

// DescribeCluster reports brokers and the controller quorum. When the
// answering broker cannot reach the quorum the answer still lists the
// brokers it knows, with ErrorCode NOT_CONTROLLER; err is only a failure
// to get an answer before ctx ended.
func (a *Admin) DescribeCluster(ctx context.Context) (*pb.DescribeClusterResponse, error) {
	var resp *pb.DescribeClusterResponse
	err := a.cl.any(ctx, func(ctx context.Context, cc *grpc.ClientConn) error {
		var err error
		resp, err = pb.NewAdminClient(cc).DescribeCluster(ctx, &pb.DescribeClusterRequest{})
		return err
	})
	return resp, err
}

// DescribeTopicConfigs returns a topic's effective configs, or the
// broker's answer (UNKNOWN_TOPIC_OR_PARTITION, …).
func (a *Admin) DescribeTopicConfigs(ctx context.Context, topic string) ([]*pb.ConfigEntry, error) {
	var resp *pb.DescribeConfigsResponse
	err := a.cl.any(ctx, func(ctx context.Context, cc *grpc.ClientConn) error {
		var err error
		resp, err = pb.NewAdminClient(cc).DescribeConfigs(ctx, &pb.DescribeConfigsRequest{Resources: []*pb.ConfigResource{{Type: "topic", Name: topic}}})
		return err
	})
	if err != nil {
		return nil, err
	}
	r := resp.Results[0]
	return r.Entries, errs.FromCode(r.ErrorCode, r.ErrorMessage)
}

// AlterTopicConfigs sets (and, with empty values, deletes) topic configs.
// A request that did not reach the active controller is retried until ctx
// ends; other answers (INVALID_CONFIG, UNKNOWN_TOPIC_OR_PARTITION, …) are
// returned.
func (a *Admin) AlterTopicConfigs(ctx context.Context, topic string, set map[string]string) error {
	req := &pb.IncrementalAlterConfigsRequest{Resource: &pb.ConfigResource{Type: "topic", Name: topic}, Set: map[string]string{}}
	for k, v := range set {
		if v == "" {
			req.Delete = append(req.Delete, k)
		} else {
			req.Set[k] = v
		}
	}
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

// PartitionOffsets is what ListOffsets says of one partition.
type PartitionOffsets struct {
	// Offset answers the query (earliest, latest or by timestamp; -1 if no match).
	Offset    int64
	Timestamp int64
	// HighWatermark and LastStableOffset are both reported so lag can be
	// measured against the right mark (read_committed readers stop at the LSO).
	HighWatermark    int64
	LastStableOffset int64
	LogStartOffset   int64
	LogEndOffset     int64
	LeaderEpoch      int32
	// LastIsControl: the record just below the HW is a transaction marker.
	LastIsControl bool
	Err           error
}

// ListOffsets answers, for each partition, the offset for ts
// (OffsetEarliest, OffsetLatest or a Unix-ms timestamp), with HW and LSO.
// Partitions whose leader is unknown or moved, or that answer a retriable
// code (NOT_LEADER_OR_FOLLOWER, OFFSET_NOT_AVAILABLE, …), are asked again
// until ctx ends: then err matches ctx's error and the last failure, and
// the map holds the partitions answered. A partition that answered a code
// that is not retriable has it in its PartitionOffsets.Err.
func (a *Admin) ListOffsets(ctx context.Context, tps []TopicPartition, ts int64, iso IsolationLevel) (map[TopicPartition]PartitionOffsets, error) {
	return a.listOffsets(ctx, tps, ts, iso)
}

func (a *Admin) listOffsets(ctx context.Context, tps []TopicPartition, ts int64, iso IsolationLevel) (map[TopicPartition]PartitionOffsets, error) {
	out := map[TopicPartition]PartitionOffsets{}
	pending := append([]TopicPartition(nil), tps...)
	var lastErr error
	for attempt := 0; len(pending) > 0; attempt++ {
		byLeader := map[int32][]*pb.ListOffsetsPartition{}
		var unknown []string
		for _, tp := range pending {
			leader, epoch := a.cl.leader(tp)
			if leader < 0 {
				unknown = append(unknown, tp.Topic)
				continue
			}
			byLeader[leader] = append(byLeader[leader], &pb.ListOffsetsPartition{Topic: tp.Topic, Partition: tp.Partition, Timestamp: ts, CurrentLeaderEpoch: epoch})
		}
		if len(unknown) > 0 {
			if err := a.cl.refresh(ctx, unknown); err != nil {
				lastErr = keepLast(lastErr, err)
			}
		}
		var retry []TopicPartition
		for leader, parts := range byLeader {
			cc, err := a.cl.brokerConn(leader)
			if err != nil {
				lastErr = keepLast(lastErr, err)
				for _, p := range parts {
					retry = append(retry, TopicPartition{p.Topic, p.Partition})
				}
				continue
			}
			isoW := pb.IsolationLevel_READ_UNCOMMITTED
			if iso == ReadCommitted {
				isoW = pb.IsolationLevel_READ_COMMITTED
			}
			rctx, cancel := context.WithTimeout(ctx, a.cfg.requestTimeout)
			resp, err := pb.NewConsumerClient(cc).ListOffsets(rctx, &pb.ListOffsetsRequest{IsolationLevel: isoW, Partitions: parts})
			cancel()
			if err != nil {
				lastErr = keepLast(lastErr, err)
				for _, p := range parts {
					retry = append(retry, TopicPartition{p.Topic, p.Partition})
				}
				continue
			}
			for _, r := range resp.Partitions {
				tp := TopicPartition{r.Topic, r.Partition}
				e := errs.FromCode(r.ErrorCode, r.ErrorMessage)
				if e != nil && errs.IsRetriable(e) {
					lastErr = e
					a.cl.markStale(tp)
					retry = append(retry, tp)
					continue
				}
				out[tp] = PartitionOffsets{Offset: r.Offset, Timestamp: r.Timestamp, HighWatermark: r.HighWatermark, LastStableOffset: r.LastStableOffset,
					LogStartOffset: r.LogStartOffset, LogEndOffset: r.LogEndOffset, LeaderEpoch: r.LeaderEpoch, LastIsControl: r.LastOffsetIsControl, Err: e}
			}
		}
		for _, tp := range pending {
			if _, done := out[tp]; !done {
				found := false
				for _, r := range retry {
					if r == tp {
						found = true
					}
				}
				if !found {
					retry = append(retry, tp)
				}
			}
		}
		pending = retry
		if len(pending) == 0 {
			break
		}
		if a.cfg.sleep(ctx, backoff(&a.cfg, attempt)) != nil {
			return out, fmt.Errorf("list offsets: %w", expired(ctx, lastErr))
		}
	}
	return out, nil
}
