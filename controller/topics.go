package controller

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/internal/config"
	"github.com/strand-io/strand/metadata"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// Topic creation and deletion. The internal topics' names are reserved:
// a request creates one only when it is a broker's creation of the
// internal topics for its coordinators (CreateTopicsRequest.internal_topics,
// set by coordinator.Locator and cleared by the request layer from
// clients'), so no client can create one first with a shape that breaks
// the coordinators. Kafka reserves only __cluster_metadata this way and
// lets a client create __consumer_offsets; Strand reserves all three, with
// Kafka's code and message for the one it reserves.

var legalTopic = regexp.MustCompile(`^[a-zA-Z0-9._-]+$`)

// maxPartitionsPerTopic bounds a topic's partition count.
const maxPartitionsPerTopic = 100000

// ValidateTopicName applies Kafka's rules.
func ValidateTopicName(name string) error {
	switch {
	case name == "" || name == "." || name == "..":
		return errs.New(pb.ErrorCode_INVALID_TOPIC_EXCEPTION, "topic name %q is not allowed", name)
	case len(name) > 249:
		return errs.New(pb.ErrorCode_INVALID_TOPIC_EXCEPTION, "topic name is %d characters, at most 249 are allowed", len(name))
	case !legalTopic.MatchString(name):
		return errs.New(pb.ErrorCode_INVALID_TOPIC_EXCEPTION, "topic name %q may only hold ASCII letters, digits, '.', '_' and '-'", name)
	}
	return nil
}

// ReservedTopicError is the refusal of a client's creation of a topic
// whose name is reserved (Kafka's answer for __cluster_metadata), or nil.
func ReservedTopicError(name string) error {
	if metadata.IsReservedTopic(name) {
		return errs.New(pb.ErrorCode_INVALID_REQUEST, "Creation of internal topic %s is prohibited.", name)
	}
	return nil
}

// DuplicateTopicError is Kafka's answer to each occurrence of a topic
// named more than once in one CreateTopics or DeleteTopics.
func DuplicateTopicError() error {
	return errs.New(pb.ErrorCode_INVALID_REQUEST, "Duplicate topic name.")
}

// Duplicates returns the names given more than once.
func Duplicates(names []string) map[string]bool {
	seen := make(map[string]bool, len(names))
	var dup map[string]bool
	for _, n := range names {
		if seen[n] {
			if dup == nil {
				dup = map[string]bool{}
			}
			dup[n] = true
		}
		seen[n] = true
	}
	return dup
}

// collidingTopic names an existing topic whose name equals name once
// every '.' is read as '_' (Kafka refuses such a topic: the two would
// share their metric names), or "" if there is none.
func collidingTopic(img *metadata.Image, name string) string {
	norm := strings.ReplaceAll(name, ".", "_")
	if norm == name && !strings.Contains(name, "_") {
		return ""
	}
	for other := range img.Topics {
		if other != name && strings.ReplaceAll(other, ".", "_") == norm {
			return other
		}
	}
	return ""
}

// CreateTopics creates topics, each atomically (its topic record and every
// partition in one batch). Replicas go where the request's assignment puts
// them, or to live brokers with leaders spread. A name given more than
// once is refused at every occurrence and none of them is created.
func (c *Controller) CreateTopics(ctx context.Context, req *pb.CreateTopicsRequest) ([]*pb.CreatableTopicResult, error) {
	if err := c.lockActive(); err != nil {
		return nil, err
	}
	defer c.mu.Unlock()
	names := make([]string, len(req.Topics))
	for i, t := range req.Topics {
		names[i] = t.Name
	}
	dup := Duplicates(names)
	var out []*pb.CreatableTopicResult
	for _, t := range req.Topics {
		res := &pb.CreatableTopicResult{Name: t.Name}
		out = append(out, res)
		if dup[t.Name] {
			res.ErrorCode, res.ErrorMessage = errs.Split(DuplicateTopicError())
			continue
		}
		recs, err := c.topicRecords(t, req.InternalTopics, res)
		if err != nil {
			res.ErrorCode, res.ErrorMessage = errs.Split(err)
			continue
		}
		if req.ValidateOnly {
			continue
		}
		if _, err := c.proposeLocked(ctx, recs...); err != nil {
			res.ErrorCode, res.ErrorMessage = errs.Split(err)
			if errs.CodeOf(err) == pb.ErrorCode_NOT_CONTROLLER {
				return nil, err
			}
			continue
		}
		c.lg.Info("created topic", "topic", t.Name, "partitions", res.NumPartitions, "replicationFactor", res.ReplicationFactor, "internal", req.InternalTopics)
	}
	return out, nil
}

