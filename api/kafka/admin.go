package kafka

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strand-io/strand/internal/config"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// Topic and config administration, forwarded by the request layer to
// the active controller (DescribeConfigs and DescribeCluster answer from
// this broker).
//
// Versions: CreateTopics 0-7, DeleteTopics 0-6 (v6 by name or topic id),
// CreatePartitions 0-3, DescribeConfigs 0-4, IncrementalAlterConfigs
// 0-1, AlterConfigs 0-2 (the whole config of a topic: what librdkafka
// before 2.2 and kafka-python send), DescribeCluster 0-2. DeleteRecords is not served: a partition's
// log start moves only when retention drops whole segments.
func init() {
	register(kmsg.CreateTopics, 0, 7, handleCreateTopics)
	register(kmsg.DeleteTopics, 0, 6, handleDeleteTopics)
	register(kmsg.CreatePartitions, 0, 3, handleCreatePartitions)
	register(kmsg.DescribeConfigs, 0, 4, handleDescribeConfigs)
	register(kmsg.IncrementalAlterConfigs, 0, 1, handleIncrementalAlterConfigs)
	register(kmsg.AlterConfigs, 0, 2, handleAlterConfigs)
	register(kmsg.DescribeCluster, 0, 2, handleDescribeCluster)
}

// Config resource types on Kafka's wire.
const (
	resourceTopic  = kmsg.ConfigResourceTypeTopic
	resourceBroker = kmsg.ConfigResourceTypeBroker
)

func resourceName(t kmsg.ConfigResourceType) string {
	switch t {
	case resourceTopic:
		return "topic"
	case resourceBroker:
		return "broker"
	}
	return fmt.Sprintf("type-%d", int8(t))
}

