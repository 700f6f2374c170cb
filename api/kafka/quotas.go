package kafka

import (
	"context"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"

	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/request"
)

func init() {
	// Client quotas (KIP-546): entities user, client-id and user +
	// client-id, each part a name or its type's default (a null name on
	// the wire).
	register(kmsg.DescribeClientQuotas, 0, 1, handleDescribeClientQuotas)
	register(kmsg.AlterClientQuotas, 0, 1, handleAlterClientQuotas)
}

func handleAlterClientQuotas(ctx context.Context, c *Conn, r kmsg.Request) (kmsg.Response, error) {
	req := r.(*kmsg.AlterClientQuotasRequest)
	preq := &pb.AlterClientQuotasRequest{ValidateOnly: req.ValidateOnly}
	for _, e := range req.Entries {
		pe := &pb.AlterClientQuotasEntry{Entity: &pb.QuotaEntity{}}
		for _, p := range e.Entity {
			part := &pb.QuotaEntityPart{EntityType: p.Type, IsDefault: p.Name == nil}
			if p.Name != nil {
				part.Name = *p.Name
			}
			pe.Entity.Parts = append(pe.Entity.Parts, part)
		}
		for _, op := range e.Ops {
			pe.Ops = append(pe.Ops, &pb.QuotaOp{Key: op.Key, Value: op.Value, Remove: op.Remove})
		}
		preq.Entries = append(preq.Entries, pe)
	}
	presp, err := c.H.AlterClientQuotas(ctx, preq)
	if err != nil {
		return nil, err
	}
	resp := kmsg.NewPtrAlterClientQuotasResponse()
	for i, e := range req.Entries {
		re := kmsg.NewAlterClientQuotasResponseEntry()
		if i < len(presp.Entries) {
			re.ErrorCode, re.ErrorMessage = code(presp.Entries[i].ErrorCode), errMsg(presp.Entries[i].ErrorMessage)
		}
		for _, p := range e.Entity {
			ent := kmsg.NewAlterClientQuotasResponseEntryEntity()
			ent.Type, ent.Name = p.Type, p.Name
			re.Entity = append(re.Entity, ent)
		}
		resp.Entries = append(resp.Entries, re)
	}
	return resp, nil
}

func handleDescribeClientQuotas(ctx context.Context, c *Conn, r kmsg.Request) (kmsg.Response, error) {
	req := r.(*kmsg.DescribeClientQuotasRequest)
	resp := kmsg.NewPtrDescribeClientQuotasResponse()
	preq := &pb.DescribeClientQuotasRequest{Strict: req.Strict}
	for _, comp := range req.Components {
		pc := &pb.QuotaFilterComponent{EntityType: comp.EntityType, MatchType: int32(comp.MatchType)}
		switch {
		case comp.Match == nil && comp.MatchType == request.QuotaMatchExact:
			resp.ErrorCode, resp.ErrorMessage = code(pb.ErrorCode_INVALID_REQUEST), errMsg("the filter asks MATCH_TYPE_EXACT for "+comp.EntityType+" but names nothing")
			return resp, nil
		case comp.Match != nil && comp.MatchType != request.QuotaMatchExact:
			// Kafka refuses a match string, even "", with DEFAULT or
			// SPECIFIED; the request layer sees "" as no name.
			resp.ErrorCode, resp.ErrorMessage = code(pb.ErrorCode_INVALID_REQUEST), errMsg("the filter names "+*comp.Match+" for "+comp.EntityType+" with a match type that takes no name")
			return resp, nil
		case comp.Match != nil:
			pc.Match = *comp.Match
		}
		preq.Components = append(preq.Components, pc)
	}
	presp, err := c.H.DescribeClientQuotas(ctx, preq)
	if err != nil {
		return nil, err
	}
	resp.ErrorCode, resp.ErrorMessage = code(presp.ErrorCode), errMsg(presp.ErrorMessage)
	for _, e := range presp.Entries {
		re := kmsg.NewDescribeClientQuotasResponseEntry()
		for _, p := range e.Entity.GetParts() {
			ent := kmsg.NewDescribeClientQuotasResponseEntryEntity()
			ent.Type = p.EntityType
			if !p.IsDefault {
				name := p.Name
				ent.Name = &name
			}
			re.Entity = append(re.Entity, ent)
		}
		keys := make([]string, 0, len(e.Values))
		for k := range e.Values {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			v := kmsg.NewDescribeClientQuotasResponseEntryValue()
			v.Key, v.Value = k, e.Values[k]
			re.Values = append(re.Values, v)
		}
		resp.Entries = append(resp.Entries, re)
	}
	return resp, nil
}
