package node

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strand-io/strand/broker"
	"github.com/strand-io/strand/broker/storage"
	"github.com/strand-io/strand/internal/auth"
)

// collector computes the gauges operators alert on when scraped, from the
// node's state, so nothing is counted on the hot paths.
type collector struct{ n *Node }

var (
	descUnderReplicated = prometheus.NewDesc("strand_under_replicated_partitions", "Partitions led here whose ISR is smaller than their replica set (UnderReplicatedPartitions).", nil, nil)
	descUnderMinISR     = prometheus.NewDesc("strand_under_min_isr_partition_count", "Partitions led here whose ISR is below min.insync.replicas (UnderMinIsrPartitionCount).", nil, nil)
	descOffline         = prometheus.NewDesc("strand_offline_partitions_count", "Partitions without a leader, cluster-wide (OfflinePartitionsCount).", nil, nil)
	descLeaders         = prometheus.NewDesc("strand_leader_partitions", "Partitions led by this broker.", nil, nil)
	descISRShrinks      = prometheus.NewDesc("strand_isr_shrinks_total", "ISR shrinks committed by this broker's leaders (IsrShrinksPerSec).", nil, nil)
	descISRExpands      = prometheus.NewDesc("strand_isr_expands_total", "ISR expansions committed by this broker's leaders.", nil, nil)
	descLSOLag          = prometheus.NewDesc("strand_partition_last_stable_offset_lag", "HW minus LSO of a partition led here (LastStableOffsetLag): how far read_committed readers trail.", []string{"topic", "partition"}, nil)
	descTxnAge          = prometheus.NewDesc("strand_partition_oldest_open_txn_age_seconds", "Age of the oldest open transaction of a partition led here: the one holding its LSO.", []string{"topic", "partition"}, nil)
	descLateTxns        = prometheus.NewDesc("strand_partitions_with_late_transactions_count", "Partitions led here with a transaction open longer than transaction.max.timeout.ms (PartitionsWithLateTransactionsCount).", nil, nil)
	descProducerIDs     = prometheus.NewDesc("strand_producer_id_count", "Producer ids with state in partitions led here (ProducerIdCount); bounded by producer.id.expiration.ms.", nil, nil)
	descHW              = prometheus.NewDesc("strand_partition_high_watermark", "High watermark of a partition led here.", []string{"topic", "partition"}, nil)
	descMarkers         = prometheus.NewDesc("strand_txn_marker_queue_size", "Transaction markers waiting to be written by this coordinator.", nil, nil)
	descRaftLeader      = prometheus.NewDesc("strand_controller_active", "1 when this node is the active controller.", nil, nil)
	descRaftCommit      = prometheus.NewDesc("strand_controller_commit_index", "The Raft commit index this controller knows.", nil, nil)
	descFetchSessions   = prometheus.NewDesc("strand_fetch_session_count", "Fetch sessions this broker keeps for its followers (NumIncrementalFetchSessions).", nil, nil)
	descSessionParts    = prometheus.NewDesc("strand_fetch_session_partitions", "Partitions held by those sessions (NumIncrementalFetchPartitionsCached).", nil, nil)
	descReplicaFetches  = prometheus.NewDesc("strand_replica_fetch_requests_total", "Fetch requests this broker sent as a follower.", nil, nil)
	descReplicaNamed    = prometheus.NewDesc("strand_replica_fetch_partitions_named_total", "Partitions named in those requests (a fetch session names only moved ones).", nil, nil)
	descReplicaAnswered = prometheus.NewDesc("strand_replica_fetch_partitions_answered_total", "Partitions carried by their answers (a fetch session answers only changed ones).", nil, nil)
	descLogFlushes      = prometheus.NewDesc("strand_log_flush_total", "Flushes (fsync rounds) of this broker's logs; one covers every batch appended while the previous ran (LogFlushRateAndTimeMs).", nil, nil)
	descLogFlushSeconds = prometheus.NewDesc("strand_log_flush_seconds_total", "Time spent in those fsyncs.", nil, nil)
	descRecoveryCut     = prometheus.NewDesc("strand_log_recovery_truncated_bytes_total", "Bytes log recovery cut from the torn tails of active segments at this node's starts.", nil, nil)
	descRecoveryFenced  = prometheus.NewDesc("strand_log_recovery_fenced_bytes_total", "Bytes log recovery found damaged in segments it does not cut: kept on disk, never served (reads of their offsets answer KAFKA_STORAGE_ERROR).", nil, nil)
	descFailedLogs      = prometheus.NewDesc("strand_failed_log_count", "Partition logs on this broker stopped by a failed fsync; they take no writes until the node restarts (OfflineLogDirectoryCount).", nil, nil)
	descCleanerDirty    = prometheus.NewDesc("strand_log_cleaner_max_dirty_percent", "Dirty share, in percent, of the log the cleaner chose last; 0 when its last look found nothing to clean (max-dirty-percent).", nil, nil)
	descCleanerRecopy   = prometheus.NewDesc("strand_log_cleaner_recopy_percent", "Bytes the cleaner threads' last passes wrote, as a percentage of the bytes they read (cleaner-recopy-percent).", nil, nil)
	descCleanerTime     = prometheus.NewDesc("strand_log_cleaner_max_clean_time_seconds", "The longest of the cleaner threads' last passes (max-clean-time-secs).", nil, nil)
	descCleanerBuffer   = prometheus.NewDesc("strand_log_cleaner_max_buffer_utilization_percent", "The fullest key map of the cleaner threads' last passes, in percent of log.cleaner.dedupe.buffer.size's share (max-buffer-utilization-percent); counted as the offsets a pass cleaned, an upper bound of its keys.", nil, nil)
	descUncleanable     = prometheus.NewDesc("strand_log_cleaner_uncleanable_partitions_count", "Compacted logs on this broker whose cleaning failed; the cleaner skips them until the partition is deleted (uncleanable-partitions-count).", nil, nil)
	descDirtyRatio      = prometheus.NewDesc("strand_log_cleaner_dirty_ratio", "Dirty bytes over all bytes below the cleanable bound, per compacted log on this broker, at the cleaner's last look.", []string{"topic", "partition"}, nil)
	descMetadataOffset  = prometheus.NewDesc("strand_broker_metadata_offset", "The metadata offset this broker has applied.", nil, nil)
	descPurgatory       = prometheus.NewDesc("strand_purgatory_size", "Requests waiting in a purgatory (PurgatorySize): produce requests waiting for acks=all, fetches parked in a long poll.", []string{"operation"}, nil)
	descThrottledBytes  = prometheus.NewDesc("strand_replication_throttled_bytes_total", "Bytes of throttled replicas (leader/follower.replication.throttled.replicas, out of the ISR) this broker sent as a leader or fetched as a follower: what the replication quotas measure (Kafka's LeaderReplication / FollowerReplication byte-rate).", []string{"side"}, nil)
	descThrottleRate    = prometheus.NewDesc("strand_replication_throttled_rate_bytes", "The replication quota in force, bytes/s (leader/follower.replication.throttled.rate); -1 for none.", []string{"side"}, nil)
	descGroupLag        = prometheus.NewDesc("strand_consumer_group_lag", "High watermark minus the committed offset, per partition of each group this broker coordinates (for partitions with a replica here; a follower's HW may trail the leader's a little).", []string{"group", "topic", "partition"}, nil)
)

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descUnderReplicated, descUnderMinISR, descOffline, descLeaders, descISRShrinks, descISRExpands, descLSOLag, descTxnAge,
		descLateTxns, descProducerIDs, descHW, descMarkers, descRaftLeader, descRaftCommit, descMetadataOffset,
		descFetchSessions, descSessionParts, descReplicaFetches, descReplicaNamed, descReplicaAnswered,
		descLogFlushes, descLogFlushSeconds, descRecoveryCut, descRecoveryFenced, descFailedLogs, descPurgatory, descGroupLag, descThrottledBytes, descThrottleRate,
		descCleanerDirty, descCleanerRecopy, descCleanerTime, descCleanerBuffer, descUncleanable, descDirtyRatio} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	n := c.n
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	if n.Quorum != nil {
		active := 0.0
		if n.Controller.IsActive() {
			active = 1
		}
		gauge(descRaftLeader, active)
		ci, _ := strconv.ParseFloat(n.Quorum.Stats()["commit_index"], 64)
		gauge(descRaftCommit, ci)
	}
	if n.Repl == nil {
		return
	}
	img := n.Repl.Image()
	gauge(descMetadataOffset, float64(img.Offset))
	offline := 0
	for _, name := range img.TopicNames() {
		for _, p := range img.Topics[name].Partitions {
			if p.Leader < 0 {
				offline++
			}
		}
	}
	gauge(descOffline, float64(offline))
	shr, exp := n.Repl.ISRChanges()
	ch <- prometheus.MustNewConstMetric(descISRShrinks, prometheus.CounterValue, float64(shr))
	ch <- prometheus.MustNewConstMetric(descISRExpands, prometheus.CounterValue, float64(exp))
	ns, np := n.Repl.FetchSessions()
	gauge(descFetchSessions, float64(ns))
	gauge(descSessionParts, float64(np))
	fr, fn, fa := n.Repl.FetchStats()
	ch <- prometheus.MustNewConstMetric(descReplicaFetches, prometheus.CounterValue, float64(fr))
	ch <- prometheus.MustNewConstMetric(descReplicaNamed, prometheus.CounterValue, float64(fn))
	ch <- prometheus.MustNewConstMetric(descReplicaAnswered, prometheus.CounterValue, float64(fa))
	lr, fr2, lb, fb := n.Repl.ReplicationThrottle()
	ch <- prometheus.MustNewConstMetric(descThrottledBytes, prometheus.CounterValue, float64(lb), "leader")
	ch <- prometheus.MustNewConstMetric(descThrottledBytes, prometheus.CounterValue, float64(fb), "follower")
	gauge(descThrottleRate, float64(lr), "leader")
	gauge(descThrottleRate, float64(fr2), "follower")
	if st := n.Parts.LogStats(); st != nil {
		ch <- prometheus.MustNewConstMetric(descLogFlushes, prometheus.CounterValue, float64(st.Flushes.Load()))
		ch <- prometheus.MustNewConstMetric(descLogFlushSeconds, prometheus.CounterValue, float64(st.FlushNanos.Load())/1e9)
		ch <- prometheus.MustNewConstMetric(descRecoveryCut, prometheus.CounterValue, float64(st.RecoveryTruncatedBytes.Load()))
		ch <- prometheus.MustNewConstMetric(descRecoveryFenced, prometheus.CounterValue, float64(st.RecoveryFencedBytes.Load()))
	}
	cm := n.Parts.CleanerMetrics()
	gauge(descCleanerDirty, cm.MaxDirtyPercent)
	gauge(descCleanerRecopy, cm.RecopyPercent)
	gauge(descCleanerTime, cm.MaxCleanTimeSecs)
	gauge(descCleanerBuffer, cm.MaxBufferUtilizationPercent)
	gauge(descUncleanable, float64(cm.UncleanablePartitions))
	for k, r := range cm.DirtyRatio {
		gauge(descDirtyRatio, r, k.Topic, strconv.Itoa(int(k.Partition)))
	}
	under, underMin, leaders, late, producers, failed := 0, 0, 0, 0, 0, 0
	now := time.Now().UnixMilli()
	maxTimeout := n.cfg.TxnConfig.MaxTimeout.Milliseconds()
	for _, p := range n.Parts.All() {
		if p.Log.Failed() != nil {
			failed++
		}
		l := p.Leadership()
		if l.Role != broker.RoleLeader {
			continue
		}
		leaders++
		if len(l.ISR) < len(l.Replicas) {
			under++
		}
		if len(l.ISR) < p.MinISR() {
			underMin++
		}
		producers += p.Log.ProducerCount()
		part := strconv.Itoa(int(p.Key.Partition))
		hw := p.HighWatermark()
		gauge(descHW, float64(hw), p.Key.Topic, part)
		gauge(descLSOLag, float64(hw-p.LastStableOffset()), p.Key.Topic, part)
		age := 0.0
		if _, start, ok := p.Log.OldestOpenTxn(); ok {
			age = float64(now-start) / 1000
			if now-start > maxTimeout {
				late++
			}
		}
		gauge(descTxnAge, age, p.Key.Topic, part)
	}
	gauge(descLeaders, float64(leaders))
	gauge(descUnderReplicated, float64(under))
	gauge(descUnderMinISR, float64(underMin))
	gauge(descLateTxns, float64(late))
	gauge(descProducerIDs, float64(producers))
	gauge(descFailedLogs, float64(failed))
	if n.TxnCoord != nil {
		gauge(descMarkers, float64(n.TxnCoord.PendingMarkers()))
	}
	gauge(descPurgatory, float64(n.metrics.ProducePurgatory()), "produce")
	gauge(descPurgatory, float64(n.Repl.FetchPurgatory()), "fetch")
	if n.Groups != nil {
		for _, o := range n.Groups.CommittedOffsets() {
			p := n.Parts.Get(storage.PartitionKey{Topic: o.Topic, Partition: o.Partition})
			if p == nil || o.Offset < 0 {
				continue
			}
			gauge(descGroupLag, float64(max(p.HighWatermark()-o.Offset, 0)), o.Group, o.Topic, strconv.Itoa(int(o.Partition)))
		}
	}
}

