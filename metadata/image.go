// Package metadata is the cluster's metadata image: brokers, topics,
// partitions (replicas, ISR, leader, epochs), feature levels, configs and
// the next producer-id block, built from the controller's typed records.
//
// It is a pure core: Apply takes an image and a batch of records and
// returns a new image and the delta between them; nothing here does I/O or
// holds a lock. The controller's Raft FSM and every broker following the
// metadata stream apply the same records with the same function, so they
// agree. Brokers, replication and the coordinators read images; only the
// controller writes records.
package metadata

import (
	"context"
	"fmt"
	"sort"
	"strconv"

	pb "github.com/strand-io/strand/proto/strand/v1"
)

// ProducerIDBlockSize is how many producer ids one AllocateProducerIds hands out.
const ProducerIDBlockSize = 1000

// Feature names and levels.
const (
	FeatureTransactionVersion  = "transaction.version"
	TransactionVersionMax      = 2
	TransactionVersionDefault  = 2
	InternalTransactionTopic   = "__transaction_state"
	InternalOffsetsTopic       = "__consumer_offsets"
	NoLeader                   = int32(-1)
	ConfigTopicUncleanElection = "unclean.leader.election.enable"
	ConfigMinISR               = "min.insync.replicas"
)

// Broker is a registered broker incarnation.
type Broker struct {
	ID            int32
	Epoch         int64 // the offset of its registration record
	IncarnationID string
	Address       string
	// ExternalAddress is what clients outside the nodes' network dial ("" = Address).
	ExternalAddress string
	// InterBrokerAddress is what other nodes dial for the internal RPCs
	// ("" in registrations made before there was an inter-broker listener).
	InterBrokerAddress string
	// KafkaAddress is the Kafka wire-protocol listener's address ("" =
	// this broker has none).
	KafkaAddress string
	Rack         string
	Fenced       bool
	// Features are the levels its binary supports (nil: a registration
	// from before brokers named them; see LegacyFeatures and Supports).
	Features map[string]FeatureRange
}

// PeerAddress is the address other nodes dial to reach this broker's
// internal RPCs: its inter-broker listener, or, for a registration made
// before that listener existed, its only one.
func (b *Broker) PeerAddress() string {
	if b.InterBrokerAddress != "" {
		return b.InterBrokerAddress
	}
	return b.Address
}

// Partition is a partition's replicas, ISR and leadership.
type Partition struct {
	Topic          string
	Partition      int32
	Replicas       []int32
	ISR            []int32
	Leader         int32
	LeaderEpoch    int32
	PartitionEpoch int32
	// AddingReplicas and RemovingReplicas are a reassignment in progress
	// (KIP-455): Replicas holds the target and the original replicas
	// together until every adding one is in the ISR.
	AddingReplicas   []int32
	RemovingReplicas []int32
}

// Clone deep-copies p.
func (p *Partition) Clone() *Partition {
	c := *p
	c.Replicas = append([]int32(nil), p.Replicas...)
	c.ISR = append([]int32(nil), p.ISR...)
	c.AddingReplicas = cloneIDs(p.AddingReplicas)
	c.RemovingReplicas = cloneIDs(p.RemovingReplicas)
	return &c
}

// Reassigning reports whether a reassignment is in progress.
func (p *Partition) Reassigning() bool {
	return len(p.AddingReplicas) > 0 || len(p.RemovingReplicas) > 0
}

func cloneIDs(s []int32) []int32 {
	if len(s) == 0 {
		return nil
	}
	return append([]int32(nil), s...)
}

// InISR reports whether id is in the ISR.
func (p *Partition) InISR(id int32) bool { return contains(p.ISR, id) }

// IsReplica reports whether id holds a replica.
func (p *Partition) IsReplica(id int32) bool { return contains(p.Replicas, id) }

// Topic is a topic and its partitions.
type Topic struct {
	Name       string
	ID         string
	Configs    map[string]string
	Internal   bool
	Partitions []*Partition
}

