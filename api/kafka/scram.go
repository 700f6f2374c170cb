package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	pb "github.com/strand-io/strand/proto/strand/v1"
)

// Users' SCRAM credentials for SASL (KIP-554).
// DescribeUserScramCredentials 0 answers from this broker's image
// (mechanisms and iterations, never salts or keys);
// AlterUserScramCredentials 0 is forwarded to the active controller, the
// request's salt and salted password as Kafka's clients compute them.
func init() {
	register(kmsg.DescribeUserSCRAMCredentials, 0, 0, handleDescribeUserScram)
	register(kmsg.AlterUserSCRAMCredentials, 0, 0, handleAlterUserScram)
}

func handleDescribeUserScram(ctx context.Context, c *Conn, r kmsg.Request) (kmsg.Response, error) {
	req := r.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	resp := kmsg.NewPtrDescribeUserSCRAMCredentialsResponse()
	preq := &pb.DescribeUserScramCredentialsRequest{}
	for _, u := range req.Users {
		preq.Users = append(preq.Users, u.Name)
	}
	presp, err := c.H.DescribeUserScramCredentials(ctx, preq)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = splitCode(err)
		return resp, nil
	}
	resp.ErrorCode, resp.ErrorMessage = code(presp.ErrorCode), errMsg(presp.ErrorMessage)
	for _, pr := range presp.Results {
		rr := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		rr.User, rr.ErrorCode, rr.ErrorMessage = pr.User, code(pr.ErrorCode), errMsg(pr.ErrorMessage)
		for _, ci := range pr.CredentialInfos {
			info := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
			info.Mechanism, info.Iterations = int8(ci.Mechanism), ci.Iterations
			rr.CredentialInfos = append(rr.CredentialInfos, info)
		}
		resp.Results = append(resp.Results, rr)
	}
	return resp, nil
}

func handleAlterUserScram(ctx context.Context, c *Conn, r kmsg.Request) (kmsg.Response, error) {
	req := r.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := kmsg.NewPtrAlterUserSCRAMCredentialsResponse()
	preq := &pb.AlterUserScramCredentialsRequest{}
	for _, d := range req.Deletions {
		preq.Deletions = append(preq.Deletions, &pb.ScramCredentialDeletion{Name: d.Name, Mechanism: int32(d.Mechanism)})
	}
	for _, u := range req.Upsertions {
		preq.Upsertions = append(preq.Upsertions, &pb.ScramCredentialUpsertion{Name: u.Name, Mechanism: int32(u.Mechanism),
			Iterations: u.Iterations, Salt: u.Salt, SaltedPassword: u.SaltedPassword})
	}
	presp, err := c.H.AlterUserScramCredentials(ctx, preq)
	if err != nil {
		ec, msg := splitCode(err)
		seen := map[string]bool{}
		for _, p := range append(namesOfDeletions(req), namesOfUpsertions(req)...) {
			if !seen[p] {
				seen[p] = true
				rr := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
				rr.User, rr.ErrorCode, rr.ErrorMessage = p, ec, msg
				resp.Results = append(resp.Results, rr)
			}
		}
		return resp, nil
	}
	for _, pr := range presp.Results {
		rr := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		rr.User, rr.ErrorCode, rr.ErrorMessage = pr.User, code(pr.ErrorCode), errMsg(pr.ErrorMessage)
		resp.Results = append(resp.Results, rr)
	}
	return resp, nil
}

func namesOfDeletions(req *kmsg.AlterUserSCRAMCredentialsRequest) []string {
	var out []string
	for _, d := range req.Deletions {
		out = append(out, d.Name)
	}
	return out
}

func namesOfUpsertions(req *kmsg.AlterUserSCRAMCredentialsRequest) []string {
	var out []string
	for _, u := range req.Upsertions {
		out = append(out, u.Name)
	}
	return out
}