// startHTTP serves /metrics (Prometheus), /debug/pprof (debug.go) and the web console.
func (n *Node) startHTTP(addr string) error {
	mux := http.NewServeMux()
	// /metrics, behind metricsAuth when an authorizer is configured
	// (metrics_auth.go).
	mux.Handle("/metrics", n.metricsAuth(n.metricsHandlers()))
	if n.cfg.DebugEndpoints { // debug.endpoints.enable: off by default
		n.registerDebug(mux)
	}
	if n.cfg.TestingFaults {
		n.registerFaults(mux)
	}
	// The web console: /, /topics, /groups, ... (package console), behind
	// consoleAuth when an authorizer is configured.
	n.newConsole().Register(mux, n.consoleAuth)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	if tc := n.sec.ServerTLS(auth.ListenerHTTP, "http/1.1"); tc != nil {
		// HTTP:SSL in listener.security.protocol.map; each connection's
		// handshake runs in the http.Server's goroutine for it, bounded by
		// ReadHeaderTimeout.
		ln = tls.NewListener(ln, tc)
	}
	n.http = &http.Server{Handler: readOnly(mux, n.cfg.TestingFaults), ReadHeaderTimeout: 10 * time.Second}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		if err := n.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.lg.Error("metrics server", "err", err)
		}
	}()
	return nil
}

func (n *Node) stopHTTP() {
	if n.http != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = n.http.Shutdown(ctx)
	}
}
