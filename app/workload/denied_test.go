package workload_test

// Real cluster on real time: the run goes through both front doors, and the Kafka
// one is franz-go over real TCP; the SDK door alone could run on MemNet (testkit/sim does).

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/strand-io/strand/app/workload"
	"github.com/strand-io/strand/authz"
	"github.com/strand-io/strand/internal/auth"
	"github.com/strand-io/strand/node"
	"github.com/strand-io/strand/testkit/testcluster"
)

// noTxnWrite allows everything but Write on transactional ids: the verify
// principal with every ACL of scripts/drill.sh's grant_verify but that one.
type noTxnWrite struct{}

func (noTxnWrite) Authorize(_ context.Context, _ auth.Session, a authz.Action) bool {
	return !(a.Type == authz.ResourceTransactionalID && a.Op == authz.OpWrite)
}

func (noTxnWrite) AuthorizeAny(context.Context, auth.Session, authz.Operation, authz.ResourceType, string) bool {
	return true
}

// TestWorkloadStopsWhenDenied: a principal that lacks an ACL the workload
// needs (here Write on its transactional ids) makes the run fail at once
// with the authorization code, through either front door, instead of
// retrying InitProducerId until the duration is up and ending with nothing
// committed.
func TestWorkloadStopsWhenDenied(t *testing.T) {
	verifier := auth.Session{Principal: auth.User("CN=verify"), Listener: auth.ListenerClient}
	c := testcluster.New(t, testcluster.Options{Mutate: func(id int32, cfg *node.Config) {
		cfg.GroupConfig.InitialRebalanceDelay = 0
		cfg.TxnTopic.Partitions, cfg.OffsetsTopic.Partitions = 3, 3
		cfg.TestAuthorizer, cfg.TestSession = noTxnWrite{}, &verifier
	}})
	for _, proto := range []string{workload.ProtocolGRPC, workload.ProtocolKafka} {
		t.Run(proto, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			start := time.Now()
			_, err := workload.Run(ctx, workload.Config{
				Bootstrap: c.Bootstrap(), ClientOpts: c.ClientOpts(), RunID: "denied-" + proto,
				Protocol: proto, KafkaBootstrap: c.KafkaAddrs(),
				KafkaDial: func(ctx context.Context, _, host string) (net.Conn, error) {
					return c.Net.Dial(ctx, "client", host)
				},
				Duration: time.Minute, Partitions: 2, Producers: 2, StageWorkers: 1, TransactionTimeout: 8 * time.Second,
			})
			if err == nil || !strings.Contains(err.Error(), "TRANSACTIONAL_ID_AUTHORIZATION_FAILED") {
				t.Fatalf("run without Write on the transactional ids: err = %v, want TRANSACTIONAL_ID_AUTHORIZATION_FAILED", err)
			}
			if d := time.Since(start); d > 30*time.Second {
				t.Errorf("the denied run took %v: it should stop at the first refusal, not at the end of its minute", d)
			}
			t.Logf("%s: %v (after %v)", proto, err, time.Since(start).Round(time.Millisecond))
		})
	}
}
