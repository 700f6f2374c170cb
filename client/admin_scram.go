package client

import (
	"context"

	"google.golang.org/grpc"

	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/internal/scram"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// Users' SCRAM credentials for SASL (Kafka's
// AlterUserScramCredentials / DescribeUserScramCredentials, KIP-554).

// ScramUpsertion sets user's credential for a mechanism ("SCRAM-SHA-256"
// or "SCRAM-SHA-512") from password, salted here with a fresh random salt
// over Iterations rounds (0: 4096, Kafka's default; Kafka accepts
// 4096..16384). Only the salt and the salted password are sent, as Kafka's
// clients do; the broker keeps neither the password nor the salted one.
type ScramUpsertion struct {
	User, Mechanism, Password string
	Iterations                int
}

// ScramDeletion removes user's credential for a mechanism.
type ScramDeletion struct {
	User, Mechanism string
}

// ScramCredentialInfo is a credential as DescribeUserScramCredentials
// shows it: never its salt or keys.
type ScramCredentialInfo struct {
	Mechanism  string
	Iterations int
}

// mechanismType is Kafka's code of a SCRAM mechanism (0: unknown, which
// the controller refuses UNSUPPORTED_SASL_MECHANISM).
func mechanismType(name string) int32 {
	if m, ok := scram.ByName(name); ok {
		return int32(m.KafkaType)
	}
	return 0
}

func mechanismName(t int32) string {
	if m, ok := scram.ByKafkaType(int8(t)); ok {
		return m.Name()
	}
	return "UNKNOWN"
}

// AlterUserScramCredentials applies upserts and deletes through the
// active controller. The map holds each user's outcome (nil: done); a
// user may be named once per request (DUPLICATE_RESOURCE otherwise).
// Errors per user: UNSUPPORTED_SASL_MECHANISM, RESOURCE_NOT_FOUND,
// UNACCEPTABLE_CREDENTIAL, DUPLICATE_RESOURCE.
func (a *Admin) AlterUserScramCredentials(ctx context.Context, upserts []ScramUpsertion, deletes []ScramDeletion) (map[string]error, error) {
	req := &pb.AlterUserScramCredentialsRequest{}
	for _, d := range deletes {
		req.Deletions = append(req.Deletions, &pb.ScramCredentialDeletion{Name: d.User, Mechanism: mechanismType(d.Mechanism)})
	}
	for _, u := range upserts {
		iter := u.Iterations
		if iter == 0 {
			iter = scram.MinIterations
		}
		up := &pb.ScramCredentialUpsertion{Name: u.User, Mechanism: mechanismType(u.Mechanism), Iterations: int32(iter)}
		if m, ok := scram.ByName(u.Mechanism); ok && scram.ValidIterations(iter) {
			up.Salt = scram.NewSalt()
			up.SaltedPassword = m.SaltedPassword(u.Password, up.Salt, iter)
		}
		req.Upsertions = append(req.Upsertions, up)
	}
	var resp *pb.AlterUserScramCredentialsResponse
	err := a.cl.any(ctx, func(ctx context.Context, cc *grpc.ClientConn) error {
		var err error
		resp, err = pb.NewAdminClient(cc).AlterUserScramCredentials(ctx, req)
		if err == nil {
			for _, r := range resp.Results {
				if r.ErrorCode == pb.ErrorCode_NOT_CONTROLLER || errs.CodeRetriable(r.ErrorCode) {
					return errs.FromCode(r.ErrorCode, r.ErrorMessage)
				}
			}
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	out := map[string]error{}
	for _, r := range resp.Results {
		out[r.User] = errs.FromCode(r.ErrorCode, r.ErrorMessage)
	}
	return out, nil
}

// DescribeUserScramCredentials lists the credentials of users (every user
// with one when none is named). A named user without any has
// RESOURCE_NOT_FOUND in the error map.
func (a *Admin) DescribeUserScramCredentials(ctx context.Context, users ...string) (map[string][]ScramCredentialInfo, map[string]error, error) {
	var resp *pb.DescribeUserScramCredentialsResponse
	err := a.cl.any(ctx, func(ctx context.Context, cc *grpc.ClientConn) error {
		var err error
		resp, err = pb.NewAdminClient(cc).DescribeUserScramCredentials(ctx, &pb.DescribeUserScramCredentialsRequest{Users: users})
		if err == nil && resp.ErrorCode != pb.ErrorCode_NONE {
			return errs.FromCode(resp.ErrorCode, resp.ErrorMessage)
		}
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	creds, failed := map[string][]ScramCredentialInfo{}, map[string]error{}
	for _, r := range resp.Results {
		if r.ErrorCode != pb.ErrorCode_NONE {
			failed[r.User] = errs.FromCode(r.ErrorCode, r.ErrorMessage)
			continue
		}
		for _, ci := range r.CredentialInfos {
			creds[r.User] = append(creds[r.User], ScramCredentialInfo{Mechanism: mechanismName(ci.Mechanism), Iterations: int(ci.Iterations)})
		}
	}
	return creds, failed, nil
}
