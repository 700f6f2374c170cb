package channel

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/metadata"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// Lifecycle is a broker's side of liveness: it registers an incarnation
// with the active controller, heartbeats every interval with the metadata
// offset it has applied, and re-registers when told its epoch is stale. On
// Stop it asks to be fenced first (a controlled shutdown) so its
// partitions move before it stops serving.
type Lifecycle struct {
	NodeID        int32
	IncarnationID string
	Address       string
	// ExternalAddress is the client-facing address of a second listener.
	ExternalAddress string
	// InterBrokerAddress is the address other nodes dial for the internal
	// RPCs (the inter-broker listener).
	InterBrokerAddress string
	// KafkaAddress is the Kafka wire-protocol listener's address ("": none).
	KafkaAddress string
	Rack         string
	ClusterID    func() string
	Interval     time.Duration
	Remote       *Remote
	Applied      func() int64
	Logger       *slog.Logger

	epoch  atomic.Int64
	fenced atomic.Bool
	// shutDown: the controller confirmed this broker's controlled
	// shutdown (it answered the last heartbeat fenced).
	shutDown atomic.Bool
	// duplicate is set once a registration was refused as a duplicate, so
	// that the refusal is logged once, not every retry.
	duplicate bool
	// unsupported: the same for a refusal for a feature level.
	unsupported bool
	ready       chan struct{}
	once        sync.Once

	cancel context.CancelFunc
	done   chan struct{}
}

// Epoch is the broker epoch (0 before the first registration).
func (l *Lifecycle) Epoch() int64 { return l.epoch.Load() }

// Fenced reports the last fencing state the controller gave.
func (l *Lifecycle) Fenced() bool { return l.fenced.Load() }

// Registered is closed once the broker has an epoch.
func (l *Lifecycle) Registered() <-chan struct{} { return l.ready }

// Start runs the loop.
func (l *Lifecycle) Start() {
	l.ready = make(chan struct{})
	l.fenced.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel, l.done = cancel, make(chan struct{})
	go l.run(ctx)
}

