package client

// batchBufs keeps the buffers of acknowledged batches for the next ones
// (guarded by Producer.mu). A busy partition starts a batch of about the
// same size for every one acknowledged; a fresh buffer for each cost a
// zeroing of the whole buffer, and on a machine where new memory is
// expensive to touch (a VM's first use of a page) the copy of every record
// into it cost more still. Only batches the broker answered are recycled:
// the request that carried them has been sent and will not be sent again
// (gRPC's proto codec copies a message before SendMsg returns, so nothing
// of gRPC's holds the bytes either). With compression the batch sent is a
// fresh exact-size copy; the uncompressed buffer it was built in is
// recycled as soon as it is compressed.
type batchBufs struct {
	free   [][]byte
	limit  int // the largest capacity kept (a lone huge record's is not)
	reused int // buffers handed out again (tests)
}

// maxFreeBatchBufs bounds what an idle producer holds: eight buffers of
// at most twice the largest batch (limit), about 2 MiB with the default
// 256 KiB batch.max.size and batches that grow to it.
const maxFreeBatchBufs = 8

// get returns an empty buffer of capacity at least n (the smallest that
// fits), or nil.
func (f *batchBufs) get(n int) []byte {
	best := -1
	for i, b := range f.free {
		if cap(b) >= n && (best < 0 || cap(b) < cap(f.free[best])) {
			best = i
		}
	}
	if best < 0 {
		return nil
	}
	b := f.free[best]
	last := len(f.free) - 1
	f.free[best] = f.free[last]
	f.free[last] = nil
	f.free = f.free[:last]
	f.reused++
	return b[:0]
}

// put keeps b for a later batch; the caller no longer uses it.
func (f *batchBufs) put(b []byte) {
	if cap(b) == 0 || cap(b) > f.limit {
		return
	}
	if len(f.free) < maxFreeBatchBufs {
		f.free = append(f.free, b)
		return
	}
	// Full: keep the larger buffers, which fit more batches.
	small := 0
	for i, x := range f.free {
		if cap(x) < cap(f.free[small]) {
			small = i
		}
	}
	if cap(b) > cap(f.free[small]) {
		f.free[small] = b
	}
}
