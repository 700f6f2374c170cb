package node

import (
	"context"
	"time"

	"github.com/strand-io/strand/api"
	"github.com/strand-io/strand/metadata"
)

// Following the cluster's metadata: the image this node applies, and
// what it derives from it (peers' addresses, the inter-broker allow list).

// peerHosts lists the hosts the inter-broker listener admits calls from
// (api.PeerFilter): every controller voter's, this node's, and every
// registered broker's, from the freshest metadata this node has; version
// is that metadata's offset.
func (n *Node) peerHosts() (int64, []string) {
	var hosts []string
	add := func(addr string) {
		if h := api.HostOf(addr); h != "" {
			hosts = append(hosts, h)
		}
	}
	for _, v := range n.cfg.Voters {
		add(v.Addr)
	}
	add(n.cfg.Advertise)
	add(n.cfg.InterBrokerAdvertise)
	add(n.cfg.ControllerAdvertise)
	img := n.metaImg.Load()
	if n.Quorum != nil {
		if fi := n.Quorum.FSM.Image(); img == nil || fi.Offset > img.Offset {
			img = fi
		}
	}
	version := int64(-1)
	if img != nil {
		version = img.Offset
		for _, b := range img.Brokers {
			add(b.Address)
			add(b.InterBrokerAddress)
		}
	}
	return version, hosts
}

// followMetadata applies committed metadata to the broker's image in order.
//
// A starting broker follows the metadata log without acting on it until the
// log holds this incarnation's own registration (its broker epoch is that
// record's offset), as a Kafka broker waits for its initial metadata
// catch-up: a node restarted with an old Raft log replays history, and
// applying it would make the broker lead partitions and coordinate
// transactions at epochs the cluster left long ago (after a full restart
// such a node wrote stale transaction markers). Once caught up, the broker
// applies the whole image at once; from then on, every batch in order.
func (n *Node) followMetadata(ctx context.Context, src metadata.Source, meta nodeMeta) {
	defer n.wg.Done()
	img := metadata.EmptyImage()
	caughtUp := false
	for ctx.Err() == nil {
		sctx, cancel := ctx, context.CancelFunc(func() {})
		if !caughtUp {
			// The registration may be answered after its record was
			// applied here: look again without waiting for a new batch.
			sctx, cancel = context.WithTimeout(ctx, 100*time.Millisecond)
		}
		batches, err := src.Since(sctx, img.Offset)
		lookAgain := sctx.Err() != nil && ctx.Err() == nil
		cancel()
		if err != nil && !lookAgain {
			if ctx.Err() == nil {
				n.lg.Debug("metadata follow", "err", err)
				time.Sleep(100 * time.Millisecond)
			}
			continue
		}
		for _, b := range batches {
			next, d, err := metadata.Apply(img, b)
			if err != nil {
				n.lg.Warn("metadata batch refused", "offset", b.Offset, "err", err)
				continue
			}
			img = next
			n.metaImg.Store(img)
			if d.ClientQuotas || d.Snapshot {
				n.setQuotas(img) // the client quotas in force
			}
			if caughtUp {
				n.Repl.Apply(img, d)
				n.applied.Store(img.Offset)
			}
			if meta.clusterID == "" && img.ClusterID != "" {
				meta.clusterID = img.ClusterID
				meta.nodeID = n.cfg.NodeID
				cid := img.ClusterID
				n.clusterID.Store(&cid)
				if err := writeMeta(n.cfg.DataDir, meta); err != nil {
					n.lg.Error("write meta.properties", "err", err)
				}
			}
		}
		if epoch := n.Lifecycle.Epoch(); !caughtUp && epoch > 0 && img.Offset >= epoch {
			caughtUp = true
			n.lg.Info("metadata caught up with this broker's registration; acting on it", "offset", img.Offset, "brokerEpoch", epoch)
			n.Repl.Apply(img, metadata.SnapshotDelta(metadata.EmptyImage(), img))
			n.applied.Store(img.Offset)
		}
	}
}

// addressOf maps a node id to the address of its inter-broker listener,
// what this node dials for the internal RPCs.
func (n *Node) addressOf(id int32) string {
	if id == n.cfg.NodeID {
		return n.cfg.InterBrokerAdvertise
	}
	if n.Repl != nil {
		if b := n.Repl.Image().Brokers[id]; b != nil {
			return b.PeerAddress()
		}
	}
	if n.Quorum != nil {
		if b := n.Quorum.FSM.Image().Brokers[id]; b != nil {
			return b.PeerAddress()
		}
	}
	if n.Gossip != nil {
		return n.Gossip.PeerAddress(id)
	}
	return ""
}
