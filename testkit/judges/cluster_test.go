package judges_test

// Real cluster on real time: the judges are Kafka clients from outside this code
// (librdkafka, kcat, kafka-python, sarama, franz-go) that dial real TCP sockets.

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/testkit/testcluster"
)

// runTimeout bounds one run of an external program.
const runTimeout = 90 * time.Second

// kafkaCluster starts a three-node cluster and returns it with its Kafka
// listeners as one bootstrap list ("host:port,host:port,...").
func kafkaCluster(t *testing.T) (*testcluster.Cluster, string) {
	t.Helper()
	c := testcluster.New(t, testcluster.Options{Nodes: 3})
	addrs := c.KafkaAddrs()
	if len(addrs) != 3 {
		t.Fatalf("KafkaAddrs = %v, want one per node", addrs)
	}
	return c, strings.Join(addrs, ",")
}

// committed reads a group's committed offsets through Strand's own front
// door (stable offsets only: a pending transactional commit is waited out).
func committed(t *testing.T, c *testcluster.Cluster, group string, tps ...client.TopicPartition) map[client.TopicPartition]int64 {
	t.Helper()
	adm, err := client.NewAdmin(c.ClientOpts()...)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got, err := adm.CommittedOffsets(ctx, group, tps)
	if err != nil {
		t.Fatalf("committed offsets of %s: %v", group, err)
	}
	return got
}
