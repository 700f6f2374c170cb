package storage

// LeaderEpochCache is the partition's history of leader epochs: for each
// epoch the first offset its leader wrote (KIP-101). It answers
// OffsetForLeaderEpoch and lets a follower truncate to the point where its
// log and the leader's agree, instead of trusting the high watermark.
//
// Callers hold the log's lock.
type LeaderEpochCache struct {
	fs      FS // nil: OSFS
	path    string
	entries []EpochEntry
}

// Latest is the newest epoch, -1 when none.
func (c *LeaderEpochCache) Latest() int32 {
	if len(c.entries) == 0 {
		return -1
	}
	return c.entries[len(c.entries)-1].Epoch
}

// Entries returns a copy of the history.
func (c *LeaderEpochCache) Entries() []EpochEntry {
	return append([]EpochEntry(nil), c.entries...)
}

// assign records that the batch at offset was written in epoch (or, for a
// new leader, that its epoch starts at its log end). The batches decide,
// as in Kafka's cache: entries of a newer epoch, or starting at or after
// offset, are dropped first (they describe a log suffix this batch
// replaces, or an epoch this replica led without writing a batch), so a
// batch of an older epoch than the latest entry is recorded too. An epoch
// the cache already has starting at or before offset changes nothing.
//
// The older epoch matters: a replica that became leader at epoch 1 with
// its log ending at 85, wrote nothing, then followed a leader whose log
// had epoch-0 batches from 85 on, once kept (1, 85). Leading later, it
// answered OffsetForLeaderEpoch(0) with 85 and made its followers cut
// records it held itself; one of them, elected next, lost an acknowledged
// record (found by the simulation, seed 32110 with -profile leadership
// -faults 12).
func (c *LeaderEpochCache) assign(epoch int32, offset int64) (bool, error) {
	if epoch < 0 {
		return false, nil
	}
	if n := len(c.entries); n > 0 {
		if last := c.entries[n-1]; last.Epoch == epoch && last.StartOffset <= offset {
			return false, nil
		}
	}
	for len(c.entries) > 0 {
		last := c.entries[len(c.entries)-1]
		if last.Epoch <= epoch && last.StartOffset < offset {
			break
		}
		c.entries = c.entries[:len(c.entries)-1]
	}
	if n := len(c.entries); n > 0 && c.entries[n-1].Epoch == epoch {
		return true, c.flush() // epoch started earlier; only newer entries went
	}
	c.entries = append(c.entries, EpochEntry{epoch, offset})
	return true, c.flush()
}

// EndOffsetFor answers OffsetForLeaderEpoch: the largest epoch <= requested
// and the offset where it ended (the start of the next epoch, or logEnd for
// the latest). (-1, -1) when the log has no epoch that old.
func (c *LeaderEpochCache) EndOffsetFor(requested int32, logEnd int64) (int32, int64) {
	for i := len(c.entries) - 1; i >= 0; i-- {
		if c.entries[i].Epoch <= requested {
			if i == len(c.entries)-1 {
				return c.entries[i].Epoch, logEnd
			}
			return c.entries[i].Epoch, c.entries[i+1].StartOffset
		}
	}
	return -1, -1
}

// truncateFromEnd drops epochs that start at or after offset.
func (c *LeaderEpochCache) truncateFromEnd(offset int64) error {
	n := len(c.entries)
	for len(c.entries) > 0 && c.entries[len(c.entries)-1].StartOffset >= offset {
		c.entries = c.entries[:len(c.entries)-1]
	}
	if len(c.entries) == n {
		return nil
	}
	return c.flush()
}

// truncateFromStart moves the history's start to the new log start offset.
func (c *LeaderEpochCache) truncateFromStart(offset int64) error {
	i := 0
	for i+1 < len(c.entries) && c.entries[i+1].StartOffset <= offset {
		i++
	}
	if i == 0 && (len(c.entries) == 0 || c.entries[0].StartOffset >= offset) {
		return nil
	}
	c.entries = c.entries[i:]
	if c.entries[0].StartOffset < offset {
		c.entries[0].StartOffset = offset
	}
	return c.flush()
}

func (c *LeaderEpochCache) flush() error {
	if c.path == "" {
		return nil
	}
	return writeEpochCheckpoint(c.fs, c.path, c.entries)
}

// AssignEpoch records that a new leader epoch starts at the current log end
// (a replica becoming leader does this before its first append, so that
// OffsetForLeaderEpoch for older epochs ends where its leadership began).
func (l *Log) AssignEpoch(epoch int32) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkOpen(); err != nil {
		return err
	}
	_, err := l.epochs.assign(epoch, l.leoLocked())
	return err
}
