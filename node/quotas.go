package node

import (
	"github.com/strand-io/strand/metadata"
	"github.com/strand-io/strand/quota"
)

// setQuotas hands the image's client quotas to the quota manager.
func (n *Node) setQuotas(img *metadata.Image) {
	users := map[string]quota.Values{}
	var def quota.Values
	for u, vals := range img.ClientQuotas {
		v := quota.Values{}
		for k, x := range vals {
			v[k] = x
		}
		if u.Default {
			def = v
		} else {
			users[u.Name] = v
		}
	}
	n.quotas.Set(users, def)
}
