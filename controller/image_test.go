package controller_test

import (
	"reflect"
	"sort"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/strand-io/strand/controller"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// ---- record builders shared by the controller tests ----

func batchAt(offset int64, recs ...*pb.MetadataRecord) *pb.MetadataBatch {
	return &pb.MetadataBatch{Offset: offset, Records: recs}
}

func clusterRec(id string) *pb.MetadataRecord {
	return &pb.MetadataRecord{Record: &pb.MetadataRecord_Cluster{Cluster: &pb.ClusterRecord{ClusterId: id}}}
}

func registerRec(id int32, epoch int64, fenced bool) *pb.MetadataRecord {
	return &pb.MetadataRecord{Record: &pb.MetadataRecord_RegisterBroker{RegisterBroker: &pb.RegisterBrokerRecord{
		NodeId: id, IncarnationId: "inc-" + string(rune('a'+id)), BrokerEpoch: epoch,
		Address: "host:" + string(rune('0'+id)), Rack: "r", Fenced: fenced,
	}}}
}

func unregisterRec(id int32) *pb.MetadataRecord {
	return &pb.MetadataRecord{Record: &pb.MetadataRecord_UnregisterBroker{UnregisterBroker: &pb.UnregisterBrokerRecord{NodeId: id}}}
}

func fenceRec(id int32, epoch int64) *pb.MetadataRecord {
	return &pb.MetadataRecord{Record: &pb.MetadataRecord_FenceBroker{FenceBroker: &pb.FenceBrokerRecord{NodeId: id, BrokerEpoch: epoch}}}
}

func unfenceRec(id int32, epoch int64) *pb.MetadataRecord {
	return &pb.MetadataRecord{Record: &pb.MetadataRecord_UnfenceBroker{UnfenceBroker: &pb.UnfenceBrokerRecord{NodeId: id, BrokerEpoch: epoch}}}
}

func topicRec(name string, cfg map[string]string) *pb.MetadataRecord {
	return &pb.MetadataRecord{Record: &pb.MetadataRecord_Topic{Topic: &pb.TopicRecord{Name: name, TopicId: "id-" + name, Configs: cfg}}}
}

func partRec(topic string, p int32, replicas, isr []int32, leader, le, pe int32) *pb.MetadataRecord {
	return &pb.MetadataRecord{Record: &pb.MetadataRecord_Partition{Partition: &pb.PartitionRecord{
		Topic: topic, Partition: p, Replicas: replicas, Isr: isr, Leader: leader, LeaderEpoch: le, PartitionEpoch: pe,
	}}}
}

func changeRec(topic string, p int32, leader int32, isr []int32, le, pe int32) *pb.MetadataRecord {
	return &pb.MetadataRecord{Record: &pb.MetadataRecord_PartitionChange{PartitionChange: &pb.PartitionChangeRecord{
		Topic: topic, Partition: p, Leader: leader, Isr: isr, LeaderEpoch: le, PartitionEpoch: pe,
	}}}
}

func removeTopicRec(name string) *pb.MetadataRecord {
	return &pb.MetadataRecord{Record: &pb.MetadataRecord_RemoveTopic{RemoveTopic: &pb.RemoveTopicRecord{Name: name}}}
}

func producerIdsRec(next int64) *pb.MetadataRecord {
	return &pb.MetadataRecord{Record: &pb.MetadataRecord_ProducerIds{ProducerIds: &pb.ProducerIdsRecord{NextProducerId: next}}}
}

func featureRec(name string, level int32) *pb.MetadataRecord {
	return &pb.MetadataRecord{Record: &pb.MetadataRecord_FeatureLevel{FeatureLevel: &pb.FeatureLevelRecord{Name: name, Level: level}}}
}

func configRec(resType, resName, name, value string, del bool) *pb.MetadataRecord {
	return &pb.MetadataRecord{Record: &pb.MetadataRecord_Config{Config: &pb.ConfigRecord{
		ResourceType: resType, ResourceName: resName, Name: name, Value: value, Delete: del,
	}}}
}

// build applies batches in order to the empty image, giving batch i the
// offset i+1.
func build(t *testing.T, batches ...[]*pb.MetadataRecord) *controller.Image {
	t.Helper()
	img := controller.EmptyImage()
	for i, recs := range batches {
		next, _, err := controller.Apply(img, batchAt(int64(i+1), recs...))
		if err != nil {
			t.Fatalf("setup batch %d: %v", i+1, err)
		}
		img = next
	}
	return img
}

func recs(r ...*pb.MetadataRecord) []*pb.MetadataRecord { return r }

// deepCopy copies every level of an image so that a later comparison
// detects any write into the original.
func deepCopy(im *controller.Image) *controller.Image {
	c := *im
	if im.Brokers != nil {
		c.Brokers = map[int32]*controller.Broker{}
		for k, v := range im.Brokers {
			b := *v
			c.Brokers[k] = &b
		}
	}
	if im.Topics != nil {
		c.Topics = map[string]*controller.Topic{}
		for k, v := range im.Topics {
			tc := *v
			if v.Configs != nil {
				tc.Configs = map[string]string{}
				for ck, cv := range v.Configs {
					tc.Configs[ck] = cv
				}
			}
			if v.Partitions != nil {
				tc.Partitions = make([]*controller.Partition, len(v.Partitions))
				for i, p := range v.Partitions {
					if p != nil {
						tc.Partitions[i] = p.Clone()
					}
				}
			}
			c.Topics[k] = &tc
		}
	}
	if im.Features != nil {
		c.Features = map[string]int32{}
		for k, v := range im.Features {
			c.Features[k] = v
		}
	}
	if im.BrokerConfigs != nil {
		c.BrokerConfigs = map[string]string{}
		for k, v := range im.BrokerConfigs {
			c.BrokerConfigs[k] = v
		}
	}
	return &c
}

// baseImage: brokers 1..3 live (epochs 1..3), topic "a" with two partitions
// and topic "b" with one, cluster id, producer ids, a feature and a broker
// config.
func baseImage(t *testing.T) *controller.Image {
	t.Helper()
	return build(t,
		recs(clusterRec("c1"), registerRec(1, 0, false)),
		recs(registerRec(2, 0, false)),
		recs(registerRec(3, 0, false)),
		recs(topicRec("a", map[string]string{"retention.ms": "100"}),
			partRec("a", 0, []int32{1, 2, 3}, []int32{1, 2, 3}, 1, 0, 0),
			partRec("a", 1, []int32{2, 3, 1}, []int32{2, 3, 1}, 2, 0, 0)),
		recs(topicRec("b", nil), partRec("b", 0, []int32{3, 1}, []int32{3, 1}, 3, 5, 7)),
		recs(producerIdsRec(1000), featureRec(controller.FeatureTransactionVersion, 2),
			configRec("broker", "", "log.retention.ms", "5", false)),
	)
}

func TestApplyRecords(t *testing.T) {
	type tc struct {
		name    string
		setup   [][]*pb.MetadataRecord
		offset  int64
		batch   []*pb.MetadataRecord
		wantErr string // substring; "" means success
		check   func(t *testing.T, im *controller.Image)
	}
	brokers := [][]*pb.MetadataRecord{recs(registerRec(1, 0, false)), recs(registerRec(2, 0, true))}
	withTopic := append(append([][]*pb.MetadataRecord{}, brokers...),
		recs(topicRec("t", map[string]string{"k": "v"}), partRec("t", 0, []int32{1, 2}, []int32{1, 2}, 1, 3, 4)))
	cases := []tc{
		{
			name: "cluster record sets the id", offset: 1, batch: recs(clusterRec("xyz")),
			check: func(t *testing.T, im *controller.Image) {
				if im.ClusterID != "xyz" || im.Offset != 1 {
					t.Fatalf("cluster %q offset %d", im.ClusterID, im.Offset)
				}
			},
		},
		{
			name: "register broker with epoch 0 takes the batch offset", offset: 42, batch: recs(registerRec(7, 0, true)),
			check: func(t *testing.T, im *controller.Image) {
				b := im.Brokers[7]
				want := &controller.Broker{ID: 7, Epoch: 42, IncarnationID: "inc-" + string(rune('a'+7)), Address: "host:7", Rack: "r", Fenced: true}
				if !reflect.DeepEqual(b, want) {
					t.Fatalf("broker = %+v, want %+v", b, want)
				}
				if im.IsLive(7) {
					t.Fatal("fenced registration is live")
				}
			},
		},
		{
			name: "register broker keeps an explicit epoch and unfenced flag", offset: 42, batch: recs(registerRec(7, 9, false)),
			check: func(t *testing.T, im *controller.Image) {
				if b := im.Brokers[7]; b.Epoch != 9 || b.Fenced {
					t.Fatalf("broker = %+v", b)
				}
				if !im.IsLive(7) {
					t.Fatal("unfenced registration is not live")
				}
			},
		},
		{
			name: "re-registration replaces the incarnation", setup: brokers, offset: 10, batch: recs(registerRec(1, 0, true)),
			check: func(t *testing.T, im *controller.Image) {
				if b := im.Brokers[1]; b.Epoch != 10 || !b.Fenced {
					t.Fatalf("broker = %+v", b)
				}
			},
		},
		{
			name: "unregister removes a broker", setup: brokers, offset: 10, batch: recs(unregisterRec(1)),
			check: func(t *testing.T, im *controller.Image) {
				if im.Brokers[1] != nil || im.Brokers[2] == nil {
					t.Fatalf("brokers = %v", im.Brokers)
				}
			},
		},
		{
			name: "fence with matching epoch", setup: brokers, offset: 10, batch: recs(fenceRec(1, 1)),
			check: func(t *testing.T, im *controller.Image) {
				if !im.Brokers[1].Fenced || im.Brokers[1].Epoch != 1 {
					t.Fatalf("broker = %+v", im.Brokers[1])
				}
			},
		},
		{name: "fence with stale epoch refused", setup: brokers, offset: 10, batch: recs(fenceRec(1, 2)), wantErr: "does not match"},
		{name: "fence of unknown broker refused", setup: brokers, offset: 10, batch: recs(fenceRec(9, 1)), wantErr: "does not match"},
		{
			name: "unfence with matching epoch", setup: brokers, offset: 10, batch: recs(unfenceRec(2, 2)),
			check: func(t *testing.T, im *controller.Image) {
				if im.Brokers[2].Fenced {
					t.Fatalf("broker = %+v", im.Brokers[2])
				}
				if got := im.LiveBrokers(); len(got) != 2 || got[0].ID != 1 || got[1].ID != 2 {
					t.Fatalf("live = %v", got)
				}
			},
		},
		{name: "unfence with stale epoch refused", setup: brokers, offset: 10, batch: recs(unfenceRec(2, 1)), wantErr: "does not match"},
		{
			name: "topic and partitions", setup: brokers, offset: 10,
			batch: recs(topicRec("t", map[string]string{"a": "b"}),
				partRec("t", 0, []int32{1, 2}, []int32{1}, 1, 2, 3),
				partRec("t", 1, []int32{2, 1}, []int32{2, 1}, 2, 0, 0)),
			check: func(t *testing.T, im *controller.Image) {
				tp := im.Topic("t")
				if tp == nil || tp.ID != "id-t" || tp.Configs["a"] != "b" || len(tp.Partitions) != 2 {
					t.Fatalf("topic = %+v", tp)
				}
				want := &controller.Partition{Topic: "t", Partition: 0, Replicas: []int32{1, 2}, ISR: []int32{1}, Leader: 1, LeaderEpoch: 2, PartitionEpoch: 3}
				if got := im.Partition("t", 0); !reflect.DeepEqual(got, want) {
					t.Fatalf("partition = %+v, want %+v", got, want)
				}
				if im.Partition("t", 2) != nil || im.Partition("t", -1) != nil || im.Partition("nope", 0) != nil {
					t.Fatal("Partition returned a partition that does not exist")
				}
			},
		},
		{name: "duplicate topic refused", setup: withTopic, offset: 10, batch: recs(topicRec("t", nil)), wantErr: "already exists"},
		{name: "partition of unknown topic refused", setup: brokers, offset: 10, batch: recs(partRec("x", 0, []int32{1}, []int32{1}, 1, 0, 0)), wantErr: "unknown topic"},
		{
			name: "partition change advancing both epochs", setup: withTopic, offset: 10,
			batch: recs(changeRec("t", 0, 2, []int32{2}, 4, 5)),
			check: func(t *testing.T, im *controller.Image) {
				want := &controller.Partition{Topic: "t", Partition: 0, Replicas: []int32{1, 2}, ISR: []int32{2}, Leader: 2, LeaderEpoch: 4, PartitionEpoch: 5}
				if got := im.Partition("t", 0); !reflect.DeepEqual(got, want) {
					t.Fatalf("partition = %+v, want %+v", got, want)
				}
			},
		},
		{
			name: "partition change with same leader epoch (ISR only)", setup: withTopic, offset: 10,
			batch: recs(changeRec("t", 0, 1, []int32{1}, 3, 5)),
			check: func(t *testing.T, im *controller.Image) {
				if p := im.Partition("t", 0); p.LeaderEpoch != 3 || p.PartitionEpoch != 5 || !reflect.DeepEqual(p.ISR, []int32{1}) {
					t.Fatalf("partition = %+v", p)
				}
			},
		},
		{name: "partition change with same partition epoch refused", setup: withTopic, offset: 10, batch: recs(changeRec("t", 0, 1, []int32{1}, 3, 4)), wantErr: "do not advance"},
		{name: "partition change with older partition epoch refused", setup: withTopic, offset: 10, batch: recs(changeRec("t", 0, 1, []int32{1}, 3, 2)), wantErr: "do not advance"},
		{name: "partition change with older leader epoch refused", setup: withTopic, offset: 10, batch: recs(changeRec("t", 0, 1, []int32{1}, 2, 5)), wantErr: "do not advance"},
		{name: "partition change of unknown partition refused", setup: withTopic, offset: 10, batch: recs(changeRec("t", 1, 1, []int32{1}, 4, 5)), wantErr: "unknown partition"},
		{name: "partition change of unknown topic refused", setup: withTopic, offset: 10, batch: recs(changeRec("x", 0, 1, []int32{1}, 4, 5)), wantErr: "unknown partition"},
		{
			name: "remove topic", setup: withTopic, offset: 10, batch: recs(removeTopicRec("t")),
			check: func(t *testing.T, im *controller.Image) {
				if im.Topic("t") != nil || len(im.TopicNames()) != 0 {
					t.Fatalf("topics = %v", im.TopicNames())
				}
			},
		},
		{
			name: "remove and recreate a topic in one batch", setup: withTopic, offset: 10,
			batch: recs(removeTopicRec("t"), topicRec("t", nil), partRec("t", 0, []int32{2}, []int32{2}, 2, 0, 0)),
			check: func(t *testing.T, im *controller.Image) {
				tp := im.Topic("t")
				if tp == nil || len(tp.Configs) != 0 || len(tp.Partitions) != 1 || tp.Partitions[0].Leader != 2 {
					t.Fatalf("topic = %+v", tp)
				}
			},
		},
		{name: "remove of unknown topic refused", setup: withTopic, offset: 10, batch: recs(removeTopicRec("x")), wantErr: "unknown topic"},
		{
			name: "producer ids advance", setup: [][]*pb.MetadataRecord{recs(producerIdsRec(1000))}, offset: 10, batch: recs(producerIdsRec(2000)),
			check: func(t *testing.T, im *controller.Image) {
				if im.NextProducerID != 2000 {
					t.Fatalf("next producer id = %d", im.NextProducerID)
				}
			},
		},
		{name: "producer ids equal refused", setup: [][]*pb.MetadataRecord{recs(producerIdsRec(1000))}, offset: 10, batch: recs(producerIdsRec(1000)), wantErr: "does not advance"},
		{name: "producer ids backwards refused", setup: [][]*pb.MetadataRecord{recs(producerIdsRec(1000))}, offset: 10, batch: recs(producerIdsRec(999)), wantErr: "does not advance"},
		{name: "producer ids zero on empty refused", offset: 1, batch: recs(producerIdsRec(0)), wantErr: "does not advance"},
		{
			name: "feature level set and overwritten", setup: [][]*pb.MetadataRecord{recs(featureRec("f", 1))}, offset: 10,
			batch: recs(featureRec("f", 3), featureRec("g", 1)),
			check: func(t *testing.T, im *controller.Image) {
				if im.Feature("f") != 3 || im.Feature("g") != 1 || im.Feature("missing") != 0 {
					t.Fatalf("features = %v", im.Features)
				}
			},
		},
		{
			name: "topic config set", setup: withTopic, offset: 10, batch: recs(configRec("topic", "t", "x", "1", false), configRec("topic", "t", "k", "w", false)),
			check: func(t *testing.T, im *controller.Image) {
				if want := map[string]string{"k": "w", "x": "1"}; !reflect.DeepEqual(im.Topic("t").Configs, want) {
					t.Fatalf("configs = %v", im.Topic("t").Configs)
				}
			},
		},
		{
			name: "topic config delete", setup: withTopic, offset: 10, batch: recs(configRec("topic", "t", "k", "", true)),
			check: func(t *testing.T, im *controller.Image) {
				if len(im.Topic("t").Configs) != 0 {
					t.Fatalf("configs = %v", im.Topic("t").Configs)
				}
			},
		},
		{name: "topic config for unknown topic refused", setup: withTopic, offset: 10, batch: recs(configRec("topic", "x", "k", "v", false)), wantErr: "unknown topic"},
		{
			name: "broker config set and delete", setup: [][]*pb.MetadataRecord{recs(configRec("broker", "", "a", "1", false), configRec("broker", "", "b", "2", false))}, offset: 10,
			batch: recs(configRec("broker", "", "a", "", true), configRec("broker", "", "c", "3", false)),
			check: func(t *testing.T, im *controller.Image) {
				if want := map[string]string{"b": "2", "c": "3"}; !reflect.DeepEqual(im.BrokerConfigs, want) {
					t.Fatalf("broker configs = %v", im.BrokerConfigs)
				}
			},
		},
		{name: "config for unknown resource type refused", offset: 1, batch: recs(configRec("group", "g", "k", "v", false)), wantErr: "unknown resource type"},
		{name: "empty record refused", offset: 1, batch: recs(&pb.MetadataRecord{}), wantErr: "unknown metadata record"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := build(t, c.setup...)
			snap := deepCopy(before)
			next, d, err := controller.Apply(before, batchAt(c.offset, c.batch...))
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v, want containing %q", err, c.wantErr)
				}
				if next != nil || d != nil {
					t.Fatalf("refused batch returned image %v delta %v", next, d)
				}
			} else {
				if err != nil {
					t.Fatalf("Apply: %v", err)
				}
				if next.Offset != c.offset {
					t.Fatalf("offset = %d, want %d", next.Offset, c.offset)
				}
				c.check(t, next)
			}
			if !reflect.DeepEqual(before, snap) {
				t.Fatalf("Apply modified its input image")
			}
		})
	}
}

