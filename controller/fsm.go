package controller

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/strand-io/strand/metadata"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// historyLimit is how many applied batches the FSM keeps for metadata
// followers; one further behind gets the image first.
const historyLimit = 20000

// ApplyResult is what FSM.Apply returns for one batch.
type ApplyResult struct {
	Offset int64
	Err    error
}

// FSM is the Raft state machine. Apply decodes a batch, builds the next
// image and keeps the batch for metadata followers. It has no side effects
// beyond its own state, so replaying the log on any voter builds the same
// images: brokers react to images on their own goroutines (docs/ARCHITECTURE.md,
// "Goroutines and their owners").
type FSM struct {
	mu      sync.Mutex
	image   *metadata.Image
	history []*pb.MetadataBatch // applied batches, oldest first
	// historyFrom: history holds every applied batch with an offset above it.
	historyFrom int64
	changed     chan struct{} // closed and replaced on every apply
	// unreadable is the first batch this binary could not read (a
	// *metadata.FormatError); failed is closed then. Every batch after it
	// is refused too, so the image stays what this binary understood.
	unreadable error
	failed     chan struct{}
}

// NewFSM returns an FSM at the empty image.
func NewFSM() *FSM {
	return &FSM{image: metadata.EmptyImage(), changed: make(chan struct{}), historyFrom: -1, failed: make(chan struct{})}
}

// Unreadable is closed when the FSM meets a batch this binary cannot read
// (written in a newer format, or by a newer binary); UnreadableErr says
// which. The node must stop: it cannot follow the metadata any further.
func (f *FSM) Unreadable() <-chan struct{} { return f.failed }

// UnreadableErr is the batch Unreadable reported, or nil.
func (f *FSM) UnreadableErr() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.unreadable
}

// failLocked records an unreadable batch.
func (f *FSM) failLocked(err error) {
	if f.unreadable == nil {
		f.unreadable = err
		close(f.failed)
	}
}

var _ raft.FSM = (*FSM)(nil)

var _ metadata.Source = (*FSM)(nil)

// Image returns the current image.
func (f *FSM) Image() *metadata.Image {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.image
}

// Apply applies a committed Raft entry.
func (f *FSM) Apply(l *raft.Log) interface{} {
	var b pb.MetadataBatch
	if err := proto.Unmarshal(l.Data, &b); err != nil {
		return ApplyResult{Err: fmt.Errorf("decode metadata batch at %d: %w", l.Index, err)}
	}
	b.Offset = int64(l.Index)
	if !l.AppendedAt.IsZero() {
		b.AppendTimeMs = l.AppendedAt.UnixMilli()
	}
	// Broker epochs are the offset of their registration record.
	for _, r := range b.Records {
		if rb, ok := r.Record.(*pb.MetadataRecord_RegisterBroker); ok && rb.RegisterBroker.BrokerEpoch <= 0 {
			rb.RegisterBroker.BrokerEpoch = b.Offset
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.unreadable != nil {
		return ApplyResult{Offset: b.Offset, Err: f.unreadable}
	}
	next, _, err := metadata.Apply(f.image, &b)
	var fe *metadata.FormatError
	if errors.As(err, &fe) {
		f.failLocked(err)
	}
	if err != nil {
		return ApplyResult{Offset: b.Offset, Err: err}
	}
	f.image = next
	f.history = append(f.history, &b)
	if len(f.history) > historyLimit {
		drop := len(f.history) - historyLimit/2
		f.historyFrom = f.history[drop-1].Offset
		f.history = append([]*pb.MetadataBatch(nil), f.history[drop:]...)
	}
	close(f.changed)
	f.changed = make(chan struct{})
	return ApplyResult{Offset: b.Offset}
}

// Snapshot captures the image for Raft.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	return &fsmSnapshot{batch: f.Image().SnapshotRecords()}, nil
}

// Restore replaces the state with a snapshot.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return err
	}
	var b pb.MetadataBatch
	if err := proto.Unmarshal(data, &b); err != nil {
		return fmt.Errorf("decode metadata snapshot: %w", err)
	}
	b.Snapshot = true
	next, _, err := metadata.Apply(metadata.EmptyImage(), &b)
	var fe *metadata.FormatError
	if errors.As(err, &fe) {
		f.mu.Lock()
		f.failLocked(err)
		f.mu.Unlock()
	}
	if err != nil {
		return fmt.Errorf("apply metadata snapshot: %w", err)
	}
	f.mu.Lock()
	f.image = next
	f.history = nil
	f.historyFrom = next.Offset
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
	return nil
}

type fsmSnapshot struct{ batch *pb.MetadataBatch }

func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	data, err := proto.Marshal(s.batch)
	if err != nil {
		sink.Cancel()
		return err
	}
	if _, err := sink.Write(data); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s *fsmSnapshot) Release() {}

// Since returns the applied batches after offset (in order). When offset is
// older than the kept history it returns one snapshot batch of the current
// image instead. It blocks until there is something newer than offset or
// ctx ends.
func (f *FSM) Since(ctx context.Context, offset int64) ([]*pb.MetadataBatch, error) {
	for {
		f.mu.Lock()
		img, ch := f.image, f.changed
		var out []*pb.MetadataBatch
		if img.Offset > offset {
			if offset < f.historyFrom {
				out = []*pb.MetadataBatch{img.SnapshotRecords()}
			} else {
				out = append(out, f.history[searchBatches(f.history, offset):]...)
			}
		}
		f.mu.Unlock()
		if len(out) > 0 {
			return out, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// searchBatches returns the index of the first batch with Offset > offset.
func searchBatches(h []*pb.MetadataBatch, offset int64) int {
	lo, hi := 0, len(h)
	for lo < hi {
		m := (lo + hi) / 2
		if h[m].Offset > offset {
			hi = m
		} else {
			lo = m + 1
		}
	}
	return lo
}

// WaitFor blocks until the image reaches offset or ctx ends.
func (f *FSM) WaitFor(ctx context.Context, offset int64) (*metadata.Image, error) {
	for {
		f.mu.Lock()
		img, ch := f.image, f.changed
		f.mu.Unlock()
		if img.Offset >= offset {
			return img, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return img, ctx.Err()
		}
	}
}

// Changed returns a channel closed at the next apply.
func (f *FSM) Changed() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changed
}
