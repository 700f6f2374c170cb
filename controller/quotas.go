package controller

import (
	"context"
	"math"

	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/metadata"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// Client quotas (issue 22, KIP-546): AlterClientQuotas writes one
// ClientQuotaRecord per key set or removed. Each entry is checked and
// applied on its own, as Kafka's controller does: INVALID_REQUEST for an
// entity that is not one user (or the default user) — client-id quotas
// are not supported —, an unknown key, a key named twice, a value not
// positive, or a byte rate that is not a whole number.

// quotaKeys are the keys accepted, with whether the value must be whole.
var quotaKeys = map[string]bool{
	"producer_byte_rate": true,
	"consumer_byte_rate": true,
	"request_percentage": false,
}

// ValidateQuotaEntry checks one AlterClientQuotas entry and returns its
// records.
func ValidateQuotaEntry(e *pb.AlterClientQuotasEntry) ([]*pb.MetadataRecord, error) {
	u, err := metadata.QuotaUserOf(e.GetEntity())
	if err != nil {
		return nil, errs.New(pb.ErrorCode_INVALID_REQUEST, "%v", err)
	}
	if !u.Default && u.Name == "" {
		return nil, errs.New(pb.ErrorCode_INVALID_REQUEST, "a user quota needs a user name (or the default user)")
	}
	seen := map[string]bool{}
	var recs []*pb.MetadataRecord
	for _, op := range e.GetOps() {
		whole, ok := quotaKeys[op.Key]
		if !ok {
			return nil, errs.New(pb.ErrorCode_INVALID_REQUEST, "unknown quota key %q for entity user: want producer_byte_rate, consumer_byte_rate or request_percentage", op.Key)
		}
		if seen[op.Key] {
			return nil, errs.New(pb.ErrorCode_INVALID_REQUEST, "quota key %q named twice", op.Key)
		}
		seen[op.Key] = true
		if !op.Remove {
			switch {
			case math.IsNaN(op.Value) || math.IsInf(op.Value, 0) || op.Value <= 0:
				return nil, errs.New(pb.ErrorCode_INVALID_REQUEST, "quota %s=%v: it must be positive", op.Key, op.Value)
			case whole && op.Value != math.Trunc(op.Value):
				return nil, errs.New(pb.ErrorCode_INVALID_REQUEST, "quota %s=%v: it must be a whole number of bytes per second", op.Key, op.Value)
			}
		}
		recs = append(recs, &pb.MetadataRecord{Record: &pb.MetadataRecord_ClientQuota{ClientQuota: &pb.ClientQuotaRecord{Entity: u.Entity(), Key: op.Key, Value: op.Value, Remove: op.Remove}}})
	}
	return recs, nil
}

// AlterClientQuotas checks each entry and writes the valid ones' records
// (none with validate_only); the result has one entry per request entry.
func (c *Controller) AlterClientQuotas(ctx context.Context, req *pb.AlterClientQuotasRequest) ([]*pb.AlterClientQuotasEntryResult, error) {
	if err := c.lockActive(); err != nil {
		return nil, err
	}
	defer c.mu.Unlock()
	out := make([]*pb.AlterClientQuotasEntryResult, len(req.Entries))
	var recs []*pb.MetadataRecord
	for i, e := range req.Entries {
		out[i] = &pb.AlterClientQuotasEntryResult{Entity: e.Entity}
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