func TestApplyAtomic(t *testing.T) {
	cases := []struct {
		name  string
		batch []*pb.MetadataRecord
	}{
		{"broker then bad fence", recs(registerRec(9, 0, false), fenceRec(1, 99))},
		{"topic then duplicate", recs(topicRec("new", nil), partRec("new", 0, []int32{1}, []int32{1}, 1, 0, 0), topicRec("a", nil))},
		{"change then stale change", recs(changeRec("a", 0, 2, []int32{2, 3}, 1, 1), changeRec("a", 0, 2, []int32{2}, 1, 1))},
		{"remove then unknown remove", recs(removeTopicRec("a"), removeTopicRec("a"))},
		{"configs then bad type", recs(configRec("topic", "a", "x", "y", false), configRec("broker", "", "z", "1", false), featureRec("f", 9), configRec("?", "", "", "", false))},
		{"producer ids then backwards", recs(producerIdsRec(5000), clusterRec("other"), producerIdsRec(4000))},
		{"fence then unfence stale", recs(fenceRec(2, 2), unregisterRec(3), unfenceRec(2, 3))},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			img := baseImage(t)
			snap := deepCopy(img)
			next, d, err := controller.Apply(img, batchAt(100, c.batch...))
			if err == nil {
				t.Fatal("Apply accepted a batch with a bad record")
			}
			if next != nil || d != nil {
				t.Fatal("refused batch returned an image or delta")
			}
			if !reflect.DeepEqual(img, snap) {
				t.Fatal("refused batch changed the old image")
			}
			// The image is still usable: the good prefix alone applies.
			if _, _, err := controller.Apply(img, batchAt(100, c.batch[:len(c.batch)-1]...)); err != nil {
				t.Fatalf("good prefix refused: %v", err)
			}
		})
	}
}

