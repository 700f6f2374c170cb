package testutil

import (
	"context"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/strand-io/strand/proto/strand/v1"
)

// RegistrationHold is a fault on the controller link of a node that is its
// own controller (a dev node): while held, the controller refuses broker
// registrations (UNAVAILABLE, as an unreachable controller would), so the
// node stays not ready for as long as a test wants. It also counts the
// calls the node takes meanwhile. Install it as the node's first
// interceptor: cfg.UnaryInterceptors = append(…, h.Intercept).
type RegistrationHold struct {
	held atomic.Bool
	mu   sync.Mutex
	seen map[string]int64 // full method name -> calls while held
}

// NewRegistrationHold returns a hold, held or not.
func NewRegistrationHold(held bool) *RegistrationHold {
	h := &RegistrationHold{seen: map[string]int64{}}
	h.held.Store(held)
	return h
}

// Release lets registrations through from now on.
func (h *RegistrationHold) Release() { h.held.Store(false) }

// Seen counts the calls of a method (pb.X_Y_FullMethodName) the node took
// while held; for RegisterBroker, the registrations refused.
func (h *RegistrationHold) Seen(method string) int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.seen[method]
}

// Intercept is the grpc.UnaryServerInterceptor.
func (h *RegistrationHold) Intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if h.held.Load() {
		h.mu.Lock()
		h.seen[info.FullMethod]++
		h.mu.Unlock()
		if info.FullMethod == pb.Controller_RegisterBroker_FullMethodName {
			return nil, status.Error(codes.Unavailable, "registration held by the test")
		}
	}
	return handler(ctx, req)
}
