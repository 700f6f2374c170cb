package metadata

import (
	"fmt"
	"sort"

	pb "github.com/strand-io/strand/proto/strand/v1"
)

// Users' SCRAM credentials for SASL, in the image.

// ScramCredential is a user's stored SCRAM credential for one mechanism:
// the salt, StoredKey and ServerKey (RFC 5802) and the iteration count;
// never a password.
type ScramCredential struct {
	Salt, StoredKey, ServerKey []byte
	Iterations                 int32
}

// ScramCredential returns user's credential for mechanism (Kafka's type:
// 1 SCRAM-SHA-256, 2 SCRAM-SHA-512).
func (im *Image) ScramCredential(user string, mechanism int32) (ScramCredential, bool) {
	c, ok := im.Scram[user][mechanism]
	return c, ok
}

// ScramUsers lists the users with a credential, in order.
func (im *Image) ScramUsers() []string {
	out := make([]string, 0, len(im.Scram))
	for u := range im.Scram {
		out = append(out, u)
	}
	sort.Strings(out)
	return out
}

// scramOf returns a writable copy of user's credentials (copying the
// outer map once per batch and each user's map once).
func (b *builder) scramOf(user string) map[int32]ScramCredential {
	if b.scramCopied == nil {
		b.scramCopied = map[string]bool{}
		outer := make(map[string]map[int32]ScramCredential, len(b.im.Scram)+1)
		for k, v := range b.im.Scram {
			outer[k] = v
		}
		b.im.Scram = outer
	}
	if !b.scramCopied[user] {
		m := map[int32]ScramCredential{}
		for k, v := range b.im.Scram[user] {
			m[k] = v
		}
		b.im.Scram[user] = m
		b.scramCopied[user] = true
	}
	return b.im.Scram[user]
}

func (b *builder) scramRecord(r *pb.MetadataRecord) (bool, error) {
	switch x := r.Record.(type) {
	case *pb.MetadataRecord_UserScramCredential:
		c := x.UserScramCredential
		if c.Name == "" || c.Mechanism < 1 || c.Mechanism > 2 {
			return true, fmt.Errorf("SCRAM credential for user %q mechanism %d", c.Name, c.Mechanism)
		}
		b.scramOf(c.Name)[c.Mechanism] = ScramCredential{
			Salt: append([]byte(nil), c.Salt...), StoredKey: append([]byte(nil), c.StoredKey...),
			ServerKey: append([]byte(nil), c.ServerKey...), Iterations: c.Iterations,
		}
		return true, nil
	case *pb.MetadataRecord_RemoveUserScramCredential:
		c := x.RemoveUserScramCredential
		if _, ok := b.im.Scram[c.Name][c.Mechanism]; !ok {
			return true, fmt.Errorf("remove of a SCRAM credential user %q mechanism %d that does not exist", c.Name, c.Mechanism)
		}
		m := b.scramOf(c.Name)
		delete(m, c.Mechanism)
		if len(m) == 0 {
			delete(b.im.Scram, c.Name)
		}
		return true, nil
	}
	return false, nil
}

// scramSnapshot adds the credentials' records to a snapshot.
func (im *Image) scramSnapshot(add func(*pb.MetadataRecord)) {
	for _, u := range im.ScramUsers() {
		for _, mech := range []int32{1, 2} {
			if c, ok := im.Scram[u][mech]; ok {
				add(&pb.MetadataRecord{Record: &pb.MetadataRecord_UserScramCredential{UserScramCredential: &pb.UserScramCredentialRecord{
					Name: u, Mechanism: mech, Salt: c.Salt, StoredKey: c.StoredKey, ServerKey: c.ServerKey, Iterations: c.Iterations}}})
			}
		}
	}
}
