package metadata_test

import (
	"reflect"
	"testing"

	"github.com/strand-io/strand/metadata"
	mt "github.com/strand-io/strand/metadata/metadatatest"
)

// TestBrokerConfigsByID: per-broker dynamic configs (resource name "<id>")
// land in BrokerConfigsByID apart from the cluster-wide ones (""), the
// delta says a broker config changed, BrokerConfig resolves per-broker
// over cluster-wide, and a snapshot replays both exactly.
func TestBrokerConfigsByID(t *testing.T) {
	img := metadata.EmptyImage()
	next, d, err := metadata.Apply(img, mt.BatchAt(1,
		mt.ConfigRec("broker", "", "log.retention.ms", "1000", false),
		mt.ConfigRec("broker", "1", "log.retention.ms", "2000", false),
		mt.ConfigRec("broker", "1", "leader.replication.throttled.rate", "1048576", false),
		mt.ConfigRec("broker", "2", "follower.replication.throttled.rate", "5", false)))
	if err != nil {
		t.Fatal(err)
	}
	if !d.BrokerConfigs || d.Empty() {
		t.Fatalf("delta %+v does not say a broker config changed", d)
	}
	if len(img.BrokerConfigsByID) != 0 || len(img.BrokerConfigs) != 0 {
		t.Fatal("Apply modified its input image")
	}
	want := map[int32]map[string]string{
		1: {"log.retention.ms": "2000", "leader.replication.throttled.rate": "1048576"},
		2: {"follower.replication.throttled.rate": "5"},
	}
	if !reflect.DeepEqual(next.BrokerConfigsByID, want) || next.BrokerConfigs["log.retention.ms"] != "1000" {
		t.Fatalf("by id %v, cluster %v", next.BrokerConfigsByID, next.BrokerConfigs)
	}
	for _, c := range []struct {
		id        int32
		v         string
		perBroker bool
	}{{1, "2000", true}, {2, "1000", false}, {3, "1000", false}} {
		if v, pb, ok := next.BrokerConfig(c.id, "log.retention.ms"); !ok || v != c.v || pb != c.perBroker {
			t.Fatalf("broker %d: %q per-broker=%v ok=%v, want %q %v", c.id, v, pb, ok, c.v, c.perBroker)
		}
	}
	// A delete of the last key drops the broker's map; the other broker's stays.
	after, _, err := metadata.Apply(next, mt.BatchAt(2, mt.ConfigRec("broker", "2", "follower.replication.throttled.rate", "", true)))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := after.BrokerConfigsByID[2]; ok || len(after.BrokerConfigsByID[1]) != 2 || len(next.BrokerConfigsByID[2]) != 1 {
		t.Fatalf("after delete %v (before %v)", after.BrokerConfigsByID, next.BrokerConfigsByID)
	}
	// Snapshot and replay.
	replayed, sd, err := metadata.Apply(metadata.EmptyImage(), next.SnapshotRecords())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(replayed.BrokerConfigsByID, next.BrokerConfigsByID) || !reflect.DeepEqual(replayed.BrokerConfigs, next.BrokerConfigs) {
		t.Fatalf("replayed %v %v, want %v %v", replayed.BrokerConfigsByID, replayed.BrokerConfigs, next.BrokerConfigsByID, next.BrokerConfigs)
	}
	if !sd.BrokerConfigs {
		t.Fatal("a snapshot's delta does not say broker configs may have changed")
	}
	if _, _, err := metadata.Apply(next, mt.BatchAt(3, mt.ConfigRec("broker", "x", "a", "1", false))); err == nil {
		t.Fatal("a broker config for broker \"x\" was accepted")
	}
}
