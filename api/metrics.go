package api

import (
	"context"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
)

// Metrics counts what the front door serves, under names derived from
// Kafka's broker metrics, so dashboards built for Kafka read them: per topic the bytes and records clients
// wrote to partitions led here (BrokerTopicMetrics BytesInPerSec,
// MessagesInPerSec), the bytes consumers and followers fetched
// (BytesOutPerSec, ReplicationBytesOutPerSec), and per API the requests and
// their latency (RequestMetrics RequestsPerSec, TotalTimeMs) and the
// produce requests waiting for acks=all (the produce purgatory). Counters
// go up on the request paths; rates are the scraper's (rate()). A nil
// *Metrics counts nothing.
type Metrics struct {
	bytesIn, bytesOut, replBytesOut, messagesIn *prometheus.CounterVec
	requests                                    *prometheus.CounterVec
	latency                                     *prometheus.HistogramVec
	producePurgatory                            atomic.Int64
}

// NewMetrics returns the front door's metrics, unregistered (Collectors).
func NewMetrics() *Metrics {
	topic := []string{"topic"}
	return &Metrics{
		bytesIn: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strand_broker_topic_bytes_in_total",
			Help: "Bytes of record batches clients produced to partitions led by this broker, per topic (BytesInPerSec)."}, topic),
		messagesIn: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strand_broker_topic_messages_in_total",
			Help: "Records clients produced to partitions led by this broker, per topic (MessagesInPerSec)."}, topic),
		bytesOut: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strand_broker_topic_bytes_out_total",
			Help: "Bytes of record batches this broker answered consumer fetches with, per topic (BytesOutPerSec)."}, topic),
		replBytesOut: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strand_broker_topic_replication_bytes_out_total",
			Help: "Bytes of record batches this broker answered follower fetches with, per topic (ReplicationBytesOutPerSec)."}, topic),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strand_requests_total",
			Help: "Requests served, per API (RequestsPerSec); Fetch is FetchConsumer or FetchFollower, as in Kafka."}, []string{"request"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "strand_request_duration_seconds",
			Help:    "Time from a request's arrival to its answer, per API (TotalTimeMs); long-poll fetches include their wait.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}}, []string{"request"}),
	}
}

// Collectors are the metrics to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.bytesIn, m.messagesIn, m.bytesOut, m.replBytesOut, m.requests, m.latency}
}

// ProducePurgatory is the number of produce requests waiting for their
// acks=all (or flush.messages=1) condition (PurgatorySize, Produce).
func (m *Metrics) ProducePurgatory() int64 {
	if m == nil {
		return 0
	}
	return m.producePurgatory.Load()
}

func (m *Metrics) waiting(d int64) {
	if m != nil {
		m.producePurgatory.Add(d)
	}
}

// observe counts one request of an API and its time.
func (m *Metrics) observe(request string, start time.Time) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues(request).Inc()
	m.latency.WithLabelValues(request).Observe(time.Since(start).Seconds())
}

// Produced counts a client's batches appended to a partition led here.
func (m *Metrics) Produced(topic string, batches []byte) {
	if m == nil || len(batches) == 0 {
		return
	}
	records := 0
	for pos := 0; pos < len(batches); {
		h, err := record.ParseHeader(batches[pos:])
		if err != nil || h.Size() <= 0 {
			break
		}
		if !h.IsControl() {
			records += int(h.RecordCount)
		}
		pos += h.Size()
	}
	m.bytesIn.WithLabelValues(topic).Add(float64(len(batches)))
	m.messagesIn.WithLabelValues(topic).Add(float64(records))
}

// Fetched counts the bytes of a fetch answer, for consumers or followers.
func (m *Metrics) Fetched(resp *pb.FetchResponse, follower bool) {
	if m == nil || resp == nil {
		return
	}
	c := m.bytesOut
	if follower {
		c = m.replBytesOut
	}
	for _, p := range resp.Partitions {
		if n := len(p.Records); n > 0 {
			c.WithLabelValues(p.Topic).Add(float64(n))
		}
	}
}

// Unary counts every unary request and its latency by API name (the gRPC
// method's, which are Kafka's RPC names). It runs first, so refusals (a
// starting node's BROKER_NOT_AVAILABLE) are counted too; health checks are
// not requests to count.
func (m *Metrics) Unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if m == nil || strings.HasPrefix(info.FullMethod, "/"+healthpb.Health_ServiceDesc.ServiceName+"/") {
		return handler(ctx, req)
	}
	start := time.Now()
	resp, err := handler(ctx, req)
	m.observe(requestName(info.FullMethod, req), start)
	return resp, err
}

// requestName is the API of a gRPC method: its last path element, with
// Fetch split as Kafka's request metrics split it.
func requestName(fullMethod string, req any) string {
	name := fullMethod[strings.LastIndexByte(fullMethod, '/')+1:]
	if name == "Fetch" {
		if r, ok := req.(*pb.FetchRequest); ok && r.ReplicaId >= 0 {
			return "FetchFollower"
		}
		return "FetchConsumer"
	}
	return name
}
