package request

import (
	"fmt"
	"math"
	"sort"
	"strconv"

	"github.com/strand-io/strand/broker"
	"github.com/strand-io/strand/internal/config"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// Config sources, as ConfigEntry.source spells them.
const (
	srcDynamicBroker  = "dynamic_broker"         // DYNAMIC_BROKER_CONFIG
	srcDynamicDefault = "dynamic_default_broker" // DYNAMIC_DEFAULT_BROKER_CONFIG
	srcStatic         = "broker"                 // STATIC_BROKER_CONFIG
	srcDefault        = "default"                // DEFAULT_CONFIG
)

// brokerDynamic is the dynamic configs stored for a broker resource name:
// "" the cluster-wide ones, "<id>" that broker's own.
func (h *Handler) brokerDynamic(name string) map[string]string {
	img := h.Repl.Image()
	if name == "" {
		return img.BrokerConfigs
	}
	id, err := strconv.ParseInt(name, 10, 32)
	if err != nil {
		return nil
	}
	return img.BrokerConfigsByID[int32(id)]
}

// describeBroker answers DescribeConfigs of a broker resource as Kafka
// does. Name "" is the cluster-wide default: the dynamic default configs
// only (kafka-configs --entity-default). Name "<id>" is answered by that
// broker only (it alone knows its static configuration): every broker
// config Strand knows with the value in force and its source, in Kafka's
// precedence DYNAMIC_BROKER_CONFIG > DYNAMIC_DEFAULT_BROKER_CONFIG >
// STATIC_BROKER_CONFIG > DEFAULT_CONFIG, each source that sets it listed
// as a synonym, and read_only for those that need a restart.
func (h *Handler) describeBroker(r *pb.ConfigResource, out *pb.ConfigResourceResult) {
	img := h.Repl.Image()
	if r.Name == "" {
		keys := sortedKeys(img.BrokerConfigs)
		for _, k := range keys {
			v := img.BrokerConfigs[k]
			out.Entries = append(out.Entries, &pb.ConfigEntry{Name: k, Value: v, Source: srcDynamicDefault,
				Synonyms: []*pb.ConfigSynonym{{Name: k, Value: v, Source: srcDynamicDefault}}})
		}
		return
	}
	if r.Name != strconv.Itoa(int(h.NodeID)) {
		out.ErrorCode, out.ErrorMessage = pb.ErrorCode_INVALID_REQUEST,
			fmt.Sprintf("Unexpected broker id, expected %d or empty string, but received %s", h.NodeID, r.Name)
		return
	}
	cfg := h.Repl.Partitions().Config()
	def := broker.DefaultConfig(cfg.DataDir)
	i64 := func(n int64) string { return strconv.FormatInt(n, 10) }
	long := i64(math.MaxInt64)
	entries := []struct {
		name     string
		val, dfl string
	}{
		{"log.segment.bytes", i64(cfg.Log.SegmentBytes), i64(def.Log.SegmentBytes)},
		{"log.roll.ms", i64(cfg.Log.SegmentMs), i64(def.Log.SegmentMs)},
		{"log.retention.ms", i64(cfg.Log.RetentionMs), i64(def.Log.RetentionMs)},
		{"log.retention.bytes", i64(cfg.Log.RetentionBytes), i64(def.Log.RetentionBytes)},
		{"log.flush.interval.messages", i64(cfg.Log.FlushMessages), i64(def.Log.FlushMessages)},
		{"log.flush.interval.ms", i64(cfg.Log.FlushMs), i64(def.Log.FlushMs)},
		{"log.index.interval.bytes", strconv.Itoa(cfg.Log.IndexIntervalBytes), strconv.Itoa(def.Log.IndexIntervalBytes)},
		{"min.insync.replicas", strconv.Itoa(cfg.MinInsyncReplicas), strconv.Itoa(def.MinInsyncReplicas)},
		{"log.cleanup.policy", cfg.Log.Cleanup.String(), def.Log.Cleanup.String()},
		{"log.cleaner.min.cleanable.ratio", javaDouble(cfg.Log.MinCleanableDirtyRatio), javaDouble(def.Log.MinCleanableDirtyRatio)},
		{"log.cleaner.min.compaction.lag.ms", i64(cfg.Log.MinCompactionLagMs), i64(def.Log.MinCompactionLagMs)},
		{"log.cleaner.max.compaction.lag.ms", i64(cfg.Log.MaxCompactionLagMs), i64(def.Log.MaxCompactionLagMs)},
		{"log.cleaner.delete.retention.ms", i64(cfg.Log.DeleteRetentionMs), i64(def.Log.DeleteRetentionMs)},
		{"log.cleaner.enable", strconv.FormatBool(cfg.Cleaner.Enable), strconv.FormatBool(def.Cleaner.Enable)},
		{"log.cleaner.threads", strconv.Itoa(cfg.Cleaner.Threads), strconv.Itoa(def.Cleaner.Threads)},
		{"log.cleaner.dedupe.buffer.size", i64(cfg.Cleaner.DedupeBufferSize), i64(def.Cleaner.DedupeBufferSize)},
		{"log.cleaner.io.max.bytes.per.second", javaDouble(cfg.Cleaner.IOMaxBytesPerSecond), javaDouble(def.Cleaner.IOMaxBytesPerSecond)},
		{"log.cleaner.backoff.ms", i64(cfg.Cleaner.Backoff.Milliseconds()), i64(def.Cleaner.Backoff.Milliseconds())},
		// No flag sets the throttle rates: static is Kafka's default.
		{config.LeaderThrottledRate, long, long},
		{config.FollowerThrottledRate, long, long},
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })
	own, all := img.BrokerConfigsByID[h.NodeID], img.BrokerConfigs
	for _, e := range entries {
		var syn []*pb.ConfigSynonym
		if v, ok := own[e.name]; ok {
			syn = append(syn, &pb.ConfigSynonym{Name: e.name, Value: v, Source: srcDynamicBroker})
		}
		if v, ok := all[e.name]; ok {
			syn = append(syn, &pb.ConfigSynonym{Name: e.name, Value: v, Source: srcDynamicDefault})
		}
		if e.val != e.dfl {
			syn = append(syn, &pb.ConfigSynonym{Name: e.name, Value: e.val, Source: srcStatic})
		}
		syn = append(syn, &pb.ConfigSynonym{Name: e.name, Value: e.dfl, Source: srcDefault})
		out.Entries = append(out.Entries, &pb.ConfigEntry{Name: e.name, Value: syn[0].Value, Source: syn[0].Source,
			ReadOnly: config.BrokerReadOnly[e.name], Synonyms: syn})
	}
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
