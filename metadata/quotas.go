package metadata

import (
	"fmt"
	"sort"

	pb "github.com/strand-io/strand/proto/strand/v1"
)

// Client quotas (issue 22): the controller's ClientQuotaRecords, by user.

// QuotaEntityUser is the entity type of a user's quotas (Kafka's "user").
const QuotaEntityUser = "user"

// QuotaUser is a user quota entity: a named user, or the default user.
type QuotaUser struct {
	Name    string
	Default bool
}

// String is Kafka's form: the name, or "<default>".
func (u QuotaUser) String() string {
	if u.Default {
		return "<default>"
	}
	return u.Name
}

// Entity is u as the wire's entity.
func (u QuotaUser) Entity() *pb.QuotaEntity {
	return &pb.QuotaEntity{Parts: []*pb.QuotaEntityPart{{EntityType: QuotaEntityUser, Name: u.Name, IsDefault: u.Default}}}
}

// QuotaUserOf reads a wire entity: exactly one part, of type user.
func QuotaUserOf(e *pb.QuotaEntity) (QuotaUser, error) {
	parts := e.GetParts()
	if len(parts) != 1 || parts[0].GetEntityType() != QuotaEntityUser {
		return QuotaUser{}, fmt.Errorf("only quotas of the entity type user (one user, or the default user) are supported, not %v", entityString(e))
	}
	p := parts[0]
	if p.IsDefault {
		return QuotaUser{Default: true}, nil
	}
	return QuotaUser{Name: p.Name}, nil
}

func entityString(e *pb.QuotaEntity) string {
	s := ""
	for i, p := range e.GetParts() {
		if i > 0 {
			s += ","
		}
		n := p.Name
		if p.IsDefault {
			n = "<default>"
		}
		s += p.EntityType + "=" + n
	}
	if s == "" {
		return "an empty entity"
	}
	return s
}

func (b *builder) applyClientQuota(r *pb.ClientQuotaRecord) error {
	u, err := QuotaUserOf(r.Entity)
	if err != nil {
		return err
	}
	if r.Key == "" {
		return fmt.Errorf("client quota record for %s without a key", u)
	}
	b.delta.ClientQuotas = true
	// Quotas change rarely: copy on every record.
	all := make(map[QuotaUser]map[string]float64, len(b.im.ClientQuotas)+1)
	for k, v := range b.im.ClientQuotas {
		all[k] = v
	}
	vals := make(map[string]float64, len(all[u])+1)
	for k, v := range all[u] {
		vals[k] = v
	}
	if r.Remove {
		delete(vals, r.Key)
	} else {
		vals[r.Key] = r.Value
	}
	if len(vals) == 0 {
		delete(all, u)
	} else {
		all[u] = vals
	}
	b.im.ClientQuotas = all
	return nil
}

// QuotaUsers lists the entities with quotas, the default user first,
// then by name.
func (im *Image) QuotaUsers() []QuotaUser {
	us := make([]QuotaUser, 0, len(im.ClientQuotas))
	for u := range im.ClientQuotas {
		us = append(us, u)
	}
	sort.Slice(us, func(i, j int) bool {
		if us[i].Default != us[j].Default {
			return us[i].Default
		}
		return us[i].Name < us[j].Name
	})
	return us
}

func (im *Image) clientQuotaRecords() []*pb.MetadataRecord {
	var out []*pb.MetadataRecord
	for _, u := range im.QuotaUsers() {
		vals := im.ClientQuotas[u]
		keys := make([]string, 0, len(vals))
		for k := range vals {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			out = append(out, &pb.MetadataRecord{Record: &pb.MetadataRecord_ClientQuota{ClientQuota: &pb.ClientQuotaRecord{Entity: u.Entity(), Key: k, Value: vals[k]}}})
		}
	}
	return out
}
