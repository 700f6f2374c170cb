package api_test

// Real node on real time: predates the simulation; could run on testcluster's
// MemNet inside synctest; not moved yet.

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/strand-io/strand/client"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/testkit/testutil"
)

// fuzzMethod is one RPC of the wire contract, with its message types.
type fuzzMethod struct {
	name      string // /strand.v1.Service/Method
	in, out   protoreflect.MessageType
	streaming bool
}

// fuzzSkipped are the admin RPCs that create or delete resources: a
// fuzzed CreateTopics with a million partitions is a resource case with
// its own bounds (max.broker.partitions), not a decoding one.
var fuzzSkipped = map[string]bool{
	"/strand.v1.Admin/CreateTopics": true, "/strand.v1.Admin/DeleteTopics": true,
	"/strand.v1.Admin/CreatePartitions": true, "/strand.v1.Admin/IncrementalAlterConfigs": true,
}

// fuzzMethods lists every RPC of every service of the proto package.
func fuzzMethods(t testing.TB) []fuzzMethod {
	var out []fuzzMethod
	for _, fd := range []protoreflect.FileDescriptor{pb.File_strand_v1_admin_proto, pb.File_strand_v1_consumer_proto,
		pb.File_strand_v1_controller_proto, pb.File_strand_v1_groups_proto, pb.File_strand_v1_metadata_proto,
		pb.File_strand_v1_producer_proto, pb.File_strand_v1_transactions_proto} {
		for i := 0; i < fd.Services().Len(); i++ {
			sd := fd.Services().Get(i)
			for j := 0; j < sd.Methods().Len(); j++ {
				md := sd.Methods().Get(j)
				name := "/" + string(sd.FullName()) + "/" + string(md.Name())
				if fuzzSkipped[name] {
					continue
				}
				in, err1 := protoregistry.GlobalTypes.FindMessageByName(md.Input().FullName())
				outT, err2 := protoregistry.GlobalTypes.FindMessageByName(md.Output().FullName())
				if err1 != nil || err2 != nil {
					t.Fatalf("%s: %v %v", name, err1, err2)
				}
				out = append(out, fuzzMethod{name: name, in: in, out: outT, streaming: md.IsStreamingClient() || md.IsStreamingServer()})
			}
		}
	}
	return out
}

// FuzzRequests feeds every RPC a client listener serves (and those it must
// refuse) a request unmarshalled from fuzzed protobuf bytes, through the
// node's real edge: validation, conversion into internal structures,
// routing. The node must never panic (a handler's panic ends the test
// process), and must still serve a well-behaved client afterwards. One
// target covers all RPCs: the first byte picks the method, so the fuzzer
// learns each request type's shape from the seeds (an empty and a typical
// request per method).
func FuzzRequests(f *testing.F) {
	methods := fuzzMethods(f)
	n := testutil.StartDev(f, f.TempDir())
	ctx0, cancel0 := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel0()
	adm, err := client.NewAdmin(client.Bootstrap(n.Addr()))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(adm.Close)
	if err := adm.CreateTopic(ctx0, client.TopicSpec{Name: "fz", Partitions: 2, ReplicationFactor: 1}); err != nil {
		f.Fatal(err)
	}
	cc, err := grpc.NewClient("passthrough:///"+n.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { cc.Close() })
	typical := []proto.Message{
		&pb.ProduceRequest{Acks: -1, Partitions: []*pb.PartitionRecords{{Topic: "fz", Partition: 0, Records: []byte{0, 0, 0, 0}}}},
		&pb.FetchRequest{ReplicaId: -1, MaxWaitMs: 10, MaxBytes: 1 << 20, Partitions: []*pb.FetchPartition{{Topic: "fz", Partition: 0, PartitionMaxBytes: 1 << 20}}},
		&pb.MetadataRequest{Topics: []string{"fz"}},
	}
	for i, m := range methods {
		f.Add(uint8(i), []byte{})
		for _, tm := range typical {
			if tm.ProtoReflect().Descriptor() == m.in.Descriptor() {
				b, _ := proto.Marshal(tm)
				f.Add(uint8(i), b)
			}
		}
	}
	f.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := adm.Metadata(ctx, false); err != nil {
			f.Errorf("after the fuzzed requests the node does not serve Metadata: %v", err)
		}
	})
	f.Fuzz(func(t *testing.T, sel uint8, payload []byte) {
		m := methods[int(sel)%len(methods)]
		req := m.in.New().Interface()
		if proto.Unmarshal(payload, req) != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if !m.streaming {
			_ = cc.Invoke(ctx, m.name, req, m.out.New().Interface())
			return
		}
		st, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, m.name)
		if err != nil {
			return
		}
		if st.SendMsg(req) == nil {
			_ = st.CloseSend()
			_ = st.RecvMsg(m.out.New().Interface())
		}
	})
}
