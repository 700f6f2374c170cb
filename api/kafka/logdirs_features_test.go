package kafka_test

// Real cluster on real time: its franz-go and raw Kafka-wire clients dial TCP. They could dial
// MemNet's listeners through a custom dialer inside synctest, as testkit/sim's workload does; not moved yet.

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strand-io/strand/client"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/testkit/testcluster"
)

// DescribeLogDirs on both doors: the broker's log directory (its absolute
// path, its file system's total and usable bytes from version 4) with the
// partitions asked, by topic, each with its log's size and offset lag 0;
// a partition not on the broker is left out.
func TestDescribeLogDirs(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Nodes: 1})
	c.CreateTopic("dirs", 2, 1, nil)
	c.CreateTopic("other", 1, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	val := make([]byte, 1000)
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "dirs", Partition: 1, Value: val}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	dir, err := filepath.Abs(c.Member(1).Cfg.DataDir)
	if err != nil {
		t.Fatal(err)
	}

	// Asked of the broker itself (kgo would shard the request over the
	// brokers and merge the answers).
	br := cl.SeedBrokers()[0]
	r, err := br.Request(ctx, kmsg.NewPtrDescribeLogDirsRequest())
	if err != nil {
		t.Fatal(err)
	}
	all := r.(*kmsg.DescribeLogDirsResponse)
	if all.ErrorCode != 0 || len(all.Dirs) != 1 || all.Version != 4 {
		t.Fatalf("DescribeLogDirs: code %d, %d dirs, version %d (want 4)", all.ErrorCode, len(all.Dirs), all.Version)
	}
	d := all.Dirs[0]
	if d.ErrorCode != 0 || d.Dir != dir || d.TotalBytes <= 0 || d.UsableBytes <= 0 || d.UsableBytes > d.TotalBytes {
		t.Fatalf("dir %+v, want %s with its sizes", d, dir)
	}
	sizes := map[string]map[int32]int64{}
	for _, tp := range d.Topics {
		sizes[tp.Topic] = map[int32]int64{}
		for _, p := range tp.Partitions {
			sizes[tp.Topic][p.Partition] = p.Size
			if p.OffsetLag != 0 || p.IsFuture {
				t.Errorf("%s-%d: lag %d future %v", tp.Topic, p.Partition, p.OffsetLag, p.IsFuture)
			}
		}
	}
	if len(sizes["dirs"]) != 2 || len(sizes["other"]) != 1 || sizes["dirs"][1] < 1000 || sizes["dirs"][0] != 0 {
		t.Fatalf("partitions described: %v; want dirs-0 empty, dirs-1 over 1000 bytes, other-0", sizes)
	}

	// Only what is asked; a partition the broker does not hold is left out.
	req := kmsg.NewPtrDescribeLogDirsRequest()
	for _, tp := range []struct {
		topic string
		parts []int32
	}{{"dirs", []int32{1, 7}}, {"nosuch", []int32{0}}} {
		rt := kmsg.NewDescribeLogDirsRequestTopic()
		rt.Topic, rt.Partitions = tp.topic, tp.parts
		req.Topics = append(req.Topics, rt)
	}
	r, err = br.Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	some := r.(*kmsg.DescribeLogDirsResponse)
	if ts := some.Dirs[0].Topics; len(ts) != 1 || ts[0].Topic != "dirs" || len(ts[0].Partitions) != 1 || ts[0].Partitions[0].Partition != 1 {
		t.Fatalf("asked for dirs-1, dirs-7 and nosuch-0: %+v", ts)
	}

	// The gRPC door answers the same.
	adm, err := client.NewAdmin(c.ClientOpts()...)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	if _, err := adm.Metadata(ctx, false); err != nil { // learns the brokers
		t.Fatal(err)
	}
	cc, err := adm.BrokerConn(1)
	if err != nil {
		t.Fatal(err)
	}
	g, err := pb.NewAdminClient(cc).DescribeLogDirs(ctx, &pb.DescribeLogDirsRequest{Topics: []*pb.DescribableLogDirTopic{{Topic: "dirs", Partitions: []int32{1}}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Results) != 1 || g.Results[0].LogDir != dir || len(g.Results[0].Topics) != 1 || g.Results[0].Topics[0].Partitions[0].PartitionSize < 1000 {
		t.Fatalf("gRPC DescribeLogDirs: %v", g)
	}
}

// finalized is transaction.version's finalized level and the features'
// epoch as ApiVersions reports them (level 0: not listed).
func finalized(ctx context.Context, t *testing.T, cl *kgo.Client) (int16, int64) {
	t.Helper()
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range resp.FinalizedFeatures {
		if f.Name == "transaction.version" {
			return f.MaxVersionLevel, resp.FinalizedFeaturesEpoch
		}
	}
	return 0, resp.FinalizedFeaturesEpoch
}

// UpdateFeatures on both doors: transaction.version downgraded and
// upgraded as Kafka's controller does it, ApiVersions then reporting the
// new finalized level and a later epoch; a downgrade asked as an upgrade
// is INVALID_UPDATE_VERSION; version 0's allow_downgrade is a safe
// downgrade; results per feature up to version 1 only.
func TestUpdateFeatures(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Nodes: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	lvl, epoch := finalized(ctx, t, cl)
	if lvl != 2 {
		t.Fatalf("transaction.version finalized at %d, want 2", lvl)
	}
	update := func(version int16, level int16, typ int8, allowDowngrade, validate bool) *kmsg.UpdateFeaturesResponse {
		t.Helper()
		req := kmsg.NewPtrUpdateFeaturesRequest()
		req.TimeoutMillis, req.ValidateOnly = 10000, validate
		u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
		u.Feature, u.MaxVersionLevel, u.UpgradeType, u.AllowDowngrade = "transaction.version", level, typ, allowDowngrade
		req.FeatureUpdates = append(req.FeatureUpdates, u)
		resp, err := cl.SeedBrokers()[0].Request(ctx, pinned{req, version})
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*kmsg.UpdateFeaturesResponse)
	}
	if r := update(2, 1, 1, false, false); r.ErrorCode != kerr.InvalidUpdateVersion.Code || len(r.Results) != 0 {
		t.Fatalf("downgrade asked as an upgrade: %d %v %v", r.ErrorCode, r.ErrorMessage, r.Results)
	}
	if r := update(1, 1, 2, false, true); r.ErrorCode != 0 || len(r.Results) != 1 || r.Results[0].ErrorCode != 0 {
		t.Fatalf("validate-only safe downgrade at v1: %d %v %v", r.ErrorCode, r.ErrorMessage, r.Results)
	}
	if l, _ := finalized(ctx, t, cl); l != 2 {
		t.Fatalf("a validate-only update changed transaction.version to %d", l)
	}
	if r := update(0, 1, 0, true, false); r.ErrorCode != 0 || len(r.Results) != 1 {
		t.Fatalf("v0 downgrade with allow_downgrade: %d %v %v", r.ErrorCode, r.ErrorMessage, r.Results)
	}
	l, e := finalized(ctx, t, cl)
	if l != 1 || e <= epoch {
		t.Fatalf("after the downgrade ApiVersions reports transaction.version %d at epoch %d (was 2 at %d)", l, e, epoch)
	}
	if r := update(2, 2, 1, false, false); r.ErrorCode != 0 || len(r.Results) != 0 {
		t.Fatalf("v2 upgrade: %d %v %v", r.ErrorCode, r.ErrorMessage, r.Results)
	}
	if l2, e2 := finalized(ctx, t, cl); l2 != 2 || e2 <= e {
		t.Fatalf("after the upgrade ApiVersions reports transaction.version %d at epoch %d", l2, e2)
	}

	// The gRPC door.
	adm, err := client.NewAdmin(c.ClientOpts()...)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	if _, err := adm.Metadata(ctx, false); err != nil { // learns the brokers
		t.Fatal(err)
	}
	cc, err := adm.BrokerConn(1)
	if err != nil {
		t.Fatal(err)
	}
	g, err := pb.NewAdminClient(cc).UpdateFeatures(ctx, &pb.UpdateFeaturesRequest{Updates: []*pb.FeatureUpdate{{Feature: "transaction.version", MaxVersionLevel: 3, UpgradeType: 1}}})
	if err != nil || g.ErrorCode != pb.ErrorCode_INVALID_UPDATE_VERSION {
		t.Fatalf("gRPC UpdateFeatures to an unsupported level: %v %v", g, err)
	}
}

// pinned sends a request at a fixed version (kgo would pick the highest
// both sides know).
type pinned struct {
	kmsg.Request
	v int16
}

func (p pinned) MaxVersion() int16 { return p.v }
