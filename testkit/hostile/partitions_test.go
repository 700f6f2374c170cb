package hostile

// Real node on real time: the hostile requests are raw bytes on a real TCP connection
// to the Kafka listener; could dial MemNet inside synctest; not moved yet.

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/node"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// Topics whose partitions would leave a broker with more replicas than
// max.broker.partitions (lowered at start to what the node's file
// descriptors allow) are refused with INVALID_PARTITIONS, and the node
// keeps serving (100 000 partitions used to be accepted, and the node
// could not open them).
func TestTooManyPartitionsForTheNode(t *testing.T) {
	const max = 60
	tg := devTarget(t, func(c *node.Config) { c.ControllerConfig.MaxBrokerPartitions = max })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	adm := tg.admin()
	if err := adm.CreateTopic(ctx, client.TopicSpec{Name: "fits", Partitions: 40, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	for _, parts := range []int32{100000, 30} {
		err := adm.CreateTopic(ctx, client.TopicSpec{Name: "too-many", Partitions: parts, ReplicationFactor: 1})
		if errs.CodeOf(err) != pb.ErrorCode_INVALID_PARTITIONS || !strings.Contains(err.Error(), "max.broker.partitions=60") {
			t.Fatalf("create %d partitions on a node allowed %d: %v, want INVALID_PARTITIONS naming max.broker.partitions", parts, max, err)
		}
	}
	tg.assertServes()
}
