package judges

// Real cluster on real time: the judges are Kafka clients from outside this code
// (librdkafka, kcat, kafka-python, sarama, franz-go) that dial real TCP sockets.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	iscram "github.com/strand-io/strand/internal/scram"
)

// TestSASLFranzExactlyOnceChain is the exactly-once chain over SASL_SSL:
// every franz-go client speaks TLS to the Kafka listeners and
// authenticates with SCRAM-SHA-512 as a user whose rights are PREFIXED
// ACLs on the chain's topics, groups and transactional ids, with the
// standard authorizer on.
func TestSASLFranzExactlyOnceChain(t *testing.T) {
	total := 100_000 // as TestFranzExactlyOnceChain
	if testing.Short() {
		total = 5_000
	}
	runChain(t, StartSASLCluster(t, chainPrefixes...), total)
}

// TestSASLFranzPlainAndACLs: on the SASL_SSL listener, PLAIN authenticates
// against the user's SCRAM credential (produce, then read back), and so
// do SCRAM-SHA-256 and -512; PLAIN with a wrong password is
// SASL_AUTHENTICATION_FAILED. Authorization is the ACLs': the same user
// is refused a topic outside its prefix, and a user with no ACLs is
// refused everything (TOPIC_AUTHORIZATION_FAILED, not an authentication
// error). A client that skips TLS gets no answer it can read.
func TestSASLFranzPlainAndACLs(t *testing.T) {
	c := StartSASLCluster(t, "sasl-")
	c.CreateTopic("sasl-plain", 1, 3, nil)
	c.CreateTopic("other", 1, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	produce := func(tg *Target, endpoint, topic, value string) error {
		cl := newFranz(t, tg, endpoint, kgo.RequestRetries(2))
		defer cl.Close()
		rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
		defer rcancel()
		return cl.ProduceSync(rctx, &kgo.Record{Topic: topic, Value: []byte(value)}).FirstErr()
	}

	plainUser := c.As(SASLUser, SASLPassword, "PLAIN")
	for _, tg := range []*Target{plainUser, c.As(SASLUser, SASLPassword, iscram.NameSHA256), c} {
		if err := produce(tg, "plain-"+tg.Mechanism, "sasl-plain", tg.Mechanism); err != nil {
			t.Fatalf("%s over SASL_SSL: produce: %v", tg.Mechanism, err)
		}
	}
	got := map[string]bool{}
	for _, r := range readAll(t, ctx, plainUser, "plain-reader", "sasl-plain", 1, false) {
		got[string(r.Value)] = true
	}
	if !got["PLAIN"] || !got[iscram.NameSHA256] || !got[iscram.NameSHA512] || len(got) != 3 {
		t.Errorf("read back %v through PLAIN, want the PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 records", got)
	}

	// A wrong PLAIN password: the broker's answer, not a timeout.
	cl := newFranz(t, c.As(SASLUser, "wrong", "PLAIN"), "plain-wrong")
	rctx, rcancel := context.WithTimeout(ctx, 15*time.Second)
	_, err := kmsg.NewPtrMetadataRequest().RequestWith(rctx, cl)
	rcancel()
	cl.Close()
	if !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Errorf("PLAIN with a wrong password: Metadata error %v, want SASL_AUTHENTICATION_FAILED", err)
	}

	if err := produce(c, "outside-prefix", "other", "x"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Errorf("%s produces to a topic its ACLs do not name: %v, want TOPIC_AUTHORIZATION_FAILED", SASLUser, err)
	}
	if err := produce(c.As(NoACLUser, NoACLPassword, iscram.NameSHA512), "no-acls", "sasl-plain", "x"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Errorf("%s (no ACLs) produces: %v, want TOPIC_AUTHORIZATION_FAILED", NoACLUser, err)
	}

	// SASL without TLS on the SASL_SSL port: the TLS server reads the
	// client's first bytes as a broken handshake and closes.
	noTLS := *c
	noTLS.TLS = nil
	cl = newFranz(t, &noTLS, "no-tls")
	rctx, rcancel = context.WithTimeout(ctx, 10*time.Second)
	_, err = kmsg.NewPtrMetadataRequest().RequestWith(rctx, cl)
	rcancel()
	cl.Close()
	if err == nil {
		t.Errorf("a client without TLS got a Metadata answer from the SASL_SSL listener")
	}
}
