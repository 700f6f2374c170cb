package request

import (
	"bytes"
	"context"

	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/internal/planted"
	"github.com/strand-io/strand/internal/scram"
	"github.com/strand-io/strand/metadata"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// Users' SCRAM credentials for SASL (KIP-554).

// AlterUserScramCredentials forwards to the active controller (which
// validates by Kafka's rules and writes the records), then waits (at most
// maxLeadersWait) until this broker's image shows the accepted changes, so
// a DescribeUserScramCredentials or an authentication that follows on this
// broker sees them. A controller that cannot be reached answers every
// user its error. A principal without Alter on the cluster is answered
// CLUSTER_AUTHORIZATION_FAILED for every user, and nothing is changed.
func (h *Handler) AlterUserScramCredentials(ctx context.Context, req *pb.AlterUserScramCredentialsRequest) (*pb.AlterUserScramCredentialsResponse, error) {
	var resp *pb.AlterUserScramCredentialsResponse
	err := h.authorizeScramAdmin(ctx, "AlterUserScramCredentials")
	if planted.On(planted.AuthzSkipScramAlter) {
		err = nil
	}
	if err == nil {
		resp, err = toController(ctx, h, func(ctx context.Context, c pb.ControllerClient) (*pb.AlterUserScramCredentialsResponse, error) {
			return c.AlterUserScramCredentials(ctx, req)
		})
	}
	if err != nil {
		code, msg := timedOutIfUnknown(errs.Split(err))
		out := &pb.AlterUserScramCredentialsResponse{}
		seen := map[string]bool{}
		add := func(name string) {
			if !seen[name] {
				seen[name] = true
				out.Results = append(out.Results, &pb.AlterUserScramCredentialsResult{User: name, ErrorCode: code, ErrorMessage: msg})
			}
		}
		for _, d := range req.Deletions {
			add(d.Name)
		}
		for _, u := range req.Upsertions {
			add(u.Name)
		}
		return out, nil
	}
	waitUntil(ctx, maxLeadersWait, func() bool { return scramVisible(h.Repl.Image(), req, resp) })
	return resp, nil
}

// scramVisible reports whether img shows each accepted change of resp.
func scramVisible(img *metadata.Image, req *pb.AlterUserScramCredentialsRequest, resp *pb.AlterUserScramCredentialsResponse) bool {
	ok := map[string]bool{}
	for _, r := range resp.Results {
		ok[r.User] = r.ErrorCode == pb.ErrorCode_NONE
	}
	for _, d := range req.Deletions {
		if _, there := img.ScramCredential(d.Name, d.Mechanism); ok[d.Name] && there {
			return false
		}
	}
	for _, u := range req.Upsertions {
		if !ok[u.Name] {
			continue
		}
		c, there := img.ScramCredential(u.Name, u.Mechanism)
		if !there || c.Iterations != u.Iterations || !bytes.Equal(c.Salt, u.Salt) {
			return false
		}
	}
	return true
}

// DescribeUserScramCredentials answers from this broker's image: each
// user's mechanisms and iterations, never a salt or a key. No users names
// every user with a credential; a named user with none is
// RESOURCE_NOT_FOUND, a user named twice DUPLICATE_RESOURCE (Kafka's).
// A principal without Describe on the cluster is answered
// CLUSTER_AUTHORIZATION_FAILED.
func (h *Handler) DescribeUserScramCredentials(ctx context.Context, req *pb.DescribeUserScramCredentialsRequest) (*pb.DescribeUserScramCredentialsResponse, error) {
	if err := h.authorizeScramAdmin(ctx, "DescribeUserScramCredentials"); err != nil {
		code, msg := errs.Split(err)
		return &pb.DescribeUserScramCredentialsResponse{ErrorCode: code, ErrorMessage: msg}, nil
	}
	img := h.Repl.Image()
	out := &pb.DescribeUserScramCredentialsResponse{}
	describe := func(user string) *pb.DescribeUserScramCredentialsResult {
		r := &pb.DescribeUserScramCredentialsResult{User: user}
		for _, mech := range []int32{1, 2} {
			if c, ok := img.ScramCredential(user, mech); ok {
				r.CredentialInfos = append(r.CredentialInfos, &pb.ScramCredentialInfo{Mechanism: mech, Iterations: c.Iterations})
			}
		}
		if len(r.CredentialInfos) == 0 {
			r.ErrorCode, r.ErrorMessage = pb.ErrorCode_RESOURCE_NOT_FOUND, "Attempt to describe a user credential that does not exist: "+user
		}
		return r
	}
	if len(req.Users) == 0 {
		for _, u := range img.ScramUsers() {
			out.Results = append(out.Results, describe(u))
		}
		return out, nil
	}
	count := map[string]int{}
	for _, u := range req.Users {
		count[u]++
	}
	done := map[string]bool{}
	for _, u := range req.Users {
		if done[u] {
			continue
		}
		done[u] = true
		if count[u] > 1 {
			out.Results = append(out.Results, &pb.DescribeUserScramCredentialsResult{User: u, ErrorCode: pb.ErrorCode_DUPLICATE_RESOURCE,
				ErrorMessage: "Cannot describe SCRAM credentials for the same user twice in a single request: " + u})
			continue
		}
		out.Results = append(out.Results, describe(u))
	}
	return out, nil
}

// ScramCredential is user's stored credential for mechanism, from this
// broker's image: what the front doors' SASL servers check a proof
// against.
func (h *Handler) ScramCredential(user string, m scram.Mechanism) (scram.Credential, bool) {
	c, ok := h.Repl.Image().ScramCredential(user, int32(m.KafkaType))
	if !ok {
		return scram.Credential{}, false
	}
	return scram.Credential{Salt: c.Salt, StoredKey: c.StoredKey, ServerKey: c.ServerKey, Iterations: int(c.Iterations)}, true
}
