package client

import (
	"math/rand/v2"
	"sync"
)

// Partitioner picks a partition for a record.
type Partitioner interface {
	// Partition returns the partition for rec among n, given whether the
	// previous batch for the topic just filled (sticky partitioning).
	Partition(rec *Record, n int) int32
	// OnNewBatch tells a sticky partitioner that topic's batch filled up.
	OnNewBatch(topic string, n int)
}

// DefaultPartitioner is Kafka's: murmur2 of the key modulo the partition
// count (so keys land where the Java client puts them), and for records
// without a key a sticky partition that changes when its batch fills
// (OnNewBatch) or, in the SDK's producer, after a number of bytes
// (Appended).
//
// The producer moves keyless records on by bytes, not by batch: every
// batch costs the brokers a fixed amount (an append, a CRC check, a
// replica fetch entry, a high-watermark step), so a topic of many
// partitions fed 16 KiB batches, one per partition in turn, cost them
// several times what one partition fed growing batches did (measured: a
// 1 000-partition topic ran at 63 % of a one-partition topic's rate).
// Staying on a partition for a window's worth of full-size batches lets
// its batches grow while the window is full, as a single partition's do.
type DefaultPartitioner struct {
	mu     sync.Mutex
	sticky map[string]int32
	bytes  map[string]int // bytes appended to the topic's sticky partition
}

// NewDefaultPartitioner returns Kafka's default partitioner.
func NewDefaultPartitioner() *DefaultPartitioner {
	return &DefaultPartitioner{sticky: map[string]int32{}, bytes: map[string]int{}}
}

// Partition implements Partitioner.
func (p *DefaultPartitioner) Partition(rec *Record, n int) int32 {
	if rec.Key != nil {
		return int32(toPositive(Murmur2(rec.Key)) % uint32(n))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.sticky[rec.Topic]
	if !ok || int(s) >= n {
		s = int32(rand.IntN(n))
		p.sticky[rec.Topic] = s
	}
	return s
}

// OnNewBatch moves the topic's sticky partition to another one.
func (p *DefaultPartitioner) OnNewBatch(topic string, n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.moveLocked(topic, n)
}

// Appended counts size bytes of a keyless record just appended to topic's
// sticky partition, and moves the sticky partition to another one once
// switchAfter bytes went to it (KIP-794 moves after batch.size bytes; the
// producer passes a window of batch.max.size batches, see the type's doc).
func (p *DefaultPartitioner) Appended(topic string, n, size, switchAfter int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.bytes[topic] += size
	if p.bytes[topic] >= switchAfter {
		p.moveLocked(topic, n)
	}
}

func (p *DefaultPartitioner) moveLocked(topic string, n int) {
	p.bytes[topic] = 0
	if n <= 1 {
		p.sticky[topic] = 0
		return
	}
	cur := p.sticky[topic]
	next := int32(rand.IntN(n - 1))
	if next >= cur {
		next++
	}
	p.sticky[topic] = next
}

func toPositive(h int32) uint32 { return uint32(h) & 0x7fffffff }

// Murmur2 is the 32-bit murmur2 hash Kafka's partitioner uses (seed
// 0x9747b28c), returned as Java's signed int.
func Murmur2(data []byte) int32 {
	const (
		seed uint32 = 0x9747b28c
		m    uint32 = 0x5bd1e995
		r           = 24
	)
	length := len(data)
	h := seed ^ uint32(length)
	n := length / 4
	for i := 0; i < n; i++ {
		j := i * 4
		k := uint32(data[j]) | uint32(data[j+1])<<8 | uint32(data[j+2])<<16 | uint32(data[j+3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	tail := data[n*4:]
	switch len(tail) {
	case 3:
		h ^= uint32(tail[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(tail[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(tail[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return int32(h)
}
