package request

import (
	"context"

	"github.com/strand-io/strand/authz"
	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/internal/auth"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// Authorization: every request of both front doors asks
// Handler.Authorizer, as Kafka's KafkaApis asks its authorizer, for the
// operations and resources Kafka's APIs need, and a refusal is answered
// with Kafka's code in the field Kafka puts it in (per partition, per
// topic, per group, or the request's own error), never as a transport
// error. A request whose context carries no auth.Session came from inside
// the process (the node's own calls, tests) and is allowed, as is every
// request when Authorizer is nil (no authorizer.class.name: Kafka without
// an authorizer).
//
// A name the principal may not Describe is answered
// TOPIC_AUTHORIZATION_FAILED (or the group's, or the transactional id's
// code) whether or not it exists: the check comes before any lookup, so
// an answer never tells an unauthorized principal what exists.

// authorizer is one request's view of the Checker: the session, the
// request's name for the audit log, and the answers already given (a
// request naming a topic in many partitions asks once, as Kafka's
// filterByAuthorized does, so a denial is logged once per resource).
type authorizer struct {
	ctx     context.Context
	c       authz.Checker // nil: everything allowed
	s       auth.Session
	request string
	seen    map[authz.Action]bool
}

// authz returns the authorizer of one request named request (Kafka's API
// name: "Produce", "InitProducerId", …).
func (h *Handler) authz(ctx context.Context, request string) *authorizer {
	a := &authorizer{ctx: ctx, request: request}
	if h.Authorizer == nil {
		return a
	}
	s, ok := auth.FromContext(ctx)
	if !ok {
		return a // inside the process
	}
	a.c, a.s = h.Authorizer, s
	return a
}

// quietly is a's view for checks whose denial is expected (a listing
// filtered by what the principal may see, a first check with a
// fallback): denied, they are not audited at info, as Kafka's
// logIfDenied=false. It shares a's answers.
func (a *authorizer) quietly() *authorizer {
	q := *a
	q.ctx = authz.Quietly(a.ctx)
	if q.seen == nil {
		q.seen = map[authz.Action]bool{}
		a.seen = q.seen
	}
	return &q
}

// open reports whether every action is allowed without asking (no
// authorizer, or no session).
func (a *authorizer) open() bool { return a.c == nil }

// allowed reports whether the session may do op on the resource.
func (a *authorizer) allowed(op authz.Operation, t authz.ResourceType, name string) bool {
	if a.c == nil {
		return true
	}
	act := authz.Action{Op: op, Type: t, Name: name, Request: a.request}
	key := act
	if ok, done := a.seen[key]; done {
		return ok
	}
	ok := a.c.Authorize(a.ctx, a.s, act)
	if a.seen == nil {
		a.seen = map[authz.Action]bool{}
	}
	a.seen[key] = ok
	return ok
}

// cluster reports whether the session may do op on the cluster.
func (a *authorizer) cluster(op authz.Operation) bool {
	return a.allowed(op, authz.ResourceCluster, authz.ClusterName)
}

// topic, group and txnID report whether the session may do op on the
// named resource.
func (a *authorizer) topic(op authz.Operation, name string) bool {
	return a.allowed(op, authz.ResourceTopic, name)
}

func (a *authorizer) group(op authz.Operation, name string) bool {
	return a.allowed(op, authz.ResourceGroup, name)
}

func (a *authorizer) txnID(op authz.Operation, name string) bool {
	return a.allowed(op, authz.ResourceTransactionalID, name)
}

// anyOf reports whether the session may do op on at least one resource of
// the type (Kafka's authorizeByResourceType).
func (a *authorizer) anyOf(op authz.Operation, t authz.ResourceType) bool {
	if a.c == nil {
		return true
	}
	return a.c.AuthorizeAny(a.ctx, a.s, op, t, a.request)
}

// The refusals, as Kafka words them.

func topicDenied(op authz.Operation, topic string) error {
	return errs.New(pb.ErrorCode_TOPIC_AUTHORIZATION_FAILED, "not authorized to %s topic %q", op, topic)
}

func groupDenied(op authz.Operation, group string) error {
	return errs.New(pb.ErrorCode_GROUP_AUTHORIZATION_FAILED, "not authorized to %s group %q", op, group)
}

func txnIDDenied(op authz.Operation, id string) error {
	return errs.New(pb.ErrorCode_TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "not authorized to %s transactional id %q", op, id)
}

func clusterDenied(op authz.Operation) error {
	return errs.New(pb.ErrorCode_CLUSTER_AUTHORIZATION_FAILED, "not authorized to %s the cluster", op)
}

// authorizeCluster is the check of a request that needs one operation on
// the cluster: nil, or the CLUSTER_AUTHORIZATION_FAILED error to answer.
func (h *Handler) authorizeCluster(ctx context.Context, request string, op authz.Operation) error {
	if h.authz(ctx, request).cluster(op) {
		return nil
	}
	return clusterDenied(op)
}

// authorizeACLAdmin is the check of the ACL requests (Kafka's AclApis):
// CreateAcls and DeleteAcls need Alter on the cluster, DescribeAcls
// Describe. request is "CreateAcls", "DeleteAcls" or "DescribeAcls"; the
// answer is nil or the CLUSTER_AUTHORIZATION_FAILED error, which the
// handler puts in its response's error (the ACL handlers call it).
func (h *Handler) authorizeACLAdmin(ctx context.Context, request string) error {
	op := authz.OpAlter
	if request == "DescribeAcls" {
		op = authz.OpDescribe
	}
	return h.authorizeCluster(ctx, request, op)
}

// authorizeScramAdmin is the check of the SCRAM credential requests:
// AlterUserScramCredentials needs Alter on the cluster,
// DescribeUserScramCredentials Describe (as Kafka). request is the
// request's Kafka name.
func (h *Handler) authorizeScramAdmin(ctx context.Context, request string) error {
	op := authz.OpAlter
	if request == "DescribeUserScramCredentials" {
		op = authz.OpDescribe
	}
	return h.authorizeCluster(ctx, request, op)
}

// authorizeClientQuotas is the check of the client quota requests:
// AlterClientQuotas needs AlterConfigs on the cluster,
// DescribeClientQuotas DescribeConfigs (as Kafka). request is the
// request's Kafka name.
func (h *Handler) authorizeClientQuotas(ctx context.Context, request string) error {
	op := authz.OpAlterConfigs
	if request == "DescribeClientQuotas" {
		op = authz.OpDescribeConfigs
	}
	return h.authorizeCluster(ctx, request, op)
}

// fromBroker reports whether the request came from another node: a
// session on the inter-broker listener, or a broker principal.
func fromBroker(ctx context.Context) bool {
	s, ok := auth.FromContext(ctx)
	return ok && (s.Broker || s.Listener == auth.ListenerInterBroker)
}
