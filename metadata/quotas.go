package metadata

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	pb "github.com/strand-io/strand/proto/strand/v1"
)

// Client quotas: the controller's ClientQuotaRecords, by
// entity. An entity is Kafka's ClientQuotaEntity restricted to what is
// stored here: a user, a client id, or a user and a client id, each part
// a name or its type's default. The entity type ip (connection rate
// quotas) is not stored: AlterClientQuotas refuses it.

// Kafka's quota entity types.
const (
	QuotaEntityUser     = "user"
	QuotaEntityClientID = "client-id"
	QuotaEntityIP       = "ip"
)

// QuotaName is one part of a quota entity: absent (Set false), its type's
// default entity, or a name.
type QuotaName struct {
	Set     bool
	Default bool
	Name    string
}

// QuotaNamed is the part naming name; QuotaDefault the type's default.
func QuotaNamed(name string) QuotaName { return QuotaName{Set: true, Name: name} }

// QuotaDefault is the default entity of a type.
var QuotaDefault = QuotaName{Set: true, Default: true}

func (n QuotaName) String() string {
	switch {
	case !n.Set:
		return ""
	case n.Default:
		return "<default>"
	}
	return n.Name
}

// QuotaEntity is a client quota entity: its user part, its client-id
// part, or both. It is comparable (a map key).
type QuotaEntity struct {
	User     QuotaName
	ClientID QuotaName
}

// QuotaUser is the entity of one user (or of the default user, name "").
func QuotaUser(name string, def bool) QuotaEntity {
	if def {
		return QuotaEntity{User: QuotaDefault}
	}
	return QuotaEntity{User: QuotaNamed(name)}
}

// String is the entity as Kafka's ClientQuotaEntity prints it, in a fixed
// order: user=alice,client-id=<default>.
func (e QuotaEntity) String() string {
	var parts []string
	if e.User.Set {
		parts = append(parts, QuotaEntityUser+"="+e.User.String())
	}
	if e.ClientID.Set {
		parts = append(parts, QuotaEntityClientID+"="+e.ClientID.String())
	}
	if len(parts) == 0 {
		return "an empty entity"
	}
	return strings.Join(parts, ",")
}

// Entity is e as the wire's entity: the user part first.
func (e QuotaEntity) Entity() *pb.QuotaEntity {
	out := &pb.QuotaEntity{}
	if e.User.Set {
		out.Parts = append(out.Parts, &pb.QuotaEntityPart{EntityType: QuotaEntityUser, Name: e.User.Name, IsDefault: e.User.Default})
	}
	if e.ClientID.Set {
		out.Parts = append(out.Parts, &pb.QuotaEntityPart{EntityType: QuotaEntityClientID, Name: e.ClientID.Name, IsDefault: e.ClientID.Default})
	}
	return out
}

// QuotaEntityOf reads a wire entity as Kafka's controller validates it:
// not empty, each type once, only user, client-id and ip, no empty name;
// ip never with user or client-id. An ip entity is refused here too:
// connection rate quotas are not served. The error's text is the refusal.
func QuotaEntityOf(e *pb.QuotaEntity) (QuotaEntity, error) {
	var out QuotaEntity
	parts := e.GetParts()
	if len(parts) == 0 {
		return out, fmt.Errorf("invalid empty client quota entity")
	}
	seen := map[string]bool{}
	for _, p := range parts {
		t := p.GetEntityType()
		if seen[t] {
			return QuotaEntity{}, fmt.Errorf("invalid client quota entity, duplicate entity entry %s", t)
		}
		seen[t] = true
		n := QuotaName{Set: true, Default: p.GetIsDefault()}
		if !n.Default {
			n.Name = p.GetName()
		}
		switch t {
		case QuotaEntityUser:
			out.User = n
		case QuotaEntityClientID:
			out.ClientID = n
		case QuotaEntityIP:
		default:
			return QuotaEntity{}, fmt.Errorf("unhandled client quota entity type: %s", t)
		}
		if n.Set && !n.Default && n.Name == "" {
			return QuotaEntity{}, fmt.Errorf("empty %s not supported", t)
		}
	}
	if seen[QuotaEntityIP] {
		if out.User.Set || out.ClientID.Set {
			return QuotaEntity{}, fmt.Errorf("invalid quota entity combination: the ip entity is not combined with user or client-id")
		}
		return QuotaEntity{}, fmt.Errorf("ip quotas (connection_creation_rate) are not supported by this cluster: only user and client-id entities are")
	}
	return out, nil
}

func (b *builder) applyClientQuota(r *pb.ClientQuotaRecord) error {
	e, err := QuotaEntityOf(r.Entity)
	if err != nil {
		return err
	}
	if r.Key == "" {
		return fmt.Errorf("client quota record for %s without a key", e)
	}
	b.delta.ClientQuotas = true
	// Quotas change rarely: copy on every record.
	all := make(map[QuotaEntity]map[string]float64, len(b.im.ClientQuotas)+1)
	for k, v := range b.im.ClientQuotas {
		all[k] = v
	}
	vals := make(map[string]float64, len(all[e])+1)
	for k, v := range all[e] {
		vals[k] = v
	}
	if r.Remove {
		delete(vals, r.Key)
	} else {
		vals[r.Key] = r.Value
	}
	if len(vals) == 0 {
		delete(all, e)
	} else {
		all[e] = vals
	}
	b.im.ClientQuotas = all
	return nil
}

// cmpQuotaName orders parts: absent, then the default, then by name.
func cmpQuotaName(a, b QuotaName) int {
	rank := func(n QuotaName) int {
		switch {
		case !n.Set:
			return 0
		case n.Default:
			return 1
		}
		return 2
	}
	if c := cmp.Compare(rank(a), rank(b)); c != 0 {
		return c
	}
	return cmp.Compare(a.Name, b.Name)
}

// QuotaEntities lists the entities with quotas, by user part (none, the
// default, names), then by client-id part alike.
func (im *Image) QuotaEntities() []QuotaEntity {
	es := make([]QuotaEntity, 0, len(im.ClientQuotas))
	for e := range im.ClientQuotas {
		es = append(es, e)
	}
	slices.SortFunc(es, func(a, b QuotaEntity) int {
		if c := cmpQuotaName(a.User, b.User); c != 0 {
			return c
		}
		return cmpQuotaName(a.ClientID, b.ClientID)
	})
	return es
}

func (im *Image) clientQuotaRecords() []*pb.MetadataRecord {
	var out []*pb.MetadataRecord
	for _, e := range im.QuotaEntities() {
		vals := im.ClientQuotas[e]
		keys := make([]string, 0, len(vals))
		for k := range vals {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			out = append(out, &pb.MetadataRecord{Record: &pb.MetadataRecord_ClientQuota{ClientQuota: &pb.ClientQuotaRecord{Entity: e.Entity(), Key: k, Value: vals[k]}}})
		}
	}
	return out
}
