// Package metadatatest builds metadata records and images for tests of
// the packages that read the metadata image (the controller, brokers,
// replication, the coordinators).
package metadatatest

import (
	"testing"

	"github.com/strand-io/strand/metadata"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

func BatchAt(offset int64, recs ...*pb.MetadataRecord) *pb.MetadataBatch {
	return &pb.MetadataBatch{Offset: offset, Records: recs}
}

func ClusterRec(id string) *pb.MetadataRecord {
	return &pb.MetadataRecord{Record: &pb.MetadataRecord_Cluster{Cluster: &pb.ClusterRecord{ClusterId: id}}}
}

func RegisterRec(id int32, epoch int64, fenced bool) *pb.MetadataRecord {
	return &pb.MetadataRecord{Record: &pb.MetadataRecord_RegisterBroker{RegisterBroker: &pb.RegisterBrokerRecord{
		NodeId: id, IncarnationId: "inc-" + string(rune('a'+id)), BrokerEpoch: epoch,
		Address: "host:" + string(rune('0'+id)), Rack: "r", Fenced: fenced,
	}}}
}

func UnregisterRec(id int32) *pb.MetadataRecord {
	return &pb.MetadataRecord{Record: &pb.MetadataRecord_UnregisterBroker{UnregisterBroker: &pb.UnregisterBrokerRecord{NodeId: id}}}
}

func FenceRec(id int32, epoch int64) *pb.MetadataRecord {
	return &pb.MetadataRecord{Record: &pb.MetadataRecord_FenceBroker{FenceBroker: &pb.FenceBrokerRecord{NodeId: id, BrokerEpoch: epoch}}}
}

func UnfenceRec(id int32, epoch int64) *pb.MetadataRecord {
	return &pb.MetadataRecord{Record: &pb.MetadataRecord_UnfenceBroker{UnfenceBroker: &pb.UnfenceBrokerRecord{NodeId: id, BrokerEpoch: epoch}}}
}

func TopicRec(name string, cfg map[string]string) *pb.MetadataRecord {
	return &pb.MetadataRecord{Record: &pb.MetadataRecord_Topic{Topic: &pb.TopicRecord{Name: name, TopicId: "id-" + name, Configs: cfg}}}
}

func PartRec(topic string, p int32, replicas, isr []int32, leader, le, pe int32) *pb.MetadataRecord {
	return &pb.MetadataRecord{Record: &pb.MetadataRecord_Partition{Partition: &pb.PartitionRecord{
		Topic: topic, Partition: p, Replicas: replicas, Isr: isr, Leader: leader, LeaderEpoch: le, PartitionEpoch: pe,
	}}}
}

func ChangeRec(topic string, p int32, leader int32, isr []int32, le, pe int32) *pb.MetadataRecord {
	return &pb.MetadataRecord{Record: &pb.MetadataRecord_PartitionChange{PartitionChange: &pb.PartitionChangeRecord{
		Topic: topic, Partition: p, Leader: leader, Isr: isr, LeaderEpoch: le, PartitionEpoch: pe,
	}}}
}

func RemoveTopicRec(name string) *pb.MetadataRecord {
	return &pb.MetadataRecord{Record: &pb.MetadataRecord_RemoveTopic{RemoveTopic: &pb.RemoveTopicRecord{Name: name}}}
}

func ProducerIdsRec(next int64) *pb.MetadataRecord {
	return &pb.MetadataRecord{Record: &pb.MetadataRecord_ProducerIds{ProducerIds: &pb.ProducerIdsRecord{NextProducerId: next}}}
}

func FeatureRec(name string, level int32) *pb.MetadataRecord {
	return &pb.MetadataRecord{Record: &pb.MetadataRecord_FeatureLevel{FeatureLevel: &pb.FeatureLevelRecord{Name: name, Level: level}}}
}

func ConfigRec(resType, resName, name, value string, del bool) *pb.MetadataRecord {
	return &pb.MetadataRecord{Record: &pb.MetadataRecord_Config{Config: &pb.ConfigRecord{
		ResourceType: resType, ResourceName: resName, Name: name, Value: value, Delete: del,
	}}}
}

// build applies batches in order to the empty image, giving batch i the
// offset i+1.
func Build(t testing.TB, batches ...[]*pb.MetadataRecord) *metadata.Image {
	t.Helper()
	img := metadata.EmptyImage()
	for i, recs := range batches {
		next, _, err := metadata.Apply(img, BatchAt(int64(i+1), recs...))
		if err != nil {
			t.Fatalf("setup batch %d: %v", i+1, err)
		}
		img = next
	}
	return img
}

func Recs(r ...*pb.MetadataRecord) []*pb.MetadataRecord { return r }

// deepCopy copies every level of an image so that a later comparison
// detects any write into the original.
func DeepCopy(im *metadata.Image) *metadata.Image {
	c := *im
	if im.Brokers != nil {
		c.Brokers = map[int32]*metadata.Broker{}
		for k, v := range im.Brokers {
			b := *v
			c.Brokers[k] = &b
		}
	}
	if im.Topics != nil {
		c.Topics = map[string]*metadata.Topic{}
		for k, v := range im.Topics {
			tc := *v
			if v.Configs != nil {
				tc.Configs = map[string]string{}
				for ck, cv := range v.Configs {
					tc.Configs[ck] = cv
				}
			}
			if v.Partitions != nil {
				tc.Partitions = make([]*metadata.Partition, len(v.Partitions))
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
func BaseImage(t testing.TB) *metadata.Image {
	t.Helper()
	return Build(t,
		Recs(ClusterRec("c1"), RegisterRec(1, 0, false)),
		Recs(RegisterRec(2, 0, false)),
		Recs(RegisterRec(3, 0, false)),
		Recs(TopicRec("a", map[string]string{"retention.ms": "100"}),
			PartRec("a", 0, []int32{1, 2, 3}, []int32{1, 2, 3}, 1, 0, 0),
			PartRec("a", 1, []int32{2, 3, 1}, []int32{2, 3, 1}, 2, 0, 0)),
		Recs(TopicRec("b", nil), PartRec("b", 0, []int32{3, 1}, []int32{3, 1}, 3, 5, 7)),
		Recs(ProducerIdsRec(1000), FeatureRec(metadata.FeatureTransactionVersion, 2),
			ConfigRec("broker", "", "log.retention.ms", "5", false)),
	)
}