func (l *Lifecycle) run(ctx context.Context) {
	defer close(l.done)
	for ctx.Err() == nil {
		if l.epoch.Load() == 0 {
			if err := l.register(ctx); err != nil {
				switch {
				case ctx.Err() != nil:
				case errs.CodeOf(err) == pb.ErrorCode_DUPLICATE_BROKER_REGISTRATION && !l.duplicate:
					l.duplicate = true
					l.Logger.Warn("broker registration refused while an earlier registration of this id is alive; retrying until its session expires", "err", err)
				case errs.CodeOf(err) == pb.ErrorCode_UNSUPPORTED_VERSION && !l.unsupported:
					// The cluster finalized a feature level this binary
					// does not support: it will not be let in until it
					// runs a newer binary (or the level is lowered).
					l.unsupported = true
					l.Logger.Error("broker registration refused: this binary does not support a feature level the cluster finalized; retrying", "err", err)
				default:
					l.Logger.Debug("broker registration failed; retrying", "err", err)
				}
				sleep(ctx, 200*time.Millisecond)
				continue
			}
		}
		l.heartbeat(ctx, false)
		sleep(ctx, l.Interval)
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func (l *Lifecycle) register(ctx context.Context) error {
	req := &pb.RegisterBrokerRequest{NodeId: l.NodeID, IncarnationId: l.IncarnationID, Address: l.Address, ExternalAddress: l.ExternalAddress,
		InterBrokerAddress: l.InterBrokerAddress, KafkaAddress: l.KafkaAddress, Rack: l.Rack,
		SupportedFeatures: metadata.SupportedRanges()}
	if l.ClusterID != nil {
		req.ClusterId = l.ClusterID()
	}
	var resp *pb.RegisterBrokerResponse
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err := l.Remote.Call(cctx, func(ctx context.Context, c pb.ControllerClient) error {
		var err error
		resp, err = c.RegisterBroker(ctx, req)
		return err
	})
	if err != nil {
		return err
	}
	if err := errs.FromCode(resp.ErrorCode, resp.ErrorMessage); err != nil {
		return err
	}
	l.epoch.Store(resp.BrokerEpoch)
	l.once.Do(func() { close(l.ready) })
	l.Logger.Info("registered with the controller", "epoch", resp.BrokerEpoch)
	return nil
}

func (l *Lifecycle) heartbeat(ctx context.Context, shutdown bool) (*pb.BrokerHeartbeatResponse, error) {
	req := &pb.BrokerHeartbeatRequest{NodeId: l.NodeID, BrokerEpoch: l.epoch.Load(), CurrentMetadataOffset: l.Applied(), WantShutdown: shutdown,
		SupportedFeatures: metadata.SupportedRanges()}
	var resp *pb.BrokerHeartbeatResponse
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err := l.Remote.Call(cctx, func(ctx context.Context, c pb.ControllerClient) error {
		var err error
		resp, err = c.BrokerHeartbeat(ctx, req)
		return err
	})
	if err != nil {
		return nil, err
	}
	switch resp.ErrorCode {
	case pb.ErrorCode_NONE:
		was := l.fenced.Swap(resp.IsFenced)
		if was != resp.IsFenced {
			l.Logger.Info("fencing changed", "fenced", resp.IsFenced)
		}
	case pb.ErrorCode_STALE_BROKER_EPOCH, pb.ErrorCode_BROKER_ID_NOT_REGISTERED:
		l.Logger.Warn("controller does not know this registration; registering again", "code", resp.ErrorCode.String())
		l.epoch.Store(0)
	}
	return resp, nil
}

// ShutdownConfirmed reports whether Stop's controlled shutdown was
// confirmed by the controller (false when it was not controlled, the
// broker was not registered, or ctx ended first: the controller then
// fences the broker only when its session expires).
func (l *Lifecycle) ShutdownConfirmed() bool { return l.shutDown.Load() }

// Stop performs a controlled shutdown (bounded by ctx) and ends the loop.
func (l *Lifecycle) Stop(ctx context.Context, controlled bool) {
	if l.cancel == nil {
		return
	}
	l.cancel()
	<-l.done
	if !controlled || l.epoch.Load() == 0 {
		return
	}
	for ctx.Err() == nil {
		resp, err := l.heartbeat(ctx, true)
		if err == nil && resp.ErrorCode == pb.ErrorCode_NONE && resp.IsFenced {
			l.shutDown.Store(true)
			return
		}
		if err == nil && resp.ErrorCode != pb.ErrorCode_NONE {
			return
		}
		sleep(ctx, 100*time.Millisecond)
	}
}

var _ metadata.Source = (*StreamSource)(nil)

// StreamSource follows metadata over the FetchMetadata stream of whichever
// controller Remote reaches (for broker-only nodes).
type StreamSource struct {
	Remote *Remote
	NodeID int32

	mu     sync.Mutex
	stream pb.Controller_FetchMetadataClient
	cancel context.CancelFunc
	next   int64
}

// Since implements metadata.Source.
func (s *StreamSource) Since(ctx context.Context, offset int64) ([]*pb.MetadataBatch, error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		s.mu.Lock()
		if s.stream == nil || s.next != offset {
			if s.cancel != nil {
				s.cancel()
			}
			sctx, cancel := context.WithCancel(context.Background())
			var st pb.Controller_FetchMetadataClient
			err := s.Remote.Call(ctx, func(_ context.Context, c pb.ControllerClient) error {
				var err error
				st, err = c.FetchMetadata(sctx, &pb.FetchMetadataRequest{NodeId: s.NodeID, FromOffset: offset + 1})
				return err
			})
			if err != nil {
				cancel()
				s.mu.Unlock()
				return nil, err
			}
			s.stream, s.cancel, s.next = st, cancel, offset
		}
		st, cancelStream := s.stream, s.cancel
		s.mu.Unlock()
		stop := context.AfterFunc(ctx, cancelStream)
		b, err := st.Recv()
		stop()
		if err != nil {
			s.mu.Lock()
			s.stream = nil
			s.mu.Unlock()
			if err == io.EOF || ctx.Err() == nil {
				sleep(ctx, 200*time.Millisecond)
				continue
			}
			return nil, err
		}
		s.mu.Lock()
		s.next = b.Offset
		s.mu.Unlock()
		return []*pb.MetadataBatch{b}, nil
	}
}

// Close ends the stream.
func (s *StreamSource) Close() {
	s.mu.Lock()
	if s.cancel != nil {
		s.cancel()
	}
	s.mu.Unlock()
}