// Image is an immutable snapshot of cluster metadata at Offset. Never
// modify an Image or what it points to; Apply builds a new one, sharing
// what did not change.
type Image struct {
	Offset    int64
	ClusterID string
	Brokers   map[int32]*Broker
	Topics    map[string]*Topic
	// TopicIDs maps each topic's id to its name (TopicByID); nil in an
	// image built by hand, where TopicByID looks through Topics.
	TopicIDs       map[string]string
	NextProducerID int64
	Features       map[string]int32
	// BrokerConfigs holds cluster-wide dynamic broker configs (resource name "").
	BrokerConfigs map[string]string
	// BrokerConfigsByID holds per-broker dynamic configs (resource name
	// "<id>"); they take precedence over BrokerConfigs on that broker. It
	// may be nil (no broker has one); Apply copies it on write.
	BrokerConfigsByID map[int32]map[string]string
	// ACLs is the cluster's ACLs; nil is none. A batch that
	// changes them makes a new *ACLs.
	ACLs *ACLs
	// Scram holds users' SCRAM credentials by user and mechanism (for
	// SASL; scram.go). It may be nil; Apply copies it on write.
	Scram map[string]map[int32]ScramCredential
	// ClientQuotas are the client quotas by entity (quotas.go); nil
	// when none was ever set. Apply copies it on write.
	ClientQuotas map[QuotaEntity]map[string]float64
}

// EmptyImage is the image before any record.
func EmptyImage() *Image {
	return &Image{
		Offset:        -1,
		Brokers:       map[int32]*Broker{},
		Topics:        map[string]*Topic{},
		TopicIDs:      map[string]string{},
		Features:      map[string]int32{},
		BrokerConfigs: map[string]string{},
	}
}

// Topic returns a topic or nil.
func (im *Image) Topic(name string) *Topic { return im.Topics[name] }

// TopicByID returns the topic with that id, or nil ("" is no topic's
// id). A topic deleted and created again under its name has a new id:
// the old id finds nothing.
func (im *Image) TopicByID(id string) *Topic {
	if id == "" {
		return nil
	}
	if im.TopicIDs == nil {
		for _, t := range im.Topics {
			if t.ID == id {
				return t
			}
		}
		return nil
	}
	if t := im.Topics[im.TopicIDs[id]]; t != nil && t.ID == id {
		return t
	}
	return nil
}

// Partition returns a partition or nil.
func (im *Image) Partition(topic string, p int32) *Partition {
	t := im.Topics[topic]
	if t == nil || p < 0 || int(p) >= len(t.Partitions) {
		return nil
	}
	return t.Partitions[p]
}

