package request

import (
	"context"
	"time"

	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/metadata"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// Client quotas (KIP-546): entities user, client-id and user + client-id.

// Kafka's DescribeClientQuotas match types.
const (
	QuotaMatchExact     = 0
	QuotaMatchDefault   = 1
	QuotaMatchSpecified = 2
)

// quotaAlterWait bounds how long an alter waits for this broker's image
// to show what the controller wrote.
const quotaAlterWait = 5 * time.Second

// AlterClientQuotas needs AlterConfigs on the cluster (as Kafka; refused
// with CLUSTER_AUTHORIZATION_FAILED on every entry), then forwards to the
// active controller and waits (a few seconds at most) until this broker's
// image shows each accepted entry, so a DescribeClientQuotas that follows
// here sees it.
func (h *Handler) AlterClientQuotas(ctx context.Context, req *pb.AlterClientQuotasRequest) (*pb.AlterClientQuotasResponse, error) {
	everyEntry := func(err error) *pb.AlterClientQuotasResponse {
		code, msg := errs.Split(err)
		out := &pb.AlterClientQuotasResponse{}
		for _, e := range req.Entries {
			out.Entries = append(out.Entries, &pb.AlterClientQuotasEntryResult{Entity: e.Entity, ErrorCode: code, ErrorMessage: msg})
		}
		return out
	}
	if err := h.authorizeClientQuotas(ctx, "AlterClientQuotas"); err != nil {
		return everyEntry(err), nil
	}
	resp, err := toController(ctx, h, func(ctx context.Context, c pb.ControllerClient) (*pb.AlterClientQuotasResponse, error) {
		return c.AlterClientQuotas(ctx, req)
	})
	if err != nil {
		code, msg := timedOutIfUnknown(errs.Split(err))
		return everyEntry(errs.New(code, "%s", msg)), nil
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
		e, err := metadata.QuotaEntityOf(req.Entries[i].Entity)
		if err != nil {
			continue
		}
		for _, op := range req.Entries[i].Ops {
			v, ok := img.ClientQuotas[e][op.Key]
			if op.Remove == ok || (!op.Remove && v != op.Value) {
				return false
			}
		}
	}
	return true
}

// quotaFilter is a DescribeClientQuotas filter as Kafka's ClientQuotasImage
// reads it: the entity types whose part must equal a name or the default
// (exact), and those that must only be present (specified).
type quotaFilter struct {
	exact     map[string]metadata.QuotaName
	specified map[string]bool
	strict    bool
}

// DescribeClientQuotas needs DescribeConfigs on the cluster (as Kafka;
// CLUSTER_AUTHORIZATION_FAILED in the answer's error), then answers from
// this broker's image with Kafka's filter: each component names an entity
// type and matches its exact name (EXACT), its default entity (DEFAULT),
// or any entity having that type (SPECIFIED); an entity matches when
// every component does and, with strict, has no part of another type.
// Kafka's refusals: INVALID_REQUEST for an empty or repeated entity type,
// a match name with DEFAULT or SPECIFIED, an unknown match type, an ip
// component with a user or client-id one; UNSUPPORTED_VERSION for an
// entity type other than user, client-id and ip. (ip entities are never
// stored: an ip filter matches nothing.)
func (h *Handler) DescribeClientQuotas(ctx context.Context, req *pb.DescribeClientQuotasRequest) (*pb.DescribeClientQuotasResponse, error) {
	if err := h.authorizeClientQuotas(ctx, "DescribeClientQuotas"); err != nil {
		code, msg := errs.Split(err)
		return &pb.DescribeClientQuotasResponse{ErrorCode: code, ErrorMessage: msg}, nil
	}
	f, err := readQuotaFilter(req)
	if err != nil {
		code, msg := errs.Split(err)
		return &pb.DescribeClientQuotasResponse{ErrorCode: code, ErrorMessage: msg}, nil
	}
	img := h.Repl.Image()
	resp := &pb.DescribeClientQuotasResponse{}
	for _, e := range img.QuotaEntities() {
		if !f.matches(e) {
			continue
		}
		vals := map[string]float64{}
		for k, v := range img.ClientQuotas[e] {
			vals[k] = v
		}
		resp.Entries = append(resp.Entries, &pb.DescribeClientQuotasEntry{Entity: e.Entity(), Values: vals})
	}
	return resp, nil
}

func readQuotaFilter(req *pb.DescribeClientQuotasRequest) (quotaFilter, error) {
	f := quotaFilter{exact: map[string]metadata.QuotaName{}, specified: map[string]bool{}, strict: req.Strict}
	for _, c := range req.Components {
		t := c.EntityType
		_, dupExact := f.exact[t]
		switch {
		case t == "":
			return f, errs.New(pb.ErrorCode_INVALID_REQUEST, "invalid empty entity type")
		case dupExact || f.specified[t]:
			return f, errs.New(pb.ErrorCode_INVALID_REQUEST, "entity type %s cannot appear more than once in the filter", t)
		case t != metadata.QuotaEntityUser && t != metadata.QuotaEntityClientID && t != metadata.QuotaEntityIP:
			return f, errs.New(pb.ErrorCode_UNSUPPORTED_VERSION, "unsupported entity type %s", t)
		}
		switch c.MatchType {
		case QuotaMatchExact:
			f.exact[t] = metadata.QuotaNamed(c.Match)
		case QuotaMatchDefault:
			if c.Match != "" {
				return f, errs.New(pb.ErrorCode_INVALID_REQUEST, "the filter asks MATCH_TYPE_DEFAULT for %s but also names %q", t, c.Match)
			}
			f.exact[t] = metadata.QuotaDefault
		case QuotaMatchSpecified:
			if c.Match != "" {
				return f, errs.New(pb.ErrorCode_INVALID_REQUEST, "the filter asks MATCH_TYPE_SPECIFIED for %s but also names %q", t, c.Match)
			}
			f.specified[t] = true
		default:
			return f, errs.New(pb.ErrorCode_INVALID_REQUEST, "unknown match type %d", c.MatchType)
		}
	}
	names := func(t string) bool { _, ok := f.exact[t]; return ok || f.specified[t] }
	if names(metadata.QuotaEntityIP) && (names(metadata.QuotaEntityUser) || names(metadata.QuotaEntityClientID)) {
		return f, errs.New(pb.ErrorCode_INVALID_REQUEST, "invalid entity filter component combination: an ip component is not used with a user or client-id component")
	}
	return f, nil
}

func (f quotaFilter) matches(e metadata.QuotaEntity) bool {
	part := func(t string) metadata.QuotaName {
		switch t {
		case metadata.QuotaEntityUser:
			return e.User
		case metadata.QuotaEntityClientID:
			return e.ClientID
		}
		return metadata.QuotaName{} // ip: never stored
	}
	if f.strict {
		n := 0
		if e.User.Set {
			n++
		}
		if e.ClientID.Set {
			n++
		}
		if n != len(f.exact)+len(f.specified) {
			return false
		}
	}
	for t, want := range f.exact {
		if part(t) != want {
			return false
		}
	}
	for t := range f.specified {
		if !part(t).Set {
			return false
		}
	}
	return true
}
