package request

import (
	"context"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/strand-io/strand/authz"
	"github.com/strand-io/strand/controller"
	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/internal/config"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// CreateTopics forwards to the active controller, then waits (within the
// request timeout) until this broker's image has the new topics with
// leaders, so a Metadata call that follows sees them. As Kafka's
// ControllerApis, a name given twice is answered INVALID_REQUEST
// "Duplicate topic name." at every occurrence, and a reserved name
// (an internal topic's) INVALID_REQUEST, both before any authorization;
// neither is forwarded. Answers keep the request's order.
func (h *Handler) CreateTopics(ctx context.Context, req *pb.CreateTopicsRequest) (*pb.CreateTopicsResponse, error) {
	for _, t := range req.Topics {
		// The replication factor is INT16 on Kafka's wire.
		if err := firstErr(checkString("topic name", t.Name), checkInt16("replication factor", t.ReplicationFactor)); err != nil {
			out := &pb.CreateTopicsResponse{}
			code, msg := errs.Split(err)
			for _, t := range req.Topics {
				out.Topics = append(out.Topics, &pb.CreatableTopicResult{Name: shortID(t.Name), ErrorCode: code, ErrorMessage: msg})
			}
			return out, nil
		}
	}
	names := make([]string, len(req.Topics))
	for i, t := range req.Topics {
		names[i] = t.Name
	}
	dup := controller.Duplicates(names)
	refused := make([]error, len(req.Topics))
	for i, t := range req.Topics {
		if dup[t.Name] {
			refused[i] = controller.DuplicateTopicError()
		} else {
			refused[i] = controller.ReservedTopicError(t.Name)
		}
	}
	// Kafka: Create on the cluster creates any topic; without it each
	// topic needs Create on itself, and a topic refused is answered
	// TOPIC_AUTHORIZATION_FAILED while the others are created.
	az := h.authz(ctx, "CreateTopics")
	if !az.open() && !az.quietly().cluster(authz.OpCreate) {
		for i, t := range req.Topics {
			if refused[i] == nil && !az.topic(authz.OpCreate, t.Name) {
				refused[i] = topicDenied(authz.OpCreate, t.Name)
			}
		}
	}
	sub := &pb.CreateTopicsRequest{TimeoutMs: req.TimeoutMs, ValidateOnly: req.ValidateOnly}
	for i, t := range req.Topics {
		if refused[i] == nil {
			sub.Topics = append(sub.Topics, t)
		}
	}
	inner := &pb.CreateTopicsResponse{}
	if len(sub.Topics) > 0 {
		var err error
		if inner, err = h.createTopics(ctx, sub); err != nil {
			return nil, err
		}
	}
	out := &pb.CreateTopicsResponse{}
	j := 0
	for i, t := range req.Topics {
		if refused[i] != nil {
			code, msg := errs.Split(refused[i])
			out.Topics = append(out.Topics, &pb.CreatableTopicResult{Name: t.Name, ErrorCode: code, ErrorMessage: msg, NumPartitions: -1, ReplicationFactor: -1})
			continue
		}
		if j < len(inner.Topics) {
			out.Topics = append(out.Topics, inner.Topics[j])
			j++
		}
	}
	return out, nil
}

// createTopics forwards an authorized CreateTopics to the controller.
func (h *Handler) createTopics(ctx context.Context, req *pb.CreateTopicsRequest) (*pb.CreateTopicsResponse, error) {
	resp, err := toController(ctx, h, func(ctx context.Context, c pb.ControllerClient) (*pb.CreateTopicsResponse, error) {
		return c.CreateTopics(ctx, req)
	})
	if err != nil {
		out := &pb.CreateTopicsResponse{}
		code, msg := timedOutIfUnknown(errs.Split(err))
		for _, t := range req.Topics {
			out.Topics = append(out.Topics, &pb.CreatableTopicResult{Name: t.Name, ErrorCode: code, ErrorMessage: msg})
		}
		return out, nil
	}
	if !req.ValidateOnly {
		h.waitForTopics(ctx, req.TimeoutMs, resp, true)
	}
	return resp, nil
}

func (h *Handler) waitForTopics(ctx context.Context, timeoutMs int32, resp *pb.CreateTopicsResponse, present bool) {
	d := time.Duration(timeoutMs) * time.Millisecond
	if d <= 0 {
		d = 30 * time.Second
	}
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		img := h.Repl.Image()
		ready := true
		for _, t := range resp.Topics {
			if t.ErrorCode != pb.ErrorCode_NONE {
				continue
			}
			if tt := img.Topic(t.Name); tt == nil || len(tt.Partitions) != int(t.NumPartitions) {
				ready = false
			}
		}
		if ready {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// toController sends a request to the active controller (through
// channel.Remote, which follows NOT_CONTROLLER) and returns its answer.
func toController[R any](ctx context.Context, h *Handler, call func(context.Context, pb.ControllerClient) (R, error)) (R, error) {
	var resp R
	err := h.Remote.Call(ctx, func(ctx context.Context, c pb.ControllerClient) error {
		var err error
		resp, err = call(ctx, c)
		return err
	})
	return resp, err
}

// timedOutIfUnknown: a controller that could not be reached or answered
// with no code is REQUEST_TIMED_OUT, which clients retry.
func timedOutIfUnknown(code pb.ErrorCode, msg string) (pb.ErrorCode, string) {
	if code == pb.ErrorCode_UNKNOWN_SERVER_ERROR {
		code = pb.ErrorCode_REQUEST_TIMED_OUT
	}
	return code, msg
}

// DeleteTopics forwards to the active controller. A name given twice is
// answered INVALID_REQUEST "Duplicate topic name." at every occurrence,
// before any authorization (Kafka's ControllerApis), and not forwarded.
func (h *Handler) DeleteTopics(ctx context.Context, req *pb.DeleteTopicsRequest) (*pb.DeleteTopicsResponse, error) {
	dup := controller.Duplicates(req.Names)
	refused := make([]error, len(req.Names))
	for i, n := range req.Names {
		if dup[n] {
			refused[i] = controller.DuplicateTopicError()
		}
	}
	// Kafka: Delete on each topic; a topic refused is answered
	// TOPIC_AUTHORIZATION_FAILED, the others deleted.
	az := h.authz(ctx, "DeleteTopics")
	if !az.open() {
		for i, n := range req.Names {
			if refused[i] == nil && !az.topic(authz.OpDelete, n) {
				refused[i] = topicDenied(authz.OpDelete, n)
			}
		}
	}
	var ok []string
	for i, n := range req.Names {
		if refused[i] == nil {
			ok = append(ok, n)
		}
	}
	inner := &pb.DeleteTopicsResponse{}
	if len(ok) > 0 {
		var err error
		if inner, err = h.deleteTopics(ctx, &pb.DeleteTopicsRequest{Names: ok, TimeoutMs: req.TimeoutMs, TopicIds: req.TopicIds}); err != nil {
			return nil, err
		}
	}
	out := &pb.DeleteTopicsResponse{}
	j := 0
	for i, n := range req.Names {
		if refused[i] != nil {
			code, msg := errs.Split(refused[i])
			out.Topics = append(out.Topics, &pb.DeletableTopicResult{Name: n, ErrorCode: code, ErrorMessage: msg})
			continue
		}
		if j < len(inner.Topics) {
			out.Topics = append(out.Topics, inner.Topics[j])
			j++
		}
	}
	return out, nil
}

// deleteTopics forwards an authorized DeleteTopics to the controller.
func (h *Handler) deleteTopics(ctx context.Context, req *pb.DeleteTopicsRequest) (*pb.DeleteTopicsResponse, error) {
	resp, err := toController(ctx, h, func(ctx context.Context, c pb.ControllerClient) (*pb.DeleteTopicsResponse, error) {
		return c.DeleteTopics(ctx, req)
	})
	if err != nil {
		out := &pb.DeleteTopicsResponse{}
		code, msg := errs.Split(err)
		for _, n := range req.Names {
			out.Topics = append(out.Topics, &pb.DeletableTopicResult{Name: n, ErrorCode: code, ErrorMessage: msg})
		}
		return out, nil
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		img := h.Repl.Image()
		gone := true
		for _, t := range resp.Topics {
			if t.ErrorCode == pb.ErrorCode_NONE && img.Topic(t.Name) != nil {
				gone = false
			}
		}
		if gone {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	return resp, nil
}

// IncrementalAlterConfigs forwards to the active controller.
func (h *Handler) IncrementalAlterConfigs(ctx context.Context, req *pb.IncrementalAlterConfigsRequest) (*pb.IncrementalAlterConfigsResponse, error) {
	// Kafka: AlterConfigs on the topic, or on the cluster for a broker
	// resource (both AlterConfigs and IncrementalAlterConfigs; Replace is
	// Kafka's AlterConfigs).
	name := "IncrementalAlterConfigs"
	if req.Replace {
		name = "AlterConfigs"
	}
	if err := h.authorizeConfigResource(ctx, name, authz.OpAlterConfigs, req.GetResource().GetType(), req.GetResource().GetName()); err != nil {
		code, msg := errs.Split(err)
		return &pb.IncrementalAlterConfigsResponse{ErrorCode: code, ErrorMessage: msg}, nil
	}
	if req.Replace {
		req = h.replaceConfigs(req)
	}
	if req.ValidateOnly {
		return h.validateAlterConfigs(req), nil
	}
	resp, err := toController(ctx, h, func(ctx context.Context, c pb.ControllerClient) (*pb.IncrementalAlterConfigsResponse, error) {
		return c.IncrementalAlterConfigs(ctx, req)
	})
	if err != nil {
		code, msg := errs.Split(err)
		return &pb.IncrementalAlterConfigsResponse{ErrorCode: code, ErrorMessage: msg}, nil
	}
	return resp, nil
}

// DescribeCluster reports brokers from the local image and the quorum as
// the active controller sees it.
func (h *Handler) DescribeCluster(ctx context.Context, _ *pb.DescribeClusterRequest) (*pb.DescribeClusterResponse, error) {
	img := h.Repl.Image()
	resp := &pb.DescribeClusterResponse{ClusterId: img.ClusterID, ControllerId: h.Remote.LeaderHint(), Brokers: brokerInfos(img, h.Listener), MetadataOffset: img.Offset}
	// Kafka answers DescribeCluster's brokers to anyone (as Metadata's);
	// the controller quorum Strand adds is DescribeQuorum's answer, which
	// needs Describe on the cluster.
	if !h.authz(ctx, "DescribeCluster").cluster(authz.OpDescribe) {
		return resp, nil
	}
	qctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	var q *pb.DescribeQuorumResponse
	if err := h.Remote.Call(qctx, func(ctx context.Context, c pb.ControllerClient) error {
		var err error
		q, err = c.DescribeQuorum(ctx, &pb.DescribeQuorumRequest{})
		return err
	}); err == nil {
		resp.ControllerId = q.LeaderId
		resp.Controllers = q.Voters
	} else {
		resp.ErrorCode, resp.ErrorMessage = pb.ErrorCode_NOT_CONTROLLER, "quorum unreachable: "+err.Error()
	}
	return resp, nil
}

// javaDouble writes a double as Java's Double.toString does for the
// values these settings take (0.5, 1.0E7, 1.7976931348623157E308), as
// Kafka shows them.
func javaDouble(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1e7 {
		return strconv.FormatFloat(f, 'f', 1, 64)
	}
	if math.Abs(f) >= 1e-3 && math.Abs(f) < 1e7 {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	s := strconv.FormatFloat(f, 'E', -1, 64)
	mant, exp, _ := strings.Cut(s, "E")
	if !strings.Contains(mant, ".") {
		mant += ".0"
	}
	exp = strings.TrimPrefix(exp, "+")
	neg := strings.HasPrefix(exp, "-")
	exp = strings.TrimLeft(strings.TrimPrefix(exp, "-"), "0")
	if neg {
		exp = "-" + exp
	}
	return mant + "E" + exp
}

// DescribeConfigs lists a topic's effective configs with their sources.
func (h *Handler) DescribeConfigs(ctx context.Context, req *pb.DescribeConfigsRequest) (*pb.DescribeConfigsResponse, error) {
	img := h.Repl.Image()
	resp := &pb.DescribeConfigsResponse{}
	az := h.authz(ctx, "DescribeConfigs")
	for _, r := range req.Resources {
		out := &pb.ConfigResourceResult{Type: r.Type, Name: r.Name}
		resp.Results = append(resp.Results, out)
		if err := configResourceDenied(az, authz.OpDescribeConfigs, r.Type, r.Name); err != nil {
			out.ErrorCode, out.ErrorMessage = errs.Split(err)
			continue
		}
		if r.Type == "broker" {
			h.describeBroker(r, out)
			continue
		}
		if r.Type != "topic" {
			out.ErrorCode, out.ErrorMessage = pb.ErrorCode_INVALID_REQUEST, "only topic and broker configs can be described"
			continue
		}
		t := img.Topic(r.Name)
		if t == nil {
			out.ErrorCode, out.ErrorMessage = pb.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, "topic '"+r.Name+"' does not exist"
			continue
		}
		lc, minISR := h.Repl.Partitions().LogConfig(t.Configs)
		eff := map[string]string{
			config.SegmentBytes: strconv.FormatInt(lc.SegmentBytes, 10), config.SegmentMs: strconv.FormatInt(lc.SegmentMs, 10),
			config.RetentionMs: strconv.FormatInt(lc.RetentionMs, 10), config.RetentionBytes: strconv.FormatInt(lc.RetentionBytes, 10),
			config.FlushMessages: strconv.FormatInt(lc.FlushMessages, 10), config.FlushMs: strconv.FormatInt(lc.FlushMs, 10),
			config.IndexIntervalBytes: strconv.Itoa(lc.IndexIntervalBytes), config.MinInsyncReplicas: strconv.Itoa(minISR),
			config.UncleanLeaderElection: strconv.FormatBool(config.Bool(t.Configs, config.UncleanLeaderElection, false)),
			config.MaxMessageBytes:       strconv.FormatInt(config.Int(t.Configs, config.MaxMessageBytes, int64(h.MessageMaxBytes)), 10),
			config.CleanupPolicy:         lc.Cleanup.String(), config.MessageTimestampType: "CreateTime",
			config.MinCleanableDirtyRatio:    strconv.FormatFloat(lc.MinCleanableDirtyRatio, 'g', -1, 64),
			config.MinCompactionLagMs:        strconv.FormatInt(lc.MinCompactionLagMs, 10),
			config.MaxCompactionLagMs:        strconv.FormatInt(lc.MaxCompactionLagMs, 10),
			config.DeleteRetentionMs:         strconv.FormatInt(lc.DeleteRetentionMs, 10),
			config.ProducerIDExpirationMs:    strconv.FormatInt(lc.ProducerIDExpirationMs, 10),
			config.TimestampBeforeMaxMs:      strconv.FormatInt(h.timestampBeforeMaxMs(t.Configs), 10),
			config.TimestampAfterMaxMs:       strconv.FormatInt(h.timestampAfterMaxMs(t.Configs), 10),
			config.LeaderThrottledReplicas:   t.Configs[config.LeaderThrottledReplicas],
			config.FollowerThrottledReplicas: t.Configs[config.FollowerThrottledReplicas],
		}
		keys := make([]string, 0, len(eff))
		for k := range eff {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			src := "default"
			if _, ok := t.Configs[k]; ok {
				src = "topic"
			}
			out.Entries = append(out.Entries, &pb.ConfigEntry{Name: k, Value: eff[k], Source: src})
		}
	}
	for _, r := range resp.Results {
		for _, e := range r.Entries {
			describeConfigType(e, req.IncludeDocumentation)
		}
	}
	return resp, nil
}

// describeConfigType fills an entry's type as Kafka's ConfigDef types it
// and, when asked, its documentation (KIP-569).
func describeConfigType(e *pb.ConfigEntry, withDoc bool) {
	d, ok := config.DocOf(e.Name)
	if !ok {
		return
	}
	e.ConfigType = d.Type
	if withDoc {
		e.Documentation = d.Text
	}
}

// configResourceDenied is Kafka's check of a config resource: op
// (DescribeConfigs or AlterConfigs) on the topic, or on the cluster for a
// broker resource; nil when allowed. Another type is left to the
// request's own answer (INVALID_REQUEST).
func configResourceDenied(az *authorizer, op authz.Operation, typ, name string) error {
	switch typ {
	case "topic":
		if !az.topic(op, name) {
			return topicDenied(op, name)
		}
	case "broker":
		if !az.cluster(op) {
			return clusterDenied(op)
		}
	}
	return nil
}

// authorizeConfigResource is configResourceDenied for one request.
func (h *Handler) authorizeConfigResource(ctx context.Context, request string, op authz.Operation, typ, name string) error {
	return configResourceDenied(h.authz(ctx, request), op, typ, name)
}