func handleCreateTopics(ctx context.Context, c *Conn, r kmsg.Request) (kmsg.Response, error) {
	req := r.(*kmsg.CreateTopicsRequest)
	resp := kmsg.NewPtrCreateTopicsResponse()
	preq := &pb.CreateTopicsRequest{TimeoutMs: req.TimeoutMillis, ValidateOnly: req.ValidateOnly}
	for _, t := range req.Topics {
		ct := &pb.CreatableTopic{Name: t.Topic, NumPartitions: t.NumPartitions, ReplicationFactor: int32(t.ReplicationFactor)}
		for _, a := range t.ReplicaAssignment {
			ct.Assignments = append(ct.Assignments, &pb.CreatableReplicaAssignment{PartitionIndex: a.Partition, BrokerIds: a.Replicas})
		}
		for _, cf := range t.Configs {
			if cf.Value == nil {
				continue
			}
			if ct.Configs == nil {
				ct.Configs = map[string]string{}
			}
			ct.Configs[cf.Name] = *cf.Value
		}
		preq.Topics = append(preq.Topics, ct)
	}
	var results []*pb.CreatableTopicResult
	if len(preq.Topics) > 0 {
		presp, err := c.H.CreateTopics(ctx, preq)
		if err != nil {
			ec, msg := splitCode(err)
			for _, t := range preq.Topics {
				results = append(results, &pb.CreatableTopicResult{Name: t.Name, ErrorCode: pb.ErrorCode(ec), ErrorMessage: str(msg)})
			}
		} else {
			results = presp.Topics
		}
	}
	// The request layer answers every topic, in the request's order.
	for i, t := range req.Topics {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = t.Topic, -1, -1
		if i < len(results) {
			res := results[i]
			rt.ErrorCode, rt.ErrorMessage = code(res.ErrorCode), errMsg(res.ErrorMessage)
			if res.ErrorCode == pb.ErrorCode_NONE {
				rt.TopicID = topicID(res.TopicId)
				rt.NumPartitions, rt.ReplicationFactor = res.NumPartitions, int16(res.ReplicationFactor)
			}
		} else {
			rt.ErrorCode = code(pb.ErrorCode_UNKNOWN_SERVER_ERROR)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// handleDeleteTopics: by name, or from v6 by name or topic id (an id is
// looked up in this broker's metadata).
func handleDeleteTopics(ctx context.Context, c *Conn, r kmsg.Request) (kmsg.Response, error) {
	req := r.(*kmsg.DeleteTopicsRequest)
	resp := kmsg.NewPtrDeleteTopicsResponse()
	type ask struct {
		name string
		id   [16]byte
		ok   bool   // name known
		byID bool   // the name was found by the id: deleted only while it has it
		bad  string // refused here: INVALID_REQUEST with this message
	}
	var asks []ask
	if req.Version < 6 {
		for _, n := range req.TopicNames {
			asks = append(asks, ask{name: n, ok: true})
		}
	} else {
		var byID map[[16]byte]string
		ids := map[[16]byte]int{}
		for _, t := range req.Topics {
			if t.Topic == nil && t.TopicID != [16]byte{} {
				ids[t.TopicID]++
			}
		}
		for _, t := range req.Topics {
			switch {
			case t.Topic != nil && t.TopicID != [16]byte{}:
				// As Kafka's controller answers them.
				asks = append(asks, ask{name: *t.Topic, id: t.TopicID, bad: "You may not specify both topic name and topic id."})
				continue
			case t.Topic != nil:
				asks = append(asks, ask{name: *t.Topic, ok: true})
				continue
			case ids[t.TopicID] > 1:
				asks = append(asks, ask{id: t.TopicID, bad: "Duplicate topic id."})
				continue
			}
			if byID == nil {
				md, err := c.H.Metadata(ctx, &pb.MetadataRequest{IncludeInternal: true})
				if err != nil {
					return nil, err
				}
				byID = map[[16]byte]string{}
				for _, mt := range md.Topics {
					byID[topicID(mt.TopicId)] = mt.Name
				}
			}
			n, ok := byID[t.TopicID]
			asks = append(asks, ask{name: n, id: t.TopicID, ok: ok && t.TopicID != [16]byte{}, byID: true})
		}
	}
	preq := &pb.DeleteTopicsRequest{TimeoutMs: req.TimeoutMillis}
	for _, a := range asks {
		if a.ok {
			preq.Names = append(preq.Names, a.name)
			if a.byID {
				if preq.TopicIds == nil {
					preq.TopicIds = map[string]string{}
				}
				preq.TopicIds[a.name] = topicIDString(a.id)
			}
		}
	}
	var results []*pb.DeletableTopicResult
	if len(preq.Names) > 0 {
		presp, err := c.H.DeleteTopics(ctx, preq)
		if err != nil {
			ec, msg := splitCode(err)
			for _, n := range preq.Names {
				results = append(results, &pb.DeletableTopicResult{Name: n, ErrorCode: pb.ErrorCode(ec), ErrorMessage: str(msg)})
			}
		} else {
			results = presp.Topics
		}
	}
	j := 0
	for _, a := range asks {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		rt.TopicID = a.id
		if a.bad != "" {
			if a.name != "" {
				name := a.name
				rt.Topic = &name
			}
			rt.ErrorCode, rt.ErrorMessage = code(pb.ErrorCode_INVALID_REQUEST), errMsg(a.bad)
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		if !a.ok {
			rt.ErrorCode = code(pb.ErrorCode_UNKNOWN_TOPIC_ID)
			rt.ErrorMessage = errMsg(fmt.Sprintf("no topic has id %s", base64.RawURLEncoding.EncodeToString(a.id[:])))
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		name := a.name
		rt.Topic = &name
		if j < len(results) {
			rt.ErrorCode, rt.ErrorMessage = code(results[j].ErrorCode), errMsg(results[j].ErrorMessage)
		} else {
			rt.ErrorCode = code(pb.ErrorCode_UNKNOWN_SERVER_ERROR)
		}
		j++
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

func handleCreatePartitions(ctx context.Context, c *Conn, r kmsg.Request) (kmsg.Response, error) {
	req := r.(*kmsg.CreatePartitionsRequest)
	resp := kmsg.NewPtrCreatePartitionsResponse()
	preq := &pb.CreatePartitionsRequest{TimeoutMs: req.TimeoutMillis, ValidateOnly: req.ValidateOnly}
	for _, t := range req.Topics {
		pt := &pb.CreatePartitionsTopic{Name: t.Topic, Count: t.Count}
		for _, a := range t.Assignment {
			pt.Assignments = append(pt.Assignments, &pb.ReplicaAssignment{BrokerIds: a.Replicas})
		}
		preq.Topics = append(preq.Topics, pt)
	}
	presp, err := c.H.CreatePartitions(ctx, preq)
	for i, t := range req.Topics {
		rt := kmsg.NewCreatePartitionsResponseTopic()
		rt.Topic = t.Topic
		switch {
		case err != nil:
			rt.ErrorCode, rt.ErrorMessage = splitCode(err)
		case i < len(presp.Topics):
			rt.ErrorCode, rt.ErrorMessage = code(presp.Topics[i].ErrorCode), errMsg(presp.Topics[i].ErrorMessage)
		default:
			rt.ErrorCode = code(pb.ErrorCode_UNKNOWN_SERVER_ERROR)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// configSource is a config's source on Kafka's wire.
func configSource(src string) kmsg.ConfigSource {
	switch src {
	case "topic":
		return kmsg.ConfigSourceDynamicTopicConfig
	case "broker":
		return kmsg.ConfigSourceStaticBrokerConfig
	case "dynamic_broker":
		return kmsg.ConfigSourceDynamicBrokerConfig
	case "dynamic_default_broker":
		return kmsg.ConfigSourceDynamicDefaultBrokerConfig
	}
	return kmsg.ConfigSourceDefaultConfig
}

// handleDescribeConfigs: topic resources (every effective config, or the
// names asked for); other resource types are answered INVALID_REQUEST by
// the request layer.
func handleDescribeConfigs(ctx context.Context, c *Conn, r kmsg.Request) (kmsg.Response, error) {
	req := r.(*kmsg.DescribeConfigsRequest)
	resp := kmsg.NewPtrDescribeConfigsResponse()
	preq := &pb.DescribeConfigsRequest{IncludeDocumentation: req.IncludeDocumentation && req.Version >= 3}
	for _, res := range req.Resources {
		preq.Resources = append(preq.Resources, &pb.ConfigResource{Type: resourceName(res.ResourceType), Name: res.ResourceName})
	}
	presp, err := c.H.DescribeConfigs(ctx, preq)
	for i, res := range req.Resources {
		rr := kmsg.NewDescribeConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = res.ResourceType, res.ResourceName
		switch {
		case err != nil:
			rr.ErrorCode, rr.ErrorMessage = splitCode(err)
		case i >= len(presp.Results):
			rr.ErrorCode = code(pb.ErrorCode_UNKNOWN_SERVER_ERROR)
		default:
			pr := presp.Results[i]
			rr.ErrorCode, rr.ErrorMessage = code(pr.ErrorCode), errMsg(pr.ErrorMessage)
			var want map[string]bool
			if res.ConfigNames != nil {
				want = map[string]bool{}
				for _, n := range res.ConfigNames {
					want[n] = true
				}
			}
			for _, e := range pr.Entries {
				if want != nil && !want[e.Name] {
					continue
				}
				rc := kmsg.NewDescribeConfigsResponseResourceConfig()
				v := e.Value
				rc.Name, rc.Value, rc.Source = e.Name, &v, configSource(e.Source)
				rc.IsDefault = e.Source == "default"
				rc.ReadOnly, rc.IsSensitive = e.ReadOnly, e.IsSensitive
				if req.IncludeSynonyms && req.Version >= 1 {
					rc.ConfigSynonyms = configSynonyms(e, &v, rc.Source)
				}
				rc.ConfigType = configType(e.ConfigType)
				if preq.IncludeDocumentation && e.Documentation != "" {
					doc := e.Documentation
					rc.Documentation = &doc
				}
				rr.Configs = append(rr.Configs, rc)
			}
		}
		resp.Resources = append(resp.Resources, rr)
	}
	return resp, nil
}

// handleIncrementalAlterConfigs: SET and DELETE of topic configs, one
// resource at a time. APPEND and SUBTRACT apply to list configs: the one
// Strand has is cleanup.policy (kafka-configs --add-config
// cleanup.policy=[compact,delete] is a SET; AdminClient users may APPEND
// compact to delete); on any other config they are INVALID_CONFIG.
func handleIncrementalAlterConfigs(ctx context.Context, c *Conn, r kmsg.Request) (kmsg.Response, error) {
	req := r.(*kmsg.IncrementalAlterConfigsRequest)
	resp := kmsg.NewPtrIncrementalAlterConfigsResponse()
	for _, res := range req.Resources {
		rr := kmsg.NewIncrementalAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = res.ResourceType, res.ResourceName
		preq := &pb.IncrementalAlterConfigsRequest{Resource: &pb.ConfigResource{Type: resourceName(res.ResourceType), Name: res.ResourceName}, ValidateOnly: req.ValidateOnly}
		var bad string
		for _, cf := range res.Configs {
			switch cf.Op {
			case kmsg.IncrementalAlterConfigOpSet:
				if preq.Set == nil {
					preq.Set = map[string]string{}
				}
				preq.Set[cf.Name] = str(cf.Value)
			case kmsg.IncrementalAlterConfigOpDelete:
				preq.Delete = append(preq.Delete, cf.Name)
			case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
				if cf.Name != config.CleanupPolicy || res.ResourceType != kmsg.ConfigResourceTypeTopic {
					bad = fmt.Sprintf("operation %s on %s: APPEND and SUBTRACT apply to list configs, and the only one is cleanup.policy", cf.Op, cf.Name)
					continue
				}
				if preq.Set == nil {
					preq.Set = map[string]string{}
				}
				cur, ok := preq.Set[cf.Name]
				if !ok {
					cur = currentPolicy(c, res.ResourceName)
				}
				preq.Set[cf.Name] = editPolicy(cur, str(cf.Value), cf.Op == kmsg.IncrementalAlterConfigOpAppend)
			default:
				bad = fmt.Sprintf("operation %s on %s is not supported", cf.Op, cf.Name)
			}
		}
		if bad != "" {
			rr.ErrorCode, rr.ErrorMessage = code(pb.ErrorCode_INVALID_CONFIG), errMsg(bad)
			resp.Resources = append(resp.Resources, rr)
			continue
		}
		rr.ErrorCode, rr.ErrorMessage = alterConfigs(ctx, c, preq)
		resp.Resources = append(resp.Resources, rr)
	}
	return resp, nil
}

// currentPolicy is a topic's cleanup.policy as set on it, or Kafka's
// default (delete) when it sets none: what Kafka's APPEND and SUBTRACT
// start from. The read is not atomic with the alter that follows, as in
// Kafka's ZooKeeper-era brokers; two admins editing the list at once may
// lose one edit.
func currentPolicy(c *Conn, topic string) string {
	if t := c.H.Repl.Image().Topic(topic); t != nil {
		if v, ok := t.Configs[config.CleanupPolicy]; ok {
			return v
		}
	}
	return config.PolicyDelete
}

// editPolicy adds (append) or removes the items of a cleanup.policy list.
// An item that is neither delete nor compact is kept, so validation
// refuses it by name; removing everything leaves an empty list, refused
// likewise.
func editPolicy(cur, items string, add bool) string {
	var out []string
	has := map[string]bool{}
	for _, it := range strings.Split(cur, ",") {
		if it = strings.TrimSpace(it); it != "" && !has[it] {
			has[it] = true
			out = append(out, it)
		}
	}
	for _, it := range strings.Split(items, ",") {
		it = strings.TrimSpace(it)
		switch {
		case it == "":
		case add && !has[it]:
			has[it] = true
			out = append(out, it)
		case !add && has[it]:
			delete(has, it)
			for i, o := range out {
				if o == it {
					out = append(out[:i], out[i+1:]...)
					break
				}
			}
		}
	}
	return strings.Join(out, ",")
}

// alterConfigs alters one resource's configs: the answer's code and message.
func alterConfigs(ctx context.Context, c *Conn, preq *pb.IncrementalAlterConfigsRequest) (int16, *string) {
	presp, err := c.H.IncrementalAlterConfigs(ctx, preq)
	if err != nil {
		return splitCode(err)
	}
	return code(presp.ErrorCode), errMsg(presp.ErrorMessage)
}

// handleAlterConfigs replaces each resource's whole config: the keys
// given are set, every other key set on the topic goes back to its
// default (a null value is no value: the key is left out).
func handleAlterConfigs(ctx context.Context, c *Conn, r kmsg.Request) (kmsg.Response, error) {
	req := r.(*kmsg.AlterConfigsRequest)
	resp := kmsg.NewPtrAlterConfigsResponse()
	for _, res := range req.Resources {
		rr := kmsg.NewAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = res.ResourceType, res.ResourceName
		preq := &pb.IncrementalAlterConfigsRequest{Resource: &pb.ConfigResource{Type: resourceName(res.ResourceType), Name: res.ResourceName},
			Set: map[string]string{}, ValidateOnly: req.ValidateOnly, Replace: true}
		for _, cf := range res.Configs {
			if cf.Value != nil {
				preq.Set[cf.Name] = *cf.Value
			}
		}
		rr.ErrorCode, rr.ErrorMessage = alterConfigs(ctx, c, preq)
		resp.Resources = append(resp.Resources, rr)
	}
	return resp, nil
}

// handleDescribeCluster: the brokers at their Kafka listeners. Asking a
// broker for controllers (endpoint type 2, KIP-919) is
// MISMATCHED_ENDPOINT_TYPE, as Kafka's brokers answer it.
func handleDescribeCluster(ctx context.Context, c *Conn, r kmsg.Request) (kmsg.Response, error) {
	req := r.(*kmsg.DescribeClusterRequest)
	resp := kmsg.NewPtrDescribeClusterResponse()
	resp.EndpointType = req.EndpointType
	resp.ControllerID = -1
	if req.Version >= 1 && req.EndpointType != 1 {
		resp.ErrorCode = code(pb.ErrorCode_MISMATCHED_ENDPOINT_TYPE)
		resp.ErrorMessage = errMsg("this is a broker's listener: it describes brokers (endpoint type 1)")
		return resp, nil
	}
	presp, err := c.H.DescribeCluster(ctx, &pb.DescribeClusterRequest{})
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = splitCode(err)
		return resp, nil
	}
	resp.ClusterID = presp.ClusterId
	// Kafka's clients send controller-bound admin requests to this id;
	// every broker forwards them, so one they can reach is what matters
	// (KRaft brokers answer a live broker too).
	for _, b := range presp.Brokers {
		if !b.Fenced && (b.NodeId == presp.ControllerId || resp.ControllerID < 0) {
			resp.ControllerID = b.NodeId
		}
	}
	// As Metadata, the live brokers only; from v2 a client may ask for the
	// fenced ones too, marked (KIP-1073).
	withFenced := req.Version >= 2 && req.IncludeFencedBrokers
	for _, b := range presp.Brokers {
		if b.Fenced && !withFenced {
			continue
		}
		host, port := hostPort(b.Address)
		rb := kmsg.NewDescribeClusterResponseBroker()
		rb.NodeID, rb.Host, rb.Port, rb.Rack = b.NodeId, host, port, nullable(b.Rack)
		rb.IsFenced = b.Fenced
		resp.Brokers = append(resp.Brokers, rb)
	}
	return resp, nil
}
