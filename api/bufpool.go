package api

import (
	"math/bits"
	"sync"

	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/mem"
)

// gRPC's default buffer pool clears the whole capacity of every buffer it
// hands out, and its tiers jump from 32 KiB to 1 MiB: a 40 KiB follower
// fetch response was marshalled into a freshly zeroed 1 MiB buffer, on the
// leader and again when the follower reassembled it (about 8 % of each
// node's CPU under acks=all load). Every user of the pool in gRPC writes
// the bytes it asks for before reading them (socket reads, copies,
// MarshalAppend of exactly proto.Size bytes), which is why gRPC keeps
// non-zeroing pools of its own (used for ALTS records); this one does the
// same with a tier per power of two.
func init() { experimental.SetDefaultBufferPool(newDirtyPool()) }

const (
	minPoolShift = 8  // 256 B; gRPC pools nothing under 1 KiB anyway
	maxPoolShift = 22 // 4 MiB; larger buffers are allocated and dropped
)

// dirtyPool is a mem.BufferPool of power-of-two tiers that does not clear
// buffers: Get returns a slice of the asked length whose contents are
// unspecified.
type dirtyPool struct {
	tiers [maxPoolShift - minPoolShift + 1]sync.Pool
}

var _ mem.BufferPool = (*dirtyPool)(nil)

func newDirtyPool() *dirtyPool { return &dirtyPool{} }

// tierFor is the smallest tier whose buffers hold n bytes (n >= 1).
func tierFor(n int) int {
	return max(bits.Len(uint(n-1)), minPoolShift) - minPoolShift
}

func (p *dirtyPool) Get(n int) *[]byte {
	if n <= 0 || n > 1<<maxPoolShift {
		b := make([]byte, n)
		return &b
	}
	t := tierFor(n)
	if b, ok := p.tiers[t].Get().(*[]byte); ok {
		*b = (*b)[:n]
		return b
	}
	b := make([]byte, n, 1<<(t+minPoolShift))
	return &b
}

func (p *dirtyPool) Put(b *[]byte) {
	c := cap(*b)
	if c < 1<<minPoolShift || c > 1<<maxPoolShift {
		return
	}
	// The largest tier the capacity fills (buffers from Get have exactly a
	// tier's capacity; anything else is filed under the tier below it).
	t := bits.Len(uint(c)) - 1 - minPoolShift
	*b = (*b)[:0]
	p.tiers[t].Put(b)
}
