package request

import (
	"context"
	"time"

	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/metadata"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// Client quotas (issue 22, KIP-546).

// Kafka's DescribeClientQuotas match types.
const (
	QuotaMatchExact     = 0
	QuotaMatchDefault   = 1
	QuotaMatchSpecified = 2
)

// quotaAlterWait bounds how long an alter waits for this broker's image
// to show what the controller wrote.
const quotaAlterWait = 5 * time.Second

// AlterClientQuotas forwards to the active controller, then waits (a few
// seconds at most) until this broker's image shows each accepted entry,
// so a DescribeClientQuotas that follows here sees it.
func (h *Handler) AlterClientQuotas(ctx context.Context, req *pb.AlterClientQuotasRequest) (*pb.AlterClientQuotasResponse, error) {
	resp, err := toController(ctx, h, func(ctx context.Context, c pb.ControllerClient) (*pb.AlterClientQuotasResponse, error) {
		return c.AlterClientQuotas(ctx, req)
	})
	if err != nil {
		code, msg := timedOutIfUnknown(errs.Split(err))
		out := &pb.AlterClientQuotasResponse{}
		for _, e := range req.Entries {
			out.Entries = append(out.Entries, &pb.AlterClientQuotasEntryResult{Entity: e.Entity, ErrorCode: code, ErrorMessage: msg})
		}
		return out, nil
	}
	if !req.ValidateOnly {
		waitUntil(ctx, quotaAlterWait, func() bool { return quotasVisible(h.Repl.Image(), req, resp) })
	}
	return resp, nil
}

func quotasVisible(img *metadata.Image, req *pb.AlterClientQuotasRequest, resp *pb.AlterClientQuotasResponse) bool {
	for i, r := range resp.Entries {
		if r.ErrorCode != pb.ErrorCode_NONE || i >= len(req.Entries) {
			continue
		}
		u, err := metadata.QuotaUserOf(req.Entries[i].Entity)
		if err != nil {
			continue
		}
		for _, op := range req.Entries[i].Ops {
			v, ok := img.ClientQuotas[u][op.Key]
			if op.Remove == ok || (!op.Remove && v != op.Value) {
				return false
			}
		}
	}
	return true
}

// DescribeClientQuotas answers from this broker's image with Kafka's
// filter: each component names an entity type and matches its exact name,
// its default entity, or any entity of it (specified); an entity matches
// when every component does, and, with strict, has no other entity type.
// Only user entities are stored, so a component of type client-id matches
// nothing (without strict it is still a component the entity lacks).
func (h *Handler) DescribeClientQuotas(_ context.Context, req *pb.DescribeClientQuotasRequest) (*pb.DescribeClientQuotasResponse, error) {
	seen := map[string]bool{}
	for _, c := range req.Components {
		if c.EntityType != metadata.QuotaEntityUser && c.EntityType != "client-id" && c.EntityType != "ip" {
			return &pb.DescribeClientQuotasResponse{ErrorCode: pb.ErrorCode_INVALID_REQUEST, ErrorMessage: "unknown entity type " + c.EntityType}, nil
		}
		if seen[c.EntityType] {
			return &pb.DescribeClientQuotasResponse{ErrorCode: pb.ErrorCode_INVALID_REQUEST, ErrorMessage: "entity type " + c.EntityType + " named twice in the filter"}, nil
		}
		seen[c.EntityType] = true
		if c.MatchType < QuotaMatchExact || c.MatchType > QuotaMatchSpecified {
			return &pb.DescribeClientQuotasResponse{ErrorCode: pb.ErrorCode_INVALID_REQUEST, ErrorMessage: "unknown match type"}, nil
		}
	}
	img := h.Repl.Image()
	resp := &pb.DescribeClientQuotasResponse{}
	for _, u := range img.QuotaUsers() {
		if !quotaMatches(u, req) {
			continue
		}
		vals := map[string]float64{}
		for k, v := range img.ClientQuotas[u] {
			vals[k] = v
		}
		resp.Entries = append(resp.Entries, &pb.DescribeClientQuotasEntry{Entity: u.Entity(), Values: vals})
	}
	return resp, nil
}

func quotaMatches(u metadata.QuotaUser, req *pb.DescribeClientQuotasRequest) bool {
	userNamed := false
	for _, c := range req.Components {
		if c.EntityType != metadata.QuotaEntityUser {
			return false // the entity has no part of that type
		}
		userNamed = true
		switch c.MatchType {
		case QuotaMatchExact:
			if u.Default || u.Name != c.Match {
				return false
			}
		case QuotaMatchDefault:
			if !u.Default {
				return false
			}
		}
	}
	return !req.Strict || userNamed
}
