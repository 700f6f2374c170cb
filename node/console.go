package node

import (
	"github.com/strand-io/strand/console"
	"github.com/strand-io/strand/metadata"
)

// newConsole builds the web console the HTTP listener serves next to
// /metrics: it reads this node's newest metadata image and asks each
// broker's client listener, through the node's connection pool, for the
// rest, so every node serves it, controller-only ones included.
func (n *Node) newConsole() *console.Console {
	voters := make([]console.Voter, 0, len(n.cfg.Voters))
	for _, v := range n.cfg.Voters {
		voters = append(voters, console.Voter{ID: v.ID, Addr: v.Addr})
	}
	active := func() int32 { return -1 }
	if n.Remote != nil {
		active = n.Remote.LeaderHint
	}
	cfg := console.Config{
		NodeID:           n.cfg.NodeID,
		Image:            n.newestImage,
		ActiveController: active,
		Voters:           voters,
		CurrentVoters:    n.currentVoters,
		Broker: func(b *metadata.Broker) (console.BrokerAPI, error) {
			pool := n.pool
			if n.clientPool != nil {
				pool = n.clientPool
			}
			cc, err := pool.Get(b.Address)
			if err != nil {
				return nil, err
			}
			return console.GRPCBroker(cc), nil
		},
		Logger: n.lg,
	}
	if n.Repl != nil {
		cfg.FollowerLogEnds = n.Repl.FollowerLogEnds
	}
	return console.New(cfg)
}

// currentVoters is the current Raft configuration's voters on a
// controller node (none before it has a configuration, and on a
// broker-only node, which then shows the configured voters).
func (n *Node) currentVoters() []console.Voter {
	if n.Quorum == nil {
		return nil
	}
	cur := n.Quorum.Voters()
	out := make([]console.Voter, 0, len(cur))
	for _, v := range cur {
		out = append(out, console.Voter{ID: v.ID, Addr: v.Addr})
	}
	return out
}

// newestImage is the newer of the broker's and the controller's images
// (nil before either has one).
func (n *Node) newestImage() *metadata.Image {
	img := n.metaImg.Load()
	if n.Quorum != nil {
		if fi := n.Quorum.FSM.Image(); img == nil || (fi != nil && fi.Offset > img.Offset) {
			img = fi
		}
	}
	return img
}
