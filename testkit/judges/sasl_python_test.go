package judges_test

// Real cluster on real time: the judges are Kafka clients from outside this code
// (librdkafka, kcat, kafka-python, sarama, franz-go) that dial real TCP sockets.

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/strand-io/strand/testkit/judges"
)

// librdkafkaSecure skips (fails, under STRAND_JUDGES=require) when the
// installed confluent-kafka cannot import, or its librdkafka was built
// without SSL or SASL/SCRAM; it logs the versions.
func librdkafkaSecure(t *testing.T) {
	t.Helper()
	judges.PythonModule(t, "confluent_kafka", "python3-confluent-kafka")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, judges.Python, "-c", `import confluent_kafka as ck, sys
sys.stdout.write("%s %s\n" % (ck.version()[0], ck.libversion()[0]))`).CombinedOutput()
	if err != nil {
		t.Fatalf("confluent_kafka versions: %v: %s", err, out)
	}
	t.Logf("confluent-kafka, librdkafka: %s", bytes.TrimSpace(out))
	// A client configured for SASL_SSL with SCRAM is refused at
	// construction when librdkafka lacks SSL or SCRAM.
	out, err = exec.CommandContext(ctx, judges.Python, "-c", `import confluent_kafka as ck
ck.Producer({"bootstrap.servers": "127.0.0.1:1", "security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-512",
             "sasl.username": "u", "sasl.password": "p"})`).CombinedOutput()
	if err != nil {
		judges.Missing(t, "librdkafka cannot make a SASL_SSL SCRAM-SHA-512 client (built without SSL or SASL SCRAM?): %s", bytes.TrimSpace(out))
	}
}

// TestSASLConfluentTransactions: confluent_txn.py (librdkafka's
// transactional producer, a consumer group, send_offsets_to_transaction,
// read_committed) over SASL_SSL with SCRAM-SHA-512, the CA from a PEM file
// and the broker's address checked against its certificate, as a user
// whose rights are PREFIXED ACLs, with the standard authorizer on.
func TestSASLConfluentTransactions(t *testing.T) {
	librdkafkaSecure(t)
	c := judges.StartSASLCluster(t, "sasl-")
	confluentTransactions(t, c, "sasl-txn-")
}

// TestSASLConfluentWrongPassword: librdkafka with a wrong SCRAM-SHA-512
// password hears of it within seconds through error_cb, as
// _AUTHENTICATION with the broker's message; a produce fails its
// delivery instead of hanging, and a consumer's metadata request fails.
func TestSASLConfluentWrongPassword(t *testing.T) {
	librdkafkaSecure(t)
	c := judges.StartSASLCluster(t, "sasl-")
	c.CreateTopic("sasl-auth", 1, 3, nil)
	bad := c.As(judges.SASLUser, "not-the-password", c.Mechanism)

	var res struct {
		Producer struct {
			Errors    [][]any  `json:"errors"`
			Seconds   *float64 `json:"seconds"`
			FlushLeft int      `json:"flush_left"`
		} `json:"producer"`
		Consumer struct {
			Errors     [][]any  `json:"errors"`
			Seconds    *float64 `json:"seconds"`
			ListTopics string   `json:"list_topics"`
		} `json:"consumer"`
	}
	args := append([]string{strings.Join(c.KafkaAddrs(), ","), "sasl-auth", "30"}, bad.Librdkafka()...)
	pythonJSON(t, "confluent_auth_fail.py", &res, args...)

	for _, side := range []struct {
		name    string
		errors  [][]any
		seconds *float64
	}{{"producer", res.Producer.Errors, res.Producer.Seconds}, {"consumer", res.Consumer.Errors, res.Consumer.Seconds}} {
		if side.seconds == nil || len(side.errors) == 0 {
			t.Errorf("%s: no error reported through error_cb in 30 s", side.name)
			continue
		}
		if *side.seconds > 10 {
			t.Errorf("%s: the first error came after %.1f s, want within 10", side.name, *side.seconds)
		}
		e := side.errors[0]
		if e[0] != "_AUTHENTICATION" || !strings.Contains(e[3].(string), "Authentication failed") {
			t.Errorf("%s: first error %v, want _AUTHENTICATION carrying the broker's \"Authentication failed ...\"", side.name, e)
		}
	}
	if res.Producer.FlushLeft != 0 {
		t.Errorf("producer: flush left %d messages undelivered, want them failed within message.timeout.ms", res.Producer.FlushLeft)
	}
	if !strings.HasPrefix(res.Consumer.ListTopics, "_") || strings.HasPrefix(res.Consumer.ListTopics, "answered") {
		t.Errorf("consumer: list_topics %q, want a librdkafka error", res.Consumer.ListTopics)
	}
}
