package controller

import (
	"context"

	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/internal/scram"
	"github.com/strand-io/strand/metadata"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// Users' SCRAM credentials for SASL (KIP-554), by Kafka's
// ScramControlManager rules.

const alteredTwice = "A user credential cannot be altered twice in the same request"

// PlanScramCredentials checks an AlterUserScramCredentials against img
// and returns one result per user named (in the order first named) and
// the records of the accepted changes. Kafka's rules: a user named more
// than once (deletion or upsertion, whatever the mechanism) is
// DUPLICATE_RESOURCE; an empty name UNACCEPTABLE_CREDENTIAL; an unknown
// mechanism UNSUPPORTED_SASL_MECHANISM; deleting a credential that does
// not exist RESOURCE_NOT_FOUND; iterations outside 4096..16384
// UNACCEPTABLE_CREDENTIAL. Strand also refuses an empty salt and a salted
// password that is not the hash's length (UNACCEPTABLE_CREDENTIAL). The
// salted password is turned into StoredKey and ServerKey here and is
// never stored.
func PlanScramCredentials(img *metadata.Image, req *pb.AlterUserScramCredentialsRequest) ([]*pb.AlterUserScramCredentialsResult, []*pb.MetadataRecord) {
	var order []string
	failed := map[string]error{}
	accepted := map[string]*pb.MetadataRecord{}
	seen := map[string]bool{}
	note := func(name string, rec func() (*pb.MetadataRecord, error)) {
		if !seen[name] {
			seen[name] = true
			order = append(order, name)
		} else {
			if failed[name] == nil {
				delete(accepted, name)
				failed[name] = errs.New(pb.ErrorCode_DUPLICATE_RESOURCE, alteredTwice)
			}
			return
		}
		r, err := rec()
		if err != nil {
			failed[name] = err
			return
		}
		accepted[name] = r
	}
	for _, d := range req.Deletions {
		note(d.Name, func() (*pb.MetadataRecord, error) {
			if _, err := checkScramName(d.Name, d.Mechanism); err != nil {
				return nil, err
			}
			if _, ok := img.ScramCredential(d.Name, d.Mechanism); !ok {
				return nil, errs.New(pb.ErrorCode_RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")
			}
			return &pb.MetadataRecord{Record: &pb.MetadataRecord_RemoveUserScramCredential{RemoveUserScramCredential: &pb.RemoveUserScramCredentialRecord{
				Name: d.Name, Mechanism: d.Mechanism}}}, nil
		})
	}
	for _, u := range req.Upsertions {
		note(u.Name, func() (*pb.MetadataRecord, error) {
			m, err := checkScramName(u.Name, u.Mechanism)
			if err != nil {
				return nil, err
			}
			switch {
			case u.Iterations < scram.MinIterations:
				return nil, errs.New(pb.ErrorCode_UNACCEPTABLE_CREDENTIAL, "Too few iterations")
			case u.Iterations > scram.MaxIterations:
				return nil, errs.New(pb.ErrorCode_UNACCEPTABLE_CREDENTIAL, "Too many iterations")
			case len(u.Salt) == 0:
				return nil, errs.New(pb.ErrorCode_UNACCEPTABLE_CREDENTIAL, "The salt must not be empty")
			case len(u.SaltedPassword) != m.HashSize():
				return nil, errs.New(pb.ErrorCode_UNACCEPTABLE_CREDENTIAL, "A %s salted password is %d bytes, not %d", m.Name(), m.HashSize(), len(u.SaltedPassword))
			}
			c := m.FromSalted(u.SaltedPassword, u.Salt, int(u.Iterations))
			return &pb.MetadataRecord{Record: &pb.MetadataRecord_UserScramCredential{UserScramCredential: &pb.UserScramCredentialRecord{
				Name: u.Name, Mechanism: u.Mechanism, Salt: c.Salt, StoredKey: c.StoredKey, ServerKey: c.ServerKey, Iterations: u.Iterations}}}, nil
		})
	}
	var results []*pb.AlterUserScramCredentialsResult
	var recs []*pb.MetadataRecord
	for _, name := range order {
		res := &pb.AlterUserScramCredentialsResult{User: name}
		if err := failed[name]; err != nil {
			res.ErrorCode, res.ErrorMessage = errs.Split(err)
		} else {
			recs = append(recs, accepted[name])
		}
		results = append(results, res)
	}
	return results, recs
}

func checkScramName(name string, mechanism int32) (scram.Mechanism, error) {
	if name == "" {
		return scram.Mechanism{}, errs.New(pb.ErrorCode_UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
	}
	m, ok := scram.ByKafkaType(int8(mechanism))
	if !ok || mechanism != int32(int8(mechanism)) {
		return scram.Mechanism{}, errs.New(pb.ErrorCode_UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
	}
	return m, nil
}

// AlterUserScramCredentials applies PlanScramCredentials' accepted changes
// in one batch (all or none committed). A failed commit turns every
// accepted user's result into the commit's error.
func (c *Controller) AlterUserScramCredentials(ctx context.Context, req *pb.AlterUserScramCredentialsRequest) ([]*pb.AlterUserScramCredentialsResult, error) {
	if err := c.lockActive(); err != nil {
		return nil, err
	}
	defer c.mu.Unlock()
	results, recs := PlanScramCredentials(c.Q.FSM.Image(), req)
	if len(recs) == 0 {
		return results, nil
	}
	if _, err := c.proposeLocked(ctx, recs...); err != nil {
		if errs.CodeOf(err) == pb.ErrorCode_NOT_CONTROLLER {
			return nil, err
		}
		code, msg := errs.Split(err)
		for _, r := range results {
			if r.ErrorCode == pb.ErrorCode_NONE {
				r.ErrorCode, r.ErrorMessage = code, msg
			}
		}
	}
	return results, nil
}