// topicRecords validates one topic and returns its records. internal is
// a broker's creation of an internal topic: only such a request creates
// one, and its partitions are outside max.broker.partitions, the cap on
// what clients' topics may leave on a broker.
func (c *Controller) topicRecords(t *pb.CreatableTopic, internal bool, res *pb.CreatableTopicResult) ([]*pb.MetadataRecord, error) {
	img := c.Q.FSM.Image()
	if !internal || !metadata.IsInternalTopic(t.Name) {
		if err := ReservedTopicError(t.Name); err != nil {
			return nil, err
		}
	}
	if internal && !metadata.IsInternalTopic(t.Name) {
		return nil, errs.New(pb.ErrorCode_INVALID_REQUEST, "topic '%s' is not an internal topic", t.Name)
	}
	if err := ValidateTopicName(t.Name); err != nil {
		return nil, err
	}
	if img.Topic(t.Name) != nil {
		return nil, errs.New(pb.ErrorCode_TOPIC_ALREADY_EXISTS, "topic '%s' already exists", t.Name)
	}
	if other := collidingTopic(img, t.Name); other != "" {
		return nil, errs.New(pb.ErrorCode_INVALID_TOPIC_EXCEPTION, "Topic '%s' collides with existing topic: %s ('.' and '_' name the same metrics)", t.Name, other)
	}
	for k, v := range t.Configs {
		if err := config.ValidateTopic(k, v); err != nil {
			return nil, errs.New(pb.ErrorCode_INVALID_CONFIG, "%v", err)
		}
		// Stored the one way it is shown ("delete,compact" as compact,delete).
		t.Configs[k] = config.Normalize(k, v)
	}
	if err := config.ValidateTopicSet(t.Configs); err != nil {
		return nil, errs.New(pb.ErrorCode_INVALID_CONFIG, "%v", err)
	}
	var assign, isrs [][]int32
	if len(t.Assignments) > 0 {
		var err error
		if assign, isrs, err = manualAssignment(img, t); err != nil {
			return nil, err
		}
	} else {
		var err error
		if assign, err = c.placeTopic(img, t); err != nil {
			return nil, err
		}
		isrs = assign
	}
	if max := c.cfg.MaxBrokerPartitions; max > 0 && !internal {
		if err := checkBrokerPartitions(img, assign, max); err != nil {
			return nil, err
		}
	}
	id := newID()
	recs := []*pb.MetadataRecord{{Record: &pb.MetadataRecord_Topic{Topic: &pb.TopicRecord{Name: t.Name, TopicId: id, Configs: t.Configs, Internal: metadata.IsInternalTopic(t.Name)}}}}
	for p, reps := range assign {
		recs = append(recs, &pb.MetadataRecord{Record: &pb.MetadataRecord_Partition{Partition: &pb.PartitionRecord{
			Topic: t.Name, Partition: int32(p), Replicas: reps, Isr: isrs[p], Leader: isrs[p][0],
		}}})
	}
	res.TopicId, res.NumPartitions, res.ReplicationFactor = id, int32(len(assign)), int32(len(assign[0]))
	return recs, nil
}

