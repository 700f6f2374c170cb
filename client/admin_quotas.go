package client

import (
	"context"

	"google.golang.org/grpc"

	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// Issue 22 (quotas): Kafka's client quotas of users (KIP-546).

// Quota keys, Kafka's.
const (
	QuotaProducerByteRate  = "producer_byte_rate"
	QuotaConsumerByteRate  = "consumer_byte_rate"
	QuotaRequestPercentage = "request_percentage"
)

// QuotaUser names a user quota entity: a user by name, or (Default) the
// default user, whose quotas apply to users without their own.
type QuotaUser struct {
	Name    string
	Default bool
}

func (u QuotaUser) entity() *pb.QuotaEntity {
	return &pb.QuotaEntity{Parts: []*pb.QuotaEntityPart{{EntityType: "user", Name: u.Name, IsDefault: u.Default}}}
}

// UserQuotas are one user entity's quotas by key.
type UserQuotas struct {
	User   QuotaUser
	Values map[string]float64
}

// AlterUserQuotas sets and removes quota keys of one user entity through
// the active controller. A refusal (INVALID_REQUEST: an unknown key, a
// value not positive, a byte rate not whole) is the error.
func (a *Admin) AlterUserQuotas(ctx context.Context, u QuotaUser, set map[string]float64, remove []string) error {
	e := &pb.AlterClientQuotasEntry{Entity: u.entity()}
	for k, v := range set {
		e.Ops = append(e.Ops, &pb.QuotaOp{Key: k, Value: v})
	}
	for _, k := range remove {
		e.Ops = append(e.Ops, &pb.QuotaOp{Key: k, Remove: true})
	}
	var resp *pb.AlterClientQuotasResponse
	err := a.cl.any(ctx, func(ctx context.Context, cc *grpc.ClientConn) error {
		var err error
		resp, err = pb.NewAdminClient(cc).AlterClientQuotas(ctx, &pb.AlterClientQuotasRequest{Entries: []*pb.AlterClientQuotasEntry{e}})
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

// DescribeUserQuotas lists user quotas: of one user (u.Name), of the
// default user (u.Default), or, with u zero, of every user entity.
func (a *Admin) DescribeUserQuotas(ctx context.Context, u QuotaUser) ([]UserQuotas, error) {
	comp := &pb.QuotaFilterComponent{EntityType: "user", MatchType: 2}
	switch {
	case u.Default:
		comp.MatchType = 1
	case u.Name != "":
		comp.MatchType, comp.Match = 0, u.Name
	}
	var resp *pb.DescribeClientQuotasResponse
	err := a.cl.any(ctx, func(ctx context.Context, cc *grpc.ClientConn) error {
		var err error
		resp, err = pb.NewAdminClient(cc).DescribeClientQuotas(ctx, &pb.DescribeClientQuotasRequest{Components: []*pb.QuotaFilterComponent{comp}})
		return err
	})
	if err != nil {
		return nil, err
	}
	if resp.ErrorCode != pb.ErrorCode_NONE {
		return nil, errs.FromCode(resp.ErrorCode, resp.ErrorMessage)
	}
	var out []UserQuotas
	for _, e := range resp.Entries {
		parts := e.Entity.GetParts()
		if len(parts) != 1 {
			continue
		}
		out = append(out, UserQuotas{User: QuotaUser{Name: parts[0].Name, Default: parts[0].IsDefault}, Values: e.Values})
	}
	return out, nil
}
