package request_test

// Real node on real time: predates the simulation; could run on testcluster's
// MemNet inside synctest; not moved yet.

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/strand-io/strand/authz"
	"github.com/strand-io/strand/internal/auth"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
	"github.com/strand-io/strand/request"
	"github.com/strand-io/strand/testkit/testutil"
	"github.com/strand-io/strand/testkit/wait"
)

// fakeChecker allows exactly the (principal, operation, resource type,
// name) it was given, and records every question and every denial (the
// audit log a real Checker writes).
type fakeChecker struct {
	mu      sync.Mutex
	allow   map[grant]bool
	anyOK   map[grant]bool // Name "": AuthorizeAny's answer
	asked   []authz.Action
	denials []authz.Action
	// quiet are the denials asked with authz.Quietly (not audited at info).
	quiet []authz.Action
}

type grant struct {
	principal string
	op        authz.Operation
	typ       authz.ResourceType
	name      string
}

func newFake() *fakeChecker {
	return &fakeChecker{allow: map[grant]bool{}, anyOK: map[grant]bool{}}
}

// grant allows principal op on (typ, name).
func (f *fakeChecker) grant(principal string, op authz.Operation, typ authz.ResourceType, name string) *fakeChecker {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.allow[grant{principal, op, typ, name}] = true
	if name != "" {
		f.anyOK[grant{principal, op, typ, ""}] = true
	}
	return f
}

func (f *fakeChecker) Authorize(ctx context.Context, s auth.Session, a authz.Action) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, a)
	ok := f.allow[grant{s.Principal.String(), a.Op, a.Type, a.Name}]
	if !ok {
		f.denials = append(f.denials, a)
		if authz.IsQuiet(ctx) {
			f.quiet = append(f.quiet, a)
		}
	}
	return ok
}

func (f *fakeChecker) AuthorizeAny(_ context.Context, s auth.Session, op authz.Operation, t authz.ResourceType, request string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, authz.Action{Op: op, Type: t, Name: "*any*", Request: request})
	ok := f.anyOK[grant{s.Principal.String(), op, t, ""}]
	if !ok {
		f.denials = append(f.denials, authz.Action{Op: op, Type: t, Name: "*any*", Request: request})
	}
	return ok
}

// denied reports whether the Checker denied op on (typ, name) for the
// named request.
func (f *fakeChecker) denied(request string, op authz.Operation, typ authz.ResourceType, name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, a := range f.denials {
		if a.Request == request && a.Op == op && a.Type == typ && a.Name == name {
			return true
		}
	}
	return false
}

func (f *fakeChecker) reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked, f.denials, f.quiet = nil, nil, nil
}

// quietly reports whether the denial of op on (typ, name) for request was
// asked with authz.Quietly.
func (f *fakeChecker) quietly(request string, op authz.Operation, typ authz.ResourceType, name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, a := range f.quiet {
		if a.Request == request && a.Op == op && a.Type == typ && a.Name == name {
			return true
		}
	}
	return false
}

const (
	alice = "User:alice"
	bob   = "User:bob" // no grants at all
)

// as is ctx carrying a client session of principal p.
func as(ctx context.Context, p string) context.Context {
	pr, err := auth.ParsePrincipal(p)
	if err != nil {
		panic(err)
	}
	return auth.NewContext(ctx, auth.Session{Principal: pr, Host: "127.0.0.1", Listener: auth.ListenerKafka})
}

// authzEnv is a dev node whose request layer asks a fakeChecker, with
// topics "a" and "b" (one partition each) created from inside the
// process (no session: allowed).
type authzEnv struct {
	raw *request.Handler // the node's own handler: no authorizer
	h   *request.Handler // a copy asking fc
	fc  *fakeChecker
	ctx context.Context
}

