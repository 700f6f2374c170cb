package client

import (
	"context"
	"errors"
	"fmt"
	"github.com/strand-io/strand/internal/syncx"
	"log/slog"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/internal/wire"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// TopicPartition names a partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func (tp TopicPartition) String() string { return fmt.Sprintf("%s-%d", tp.Topic, tp.Partition) }

// partitionInfo is a partition as the client's metadata knows it.
type partitionInfo struct {
	leader      int32
	leaderEpoch int32
	replicas    []int32
	isr         []int32
}

type topicInfo struct {
	name       string
	id         string // the topic id ("" when the broker did not say)
	partitions []partitionInfo
	err        error
	// maxMessageBytes is the topic's effective max.message.bytes (0 when
	// the broker did not say).
	maxMessageBytes int
}

// cluster is the shared connection and metadata layer of every client type.
type cluster struct {
	cfg *config
	lg  *slog.Logger

	mu      sync.Mutex
	conns   map[string]*grpc.ClientConn
	brokers map[int32]string
	topics  map[string]*topicInfo
	updated time.Time
	closed  bool

	refreshMu syncx.Mutex // held across the Metadata call: waiters leave with their context
	changed   chan struct{}

	// A call left unanswered by a broker the cluster has since fenced
	// (stopped.go): gone by address, suspects, the background look-ups.
	gone       map[string]*goneSignal
	suspects   map[string]time.Time
	slowAt     time.Time
	slowActive bool
	bgCtx      context.Context
	bgCancel   context.CancelFunc
	bg         sync.WaitGroup
}

func newCluster(cfg *config) *cluster {
	lg := cfg.logger
	if lg == nil {
		lg = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &cluster{cfg: cfg, lg: lg, conns: map[string]*grpc.ClientConn{}, brokers: map[int32]string{}, topics: map[string]*topicInfo{}, changed: make(chan struct{}),
		gone: map[string]*goneSignal{}, suspects: map[string]time.Time{}, bgCtx: ctx, bgCancel: cancel}
}

func (c *cluster) conn(addr string) (*grpc.ClientConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	if cc := c.conns[addr]; cc != nil {
		return cc, nil
	}
	creds := insecure.NewCredentials()
	if c.cfg.tls != nil {
		creds = credentials.NewTLS(c.cfg.tls)
	}
	opts := append([]grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(wire.MaxMessageSize), grpc.MaxCallSendMsgSize(wire.MaxMessageSize)),
		// Fixed flow-control windows, as the brokers use (wire.WindowSize):
		// no BDP pings, a WINDOW_UPDATE per MiB fetched instead of per 16 KiB.
		grpc.WithInitialWindowSize(wire.WindowSize), grpc.WithInitialConnWindowSize(wire.WindowSize),
		// Transport buffers that hold a whole grown batch (wire.TransportBufferSize).
		grpc.WithReadBufferSize(wire.TransportBufferSize), grpc.WithWriteBufferSize(wire.TransportBufferSize),
	}, wire.ErrorCodeDialOptions()...)
	opts = append(opts, grpc.WithChainUnaryInterceptor(contextErrorsUnary), grpc.WithChainStreamInterceptor(contextErrorsStream))
	// Every call carries the client id, as a Kafka request header does:
	// the broker resolves client-id quotas by it.
	opts = append(opts, wire.ClientIDDialOptions(c.cfg.clientID)...)
	// A call refused with a Kafka error code (a node that is still
	// starting answers BROKER_NOT_AVAILABLE) fails with that *errs.Error,
	// which the retry loops know to retry.
	opts = append(opts, c.cfg.dialOpts...)
	var sc *scramCreds
	if c.cfg.scram != nil {
		var so []grpc.DialOption
		sc, so = c.cfg.scram.dialOptions()
		opts = append(opts, so...)
	}
	cc, err := grpc.NewClient("passthrough:///"+addr, opts...)
	if err != nil {
		return nil, err
	}
	if sc != nil {
		sc.cc = cc // before any call on cc
	}
	c.conns[addr] = cc
	return cc, nil
}

// brokerConn returns the connection to a broker by id.
func (c *cluster) brokerConn(id int32) (*grpc.ClientConn, error) {
	c.mu.Lock()
	addr, ok := c.brokers[id]
	c.mu.Unlock()
	if !ok {
		return nil, errs.New(pb.ErrorCode_LEADER_NOT_AVAILABLE, "broker %d is not in the client's metadata", id) // LEADER_NOT_AVAILABLE
	}
	return c.conn(addr)
}

