package client

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"time"
)

func TestBatchBufsGetPut(t *testing.T) {
	f := batchBufs{limit: 1 << 20}
	if f.get(1) != nil {
		t.Fatal("an empty list gave a buffer")
	}
	a := make([]byte, 10, 4096)
	f.put(a)
	if f.get(8192) != nil {
		t.Fatal("a 4 KiB buffer was given for 8 KiB")
	}
	f.put(make([]byte, 0, 64*1024))
	got := f.get(4000)
	if cap(got) != 4096 || len(got) != 0 || &got[:1][0] != &a[:1][0] {
		t.Fatalf("get(4000) = len %d cap %d, want the smallest kept buffer that fits, emptied", len(got), cap(got))
	}
	if b := f.get(4000); cap(b) != 64*1024 {
		t.Fatalf("get(4000) = cap %d, want the 64 KiB buffer", cap(b))
	}
	if f.get(1) != nil {
		t.Fatal("a buffer was given twice")
	}
	f.put(make([]byte, 0, 2<<20)) // over the limit
	if f.get(1) != nil {
		t.Fatal("a buffer over the limit was kept")
	}
	for i := 1; i <= maxFreeBatchBufs; i++ {
		f.put(make([]byte, 0, i*1024))
	}
	f.put(make([]byte, 0, 64*1024)) // full: replaces the smallest (1 KiB)
	if len(f.free) != maxFreeBatchBufs {
		t.Fatalf("%d buffers kept, want at most %d", len(f.free), maxFreeBatchBufs)
	}
	if b := f.get(64 * 1024); cap(b) != 64*1024 {
		t.Fatalf("the larger buffer was not kept (got cap %d)", cap(b))
	}
	for _, b := range f.free {
		if cap(b) == 1024 {
			t.Fatal("the smallest buffer was kept over a larger one")
		}
	}
}

// Acknowledged batches lend their buffers to new ones (compressed ones:
// the buffers they were built in), and neither the batches written nor a
// batch retried after an error ever carry another batch's bytes: the
// broker checks every CRC and every value arrives once, in order. With
// failEvery 3 every third request is refused (retriable), so batches are
// retried while new ones are built in recycled buffers (one in flight, so
// that the fake broker, which does not check sequences, keeps the order).
func TestProducerReusesAckedBatchBuffers(t *testing.T) {
	for _, tc := range []struct {
		name      string
		failEvery int
		opts      []Opt
		reuse     bool
	}{
		{"retries", 3, []Opt{MaxInFlight(1)}, true},
		{"retries lz4", 3, []Opt{MaxInFlight(1), Compression(LZ4)}, true},
		{"five in flight", 0, []Opt{MaxInFlight(5)}, true},
		{"acks=0 keeps none", 0, []Opt{MaxInFlight(5), RequiredAcks(NoAck), EnableIdempotence(IdempotenceOff)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &gateBroker{failEvery: tc.failEvery, release: make(chan struct{})}
			close(b.release)
			startGate(t, b)
			p, ctx := gateProducer(t, b, append([]Opt{Linger(0), BatchSize(4096), RetryBackoff(0, 0)}, tc.opts...)...)
			const n = 600
			want := make([][]byte, n)
			var mu sync.Mutex
			var failed []error
			for i := range want {
				want[i] = bytes.Repeat([]byte(fmt.Sprintf("record %06d;", i)), 80) // about 1 KiB
				p.Produce(ctx, &Record{Topic: "t", Value: want[i]}, func(_ *Record, err error) {
					if err != nil {
						mu.Lock()
						failed = append(failed, err)
						mu.Unlock()
					}
				})
				// In waves, so that batches are answered before the
				// next ones are built.
				if i%100 == 99 {
					if err := p.Flush(ctx); err != nil {
						t.Fatal(err)
					}
				}
			}
			if len(failed) > 0 {
				t.Fatalf("%d records failed; first: %v", len(failed), failed[0])
			}
			b.awaitValues(n, 5*time.Second)
			got, requests := b.values(), len(b.ProduceRequests())
			if requests < 30 {
				t.Fatalf("only %d requests: too few batches to recycle buffers", requests)
			}
			if len(got) != n {
				t.Fatalf("the broker kept %d records, want %d", len(got), n)
			}
			for i := range got {
				if !bytes.Equal(got[i], want[i]) {
					t.Fatalf("record %d arrived as %.20q..., want %.20q...", i, got[i], want[i])
				}
			}
			p.mu.Lock()
			reused := p.bufs.reused
			p.mu.Unlock()
			if tc.reuse && reused == 0 {
				t.Fatal("no batch was built in a recycled buffer")
			}
			if !tc.reuse && reused != 0 {
				t.Fatalf("%d batches were built in recycled buffers, want none", reused)
			}
		})
	}
}

// With acks=0 nothing tells the producer where its records landed: every
// record's offset is -1, not -1, 0, 1, ... counted from the unknown base.
func TestNoAckOffsetsAreUnknown(t *testing.T) {
	b := &gateBroker{release: make(chan struct{})}
	close(b.release)
	startGate(t, b)
	p, ctx := gateProducer(t, b, RequiredAcks(NoAck), EnableIdempotence(IdempotenceOff), Linger(time.Second), BatchSize(1<<20))
	var mu sync.Mutex
	var offsets []int64
	for i := 0; i < 5; i++ {
		p.Produce(ctx, &Record{Topic: "t", Value: []byte("v")}, func(r *Record, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Errorf("record failed: %v", err)
			}
			offsets = append(offsets, r.Offset)
		})
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(offsets) != 5 {
		t.Fatalf("%d promises ran, want 5", len(offsets))
	}
	for i, o := range offsets {
		if o != -1 {
			t.Fatalf("record %d: offset %d, want -1 (unknown with acks=0)", i, o)
		}
	}
}