// placeTopic places a topic of the requested (or default) partition count
// and replication factor on the live brokers.
func (c *Controller) placeTopic(img *metadata.Image, t *pb.CreatableTopic) ([][]int32, error) {
	parts, rf := t.NumPartitions, t.ReplicationFactor
	if parts == -1 || parts == 0 {
		parts = c.cfg.DefaultPartitions
	}
	if rf == -1 || rf == 0 {
		rf = c.cfg.DefaultReplicationFactor
	}
	if parts < 1 || parts > maxPartitionsPerTopic {
		return nil, errs.New(pb.ErrorCode_INVALID_PARTITIONS, "number of partitions must be between 1 and %d, got %d", maxPartitionsPerTopic, parts)
	}
	if rf < 1 {
		return nil, errs.New(pb.ErrorCode_INVALID_REPLICATION_FACTOR, "replication factor must be at least 1, got %d", rf)
	}
	live := img.LiveBrokers()
	if int(rf) > len(live) {
		if metadata.IsInternalTopic(t.Name) {
			return nil, errs.New(pb.ErrorCode_INVALID_REPLICATION_FACTOR, "%s needs %d live brokers, %d %s alive", t.Name, rf, len(live), plural(len(live), "is", "are"))
		}
		return nil, errs.New(pb.ErrorCode_INVALID_REPLICATION_FACTOR, "Replication factor: %d larger than available brokers: %d.", rf, len(live))
	}
	ids := make([]int32, len(live))
	for i, b := range live {
		ids[i] = b.ID
	}
	total := 0
	for _, tt := range img.Topics {
		total += len(tt.Partitions)
	}
	// Kafka picks the start index and the first follower shift at random;
	// taking both from the number of partitions the cluster already has
	// keeps leaders balanced across topics (each topic continues the round
	// robin where the last one stopped) and placement reproducible.
	return Assign(ids, int(parts), int(rf), total, total/len(ids)), nil
}

// manualAssignment checks a CreateTopics assignment by Kafka's rules
// (ReplicationControlManager's) and returns each partition's replicas and
// ISR (the replicas on live brokers; the first is the leader):
// num_partitions and replication_factor must be -1 (INVALID_REQUEST); a
// partition given twice, an empty replica list, a broker not registered
// or listed twice, a replica count unlike the partitions before it, no
// live replica, or partition ids that are not 0..n-1 are
// INVALID_REPLICA_ASSIGNMENT.
func manualAssignment(img *metadata.Image, t *pb.CreatableTopic) ([][]int32, [][]int32, error) {
	if t.ReplicationFactor != -1 {
		return nil, nil, errs.New(pb.ErrorCode_INVALID_REQUEST, "topic '%s' has a replica assignment, so its replication factor must be -1, not %d", t.Name, t.ReplicationFactor)
	}
	if t.NumPartitions != -1 {
		return nil, nil, errs.New(pb.ErrorCode_INVALID_REQUEST, "topic '%s' has a replica assignment, so its number of partitions must be -1, not %d", t.Name, t.NumPartitions)
	}
	if len(t.Assignments) > maxPartitionsPerTopic {
		return nil, nil, errs.New(pb.ErrorCode_INVALID_PARTITIONS, "number of partitions must be between 1 and %d, got %d", maxPartitionsPerTopic, len(t.Assignments))
	}
	bad := func(format string, a ...any) error {
		return errs.New(pb.ErrorCode_INVALID_REPLICA_ASSIGNMENT, "replica assignment of topic '%s': "+format, append([]any{t.Name}, a...)...)
	}
	reps := map[int32][]int32{}
	isrs := map[int32][]int32{}
	rf := -1
	for _, a := range t.Assignments {
		p := a.PartitionIndex
		if _, ok := reps[p]; ok {
			return nil, nil, bad("partition %d is assigned more than once", p)
		}
		if len(a.BrokerIds) == 0 {
			return nil, nil, bad("partition %d has an empty replica list", p)
		}
		sorted := append([]int32(nil), a.BrokerIds...)
		sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
		for i, id := range sorted {
			if img.Brokers[id] == nil {
				return nil, nil, bad("partition %d names broker %d, which is not registered", p, id)
			}
			if i > 0 && sorted[i-1] == id {
				return nil, nil, bad("partition %d names broker %d more than once", p, id)
			}
		}
		if rf >= 0 && len(a.BrokerIds) != rf {
			return nil, nil, bad("partition %d has %d replicas, the partitions before it %d", p, len(a.BrokerIds), rf)
		}
		rf = len(a.BrokerIds)
		var isr []int32
		for _, id := range a.BrokerIds {
			if img.IsLive(id) {
				isr = append(isr, id)
			}
		}
		if len(isr) == 0 {
			return nil, nil, bad("every broker of partition %d (%v) is fenced", p, a.BrokerIds)
		}
		reps[p], isrs[p] = append([]int32(nil), a.BrokerIds...), isr
	}
	n := int32(len(reps))
	outR, outI := make([][]int32, n), make([][]int32, n)
	for p := int32(0); p < n; p++ {
		if _, ok := reps[p]; !ok {
			return nil, nil, bad("the partitions must be numbered 0 to %d, one each; %d is missing", n-1, p)
		}
		outR[p], outI[p] = reps[p], isrs[p]
	}
	return outR, outI, nil
}