// seeds returns addresses to try for cluster-wide requests: known brokers
// then bootstrap servers, shuffled.
func (c *cluster) seeds() []string {
	c.mu.Lock()
	seen := map[string]bool{}
	var out []string
	for _, a := range c.brokers {
		if !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	rand.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	c.suspectsLastLocked(out)
	c.mu.Unlock()
	for _, a := range c.cfg.bootstrap {
		if !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	return out
}

// any runs fn against some broker, trying each in turn, with backoff after
// each round, until one answers (fn returns nil) or ctx ends: transport
// errors, refusals such as a starting node's BROKER_NOT_AVAILABLE, and
// whatever fn returns are all retried. The error after ctx ends matches
// both ctx's error and the last one (expired).
func (c *cluster) any(ctx context.Context, fn func(ctx context.Context, cc *grpc.ClientConn) error) error {
	var last error
	for attempt := 0; ; attempt++ {
		for _, addr := range c.seeds() {
			cc, err := c.conn(addr)
			if err != nil {
				return err
			}
			rctx, cancel := context.WithTimeout(ctx, c.cfg.requestTimeout)
			err = fn(rctx, cc)
			cancel()
			if err == nil {
				return nil
			}
			if saslRefusal(err) {
				return err // a wrong password stays wrong (sasl.go)
			}
			last = keepLast(last, err)
			if ctx.Err() != nil {
				return expired(ctx, last)
			}
		}
		if c.cfg.sleep(ctx, backoff(c.cfg, attempt)) != nil {
			return expired(ctx, last)
		}
	}
}

// retry runs fn until it succeeds, fails with an error that is not
// retriable (errs.IsRetriable; a node that is still starting answers
// BROKER_NOT_AVAILABLE, which is), or ctx ends, with backoff between
// attempts. For calls that must go to one broker (cluster.any picks any).
func retry(ctx context.Context, cfg *config, fn func() error) error {
	var last error
	for attempt := 0; ; attempt++ {
		err := fn()
		if err == nil {
			return nil
		}
		last = keepLast(last, err)
		if ctx.Err() != nil {
			return expired(ctx, last)
		}
		// A request that ran out of its time is tried again (REQUEST_TIMED_OUT).
		if !errs.IsRetriable(err) && !ctxOnly(err) {
			return err
		}
		if cfg.sleep(ctx, backoff(cfg, attempt)) != nil {
			return expired(ctx, last)
		}
	}
}

func backoff(cfg *config, attempt int) time.Duration {
	d := cfg.retryBackoff << min(attempt, 10)
	if d > cfg.retryBackoffMx || d <= 0 {
		d = cfg.retryBackoffMx
	}
	// ±20% jitter
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}

// refresh fetches metadata for topics (nil: keep the known ones and add none).
func (c *cluster) refresh(ctx context.Context, topics []string) error {
	if err := c.refreshMu.LockContext(ctx); err != nil {
		return err
	}
	defer c.refreshMu.Unlock()
	c.mu.Lock()
	want := map[string]bool{}
	for t := range c.topics {
		want[t] = true
	}
	for _, t := range topics {
		want[t] = true
	}
	c.mu.Unlock()
	names := make([]string, 0, len(want))
	for t := range want {
		names = append(names, t)
	}
	sort.Strings(names)
	if len(names) == 0 {
		names = nil
	}
	var resp *pb.MetadataResponse
	err := c.any(ctx, func(ctx context.Context, cc *grpc.ClientConn) error {
		var err error
		resp, err = pb.NewMetadataClient(cc).Metadata(ctx, &pb.MetadataRequest{Topics: names, IncludeInternal: true})
		if err == nil && names == nil {
			// An empty list means "all"; we only want brokers then.
			resp.Topics = nil
		}
		return err
	})
	if err != nil {
		return err
	}
	c.apply(resp)
	return nil
}

func (c *cluster) apply(resp *pb.MetadataResponse) {
	c.mu.Lock()
	defer c.mu.Unlock()
	brokers := map[int32]string{}
	for _, b := range resp.Brokers {
		brokers[b.NodeId] = b.Address
		c.brokerFencedLocked(b.Address, b.Fenced)
	}
	if len(brokers) > 0 {
		c.brokers = brokers
	}
	for _, t := range resp.Topics {
		ti := &topicInfo{name: t.Name, id: t.TopicId, maxMessageBytes: int(t.MaxMessageBytes)}
		if t.ErrorCode != pb.ErrorCode_NONE {
			ti.err = errs.FromCode(t.ErrorCode, t.ErrorMessage)
		}
		old := c.topics[t.Name]
		sameTopic := old != nil && old.err == nil && ti.err == nil && old.id != "" && old.id == ti.id
		for _, p := range t.Partitions {
			for int(p.Partition) >= len(ti.partitions) {
				ti.partitions = append(ti.partitions, partitionInfo{leader: -1})
			}
			np := partitionInfo{leader: p.LeaderId, leaderEpoch: p.LeaderEpoch, replicas: p.Replicas, isr: p.Isr}
			// KIP-320: a broker whose metadata lags (cut off from the
			// controller, say) still names the leader of an older epoch;
			// believing it would send fetches and produces to a deposed
			// leader, whose log may end below positions read from the
			// new one (an OFFSET_OUT_OF_RANGE, then a reset). What is
			// known of a newer epoch of the same topic is kept.
			if sameTopic && int(p.Partition) < len(old.partitions) {
				if op := old.partitions[p.Partition]; op.leaderEpoch > np.leaderEpoch {
					np = op
				}
			}
			ti.partitions[p.Partition] = np
		}
		c.topics[t.Name] = ti
	}
	c.updated = c.cfg.clock.Now()
	close(c.changed)
	c.changed = make(chan struct{})
}

// topic returns what is known of a topic, refreshing when unknown.
func (c *cluster) topic(ctx context.Context, name string) (*topicInfo, error) {
	c.mu.Lock()
	ti := c.topics[name]
	c.mu.Unlock()
	if ti != nil && ti.err == nil {
		return ti, nil
	}
	if err := c.refresh(ctx, []string{name}); err != nil {
		return nil, err
	}
	c.mu.Lock()
	ti = c.topics[name]
	c.mu.Unlock()
	if ti == nil {
		return nil, errs.New(pb.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, "topic %q not in metadata", name)
	}
	return ti, ti.err
}

// waitTopic retries topic until it has partitions or ctx ends. A code
// that is not retriable (INVALID_TOPIC_EXCEPTION, …) ends it at once.
func (c *cluster) waitTopic(ctx context.Context, name string) (*topicInfo, error) {
	var last error
	for attempt := 0; ; attempt++ {
		ti, err := c.topic(ctx, name)
		if err == nil && len(ti.partitions) > 0 {
			return ti, nil
		}
		if err == nil {
			err = fmt.Errorf("topic %q has no partitions", name)
		}
		last = keepLast(last, err)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("strand: waiting for the metadata of topic %q: %w", name, expired(ctx, last))
		}
		if _, coded := errors.AsType[*errs.Error](err); (coded && !errs.IsRetriable(err)) || errors.Is(err, ErrClosed) {
			return nil, err
		}
		if c.cfg.sleep(ctx, backoff(c.cfg, attempt)) != nil {
			return nil, fmt.Errorf("strand: waiting for the metadata of topic %q: %w", name, expired(ctx, last))
		}
		c.mu.Lock()
		delete(c.topics, name)
		c.mu.Unlock()
	}
}

// leader returns the leader of a partition as last known (-1 if none).
func (c *cluster) leader(tp TopicPartition) (int32, int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ti := c.topics[tp.Topic]
	if ti == nil || int(tp.Partition) >= len(ti.partitions) {
		return -1, -1
	}
	p := ti.partitions[tp.Partition]
	return p.leader, p.leaderEpoch
}

// markStale forgets a partition's leader so the next lookup refreshes.
func (c *cluster) markStale(tp TopicPartition) {
	c.mu.Lock()
	if ti := c.topics[tp.Topic]; ti != nil && int(tp.Partition) < len(ti.partitions) {
		ti.partitions[tp.Partition].leader = -1
	}
	c.mu.Unlock()
}

// staleFor reports how long ago metadata was refreshed.
func (c *cluster) age() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cfg.clock.Now().Sub(c.updated)
}

func (c *cluster) close() {
	c.mu.Lock()
	c.closed = true
	conns := c.conns
	c.conns = map[string]*grpc.ClientConn{}
	c.mu.Unlock()
	c.bgCancel()
	c.bg.Wait()
	for _, cc := range conns {
		cc.Close()
	}
}
