package controller

import (
	"context"
	"math"

	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/metadata"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// Client quotas (KIP-546): AlterClientQuotas writes one ClientQuotaRecord
// per key set or removed. Each entry is checked and applied on its own, as
// Kafka's controller does, and refused with INVALID_REQUEST for: an entity
// Kafka refuses (empty, a type named twice, an unknown type, an empty
// name, ip with user or client-id); an ip entity (connection rate quotas
// are not served here); an unknown key; a key named twice; a value not
// positive; a byte rate that is not a whole number or too large; an
// entity named by two entries of one request.

// quotaKeys are the keys accepted for user and client-id entities, with
// whether the value must be a whole number (Kafka's LONG byte rates).
var quotaKeys = map[string]bool{
	"producer_byte_rate": true,
	"consumer_byte_rate": true,
	"request_percentage": false,
}

// ValidateQuotaEntry checks one AlterClientQuotas entry and returns its
// records.
func ValidateQuotaEntry(e *pb.AlterClientQuotasEntry) ([]*pb.MetadataRecord, error) {
	ent, err := metadata.QuotaEntityOf(e.GetEntity())
	if err != nil {
		return nil, errs.New(pb.ErrorCode_INVALID_REQUEST, "%v", err)
	}
	seen := map[string]bool{}
	var recs []*pb.MetadataRecord
	for _, op := range e.GetOps() {
		if seen[op.Key] {
			return nil, errs.New(pb.ErrorCode_INVALID_REQUEST, "duplicate quota key %s: not updating quota for %s", op.Key, ent)
		}
		seen[op.Key] = true
		whole, ok := quotaKeys[op.Key]
		if !ok {
			return nil, errs.New(pb.ErrorCode_INVALID_REQUEST, "invalid configuration key %q: want producer_byte_rate, consumer_byte_rate or request_percentage", op.Key)
		}
		if !op.Remove {
			switch {
			case math.IsNaN(op.Value) || math.IsInf(op.Value, 0) || op.Value <= 0:
				return nil, errs.New(pb.ErrorCode_INVALID_REQUEST, "quota %s=%v: it must be greater than 0 (a positive rate)", op.Key, op.Value)
			case whole && op.Value > math.MaxInt64:
				return nil, errs.New(pb.ErrorCode_INVALID_REQUEST, "quota %s=%v is too large for a LONG", op.Key, op.Value)
			case whole && math.Abs(math.Mod(op.Value, 1)) > 1e-6:
				return nil, errs.New(pb.ErrorCode_INVALID_REQUEST, "quota %s=%v: %s cannot be a fractional value", op.Key, op.Value, op.Key)
			}
		}
		recs = append(recs, &pb.MetadataRecord{Record: &pb.MetadataRecord_ClientQuota{ClientQuota: &pb.ClientQuotaRecord{Entity: ent.Entity(), Key: op.Key, Value: op.Value, Remove: op.Remove}}})
	}
	return recs, nil
}

// AlterClientQuotas checks each entry and writes the valid ones' records
// (none with validate_only); the result has one entry per request entry.
// Entries naming the same entity are all refused (Kafka: "Ignoring
// duplicate entity"), none applied.
func (c *Controller) AlterClientQuotas(ctx context.Context, req *pb.AlterClientQuotasRequest) ([]*pb.AlterClientQuotasEntryResult, error) {
	if err := c.lockActive(); err != nil {
		return nil, err
	}
	defer c.mu.Unlock()
	named := map[metadata.QuotaEntity]int{}
	for _, e := range req.Entries {
		if ent, err := metadata.QuotaEntityOf(e.GetEntity()); err == nil {
			named[ent]++
		}
	}
	out := make([]*pb.AlterClientQuotasEntryResult, len(req.Entries))
	var recs []*pb.MetadataRecord
	for i, e := range req.Entries {
		out[i] = &pb.AlterClientQuotasEntryResult{Entity: e.Entity}
		if ent, err := metadata.QuotaEntityOf(e.GetEntity()); err == nil && named[ent] > 1 {
			out[i].ErrorCode, out[i].ErrorMessage = pb.ErrorCode_INVALID_REQUEST, "ignoring duplicate entity "+ent.String()
			continue
		}
		r, err := ValidateQuotaEntry(e)
		if err != nil {
			out[i].ErrorCode, out[i].ErrorMessage = errs.Split(err)
			continue
		}
		recs = append(recs, r...)
	}
	if len(recs) == 0 || req.ValidateOnly {
		return out, nil
	}
	if _, err := c.proposeLocked(ctx, recs...); err != nil {
		return nil, err
	}
	return out, nil
}
