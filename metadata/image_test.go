package metadata_test

import (
	"reflect"
	"sort"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/strand-io/strand/metadata"
	mt "github.com/strand-io/strand/metadata/metadatatest"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

func TestApplyRecords(t *testing.T) {
	type tc struct {
		name    string
		setup   [][]*pb.MetadataRecord
		offset  int64
		batch   []*pb.MetadataRecord
		wantErr string // substring; "" means success
		check   func(t *testing.T, im *metadata.Image)
	}
	brokers := [][]*pb.MetadataRecord{mt.Recs(mt.RegisterRec(1, 0, false)), mt.Recs(mt.RegisterRec(2, 0, true))}
	withTopic := append(append([][]*pb.MetadataRecord{}, brokers...),
		mt.Recs(mt.TopicRec("t", map[string]string{"k": "v"}), mt.PartRec("t", 0, []int32{1, 2}, []int32{1, 2}, 1, 3, 4)))
	cases := []tc{
		{
			name: "cluster record sets the id", offset: 1, batch: mt.Recs(mt.ClusterRec("xyz")),
			check: func(t *testing.T, im *metadata.Image) {
				if im.ClusterID != "xyz" || im.Offset != 1 {
					t.Fatalf("cluster %q offset %d", im.ClusterID, im.Offset)
				}
			},
		},
		{
			name: "register broker with epoch 0 takes the batch offset", offset: 42, batch: mt.Recs(mt.RegisterRec(7, 0, true)),
			check: func(t *testing.T, im *metadata.Image) {
				b := im.Brokers[7]
				want := &metadata.Broker{ID: 7, Epoch: 42, IncarnationID: "inc-" + string(rune('a'+7)), Address: "host:7", Rack: "r", Fenced: true}
				if !reflect.DeepEqual(b, want) {
					t.Fatalf("broker = %+v, want %+v", b, want)
				}
				if im.IsLive(7) {
					t.Fatal("fenced registration is live")
				}
			},
		},
		{
			name: "register broker keeps an explicit epoch and unfenced flag", offset: 42, batch: mt.Recs(mt.RegisterRec(7, 9, false)),
			check: func(t *testing.T, im *metadata.Image) {
				if b := im.Brokers[7]; b.Epoch != 9 || b.Fenced {
					t.Fatalf("broker = %+v", b)
				}
				if !im.IsLive(7) {
					t.Fatal("unfenced registration is not live")
				}
			},
		},
		{
			name: "re-registration replaces the incarnation", setup: brokers, offset: 10, batch: mt.Recs(mt.RegisterRec(1, 0, true)),
			check: func(t *testing.T, im *metadata.Image) {
				if b := im.Brokers[1]; b.Epoch != 10 || !b.Fenced {
					t.Fatalf("broker = %+v", b)
				}
			},
		},
		{
			name: "unregister removes a broker", setup: brokers, offset: 10, batch: mt.Recs(mt.UnregisterRec(1)),
			check: func(t *testing.T, im *metadata.Image) {
				if im.Brokers[1] != nil || im.Brokers[2] == nil {
					t.Fatalf("brokers = %v", im.Brokers)
				}
			},
		},
		{
			name: "fence with matching epoch", setup: brokers, offset: 10, batch: mt.Recs(mt.FenceRec(1, 1)),
			check: func(t *testing.T, im *metadata.Image) {
				if !im.Brokers[1].Fenced || im.Brokers[1].Epoch != 1 {
					t.Fatalf("broker = %+v", im.Brokers[1])
				}
			},
		},
		{name: "fence with stale epoch refused", setup: brokers, offset: 10, batch: mt.Recs(mt.FenceRec(1, 2)), wantErr: "does not match"},
		{name: "fence of unknown broker refused", setup: brokers, offset: 10, batch: mt.Recs(mt.FenceRec(9, 1)), wantErr: "does not match"},
		{
			name: "unfence with matching epoch", setup: brokers, offset: 10, batch: mt.Recs(mt.UnfenceRec(2, 2)),
			check: func(t *testing.T, im *metadata.Image) {
				if im.Brokers[2].Fenced {
					t.Fatalf("broker = %+v", im.Brokers[2])
				}
				if got := im.LiveBrokers(); len(got) != 2 || got[0].ID != 1 || got[1].ID != 2 {
					t.Fatalf("live = %v", got)
				}
			},
		},
		{name: "unfence with stale epoch refused", setup: brokers, offset: 10, batch: mt.Recs(mt.UnfenceRec(2, 1)), wantErr: "does not match"},
		{
			name: "topic and partitions", setup: brokers, offset: 10,
			batch: mt.Recs(mt.TopicRec("t", map[string]string{"a": "b"}),
				mt.PartRec("t", 0, []int32{1, 2}, []int32{1}, 1, 2, 3),
				mt.PartRec("t", 1, []int32{2, 1}, []int32{2, 1}, 2, 0, 0)),
			check: func(t *testing.T, im *metadata.Image) {
				tp := im.Topic("t")
				if tp == nil || tp.ID != "id-t" || tp.Configs["a"] != "b" || len(tp.Partitions) != 2 {
					t.Fatalf("topic = %+v", tp)
				}
				want := &metadata.Partition{Topic: "t", Partition: 0, Replicas: []int32{1, 2}, ISR: []int32{1}, Leader: 1, LeaderEpoch: 2, PartitionEpoch: 3}
				if got := im.Partition("t", 0); !reflect.DeepEqual(got, want) {
					t.Fatalf("partition = %+v, want %+v", got, want)
				}
				if im.Partition("t", 2) != nil || im.Partition("t", -1) != nil || im.Partition("nope", 0) != nil {
					t.Fatal("Partition returned a partition that does not exist")
				}
			},
		},
		{name: "duplicate topic refused", setup: withTopic, offset: 10, batch: mt.Recs(mt.TopicRec("t", nil)), wantErr: "already exists"},
		{name: "partition of unknown topic refused", setup: brokers, offset: 10, batch: mt.Recs(mt.PartRec("x", 0, []int32{1}, []int32{1}, 1, 0, 0)), wantErr: "unknown topic"},
		{
			name: "partition change advancing both epochs", setup: withTopic, offset: 10,
			batch: mt.Recs(mt.ChangeRec("t", 0, 2, []int32{2}, 4, 5)),
			check: func(t *testing.T, im *metadata.Image) {
				want := &metadata.Partition{Topic: "t", Partition: 0, Replicas: []int32{1, 2}, ISR: []int32{2}, Leader: 2, LeaderEpoch: 4, PartitionEpoch: 5}
				if got := im.Partition("t", 0); !reflect.DeepEqual(got, want) {
					t.Fatalf("partition = %+v, want %+v", got, want)
				}
			},
		},
		{
			name: "partition change with same leader epoch (ISR only)", setup: withTopic, offset: 10,
			batch: mt.Recs(mt.ChangeRec("t", 0, 1, []int32{1}, 3, 5)),
			check: func(t *testing.T, im *metadata.Image) {
				if p := im.Partition("t", 0); p.LeaderEpoch != 3 || p.PartitionEpoch != 5 || !reflect.DeepEqual(p.ISR, []int32{1}) {
					t.Fatalf("partition = %+v", p)
				}
			},
		},
		{name: "partition change with same partition epoch refused", setup: withTopic, offset: 10, batch: mt.Recs(mt.ChangeRec("t", 0, 1, []int32{1}, 3, 4)), wantErr: "do not advance"},
		{name: "partition change with older partition epoch refused", setup: withTopic, offset: 10, batch: mt.Recs(mt.ChangeRec("t", 0, 1, []int32{1}, 3, 2)), wantErr: "do not advance"},
		{name: "partition change with older leader epoch refused", setup: withTopic, offset: 10, batch: mt.Recs(mt.ChangeRec("t", 0, 1, []int32{1}, 2, 5)), wantErr: "do not advance"},
		{name: "partition change of unknown partition refused", setup: withTopic, offset: 10, batch: mt.Recs(mt.ChangeRec("t", 1, 1, []int32{1}, 4, 5)), wantErr: "unknown partition"},
		{name: "partition change of unknown topic refused", setup: withTopic, offset: 10, batch: mt.Recs(mt.ChangeRec("x", 0, 1, []int32{1}, 4, 5)), wantErr: "unknown partition"},
		{
			name: "remove topic", setup: withTopic, offset: 10, batch: mt.Recs(mt.RemoveTopicRec("t")),
			check: func(t *testing.T, im *metadata.Image) {
				if im.Topic("t") != nil || len(im.TopicNames()) != 0 {
					t.Fatalf("topics = %v", im.TopicNames())
				}
			},
		},
		{
			name: "remove and recreate a topic in one batch", setup: withTopic, offset: 10,
			batch: mt.Recs(mt.RemoveTopicRec("t"), mt.TopicRec("t", nil), mt.PartRec("t", 0, []int32{2}, []int32{2}, 2, 0, 0)),
			check: func(t *testing.T, im *metadata.Image) {
				tp := im.Topic("t")
				if tp == nil || len(tp.Configs) != 0 || len(tp.Partitions) != 1 || tp.Partitions[0].Leader != 2 {
					t.Fatalf("topic = %+v", tp)
				}
			},
		},
		{name: "remove of unknown topic refused", setup: withTopic, offset: 10, batch: mt.Recs(mt.RemoveTopicRec("x")), wantErr: "unknown topic"},
		{
			name: "producer ids advance", setup: [][]*pb.MetadataRecord{mt.Recs(mt.ProducerIdsRec(1000))}, offset: 10, batch: mt.Recs(mt.ProducerIdsRec(2000)),
			check: func(t *testing.T, im *metadata.Image) {
				if im.NextProducerID != 2000 {
					t.Fatalf("next producer id = %d", im.NextProducerID)
				}
			},
		},
		{name: "producer ids equal refused", setup: [][]*pb.MetadataRecord{mt.Recs(mt.ProducerIdsRec(1000))}, offset: 10, batch: mt.Recs(mt.ProducerIdsRec(1000)), wantErr: "does not advance"},
		{name: "producer ids backwards refused", setup: [][]*pb.MetadataRecord{mt.Recs(mt.ProducerIdsRec(1000))}, offset: 10, batch: mt.Recs(mt.ProducerIdsRec(999)), wantErr: "does not advance"},
		{name: "producer ids zero on empty refused", offset: 1, batch: mt.Recs(mt.ProducerIdsRec(0)), wantErr: "does not advance"},
		{
			name: "feature level set and overwritten", setup: [][]*pb.MetadataRecord{mt.Recs(mt.FeatureRec("f", 1))}, offset: 10,
			batch: mt.Recs(mt.FeatureRec("f", 3), mt.FeatureRec("g", 1)),
			check: func(t *testing.T, im *metadata.Image) {
				if im.Feature("f") != 3 || im.Feature("g") != 1 || im.Feature("missing") != 0 {
					t.Fatalf("features = %v", im.Features)
				}
			},
		},
		{
			name: "topic config set", setup: withTopic, offset: 10, batch: mt.Recs(mt.ConfigRec("topic", "t", "x", "1", false), mt.ConfigRec("topic", "t", "k", "w", false)),
			check: func(t *testing.T, im *metadata.Image) {
				if want := map[string]string{"k": "w", "x": "1"}; !reflect.DeepEqual(im.Topic("t").Configs, want) {
					t.Fatalf("configs = %v", im.Topic("t").Configs)
				}
			},
		},
		{
			name: "topic config delete", setup: withTopic, offset: 10, batch: mt.Recs(mt.ConfigRec("topic", "t", "k", "", true)),
			check: func(t *testing.T, im *metadata.Image) {
				if len(im.Topic("t").Configs) != 0 {
					t.Fatalf("configs = %v", im.Topic("t").Configs)
				}
			},
		},
		{name: "topic config for unknown topic refused", setup: withTopic, offset: 10, batch: mt.Recs(mt.ConfigRec("topic", "x", "k", "v", false)), wantErr: "unknown topic"},
		{
			name: "broker config set and delete", setup: [][]*pb.MetadataRecord{mt.Recs(mt.ConfigRec("broker", "", "a", "1", false), mt.ConfigRec("broker", "", "b", "2", false))}, offset: 10,
			batch: mt.Recs(mt.ConfigRec("broker", "", "a", "", true), mt.ConfigRec("broker", "", "c", "3", false)),
			check: func(t *testing.T, im *metadata.Image) {
				if want := map[string]string{"b": "2", "c": "3"}; !reflect.DeepEqual(im.BrokerConfigs, want) {
					t.Fatalf("broker configs = %v", im.BrokerConfigs)
				}
			},
		},
		{name: "config for unknown resource type refused", offset: 1, batch: mt.Recs(mt.ConfigRec("group", "g", "k", "v", false)), wantErr: "unknown resource type"},
		{name: "empty record refused (a kind this binary does not know)", offset: 1, batch: mt.Recs(&pb.MetadataRecord{}), wantErr: "record kind this binary does not know"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := mt.Build(t, c.setup...)
			snap := mt.DeepCopy(before)
			next, d, err := metadata.Apply(before, mt.BatchAt(c.offset, c.batch...))
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
		{"broker then bad fence", mt.Recs(mt.RegisterRec(9, 0, false), mt.FenceRec(1, 99))},
		{"topic then duplicate", mt.Recs(mt.TopicRec("new", nil), mt.PartRec("new", 0, []int32{1}, []int32{1}, 1, 0, 0), mt.TopicRec("a", nil))},
		{"change then stale change", mt.Recs(mt.ChangeRec("a", 0, 2, []int32{2, 3}, 1, 1), mt.ChangeRec("a", 0, 2, []int32{2}, 1, 1))},
		{"remove then unknown remove", mt.Recs(mt.RemoveTopicRec("a"), mt.RemoveTopicRec("a"))},
		{"configs then bad type", mt.Recs(mt.ConfigRec("topic", "a", "x", "y", false), mt.ConfigRec("broker", "", "z", "1", false), mt.FeatureRec("f", 9), mt.ConfigRec("?", "", "", "", false))},
		{"producer ids then backwards", mt.Recs(mt.ProducerIdsRec(5000), mt.ClusterRec("other"), mt.ProducerIdsRec(4000))},
		{"fence then unfence stale", mt.Recs(mt.FenceRec(2, 2), mt.UnregisterRec(3), mt.UnfenceRec(2, 3))},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			img := mt.BaseImage(t)
			snap := mt.DeepCopy(img)
			next, d, err := metadata.Apply(img, mt.BatchAt(100, c.batch...))
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
			if _, _, err := metadata.Apply(img, mt.BatchAt(100, c.batch[:len(c.batch)-1]...)); err != nil {
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
		{"register", mt.Recs(mt.RegisterRec(4, 0, false))},
		{"re-register", mt.Recs(mt.RegisterRec(1, 0, true))},
		{"unregister", mt.Recs(mt.UnregisterRec(1))},
		{"fence", mt.Recs(mt.FenceRec(1, 1))},
		{"new topic", mt.Recs(mt.TopicRec("c", map[string]string{"q": "r"}), mt.PartRec("c", 0, []int32{1}, []int32{1}, 1, 0, 0))},
		{"add partition", mt.Recs(mt.PartRec("a", 2, []int32{3}, []int32{3}, 3, 0, 0))},
		{"replace partition", mt.Recs(mt.PartRec("a", 0, []int32{3}, []int32{3}, 3, 9, 9))},
		{"partition change", mt.Recs(mt.ChangeRec("a", 0, 2, []int32{2, 3}, 1, 1), mt.ChangeRec("a", 1, 2, []int32{2}, 0, 1))},
		{"remove topic", mt.Recs(mt.RemoveTopicRec("a"))},
		{"producer ids", mt.Recs(mt.ProducerIdsRec(2000))},
		{"feature", mt.Recs(mt.FeatureRec(metadata.FeatureTransactionVersion, 1), mt.FeatureRec("x", 1))},
		{"topic config", mt.Recs(mt.ConfigRec("topic", "a", "retention.ms", "1", false), mt.ConfigRec("topic", "b", "n", "v", false))},
		{"topic config delete", mt.Recs(mt.ConfigRec("topic", "a", "retention.ms", "", true))},
		{"broker config", mt.Recs(mt.ConfigRec("broker", "", "log.retention.ms", "", true), mt.ConfigRec("broker", "", "y", "1", false))},
		{"per-broker config", mt.Recs(mt.ConfigRec("broker", "1", "leader.replication.throttled.rate", "100", false), mt.ConfigRec("broker", "2", "y", "1", false))},
		{"cluster", mt.Recs(mt.ClusterRec("c2"))},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			img := mt.BaseImage(t)
			snap := mt.DeepCopy(img)
			next, _, err := metadata.Apply(img, mt.BatchAt(100, c.batch...))
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
			nextSnap := mt.DeepCopy(next)
			more := mt.Recs(
				mt.ChangeRec("b", 0, 1, []int32{1}, 6, 8),
				mt.ConfigRec("topic", "b", "later", "1", false),
				mt.ConfigRec("broker", "", "later", "1", false),
				mt.FeatureRec("later", 1),
				mt.RegisterRec(5, 0, false),
			)
			if _, _, err := metadata.Apply(next, mt.BatchAt(101, more...)); err != nil {
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
		{"cluster only", mt.Recs(mt.ClusterRec("zz")), want{empty: true}},
		{"producer ids and features are not in the delta", mt.Recs(mt.ProducerIdsRec(3000), mt.FeatureRec("f", 1)), want{empty: true}},
		{"register", mt.Recs(mt.RegisterRec(4, 0, false)), want{brokers: []int32{4}}},
		{"fence and unfence", mt.Recs(mt.FenceRec(1, 1), mt.UnfenceRec(1, 1)), want{brokers: []int32{1, 1}}},
		{"unregister", mt.Recs(mt.UnregisterRec(2)), want{brokers: []int32{2}}},
		{"unregister unknown is a no-op", mt.Recs(mt.UnregisterRec(9)), want{empty: true}},
		{"new topic", mt.Recs(mt.TopicRec("c", nil), mt.PartRec("c", 0, []int32{1}, []int32{1}, 1, 0, 0), mt.PartRec("c", 1, []int32{2}, []int32{2}, 2, 0, 0)),
			want{partitions: map[partKey]bool{{"c", 0}: true, {"c", 1}: true}}},
		{"partition change", mt.Recs(mt.ChangeRec("a", 1, 3, []int32{3, 1}, 1, 1)), want{partitions: map[partKey]bool{{"a", 1}: false}}},
		{"two changes to one partition appear once", mt.Recs(mt.ChangeRec("a", 0, 2, []int32{2, 3}, 1, 1), mt.ChangeRec("a", 0, 3, []int32{3}, 2, 2)),
			want{partitions: map[partKey]bool{{"a", 0}: false}}},
		{"changes sorted by topic then partition", mt.Recs(mt.ChangeRec("b", 0, 1, []int32{1}, 6, 8), mt.ChangeRec("a", 1, 3, []int32{3}, 1, 1), mt.ChangeRec("a", 0, 2, []int32{2}, 1, 1)),
			want{partitions: map[partKey]bool{{"a", 0}: false, {"a", 1}: false, {"b", 0}: false}}},
		{"remove topic", mt.Recs(mt.RemoveTopicRec("a")), want{deleted: []string{"a"}}},
		{"change then remove in one batch", mt.Recs(mt.ChangeRec("a", 0, 2, []int32{2}, 1, 1), mt.RemoveTopicRec("a")), want{deleted: []string{"a"}}},
		{"topic configs", mt.Recs(mt.ConfigRec("topic", "a", "x", "1", false), mt.ConfigRec("topic", "b", "x", "", true)), want{topicConfigs: []string{"a", "b"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			img := mt.BaseImage(t)
			next, d, err := metadata.Apply(img, mt.BatchAt(100, c.batch...))
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
	old := mt.BaseImage(t)
	// The snapshot describes a different world: topic "a" is gone, "b"
	// changed leader, "c" is new, broker 3 is gone.
	other := mt.Build(t,
		mt.Recs(mt.ClusterRec("c1"), mt.RegisterRec(1, 0, false)),
		mt.Recs(mt.RegisterRec(2, 0, false)),
		mt.Recs(mt.TopicRec("b", nil), mt.PartRec("b", 0, []int32{3, 1}, []int32{1}, 1, 6, 8)),
		mt.Recs(mt.TopicRec("c", nil), mt.PartRec("c", 0, []int32{2}, []int32{2}, 2, 0, 0)),
	)
	snap := other.SnapshotRecords()
	if !snap.Snapshot || snap.Offset != other.Offset {
		t.Fatalf("snapshot batch offset %d snapshot %v", snap.Offset, snap.Snapshot)
	}
	oldCopy := mt.DeepCopy(old)
	next, d, err := metadata.Apply(old, snap)
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
	gotOld := map[partKey]*metadata.Partition{}
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
	bad.Records = append(bad.Records, mt.RemoveTopicRec("nope"))
	if n, _, err := metadata.Apply(old, bad); err == nil || n != nil {
		t.Fatalf("bad snapshot accepted: %v", err)
	}
}

func TestImageSnapshotRoundTrip(t *testing.T) {
	cases := []struct {
		name string
		img  func(t testing.TB) *metadata.Image
	}{
		{"empty", func(t testing.TB) *metadata.Image { return metadata.EmptyImage() }},
		{"base", mt.BaseImage},
		{"after changes", func(t testing.TB) *metadata.Image {
			img := mt.BaseImage(t)
			next, _, err := metadata.Apply(img, mt.BatchAt(50,
				mt.FenceRec(2, 2), mt.ChangeRec("a", 1, 3, []int32{3, 1}, 1, 1), mt.ChangeRec("a", 0, 1, []int32{1, 3}, 0, 1),
				mt.RegisterRec(4, 0, true), mt.ConfigRec("topic", "b", "unclean.leader.election.enable", "true", false),
				mt.RemoveTopicRec("a"), mt.TopicRec("a", map[string]string{"z": "1"}), mt.PartRec("a", 0, []int32{4}, nil, metadata.NoLeader, 0, 0),
				mt.ProducerIdsRec(7000), mt.FeatureRec("other", 3), mt.ConfigRec("broker", "", "log.retention.ms", "", true)))
			if err != nil {
				t.Fatal(err)
			}
			return next
		}},
		{"internal topic and no producer ids", func(t testing.TB) *metadata.Image {
			img := mt.Build(t, mt.Recs(mt.RegisterRec(1, 0, false)))
			next, _, err := metadata.Apply(img, mt.BatchAt(2,
				&pb.MetadataRecord{Record: &pb.MetadataRecord_Topic{Topic: &pb.TopicRecord{Name: metadata.InternalOffsetsTopic, TopicId: "x", Internal: true}}},
				mt.PartRec(metadata.InternalOffsetsTopic, 0, []int32{1}, []int32{1}, 1, 0, 0)))
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
				got, d, err := metadata.Apply(metadata.EmptyImage(), b)
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
		return mt.PartRec(name, 0, []int32{1}, []int32{1}, 1, 0, 0)
	}
	oldImg := mt.Build(t,
		mt.Recs(mt.RegisterRec(1, 0, false)),
		mt.Recs(withID("keep", "k1"), mt.PartRec("keep", 0, []int32{1}, []int32{1}, 1, 0, 0),
			withID("gone", "g1"), mt.PartRec("gone", 0, []int32{1}, []int32{1}, 1, 0, 0),
			withID("again", "a1"), mt.PartRec("again", 0, []int32{1}, []int32{1}, 1, 0, 0)),
	)
	cases := []struct {
		name        string
		snapshot    []*pb.MetadataRecord
		wantDeleted []string
	}{
		{"same topics", mt.Recs(withID("keep", "k1"), withID("gone", "g1"), withID("again", "a1"), p0("again")), nil},
		{"topic missing", mt.Recs(withID("keep", "k1"), withID("again", "a1"), p0("again")), []string{"gone"}},
		{"topic recreated with a new id", mt.Recs(withID("keep", "k1"), withID("gone", "g1"), withID("again", "a2"), p0("again")), []string{"again"}},
		{"both", mt.Recs(withID("keep", "k1"), withID("again", "a2"), p0("again")), []string{"again", "gone"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := mt.BatchAt(10, append(mt.Recs(mt.RegisterRec(1, 1, false)), c.snapshot...)...)
			b.Snapshot = true
			next, d, err := metadata.Apply(oldImg, b)
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
				var want *metadata.Partition
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

// TestTopicByID: the id index follows topics created, deleted and created
// again under the same name; an old id finds nothing, and an image built
// from a snapshot answers as one built record by record.
func TestTopicByID(t *testing.T) {
	withID := func(name, id string) *pb.MetadataRecord {
		return &pb.MetadataRecord{Record: &pb.MetadataRecord_Topic{Topic: &pb.TopicRecord{Name: name, TopicId: id}}}
	}
	remove := func(name, id string) *pb.MetadataRecord {
		return &pb.MetadataRecord{Record: &pb.MetadataRecord_RemoveTopic{RemoveTopic: &pb.RemoveTopicRecord{Name: name, TopicId: id}}}
	}
	img := mt.Build(t,
		mt.Recs(mt.RegisterRec(1, 0, false)),
		mt.Recs(withID("a", "id-a1"), withID("b", "id-b")),
		mt.Recs(remove("a", "id-a1")),
		mt.Recs(withID("a", "id-a2")),
	)
	check := func(name string, img *metadata.Image) {
		t.Helper()
		for id, want := range map[string]string{"id-a2": "a", "id-b": "b", "id-a1": "", "": "", "nope": ""} {
			got := ""
			if tp := img.TopicByID(id); tp != nil {
				got = tp.Name
			}
			if got != want {
				t.Errorf("%s: TopicByID(%q) = %q, want %q", name, id, got, want)
			}
		}
	}
	check("record by record", img)
	snap, _, err := metadata.Apply(metadata.EmptyImage(), img.SnapshotRecords())
	if err != nil {
		t.Fatal(err)
	}
	check("from a snapshot", snap)
	// An image built by hand has no index: TopicByID looks through the
	// topics, and a batch applied to it builds the index from them.
	hand := &metadata.Image{Offset: 5, Brokers: img.Brokers, Topics: img.Topics, Features: map[string]int32{}, BrokerConfigs: map[string]string{}}
	check("by hand", hand)
	next, _, err := metadata.Apply(hand, &pb.MetadataBatch{Offset: 6, Records: mt.Recs(withID("c", "id-c"))})
	if err != nil {
		t.Fatal(err)
	}
	check("by hand, then a batch", next)
	if tp := next.TopicByID("id-c"); tp == nil || tp.Name != "c" {
		t.Errorf("TopicByID(id-c) after the batch = %v, want c", tp)
	}
}