func newAuthzEnv(t *testing.T) *authzEnv {
	t.Helper()
	n := testutil.StartDev(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	raw := n.Handler()
	h := raw.ForListener(request.ListenerClient)
	fc := newFake()
	h.Authorizer = fc
	ct, err := h.CreateTopics(ctx, &pb.CreateTopicsRequest{Topics: []*pb.CreatableTopic{{Name: "a", NumPartitions: 1, ReplicationFactor: 1}, {Name: "b", NumPartitions: 1, ReplicationFactor: 1}}, TimeoutMs: 30000})
	if err != nil || len(ct.Topics) != 2 || ct.Topics[0].ErrorCode != pb.ErrorCode_NONE || ct.Topics[1].ErrorCode != pb.ErrorCode_NONE {
		t.Fatalf("CreateTopics a, b: %v %v", ct, err)
	}
	if len(fc.asked) != 0 {
		t.Fatalf("a request with no session asked the Checker: %v", fc.asked)
	}
	return &authzEnv{raw: raw, h: h, fc: fc, ctx: ctx}
}

var plainBatch = record.BatchOptions{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}

// TestAuthorizeNoSessionOrNoAuthorizer: a request with no session (from
// inside the process) and any request to a handler with no Authorizer
// are allowed without asking; one with a session asks, once per
// resource, naming the request for the audit log.
func TestAuthorizeNoSessionOrNoAuthorizer(t *testing.T) {
	e := newAuthzEnv(t)
	// The node's own handler has no Authorizer: bob, with no grant, produces.
	r, _ := e.raw.Produce(as(e.ctx, bob), &pb.ProduceRequest{Acks: 1, Partitions: []*pb.PartitionRecords{{Topic: "a", Records: batch(t, plainBatch, "x")}}})
	if r.Partitions[0].ErrorCode != pb.ErrorCode_NONE {
		t.Fatalf("no authorizer: %v %q", r.Partitions[0].ErrorCode, r.Partitions[0].ErrorMessage)
	}
	// No session: allowed, nothing asked.
	r, _ = e.h.Produce(e.ctx, &pb.ProduceRequest{Acks: 1, Partitions: []*pb.PartitionRecords{{Topic: "a", Records: batch(t, plainBatch, "x")}}})
	if r.Partitions[0].ErrorCode != pb.ErrorCode_NONE || len(e.fc.asked) != 0 {
		t.Fatalf("no session: %v, asked %v", r.Partitions[0].ErrorCode, e.fc.asked)
	}
	// A session: asked once for a topic named in two partitions' entries.
	r, _ = e.h.Produce(as(e.ctx, bob), &pb.ProduceRequest{Acks: 1, Partitions: []*pb.PartitionRecords{
		{Topic: "a", Records: batch(t, plainBatch, "x")}, {Topic: "a", Records: batch(t, plainBatch, "y")}}})
	for _, p := range r.Partitions {
		if p.ErrorCode != pb.ErrorCode_TOPIC_AUTHORIZATION_FAILED {
			t.Fatalf("bob's produce: %v", p.ErrorCode)
		}
	}
	if len(e.fc.asked) != 1 || e.fc.asked[0] != (authz.Action{Op: authz.OpWrite, Type: authz.ResourceTopic, Name: "a", Request: "Produce"}) {
		t.Fatalf("asked %v, want one Write on Topic:a for Produce", e.fc.asked)
	}
}

// waitTxnCoordinator waits until the transaction coordinator answers an
// InitProducerId for id (asked from inside the process) and returns it.
func waitTxnCoordinator(t *testing.T, e *authzEnv, id string) *pb.InitProducerIdResponse {
	t.Helper()
	var ip *pb.InitProducerIdResponse
	wait.Eventually(t, 30*time.Second, "InitProducerId", func() bool {
		fc, err := e.raw.FindCoordinator(e.ctx, &pb.FindCoordinatorRequest{KeyType: pb.CoordinatorType_TRANSACTION, Keys: []string{id}})
		if err != nil || fc.Coordinators[0].ErrorCode != pb.ErrorCode_NONE {
			return false
		}
		ip, err = e.raw.InitProducerId(e.ctx, &pb.InitProducerIdRequest{TransactionalId: id, TransactionTimeoutMs: 60000, ProducerId: -1, ProducerEpoch: -1})
		return err == nil && ip.ErrorCode == pb.ErrorCode_NONE
	})
	return ip
}

// waitGroupCoordinator waits until the group coordinator answers for group.
func waitGroupCoordinator(t *testing.T, e *authzEnv, group string) {
	t.Helper()
	wait.Eventually(t, 30*time.Second, "the group coordinator", func() bool {
		fc, err := e.raw.FindCoordinator(e.ctx, &pb.FindCoordinatorRequest{KeyType: pb.CoordinatorType_GROUP, Keys: []string{group}})
		if err != nil || fc.Coordinators[0].ErrorCode != pb.ErrorCode_NONE {
			return false
		}
		r, err := e.raw.OffsetFetch(e.ctx, &pb.OffsetFetchRequest{GroupId: group})
		return err == nil && r.ErrorCode == pb.ErrorCode_NONE
	})
}
