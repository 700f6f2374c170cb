package client

import (
	"context"

	"google.golang.org/grpc"

	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// Client quotas (Kafka's, KIP-546): entities of a user, a client id, or
// a user and a client id, each part a name or its type's default.

// Quota keys, Kafka's.
const (
	QuotaProducerByteRate  = "producer_byte_rate"
	QuotaConsumerByteRate  = "consumer_byte_rate"
	QuotaRequestPercentage = "request_percentage"
)

// Kafka's quota entity types.
const (
	QuotaEntityUser     = "user"
	QuotaEntityClientID = "client-id"
)

// QuotaPart is one part of a quota entity: a name, or (Default) the
// type's default entity, whose quotas apply to those without their own.
type QuotaPart struct {
	Name    string
	Default bool
}

// QuotaEntity is a client quota entity: User, ClientID or both set.
type QuotaEntity struct {
	User     *QuotaPart
	ClientID *QuotaPart
}

func (e QuotaEntity) wire() *pb.QuotaEntity {
	out := &pb.QuotaEntity{}
	if e.User != nil {
		out.Parts = append(out.Parts, &pb.QuotaEntityPart{EntityType: QuotaEntityUser, Name: e.User.Name, IsDefault: e.User.Default})
	}
	if e.ClientID != nil {
		out.Parts = append(out.Parts, &pb.QuotaEntityPart{EntityType: QuotaEntityClientID, Name: e.ClientID.Name, IsDefault: e.ClientID.Default})
	}
	return out
}

func quotaEntityOf(w *pb.QuotaEntity) (QuotaEntity, bool) {
	var e QuotaEntity
	for _, p := range w.GetParts() {
		part := &QuotaPart{Name: p.Name, Default: p.IsDefault}
		switch p.EntityType {
		case QuotaEntityUser:
			e.User = part
		case QuotaEntityClientID:
			e.ClientID = part
		default:
			return e, false
		}
	}
	return e, true
}

// QuotaMatch is how a QuotaFilter component matches its entity type
// (Kafka's match types).
type QuotaMatch int32

const (
	// QuotaMatchExact matches the part named Name.
	QuotaMatchExact QuotaMatch = 0
	// QuotaMatchDefault matches the type's default entity.
	QuotaMatchDefault QuotaMatch = 1
	// QuotaMatchSpecified matches any entity with a part of the type.
	QuotaMatchSpecified QuotaMatch = 2
)

// QuotaFilter is one component of a DescribeClientQuotas filter.
type QuotaFilter struct {
	EntityType string // QuotaEntityUser or QuotaEntityClientID
	Match      QuotaMatch
	Name       string // for QuotaMatchExact
}

// ClientQuotas are one entity's quotas by key.
type ClientQuotas struct {
	Entity QuotaEntity
	Values map[string]float64
}

// AlterClientQuotas sets and removes quota keys of one entity through the
// active controller. A refusal (INVALID_REQUEST: an unknown key, a value
// not positive, a byte rate not whole, an entity Kafka refuses;
// CLUSTER_AUTHORIZATION_FAILED without AlterConfigs on the cluster) is the
// error.
func (a *Admin) AlterClientQuotas(ctx context.Context, e QuotaEntity, set map[string]float64, remove []string) error {
	entry := &pb.AlterClientQuotasEntry{Entity: e.wire()}
	for k, v := range set {
		entry.Ops = append(entry.Ops, &pb.QuotaOp{Key: k, Value: v})
	}
	for _, k := range remove {
		entry.Ops = append(entry.Ops, &pb.QuotaOp{Key: k, Remove: true})
	}
	var resp *pb.AlterClientQuotasResponse
	err := a.cl.any(ctx, func(ctx context.Context, cc *grpc.ClientConn) error {
		var err error
		resp, err = pb.NewAdminClient(cc).AlterClientQuotas(ctx, &pb.AlterClientQuotasRequest{Entries: []*pb.AlterClientQuotasEntry{entry}})
		if err == nil && len(resp.Entries) > 0 && controllerRoutingError(resp.Entries[0].ErrorCode) {
			return errs.FromCode(resp.Entries[0].ErrorCode, resp.Entries[0].ErrorMessage)
		}
		return err
	})
	if err != nil {
		return err
	}
	if len(resp.Entries) > 0 && resp.Entries[0].ErrorCode != pb.ErrorCode_NONE {
		return errs.FromCode(resp.Entries[0].ErrorCode, resp.Entries[0].ErrorMessage)
	}
	return nil
}

// DescribeClientQuotas lists the entities the filter matches, with Kafka's
// semantics: every component must match, and with strict an entity with
// a part of a type no component names does not.
func (a *Admin) DescribeClientQuotas(ctx context.Context, filter []QuotaFilter, strict bool) ([]ClientQuotas, error) {
	req := &pb.DescribeClientQuotasRequest{Strict: strict}
	for _, f := range filter {
		req.Components = append(req.Components, &pb.QuotaFilterComponent{EntityType: f.EntityType, MatchType: int32(f.Match), Match: f.Name})
	}
	var resp *pb.DescribeClientQuotasResponse
	err := a.cl.any(ctx, func(ctx context.Context, cc *grpc.ClientConn) error {
		var err error
		resp, err = pb.NewAdminClient(cc).DescribeClientQuotas(ctx, req)
		return err
	})
	if err != nil {
		return nil, err
	}
	if resp.ErrorCode != pb.ErrorCode_NONE {
		return nil, errs.FromCode(resp.ErrorCode, resp.ErrorMessage)
	}
	var out []ClientQuotas
	for _, e := range resp.Entries {
		if ent, ok := quotaEntityOf(e.Entity); ok {
			out = append(out, ClientQuotas{Entity: ent, Values: e.Values})
		}
	}
	return out, nil
}

// QuotaUser names a user quota entity: a user by name, or (Default) the
// default user, whose quotas apply to users without their own.
type QuotaUser struct {
	Name    string
	Default bool
}

// UserQuotas are one user entity's quotas by key.
type UserQuotas struct {
	User   QuotaUser
	Values map[string]float64
}

// AlterUserQuotas is AlterClientQuotas of the user entity u.
func (a *Admin) AlterUserQuotas(ctx context.Context, u QuotaUser, set map[string]float64, remove []string) error {
	return a.AlterClientQuotas(ctx, QuotaEntity{User: &QuotaPart{Name: u.Name, Default: u.Default}}, set, remove)
}

// DescribeUserQuotas lists the quotas of user entities (a user alone, not
// with a client id): of one user (u.Name), of the default user
// (u.Default), or, with u zero, of every user.
func (a *Admin) DescribeUserQuotas(ctx context.Context, u QuotaUser) ([]UserQuotas, error) {
	f := QuotaFilter{EntityType: QuotaEntityUser, Match: QuotaMatchSpecified}
	switch {
	case u.Default:
		f.Match = QuotaMatchDefault
	case u.Name != "":
		f.Match, f.Name = QuotaMatchExact, u.Name
	}
	qs, err := a.DescribeClientQuotas(ctx, []QuotaFilter{f}, true)
	if err != nil {
		return nil, err
	}
	out := make([]UserQuotas, 0, len(qs))
	for _, q := range qs {
		out = append(out, UserQuotas{User: QuotaUser{Name: q.Entity.User.Name, Default: q.Entity.User.Default}, Values: q.Values})
	}
	return out, nil
}
