package judges_test

// Real cluster on real time: the judges are Kafka clients from outside this code
// (librdkafka, kcat, kafka-python, sarama, franz-go) that dial real TCP sockets.

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/testkit/judges"
)

// pythonJSON runs a script of testdata with Debian's python3 and decodes
// the one JSON object it prints.
func pythonJSON(t *testing.T, script string, out any, args ...string) {
	t.Helper()
	stdout := judges.Run(t, runTimeout, "", judges.Python, append([]string{filepath.Join("testdata", script)}, args...)...)
	if err := json.Unmarshal([]byte(stdout), out); err != nil {
		t.Fatalf("%s printed no JSON: %v\n%s", script, err, stdout)
	}
	t.Logf("%s: %s", script, stdout)
}

// TestKafkaPythonGroup: kafka-python produces, a consumer in a group reads
// part of the records and commits, and a second consumer in the group
// resumes right after the committed offset.
func TestKafkaPythonGroup(t *testing.T) {
	judges.PythonModule(t, "kafka", "python3-kafka")
	c, bootstrap := kafkaCluster(t)
	const topic, group, n, k = "kafka-python", "kafka-python-group", 10, 4
	c.CreateTopic(topic, 1, 3, nil)

	var res struct {
		Produced  []int64
		First     [][]any
		Committed int64
		Second    [][]any
	}
	pythonJSON(t, "kafka_python_group.py", &res, bootstrap, topic, group, strconv.Itoa(n), strconv.Itoa(k))

	want := func(from, to int) [][]any {
		var out [][]any
		for i := from; i < to; i++ {
			out = append(out, []any{float64(0), float64(i), fmt.Sprintf("k%d", i), fmt.Sprintf("v%d", i)})
		}
		return out
	}
	if !slices.Equal(res.Produced, []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}) {
		t.Errorf("produced at offsets %v, want 0..%d", res.Produced, n-1)
	}
	if fmt.Sprint(res.First) != fmt.Sprint(want(0, k)) {
		t.Errorf("first consumer read %v, want %v", res.First, want(0, k))
	}
	if res.Committed != k {
		t.Errorf("first consumer sees committed offset %d, want %d", res.Committed, k)
	}
	if fmt.Sprint(res.Second) != fmt.Sprint(want(k, n)) {
		t.Errorf("second consumer read %v, want %v (from the committed offset on)", res.Second, want(k, n))
	}
	tp := client.TopicPartition{Topic: topic, Partition: 0}
	if got := committed(t, c, group, tp)[tp]; got != k {
		t.Errorf("Strand's gRPC door says %s committed %d, want %d", group, got, k)
	}
}

// TestConfluentTransactions: librdkafka's transactional producer commits
// one transaction, aborts one, commits another, and sends a consumer
// group's offsets in the first two; read_committed readers see the
// committed records only, and the group's offset is the committed one.
func TestConfluentTransactions(t *testing.T) {
	judges.PythonModule(t, "confluent_kafka", "python3-confluent-kafka")
	c, _ := kafkaCluster(t)
	confluentTransactions(t, judges.Plain(c), "txn-")
}

// confluentTransactions runs confluent_txn.py against c with its topics,
// group and transactional id named with prefix, and checks what it saw.
func confluentTransactions(t *testing.T, c *judges.Target, prefix string) {
	in, out, group := prefix+"in", prefix+"out", prefix+"group"
	c.CreateTopic(in, 1, 3, nil)
	c.CreateTopic(out, 1, 3, nil)

	var res struct {
		Consumed        [][]any `json:"consumed"`
		ReadCommitted   [][]any `json:"read_committed"`
		ReadUncommitted [][]any `json:"read_uncommitted"`
		Committed       int64   `json:"committed"`
	}
	args := append([]string{strings.Join(c.KafkaAddrs(), ","), in, out, group, prefix + "judge"}, c.Librdkafka()...)
	pythonJSON(t, "confluent_txn.py", &res, args...)

	if fmt.Sprint(res.Consumed) != "[[0 in0] [1 in1] [2 in2]]" {
		t.Errorf("group consumer read %v, want in0..in2 at offsets 0..2", res.Consumed)
	}
	values := func(rows [][]any) []string {
		var v []string
		for _, r := range rows {
			v = append(v, fmt.Sprint(r[1]))
		}
		return v
	}
	if got := values(res.ReadUncommitted); !slices.Equal(got, []string{"c0", "c1", "a0", "a1", "c2"}) {
		t.Errorf("read_uncommitted reader read %v, want c0 c1 a0 a1 c2 (every record written)", res.ReadUncommitted)
	}
	if got := values(res.ReadCommitted); !slices.Equal(got, []string{"c0", "c1", "c2"}) {
		t.Errorf("read_committed reader read %v, want c0 c1 c2 (the aborted a0 a1 left out)", res.ReadCommitted)
	}
	// The committed records keep the offsets they were written at.
	offsets := map[string]any{}
	for _, r := range res.ReadUncommitted {
		offsets[fmt.Sprint(r[1])] = r[0]
	}
	for _, r := range res.ReadCommitted {
		if offsets[fmt.Sprint(r[1])] != r[0] {
			t.Errorf("read_committed reader found %v at offset %v, read_uncommitted at %v", r[1], r[0], offsets[fmt.Sprint(r[1])])
		}
	}
	if res.Committed != 3 {
		t.Errorf("librdkafka reads the group's offset as %d, want 3 (sent with the committed transaction; 6 was aborted)", res.Committed)
	}
	tp := client.TopicPartition{Topic: in, Partition: 0}
	if got := committed(t, c.Cluster, group, tp)[tp]; got != 3 {
		t.Errorf("Strand's gRPC door says %s committed %d, want 3", group, got)
	}
}
