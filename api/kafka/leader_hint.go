package kafka

import (
	"sort"

	"github.com/strand-io/strand/metadata"
)

// KIP-951: a Produce (v10+) or Fetch (v16+) answered NOT_LEADER_OR_FOLLOWER
// (or, for Fetch, FENCED_LEADER_EPOCH) names the partition's current
// leader and carries that broker's endpoint, so the client moves there
// without a metadata round trip first.

// endpoint is a broker's Kafka listener as the answers' NodeEndpoints
// carry it.
type endpoint struct {
	NodeID int32
	Host   string
	Port   int32
	Rack   *string
}

// currentLeader is the leader to name for a partition: the one its local
// replica knows (id >= 0), else the one in the metadata image, as Kafka's
// getCurrentLeader falls back to its metadata cache; -1, -1 when none.
func currentLeader(img *metadata.Image, topic string, partition, id, epoch int32) (int32, int32) {
	if id >= 0 {
		return id, epoch
	}
	if img != nil {
		if p := img.Partition(topic, partition); p != nil && p.Leader >= 0 {
			return p.Leader, p.LeaderEpoch
		}
	}
	return -1, -1
}

// leaderEndpoints lists, once each and by id, the brokers of ids that
// the image has alive with a Kafka listener (a leader without one is
// named with no endpoint: the client asks Metadata).
func leaderEndpoints(img *metadata.Image, ids []int32) []endpoint {
	if img == nil || len(ids) == 0 {
		return nil
	}
	seen := map[int32]bool{}
	var out []endpoint
	for _, id := range ids {
		b := img.Brokers[id]
		if seen[id] || b == nil || b.Fenced || b.KafkaAddress == "" {
			continue
		}
		seen[id] = true
		e := endpoint{NodeID: id}
		e.Host, e.Port = hostPort(b.KafkaAddress)
		if b.Rack != "" {
			rack := b.Rack
			e.Rack = &rack
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].NodeID < out[j].NodeID })
	return out
}