func TestApplyImmutable(t *testing.T) {
	cases := []struct {
		name  string
		batch []*pb.MetadataRecord
	}{
		{"register", recs(registerRec(4, 0, false))},
		{"re-register", recs(registerRec(1, 0, true))},
		{"unregister", recs(unregisterRec(1))},
		{"fence", recs(fenceRec(1, 1))},
		{"new topic", recs(topicRec("c", map[string]string{"q": "r"}), partRec("c", 0, []int32{1}, []int32{1}, 1, 0, 0))},
		{"add partition", recs(partRec("a", 2, []int32{3}, []int32{3}, 3, 0, 0))},
		{"replace partition", recs(partRec("a", 0, []int32{3}, []int32{3}, 3, 9, 9))},
		{"partition change", recs(changeRec("a", 0, 2, []int32{2, 3}, 1, 1), changeRec("a", 1, 2, []int32{2}, 0, 1))},
		{"remove topic", recs(removeTopicRec("a"))},
		{"producer ids", recs(producerIdsRec(2000))},
		{"feature", recs(featureRec(controller.FeatureTransactionVersion, 1), featureRec("x", 1))},
		{"topic config", recs(configRec("topic", "a", "retention.ms", "1", false), configRec("topic", "b", "n", "v", false))},
		{"topic config delete", recs(configRec("topic", "a", "retention.ms", "", true))},
		{"broker config", recs(configRec("broker", "", "log.retention.ms", "", true), configRec("broker", "", "y", "1", false))},
		{"cluster", recs(clusterRec("c2"))},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			img := baseImage(t)
			snap := deepCopy(img)
			next, _, err := controller.Apply(img, batchAt(100, c.batch...))
			if err != nil {
				t.Fatalf("Apply: %v", err)
			}
			if !reflect.DeepEqual(img, snap) {
				t.Fatal("Apply modified the old image")
			}
			sameOffset := *next
			sameOffset.Offset = snap.Offset
			if reflect.DeepEqual(&sameOffset, snap) {
				t.Fatal("the batch changed nothing")
			}
			// Building on the new image must not reach back into the old one
			// either (shared, unchanged parts stay shared read-only).
			nextSnap := deepCopy(next)
			more := recs(
				changeRec("b", 0, 1, []int32{1}, 6, 8),
				configRec("topic", "b", "later", "1", false),
				configRec("broker", "", "later", "1", false),
				featureRec("later", 1),
				registerRec(5, 0, false),
			)
			if _, _, err := controller.Apply(next, batchAt(101, more...)); err != nil {
				t.Fatalf("second Apply: %v", err)
			}
			if !reflect.DeepEqual(img, snap) {
				t.Fatal("a later Apply modified the first image")
			}
			if !reflect.DeepEqual(next, nextSnap) {
				t.Fatal("a later Apply modified the second image")
			}
		})
	}
}

