// Package api is the gRPC front door. It owns only what is gRPC's: which
// services each listener registers (listeners.go: client, external and
// inter-broker), the Produce stream's plumbing and its in-flight bound
// (producer.go), connection limits (connlimit.go), the inter-broker
// listener's peer filter (peers.go), the readiness gate (gate.go), the
// server options and buffer pools (grpc.go, bufpool.go, fetchbuf.go), the
// request metrics (metrics.go), and the mapping of errors onto gRPC
// statuses (status.go).
//
// What a request does is package request's: every client-facing service
// method here (services.go) is one call of request.Handler's method of
// the same name, with the same proto/strand/v1 messages; failures travel
// as Kafka error codes inside the response. The Controller service
// (controller.go) is not client-facing and calls the controller directly.
package api

import (
	"log/slog"

	"github.com/strand-io/strand/clock"
	"github.com/strand-io/strand/controller"
	"github.com/strand-io/strand/quota"
	"github.com/strand-io/strand/request"
)

// DefaultProduceMaxInFlight is max.in.flight.requests.per.stream's
// default: above the five requests an idempotent producer keeps in flight
// per broker, with room for a non-idempotent one that pipelines more.
const DefaultProduceMaxInFlight = 16

// Deps is what the services call into.
type Deps struct {
	NodeID int32
	// Handler answers the requests (nil on a controller-only node, which
	// serves no client). RegisterClient copies it with External set for
	// an external listener.
	Handler *request.Handler
	// Controller is nil on a broker-only node.
	Controller *controller.Controller
	// ProduceMaxInFlight is max.in.flight.requests.per.stream: how many
	// requests of one Produce stream are read and not yet answered before
	// the stream is no longer read (0: DefaultProduceMaxInFlight).
	ProduceMaxInFlight int
	// External: these services answer on the external client listener,
	// so the addresses they hand out are brokers' external addresses.
	External bool
	Logger   *slog.Logger
	// Metrics counts bytes, records and requests (nil: not counted).
	Metrics *Metrics
	// SASL issues and checks SCRAM session tokens (sasl.go;
	// nil: SaslAuthenticate answers ILLEGAL_SASL_STATE).
	SASL *SASLTokens
	// Quotas enforces client quotas (quotas.go; nil: none);
	// QuotaClock times the throttles (nil: the wall clock).
	Quotas     *quota.Manager
	QuotaClock clock.Clock
}