// checkBrokerPartitions refuses an assignment that would leave more than
// max partition replicas of clients' topics on a broker. The internal
// topics' replicas do not count: a client filling the cap would otherwise
// keep the cluster from creating them, and a client's room would depend on
// whether a coordinator had been asked for yet.
func checkBrokerPartitions(img *metadata.Image, assign [][]int32, max int) error {
	per := map[int32]int{}
	for _, t := range img.Topics {
		if t.Internal {
			continue
		}
		for _, p := range t.Partitions {
			if p == nil {
				continue
			}
			for _, r := range p.Replicas {
				per[r]++
			}
		}
	}
	for _, reps := range assign {
		for _, r := range reps {
			per[r]++
		}
	}
	ids := make([]int32, 0, len(per))
	for id := range per {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		if per[id] > max {
			return errs.New(pb.ErrorCode_INVALID_PARTITIONS, "broker %d would hold %d partition replicas, over max.broker.partitions=%d (what its file descriptors allow)", id, per[id], max)
		}
	}
	return nil
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// DeleteTopics removes topics, never the internal ones: their records are
// the groups' committed offsets and the transactions' states, acknowledged
// to clients. A name given more than once is refused at every occurrence
// and not deleted.
func (c *Controller) DeleteTopics(ctx context.Context, req *pb.DeleteTopicsRequest) ([]*pb.DeletableTopicResult, error) {
	if err := c.lockActive(); err != nil {
		return nil, err
	}
	defer c.mu.Unlock()
	dup := Duplicates(req.Names)
	var out []*pb.DeletableTopicResult
	for _, name := range req.Names {
		res := &pb.DeletableTopicResult{Name: name}
		out = append(out, res)
		if dup[name] {
			res.ErrorCode, res.ErrorMessage = errs.Split(DuplicateTopicError())
			continue
		}
		t := c.Q.FSM.Image().Topic(name)
		switch want := req.TopicIds[name]; {
		case want != "" && (t == nil || t.ID != want):
			// Named by an id (DeleteTopics v6) that is no longer this
			// name's: the topic was deleted, or deleted and created again.
			res.ErrorCode, res.ErrorMessage = pb.ErrorCode_UNKNOWN_TOPIC_ID, fmt.Sprintf("no topic has id %s", want)
		case t == nil:
			res.ErrorCode, res.ErrorMessage = pb.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, fmt.Sprintf("topic '%s' does not exist", name)
		case t.Internal:
			res.ErrorCode, res.ErrorMessage = pb.ErrorCode_INVALID_REQUEST, fmt.Sprintf("topic '%s' is internal and cannot be deleted", name)
		default:
			if _, err := c.proposeLocked(ctx, &pb.MetadataRecord{Record: &pb.MetadataRecord_RemoveTopic{RemoveTopic: &pb.RemoveTopicRecord{Name: name, TopicId: t.ID}}}); err != nil {
				if errs.CodeOf(err) == pb.ErrorCode_NOT_CONTROLLER {
					return nil, err
				}
				res.ErrorCode, res.ErrorMessage = errs.Split(err)
			}
		}
	}
	return out, nil
}