// partKey names a partition change in a delta.
type partKey struct {
	topic string
	p     int32
}

func TestApplyDelta(t *testing.T) {
	type want struct {
		partitions   map[partKey]bool // key -> Old must be nil (new partition)
		deleted      []string
		brokers      []int32
		topicConfigs []string
		empty        bool
	}
	cases := []struct {
		name  string
		batch []*pb.MetadataRecord
		want  want
	}{
		{"cluster only", recs(clusterRec("zz")), want{empty: true}},
		{"producer ids and features are not in the delta", recs(producerIdsRec(3000), featureRec("f", 1), configRec("broker", "", "k", "v", false)), want{empty: true}},
		{"register", recs(registerRec(4, 0, false)), want{brokers: []int32{4}}},
		{"fence and unfence", recs(fenceRec(1, 1), unfenceRec(1, 1)), want{brokers: []int32{1, 1}}},
		{"unregister", recs(unregisterRec(2)), want{brokers: []int32{2}}},
		{"unregister unknown is a no-op", recs(unregisterRec(9)), want{empty: true}},
		{"new topic", recs(topicRec("c", nil), partRec("c", 0, []int32{1}, []int32{1}, 1, 0, 0), partRec("c", 1, []int32{2}, []int32{2}, 2, 0, 0)),
			want{partitions: map[partKey]bool{{"c", 0}: true, {"c", 1}: true}}},
		{"partition change", recs(changeRec("a", 1, 3, []int32{3, 1}, 1, 1)), want{partitions: map[partKey]bool{{"a", 1}: false}}},
		{"two changes to one partition appear once", recs(changeRec("a", 0, 2, []int32{2, 3}, 1, 1), changeRec("a", 0, 3, []int32{3}, 2, 2)),
			want{partitions: map[partKey]bool{{"a", 0}: false}}},
		{"changes sorted by topic then partition", recs(changeRec("b", 0, 1, []int32{1}, 6, 8), changeRec("a", 1, 3, []int32{3}, 1, 1), changeRec("a", 0, 2, []int32{2}, 1, 1)),
			want{partitions: map[partKey]bool{{"a", 0}: false, {"a", 1}: false, {"b", 0}: false}}},
		{"remove topic", recs(removeTopicRec("a")), want{deleted: []string{"a"}}},
		{"change then remove in one batch", recs(changeRec("a", 0, 2, []int32{2}, 1, 1), removeTopicRec("a")), want{deleted: []string{"a"}}},
		{"topic configs", recs(configRec("topic", "a", "x", "1", false), configRec("topic", "b", "x", "", true)), want{topicConfigs: []string{"a", "b"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			img := baseImage(t)
			next, d, err := controller.Apply(img, batchAt(100, c.batch...))
			if err != nil {
				t.Fatalf("Apply: %v", err)
			}
			if d.Snapshot {
				t.Fatal("incremental batch produced a snapshot delta")
			}
			if d.Empty() != c.want.empty {
				t.Fatalf("Empty() = %v, want %v (delta %+v)", d.Empty(), c.want.empty, d)
			}
			if len(d.Partitions) != len(c.want.partitions) {
				t.Fatalf("delta partitions = %d, want %d", len(d.Partitions), len(c.want.partitions))
			}
			for i, pc := range d.Partitions {
				k := partKey{pc.New.Topic, pc.New.Partition}
				isNew, ok := c.want.partitions[k]
				if !ok {
					t.Fatalf("unexpected partition %v in delta", k)
				}
				if i > 0 {
					prev := d.Partitions[i-1].New
					if prev.Topic > k.topic || (prev.Topic == k.topic && prev.Partition >= k.p) {
						t.Fatalf("delta partitions not sorted: %s-%d before %s-%d", prev.Topic, prev.Partition, k.topic, k.p)
					}
				}
				if pc.New != next.Partition(k.topic, k.p) {
					t.Fatalf("%v: New is not the new image's partition", k)
				}
				if isNew {
					if pc.Old != nil {
						t.Fatalf("%v: Old = %+v for a new partition", k, pc.Old)
					}
				} else if pc.Old != img.Partition(k.topic, k.p) {
					t.Fatalf("%v: Old is not the old image's partition", k)
				}
			}
			var deleted []string
			for _, tp := range d.DeletedTopics {
				deleted = append(deleted, tp.Name)
				if tp != img.Topic(tp.Name) {
					t.Fatalf("deleted topic %s is not the old image's topic", tp.Name)
				}
				if len(tp.Partitions) == 0 {
					t.Fatalf("deleted topic %s lost its partitions", tp.Name)
				}
			}
			if !reflect.DeepEqual(deleted, c.want.deleted) {
				t.Fatalf("deleted = %v, want %v", deleted, c.want.deleted)
			}
			if !reflect.DeepEqual(d.Brokers, c.want.brokers) {
				t.Fatalf("brokers = %v, want %v", d.Brokers, c.want.brokers)
			}
			if !reflect.DeepEqual(d.TopicConfigs, c.want.topicConfigs) {
				t.Fatalf("topic configs = %v, want %v", d.TopicConfigs, c.want.topicConfigs)
			}
		})
	}
}

func TestApplySnapshotBatch(t *testing.T) {
	old := baseImage(t)
	// The snapshot describes a different world: topic "a" is gone, "b"
	// changed leader, "c" is new, broker 3 is gone.
	other := build(t,
		recs(clusterRec("c1"), registerRec(1, 0, false)),
		recs(registerRec(2, 0, false)),
		recs(topicRec("b", nil), partRec("b", 0, []int32{3, 1}, []int32{1}, 1, 6, 8)),
		recs(topicRec("c", nil), partRec("c", 0, []int32{2}, []int32{2}, 2, 0, 0)),
	)
	snap := other.SnapshotRecords()
	if !snap.Snapshot || snap.Offset != other.Offset {
		t.Fatalf("snapshot batch offset %d snapshot %v", snap.Offset, snap.Snapshot)
	}
	oldCopy := deepCopy(old)
	next, d, err := controller.Apply(old, snap)
	if err != nil {
		t.Fatalf("Apply snapshot: %v", err)
	}
	if !reflect.DeepEqual(old, oldCopy) {
		t.Fatal("snapshot apply modified the old image")
	}
	if !reflect.DeepEqual(next, other) {
		t.Fatalf("snapshot apply = %+v, want %+v", next, other)
	}
	if !d.Snapshot || d.Empty() {
		t.Fatalf("delta = %+v, want a snapshot delta", d)
	}
	gotOld := map[partKey]*controller.Partition{}
	for _, pc := range d.Partitions {
		gotOld[partKey{pc.New.Topic, pc.New.Partition}] = pc.Old
	}
	if len(gotOld) != 2 {
		t.Fatalf("snapshot delta partitions = %v", gotOld)
	}
	if o, ok := gotOld[partKey{"b", 0}]; !ok || o != old.Partition("b", 0) {
		t.Fatalf("b-0 Old = %v", o)
	}
	if o, ok := gotOld[partKey{"c", 0}]; !ok || o != nil {
		t.Fatalf("c-0 Old = %v, want nil", o)
	}
	if len(d.DeletedTopics) != 1 || d.DeletedTopics[0] != old.Topic("a") {
		t.Fatalf("deleted = %v", d.DeletedTopics)
	}
	brokers := append([]int32(nil), d.Brokers...)
	sort.Slice(brokers, func(i, j int) bool { return brokers[i] < brokers[j] })
	if !reflect.DeepEqual(brokers, []int32{1, 2}) {
		t.Fatalf("brokers = %v", brokers)
	}

	// A bad snapshot batch is refused as a whole.
	bad := proto.Clone(snap).(*pb.MetadataBatch)
	bad.Records = append(bad.Records, removeTopicRec("nope"))
	if n, _, err := controller.Apply(old, bad); err == nil || n != nil {
		t.Fatalf("bad snapshot accepted: %v", err)
	}
}

func TestImageSnapshotRoundTrip(t *testing.T) {
	cases := []struct {
		name string
		img  func(t *testing.T) *controller.Image
	}{
		{"empty", func(t *testing.T) *controller.Image { return controller.EmptyImage() }},
		{"base", baseImage},
		{"after changes", func(t *testing.T) *controller.Image {
			img := baseImage(t)
			next, _, err := controller.Apply(img, batchAt(50,
				fenceRec(2, 2), changeRec("a", 1, 3, []int32{3, 1}, 1, 1), changeRec("a", 0, 1, []int32{1, 3}, 0, 1),
				registerRec(4, 0, true), configRec("topic", "b", "unclean.leader.election.enable", "true", false),
				removeTopicRec("a"), topicRec("a", map[string]string{"z": "1"}), partRec("a", 0, []int32{4}, nil, controller.NoLeader, 0, 0),
				producerIdsRec(7000), featureRec("other", 3), configRec("broker", "", "log.retention.ms", "", true)))
			if err != nil {
				t.Fatal(err)
			}
			return next
		}},
		{"internal topic and no producer ids", func(t *testing.T) *controller.Image {
			img := build(t, recs(registerRec(1, 0, false)))
			next, _, err := controller.Apply(img, batchAt(2,
				&pb.MetadataRecord{Record: &pb.MetadataRecord_Topic{Topic: &pb.TopicRecord{Name: controller.InternalOffsetsTopic, TopicId: "x", Internal: true}}},
				partRec(controller.InternalOffsetsTopic, 0, []int32{1}, []int32{1}, 1, 0, 0)))
			if err != nil {
				t.Fatal(err)
			}
			return next
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			img := c.img(t)
			snap := img.SnapshotRecords()
			// Go through the wire format, as a Raft snapshot or a metadata
			// stream does.
			data, err := proto.Marshal(snap)
			if err != nil {
				t.Fatal(err)
			}
			var wire pb.MetadataBatch
			if err := proto.Unmarshal(data, &wire); err != nil {
				t.Fatal(err)
			}
			for name, b := range map[string]*pb.MetadataBatch{"direct": snap, "wire": &wire} {
				got, d, err := controller.Apply(controller.EmptyImage(), b)
				if err != nil {
					t.Fatalf("%s: Apply snapshot: %v", name, err)
				}
				if !d.Snapshot {
					t.Fatalf("%s: delta is not a snapshot delta", name)
				}
				if !reflect.DeepEqual(got, img) {
					t.Fatalf("%s: round trip\n got %+v\nwant %+v", name, got, img)
				}
			}
		})
	}
}

// TestApplySnapshotDeletedTopics: a snapshot batch reports as deleted every
// topic of the old image it does not carry on, including one deleted and
// created again under the same name (a new topic id) in the meantime, whose
// old replicas must go just as after a RemoveTopic record.
func TestApplySnapshotDeletedTopics(t *testing.T) {
	withID := func(name, id string) *pb.MetadataRecord {
		return &pb.MetadataRecord{Record: &pb.MetadataRecord_Topic{Topic: &pb.TopicRecord{Name: name, TopicId: id}}}
	}
	p0 := func(name string) *pb.MetadataRecord {
		return partRec(name, 0, []int32{1}, []int32{1}, 1, 0, 0)
	}
	oldImg := build(t,
		recs(registerRec(1, 0, false)),
		recs(withID("keep", "k1"), partRec("keep", 0, []int32{1}, []int32{1}, 1, 0, 0),
			withID("gone", "g1"), partRec("gone", 0, []int32{1}, []int32{1}, 1, 0, 0),
			withID("again", "a1"), partRec("again", 0, []int32{1}, []int32{1}, 1, 0, 0)),
	)
	cases := []struct {
		name        string
		snapshot    []*pb.MetadataRecord
		wantDeleted []string
	}{
		{"same topics", recs(withID("keep", "k1"), withID("gone", "g1"), withID("again", "a1"), p0("again")), nil},
		{"topic missing", recs(withID("keep", "k1"), withID("again", "a1"), p0("again")), []string{"gone"}},
		{"topic recreated with a new id", recs(withID("keep", "k1"), withID("gone", "g1"), withID("again", "a2"), p0("again")), []string{"again"}},
		{"both", recs(withID("keep", "k1"), withID("again", "a2"), p0("again")), []string{"again", "gone"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := batchAt(10, append(recs(registerRec(1, 1, false)), c.snapshot...)...)
			b.Snapshot = true
			next, d, err := controller.Apply(oldImg, b)
			if err != nil {
				t.Fatal(err)
			}
			if len(d.Partitions) != 1 {
				t.Fatalf("delta partitions = %d, want 1", len(d.Partitions))
			}
			var got []string
			for _, tp := range d.DeletedTopics {
				if tp != oldImg.Topic(tp.Name) {
					t.Fatalf("deleted topic %s is not the old image's", tp.Name)
				}
				got = append(got, tp.Name)
			}
			sort.Strings(got)
			if !reflect.DeepEqual(got, c.wantDeleted) {
				t.Fatalf("deleted = %v, want %v", got, c.wantDeleted)
			}
			// A recreated topic's partitions are new: no Old state.
			for _, pc := range d.Partitions {
				var want *controller.Partition
				if o := oldImg.Topic(pc.New.Topic); o != nil && o.ID == next.Topic(pc.New.Topic).ID {
					want = oldImg.Partition(pc.New.Topic, pc.New.Partition)
				}
				if pc.Old != want {
					t.Fatalf("%s-%d: Old = %+v, want %+v", pc.New.Topic, pc.New.Partition, pc.Old, want)
				}
			}
		})
	}
}