// LiveBrokers returns the unfenced brokers, by id.
func (im *Image) LiveBrokers() []*Broker {
	var out []*Broker
	for _, b := range im.Brokers {
		if !b.Fenced {
			out = append(out, b)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// SortedBrokers returns every registered broker, by id.
func (im *Image) SortedBrokers() []*Broker {
	out := make([]*Broker, 0, len(im.Brokers))
	for _, b := range im.Brokers {
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// IsLive reports whether broker id is registered and unfenced.
func (im *Image) IsLive(id int32) bool {
	b := im.Brokers[id]
	return b != nil && !b.Fenced
}

// TopicNames returns topic names in order.
func (im *Image) TopicNames() []string {
	out := make([]string, 0, len(im.Topics))
	for n := range im.Topics {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Feature returns a finalized feature level (0 if unset).
func (im *Image) Feature(name string) int32 { return im.Features[name] }

// Delta says what one batch changed, for brokers reacting to it.
type Delta struct {
	// Partitions whose leader, ISR, epochs or replicas changed, or that are
	// new; Old is nil for new ones.
	Partitions []PartitionChange
	// DeletedTopics lists removed topics with their last partition state.
	DeletedTopics []*Topic
	// Brokers whose registration or fencing changed.
	Brokers []int32
	// TopicConfigs lists topics whose configs changed.
	TopicConfigs []string
	// BrokerConfigs: a dynamic broker config (cluster-wide or of some
	// broker) changed.
	BrokerConfigs bool
	// ACLs: the batch added or removed ACLs.
	ACLs bool
	// ClientQuotas: a client quota changed.
	ClientQuotas bool
	// Snapshot: the batch replaced the whole image.
	Snapshot bool
}

// PartitionChange is a partition before and after a batch.
type PartitionChange struct {
	Old, New *Partition
}

// Empty reports whether the delta changed nothing brokers care about.
func (d *Delta) Empty() bool {
	return len(d.Partitions) == 0 && len(d.DeletedTopics) == 0 && len(d.Brokers) == 0 && len(d.TopicConfigs) == 0 && !d.BrokerConfigs && !d.ACLs && !d.ClientQuotas && !d.Snapshot
}

type tpKey struct {
	topic     string
	partition int32
}

// builder copies on write.
type builder struct {
	base          *Image
	im            *Image
	brokersCopied bool
	topicsCopied  bool
	idsCopied     bool
	copiedTopic   map[string]bool
	featCopied    bool
	cfgCopied     bool
	cfgIDCopied   map[int32]bool
	scramCopied   map[string]bool
	delta         *Delta
	touched       map[tpKey]bool
	acls          aclBuilder
}

func newBuilder(base *Image) *builder {
	im := *base
	return &builder{base: base, im: &im, copiedTopic: map[string]bool{}, delta: &Delta{}, touched: map[tpKey]bool{}, acls: aclBuilder{base: base.ACLs}}
}

func (b *builder) brokers() map[int32]*Broker {
	if !b.brokersCopied {
		m := make(map[int32]*Broker, len(b.im.Brokers)+1)
		for k, v := range b.im.Brokers {
			m[k] = v
		}
		b.im.Brokers, b.brokersCopied = m, true
	}
	return b.im.Brokers
}

func (b *builder) topics() map[string]*Topic {
	if !b.topicsCopied {
		m := make(map[string]*Topic, len(b.im.Topics)+1)
		for k, v := range b.im.Topics {
			m[k] = v
		}
		b.im.Topics, b.topicsCopied = m, true
	}
	return b.im.Topics
}

// topicIDs returns a writable copy of the id index (built from the
// topics when the base image has none).
func (b *builder) topicIDs() map[string]string {
	if !b.idsCopied {
		m := make(map[string]string, len(b.im.Topics)+1)
		if b.im.TopicIDs != nil {
			for k, v := range b.im.TopicIDs {
				m[k] = v
			}
		} else {
			for n, t := range b.im.Topics {
				if t.ID != "" {
					m[t.ID] = n
				}
			}
		}
		b.im.TopicIDs, b.idsCopied = m, true
	}
	return b.im.TopicIDs
}

// topic returns a writable copy of a topic.
func (b *builder) topic(name string) *Topic {
	ts := b.topics()
	t := ts[name]
	if t == nil {
		return nil
	}
	if !b.copiedTopic[name] {
		c := *t
		c.Partitions = append([]*Partition(nil), t.Partitions...)
		cfg := make(map[string]string, len(t.Configs))
		for k, v := range t.Configs {
			cfg[k] = v
		}
		c.Configs = cfg
		ts[name] = &c
		b.copiedTopic[name] = true
		t = &c
	}
	return t
}

// Apply applies one metadata batch to im and returns the new image and what
// changed. A snapshot batch replaces everything. Apply never modifies im. An
// error means the batch is invalid for this image; the FSM refuses it as a
// whole (atomically).
func Apply(im *Image, batch *pb.MetadataBatch) (*Image, *Delta, error) {
	if batch.Snapshot {
		fresh := EmptyImage()
		next, _, err := apply(fresh, batch)
		if err != nil {
			return nil, nil, err
		}
		return next, SnapshotDelta(im, next), nil
	}
	return apply(im, batch)
}

// SnapshotDelta is the change from im to next when next replaces im as a
// whole (a snapshot batch, or a broker that starts acting on metadata only
// once it has caught up): every partition of next, with its state in im as
// Old where the topic is the same, and every topic of im that next lacks.
func SnapshotDelta(im, next *Image) *Delta {
	d := &Delta{Snapshot: true, BrokerConfigs: true, ACLs: true, ClientQuotas: true}
	for _, t := range next.Topics {
		// A topic deleted and created again under the same name (a new
		// id) is a new topic: its partitions have no old state.
		sameTopic := im.Topics[t.Name] != nil && im.Topics[t.Name].ID == t.ID
		for _, p := range t.Partitions {
			var old *Partition
			if sameTopic {
				old = im.Partition(p.Topic, p.Partition)
			}
			d.Partitions = append(d.Partitions, PartitionChange{Old: old, New: p})
		}
	}
	for name, t := range im.Topics {
		if nt := next.Topics[name]; nt == nil || nt.ID != t.ID {
			d.DeletedTopics = append(d.DeletedTopics, t)
		}
	}
	for id := range next.Brokers {
		d.Brokers = append(d.Brokers, id)
	}
	return d
}

func apply(im *Image, batch *pb.MetadataBatch) (*Image, *Delta, error) {
	if err := checkFormat(batch); err != nil {
		return nil, nil, err
	}
	b := newBuilder(im)
	for _, r := range batch.Records {
		if err := b.record(r, batch.Offset); err != nil {
			return nil, nil, err
		}
	}
	b.im.Offset = batch.Offset
	if b.acls.next != nil {
		b.im.ACLs, b.delta.ACLs = b.acls.next, true
	}
	for k := range b.touched {
		np := b.im.Partition(k.topic, k.partition)
		if np == nil {
			continue // its topic went in the same batch
		}
		b.delta.Partitions = append(b.delta.Partitions, PartitionChange{Old: b.base.Partition(k.topic, k.partition), New: np})
	}
	sort.Slice(b.delta.Partitions, func(i, j int) bool {
		x, y := b.delta.Partitions[i].New, b.delta.Partitions[j].New
		if x.Topic != y.Topic {
			return x.Topic < y.Topic
		}
		return x.Partition < y.Partition
	})
	return b.im, b.delta, nil
}

func (b *builder) setPartition(t *Topic, p *Partition) {
	for len(t.Partitions) <= int(p.Partition) {
		t.Partitions = append(t.Partitions, nil)
	}
	t.Partitions[p.Partition] = p
	b.touched[tpKey{p.Topic, p.Partition}] = true
}

func (b *builder) record(r *pb.MetadataRecord, offset int64) error {
	if ok, err := b.scramRecord(r); ok {
		return err
	}
	switch x := r.Record.(type) {
	case *pb.MetadataRecord_Cluster:
		b.im.ClusterID = x.Cluster.ClusterId
	case *pb.MetadataRecord_RegisterBroker:
		rb := x.RegisterBroker
		epoch := rb.BrokerEpoch
		if epoch <= 0 {
			epoch = offset
		}
		b.brokers()[rb.NodeId] = &Broker{ID: rb.NodeId, Epoch: epoch, IncarnationID: rb.IncarnationId, Address: rb.Address, ExternalAddress: rb.ExternalAddress,
			InterBrokerAddress: rb.InterBrokerAddress, KafkaAddress: rb.KafkaAddress, Rack: rb.Rack, Fenced: rb.Fenced,
			Features: FeatureRanges(rb.SupportedFeatures)}
		b.delta.Brokers = append(b.delta.Brokers, rb.NodeId)
	case *pb.MetadataRecord_UnregisterBroker:
		if cur := b.im.Brokers[x.UnregisterBroker.NodeId]; cur != nil {
			delete(b.brokers(), cur.ID)
			b.delta.Brokers = append(b.delta.Brokers, cur.ID)
		}
	case *pb.MetadataRecord_FenceBroker:
		return b.setFenced(x.FenceBroker.NodeId, x.FenceBroker.BrokerEpoch, true)
	case *pb.MetadataRecord_UnfenceBroker:
		return b.setFenced(x.UnfenceBroker.NodeId, x.UnfenceBroker.BrokerEpoch, false)
	case *pb.MetadataRecord_Topic:
		tr := x.Topic
		if b.im.Topics[tr.Name] != nil {
			return fmt.Errorf("topic %q already exists", tr.Name)
		}
		cfg := map[string]string{}
		for k, v := range tr.Configs {
			cfg[k] = v
		}
		b.topics()[tr.Name] = &Topic{Name: tr.Name, ID: tr.TopicId, Configs: cfg, Internal: tr.Internal}
		b.copiedTopic[tr.Name] = true
		if tr.TopicId != "" {
			b.topicIDs()[tr.TopicId] = tr.Name
		}
	case *pb.MetadataRecord_Partition:
		pr := x.Partition
		t := b.topic(pr.Topic)
		if t == nil {
			return fmt.Errorf("partition record for unknown topic %q", pr.Topic)
		}
		b.setPartition(t, &Partition{
			Topic: pr.Topic, Partition: pr.Partition,
			Replicas: append([]int32(nil), pr.Replicas...), ISR: append([]int32(nil), pr.Isr...),
			Leader: pr.Leader, LeaderEpoch: pr.LeaderEpoch, PartitionEpoch: pr.PartitionEpoch,
			AddingReplicas: cloneIDs(pr.AddingReplicas), RemovingReplicas: cloneIDs(pr.RemovingReplicas),
		})
	case *pb.MetadataRecord_PartitionChange:
		pc := x.PartitionChange
		t := b.topic(pc.Topic)
		if t == nil || int(pc.Partition) >= len(t.Partitions) || t.Partitions[pc.Partition] == nil {
			return fmt.Errorf("partition change for unknown partition %s-%d", pc.Topic, pc.Partition)
		}
		cur := t.Partitions[pc.Partition]
		if pc.PartitionEpoch <= cur.PartitionEpoch || pc.LeaderEpoch < cur.LeaderEpoch {
			return fmt.Errorf("partition change %s-%d epochs (%d,%d) do not advance (%d,%d)", pc.Topic, pc.Partition, pc.LeaderEpoch, pc.PartitionEpoch, cur.LeaderEpoch, cur.PartitionEpoch)
		}
		np := cur.Clone()
		np.Leader, np.ISR = pc.Leader, append([]int32(nil), pc.Isr...)
		np.LeaderEpoch, np.PartitionEpoch = pc.LeaderEpoch, pc.PartitionEpoch
		if a := pc.Assignment; a != nil { // absent in older records: unchanged
			if len(a.Replicas) == 0 {
				return fmt.Errorf("partition change %s-%d leaves no replicas", pc.Topic, pc.Partition)
			}
			np.Replicas = append([]int32(nil), a.Replicas...)
			np.AddingReplicas, np.RemovingReplicas = cloneIDs(a.AddingReplicas), cloneIDs(a.RemovingReplicas)
		}
		b.setPartition(t, np)
	case *pb.MetadataRecord_AccessControlEntry:
		return b.acls.add(x.AccessControlEntry)
	case *pb.MetadataRecord_RemoveAccessControlEntry:
		return b.acls.remove(x.RemoveAccessControlEntry.GetId())
	case *pb.MetadataRecord_RemoveTopic:
		t := b.im.Topics[x.RemoveTopic.Name]
		if t == nil {
			return fmt.Errorf("remove of unknown topic %q", x.RemoveTopic.Name)
		}
		delete(b.topics(), t.Name)
		if ids := b.topicIDs(); ids[t.ID] == t.Name {
			delete(ids, t.ID)
		}
		b.delta.DeletedTopics = append(b.delta.DeletedTopics, b.base.Topics[t.Name])
	case *pb.MetadataRecord_ProducerIds:
		if x.ProducerIds.NextProducerId <= b.im.NextProducerID {
			return fmt.Errorf("producer id block end %d does not advance past %d", x.ProducerIds.NextProducerId, b.im.NextProducerID)
		}
		b.im.NextProducerID = x.ProducerIds.NextProducerId
	case *pb.MetadataRecord_FeatureLevel:
		if !b.featCopied {
			m := map[string]int32{}
			for k, v := range b.im.Features {
				m[k] = v
			}
			b.im.Features, b.featCopied = m, true
		}
		b.im.Features[x.FeatureLevel.Name] = x.FeatureLevel.Level
	case *pb.MetadataRecord_Config:
		c := x.Config
		switch c.ResourceType {
		case "topic":
			t := b.topic(c.ResourceName)
			if t == nil {
				return fmt.Errorf("config for unknown topic %q", c.ResourceName)
			}
			if c.Delete {
				delete(t.Configs, c.Name)
			} else {
				t.Configs[c.Name] = c.Value
			}
			b.delta.TopicConfigs = append(b.delta.TopicConfigs, t.Name)
		case "broker":
			b.delta.BrokerConfigs = true
			if c.ResourceName != "" {
				id, err := strconv.ParseInt(c.ResourceName, 10, 32)
				if err != nil || id < 0 {
					return fmt.Errorf("broker config for bad broker id %q", c.ResourceName)
				}
				m := b.brokerConfigsOf(int32(id))
				if c.Delete {
					delete(m, c.Name)
				} else {
					m[c.Name] = c.Value
				}
				if len(m) == 0 {
					delete(b.im.BrokerConfigsByID, int32(id))
				}
				break
			}
			if !b.cfgCopied {
				m := map[string]string{}
				for k, v := range b.im.BrokerConfigs {
					m[k] = v
				}
				b.im.BrokerConfigs, b.cfgCopied = m, true
			}
			if c.Delete {
				delete(b.im.BrokerConfigs, c.Name)
			} else {
				b.im.BrokerConfigs[c.Name] = c.Value
			}
		default:
			return fmt.Errorf("config for unknown resource type %q", c.ResourceType)
		}
	case *pb.MetadataRecord_ClientQuota:
		return b.applyClientQuota(x.ClientQuota) // quotas.go
	default:
		return fmt.Errorf("unknown metadata record %T", r.Record)
	}
	return nil
}

// brokerConfigsOf returns a writable copy of broker id's dynamic configs
// (copying the outer map and that broker's map once per batch).
func (b *builder) brokerConfigsOf(id int32) map[string]string {
	if b.cfgIDCopied == nil {
		b.cfgIDCopied = map[int32]bool{}
		outer := make(map[int32]map[string]string, len(b.im.BrokerConfigsByID)+1)
		for k, v := range b.im.BrokerConfigsByID {
			outer[k] = v
		}
		b.im.BrokerConfigsByID = outer
	}
	if !b.cfgIDCopied[id] {
		m := map[string]string{}
		for k, v := range b.im.BrokerConfigsByID[id] {
			m[k] = v
		}
		b.im.BrokerConfigsByID[id] = m
		b.cfgIDCopied[id] = true
	}
	return b.im.BrokerConfigsByID[id]
}

// BrokerConfig is broker id's dynamic value of a config: its own
// (DYNAMIC_BROKER_CONFIG) first, else the cluster-wide one
// (DYNAMIC_DEFAULT_BROKER_CONFIG). perBroker says which one it is.
func (im *Image) BrokerConfig(id int32, name string) (value string, perBroker, ok bool) {
	if v, ok := im.BrokerConfigsByID[id][name]; ok {
		return v, true, true
	}
	v, ok := im.BrokerConfigs[name]
	return v, false, ok
}

func (b *builder) setFenced(id int32, epoch int64, fenced bool) error {
	cur := b.im.Brokers[id]
	if cur == nil || cur.Epoch != epoch {
		return fmt.Errorf("fence change for broker %d epoch %d does not match the registration", id, epoch)
	}
	c := *cur
	c.Fenced = fenced
	b.brokers()[id] = &c
	b.delta.Brokers = append(b.delta.Brokers, id)
	return nil
}

// SnapshotRecords writes the image as records that rebuild it (a Raft
// snapshot, or the start of a metadata stream for a broker far behind).
func (im *Image) SnapshotRecords() *pb.MetadataBatch {
	out := &pb.MetadataBatch{Offset: im.Offset, Snapshot: true, FormatVersion: im.FormatVersion()}
	add := func(r *pb.MetadataRecord) { out.Records = append(out.Records, r) }
	if im.ClusterID != "" {
		add(&pb.MetadataRecord{Record: &pb.MetadataRecord_Cluster{Cluster: &pb.ClusterRecord{ClusterId: im.ClusterID}}})
	}
	for _, br := range im.SortedBrokers() {
		add(&pb.MetadataRecord{Record: &pb.MetadataRecord_RegisterBroker{RegisterBroker: &pb.RegisterBrokerRecord{
			NodeId: br.ID, IncarnationId: br.IncarnationID, BrokerEpoch: br.Epoch, Address: br.Address, ExternalAddress: br.ExternalAddress,
			InterBrokerAddress: br.InterBrokerAddress, KafkaAddress: br.KafkaAddress, Rack: br.Rack, Fenced: br.Fenced,
			SupportedFeatures: rangesOf(br.Features),
		}}})
	}
	for _, name := range im.TopicNames() {
		t := im.Topics[name]
		add(&pb.MetadataRecord{Record: &pb.MetadataRecord_Topic{Topic: &pb.TopicRecord{Name: t.Name, TopicId: t.ID, Configs: t.Configs, Internal: t.Internal}}})
		for _, p := range t.Partitions {
			add(&pb.MetadataRecord{Record: &pb.MetadataRecord_Partition{Partition: &pb.PartitionRecord{
				Topic: p.Topic, Partition: p.Partition, Replicas: p.Replicas, Isr: p.ISR, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch,
				AddingReplicas: p.AddingReplicas, RemovingReplicas: p.RemovingReplicas,
			}}})
		}
	}
	if im.NextProducerID > 0 {
		add(&pb.MetadataRecord{Record: &pb.MetadataRecord_ProducerIds{ProducerIds: &pb.ProducerIdsRecord{NextProducerId: im.NextProducerID}}})
	}
	names := make([]string, 0, len(im.Features))
	for n := range im.Features {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		add(&pb.MetadataRecord{Record: &pb.MetadataRecord_FeatureLevel{FeatureLevel: &pb.FeatureLevelRecord{Name: n, Level: im.Features[n]}}})
	}
	keys := make([]string, 0, len(im.BrokerConfigs))
	for k := range im.BrokerConfigs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		add(&pb.MetadataRecord{Record: &pb.MetadataRecord_Config{Config: &pb.ConfigRecord{ResourceType: "broker", Name: k, Value: im.BrokerConfigs[k]}}})
	}
	ids := make([]int32, 0, len(im.BrokerConfigsByID))
	for id := range im.BrokerConfigsByID {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		m := im.BrokerConfigsByID[id]
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			add(&pb.MetadataRecord{Record: &pb.MetadataRecord_Config{Config: &pb.ConfigRecord{ResourceType: "broker", ResourceName: strconv.Itoa(int(id)), Name: k, Value: m[k]}}})
		}
	}
	out.Records = append(out.Records, aclRecords(im.ACLs)...)
	im.scramSnapshot(add)
	for _, r := range im.clientQuotaRecords() { // quotas.go
		add(r)
	}
	return out
}

func contains(s []int32, v int32) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// FeatureRange is the levels of a feature this version of Strand
// supports (Kafka's SupportedVersionRange): a finalized level must lie in
// it, 0 being the feature disabled.
type FeatureRange struct{ Min, Max int32 }

// SupportedFeatures are the features every node of this version supports,
// by name: what ApiVersions and DescribeFeatures report as supported and
// what UpdateFeatures may finalize.
var SupportedFeatures = map[string]FeatureRange{
	FeatureTransactionVersion: {Min: 0, Max: TransactionVersionMax},
	FeatureStrandVersion:      {Min: 0, Max: StrandVersionMax},
}

// SupportedFeatureNames lists SupportedFeatures' names, sorted.
func SupportedFeatureNames() []string {
	out := make([]string, 0, len(SupportedFeatures))
	for n := range SupportedFeatures {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// IsInternalTopic reports the two internal topics.
func IsInternalTopic(name string) bool {
	return name == InternalTransactionTopic || name == InternalOffsetsTopic
}

// ClusterMetadataTopic is Kafka's metadata log's name. Strand keeps its
// metadata in Raft, not in a topic, but reserves the name as Kafka does.
const ClusterMetadataTopic = "__cluster_metadata"

// IsReservedTopic reports the names no client may create a topic under:
// the internal topics (the cluster creates them) and Kafka's metadata log.
func IsReservedTopic(name string) bool {
	return IsInternalTopic(name) || name == ClusterMetadataTopic
}

// Source yields committed metadata batches after an offset, in order,
// blocking until there are some: the controller's FSM on a voter, a
// StreamSource from a remote controller on a broker-only node.
type Source interface {
	Since(ctx context.Context, offset int64) ([]*pb.MetadataBatch, error)
}
